//! Transformations (docs/api.md, "Transformations"): an endpoint's `transform`
//! — a jq program, or a chat preset — makes what is sent instead of the
//! envelope. What the receiver gets is that body, signed; `{body, headers,
//! url}` sets more; `null` skips the delivery. A program that fails, or runs
//! over its limits in the sandbox, makes its delivery dead at once
//! (`transform_error`), never a retry storm, and the next delivery goes on. A
//! transform is compiled, and tried on its types' catalog examples, when saved.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, only_delivery, Engine, Receiver, TestApp};

both_engines!(
    a_program_makes_the_body_the_receiver_gets_signed_and_in_order,
    a_program_sets_headers_and_the_url,
    null_skips_a_delivery_without_holding_up_its_key,
    a_failing_program_is_dead_at_once_and_replays_after_the_fix,
    runaway_programs_are_stopped_and_the_next_delivery_goes_on,
    a_transform_is_checked_when_saved,
    a_preset_sends_the_event_as_a_chat_message,
    a_preview_says_what_a_transform_makes_of_an_event,
    a_brokers_message_is_the_transformed_body,
    a_sandbox_that_cannot_start_is_retried_not_blamed_on_the_program,
);

/// The body the receiver got verifies against the endpoint's secret with
/// the official `standardwebhooks` crate.
fn verify(endpoint: &Value, request: &crate::helpers::Received) {
    standardwebhooks::Webhook::new(endpoint["secret"].as_str().unwrap())
        .unwrap()
        .verify(&request.body, &request.headers)
        .expect("the transformed body's signature verifies");
}

/// A catalog type `name` with `example` (a transform is tried on it when saved).
async fn catalog_type(app: &TestApp, name: &str, example: Value) {
    let body = json!({"name": name, "description": "Paid.", "example": example});
    app.call(Method::POST, "/v1/event-types", Some(&body), 201)
        .await;
}

/// The problem an endpoint `body` is refused with: `status` and `code`
/// asserted; the problem returned for its detail.
async fn refused(app: &TestApp, app_id: &str, body: Value, status: u16, code: &str) -> Value {
    let path = format!("/v1/apps/{app_id}/endpoints");
    let problem = app.call(Method::POST, &path, Some(&body), status).await;
    assert_eq!(problem["code"], code, "{problem}");
    problem
}

/// `GET …/attempts/{attempt}` of a delivery's only attempt.
async fn only_attempt(app: &TestApp, app_id: &str, delivery: &str) -> Value {
    let attempts = app.attempts(app_id, delivery).await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    app.get(&format!(
        "/v1/apps/{app_id}/attempts/{}",
        attempts[0]["id"].as_str().unwrap()
    ))
    .await
}

async fn publish_ordered(app: &TestApp, app_id: &str, key: &str, payload: Value) -> Value {
    app.call(
        Method::POST,
        &format!("/v1/apps/{app_id}/events"),
        Some(&json!({"event_type": "order.paid", "payload": payload, "ordering_key": key})),
        202,
    )
    .await
}

async fn a_program_makes_the_body_the_receiver_gets_signed_and_in_order(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let program = r#"{text: "\(.event_type) #\(.payload.id) for \(.endpoint.description)", event: .event_id, at: .timestamp}"#;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"transform": program, "description": "Orders"}),
        )
        .await;
    assert_eq!(endpoint["transform"], program);

    let mut published = Vec::new();
    for id in 1..=4 {
        published.push(publish_ordered(&app, &app_id, "order_7", json!({"id": id})).await);
    }
    let requests = receiver.wait_for_requests(4).await;
    for (n, (request, event)) in requests.iter().zip(&published).enumerate() {
        verify(&endpoint, request);
        assert_eq!(request.header("webhook-id"), event["id"]);
        assert_eq!(request.header("hookline-ordering-key"), "order_7");
        let body = request.json();
        assert_eq!(body["text"], format!("order.paid #{} for Orders", n + 1));
        assert_eq!(body["event"], event["id"]);
        assert!(body["at"].is_string(), "{body}");
    }
    // The attempt log shows the body as sent, not the envelope.
    let delivery = only_delivery(&published[0]);
    app.wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;
    let attempt = only_attempt(&app, &app_id, &delivery).await;
    assert_eq!(
        attempt["request_body"].as_str().unwrap().as_bytes(),
        &requests[0].body[..]
    );
}

