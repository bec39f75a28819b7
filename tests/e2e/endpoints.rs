//! What an endpoint's owner controls: rotating its secret with a grace period,
//! headers sent with every request, and pausing it without losing anything.

use std::time::{Duration, SystemTime};

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, wait_until, Engine, Receiver, Reply, TestApp};

both_engines!(
    a_rotated_secret_signs_beside_the_old_one_until_the_grace_ends,
    custom_headers_are_sent_and_hooklines_own_are_refused,
    a_paused_endpoint_holds_new_deliveries_until_it_is_resumed,
    an_attempt_shows_what_was_sent_and_what_came_back,
    a_breaker_probe_is_marked_as_one,
);

/// Whether a Standard Webhooks verifier (the `standardwebhooks` crate) with
/// `secret` accepts a request.
fn verifies(secret: &str, request: &crate::helpers::Received) -> bool {
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(&request.body, &request.headers)
        .is_ok()
}

async fn a_rotated_secret_signs_beside_the_old_one_until_the_grace_ends(engine: Engine) {
    let receiver = Receiver::start().await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let old = endpoint["secret"].as_str().unwrap().to_owned();
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );

    let rotated = app
        .call(
            Method::POST,
            &format!("{path}/secret/rotate"),
            Some(&json!({"grace_secs": 2})),
            200,
        )
        .await;
    let new = rotated["key"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(new.starts_with("whsec_"));
    assert_eq!(app.get(&format!("{path}/secret")).await["key"], new);
    let until = rotated["previous_valid_until"].as_str().unwrap().to_owned();
    assert_eq!(
        app.get(&path).await["previous_secret_valid_until"],
        until,
        "the endpoint says how long the old secret still signs"
    );

    app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let during = receiver.wait_for_requests(1).await;
    assert!(
        verifies(&old, &during[0]),
        "the old secret verifies during the grace"
    );
    assert!(
        verifies(&new, &during[0]),
        "the new secret verifies during the grace"
    );
    assert_eq!(during[0].header("webhook-signature").split(' ').count(), 2);

    // Attempts are stamped in whole seconds: past the grace's end plus one, an
    // attempt's stamp is past it too.
    let end = humantime::parse_rfc3339(&until).unwrap() + Duration::from_secs(1);
    wait_until(Duration::from_secs(10), "the grace to end", || async {
        (SystemTime::now() >= end).then_some(())
    })
    .await;
    app.publish(&app_id, "order.paid", json!({"n": 2})).await;
    let after = receiver.wait_for_requests(2).await;
    assert!(verifies(&new, &after[1]), "the new secret verifies");
    assert!(!verifies(&old, &after[1]), "the old secret no longer does");

    // Bad rotations change nothing: malformed ones are 422, the current
    // secret again is a conflict with the endpoint's state (409).
    for (body, status) in [
        (json!({"key": "not-a-secret"}), 422),
        (json!({"grace_secs": 8 * 86_400}), 422),
        (json!({"key": new}), 409),
    ] {
        app.call(
            Method::POST,
            &format!("{path}/secret/rotate"),
            Some(&body),
            status,
        )
        .await;
    }
    assert_eq!(app.get(&format!("{path}/secret")).await["key"], new);
}

