//! Per-key request rate limits: governor's GCRA, one cell per API key, on the
//! injected clock (so a test moves time instead of waiting for it).
//!
//! Checked by the same route layer that authenticates the key, so every keyed
//! route is limited and no handler can forget it. A key over its rate gets
//! `429 rate_limited` with `Retry-After`; admin keys are exempt unless
//! configured otherwise (an on-call engineer's bulk work must not be throttled
//! by default).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::middleware::NoOpMiddleware;
use governor::state::keyed::HashMapStateStore;
use governor::{Quota, RateLimiter};
use hookline_core::time::Clock;
use hookline_store::KeyScope;

use crate::error::{ApiError, ApiResult};

/// How fast one API key may call the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// The sustained rate, requests per second.
    pub per_sec: NonZeroU32,
    /// How many requests may come at once above that rate.
    pub burst: NonZeroU32,
    /// Whether admin keys are limited too.
    pub admin: bool,
}

/// The injected clock as governor's.
#[derive(Clone)]
struct ApiClock(Arc<dyn Clock>);

impl governor::clock::Clock for ApiClock {
    type Instant = Duration;

    fn now(&self) -> Duration {
        Duration::from_millis(self.0.now().as_millis().max(0) as u64)
    }
}

/// The per-key cells. Only authenticated keys get one, so there are as many
/// as there are keys in use; idle ones are dropped past [`KeyLimits::TIDY_AT`].
pub(crate) struct KeyLimits {
    limiter: RateLimiter<String, HashMapStateStore<String>, ApiClock, NoOpMiddleware<Duration>>,
    clock: ApiClock,
    admin: bool,
}

impl KeyLimits {
    const TIDY_AT: usize = 10_000;

    pub(crate) fn new(limit: RateLimit, clock: Arc<dyn Clock>) -> Self {
        let clock = ApiClock(clock);
        let quota = Quota::per_second(limit.per_sec).allow_burst(limit.burst);
        Self {
            limiter: RateLimiter::hashmap_with_clock(quota, clock.clone()),
            clock,
            admin: limit.admin,
        }
    }

    /// One request of the key whose hash is `key`: allowed, or `rate_limited`
    /// with the seconds until the next one would be (at least 1).
    pub(crate) fn check(&self, key: &str, scope: &KeyScope) -> ApiResult<()> {
        if matches!(scope, KeyScope::Admin) && !self.admin {
            return Ok(());
        }
        if self.limiter.len() > Self::TIDY_AT {
            self.limiter.retain_recent();
        }
        self.limiter
            .check_key(&key.to_owned())
            .map_err(|not_until| {
                use governor::clock::Clock as _;
                let wait = not_until.wait_time_from(self.clock.now());
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                ApiError::RateLimited {
                    retry_after_secs: secs.max(1),
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hookline_core::access::Capabilities;
    use hookline_core::ids::AppId;
    use hookline_core::time::{ManualClock, Timestamp};

    fn limits(per_sec: u32, burst: u32, admin: bool) -> (KeyLimits, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
        let limit = RateLimit {
            per_sec: NonZeroU32::new(per_sec).unwrap(),
            burst: NonZeroU32::new(burst).unwrap(),
            admin,
        };
        (KeyLimits::new(limit, clock.clone()), clock)
    }

    fn app_key() -> KeyScope {
        KeyScope::App {
            app: AppId::generate(),
            capabilities: Capabilities::all(),
        }
    }

    fn retry_after(result: ApiResult<()>) -> Option<u64> {
        match result {
            Ok(()) => None,
            Err(ApiError::RateLimited { retry_after_secs }) => Some(retry_after_secs),
            Err(other) => panic!("{other}"),
        }
    }

    #[test]
    fn a_key_gets_its_burst_then_its_rate_and_retry_after_says_when() {
        let (limits, clock) = limits(2, 3, false);
        let key = app_key();
        for _ in 0..3 {
            assert_eq!(retry_after(limits.check("a", &key)), None);
        }
        // One every 500 ms from here: the next in half a second, said as 1 s.
        assert_eq!(retry_after(limits.check("a", &key)), Some(1));
        // Another key has its own cell.
        assert_eq!(retry_after(limits.check("b", &key)), None);
        clock.advance(Duration::from_millis(499));
        assert_eq!(retry_after(limits.check("a", &key)), Some(1));
        clock.advance(Duration::from_millis(1));
        assert_eq!(retry_after(limits.check("a", &key)), None);
        assert_eq!(retry_after(limits.check("a", &key)), Some(1));
    }

    #[test]
    fn a_slow_rate_says_how_many_seconds() {
        let (limits, _) = limits(1, 1, false);
        let key = app_key();
        assert_eq!(retry_after(limits.check("a", &key)), None);
        assert_eq!(retry_after(limits.check("a", &key)), Some(1));
        let (limits, _) = limits_per_minute();
        assert_eq!(retry_after(limits.check("a", &key)), None);
        assert_eq!(retry_after(limits.check("a", &key)), Some(60));
    }

    fn limits_per_minute() -> (KeyLimits, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(Timestamp::from_millis(0)));
        let limits = KeyLimits {
            limiter: RateLimiter::hashmap_with_clock(
                Quota::per_minute(NonZeroU32::new(1).unwrap()),
                ApiClock(clock.clone()),
            ),
            clock: ApiClock(clock.clone()),
            admin: false,
        };
        (limits, clock)
    }

    #[test]
    fn admin_keys_are_exempt_unless_configured() {
        let (exempt, _) = limits(1, 1, false);
        let (limited, _) = limits(1, 1, true);
        for _ in 0..5 {
            assert_eq!(retry_after(exempt.check("admin", &KeyScope::Admin)), None);
        }
        assert_eq!(retry_after(limited.check("admin", &KeyScope::Admin)), None);
        assert_eq!(
            retry_after(limited.check("admin", &KeyScope::Admin)),
            Some(1)
        );
    }
}
