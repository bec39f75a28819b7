//! The dispatcher's room per endpoint and its hand-off inbox: in-memory state
//! that the dispatcher's own turn reads (`crate::turn`) and publishes feed
//! through `hookline_core::publish::Handoff`.
//!
//! [`Room`] counts this process's requests in flight per endpoint against each
//! endpoint's [`AdaptiveLimit`]. A request counts from its claim or hand-off
//! until its **answer arrives** (not until its attempt is recorded a turn
//! later): that is when the receiver has the request off its hands, and when
//! the limit learns from the answer's latency and status.
//!
//! [`Handoff`] is where publishes of this process put fresh deliveries they
//! wrote already leased: each reservation takes room and a permit, and the
//! committed deliveries arrive on the dispatcher's inbox with their permits.
//!
//! **Races.** A claim sizes its statements by the room as it was when they
//! began ([`Room::view`]), then plans what it leased against the room as it is
//! and counts what the plan sends, under one lock ([`Room::admit`]): rows beyond
//! the room go back, due now. So a hand-off never waits for a claim and can
//! never take room the claim counts on; an answer arriving meanwhile only frees
//! room. Never more than the limit.
//!
//! **Behind.** When the last claim filled its batch, older due work is waiting
//! for the send permits, and claims hold them nearly all (each takes the free
//! ones before its statements run); when no send permit is free, claims hold
//! them all. A hand-off then takes a permit of the
//! *fresh share* instead — a pool of an eighth as many, as a claim under a
//! backlog takes an eighth of its batch from the newest due work — and only to
//! an endpoint with less than an eighth of its limit in flight: one that has
//! older work of its own to send (claims fill its room) keeps its room for
//! that. So what is published now reaches an endpoint with nothing waiting at
//! once beside another tenant's backlog, and a flood of fresh work takes
//! neither the permits nor an endpoint's room the backlog drains with.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hookline_core::breaker::Signal;
use hookline_core::claim::{RoomView, NEWEST_SHARE_DIVISOR};
use hookline_core::concurrency::{AdaptiveLimit, ConcurrencyPolicy, Pressure};
use hookline_core::ids::EndpointId;
use hookline_core::publish::Handoff as Inbox;
use hookline_store::{AttemptRecord, ClaimedDelivery};
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// One dispatcher's requests in flight per endpoint, under each endpoint's adaptive limit.
#[derive(Debug)]
pub struct Room {
    policy: ConcurrencyPolicy,
    /// A `std` mutex: held for a few map operations, never across an await.
    state: Mutex<RoomState>,
}

#[derive(Debug, Default)]
struct RoomState {
    endpoints: HashMap<EndpointId, EndpointRoom>,
    /// The last claim took as many rows as it asked for: more due work may be waiting.
    behind: bool,
}

#[derive(Debug)]
struct EndpointRoom {
    in_flight: usize,
    limit: AdaptiveLimit,
    /// Its last answer was a failure the breaker counts: no hand-offs until an
    /// answer that is not (a publish may have read the breaker before that
    /// failure's record opened it; a claim reads it in its own transaction).
    last_failed: bool,
    /// When a request to it last started or finished (idle entries are pruned).
    touched: Instant,
    /// The deployment's policy with the endpoint's own ceiling, if it has one.
    policy: ConcurrencyPolicy,
    ceiling: Option<u32>,
}

impl EndpointRoom {
    fn room(&self) -> usize {
        self.limit.current().saturating_sub(self.in_flight)
    }

    /// Its room for a claim whose transaction first writes records that hold
    /// `freed` of the endpoints' rooms.
    fn free(&self, freed: &HashMap<&EndpointId, usize>, endpoint: &EndpointId) -> usize {
        let in_flight = self
            .in_flight
            .saturating_sub(freed.get(endpoint).copied().unwrap_or(0));
        self.limit.current().saturating_sub(in_flight)
    }
}

