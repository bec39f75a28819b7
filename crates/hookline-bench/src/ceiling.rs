//! The HTTP ceiling: what a plain keep-alive client achieves against the same
//! sink on the same machine, with no storage at all.
//!
//! It sends what Hookline sends — a Standard Webhooks envelope of the same
//! size, freshly signed per request (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature`) — with `--max-in-flight` requests in flight, round-robin
//! over the same `/e{i}` paths. Hookline's delivery rate divided by this is the
//! share of the machine's plain HTTP capacity that Hookline turns into durable,
//! recorded deliveries. The sink does the same work per request in both phases.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookline_core::signing::EndpointSecret;
use hookline_core::time::{Clock, SystemClock};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Ceiling {
    pub requests: u64,
    pub answered_200: u64,
    pub answered_other: u64,
    pub transport_errors: u64,
    pub concurrency: usize,
    pub seconds: f64,
    /// Requests per second (any answer).
    pub rate_per_sec: f64,
}

pub async fn run(
    sink_base: &str,
    endpoints: u16,
    requests: u64,
    concurrency: usize,
    payload_bytes: usize,
    progress: indicatif::ProgressBar,
) -> anyhow::Result<Ceiling> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(concurrency.max(1))
        .tcp_nodelay(true)
        .build()?;
    let payload = serde_json::json!({ "pad": "x".repeat(payload_bytes.saturating_sub(10)) });
    let body = bytes::Bytes::from(hookline_core::model::envelope(
        "bench",
        SystemClock.now(),
        &payload,
    ));
    let secret = Arc::new(EndpointSecret::generate());
    let next = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let other = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (client, body, secret, next, ok, other, errors, progress) = (
            client.clone(),
            body.clone(),
            secret.clone(),
            next.clone(),
            ok.clone(),
            other.clone(),
            errors.clone(),
            progress.clone(),
        );
        let base = sink_base.to_owned();
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    return;
                }
                let id = hookline_core::ids::EventId::generate();
                let timestamp = SystemClock.now().as_secs();
                let signature = secret.sign(id.as_str(), timestamp, &body);
                let outcome = client
                    .post(format!("{base}/e{}", i % u64::from(endpoints)))
                    .header("content-type", "application/json")
                    .header("webhook-id", id.as_str())
                    .header("webhook-timestamp", timestamp.to_string())
                    .header("webhook-signature", signature)
                    .body(body.clone())
                    .send()
                    .await;
                match outcome {
                    Ok(response) => {
                        let status = response.status();
                        // Read the (empty) body, as Hookline reads the response.
                        let _ = response.bytes().await;
                        if status.as_u16() == 200 {
                            ok.fetch_add(1, Ordering::Relaxed);
                        } else {
                            other.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                progress.inc(1);
            }
        });
    }
    while workers.join_next().await.is_some() {}
    let seconds = started.elapsed().as_secs_f64();
    progress.finish();
    Ok(Ceiling {
        requests,
        answered_200: ok.load(Ordering::Relaxed),
        answered_other: other.load(Ordering::Relaxed),
        transport_errors: errors.load(Ordering::Relaxed),
        concurrency,
        seconds,
        rate_per_sec: if seconds > 0.0 {
            requests as f64 / seconds
        } else {
            0.0
        },
    })
}
