//! Admission: may a due delivery be sent now? One rule, asked by the claim and
//! by the publish hand-off alike.
//!
//! An endpoint's deliveries are admitted by, in order: whether the endpoint is
//! enabled (a disabled one's deliveries are parked), its circuit breaker
//! ([`Breaker::admit`]: closed sends, open defers to the probe time, a finished
//! cool-down offers the probe), and its rate limit (a rate-limited endpoint's
//! sends get slots from its stored GCRA state, which only a claim can hand out).
//! Ordering (only a partition's head is ever due) and the dispatcher's room are
//! decided where those live: in the partition's stored states and in the
//! dispatcher.

use crate::breaker::Breaker;
use crate::time::Timestamp;

/// What admission reads of an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    pub enabled: bool,
    pub breaker: Breaker,
    /// The endpoint has a rate limit (its send slots are stored with it).
    pub rate_limited: bool,
}

/// Whether a due delivery may be sent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Send (a rate-limited endpoint: within its next send slots).
    Send,
    /// The breaker's cool-down is over and nobody is probing: this delivery may
    /// become the probe (the store makes sure only one claim in the cluster wins).
    Probe,
    /// Not before this time; the delivery is deferred without an attempt.
    Defer(Timestamp),
    /// The endpoint is disabled: the delivery waits, parked, until it is enabled.
    Park,
}

/// May a due delivery to the endpoint behind `gate` be sent at `now`?
pub fn admit(gate: &Gate, now: Timestamp) -> Admission {
    if !gate.enabled {
        return Admission::Park;
    }
    gate.breaker.admit(now)
}

/// `due_at` of a pending delivery whose endpoint is disabled: never due until re-enabled.
pub const PARKED: Timestamp = Timestamp::from_millis(253_402_300_799_000); // 9999-12-31

/// When work newly made pending for an endpoint is due: never while the endpoint is
/// disabled ([`PARKED`]), at the probe time while its breaker defers, else now —
/// so claims do not pick a delivery up only to put it back.
pub fn due_for_new_work(enabled: bool, breaker: &Breaker, now: Timestamp) -> Timestamp {
    let gate = Gate {
        enabled,
        breaker: *breaker,
        rate_limited: false,
    };
    match admit(&gate, now) {
        Admission::Park => PARKED,
        Admission::Defer(until) => until,
        Admission::Send | Admission::Probe => now,
    }
}

/// Whether a fresh delivery may be sent at once without asking the database
/// again — what a publish may hand straight to its dispatcher: admitted to send,
/// and no rate limit (only a claim can take a send slot).
pub fn sends_at_once(gate: &Gate, now: Timestamp) -> bool {
    admit(gate, now) == Admission::Send && !gate.rate_limited
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::breaker::{BreakerPolicy, Signal};

    fn gate() -> Gate {
        Gate {
            enabled: true,
            breaker: Breaker::default(),
            rate_limited: false,
        }
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_millis(secs * 1000)
    }

    #[test]
    fn new_work_is_due_now_at_the_probe_or_never() {
        assert_eq!(due_for_new_work(true, &Breaker::default(), at(5)), at(5));
        assert_eq!(due_for_new_work(false, &Breaker::default(), at(5)), PARKED);
        let policy = BreakerPolicy {
            failure_threshold: 1,
            ..BreakerPolicy::default()
        };
        let mut open = Breaker::default();
        open.record(Signal::Failed, at(0), &policy);
        assert_eq!(due_for_new_work(true, &open, at(1)), at(10));
        assert_eq!(
            due_for_new_work(true, &open, at(10)),
            at(10),
            "the probe may go"
        );
    }

    #[test]
    fn enabled_closed_and_unlimited_sends_at_once() {
        assert_eq!(admit(&gate(), at(0)), Admission::Send);
        assert!(sends_at_once(&gate(), at(0)));
    }

    #[test]
    fn a_rate_limit_admits_but_only_through_a_claim() {
        let limited = Gate {
            rate_limited: true,
            ..gate()
        };
        assert_eq!(admit(&limited, at(0)), Admission::Send);
        assert!(!sends_at_once(&limited, at(0)));
    }

    #[test]
    fn a_disabled_endpoint_parks_whatever_its_breaker_says() {
        let disabled = Gate {
            enabled: false,
            ..gate()
        };
        assert_eq!(admit(&disabled, at(0)), Admission::Park);
        assert!(!sends_at_once(&disabled, at(0)));
    }

    #[test]
    fn an_open_breaker_defers_then_offers_the_probe() {
        let policy = BreakerPolicy {
            failure_threshold: 1,
            ..BreakerPolicy::default()
        };
        let mut open = gate();
        open.breaker.record(Signal::Failed, at(0), &policy);
        assert_eq!(admit(&open, at(1)), Admission::Defer(at(10)));
        assert!(!sends_at_once(&open, at(1)));
        assert_eq!(admit(&open, at(10)), Admission::Probe);
        assert!(
            !sends_at_once(&open, at(10)),
            "a probe is claimed, never handed off"
        );
    }
}
