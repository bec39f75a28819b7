//! Batching (docs/api.md, "Batching"): an HTTP endpoint with `batch` gets up
//! to `max_events` of its deliveries in one signed request, a JSON array of
//! their numbered envelopes each carrying its event's id, at most
//! `max_wait_ms` after the first was ready. The batch succeeds or fails as
//! one; each member's attempt records the request; ordering keys keep their
//! order across batches.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, raw, wait_until, Engine, Received, Receiver, Reply, TestApp};

both_engines!(
    events_arrive_in_signed_batches_and_each_attempt_records_its_request,
    a_batch_waits_for_company_no_longer_than_its_wait,
    a_failed_batch_is_retried_whole_and_a_refused_one_dead_letters_every_member,
    ordered_keys_stay_in_order_across_batches,
    a_stopping_dispatcher_sends_what_it_gathered_at_once,
    batching_is_refused_where_one_request_cannot_carry_many,
);

/// A request's elements (it must be a JSON array).
fn elements(request: &Received) -> Vec<Value> {
    request
        .json()
        .as_array()
        .unwrap_or_else(|| panic!("a batch is an array: {}", request.json()))
        .clone()
}

/// Waits until the receiver's requests carry `count` elements in all.
async fn wait_for_elements(receiver: &Receiver, count: usize) -> Vec<Received> {
    wait_until(
        Duration::from_secs(30),
        &format!("{count} batched deliveries"),
        || async {
            let requests = receiver.requests();
            let got: usize = requests.iter().map(|r| elements(r).len()).sum();
            assert!(got <= count, "more than {count} deliveries arrived");
            (got == count).then_some(requests)
        },
    )
    .await
}

/// The request verifies against the endpoint's secret with the official
/// `standardwebhooks` crate, under the batch's id.
fn verify(secret: &str, request: &Received) {
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(&request.body, &request.headers)
        .expect("the batch's signature verifies");
    assert!(request.header("webhook-id").starts_with("bat_"));
    assert_eq!(
        request.header("hookline-batch-size"),
        elements(request).len().to_string()
    );
}

