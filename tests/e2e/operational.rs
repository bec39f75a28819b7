//! Operational webhooks (docs/api.md, "Operational webhooks"): Hookline tells
//! the operator about endpoints through its own pipeline — events of the
//! internal app `hookline`, delivered to the endpoints the operator gave it.
//! Each test runs real receivers: the customer's, and the operator's.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use hookline_core::time::{ManualClock, Timestamp};
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, switchable, wait_until, Engine, Receiver, TestApp};

both_engines!(
    twenty_failures_make_one_failing_and_a_success_one_recovered,
    a_gone_endpoint_and_a_manual_disable_are_told_with_their_reasons,
    a_thousand_dead_deliveries_make_one_event_per_window_whose_counts_add_up,
    a_death_that_reaches_a_window_after_it_was_told_is_told_with_a_later_one,
    an_operational_endpoint_that_is_down_makes_no_loop,
    every_endpoint_change_and_a_finished_bulk_replay_are_told,
    a_polled_delivery_never_committed_is_told_dead,
);

/// A Hookline whose breaker stays closed (every failure is an attempt), with one
/// attempt per delivery and a one-second window for dead deliveries.
async fn spawn(engine: Engine) -> TestApp {
    TestApp::spawn_with(engine, |c| {
        c.max_attempts = 1;
        c.breaker_failure_threshold = 1_000;
        c.operational_dead_window_secs = 1;
    })
    .await
}

/// The operator's endpoint: the internal app's, subscribed to `types`.
async fn operational_endpoint(app: &TestApp, url: &str, types: &[&str]) -> Value {
    app.create_endpoint_with("hookline", url, json!({"event_types": types}))
        .await
}

/// What a notice's event adds for people when it is told (`hookline_core::notify`),
/// besides the notice's own data.
const FOR_PEOPLE: [&str; 4] = [
    "endpoint_url",
    "endpoint_description",
    "portal_url",
    "since",
];

/// A notice's own data: its event's without [`FOR_PEOPLE`].
fn own(data: &Value) -> Value {
    let mut data = data.clone();
    for field in FOR_PEOPLE {
        data.as_object_mut().unwrap().remove(field);
    }
    data
}

/// The `(type, own data)` of what the operator's receiver got, in order.
fn told(receiver: &Receiver) -> Vec<(String, Value)> {
    receiver
        .requests()
        .iter()
        .map(|r| {
            let body = r.json();
            (
                body["type"].as_str().unwrap().to_owned(),
                own(&body["data"]),
            )
        })
        .collect()
}

async fn twenty_failures_make_one_failing_and_a_success_one_recovered(engine: Engine) {
    let app = spawn(engine).await;
    let operator = Receiver::start().await;
    operational_endpoint(
        &app,
        &operator.url,
        &["hookline.endpoint.failing", "hookline.endpoint.recovered"],
    )
    .await;
    let (customer, status) = switchable(500).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &customer.url).await;
    let endpoint_id = endpoint["id"].as_str().unwrap();

    for n in 0..25 {
        app.publish(&app_id, "order.paid", json!({"n": n})).await;
    }
    customer.wait_for_requests(25).await;
    let failing = operator.wait_for_requests(1).await;
    assert_eq!(failing[0].json()["type"], "hookline.endpoint.failing");
    // Every failure recorded before it recovers (the 25th attempt's record may lag its answer).
    wait_until(Duration::from_secs(30), "25 dead deliveries", || async {
        let stats = app
            .get(&format!("/v1/apps/{app_id}/endpoints/{endpoint_id}/stats"))
            .await;
        (stats["deliveries"]["dead"] == 25).then_some(())
    })
    .await;

    status.store(200, Ordering::SeqCst);
    for n in 0..3 {
        app.publish(&app_id, "order.paid", json!({"n": n})).await;
    }
    operator.wait_for_requests(2).await;
    let got = told(&operator);
    assert_eq!(
        got,
        vec![
            (
                "hookline.endpoint.failing".to_owned(),
                json!({"app_id": app_id, "endpoint_id": endpoint_id,
                       "consecutive_failures": 20, "last_error": "HTTP 500"})
            ),
            (
                "hookline.endpoint.recovered".to_owned(),
                json!({"app_id": app_id, "endpoint_id": endpoint_id, "failures_before": 25})
            ),
        ]
    );
    // For people: where the endpoint is, a link to it in the portal, and since
    // when it fails (its first failure, before the notice's own time).
    let failing = operator.requests()[0].json();
    let portal = format!(
        "{}/portal/apps/{app_id}/#/endpoints/{endpoint_id}",
        app.base
    );
    for (i, data) in [&failing["data"], &operator.requests()[1].json()["data"]]
        .into_iter()
        .enumerate()
    {
        assert_eq!(data["endpoint_url"], customer.url, "{i}");
        assert_eq!(data["endpoint_description"], "", "{i}");
        assert_eq!(data["portal_url"], portal, "{i}");
    }
    let since = Timestamp::parse_rfc3339(failing["data"]["since"].as_str().unwrap()).unwrap();
    let told_at = Timestamp::parse_rfc3339(failing["timestamp"].as_str().unwrap()).unwrap();
    assert!(since <= told_at, "{failing}");
    assert!(operator.requests()[1].json()["data"].get("since").is_none());
    // Signed like any delivery, with the operational endpoint's own secret.
    assert!(operator.requests()[0]
        .header("webhook-signature")
        .starts_with("v1,"));
    // The internal app's log holds exactly one of each.
    for kind in ["failing", "recovered"] {
        let events = app
            .get(&format!(
                "/v1/apps/hookline/events?event_type=hookline.endpoint.{kind}"
            ))
            .await;
        assert_eq!(
            events["data"].as_array().unwrap().len(),
            1,
            "{kind}: {events}"
        );
    }
}

