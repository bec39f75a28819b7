//! A publish's plan: what each item's `Idempotency-Key` makes of it
//! ([`resolve_keys`]), the first state of each fresh delivery, and the hand-off
//! that lets a publish give a delivery straight to the dispatcher of its process.
//!
//! The store reads what the plan needs — each target endpoint's gate and, for an
//! ordered event, the states of the unfinished deliveries of its partition — and
//! writes the deliveries as planned; the API asks [`first_state`] for each and,
//! where it [may hand off](FirstState::may_hand_off), asks the [`Handoff`] for room.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::Duration;

use crate::admission;
use crate::claim::EndpointGate;
use crate::ids::EndpointId;
use crate::model::DeliveryState;
use crate::ordering;
use crate::time::Timestamp;

/// What a publish knows of a new delivery's ordering partition (endpoint, ordering key).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partition {
    /// An earlier event of the same publish group already has a delivery in it.
    pub earlier_in_group: bool,
    /// The states of the partition's stored deliveries that have not succeeded.
    pub unfinished: Vec<DeliveryState>,
}

/// How a fresh delivery is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FirstState {
    pub state: DeliveryState,
    pub due_at: Timestamp,
    /// A claim would send it at once: the publish may lease it to the dispatcher
    /// of its process and hand it over after the commit ([`FirstState::handed`]).
    pub may_hand_off: bool,
}

impl FirstState {
    /// The delivery as written when handed off: in flight, leased until `now + lease`.
    pub fn handed(self, now: Timestamp, lease: Duration) -> Self {
        debug_assert!(
            self.may_hand_off,
            "only a delivery sent at once is handed off"
        );
        Self {
            state: DeliveryState::InFlight,
            due_at: now + lease,
            may_hand_off: false,
        }
    }
}

/// The first state of a delivery to the endpoint behind `gate`, published at
/// `now`; `partition` is `None` for an event without an ordering key.
///
/// An ordered delivery waits `blocked` behind an earlier one of its partition
/// that holds it (by the endpoint's `ordering_on_dead`); a pending one is due when
/// the endpoint takes new work (never while disabled or paused, at the probe
/// time while its breaker defers, else now).
pub fn first_state(
    gate: &EndpointGate,
    partition: Option<&Partition>,
    now: Timestamp,
) -> FirstState {
    let state = match partition {
        None => DeliveryState::Pending,
        Some(partition) => ordering::initial_state(
            partition.earlier_in_group
                || partition
                    .unfinished
                    .iter()
                    .any(|state| gate.on_dead.holding_states().contains(state)),
        ),
    };
    let due_at = admission::due_for_new_work(gate.enabled, &gate.breaker, now);
    FirstState {
        state,
        due_at,
        may_hand_off: state == DeliveryState::Pending
            && due_at <= now
            && admission::sends_at_once(&gate.admission(), now),
    }
}

/// Where a publish hands fresh deliveries, written leased, to the dispatcher of
/// its process (the hand-off in docs/architecture.md). `hookline-dispatch`
/// implements it, `hookline-api` calls it, the binary wires the two together.
///
/// A publish [reserves](Handoff::reserve) room for each delivery it may hand off
/// while its transaction is open, then either [hands the committed deliveries
/// over](Handoff::hand_over) or [cancels](Handoff::cancel) each reservation.
pub trait Handoff<D>: Send + Sync + std::fmt::Debug {
    /// How long a handed-off delivery is leased.
    fn lease(&self) -> Duration;
    /// Takes room and a permit for one delivery to `endpoint` (whose own
    /// concurrency ceiling is `max_in_flight`), if the dispatcher has both free
    /// (beside a backlog: a permit of its fresh share, and only for an endpoint
    /// with little of its own in flight; see `hookline_dispatch::room`).
    fn reserve(&self, endpoint: &EndpointId, max_in_flight: Option<u32>) -> bool;
    /// Gives back a reservation whose delivery was not committed.
    fn cancel(&self, endpoint: &EndpointId);
    /// Passes committed deliveries, one per reservation, to the dispatcher.
    fn hand_over(&self, deliveries: Vec<D>);
}

/// What an item of a publish comes to, as far as its `Idempotency-Key` tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyUse {
    /// A new event: no key, or its key's first use.
    New,
    /// Its key was used before this publish: with the same request (answered as
    /// it was then), or with another (refused).
    Earlier { same_request: bool },
    /// Its key was used by the item at this index of the same publish, with the
    /// same request: one event, answered alike.
    SameAs(usize),
    /// Its key was used by an earlier item of the same publish with another request.
    KeyReused,
}

