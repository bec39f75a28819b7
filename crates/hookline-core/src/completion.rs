//! The completion plan: what a turn writes, besides the attempt rows and the
//! deliveries' next states, once attempts have finished — each endpoint's
//! breaker and last error, its queue moved when the breaker opens or closes, the
//! endpoint disabled (410 Gone, or failing past `disable_after`), and ordered
//! partitions whose head finished released.
//!
//! The dispatcher's turn (`hookline_dispatch::turn::record`) has the store read
//! the endpoints' rows, asks for this plan, and has the store execute it in the
//! turn's transaction; nothing here does I/O.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::admission::due_for_new_work;
use crate::breaker::{Breaker, BreakerPolicy, BreakerState, Signal, Transition};
use crate::ids::{AppId, EndpointId};
use crate::model::{DeadReason, DeliveryState, TransportError};
use crate::operational::{self, DeadCount, Notice};
use crate::ordering::{self, OnDead};
use crate::time::Timestamp;
use crate::timeline::{Mark, MarkKind};

/// The longest `last_error` kept on an endpoint.
pub const LAST_ERROR_CHARS: usize = 500;

/// What the plan reads of one finished attempt.
#[derive(Debug, Clone, Copy)]
pub struct Finished<'a> {
    pub app: &'a AppId,
    pub endpoint: &'a EndpointId,
    /// What the attempt says about the endpoint's health.
    pub signal: Signal,
    /// 410 Gone: disable the endpoint too.
    pub gone: bool,
    pub status_code: Option<u16>,
    pub error: Option<(TransportError, &'a str)>,
    /// The delivery belongs to an ordered partition, its lease was still held, and
    /// it ended its round here (succeeded or dead).
    pub partition_end: Option<PartitionEnd<'a>>,
    /// The delivery died here (its lease still held).
    pub dead: Option<Death<'a>>,
}

/// A delivery that went to the dead-letter queue.
#[derive(Debug, Clone, Copy)]
pub struct Death<'a> {
    pub reason: DeadReason,
    pub delivery: &'a str,
    pub event: &'a str,
    pub at: Timestamp,
}

/// A partition's head that ended its round.
#[derive(Debug, Clone, Copy)]
pub struct PartitionEnd<'a> {
    pub app: &'a AppId,
    pub key: &'a str,
    pub state: DeliveryState,
    pub reason: Option<DeadReason>,
}

/// What the plan reads of an endpoint (its row, locked). A deleted endpoint is
/// absent: it has no breaker and no partitions left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointRow {
    pub enabled: bool,
    pub breaker: Breaker,
    pub on_dead: OnDead,
}

/// Why an endpoint was disabled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DisableReason {
    /// It answered 410 Gone.
    Gone,
    /// It failed without a healthy answer for longer than `disable_after`.
    Failing,
}

impl DisableReason {
    pub fn as_str(self) -> &'static str {
        match self {
            DisableReason::Gone => "gone",
            DisableReason::Failing => "failing",
        }
    }
}

/// An endpoint's pending deliveries due within `from..=to` made due at `at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueMove {
    pub from: Timestamp,
    pub to: Timestamp,
    pub at: Timestamp,
}

/// What one endpoint's attempts do to it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EndpointChange {
    /// The breaker to save, if it changed.
    pub breaker: Option<Breaker>,
    /// The last failure's description, with its time (now).
    pub last_error: Option<String>,
    pub queue_move: Option<QueueMove>,
    pub disable: Option<DisableReason>,
    /// What to tell the operator (`crate::operational`): failing, recovered, disabled.
    pub notices: Vec<Notice>,
    /// What the endpoint's timeline marks: the breaker opened or closed, a disable.
    pub marks: Vec<Mark>,
}

/// A partition whose head ended: its next `blocked` delivery becomes pending,
/// due at `due`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Release {
    pub app: AppId,
    pub key: String,
    pub endpoint: EndpointId,
    pub due: Timestamp,
}

/// How many breakers a completion opened and closed, and endpoints it disabled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BreakerChanges {
    pub opened: u32,
    pub closed: u32,
    /// Endpoints disabled (410 Gone, or failing past `disable_after`).
    pub disabled: u32,
}

/// The completion plan (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompletionPlan {
    /// Per endpoint, in id order (the one lock order of every transaction).
    pub endpoints: BTreeMap<EndpointId, EndpointChange>,
    /// In (app, key) order, once each.
    pub releases: Vec<Release>,
    pub changes: BreakerChanges,
    /// Closing a breaker brought deferred work forward to now: wake dispatchers
    /// after the commit.
    pub due_now: bool,
    /// Dead deliveries by endpoint and reason, for the operational `delivery.dead`
    /// (none of the internal app's).
    pub dead: Vec<(EndpointId, AppId, DeadCount)>,
}

