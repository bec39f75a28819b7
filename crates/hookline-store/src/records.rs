//! The rows the store hands out and takes in.

use std::sync::Arc;
use std::time::Duration;

use hookline_core::access::Capabilities;
use hookline_core::batch::Batching;
use hookline_core::breaker::{Breaker, Signal};
use hookline_core::ids::{ApiKeyId, AppId, AttemptId, DeliveryId, EndpointId, EventId};
use hookline_core::model::{
    AttemptTrigger, AttemptVerdict, DeadReason, DeliveryState, TransportError,
};
use hookline_core::ordering::OnDead;
use hookline_core::outbound_auth::OutboundAuth;
use hookline_core::portal::PortalSettings;
pub use hookline_core::retry::{Next, RetryOverrides};
use hookline_core::signing::{EndpointSecret, RetiringSecret, SigningKeys};
use hookline_core::switches::Switches;
use hookline_core::time::Timestamp;
use hookline_core::transform::Transform;

/// A producer's tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    pub id: AppId,
    pub uid: Option<String>,
    pub name: String,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// Its customer portal's branding and framing.
    pub portal: PortalSettings,
}

/// Fields of a new app.
#[derive(Debug, Clone)]
pub struct NewApp {
    pub uid: Option<String>,
    pub name: String,
    pub portal: PortalSettings,
}

/// A change to an app; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct AppPatch {
    pub name: Option<String>,
    /// `Some(None)` clears the uid.
    pub uid: Option<Option<String>>,
    /// Replaces the portal settings as a whole.
    pub portal: Option<PortalSettings>,
}

/// A customer endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub id: EndpointId,
    pub app_id: AppId,
    pub url: String,
    pub description: String,
    /// The event types this endpoint receives; `None` receives all.
    pub event_types: Option<Vec<String>>,
    /// Its payload filter's source (`hookline_core::filter`, checked by the
    /// caller); `None` receives every event of its types.
    pub filter: Option<String>,
    pub enabled: bool,
    /// Paused: new deliveries are still made, but held (parked) until resumed.
    pub paused: bool,
    pub secret: EndpointSecret,
    /// The secret the last rotation replaced, while it still signs.
    pub previous_secret: Option<RetiringSecret>,
    /// Sent with every request, names lower-case (checked by `hookline_core::custom_headers`).
    pub headers: Vec<(String, String)>,
    /// Outbound authentication (sealed at rest; checked by the caller).
    pub auth: Option<OutboundAuth>,
    pub retry: RetryOverrides,
    /// Deliveries per second, for the whole cluster; `None` is unlimited.
    pub rate_limit_per_sec: Option<u32>,
    /// The ceiling of this endpoint's adaptive concurrency per dispatcher process;
    /// `None` follows the deployment's.
    pub max_in_flight: Option<u32>,
    /// What a dead delivery does to the rest of its ordering partition.
    pub ordering_on_dead: OnDead,
    /// Why the endpoint is disabled: `manual`, `gone` (410) or `failing` (the breaker's span).
    pub disabled_reason: Option<String>,
    /// The app whose notification channel this is (an endpoint of the internal
    /// app: `hookline_core::notify`); `None` for every other endpoint.
    pub owner_app: Option<AppId>,
    /// What is sent instead of the envelope (`hookline_core::transform`,
    /// checked by the caller).
    pub transform: Option<Transform>,
    /// Its sequence number goes in the signed envelope (`seq`) as well as in a
    /// header (docs/api.md, "Sequence numbers").
    pub seq_in_body: bool,
    /// Up to how many deliveries go in one request, after at most how long
    /// (`hookline_core::batch`, checked by the caller).
    pub batch: Option<Batching>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// Where and how a delivery is sent: one per endpoint, shared by its deliveries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub url: String,
    pub signing: SigningKeys,
    /// The endpoint's custom headers.
    pub headers: Vec<(String, String)>,
    /// How Hookline authenticates to it besides the signature (opened, shared).
    pub auth: Option<Arc<OutboundAuth>>,
    /// What is sent instead of the envelope.
    pub transform: Option<Transform>,
    /// The endpoint's description (a transform's input names it).
    pub description: String,
    /// The endpoint's sequence number goes in the signed envelope (`seq`), not
    /// only in a header.
    pub seq_in_body: bool,
    /// Its deliveries go in batches (`hookline_core::batch`).
    pub batch: Option<Batching>,
}

