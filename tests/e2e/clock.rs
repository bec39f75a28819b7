//! The whole server on a test clock (`Server::start_with_clock`): timing that the
//! wall clock makes approximate becomes exact.

use std::sync::Arc;
use std::time::Duration;

use hookline_core::time::{Clock, ManualClock, Timestamp};
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, wait_until, Engine, Receiver, Reply, TestApp};

both_engines!(
    a_retry_goes_out_at_its_due_time_on_the_servers_clock_never_before,
    an_open_breaker_probes_at_the_end_of_its_cool_down_on_the_servers_clock,
    retention_removes_history_when_the_servers_clock_says_it_is_old,
);

/// 2030-01-01T00:00:00Z: far from the wall clock, so nothing can pass by reading it.
const T0: Timestamp = Timestamp::from_millis(1_893_456_000_000);

/// Moves `clock` to `at` and waits until `beat` (the time a server loop last
/// ran, as it read its clock) says a pass ran there.
async fn move_and_wait(
    clock: &ManualClock,
    at: Timestamp,
    what: &str,
    beat: impl Fn() -> Option<Timestamp>,
) {
    clock.set(at);
    wait_until(Duration::from_secs(30), what, || async {
        (beat() == Some(at)).then_some(())
    })
    .await;
}

/// Moves `clock` to `at` and waits until a dispatcher turn has finished there: a
/// turn that ends after the move is followed by one whose claim reads `at`.
/// Called twice (at `t` then at a later time still short of a deadline) it
/// proves a whole turn ran with the clock short of that deadline.
async fn turn_at(app: &TestApp, clock: &ManualClock, at: Timestamp) {
    let server = app.server.as_ref().unwrap();
    move_and_wait(clock, at, "a dispatcher turn at the new time", || {
        server.last_turn()
    })
    .await;
}

/// One 503, then 200, to an endpoint whose retries wait up to an hour: the first
/// attempt is stamped with the server's clock, the retry is not claimed while
/// that clock is short of its due time (even by a millisecond, across whole
/// dispatcher turns), and it goes out at exactly that time once the clock gets there.
async fn a_retry_goes_out_at_its_due_time_on_the_servers_clock_never_before(engine: Engine) {
    let clock = Arc::new(ManualClock::new(T0));
    let app = TestApp::spawn_on_clock(engine, clock.clone(), |_| {}).await;
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(503)]);
    let app_id = app.create_app().await;
    let hour = 3_600_000;
    app.create_endpoint_with(
        &app_id,
        &receiver.url,
        json!({"retry": {"retry_base_ms": hour, "retry_cap_ms": hour}}),
    )
    .await;
    let published = app
        .publish(&app_id, "order.paid", json!({"order": 42}))
        .await;
    let delivery = published["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let first = wait_until(
        Duration::from_secs(30),
        "the first attempt recorded",
        || async {
            let attempts = app.attempts(&app_id, &delivery).await;
            (attempts.len() == 1).then(|| attempts[0].clone())
        },
    )
    .await;
    assert_eq!(first["status_code"], 503);
    assert_eq!(
        first["started_at"],
        T0.to_rfc3339(),
        "stamped by the server's clock"
    );
    let due = Timestamp::parse_rfc3339(first["next_attempt_at"].as_str().unwrap()).unwrap();
    assert!(
        due > T0 + Duration::from_millis(2) && due <= T0 + Duration::from_millis(hour),
        "full jitter within the hour: {due:?}"
    );

    // Just short of the due time: a turn that ends after the clock moved there is
    // followed by one whose claim reads a time short of it. Neither claims the retry.
    for short_by in [2, 1] {
        turn_at(&app, &clock, due - Duration::from_millis(short_by)).await;
    }
    let waiting = app
        .get(&format!("/v1/apps/{app_id}/deliveries/{delivery}"))
        .await;
    assert_eq!(waiting["state"], "pending", "not claimed before its time");
    assert_eq!(receiver.requests().len(), 1);

    clock.set(due);
    let received = receiver.wait_for_requests(2).await;
    assert_eq!(
        received[1].header("webhook-timestamp"),
        due.as_secs().to_string()
    );
    let done = app
        .wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;
    assert_eq!(done["attempts"], 2);
    let attempts = app.attempts(&app_id, &delivery).await;
    let retry = attempts
        .iter()
        .find(|a| a["status_code"] == 200)
        .expect("the retry's attempt");
    assert_eq!(
        retry["started_at"],
        due.to_rfc3339(),
        "sent at its due time exactly"
    );
    assert_eq!(clock.now(), due);
}

