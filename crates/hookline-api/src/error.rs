//! Errors as RFC 9457 problem details.
//!
//! Every error has a stable machine-readable `code` (documented in
//! `docs/api.md`) and a human `detail`. Internal failures are logged with
//! their cause and answered with an opaque 500, never with internals.
//!
//! [`CATALOG`] is the one list of codes: each problem's `type` is
//! `/problems/{code}`, a page this server itself answers from the catalog.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hookline_core::access::Capability;
use hookline_store::StoreError;

/// An API failure.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No key, or one that is unknown, revoked or expired (which, in the detail).
    #[error("{0}")]
    Unauthorized(&'static str),
    #[error("this route needs an admin key; an app-scoped key cannot use it")]
    AdminOnly,
    #[error("this key lacks the `{0}` capability this request needs")]
    MissingCapability(Capability),
    #[error("{0} not found")]
    NotFound(&'static str),
    #[error("the request body is not valid JSON: {0}")]
    MalformedJson(String),
    /// A query parameter that is unknown, malformed or out of range.
    #[error("{0}")]
    InvalidQuery(String),
    #[error("{0}")]
    Validation(String),
    /// An endpoint's payload filter that does not parse (the detail names the position).
    #[error("{0}")]
    InvalidFilter(String),
    /// An endpoint's transform that does not compile, is over a limit, or
    /// fails on its event types' catalog examples (the detail says where).
    #[error("{0}")]
    InvalidTransform(String),
    /// The transform sandbox could not be asked (its worker would not start).
    #[error("transforms cannot be checked right now ({0}); try again shortly")]
    TransformsUnavailable(String),
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
    /// A publish of a type the catalog lacks, where the deployment refuses those.
    #[error("{0}")]
    UnknownEventType(String),
    /// A payload the type's schema refuses, where the deployment refuses those.
    #[error("{0}")]
    SchemaViolation(String),
    /// A portal link's code that cannot open a session (docs/portal.md).
    #[error("{}", .0.detail())]
    PortalCode(PortalCode),
    /// This API key made more requests than its rate allows (`Retry-After`).
    #[error(
        "this API key is over its request rate; try again in {retry_after_secs} s (Retry-After)"
    )]
    RateLimited { retry_after_secs: u64 },
    /// The database is away for now (unreachable, restarting, busy, full).
    #[error("the database is unavailable for now; try again shortly (Retry-After). A publish repeated with the same Idempotency-Key is never stored twice")]
    Unavailable,
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    /// The stable code of this error (one of [`CATALOG`]).
    pub(crate) fn code(&self) -> &'static str {
        self.status_and_code().1
    }

    fn status_and_code(&self) -> (StatusCode, &'static str) {
        match self {
            Self::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            Self::AdminOnly => (StatusCode::FORBIDDEN, "admin_only"),
            Self::MissingCapability(capability) => (
                StatusCode::FORBIDDEN,
                match capability {
                    Capability::Read => "missing_capability_read",
                    Capability::Publish => "missing_capability_publish",
                    Capability::Endpoints => "missing_capability_endpoints",
                    Capability::Secrets => "missing_capability_secrets",
                    Capability::Replay => "missing_capability_replay",
                    Capability::Messages => "missing_capability_messages",
                },
            ),
            Self::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            Self::MalformedJson(_) => (StatusCode::BAD_REQUEST, "malformed_json"),
            Self::InvalidQuery(_) => (StatusCode::BAD_REQUEST, "invalid_query"),
            Self::Validation(_) => (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
            Self::InvalidFilter(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_filter"),
            Self::InvalidTransform(_) => (StatusCode::UNPROCESSABLE_ENTITY, "invalid_transform"),
            Self::TransformsUnavailable(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, "transforms_unavailable")
            }
            Self::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Self::IdempotencyKeyReused => {
                (StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused")
            }
            Self::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            Self::EndpointDeleted => (StatusCode::CONFLICT, "endpoint_deleted"),
            Self::DestinationForbidden => {
                (StatusCode::UNPROCESSABLE_ENTITY, "destination_forbidden")
            }
            Self::UnknownEventType(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unknown_event_type"),
            Self::SchemaViolation(_) => (StatusCode::UNPROCESSABLE_ENTITY, "schema_violation"),
            Self::PortalCode(PortalCode::Invalid) => {
                (StatusCode::UNAUTHORIZED, "portal_code_invalid")
            }
            Self::PortalCode(PortalCode::Used) => (StatusCode::GONE, "portal_code_used"),
            Self::PortalCode(PortalCode::Expired) => (StatusCode::GONE, "portal_code_expired"),
            Self::RateLimited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            Self::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "database_unavailable"),
            Self::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }
}

/// Why a portal code opened no session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortalCode {
    Invalid,
    Used,
    Expired,
}

impl PortalCode {
    fn detail(self) -> &'static str {
        match self {
            Self::Invalid => "this portal link is not valid: it was never issued, or it was revoked; ask for a new link",
            Self::Used => "this portal link was already opened: a link opens one session; ask for a new link",
            Self::Expired => "this portal link has expired; ask for a new link",
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Conflict(what) => Self::Conflict(what),
            StoreError::AppNotFound => Self::NotFound("app"),
            other if other.is_unavailable() => {
                tracing::warn!(error = %other, "database unavailable");
                Self::Unavailable
            }
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
        let mut response = problem(status, code, &self.to_string());
        if matches!(self, Self::Unavailable) {
            response.headers_mut().insert(
                header::RETRY_AFTER,
                HeaderValue::from_static(RETRY_UNAVAILABLE_SECS),
            );
        }
        if let Self::RateLimited { retry_after_secs } = self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
        }
        if matches!(self, Self::Unauthorized(_)) {
            // RFC 6750: say which scheme the server expects.
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"hookline\""),
            );
        }
        response
    }
}

