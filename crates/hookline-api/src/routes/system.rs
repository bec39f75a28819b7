//! Liveness, readiness, metrics and the 404 fallback.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::{problem, ApiError};
use crate::AppState;

pub(crate) async fn healthz() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({"status": "ok"}))
}

/// Ready when the database answers.
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    match state.store.ping().await {
        Ok(()) => axum::Json(serde_json::json!({"status": "ready"})).into_response(),
        Err(error) => {
            tracing::warn!(%error, "not ready");
            problem(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_ready",
                "the database is unreachable",
            )
        }
    }
}

pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    match &state.config.metrics {
        Some(render) => ([("content-type", "text/plain; version=0.0.4")], render()).into_response(),
        None => ApiError::NotFound("route").into_response(),
    }
}

pub(crate) async fn not_found() -> ApiError {
    ApiError::NotFound("route")
}
