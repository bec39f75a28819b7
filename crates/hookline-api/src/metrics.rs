//! The metrics the API emits: every name once, here (docs/api.md's metric table
//! and the dashboards are checked against [`NAMES`]).

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::AppState;

/// Events accepted by publishes (and test sends); by `app` only with `metrics_app_label`.
pub const EVENTS_ACCEPTED: &str = "hookline_events_accepted_total";
/// Seconds from a request's arrival to its answer's head, by `route` (the
/// route's template, e.g. `/v1/apps/{app}/events`), `method` and `status`.
pub const REQUEST_DURATION: &str = "hookline_api_request_duration_seconds";

/// Every metric this crate emits.
pub const NAMES: &[&str] = &[EVENTS_ACCEPTED, REQUEST_DURATION];

/// Registers the counters this crate emits at zero, so a fresh process
/// exports them from its first scrape (per app only once an app publishes).
pub fn zero(app_label: bool) {
    if !app_label {
        ::metrics::counter!(EVENTS_ACCEPTED).increment(0);
    }
}

pub(crate) fn events_accepted(state: &AppState, app: &hookline_core::ids::AppId, count: u64) {
    if state.config.metrics_app_label {
        ::metrics::counter!(EVENTS_ACCEPTED, "app" => app.to_string()).increment(count);
    } else {
        ::metrics::counter!(EVENTS_ACCEPTED).increment(count);
    }
}

/// Times every request by its route template: never by its raw path, whose ids
/// would make a series per resource. Unmatched paths share `unmatched`.
pub(crate) async fn track(State(_): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    // Only the methods routes use: anyone can send `FOO /healthz`, and a label
    // value per invented method would grow the registry without bound.
    let method: &'static str = match request.method().as_str() {
        "GET" => "GET",
        "POST" => "POST",
        "PATCH" => "PATCH",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "HEAD" => "HEAD",
        "OPTIONS" => "OPTIONS",
        _ => "other",
    };
    let started = Instant::now();
    let response = next.run(request).await;
    ::metrics::histogram!(
        REQUEST_DURATION,
        "route" => route,
        "method" => method,
        "status" => response.status().as_u16().to_string()
    )
    .record(started.elapsed().as_secs_f64());
    response
}
