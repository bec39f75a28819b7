//! Per-entity ordering: the rules for events that share an `ordering_key`.
//!
//! Events with one key get increasing sequence numbers. For each endpoint,
//! the deliveries of one key form a partition that is attempted strictly one
//! at a time in sequence order: only the partition's head is claimable; the
//! others wait in the `blocked` state. When the head finishes, the next one
//! is released. Events without a key are not partitioned at all.

use crate::model::{DeadReason, DeliveryState};
use crate::time::Timestamp;

/// What a dead head does to the rest of its partition (per endpoint).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OnDead {
    /// The next event goes on; the dead one waits in the DLQ (default: one bad event
    /// must not stop an entity's stream for good).
    #[default]
    Skip,
    /// The key stays blocked until the dead one is replayed and delivered.
    Block,
}

impl OnDead {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Skip => "skip",
            Self::Block => "block",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "skip" => Some(Self::Skip),
            "block" => Some(Self::Block),
            _ => None,
        }
    }

    /// The states of earlier deliveries of a partition that hold back a later one.
    pub fn holding_states(self) -> &'static [DeliveryState] {
        match self {
            Self::Skip => &[
                DeliveryState::Pending,
                DeliveryState::InFlight,
                DeliveryState::Blocked,
            ],
            Self::Block => &[
                DeliveryState::Pending,
                DeliveryState::InFlight,
                DeliveryState::Blocked,
                DeliveryState::Dead,
            ],
        }
    }
}

/// The state a new keyed delivery starts in: `pending` if nothing earlier of its
/// partition holds it back, else `blocked`.
pub fn initial_state(earlier_holding: bool) -> DeliveryState {
    if earlier_holding {
        DeliveryState::Blocked
    } else {
        DeliveryState::Pending
    }
}

/// Whether a head that ended in `state` releases the next delivery of its partition.
pub fn releases_next(state: DeliveryState, reason: Option<DeadReason>, on_dead: OnDead) -> bool {
    match state {
        DeliveryState::Succeeded => true,
        DeliveryState::Dead => {
            on_dead == OnDead::Skip || reason == Some(DeadReason::EndpointDeleted)
        }
        DeliveryState::Pending | DeliveryState::InFlight | DeliveryState::Blocked => false,
    }
}

/// When a released successor is due, given when its endpoint takes new work
/// (`due`: `admission::due_for_new_work`) — `None`: since its event's
/// publication. An endpoint that takes new work now serves its fresh lane
/// oldest first, so the successor goes ahead of work published after it
/// instead of queueing behind the whole backlog once per step of its partition
/// (with 50 events per key under load, that put minutes between a partition's
/// first and last delivery). Otherwise (a breaker's probe time, a parked
/// endpoint) it waits as new work would.
pub fn successor_due(due: Timestamp, now: Timestamp) -> Option<Timestamp> {
    (due > now).then_some(due)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_successor_released_to_a_ready_endpoint_is_due_since_its_publication() {
        let now = Timestamp::from_millis(5_000);
        assert_eq!(successor_due(now, now), None);
        assert_eq!(successor_due(Timestamp::from_millis(4_000), now), None);
        let probe = Timestamp::from_millis(9_000);
        assert_eq!(
            successor_due(probe, now),
            Some(probe),
            "the breaker's probe time"
        );
    }

    #[test]
    fn a_partition_admits_only_its_head() {
        assert_eq!(initial_state(false), DeliveryState::Pending);
        assert_eq!(initial_state(true), DeliveryState::Blocked);
    }

    #[test]
    fn success_always_releases_the_next() {
        for on_dead in [OnDead::Skip, OnDead::Block] {
            assert!(releases_next(DeliveryState::Succeeded, None, on_dead));
        }
    }

    #[test]
    fn a_dead_head_releases_only_when_skipping() {
        let reason = Some(DeadReason::RetriesExhausted);
        assert!(releases_next(DeliveryState::Dead, reason, OnDead::Skip));
        assert!(!releases_next(DeliveryState::Dead, reason, OnDead::Block));
    }

    #[test]
    fn a_retry_keeps_the_partition_waiting() {
        for state in [
            DeliveryState::Pending,
            DeliveryState::InFlight,
            DeliveryState::Blocked,
        ] {
            assert!(!releases_next(state, None, OnDead::Skip));
        }
    }

    #[test]
    fn blocking_mode_counts_dead_predecessors_as_holding() {
        assert!(OnDead::Block
            .holding_states()
            .contains(&DeliveryState::Dead));
        assert!(!OnDead::Skip.holding_states().contains(&DeliveryState::Dead));
        assert_eq!(OnDead::parse("block"), Some(OnDead::Block));
        assert_eq!(OnDead::parse("sometimes"), None);
    }
}
