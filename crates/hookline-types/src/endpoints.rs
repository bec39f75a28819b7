//! `/v1/apps/{app}/endpoints`: where an app's events go, and how they get there.

use std::collections::BTreeMap;

use hookline_core::batch::Batching;
use hookline_core::breaker::BreakerState;
use hookline_core::explain::{Action as ExplanationAction, Code as ExplanationCode, Explanation};
use hookline_core::incidents::Kind as IncidentKind;
use hookline_core::model::TransportError;
use hookline_core::ordering::OnDead;
use hookline_core::outbound_auth::OutboundAuth;
use hookline_core::retry::RetryOverrides;
use hookline_core::time::Timestamp;
use hookline_core::timeline::{Bucket, MarkKind, Window};
use serde::{Deserialize, Serialize};

use crate::events::Warning;

fn enabled_by_default() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// `POST /v1/apps/{app}/endpoints`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateEndpoint {
    #[schema(
        pattern = r"^(https?://([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\.){0,3}[a-z]{2,10}(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~-]{0,20}){0,4}|redis://([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\.){0,3}[a-z]{2,10}(:[1-9][0-9]{0,3})?(/[0-9])?/?\?stream=[A-Za-z0-9._:-]{1,40}(&maxlen=[1-9][0-9]{0,5})?|nats://([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\.){0,3}[a-z]{2,10}(:[1-9][0-9]{0,3})?/?\?subject=[A-Za-z0-9_-]{1,20}(\.[A-Za-z0-9_-]{1,20}){0,3}|amqp://([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\.){0,3}[a-z]{2,10}(:[1-9][0-9]{0,3})?(/[a-z]{1,10})?/?\?exchange=[A-Za-z0-9._-]{1,40}(&routing_key=[A-Za-z0-9._-]{1,40})?|poll:)$"
    )]
    /// Where deliveries go: an `https` (or `http`) URL, or a broker's —
    /// `redis://`, `nats://`, `amqp://`, `sqs://`, `sns://`, `eventbridge://`
    /// (docs/api.md#brokers) — or `poll:`: nothing is sent, the receiver
    /// fetches (docs/api.md#polling-endpoints).
    pub url: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// Event type names, or `group.*`; absent: every type.
    #[schema(
        min_items = 1,
        max_items = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f*]+(\.\*)?$"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<String>>,
    /// A payload filter (docs/api.md, "Payload filters"), such as
    /// `/amount >= 100 and /currency in ["EUR", "USD"]`; absent or `null`: every
    /// event of its types. (The pattern states a small subset of the language.)
    #[schema(
        max_length = 2048,
        pattern = r"^/[a-z]{1,10}( exists| = (0|[1-9][0-9]{0,4})| > (0|[1-9][0-9]{0,4}))$"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// What is sent instead of the event's envelope (docs/api.md,
    /// "Transformations"): a preset's name (`slack`, `teams`, `discord`: the
    /// event as that chat's incoming webhook takes it), or a jq program over
    /// `{event_type, event_id, seq, timestamp, payload, endpoint}` that gives the
    /// body, `{body, headers, url}`, or `null` to skip. Absent or `null`: the
    /// envelope. (The pattern states a small subset of the language.)
    #[schema(
        max_length = 16384,
        pattern = r"^(slack|teams|discord|\{[a-z]{1,10}: \.[a-z_]{1,10}\})$"
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transform: Option<String>,
    /// The endpoint's sequence number goes in the signed envelope as `seq`,
    /// beside `type` and `timestamp` (docs/api.md, "Sequence numbers"); it is
    /// always in the `hookline-endpoint-sequence` header. Default `true`;
    /// `false` keeps the envelope exactly `{type, timestamp, data}`.
    #[serde(default = "enabled_by_default", skip_serializing_if = "is_true")]
    pub seq_in_body: bool,
    /// Send up to `max_events` deliveries in one request, a JSON array of
    /// their envelopes, at most `max_wait_ms` after the first was ready
    /// (docs/api.md, "Batching"). Only for an HTTP endpoint without a
    /// transform. Absent or `null`: one request per delivery.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<Batching>,
    #[serde(default = "enabled_by_default", skip_serializing_if = "is_true")]
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "is_default")]
    pub paused: bool,
    #[schema(pattern = r"^whsec_([A-Za-z0-9+/]{4}){8,21}$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    #[schema(schema_with = crate::schema::custom_headers)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    #[schema(schema_with = crate::schema::outbound_auth)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auth: Option<OutboundAuth>,
    #[serde(
        default,
        deserialize_with = "crate::de::object",
        skip_serializing_if = "is_default"
    )]
    pub retry: RetryOverrides,
    #[schema(minimum = 1, maximum = 100_000)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit_per_sec: Option<u32>,
    #[schema(minimum = 1, maximum = 1024)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u32>,
    #[serde(default, skip_serializing_if = "is_default")]
    pub ordering_on_dead: OnDead,
}