/// The rooms `recording` holds, per endpoint: free for a claim that runs after
/// those records in the same transaction, as it sees what they did to the breaker.
fn freed_by(recording: &[AttemptRecord]) -> HashMap<&EndpointId, usize> {
    let mut freed: HashMap<&EndpointId, usize> = HashMap::new();
    for record in recording.iter().filter(|r| holds_room(r)) {
        *freed.entry(&record.endpoint_id).or_default() += 1;
    }
    freed
}

impl Room {
    /// Nothing in flight yet; every endpoint's limit follows `policy`.
    pub fn new(policy: ConcurrencyPolicy) -> Arc<Self> {
        Arc::new(Self {
            policy,
            state: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, RoomState> {
        self.state.lock().expect("room poisoned")
    }

    fn entry<'a>(&self, state: &'a mut RoomState, endpoint: &EndpointId) -> &'a mut EndpointRoom {
        state
            .endpoints
            .entry(endpoint.clone())
            .or_insert_with(|| EndpointRoom {
                in_flight: 0,
                limit: AdaptiveLimit::new(&self.policy),
                last_failed: false,
                touched: Instant::now(),
                policy: self.policy,
                ceiling: None,
            })
    }

    /// `entry`, with the endpoint's own ceiling as its delivery or publish read it.
    fn entry_with<'a>(
        &self,
        state: &'a mut RoomState,
        endpoint: &EndpointId,
        ceiling: Option<u32>,
    ) -> &'a mut EndpointRoom {
        let room = self.entry(state, endpoint);
        if room.ceiling != ceiling {
            room.ceiling = ceiling;
            room.policy = self.policy.with_ceiling(ceiling);
            room.limit.constrain(&room.policy);
        }
        room
    }

    /// The limit of an endpoint this dispatcher has not sent to yet.
    fn default_limit(&self) -> usize {
        AdaptiveLimit::new(&self.policy).current()
    }

    /// Requests to `endpoint` in flight now.
    pub fn in_flight(&self, endpoint: &EndpointId) -> usize {
        self.lock()
            .endpoints
            .get(endpoint)
            .map_or(0, |e| e.in_flight)
    }

    /// The most requests `endpoint` may have in flight now (its adaptive limit).
    pub fn limit(&self, endpoint: &EndpointId) -> usize {
        self.lock()
            .endpoints
            .get(endpoint)
            .map_or(self.default_limit(), |e| e.limit.current())
    }

    /// Whether `endpoint` has no room for another request now.
    pub fn is_full(&self, endpoint: &EndpointId) -> bool {
        self.lock()
            .endpoints
            .get(endpoint)
            .is_some_and(|e| e.room() == 0)
    }

    /// Counts a request to `endpoint` started outside a claim or hand-off.
    pub fn start(&self, endpoint: &EndpointId) {
        let mut state = self.lock();
        self.entry(&mut state, endpoint).in_flight += 1;
    }

    /// The epoch to stamp a request to `endpoint` with when it is sent.
    pub fn epoch(&self, endpoint: &EndpointId) -> u64 {
        let mut state = self.lock();
        self.entry(&mut state, endpoint).limit.epoch()
    }

    /// The answer of a request to `endpoint` (sent at `epoch`) arrived after
    /// `latency`: its room is free, and the endpoint's limit learns from it.
    pub fn finish(&self, endpoint: &EndpointId, pressure: Pressure, latency: Duration, epoch: u64) {
        self.answered(endpoint, pressure, latency, epoch, false);
    }

    /// As [`Room::finish`], for a failure the breaker counts, once its record committed.
    pub fn finish_failed(
        &self,
        endpoint: &EndpointId,
        pressure: Pressure,
        latency: Duration,
        epoch: u64,
    ) {
        self.answered(endpoint, pressure, latency, epoch, true);
    }

    fn answered(
        &self,
        endpoint: &EndpointId,
        pressure: Pressure,
        latency: Duration,
        epoch: u64,
        failed: bool,
    ) {
        let mut state = self.lock();
        let room = self.entry(&mut state, endpoint);
        room.limit
            .record(pressure, latency, epoch, room.in_flight, &room.policy);
        room.in_flight = room.in_flight.saturating_sub(1);
        room.last_failed = failed;
        room.touched = Instant::now();
    }

    /// Whether the last claim filled its batch (older due work may be waiting).
    #[cfg(test)]
    fn behind(&self) -> bool {
        self.lock().behind
    }

    /// Takes room for a hand-off, unless the endpoint is at its limit or its last
    /// answer was a failure the breaker counts, or the dispatcher is behind (the
    /// last claim was, or no send permit is free: `starved`) and the endpoint has
    /// an eighth of its limit (at least one) in flight. Returns whether the
    /// dispatcher is behind (then the hand-off takes a permit of the fresh
    /// share), or `None`.
    fn try_take(&self, endpoint: &EndpointId, ceiling: Option<u32>, starved: bool) -> Option<bool> {
        let mut state = self.lock();
        let behind = state.behind || starved;
        let room = self.entry_with(&mut state, endpoint, ceiling);
        let busy = behind
            && room.in_flight >= (room.limit.current() / NEWEST_SHARE_DIVISOR as usize).max(1);
        if room.room() == 0 || room.last_failed || busy {
            return None;
        }
        room.in_flight += 1;
        room.touched = Instant::now();
        Some(behind)
    }

    /// Frees the room taken for requests to `endpoints` that will not be sent: a
    /// claim whose transaction failed (what [`Room::admit`] counted), or a
    /// hand-off reservation given back.
    pub fn give_back<'a>(&self, endpoints: impl IntoIterator<Item = &'a EndpointId>) {
        let mut state = self.lock();
        for endpoint in endpoints {
            let room = self.entry(&mut state, endpoint);
            room.in_flight = room.in_flight.saturating_sub(1);
        }
    }
}

