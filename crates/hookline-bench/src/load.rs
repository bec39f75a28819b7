//! The load generator: C producers publish N events, each with a due time.
//!
//! With `--rate R` event i is due at t0 + i/R (an open-loop schedule): a pacer
//! thread sleeps until each event (or batch) is due and passes it to the next
//! free producer; if it is late — because Hookline answered slowly and every
//! producer was busy — the event is still due at its scheduled time, so that
//! generator lag shows up as latency instead of hiding it. The pacer is an OS
//! thread because tokio's timer rounds each deadline up to its next millisecond
//! tick: producers sleeping on it sent 1.4 ms (p50) after the due time, and that
//! lag was in every latency figure before `--rate`'s pacer. With `--rate 0`
//! producers take the next event index from a shared counter, and an event is
//! due when its request is sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context};
use serde::Deserialize;

use tokio::sync::mpsc;

use crate::api::{event_key, Api};
use crate::arrivals::Timebase;

/// What to publish.
#[derive(Debug, Clone)]
pub struct Plan {
    pub events: u64,
    /// Events per second; 0 = as fast as possible.
    pub rate: f64,
    pub concurrency: u32,
    pub payload_bytes: usize,
    pub ordered_share: f64,
    pub keys: u64,
    pub seed: u64,
    /// Events per `/events/batch` request; `None` publishes one by one.
    pub batch: Option<u32>,
    /// Added to each event's index before the seeded draws (the backlog and the
    /// measured phase draw different keys).
    pub stream: u64,
}

/// What the producers got back.
#[derive(Debug, Default)]
pub struct Published {
    /// (event ULID, due time in ns on the timebase) of every accepted event.
    pub accepted: Vec<(u128, u64)>,
    /// Events in requests answered with something other than success.
    pub rejected: u64,
    /// Events in requests that failed in transport (no answer).
    pub transport_errors: u64,
    /// The first request's send time (ns).
    pub first_send_ns: u64,
    /// The last successful answer's arrival (ns).
    pub last_accept_ns: u64,
    /// From each accepted event's due time to its request's answer (µs).
    pub answered_us: Vec<u64>,
    /// From each event's due time to its request's send (µs): the generator's own lag.
    pub sent_lag_us: Vec<u64>,
    /// A few error messages, for the report.
    pub error_samples: Vec<String>,
}

impl Published {
    /// Events accepted per second, from the first send to the last acceptance.
    pub fn rate(&self) -> f64 {
        let seconds = self.seconds();
        if seconds > 0.0 {
            self.accepted.len() as f64 / seconds
        } else {
            0.0
        }
    }

    pub fn seconds(&self) -> f64 {
        self.last_accept_ns.saturating_sub(self.first_send_ns) as f64 / 1e9
    }
}

struct Shared {
    plan: Plan,
    api: Api,
    url: String,
    timebase: Timebase,
    /// With `--rate`: when each event is due.
    schedule: Schedule,
    /// Without `--rate`: the next event index.
    next: AtomicU64,
    /// With `--rate`: the first index of each unit as it falls due, from the pacer.
    paced: Option<tokio::sync::Mutex<mpsc::UnboundedReceiver<u64>>>,
    pad: String,
    progress: indicatif::ProgressBar,
    result: Mutex<Published>,
}

#[derive(Deserialize)]
struct Accepted {
    id: String,
}

#[derive(Deserialize)]
struct BatchAccepted {
    data: Vec<BatchItem>,
}

/// One entry of a batch answer: an accepted event has an id; a refused one a status and code.
#[derive(Deserialize)]
struct BatchItem {
    id: Option<String>,
}

/// Publishes `plan.events` events to `app` and waits for every answer.
pub async fn publish(
    api: Api,
    app: String,
    plan: Plan,
    timebase: Timebase,
    progress: indicatif::ProgressBar,
) -> anyhow::Result<Published> {
    let url = match plan.batch {
        None => format!("{}/v1/apps/{app}/events", api.base),
        Some(_) => format!("{}/v1/apps/{app}/events/batch", api.base),
    };
    // `{"pad":""}` is 10 bytes; the pad fills the rest.
    let pad = "x".repeat(plan.payload_bytes.saturating_sub(10));
    let schedule = Schedule {
        events: plan.events,
        unit: plan.batch.map_or(1, u64::from),
        rate: plan.rate,
        t0_ns: timebase.now_ns(),
    };
    let (pacer, paced) = match plan.rate > 0.0 {
        true => {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(tokio::sync::Mutex::new(rx)))
        }
        false => (None, None),
    };
    if let Some(pacer) = pacer {
        std::thread::Builder::new()
            .name("pacer".into())
            .spawn(move || pace(schedule, &timebase, &pacer))
            .context("starting the pacer thread")?;
    }
    let shared = Arc::new(Shared {
        schedule,
        paced,
        plan,
        api,
        url,
        timebase,
        next: AtomicU64::new(0),
        pad,
        progress,
        result: Mutex::new(Published {
            first_send_ns: u64::MAX,
            ..Published::default()
        }),
    });
    let mut producers = tokio::task::JoinSet::new();
    for _ in 0..shared.plan.concurrency {
        producers.spawn(producer(shared.clone()));
    }
    while let Some(outcome) = producers.join_next().await {
        if let Err(error) = outcome.context("a producer panicked").and_then(|r| r) {
            producers.abort_all();
            return Err(error);
        }
    }
    shared.progress.finish();
    let mut result = std::mem::take(&mut *shared.result.lock().expect("not poisoned"));
    if result.first_send_ns == u64::MAX {
        result.first_send_ns = 0;
    }
    Ok(result)
}

