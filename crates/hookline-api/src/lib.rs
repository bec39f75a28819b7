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

mod auth;
mod catalog;
pub mod error;
mod extract;
pub mod openapi;
mod routes;
mod unread;
mod views;

pub use auth::Access;
pub use routes::{list as route_list, Route};

use std::sync::Arc;

use axum::Router;
use hookline_core::time::Clock;
use hookline_store::Store;

/// Renders the Prometheus exposition for `/metrics`.
pub type MetricsRender = Arc<dyn Fn() -> String + Send + Sync>;

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
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            max_payload_bytes: 256 * 1024,
            allow_private_destinations: false,
            metrics: None,
            refuse_unchecked_events: false,
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
}

/// The whole API as one router.
pub fn router(store: Store, clock: Arc<dyn Clock>, config: ApiConfig) -> Router {
    let body_limit = config.max_payload_bytes + extract::ENVELOPE_ALLOWANCE;
    let state = AppState {
        store,
        clock,
        config: Arc::new(config),
        keys: Arc::default(),
        catalog: Arc::default(),
    };
    routes::routes(&state)
        .layer(axum::extract::DefaultBodyLimit::max(body_limit))
        .layer(axum::middleware::map_response(error::method_not_allowed))
        .layer(axum::middleware::from_fn(unread::close_if_unread))
        .with_state(state)
}