/// Whether an attempt's room stays taken until its record is committed: a failure
/// the breaker counts, whose record may open the breaker.
pub fn holds_room(record: &AttemptRecord) -> bool {
    record.signal == Signal::Failed
}

/// How long an endpoint with nothing in flight keeps its learned limit.
const IDLE_FORGET: Duration = Duration::from_secs(60);
/// The most endpoints whose room a claim is told individually.
const MAX_LISTED_ROOMS: usize = 512;

/// A claim in the room (see `crate::turn`): sized by [`Room::view`], planned
/// and counted by [`Room::admit`], given back by [`Room::give_back`] if its
/// transaction fails.
impl Room {
    /// The room a claim that will record `recording` first in its transaction may
    /// size its statements by: at most [`MAX_LISTED_ROOMS`] endpoints listed.
    pub fn view(&self, recording: &[AttemptRecord]) -> RoomView {
        let mut state = self.lock();
        // Endpoints idle for a while forget what they learned (it is stale), so the
        // map — and the claim's list of rooms — holds the endpoints in use.
        state
            .endpoints
            .retain(|_, room| room.in_flight > 0 || room.touched.elapsed() < IDLE_FORGET);
        let freed = freed_by(recording);
        let default = self.default_limit();
        let mut rooms: Vec<(EndpointId, usize)> = state
            .endpoints
            .iter()
            .map(|(endpoint, room)| (endpoint.clone(), room.free(&freed, endpoint)))
            .filter(|(_, room)| *room != default)
            .collect();
        if rooms.len() > MAX_LISTED_ROOMS {
            // Each listed room is two parameters of the claim: keep the ones that must
            // hold it back first (the least room first), then the largest. Unlisted
            // ones get the default room: for those with more only a smaller claim,
            // for those with less rows that the plan (`Room::admit`) sends back.
            rooms.sort_by_key(|(_, room)| {
                if *room < default {
                    (false, *room)
                } else {
                    (true, usize::MAX - *room)
                }
            });
            rooms.truncate(MAX_LISTED_ROOMS);
        }
        RoomView {
            default,
            rooms: rooms.into_iter().collect(),
        }
    }