impl CreateEndpoint {
    /// An enabled endpoint at `url` for every event type, with the deployment's
    /// defaults for everything else.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            description: String::new(),
            event_types: None,
            filter: None,
            transform: None,
            seq_in_body: true,
            batch: None,
            enabled: true,
            paused: false,
            secret: None,
            headers: None,
            auth: None,
            retry: RetryOverrides::default(),
            rate_limit_per_sec: None,
            max_in_flight: None,
            ordering_on_dead: OnDead::default(),
        }
    }
}

/// `PATCH /v1/apps/{app}/endpoints/{endpoint}`: absent fields stay as they
/// are; `Some(None)` (`null`) clears a field that may be empty.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateEndpoint {
    #[schema(
        pattern = r"^(https?://([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\.){0,3}[a-z]{2,10}(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~-]{0,20}){0,4}|redis://([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\.){0,3}[a-z]{2,10}(:[1-9][0-9]{0,3})?(/[0-9])?/?\?stream=[A-Za-z0-9._:-]{1,40}(&maxlen=[1-9][0-9]{0,5})?|nats://([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\.){0,3}[a-z]{2,10}(:[1-9][0-9]{0,3})?/?\?subject=[A-Za-z0-9_-]{1,20}(\.[A-Za-z0-9_-]{1,20}){0,3}|amqp://([a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?\.){0,3}[a-z]{2,10}(:[1-9][0-9]{0,3})?(/[a-z]{1,10})?/?\?exchange=[A-Za-z0-9._-]{1,40}(&routing_key=[A-Za-z0-9._-]{1,40})?|poll:)$"
    )]
    /// Where deliveries go: an `https` (or `http`) URL, or a broker's —
    /// `redis://`, `nats://`, `amqp://`, `sqs://`, `sns://`, `eventbridge://`
    /// (docs/api.md#brokers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(
        min_items = 1,
        max_items = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f*]+(\.\*)?$"
    )]
    pub event_types: Option<Option<Vec<String>>>,
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    /// A payload filter (docs/api.md, "Payload filters"), such as
    /// `/amount >= 100 and /currency in ["EUR", "USD"]`; absent or `null`: every
    /// event of its types. (The pattern states a small subset of the language.)
    #[schema(
        max_length = 2048,
        pattern = r"^/[a-z]{1,10}( exists| = (0|[1-9][0-9]{0,4})| > (0|[1-9][0-9]{0,4}))$"
    )]
    pub filter: Option<Option<String>>,
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    /// What is sent instead of the event's envelope (docs/api.md,
    /// "Transformations"): a preset's name (`slack`, `teams`, `discord`: the
    /// event as that chat's incoming webhook takes it), or a jq program over
    /// `{event_type, event_id, seq, timestamp, payload, endpoint}` that gives the
    /// body, `{body, headers, url}`, or `null` to skip. `null` removes it; absent
    /// leaves it. (The pattern states a small subset of the language.)
    #[schema(
        max_length = 16384,
        pattern = r"^(slack|teams|discord|\{[a-z]{1,10}: \.[a-z_]{1,10}\})$"
    )]
    pub transform: Option<Option<String>>,
    /// Whether the sequence number goes in the signed envelope (`seq`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq_in_body: Option<bool>,
    /// Batching (docs/api.md, "Batching"); `null` stops it, absent leaves it.
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    pub batch: Option<Option<Batching>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    #[schema(schema_with = crate::schema::custom_headers)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub headers: Option<BTreeMap<String, String>>,
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(schema_with = crate::schema::outbound_auth)]
    pub auth: Option<Option<OutboundAuth>>,
    #[serde(
        default,
        deserialize_with = "crate::de::optional_object",
        skip_serializing_if = "Option::is_none"
    )]
    pub retry: Option<RetryOverrides>,
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1, maximum = 100_000)]
    pub rate_limit_per_sec: Option<Option<u32>>,
    #[serde(
        default,
        deserialize_with = "crate::de::double_option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(minimum = 1, maximum = 1024)]
    pub max_in_flight: Option<Option<u32>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ordering_on_dead: Option<OnDead>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EndpointView {
    pub id: String,
    pub app_id: String,
    pub url: String,
    pub description: String,
    pub event_types: Option<Vec<String>>,
    /// The payload filter (docs/api.md, "Payload filters"); `null`: every event of its types.
    pub filter: Option<String>,
    /// What is sent instead of the envelope (docs/api.md, "Transformations"):
    /// a preset's name or a jq program; `null`: the envelope.
    pub transform: Option<String>,
    /// The sequence number is in the signed envelope (`seq`), not only in the
    /// `hookline-endpoint-sequence` header (docs/api.md, "Sequence numbers").
    /// (Absent from a server of an earlier release, which never numbers the body.)
    #[serde(default)]
    pub seq_in_body: bool,
    /// Its deliveries go in batch requests (docs/api.md, "Batching"); `null`:
    /// one request each. (Absent from a server of an earlier release.)
    #[serde(default)]
    pub batch: Option<Batching>,
    pub enabled: bool,
    /// New deliveries are made but held until it is resumed (`paused: false`).
    pub paused: bool,
    /// `manual`, `gone` (the endpoint answered 410) or `failing` (the breaker's span ran out).
    pub disabled_reason: Option<String>,
    /// Sent with every request (names lower-case); values show as `…` to a key
    /// without the `secrets` capability.
    pub headers: BTreeMap<String, String>,
    /// Outbound authentication (docs/api.md, "Outbound authentication"); its
    /// secrets show as `…` to a key without the `secrets` capability.
    #[schema(value_type = Option<Object>)]
    pub auth: Option<serde_json::Value>,
    /// After a rotation: until when the previous secret signs beside the current one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub previous_secret_valid_until: Option<Timestamp>,
    pub retry: RetryOverrides,
    pub rate_limit_per_sec: Option<u32>,
    /// This endpoint's ceiling of requests in flight per dispatcher process
    /// (`null`: the deployment's `max_in_flight_per_endpoint`).
    pub max_in_flight: Option<u32>,
    pub ordering_on_dead: OnDead,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Only on creation; afterwards via `GET …/secret`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EndpointHealthView {
    pub endpoint_id: String,
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub breaker: BreakerState,
    pub consecutive_failures: u32,
    /// Open: when the one probe request goes.
    pub next_probe_at: Option<Timestamp>,
    pub failing_since: Option<Timestamp>,
    pub last_error: Option<String>,
    pub last_failure_at: Option<Timestamp>,
    /// Over the endpoint's last (up to) 100 attempts; null before any.
    pub recent_success_rate: Option<f64>,
    pub recent_attempts: u32,
    /// A polling endpoint's consumer: where it stands (docs/api.md#polling-endpoints).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub polling: Option<PollingView>,
}

/// Where a polling endpoint's receiver stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PollingView {
    /// Every number up to it is committed (handled).
    pub committed_seq: u64,
    /// The last number the endpoint has given.
    pub last_seq: u64,
    /// Numbers made and not committed yet: the receiver's lag.
    pub waiting: u64,
    /// When the receiver last committed; null before its first.
    pub committed_at: Option<Timestamp>,
}

