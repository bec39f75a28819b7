//! The per-endpoint circuit breaker, as a pure state machine.
//!
//! ```text
//!  closed ──N consecutive failures──▶ open ──cool-down over──▶ half_open (one probe, cluster-wide)
//!    ▲                                 ▲                          │
//!    └──────── probe succeeded ────────┼──────────────────────────┤
//!                                      └── probe failed: cool-down × 2 (capped)
//! ```
//!
//! **Down, not noisy.** The breaker opens on a run of `failure_threshold`
//! consecutive failures (default 20). A run that long is what a down endpoint
//! produces at once, and what random noise practically never does: with a
//! share `p` of attempts failing independently, a given attempt starts a run of
//! 20 with probability `(1 - p) · p^20` — 2.4 · 10⁻¹¹ at 30 % failures, about
//! once in 41 billion attempts (5 in a row, the earlier default, started once
//! in ~590 attempts at 30 %). Counting a run needs no window and no clock, so
//! it behaves the same whether attempts finish one at a time or hundreds per
//! turn, and its state is the one counter every node already shares. A dead
//! endpoint is recognised at its 20th attempt.
//!
//! The store keeps one [`Breaker`] per endpoint (so every node agrees) and
//! applies these transitions inside its transactions; the dispatcher never
//! decides on its own whether an endpoint is up.

use std::time::Duration;

pub use crate::admission::Admission;
use crate::time::Timestamp;

/// The breaker's knobs (deployment-wide).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerPolicy {
    /// Consecutive failed attempts that open a closed breaker.
    pub failure_threshold: u32,
    /// The first cool-down; each failed probe doubles it…
    pub cooldown: Duration,
    /// …up to this.
    pub max_cooldown: Duration,
    /// An endpoint failing without a single success for this long is disabled.
    pub disable_after: Duration,
    /// This many failed attempts in a row make an operational `endpoint.failing`
    /// (and the next success an `endpoint.recovered`).
    pub failing_notice_after: u32,
}

impl Default for BreakerPolicy {
    /// 20 failures in a row (down, not noisy: see the module docs), 10 s doubling to
    /// 10 min, disable after 5 days (Svix's span).
    fn default() -> Self {
        Self {
            failure_threshold: 20,
            cooldown: Duration::from_secs(10),
            max_cooldown: Duration::from_secs(600),
            disable_after: Duration::from_secs(5 * 86_400),
            failing_notice_after: 20,
        }
    }
}

/// Where a breaker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "closed" => Some(Self::Closed),
            "open" => Some(Self::Open),
            "half_open" => Some(Self::HalfOpen),
            _ => None,
        }
    }
}

/// What an attempt says about its endpoint's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// The endpoint answered like a live service (2xx, 3xx, most 4xx).
    Healthy,
    /// The endpoint looks down (5xx, 408, timeouts, connection/DNS/TLS errors).
    Failed,
    /// Says nothing about health (429: alive but busy; a forbidden destination: our refusal).
    Neutral,
}

/// One endpoint's breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breaker {
    pub state: BreakerState,
    pub consecutive_failures: u32,
    /// The cool-down the breaker opened with last (zero while it never opened).
    pub cooldown: Duration,
    /// Open: when the cool-down ends and a probe may go.
    pub next_probe_at: Option<Timestamp>,
    /// Half-open: until when the current probe holds the right to be the only request.
    pub probe_until: Option<Timestamp>,
    /// The first failure of the current run of failures.
    pub failing_since: Option<Timestamp>,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            state: BreakerState::Closed,
            consecutive_failures: 0,
            cooldown: Duration::ZERO,
            next_probe_at: None,
            probe_until: None,
            failing_since: None,
        }
    }
}

/// What a recorded outcome did to the breaker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    Unchanged,
    /// Closed → open, or a failed probe → open again (longer cool-down).
    Opened {
        next_probe_at: Timestamp,
    },
    /// Open/half-open → closed: deferred deliveries may go now.
    Closed,
    /// Failing for longer than `disable_after`: disable the endpoint.
    Disable,
}

