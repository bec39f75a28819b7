//! `/v1/apps/{app}/events`: the producer API, and the events it stored.

use std::borrow::Cow;

use hookline_core::time::Timestamp;
use serde::{Deserialize, Serialize};

use crate::deliveries::DeliveryView;

/// `POST /v1/apps/{app}/events` (the `Idempotency-Key` is a header).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PublishRequest {
    #[schema(schema_with = crate::schema::name)]
    pub event_type: String,
    /// Any JSON value.
    #[schema(value_type = serde_json::Value)]
    pub payload: serde_json::Value,
    #[schema(schema_with = crate::schema::optional_name)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
}

impl PublishRequest {
    pub fn new(event_type: impl Into<String>, payload: serde_json::Value) -> Self {
        Self {
            event_type: event_type.into(),
            payload,
            ordering_key: None,
        }
    }

    /// Events with the same key reach each endpoint in order.
    pub fn ordering_key(mut self, key: impl Into<String>) -> Self {
        self.ordering_key = Some(key.into());
        self
    }
}

/// `POST /v1/apps/{app}/events/batch`: up to 1,000 events in one transaction.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// Each item is read as JSON and validated as a publish ([`BatchItem`]).
    #[schema(value_type = Vec<BatchItem>, min_items = 1, max_items = 1000)]
    pub events: Vec<serde_json::Value>,
}

/// One event of a batch: a publish's fields, and its own `Idempotency-Key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchItem {
    #[schema(schema_with = crate::schema::name)]
    pub event_type: String,
    /// Any JSON value.
    #[schema(value_type = serde_json::Value)]
    pub payload: serde_json::Value,
    #[schema(schema_with = crate::schema::optional_name)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    #[schema(pattern = r"^[!-~]{1,255}$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// One entry of a batch's answer, in the order of the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum BatchItemAnswer {
    /// Stored now, or (`idempotent_replayed`) earlier under the same key: the
    /// single publish's answer.
    Published {
        /// 202.
        status: u16,
        idempotent_replayed: bool,
        #[serde(flatten)]
        event: PublishedView,
    },
    /// Not stored: `idempotency_key_reused` (the key came with another event).
    Refused {
        /// 422.
        status: u16,
        code: String,
        detail: String,
    },
}

/// The answer to a batch (202).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchAnswer {
    pub data: Vec<BatchItemAnswer>,
}

/// What the event type catalog found wrong with a publish it accepted anyway.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, utoipa::ToSchema)]
pub struct Warning {
    /// `unknown_event_type`, `deprecated_event_type` or `schema_violation`.
    #[schema(value_type = String)]
    pub code: Cow<'static, str>,
    pub detail: String,
}

/// The answer to a publish (also what an idempotent replay repeats).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PublishedView {
    pub id: String,
    pub event_type: String,
    pub ordering_key: Option<String>,
    pub sequence: Option<u64>,
    pub created_at: Timestamp,
    pub deliveries: Vec<DeliveryView>,
    /// What the event type catalog found wrong (absent when nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EventView {
    pub id: String,
    pub event_type: String,
    pub ordering_key: Option<String>,
    pub sequence: Option<u64>,
    /// As published: any JSON value.
    #[schema(value_type = serde_json::Value)]
    pub payload: serde_json::Value,
    pub created_at: Timestamp,
    /// In the event's own view; a listing leaves them out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<Vec<DeliveryView>>,
}

/// `GET /v1/apps/{app}/events`: every field narrows the listing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}