/// Each published event's delivery id, by event id.
fn deliveries_by_event(answer: &Value) -> BTreeMap<String, String> {
    answer["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|event| {
            (
                event["id"].as_str().unwrap().to_owned(),
                event["deliveries"][0]["id"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

async fn publish_many(app: &TestApp, app_id: &str, count: usize) -> BTreeMap<String, String> {
    let events = (0..count)
        .map(|n| json!({"event_type": "order.paid", "payload": {"n": n}}))
        .collect();
    deliveries_by_event(&app.publish_batch(app_id, events).await)
}

/// A receiver, an app, and an endpoint at the receiver that batches up to
/// `max_events` within `max_wait_ms`.
async fn batching(app: &TestApp, max_events: u32, max_wait_ms: u32) -> (Receiver, String, Value) {
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"batch": {"max_events": max_events, "max_wait_ms": max_wait_ms}}),
        )
        .await;
    (receiver, app_id, endpoint)
}

async fn events_arrive_in_signed_batches_and_each_attempt_records_its_request(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let (receiver, app_id, endpoint) = batching(&app, 4, 300).await;
    assert_eq!(
        endpoint["batch"],
        json!({"max_events": 4, "max_wait_ms": 300})
    );
    let secret = endpoint["secret"].as_str().unwrap();
    let deliveries = publish_many(&app, &app_id, 10).await;

    let requests = wait_for_elements(&receiver, 10).await;
    let mut seqs = Vec::new();
    let mut seen = BTreeSet::new();
    for request in &requests {
        verify(secret, request);
        let elements = elements(request);
        assert!(
            (1..=4).contains(&elements.len()),
            "{} elements",
            elements.len()
        );
        for element in &elements {
            // Each element is the numbered envelope with its event's id first.
            let keys: Vec<&String> = element.as_object().unwrap().keys().collect();
            assert_eq!(keys.len(), 5, "{element}");
            assert_eq!(element["type"], "order.paid");
            assert!(element["data"]["n"].is_u64());
            let id = element["id"].as_str().unwrap().to_owned();
            assert!(deliveries.contains_key(&id), "{id} was published");
            assert!(seen.insert(id), "each event once");
            seqs.push(element["seq"].as_u64().unwrap());
        }
        let text = std::str::from_utf8(&request.body).unwrap();
        assert!(text.starts_with("[{\"id\":\"msg_"), "{text}");
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=10).collect::<Vec<u64>>());

    // Every member's attempt records its request: the batch's id and size,
    // its place, the headers as sent; the first member's keeps the whole
    // body, the others' shows their element.
    for request in &requests {
        let batch_id = request.header("webhook-id");
        for (position, element) in elements(request).iter().enumerate() {
            let delivery = &deliveries[element["id"].as_str().unwrap()];
            app.wait_for_delivery_state(&app_id, delivery, "succeeded")
                .await;
            let attempts = app.attempts(&app_id, delivery).await;
            assert_eq!(attempts.len(), 1);
            let attempt = app
                .get(&format!(
                    "/v1/apps/{app_id}/attempts/{}",
                    attempts[0]["id"].as_str().unwrap()
                ))
                .await;
            assert_eq!(
                attempt["batch"],
                json!({"id": batch_id, "size": elements(request).len(), "position": position}),
                "{attempt}"
            );
            let headers = &attempt["request_headers"];
            assert_eq!(headers["webhook-id"], batch_id);
            assert_eq!(
                headers["webhook-signature"],
                request.header("webhook-signature")
            );
            assert_eq!(
                headers["hookline-batch-size"],
                elements(request).len().to_string()
            );
            assert!(headers.get("hookline-endpoint-sequence").is_none());
            let shown: Value =
                serde_json::from_str(attempt["request_body"].as_str().unwrap()).unwrap();
            if position == 0 {
                assert_eq!(
                    attempt["request_body"].as_str().unwrap().as_bytes(),
                    &request.body[..]
                );
            } else {
                assert_eq!(&shown, element);
            }
        }
    }
}

async fn a_batch_waits_for_company_no_longer_than_its_wait(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    // A wait far longer than the test: three events published one by one
    // leave together, as soon as the third makes the batch full.
    let (receiver, app_id, endpoint) = batching(&app, 3, 10_000).await;
    let mut published = Vec::new();
    for n in 0..3 {
        let event = app.publish(&app_id, "order.paid", json!({"n": n})).await;
        published.push(event["id"].as_str().unwrap().to_owned());
    }
    let requests = wait_for_elements(&receiver, 3).await;
    assert_eq!(requests.len(), 1, "one request of three");
    let ids: Vec<String> = elements(&requests[0])
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, published, "in the order they were numbered");

    // A batch that cannot grow leaves at once: with room for three requests
    // in flight (max_in_flight), three members fill the endpoint's room, so
    // they go without waiting the ten seconds.
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );
    app.call(
        Method::PATCH,
        &path,
        Some(&json!({"max_in_flight": 3, "batch": {"max_events": 10, "max_wait_ms": 10_000}})),
        200,
    )
    .await;
    publish_many(&app, &app_id, 3).await;
    let requests = receiver.wait_for(2, Duration::from_secs(5)).await;
    assert_eq!(elements(&requests[1]).len(), 3);

    // With a short wait, a lone event leaves without company.
    let changed = app
        .call(
            Method::PATCH,
            &path,
            Some(&json!({"batch": {"max_events": 10, "max_wait_ms": 50}})),
            200,
        )
        .await;
    assert_eq!(changed["batch"]["max_wait_ms"], 50);
    let lone = app.publish(&app_id, "order.paid", json!({"n": 3})).await;
    let requests = wait_for_elements(&receiver, 7).await;
    assert_eq!(requests.len(), 3);
    let last = elements(&requests[2]);
    assert_eq!(last.len(), 1);
    assert_eq!(last[0]["id"], lone["id"]);

    // Batching stopped: one request per delivery, the envelope as it is.
    let stopped = app
        .call(Method::PATCH, &path, Some(&json!({"batch": null})), 200)
        .await;
    assert_eq!(stopped["batch"], Value::Null);
    let single = app.publish(&app_id, "order.paid", json!({"n": 4})).await;
    let requests = receiver.wait_for_requests(4).await;
    assert_eq!(
        requests[3].header("webhook-id"),
        single["id"].as_str().unwrap()
    );
    assert_eq!(requests[3].json()["data"]["n"], 4);
}

