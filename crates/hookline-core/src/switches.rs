//! An endpoint's two switches, `enabled` and `paused`: whether it takes work,
//! and what turning them does to its queue and which operational notices it
//! raises. The store reads the switches, asks [`turn`], and executes the
//! [`Turned`] plan in the endpoint's update. What deleting an endpoint does
//! is here too ([`Deleted`]).

use crate::ids::{AppId, EndpointId};
use crate::model::{DeadReason, DeliveryState};
use crate::operational::{Kind, Notice};
use crate::timeline::{Mark, MarkKind};

/// The reason a disable by hand is recorded (and told) with.
pub const MANUAL: &str = "manual";

/// An endpoint's switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Switches {
    pub enabled: bool,
    pub paused: bool,
}

impl Switches {
    /// Whether its deliveries are sent: a paused endpoint's are parked like a
    /// disabled one's (claims treat it as disabled).
    pub fn sending(self) -> bool {
        self.enabled && !self.paused
    }
}

/// What turning an endpoint's switches from one setting to another does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turned {
    /// Disabled by hand: its breaker and reason are set as a disable's, and its
    /// queue is parked.
    pub disable: bool,
    /// Enabled again: its reason cleared, its breaker closed afresh.
    pub enable: bool,
    /// Paused while enabled: its queue, due or not, is parked (a disable parks
    /// it itself).
    pub park: bool,
    /// Sending again: what was parked is due now.
    pub unpark: bool,
}

/// What going from `before` to `after` does.
pub fn turn(before: Switches, after: Switches) -> Turned {
    Turned {
        disable: before.enabled && !after.enabled,
        enable: !before.enabled && after.enabled,
        park: before.sending() && !after.sending() && after.enabled,
        unpark: !before.sending() && after.sending(),
    }
}

/// The timeline's marks of going from `before` to `after`: each switch that
/// turned, a disable by hand with its reason.
pub fn marks(before: Switches, after: Switches) -> Vec<Mark> {
    let mut marks = Vec::new();
    match (before.enabled, after.enabled) {
        (true, false) => marks.push(Mark::disabled(MANUAL)),
        (false, true) => marks.push(Mark::of(MarkKind::Enabled)),
        _ => {}
    }
    match (before.paused, after.paused) {
        (false, true) => marks.push(Mark::of(MarkKind::Paused)),
        (true, false) => marks.push(Mark::of(MarkKind::Resumed)),
        _ => {}
    }
    marks
}

impl Turned {
    /// The operational notices an update of the endpoint with this turn raises:
    /// always `endpoint.updated`, and `disabled` (by hand) or `enabled` with it.
    pub fn notices(self, app: &AppId, endpoint: &EndpointId) -> Vec<Notice> {
        let mut notices = vec![Notice::endpoint(Kind::EndpointUpdated, app, endpoint)];
        if self.disable {
            notices.push(Notice::disabled(app, endpoint, MANUAL));
        }
        if self.enable {
            notices.push(Notice::endpoint(Kind::EndpointEnabled, app, endpoint));
        }
        notices
    }
}

/// What deleting an endpoint does: every delivery of it not finished yet —
/// [`Deleted::KILLS`]: pending, in flight, blocked behind its ordering key;
/// its `fanout` targets too — is dead-lettered for [`Deleted::REASON`]
/// (finished ones stay, for the log), and `endpoint.deleted` is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deleted;

impl Deleted {
    /// The states whose deliveries a deletion dead-letters.
    pub const KILLS: [DeliveryState; 3] = [
        DeliveryState::Pending,
        DeliveryState::InFlight,
        DeliveryState::Blocked,
    ];
    /// Why they are dead.
    pub const REASON: DeadReason = DeadReason::EndpointDeleted;

    /// Whether a delivery in `state` is dead-lettered by the deletion.
    pub fn kills(state: DeliveryState) -> bool {
        Self::KILLS.contains(&state)
    }