/// The completion plan of `finished` at `now`, given their endpoints' rows.
pub fn plan(
    finished: &[Finished<'_>],
    rows: &HashMap<EndpointId, EndpointRow>,
    policy: &BreakerPolicy,
    now: Timestamp,
) -> CompletionPlan {
    let mut by_endpoint: BTreeMap<&EndpointId, Vec<&Finished<'_>>> = BTreeMap::new();
    for f in finished {
        by_endpoint.entry(f.endpoint).or_default().push(f);
    }
    let mut plan = CompletionPlan::default();
    // Per endpoint: when work it gets now is due, given the state the attempts leave it in.
    let mut new_work_due: HashMap<&EndpointId, (OnDead, Timestamp)> = HashMap::new();
    for (endpoint, attempts) in by_endpoint {
        let Some(row) = rows.get(endpoint) else {
            continue;
        };
        let (change, due, changes, pulled_forward) = endpoint_change(row, &attempts, policy, now);
        plan.changes.opened += changes.opened;
        plan.changes.closed += changes.closed;
        plan.changes.disabled += changes.disabled;
        plan.due_now |= pulled_forward;
        new_work_due.insert(endpoint, (row.on_dead, due));
        if change != EndpointChange::default() {
            plan.endpoints.insert(endpoint.clone(), change);
        }
    }
    let mut releases = BTreeSet::new();
    for f in finished {
        let (Some(end), Some(&(on_dead, due))) = (f.partition_end, new_work_due.get(f.endpoint))
        else {
            continue;
        };
        if ordering::releases_next(end.state, end.reason, on_dead) {
            releases.insert(Release {
                app: end.app.clone(),
                key: end.key.to_owned(),
                endpoint: f.endpoint.clone(),
                due,
            });
        }
    }
    plan.releases = releases.into_iter().collect();
    plan.dead = dead_counts(finished);
    plan
}

/// The batch's dead deliveries counted by endpoint and reason (the internal
/// app's left out: its endpoints are the operator's own).
fn dead_counts(finished: &[Finished<'_>]) -> Vec<(EndpointId, AppId, DeadCount)> {
    let mut counts: BTreeMap<(&EndpointId, &str), (AppId, DeadCount)> = BTreeMap::new();
    for f in finished {
        let Some(death) = f.dead.filter(|_| !operational::is_internal(f.app)) else {
            continue;
        };
        let last = |count| DeadCount {
            reason: death.reason,
            count,
            last_status: f.status_code,
            last_delivery: death.delivery.to_owned(),
            last_event: death.event.to_owned(),
            last_at: death.at,
        };
        counts
            .entry((f.endpoint, death.reason.as_str()))
            .and_modify(|(_, c)| *c = last(c.count + 1))
            .or_insert_with(|| (f.app.clone(), last(1)));
    }
    counts
        .into_iter()
        .map(|((endpoint, _), (app, count))| (endpoint.clone(), app, count))
        .collect()
}

/// One endpoint's attempts applied to its breaker: the change, when work it gets
/// now is due, the transitions, and whether closing brought deferred work forward.
fn endpoint_change(
    row: &EndpointRow,
    attempts: &[&Finished<'_>],
    policy: &BreakerPolicy,
    now: Timestamp,
) -> (EndpointChange, Timestamp, BreakerChanges, bool) {
    let mut changes = BreakerChanges::default();
    let before = row.breaker;
    // Deliveries deferred by the breaker are due no later than this.
    let horizon = before.next_probe_at.max(before.probe_until);
    let mut breaker = before;
    let mut opened = None;
    let mut closed = false;
    let mut disable = None;
    let mut last_error = None;
    let mut notices = Vec::new();
    let mut marks = Vec::new();
    let app = attempts.first().map(|a| a.app);
    let notify = app.filter(|app| !operational::is_internal(app));
    let failing_after = policy.failing_notice_after.max(1);
    for attempt in attempts {
        if attempt.gone {
            disable = Some(DisableReason::Gone);
        }
        if attempt.signal == Signal::Failed {
            last_error = Some(describe_failure(attempt));
        }
        let failures_before = breaker.consecutive_failures;
        let transition = breaker.record(attempt.signal, now, policy);
        if let Some(app) = notify {
            match attempt.signal {
                Signal::Failed
                    if failures_before < failing_after
                        && breaker.consecutive_failures >= failing_after =>
                {
                    notices.push(Notice::failing(
                        app,
                        attempt.endpoint,
                        breaker.consecutive_failures,
                        last_error.as_deref(),
                    ))
                }
                Signal::Healthy if failures_before >= failing_after => {
                    notices.push(Notice::recovered(app, attempt.endpoint, failures_before))
                }
                _ => {}
            }
        }
        match transition {
            Transition::Opened { next_probe_at } => {
                opened = Some(next_probe_at);
                changes.opened += 1;
                marks.push(Mark::of(MarkKind::BreakerOpened));
            }
            Transition::Closed => {
                closed = true;
                changes.closed += 1;
                marks.push(Mark::of(MarkKind::BreakerClosed));
            }
            Transition::Disable => disable = disable.or(Some(DisableReason::Failing)),
            Transition::Unchanged => {}
        }
    }
    let mut pulled_forward = false;
    let queue_move = match (opened, breaker.state) {
        // Open: nothing of this endpoint is attempted before the probe.
        (Some(next_probe_at), BreakerState::Open) => Some(QueueMove {
            from: Timestamp::from_millis(i64::MIN),
            to: Timestamp::from_millis(next_probe_at.as_millis() - 1),
            at: next_probe_at,
        }),
        _ if closed && breaker.state == BreakerState::Closed => horizon.map(|horizon| {
            pulled_forward = true;
            QueueMove {
                from: Timestamp::from_millis(now.as_millis() + 1),
                to: horizon,
                at: now,
            }
        }),
        _ => None,
    };
    // Only an enabled endpoint is disabled (and counted).
    let disable = disable.filter(|_| row.enabled);
    if let Some(reason) = disable {
        changes.disabled += 1;
        marks.push(Mark::disabled(reason.as_str()));
        if let (Some(app), Some(attempt)) = (notify, attempts.first()) {
            notices.push(Notice::disabled(app, attempt.endpoint, reason.as_str()));
        }
    }
    let enabled = row.enabled && disable.is_none();
    let change = EndpointChange {
        breaker: (breaker != before).then_some(breaker),
        last_error,
        queue_move,
        disable,
        notices,
        marks,
    };
    (
        change,
        due_for_new_work(enabled, &breaker, now),
        changes,
        pulled_forward,
    )
}

/// A short description of a failed attempt for the endpoint's `last_error`.
fn describe_failure(attempt: &Finished<'_>) -> String {
    let text = match (&attempt.status_code, &attempt.error) {
        (Some(status), _) => format!("HTTP {status}"),
        (None, Some((kind, message))) => format!("{kind}: {message}"),
        (None, None) => "failed".to_owned(),
    };
    text.chars().take(LAST_ERROR_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::PARKED;
    use std::time::Duration;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + secs * 1000)
    }

    fn policy() -> BreakerPolicy {
        BreakerPolicy {
            failure_threshold: 2,
            cooldown: Duration::from_secs(10),
            max_cooldown: Duration::from_secs(60),
            disable_after: Duration::from_secs(3600),
            failing_notice_after: 3,
        }
    }

    fn row() -> EndpointRow {
        EndpointRow {
            enabled: true,
            breaker: Breaker::default(),
            on_dead: OnDead::Skip,
        }
    }

    /// The app of the tests' endpoints (a customer's, not the internal one).
    fn app() -> &'static AppId {
        static APP: std::sync::OnceLock<AppId> = std::sync::OnceLock::new();
        APP.get_or_init(AppId::generate)
    }

    fn attempt(endpoint: &EndpointId, signal: Signal, status: u16) -> Finished<'_> {
        Finished {
            app: app(),
            endpoint,
            signal,
            gone: false,
            status_code: Some(status),
            error: None,
            partition_end: None,
            dead: None,
        }
    }

    #[test]
    fn the_nth_failure_in_a_row_tells_the_operator_once_and_a_success_after_it_once() {
        use crate::operational::Kind;
        let e = EndpointId::generate();
        let mut rows = HashMap::from([(e.clone(), row())]);
        // Two failures: below `failing_notice_after` (3), nothing to tell.
        let two = [
            attempt(&e, Signal::Failed, 503),
            attempt(&e, Signal::Failed, 503),
        ];
        let plan_two = plan(&two, &rows, &policy(), at(0));
        assert!(plan_two.endpoints[&e].notices.is_empty());
        rows.get_mut(&e).unwrap().breaker = plan_two.endpoints[&e].breaker.unwrap();
        // The third and fourth: one `failing`, at the third.
        let more = [
            attempt(&e, Signal::Failed, 500),
            attempt(&e, Signal::Failed, 500),
        ];
        let plan_more = plan(&more, &rows, &policy(), at(1));
        let notices = &plan_more.endpoints[&e].notices;
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(notices[0].kind, Kind::EndpointFailing);
        assert_eq!(notices[0].data["consecutive_failures"], 3);
        assert_eq!(notices[0].data["last_error"], "HTTP 500");
        rows.get_mut(&e).unwrap().breaker = plan_more.endpoints[&e].breaker.unwrap();
        // A success after it: one `recovered`; another success: nothing.
        let healthy = [
            attempt(&e, Signal::Healthy, 200),
            attempt(&e, Signal::Healthy, 200),
        ];
        let recovered = plan(&healthy, &rows, &policy(), at(2));
        let notices = &recovered.endpoints[&e].notices;
        assert_eq!(notices.len(), 1, "{notices:?}");
        assert_eq!(notices[0].kind, Kind::EndpointRecovered);
        assert_eq!(notices[0].data["failures_before"], 4);
    }

    #[test]
    fn the_internal_apps_endpoints_make_no_notices_and_no_dead_counts() {
        let e = EndpointId::generate();
        let rows = HashMap::from([(e.clone(), row())]);
        let internal = crate::operational::app_id();
        let dead = Death {
            reason: DeadReason::Gone,
            delivery: "dlv_1",
            event: "msg_1",
            at: at(0),
        };
        let gone = Finished {
            app: &internal,
            gone: true,
            dead: Some(dead),
            ..attempt(&e, Signal::Healthy, 410)
        };
        let failures: Vec<Finished<'_>> = (0..5)
            .map(|_| Finished {
                app: &internal,
                ..attempt(&e, Signal::Failed, 500)
            })
            .chain([gone])
            .collect();
        let plan = plan(&failures, &rows, &policy(), at(0));
        assert_eq!(plan.endpoints[&e].disable, Some(DisableReason::Gone));
        assert!(plan.endpoints[&e].notices.is_empty());
        assert!(plan.dead.is_empty());
    }

    #[test]
    fn a_disable_is_told_and_deaths_are_counted_by_endpoint_and_reason() {
        use crate::operational::Kind;
        let (e, f) = (EndpointId::generate(), EndpointId::generate());
        let rows = HashMap::from([(e.clone(), row()), (f.clone(), row())]);
        let death = |n: i64, reason| Death {
            reason,
            delivery: ["dlv_a", "dlv_b", "dlv_c"][n as usize],
            event: ["msg_a", "msg_b", "msg_c"][n as usize],
            at: at(n),
        };
        let finished = [
            Finished {
                dead: Some(death(0, DeadReason::ClientError)),
                ..attempt(&e, Signal::Healthy, 400)
            },
            Finished {
                dead: Some(death(1, DeadReason::ClientError)),
                ..attempt(&e, Signal::Healthy, 404)
            },
            Finished {
                gone: true,
                dead: Some(death(2, DeadReason::Gone)),
                ..attempt(&f, Signal::Healthy, 410)
            },
        ];
        let plan = plan(&finished, &rows, &policy(), at(3));
        let notices = &plan.endpoints[&f].notices;
        assert_eq!(notices.len(), 1);
        assert_eq!(notices[0].kind, Kind::EndpointDisabled);
        assert_eq!(notices[0].data["reason"], "gone");
        let mut dead: Vec<(&EndpointId, DeadReason, u64, Option<u16>, &str)> = plan
            .dead
            .iter()
            .map(|(endpoint, app, c)| {
                assert_eq!(app, super::tests::app());
                (
                    endpoint,
                    c.reason,
                    c.count,
                    c.last_status,
                    c.last_event.as_str(),
                )
            })
            .collect();
        dead.sort_by_key(|d| d.4);
        assert_eq!(
            dead,
            vec![
                (&e, DeadReason::ClientError, 2, Some(404), "msg_b"),
                (&f, DeadReason::Gone, 1, Some(410), "msg_c"),
            ]
        );
    }

    #[test]
    fn failures_past_the_threshold_open_the_breaker_and_move_the_queue_to_the_probe() {
        let e = EndpointId::generate();
        let rows = HashMap::from([(e.clone(), row())]);
        let failed = [
            attempt(&e, Signal::Failed, 503),
            attempt(&e, Signal::Failed, 500),
        ];
        let plan = plan(&failed, &rows, &policy(), at(0));
        let change = &plan.endpoints[&e];
        let breaker = change.breaker.expect("saved");
        assert_eq!(breaker.state, BreakerState::Open);
        assert_eq!(breaker.next_probe_at, Some(at(10)));
        assert_eq!(change.last_error.as_deref(), Some("HTTP 500"));
        assert_eq!(
            change.queue_move,
            Some(QueueMove {
                from: Timestamp::from_millis(i64::MIN),
                to: Timestamp::from_millis(at(10).as_millis() - 1),
                at: at(10)
            })
        );
        assert_eq!(plan.changes.opened, 1);
        assert!(!plan.due_now);
    }

    #[test]
    fn a_healthy_probe_closes_and_brings_the_deferred_back_to_now() {
        let e = EndpointId::generate();
        let mut half_open = row();
        half_open.breaker.state = BreakerState::HalfOpen;
        half_open.breaker.probe_until = Some(at(40));
        half_open.breaker.next_probe_at = Some(at(30));
        let rows = HashMap::from([(e.clone(), half_open)]);
        let plan = plan(
            &[attempt(&e, Signal::Healthy, 200)],
            &rows,
            &policy(),
            at(31),
        );
        let change = &plan.endpoints[&e];
        assert_eq!(change.breaker, Some(Breaker::default()));
        assert_eq!(
            change.queue_move,
            Some(QueueMove {
                from: Timestamp::from_millis(at(31).as_millis() + 1),
                to: at(40),
                at: at(31)
            })
        );
        assert_eq!(plan.changes.closed, 1);
        assert!(plan.due_now);
    }

    #[test]
    fn gone_disables_an_enabled_endpoint_once_and_parks_its_partitions() {
        let e = EndpointId::generate();
        let app = AppId::generate();
        let rows = HashMap::from([(e.clone(), row())]);
        let mut gone = attempt(&e, Signal::Neutral, 410);
        gone.gone = true;
        gone.partition_end = Some(PartitionEnd {
            app: &app,
            key: "order_42",
            state: DeliveryState::Dead,
            reason: Some(DeadReason::ClientError),
        });
        let plan = plan(&[gone], &rows, &policy(), at(0));
        assert_eq!(plan.endpoints[&e].disable, Some(DisableReason::Gone));
        assert_eq!(plan.changes.disabled, 1);
        // Skipping past a dead head: the next is released, parked with its endpoint.
        assert_eq!(
            plan.releases,
            vec![Release {
                app: app.clone(),
                key: "order_42".into(),
                endpoint: e.clone(),
                due: PARKED
            }]
        );
        let disabled = HashMap::from([(
            e.clone(),
            EndpointRow {
                enabled: false,
                ..row()
            },
        )]);
        let again = super::plan(&[gone], &disabled, &policy(), at(0));
        assert_eq!(again.changes.disabled, 0, "already disabled");
    }

    #[test]
    fn a_blocking_partition_stays_blocked_behind_a_dead_head_and_a_deleted_endpoint_is_skipped() {
        let (e, deleted) = (EndpointId::generate(), EndpointId::generate());
        let app = AppId::generate();
        let rows = HashMap::from([(
            e.clone(),
            EndpointRow {
                on_dead: OnDead::Block,
                ..row()
            },
        )]);
        let end = |state, reason| {
            Some(PartitionEnd {
                app: &app,
                key: "k",
                state,
                reason,
            })
        };
        let mut dead = attempt(&e, Signal::Neutral, 400);
        dead.partition_end = end(DeliveryState::Dead, Some(DeadReason::ClientError));
        let mut ok = attempt(&e, Signal::Healthy, 200);
        ok.partition_end = end(DeliveryState::Succeeded, None);
        let mut orphan = attempt(&deleted, Signal::Healthy, 200);
        orphan.partition_end = end(DeliveryState::Succeeded, None);
        let plan = plan(&[dead, ok, orphan], &rows, &policy(), at(5));
        assert_eq!(
            plan.releases,
            vec![Release {
                app: app.clone(),
                key: "k".into(),
                endpoint: e.clone(),
                due: at(5)
            }],
            "only the success releases; the deleted endpoint has nothing to release"
        );
        assert!(!plan.endpoints.contains_key(&deleted));
    }

    #[test]
    fn a_transport_failure_is_described_with_its_kind() {
        let e = EndpointId::generate();
        let rows = HashMap::from([(e.clone(), row())]);
        let mut refused = attempt(&e, Signal::Failed, 0);
        refused.status_code = None;
        refused.error = Some((TransportError::Connect, "connection refused"));
        let plan = plan(&[refused], &rows, &policy(), at(0));
        assert_eq!(
            plan.endpoints[&e].last_error.as_deref(),
            Some("connect: connection refused")
        );
    }
}