/// `GET …/endpoints/{endpoint}/secret`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SecretView {
    /// The signing secret, `whsec_…`.
    pub key: String,
}

/// `POST …/endpoints/{endpoint}/secret/rotate`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RotateSecret {
    /// The new secret (`whsec_…`); absent: generated.
    #[schema(pattern = r"^whsec_([A-Za-z0-9+/]{4}){8,21}$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// How long the old secret keeps signing beside the new one (default a day).
    #[schema(minimum = 0, maximum = 604_800)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grace_secs: Option<u64>,
}

/// The answer to a rotation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RotatedSecretView {
    /// The new signing secret.
    pub key: String,
    /// Until when the previous secret signs beside it (`null`: no grace).
    pub previous_valid_until: Option<Timestamp>,
}

/// `POST …/endpoints/{endpoint}/test`.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TestSend {
    #[schema(schema_with = crate::schema::name)]
    pub event_type: String,
    /// Absent: the catalog's example of `event_type`; any JSON value.
    #[schema(value_type = Option<serde_json::Value>)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
}

/// `POST /v1/apps/{app}/filter-preview`: which of the app's recent events a
/// filter would let through (docs/api.md#filter-preview).
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FilterPreview {
    /// The payload filter to try; absent or `null`: none (every event of the types passes).
    #[schema(
        max_length = 2048,
        pattern = r"^/[a-z]{1,10}( exists| = (0|[1-9][0-9]{0,4})| > (0|[1-9][0-9]{0,4}))$"
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<String>,
    /// The event types (names, or `group.*`) the endpoint would have; absent or `null`: every type.
    #[schema(
        min_items = 1,
        max_items = 100,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f*]+(\.\*)?$"
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_types: Option<Vec<String>>,
}

