//! Per-endpoint concurrency that adapts to the receiver (AIMD with a latency signal).
//!
//! A dispatcher may have [`AdaptiveLimit::current`] requests in flight to one
//! endpoint. The limit moves the way TCP's congestion window does:
//!
//! - **Slow start.** From `initial`, every answer that is not a sign of overload
//!   adds one (the limit doubles per round trip) until the first sign of
//!   overload.
//! - **Additive increase.** After that, each such answer adds `1 / limit`: one
//!   more request per round trip.
//! - **Multiplicative decrease.** A timeout, a connection error, a 408, a 429,
//!   a 503 or a 504 multiplies the limit by `backoff`, at once (other 5xx are
//!   the receiver's errors, not its load: see `classify::pressure`). Only once per flight:
//!   a request started before the last decrease cannot cause another (TCP's
//!   fast recovery), so a burst of timeouts from one overloaded moment shrinks
//!   the limit once.
//! - **Latency stops growth.** While the smoothed latency is past
//!   `latency_tolerance ×` the endpoint's baseline (and by at least
//!   `latency_slack`), answers do not grow the limit. If that ends slow start,
//!   the limit is halved once (TCP's `ssthresh = cwnd / 2`): slow start doubles
//!   per round trip, so the last doubling is what overshot. Otherwise latency
//!   never shrinks the limit: measured latency includes our own process's
//!   scheduling, and on a saturated machine (scenario (a) of
//!   docs/BENCHMARKS.md) it rises for every endpoint at once — shrinking on it
//!   took ten endpoints to the floor and delivery from 4.0k to 1.2k/s on
//!   PostgreSQL. So a receiver that slows down under load settles where its
//!   latency starts to climb, and a busy machine costs nobody their
//!   concurrency; timeouts, 429, 503 and 504 still shrink it.
//! - The limit grows only while the endpoint uses at least half of it, so a
//!   quiet endpoint does not accumulate a limit it never tested; it stays
//!   within `[floor, ceiling]`.
//!
//! The **baseline** is the lowest latency seen. It is re-learned only at the
//! floor — where the latency seen is the receiver's own, not our load's — by
//! creeping up 1/256 per answer, so a receiver that became slower for good
//! (and failed its way to the floor) can grow again after a few hundred
//! answers. (Creeping everywhere let sustained load raise the baseline until
//! the latency signal vanished.)
//! The **latency** compared to it is smoothed as TCP's SRTT is (an exponential
//! average with weight 1/8), so one slow answer does not shrink the limit; a
//! receiver whose latency doubles under load settles at the concurrency where
//! that starts.
//!
//! Pure: the caller passes each answer's latency; nothing here reads a clock.

use std::time::Duration;

/// The knobs (deployment-wide; an endpoint may lower the ceiling).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConcurrencyPolicy {
    /// Never fewer requests in flight allowed than this.
    pub floor: u32,
    /// Where a newly seen endpoint starts.
    pub initial: u32,
    /// Never more than this.
    pub ceiling: u32,
    /// Smoothed latency above `tolerance × baseline`…
    pub latency_tolerance: f64,
    /// …and above `baseline + slack` counts as overload (loopback and CPU jitter of a
    /// few milliseconds must not shrink a fast receiver's limit).
    pub latency_slack: Duration,
    /// What a decrease multiplies the limit by.
    pub backoff: f64,
}

impl Default for ConcurrencyPolicy {
    /// 4 to 128, starting at 16; overload at 2× the baseline latency (and ≥ 5 ms
    /// above it); a decrease takes a tenth off, as Netflix's AIMD limiter does.
    fn default() -> Self {
        Self {
            floor: 4,
            initial: 16,
            ceiling: 128,
            latency_tolerance: 2.0,
            latency_slack: Duration::from_millis(5),
            backoff: 0.9,
        }
    }
}

impl ConcurrencyPolicy {
    /// This policy with the ceiling lowered to `ceiling` (an endpoint's override),
    /// never below the floor.
    pub fn with_ceiling(mut self, ceiling: Option<u32>) -> Self {
        if let Some(ceiling) = ceiling {
            self.ceiling = ceiling.max(1);
            self.floor = self.floor.min(self.ceiling);
            self.initial = self.initial.clamp(self.floor, self.ceiling);
        }
        self
    }
}

/// What one answer says about the receiver's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pressure {
    /// It answered (2xx, or a 3xx/4xx that is not about load): room may grow.
    Answered,
    /// Timeout, connection error, 408, 429, 503 or 504: shrink.
    Overloaded,
    /// Says nothing about load (the receiver's own 5xx error; our own refusal of
    /// a destination).
    Neutral,
}

/// One endpoint's limit.
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveLimit {
    limit: f64,
    slow_start: bool,
    baseline: Option<Duration>,
    smoothed: Option<Duration>,
    /// Answers seen: the first `initial` only teach the baseline (a new endpoint's
    /// first answers include connecting and TLS, which would read as overload).
    answers: u32,
    /// Decreases so far: a request remembers the value at its start.
    epoch: u64,
}

