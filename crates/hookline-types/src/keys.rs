//! `/v1/keys`: admin and app-scoped API keys.

use hookline_core::access::Capability;
use hookline_core::time::Timestamp;
use serde::{Deserialize, Serialize};

/// `POST /v1/keys`: an admin key (neither `app` nor `capabilities`) or an app
/// key (both, at least one capability). The OpenAPI document states it as
/// one of the two (`hookline_api`'s `create_key_schema`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    pub name: String,
    /// Scope the key to this app (its id or uid); absent: an admin key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// What an app key may do (required for one; refused on an admin key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Vec<Capability>>,
    /// When the key stops working (RFC 3339, in the future); absent: never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// `GET /v1/keys`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct KeyQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    /// Only the keys of this app (id or uid).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct KeyView {
    pub id: String,
    pub name: String,
    /// `null` for an admin key.
    pub app_id: Option<String>,
    /// What an app key may do; `null` for an admin key (it may do everything).
    pub capabilities: Option<Vec<Capability>>,
    pub created_at: Timestamp,
    pub expires_at: Option<Timestamp>,
    /// Only in the answer that made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// The answer to `DELETE /v1/apps/{app}/keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RevokedView {
    /// How many keys (portal sessions and unopened links among them) it revoked.
    pub revoked: u64,
}