impl Endpoint {
    /// Its `enabled` and `paused`.
    pub fn switches(&self) -> Switches {
        Switches {
            enabled: self.enabled,
            paused: self.paused,
        }
    }
}

/// Fields of a new endpoint (already validated by the caller).
#[derive(Debug, Clone)]
pub struct NewEndpoint {
    pub url: String,
    pub description: String,
    pub event_types: Option<Vec<String>>,
    pub filter: Option<String>,
    pub enabled: bool,
    pub paused: bool,
    pub secret: EndpointSecret,
    pub headers: Vec<(String, String)>,
    pub auth: Option<OutboundAuth>,
    pub retry: RetryOverrides,
    pub rate_limit_per_sec: Option<u32>,
    pub max_in_flight: Option<u32>,
    pub ordering_on_dead: OnDead,
    /// The app whose notification channel this is (see [`Endpoint::owner_app`]).
    pub owner_app: Option<AppId>,
    pub transform: Option<Transform>,
    pub seq_in_body: bool,
    pub batch: Option<Batching>,
}

/// A change to an endpoint; `None` leaves a field as it is.
#[derive(Debug, Clone, Default)]
pub struct EndpointPatch {
    pub url: Option<String>,
    pub description: Option<String>,
    /// `Some(None)` removes the filter (receive everything).
    pub event_types: Option<Option<Vec<String>>>,
    /// `Some(None)` removes the payload filter.
    pub filter: Option<Option<String>>,
    /// `Some(None)` removes the transform.
    pub transform: Option<Option<Transform>>,
    pub seq_in_body: Option<bool>,
    /// `Some(None)` stops batching.
    pub batch: Option<Option<Batching>>,
    pub enabled: Option<bool>,
    pub paused: Option<bool>,
    /// Replaces all custom headers at once.
    pub headers: Option<Vec<(String, String)>>,
    /// Replaces the outbound authentication; `Some(None)` removes it.
    pub auth: Option<Option<OutboundAuth>>,
    /// Replaces all overrides at once.
    pub retry: Option<RetryOverrides>,
    /// `Some(None)` removes the limit.
    pub rate_limit_per_sec: Option<Option<u32>>,
    /// `Some(None)` follows the deployment's ceiling again.
    pub max_in_flight: Option<Option<u32>>,
    pub ordering_on_dead: Option<OnDead>,
}

/// An endpoint's health: its breaker and how its recent attempts went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointHealth {
    pub enabled: bool,
    pub disabled_reason: Option<String>,
    pub breaker: Breaker,
    pub last_error: Option<String>,
    pub last_failure_at: Option<Timestamp>,
    /// The endpoint's last (up to 100) attempts…
    pub recent_attempts: u32,
    /// …and how many of them delivered.
    pub recent_delivered: u32,
}

/// A stored event. `body` is the exact envelope every attempt sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub id: EventId,
    pub app_id: AppId,
    pub event_type: String,
    pub ordering_key: Option<String>,
    /// The event's place among its ordering key's events (1, 2, …).
    pub sequence: Option<u64>,
    pub body: Vec<u8>,
    pub created_at: Timestamp,
}

/// A new event, its envelope already built. Its sequence is assigned by `publish`.
#[derive(Debug, Clone)]
pub struct NewEvent {
    pub id: EventId,
    pub event_type: String,
    pub ordering_key: Option<String>,
    pub body: Vec<u8>,
    /// A test send: the event goes to this endpoint only, whatever its filter.
    pub only_endpoint: Option<EndpointId>,
}

/// An `Idempotency-Key` and the fingerprint of the request that carried it.
#[derive(Debug, Clone)]
pub struct IdempotencyKey {
    pub key: String,
    pub fingerprint: String,
}

/// What `publish` wrote: the event (without its body) and its deliveries as they
/// were at commit. A replay of its idempotency key returns it again, unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    pub event: Event,
    pub deliveries: Vec<Delivery>,
}

