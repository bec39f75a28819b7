//! The claim, as pure decisions: which lanes a claim reads in what shares
//! ([`Lanes`]), how much of each endpoint it may lease ([`Rooms`]), and what
//! becomes of every row it leased ([`plan`]: send now, defer to a time, park,
//! probe, or dead-letter with a reason).
//!
//! The store reads the rows and executes the plan in the claim's transaction;
//! the dispatcher runs the turn (`hookline_dispatch::turn`). Nothing here does I/O.
//!
//! **Admission**, per endpoint, in endpoint-id order, by the one rule of
//! [`crate::admission`] that publishes ask too: a disabled (or paused) endpoint's
//! deliveries are parked; an open breaker defers them to its probe time (no
//! attempt charged, max age still enforced); when the cool-down is over, the
//! claim that holds the endpoint's row (locked: exactly one in the cluster)
//! takes the probe; a rate-limited endpoint hands out send slots from its stored
//! GCRA state, deferring deliveries whose slot lies beyond the look-ahead; the
//! dispatcher's room bounds what goes now, and the rest goes back, due now.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::admission::{self, Admission, PARKED};
use crate::breaker::Breaker;
use crate::ids::{DeliveryId, EndpointId};
use crate::model::{DeadReason, DeliveryState};
use crate::ordering::{self, OnDead};
use crate::rate;
use crate::retry::{RetryOverrides, RetryPolicy};
use crate::time::Timestamp;

/// A claim's view of the dispatcher's room per endpoint: how many more requests
/// it may start to each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoomView {
    /// How many requests an endpoint not listed in `rooms` may still get.
    pub default: usize,
    /// Endpoints whose room differs from `default` (requests in flight, a learned limit).
    pub rooms: HashMap<EndpointId, usize>,
}

impl RoomView {
    /// No cap at all (a claim outside any dispatcher).
    pub fn unlimited() -> Self {
        Self {
            default: usize::MAX,
            rooms: HashMap::new(),
        }
    }

    /// How many more requests the claim may start to `endpoint`.
    pub fn room(&self, endpoint: &EndpointId) -> usize {
        self.rooms.get(endpoint).copied().unwrap_or(self.default)
    }
}

/// What a claim may still take per endpoint: the dispatcher's room, less what the
/// claim has taken so far. A claim never leases more of an endpoint than this:
/// leasing rows only to hand them back over the cap cost a single busy endpoint's
/// dispatcher most of each turn, so it fell behind for good.
#[derive(Debug)]
pub struct Rooms<'a> {
    view: &'a RoomView,
    taken: HashMap<EndpointId, usize>,
}

impl<'a> Rooms<'a> {
    pub fn new(view: &'a RoomView) -> Self {
        Self {
            view,
            taken: HashMap::new(),
        }
    }

    /// The room of an endpoint the dispatcher has no count for.
    pub fn default_room(&self) -> usize {
        self.view.default
    }

    /// What the claim may still take of `endpoint`.
    pub fn of(&self, endpoint: &EndpointId) -> usize {
        self.view
            .room(endpoint)
            .saturating_sub(self.taken.get(endpoint).copied().unwrap_or(0))
    }

    /// The endpoints whose room differs from the default, with their room (possibly 0).
    pub fn limited(&self) -> Vec<(EndpointId, usize)> {
        let mut endpoints: Vec<&EndpointId> = self.view.rooms.keys().collect();
        endpoints.extend(
            self.taken
                .keys()
                .filter(|e| !self.view.rooms.contains_key(*e)),
        );
        endpoints
            .into_iter()
            .map(|e| (e.clone(), self.of(e)))
            .collect()
    }

    /// How many due rows a lane read of `ask` ranks: wide enough to see past a
    /// capped endpoint's rows ([`SKIP_WINDOW`], or eight times the ask) when
    /// some endpoint is at its cap, else just the batch.
    pub fn window(&self, ask: u32) -> u32 {
        if self.limited().iter().any(|(_, room)| *room == 0) {
            SKIP_WINDOW.max(ask * 8)
        } else {
            ask
        }
    }

    /// The endpoints the claim filled to their room.
    pub fn saturated(&self) -> Vec<EndpointId> {
        self.limited()
            .into_iter()
            .filter(|(_, room)| *room == 0)
            .map(|(endpoint, _)| endpoint)
            .collect()
    }