async fn a_program_sets_headers_and_the_url(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let (listed, chosen) = (Receiver::start().await, Receiver::start().await);
    let app_id = app.create_app().await;
    let program = format!(
        r#"{{body: {{order: .payload.id}}, headers: {{"X-Order": (.payload.id | tostring), "X-Tenant": "from-transform"}}, url: "{}"}}"#,
        chosen.url
    );
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &listed.url,
            json!({"transform": program, "headers": {"X-Tenant": "from-endpoint", "X-Static": "kept"}}),
        )
        .await;
    let published = app.publish(&app_id, "order.paid", json!({"id": 42})).await;
    let request = chosen.wait_for_requests(1).await.remove(0);
    verify(&endpoint, &request);
    assert_eq!(request.json(), json!({"order": 42}));
    assert_eq!(request.header("x-order"), "42");
    // The transform's header wins over the endpoint's of the same name.
    assert_eq!(request.header("x-tenant"), "from-transform");
    assert_eq!(request.header("x-static"), "kept");
    let delivery = only_delivery(&published);
    app.wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;
    assert!(
        listed.requests().is_empty(),
        "the endpoint's own URL got a request"
    );
    let attempt = only_attempt(&app, &app_id, &delivery).await;
    assert_eq!(attempt["url"], chosen.url.as_str());
    assert_eq!(attempt["request_headers"]["x-order"], "…");
    assert_eq!(attempt["request_body"], r#"{"order":42}"#);
}

