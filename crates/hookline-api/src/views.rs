//! The JSON the API answers with. Times are RFC 3339 (UTC, milliseconds).

use hookline_core::breaker::BreakerState;
use std::collections::BTreeMap;

use hookline_core::model::{
    request_headers, AttemptTrigger, AttemptVerdict, DeadReason, DeliveryState, RequestParts,
    TransportError,
};
use hookline_core::ordering::OnDead;
use hookline_core::time::Timestamp;
use hookline_store::{
    App, Attempt, Delivery, Endpoint, EndpointHealth, Event, RetryOverrides, PARKED,
};
use serde::Serialize;

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct AppView {
    id: String,
    uid: Option<String>,
    name: String,
    created_at: Timestamp,
    updated_at: Timestamp,
    /// The customer portal's branding and framing (docs/portal.md).
    portal: hookline_core::portal::PortalSettings,
}

impl From<&App> for AppView {
    fn from(app: &App) -> Self {
        Self {
            id: app.id.to_string(),
            uid: app.uid.clone(),
            name: app.name.clone(),
            created_at: app.created_at,
            updated_at: app.updated_at,
            portal: app.portal.clone(),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct EndpointView {
    id: String,
    app_id: String,
    url: String,
    description: String,
    event_types: Option<Vec<String>>,
    /// The payload filter (docs/api.md, "Payload filters"); `null`: every event of its types.
    filter: Option<String>,
    enabled: bool,
    /// New deliveries are made but held until it is resumed (`paused: false`).
    paused: bool,
    /// `manual`, `gone` (the endpoint answered 410) or `failing` (the breaker's span ran out).
    disabled_reason: Option<String>,
    /// Sent with every request (names lower-case); values show as `…` to a key
    /// without the `secrets` capability.
    headers: std::collections::BTreeMap<String, String>,
    /// Outbound authentication (docs/api.md, "Outbound authentication"); its
    /// secrets show as `…` to a key without the `secrets` capability.
    #[schema(value_type = Option<Object>)]
    auth: Option<serde_json::Value>,
    /// After a rotation: until when the previous secret signs beside the current one.
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_secret_valid_until: Option<Timestamp>,
    retry: RetryOverrides,
    rate_limit_per_sec: Option<u32>,
    /// This endpoint's ceiling of requests in flight per dispatcher process
    /// (`null`: the deployment's `max_in_flight_per_endpoint`).
    max_in_flight: Option<u32>,
    ordering_on_dead: OnDead,
    created_at: Timestamp,
    updated_at: Timestamp,
    /// Only on creation; afterwards via `GET …/secret`.
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
}

/// What a custom header's value shows as to a caller who may not read secrets
/// (an endpoint's own headers often carry a gateway's token).
pub(crate) const HIDDEN: &str = "…";

fn shown_headers(headers: &[(String, String)], reveal: bool) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, value)| {
            let value = if reveal {
                value.clone()
            } else {
                HIDDEN.to_owned()
            };
            (name.clone(), value)
        })
        .collect()
}

