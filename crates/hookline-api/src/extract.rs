//! Request bodies: size limit → 413, bad syntax → 400, wrong shape → 422.
//! Query strings: anything unknown, malformed or out of range → 400.

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
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
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::PayloadTooLarge {
                    limit: state.config.max_payload_bytes,
                }
            } else {
                ApiError::MalformedJson(rejection.body_text())
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
