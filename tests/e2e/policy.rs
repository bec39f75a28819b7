//! Delivery policy end to end: ordering, the circuit breaker, noisy
//! neighbours, cluster-wide rate limits and several dispatcher processes.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use crate::helpers::{
    both_engines, free_port, publish_concurrently, setup_remote, Engine, Process, Receiver, Reply,
    TestApp, TestDb,
};

both_engines!(
    ordered_keys_arrive_in_sequence_and_no_key_waits_on_another,
    breaker_opens_stays_quiet_then_sends_exactly_one_probe,
    noisy_neighbours_leave_a_healthy_endpoint_alone,
);

/// A small deterministic PRNG (xorshift64*), so a failing run can be replayed.
struct Xorshift(u64);

impl Xorshift {
    fn next_unit(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn header(headers: &axum::http::HeaderMap, name: &str) -> String {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

const KEYS: usize = 25;
const PER_KEY: u64 = 20;

async fn ordered_keys_arrive_in_sequence_and_no_key_waits_on_another(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| {
        c.max_attempts = 1000;
        c.retry_base_ms = 5;
        c.retry_cap_ms = 50;
        // This test is about ordering, not the breaker: keep it closed.
        c.breaker_failure_threshold = 1_000_000;
    })
    .await;
    // Delivered sequence per key, as the receiver saw it.
    let delivered: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let rng = Mutex::new(Xorshift(0x9E37_79B9_7F4A_7C15));
    let state = delivered.clone();
    let receiver = Receiver::start_with(move |headers| {
        let key = header(headers, "hookline-ordering-key");
        let sequence: u64 = header(headers, "hookline-sequence").parse().unwrap();
        let mut done = state.lock().unwrap();
        // key-0 fails until every other key is fully delivered: if any key waited on
        // key-0's failures, this could never finish.
        let others_done =
            (1..KEYS).all(|k| done.get(&format!("key-{k}")).copied() == Some(PER_KEY));
        let fail = if key == "key-0" {
            !others_done
        } else {
            rng.lock().unwrap().next_unit() < 0.3
        };
        if fail {
            return Reply::status(500);
        }
        let current = done.entry(key).or_default();
        *current = (*current).max(sequence);
        Reply::status(200)
    })
    .await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    for n in 0..KEYS as u64 * PER_KEY {
        let body = json!({"event_type": "order.updated", "payload": {"n": n}, "ordering_key": format!("key-{}", n % KEYS as u64)});
        app.call(
            reqwest::Method::POST,
            &format!("/v1/apps/{app_id}/events"),
            Some(&body),
            202,
        )
        .await;
    }

    crate::helpers::wait_until(
        Duration::from_secs(120),
        "every key fully delivered",
        || async {
            let done = delivered.lock().unwrap();
            (done.len() == KEYS && done.values().all(|s| *s == PER_KEY)).then_some(())
        },
    )
    .await;
    // Each key's arrivals: only its head is ever sent, and the next only after a 200.
    let mut next_expected: HashMap<String, u64> = HashMap::new();
    let mut failures = 0;
    for request in receiver.requests() {
        let key = request.header("hookline-ordering-key").to_owned();
        let sequence: u64 = request.header("hookline-sequence").parse().unwrap();
        let expected = next_expected.entry(key.clone()).or_insert(1);
        assert_eq!(
            sequence, *expected,
            "{key}: got #{sequence} while #{expected} was not yet delivered"
        );
        if request.status == 200 {
            *expected += 1;
        } else {
            failures += 1;
        }
    }
    assert!(
        failures > 100,
        "the receiver failed ~30% of requests ({failures})"
    );
    assert!(next_expected.values().all(|n| *n == PER_KEY + 1));
}

async fn breaker_opens_stays_quiet_then_sends_exactly_one_probe(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| {
        c.breaker_failure_threshold = 3;
        c.breaker_cooldown_ms = 1_000;
        c.max_in_flight_per_endpoint = 1;
        c.retry_base_ms = 5;
        c.retry_cap_ms = 20;
        // At most 3 real failures happen before the breaker opens; with a budget of 4
        // no delivery can be dead-lettered unless deferrals were charged as attempts.
        c.max_attempts = 4;
    })
    .await;
    let count = Arc::new(Mutex::new(0u32));
    let seen = count.clone();
    let receiver = Receiver::start_with(move |_| {
        let mut n = seen.lock().unwrap();
        *n += 1;
        match *n {
            1..=3 => Reply::status(503),
            4 => Reply::status(200).after(Duration::from_millis(300)),
            _ => Reply::status(200),
        }
    })
    .await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let health_path = format!(
        "/v1/apps/{app_id}/endpoints/{}/health",
        endpoint["id"].as_str().unwrap()
    );
    let mut deliveries = Vec::new();
    for n in 0..6 {
        let published = app.publish(&app_id, "order.paid", json!({"n": n})).await;
        deliveries.push(
            published["deliveries"][0]["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }

    let open =
        crate::helpers::wait_until(Duration::from_secs(30), "the breaker to open", || async {
            let health = app.get(&health_path).await;
            (health["breaker"] == "open").then_some(health)
        })
        .await;
    assert_eq!(open["consecutive_failures"], 3);
    assert_eq!(open["last_error"], "HTTP 503");
    let next_probe_at = parse_rfc3339(open["next_probe_at"].as_str().unwrap());

    for delivery in &deliveries {
        app.wait_for_delivery_state(&app_id, delivery, "succeeded")
            .await;
    }
    // The transitions reach /metrics (the recorder is the process's, shared by
    // the tests running beside this one: the series exist, whoever else counts).
    let metrics = app
        .request(reqwest::Method::GET, "/metrics", None, &[])
        .await
        .text()
        .await
        .unwrap();
    for to in ["open", "closed"] {
        let series = format!("hookline_breaker_transitions_total{{to=\"{to}\"}}");
        assert!(metrics.contains(&series), "no {series} in /metrics");
    }
    let requests = receiver.requests();
    assert_eq!(
        requests.len(),
        3 + 6,
        "three failures, then one success per delivery"
    );
    let statuses: Vec<u16> = requests.iter().map(|r| r.status).collect();
    assert_eq!(
        &statuses[..3],
        [503, 503, 503],
        "opened after exactly N failures"
    );
    // Nothing during the cool-down: the next request is the probe, at its time.
    assert!(
        requests[3].wall >= next_probe_at,
        "the probe went before the cool-down ended"
    );
    // Exactly one probe: nothing else was sent while it was out (it took 300 ms).
    assert!(
        requests[4].at >= requests[3].at + Duration::from_millis(300),
        "a second request went during the probe"
    );
    let health = app.get(&health_path).await;
    assert_eq!(
        (
            health["breaker"].as_str(),
            health["consecutive_failures"].as_u64()
        ),
        (Some("closed"), Some(0))
    );
    // Deferral is free: every delivery's attempt rows are its real requests.
    let mut attempt_rows = 0;
    for delivery in &deliveries {
        attempt_rows += app.attempts(&app_id, delivery).await.len();
    }
    assert_eq!(attempt_rows, requests.len());
}

fn parse_rfc3339(text: &str) -> SystemTime {
    humantime::parse_rfc3339(text).expect("an RFC 3339 time")
}

async fn noisy_neighbours_leave_a_healthy_endpoint_alone(engine: Engine) {
    const SLOW: Duration = Duration::from_secs(10);
    let app = TestApp::spawn_with(engine, |c| {
        c.max_in_flight = 64;
        c.max_in_flight_per_endpoint = 8;
        c.request_timeout_ms = 30_000;
    })
    .await;
    let healthy = Receiver::start().await;
    let slow = Receiver::start().await;
    slow.answer_always(Reply::status(200).after(SLOW));
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &healthy.url).await;
    app.create_endpoint(&app_id, &slow.url).await;
    // Nothing listens here: every attempt is refused.
    app.create_endpoint(&app_id, &format!("http://127.0.0.1:{}/dead", free_port()))
        .await;

    // One batch request, so how fast this machine publishes cannot matter below.
    let events: Vec<Value> = (0..100)
        .map(|n| json!({"event_type": "order.paid", "payload": {"n": n}}))
        .collect();
    let batch = app.publish_batch(&app_id, events).await;
    let published = Instant::now();
    let published_at: HashMap<String, Instant> = batch["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["id"].as_str().unwrap().to_owned(), published))
        .collect();
    let arrivals = healthy.wait_for(100, Duration::from_secs(60)).await;
    let slow_first = slow
        .requests()
        .first()
        .map(|r| r.at)
        .expect("the slow endpoint is being tried");
    // Causal, not a stopwatch: every healthy delivery arrived before the slow endpoint
    // could have answered even its first request.
    let last = arrivals.iter().map(|r| r.at).max().unwrap();
    assert!(
        last < slow_first + SLOW,
        "the healthy endpoint waited for the slow one"
    );
    assert!(
        slow.requests().len() <= 8,
        "the slow endpoint is held to its concurrency cap"
    );

    let mut delays: Vec<Duration> = arrivals
        .iter()
        .map(|r| {
            r.at.saturating_duration_since(published_at[r.header("webhook-id")])
        })
        .collect();
    delays.sort();
    eprintln!(
        "noisy neighbours ({engine:?}): healthy publish→receipt p50 {:?}, max {:?}",
        delays[delays.len() / 2],
        delays.last().unwrap()
    );
}

const CLUSTER_ENV: [(&str, &str); 2] = [
    ("HOOKLINE_LEASE_MS", "2000"),
    ("HOOKLINE_IDLE_POLL_MS", "100"),
];

/// PostgreSQL: three dispatcher processes share a 50/s limit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_holds_for_the_whole_cluster() {
    let db = TestDb::new(Engine::Postgres).await;
    let receiver = Receiver::start().await;
    let api = Process::start(&db, "api", None, &CLUSTER_ENV).await;
    let (app_id, _) =
        setup_remote(&api.base, &receiver.url, json!({"rate_limit_per_sec": 50})).await;
    publish_concurrently(&api.base, &app_id, 650, 8).await;
    let dispatchers: Vec<Process> =
        futures_join(3, || Process::start(&db, "dispatcher", None, &CLUSTER_ENV)).await;

    let first = receiver.wait_for(1, Duration::from_secs(30)).await[0].at;
    receiver.wait_for(560, Duration::from_secs(60)).await;
    let in_window = receiver
        .requests()
        .iter()
        .filter(|r| r.at >= first && r.at < first + Duration::from_secs(10))
        .count();
    eprintln!("rate limit 50/s with 3 dispatchers: {in_window} deliveries in 10 s");
    assert!(
        (450..=550).contains(&in_window),
        "{in_window} deliveries in 10 s is not within 10% of 50/s"
    );
    for dispatcher in dispatchers {
        dispatcher.terminate();
    }
}

/// Starts `n` processes one after another.
async fn futures_join<F, Fut>(n: usize, start: F) -> Vec<Process>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Process>,
{
    let mut processes = Vec::with_capacity(n);
    for _ in 0..n {
        processes.push(start().await);
    }
    processes
}

/// PostgreSQL: three dispatchers, 5,000 events, one dispatcher SIGKILLed mid-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_dispatchers_lose_nothing_and_never_overlap_when_one_is_killed() {
    let db = TestDb::new(Engine::Postgres).await;
    let receiver = Receiver::start().await;
    receiver.answer_always(Reply::status(200).after(Duration::from_millis(10)));
    let api = Process::start(&db, "api", None, &CLUSTER_ENV).await;
    let (app_id, _) = setup_remote(&api.base, &receiver.url, json!({})).await;
    let mut dispatchers =
        futures_join(3, || Process::start(&db, "dispatcher", None, &CLUSTER_ENV)).await;

    let publishing = {
        let (base, app_id) = (api.base.clone(), app_id.clone());
        tokio::spawn(async move { publish_concurrently(&base, &app_id, 5000, 16).await })
    };
    receiver.wait_for(1500, Duration::from_secs(120)).await;
    dispatchers.remove(0).kill();
    let accepted = publishing.await.unwrap();
    assert_eq!(accepted.len(), 5000);

    crate::helpers::wait_until(
        Duration::from_secs(180),
        "every accepted event delivered",
        || async {
            let delivered: HashSet<String> = receiver
                .requests()
                .iter()
                .filter(|r| r.status == 200)
                .map(|r| r.header("webhook-id").to_owned())
                .collect();
            (delivered == accepted).then_some(())
        },
    )
    .await;
    assert_eq!(
        receiver.overlaps(),
        0,
        "a delivery was in flight on two nodes at once"
    );
    for dispatcher in dispatchers {
        dispatcher.terminate();
    }
}
