//! Errors as RFC 9457 problem details.
//!
//! Every error has a stable machine-readable `code` (documented in
//! `docs/api.md`) and a human `detail`. Internal failures are logged with
//! their cause and answered with an opaque 500, never with internals.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hookline_store::StoreError;

/// An API failure.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("a valid API key is required (Authorization: Bearer <key>)")]
    Unauthorized,
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("the request body is not valid JSON: {0}")]
    MalformedJson(String),
    /// A query parameter that is unknown, malformed or out of range.
    #[error("{0}")]
    InvalidQuery(String),
    #[error("{0}")]
    Validation(String),
    #[error("the request body exceeds the limit of {limit} bytes")]
    PayloadTooLarge { limit: usize },
    #[error("this Idempotency-Key was already used with a different request")]
    IdempotencyKeyReused,
    #[error("{0}")]
    Conflict(&'static str),
    #[error("the delivery's endpoint was deleted: there is nowhere to send it again")]
    EndpointDeleted,
    #[error("the destination is a private, loopback or otherwise non-public address")]
    DestinationForbidden,
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::Unauthorized => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::MalformedJson(_) => (StatusCode::BAD_REQUEST, "malformed_json"),
            Self::InvalidQuery(_) => (StatusCode::BAD_REQUEST, "invalid_query"),
            Self::Validation(_) => (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
            Self::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Self::IdempotencyKeyReused => {
                (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
            }
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::EndpointDeleted => (StatusCode::CONFLICT, "endpoint_deleted"),
            Self::DestinationForbidden => {
                (StatusCode::UNPROCESSABLE_ENTITY, "destination_forbidden")
            }
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict(what) => Self::Conflict(what),
            other => Self::Internal(Box::new(other)),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        if let Self::Internal(cause) = &self {
            tracing::error!(error = %cause, cause = ?cause, "internal error");
        }
        problem(status, code, &self.to_string())
    }
}

/// A problem+json response.
pub(crate) fn problem(status: StatusCode, code: &str, detail: &str) -> Response {
    let body = serde_json::json!({
        "type": format!("https://hookline.dev/problems/{code}"),
        "title": status.canonical_reason().unwrap_or("Error"),
        "status": status.as_u16(),
        "code": code,
        "detail": detail,
    });
    let mut response = (status, body.to_string()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

pub type ApiResult<T> = Result<T, ApiError>;
