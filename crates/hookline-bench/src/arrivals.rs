//! What arrived at the destination, whichever it is: the record the ledger, the
//! delivery rate and the latencies are computed from.
//!
//! Two producers feed it: the HTTP sink (`sink.rs`, one record per request, ok
//! when answered 200) and the RabbitMQ consumer (`rabbitmq.rs`, one record per
//! message consumed, always ok). Each sends one small [`Arrival`] down an
//! unbounded channel through a [`Recorder`]; a single collector task folds them
//! into a map keyed by (event, endpoint), so no producer ever takes a shared
//! lock. Keeping one record type for both destinations is what lets `main.rs`
//! compute every result the same way for HTTP and for RabbitMQ.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Nanoseconds since one fixed instant, the time axis every record in this run shares.
#[derive(Debug, Clone, Copy)]
pub struct Timebase(Instant);

impl Timebase {
    pub fn new() -> Self {
        Self(Instant::now())
    }
    pub fn now_ns(&self) -> u64 {
        self.ns(Instant::now())
    }
    pub fn ns(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.0).as_nanos() as u64
    }
    pub fn instant(&self, ns: u64) -> Instant {
        self.0 + std::time::Duration::from_nanos(ns)
    }
}

/// A (event, endpoint) pair: the ULID of the `webhook-id` and the endpoint index.
pub type PairKey = (u128, u16);

/// What the destination saw of one (event, endpoint) pair.
#[derive(Debug, Clone, Copy)]
pub struct PairRecord {
    /// Arrival of the first request (any answer).
    pub first_ns: u64,
    /// Arrival of the first request answered 200, `u64::MAX` if none yet.
    pub ok_ns: u64,
    /// Requests received for this pair.
    pub requests: u32,
}

/// The collector's state, read at the end of a phase.
#[derive(Debug, Default)]
pub struct Collected {
    pub pairs: HashMap<PairKey, PairRecord>,
    /// Requests whose webhook-id or endpoint could not be read.
    pub unreadable: u64,
    /// 200 answers for a pair that already had one (at-least-once re-sends).
    pub duplicate_oks: u64,
}

/// Live counters, readable at any time without a lock.
#[derive(Debug, Default)]
pub struct SinkCounters {
    /// Requests answered (any status), or messages consumed.
    pub requests: AtomicU64,
    /// Requests answered with the failure status (500 unless --fail-status; never for RabbitMQ).
    pub failed: AtomicU64,
    /// Distinct (event, endpoint) pairs answered 200 (maintained by the collector).
    pub unique_ok: AtomicU64,
    /// Arrival of the latest pair's first 200 (ns on the timebase).
    pub last_unique_ok_ns: AtomicU64,
    /// Requests being answered right now (received, answer not yet sent; HTTP only).
    pub in_flight: AtomicU64,
    /// The most requests seen in flight at once (HTTP only).
    pub peak_in_flight: AtomicU64,
    /// Sum over requests of the requests in flight when each arrived (itself included):
    /// divided by `requests`, the concurrency a request saw on average (HTTP only).
    pub in_flight_sum: AtomicU64,
}

/// One request or message, as a producer reports it.
struct Arrival {
    /// The pair, if the endpoint and the `webhook-id` could be read.
    pair: Option<PairKey>,
    at_ns: u64,
    /// Answered 200 (HTTP), or consumed (RabbitMQ).
    ok: bool,
}

enum Message {
    Arrival(Arrival),
    /// Answered once every message sent before it has been folded in.
    Flush(tokio::sync::oneshot::Sender<()>),
}

/// The arrivals of a run: the collector task, its state and the live counters.
pub struct Arrivals {
    pub counters: Arc<SinkCounters>,
    collected: Arc<Mutex<Collected>>,
    tx: mpsc::UnboundedSender<Message>,
    collector: JoinHandle<()>,
}

/// What a producer (the HTTP sink, a RabbitMQ consumer) records arrivals through;
/// cheap to clone, one per connection or consumer.
#[derive(Clone)]
pub struct Recorder {
    pub counters: Arc<SinkCounters>,
    tx: mpsc::UnboundedSender<Message>,
}

