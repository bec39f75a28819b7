//! Deliveries (one event to one endpoint), their attempts, the DLQ and replays
//! of one delivery.

use std::collections::BTreeMap;

use hookline_core::explain::Explanation;
use hookline_core::model::{
    AttemptTrigger, AttemptVerdict, DeadReason, DeliveryState, TransportError,
};
use hookline_core::time::Timestamp;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DeliveryView {
    pub id: String,
    pub event_id: String,
    /// Its event's type. (Absent from a publish's answer stored before this
    /// field existed and replayed for its `Idempotency-Key`.)
    #[serde(default)]
    pub event_type: String,
    pub endpoint_id: String,
    pub state: DeliveryState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// Attempts in the current round (a replay starts a new round).
    pub attempts: u32,
    /// Pending: when the next attempt is due (absent while parked on a disabled or paused endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<Timestamp>,
    /// Pending on a disabled or paused endpoint: kept, and sent once it is enabled or resumed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parked: bool,
    pub last_attempt_at: Option<Timestamp>,
    /// The HTTP status the newest attempt got (of any round): `null` before
    /// the first attempt, or when the newest got no answer (its `error_kind`
    /// in the attempts says why). The listing's `status` filter matches it.
    pub last_status: Option<u16>,
    pub dead_reason: Option<DeadReason>,
    pub dead_at: Option<Timestamp>,
    pub created_at: Timestamp,
    /// Why it is where it is, and what to do about it (absent from a
    /// publish's answer, which is stored and replayed as it was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Explanation>,
}

/// Where an attempt's delivery was in a batch request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct BatchMemberView {
    /// The request's `webhook-id` (`bat_…`), shared by its members' attempts.
    pub id: String,
    /// How many deliveries the request carried.
    pub size: u32,
    /// This delivery's place in its array (0: first).
    pub position: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AttemptView {
    pub id: String,
    pub delivery_id: String,
    pub endpoint_id: String,
    pub attempt_number: u32,
    pub started_at: Timestamp,
    pub duration_ms: u64,
    pub status_code: Option<u16>,
    pub response_body: Option<String>,
    pub error_kind: Option<TransportError>,
    pub error_message: Option<String>,
    pub verdict: AttemptVerdict,
    pub next_attempt_at: Option<Timestamp>,
    pub dead_reason: Option<DeadReason>,
    /// `first`, `retry`, `probe` (the breaker's one request) or `replay` (the
    /// first of a round a replay or resend started); `null` on old attempts.
    pub trigger: Option<AttemptTrigger>,
    /// Where it went (`null` on old attempts).
    pub url: Option<String>,
    /// The headers sent: signatures, never secrets; the endpoint's own headers
    /// by name, their values as `…` (not kept: they may carry tokens).
    pub request_headers: BTreeMap<String, String>,
    /// The response's headers (repeated ones joined with ", "), capped.
    pub response_headers: BTreeMap<String, String>,
    /// The body was longer than the limit (64 KiB) and is cut there.
    pub response_body_truncated: bool,
    /// What its outcome meant, and what followed.
    pub explanation: Explanation,
    /// The body sent, byte for byte as signed (its event's envelope, or what
    /// the endpoint's transform made of it, cut at 64 KiB): only in
    /// `GET …/attempts/{attempt}`, absent from listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_body: Option<String>,
    /// The batch request this attempt went in, if its endpoint batches
    /// (docs/api.md, "Batching"): its `webhook-id`, its size and this
    /// delivery's place in it. Its first member's `request_body` is the whole
    /// array; the others' is their own element.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchMemberView>,
}

/// What `state=` names (the stored states, with pending split into due and parked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StateParam {
    Pending,
    InFlight,
    Succeeded,
    Dead,
    Blocked,
    Parked,
}

/// `GET /v1/apps/{app}/deliveries`: every field narrows the listing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeliveriesQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<String>,
    #[param(inline)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<StateParam>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

/// `GET /v1/apps/{app}/dlq`: every field narrows the listing; `since` and
/// `until` bound when the deliveries died.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DlqQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<DeadReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

/// `GET …/endpoints/{endpoint}/attempts`: every field narrows the listing.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AttemptsQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verdict: Option<AttemptVerdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
}

/// The answer to `POST …/deliveries/{delivery}/replay`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplayView {
    /// Whether this request started a new round.
    pub replayed: bool,
    pub detail: String,
    pub delivery: DeliveryView,
}

/// The answer to `POST …/deliveries/{delivery}/resend`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ResendView {
    /// Whether this request started a new round.
    pub resent: bool,
    pub detail: String,
    pub delivery: DeliveryView,
}
