//! The sink: a small HTTP/1.1 keep-alive receiver on 127.0.0.1 that answers every
//! POST at once and records what arrived.
//!
//! Per request the handler does only this: read the path (`/e{i}` names the
//! endpoint) and the `webhook-id` header, drain the body, draw 200 or the failure status from
//! its connection's seeded RNG, bump two atomic counters and send one small
//! record down an unbounded channel. A single collector task folds the records
//! into a map keyed by (event, endpoint), so the handler never takes a shared
//! lock.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::{Rng, SeedableRng};
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

/// What the sink saw of one (event, endpoint) pair.
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
    /// Requests whose webhook-id or path could not be read.
    pub unreadable: u64,
    /// 200 answers for a pair that already had one (at-least-once re-sends).
    pub duplicate_oks: u64,
}

/// Live counters, readable at any time without a lock.
#[derive(Debug, Default)]
pub struct SinkCounters {
    /// Requests answered, any status.
    pub requests: AtomicU64,
    /// Requests answered with the failure status (500 unless --fail-status).
    pub failed: AtomicU64,
    /// Distinct (event, endpoint) pairs answered 200 (maintained by the collector).
    pub unique_ok: AtomicU64,
    /// Arrival of the latest pair's first 200 (ns on the timebase).
    pub last_unique_ok_ns: AtomicU64,
    /// Requests being answered right now (received, answer not yet sent).
    pub in_flight: AtomicU64,
    /// The most requests seen in flight at once.
    pub peak_in_flight: AtomicU64,
    /// Sum over requests of the requests in flight when each arrived (itself included):
    /// divided by `requests`, the concurrency a request saw on average.
    pub in_flight_sum: AtomicU64,
}

/// How long the sink takes to answer, like a real receiver doing work.
#[derive(Debug, Clone, Copy, Default)]
pub struct SinkLatency {
    /// Every answer waits this long.
    pub base: std::time::Duration,
    /// Plus this much for every other request in flight at the sink when it arrived:
    /// a receiver that slows down under load (its latency doubles at `base / per_request`
    /// concurrent requests).
    pub per_request: std::time::Duration,
}

struct Arrival {
    /// The pair, if the path and the `webhook-id` could be read.
    pair: Option<PairKey>,
    at_ns: u64,
    ok: bool,
}

enum Message {
    Arrival(Arrival),
    /// Answered once every message sent before it has been folded in.
    Flush(tokio::sync::oneshot::Sender<()>),
}

pub struct Sink {
    pub addr: SocketAddr,
    pub counters: Arc<SinkCounters>,
    collected: Arc<Mutex<Collected>>,
    tx: mpsc::UnboundedSender<Message>,
    accept: JoinHandle<()>,
    collector: JoinHandle<()>,
}

impl Sink {
    /// Binds 127.0.0.1:0 and starts accepting.
    pub async fn start(
        timebase: Timebase,
        fail_share: f64,
        fail_status: u16,
        seed: u64,
        latency: SinkLatency,
    ) -> anyhow::Result<Self> {
        let fail_status = StatusCode::from_u16(fail_status)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let counters = Arc::new(SinkCounters::default());
        let collected = Arc::new(Mutex::new(Collected::default()));
        let (tx, rx) = mpsc::unbounded_channel();
        let collector = tokio::spawn(collect(rx, collected.clone(), counters.clone()));
        let accept = {
            let counters = counters.clone();
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut connection: u64 = 0;
                loop {
                    let Ok((stream, _)) = listener.accept().await else {
                        continue;
                    };
                    let _ = stream.set_nodelay(true);
                    connection += 1;
                    // Each connection draws from its own RNG: no lock, and reproducible per
                    // connection for a given seed.
                    let rng = rand::rngs::StdRng::seed_from_u64(
                        seed ^ connection.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    );
                    let state = Arc::new(Connection {
                        rng: Mutex::new(rng),
                        fail_share,
                        fail_status,
                        latency,
                        timebase,
                        counters: counters.clone(),
                        tx: tx.clone(),
                    });
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |request| {
                            let state = state.clone();
                            async move { Ok::<_, Infallible>(state.handle(request).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .keep_alive(true)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            })
        };
        Ok(Self {
            addr,
            counters,
            collected,
            tx,
            accept,
            collector,
        })
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Waits until every request answered so far has been folded in, then runs `f` on the state.
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
        self.accept.abort();
        self.collector.abort();
    }
}

struct Connection {
    rng: Mutex<rand::rngs::StdRng>,
    fail_share: f64,
    fail_status: StatusCode,
    latency: SinkLatency,
    timebase: Timebase,
    counters: Arc<SinkCounters>,
    tx: mpsc::UnboundedSender<Message>,
}

impl Connection {
    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let at_ns = self.timebase.now_ns();
        let in_flight = self.counters.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.counters
            .peak_in_flight
            .fetch_max(in_flight, Ordering::Relaxed);
        self.counters
            .in_flight_sum
            .fetch_add(in_flight, Ordering::Relaxed);
        let response = self.answer(request, at_ns, in_flight).await;
        self.counters.in_flight.fetch_sub(1, Ordering::Relaxed);
        response
    }

    async fn answer(
        &self,
        request: Request<Incoming>,
        at_ns: u64,
        in_flight: u64,
    ) -> Response<Full<Bytes>> {
        let endpoint = request
            .uri()
            .path()
            .strip_prefix("/e")
            .and_then(|i| i.parse::<u16>().ok());
        let event = request
            .headers()
            .get("webhook-id")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("msg_"))
            .and_then(|v| ulid::Ulid::from_string(v).ok())
            .map(u128::from);
        // Read the whole body, as a real receiver would, so the connection stays reusable.
        let mut body = request.into_body();
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                break;
            }
        }
        let work = self.latency.base + self.latency.per_request * (in_flight - 1) as u32;
        if !work.is_zero() {
            tokio::time::sleep(work).await;
        }
        let ok = !(self.fail_share > 0.0
            && self
                .rng
                .lock()
                .expect("not poisoned")
                .gen_bool(self.fail_share));
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.counters.failed.fetch_add(1, Ordering::Relaxed);
        }
        let _ = self.tx.send(Message::Arrival(Arrival {
            pair: event.zip(endpoint),
            at_ns,
            ok,
        }));
        let status = if ok { StatusCode::OK } else { self.fail_status };
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = status;
        response
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