async fn null_skips_a_delivery_without_holding_up_its_key(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"transform": "if .payload.internal then null else .payload end"}),
        )
        .await;
    let skipped = publish_ordered(&app, &app_id, "k", json!({"n": 1, "internal": true})).await;
    let sent = publish_ordered(&app, &app_id, "k", json!({"n": 2})).await;
    let request = receiver.wait_for_requests(1).await.remove(0);
    assert_eq!(request.json(), json!({"n": 2}));
    assert_eq!(request.header("webhook-id"), sent["id"]);

    let delivery = app
        .wait_for_delivery_state(&app_id, &only_delivery(&skipped), "succeeded")
        .await;
    assert_eq!(delivery["explanation"]["code"], "skipped");
    let attempt = only_attempt(&app, &app_id, &only_delivery(&skipped)).await;
    assert_eq!(attempt["explanation"]["code"], "skipped");
    assert!(attempt["request_body"].is_null(), "{attempt}");
    assert!(attempt["request_headers"].as_object().unwrap().is_empty());
    assert_eq!(receiver.requests().len(), 1);
    // Counted as a filter's drop is.
    let stats = app
        .get(&format!(
            "/v1/apps/{app_id}/endpoints/{}/stats",
            endpoint["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stats["windows"]["hour"]["filtered"], 1, "{stats}");
}

async fn a_failing_program_is_dead_at_once_and_replays_after_the_fix(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"transform": r#"{total: (.payload.amount / .payload.count)}"#}),
        )
        .await;
    let published = app
        .publish(&app_id, "order.paid", json!({"amount": 10, "count": "two"}))
        .await;
    let delivery = only_delivery(&published);
    let dead = app
        .wait_for_delivery_state(&app_id, &delivery, "dead")
        .await;
    assert_eq!(dead["dead_reason"], "transform_error");
    assert_eq!(dead["attempts"], 1);
    assert_eq!(dead["explanation"]["code"], "transform_error");
    assert_eq!(dead["explanation"]["action"], "fix_then_replay");
    let attempt = only_attempt(&app, &app_id, &delivery).await;
    let said = attempt["response_body"].as_str().unwrap();
    assert!(
        said.starts_with("the endpoint's transform failed: "),
        "{said}"
    );
    assert!(said.contains("cannot"), "{said}");
    let dlq = app.get(&format!("/v1/apps/{app_id}/dlq")).await;
    assert_eq!(dlq["data"][0]["id"], delivery.as_str());
    assert!(receiver.requests().is_empty());

    // Fixed, then replayed: delivered, transformed by the new program.
    app.call(
        Method::PATCH,
        &format!(
            "/v1/apps/{app_id}/endpoints/{}",
            endpoint["id"].as_str().unwrap()
        ),
        Some(&json!({"transform": "{count: .payload.count}"})),
        200,
    )
    .await;
    app.replay_until_succeeded(&app_id, &delivery).await;
    let request = receiver.wait_for_requests(1).await.remove(0);
    verify(&endpoint, &request);
    assert_eq!(request.json(), json!({"count": "two"}));
    // A new event is sent with the new program too (a publish's snapshot of
    // the endpoint follows the change), and without one after it is removed.
    app.publish(
        &app_id,
        "order.paid",
        json!({"amount": 1, "count": "three"}),
    )
    .await;
    let request = receiver.wait_for_requests(2).await.remove(1);
    assert_eq!(request.json(), json!({"count": "three"}));
    app.call(
        Method::PATCH,
        &format!(
            "/v1/apps/{app_id}/endpoints/{}",
            endpoint["id"].as_str().unwrap()
        ),
        Some(&json!({"transform": null})),
        200,
    )
    .await;
    app.publish(&app_id, "order.paid", json!({"count": "four"}))
        .await;
    let request = receiver.wait_for_requests(3).await.remove(2);
    assert_eq!(request.json()["data"], json!({"count": "four"}));
}

async fn runaway_programs_are_stopped_and_the_next_delivery_goes_on(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let program = r#"
        if .payload.run == "forever" then last(repeat(1))
        elif .payload.run == "memory" then reduce range(64) as $i ("x"; . + .) | length
        elif .payload.run == "deep" then (def f: [f]; f)
        else .payload end"#;
    app.create_endpoint_with(&app_id, &receiver.url, json!({"transform": program}))
        .await;
    let runaways = [
        ("forever", "ran longer than"),
        ("memory", "ended its worker process"),
        ("deep", "ended its worker process"),
    ];
    for (run, says) in runaways {
        let published = app.publish(&app_id, "job.ran", json!({"run": run})).await;
        let delivery = only_delivery(&published);
        let dead = app
            .wait_for_delivery_state(&app_id, &delivery, "dead")
            .await;
        assert_eq!(
            (run, &dead["dead_reason"]),
            (run, &json!("transform_error"))
        );
        assert_eq!(dead["attempts"], 1, "{run}: retried");
        let attempt = only_attempt(&app, &app_id, &delivery).await;
        let said = attempt["response_body"].as_str().unwrap();
        assert!(said.contains(says), "{run}: {said}");
        if run == "forever" {
            // Stopped at the limit, not whenever.
            let took = attempt["duration_ms"].as_u64().unwrap();
            let limit = hookline_transform::TIME_LIMIT.as_millis() as u64;
            assert!((limit..limit + 5_000).contains(&took), "{run}: {took} ms");
        }
    }
    // The sandbox starts a new worker: the next event goes through.
    let published = app
        .publish(&app_id, "job.ran", json!({"run": "once"}))
        .await;
    app.wait_for_delivery_state(&app_id, &only_delivery(&published), "succeeded")
        .await;
    let requests = receiver.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].json(), json!({"run": "once"}));
}