/// When a client should try again after `database_unavailable`, in seconds.
const RETRY_UNAVAILABLE_SECS: &str = "5";

/// A problem+json response.
pub(crate) fn problem(status: StatusCode, code: &str, detail: &str) -> Response {
    debug_assert!(
        CATALOG
            .iter()
            .any(|p| p.code == code && p.status == status.as_u16()),
        "problem code {code} ({status}) is not in the catalog"
    );
    let body = hookline_types::Problem {
        kind: format!("/problems/{code}"),
        title: status.canonical_reason().unwrap_or("Error").to_owned(),
        status: status.as_u16(),
        code: code.to_owned(),
        detail: detail.to_owned(),
    };
    let body = serde_json::to_string(&body).expect("a problem serializes");
    let mut response = (status, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    response
}

pub type ApiResult<T> = Result<T, ApiError>;

/// The router's own 405 (an empty body) as problem+json, its `Allow` kept.
pub(crate) async fn method_not_allowed(response: Response) -> Response {
    if response.status() != StatusCode::METHOD_NOT_ALLOWED
        || response.headers().contains_key(header::CONTENT_TYPE)
    {
        return response;
    }
    let mut answer = problem(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take this method; `Allow` lists those it takes",
    );
    if let Some(allow) = response.headers().get(header::ALLOW) {
        answer.headers_mut().insert(header::ALLOW, allow.clone());
    }
    answer
}

/// One stable error code: its status and when it is answered.
#[derive(Debug)]
pub struct ProblemKind {
    pub code: &'static str,
    pub status: u16,
    pub when: &'static str,
}

const fn kind(code: &'static str, status: u16, when: &'static str) -> ProblemKind {
    ProblemKind { code, status, when }
}

/// Every code the API answers with (docs/api.md's table is checked against it).
pub const CATALOG: &[ProblemKind] = &[
    kind("unauthorized", 401, "no API key, or one that is unknown, revoked or expired (the detail says which)"),
    kind("admin_only", 403, "an app-scoped key on a route only admin keys may use"),
    kind("missing_capability_read", 403, "an app-scoped key without the `read` capability"),
    kind("missing_capability_publish", 403, "an app-scoped key without the `publish` capability"),
    kind("missing_capability_endpoints", 403, "an app-scoped key without the `endpoints` capability"),
    kind("missing_capability_secrets", 403, "an app-scoped key without the `secrets` capability"),
    kind("missing_capability_replay", 403, "an app-scoped key without the `replay` capability"),
    kind("missing_capability_messages", 403, "an app-scoped key without the `messages` capability"),
    kind("not_found", 404, "unknown (or not yours) app, endpoint, event, delivery, replay, key or route"),
    kind("method_not_allowed", 405, "the route exists but not with this method (`Allow` lists those it has)"),
    kind("malformed_json", 400, "the body is not JSON"),
    kind("invalid_query", 400, "a query parameter that is unknown, malformed or out of range (`limit` outside 1–250, a cursor this listing did not make)"),
    kind("validation_failed", 422, "JSON of the wrong shape or out-of-range values; names (app name, event type, ordering key) with control characters such as NUL, on both engines"),
    kind("invalid_filter", 422, "an endpoint's `filter` that does not parse or is over its limits; the detail names the character position (docs/api.md, \"Payload filters\")"),
    kind("invalid_transform", 422, "an endpoint's `transform` that does not compile (the detail names the line and column), is over its limits, or fails on one of its event types' catalog examples (docs/api.md, \"Transformations\")"),
    kind("transforms_unavailable", 503, "the transform sandbox's worker process could not be started to check a `transform`; nothing was changed"),
    kind("payload_too_large", 413, "a body above the limit (`max_payload_bytes` for an event's payload)"),
    kind("idempotency_key_reused", 422, "the Idempotency-Key was used with a different request"),
    kind("destination_forbidden", 422, "an endpoint URL that names a private or loopback address"),
    kind("unknown_event_type", 422, "a publish of a type the event type catalog lacks, where `event_type_check` is `refuse` (else a warning in the answer)"),
    kind("schema_violation", 422, "a payload its catalog type's JSON Schema refuses, where `event_type_check` is `refuse` (else a warning in the answer)"),
    kind("conflict", 409, "an app `uid` or an event type name already taken; revoking the last admin key; a test send to a disabled endpoint"),
    kind("portal_code_invalid", 401, "`POST /portal/session` with a code that was never issued, or whose app's keys were revoked"),
    kind("portal_code_used", 410, "`POST /portal/session` with a code that already opened a session (a portal link works once)"),
    kind("portal_code_expired", 410, "`POST /portal/session` with a code past its `expires_at`"),
    kind("endpoint_deleted", 409, "replay or resend of a delivery whose endpoint was deleted"),
    kind("rate_limited", 429, "this API key made more requests than `api_rate_limit_per_sec` (with `api_rate_limit_burst`) allows; `Retry-After` says in how many seconds the next is allowed. Admin keys are exempt unless `api_rate_limit_admin` is set"),
    kind("database_unavailable", 503, "the database is away for now (unreachable, restarting, out of connections, busy or full); `Retry-After` says when to try again. If the connection broke during the commit the request may have been carried out: repeat a publish with its `Idempotency-Key`"),
    kind(
        "not_ready",
        503,
        "`/readyz`: the database is unreachable or lacks migrations, or this process's dispatcher is not turning",
    ),
    kind("internal", 500, "a bug or an outage; details are in the server log, never in the answer"),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// Each variant once (a new variant must be added here to compile the match below).
    fn one_of_each() -> Vec<ApiError> {
        let mut all = vec![
            ApiError::Unauthorized("x"),
            ApiError::AdminOnly,
            ApiError::NotFound("x"),
            ApiError::MalformedJson("x".into()),
            ApiError::InvalidQuery("x".into()),
            ApiError::Validation("x".into()),
            ApiError::InvalidFilter("x".into()),
            ApiError::InvalidTransform("x".into()),
            ApiError::TransformsUnavailable("x".into()),
            ApiError::PayloadTooLarge { limit: 1 },
            ApiError::IdempotencyKeyReused,
            ApiError::Conflict("x"),
            ApiError::EndpointDeleted,
            ApiError::DestinationForbidden,
            ApiError::UnknownEventType("x".into()),
            ApiError::SchemaViolation("x".into()),
            ApiError::PortalCode(PortalCode::Invalid),
            ApiError::PortalCode(PortalCode::Used),
            ApiError::PortalCode(PortalCode::Expired),
            ApiError::RateLimited {
                retry_after_secs: 1,
            },
            ApiError::Unavailable,
            ApiError::Internal("x".into()),
        ];
        all.extend(Capability::ALL.map(ApiError::MissingCapability));
        for error in &all {
            match error {
                ApiError::Unauthorized(_)
                | ApiError::AdminOnly
                | ApiError::MissingCapability(_)
                | ApiError::NotFound(_)
                | ApiError::MalformedJson(_)
                | ApiError::InvalidQuery(_)
                | ApiError::Validation(_)
                | ApiError::InvalidFilter(_)
                | ApiError::InvalidTransform(_)
                | ApiError::TransformsUnavailable(_)
                | ApiError::PayloadTooLarge { .. }
                | ApiError::IdempotencyKeyReused
                | ApiError::Conflict(_)
                | ApiError::EndpointDeleted
                | ApiError::DestinationForbidden
                | ApiError::UnknownEventType(_)
                | ApiError::SchemaViolation(_)
                | ApiError::PortalCode(_)
                | ApiError::RateLimited { .. }
                | ApiError::Unavailable
                | ApiError::Internal(_) => {}
            }
        }
        all
    }

    #[test]
    fn every_error_has_a_catalog_entry_with_its_status() {
        for error in one_of_each() {
            let (status, code) = error.status_and_code();
            assert!(
                CATALOG
                    .iter()
                    .any(|p| p.code == code && p.status == status.as_u16()),
                "{code} ({status}) is not in the catalog"
            );
        }
        let mut codes: Vec<_> = CATALOG.iter().map(|p| p.code).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), CATALOG.len(), "a code is listed twice");
    }

    #[test]
    fn docs_list_exactly_the_catalog() {
        let docs = include_str!("../../../docs/api.md");
        let table = &docs[docs
            .find("| code | status | when |")
            .expect("the errors table")..];
        let rows: Vec<(String, u16)> = table
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with('|'))
            .map(|line| {
                let cells: Vec<&str> = line.split('|').map(str::trim).collect();
                (
                    cells[1].trim_matches('`').to_owned(),
                    cells[2].parse().expect("a status"),
                )
            })
            .collect();
        let catalog: Vec<(String, u16)> = CATALOG
            .iter()
            .map(|p| (p.code.to_owned(), p.status))
            .collect();
        assert_eq!(
            rows, catalog,
            "docs/api.md's errors table and CATALOG differ"
        );
    }
}