/// Resolves each item's key: `keys` holds each item's key (its slot, which
/// names the app too) with the fingerprint of its request, or `None`;
/// `stored` gives the fingerprint an earlier publish stored for a slot. A key
/// is one event per app: the first use wins, whether earlier or in this publish.
pub fn resolve_keys<'a, K: Eq + Hash>(
    keys: impl IntoIterator<Item = Option<(K, &'a str)>>,
    stored: impl Fn(&K) -> Option<&'a str>,
) -> Vec<KeyUse> {
    let mut used: HashMap<K, (&'a str, usize)> = HashMap::new();
    keys.into_iter()
        .enumerate()
        .map(|(index, key)| {
            let Some((slot, fingerprint)) = key else {
                return KeyUse::New;
            };
            if let Some(earlier) = stored(&slot) {
                return KeyUse::Earlier {
                    same_request: earlier == fingerprint,
                };
            }
            match used.get(&slot) {
                Some((first, at)) if *first == fingerprint => KeyUse::SameAs(*at),
                Some(_) => KeyUse::KeyReused,
                None => {
                    used.insert(slot, (fingerprint, index));
                    KeyUse::New
                }
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_one_event_the_first_use_wins() {
        let stored: HashMap<&str, &str> = HashMap::from([("old", "f1"), ("older", "f1")]);
        let keys = vec![
            None,
            Some(("k", "f1")),
            Some(("k", "f1")),
            Some(("k", "f2")),
            Some(("old", "f1")),
            Some(("older", "f2")),
            Some(("old", "f1")),
            Some(("j", "f2")),
            None,
        ];
        let uses = resolve_keys(keys, |slot| stored.get(slot).copied());
        assert_eq!(
            uses,
            vec![
                KeyUse::New,
                KeyUse::New,
                KeyUse::SameAs(1),
                KeyUse::KeyReused,
                KeyUse::Earlier { same_request: true },
                KeyUse::Earlier {
                    same_request: false
                },
                // A key stored earlier answers every use in the publish alike.
                KeyUse::Earlier { same_request: true },
                KeyUse::New,
                KeyUse::New,
            ]
        );
    }
    use crate::breaker::{Breaker, BreakerPolicy, Signal};
    use crate::ordering::OnDead;
    use crate::retry::RetryOverrides;

    fn gate() -> EndpointGate {
        EndpointGate {
            retry: RetryOverrides::default(),
            ..crate::claim::tests::gate()
        }
    }

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(ms)
    }

    #[test]
    fn a_healthy_endpoint_takes_an_unordered_delivery_now_and_it_may_be_handed_off() {
        let first = first_state(&gate(), None, at(5));
        assert_eq!(
            first,
            FirstState {
                state: DeliveryState::Pending,
                due_at: at(5),
                may_hand_off: true
            }
        );
        let handed = first.handed(at(5), Duration::from_secs(30));
        assert_eq!(handed.state, DeliveryState::InFlight);
        assert_eq!(handed.due_at, at(30_005));
    }

    #[test]
    fn a_disabled_endpoint_parks_new_work_and_an_open_breaker_defers_it_to_the_probe() {
        let disabled = EndpointGate {
            enabled: false,
            ..gate()
        };
        let first = first_state(&disabled, None, at(5));
        assert_eq!(
            (first.due_at, first.may_hand_off),
            (admission::PARKED, false)
        );

        let policy = BreakerPolicy {
            failure_threshold: 1,
            ..BreakerPolicy::default()
        };
        let mut breaker = Breaker::default();
        breaker.record(Signal::Failed, at(0), &policy);
        let open = EndpointGate { breaker, ..gate() };
        let first = first_state(&open, None, at(5));
        assert_eq!(first.state, DeliveryState::Pending);
        assert!(first.due_at > at(5), "deferred to the probe time");
        assert!(!first.may_hand_off);
    }

    #[test]
    fn a_rate_limited_endpoint_is_due_now_but_only_a_claim_hands_out_its_slots() {
        let limited = EndpointGate {
            rate: Some(crate::claim::Rate {
                per_second: 10,
                tat_us: None,
            }),
            ..gate()
        };
        let first = first_state(&limited, None, at(5));
        assert_eq!((first.due_at, first.may_hand_off), (at(5), false));
    }

    #[test]
    fn an_ordered_delivery_is_blocked_behind_what_holds_its_partition() {
        let free = Partition::default();
        assert_eq!(
            first_state(&gate(), Some(&free), at(0)).state,
            DeliveryState::Pending
        );
        let behind_in_group = Partition {
            earlier_in_group: true,
            unfinished: vec![],
        };
        let first = first_state(&gate(), Some(&behind_in_group), at(0));
        assert_eq!(
            (first.state, first.may_hand_off),
            (DeliveryState::Blocked, false)
        );
        // A dead predecessor holds the partition only where the endpoint blocks on dead.
        let behind_dead = Partition {
            earlier_in_group: false,
            unfinished: vec![DeliveryState::Dead],
        };
        assert_eq!(
            first_state(&gate(), Some(&behind_dead), at(0)).state,
            DeliveryState::Pending
        );
        let blocking = EndpointGate {
            on_dead: OnDead::Block,
            ..gate()
        };
        assert_eq!(
            first_state(&blocking, Some(&behind_dead), at(0)).state,
            DeliveryState::Blocked
        );
        let behind_in_flight = Partition {
            earlier_in_group: false,
            unfinished: vec![DeliveryState::InFlight],
        };
        assert_eq!(
            first_state(&gate(), Some(&behind_in_flight), at(0)).state,
            DeliveryState::Blocked
        );
    }
}
