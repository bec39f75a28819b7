//! Full-jitter exponential backoff and the retry budget.
//!
//! `delay(n) = uniform(0, min(cap, base · 2ⁿ))` where `n` is the number of
//! failed attempts so far minus one (the first retry waits up to `base`).
//! Full jitter spreads a thundering herd of retries evenly over the window
//! instead of synchronising them (see the AWS Architecture Blog, "Exponential
//! Backoff And Jitter").

use std::time::Duration;

use crate::classify::Verdict;
use crate::model::{AttemptVerdict, DeadReason, DeliveryState};
use crate::time::Timestamp;

/// A source of uniform random integers, injected so tests can pin the jitter.
pub trait Jitter {
    /// A uniformly random integer in `0..=upper`.
    fn uniform(&mut self, upper: u64) -> u64;
}

/// Production jitter from the thread-local CSPRNG.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadJitter;

impl Jitter for ThreadJitter {
    fn uniform(&mut self, upper: u64) -> u64 {
        use rand::Rng;
        rand::thread_rng().gen_range(0..=upper)
    }
}

/// The retry parameters for one delivery: deployment defaults, possibly
/// overridden per endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// The ceiling of the first retry's delay.
    pub base: Duration,
    /// No delay is ever longer than this.
    pub cap: Duration,
    /// Attempts per round (a replay starts a new round); the last failure dead-letters.
    pub max_attempts: u32,
    /// A delivery older than this (counted from the start of its round) is not retried again.
    pub max_age: Duration,
    /// The longest `Retry-After` honoured; longer requests wait this long.
    pub retry_after_cap: Duration,
}

impl Default for RetryPolicy {
    /// Base 5 s, cap 6 h, 20 attempts, 24 h: the expected total wait of 19
    /// full-jitter retries is ≈ 23.7 h, so in practice the budget ends at about
    /// a day either way, like Svix's and Stripe's schedules.
    fn default() -> Self {
        Self {
            base: Duration::from_secs(5),
            cap: Duration::from_secs(6 * 3600),
            max_attempts: 20,
            max_age: Duration::from_secs(24 * 3600),
            retry_after_cap: Duration::from_secs(3600),
        }
    }
}

/// Per-endpoint overrides of the deployment's retry policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RetryOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3_600_000))]
    pub retry_base_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 604_800_000))]
    pub retry_cap_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 1000))]
    pub max_attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 2_592_000))]
    pub max_age_secs: Option<u64>,
}

impl RetryOverrides {
    /// What each override may be (the OpenAPI document states the same bounds).
    pub const BASE_MS: std::ops::RangeInclusive<u64> = 1..=3_600_000;
    pub const CAP_MS: std::ops::RangeInclusive<u64> = 1..=7 * 86_400_000;
    pub const MAX_ATTEMPTS: std::ops::RangeInclusive<u32> = 1..=1000;
    pub const MAX_AGE_SECS: std::ops::RangeInclusive<u64> = 1..=30 * 86_400;

    /// Every value within its bounds, and the cap no shorter than the base when
    /// both are given; else the first that is not, and why. The one rule for
    /// retry settings: an endpoint's overrides are checked with it, and the
    /// deployment's configuration as overrides that set every value.
    pub fn check(&self) -> Result<(), RetryBoundError> {
        fn within<T: PartialOrd + std::fmt::Display>(
            field: &'static str,
            value: Option<T>,
            range: &std::ops::RangeInclusive<T>,
        ) -> Result<(), RetryBoundError> {
            match value {
                Some(v) if !range.contains(&v) => Err(RetryBoundError {
                    field,
                    message: format!("must be {} to {}, not {v}", range.start(), range.end()),
                }),
                _ => Ok(()),
            }
        }
        within("retry_base_ms", self.retry_base_ms, &Self::BASE_MS)?;
        within("retry_cap_ms", self.retry_cap_ms, &Self::CAP_MS)?;
        within("max_attempts", self.max_attempts, &Self::MAX_ATTEMPTS)?;
        within("max_age_secs", self.max_age_secs, &Self::MAX_AGE_SECS)?;
        if let (Some(base), Some(cap)) = (self.retry_base_ms, self.retry_cap_ms) {
            if cap < base {
                return Err(RetryBoundError {
                    field: "retry_cap_ms",
                    message: format!("must be at least retry_base_ms ({base}), not {cap}"),
                });
            }
        }
        Ok(())
    }

