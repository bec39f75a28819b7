//! `/v1/apps/{app}/endpoints/{endpoint}/messages`: an endpoint's deliveries by
//! their sequence numbers, signed, so a receiver that sees a gap can fetch
//! what it lacks (docs/api.md, "Sequence numbers").

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A range of an endpoint's sequence numbers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct MessagesQuery {
    /// The first number; default 1 (an endpoint's numbers start at 1).
    #[param(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_seq: Option<u64>,
    /// The last number (at most 99 past `from_seq`); default: `from_seq + 99`.
    #[param(minimum = 1, maximum = 9_223_372_036_854_775_807_i64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_seq: Option<u64>,
    /// A consumer's cursor: the numbers after it (`from_seq` is then
    /// `after + 1`; with both, the later start counts).
    #[param(minimum = 0, maximum = 9_223_372_036_854_775_806_i64)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// At most this many numbers (1–100; default 100).
    #[param(minimum = 1, maximum = 100)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    /// Up to this many seconds (at most 30), wait for a number at or past
    /// the start when there is none yet (a long poll).
    #[param(maximum = 30)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_secs: Option<u32>,
}

/// `POST …/messages/commit`: a polling endpoint's receiver has handled every
/// number up to `cursor`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CommitMessages {
    #[schema(minimum = 0, maximum = 9_223_372_036_854_775_807_i64)]
    pub cursor: u64,
}

/// Where a polling endpoint's cursor stands after a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CommittedView {
    pub endpoint_id: String,
    /// Every number up to it is handled (never lower than before).
    pub committed_seq: u64,
    /// Deliveries this commit moved to `succeeded`.
    pub delivered: u64,
    /// The last number the endpoint has given.
    pub last_seq: u64,
}

/// What became of a numbered delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MessageState {
    /// Not delivered yet: waiting (behind its ordering key too), in flight, or retrying.
    Pending,
    /// The endpoint accepted it (or its transform skipped it).
    Succeeded,
    /// In the dead-letter queue.
    Dead,
    /// Retention removed it: only its number is left.
    Purged,
}

/// One numbered delivery: its envelope as the endpoint gets it, signed now
/// with the endpoint's secret (Standard Webhooks), or only its number once
/// retention removed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessageView {
    pub seq: u64,
    pub state: MessageState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    /// The envelope's exact text, as signed (with `seq` in it if the endpoint
    /// has `seq_in_body`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// `webhook-id`, `webhook-timestamp`, `webhook-signature` and
    /// `hookline-endpoint-sequence`: verify `body` with them as a push is
    /// verified.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// A range of an endpoint's numbered deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessagesView {
    pub endpoint_id: String,
    /// The last number the endpoint has given (0: none yet). Numbers above it
    /// do not exist yet and are not listed.
    pub last_seq: u64,
    /// One per number of the range up to `last_seq`, in order.
    pub messages: Vec<MessageView>,
    /// Where to go on from, when the range asked for goes past what one answer holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_seq: Option<u64>,
}