async fn custom_headers_are_sent_and_hooklines_own_are_refused(engine: Engine) {
    let receiver = Receiver::start().await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"headers": {"X-Tenant": "acme", "Authorization": "Bearer gateway-token"}}),
        )
        .await;
    assert_eq!(
        endpoint["headers"],
        json!({"authorization": "Bearer gateway-token", "x-tenant": "acme"})
    );
    app.publish(&app_id, "order.paid", json!({})).await;
    let got = receiver.wait_for_requests(1).await;
    assert_eq!(got[0].header("x-tenant"), "acme");
    // A key that may not read secrets sees the names, not the values (a
    // gateway token is a secret), in the endpoint and in its attempts.
    let reader = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&json!({"name": "ro", "app": app_id, "capabilities": ["read"]})),
            201,
        )
        .await["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let as_reader = |path: String| {
        let request = app
            .http
            .get(format!("{}{path}", app.base))
            .bearer_auth(reader.clone());
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    };
    let seen = as_reader(format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    ))
    .await;
    assert_eq!(
        seen["headers"],
        json!({"authorization": "…", "x-tenant": "…"})
    );
    // The attempt is recorded once its answer is in: wait for it.
    let attempts_path = format!(
        "/v1/apps/{app_id}/endpoints/{}/attempts",
        endpoint["id"].as_str().unwrap()
    );
    let listed = wait_until(Duration::from_secs(30), "the attempt's record", || async {
        let page = as_reader(attempts_path.clone()).await;
        (!page["data"].as_array().unwrap().is_empty()).then_some(page)
    })
    .await;
    let sent = &listed["data"][0]["request_headers"];
    assert_eq!(
        (sent["authorization"].clone(), sent["webhook-id"].clone()),
        (json!("…"), got[0].header("webhook-id").into())
    );
    assert_eq!(got[0].header("authorization"), "Bearer gateway-token");
    assert!(verifies(endpoint["secret"].as_str().unwrap(), &got[0]));

    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );
    for refused in [
        json!({"webhook-signature": "v1,forged"}),
        json!({"Webhook-Id": "x"}),
        json!({"Transfer-Encoding": "chunked"}),
        json!({"Connection": "close"}),
        json!({"Host": "elsewhere"}),
        json!({"hookline-sequence": "1"}),
        json!({"X Bad": "x"}),
        json!({"X-Split": "a\r\nX-Injected: 1"}),
    ] {
        let answer = app
            .call(
                Method::PATCH,
                &path,
                Some(&json!({ "headers": refused })),
                422,
            )
            .await;
        assert_eq!(answer["code"], "validation_failed", "{refused}");
    }
    // PATCH replaces the set; `{}` removes them all.
    let changed = app
        .call(
            Method::PATCH,
            &path,
            Some(&json!({"headers": {"X-Tenant": "globex"}})),
            200,
        )
        .await;
    assert_eq!(changed["headers"], json!({"x-tenant": "globex"}));
    app.publish(&app_id, "order.paid", json!({})).await;
    assert_eq!(
        receiver.wait_for_requests(2).await[1].header("x-tenant"),
        "globex"
    );
    let cleared = app
        .call(Method::PATCH, &path, Some(&json!({"headers": {}})), 200)
        .await;
    assert_eq!(cleared["headers"], json!({}));
}