    /// Counts a leased row of `endpoint`.
    pub fn took(&mut self, endpoint: &EndpointId) {
        *self.taken.entry(endpoint.clone()).or_default() += 1;
    }
}

/// The two queues of due work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Never attempted in this round.
    Fresh,
    /// Attempted before: waiting for its retry.
    Retry,
}

/// Where one read of a claim takes due rows from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneRead {
    /// A lane's due index, oldest due first.
    Oldest(Lane),
    /// A lane's due index from its newest end (what became due last).
    Newest(Lane),
}

/// Under a backlog, this fraction of a claim's batch (1/8) goes to the newest due
/// fresh work rather than the oldest.
pub const NEWEST_SHARE_DIVISOR: u32 = 8;
/// How many due rows a lane read ranks when some endpoint is at its cap: enough to
/// see past that endpoint's rows at the head, yet bounded, so a large backlog of a
/// busy endpoint cannot make every claim walk it (the fair pass then finds the
/// other endpoints' work).
pub const SKIP_WINDOW: u32 = 1024;
/// Endpoints visited per fair pass.
pub const FAIR_PASS_ENDPOINTS: u32 = 32;
/// Apps visited per app pass ([`app_share`]).
pub const APP_PASS_APPS: u32 = 16;

/// The app pass: under a [`backlog`], one claim in [`NEWEST_SHARE_DIVISOR`]
/// first visits up to [`APP_PASS_APPS`] apps with fresh work other than the
/// lane head's, round-robin, and leases each one's oldest due work: this many
/// targets of a claim of `limit` shared by `apps` (the head's tenant counting
/// as one: the lanes serve it), an equal share, at least one. So what one
/// tenant published waits behind another tenant's backlog for a few claims at
/// most, however old it is — the newest reads serve only what became due last,
/// and the oldest-first reads reach the rest once the backlog ahead has drained.
pub fn app_share(limit: u32, apps: usize) -> u32 {
    match u32::try_from(apps) {
        Ok(apps) if apps > 0 => (limit / apps).max(1).min(limit),
        _ => 0,
    }
}

/// How long fresh work may wait at the head of its lane before the lane
/// counts as a backlog ([`backlog`]). The store leases a head row that has
/// waited this long to any claim, whatever its room.
pub const PATIENCE_MS: i64 = 1_000;

/// Whether the fresh lane is a backlog: its head (`head`, the oldest due
/// time of fresh work not leased) has waited [`PATIENCE_MS`] or more.
pub fn backlog(head: Option<Timestamp>, now: Timestamp) -> bool {
    head.is_some_and(|head| head.as_millis() <= now.as_millis() - PATIENCE_MS)
}

/// The lane reads of one claim of `limit` rows, in order.
///
/// Retries first (up to a quarter of the batch), then fresh deliveries — the
/// lane's head and, under a backlog, a slice of the newest due, so what was
/// published just now never waits behind another tenant's backlog — then
/// retries again if room is left. A backlog of retries never delays new
/// events, and retries are never starved by a flood of new ones.
///
/// The newest slice (an eighth) is read after the head when the head filled
/// its part. A claim told to read the newest first (`newest_first`: under a
/// [`backlog`], one claim in [`NEWEST_SHARE_DIVISOR`]) reads a slice of at
/// least one row before the head, with the claim's whole room: an event's
/// deliveries are leased together, and a small claim's eighth — claims are as
/// small as the dispatcher's free permits — holds none. The other claims give
/// the head their whole room.
///
/// After the lanes, if the claim is short and some endpoint is full, the fair
/// pass ([`FAIR_PASS_ENDPOINTS`] endpoints round-robin through their own index)
/// finds work the lanes' heads hid.
#[derive(Debug)]
pub struct Lanes {
    limit: u32,
    taken: u32,
    step: u8,
    /// The last read's ask.
    asked: u32,
    retries_full: bool,
    newest_first: bool,
}

impl Lanes {
    pub fn new(limit: u32, newest_first: bool) -> Self {
        Self {
            limit,
            taken: 0,
            step: 0,
            asked: 0,
            retries_full: false,
            newest_first,
        }
    }