/// An answer stored under an idempotency key by a release up to `4c34b89`,
/// which stored the API's rendered response rather than what was written.
/// Idempotency records live 24 h by default, so these disappear a day after an
/// upgrade; [`PublishOutcome::ReplayedAnswer`] can go in a later release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

/// The result of `publish`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublishOutcome {
    /// A new event was written.
    Created(Published),
    /// The key was used before with the same request: what that request wrote.
    Replayed(Published),
    /// The key was used before with the same request, by an earlier release
    /// that stored its rendered answer.
    ReplayedAnswer(StoredResponse),
    /// The key was used before with a different request.
    KeyReused,
}

/// One event's delivery to one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: DeliveryId,
    pub app_id: AppId,
    pub event_id: EventId,
    pub endpoint_id: EndpointId,
    pub state: DeliveryState,
    /// Pending: when the next attempt is due ([`PARKED`] while its endpoint is
    /// disabled). In flight: when the lease ends.
    pub due_at: Timestamp,
    pub ordering_key: Option<String>,
    pub sequence: Option<u64>,
    /// Attempts in the current round (a replay starts a new one).
    pub attempts: u32,
    pub round_started_at: Timestamp,
    pub last_attempt_at: Option<Timestamp>,
    pub dead_reason: Option<DeadReason>,
    pub dead_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

/// What a delivery's view shows beside its own row
/// ([`Listings::delivery_facts`](crate::Listings::delivery_facts)): what it
/// is, and what its explanation (`hookline_core::explain`) reads.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryFacts {
    /// Its event's type.
    pub event_type: String,
    /// Its newest attempt, of any round: `None` before any attempt. Its
    /// `status_code` is the delivery's last status (`None` also when the
    /// newest got no answer: a timeout, a refused connection).
    pub newest: Option<Attempt>,
    /// Its endpoint as far as it holds the delivery back; `None` once deleted.
    pub endpoint: Option<EndpointGate>,
}

/// An endpoint's switches, breaker and retry settings: what decides whether,
/// and how long, its pending deliveries wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointGate {
    pub enabled: bool,
    pub paused: bool,
    /// A polling endpoint (`hookline_core::destination::POLL_URL`): its
    /// deliveries wait for its receiver to fetch them.
    pub polled: bool,
    pub disabled_reason: Option<String>,
    pub breaker: Breaker,
    pub retry: RetryOverrides,
}

/// A delivery claimed by a dispatcher, with everything needed to send it.
#[derive(Debug, Clone)]
pub struct ClaimedDelivery {
    pub id: DeliveryId,
    pub app_id: AppId,
    pub event_id: EventId,
    pub endpoint_id: EndpointId,
    /// Proves ownership when completing; a reclaimed delivery has a new token.
    pub lease_token: String,
    pub attempts: u32,
    pub round_started_at: Timestamp,
    pub ordering_key: Option<String>,
    pub sequence: Option<u64>,
    /// Its number among its endpoint's deliveries, 1, 2, 3, … with no gaps
    /// (none for one made before deliveries were numbered).
    pub endpoint_sequence: Option<u64>,
    /// A rate-limited endpoint's reserved send slot: do not send before it.
    pub send_at: Option<Timestamp>,
    /// This delivery is its endpoint's half-open breaker probe.
    pub probe: bool,
    /// Its round was started by a replay or a resend.
    pub replayed: bool,
    /// The endpoint's own concurrency ceiling, if it has one.
    pub max_in_flight: Option<u32>,
    pub destination: Arc<Destination>,
    pub retry: RetryOverrides,
    pub body: std::sync::Arc<[u8]>,
}

