//! The delivery engine.
//!
//! A [`Dispatcher`] claims due deliveries in batches under a lease, sends each
//! as a signed Standard Webhooks POST, classifies the outcome with
//! `hookline_core::classify`, decides the next step with the endpoint's
//! `RetryPolicy`, and writes attempts back in batches — in the same
//! transaction as its next claim.
//!
//! # Layout
//!
//! - [`sender`]: the HTTP client — signing, SSRF-safe resolution, no redirects,
//!   timeouts, bounded response capture; [`mail`] and `brokers` for the
//!   endpoints that are not HTTP (`mailto:`; `redis://`, `nats://`,
//!   `amqp://`: one file per kind of broker, behind one trait).
//! - `engine`: the dispatch loop, the bounded pool of in-flight sends and the
//!   graceful drain.
//! - [`turn`]: one turn — record finished attempts, then claim by the pure plan
//!   of `hookline_core::claim` — in one transaction the dispatcher runs.
//! - [`room`]: the dispatcher's in-memory state — requests in flight per endpoint
//!   under each endpoint's adaptive limit, and the hand-off inbox publishes put
//!   fresh deliveries on.

mod brokers;
mod engine;
pub mod mail;
pub mod metrics;
pub mod room;
pub mod sender;
pub mod turn;

use std::time::Duration;

use hookline_core::breaker::BreakerPolicy;
use hookline_core::concurrency::ConcurrencyPolicy;
use hookline_core::retry::RetryPolicy;

pub use engine::Dispatcher;
pub use metrics::Heartbeat;

/// How a dispatcher behaves. Every field has a documented default (see `docs/configuration.md`).
#[derive(Debug, Clone)]
pub struct DispatcherConfig {
    /// The deployment's retry policy; endpoints may override parts of it.
    pub retry: RetryPolicy,
    /// The per-endpoint circuit breaker's knobs.
    pub breaker: BreakerPolicy,
    /// The whole request, from connect to the last byte of the response we read.
    pub request_timeout: Duration,
    /// How long a claim holds a delivery; after that another dispatcher may take it.
    /// Must comfortably exceed `request_timeout`.
    pub lease: Duration,
    /// The most deliveries claimed in one round trip.
    pub batch_size: u32,
    /// The most requests in flight at once from this process.
    pub max_in_flight: usize,
    /// How many requests may be in flight from this process to one endpoint: a
    /// limit per endpoint that adapts to the receiver, between a floor and a
    /// ceiling (so a slow endpoint cannot take every permit).
    pub concurrency: ConcurrencyPolicy,
    /// How far ahead a rate-limited endpoint's send slot may be reserved.
    pub rate_lookahead: Duration,
    /// Whether endpoints may resolve to loopback, private or link-local addresses.
    pub allow_private_destinations: bool,
    /// An HTTP proxy every delivery goes through (`http://host:port`: CONNECT
    /// for `https` endpoints, forwarding for `http` ones), so deliveries leave
    /// from the proxy's fixed addresses. The destination guard still applies:
    /// see [`sender`].
    pub egress_proxy: Option<String>,
    /// How much of a response body is kept on the attempt row.
    pub max_response_body_bytes: usize,
    /// The longest the claim loop sleeps without a wake-up (a safety net only).
    pub idle_poll: Duration,
    /// On shutdown, how long in-flight requests may take before their leases are released.
    pub drain_timeout: Duration,
    /// How many endpoints get their own `endpoint` label on the attempts
    /// counter (later ones share `other`); 0, the default, adds no such label.
    pub metrics_endpoint_cap: usize,
    /// The SMTP server e-mail notifications are sent through; `None`: no
    /// e-mail (a `mailto:` endpoint's attempts fail, and are retried).
    pub smtp: Option<mail::SmtpConfig>,
    /// The program whose `transform-worker` command runs endpoints' jq
    /// transforms (`hookline_transform`): the `hookline` binary itself.
    pub transform_worker: std::path::PathBuf,
}

impl Default for DispatcherConfig {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            breaker: BreakerPolicy::default(),
            request_timeout: Duration::from_secs(10),
            lease: Duration::from_secs(30),
            batch_size: 128,
            max_in_flight: 256,
            concurrency: ConcurrencyPolicy::default(),
            rate_lookahead: Duration::from_secs(1),
            allow_private_destinations: false,
            egress_proxy: None,
            max_response_body_bytes: 64 * 1024,
            idle_poll: Duration::from_secs(1),
            drain_timeout: Duration::from_secs(15),
            metrics_endpoint_cap: 0,
            smtp: None,
            transform_worker: hookline_transform::default_worker(),
        }
    }
}

/// A dispatcher failure that stops it.
#[derive(Debug, thiserror::Error)]
pub enum DispatchError {
    #[error("could not build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
    #[error(transparent)]
    Store(#[from] hookline_store::StoreError),
    #[error("could not set up e-mail: {0}")]
    Mail(String),
}