    /// The deployment policy with this endpoint's overrides applied.
    pub fn apply(&self, defaults: RetryPolicy) -> RetryPolicy {
        RetryPolicy {
            base: self
                .retry_base_ms
                .map_or(defaults.base, Duration::from_millis),
            cap: self
                .retry_cap_ms
                .map_or(defaults.cap, Duration::from_millis),
            max_attempts: self.max_attempts.unwrap_or(defaults.max_attempts),
            max_age: self
                .max_age_secs
                .map_or(defaults.max_age, Duration::from_secs),
            retry_after_cap: defaults.retry_after_cap,
        }
    }
}

/// A retry setting out of its bounds ([`RetryOverrides::check`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryBoundError {
    /// The setting, as the API and the configuration name it.
    pub field: &'static str,
    pub message: String,
}

impl std::fmt::Display for RetryBoundError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "retry.{} {}", self.field, self.message)
    }
}

/// Whether a delivery whose round started at `round_started_at` would outlive
/// `max_age` by being attempted (or deferred) until `at`: the one max-age rule,
/// asked after a failed attempt and by a claim that defers.
pub fn outlives(round_started_at: Timestamp, at: Timestamp, max_age: Duration) -> bool {
    at.since(round_started_at) > max_age
}

/// Where a delivery stands once a replay (of a dead one) or a resend (of a
/// succeeded one) starts a new round at `now`: pending and due at once, no
/// attempt counted yet in the round, whose max age runs from `now` (and, not
/// dead, no reason to be). Its event, and so its `webhook-id`, stays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Round {
    pub state: DeliveryState,
    pub due_at: Timestamp,
    pub attempts: u32,
    pub round_started_at: Timestamp,
}

/// The new round a replay or a resend starts at `now` (see [`Round`]).
pub fn new_round(now: Timestamp) -> Round {
    Round {
        state: DeliveryState::Pending,
        due_at: now,
        attempts: 0,
        round_started_at: now,
    }
}

/// What happens after an attempt: the one type from the retry budget's decision
/// to what is recorded (the attempt row's verdict and times, the delivery's next
/// state). The classifier's [`Verdict`] is its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Succeeded,
    RetryAt(Timestamp),
    Dead(DeadReason),
}

impl Next {
    /// The attempt row's verdict.
    pub fn verdict(self) -> AttemptVerdict {
        match self {
            Next::Succeeded => AttemptVerdict::Delivered,
            Next::RetryAt(_) => AttemptVerdict::Retry,
            Next::Dead(_) => AttemptVerdict::Dead,
        }
    }

    /// The delivery's state after the attempt.
    pub fn state(self) -> DeliveryState {
        match self {
            Next::Succeeded => DeliveryState::Succeeded,
            Next::RetryAt(_) => DeliveryState::Pending,
            Next::Dead(_) => DeliveryState::Dead,
        }
    }

    /// When the next attempt is scheduled, if one is.
    pub fn next_attempt_at(self) -> Option<Timestamp> {
        match self {
            Next::RetryAt(at) => Some(at),
            Next::Succeeded | Next::Dead(_) => None,
        }
    }

    /// The delivery's `due_at` after an attempt recorded at `now`: the retry time,
    /// or `now` for a delivery that is finished.
    pub fn due_at(self, now: Timestamp) -> Timestamp {
        self.next_attempt_at().unwrap_or(now)
    }

    /// Why the delivery is dead, if it is.
    pub fn dead_reason(self) -> Option<DeadReason> {
        match self {
            Next::Dead(reason) => Some(reason),
            Next::Succeeded | Next::RetryAt(_) => None,
        }
    }
}

impl RetryPolicy {
    /// The upper bound of the delay after the `failures`-th consecutive failure (≥ 1).
    pub fn ceiling(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(63);
        let base_ms = self.base.as_millis().min(u64::MAX as u128) as u64;
        let grown = base_ms.saturating_mul(1u64 << exponent);
        Duration::from_millis(grown).min(self.cap)
    }

    /// A full-jitter delay after the `failures`-th failure.
    pub fn backoff(&self, failures: u32, jitter: &mut dyn Jitter) -> Duration {
        let ceiling = self.ceiling(failures).as_millis() as u64;
        Duration::from_millis(jitter.uniform(ceiling))
    }

