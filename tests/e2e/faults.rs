//! The fault suite (issue #21): real publishers against the real binary and
//! real receivers while faults strike, every run judged by the history
//! checker (`history.rs`).
//!
//! The CI run is short; the long soak is the same test with more events and
//! the issue's kill interval (docs/RELIABILITY.md):
//!
//! ```text
//! HOOKLINE_FAULT_EVENTS=20000 HOOKLINE_FAULT_KILL_MS=2000-10000 \
//!   cargo test -p hookline-tests --test e2e faults:: -- --nocapture
//! ```

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{
    assert_scrubbed, both_engines, free_port, wait_until, Engine, Process, Receiver, Reply, TestDb,
    ADMIN_TOKEN,
};
use crate::history::{self, Outcome, Publish, Subscriber};

both_engines!(sigkill_at_random_loses_nothing);

/// A run's size: events to publish, and the range of the pause between kills.
struct Plan {
    events: usize,
    kill_every: (u64, u64),
}

impl Plan {
    /// 2,000 events and a kill every 1–3 s in CI; the soak from the environment.
    fn from_env() -> Self {
        let events = std::env::var("HOOKLINE_FAULT_EVENTS")
            .ok()
            .map(|n| n.parse().expect("HOOKLINE_FAULT_EVENTS: a number"))
            .unwrap_or(2_000);
        let kill_every = std::env::var("HOOKLINE_FAULT_KILL_MS")
            .ok()
            .map(|range| {
                let (low, high) = range
                    .split_once('-')
                    .expect("HOOKLINE_FAULT_KILL_MS: low-high");
                (low.parse().unwrap(), high.parse().unwrap())
            })
            .unwrap_or((1_000, 3_000));
        Self { events, kill_every }
    }
}

/// A small deterministic random source; the seed is printed so a failing
/// run can be repeated (`HOOKLINE_FAULT_SEED`).
struct Random(u64);

impl Random {
    fn seeded() -> (Self, u64) {
        let seed = std::env::var("HOOKLINE_FAULT_SEED")
            .ok()
            .map(|s| s.parse().expect("HOOKLINE_FAULT_SEED: a number"))
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .subsec_nanos() as u64
                    | 1
            });
        (Self(seed), seed)
    }

    fn between(&mut self, low: u64, high: u64) -> u64 {
        // xorshift64
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        low + self.0 % (high - low + 1)
    }
}

