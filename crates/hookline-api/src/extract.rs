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
        let raw: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| ApiError::MalformedJson(e.to_string()))?;
        let value = serde_json::from_value(raw.clone()).map_err(|e: serde_json::Error| match e
            .classify()
        {
            Category::Data => ApiError::Validation(e.to_string()),
            _ => ApiError::MalformedJson(e.to_string()),
        })?;
        Ok(Self { value, raw })
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

/// Deserialises a field that may be absent (`None`), `null` (`Some(None)`) or set.
pub(crate) fn double_option<'de, D, T>(deserializer: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    use serde::Deserialize;
    Ok(Some(Option::deserialize(deserializer)?))
}