/// One recent event and whether the filter lets it through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FilterPreviewEvent {
    pub event_id: String,
    pub event_type: String,
    pub created_at: Timestamp,
    pub passed: bool,
}

/// The answer to a filter preview: the app's latest events of the types (at
/// most 50, newest first, found among its latest 250), each passed or not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FilterPreviewView {
    pub data: Vec<FilterPreviewEvent>,
    /// How many of them pass.
    pub passed: u32,
    /// How many of the app's latest events were looked at to find them.
    pub scanned: u32,
}

/// The answer to a test send (202).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TestSendView {
    pub event_id: String,
    pub delivery_id: String,
    /// Whether a publish of this payload would reach the endpoint through its filter.
    pub passes_filter: bool,
    /// What the event type catalog found wrong (absent when nothing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
}

/// `GET …/endpoints/{endpoint}/stats` (docs/api.md#endpoint-stats).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EndpointStatsView {
    pub endpoint_id: String,
    /// Deliveries by state: `pending`, `in_flight`, `blocked`, `succeeded`, `dead`.
    pub deliveries: BTreeMap<String, u64>,
    /// Dead deliveries by reason.
    pub dlq_by_reason: BTreeMap<String, u64>,
    pub breaker: BreakerState,
    pub consecutive_failures: u32,
    pub last_error: Option<String>,
    pub last_failure_at: Option<Timestamp>,
    /// `hour`, `day` and `week`.
    pub windows: BTreeMap<String, StatsWindow>,
    /// The most attempts a window reads (the latest ones).
    pub sample_cap: u32,
}

/// One window of an endpoint's stats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StatsWindow {
    pub attempts: u64,
    pub delivered: u64,
    /// `null` before any attempt.
    pub success_rate: Option<f64>,
    pub latency_ms: Latency,
    /// The window held more attempts than the sample: the figures are the latest ones'.
    pub sampled: bool,
    /// Events of its types that its payload filter dropped (by the minute).
    pub filtered: u64,
}

/// `GET …/endpoints/{endpoint}/timeline`: every field narrows the answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct TimelineQuery {
    /// `hour` (60 buckets of a minute), `day` (96 of 15 minutes, the default)
    /// or `week` (168 of an hour).
    #[param(inline)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
}

/// `GET …/endpoints/{endpoint}/timeline` (docs/api.md#endpoint-timeline):
/// attempts per time bucket, and what happened to the endpoint's sending.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TimelineView {
    pub endpoint_id: String,
    pub window: Window,
    /// Each bucket's width.
    pub bucket_secs: u64,
    /// The first bucket's start (a whole multiple of the width since the epoch).
    pub since: Timestamp,
    /// The last bucket's end; the last bucket holds now.
    pub until: Timestamp,
    /// Every bucket, oldest first, empty ones as zeros.
    pub buckets: Vec<Bucket>,
    /// The breaker opening and closing, disables, enables, pauses and resumes, oldest first.
    pub marks: Vec<MarkView>,
    /// `null`: every attempt of the span is counted. Otherwise the span held
    /// more than `sample_cap` attempts; only the latest were counted, and
    /// the buckets are whole from this time on.
    pub complete_since: Option<Timestamp>,
    /// The most attempts a timeline counts (the latest ones).
    pub sample_cap: u32,
}

/// A mark on an endpoint's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MarkView {
    pub at: Timestamp,
    pub kind: MarkKind,
    /// A disable's reason: `gone`, `failing` or `manual`.
    pub reason: Option<String>,
}

/// `POST …/endpoints/{endpoint}/signature-check`: what a receiver got.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckSignature {
    /// The request's headers as received (names in any case); only
    /// `webhook-id`, `webhook-timestamp` and `webhook-signature` are read.
    pub headers: BTreeMap<String, String>,
    /// The body exactly as received.
    pub body: String,
}

/// `GET /v1/apps/{app}/incidents`: every field narrows the answer.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct IncidentsQuery {
    /// Dead-lettered deliveries count from this time (RFC 3339; default: a day ago).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
}

/// `GET /v1/apps/{app}/incidents` (docs/api.md#incidents): what is wrong now
/// with the app's endpoints, grouped by cause, worst first; empty when all is well.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IncidentsView {
    pub data: Vec<IncidentView>,
    /// Dead-lettered deliveries are counted from this time.
    pub since: Timestamp,
    pub checked_at: Timestamp,
}