/// The `--rate` schedule: event `i` is due at `t0_ns + i / rate`; a unit (one
/// request: an event, or a batch) goes out when its last event is due.
#[derive(Debug, Clone, Copy)]
struct Schedule {
    events: u64,
    unit: u64,
    rate: f64,
    t0_ns: u64,
}

impl Schedule {
    /// Event `i`'s due time (ns on the timebase).
    fn due(&self, i: u64) -> u64 {
        self.t0_ns + (i as f64 / self.rate * 1e9) as u64
    }

    /// Each unit's first index and the time it goes out, in order.
    fn units(self) -> impl Iterator<Item = (u64, u64)> {
        (0..self.events)
            .step_by(self.unit as usize)
            .map(move |start| (start, self.due((start + self.unit).min(self.events) - 1)))
    }
}

/// Runs `schedule` on a thread of its own: sleeps until each unit goes out and
/// passes on its first index (never before it is due). Stops early when the
/// producers have gone.
fn pace(schedule: Schedule, timebase: &Timebase, units: &mpsc::UnboundedSender<u64>) {
    for (start, at) in schedule.units() {
        let at = timebase.instant(at);
        std::thread::sleep(at.saturating_duration_since(std::time::Instant::now()));
        if units.send(start).is_err() {
            return;
        }
    }
}