/// One 503 opens the breaker (threshold 1) for a cool-down of a minute on the
/// server's clock: the delivery's retry, due much sooner, is deferred to the
/// probe time; no request goes while the clock is short of it by a millisecond;
/// at the probe time exactly one request goes, as the probe, and closes the breaker.
async fn an_open_breaker_probes_at_the_end_of_its_cool_down_on_the_servers_clock(engine: Engine) {
    let clock = Arc::new(ManualClock::new(T0));
    let app = TestApp::spawn_on_clock(engine, clock.clone(), |c| {
        c.breaker_failure_threshold = 1;
        c.breaker_cooldown_ms = 60_000;
    })
    .await;
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(503)]);
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let health = format!(
        "/v1/apps/{app_id}/endpoints/{}/health",
        endpoint["id"].as_str().unwrap()
    );
    let published = app
        .publish(&app_id, "order.paid", json!({"order": 7}))
        .await;
    let delivery = published["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let probe_at = T0 + Duration::from_secs(60);
    let open = wait_until(Duration::from_secs(30), "the breaker to open", || async {
        let health = app.get(&health).await;
        (health["breaker"] == "open").then_some(health)
    })
    .await;
    assert_eq!(open["next_probe_at"], probe_at.to_rfc3339());
    let waiting = app
        .get(&format!("/v1/apps/{app_id}/deliveries/{delivery}"))
        .await;
    assert_eq!(waiting["state"], "pending");
    assert_eq!(
        waiting["next_attempt_at"],
        probe_at.to_rfc3339(),
        "the retry waits for the probe"
    );
    let why = &waiting["explanation"];
    assert_eq!(
        (
            &why["code"],
            &why["action"],
            &why["next_attempt_at"],
            &why["status"]
        ),
        (
            &json!("breaker_open"),
            &json!("fix_endpoint"),
            &json!(probe_at.to_rfc3339()),
            &json!(503)
        ),
        "{why}"
    );
    assert!(
        why["message"]
            .as_str()
            .unwrap()
            .contains("circuit breaker is open"),
        "{why}"
    );

    for short_by in [2, 1] {
        turn_at(&app, &clock, probe_at - Duration::from_millis(short_by)).await;
    }
    assert_eq!(
        receiver.requests().len(),
        1,
        "nothing goes during the cool-down"
    );

    clock.set(probe_at);
    let done = app
        .wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;
    assert_eq!(done["attempts"], 2);
    let attempts = app.attempts(&app_id, &delivery).await;
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[1]["trigger"], "probe");
    assert_eq!(attempts[1]["started_at"], probe_at.to_rfc3339());
    assert_eq!(receiver.requests().len(), 2, "exactly one probe");
    assert_eq!(app.get(&health).await["breaker"], "closed");

    // The timeline marks the opening and the closing at the server's times,
    // and counts the failure and the probe in their minutes.
    let timeline_path = health.replace("/health", "/timeline");
    let timeline = app.get(&format!("{timeline_path}?window=hour")).await;
    assert_eq!(
        (
            &timeline["window"],
            &timeline["bucket_secs"],
            timeline["buckets"].as_array().unwrap().len()
        ),
        (&json!("hour"), &json!(60), 60)
    );
    let marks: Vec<(String, String)> = timeline["marks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["at"].as_str().unwrap().to_owned(),
                m["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        marks,
        vec![
            (T0.to_rfc3339(), "breaker_opened".to_owned()),
            (probe_at.to_rfc3339(), "breaker_closed".to_owned())
        ]
    );
    let since = Timestamp::parse_rfc3339(timeline["since"].as_str().unwrap()).unwrap();
    let in_bucket = |at: Timestamp| {
        let bucket = &timeline["buckets"][((at.as_millis() - since.as_millis()) / 60_000) as usize];
        (
            bucket["delivered"].as_u64().unwrap(),
            bucket["failed"].as_u64().unwrap(),
        )
    };
    assert_eq!(in_bucket(T0), (0, 1));
    assert_eq!(in_bucket(probe_at), (1, 0));
    let counted: u64 = timeline["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["delivered"].as_u64().unwrap() + b["failed"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, 2, "one failure and one probe, nothing else");
    assert_eq!(timeline["complete_since"], Value::Null);
    // A window it does not know is a clear 400.
    app.call(
        Method::GET,
        &format!("{timeline_path}?window=month"),
        None,
        400,
    )
    .await;
}

/// History kept 10 s on the server's clock: a delivered event survives a
/// retention pass at 1 ms short of its age limit and is gone after the first
/// pass past it — decided by the server's clock, not by how long the test ran.
/// (Retention finds old rows by the creation time in their ids, which the wall
/// clock stamps: this test's clock starts at the wall clock's time, so the
/// event's id is not older than `t0`, and the pass past the limit looks a
/// minute further on, so it is older than that pass's cut-off.)
async fn retention_removes_history_when_the_servers_clock_says_it_is_old(engine: Engine) {
    let t0 = Timestamp::from_millis(hookline_core::time::SystemClock.now().as_millis());
    let clock = Arc::new(ManualClock::new(t0));
    let app = TestApp::spawn_on_clock(engine, clock.clone(), |config| {
        config.history_retention_secs = 10;
    })
    .await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let published = app
        .publish(&app_id, "order.paid", json!({"order": 42}))
        .await;
    let event = published["id"].as_str().unwrap().to_owned();
    let delivery = published["deliveries"][0]["id"].as_str().unwrap();
    app.wait_for_delivery_state(&app_id, delivery, "succeeded")
        .await;
    let event_path = format!("/v1/apps/{app_id}/events/{event}");
    let server = app.server.as_ref().unwrap();

    let short = t0 + Duration::from_secs(10) - Duration::from_millis(1);
    move_and_wait(
        &clock,
        short,
        "a retention pass 1 ms short of the age limit",
        || server.last_retention(),
    )
    .await;
    assert_eq!(app.get(&event_path).await["id"], event.as_str(), "kept");

    let past = t0 + Duration::from_secs(70);
    move_and_wait(&clock, past, "a retention pass past the age limit", || {
        server.last_retention()
    })
    .await;
    let gone = app
        .request(reqwest::Method::GET, &event_path, None, &[])
        .await;
    assert_eq!(gone.status(), 404, "removed with its delivery and attempt");
    assert_eq!(receiver.requests().len(), 1);
}
