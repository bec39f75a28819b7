//! The JSON of Hookline's HTTP API: what each route reads (bodies and query
//! parameters) and what it answers (views). The server (`hookline-api`)
//! deserialises requests and renders answers with these types and builds its
//! OpenAPI document from them; the Rust client (`hookline-client`) serialises
//! requests and reads answers with the same ones, so the two cannot drift.
//!
//! Times are RFC 3339 (UTC, milliseconds). A `PATCH` body's `Option<Option<T>>`
//! field is absent (`None`: unchanged), `null` (`Some(None)`: cleared) or set.
//!
//! # Layout
//!
//! One module per resource, as the routes are grouped: [`apps`], [`endpoints`],
//! [`events`], [`deliveries`] (with attempts and the DLQ), [`replays`] (bulk),
//! [`event_types`], [`keys`], [`notifications`], [`messages`] (numbered
//! deliveries by range); [`page`] for listings. [`schema`] holds the
//! OpenAPI rules the derives cannot state.

pub mod apps;
pub mod de;
pub mod deliveries;
pub mod endpoints;
pub mod event_types;
pub mod events;
pub mod keys;
pub mod messages;
pub mod notifications;
pub mod page;
pub mod problem;
pub mod replays;
pub mod schema;

pub use apps::{AppView, CreateApp, PortalAccess, PortalLink, Redeem, UpdateApp};
pub use deliveries::{
    AttemptView, AttemptsQuery, BatchMemberView, DeliveriesQuery, DeliveryView, DlqQuery,
    ReplayView, ResendView, StateParam,
};
pub use endpoints::{
    CheckSignature, CreateEndpoint, EndpointHealthView, EndpointStatsView, EndpointView,
    FilterPreview, FilterPreviewEvent, FilterPreviewView, IncidentEndpointView, IncidentView,
    IncidentsQuery, IncidentsView, Latency, MarkView, PollingView, RotateSecret, RotatedSecretView,
    SecretView, StatsWindow, TestSend, TestSendView, TimelineQuery, TimelineView, TransformOutcome,
    TransformPreview, TransformPreviewView, UpdateEndpoint,
};
pub use event_types::{CreateEventType, EventTypeView, UpdateEventType};
pub use events::{
    BatchAnswer, BatchItem, BatchItemAnswer, BatchRequest, EventView, EventsQuery, PublishRequest,
    PublishedView, Warning,
};
pub use keys::{CreateKey, KeyQuery, KeyView, RevokedView};
pub use messages::{
    CommitMessages, CommittedView, MessageState, MessageView, MessagesQuery, MessagesView,
};
pub use notifications::{
    ChannelKind, CreateNotificationChannel, NotificationChannelView, NotificationChannelsView,
    NotificationEvent,
};
pub use page::{ListView, PageQuery};
pub use problem::Problem;
pub use replays::{BulkReplayRequest, DryRunView, FilterView, ReplayJobView};

/// The core types the views carry (states, reasons, verdicts, times…).
pub use hookline_core::{
    access::Capability,
    breaker::BreakerState,
    explain::{Action as ExplanationAction, Code as ExplanationCode, Explanation},
    incidents::Kind as IncidentKind,
    model::{
        AttemptTrigger, AttemptVerdict, DeadReason, DeliveryState, ReplayJobState, TransportError,
    },
    ordering::OnDead,
    outbound_auth::OutboundAuth,
    portal::PortalSettings,
    retry::RetryOverrides,
    signature_check::{Check as SignatureCheck, Code as SignatureCheckCode},
    time::Timestamp,
    timeline::{Bucket as TimelineBucket, MarkKind, Window as TimelineWindow},
};
