//! Request bodies: size limit → 413, bad syntax → 400, wrong shape → 422.
//! Query strings: anything unknown, malformed or out of range → 400.

use std::pin::Pin;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use hookline_core::language::Language;
use serde::de::DeserializeOwned;
use serde_json::error::Category;

use crate::error::ApiError;
use crate::AppState;

/// Room for the request's own fields (event type, ordering key, JSON syntax)
/// beyond the payload limit; the payload itself is checked exactly.
pub(crate) const ENVELOPE_ALLOWANCE: usize = 16 * 1024;

/// A JSON request body, parsed into `T` with problem+json rejections.
/// `raw` keeps the parsed value (the idempotency fingerprint is taken over it).
pub(crate) struct JsonBody<T> {
    pub value: T,
    pub raw: serde_json::Value,
}

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let limit = req
            .extensions()
            .get::<BodyLimit>()
            .map_or(state.config.max_payload_bytes + ENVELOPE_ALLOWANCE, |l| l.0);
        let bytes = read_limited(req.into_body(), limit)
            .await
            .map_err(|error| match error {
                Unread::TooLarge => ApiError::PayloadTooLarge {
                    limit: state.config.max_payload_bytes,
                },
                Unread::Failed(error) => {
                    ApiError::MalformedJson(format!("the request body could not be read: {error}"))
                }
            })?;
        let mut raw: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
        if !raw.is_object() {
            return Err(ApiError::Validation(
                "the request body must be a JSON object".into(),
            ));
        }
        integral_numbers(&mut raw);
        let value = serde_json::from_value(raw.clone()).map_err(|e: serde_json::Error| match e
            .classify()
        {
            Category::Data => ApiError::Validation(e.to_string()),
            _ => ApiError::MalformedJson(e.to_string()),
        })?;
        Ok(Self { value, raw })
    }
}

/// A route's own body limit, where it is not the event payload's (the
/// batch route), as a request extension beside its `DefaultBodyLimit`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimit(pub usize);

/// Why a body was not read.
enum Unread {
    /// Over the limit.
    TooLarge,
    Failed(axum::Error),
}

/// How much of a body over the limit is read on and dropped before the 413,
/// at least: see [`read_limited`].
const DRAIN_BYTES: usize = 8 * 1024 * 1024;
/// How long, at most.
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(1);

/// The body, if it holds at most `limit` bytes. Over it, the rest the client
/// is still sending is read and dropped (up to four times the limit or
/// [`DRAIN_BYTES`], whichever is more, and for [`DRAIN_TIME`] at most) before
/// the 413 is answered: answered at once, the connection would close with
/// that rest unread, the kernel would answer it with a reset, and the client
/// — still sending — would see the reset instead of the 413 (what nginx's
/// lingering close is for). `unread::close_if_unread` still closes the
/// connection after the answer.
async fn read_limited(mut body: Body, limit: usize) -> Result<Bytes, Unread> {
    let mut read: Vec<u8> = Vec::new();
    let mut over = false;
    let mut seen = 0usize;
    let drain = DRAIN_BYTES.max(limit.saturating_mul(4));
    // Set when the body goes over the limit.
    let mut deadline = tokio::time::Instant::now();
    loop {
        let frame = match over {
            false => next_frame(&mut body).await,
            true => match tokio::time::timeout_at(deadline, next_frame(&mut body)).await {
                Ok(frame) => frame,
                Err(_) => return Err(Unread::TooLarge),
            },
        };
        let Some(frame) = frame else { break };
        let Ok(data) = frame.map_err(Unread::Failed)?.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if over {
            if seen > drain {
                return Err(Unread::TooLarge);
            }
        } else if seen > limit {
            over = true;
            deadline = tokio::time::Instant::now() + DRAIN_TIME;
            read = Vec::new();
        } else {
            read.extend_from_slice(&data);
        }
    }
    match over {
        true => Err(Unread::TooLarge),
        false => Ok(Bytes::from(read)),
    }
}

async fn next_frame(body: &mut Body) -> Option<Result<http_body::Frame<Bytes>, axum::Error>> {
    std::future::poll_fn(|cx| Pin::new(&mut *body).poll_frame(cx)).await
}

/// Fields whose values are the caller's own JSON, kept exactly as sent.
const OPAQUE: &[&str] = &["payload", "schema", "example"];

/// JSON has one number type: `5.0` is the integer 5 to JSON Schema (and so to
/// the OpenAPI document), so every number of the request's own fields written
/// with a zero fraction is read as the integer (a count, a limit, a duration).
/// The caller's own JSON ([`OPAQUE`]) is left as sent.
fn integral_numbers(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(number) => {
            if let Some(float) = number.as_f64().filter(|_| number.is_f64()) {
                if float.fract() == 0.0 && float.abs() < 9.0e15 {
                    *number = serde_json::Number::from(float as i64);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers),
        Value::Object(fields) => fields
            .iter_mut()
            .filter(|(name, _)| !OPAQUE.contains(&name.as_str()))
            .for_each(|(_, value)| integral_numbers(value)),
        Value::Null | Value::Bool(_) | Value::String(_) => {}
    }
}

/// A query string parsed into `T` (whose unknown fields are refused), with
/// problem+json rejections (`400 invalid_query`).
pub(crate) struct QueryParams<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::try_from_uri(&parts.uri)
            .map(|query| Self(query.0))
            .map_err(|rejection| ApiError::InvalidQuery(rejection.body_text()))
    }
}

/// The language the answer's sentences (explanations, incidents, the
/// signature checker) are worded in: what `Accept-Language` asks for, of
/// those spoken here ([`Language::negotiate`]); English without one.
pub(crate) struct Lang(pub Language);

impl<S: Send + Sync> FromRequestParts<S> for Lang {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let asked = parts
            .headers
            .get(axum::http::header::ACCEPT_LANGUAGE)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("");
        Ok(Self(Language::negotiate(asked)))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn integral_numbers_are_integers_except_in_the_callers_own_json() {
        let mut body = json!({
            "max_in_flight": 8.0,
            "retry": {"max_attempts": 5.0, "retry_base_ms": 2.5},
            "events": [{"n": 3.0, "payload": {"price": 10.0}}],
            "payload": {"total": 1.0},
            "schema": {"maximum": 2.0},
            "example": [4.0],
        });
        super::integral_numbers(&mut body);
        assert_eq!(
            body.to_string(),
            json!({
                "max_in_flight": 8,
                "retry": {"max_attempts": 5, "retry_base_ms": 2.5},
                "events": [{"n": 3, "payload": {"price": 10.0}}],
                "payload": {"total": 1.0},
                "schema": {"maximum": 2.0},
                "example": [4.0],
            })
            .to_string()
        );
    }
}