async fn a_gone_endpoint_and_a_manual_disable_are_told_with_their_reasons(engine: Engine) {
    let app = spawn(engine).await;
    let operator = Receiver::start().await;
    operational_endpoint(
        &app,
        &operator.url,
        &["hookline.endpoint.disabled", "hookline.endpoint.enabled"],
    )
    .await;
    let (customer, _) = switchable(410).await;
    let app_id = app.create_app().await;
    let gone = app.create_endpoint(&app_id, &customer.url).await;
    app.publish(&app_id, "order.paid", json!({})).await;
    let first = operator.wait_for_requests(1).await;
    assert_eq!(
        (
            first[0].json()["type"].clone(),
            own(&first[0].json()["data"])
        ),
        (
            json!("hookline.endpoint.disabled"),
            json!({"app_id": app_id, "endpoint_id": gone["id"], "reason": "gone"})
        )
    );
    // By hand: disabled (manual), then enabled.
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        gone["id"].as_str().unwrap()
    );
    app.call(Method::PATCH, &path, Some(&json!({"enabled": true})), 200)
        .await;
    app.call(Method::PATCH, &path, Some(&json!({"enabled": false})), 200)
        .await;
    operator.wait_for_requests(3).await;
    let kinds: Vec<(String, Value)> = told(&operator)
        .into_iter()
        .map(|(kind, data)| (kind, data["reason"].clone()))
        .collect();
    assert_eq!(
        kinds,
        vec![
            ("hookline.endpoint.disabled".into(), json!("gone")),
            ("hookline.endpoint.enabled".into(), Value::Null),
            ("hookline.endpoint.disabled".into(), json!("manual")),
        ]
    );
}

async fn a_thousand_dead_deliveries_make_one_event_per_window_whose_counts_add_up(engine: Engine) {
    let app = spawn(engine).await;
    let operator = Receiver::start().await;
    operational_endpoint(&app, &operator.url, &["hookline.delivery.dead"]).await;
    let (customer, _) = switchable(400).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &customer.url).await;
    for _ in 0..2 {
        let events: Vec<Value> = (0..500)
            .map(|n| json!({"event_type": "order.paid", "payload": {"n": n}}))
            .collect();
        app.publish_batch(&app_id, events).await;
    }
    let told = wait_until(
        Duration::from_secs(60),
        "delivery.dead events counting 1,000",
        || async {
            let told = told(&operator);
            let total: u64 = told.iter().map(|(_, d)| d["count"].as_u64().unwrap()).sum();
            (total >= 1000).then_some(told)
        },
    )
    .await;
    let total: u64 = told.iter().map(|(_, d)| d["count"].as_u64().unwrap()).sum();
    assert_eq!(total, 1000, "every death counted once");
    // One per window: as many events as windows, none of them twice.
    let mut windows: Vec<&str> = told
        .iter()
        .map(|(_, d)| d["window_start"].as_str().unwrap())
        .collect();
    windows.sort();
    windows.dedup();
    assert_eq!(windows.len(), told.len(), "{told:?}");
    assert!(told.len() < 1000);
    for (kind, data) in &told {
        assert_eq!(kind, "hookline.delivery.dead");
        assert_eq!(data["endpoint_id"], endpoint["id"]);
        assert_eq!(data["reasons"]["client_error"], data["count"]);
        assert_eq!(data["last_status"], 400);
        assert!(data["last_event_id"].as_str().unwrap().starts_with("msg_"));
    }
}