/// Endpoints with the same trouble and the same cause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IncidentView {
    pub kind: IncidentKind,
    /// The cause's explanation code (`null` for a disable or a pause).
    pub code: Option<ExplanationCode>,
    pub status: Option<u16>,
    pub error_kind: Option<TransportError>,
    /// Since when (the earliest of its endpoints').
    pub since: Option<Timestamp>,
    /// Deliveries that wait on its endpoints (counted up to a million each).
    pub waiting: u64,
    /// Deliveries of its endpoints dead-lettered since the asked time.
    pub dead: u64,
    pub action: ExplanationAction,
    /// One English sentence that says it.
    pub message: String,
    pub endpoints: Vec<IncidentEndpointView>,
}

/// One endpoint of an incident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct IncidentEndpointView {
    pub endpoint_id: String,
    pub url: String,
    pub description: String,
    pub enabled: bool,
    pub paused: bool,
    pub disabled_reason: Option<String>,
    pub breaker: BreakerState,
    pub consecutive_failures: u32,
    /// Open: when the breaker's probe goes.
    pub next_probe_at: Option<Timestamp>,
    pub since: Option<Timestamp>,
    pub waiting: u64,
    pub dead: u64,
    /// The newest failed attempt's (failing) or dead delivery's explanation.
    pub cause: Option<Explanation>,
}

/// Attempt latency percentiles in milliseconds (`null` before any attempt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Latency {
    pub p50: Option<u64>,
    pub p95: Option<u64>,
    pub p99: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_new_endpoint_sends_only_what_differs_from_the_defaults() {
        let plain = serde_json::to_value(CreateEndpoint::new("https://a.example/hook")).unwrap();
        assert_eq!(plain, json!({"url": "https://a.example/hook"}));
        let read: CreateEndpoint = serde_json::from_value(plain).unwrap();
        assert!(read.enabled && !read.paused && read.retry == RetryOverrides::default());
        let paused = CreateEndpoint {
            paused: true,
            enabled: false,
            ..CreateEndpoint::new("https://a.example/hook")
        };
        assert_eq!(
            serde_json::to_value(paused).unwrap(),
            json!({"url": "https://a.example/hook", "enabled": false, "paused": true})
        );
    }

    #[test]
    fn a_patch_keeps_absent_null_and_set_apart_both_ways() {
        let patch = UpdateEndpoint {
            description: Some("orders".into()),
            filter: Some(None),
            rate_limit_per_sec: Some(Some(5)),
            ..UpdateEndpoint::default()
        };
        let sent = serde_json::to_value(&patch).unwrap();
        assert_eq!(
            sent,
            json!({"description": "orders", "filter": null, "rate_limit_per_sec": 5})
        );
        let read: UpdateEndpoint = serde_json::from_value(sent).unwrap();
        assert_eq!(read.filter, Some(None));
        assert_eq!(read.rate_limit_per_sec, Some(Some(5)));
        assert_eq!(read.event_types, None);
        assert_eq!(read.url, None);
    }
}

/// `POST /v1/apps/{app}/transform-preview`: what a transform makes of one
/// event (docs/api.md#transform-preview). The event is `event_id` (one of
/// the app's), or `event_type` with `payload`, or `event_type` alone (its
/// catalog example), or, with none of them, the app's latest event.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TransformPreview {
    /// A preset's name or a jq program, as an endpoint's `transform`.
    #[schema(
        max_length = 16384,
        pattern = r"^(slack|teams|discord|\{[a-z]{1,10}: \.[a-z_]{1,10}\})$"
    )]
    pub transform: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    #[schema(pattern = r"^[a-z]{1,10}(\.[a-z]{1,10}){0,2}$")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<serde_json::Value>,
    /// The endpoint whose `url` and `description` the program's input
    /// names; absent: a new endpoint's (`https://example.com/webhook`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<String>,
}

/// What a transform made of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransformOutcome {
    /// It gave a body: that is what would be sent, signed.
    Send,
    /// It gave `null`: the delivery would be skipped.
    Skip,
    /// It failed: the delivery would be dead (`transform_error`).
    Error,
}

/// The answer to a transform preview.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TransformPreviewView {
    /// The event it ran on (`null` for a payload or an example).
    pub event_id: Option<String>,
    pub event_type: String,
    /// What the program was given.
    pub input: serde_json::Value,
    pub outcome: TransformOutcome,
    /// The body that would be sent (`send` only): its JSON text, byte for
    /// byte as it would be signed and sent.
    pub body: Option<String>,
    /// The headers it adds, by name (`send` only).
    pub headers: BTreeMap<String, String>,
    /// The URL it sends to instead of the endpoint's (`send` only).
    pub url: Option<String>,
    /// What went wrong (`error` only), as the attempt log would say it.
    pub error: Option<String>,
}