    /// The next read and how many rows to ask of it, given how many the last read
    /// leased (0 before the first); `None` when the lanes are done.
    pub fn next(&mut self, leased: u32) -> Option<(LaneRead, u32)> {
        self.taken += leased;
        let newest_share = (self.limit / NEWEST_SHARE_DIVISOR).max(self.newest_first as u32);
        loop {
            let step = self.step;
            self.step += 1;
            let remaining = self.limit.saturating_sub(self.taken);
            let read = match step {
                0 => {
                    let share = (self.limit / 4).max(1).min(self.limit);
                    (LaneRead::Oldest(Lane::Retry), share)
                }
                1 => {
                    self.retries_full = leased == self.asked;
                    if !self.newest_first {
                        continue;
                    }
                    (LaneRead::Newest(Lane::Fresh), newest_share.min(remaining))
                }
                2 => {
                    let reserved = if self.newest_first { 0 } else { newest_share };
                    (
                        LaneRead::Oldest(Lane::Fresh),
                        remaining.saturating_sub(reserved),
                    )
                }
                3 => {
                    // Only under a backlog: the head filled what it asked for.
                    if self.newest_first || self.asked == 0 || leased < self.asked {
                        continue;
                    }
                    (LaneRead::Newest(Lane::Fresh), newest_share.min(remaining))
                }
                4 => {
                    if !self.retries_full {
                        continue;
                    }
                    (LaneRead::Oldest(Lane::Retry), remaining)
                }
                _ => return None,
            };
            if read.1 == 0 {
                self.asked = 0;
                continue;
            }
            self.asked = read.1;
            return Some(read);
        }
    }

    /// Rows leased so far.
    pub fn taken(&self) -> u32 {
        self.taken
    }
}

/// What admission and the plan read of a claimed row.
#[derive(Debug, Clone, Copy)]
pub struct Candidate<'a> {
    pub id: &'a DeliveryId,
    pub endpoint: &'a EndpointId,
    pub round_started_at: Timestamp,
    /// Part of an ordered partition (has an ordering key).
    pub keyed: bool,
}

/// What a plan reads of an endpoint (as locked by the claim where it matters:
/// a probe or a rate limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointGate {
    /// Enabled and not paused.
    pub enabled: bool,
    pub breaker: Breaker,
    pub rate: Option<Rate>,
    /// The endpoint's own concurrency ceiling.
    pub max_in_flight: Option<u32>,
    pub on_dead: OnDead,
    /// The endpoint's overrides of the deployment's retry policy (its max age).
    pub retry: RetryOverrides,
}

impl EndpointGate {
    /// What the one admission rule reads.
    pub fn admission(&self) -> admission::Gate {
        admission::Gate {
            enabled: self.enabled,
            breaker: self.breaker,
            rate_limited: self.rate.is_some(),
        }
    }

    /// Whether the claim must hold this endpoint's row before planning: its probe
    /// may be taken (one claim in the cluster wins), or its send slots handed out.
    pub fn needs_lock(&self, now: Timestamp) -> bool {
        self.rate.is_some() || admission::admit(&self.admission(), now) == Admission::Probe
    }
}

/// A rate limit and its stored GCRA state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    pub per_second: u32,
    /// The theoretical arrival time, in microseconds.
    pub tat_us: Option<i64>,
}

/// What a claim needs besides its rows and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClaimRules {
    /// The deployment's retry policy: a delivery deferred past its max age is dead.
    pub retry: RetryPolicy,
    /// How long a half-open probe holds the right to be its endpoint's only request.
    pub probe_hold: Duration,
    /// How far ahead a rate-limited send slot may be handed out with its delivery.
    pub rate_lookahead: Duration,
}

impl Default for ClaimRules {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            probe_hold: Duration::from_secs(30),
            rate_lookahead: Duration::from_secs(1),
        }
    }
}

/// A candidate to send now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Send {
    /// Index into the candidates.
    pub index: usize,
    /// A rate-limited endpoint's reserved slot: not before then.
    pub send_at: Option<Timestamp>,
    /// Its endpoint's half-open breaker probe.
    pub probe: bool,
}