/// A completion reads the clock, then commits: one that read it inside a
/// window and commits after the window was told (a slow transaction on a busy
/// database) must not be lost, nor make a second notice of that window. On a
/// test clock: a death counted in a window already told is told with the next.
async fn a_death_that_reaches_a_window_after_it_was_told_is_told_with_a_later_one(engine: Engine) {
    // 2030-01-01T00:00:00Z, the start of a minute.
    const T0: Timestamp = Timestamp::from_millis(1_893_456_000_000);
    let minute = Duration::from_secs(60);
    let clock = Arc::new(ManualClock::new(T0));
    let app = TestApp::spawn_on_clock(engine, clock.clone(), |c| {
        c.max_attempts = 1;
        c.breaker_failure_threshold = 1_000;
        c.operational_dead_window_secs = 60;
    })
    .await;
    let operator = Receiver::start().await;
    operational_endpoint(&app, &operator.url, &["hookline.delivery.dead"]).await;
    let (customer, _) = switchable(400).await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &customer.url).await;
    let die = |n: u64| {
        let app = &app;
        let app_id = &app_id;
        async move {
            let published = app.publish(app_id, "order.paid", json!({"n": n})).await;
            let delivery = crate::helpers::only_delivery(&published);
            app.wait_for_delivery_state(app_id, &delivery, "dead").await;
        }
    };

    // A death in the first minute, told once the minute is over.
    die(1).await;
    clock.set(T0 + minute);
    operator.wait_for_requests(1).await;
    // Another counted in that minute (the clock read before the commit), after it was told.
    clock.set(T0 + Duration::from_secs(1));
    die(2).await;
    // The loop finds it in the told window and carries it into the open one.
    let server = app.server.as_ref().unwrap();
    let after = T0 + minute + Duration::from_secs(1);
    clock.set(after);
    wait_until(
        Duration::from_secs(30),
        "a notice pass at the new time",
        || async { (server.last_notices() == Some(after)).then_some(()) },
    )
    .await;
    clock.set(T0 + minute * 2);
    let told = wait_until(Duration::from_secs(30), "two notices", || async {
        let told = told(&operator);
        (told.len() >= 2).then_some(told)
    })
    .await;
    let windows: Vec<(&str, u64)> = told
        .iter()
        .map(|(_, d)| {
            (
                d["window_start"].as_str().unwrap(),
                d["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        windows,
        [
            ("2030-01-01T00:00:00.000Z", 1),
            ("2030-01-01T00:01:00.000Z", 1)
        ],
        "each death told once, each window once"
    );
}

async fn an_operational_endpoint_that_is_down_makes_no_loop(engine: Engine) {
    let app = spawn(engine).await;
    let (operator, _) = switchable(500).await;
    let ops = operational_endpoint(
        &app,
        &operator.url,
        &["hookline.delivery.dead", "hookline.endpoint.disabled"],
    )
    .await;
    let ops_id = ops["id"].as_str().unwrap();
    let (customer, _) = switchable(410).await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &customer.url).await;
    app.publish(&app_id, "order.paid", json!({})).await;
    // The operator's endpoint is told (and fails: its deliveries die, one attempt each).
    operator.wait_for_requests(2).await;
    let internal_deliveries = || async {
        app.get("/v1/apps/hookline/deliveries?limit=250").await["data"]
            .as_array()
            .unwrap()
            .clone()
    };
    wait_until(
        Duration::from_secs(30),
        "the operator's deliveries dead",
        || async {
            let all = internal_deliveries().await;
            (all.len() >= 2 && all.iter().all(|d| d["state"] == "dead")).then_some(())
        },
    )
    .await;
    // A later death elsewhere, told after the operator's own deaths' window closed:
    // once it is published, anything about those deaths would have been too.
    let (other, _) = switchable(400).await;
    let marker = app.create_endpoint(&app_id, &other.url).await;
    app.publish(&app_id, "order.paid", json!({"marker": true}))
        .await;
    wait_until(
        Duration::from_secs(30),
        "the marker's delivery.dead",
        || async {
            let events = app
                .get("/v1/apps/hookline/events?event_type=hookline.delivery.dead&limit=250")
                .await;
            events["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["payload"]["endpoint_id"] == marker["id"])
                .then_some(())
        },
    )
    .await;
    let events = app.get("/v1/apps/hookline/events?limit=250").await;
    for event in events["data"].as_array().unwrap() {
        let about = &event["payload"]["endpoint_id"];
        if event["event_type"] == "hookline.endpoint.created" {
            continue; // the audit of its own creation
        }
        assert_ne!(
            about, ops_id,
            "an event about the operator's own endpoint: {event}"
        );
    }
}

async fn every_endpoint_change_and_a_finished_bulk_replay_are_told(engine: Engine) {
    let app = spawn(engine).await;
    let operator = Receiver::start().await;
    operational_endpoint(
        &app,
        &operator.url,
        &[
            "hookline.endpoint.created",
            "hookline.endpoint.updated",
            "hookline.endpoint.secret_rotated",
            "hookline.endpoint.deleted",
            "hookline.replay.finished",
        ],
    )
    .await;
    let (customer, _) = switchable(400).await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &customer.url).await;
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );
    app.call(
        Method::PATCH,
        &path,
        Some(&json!({"description": "orders"})),
        200,
    )
    .await;
    app.call(
        Method::POST,
        &format!("{path}/secret/rotate"),
        Some(&json!({})),
        200,
    )
    .await;
    // A dead delivery, replayed in bulk (it dies again: the receiver still refuses it).
    let delivery =
        crate::helpers::only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);
    app.wait_for_delivery_state(&app_id, &delivery, "dead")
        .await;
    let replay = app
        .call(
            Method::POST,
            &format!("/v1/apps/{app_id}/replays"),
            Some(&json!({})),
            202,
        )
        .await;
    // (The operator's endpoint is told of its own creation too.)
    let told_of = |kind: &'static str| {
        let operator = &operator;
        move || async move {
            let got = told(operator);
            got.iter().any(|(k, _)| k == kind).then_some(got)
        }
    };
    wait_until(
        Duration::from_secs(30),
        "the replay told",
        told_of("hookline.replay.finished"),
    )
    .await;
    // Deleted once the replay is over (a deleted endpoint's deliveries are not replayed).
    app.call(Method::DELETE, &path, None, 204).await;
    let got = wait_until(
        Duration::from_secs(30),
        "the deletion told",
        told_of("hookline.endpoint.deleted"),
    )
    .await;
    let about_endpoint: Vec<&str> = got
        .iter()
        .filter(|(_, data)| data["endpoint_id"] == endpoint["id"])
        .map(|(kind, _)| kind.as_str())
        .collect();
    assert_eq!(
        about_endpoint,
        [
            "hookline.endpoint.created",
            "hookline.endpoint.updated",
            "hookline.endpoint.secret_rotated",
            "hookline.endpoint.deleted",
        ],
        "in order: one ordering key per endpoint; all told: {got:?}"
    );
    let finished: Vec<&Value> = got
        .iter()
        .filter(|(kind, _)| kind == "hookline.replay.finished")
        .map(|(_, data)| data)
        .collect();
    assert_eq!(
        finished,
        [
            &json!({"app_id": app_id, "replay_id": replay["id"], "state": "completed",
                 "total": 1, "done": 1, "replayed": 1})
        ]
    );
}

/// A polling endpoint's delivery that its receiver never commits dies at its
/// max age, and is told dead as a push whose retries ran out is.
async fn a_polled_delivery_never_committed_is_told_dead(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| {
        c.operational_dead_window_secs = 1;
        // Retention (which expires polled deliveries) passes every second.
        c.idempotency_retention_secs = 10;
    })
    .await;
    let operator = Receiver::start().await;
    operational_endpoint(&app, &operator.url, &["hookline.delivery.dead"]).await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(&app_id, "poll:", json!({"retry": {"max_age_secs": 1}}))
        .await;
    let event = app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let told = wait_until(Duration::from_secs(60), "the expiry told", || async {
        let told = told(&operator);
        (!told.is_empty()).then_some(told)
    })
    .await;
    assert_eq!(told.len(), 1, "{told:?}");
    let (kind, data) = &told[0];
    assert_eq!(kind, "hookline.delivery.dead");
    assert_eq!(data["endpoint_id"], endpoint["id"]);
    assert_eq!(data["count"], 1);
    assert_eq!(data["reasons"]["retries_exhausted"], 1);
    assert_eq!(data["last_event_id"], event["id"]);
}