async fn a_paused_endpoint_holds_new_deliveries_until_it_is_resumed(engine: Engine) {
    let receiver = Receiver::start().await;
    receiver.answer_always(Reply::status(200));
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );
    let paused = app
        .call(Method::PATCH, &path, Some(&json!({"paused": true})), 200)
        .await;
    assert_eq!(
        (paused["paused"].clone(), paused["enabled"].clone()),
        (json!(true), json!(true))
    );

    // A paused endpoint still gets its deliveries (a disabled one would not), parked.
    let mut held: Vec<String> = Vec::new();
    for n in 0..3 {
        let published = app.publish(&app_id, "order.paid", json!({ "n": n })).await;
        assert_eq!(published["deliveries"].as_array().unwrap().len(), 1);
        held.push(
            published["deliveries"][0]["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    for delivery in &held {
        let view = app
            .get(&format!("/v1/apps/{app_id}/deliveries/{delivery}"))
            .await;
        assert_eq!(
            (view["state"].clone(), view["parked"].clone()),
            (json!("pending"), json!(true)),
            "{view}"
        );
        assert_eq!(
            (&view["explanation"]["code"], &view["explanation"]["action"]),
            (&json!("endpoint_paused"), &json!("resume")),
            "{view}"
        );
    }
    let parked: Value = app
        .get(&format!("/v1/apps/{app_id}/deliveries?state=parked"))
        .await;
    assert_eq!(parked["data"].as_array().unwrap().len(), 3);
    assert!(
        receiver.requests().is_empty(),
        "nothing is sent while paused"
    );

    app.call(Method::PATCH, &path, Some(&json!({"paused": false})), 200)
        .await;
    let got = receiver.wait_for_requests(3).await;
    let mut numbers: Vec<i64> = got
        .iter()
        .map(|r| r.json()["data"]["n"].as_i64().unwrap())
        .collect();
    numbers.sort_unstable();
    assert_eq!(
        numbers,
        vec![0, 1, 2],
        "each held delivery once, after the resume"
    );
    for delivery in &held {
        app.wait_for_delivery_state(&app_id, delivery, "succeeded")
            .await;
    }
}

/// Attempt detail: the URL, the request headers exactly as the receiver got
/// them, the response's status, headers and (cut) body, and what triggered it.
async fn an_attempt_shows_what_was_sent_and_what_came_back(engine: Engine) {
    let receiver = Receiver::start().await;
    let big = vec![b'x'; 70_000];
    receiver.script([
        Reply::status(503).header("x-upstream", "down").body(&big),
        Reply::status(200).header("x-request-id", "r-2"),
    ]);
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    app.create_endpoint_with(
        &app_id,
        &receiver.url,
        json!({"headers": {"X-Tenant": "acme"}}),
    )
    .await;
    let published = app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let delivery = published["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;
    let got = receiver.wait_for_requests(2).await;
    let attempts = app.attempts(&app_id, &delivery).await;
    assert_eq!(attempts.len(), 2);

    for (attempt, request) in attempts.iter().zip(&got) {
        assert_eq!(attempt["url"], receiver.url.as_str());
        let sent = attempt["request_headers"].as_object().unwrap();
        for name in [
            "webhook-id",
            "webhook-timestamp",
            "webhook-signature",
            "content-type",
        ] {
            assert_eq!(
                sent[name],
                request.header(name),
                "{name}: as the receiver got it"
            );
        }
        // The endpoint's own headers are sent, and kept by name only.
        assert_eq!(request.header("x-tenant"), "acme");
        assert_eq!(sent["x-tenant"], "…", "a custom header's value is not kept");
        assert_eq!(sent["webhook-id"], published["id"]);
        assert!(
            !attempt.to_string().contains("whsec_"),
            "no secret material"
        );
        // The single view is the listed one, with the body as sent.
        let mut one = app
            .get(&format!(
                "/v1/apps/{app_id}/attempts/{}",
                attempt["id"].as_str().unwrap()
            ))
            .await;
        let body = one
            .as_object_mut()
            .unwrap()
            .remove("request_body")
            .expect("the single view carries the body");
        assert_eq!(body.as_str().unwrap().as_bytes(), &request.body[..]);
        assert_eq!(&one, attempt);
    }
    let (failed, delivered) = (&attempts[0], &attempts[1]);
    assert_eq!(failed["trigger"], "first");
    assert_eq!(failed["status_code"], 503);
    assert_eq!(failed["verdict"], "retry");
    assert!(failed["next_attempt_at"].is_string());
    assert_eq!(failed["response_headers"]["x-upstream"], "down");
    assert_eq!(failed["response_body_truncated"], true);
    assert_eq!(failed["response_body"].as_str().unwrap().len(), 64 * 1024);
    assert_eq!(delivered["trigger"], "retry");
    assert_eq!(delivered["status_code"], 200);
    assert_eq!(delivered["response_headers"]["x-request-id"], "r-2");
    assert_eq!(delivered["response_body_truncated"], false);

    // A resend starts a round: its first attempt says so.
    app.call(
        Method::POST,
        &format!("/v1/apps/{app_id}/deliveries/{delivery}/resend"),
        None,
        202,
    )
    .await;
    receiver.wait_for_requests(3).await;
    let resent = wait_until(Duration::from_secs(30), "the resend's attempt", || async {
        let attempts = app.attempts(&app_id, &delivery).await;
        (attempts.len() == 3).then(|| attempts[2].clone())
    })
    .await;
    assert_eq!(resent["trigger"], "replay");
    assert_eq!(resent["attempt_number"], 1);

    let unknown = app
        .request(
            Method::GET,
            &format!("/v1/apps/{app_id}/attempts/atm_01J00000000000000000000000"),
            None,
            &[],
        )
        .await;
    assert_eq!(unknown.status(), 404);
}

/// With a breaker that opens on the first failure, the next attempt is its probe.
async fn a_breaker_probe_is_marked_as_one(engine: Engine) {
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(503), Reply::status(200)]);
    let app = TestApp::spawn_with(engine, |c| {
        c.breaker_failure_threshold = 1;
        c.breaker_cooldown_ms = 100;
    })
    .await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let published = app.publish(&app_id, "order.paid", json!({})).await;
    let delivery = published["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;
    let triggers: Vec<Value> = app
        .attempts(&app_id, &delivery)
        .await
        .iter()
        .map(|a| a["trigger"].clone())
        .collect();
    assert_eq!(triggers, vec![json!("first"), json!("probe")]);
}
