//! The delivery lifecycle's vocabulary.
//!
//! ```text
//! blocked ──(earlier event of its ordering key done)──┐
//!                                                    ▼
//! pending ──claim──▶ in_flight ──▶ succeeded
//!    ▲                  │  └─────▶ dead (the DLQ, with a reason) ──replay──▶ pending
//!    └──retry / lease expiry / release / deferral (breaker, rate limit)
//! ```

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use crate::ids::EventId;
use crate::time::Timestamp;

/// Where a delivery is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting for its `due_at`; a claim takes it.
    Pending,
    /// Claimed by a dispatcher whose lease ends at `due_at`; after that anyone may claim it.
    InFlight,
    /// The endpoint answered 2xx. Final.
    Succeeded,
    /// In the dead-letter queue; only a replay moves it on.
    Dead,
    /// Waiting for an earlier delivery of its ordering partition to finish.
    Blocked,
}

/// Why a delivery was dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DeadReason {
    /// `max_attempts` reached or the delivery outlived `max_age`.
    RetriesExhausted,
    /// A 4xx other than 408/429 (the receiver refused the request itself).
    ClientError,
    /// A 3xx: redirects are never followed.
    Redirect,
    /// 410 Gone: the endpoint was also disabled.
    Gone,
    /// The URL resolves to an address outbound requests may not reach.
    DestinationForbidden,
    /// The endpoint was deleted while the delivery was pending.
    EndpointDeleted,
    /// The endpoint's transform failed on this event (it does not compile,
    /// it raised an error, it ran over a limit, or it gave what cannot be
    /// sent): nothing was sent, and the same program would fail again.
    TransformError,
}

/// What went wrong at the transport level, when no HTTP response arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum TransportError {
    Timeout,
    Connect,
    Dns,
    Tls,
    /// The request could not be sent or the response not read, for another reason.
    Io,
    /// Refused before connecting: the destination address is forbidden.
    DestinationForbidden,
    /// The endpoint's OAuth2 token could not be had (its token endpoint failed
    /// or refused); nothing was sent to the receiver, or it refused the new token too.
    AuthError,
}

/// The classifier's decision for one attempt, as recorded on the attempt row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AttemptVerdict {
    Delivered,
    Retry,
    Dead,
}

/// What made an attempt happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum AttemptTrigger {
    /// The delivery's first attempt.
    First,
    /// A later attempt of the same round, after a failure.
    Retry,
    /// The one request a half-open circuit breaker lets through.
    Probe,
    /// The first attempt of a round a replay or a resend started.
    Replay,
}

impl AttemptTrigger {
    /// The trigger of an attempt made after `attempts_before` attempts of its
    /// round; `replayed_round`: the round was started by a replay or a resend.
    /// A probe is a probe whatever else holds: that is why it was let through.
    pub fn of(probe: bool, attempts_before: u32, replayed_round: bool) -> Self {
        match (probe, attempts_before, replayed_round) {
            (true, _, _) => Self::Probe,
            (false, 0, false) => Self::First,
            (false, 0, true) => Self::Replay,
            (false, _, _) => Self::Retry,
        }
    }
}

/// Where a bulk replay is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReplayJobState {
    /// Moving matching dead deliveries back to pending, batch by batch.
    Running,
    /// Every matching delivery was reached.
    Completed,
    /// Stopped on request; what it replayed before stays replayed.
    Cancelled,
}