/// The next `blocked` delivery of a dead-lettered candidate's partition becomes
/// pending, due at `due`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub index: usize,
    pub due: Timestamp,
}

/// What a claim does with its leased rows (indices into the candidates).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimPlan {
    pub send: Vec<Send>,
    /// Back to pending, no attempt charged, due at the key (`PARKED`: never until
    /// the endpoint is enabled).
    pub defer: BTreeMap<Timestamp, Vec<usize>>,
    /// Dead-lettered without an attempt.
    pub dead: Vec<(usize, DeadReason)>,
    pub releases: Vec<Release>,
    /// Breakers to save: a probe was taken.
    pub breakers: Vec<(EndpointId, Breaker)>,
    /// Rate states to save.
    pub rates: Vec<(EndpointId, Option<i64>)>,
}

impl ClaimPlan {
    fn defer(&mut self, index: usize, until: Timestamp) {
        self.defer.entry(until).or_default().push(index);
    }

    /// Defers a candidate, unless waiting until `until` would take it past its
    /// max age: then it is dead (`retries_exhausted`) — deferral never stops the clock.
    fn defer_or_expire(
        &mut self,
        index: usize,
        candidate: &Candidate<'_>,
        until: Timestamp,
        gate: &EndpointGate,
        max_age: Duration,
        now: Timestamp,
    ) {
        if crate::retry::outlives(candidate.round_started_at, until, max_age) {
            self.dead_letter(index, candidate, DeadReason::RetriesExhausted, gate, now);
        } else {
            self.defer(index, until);
        }
    }

    fn dead_letter(
        &mut self,
        index: usize,
        candidate: &Candidate<'_>,
        reason: DeadReason,
        gate: &EndpointGate,
        now: Timestamp,
    ) {
        self.dead.push((index, reason));
        if candidate.keyed
            && ordering::releases_next(DeliveryState::Dead, Some(reason), gate.on_dead)
        {
            self.releases.push(Release {
                index,
                due: admission::due_for_new_work(gate.enabled, &gate.breaker, now),
            });
        }
    }
}

