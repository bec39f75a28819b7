//! Payload filters (docs/api.md, "Payload filters"): an endpoint with a filter
//! gets a delivery only of the events whose payload passes it — the others make
//! no delivery, so they hold no place in its ordering partitions — and its stats
//! count what the filter dropped. A filter is checked when set (422
//! `invalid_filter`, naming the position, nothing written), and a test send says
//! whether its payload would pass.

use reqwest::Method;
use serde_json::{json, Value};

use std::time::Duration;

use crate::helpers::{both_engines, wait_until, Engine, Receiver, TestApp};

both_engines!(
    a_filter_chooses_the_events_its_endpoint_gets,
    a_filter_is_checked_when_set_and_the_refusal_names_the_position,
    a_test_send_says_whether_its_payload_passes_the_filter,
    a_preview_runs_a_filter_over_the_apps_latest_events_of_the_types,
);

const FILTER: &str = r#"/amount >= 100 and /currency in ["EUR", "USD"] and not /test = true"#;

/// The endpoints an event's publish answer made deliveries to.
fn delivered_to(published: &Value) -> Vec<String> {
    published["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["endpoint_id"].as_str().unwrap().to_owned())
        .collect()
}

async fn a_filter_chooses_the_events_its_endpoint_gets(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let (filtered_receiver, plain_receiver) = (Receiver::start().await, Receiver::start().await);
    let app_id = app.create_app().await;
    let filtered = app
        .create_endpoint_with(&app_id, &filtered_receiver.url, json!({"filter": FILTER}))
        .await;
    assert_eq!(filtered["filter"], FILTER);
    let plain = app.create_endpoint(&app_id, &plain_receiver.url).await;
    let (filtered_id, plain_id) = (
        filtered["id"].as_str().unwrap(),
        plain["id"].as_str().unwrap(),
    );

    // Events of one ordering key: those the filter drops must not hold up the rest.
    let payloads = [
        (json!({"n": 0, "amount": 250, "currency": "EUR"}), true),
        (json!({"n": 1, "amount": 50, "currency": "EUR"}), false),
        (json!({"n": 2, "amount": 500, "currency": "GBP"}), false),
        (json!({"n": 3, "amount": 100, "currency": "USD"}), true),
        (
            json!({"n": 4, "amount": 900, "currency": "USD", "test": true}),
            false,
        ),
        (json!({"n": 5, "currency": "USD"}), false),
        (json!("not an object"), false),
        (
            json!({"n": 7, "amount": 1e3, "currency": "EUR", "test": false}),
            true,
        ),
    ];
    for (payload, passes) in &payloads {
        let published = app
            .call(
                Method::POST,
                &format!("/v1/apps/{app_id}/events"),
                Some(&json!({"event_type": "order.paid", "payload": payload, "ordering_key": "order-1"})),
                202,
            )
            .await;
        let mut expected = vec![plain_id.to_owned()];
        if *passes {
            expected.insert(0, filtered_id.to_owned());
        }
        let mut got = delivered_to(&published);
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "{payload}: passes the filter: {passes}");
    }

    // The filtered endpoint gets exactly the events that pass, in order; the other gets all.
    let passing: Vec<Value> = payloads
        .iter()
        .filter(|(_, passes)| *passes)
        .map(|(p, _)| p.clone())
        .collect();
    let got: Vec<Value> = filtered_receiver
        .wait_for_requests(passing.len())
        .await
        .iter()
        .map(|r| r.json()["data"].clone())
        .collect();
    assert_eq!(got, passing);
    let all: Vec<Value> = plain_receiver
        .wait_for_requests(payloads.len())
        .await
        .iter()
        .map(|r| r.json()["data"].clone())
        .collect();
    assert_eq!(
        all,
        payloads.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>()
    );

    // Its stats count what it dropped; the other's count nothing.
    let dropped = payloads.iter().filter(|(_, passes)| !passes).count();
    let stats_path = |id: &str| format!("/v1/apps/{app_id}/endpoints/{id}/stats");
    // (The receiver answered before the last attempt is recorded: wait for that.)
    let filtered_stats = wait_until(
        Duration::from_secs(30),
        "the filtered endpoint's deliveries recorded",
        || async {
            let stats = app.get(&stats_path(filtered_id)).await;
            (stats["deliveries"]["succeeded"] == passing.len()).then_some(stats)
        },
    )
    .await;
    let plain_stats = app.get(&stats_path(plain_id)).await;
    for window in ["hour", "day", "week"] {
        assert_eq!(
            filtered_stats["windows"][window]["filtered"], dropped,
            "{filtered_stats}"
        );
        assert_eq!(
            plain_stats["windows"][window]["filtered"], 0,
            "{plain_stats}"
        );
    }
    assert_eq!(
        filtered_stats["deliveries"]["pending"], 0,
        "{filtered_stats}"
    );
}