macro_rules! sql_text_enum {
    ($ty:ty { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: &[Self] = &[$(Self::$variant),+];

            /// The stable spelling used in the database and the API.
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl FromStr for $ty {
            type Err = UnknownVariant;
            fn from_str(s: &str) -> Result<Self, UnknownVariant> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    other => Err(UnknownVariant { kind: stringify!($ty), value: other.to_owned() }),
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// A stored string that names no variant (a corrupt row or a newer schema).
#[derive(Debug, thiserror::Error)]
#[error("unknown {kind} `{value}`")]
pub struct UnknownVariant {
    pub kind: &'static str,
    pub value: String,
}

sql_text_enum!(DeliveryState {
    Pending => "pending",
    InFlight => "in_flight",
    Succeeded => "succeeded",
    Dead => "dead",
    Blocked => "blocked",
});

sql_text_enum!(DeadReason {
    RetriesExhausted => "retries_exhausted",
    ClientError => "client_error",
    Redirect => "redirect",
    Gone => "gone",
    DestinationForbidden => "destination_forbidden",
    EndpointDeleted => "endpoint_deleted",
    TransformError => "transform_error",
});

sql_text_enum!(TransportError {
    Timeout => "timeout",
    Connect => "connect",
    Dns => "dns",
    Tls => "tls",
    Io => "io",
    DestinationForbidden => "destination_forbidden",
    AuthError => "auth_error",
});

sql_text_enum!(ReplayJobState {
    Running => "running",
    Completed => "completed",
    Cancelled => "cancelled",
});

sql_text_enum!(AttemptTrigger {
    First => "first",
    Retry => "retry",
    Probe => "probe",
    Replay => "replay",
});

sql_text_enum!(AttemptVerdict {
    Delivered => "delivered",
    Retry => "retry",
    Dead => "dead",
});

/// The Standard Webhooks envelope: the exact body every attempt sends.
///
/// Built once per event (at publish) and stored as the event's body, so every
/// attempt and every replay sends byte-identical content.
pub fn envelope(event_type: &str, timestamp: Timestamp, data: &serde_json::Value) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Envelope<'a> {
        #[serde(rename = "type")]
        event_type: &'a str,
        timestamp: String,
        data: &'a serde_json::Value,
    }
    serde_json::to_vec(&Envelope {
        event_type,
        timestamp: timestamp.to_rfc3339(),
        data,
    })
    .expect("a JSON value always serializes")
}

/// The ordering key of an ordered event (absent for unordered ones).
pub const ORDERING_KEY_HEADER: &str = "hookline-ordering-key";
/// The event's place among its key's events: 1, 2, 3, … in publish order.
pub const SEQUENCE_HEADER: &str = "hookline-sequence";
/// The delivery's number among its endpoint's deliveries: 1, 2, 3, … with no
/// gaps (docs/api.md, "Sequence numbers"). Unsigned; the signed copy is the
/// envelope's `seq` ([`numbered`]).
pub const ENDPOINT_SEQUENCE_HEADER: &str = "hookline-endpoint-sequence";

/// `envelope` with its endpoint's sequence number `seq`, as sent: `,"seq":N`
/// inserted before the envelope's `,"data":`, so it is signed with the body and
/// sits next to `type` and `timestamp`. The first `,"data":` is the envelope's
/// own key: `type` is a JSON string, in which a quote is escaped, and
/// `timestamp` is RFC 3339. A body without one (not an envelope) is sent as it is.
pub fn numbered(envelope: &[u8], seq: u64) -> Vec<u8> {
    const DATA: &[u8] = b",\"data\":";
    let Some(at) = envelope.windows(DATA.len()).position(|w| w == DATA) else {
        return envelope.to_vec();
    };
    let mut body = Vec::with_capacity(envelope.len() + 28);
    body.extend_from_slice(&envelope[..at]);
    body.extend_from_slice(b",\"seq\":");
    body.extend_from_slice(seq.to_string().as_bytes());
    body.extend_from_slice(&envelope[at..]);
    body
}

/// What one attempt's request carries besides its body; [`request_headers`]
/// spells it out. An attempt row keeps only the parts that vary (the signature
/// and the endpoint's own headers as they were), not the whole list.
#[derive(Debug, Clone, Copy)]
pub struct RequestParts<'a> {
    /// The endpoint's custom headers, sent first.
    pub custom: &'a [(String, String)],
    pub event_id: &'a str,
    /// `webhook-timestamp`: unix seconds of the attempt.
    pub timestamp: i64,
    pub signature: &'a str,
    /// The ordering key and the event's sequence number, for ordered events.
    pub ordering: Option<(&'a str, u64)>,
    /// The delivery's number among its endpoint's (none before they were numbered).
    pub endpoint_sequence: Option<u64>,
    /// A batch request's number of elements: `event_id` is then the batch's
    /// id, and `ordering` and `endpoint_sequence` are not sent (each element
    /// carries its own number).
    pub batch_size: Option<u32>,
}

/// Every header an attempt sends, in order: one rule for the sender that sends
/// them and for the attempt detail that shows them. (Borrowed where it can be:
/// the sender builds this for every attempt.)
pub fn request_headers<'a>(parts: RequestParts<'a>) -> Vec<(&'a str, Cow<'a, str>)> {
    let mut headers: Vec<(&str, Cow<str>)> = Vec::with_capacity(parts.custom.len() + 6);
    headers.extend(
        parts
            .custom
            .iter()
            .map(|(name, value)| (name.as_str(), Cow::Borrowed(value.as_str()))),
    );
    headers.extend([
        ("content-type", Cow::Borrowed("application/json")),
        ("webhook-id", Cow::Borrowed(parts.event_id)),
        ("webhook-timestamp", Cow::Owned(parts.timestamp.to_string())),
        ("webhook-signature", Cow::Borrowed(parts.signature)),
    ]);
    if let Some(size) = parts.batch_size {
        headers.push((
            crate::batch::BATCH_SIZE_HEADER,
            Cow::Owned(size.to_string()),
        ));
        return headers;
    }
    if let Some((key, sequence)) = parts.ordering {
        headers.push((ORDERING_KEY_HEADER, Cow::Borrowed(key)));
        headers.push((SEQUENCE_HEADER, Cow::Owned(sequence.to_string())));
    }
    if let Some(seq) = parts.endpoint_sequence {
        headers.push((ENDPOINT_SEQUENCE_HEADER, Cow::Owned(seq.to_string())));
    }
    headers
}

/// The value of the `webhook-id` header for an event.
pub fn webhook_id(event: &EventId) -> &str {
    event.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_forms_round_trip() {
        for state in [
            DeliveryState::Pending,
            DeliveryState::InFlight,
            DeliveryState::Succeeded,
            DeliveryState::Dead,
        ] {
            assert_eq!(state.as_str().parse::<DeliveryState>().unwrap(), state);
        }
        assert_eq!(
            "destination_forbidden".parse::<DeadReason>().unwrap(),
            DeadReason::DestinationForbidden
        );
        assert!("bogus".parse::<AttemptVerdict>().is_err());
    }

    #[test]
    fn an_attempts_trigger_follows_from_its_place_in_the_round() {
        use AttemptTrigger::*;
        assert_eq!(AttemptTrigger::of(false, 0, false), First);
        assert_eq!(AttemptTrigger::of(false, 3, false), Retry);
        assert_eq!(AttemptTrigger::of(false, 0, true), Replay);
        assert_eq!(AttemptTrigger::of(false, 2, true), Retry);
        assert_eq!(AttemptTrigger::of(true, 0, false), Probe);
        assert_eq!(AttemptTrigger::of(true, 5, true), Probe);
        assert_eq!("replay".parse::<AttemptTrigger>().unwrap(), Replay);
    }

    #[test]
    fn a_request_carries_custom_then_standard_then_ordering_headers() {
        let custom = [("x-tenant".to_owned(), "acme".to_owned())];
        let headers = request_headers(RequestParts {
            custom: &custom,
            event_id: "msg_1",
            timestamp: 1_700_000_000,
            signature: "v1,abc",
            ordering: Some(("order_42", 3)),
            endpoint_sequence: Some(41),
            batch_size: None,
        });
        let names: Vec<&str> = headers.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "x-tenant",
                "content-type",
                "webhook-id",
                "webhook-timestamp",
                "webhook-signature",
                ORDERING_KEY_HEADER,
                SEQUENCE_HEADER,
                ENDPOINT_SEQUENCE_HEADER
            ]
        );
        assert_eq!(headers[3].1, "1700000000");
        assert_eq!(headers[6].1, "3");
        assert_eq!(headers[7].1, "41");
        // A batch request: its own id, its size, and nothing of one delivery
        // (its first member's ordering and number are not sent).
        let batch = request_headers(RequestParts {
            custom: &[],
            event_id: "bat_1",
            timestamp: 1_700_000_000,
            signature: "v1,abc",
            ordering: Some(("order_42", 3)),
            endpoint_sequence: Some(41),
            batch_size: Some(3),
        });
        assert_eq!(batch[1], ("webhook-id", Cow::Borrowed("bat_1")));
        assert_eq!(
            batch.last().unwrap(),
            &(crate::batch::BATCH_SIZE_HEADER, Cow::Owned("3".to_owned()))
        );
        assert_eq!(batch.len(), 5, "{batch:?}");
    }

    #[test]
    fn a_numbered_envelope_carries_seq_between_timestamp_and_data() {
        // A type that spells the key inside it cannot be mistaken for it.
        let body = envelope(
            r#"a,"data":b"#,
            Timestamp::from_millis(1_700_000_000_000),
            &serde_json::json!({"data": {"x": ",\"data\":"}}),
        );
        let sent = numbered(&body, 41);
        assert_eq!(
            String::from_utf8(sent).unwrap(),
            r#"{"type":"a,\"data\":b","timestamp":"2023-11-14T22:13:20.000Z","seq":41,"data":{"data":{"x":",\"data\":"}}}"#
        );
        // What is not an envelope goes as it is.
        assert_eq!(numbered(b"[1,2]", 7), b"[1,2]");
    }

    #[test]
    fn envelope_has_type_timestamp_and_data() {
        let body = envelope(
            "order.paid",
            Timestamp::from_millis(1_700_000_000_000),
            &serde_json::json!({"id": 42}),
        );
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"type": "order.paid", "timestamp": "2023-11-14T22:13:20.000Z", "data": {"id": 42}})
        );
    }
}