impl EndpointView {
    /// `with_secret`: the signing secret is in the view (on creation);
    /// `reveal`: custom header values are shown (a caller who may read secrets).
    pub fn new(endpoint: &Endpoint, with_secret: bool, reveal: bool) -> Self {
        Self {
            id: endpoint.id.to_string(),
            app_id: endpoint.app_id.to_string(),
            url: endpoint.url.clone(),
            description: endpoint.description.clone(),
            event_types: endpoint.event_types.clone(),
            filter: endpoint.filter.clone(),
            auth: endpoint.auth.as_ref().map(|auth| {
                let shown = if reveal {
                    auth.clone()
                } else {
                    auth.redacted(HIDDEN)
                };
                serde_json::to_value(shown).expect("auth serializes")
            }),
            enabled: endpoint.enabled,
            paused: endpoint.paused,
            disabled_reason: endpoint.disabled_reason.clone(),
            headers: shown_headers(&endpoint.headers, reveal),
            previous_secret_valid_until: endpoint.previous_secret.as_ref().map(|p| p.until),
            retry: endpoint.retry,
            rate_limit_per_sec: endpoint.rate_limit_per_sec,
            max_in_flight: endpoint.max_in_flight,
            ordering_on_dead: endpoint.ordering_on_dead,
            created_at: endpoint.created_at,
            updated_at: endpoint.updated_at,
            secret: with_secret.then(|| endpoint.secret.expose().to_owned()),
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DeliveryView {
    id: String,
    event_id: String,
    endpoint_id: String,
    state: DeliveryState,
    #[serde(skip_serializing_if = "Option::is_none")]
    ordering_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sequence: Option<u64>,
    /// Attempts in the current round (a replay starts a new round).
    attempts: u32,
    /// Pending: when the next attempt is due (absent while parked on a disabled or paused endpoint).
    #[serde(skip_serializing_if = "Option::is_none")]
    next_attempt_at: Option<Timestamp>,
    /// Pending on a disabled or paused endpoint: kept, and sent once it is enabled or resumed.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    parked: bool,
    last_attempt_at: Option<Timestamp>,
    dead_reason: Option<DeadReason>,
    dead_at: Option<Timestamp>,
    created_at: Timestamp,
}

impl From<&Delivery> for DeliveryView {
    fn from(d: &Delivery) -> Self {
        Self {
            id: d.id.to_string(),
            event_id: d.event_id.to_string(),
            endpoint_id: d.endpoint_id.to_string(),
            state: d.state,
            ordering_key: d.ordering_key.clone(),
            sequence: d.sequence,
            attempts: d.attempts,
            next_attempt_at: (d.state == DeliveryState::Pending && d.due_at != PARKED)
                .then_some(d.due_at),
            parked: d.state == DeliveryState::Pending && d.due_at == PARKED,
            last_attempt_at: d.last_attempt_at,
            dead_reason: d.dead_reason,
            dead_at: d.dead_at,
            created_at: d.created_at,
        }
    }
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct EventView {
    id: String,
    event_type: String,
    ordering_key: Option<String>,
    sequence: Option<u64>,
    /// As published: any JSON value.
    #[schema(value_type = serde_json::Value)]
    payload: serde_json::Value,
    created_at: Timestamp,
    /// In the event's own view; a listing leaves them out.
    #[serde(skip_serializing_if = "Option::is_none")]
    deliveries: Option<Vec<DeliveryView>>,
}

impl EventView {
    pub fn new(event: &Event, deliveries: Option<&[Delivery]>) -> Self {
        let payload = serde_json::from_slice::<serde_json::Value>(&event.body)
            .ok()
            .and_then(|mut envelope| envelope.get_mut("data").map(serde_json::Value::take))
            .unwrap_or(serde_json::Value::Null);
        Self {
            id: event.id.to_string(),
            event_type: event.event_type.clone(),
            ordering_key: event.ordering_key.clone(),
            sequence: event.sequence,
            payload,
            created_at: event.created_at,
            deliveries: deliveries.map(|d| d.iter().map(DeliveryView::from).collect()),
        }
    }
}

/// The answer to a publish (also what an idempotent replay repeats).
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct PublishedView<'a> {
    pub id: &'a str,
    pub event_type: &'a str,
    pub ordering_key: Option<&'a str>,
    pub sequence: Option<u64>,
    pub created_at: Timestamp,
    pub deliveries: Vec<DeliveryView>,
    /// What the event type catalog found wrong (absent when nothing).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    #[schema(value_type = Vec<crate::catalog::Warning>)]
    pub warnings: &'a [crate::catalog::Warning],
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct AttemptView {
    id: String,
    delivery_id: String,
    endpoint_id: String,
    attempt_number: u32,
    started_at: Timestamp,
    duration_ms: u64,
    status_code: Option<u16>,
    response_body: Option<String>,
    error_kind: Option<TransportError>,
    error_message: Option<String>,
    verdict: AttemptVerdict,
    next_attempt_at: Option<Timestamp>,
    dead_reason: Option<DeadReason>,
    /// `first`, `retry`, `probe` (the breaker's one request) or `replay` (the
    /// first of a round a replay or resend started); `null` on old attempts.
    trigger: Option<AttemptTrigger>,
    /// Where it went (`null` on old attempts).
    url: Option<String>,
    /// The headers sent: signatures, never secrets; the endpoint's own headers
    /// by name, their values as `…` (not kept: they may carry tokens).
    request_headers: BTreeMap<String, String>,
    /// The response's headers (repeated ones joined with ", "), capped.
    response_headers: BTreeMap<String, String>,
    /// The body was longer than the limit (64 KiB) and is cut there.
    response_body_truncated: bool,
}

/// Headers as an object; a repeated name's values joined as HTTP allows.
fn header_object(headers: &[(String, String)]) -> BTreeMap<String, String> {
    let mut object: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        object
            .entry(name.clone())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(value);
            })
            .or_insert_with(|| value.clone());
    }
    object
}

impl From<&Attempt> for AttemptView {
    fn from(a: &Attempt) -> Self {
        Self {
            id: a.id.to_string(),
            delivery_id: a.delivery_id.to_string(),
            endpoint_id: a.endpoint_id.to_string(),
            attempt_number: a.attempt_number,
            started_at: a.started_at,
            duration_ms: a.duration_ms,
            status_code: a.status_code,
            response_body: a.response_body.clone(),
            error_kind: a.error_kind,
            error_message: a.error_message.clone(),
            verdict: a.verdict,
            next_attempt_at: a.next_attempt_at,
            dead_reason: a.dead_reason,
            trigger: a.trigger,
            url: a.url.clone(),
            request_headers: a
                .sent
                .as_ref()
                .map(|sent| {
                    // The endpoint's own headers are kept by name only.
                    let custom: Vec<(String, String)> = sent
                        .custom_header_names
                        .iter()
                        .map(|name| (name.clone(), HIDDEN.to_owned()))
                        .collect();
                    request_headers(RequestParts {
                        custom: &custom,
                        event_id: sent.event_id.as_str(),
                        timestamp: a.started_at.as_secs(),
                        signature: &sent.signature,
                        ordering: sent.ordering.as_ref().map(|(k, s)| (k.as_str(), *s)),
                    })
                    .into_iter()
                    .map(|(name, value)| (name.to_owned(), value.into_owned()))
                    .collect()
                })
                .unwrap_or_default(),
            response_headers: header_object(&a.response_headers),
            response_body_truncated: a.response_truncated,
        }
    }
}

/// A page of a list, newest first. `next_cursor` continues it (`?before=`).
#[derive(Serialize)]
pub(crate) struct ListView<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct EndpointHealthView {
    endpoint_id: String,
    enabled: bool,
    disabled_reason: Option<String>,
    breaker: BreakerState,
    consecutive_failures: u32,
    /// Open: when the one probe request goes.
    next_probe_at: Option<Timestamp>,
    failing_since: Option<Timestamp>,
    last_error: Option<String>,
    last_failure_at: Option<Timestamp>,
    /// Over the endpoint's last (up to) 100 attempts; null before any.
    recent_success_rate: Option<f64>,
    recent_attempts: u32,
}

impl EndpointHealthView {
    pub fn new(endpoint: &Endpoint, health: &EndpointHealth) -> Self {
        Self {
            endpoint_id: endpoint.id.to_string(),
            enabled: health.enabled,
            disabled_reason: health.disabled_reason.clone(),
            breaker: health.breaker.state,
            consecutive_failures: health.breaker.consecutive_failures,
            next_probe_at: health.breaker.next_probe_at,
            failing_since: health.breaker.failing_since,
            last_error: health.last_error.clone(),
            last_failure_at: health.last_failure_at,
            recent_success_rate: (health.recent_attempts > 0)
                .then(|| f64::from(health.recent_delivered) / f64::from(health.recent_attempts)),
            recent_attempts: health.recent_attempts,
        }
    }
}
