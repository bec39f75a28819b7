//! The metrics a dispatcher emits: every name once, here (docs/api.md's metric
//! table and the dashboards are checked against [`NAMES`]).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookline_core::classify::Outcome;
use hookline_core::ids::EndpointId;
use hookline_core::model::TransportError;
use hookline_core::retry::Next;
use hookline_core::time::Timestamp;
use hookline_store::ClaimedDelivery;

use crate::sender::SendResult;

/// Attempts by `outcome` class (see [`outcome_class`]).
pub const ATTEMPTS: &str = "hookline_attempts_total";
/// Seconds from the request's start to the end of its response (or failure).
pub const ATTEMPT_DURATION: &str = "hookline_attempt_duration_seconds";
/// Deliveries whose attempt finished them or scheduled their retry, by `result`.
pub const DELIVERIES_COMPLETED: &str = "hookline_deliveries_completed_total";
/// Deliveries that entered the DLQ, by `reason`.
pub const DLQ_ENTRIES: &str = "hookline_dlq_entries_total";
/// Seconds from the publish to the first attempt's start (first rounds only).
pub const PUBLISH_TO_FIRST_ATTEMPT: &str = "hookline_publish_to_first_attempt_seconds";
/// Seconds from the publish to the end of the attempt that succeeded (first rounds only).
pub const PUBLISH_TO_SUCCESS: &str = "hookline_publish_to_success_seconds";
/// Deliveries handed from a publish straight to this dispatcher.
pub const HANDED_OFF: &str = "hookline_deliveries_handed_off_total";
/// Deliveries claimed from the database.
pub const CLAIMED: &str = "hookline_deliveries_claimed_total";
/// Seconds one dispatch turn's transaction took (record finished attempts, claim).
pub const TURN_DURATION: &str = "hookline_dispatch_turn_seconds";
/// Deliveries one turn carried, by `kind` (`recorded`, `claimed`).
pub const TURN_DELIVERIES: &str = "hookline_dispatch_turn_deliveries";
/// Circuit-breaker transitions, by `to`: `open`, `closed`, `disabled` (the endpoint).
pub const BREAKER_TRANSITIONS: &str = "hookline_breaker_transitions_total";
/// Unix seconds of the dispatch loop's last turn (a stuck loop stops moving it).
pub const LAST_TURN: &str = "hookline_dispatch_last_turn_timestamp_seconds";

/// Every metric this crate emits.
pub const NAMES: &[&str] = &[
    ATTEMPTS,
    ATTEMPT_DURATION,
    DELIVERIES_COMPLETED,
    DLQ_ENTRIES,
    PUBLISH_TO_FIRST_ATTEMPT,
    PUBLISH_TO_SUCCESS,
    HANDED_OFF,
    CLAIMED,
    TURN_DURATION,
    TURN_DELIVERIES,
    BREAKER_TRANSITIONS,
    LAST_TURN,
];

/// Registers every counter this crate emits, with each label value it can
/// take, at zero (an increment of 0 leaves a running count alone): a fresh
/// process exports them from its first scrape, so dashboards show 0 rather
/// than "no data" and an absent-series alert can tell "none yet" from
/// "broken". With per-endpoint labels, attempts have no series before the
/// first attempt (there is no endpoint to name yet).
pub fn zero(endpoint_labels: bool) {
    if !endpoint_labels {
        let statuses = [200, 300, 400, 429, 500, 600].map(|s| outcome_class(Some(s), None));
        let errors = TransportError::ALL
            .iter()
            .map(|e| outcome_class(None, Some(*e)));
        for class in statuses.into_iter().chain(errors).chain(ANSWERED_CLASSES) {
            ::metrics::counter!(ATTEMPTS, "outcome" => class).increment(0);
        }
    }
    for reason in hookline_core::model::DeadReason::ALL {
        ::metrics::counter!(DLQ_ENTRIES, "reason" => reason.as_str()).increment(0);
    }
    for result in ["succeeded", "retry", "dead"] {
        ::metrics::counter!(DELIVERIES_COMPLETED, "result" => result).increment(0);
    }
    for to in BREAKER_STATES {
        ::metrics::counter!(BREAKER_TRANSITIONS, "to" => to).increment(0);
    }
    ::metrics::counter!(CLAIMED).increment(0);
    ::metrics::counter!(HANDED_OFF).increment(0);
}

/// The `to` label of [`BREAKER_TRANSITIONS`].
const BREAKER_STATES: [&str; 3] = ["open", "closed", "disabled"];

/// The `outcome` label of an attempt that did not end with a response or a
/// transport error ([`outcome_class`]), by what it was.
pub fn answered_class(outcome: &Outcome) -> Option<&'static str> {
    match outcome {
        Outcome::Accepted => Some("accepted"),
        Outcome::Rejected => Some("rejected"),
        Outcome::Skipped => Some("skipped"),
        Outcome::TransformFailed { .. } => Some("transform_error"),
        Outcome::TransformUnavailable => Some("transform_unavailable"),
        Outcome::Response { .. } | Outcome::Failed(_) => None,
    }
}

/// Those classes, for [`zero`].
const ANSWERED_CLASSES: [&str; 5] = [
    "accepted",
    "rejected",
    "skipped",
    "transform_error",
    "transform_unavailable",
];