/// One finished attempt and the delivery's next state, written together.
#[derive(Debug, Clone)]
pub struct AttemptRecord {
    pub delivery_id: DeliveryId,
    pub event_id: EventId,
    pub app_id: AppId,
    pub endpoint_id: EndpointId,
    pub lease_token: String,
    /// 1-based within the round.
    pub attempt_number: u32,
    pub started_at: Timestamp,
    pub duration: Duration,
    pub status_code: Option<u16>,
    pub response_body: Option<String>,
    pub error: Option<(TransportError, String)>,
    /// Where the request went, with the endpoint's own headers it carried.
    pub destination: Arc<Destination>,
    /// The `webhook-signature` sent; `None` if no request left.
    pub signature: Option<String>,
    /// The response's headers (capped), if a response arrived.
    pub response_headers: Vec<(String, String)>,
    /// The response body was cut at the limit.
    pub response_truncated: bool,
    pub trigger: AttemptTrigger,
    /// The delivery's number among its endpoint's, as sent.
    pub endpoint_sequence: Option<u64>,
    /// What the endpoint's transform made of the request, if it has one.
    pub transformed: Option<Transformed>,
    /// The batch request the attempt went in, if its endpoint batches.
    pub batch: Option<BatchAttempt>,
    /// What follows the attempt (decided by the dispatcher).
    pub next: Next,
    /// What the attempt says about the endpoint's health.
    pub signal: Signal,
    /// 410 Gone: disable the endpoint too.
    pub disable_endpoint: bool,
}

/// What an endpoint's transform made of an attempt's request: the attempt
/// log shows the body as sent.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transformed {
    /// The body sent in place of the envelope, cut at [`MAX_SHOWN_BODY`]
    /// bytes; empty when nothing was sent.
    pub body: String,
    /// Where it went, when the transform chose the URL.
    pub url: Option<String>,
    /// The headers the transform added, by name.
    pub header_names: Vec<String>,
    /// The transform gave `null`: nothing was sent.
    pub skipped: bool,
}

/// One delivery's place in a batch request.
#[derive(Debug, Clone)]
pub struct BatchAttempt {
    pub request: Arc<BatchRequest>,
    /// Where in the array its element was (0: first).
    pub position: u32,
}

/// One batch request, as its members' attempts record it.
#[derive(Debug)]
pub struct BatchRequest {
    /// Its `webhook-id`.
    pub id: hookline_core::ids::BatchId,
    /// Its elements' events and numbers, in order: kept with the first
    /// member's attempt, from which the body sent is made again
    /// (`hookline_core::batch::body`), byte for byte.
    pub members: Vec<BatchElement>,
}

/// One element of a batch request: its event, and its number if it had one.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BatchElement(pub EventId, pub Option<u64>);

/// Where an attempt's delivery was in a batch request (read back from the
/// attempt's detail).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BatchMember {
    /// The request's `webhook-id`.
    pub id: String,
    pub size: u32,
    pub position: u32,
    /// Every element, on the first member's attempt only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<BatchElement>,
}

/// The most of a transformed body an attempt keeps.
pub const MAX_SHOWN_BODY: usize = 64 * 1024;

pub use hookline_core::completion::BreakerChanges;

/// What one claim produced.
#[derive(Debug, Clone, Default)]
pub struct Claim {
    /// The deliveries to send now.
    pub deliveries: Vec<ClaimedDelivery>,
    /// How many due rows the claim took before admission held some back; equal to the
    /// limit when more work may be due right away.
    pub rows: usize,
    /// What recording the turn's finished attempts did to breakers.
    pub breaker_changes: BreakerChanges,
}

pub use hookline_core::admission::PARKED;

/// One stored attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub id: AttemptId,
    pub delivery_id: DeliveryId,
    pub endpoint_id: EndpointId,
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
    /// `None`, and empty headers, on attempts recorded before these were kept.
    pub url: Option<String>,
    /// What the request carried: with these, `hookline_core::model::request_headers`
    /// gives back every header sent.
    pub sent: Option<SentRequest>,
    pub response_headers: Vec<(String, String)>,
    pub response_truncated: bool,
    pub trigger: Option<AttemptTrigger>,
    /// The body sent, when the endpoint's transform made it (`None`: the
    /// event's envelope).
    pub request_body: Option<String>,
    /// The endpoint's transform skipped the delivery: nothing was sent.
    pub skipped: bool,
    /// The batch request it went in; the first member's attempt keeps the
    /// request's body (`request_body`).
    pub batch: Option<BatchMember>,
}

