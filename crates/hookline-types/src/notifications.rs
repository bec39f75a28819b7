//! `/v1/apps/{app}/notifications`: the channels an app's customers are told
//! through when its endpoints break (docs/api.md#notifications).

use hookline_core::time::Timestamp;
use serde::{Deserialize, Serialize};

/// Where a channel sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    /// A plain-text e-mail to one mailbox.
    Email,
    /// A Slack incoming webhook.
    Slack,
    /// A Microsoft Teams incoming webhook (Workflows), as an Adaptive Card.
    Teams,
    /// A Discord webhook.
    Discord,
}

impl ChannelKind {
    pub fn of(kind: hookline_core::notify::ChannelKind) -> ChannelKind {
        use hookline_core::chat::Format;
        use hookline_core::notify::ChannelKind as K;
        match kind {
            K::Email => ChannelKind::Email,
            K::Chat(Format::Slack) => ChannelKind::Slack,
            K::Chat(Format::Teams) => ChannelKind::Teams,
            K::Chat(Format::Discord) => ChannelKind::Discord,
        }
    }

    pub fn core(self) -> hookline_core::notify::ChannelKind {
        use hookline_core::chat::Format;
        use hookline_core::notify::ChannelKind as K;
        match self {
            ChannelKind::Email => K::Email,
            ChannelKind::Slack => K::Chat(Format::Slack),
            ChannelKind::Teams => K::Chat(Format::Teams),
            ChannelKind::Discord => K::Chat(Format::Discord),
        }
    }
}

/// What a channel tells of (`hookline_core::notify::EVENTS`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
pub enum NotificationEvent {
    /// An endpoint failed many attempts in a row (its deliveries wait).
    #[serde(rename = "endpoint.failing")]
    EndpointFailing,
    /// A failing endpoint answered successfully again.
    #[serde(rename = "endpoint.recovered")]
    EndpointRecovered,
    /// An endpoint was disabled (410 Gone, failing for too long, or by hand).
    #[serde(rename = "endpoint.disabled")]
    EndpointDisabled,
    /// A disabled endpoint was enabled again.
    #[serde(rename = "endpoint.enabled")]
    EndpointEnabled,
    /// Deliveries failed for good: one notice per endpoint and window, with the count.
    #[serde(rename = "delivery.dead")]
    DeliveryDead,
    /// A bulk recovery (replay) ended.
    #[serde(rename = "replay.finished")]
    ReplayFinished,
}

impl NotificationEvent {
    pub const ALL: [NotificationEvent; 6] = [
        NotificationEvent::EndpointFailing,
        NotificationEvent::EndpointRecovered,
        NotificationEvent::EndpointDisabled,
        NotificationEvent::EndpointEnabled,
        NotificationEvent::DeliveryDead,
        NotificationEvent::ReplayFinished,
    ];

    /// The operational event it is.
    pub fn kind(self) -> hookline_core::operational::Kind {
        use hookline_core::operational::Kind;
        match self {
            NotificationEvent::EndpointFailing => Kind::EndpointFailing,
            NotificationEvent::EndpointRecovered => Kind::EndpointRecovered,
            NotificationEvent::EndpointDisabled => Kind::EndpointDisabled,
            NotificationEvent::EndpointEnabled => Kind::EndpointEnabled,
            NotificationEvent::DeliveryDead => Kind::DeliveryDead,
            NotificationEvent::ReplayFinished => Kind::ReplayFinished,
        }
    }

    pub fn of(kind: hookline_core::operational::Kind) -> Option<NotificationEvent> {
        NotificationEvent::ALL
            .into_iter()
            .find(|e| e.kind() == kind)
    }
}

/// `POST /v1/apps/{app}/notifications` (its schema: [`crate::schema::notification_channel`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateNotificationChannel {
    pub kind: ChannelKind,
    /// The mailbox (`email`: `ops@example.com`), or the chat's incoming-webhook
    /// URL (`https://hooks.slack.com/services/…`).
    pub to: String,
    /// What to be told of; absent: all of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub events: Option<Vec<NotificationEvent>>,
}

impl utoipa::PartialSchema for CreateNotificationChannel {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::schema::notification_channel().into()
    }
}

impl utoipa::ToSchema for CreateNotificationChannel {}

/// A channel the app's customers are told through.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NotificationChannelView {
    /// Its id (an endpoint of the deployment's operational app: its notices
    /// are delivered, retried and logged as any delivery).
    pub id: String,
    pub kind: ChannelKind,
    /// The mailbox, or the chat URL with its secret part hidden
    /// (`https://hooks.slack.com/services/…Xy9z`).
    pub to: String,
    pub events: Vec<NotificationEvent>,
    /// `false` once its deliveries stopped for good: the chat answered 410
    /// Gone (the channel was archived), or it failed for days; remove it and
    /// add it again.
    pub enabled: bool,
    /// Why it is disabled: `gone`, `failing` or `manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled_reason: Option<String>,
    pub created_at: Timestamp,
}

/// `GET /v1/apps/{app}/notifications`: every channel, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct NotificationChannelsView {
    pub data: Vec<NotificationChannelView>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_events_match_cores() {
        for kind in hookline_core::notify::ChannelKind::ALL {
            assert_eq!(ChannelKind::of(kind).core(), kind);
            let json = serde_json::to_value(ChannelKind::of(kind)).unwrap();
            assert_eq!(json, kind.as_str());
        }
        for kind in hookline_core::notify::EVENTS {
            let event = NotificationEvent::of(kind).unwrap();
            let json = serde_json::to_value(event).unwrap();
            assert_eq!(json, hookline_core::notify::event_name(kind));
        }
    }
}
