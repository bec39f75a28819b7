//! The sink (`--destination http`): a small HTTP/1.1 keep-alive receiver on
//! 127.0.0.1 that answers every POST at once and records what arrived.
//!
//! Per request the handler does only this: read the path (`/e{i}` names the
//! endpoint) and the `webhook-id` header, drain the body, draw 200 or the failure status from
//! its connection's seeded RNG, bump the atomic counters and record the request
//! through its [`Recorder`] (see `arrivals.rs`: one small record down an
//! unbounded channel, folded by a single collector task, so the handler never
//! takes a shared lock).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rand::{Rng, SeedableRng};
use tokio::task::JoinHandle;

use crate::arrivals::{Arrivals, Recorder, Timebase};

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

/// The HTTP listener; what it receives goes into the run's [`Arrivals`].
pub struct Sink {
    pub addr: SocketAddr,
    accept: JoinHandle<()>,
}

impl Sink {
    /// Binds 127.0.0.1:0 and starts accepting; every request is recorded into `arrivals`.
    pub async fn start(
        arrivals: &Arrivals,
        timebase: Timebase,
        fail_share: f64,
        fail_status: u16,
        seed: u64,
        latency: SinkLatency,
    ) -> anyhow::Result<Self> {
        let fail_status = StatusCode::from_u16(fail_status)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let accept = {
            let recorder = arrivals.recorder();
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
                        recorder: recorder.clone(),
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
        Ok(Self { addr, accept })
    }

    /// `http://127.0.0.1:PORT`
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn stop(self) {
        self.accept.abort();
    }
}

struct Connection {
    rng: Mutex<rand::rngs::StdRng>,
    fail_share: f64,
    fail_status: StatusCode,
    latency: SinkLatency,
    timebase: Timebase,
    recorder: Recorder,
}

impl Connection {
    async fn handle(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let at_ns = self.timebase.now_ns();
        let counters = &self.recorder.counters;
        let in_flight = counters.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        counters
            .peak_in_flight
            .fetch_max(in_flight, Ordering::Relaxed);
        counters
            .in_flight_sum
            .fetch_add(in_flight, Ordering::Relaxed);
        let response = self.answer(request, at_ns, in_flight).await;
        counters.in_flight.fetch_sub(1, Ordering::Relaxed);
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
        let event_of = |id: &str| {
            id.strip_prefix("msg_")
                .and_then(|v| ulid::Ulid::from_string(v).ok())
                .map(u128::from)
        };
        let event = request
            .headers()
            .get("webhook-id")
            .and_then(|v| v.to_str().ok())
            .and_then(event_of);
        let batch = request.headers().contains_key("hookline-batch-size");
        // Read the whole body, as a real receiver would, so the connection stays
        // reusable; a batch's is kept to read its elements' ids.
        let mut body = request.into_body();
        let mut kept = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) if batch => {
                    if let Some(data) = frame.data_ref() {
                        kept.extend_from_slice(data);
                    }
                }
                Ok(_) => {}
                Err(_) => break,
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
        if batch {
            #[derive(serde::Deserialize)]
            struct Element<'a> {
                #[serde(borrow)]
                id: &'a str,
            }
            let elements: Vec<Element> = serde_json::from_slice(&kept).unwrap_or_default();
            let pairs = elements.iter().map(|e| event_of(e.id).zip(endpoint));
            self.recorder.record_batch(pairs, at_ns, ok);
        } else {
            self.recorder.record(event.zip(endpoint), at_ns, ok);
        }
        let status = if ok { StatusCode::OK } else { self.fail_status };
        let mut response = Response::new(Full::new(Bytes::new()));
        *response.status_mut() = status;
        response
    }
}
