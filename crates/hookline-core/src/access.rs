//! What an app-scoped API key may do inside its app.
//!
//! An admin key can do everything. A key scoped to one app carries a set of
//! [`Capability`]s (a customer portal's token is typically `read` alone, or
//! `read` and `endpoints`); each route of the API names the one it needs.

use std::fmt;
use std::str::FromStr;

/// One thing an app-scoped key may be allowed to do within its app.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    /// Read the app, its endpoints (never their secrets), events, deliveries,
    /// attempts, the DLQ, stats and replay jobs.
    Read,
    /// Publish events.
    Publish,
    /// Create, change, pause and delete endpoints.
    Endpoints,
    /// Reveal and rotate endpoint secrets.
    Secrets,
    /// Replay dead deliveries (one or in bulk) and resend succeeded ones.
    Replay,
    /// Fetch an endpoint's deliveries by sequence number, each signed now with
    /// the endpoint's secret (payloads and fresh signatures), and commit a
    /// polling endpoint's: what a receiver that heals gaps, or polls, holds.
    Messages,
}

impl Capability {
    pub const ALL: [Capability; 6] = [
        Self::Read,
        Self::Publish,
        Self::Endpoints,
        Self::Secrets,
        Self::Replay,
        Self::Messages,
    ];

    /// The stable spelling used in the database and the API.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Publish => "publish",
            Self::Endpoints => "endpoints",
            Self::Secrets => "secrets",
            Self::Replay => "replay",
            Self::Messages => "messages",
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Capability {
    type Err = UnknownCapability;
    fn from_str(s: &str) -> Result<Self, UnknownCapability> {
        Self::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| UnknownCapability(s.to_owned()))
    }
}

/// A name that is not a capability.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown capability {0:?} (known: read, publish, endpoints, secrets, replay, messages)")]
pub struct UnknownCapability(pub String);

/// A set of capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Capabilities(u8);

impl Capabilities {
    /// Every capability: what app keys made before capabilities existed hold.
    pub fn all() -> Self {
        Self::ALL_BITS
    }

    const ALL_BITS: Self = Self(0b11_1111);

    pub fn contains(self, capability: Capability) -> bool {
        self.0 & capability.bit() != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The capabilities in a fixed order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .into_iter()
            .filter(move |c| self.contains(*c))
    }

    /// The stored form: names joined by commas, in a fixed order (`read,replay`).
    pub fn to_text(self) -> String {
        self.iter()
            .map(Capability::as_str)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Parses the stored form; the empty string is the empty set.
    pub fn parse_text(text: &str) -> Result<Self, UnknownCapability> {
        text.split(',')
            .filter(|part| !part.is_empty())
            .map(str::parse)
            .collect()
    }
}

impl FromIterator<Capability> for Capabilities {
    fn from_iter<I: IntoIterator<Item = Capability>>(iter: I) -> Self {
        Self(iter.into_iter().fold(0, |bits, c| bits | c.bit()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for capability in Capability::ALL {
            assert_eq!(capability.as_str().parse::<Capability>(), Ok(capability));
        }
        assert_eq!(
            "admin".parse::<Capability>(),
            Err(UnknownCapability("admin".into()))
        );
    }

    #[test]
    fn sets_store_as_sorted_text_and_parse_back() {
        let set: Capabilities = [Capability::Replay, Capability::Read].into_iter().collect();
        assert_eq!(set.to_text(), "read,replay");
        assert_eq!(Capabilities::parse_text("read,replay"), Ok(set));
        assert!(set.contains(Capability::Read));
        assert!(!set.contains(Capability::Secrets));
        assert_eq!(Capabilities::parse_text(""), Ok(Capabilities::default()));
        assert!(Capabilities::parse_text("").unwrap().is_empty());
        assert_eq!(
            Capabilities::all().to_text(),
            "read,publish,endpoints,secrets,replay,messages"
        );
        assert!(Capabilities::parse_text("read,root").is_err());
    }
}