async fn a_transform_is_checked_when_saved(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let url = receiver.url.as_str();
    // Does not compile: the position is named.
    let problem = refused(
        &app,
        &app_id,
        json!({"url": url, "transform": "{a: .payload\n| nope}"}),
        422,
        "invalid_transform",
    )
    .await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("line 2, column 3") && detail.contains("undefined filter nope"),
        "{detail}"
    );
    // Too long, or empty.
    let long = format!(
        ".a{}",
        " ".repeat(hookline_core::transform::MAX_PROGRAM_BYTES)
    );
    for text in [long.as_str(), "  "] {
        let body = json!({"url": url, "transform": text});
        refused(&app, &app_id, body, 422, "invalid_transform").await;
    }
    // Tried on the catalog example of each of its types: one it fails on is refused.
    catalog_type(&app, "invoice.paid", json!({"amount": 1200})).await;
    let problem = refused(
        &app,
        &app_id,
        json!({
            "url": url,
            "event_types": ["invoice.*"],
            "transform": r#"{cents: (.payload.amount | ascii_downcase)}"#,
        }),
        422,
        "invalid_transform",
    )
    .await;
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("catalog example of invoice.paid"),
        "{detail}"
    );
    // A header Hookline sets is refused as the sender would refuse it.
    let body = json!({
        "url": url,
        "transform": r#"{body: ., headers: {"webhook-id": "forged"}}"#,
    });
    refused(&app, &app_id, body, 422, "invalid_transform").await;
    // Nothing was written.
    let listed = app.get(&format!("/v1/apps/{app_id}/endpoints")).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 0);

    // Set, changed and removed.
    let endpoint = app.create_endpoint(&app_id, url).await;
    assert!(endpoint["transform"].is_null());
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );
    let set = app
        .call(
            Method::PATCH,
            &path,
            Some(&json!({"transform": "{cents: .payload.amount}"})),
            200,
        )
        .await;
    assert_eq!(set["transform"], "{cents: .payload.amount}");
    let response = app
        .request(
            Method::PATCH,
            &path,
            Some(&json!({"transform": "nope("})),
            &[],
        )
        .await;
    assert_eq!(response.status().as_u16(), 422);
    assert_eq!(
        app.get(&path).await["transform"],
        "{cents: .payload.amount}"
    );
    let cleared = app
        .call(Method::PATCH, &path, Some(&json!({"transform": null})), 200)
        .await;
    assert!(cleared["transform"].is_null());
}

async fn a_preset_sends_the_event_as_a_chat_message(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(&app_id, &receiver.url, json!({"transform": "slack"}))
        .await;
    assert_eq!(endpoint["transform"], "slack");
    app.publish(&app_id, "order.paid", json!({"id": 42, "note": "<b>&"}))
        .await;
    let request = receiver.wait_for_requests(1).await.remove(0);
    verify(&endpoint, &request);
    let body = request.json();
    assert_eq!(body["text"], "order.paid");
    let section = body["blocks"][0]["text"]["text"].as_str().unwrap();
    assert!(section.starts_with("*order.paid*\n"), "{section}");
    // The payload, with Slack's markup characters escaped.
    assert!(
        section.contains("\"id\": 42") && section.contains("&lt;b&gt;&amp;"),
        "{section}"
    );
}

async fn a_preview_says_what_a_transform_makes_of_an_event(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let path = format!("/v1/apps/{app_id}/transform-preview");
    let preview = |body: Value| {
        let app = &app;
        let path = &path;
        async move { app.call(Method::POST, path, Some(&body), 200).await }
    };
    let program = r#"if .payload.skip then null elif .payload.fail then error("no \(.payload.fail)") else {body: {order: .payload.id, to: .endpoint.description}, headers: {"x-kind": .event_type}} end"#;

    // Nothing published yet, no type given: there is nothing to try it on.
    let response = app
        .request(
            Method::POST,
            &path,
            Some(&json!({"transform": program})),
            &[],
        )
        .await;
    assert_eq!(response.status().as_u16(), 409);

    // A payload, on a given endpoint.
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            "https://example.com/in",
            json!({"description": "Orders"}),
        )
        .await;
    let sent = preview(json!({
        "transform": program, "event_type": "order.paid", "payload": {"id": 42},
        "endpoint_id": endpoint["id"],
    }))
    .await;
    assert_eq!(sent["outcome"], "send");
    // The body's text as it would be signed, keys in the program's order.
    assert_eq!(sent["body"], r#"{"order":42,"to":"Orders"}"#);
    assert_eq!(sent["headers"], json!({"x-kind": "order.paid"}));
    assert_eq!(sent["input"]["payload"], json!({"id": 42}));
    assert!(sent["event_id"].is_null());

    let skipped = preview(
        json!({"transform": program, "event_type": "order.paid", "payload": {"skip": true}}),
    )
    .await;
    assert_eq!(skipped["outcome"], "skip");
    let failed = preview(
        json!({"transform": program, "event_type": "order.paid", "payload": {"fail": "way"}}),
    )
    .await;
    assert_eq!(failed["outcome"], "error");
    assert!(
        failed["error"].as_str().unwrap().contains("no way"),
        "{failed}"
    );

    // One of the app's events, and by default its latest.
    let published = app
        .publish(&app_id, "order.refunded", json!({"id": 7}))
        .await;
    for body in [
        json!({"transform": program, "event_id": published["id"]}),
        json!({"transform": program}),
    ] {
        let answer = preview(body).await;
        assert_eq!(answer["event_id"], published["id"]);
        assert_eq!(answer["event_type"], "order.refunded");
        let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).unwrap();
        assert_eq!(body["order"], 7);
    }
    // A preset, on the catalog's example.
    catalog_type(&app, "invoice.paid", json!({"amount": 1200})).await;
    let chat = preview(json!({"transform": "discord", "event_type": "invoice.paid"})).await;
    assert_eq!(chat["outcome"], "send");
    let body: Value = serde_json::from_str(chat["body"].as_str().unwrap()).unwrap();
    assert_eq!(body["embeds"][0]["title"], "invoice.paid");
    // A program that does not compile is refused as when saved.
    let response = app
        .request(
            Method::POST,
            &path,
            Some(&json!({"transform": "{", "event_type": "invoice.paid"})),
            &[],
        )
        .await;
    assert_eq!(response.status().as_u16(), 422);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "invalid_transform");
}