async fn producer(shared: Arc<Shared>) -> anyhow::Result<()> {
    let plan = &shared.plan;
    let unit = shared.schedule.unit;
    let body_capacity = (plan.payload_bytes + 96) * unit as usize + 16;
    let mut dues = Vec::with_capacity(unit as usize);
    loop {
        let start = match &shared.paced {
            Some(paced) => match paced.lock().await.recv().await {
                Some(start) => start,
                None => return Ok(()),
            },
            None => shared.next.fetch_add(unit, Ordering::Relaxed),
        };
        if start >= plan.events {
            return Ok(());
        }
        let end = (start + unit).min(plan.events);
        dues.clear();
        let sent_ns = shared.timebase.now_ns();
        match plan.rate > 0.0 {
            // Each event of a batch keeps its own due time.
            true => dues.extend((start..end).map(|i| shared.schedule.due(i))),
            false => dues.extend((start..end).map(|_| sent_ns)),
        }

        let mut body = String::with_capacity(body_capacity);
        if plan.batch.is_some() {
            body.push_str(r#"{"events":["#);
        }
        for i in start..end {
            if i > start {
                body.push(',');
            }
            write_event(&mut body, plan, &shared.pad, i);
        }
        if plan.batch.is_some() {
            body.push_str("]}");
        }

        let outcome = shared
            .api
            .http
            .post(&shared.url)
            .bearer_auth(&shared.api.token)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await;
        let count = end - start;
        let mut ids = Vec::new();
        let mut failure = None;
        let mut transport = false;
        match outcome {
            Err(error) => {
                transport = true;
                failure = Some(format!("{error:#}"));
            }
            Ok(response) => {
                let status = response.status();
                let bytes = response.bytes().await.unwrap_or_default();
                if plan.batch.is_some() && status.as_u16() == 404 {
                    bail!(
                        "POST {} answered 404: this Hookline has no batch publish endpoint \
                         (POST /v1/apps/{{app}}/events/batch); run without --batch. Body: {}",
                        shared.url,
                        String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
                    );
                }
                if status.is_success() {
                    match parse_ids(&bytes, plan.batch.is_some()) {
                        Ok(parsed) if parsed.len() as u64 == count => ids = parsed,
                        Ok(parsed) => {
                            failure =
                                Some(format!("{status}: {} ids for {count} events", parsed.len()))
                        }
                        Err(error) => failure = Some(format!("{status}: {error:#}")),
                    }
                } else {
                    failure = Some(format!(
                        "{status}: {}",
                        String::from_utf8_lossy(&bytes[..bytes.len().min(300)])
                    ));
                }
            }
        }
        let answered_ns = shared.timebase.now_ns();
        {
            let mut result = shared.result.lock().expect("not poisoned");
            result.first_send_ns = result.first_send_ns.min(sent_ns);
            for &due in &dues {
                let lag = (sent_ns.saturating_sub(due) / 1000).max(1);
                result.sent_lag_us.push(lag);
            }
            match failure {
                None => {
                    result.last_accept_ns = result.last_accept_ns.max(answered_ns);
                    for (id, due) in ids.into_iter().zip(dues.iter().copied()) {
                        match id {
                            Some(id) => {
                                result.accepted.push((id, due));
                                let us = (answered_ns.saturating_sub(due) / 1000).max(1);
                                result.answered_us.push(us);
                            }
                            None => result.rejected += 1,
                        }
                    }
                }
                Some(message) => {
                    if transport {
                        result.transport_errors += count;
                    } else {
                        result.rejected += count;
                    }
                    if result.error_samples.len() < 5 {
                        result.error_samples.push(message);
                    }
                }
            }
        }
        shared.progress.inc(count);
    }
}

/// The event ids of an answer, in request order; `None` for a batch item that was refused.
fn parse_ids(bytes: &[u8], batch: bool) -> anyhow::Result<Vec<Option<u128>>> {
    let ids: Vec<Option<String>> = if batch {
        let parsed: BatchAccepted = serde_json::from_slice(bytes)?;
        parsed.data.into_iter().map(|item| item.id).collect()
    } else {
        let parsed: Accepted = serde_json::from_slice(bytes)?;
        vec![Some(parsed.id)]
    };
    ids.iter()
        .map(|id| match id {
            None => Ok(None),
            Some(id) => event_key(id)
                .map(Some)
                .with_context(|| format!("`{id}` is not an event id")),
        })
        .collect()
}

/// `{"event_type":"bench","payload":{"pad":"xx…"},"ordering_key":"k17"}`; the key only for
/// the `ordered_share` of events, drawn from the seed and the event's index.
fn write_event(out: &mut String, plan: &Plan, pad: &str, index: u64) {
    use std::fmt::Write;
    out.push_str(r#"{"event_type":"bench","payload":{"pad":""#);
    out.push_str(pad);
    out.push_str(r#""}"#);
    let draw = splitmix64(plan.seed ^ splitmix64(plan.stream.wrapping_add(index)));
    let ordered = ((draw >> 11) as f64 / (1u64 << 53) as f64) < plan.ordered_share;
    if ordered {
        let key = splitmix64(draw) % plan.keys;
        let _ = write!(out, r#","ordering_key":"k{key}""#);
    }
    out.push('}');
}

/// A fast, well-mixed hash of a counter (SplitMix64), so every draw depends only
/// on the seed and the event's index, not on which producer sent it or when.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(ordered_share: f64) -> Plan {
        Plan {
            events: 1,
            rate: 0.0,
            concurrency: 1,
            payload_bytes: 1024,
            ordered_share,
            keys: 10,
            seed: 7,
            batch: None,
            stream: 0,
        }
    }

    #[test]
    fn a_unit_goes_out_when_its_last_event_is_due() {
        let schedule = Schedule {
            events: 5,
            unit: 2,
            rate: 1000.0,
            t0_ns: 7,
        };
        let ms = 1_000_000;
        assert_eq!(
            schedule.units().collect::<Vec<_>>(),
            [(0, 7 + ms), (2, 7 + 3 * ms), (4, 7 + 4 * ms)]
        );
        assert_eq!(schedule.due(3), 7 + 3 * ms);
    }

    #[test]
    fn the_pacer_passes_each_unit_on_in_order_and_never_before_it_is_due() {
        let timebase = Timebase::new();
        let schedule = Schedule {
            events: 20,
            unit: 1,
            rate: 2000.0,
            t0_ns: timebase.now_ns(),
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        let pacer = std::thread::spawn(move || pace(schedule, &timebase, &tx));
        let mut passed = Vec::new();
        while let Some(start) = rx.blocking_recv() {
            let received = timebase.now_ns();
            assert!(received >= schedule.due(start), "unit {start} came early");
            passed.push(start);
        }
        pacer.join().unwrap();
        assert_eq!(passed, (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn payload_has_the_requested_size_and_the_body_is_json() {
        let plan = plan(1.0);
        let pad = "x".repeat(plan.payload_bytes - 10);
        let mut body = String::new();
        write_event(&mut body, &plan, &pad, 3);
        let value: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            serde_json::to_string(&value["payload"]).unwrap().len(),
            1024
        );
        assert!(value["ordering_key"].as_str().unwrap().starts_with('k'));
    }

    #[test]
    fn ordered_share_is_respected_and_deterministic() {
        let plan = plan(0.5);
        let pad = String::new();
        let ordered = (0..10_000)
            .filter(|i| {
                let mut body = String::new();
                write_event(&mut body, &plan, &pad, *i);
                body.contains("ordering_key")
            })
            .count();
        assert!((4_700..5_300).contains(&ordered), "{ordered}");
        let (mut a, mut b) = (String::new(), String::new());
        write_event(&mut a, &plan, &pad, 42);
        write_event(&mut b, &plan, &pad, 42);
        assert_eq!(a, b);
    }
}