    /// The notice a deletion raises.
    pub fn notice(app: &AppId, endpoint: &EndpointId) -> Notice {
        Notice::endpoint(Kind::EndpointDeleted, app, endpoint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deletion_dead_letters_what_is_not_finished_and_keeps_the_rest() {
        use DeliveryState::*;
        // Every state, so a new one fails here until someone decides.
        for &state in DeliveryState::ALL {
            let killed = match state {
                Pending | InFlight | Blocked => true,
                Succeeded | Dead => false,
            };
            assert_eq!(Deleted::kills(state), killed, "{state:?}");
        }
        assert_eq!(Deleted::REASON.as_str(), "endpoint_deleted");
        let (app, endpoint) = (AppId::generate(), EndpointId::generate());
        assert_eq!(Deleted::notice(&app, &endpoint).kind, Kind::EndpointDeleted);
    }

    fn switches(enabled: bool, paused: bool) -> Switches {
        Switches { enabled, paused }
    }

    #[test]
    fn only_an_enabled_unpaused_endpoint_sends() {
        assert!(switches(true, false).sending());
        assert!(!switches(true, true).sending());
        assert!(!switches(false, false).sending());
        assert!(!switches(false, true).sending());
    }

    #[test]
    fn every_turn_of_the_switches_moves_the_queue_once() {
        let none = Turned {
            disable: false,
            enable: false,
            park: false,
            unpark: false,
        };
        let all = [
            switches(true, false),
            switches(true, true),
            switches(false, false),
            switches(false, true),
        ];
        for before in all {
            for after in all {
                let turned = turn(before, after);
                let expected = match (before.enabled, before.paused, after.enabled, after.paused) {
                    // Unchanged.
                    (b, p, a, q) if (b, p) == (a, q) => none,
                    (true, false, true, true) => Turned { park: true, ..none },
                    (true, true, true, false) => Turned {
                        unpark: true,
                        ..none
                    },
                    (true, false, false, _) => Turned {
                        disable: true,
                        ..none
                    },
                    (true, true, false, _) => Turned {
                        disable: true,
                        ..none
                    },
                    (false, _, true, false) => Turned {
                        enable: true,
                        unpark: true,
                        ..none
                    },
                    (false, _, true, true) => Turned {
                        enable: true,
                        ..none
                    },
                    (false, _, false, _) => none,
                    _ => unreachable!(),
                };
                assert_eq!(turned, expected, "{before:?} -> {after:?}");
                // What was sending and stops is parked once: by the disable or the pause.
                if before.sending() && !after.sending() {
                    assert!(turned.disable ^ turned.park, "{before:?} -> {after:?}");
                }
            }
        }
    }

    #[test]
    fn each_switch_that_turns_leaves_a_mark() {
        let kinds = |before, after| -> Vec<(MarkKind, Option<&str>)> {
            marks(before, after)
                .iter()
                .map(|m| (m.kind, m.reason))
                .collect()
        };
        let (on, paused, off) = (
            switches(true, false),
            switches(true, true),
            switches(false, false),
        );
        assert_eq!(kinds(on, on), vec![]);
        assert_eq!(kinds(on, off), vec![(MarkKind::Disabled, Some(MANUAL))]);
        assert_eq!(kinds(off, on), vec![(MarkKind::Enabled, None)]);
        assert_eq!(kinds(on, paused), vec![(MarkKind::Paused, None)]);
        assert_eq!(kinds(paused, on), vec![(MarkKind::Resumed, None)]);
        assert_eq!(
            kinds(paused, off),
            vec![
                (MarkKind::Disabled, Some(MANUAL)),
                (MarkKind::Resumed, None)
            ]
        );
    }

    #[test]
    fn an_update_tells_what_it_turned() {
        let (app, endpoint) = (AppId::generate(), EndpointId::generate());
        let kinds = |turned: Turned| -> Vec<Kind> {
            turned
                .notices(&app, &endpoint)
                .iter()
                .map(|n| n.kind)
                .collect()
        };
        let (on, off) = (switches(true, false), switches(false, false));
        assert_eq!(kinds(turn(on, on)), vec![Kind::EndpointUpdated]);
        assert_eq!(
            kinds(turn(on, off)),
            vec![Kind::EndpointUpdated, Kind::EndpointDisabled]
        );
        assert_eq!(
            kinds(turn(off, on)),
            vec![Kind::EndpointUpdated, Kind::EndpointEnabled]
        );
        assert_eq!(
            turn(on, off).notices(&app, &endpoint)[1].data["reason"],
            "manual"
        );
        // Pausing and resuming tell only the update.
        let paused = switches(true, true);
        assert_eq!(kinds(turn(on, paused)), vec![Kind::EndpointUpdated]);
        assert_eq!(kinds(turn(paused, on)), vec![Kind::EndpointUpdated]);
    }
}