async fn a_brokers_message_is_the_transformed_body(engine: Engine) {
    let queue = crate::brokers::Queue::start("transformed").await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    // A broker's message is a body only: a program that sets headers or a URL
    // is refused when saved (tried on the catalog's example).
    catalog_type(&app, "order.paid", json!({"id": 1})).await;
    let body = json!({"url": queue.url, "transform": "{body: ., headers: {\"x-a\": \"b\"}}"});
    refused(&app, &app_id, body, 422, "invalid_transform").await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &queue.url,
            json!({"transform": "{order: .payload.id}"}),
        )
        .await;
    let published = app.publish(&app_id, "order.paid", json!({"id": 42})).await;
    app.wait_for_delivery_state(&app_id, &only_delivery(&published), "succeeded")
        .await;
    let message = crate::helpers::wait_until(Duration::from_secs(10), "the message", || async {
        queue.requests().into_iter().next()
    })
    .await;
    assert_eq!(message.json(), json!({"order": 42}));
    assert_eq!(message.header("webhook-id"), published["id"]);
    verify(&endpoint, &message);
}

async fn a_sandbox_that_cannot_start_is_retried_not_blamed_on_the_program(engine: Engine) {
    // A worker program that is no `hookline`: it exits without a word.
    let app = TestApp::spawn_with(engine, |config| {
        config.transform_worker = Some("/bin/true".into());
    })
    .await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    // A program cannot be checked now: 503, nothing written.
    let body = json!({"url": receiver.url, "transform": "{a: 1}"});
    let problem = refused(&app, &app_id, body, 503, "transforms_unavailable").await;
    assert!(
        problem["detail"].as_str().unwrap().contains("ready"),
        "{problem}"
    );
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"],
        json!([])
    );
    // An endpoint whose program was saved before: its deliveries wait for the
    // sandbox (retried), neither dead nor charged to the receiver's breaker.
    let endpoint = app
        .store()
        .endpoints()
        .create_endpoint(
            &hookline_core::ids::AppId::parse(&app_id).unwrap(),
            hookline_store::NewEndpoint {
                transform: Some(hookline_core::transform::Transform::parse("{a: 1}")),
                ..crate::helpers::new_endpoint(&receiver.url, None)
            },
            hookline_core::time::Timestamp::from_millis(0),
        )
        .await
        .unwrap();
    let published = app.publish(&app_id, "order.paid", json!({"id": 1})).await;
    let delivery = only_delivery(&published);
    let attempts = crate::helpers::wait_until(Duration::from_secs(30), "two attempts", || async {
        let attempts = app.attempts(&app_id, &delivery).await;
        (attempts.len() >= 2).then_some(attempts)
    })
    .await;
    for attempt in &attempts[..2] {
        assert_eq!(attempt["verdict"], "retry", "{attempt}");
        let said = attempt["error_message"].as_str().unwrap();
        assert!(said.contains("transform sandbox is unavailable"), "{said}");
    }
    let health = app
        .get(&format!(
            "/v1/apps/{app_id}/endpoints/{}/health",
            endpoint.id
        ))
        .await;
    assert_eq!(
        (&health["breaker"], &health["consecutive_failures"]),
        (&json!("closed"), &json!(0)),
        "{health}"
    );
    assert!(receiver.requests().is_empty());
}
