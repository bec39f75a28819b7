//! Polling endpoints (docs/api.md, "Polling endpoints"): an endpoint whose URL
//! is `poll:` is sent nothing. Its deliveries wait, parked, for its receiver,
//! which fetches them by sequence number — signed as pushes are, waiting for
//! the next one if asked — with a key that can do only that, and commits what
//! it handled; what it never commits is dead-lettered after the endpoint's
//! max age, as a push that kept failing is.

use std::sync::Arc;
use std::time::Duration;

use hookline_core::time::{Clock, ManualClock, SystemClock};
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, only_delivery, wait_until, Engine, TestApp};

both_engines!(
    a_polling_endpoint_is_fetched_signed_and_committed,
    a_fetch_waits_for_the_next_number,
    uncommitted_deliveries_are_dead_after_the_endpoints_max_age,
    a_polling_endpoint_is_refused_what_it_cannot_use,
);

/// A key of `app` that can only fetch and commit messages.
async fn messages_key(app: &TestApp, app_id: &str) -> String {
    let made = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&json!({"name": "receiver", "app": app_id, "capabilities": ["messages"]})),
            201,
        )
        .await;
    made["key"].as_str().unwrap().to_owned()
}

/// `GET …/messages?{query}` with `key`, answered 200.
async fn fetch(app: &TestApp, key: &str, app_id: &str, endpoint: &str, query: &str) -> Value {
    let response = app
        .http
        .get(format!(
            "{}/v1/apps/{app_id}/endpoints/{endpoint}/messages?{query}",
            app.base
        ))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

/// `POST …/messages/commit {cursor}` with `key`: the answer, its status asserted.
async fn commit(
    app: &TestApp,
    key: &str,
    app_id: &str,
    endpoint: &str,
    cursor: u64,
    status: u16,
) -> Value {
    let response = app
        .http
        .post(format!(
            "{}/v1/apps/{app_id}/endpoints/{endpoint}/messages/commit",
            app.base
        ))
        .bearer_auth(key)
        .json(&json!({"cursor": cursor}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), status);
    response.json().await.unwrap()
}

fn verify(secret: &str, message: &Value) {
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(
            message["body"].as_str().unwrap().as_bytes(),
            &crate::helpers::header_map(&message["headers"]),
        )
        .expect("a fetched message verifies");
}

async fn delivery(app: &TestApp, app_id: &str, event: &Value) -> Value {
    app.get(&format!(
        "/v1/apps/{app_id}/deliveries/{}",
        only_delivery(event)
    ))
    .await
}

async fn a_polling_endpoint_is_fetched_signed_and_committed(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, "poll:").await;
    assert_eq!(endpoint["url"], "poll:");
    let (id, secret) = (
        endpoint["id"].as_str().unwrap(),
        endpoint["secret"].as_str().unwrap(),
    );
    let mut events = Vec::new();
    for n in 1..=3 {
        events.push(app.publish(&app_id, "order.paid", json!({"n": n})).await);
    }
    // Nothing is sent: each waits for the receiver, and says so.
    for event in &events {
        let waiting = delivery(&app, &app_id, event).await;
        assert_eq!(waiting["state"], "pending", "{waiting}");
        assert_eq!(waiting["attempts"], 0);
        assert_eq!(
            waiting["explanation"]["code"], "awaiting_fetch",
            "{waiting}"
        );
    }

    // The receiver's key fetches them, in order, signed.
    let key = messages_key(&app, &app_id).await;
    let fetched = fetch(&app, &key, &app_id, id, "from_seq=1").await;
    assert_eq!(fetched["last_seq"], 3);
    let messages = fetched["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    for (n, message) in (1..=3).zip(messages) {
        assert_eq!(message["seq"], n);
        assert_eq!(message["state"], "pending");
        verify(secret, message);
        let body: Value = serde_json::from_str(message["body"].as_str().unwrap()).unwrap();
        assert_eq!(
            (body["seq"].clone(), body["data"]["n"].clone()),
            (json!(n), json!(n))
        );
    }
    // That key does nothing else.
    let listing = app
        .http
        .get(format!("{}/v1/apps/{app_id}/deliveries", app.base))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(listing.status(), 403);

    // It commits the first two: delivered; the third waits on.
    let committed = commit(&app, &key, &app_id, id, 2, 200).await;
    assert_eq!(
        (
            &committed["committed_seq"],
            &committed["delivered"],
            &committed["last_seq"]
        ),
        (&json!(2), &json!(2), &json!(3))
    );
    for (event, state) in events.iter().zip(["succeeded", "succeeded", "pending"]) {
        assert_eq!(delivery(&app, &app_id, event).await["state"], state);
    }
    let health = app
        .get(&format!("/v1/apps/{app_id}/endpoints/{id}/health"))
        .await;
    assert_eq!(
        (
            &health["polling"]["committed_seq"],
            &health["polling"]["waiting"]
        ),
        (&json!(2), &json!(1)),
        "{health}"
    );
    // Again, or below it: nothing changes; past the last number: 409.
    let again = commit(&app, &key, &app_id, id, 1, 200).await;
    assert_eq!(
        (&again["committed_seq"], &again["delivered"]),
        (&json!(2), &json!(0))
    );
    let past = commit(&app, &key, &app_id, id, 9, 409).await;
    assert_eq!(past["code"], "conflict");
    let states: Vec<Value> = fetch(&app, &key, &app_id, id, "from_seq=1").await["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["state"].clone())
        .collect();
    assert_eq!(
        states,
        [json!("succeeded"), json!("succeeded"), json!("pending")]
    );
    // A consumer reads past its cursor, so many at a time: after=2 is the
    // third alone; after=0&limit=2 the first two, and where the rest begins.
    let past_cursor = fetch(&app, &key, &app_id, id, "after=2").await;
    let seqs = |page: &Value| -> Vec<u64> {
        page["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["seq"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(seqs(&past_cursor), [3]);
    let limited = fetch(&app, &key, &app_id, id, "after=0&limit=2").await;
    assert_eq!(seqs(&limited), [1, 2]);
    assert_eq!(limited["next_seq"], 3);
    for bad in ["limit=0", "limit=101", "after=9223372036854775807"] {
        let refused = app
            .http
            .get(format!(
                "{}/v1/apps/{app_id}/endpoints/{id}/messages?{bad}",
                app.base
            ))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 400, "{bad}");
    }
    // Paused and resumed, it moves nothing: the third still waits for the
    // receiver, and is not sent again on request either.
    for paused in [true, false] {
        app.call(
            Method::PATCH,
            &format!("/v1/apps/{app_id}/endpoints/{id}"),
            Some(&json!({"paused": paused})),
            200,
        )
        .await;
    }
    let third = delivery(&app, &app_id, &events[2]).await;
    assert_eq!(third["explanation"]["code"], "awaiting_fetch", "{third}");
    for again in ["replay", "resend"] {
        let refused = app
            .call(
                Method::POST,
                &format!(
                    "/v1/apps/{app_id}/deliveries/{}/{again}",
                    third["id"].as_str().unwrap()
                ),
                None,
                409,
            )
            .await;
        assert_eq!(refused["code"], "conflict", "{again}: {refused}");
    }
    let last = commit(&app, &key, &app_id, id, 3, 200).await;
    assert_eq!(
        (&last["committed_seq"], &last["delivered"]),
        (&json!(3), &json!(1))
    );
    assert_eq!(
        delivery(&app, &app_id, &events[2]).await["state"],
        "succeeded"
    );
}

async fn a_fetch_waits_for_the_next_number(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, "poll:").await;
    let id = endpoint["id"].as_str().unwrap().to_owned();
    let key = messages_key(&app, &app_id).await;
    // Nothing yet: a short wait answers empty.
    let empty = fetch(&app, &key, &app_id, &id, "from_seq=1&wait_secs=1").await;
    assert_eq!(empty["messages"], json!([]));
    // A long one answers with the number made while it waited.
    let waiting = {
        let (app_base, key, app_id, id) =
            (app.base.clone(), key.clone(), app_id.clone(), id.clone());
        let http = app.http.clone();
        tokio::spawn(async move {
            http.get(format!(
                "{app_base}/v1/apps/{app_id}/endpoints/{id}/messages?from_seq=1&wait_secs=20"
            ))
            .bearer_auth(key)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
        })
    };
    let event = app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let answer = waiting.await.unwrap();
    assert_eq!(answer["messages"].as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(answer["messages"][0]["event_id"], event["id"]);
    // Too long a wait is refused.
    let refused = app
        .http
        .get(format!(
            "{}/v1/apps/{app_id}/endpoints/{id}/messages?wait_secs=31",
            app.base
        ))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
}

async fn uncommitted_deliveries_are_dead_after_the_endpoints_max_age(engine: Engine) {
    let start = SystemClock.now();
    let clock = Arc::new(ManualClock::new(start));
    let app = TestApp::spawn_on_clock(engine, clock.clone(), |_| {}).await;
    let server = app.server.as_ref().unwrap();
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(&app_id, "poll:", json!({"retry": {"max_age_secs": 7200}}))
        .await;
    let id = endpoint["id"].as_str().unwrap();
    let event = app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let hour = Duration::from_secs(3600);

    // A retention pass an hour on: younger than its max age, it waits on.
    let at = start + hour + Duration::from_secs(60);
    clock.set(at);
    wait_until(
        Duration::from_secs(30),
        "a retention pass an hour on",
        || async { (server.last_retention() == Some(at)).then_some(()) },
    )
    .await;
    assert_eq!(delivery(&app, &app_id, &event).await["state"], "pending");

    // Past it: dead, as a delivery whose retries ran out is, and in the DLQ.
    clock.set(start + hour * 3);
    let dead = wait_until(
        Duration::from_secs(30),
        "the expired delivery dead",
        || async {
            let now = delivery(&app, &app_id, &event).await;
            (now["state"] == "dead").then_some(now)
        },
    )
    .await;
    assert_eq!(dead["dead_reason"], "retries_exhausted");
    let dlq = app
        .get(&format!("/v1/apps/{app_id}/dlq?endpoint_id={id}"))
        .await;
    assert_eq!(dlq["data"][0]["id"], dead["id"], "{dlq}");
    let key = messages_key(&app, &app_id).await;
    let fetched = fetch(&app, &key, &app_id, id, "from_seq=1").await;
    assert_eq!(fetched["messages"][0]["state"], "dead");
}

async fn a_polling_endpoint_is_refused_what_it_cannot_use(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = crate::helpers::Receiver::start().await;
    let app_id = app.create_app().await;
    let path = format!("/v1/apps/{app_id}/endpoints");
    // A transform would never run.
    let refused = app
        .call(
            Method::POST,
            &path,
            Some(&json!({"url": "poll:", "transform": "slack"})),
            409,
        )
        .await;
    assert!(
        refused["detail"].as_str().unwrap().contains("transform"),
        "{refused}"
    );
    // It does not turn into a pushed endpoint, nor a pushed one into it.
    let polled = app.create_endpoint(&app_id, "poll:").await;
    let pushed = app.create_endpoint(&app_id, &receiver.url).await;
    for (endpoint, url) in [(&polled, receiver.url.as_str()), (&pushed, "poll:")] {
        let changed = app
            .call(
                Method::PATCH,
                &format!("{path}/{}", endpoint["id"].as_str().unwrap()),
                Some(&json!({"url": url})),
                409,
            )
            .await;
        assert_eq!(changed["code"], "conflict");
    }
    // Only a polling endpoint's receiver commits.
    let key = messages_key(&app, &app_id).await;
    let pushed_id = pushed["id"].as_str().unwrap();
    app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let not_polled = commit(&app, &key, &app_id, pushed_id, 0, 409).await;
    assert_eq!(not_polled["code"], "conflict");
}
