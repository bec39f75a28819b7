//! A process frozen at any moment — between statements, inside a transaction
//! holding row locks — holds no other process back for more than a few
//! seconds, and its work is taken over when its leases end (PostgreSQL: two
//! `serve` processes on one database, one of them stopped with SIGSTOP).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helpers::{
    free_port, setup_remote, wait_until, Engine, Process, Receiver, TestDb, ADMIN_TOKEN,
};

fn signal(process: &Process, signal: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, &process.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal}");
}

async fn publish(
    http: &reqwest::Client,
    base: &str,
    app: &str,
    event_type: &str,
    n: u64,
) -> Option<String> {
    let response = http
        .post(format!("{base}/v1/apps/{app}/events"))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"event_type": event_type, "payload": {"n": n}}))
        .timeout(Duration::from_secs(60))
        .send()
        .await
        .ok()?;
    (response.status() == 202).then_some(())?;
    let body: Value = response.json().await.ok()?;
    Some(body["id"].as_str()?.to_owned())
}

/// The distinct `webhook-id`s a receiver got.
fn ids(receiver: &Receiver) -> HashSet<String> {
    receiver
        .requests()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_process_holds_no_other_endpoint_back() {
    let db = TestDb::new(Engine::Postgres).await;
    // Short leases, so the frozen process's claimed work is taken over soon.
    let env = [("HOOKLINE_LEASE_MS", "3000")];
    let frozen = Process::serve(&db, free_port(), &env).await;
    let healthy = Process::serve(&db, free_port(), &env).await;
    let busy = Receiver::start().await;
    let other = Receiver::start().await;
    let (app, _) = setup_remote(&healthy.base, &busy.url, json!({"event_types": ["busy.*"]})).await;
    let http = reqwest::Client::new();
    let created = http
        .post(format!("{}/v1/apps/{app}/endpoints", healthy.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({"url": other.url, "event_types": ["other.*"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    // The busy endpoint is kept busy through the healthy process all along, so
    // its turns need the busy endpoint's row, which the frozen one may hold.
    let stop = tokio_util::sync::CancellationToken::new();
    let load: Vec<_> = (0..4u64)
        .map(|producer| {
            let (http, base, app, stop) = (
                http.clone(),
                healthy.base.clone(),
                app.clone(),
                stop.clone(),
            );
            tokio::spawn(async move {
                let mut accepted = Vec::new();
                let mut n = 1_000_000 * (producer + 1);
                while !stop.is_cancelled() {
                    if let Some(id) = publish(&http, &base, &app, "busy.x", n).await {
                        accepted.push(id);
                    }
                    n += 1;
                }
                accepted
            })
        })
        .collect();

    let mut accepted_busy = Vec::new();
    let mut accepted_other = HashSet::new();
    let mut slowest = Duration::ZERO;
    // Freeze at many points: while both processes publish and deliver, after a
    // different pause each round.
    for round in 0..8u64 {
        let burst: Vec<_> = (0..40)
            .map(|i| {
                let (http, base, app) = (http.clone(), frozen.base.clone(), app.clone());
                tokio::spawn(
                    async move { publish(&http, &base, &app, "busy.x", round * 100 + i).await },
                )
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(20 + 37 * round)).await;
        signal(&frozen, "-STOP");
        let stopped = Instant::now();

        // Another endpoint's events, published through the healthy process.
        let mut expected = HashSet::new();
        for n in 0..10 {
            let id = publish(&http, &healthy.base, &app, "other.x", round * 100 + n)
                .await
                .expect("the healthy process accepts while its peer is frozen");
            expected.insert(id);
        }
        wait_until(
            Duration::from_secs(20),
            &format!("round {round}: the other endpoint's events while a peer is frozen"),
            || async { expected.is_subset(&ids(&other)).then_some(()) },
        )
        .await;
        slowest = slowest.max(stopped.elapsed());
        accepted_other.extend(expected);

        signal(&frozen, "-CONT");
        for publish in burst {
            if let Some(id) = publish.await.unwrap() {
                accepted_busy.push(id);
            }
        }
    }
    stop.cancel();
    for producer in load {
        accepted_busy.extend(producer.await.unwrap());
    }
    eprintln!("slowest round: {slowest:?} from the freeze to the last of ten deliveries");

    // At least once: every accepted event reaches its endpoint, the frozen
    // process's leased work included.
    let expected: HashSet<String> = accepted_busy.into_iter().collect();
    wait_until(
        Duration::from_secs(60),
        "every accepted busy event delivered",
        || async { expected.is_subset(&ids(&busy)).then_some(()) },
    )
    .await;
    assert_eq!(
        ids(&other),
        accepted_other,
        "nothing else reached the other endpoint"
    );
}