/// The claim plan: for every leased candidate, what happens now (see the module
/// docs). `gates` holds the candidates' endpoints (a deleted endpoint is absent:
/// its deliveries are dead, `endpoint_deleted`); `room` is the dispatcher's.
pub fn plan(
    candidates: &[Candidate<'_>],
    gates: &HashMap<EndpointId, EndpointGate>,
    room: &RoomView,
    rules: &ClaimRules,
    now: Timestamp,
) -> ClaimPlan {
    let mut by_endpoint: BTreeMap<&EndpointId, Vec<usize>> = BTreeMap::new();
    for (index, candidate) in candidates.iter().enumerate() {
        by_endpoint
            .entry(candidate.endpoint)
            .or_default()
            .push(index);
    }
    let mut plan = ClaimPlan::default();
    for (endpoint, mut group) in by_endpoint {
        // Oldest first: the room and the probe go to the longest-waiting deliveries.
        group.sort_by(|a, b| candidates[*a].id.cmp(candidates[*b].id));
        let Some(gate) = gates.get(endpoint) else {
            for index in group {
                plan.dead.push((index, DeadReason::EndpointDeleted));
            }
            continue;
        };
        let mut gate = *gate;
        let max_age = gate.retry.apply(rules.retry).max_age;
        // This dispatcher's room for the endpoint (and the endpoint's own ceiling, for
        // an endpoint the dispatcher has not sent to yet).
        let room = room
            .room(endpoint)
            .min(gate.max_in_flight.map_or(usize::MAX, |m| m as usize));
        let admitted: Vec<Send> = match admission::admit(&gate.admission(), now) {
            Admission::Park => {
                for index in group {
                    plan.defer(index, PARKED);
                }
                continue;
            }
            // No room: everything goes back, due now, and the probe waits for room.
            Admission::Send | Admission::Probe if room == 0 => {
                for index in group {
                    plan.defer(index, now);
                }
                continue;
            }
            Admission::Send => {
                // Within the room; the rest go back, due now.
                for &index in group.iter().skip(room) {
                    plan.defer(index, now);
                }
                group
                    .into_iter()
                    .take(room)
                    .map(|index| Send {
                        index,
                        send_at: None,
                        probe: false,
                    })
                    .collect()
            }
            Admission::Defer(until) => {
                for index in group {
                    plan.defer_or_expire(index, &candidates[index], until, &gate, max_age, now);
                }
                continue;
            }
            Admission::Probe => {
                // The claim holds the endpoint's row: the probe is this claim's.
                gate.breaker.start_probe(now, rules.probe_hold);
                plan.breakers.push((endpoint.clone(), gate.breaker));
                let hold_until = now + rules.probe_hold;
                for &index in &group[1..] {
                    plan.defer_or_expire(
                        index,
                        &candidates[index],
                        hold_until,
                        &gate,
                        max_age,
                        now,
                    );
                }
                vec![Send {
                    index: group[0],
                    send_at: None,
                    probe: true,
                }]
            }
        };
        let Some(limit) = gate.rate else {
            plan.send.extend(admitted);
            continue;
        };
        // Send slots from the endpoint's GCRA state; a delivery whose slot is beyond
        // the look-ahead waits, pending, until its slot comes (the slot itself is
        // not reserved: whoever claims it then takes it).
        let mut tat = limit.tat_us;
        let now_us = now.as_millis() * 1000;
        let horizon_us = now_us + rules.rate_lookahead.as_micros() as i64;
        for mut send in admitted {
            let (slot, next) = rate::reserve(tat, now_us, limit.per_second);
            if slot <= horizon_us {
                send.send_at = Some(Timestamp::from_millis(slot / 1000));
                tat = Some(next);
                plan.send.push(send);
            } else {
                let at = Timestamp::from_millis((slot + 999) / 1000);
                plan.defer_or_expire(send.index, &candidates[send.index], at, &gate, max_age, now);
            }
        }
        plan.rates.push((endpoint.clone(), tat));
    }
    plan
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::breaker::{BreakerPolicy, BreakerState, Signal};

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_millis(1_800_000_000_000 + secs * 1000)
    }

    /// An enabled, closed, unlimited endpoint gate whose retries end after an hour.
    pub(crate) fn gate() -> EndpointGate {
        EndpointGate {
            enabled: true,
            breaker: Breaker::default(),
            rate: None,
            max_in_flight: None,
            on_dead: OnDead::Skip,
            retry: RetryOverrides {
                max_age_secs: Some(3600),
                ..RetryOverrides::default()
            },
        }
    }

    /// `count` candidates of one endpoint, oldest first, started at `started`.
    struct Rows {
        ids: Vec<DeliveryId>,
        endpoint: EndpointId,
    }

    impl Rows {
        fn new(count: usize) -> Self {
            let mut ids: Vec<DeliveryId> = (0..count).map(|_| DeliveryId::generate()).collect();
            ids.sort();
            Self {
                ids,
                endpoint: EndpointId::generate(),
            }
        }

        fn candidates(&self, started: Timestamp, keyed: bool) -> Vec<Candidate<'_>> {
            self.ids
                .iter()
                .map(|id| Candidate {
                    id,
                    endpoint: &self.endpoint,
                    round_started_at: started,
                    keyed,
                })
                .collect()
        }

        fn gates(&self, gate: EndpointGate) -> HashMap<EndpointId, EndpointGate> {
            HashMap::from([(self.endpoint.clone(), gate)])
        }
    }

    fn sends(indices: &[usize]) -> Vec<Send> {
        indices
            .iter()
            .map(|&index| Send {
                index,
                send_at: None,
                probe: false,
            })
            .collect()
    }

    fn open_breaker(opened: Timestamp) -> Breaker {
        let mut breaker = Breaker::default();
        let policy = BreakerPolicy {
            failure_threshold: 1,
            ..BreakerPolicy::default()
        };
        breaker.record(Signal::Failed, opened, &policy);
        assert_eq!(breaker.state, BreakerState::Open);
        breaker
    }

    #[test]
    fn a_healthy_endpoint_sends_within_its_room_and_the_rest_go_back_due_now() {
        let rows = Rows::new(5);
        let room = RoomView {
            default: 3,
            rooms: HashMap::new(),
        };
        let plan = plan(
            &rows.candidates(at(0), false),
            &rows.gates(gate()),
            &room,
            &ClaimRules::default(),
            at(10),
        );
        assert_eq!(plan.send, sends(&[0, 1, 2]));
        assert_eq!(plan.defer, BTreeMap::from([(at(10), vec![3, 4])]));
        assert!(plan.dead.is_empty() && plan.breakers.is_empty() && plan.rates.is_empty());
    }

    #[test]
    fn the_endpoints_own_ceiling_bounds_the_room() {
        let rows = Rows::new(3);
        let capped = EndpointGate {
            max_in_flight: Some(1),
            ..gate()
        };
        let plan = plan(
            &rows.candidates(at(0), false),
            &rows.gates(capped),
            &RoomView::unlimited(),
            &ClaimRules::default(),
            at(0),
        );
        assert_eq!(plan.send, sends(&[0]));
        assert_eq!(plan.defer, BTreeMap::from([(at(0), vec![1, 2])]));
    }

    #[test]
    fn a_disabled_endpoint_parks_and_a_deleted_one_dead_letters() {
        let rows = Rows::new(2);
        let disabled = EndpointGate {
            enabled: false,
            ..gate()
        };
        let candidates = rows.candidates(at(0), true);
        let parked = plan(
            &candidates,
            &rows.gates(disabled),
            &RoomView::unlimited(),
            &ClaimRules::default(),
            at(0),
        );
        assert_eq!(parked.defer, BTreeMap::from([(PARKED, vec![0, 1])]));
        let deleted = plan(
            &candidates,
            &HashMap::new(),
            &RoomView::unlimited(),
            &ClaimRules::default(),
            at(0),
        );
        assert_eq!(
            deleted.dead,
            vec![
                (0, DeadReason::EndpointDeleted),
                (1, DeadReason::EndpointDeleted)
            ]
        );
        assert!(
            deleted.releases.is_empty(),
            "a deleted endpoint has no partitions"
        );
    }

    #[test]
    fn an_open_breaker_defers_to_its_probe_time_unless_that_is_past_the_max_age() {
        let rows = Rows::new(2);
        let breaker = open_breaker(at(0));
        let probe_at = breaker.next_probe_at.unwrap();
        let open = EndpointGate { breaker, ..gate() };
        let mut candidates = rows.candidates(at(0), true);
        // The second was started long ago: waiting for the probe takes it past its max age.
        candidates[1].round_started_at = at(-3600);
        let plan = plan(
            &candidates,
            &rows.gates(open),
            &RoomView::unlimited(),
            &ClaimRules::default(),
            at(1),
        );
        assert!(plan.send.is_empty());
        assert_eq!(plan.defer, BTreeMap::from([(probe_at, vec![0])]));
        assert_eq!(plan.dead, vec![(1, DeadReason::RetriesExhausted)]);
        // Skipping past a dead one: its partition's next is released, due at the probe.
        assert_eq!(
            plan.releases,
            vec![Release {
                index: 1,
                due: probe_at
            }]
        );
    }

    #[test]
    fn a_finished_cool_down_sends_exactly_one_probe_and_holds_the_rest() {
        let rows = Rows::new(3);
        let breaker = open_breaker(at(0));
        let now = breaker.next_probe_at.unwrap();
        let open = EndpointGate { breaker, ..gate() };
        assert!(
            open.needs_lock(now),
            "the probe is taken under the row lock"
        );
        let rules = ClaimRules::default();
        let plan = plan(
            &rows.candidates(at(0), false),
            &rows.gates(open),
            &RoomView::unlimited(),
            &rules,
            now,
        );
        assert_eq!(
            plan.send,
            vec![Send {
                index: 0,
                send_at: None,
                probe: true
            }]
        );
        let hold_until = now + rules.probe_hold;
        assert_eq!(plan.defer, BTreeMap::from([(hold_until, vec![1, 2])]));
        let (endpoint, probing) = &plan.breakers[0];
        assert_eq!(endpoint, &rows.endpoint);
        assert_eq!(probing.state, BreakerState::HalfOpen);
        assert_eq!(probing.probe_until, Some(hold_until));
    }

    #[test]
    fn no_room_holds_the_probe_back_too() {
        let rows = Rows::new(1);
        let breaker = open_breaker(at(0));
        let now = breaker.next_probe_at.unwrap();
        let room = RoomView {
            default: 0,
            rooms: HashMap::new(),
        };
        let plan = plan(
            &rows.candidates(at(0), false),
            &rows.gates(EndpointGate { breaker, ..gate() }),
            &room,
            &ClaimRules::default(),
            now,
        );
        assert!(plan.send.is_empty() && plan.breakers.is_empty());
        assert_eq!(plan.defer, BTreeMap::from([(now, vec![0])]));
    }

    #[test]
    fn a_rate_limit_hands_out_slots_within_the_look_ahead_and_defers_the_rest() {
        let rows = Rows::new(4);
        let limited = EndpointGate {
            rate: Some(Rate {
                per_second: 2,
                tat_us: None,
            }),
            ..gate()
        };
        let now = at(0);
        let plan = plan(
            &rows.candidates(at(0), false),
            &rows.gates(limited),
            &RoomView::unlimited(),
            &ClaimRules::default(),
            now,
        );
        // Slots at 0, 0.5 s and 1 s (the look-ahead's edge); the fourth's at 1.5 s waits.
        let slots: Vec<Option<Timestamp>> = plan.send.iter().map(|s| s.send_at).collect();
        assert_eq!(
            slots,
            vec![
                Some(now),
                Some(now + Duration::from_millis(500)),
                Some(now + Duration::from_secs(1))
            ]
        );
        assert_eq!(
            plan.defer,
            BTreeMap::from([(now + Duration::from_millis(1500), vec![3])])
        );
        let tat = (now + Duration::from_millis(1500)).as_millis() * 1000;
        assert_eq!(plan.rates, vec![(rows.endpoint.clone(), Some(tat))]);
    }

    #[test]
    fn the_app_pass_shares_a_claim_equally_and_gives_each_app_one_at_least() {
        assert_eq!(app_share(64, 2), 32);
        assert_eq!(app_share(64, 3), 21);
        assert_eq!(app_share(8, 16), 1, "more apps than room: one each");
        assert_eq!(app_share(0, 3), 0, "a claim without room takes nothing");
        assert_eq!(app_share(64, 0), 0);
    }

    #[test]
    fn lanes_read_retries_then_fresh_then_the_newest_under_a_backlog() {
        let mut lanes = Lanes::new(64, false);
        assert_eq!(lanes.next(0), Some((LaneRead::Oldest(Lane::Retry), 16)));
        // The retry lane is full: fresh gets the rest less the newest share of 8.
        assert_eq!(lanes.next(16), Some((LaneRead::Oldest(Lane::Fresh), 40)));
        // The fresh head filled its part (a backlog): the newest share.
        assert_eq!(lanes.next(40), Some((LaneRead::Newest(Lane::Fresh), 8)));
        assert_eq!(lanes.next(8), None, "the batch is full");
        assert_eq!(lanes.taken(), 64);
    }

    #[test]
    fn lanes_give_retries_what_fresh_work_leaves() {
        let mut lanes = Lanes::new(64, false);
        assert_eq!(lanes.next(0), Some((LaneRead::Oldest(Lane::Retry), 16)));
        assert_eq!(lanes.next(16), Some((LaneRead::Oldest(Lane::Fresh), 40)));
        // No fresh backlog: no newest read; retries were full, so they get the rest.
        assert_eq!(lanes.next(5), Some((LaneRead::Oldest(Lane::Retry), 43)));
        assert_eq!(lanes.next(10), None);
        assert_eq!(lanes.taken(), 31);

        let mut quiet = Lanes::new(64, false);
        assert_eq!(quiet.next(0), Some((LaneRead::Oldest(Lane::Retry), 16)));
        assert_eq!(quiet.next(3), Some((LaneRead::Oldest(Lane::Fresh), 53)));
        assert_eq!(quiet.next(0), None, "retries were not full: no second read");
    }

    #[test]
    fn a_claim_told_so_reads_the_newest_first_then_gives_the_head_the_rest() {
        let mut lanes = Lanes::new(16, true);
        assert_eq!(lanes.next(0), Some((LaneRead::Oldest(Lane::Retry), 4)));
        assert_eq!(lanes.next(0), Some((LaneRead::Newest(Lane::Fresh), 2)));
        // One event's ten deliveries, leased together.
        assert_eq!(lanes.next(10), Some((LaneRead::Oldest(Lane::Fresh), 6)));
        assert_eq!(lanes.next(6), None, "no second newest read");
        assert_eq!(lanes.taken(), 16);

        // Even a claim of fewer than eight has a slice of one.
        let mut small = Lanes::new(3, true);
        assert_eq!(small.next(0), Some((LaneRead::Oldest(Lane::Retry), 1)));
        assert_eq!(small.next(1), Some((LaneRead::Newest(Lane::Fresh), 1)));
        assert_eq!(small.next(0), Some((LaneRead::Oldest(Lane::Fresh), 2)));
        assert_eq!(small.next(2), None, "the batch is full");

        // Retries full: they get what the fresh reads leave.
        let mut retrying = Lanes::new(16, true);
        assert_eq!(retrying.next(0), Some((LaneRead::Oldest(Lane::Retry), 4)));
        assert_eq!(retrying.next(4), Some((LaneRead::Newest(Lane::Fresh), 2)));
        assert_eq!(retrying.next(1), Some((LaneRead::Oldest(Lane::Fresh), 11)));
        assert_eq!(retrying.next(3), Some((LaneRead::Oldest(Lane::Retry), 8)));
        assert_eq!(retrying.next(0), None);

        // Not told so, a claim of fewer than eight reads no newest slice.
        let mut quiet = Lanes::new(3, false);
        assert_eq!(quiet.next(0), Some((LaneRead::Oldest(Lane::Retry), 1)));
        assert_eq!(quiet.next(0), Some((LaneRead::Oldest(Lane::Fresh), 3)));
        assert_eq!(quiet.next(3), None);

        // A claim of nothing reads nothing.
        assert_eq!(Lanes::new(0, true).next(0), None);
    }

    #[test]
    fn the_lane_is_a_backlog_once_its_head_has_waited_a_second() {
        let now = Timestamp::from_millis(10_000);
        assert!(!backlog(None, now), "nothing due");
        assert!(!backlog(Some(Timestamp::from_millis(9_001)), now));
        assert!(backlog(Some(Timestamp::from_millis(9_000)), now));
        assert!(backlog(Some(Timestamp::from_millis(0)), now));
    }

    #[test]
    fn a_claim_of_one_reads_one_row() {
        let mut lanes = Lanes::new(1, false);
        assert_eq!(lanes.next(0), Some((LaneRead::Oldest(Lane::Retry), 1)));
        assert_eq!(lanes.next(1), None);
        let mut lanes = Lanes::new(1, false);
        assert_eq!(lanes.next(0), Some((LaneRead::Oldest(Lane::Retry), 1)));
        assert_eq!(lanes.next(0), Some((LaneRead::Oldest(Lane::Fresh), 1)));
    }

    #[test]
    fn a_read_ranks_past_a_capped_endpoints_rows_only_when_one_is_capped() {
        let (busy, idle) = (EndpointId::generate(), EndpointId::generate());
        let view = RoomView {
            default: 4,
            rooms: HashMap::from([(busy.clone(), 1)]),
        };
        let mut rooms = Rooms::new(&view);
        assert_eq!(rooms.window(16), 16, "no endpoint is capped");
        rooms.took(&idle);
        assert_eq!(rooms.window(16), 16);
        rooms.took(&busy);
        assert_eq!(rooms.window(16), SKIP_WINDOW, "past the capped one's rows");
        assert_eq!(rooms.window(200), 1600, "eight times a large ask");
    }

    #[test]
    fn rooms_count_what_the_claim_took() {
        let (busy, idle) = (EndpointId::generate(), EndpointId::generate());
        let view = RoomView {
            default: 4,
            rooms: HashMap::from([(busy.clone(), 1)]),
        };
        let mut rooms = Rooms::new(&view);
        assert_eq!((rooms.of(&busy), rooms.of(&idle)), (1, 4));
        assert!(rooms.saturated().is_empty());
        rooms.took(&busy);
        rooms.took(&idle);
        assert_eq!((rooms.of(&busy), rooms.of(&idle)), (0, 3));
        assert_eq!(rooms.saturated(), vec![busy.clone()]);
    }
}
