//! Prefixed identifiers.
//!
//! Every id is a type prefix plus a ULID (`msg_01J…`): the prefix tells a human
//! what an id names, and the ULID sorts by creation time, so "newest first" is
//! an index scan on the primary key.

use std::fmt;

/// Why a string is not a valid id of the expected kind.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("`{value}` is not a valid {kind} id (expected `{prefix}` followed by a ULID)")]
pub struct InvalidId {
    pub kind: &'static str,
    pub prefix: &'static str,
    pub value: String,
}

/// How many low bits of an event's ULID are zero: a delivery's id is its
/// event's with the endpoint's place among the event's targets in those bits
/// ([`DeliveryId::of_target`]), so it is known before the delivery's row is
/// written, and the event is known from it (docs/engine-v4.md).
pub const TARGET_BITS: u32 = 20;

/// The most targets one event's deliveries can be told apart by.
pub const MAX_TARGETS: usize = 1 << TARGET_BITS;

/// A ULID greater than every one this process made before (monotonic within a
/// millisecond too), so ids made in sequence sort in sequence; its low
/// `reserved` bits zero, and every id made after it above all the ids that
/// differ from it only in those bits.
fn next_ulid(reserved: u32) -> ulid::Ulid {
    use std::sync::Mutex;
    static LAST: Mutex<u128> = Mutex::new(0);
    let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let fresh = u128::from(ulid::Ulid::new());
    // Within a millisecond (or a clock step back) go on from the last one.
    let next = fresh.max(*last + 1);
    let block = (1u128 << reserved) - 1;
    let id = (next + block) & !block;
    *last = id | block;
    ulid::Ulid(id)
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        prefixed_id!($(#[$doc])* $name, $prefix, $kind, 0);
    };
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal, $reserved:expr) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id, sorting after every id this process made earlier.
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, next_ulid($reserved)))
            }

            /// The lowest id of the millisecond `unix_ms`: every id generated before
            /// it sorts below (ids are time-sortable), so a range of ids is a range of
            /// creation times.
            pub fn first_of_millisecond(unix_ms: u64) -> Self {
                Self(format!("{}{}", $prefix, ulid::Ulid::from_parts(unix_ms, 0)))
            }

            /// Parses an id, checking its prefix and its ULID.
            pub fn parse(value: &str) -> Result<Self, InvalidId> {
                value
                    .strip_prefix($prefix)
                    .filter(|rest| ulid::Ulid::from_string(rest).is_ok())
                    .map(|_| Self(value.to_owned()))
                    .ok_or_else(|| InvalidId { kind: $kind, prefix: $prefix, value: value.to_owned() })
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = InvalidId;
            fn from_str(value: &str) -> Result<Self, InvalidId> {
                Self::parse(value)
            }
        }

        impl TryFrom<String> for $name {
            type Error = InvalidId;
            fn try_from(value: String) -> Result<Self, InvalidId> {
                Self::parse(&value)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }
    };
}

prefixed_id!(
    /// An application: one producer's tenant, owning endpoints and events.
    AppId, "app_", "app"
);
prefixed_id!(
    /// A customer endpoint (a URL that receives webhooks).
    EndpointId, "ep_", "endpoint"
);
prefixed_id!(
    /// An event; also the `webhook-id` header, identical on every retry and replay.
    /// Its ULID's low [`TARGET_BITS`] are zero, for its deliveries' ids.
    EventId, "msg_", "event", TARGET_BITS
);
prefixed_id!(
    /// One event's delivery to one endpoint.
    DeliveryId, "dlv_", "delivery"
);
impl EventId {
    fn ulid(&self) -> ulid::Ulid {
        ulid::Ulid::from_string(&self.0[Self::PREFIX.len()..]).expect("parsed as a ULID")
    }
}

impl DeliveryId {
    /// The id of `event`'s delivery to the endpoint at `place` among the
    /// endpoints the event went to: the event's ULID with `place` in its low
    /// [`TARGET_BITS`]. The same before and after the delivery's row is
    /// written, and it sorts with its event.
    ///
    /// # Panics
    /// If `place` is not below [`MAX_TARGETS`].
    pub fn of_target(event: &EventId, place: usize) -> Self {
        assert!(place < MAX_TARGETS, "an event has fewer than 2^20 targets");
        let event = u128::from(event.ulid()) >> TARGET_BITS << TARGET_BITS;
        Self(format!(
            "{}{}",
            Self::PREFIX,
            ulid::Ulid(event | place as u128)
        ))
    }

    /// The event and place this id was made from by [`DeliveryId::of_target`]
    /// (for an id made otherwise, an event that does not exist).
    pub fn target(&self) -> (EventId, usize) {
        let ulid = u128::from(
            ulid::Ulid::from_string(&self.0[Self::PREFIX.len()..]).expect("parsed as a ULID"),
        );
        let block = (1u128 << TARGET_BITS) - 1;
        let event = EventId(format!("{}{}", EventId::PREFIX, ulid::Ulid(ulid & !block)));
        (event, (ulid & block) as usize)
    }
}

prefixed_id!(
    /// One HTTP attempt of a delivery.
    AttemptId, "atm_", "attempt"
);
prefixed_id!(
    /// An API key (its public identifier; the secret part is only ever stored hashed).
    ApiKeyId, "key_", "api key"
);
prefixed_id!(
    /// A bulk replay of the DLQ: a background job with progress.
    ReplayJobId, "rpl_", "replay"
);
prefixed_id!(
    /// One request that carried a batch of deliveries (its `webhook-id`).
    BatchId, "bat_", "batch"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_parse_back_and_sort_by_creation() {
        let first = EventId::generate();
        let second = EventId::generate();
        assert_eq!(EventId::parse(first.as_str()), Ok(first.clone()));
        assert!(first < second);
        assert!(first.as_str().starts_with("msg_"));
    }

    #[test]
    fn event_ids_leave_room_for_their_deliveries_ids() {
        let events: Vec<EventId> = (0..1000).map(|_| EventId::generate()).collect();
        let mut seen = std::collections::HashSet::new();
        for (n, event) in events.iter().enumerate() {
            assert_eq!(u128::from(event.ulid()) & (MAX_TARGETS as u128 - 1), 0);
            for place in [0, 1, 7, MAX_TARGETS - 1] {
                let delivery = DeliveryId::of_target(event, place);
                assert_eq!(DeliveryId::parse(delivery.as_str()), Ok(delivery.clone()));
                assert_eq!(delivery.target(), (event.clone(), place));
                assert!(seen.insert(delivery.clone()), "{delivery} made twice");
                // A delivery sorts with its event: after the earlier events'.
                if let Some(earlier) = n.checked_sub(1).map(|n| &events[n]) {
                    assert!(DeliveryId::of_target(earlier, MAX_TARGETS - 1) < delivery);
                }
            }
        }
        // Ids of other kinds made meanwhile go on above the events' blocks.
        let event = EventId::generate();
        let after = AttemptId::generate();
        assert!(after.as_str()[4..] > DeliveryId::of_target(&event, MAX_TARGETS - 1).as_str()[4..]);
    }

    #[test]
    fn wrong_prefix_or_garbage_is_rejected() {
        let app = AppId::generate();
        assert!(EndpointId::parse(app.as_str()).is_err());
        assert!(AppId::parse("app_not-a-ulid").is_err());
        assert!(AppId::parse("").is_err());
    }
}