/// The varying parts of an attempt's request, and its delivery's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentRequest {
    pub signature: String,
    /// The endpoint's own headers, by name (their values are not kept).
    pub custom_header_names: Vec<String>,
    pub event_id: EventId,
    pub ordering: Option<(String, u64)>,
    /// The delivery's number among its endpoint's, as its header carried it.
    pub endpoint_sequence: Option<u64>,
    /// The body sent was the envelope with that number in it
    /// (`hookline_core::model::numbered`).
    pub seq_in_body: bool,
}

/// What a replay (or resend) request did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayOutcome {
    /// The dead delivery is pending again, in a new round.
    Replayed(Delivery),
    /// Not in the state the request restarts (dead for a replay, succeeded for a
    /// resend): nothing changed.
    Unchanged(Delivery),
    /// Its endpoint was deleted: there is nowhere to send it.
    EndpointDeleted(Delivery),
    NotFound,
}

/// A page request over a newest-first list: at most `limit` rows older than `before`.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub limit: u32,
    /// The opaque cursor of the last row of the previous page.
    pub before: Option<String>,
}

/// A delivery's state as the dashboard filters it: the stored states, with
/// `pending` split into due work and work `parked` on a disabled endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    Pending,
    InFlight,
    Succeeded,
    Dead,
    Blocked,
    Parked,
}

/// An HTTP status, exactly (`503`) or by class (`5xx`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusFilter {
    Exact(u16),
    /// The hundreds digit: `5` for `5xx`.
    Class(u16),
}

impl StatusFilter {
    /// The statuses it covers, as a half-open range.
    pub fn range(self) -> (u16, u16) {
        match self {
            StatusFilter::Exact(status) => (status, status + 1),
            StatusFilter::Class(class) => (class * 100, class * 100 + 100),
        }
    }
}

/// Creation times as a half-open range `[since, until)`, read from the
/// time-sortable ids (so a range is an index range, whatever else is filtered).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimeRange {
    pub since: Option<Timestamp>,
    pub until: Option<Timestamp>,
}

/// Which of an app's deliveries a listing returns (every field narrows it).
#[derive(Debug, Clone, Default)]
pub struct DeliveryFilter {
    pub endpoint: Option<EndpointId>,
    pub state: Option<StateFilter>,
    pub event_type: Option<String>,
    pub event: Option<EventId>,
    /// The HTTP status of the delivery's latest attempt.
    pub last_status: Option<StatusFilter>,
    pub created: TimeRange,
}

/// Which of an app's events a listing returns.
#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub event_type: Option<String>,
    pub ordering_key: Option<String>,
    pub created: TimeRange,
}

/// Which dead deliveries a DLQ listing returns; `died` is when they were dead-lettered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqFilter {
    pub endpoint: Option<EndpointId>,
    pub reason: Option<DeadReason>,
    pub event_type: Option<String>,
    pub died: TimeRange,
}

/// Which attempts a listing returns.
#[derive(Debug, Clone, Default)]
pub struct AttemptFilter {
    pub verdict: Option<AttemptVerdict>,
    pub status: Option<StatusFilter>,
    pub started: TimeRange,
}

/// A type of the event catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct EventType {
    pub name: String,
    pub description: String,
    /// A JSON Schema of the payload (`data`); `None` accepts any.
    pub schema: Option<serde_json::Value>,
    /// An example payload: what a test send sends unless given another.
    pub example: Option<serde_json::Value>,
    pub deprecated: bool,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A change to a catalog type; `None` leaves a field as it is, `Some(None)` clears it.
#[derive(Debug, Clone, Default)]
pub struct EventTypePatch {
    pub description: Option<String>,
    pub schema: Option<Option<serde_json::Value>>,
    pub example: Option<Option<serde_json::Value>>,
    pub deprecated: Option<bool>,
}

/// A stored API key (never the key itself: only its hash is kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: ApiKeyId,
    pub scope: KeyScope,
    pub name: String,
    pub created_at: Timestamp,
    /// After this the key no longer works; `None`: never.
    pub expires_at: Option<Timestamp>,
}

impl ApiKey {
    /// Whether the key has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires_at.is_some_and(|at| now >= at)
    }
}

/// An API key's authority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyScope {
    /// Everything.
    Admin,
    /// One app, and within it only what `capabilities` allow.
    App {
        app: AppId,
        capabilities: Capabilities,
    },
}