async fn a_filter_is_checked_when_set_and_the_refusal_names_the_position(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoints = format!("/v1/apps/{app_id}/endpoints");

    for (filter, position) in [
        ("/amount >> 1", 10),
        ("amount = 1", 1),
        ("/a = 1 and", 11),
        ("(/a exists", 11),
    ] {
        let refused = app
            .call(
                Method::POST,
                &endpoints,
                Some(&json!({"url": receiver.url, "filter": filter})),
                422,
            )
            .await;
        assert_eq!(refused["code"], "invalid_filter", "{refused}");
        let detail = refused["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(&format!("filter at position {position}: ")),
            "{filter}: {detail}"
        );
    }
    let too_long = format!("/a = \"{}\"", "x".repeat(2048));
    let refused = app
        .call(
            Method::POST,
            &endpoints,
            Some(&json!({"url": receiver.url, "filter": too_long})),
            422,
        )
        .await;
    assert_eq!(refused["code"], "invalid_filter");
    assert_eq!(
        app.get(&endpoints).await["data"],
        json!([]),
        "nothing was created"
    );

    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    assert_eq!(endpoint["filter"], Value::Null);
    let path = format!("{endpoints}/{}", endpoint["id"].as_str().unwrap());
    let refused = app
        .call(
            Method::PATCH,
            &path,
            Some(&json!({"filter": "/a in 1", "description": "x"})),
            422,
        )
        .await;
    assert_eq!(refused["code"], "invalid_filter");
    let unchanged = app.get(&path).await;
    assert_eq!(
        (&unchanged["filter"], &unchanged["description"]),
        (&Value::Null, &json!(""))
    );

    let set = app
        .call(
            Method::PATCH,
            &path,
            Some(&json!({"filter": "/a exists"})),
            200,
        )
        .await;
    assert_eq!(set["filter"], "/a exists");
    assert_eq!(app.get(&path).await["filter"], "/a exists");
    let kept = app
        .call(
            Method::PATCH,
            &path,
            Some(&json!({"description": "kept"})),
            200,
        )
        .await;
    assert_eq!(
        kept["filter"], "/a exists",
        "a patch without `filter` keeps it"
    );
    let removed = app
        .call(Method::PATCH, &path, Some(&json!({"filter": null})), 200)
        .await;
    assert_eq!(removed["filter"], Value::Null);
}

async fn a_test_send_says_whether_its_payload_passes_the_filter(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(&app_id, &receiver.url, json!({"filter": "/amount > 100"}))
        .await;
    let test = format!(
        "/v1/apps/{app_id}/endpoints/{}/test",
        endpoint["id"].as_str().unwrap()
    );
    let mut sent = Vec::new();
    for (amount, passes) in [(5, false), (500, true)] {
        let answer = app
            .call(
                Method::POST,
                &test,
                Some(&json!({"event_type": "order.paid", "payload": {"amount": amount}})),
                202,
            )
            .await;
        assert_eq!(answer["passes_filter"], passes, "{amount}: {answer}");
        sent.push(json!({"amount": amount}));
    }
    // A test send goes to its endpoint whatever the filter.
    let got: Vec<Value> = receiver
        .wait_for_requests(2)
        .await
        .iter()
        .map(|r| r.json()["data"].clone())
        .collect();
    assert_eq!(got, sent);
    // …and counts as nothing dropped.
    let stats = app
        .get(&format!(
            "/v1/apps/{app_id}/endpoints/{}/stats",
            endpoint["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(stats["windows"]["hour"]["filtered"], 0);
}

/// A filter preview (docs/api.md#filter-preview): the app's latest events of
/// the chosen types, newest first, each passed or not; paging past events of
/// other types; a filter that does not parse is 422 naming the position; and
/// it writes nothing.
async fn a_preview_runs_a_filter_over_the_apps_latest_events_of_the_types(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let mut ids = Vec::new();
    for (event_type, amount) in [
        ("order.paid", 50),
        ("order.paid", 150),
        ("order.refunded", 500),
        ("invoice.paid", 999),
    ] {
        let published = app
            .publish(&app_id, event_type, json!({"amount": amount}))
            .await;
        ids.push(published["id"].as_str().unwrap().to_owned());
    }
    let preview = |body: Value| {
        let app = &app;
        let path = format!("/v1/apps/{app_id}/filter-preview");
        async move { app.call(Method::POST, &path, Some(&body), 200).await }
    };
    let seen = |answer: &Value| -> Vec<(String, bool)> {
        answer["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["event_id"].as_str().unwrap().to_owned(),
                    e["passed"].as_bool().unwrap(),
                )
            })
            .collect()
    };
    let answer = preview(json!({"filter": "/amount > 100", "event_types": ["order.*"]})).await;
    assert_eq!(
        seen(&answer),
        vec![
            (ids[2].clone(), true),
            (ids[1].clone(), true),
            (ids[0].clone(), false)
        ]
    );
    assert_eq!(
        (answer["passed"].clone(), answer["scanned"].clone()),
        (json!(2), json!(4))
    );
    assert_eq!(answer["data"][0]["event_type"], "order.refunded");
    // No filter, no types: every event, every one passing.
    let all = preview(json!({})).await;
    assert_eq!(all["passed"], 4);
    assert_eq!(seen(&all).len(), 4);

    // Sixty newer events of another type: the preview pages past them.
    let events: Vec<Value> = (0..60)
        .map(|n| json!({"event_type": "invoice.sent", "payload": {"amount": n}}))
        .collect();
    app.publish_batch(&app_id, events).await;
    let paged = preview(
        json!({"filter": "/amount > 100", "event_types": ["order.paid", "order.refunded"]}),
    )
    .await;
    assert_eq!(
        seen(&paged),
        vec![
            (ids[2].clone(), true),
            (ids[1].clone(), true),
            (ids[0].clone(), false)
        ]
    );
    assert_eq!(paged["scanned"], 64);

    let refused = app
        .call(
            Method::POST,
            &format!("/v1/apps/{app_id}/filter-preview"),
            Some(&json!({"filter": "/amount >> 1"})),
            422,
        )
        .await;
    assert_eq!(refused["code"], "invalid_filter");
    assert!(
        refused["detail"].as_str().unwrap().contains("position 10"),
        "{refused}"
    );
    // It wrote nothing: the app still has its 64 events and no endpoint.
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"],
        json!([])
    );
    let listed = app
        .get(&format!("/v1/apps/{app_id}/events?limit=250"))
        .await;
    assert_eq!(listed["data"].as_array().unwrap().len(), 64);
}
