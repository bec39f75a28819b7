//! Gap-proof sequence numbers (docs/api.md, "Sequence numbers"): every
//! delivery made for an endpoint carries the endpoint's next number, in the
//! signed envelope (`seq`, unless the endpoint turns that off) and in the
//! `hookline-endpoint-sequence` header. A receiver that sees a gap fetches
//! the numbers it lacks, signed as pushes are, from `…/messages`.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, only_delivery, Engine, Received, Receiver, Reply, TestApp};

both_engines!(
    deliveries_carry_their_endpoints_numbers_signed_in_the_envelope,
    a_receiver_that_misses_a_number_fetches_it_signed,
    a_range_is_read_within_its_bounds,
);

/// The body verifies against the endpoint's secret with the official
/// `standardwebhooks` crate.
fn verify(secret: &str, body: &[u8], headers: &reqwest::header::HeaderMap) {
    standardwebhooks::Webhook::new(secret)
        .unwrap()
        .verify(body, headers)
        .expect("the signature verifies");
}

/// A fetched message's headers as a header map, to verify its body with.
fn message_headers(message: &Value) -> reqwest::header::HeaderMap {
    crate::helpers::header_map(&message["headers"])
}

async fn messages(app: &TestApp, app_id: &str, endpoint: &str, query: &str) -> Value {
    app.get(&format!(
        "/v1/apps/{app_id}/endpoints/{endpoint}/messages?{query}"
    ))
    .await
}

/// Publishes one event and waits until the receiver has one more request.
async fn publish_one(
    app: &TestApp,
    app_id: &str,
    receiver: &Receiver,
    n: u64,
) -> (Value, Received) {
    let before = receiver.requests().len();
    let event = app.publish(app_id, "order.paid", json!({"n": n})).await;
    let received = receiver.wait_for_requests(before + 1).await;
    (event, received[before].clone())
}

