//! `/v1/event-types`: the deployment's event type catalog.

use hookline_core::time::Timestamp;
use serde::{Deserialize, Serialize};

/// `POST /v1/event-types`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEventType {
    /// A type's name (no `*`: that is for subscriptions' `group.*`).
    #[schema(
        min_length = 1,
        max_length = 256,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f*]*$"
    )]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[schema(schema_with = crate::schema::json_schema_document)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// Any JSON value.
    #[schema(value_type = Option<serde_json::Value>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub example: Option<serde_json::Value>,
    #[serde(default)]
    pub deprecated: bool,
}

/// `PATCH /v1/event-types/{name}`: absent fields stay as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateEventType {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(schema_with = crate::schema::json_schema_document)]
    pub schema: Option<Option<serde_json::Value>>,
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    /// Any JSON value.
    #[schema(value_type = Option<serde_json::Value>)]
    pub example: Option<Option<serde_json::Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecated: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventTypeView {
    pub name: String,
    pub description: String,
    #[schema(schema_with = crate::schema::json_schema_document)]
    pub schema: Option<serde_json::Value>,
    /// Any JSON value.
    #[schema(value_type = Option<serde_json::Value>)]
    pub example: Option<serde_json::Value>,
    pub deprecated: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}