async fn create(http: &reqwest::Client, base: &str, path: &str, body: Value) -> Value {
    let response = http
        .post(format!("{base}{path}"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201, "POST {path}");
    response.json().await.unwrap()
}

/// Each endpoint admits at most this many deliveries at once, so one kill
/// can leave at most this many per endpoint sent but not recorded.
const IN_FLIGHT: usize = 8;
/// Publishers, each owning its own ordering keys.
const PUBLISHERS: usize = 4;
const KEYS_PER_PUBLISHER: usize = 5;
const MARKER: &str = "PAYLOAD-MARKER-FAULTS";

async fn endpoint(
    http: &reqwest::Client,
    base: &str,
    name: &'static str,
    app: &str,
    event_types: Option<Vec<&str>>,
    receiver: Receiver,
) -> Subscriber {
    let mut body = json!({
        "ordering_on_dead": "block",
        "max_in_flight": IN_FLIGHT,
        "url": receiver.url,
    });
    if let Some(types) = &event_types {
        body["event_types"] = json!(types);
    }
    let created = create(http, base, &format!("/v1/apps/{app}/endpoints"), body).await;
    Subscriber {
        name,
        app: app.to_owned(),
        id: created["id"].as_str().unwrap().to_owned(),
        secret: created["secret"].as_str().unwrap().to_owned(),
        event_types: event_types.map(|t| t.into_iter().map(String::from).collect()),
        receiver,
    }
}

/// Fault 1: the server is SIGKILLed at random moments while publishers
/// publish ordered and unordered events to two apps with four endpoints, one
/// of them flaky, and restarted at once on the same port. Publishers retry an
/// indeterminate answer with the same `Idempotency-Key`; now and then one
/// reuses a key with another body, which must be refused — and never
/// delivered.
async fn sigkill_at_random_loses_nothing(engine: Engine) {
    let plan = Plan::from_env();
    let (mut random, seed) = Random::seeded();
    let db = Arc::new(TestDb::new(engine).await);
    let port = free_port();
    let log = std::env::temp_dir().join(format!("hookline-faults-{}.log", ulid::Ulid::new()));
    let env = [
        ("RUST_LOG", "info"),
        ("HOOKLINE_LEASE_MS", "1500"),
        ("HOOKLINE_RETRY_BASE_MS", "20"),
        ("HOOKLINE_RETRY_CAP_MS", "300"),
        ("HOOKLINE_MAX_ATTEMPTS", "30"),
    ];
    let first = Process::serve_appending(&db, port, &env, &log).await;
    let base = first.base.clone();
    let http = reqwest::Client::new();

    let app_a = create(&http, &base, "/v1/apps", json!({"name": "a"})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let app_b = create(&http, &base, "/v1/apps", json!({"name": "b"})).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Every third answer of the flaky one is a 503.
    let answered = Arc::new(AtomicUsize::new(0));
    let flaky = Receiver::start_with(move |_| {
        if answered.fetch_add(1, SeqCst) % 3 == 2 {
            Reply::status(503)
        } else {
            Reply::status(200)
        }
    })
    .await;
    let subscribers = vec![
        endpoint(&http, &base, "a/all", &app_a, None, Receiver::start().await).await,
        endpoint(
            &http,
            &base,
            "a/paid (flaky)",
            &app_a,
            Some(vec!["order.paid"]),
            flaky,
        )
        .await,
        endpoint(
            &http,
            &base,
            "a/shipped",
            &app_a,
            Some(vec!["order.shipped"]),
            Receiver::start().await,
        )
        .await,
        endpoint(&http, &base, "b/all", &app_b, None, Receiver::start().await).await,
    ];

    // Publishers: publisher p publishes events p, p+4, p+8, …; every tenth
    // goes to app b, unordered; two in three of app a's carry one of the
    // publisher's own ordering keys.
    let history = Arc::new(Mutex::new(Vec::<Publish>::new()));
    let published = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut publishers = Vec::new();
    for p in 0..PUBLISHERS {
        let (http, base, history, published) = (
            http.clone(),
            base.clone(),
            history.clone(),
            published.clone(),
        );
        let (app_a, app_b, events) = (app_a.clone(), app_b.clone(), plan.events);
        publishers.push(tokio::spawn(async move {
            let mut sequences = [0u64; KEYS_PER_PUBLISHER];
            for n in (p..events).step_by(PUBLISHERS) {
                let to_b = n % 10 == 0;
                let ordered = (!to_b && n % 3 != 0).then(|| {
                    let k = n % KEYS_PER_PUBLISHER;
                    sequences[k] += 1;
                    (format!("key-{p}-{k}"), sequences[k])
                });
                let mut publish = Publish {
                    tag: format!("{MARKER}-{n}"),
                    app: if to_b { app_b.clone() } else { app_a.clone() },
                    event_type: if n % 2 == 0 {
                        "order.paid"
                    } else {
                        "order.shipped"
                    }
                    .into(),
                    ordered,
                    outcome: Outcome::Indeterminate,
                    retried: 0,
                };
                let key = format!("publish-{n}");
                history::publish(&http, &base, &mut publish, &key, Duration::from_secs(60)).await;
                assert!(
                    matches!(publish.outcome, Outcome::Accepted(_)),
                    "{} was not accepted: {:?}",
                    publish.tag,
                    publish.outcome
                );
                let reuse = n % 97 == 0;
                history.lock().unwrap().push(publish.clone());
                if reuse {
                    // The same key with another body: refused, never stored.
                    let mut other = Publish {
                        tag: format!("{MARKER}-{n}-reused-key"),
                        ordered: None,
                        outcome: Outcome::Indeterminate,
                        retried: 0,
                        ..publish
                    };
                    history::publish(&http, &base, &mut other, &key, Duration::from_secs(60)).await;
                    assert!(
                        matches!(other.outcome, Outcome::Refused(_)),
                        "a reused key with another body: {:?}",
                        other.outcome
                    );
                    history.lock().unwrap().push(other);
                }
                published.fetch_add(1, SeqCst);
            }
        }));
    }

    // The killer: SIGKILL after a random pause, restart at once; while
    // publishing lasts, and at least three times.
    let done_publishing = Arc::new(AtomicBool::new(false));
    let killer = {
        let (db, done, log) = (db.clone(), done_publishing.clone(), log.clone());
        let (low, high) = plan.kill_every;
        let pauses: Vec<u64> = (0..10_000).map(|_| random.between(low, high)).collect();
        tokio::spawn(async move {
            let mut process = first;
            let mut kills = 0;
            for pause in pauses {
                if kills >= 3 && done.load(SeqCst) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(pause)).await;
                process.kill();
                kills += 1;
                process = Process::serve_appending(&db, port, &env, &log).await;
            }
            (process, kills)
        })
    };
    for publisher in publishers {
        publisher.await.unwrap();
    }
    let publishing = started.elapsed();
    done_publishing.store(true, SeqCst);
    let (last, kills) = killer.await.unwrap();

    let publishes = history.lock().unwrap().clone();
    let report = wait_until(
        Duration::from_secs(120),
        "every accepted event delivered or dead",
        || async {
            let mut dead = history::dead_letters(&base, &app_a).await;
            dead.extend(history::dead_letters(&base, &app_b).await);
            let report = history::check(&publishes, &subscribers, &dead);
            report.lost.is_empty().then_some(report)
        },
    )
    .await;
    let bound = kills * IN_FLIGHT * subscribers.len();
    println!(
        "{engine:?} seed {seed}: {kills} kills, {} publishes in {publishing:?}, then delivered in {:?}: {report}; {:?}",
        publishes.len(),
        started.elapsed() - publishing,
        history::tally(&publishes),
    );
    report.assert_holds(bound);
    assert_eq!(report.refused, publishes.len() - plan.events);

    assert!(last.terminate().success());
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    let mut secrets = vec![
        ("the payload", MARKER.to_owned()),
        ("the admin token", ADMIN_TOKEN.to_owned()),
    ];
    for subscriber in &subscribers {
        secrets.push(("a secret", subscriber.secret.clone()));
        secrets.push((
            "a secret's key",
            subscriber.secret["whsec_".len()..].to_owned(),
        ));
        for receipt in subscriber.receiver.requests().iter().take(50) {
            for signature in receipt.header("webhook-signature").split(' ') {
                secrets.push((
                    "a signature",
                    signature.split_once(',').unwrap().1.to_owned(),
                ));
            }
        }
    }
    assert_scrubbed(&text, &secrets);
    let ids: HashSet<&str> = publishes
        .iter()
        .filter_map(|p| match &p.outcome {
            Outcome::Accepted(id) => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids.len(), plan.events, "one event per accepted publish");
}