impl AdaptiveLimit {
    pub fn new(policy: &ConcurrencyPolicy) -> Self {
        Self {
            limit: f64::from(policy.initial.clamp(policy.floor, policy.ceiling)),
            slow_start: true,
            baseline: None,
            smoothed: None,
            answers: 0,
            epoch: 0,
        }
    }

    /// Keeps the limit within a (changed) policy's floor and ceiling.
    pub fn constrain(&mut self, policy: &ConcurrencyPolicy) {
        self.limit = self
            .limit
            .clamp(f64::from(policy.floor), f64::from(policy.ceiling));
    }

    /// Requests that may be in flight now.
    pub fn current(&self) -> usize {
        self.limit as usize
    }

    /// Stamp a request with this when it starts; pass it back with its answer.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Learns from one answer of a request started at `started_epoch`, while
    /// `in_flight` requests (this one included) were out.
    pub fn record(
        &mut self,
        pressure: Pressure,
        latency: Duration,
        started_epoch: u64,
        in_flight: usize,
        policy: &ConcurrencyPolicy,
    ) {
        let (floor, ceiling) = (f64::from(policy.floor), f64::from(policy.ceiling));
        match pressure {
            Pressure::Neutral => return,
            Pressure::Overloaded => {
                if started_epoch == self.epoch {
                    self.limit = (self.limit * policy.backoff).floor().max(floor);
                    self.slow_start = false;
                    self.epoch += 1;
                }
            }
            // Slower than the baseline allows: no growth; the end of slow start takes
            // its last doubling back (growth resumes one step per round trip).
            Pressure::Answered if self.latency_grew(latency, policy) => {
                if self.slow_start {
                    self.slow_start = false;
                    self.limit = (self.limit / 2.0).floor().max(floor);
                    self.epoch += 1;
                }
            }
            Pressure::Answered => self.grow(in_flight, ceiling),
        }
        self.limit = self.limit.clamp(floor, ceiling);
    }

    /// One answer's worth of growth, if the endpoint is using its limit.
    fn grow(&mut self, in_flight: usize, ceiling: f64) {
        if in_flight * 2 >= self.current() {
            let step = if self.slow_start {
                1.0
            } else {
                1.0 / self.limit
            };
            self.limit = (self.limit + step).min(ceiling);
        }
    }