impl Recorder {
    /// Counts one request (or message) and hands it to the collector.
    pub fn record(&self, pair: Option<PairKey>, at_ns: u64, ok: bool) {
        self.record_batch([pair], at_ns, ok);
    }

    /// One request that carried `pairs` (a batch: `--batch`), answered `ok` or not.
    pub fn record_batch(
        &self,
        pairs: impl IntoIterator<Item = Option<PairKey>>,
        at_ns: u64,
        ok: bool,
    ) {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
        }
        for pair in pairs {
            let _ = self.tx.send(Message::Arrival(Arrival { pair, at_ns, ok }));
        }
    }
}

impl Arrivals {
    /// Starts the collector task.
    pub fn start() -> Self {
        let counters = Arc::new(SinkCounters::default());
        let collected = Arc::new(Mutex::new(Collected::default()));
        let (tx, rx) = mpsc::unbounded_channel();
        let collector = tokio::spawn(collect(rx, collected.clone(), counters.clone()));
        Self {
            counters,
            collected,
            tx,
            collector,
        }
    }

    /// A handle for one producer.
    pub fn recorder(&self) -> Recorder {
        Recorder {
            counters: self.counters.clone(),
            tx: self.tx.clone(),
        }
    }

    /// Waits until every arrival recorded so far has been folded in, then runs `f` on the state.
    pub async fn with_collected<T>(&self, f: impl FnOnce(&mut Collected) -> T) -> T {
        // A marker through the same channel: once the collector has passed it, every
        // earlier record is in the map.
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let _ = self.tx.send(Message::Flush(done_tx));
        let _ = done_rx.await;
        let mut collected = self.collected.lock().expect("collector never panics");
        f(&mut collected)
    }

    /// Forgets every pair and counter (between the Hookline phase and the ceiling phase).
    pub async fn reset(&self) {
        self.with_collected(|c| {
            c.pairs.clear();
            c.unreadable = 0;
            c.duplicate_oks = 0;
        })
        .await;
        self.counters.requests.store(0, Ordering::Relaxed);
        self.counters.failed.store(0, Ordering::Relaxed);
        self.counters.unique_ok.store(0, Ordering::Relaxed);
        self.counters.last_unique_ok_ns.store(0, Ordering::Relaxed);
        self.counters.peak_in_flight.store(0, Ordering::Relaxed);
        self.counters.in_flight_sum.store(0, Ordering::Relaxed);
    }

    pub fn stop(self) {
        self.collector.abort();
    }
}

async fn collect(
    mut rx: mpsc::UnboundedReceiver<Message>,
    collected: Arc<Mutex<Collected>>,
    counters: Arc<SinkCounters>,
) {
    let mut buffer = Vec::with_capacity(4096);
    let mut flushes = Vec::new();
    while rx.recv_many(&mut buffer, 4096).await > 0 {
        {
            let mut state = collected.lock().expect("not poisoned");
            for message in buffer.drain(..) {
                let arrival = match message {
                    Message::Arrival(arrival) => arrival,
                    Message::Flush(done) => {
                        flushes.push(done);
                        continue;
                    }
                };
                let Some(pair) = arrival.pair else {
                    state.unreadable += 1;
                    continue;
                };
                let record = state.pairs.entry(pair).or_insert(PairRecord {
                    first_ns: arrival.at_ns,
                    ok_ns: u64::MAX,
                    requests: 0,
                });
                record.requests += 1;
                record.first_ns = record.first_ns.min(arrival.at_ns);
                if arrival.ok {
                    if record.ok_ns == u64::MAX {
                        record.ok_ns = arrival.at_ns;
                        counters.unique_ok.fetch_add(1, Ordering::Relaxed);
                        counters
                            .last_unique_ok_ns
                            .fetch_max(arrival.at_ns, Ordering::Relaxed);
                    } else {
                        record.ok_ns = record.ok_ns.min(arrival.at_ns);
                        state.duplicate_oks += 1;
                    }
                }
            }
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}
