//! Hookline's HTTP API (axum): producer, management and dashboard.
//!
//! # Layout
//!
//! - [`error`]: every failure as RFC 9457 `application/problem+json` with a stable `code`.
//! - `auth`: bearer keys (stored hashed), the [`Access`] each route declares, and its check.
//! - `extract`: the JSON body extractor (413 / 400 / 422 as problem+json).
//! - `views`: the JSON shapes the API answers with.
//! - `catalog`: the event type catalog as publishing checks it.
//! - [`openapi`]: the OpenAPI 3.1 document, generated from the route table.
//! - `routes`: one module per resource.
//! - `portal`: the customer portal's files, links and sessions (docs/portal.md).
//! - [`publish`]: publishing through the store's steps, core's plan and the
//!   hand-off to this process's dispatcher; the group-commit queue.

mod auth;
mod catalog;
pub mod error;
mod extract;
mod limits;
pub mod metrics;
pub mod openapi;
mod portal;
pub mod publish;
mod routes;
mod unread;
mod views;

pub use auth::Access;
pub use limits::RateLimit;
pub use routes::{list as route_list, Route};

use std::sync::Arc;

use axum::Router;
use hookline_core::retry::RetryPolicy;
use hookline_core::time::Clock;
use hookline_store::Store;

/// Renders the Prometheus exposition for `/metrics`.
pub type MetricsRender = Arc<dyn Fn() -> String + Send + Sync>;

/// A check `/readyz` runs besides the database's (the binary wires the
/// dispatcher's heartbeat here); `Err` says what is not ready.
pub type Readiness = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// How the API behaves.
#[derive(Clone)]
pub struct ApiConfig {
    /// The largest event payload (`payload`, serialised) accepted; larger is 413.
    pub max_payload_bytes: usize,
    /// Whether endpoint URLs may name loopback/private addresses directly.
    pub allow_private_destinations: bool,
    /// `/metrics`, if enabled.
    pub metrics: Option<MetricsRender>,
    /// Refuse (422) publishes of types the event type catalog lacks or payloads
    /// its schema refuses; otherwise accept them with a warning in the answer.
    pub refuse_unchecked_events: bool,
    /// Label `hookline_events_accepted_total` by app: one series per app, so
    /// only for deployments with a bounded number of apps.
    pub metrics_app_label: bool,
    /// What else `/readyz` requires (the dispatcher of this process turning).
    pub readiness: Option<Readiness>,
    /// The absolute URL clients reach this deployment at: portal links start with it.
    pub public_url: String,
    /// Per-key request rate limits; `None`: unlimited.
    pub rate_limit: Option<RateLimit>,
    /// The dispatcher of this process, if publishes hand it the fresh
    /// deliveries it can send at once (the binary wires it).
    pub handoff: Option<Arc<publish::DispatchHandoff>>,
    /// The deployment's retry policy (endpoints override parts of it): what
    /// explanations count attempts and the retry window against.
    pub retry: RetryPolicy,
    /// Whether an SMTP server is configured: e-mail notification channels
    /// can be made.
    pub email: bool,
    /// The program whose `transform-worker` command checks and previews
    /// endpoints' jq transforms (`hookline_transform`).
    pub transform_worker: std::path::PathBuf,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            max_payload_bytes: 256 * 1024,
            allow_private_destinations: false,
            metrics: None,
            refuse_unchecked_events: false,
            metrics_app_label: false,
            readiness: None,
            public_url: "http://127.0.0.1:8080".into(),
            rate_limit: None,
            handoff: None,
            retry: RetryPolicy::default(),
            email: false,
            transform_worker: hookline_transform::default_worker(),
        }
    }
}

/// What every handler can reach.
#[derive(Clone)]
pub(crate) struct AppState {
    pub store: Store,
    pub clock: Arc<dyn Clock>,
    pub config: Arc<ApiConfig>,
    pub keys: Arc<auth::KeyCache>,
    pub catalog: Arc<catalog::Catalog>,
    pub limits: Option<Arc<limits::KeyLimits>>,
    pub publisher: publish::Publisher,
    /// Where endpoints' transforms are compiled and tried.
    pub transforms: Arc<hookline_transform::Sandbox>,
}

/// The whole API as one router.
pub fn router(store: Store, clock: Arc<dyn Clock>, config: ApiConfig) -> Router {
    build(store, clock, config, false)
}

/// Only the routes that need no key (`/healthz`, `/readyz`, `/metrics`, the
/// documents): what a dispatcher-only process serves, for its probes and scrapes.
pub fn ops_router(store: Store, clock: Arc<dyn Clock>, config: ApiConfig) -> Router {
    build(store, clock, config, true)
}

fn build(store: Store, clock: Arc<dyn Clock>, config: ApiConfig, public_only: bool) -> Router {
    let body_limit = config.max_payload_bytes + extract::ENVELOPE_ALLOWANCE;
    let limits = config
        .rate_limit
        .map(|limit| Arc::new(limits::KeyLimits::new(limit, clock.clone())));
    let transforms = Arc::new(hookline_transform::Sandbox::new(
        &config.transform_worker,
        hookline_transform::default_workers(),
    ));
    let state = AppState {
        publisher: publish::Publisher::start(store.clone(), config.handoff.clone()),
        store,
        clock,
        config: Arc::new(config),
        keys: Arc::default(),
        catalog: Arc::default(),
        limits,
        transforms,
    };
    let https = state.config.public_url.starts_with("https://");
    let mut router = routes::routes(&state, public_only);
    if !public_only {
        router = router.nest("/portal/api", routes::portal_api(&state));
    }
    // Reached over https (its public URL says so): browsers keep to https.
    let router = if https {
        router.layer(axum::middleware::map_response(portal::strict_transport))
    } else {
        router
    };
    router
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::map_response(error::method_not_allowed))
        .layer(axum::middleware::from_fn(unread::close_if_unread))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .with_state(state)
}