    /// Decides a delivery's next step after an attempt.
    ///
    /// `attempts` counts this round's attempts including the one just made;
    /// `round_started_at` is when the delivery was created or last replayed.
    pub fn next(
        &self,
        verdict: Verdict,
        attempts: u32,
        round_started_at: Timestamp,
        now: Timestamp,
        jitter: &mut dyn Jitter,
    ) -> Next {
        match verdict {
            Verdict::Delivered => Next::Succeeded,
            Verdict::Dead { reason, .. } => Next::Dead(reason),
            Verdict::Retry { not_before } => {
                if attempts >= self.max_attempts {
                    return Next::Dead(DeadReason::RetriesExhausted);
                }
                let delay = match not_before {
                    Some(asked) => asked.min(self.retry_after_cap),
                    None => self.backoff(attempts, jitter),
                };
                let at = now + delay;
                if outlives(round_started_at, at, self.max_age) {
                    Next::Dead(DeadReason::RetriesExhausted)
                } else {
                    Next::RetryAt(at)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Always the largest value allowed.
    struct Max;
    impl Jitter for Max {
        fn uniform(&mut self, upper: u64) -> u64 {
            upper
        }
    }

    /// Always zero.
    struct Min;
    impl Jitter for Min {
        fn uniform(&mut self, _upper: u64) -> u64 {
            0
        }
    }

    /// Records every bound it was asked for and answers the middle.
    #[derive(Default)]
    struct Recording(Vec<u64>);
    impl Jitter for Recording {
        fn uniform(&mut self, upper: u64) -> u64 {
            self.0.push(upper);
            upper / 2
        }
    }

    fn policy() -> RetryPolicy {
        RetryPolicy {
            base: Duration::from_millis(100),
            cap: Duration::from_secs(10),
            max_attempts: 10,
            max_age: Duration::from_secs(3600),
            retry_after_cap: Duration::from_secs(60),
        }
    }

    const RETRY: Verdict = Verdict::Retry { not_before: None };

    #[test]
    fn a_replay_starts_a_round_with_the_whole_budget_again() {
        let p = policy();
        let (created, now) = (Timestamp::from_millis(0), Timestamp::from_millis(7_200_000));
        // The old round is spent: older than max_age (3 attempts of 10 made).
        assert_eq!(
            p.next(RETRY, 3, created, now, &mut Min),
            Next::Dead(DeadReason::RetriesExhausted),
            "older than max_age"
        );
        let round = new_round(now);
        assert_eq!(
            round,
            Round {
                state: DeliveryState::Pending,
                due_at: now,
                attempts: 0,
                round_started_at: now,
            }
        );
        // Its first failure retries; its max age runs from the replay.
        let first = round.attempts + 1;
        assert_eq!(
            p.next(RETRY, first, round.round_started_at, now, &mut Min),
            Next::RetryAt(now)
        );
        let last = p.max_attempts;
        assert_eq!(
            p.next(RETRY, last, round.round_started_at, now, &mut Min),
            Next::Dead(DeadReason::RetriesExhausted),
            "a round has max_attempts, no more"
        );
    }

    #[test]
    fn ceiling_doubles_from_base_and_stops_at_cap() {
        let p = policy();
        let ceilings: Vec<u64> = (1..=10).map(|n| p.ceiling(n).as_millis() as u64).collect();
        assert_eq!(
            ceilings,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000, 10_000]
        );
        // No overflow however many failures.
        assert_eq!(p.ceiling(u32::MAX), Duration::from_secs(10));
    }

    #[test]
    fn every_delay_lies_within_zero_and_the_ceiling() {
        let p = policy();
        for n in 1..=40 {
            assert_eq!(p.backoff(n, &mut Min), Duration::ZERO);
            assert_eq!(p.backoff(n, &mut Max), p.ceiling(n));
        }
        let mut real = ThreadJitter;
        for n in 1..=40 {
            for _ in 0..50 {
                assert!(p.backoff(n, &mut real) <= p.ceiling(n));
            }
        }
    }

    #[test]
    fn jitter_is_asked_for_the_growing_ceiling() {
        let p = policy();
        let mut jitter = Recording::default();
        let start = Timestamp::from_millis(0);
        let mut now = start;
        for attempts in 1..=5 {
            match p.next(RETRY, attempts, start, now, &mut jitter) {
                Next::RetryAt(at) => now = at,
                other => panic!("expected a retry, got {other:?}"),
            }
        }
        assert_eq!(jitter.0, [100, 200, 400, 800, 1600]);
        assert_eq!(now.as_millis(), 50 + 100 + 200 + 400 + 800);
    }

    #[test]
    fn the_last_allowed_attempt_dead_letters() {
        let p = policy();
        let t = Timestamp::from_millis(0);
        assert!(matches!(p.next(RETRY, 9, t, t, &mut Max), Next::RetryAt(_)));
        assert_eq!(
            p.next(RETRY, 10, t, t, &mut Max),
            Next::Dead(DeadReason::RetriesExhausted)
        );
    }

    #[test]
    fn a_retry_beyond_max_age_dead_letters() {
        let p = policy();
        let start = Timestamp::from_millis(0);
        let late = start + Duration::from_secs(3599);
        // The next ceiling (100 ms) would land past the hour with Max jitter... after 1 s.
        assert_eq!(
            p.next(RETRY, 1, start, late + Duration::from_millis(950), &mut Max),
            Next::Dead(DeadReason::RetriesExhausted)
        );
        assert_eq!(
            p.next(RETRY, 1, start, late, &mut Max),
            Next::RetryAt(late + Duration::from_millis(100))
        );
    }

    #[test]
    fn retry_after_replaces_backoff_and_is_capped() {
        let p = policy();
        let t = Timestamp::from_millis(0);
        let asked = |secs| Verdict::Retry {
            not_before: Some(Duration::from_secs(secs)),
        };
        assert_eq!(
            p.next(asked(2), 1, t, t, &mut Max),
            Next::RetryAt(t + Duration::from_secs(2))
        );
        assert_eq!(
            p.next(asked(600), 1, t, t, &mut Max),
            Next::RetryAt(t + Duration::from_secs(60))
        );
    }

    #[test]
    fn success_and_dead_verdicts_pass_through() {
        let p = policy();
        let t = Timestamp::from_millis(0);
        assert_eq!(
            p.next(Verdict::Delivered, 10, t, t, &mut Max),
            Next::Succeeded
        );
        let dead = Verdict::Dead {
            reason: DeadReason::ClientError,
            disable_endpoint: false,
        };
        assert_eq!(
            p.next(dead, 1, t, t, &mut Max),
            Next::Dead(DeadReason::ClientError)
        );
    }

    #[test]
    fn defaults_retry_for_about_a_day() {
        let p = RetryPolicy::default();
        let expected: Duration = (1..p.max_attempts).map(|n| p.ceiling(n) / 2).sum();
        let hours = expected.as_secs_f64() / 3600.0;
        assert!(
            (18.0..=30.0).contains(&hours),
            "expected ≈ a day, got {hours:.1} h"
        );
    }

    #[test]
    fn overrides_are_checked_against_one_set_of_bounds() {
        assert_eq!(RetryOverrides::default().check(), Ok(()));
        let edge = RetryOverrides {
            retry_base_ms: Some(3_600_000),
            retry_cap_ms: Some(604_800_000),
            max_attempts: Some(1000),
            max_age_secs: Some(2_592_000),
        };
        assert_eq!(edge.check(), Ok(()));
        for beyond in [
            RetryOverrides {
                retry_base_ms: Some(0),
                ..edge
            },
            RetryOverrides {
                retry_cap_ms: Some(604_800_001),
                ..edge
            },
            RetryOverrides {
                max_attempts: Some(1001),
                ..edge
            },
            RetryOverrides {
                max_age_secs: Some(2_592_001),
                ..edge
            },
        ] {
            let error = beyond.check().unwrap_err();
            assert!(error.message.starts_with("must be 1 to "), "{error}");
        }
        let field = |overrides: RetryOverrides| overrides.check().unwrap_err().field;
        assert_eq!(
            field(RetryOverrides {
                max_age_secs: Some(0),
                ..edge
            }),
            "max_age_secs"
        );
        // The cap is no shorter than the base, when both are set.
        let short_cap = RetryOverrides {
            retry_base_ms: Some(5000),
            retry_cap_ms: Some(10),
            ..RetryOverrides::default()
        };
        assert_eq!(
            short_cap.check().unwrap_err().to_string(),
            "retry.retry_cap_ms must be at least retry_base_ms (5000), not 10"
        );
        assert_eq!(
            RetryOverrides {
                retry_cap_ms: Some(10),
                ..RetryOverrides::default()
            }
            .check(),
            Ok(())
        );
    }

    #[test]
    fn max_age_is_one_rule_for_retries_and_deferrals() {
        let start = Timestamp::from_millis(0);
        let hour = Duration::from_secs(3600);
        assert!(
            !outlives(start, start + hour, hour),
            "exactly the max age is allowed"
        );
        assert!(outlives(
            start,
            start + hour + Duration::from_millis(1),
            hour
        ));
    }
}