impl Breaker {
    /// What the breaker says of a due delivery at `now` (never [`Admission::Park`]:
    /// that is the endpoint's switch; see [`crate::admission::admit`]).
    pub fn admit(&self, now: Timestamp) -> Admission {
        match self.state {
            BreakerState::Closed => Admission::Send,
            BreakerState::Open => match self.next_probe_at {
                Some(at) if at > now => Admission::Defer(at),
                _ => Admission::Probe,
            },
            BreakerState::HalfOpen => match self.probe_until {
                Some(until) if until > now => Admission::Defer(until),
                // The probe's holder vanished (a crashed node): another may probe.
                _ => Admission::Probe,
            },
        }
    }

    /// This claim won the probe: half-open until `now + hold`.
    pub fn start_probe(&mut self, now: Timestamp, hold: Duration) {
        self.state = BreakerState::HalfOpen;
        self.probe_until = Some(now + hold);
    }

    /// Records one attempt's signal at `now`.
    pub fn record(&mut self, signal: Signal, now: Timestamp, policy: &BreakerPolicy) -> Transition {
        match signal {
            Signal::Neutral => Transition::Unchanged,
            Signal::Healthy => {
                let was_tripped = self.state != BreakerState::Closed;
                *self = Breaker::default();
                if was_tripped {
                    Transition::Closed
                } else {
                    Transition::Unchanged
                }
            }
            Signal::Failed => {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                let since = *self.failing_since.get_or_insert(now);
                if now.since(since) >= policy.disable_after {
                    return Transition::Disable;
                }
                let cooldown = match self.state {
                    BreakerState::Closed
                        if self.consecutive_failures >= policy.failure_threshold =>
                    {
                        policy.cooldown
                    }
                    BreakerState::Closed => return Transition::Unchanged,
                    // A failed probe (or a straggler's failure while open): back off further.
                    BreakerState::HalfOpen => {
                        (self.cooldown * 2).clamp(policy.cooldown, policy.max_cooldown)
                    }
                    BreakerState::Open => return Transition::Unchanged,
                };
                let next_probe_at = now + cooldown;
                self.state = BreakerState::Open;
                self.cooldown = cooldown;
                self.next_probe_at = Some(next_probe_at);
                self.probe_until = None;
                Transition::Opened { next_probe_at }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> BreakerPolicy {
        BreakerPolicy {
            failure_threshold: 3,
            cooldown: Duration::from_secs(10),
            max_cooldown: Duration::from_secs(35),
            disable_after: Duration::from_secs(1000),
            failing_notice_after: 20,
        }
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_millis(secs * 1000)
    }

    #[test]
    fn opens_after_the_threshold_of_consecutive_failures() {
        let mut b = Breaker::default();
        assert_eq!(
            b.record(Signal::Failed, at(0), &policy()),
            Transition::Unchanged
        );
        assert_eq!(
            b.record(Signal::Failed, at(1), &policy()),
            Transition::Unchanged
        );
        assert_eq!(b.admit(at(1)), Admission::Send);
        assert_eq!(
            b.record(Signal::Failed, at(2), &policy()),
            Transition::Opened {
                next_probe_at: at(12)
            }
        );
        assert_eq!(b.state, BreakerState::Open);
        assert_eq!(b.admit(at(5)), Admission::Defer(at(12)));
        assert_eq!(b.admit(at(12)), Admission::Probe);
    }

    #[test]
    fn a_success_in_between_resets_the_count() {
        let mut b = Breaker::default();
        b.record(Signal::Failed, at(0), &policy());
        b.record(Signal::Failed, at(1), &policy());
        b.record(Signal::Healthy, at(2), &policy());
        assert_eq!(b, Breaker::default());
        b.record(Signal::Failed, at(3), &policy());
        assert_eq!(b.state, BreakerState::Closed);
    }

    #[test]
    fn neutral_signals_change_nothing() {
        let mut b = Breaker::default();
        b.record(Signal::Failed, at(0), &policy());
        let before = b;
        assert_eq!(
            b.record(Signal::Neutral, at(1), &policy()),
            Transition::Unchanged
        );
        assert_eq!(b, before);
    }

    #[test]
    fn half_open_admits_one_probe_and_defers_the_rest() {
        let mut b = Breaker::default();
        for s in 0..3 {
            b.record(Signal::Failed, at(s), &policy());
        }
        assert_eq!(b.admit(at(12)), Admission::Probe);
        b.start_probe(at(12), Duration::from_secs(30));
        assert_eq!(b.state, BreakerState::HalfOpen);
        assert_eq!(b.admit(at(13)), Admission::Defer(at(42)));
        // The prober vanished: after its hold, another may probe.
        assert_eq!(b.admit(at(42)), Admission::Probe);
    }

    #[test]
    fn probe_success_closes_and_failure_reopens_longer_up_to_the_cap() {
        let mut b = Breaker::default();
        for s in 0..3 {
            b.record(Signal::Failed, at(s), &policy());
        }
        let mut now = 12;
        let mut cooldowns = Vec::new();
        for _ in 0..4 {
            b.start_probe(at(now), Duration::from_secs(30));
            match b.record(Signal::Failed, at(now + 1), &policy()) {
                Transition::Opened { next_probe_at } => {
                    cooldowns.push(next_probe_at.as_secs() - (now + 1));
                    now = next_probe_at.as_secs();
                }
                other => panic!("expected to reopen, got {other:?}"),
            }
        }
        assert_eq!(cooldowns, [20, 35, 35, 35]);
        b.start_probe(at(now), Duration::from_secs(30));
        assert_eq!(
            b.record(Signal::Healthy, at(now + 1), &policy()),
            Transition::Closed
        );
        assert_eq!(b, Breaker::default());
        assert_eq!(b.admit(at(now + 1)), Admission::Send);
    }

    #[test]
    fn failing_past_the_span_disables() {
        let mut b = Breaker::default();
        b.record(Signal::Failed, at(0), &policy());
        assert_eq!(
            b.record(Signal::Failed, at(999), &policy()),
            Transition::Unchanged
        );
        assert_eq!(
            b.record(Signal::Failed, at(1000), &policy()),
            Transition::Disable
        );
    }

    /// A tiny deterministic generator (xorshift64*): the noise tests replay exactly.
    struct Noise(u64);

    impl Noise {
        /// `true` with probability `share`.
        fn fails(&mut self, share: f64) -> bool {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            let draw = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
            (draw as f64 / (1u64 << 53) as f64) < share
        }
    }

    #[test]
    fn random_failures_of_up_to_30_percent_never_open_the_default_breaker() {
        let policy = BreakerPolicy::default();
        for (seed, share) in [(1, 0.1), (2, 0.2), (3, 0.3), (4, 0.3), (5, 0.3)] {
            let mut noise = Noise(0x9e37_79b9_7f4a_7c15 ^ seed);
            let mut b = Breaker::default();
            let mut failures = 0u32;
            // A million attempts, one at a time, 10 ms apart.
            for n in 0..1_000_000i64 {
                let signal = if noise.fails(share) {
                    failures += 1;
                    Signal::Failed
                } else {
                    Signal::Healthy
                };
                let now = Timestamp::from_millis(n * 10);
                assert_eq!(
                    b.record(signal, now, &policy),
                    Transition::Unchanged,
                    "{share} noise opened the breaker at attempt {n}"
                );
            }
            // The generator really produced the noise it was asked for.
            let observed = f64::from(failures) / 1e6;
            assert!((observed - share).abs() < 0.01, "{observed} vs {share}");
        }
    }

    #[test]
    fn a_dead_endpoint_opens_the_default_breaker_at_its_20th_attempt() {
        let policy = BreakerPolicy::default();
        let mut b = Breaker::default();
        // Noise before it went down does not delay the verdict.
        b.record(Signal::Failed, at(0), &policy);
        b.record(Signal::Healthy, at(0), &policy);
        for n in 1..20 {
            assert_eq!(
                b.record(Signal::Failed, at(n), &policy),
                Transition::Unchanged
            );
        }
        assert_eq!(
            b.record(Signal::Failed, at(20), &policy),
            Transition::Opened {
                next_probe_at: at(30)
            }
        );
    }

    #[test]
    fn stragglers_failing_while_open_do_not_extend_the_cooldown() {
        let mut b = Breaker::default();
        for s in 0..3 {
            b.record(Signal::Failed, at(s), &policy());
        }
        assert_eq!(
            b.record(Signal::Failed, at(4), &policy()),
            Transition::Unchanged
        );
        assert_eq!(b.next_probe_at, Some(at(12)));
    }
}