async fn a_failed_batch_is_retried_whole_and_a_refused_one_dead_letters_every_member(
    engine: Engine,
) {
    // Two failures in a row open the breaker: a batch of three that failed
    // must count as one.
    let app = TestApp::spawn_with(engine, |c| c.breaker_failure_threshold = 2).await;
    let (receiver, app_id, endpoint) = batching(&app, 3, 10_000).await;
    receiver.script([Reply::status(500)]);
    let endpoint_path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );

    // A 500: every member is retried, and they go together again.
    let deliveries = publish_many(&app, &app_id, 3).await;
    for delivery in deliveries.values() {
        app.wait_for_delivery_state(&app_id, delivery, "succeeded")
            .await;
    }
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2, "the failed request and its retry");
    let members = |r: &Received| -> BTreeSet<String> {
        elements(r)
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all: BTreeSet<String> = deliveries.keys().cloned().collect();
    assert_eq!(members(&requests[0]), all);
    assert_eq!(members(&requests[1]), all);
    assert_ne!(
        requests[0].header("webhook-id"),
        requests[1].header("webhook-id"),
        "each request has its own id"
    );
    for delivery in deliveries.values() {
        let attempts = app.attempts(&app_id, delivery).await;
        let shown: Vec<(Value, Value, Value)> = attempts
            .iter()
            .map(|a| {
                (
                    a["status_code"].clone(),
                    a["verdict"].clone(),
                    a["batch"]["id"].clone(),
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                (
                    json!(500),
                    json!("retry"),
                    json!(requests[0].header("webhook-id"))
                ),
                (
                    json!(200),
                    json!("delivered"),
                    json!(requests[1].header("webhook-id"))
                ),
            ]
        );
    }
    // The breaker heard one failure, not three (two would have opened it).
    let health = app.get(&format!("{endpoint_path}/health")).await;
    assert_eq!(health["breaker"], "closed");

    // A 400: every member is dead, with the same answer.
    receiver.script([Reply::status(400)]);
    let refused = publish_many(&app, &app_id, 3).await;
    for delivery in refused.values() {
        let dead = app.wait_for_delivery_state(&app_id, delivery, "dead").await;
        assert_eq!(dead["dead_reason"], "client_error");
    }
    let dlq = app.get(&format!("/v1/apps/{app_id}/dlq")).await;
    let in_dlq: BTreeSet<String> = dlq["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(in_dlq, refused.values().cloned().collect());

    // One replayed, with a short wait: it goes alone and succeeds.
    app.call(
        Method::PATCH,
        &endpoint_path,
        Some(&json!({"batch": {"max_events": 3, "max_wait_ms": 50}})),
        200,
    )
    .await;
    let (event, delivery) = refused.iter().next().unwrap();
    app.replay_until_succeeded(&app_id, delivery).await;
    let requests = receiver.requests();
    assert_eq!(requests.len(), 4);
    let replayed = elements(&requests[3]);
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["id"], json!(event));
}

async fn ordered_keys_stay_in_order_across_batches(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let (receiver, app_id, _) = batching(&app, 4, 100).await;
    // Two keys, four events each, and two unordered events.
    let mut events = Vec::new();
    for n in 0..4 {
        for key in ["order_a", "order_b"] {
            events.push(json!({"event_type": "order.paid", "ordering_key": key,
                "payload": {"key": key, "n": n}}));
        }
    }
    events.push(json!({"event_type": "order.paid", "payload": {"key": null, "n": 0}}));
    events.push(json!({"event_type": "order.paid", "payload": {"key": null, "n": 1}}));
    app.publish_batch(&app_id, events).await;

    let requests = wait_for_elements(&receiver, 10).await;
    let mut order: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for request in &requests {
        let mut keys_here = BTreeSet::new();
        for element in elements(request) {
            let Some(key) = element["data"]["key"].as_str() else {
                continue;
            };
            // A claim takes one delivery per key at a time: never two of a
            // key in one request.
            assert!(keys_here.insert(key.to_owned()), "{key} twice in one batch");
            order
                .entry(key.to_owned())
                .or_default()
                .push(element["data"]["n"].as_u64().unwrap());
        }
    }
    assert_eq!(order["order_a"], [0, 1, 2, 3]);
    assert_eq!(order["order_b"], [0, 1, 2, 3]);
}

async fn a_stopping_dispatcher_sends_what_it_gathered_at_once(engine: Engine) {
    // The drain may take three seconds; a batch would wait ten.
    let mut app = TestApp::spawn_with(engine, |c| c.drain_timeout_ms = 3_000).await;
    let (receiver, app_id, _) = batching(&app, 100, 10_000).await;
    let deliveries = publish_many(&app, &app_id, 5).await;
    // Leased, gathering: nothing sent yet.
    for delivery in deliveries.values() {
        app.wait_for_delivery_state(&app_id, delivery, "in_flight")
            .await;
    }
    assert!(receiver.requests().is_empty());

    app.server.take().unwrap().stop().await.unwrap();
    // The stop sent the batch as it was, inside the drain, and wrote its
    // members' outcomes before the process let go of the database.
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(elements(&requests[0]).len(), 5);
    let succeeded = raw(
        engine,
        &app.db,
        "SELECT CAST(COUNT(*) AS TEXT) FROM deliveries WHERE state = 'succeeded'",
    )
    .await;
    assert_eq!(succeeded.as_deref(), Some("5"));
}

async fn batching_is_refused_where_one_request_cannot_carry_many(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoints = format!("/v1/apps/{app_id}/endpoints");
    let batch = json!({"max_events": 5, "max_wait_ms": 100});
    let refused = |status: u16, code: &'static str, body: Value| {
        let app = &app;
        let endpoints = endpoints.clone();
        async move {
            let problem = app
                .call(Method::POST, &endpoints, Some(&body), status)
                .await;
            assert_eq!(problem["code"], code, "{problem}");
            problem
        }
    };
    // Out of bounds.
    for bad in [
        json!({"max_events": 1, "max_wait_ms": 0}),
        json!({"max_events": 101, "max_wait_ms": 0}),
        json!({"max_events": 2, "max_wait_ms": 10_001}),
    ] {
        refused(
            422,
            "validation_failed",
            json!({"url": receiver.url, "batch": bad}),
        )
        .await;
    }
    // With a transform, or to a polling endpoint.
    let problem = refused(
        409,
        "conflict",
        json!({"url": receiver.url, "batch": batch, "transform": "slack"}),
    )
    .await;
    assert!(problem["detail"].as_str().unwrap().contains("transform"));
    refused(409, "conflict", json!({"url": "poll:", "batch": batch})).await;
    // A batching endpoint takes no transform later either.
    let endpoint = app
        .create_endpoint_with(&app_id, &receiver.url, json!({"batch": batch}))
        .await;
    let path = format!("{endpoints}/{}", endpoint["id"].as_str().unwrap());
    app.call(
        Method::PATCH,
        &path,
        Some(&json!({"transform": "slack"})),
        409,
    )
    .await;
    // Nothing was made or changed by a refusal.
    let listed = app.get(&endpoints).await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 1);
    assert_eq!(app.get(&path).await["transform"], Value::Null);
}
