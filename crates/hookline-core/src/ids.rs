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

/// A ULID greater than every one this process made before (monotonic within a
/// millisecond too), so ids made in sequence sort in sequence.
fn next_ulid() -> ulid::Ulid {
    use std::sync::Mutex;
    static GENERATOR: Mutex<Option<ulid::Generator>> = Mutex::new(None);
    let mut generator = GENERATOR
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    generator
        .get_or_insert_with(ulid::Generator::new)
        .generate()
        // Overflow needs 2^80 ids in one millisecond; fall back to a plain ULID.
        .unwrap_or_else(|_| ulid::Ulid::new())
}

macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub const PREFIX: &'static str = $prefix;

            /// A fresh id, sorting after every id this process made earlier.
            pub fn generate() -> Self {
                Self(format!("{}{}", $prefix, next_ulid()))
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
    EventId, "msg_", "event"
);
prefixed_id!(
    /// One event's delivery to one endpoint.
    DeliveryId, "dlv_", "delivery"
);
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
    fn wrong_prefix_or_garbage_is_rejected() {
        let app = AppId::generate();
        assert!(EndpointId::parse(app.as_str()).is_err());
        assert!(AppId::parse("app_not-a-ulid").is_err());
        assert!(AppId::parse("").is_err());
    }
}