    /// Plans a claim and counts what the plan sends under one lock, so no
    /// hand-off can take room between the two. `plan` is given the room as it is
    /// now of each of `endpoints` (those of the rows the claim leased, each with
    /// its own ceiling as the claim read it, applied first); `sends` says each
    /// send's endpoint. `recording`: the records the claim's transaction wrote
    /// first (the rooms they hold are its). `filled`: the claim leased as many
    /// rows as it asked for, so more due work may be waiting.
    pub fn admit<'a, P>(
        &self,
        recording: &[AttemptRecord],
        filled: bool,
        endpoints: impl IntoIterator<Item = (&'a EndpointId, Option<u32>)>,
        plan: impl FnOnce(&RoomView) -> P,
        sends: impl FnOnce(&P) -> Vec<&'a EndpointId>,
    ) -> P {
        let mut state = self.lock();
        state.behind = filled;
        let freed = freed_by(recording);
        let default = self.default_limit();
        let mut rooms = HashMap::new();
        for (endpoint, ceiling) in endpoints {
            if !rooms.contains_key(endpoint) {
                let room = self.entry_with(&mut state, endpoint, ceiling);
                rooms.insert(endpoint.clone(), room.free(&freed, endpoint));
            }
        }
        let planned = plan(&RoomView { default, rooms });
        for endpoint in sends(&planned) {
            let room = self.entry(&mut state, endpoint);
            room.in_flight += 1;
            room.touched = Instant::now();
        }
        planned
    }
}

/// A delivery handed from a publish to the dispatcher, with its send permit.
#[derive(Debug)]
pub struct HandedOff {
    pub delivery: ClaimedDelivery,
    pub permit: OwnedSemaphorePermit,
}

/// Where publishes hand deliveries to this process's dispatcher.
#[derive(Debug)]
pub struct Handoff {
    room: Arc<Room>,
    permits: Arc<Semaphore>,
    /// The fresh share: the permits of hand-offs while the dispatcher is behind.
    fresh: Arc<Semaphore>,
    /// Permits of reservations not yet handed over. Which delivery gets which does
    /// not matter: each pool bounds how many sends hold its permits (give or take
    /// a reservation cancelled meanwhile).
    reserved: Mutex<Vec<OwnedSemaphorePermit>>,
    lease: Duration,
    inbox: mpsc::UnboundedSender<Vec<HandedOff>>,
    /// The dispatcher is draining: no more reservations.
    closed: std::sync::atomic::AtomicBool,
}

impl Handoff {
    /// A hand-off into a dispatcher with this room and these send permits (all
    /// free), and a fresh share of an eighth as many (at least one); handed-off
    /// deliveries are leased for `lease` and arrive on the returned receiver.
    pub fn new(
        room: Arc<Room>,
        permits: Arc<Semaphore>,
        lease: Duration,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Vec<HandedOff>>) {
        let (inbox, receiver) = mpsc::unbounded_channel();
        let share = permits.available_permits() / NEWEST_SHARE_DIVISOR as usize;
        let handoff = Self {
            room,
            fresh: Arc::new(Semaphore::new(share.max(1))),
            permits,
            reserved: Mutex::default(),
            lease,
            inbox,
            closed: Default::default(),
        };
        (Arc::new(handoff), receiver)
    }

    /// Refuses every reservation from now on (the dispatcher is draining); what
    /// was reserved before is still handed over.
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    fn reserved(&self) -> MutexGuard<'_, Vec<OwnedSemaphorePermit>> {
        self.reserved.lock().expect("reserved permits poisoned")
    }
}

impl Inbox<ClaimedDelivery> for Handoff {
    fn lease(&self) -> Duration {
        self.lease
    }

    fn reserve(&self, endpoint: &EndpointId, max_in_flight: Option<u32>) -> bool {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        // No send permit free: claims hold them all, as when behind.
        let starved = self.permits.available_permits() == 0;
        let Some(behind) = self.room.try_take(endpoint, max_in_flight, starved) else {
            return false;
        };
        let pool = if behind { &self.fresh } else { &self.permits };
        let Ok(permit) = pool.clone().try_acquire_owned() else {
            self.room.give_back([endpoint]);
            return false;
        };
        self.reserved().push(permit);
        true
    }