/// The `outcome` label of an attempt: the response's status class (`429`
/// apart), or how the transport failed.
pub fn outcome_class(status: Option<u16>, error: Option<TransportError>) -> &'static str {
    match (status, error) {
        (Some(429), _) => "429",
        (Some(200..=299), _) => "2xx",
        (Some(300..=399), _) => "3xx",
        (Some(400..=499), _) => "4xx",
        (Some(500..=599), _) => "5xx",
        (Some(_), _) => "other_status",
        (None, Some(TransportError::Timeout)) => "timeout",
        (None, Some(TransportError::Connect)) => "connect_error",
        (None, Some(TransportError::Tls)) => "tls_error",
        (None, Some(TransportError::Dns)) => "dns_error",
        (None, Some(TransportError::DestinationForbidden)) => "forbidden_destination",
        (None, Some(TransportError::AuthError)) => "auth_error",
        (None, Some(TransportError::Io)) | (None, None) => "io_error",
    }
}

/// Per-endpoint series: off unless a cap is configured; the first `cap`
/// endpoints seen get their own `endpoint` label, every later one `other`.
#[derive(Debug, Default)]
pub(crate) struct EndpointLabels {
    cap: usize,
    seen: Mutex<HashSet<EndpointId>>,
}

impl EndpointLabels {
    pub(crate) fn new(cap: usize) -> Self {
        Self {
            cap,
            seen: Mutex::default(),
        }
    }

    fn label(&self, endpoint: &EndpointId) -> Option<String> {
        if self.cap == 0 {
            return None;
        }
        let mut seen = self.seen.lock().expect("not poisoned");
        if seen.contains(endpoint) {
            return Some(endpoint.to_string());
        }
        if seen.len() < self.cap {
            seen.insert(endpoint.clone());
            return Some(endpoint.to_string());
        }
        Some("other".into())
    }
}

/// One finished attempt.
pub(crate) fn attempt(
    delivery: &ClaimedDelivery,
    result: &SendResult,
    next: Next,
    (started_at, finished_at): (Timestamp, Timestamp),
    endpoints: &EndpointLabels,
) {
    let class = answered_class(&result.outcome).unwrap_or_else(|| {
        outcome_class(result.status, result.error.as_ref().map(|(kind, _)| *kind))
    });
    match endpoints.label(&delivery.endpoint_id) {
        Some(endpoint) => {
            ::metrics::counter!(ATTEMPTS, "outcome" => class, "endpoint" => endpoint).increment(1)
        }
        None => ::metrics::counter!(ATTEMPTS, "outcome" => class).increment(1),
    }
    ::metrics::histogram!(ATTEMPT_DURATION).record(result.duration.as_secs_f64());
    let result_label = match next {
        Next::Succeeded => "succeeded",
        Next::RetryAt(_) => "retry",
        Next::Dead(reason) => {
            ::metrics::counter!(DLQ_ENTRIES, "reason" => reason.as_str()).increment(1);
            "dead"
        }
    };
    ::metrics::counter!(DELIVERIES_COMPLETED, "result" => result_label).increment(1);
    // Publish-to-X only for the round the publish started: a replay's round
    // starts at the replay, and its wait in the DLQ is no latency of ours.
    if !delivery.replayed {
        let since_publish = |at: Timestamp| {
            Duration::from_millis(
                (at.as_millis() - delivery.round_started_at.as_millis()).max(0) as u64,
            )
            .as_secs_f64()
        };
        if delivery.attempts == 0 {
            ::metrics::histogram!(PUBLISH_TO_FIRST_ATTEMPT).record(since_publish(started_at));
        }
        if matches!(next, Next::Succeeded) {
            ::metrics::histogram!(PUBLISH_TO_SUCCESS).record(since_publish(finished_at));
        }
    }
}

/// One dispatch turn: how long its transaction took and how much it carried.
pub(crate) fn turn(took: Duration, recorded: usize, claimed: usize, now: Timestamp) {
    ::metrics::histogram!(TURN_DURATION).record(took.as_secs_f64());
    ::metrics::histogram!(TURN_DELIVERIES, "kind" => "recorded").record(recorded as f64);
    ::metrics::histogram!(TURN_DELIVERIES, "kind" => "claimed").record(claimed as f64);
    ::metrics::counter!(CLAIMED).increment(claimed as u64);
    ::metrics::gauge!(LAST_TURN).set(now.as_millis() as f64 / 1000.0);
}

pub(crate) fn breaker_changes(changes: hookline_store::BreakerChanges) {
    for (to, count) in
        BREAKER_STATES
            .into_iter()
            .zip([changes.opened, changes.closed, changes.disabled])
    {
        if count > 0 {
            ::metrics::counter!(BREAKER_TRANSITIONS, "to" => to).increment(u64::from(count));
        }
    }
}

pub(crate) fn handed_off(count: usize) {
    ::metrics::counter!(HANDED_OFF).increment(count as u64);
}

/// When the dispatch loop last finished a turn, for readiness checks: a loop
/// stuck in a turn (or dead) stops moving it.
#[derive(Debug, Clone, Default)]
pub struct Heartbeat(Arc<AtomicU64>);

impl Heartbeat {
    pub(crate) fn beat(&self, now: Timestamp) {
        self.0
            .store(now.as_millis().max(0) as u64, Ordering::Relaxed);
    }

    /// The last turn's time; `None` before the first.
    pub fn last_turn(&self) -> Option<Timestamp> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            millis => Some(Timestamp::from_millis(millis as i64)),
        }
    }
}
