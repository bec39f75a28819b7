//! Liveness, readiness, metrics and the 404 fallback.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use crate::error::{problem, ApiError};
use crate::AppState;

pub(crate) async fn healthz() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({"status": "ok"}))
}

/// Ready when the database answers, its schema is this binary's, and this
/// process's dispatcher (if it runs one) is turning.
pub(crate) async fn readyz(State(state): State<AppState>) -> Response {
    let not_ready = |detail: String| {
        tracing::warn!(reason = %detail, "not ready");
        problem(StatusCode::SERVICE_UNAVAILABLE, "not_ready", &detail)
    };
    match state.store.migrations_behind().await {
        Err(error) => {
            // The error (host names, roles) goes to the log, not to a keyless caller.
            tracing::warn!(%error, "readiness: the database did not answer");
            return not_ready("the database is unreachable".into());
        }
        Ok(0) => {}
        Ok(behind) => {
            return not_ready(format!(
                "the database lacks {behind} of this binary's migrations (run `hookline migrate`)"
            ))
        }
    }
    if let Some(check) = &state.config.readiness {
        if let Err(detail) = check() {
            return not_ready(detail);
        }
    }
    axum::Json(serde_json::json!({"status": "ready"})).into_response()
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

/// `GET /problems`: every error code, one per line (each problem's `type` links to its own).
pub(crate) async fn problems() -> Response {
    let text: String = crate::error::CATALOG
        .iter()
        .map(|p| format!("{}\t{}\t{}\n", p.code, p.status, p.when))
        .collect();
    ([("content-type", "text/plain; charset=utf-8")], text).into_response()
}

/// `GET /problems/{code}`: what a problem `type` names, for the human who follows it.
pub(crate) async fn problem_page(
    axum::extract::Path(code): axum::extract::Path<String>,
) -> Response {
    match crate::error::CATALOG.iter().find(|p| p.code == code) {
        Some(p) => (
            [("content-type", "text/plain; charset=utf-8")],
            format!(
                "{code}\n\nHTTP {status}. Answered when: {when}.\n\nEvery Hookline error is RFC 9457 application/problem+json with this `code`; the list is at /problems and in docs/api.md (\"Errors\").\n",
                status = p.status,
                when = p.when
            ),
        )
            .into_response(),
        None => ApiError::NotFound("problem type").into_response(),
    }
}

/// `GET /openapi.json`: the OpenAPI 3.1 document, built once.
pub(crate) async fn openapi() -> Response {
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let text = DOCUMENT.get_or_init(crate::openapi::document_json).clone();
    ([("content-type", "application/json")], text).into_response()
}