    fn cancel(&self, endpoint: &EndpointId) {
        self.room.give_back([endpoint]);
        self.reserved().pop();
    }

    fn hand_over(&self, deliveries: Vec<ClaimedDelivery>) {
        let batch: Vec<HandedOff> = {
            let mut reserved = self.reserved();
            deliveries
                .into_iter()
                .map(|delivery| HandedOff {
                    delivery,
                    permit: reserved.pop().expect("one permit per reservation"),
                })
                .collect()
        };
        // If the dispatcher has stopped, the leases expire and any dispatcher claims
        // the deliveries again.
        let _ = self.inbox.send(batch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint() -> EndpointId {
        EndpointId::generate()
    }

    fn policy(ceiling: u32) -> ConcurrencyPolicy {
        ConcurrencyPolicy::default().with_ceiling(Some(ceiling))
    }

    #[test]
    fn an_answer_frees_its_room_at_once_and_teaches_the_limit() {
        let room = Room::new(policy(8));
        let e = endpoint();
        let epoch = room.epoch(&e);
        room.start(&e);
        room.start(&e);
        assert_eq!(room.in_flight(&e), 2);
        room.finish(&e, Pressure::Overloaded, Duration::from_millis(5), epoch);
        assert_eq!(room.in_flight(&e), 1);
        assert_eq!(room.limit(&e), 7, "8 × 0.9");
    }

    #[test]
    fn a_claim_plans_on_the_room_as_it_is_and_a_hand_off_meanwhile_keeps_its_place() {
        let room = Room::new(policy(2));
        let (busy, idle) = (endpoint(), endpoint());
        room.start(&busy);
        let view = room.view(&[]);
        assert_eq!(view.default, 2);
        assert_eq!(view.room(&busy), 1);
        assert_eq!(view.room(&idle), 2);
        // A publish hands off to `idle` while the claim's statements run, by that
        // view's room of 2: it does not wait for the claim.
        assert_eq!(room.try_take(&idle, None, false), Some(false));
        // The claim's plan sees the room as it is now, and what it sends is counted.
        let sent = room.admit(
            &[],
            false,
            [(&idle, None)],
            |now| now.room(&idle),
            |&sends| vec![&idle; sends],
        );
        assert_eq!(
            sent, 1,
            "one of the two rows the claim leased; the other goes back"
        );
        assert_eq!(
            room.in_flight(&idle),
            2,
            "the hand-off and the claim's send: the limit"
        );
        assert!(room.try_take(&idle, None, false).is_none());
        // The claim's commit failed: its send's room is free again.
        room.give_back([&idle]);
        assert_eq!(room.in_flight(&idle), 1);
        assert!(!room.behind());
        room.admit(&[], true, [], |_| (), |_| vec![]);
        assert!(
            room.behind(),
            "a claim that filled its batch: more may be due"
        );
    }

    #[test]
    fn while_behind_hand_offs_take_the_fresh_share_not_the_claims_permits() {
        let room = Room::new(ConcurrencyPolicy::default());
        let permits = Arc::new(Semaphore::new(16));
        let (handoff, _inbox) = Handoff::new(room.clone(), permits.clone(), Duration::from_secs(1));
        let (a, b, c) = (endpoint(), endpoint(), endpoint());
        // Claims hold every send permit but one, and the last filled its batch.
        let claims = permits.clone().try_acquire_many_owned(15).unwrap();
        room.admit(&[], true, [], |_| (), |_| vec![]);
        assert!(handoff.reserve(&a, None));
        assert!(handoff.reserve(&b, None));
        assert!(
            !handoff.reserve(&c, None),
            "the fresh share is an eighth of 16 permits"
        );
        assert_eq!(permits.available_permits(), 1, "none of the claims' pool");
        assert_eq!(room.in_flight(&c), 0, "a refused hand-off takes no room");
        handoff.cancel(&b);
        assert!(
            handoff.reserve(&c, None),
            "a cancelled reservation gives its permit back"
        );
        // Caught up: a hand-off takes a send permit, as a claim would.
        room.admit(&[], false, [], |_| (), |_| vec![]);
        assert!(handoff.reserve(&b, None));
        assert_eq!(permits.available_permits(), 0, "the last send permit");
        assert_eq!(room.in_flight(&b), 1);
        // No send permit left: behind, whatever the last claim was, and the
        // fresh share is spent (`a`, `c`).
        assert!(!handoff.reserve(&b, None), "no send permit left");
        assert_eq!(room.in_flight(&b), 1, "a refused hand-off takes no room");
        drop(claims);
        assert!(handoff.reserve(&b, None));
        assert_eq!(permits.available_permits(), 14);
    }

    #[test]
    fn with_every_send_permit_taken_hand_offs_take_the_fresh_share() {
        let room = Room::new(ConcurrencyPolicy::default());
        let permits = Arc::new(Semaphore::new(16));
        let (handoff, _inbox) = Handoff::new(room.clone(), permits.clone(), Duration::from_secs(1));
        let (a, b) = (endpoint(), endpoint());
        // Claims hold every send permit, though the last did not fill its batch
        // (one event's deliveries are leased together: the next did not fit).
        let claims = permits.clone().try_acquire_many_owned(16).unwrap();
        room.admit(&[], false, [], |_| (), |_| vec![]);
        assert!(!room.behind());
        assert!(handoff.reserve(&a, None), "the fresh share");
        assert!(handoff.reserve(&b, None), "the fresh share");
        assert!(
            !handoff.reserve(&a, None),
            "the fresh share is an eighth of 16 permits"
        );
        drop(claims);
        assert!(handoff.reserve(&a, None), "a send permit again");
        assert_eq!(permits.available_permits(), 15);
    }

    #[test]
    fn while_behind_an_endpoint_busy_with_its_own_work_keeps_its_room_for_it() {
        let room = Room::new(ConcurrencyPolicy::default());
        let permits = Arc::new(Semaphore::new(256));
        let (handoff, _inbox) = Handoff::new(room.clone(), permits, Duration::from_secs(1));
        let (busy, idle) = (endpoint(), endpoint());
        assert_eq!(room.limit(&busy), 16);
        // Claims took two of `busy`'s 16 and filled their batch: an eighth of its
        // limit is in flight, and older work of its own may be due.
        room.admit(&[], true, [(&busy, None)], |_| 2, |&n| vec![&busy; n]);
        assert!(
            !handoff.reserve(&busy, None),
            "its room is for its older work"
        );
        assert_eq!(room.in_flight(&busy), 2);
        assert!(handoff.reserve(&idle, None), "nothing of its own in flight");
        // Caught up, `busy` takes hand-offs up to its limit again.
        room.admit(&[], false, [], |_| (), |_| vec![]);
        assert!(handoff.reserve(&busy, None));
    }

    #[test]
    fn no_hand_off_follows_a_failure_until_a_healthy_answer() {
        let room = Room::new(ConcurrencyPolicy::default());
        let e = endpoint();
        room.start(&e);
        let epoch = room.epoch(&e);
        room.finish_failed(&e, Pressure::Overloaded, Duration::from_millis(5), epoch);
        assert!(
            room.try_take(&e, None, false).is_none(),
            "the breaker may just have opened"
        );
        room.start(&e);
        room.finish(&e, Pressure::Answered, Duration::from_millis(5), epoch);
        assert!(room.try_take(&e, None, false).is_some());
    }

    #[test]
    fn an_endpoint_ceiling_bounds_its_room() {
        let room = Room::new(ConcurrencyPolicy::default());
        let e = endpoint();
        assert!(room.try_take(&e, Some(1), false).is_some());
        assert!(
            room.try_take(&e, Some(1), false).is_none(),
            "its own ceiling of 1 is taken"
        );
        assert_eq!(room.limit(&e), 1);
        // The ceiling removed (a PATCH): the deployment's policy again, from the floor up.
        assert!(room.try_take(&e, None, false).is_some());
    }
}