    /// Folds `latency` into the baseline and the smoothed latency; whether the
    /// smoothed latency is past the tolerance.
    fn latency_grew(&mut self, latency: Duration, policy: &ConcurrencyPolicy) -> bool {
        let at_floor = self.current() <= policy.floor as usize;
        let baseline = match self.baseline {
            None => latency,
            Some(baseline) if at_floor => (baseline + baseline / 256).min(latency),
            Some(baseline) => baseline.min(latency),
        };
        self.baseline = Some(baseline);
        let smoothed = match self.smoothed {
            None => latency,
            Some(smoothed) => (smoothed * 7 + latency) / 8,
        };
        self.smoothed = Some(smoothed);
        self.answers = self.answers.saturating_add(1);
        self.answers > policy.initial
            && smoothed.as_secs_f64() > baseline.as_secs_f64() * policy.latency_tolerance
            && smoothed > baseline + policy.latency_slack
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn answered(limit: &mut AdaptiveLimit, latency: Duration, policy: &ConcurrencyPolicy) {
        let (epoch, busy) = (limit.epoch(), limit.current());
        limit.record(Pressure::Answered, latency, epoch, busy, policy);
    }

    #[test]
    fn slow_start_doubles_per_round_trip_up_to_the_ceiling() {
        let policy = ConcurrencyPolicy::default();
        let mut limit = AdaptiveLimit::new(&policy);
        assert_eq!(limit.current(), 16);
        // One round trip: every request in flight answers.
        for _ in 0..16 {
            answered(&mut limit, MS, &policy);
        }
        assert_eq!(limit.current(), 32);
        for _ in 0..1000 {
            answered(&mut limit, MS, &policy);
        }
        assert_eq!(limit.current(), 128);
    }

    #[test]
    fn overload_shrinks_at_once_but_once_per_flight() {
        let policy = ConcurrencyPolicy::default();
        let mut limit = AdaptiveLimit::new(&policy);
        for _ in 0..200 {
            answered(&mut limit, MS, &policy);
        }
        assert_eq!(limit.current(), 128);
        let flight = limit.epoch();
        // A burst of timeouts from requests of one flight: one decrease.
        for _ in 0..50 {
            limit.record(Pressure::Overloaded, 10_000 * MS, flight, 128, &policy);
        }
        assert_eq!(limit.current(), 115);
        // A request started after the decrease that also fails: one more.
        let next = limit.epoch();
        limit.record(Pressure::Overloaded, 10_000 * MS, next, 115, &policy);
        assert_eq!(limit.current(), 103);
        // After slow start ends, growth is one per round trip.
        for _ in 0..110 {
            answered(&mut limit, MS, &policy);
        }
        assert_eq!(limit.current(), 104);
    }

    #[test]
    fn a_failing_endpoint_falls_to_the_floor_and_no_further() {
        let policy = ConcurrencyPolicy::default();
        let mut limit = AdaptiveLimit::new(&policy);
        for _ in 0..100 {
            let epoch = limit.epoch();
            limit.record(Pressure::Overloaded, MS, epoch, 4, &policy);
        }
        assert_eq!(limit.current(), 4);
    }

    #[test]
    fn neutral_answers_change_nothing_and_idle_endpoints_do_not_grow() {
        let policy = ConcurrencyPolicy::default();
        let mut limit = AdaptiveLimit::new(&policy);
        let before = limit.clone();
        limit.record(Pressure::Neutral, MS, 0, 16, &policy);
        assert_eq!(limit, before);
        // One request at a time never tests a limit of 16.
        for _ in 0..100 {
            limit.record(Pressure::Answered, MS, 0, 1, &policy);
        }
        assert_eq!(limit.current(), 16);
    }

    /// A receiver that takes 20 ms up to 16 requests in flight and proportionally
    /// longer beyond (its latency doubles at 32): the limit settles near 32, far
    /// below the ceiling.
    #[test]
    fn a_receiver_whose_latency_grows_under_load_is_not_pushed_past_it() {
        let policy = ConcurrencyPolicy::default();
        let mut limit = AdaptiveLimit::new(&policy);
        let mut seen = Vec::new();
        for round in 0..400 {
            let in_flight = limit.current();
            let latency = 20 * MS * (in_flight.max(16) as u32) / 16;
            let epoch = limit.epoch();
            for _ in 0..in_flight {
                limit.record(Pressure::Answered, latency, epoch, in_flight, &policy);
            }
            if round >= 200 {
                seen.push(limit.current());
            }
        }
        let (low, high) = (*seen.iter().min().unwrap(), *seen.iter().max().unwrap());
        assert!(low >= 16 && high <= 40, "settled between {low} and {high}");
    }

    /// Past slow start, latency alone never shrinks the limit: a machine that slows
    /// every answer down (our own CPU saturated) leaves the endpoint its room.
    #[test]
    fn after_slow_start_slow_answers_hold_the_limit() {
        let policy = ConcurrencyPolicy::default();
        let mut limit = AdaptiveLimit::new(&policy);
        for _ in 0..48 {
            answered(&mut limit, MS, &policy);
        }
        assert_eq!(limit.current(), 64);
        // Slow start ends on a latency that grew: its last doubling is taken back once.
        answered(&mut limit, 50 * MS, &policy);
        assert_eq!(limit.current(), 32);
        for _ in 0..1000 {
            answered(&mut limit, 50 * MS, &policy);
        }
        assert_eq!(limit.current(), 32, "then it holds");
    }

    /// A receiver that failed to the floor and came back 5× slower for good (100 ms
    /// even alone): the baseline is re-learned at the floor, and the limit grows again.
    #[test]
    fn a_receiver_that_became_slower_for_good_is_relearned_at_the_floor() {
        let policy = ConcurrencyPolicy::default();
        let mut limit = AdaptiveLimit::new(&policy);
        for _ in 0..16 {
            answered(&mut limit, 20 * MS, &policy);
        }
        for _ in 0..30 {
            let epoch = limit.epoch();
            limit.record(Pressure::Overloaded, 20 * MS, epoch, 4, &policy);
        }
        assert_eq!(limit.current(), 4, "failures took it to the floor");
        for _ in 0..200 {
            let in_flight = limit.current();
            for _ in 0..in_flight {
                answered(&mut limit, 100 * MS, &policy);
            }
        }
        assert!(
            limit.current() >= 64,
            "and it grew back: {}",
            limit.current()
        );
    }

    /// The same receiver with a steady latency grows to the ceiling.
    #[test]
    fn a_steady_slow_receiver_gets_the_ceiling() {
        let policy = ConcurrencyPolicy::default();
        let mut limit = AdaptiveLimit::new(&policy);
        for _ in 0..50 {
            let in_flight = limit.current();
            for _ in 0..in_flight {
                answered(&mut limit, 50 * MS, &policy);
            }
        }
        assert_eq!(limit.current(), 128);
    }

    #[test]
    fn an_endpoint_ceiling_caps_the_limit_and_its_start() {
        let policy = ConcurrencyPolicy::default().with_ceiling(Some(2));
        assert_eq!((policy.floor, policy.initial, policy.ceiling), (2, 2, 2));
        let mut limit = AdaptiveLimit::new(&policy);
        for _ in 0..10 {
            answered(&mut limit, MS, &policy);
        }
        assert_eq!(limit.current(), 2);
    }
}
