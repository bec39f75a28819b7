//! Time as the policy sees it: unix milliseconds, read from an injected clock.

use std::fmt;
use std::ops::{Add, Sub};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A point in time, in milliseconds since the unix epoch (UTC).
///
/// Stored as a plain integer in both databases, so comparisons in SQL are
/// integer comparisons that an index serves on either engine.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(i64);

impl Timestamp {
    pub const fn from_millis(millis: i64) -> Self {
        Self(millis)
    }

    pub const fn as_millis(self) -> i64 {
        self.0
    }

    pub const fn as_secs(self) -> i64 {
        self.0.div_euclid(1000)
    }

    pub fn from_system_time(time: SystemTime) -> Self {
        match time.duration_since(UNIX_EPOCH) {
            Ok(after) => Self(after.as_millis() as i64),
            Err(before) => Self(-(before.duration().as_millis() as i64)),
        }
    }

    pub fn to_system_time(self) -> SystemTime {
        if self.0 >= 0 {
            UNIX_EPOCH + Duration::from_millis(self.0 as u64)
        } else {
            UNIX_EPOCH - Duration::from_millis(self.0.unsigned_abs())
        }
    }

    /// The time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0).max(0) as u64)
    }

    /// Parses RFC 3339 in UTC (`2026-11-30T01:02:03Z`, fractions optional), as
    /// [`Timestamp::to_rfc3339`] writes it; `None` for anything else.
    pub fn parse_rfc3339(text: &str) -> Option<Timestamp> {
        humantime::parse_rfc3339_weak(text)
            .ok()
            .filter(|_| text.ends_with('Z') || text.ends_with('z'))
            .map(Timestamp::from_system_time)
    }

    /// RFC 3339 with millisecond precision, e.g. `2026-11-30T01:02:03.456Z`.
    pub fn to_rfc3339(self) -> String {
        humantime::format_rfc3339_millis(self.to_system_time()).to_string()
    }
}

impl Add<Duration> for Timestamp {
    type Output = Timestamp;
    fn add(self, rhs: Duration) -> Timestamp {
        Timestamp(
            self.0
                .saturating_add(rhs.as_millis().min(i64::MAX as u128) as i64),
        )
    }
}

impl Sub<Duration> for Timestamp {
    type Output = Timestamp;
    fn sub(self, rhs: Duration) -> Timestamp {
        Timestamp(
            self.0
                .saturating_sub(rhs.as_millis().min(i64::MAX as u128) as i64),
        )
    }
}

impl fmt::Debug for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_rfc3339())
    }
}

/// In the OpenAPI spec a time is what it serializes to: an RFC 3339 string.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::DateTime,
            )))
            .examples(["2026-12-01T09:30:00.000Z"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for Timestamp {}

impl serde::Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_rfc3339())
    }
}

/// Reads what [`Serialize`](serde::Serialize) writes (RFC 3339 in UTC).
impl<'de> serde::Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Timestamp::parse_rfc3339(&text).ok_or_else(|| {
            serde::de::Error::custom(format!("expected an RFC 3339 UTC time, got {text:?}"))
        })
    }
}

/// The source of "now". Production uses [`SystemClock`]; tests pass a clock they move.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_system_time(SystemTime::now())
    }
}

/// A clock that stands still until it is moved: what tests give a server (or
/// any part of it) to make timing exact.
#[derive(Debug)]
pub struct ManualClock(std::sync::atomic::AtomicI64);

impl ManualClock {
    pub fn new(at: Timestamp) -> Self {
        Self(std::sync::atomic::AtomicI64::new(at.as_millis()))
    }

    /// Moves the clock to `at` (backwards too: a test may need it).
    pub fn set(&self, at: Timestamp) {
        self.0
            .store(at.as_millis(), std::sync::atomic::Ordering::SeqCst);
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(
            i64::try_from(by.as_millis()).unwrap_or(i64::MAX),
            std::sync::atomic::Ordering::SeqCst,
        );
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trips_and_refuses_what_it_cannot_read() {
        let at = Timestamp::from_millis(1_764_550_923_456);
        assert_eq!(Timestamp::parse_rfc3339(&at.to_rfc3339()), Some(at));
        assert_eq!(
            Timestamp::parse_rfc3339("2025-12-01T01:02:03Z"),
            Some(Timestamp::from_millis(1_764_550_923_000))
        );
        for bad in ["yesterday", "2025-12-01", "2025-12-01T01:02:03+02:00", ""] {
            assert_eq!(Timestamp::parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(Timestamp::from_millis(1_000));
        assert_eq!(clock.now(), Timestamp::from_millis(1_000));
        clock.advance(Duration::from_millis(250));
        assert_eq!(clock.now(), Timestamp::from_millis(1_250));
        clock.set(Timestamp::from_millis(10));
        assert_eq!(clock.now(), Timestamp::from_millis(10));
    }

    #[test]
    fn arithmetic_and_formatting() {
        let t = Timestamp::from_millis(1_700_000_000_123);
        assert_eq!((t + Duration::from_secs(2)).as_millis(), 1_700_000_002_123);
        assert_eq!((t - Duration::from_millis(123)).as_secs(), 1_700_000_000);
        assert_eq!(t.to_rfc3339(), "2023-11-14T22:13:20.123Z");
        assert_eq!(t.since(t + Duration::from_secs(1)), Duration::ZERO);
        assert_eq!(
            (t + Duration::from_secs(1)).since(t),
            Duration::from_secs(1)
        );
    }
}