async fn deliveries_carry_their_endpoints_numbers_signed_in_the_envelope(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let (numbered, plain) = (Receiver::start().await, Receiver::start().await);
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &numbered.url).await;
    assert_eq!(endpoint["seq_in_body"], true, "on by default: {endpoint}");
    let exact = app
        .create_endpoint_with(&app_id, &plain.url, json!({"seq_in_body": false}))
        .await;
    assert_eq!(exact["seq_in_body"], false);
    let secret = endpoint["secret"].as_str().unwrap();

    let mut events = Vec::new();
    for n in 1..=3 {
        events.push(app.publish(&app_id, "order.paid", json!({"n": n})).await);
    }
    let mut got = numbered.wait_for_requests(3).await;
    got.sort_by_key(|r| r.json()["seq"].as_u64());
    for (seq, request) in (1..=3).zip(&got) {
        verify(secret, &request.body, &request.headers);
        let body = request.json();
        assert_eq!(body["seq"], seq, "{body}");
        assert_eq!(
            request.header("hookline-endpoint-sequence"),
            seq.to_string()
        );
        // Next to type and timestamp, before the payload.
        let text = std::str::from_utf8(&request.body).unwrap();
        let keys: Vec<&str> = ["\"type\"", "\"timestamp\"", "\"seq\"", "\"data\""]
            .into_iter()
            .collect();
        let places: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(places.windows(2).all(|w| w[0] < w[1]), "{text}");
    }
    // One event's numbers are per endpoint: the plain endpoint has its own
    // 1..=3, in the header only, its envelope exactly {type, timestamp, data}.
    let mut plain_got = plain.wait_for_requests(3).await;
    plain_got.sort_by_key(|r| r.header("hookline-endpoint-sequence").to_owned());
    for (seq, request) in (1..=3).zip(&plain_got) {
        verify(
            exact["secret"].as_str().unwrap(),
            &request.body,
            &request.headers,
        );
        assert_eq!(
            request.header("hookline-endpoint-sequence"),
            seq.to_string()
        );
        let body = request.json();
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["data", "timestamp", "type"], "{body}");
    }

    // The attempt shows the body as signed and the header it carried.
    let first = events
        .iter()
        .find(|e| e["id"].as_str() == Some(got[0].header("webhook-id")))
        .unwrap();
    let delivery = first["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["endpoint_id"] == endpoint["id"])
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;
    let attempts = app.attempts(&app_id, &delivery).await;
    let attempt = app
        .get(&format!(
            "/v1/apps/{app_id}/attempts/{}",
            attempts[0]["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(
        attempt["request_body"].as_str().unwrap().as_bytes(),
        &got[0].body[..]
    );
    assert_eq!(
        attempt["request_headers"]["hookline-endpoint-sequence"],
        "1"
    );

    // Turning it off (PATCH) sends the next one without `seq` in the body.
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );
    let patched = app
        .call(
            Method::PATCH,
            &path,
            Some(&json!({"seq_in_body": false})),
            200,
        )
        .await;
    assert_eq!(patched["seq_in_body"], false);
    let (_, fourth) = publish_one(&app, &app_id, &numbered, 4).await;
    assert_eq!(fourth.header("hookline-endpoint-sequence"), "4");
    assert!(fourth.json().get("seq").is_none(), "{}", fourth.json());
    verify(secret, &fourth.body, &fourth.headers);
}

async fn a_receiver_that_misses_a_number_fetches_it_signed(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let endpoint_id = endpoint["id"].as_str().unwrap();
    let secret = endpoint["secret"].as_str().unwrap();
    // The second is refused (400: dead at once): the receiver never takes it in.
    receiver.script([Reply::status(200), Reply::status(400), Reply::status(200)]);
    let mut sent = Vec::new();
    for n in 1..=3 {
        sent.push(publish_one(&app, &app_id, &receiver, n).await);
    }
    let second = only_delivery(&sent[1].0);
    app.wait_for_delivery_state(&app_id, &second, "dead").await;
    let seen: Vec<u64> = sent
        .iter()
        .filter(|(_, r)| r.status == 200)
        .map(|(_, r)| r.json()["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seen, [1, 3], "a gap at 2");

    // The receiver asks for what it lacks.
    let answer = messages(&app, &app_id, endpoint_id, "from_seq=2&to_seq=2").await;
    assert_eq!(answer["last_seq"], 3);
    assert!(answer.get("next_seq").is_none(), "{answer}");
    let missed = &answer["messages"][0];
    assert_eq!(answer["messages"].as_array().unwrap().len(), 1);
    assert_eq!(missed["seq"], 2);
    assert_eq!(missed["state"], "dead");
    assert_eq!(missed["delivery_id"], second.as_str());
    assert_eq!(missed["event_id"], sent[1].0["id"]);
    let body = missed["body"].as_str().unwrap();
    verify(secret, body.as_bytes(), &message_headers(missed));
    assert_eq!(missed["headers"]["hookline-endpoint-sequence"], "2");
    let envelope: Value = serde_json::from_str(body).unwrap();
    assert_eq!(envelope["seq"], 2);
    assert_eq!(envelope["data"], json!({"n": 2}));
    // The same bytes as the refused push carried.
    assert_eq!(body.as_bytes(), &sent[1].1.body[..]);

    // The whole range: every number once, in order, with its state (once
    // the answers received are recorded).
    for (event, _) in [&sent[0], &sent[2]] {
        app.wait_for_delivery_state(&app_id, &only_delivery(event), "succeeded")
            .await;
    }
    let all = messages(&app, &app_id, endpoint_id, "from_seq=1").await;
    let states: Vec<(u64, &str)> = all["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["seq"].as_u64().unwrap(), m["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, [(1, "succeeded"), (2, "dead"), (3, "succeeded")]);
    // The Rust client reads the same.
    let client = hookline_client::Client::builder(&app.base, crate::helpers::ADMIN_TOKEN)
        .build()
        .unwrap();
    let read = client
        .endpoint_messages(
            &app_id,
            endpoint_id,
            &hookline_client::types::MessagesQuery {
                from_seq: Some(2),
                to_seq: Some(2),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(read.last_seq, 3);
    assert_eq!(
        read.messages[0].state,
        hookline_client::types::MessageState::Dead
    );
    assert_eq!(read.messages[0].body.as_deref(), Some(body));
    for message in all["messages"].as_array().unwrap() {
        verify(
            secret,
            message["body"].as_str().unwrap().as_bytes(),
            &message_headers(message),
        );
    }
}

async fn a_range_is_read_within_its_bounds(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let endpoint_id = endpoint["id"].as_str().unwrap();
    let path = format!("/v1/apps/{app_id}/endpoints/{endpoint_id}/messages");

    // None yet: an empty range, and where the numbers stand.
    let empty = messages(&app, &app_id, endpoint_id, "from_seq=1").await;
    assert_eq!(empty["last_seq"], 0);
    assert_eq!(empty["messages"], json!([]));

    // 120 deliveries in batches; a range answers at most 100 and says where to go on.
    for chunk in 0..4 {
        let events: Vec<Value> = (0..30)
            .map(|n| json!({"event_type": "order.paid", "payload": {"n": chunk * 30 + n}}))
            .collect();
        app.publish_batch(&app_id, events).await;
    }
    let first = messages(&app, &app_id, endpoint_id, "from_seq=1&to_seq=500").await;
    assert_eq!(first["last_seq"], 120);
    let seqs: Vec<u64> = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=100).collect::<Vec<u64>>());
    assert_eq!(first["next_seq"], 101);
    let rest = messages(&app, &app_id, endpoint_id, "from_seq=101&to_seq=500").await;
    assert_eq!(rest["messages"].as_array().unwrap().len(), 20);
    assert!(rest.get("next_seq").is_none(), "{rest}");
    // Every event once across the two pages.
    let mut events: Vec<&str> = first["messages"]
        .as_array()
        .unwrap()
        .iter()
        .chain(rest["messages"].as_array().unwrap())
        .map(|m| m["event_id"].as_str().unwrap())
        .collect();
    events.sort();
    events.dedup();
    assert_eq!(events.len(), 120);

    // Past the last number, or ending below its start: empty.
    let past = messages(&app, &app_id, endpoint_id, "from_seq=121").await;
    assert_eq!(past["messages"], json!([]));
    let backwards = messages(&app, &app_id, endpoint_id, "from_seq=5&to_seq=4").await;
    assert_eq!(backwards["messages"], json!([]));
    // Numbers start at 1, where a range starts by default.
    let head = messages(&app, &app_id, endpoint_id, "to_seq=3").await;
    assert_eq!(head["messages"].as_array().unwrap().len(), 3);
    assert_eq!(head["messages"][0]["seq"], 1);
    for query in [
        "from_seq=0",
        "to_seq=0",
        "from_seq=x",
        "from=1",
        "to_seq=9223372036854775808",
    ] {
        let problem = app
            .call(Method::GET, &format!("{path}?{query}"), None, 400)
            .await;
        assert_eq!(problem["code"], "invalid_query", "{query}: {problem}");
    }
    // Another app's endpoint is not found.
    let other = app.create_app().await;
    app.call(
        Method::GET,
        &format!("/v1/apps/{other}/endpoints/{endpoint_id}/messages?from_seq=1"),
        None,
        404,
    )
    .await;
}
