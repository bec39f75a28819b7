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
//! wrote already leased: each reservation takes a send permit and room, and
//! the committed deliveries arrive on the dispatcher's inbox with their permits.
//!
//! **Races.** A claim reads the room, then leases rows, then counts them (before
//! its commit; a commit that fails gives them back). A hand-off in between could
//! push an endpoint past its limit, so while a claim is between reading the room
//! and counting what it took, hand-offs are refused (publishes write pending rows
//! instead). A hand-off is also refused while the dispatcher is behind — its last
//! claim filled its batch, so older due work is waiting that the permit should go to.
//! An answer arriving during a claim only frees room, which the claim then leaves
//! unused: never more than the limit.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hookline_core::breaker::Signal;
use hookline_core::claim::RoomView;
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
    /// A claim is between reading the room and counting what it leased.
    claiming: bool,
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

    /// Takes room for a hand-off, unless a claim is under way, the dispatcher is
    /// behind, or the endpoint is at its limit.
    fn try_take(&self, endpoint: &EndpointId, ceiling: Option<u32>) -> bool {
        let mut state = self.lock();
        if state.claiming || state.behind {
            return false;
        }
        let room = self.entry_with(&mut state, endpoint, ceiling);
        if room.room() == 0 || room.last_failed {
            return false;
        }
        room.in_flight += 1;
        room.touched = Instant::now();
        true
    }

    fn give_back(&self, endpoint: &EndpointId) {
        let mut state = self.lock();
        let room = self.entry(&mut state, endpoint);
        room.in_flight = room.in_flight.saturating_sub(1);
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

/// A claim's moments in the room (see `crate::turn`): between [`Room::begin`] and
/// [`Room::leased`] or [`Room::abandoned`], publishes hand nothing off.
impl Room {
    /// A claim begins; it will record `recording` first in its transaction. Returns
    /// the room it may use.
    pub fn begin(&self, recording: &[AttemptRecord]) -> RoomView {
        let mut state = self.lock();
        state.claiming = true;
        // The rooms `recording` holds are free for this claim: it runs after those
        // records in the same transaction, so it sees what they did to the breaker.
        let mut freed: HashMap<&EndpointId, usize> = HashMap::new();
        for record in recording.iter().filter(|r| holds_room(r)) {
            *freed.entry(&record.endpoint_id).or_default() += 1;
        }
        // Endpoints idle for a while forget what they learned (it is stale), so the
        // map — and the claim's list of rooms — holds the endpoints in use.
        state
            .endpoints
            .retain(|_, room| room.in_flight > 0 || room.touched.elapsed() < IDLE_FORGET);
        let default = self.default_limit();
        let mut rooms: Vec<(EndpointId, usize)> = state
            .endpoints
            .iter()
            .map(|(endpoint, room)| {
                let in_flight = room
                    .in_flight
                    .saturating_sub(freed.get(endpoint).copied().unwrap_or(0));
                (
                    endpoint.clone(),
                    room.limit.current().saturating_sub(in_flight),
                )
            })
            .filter(|(_, room)| *room != default)
            .collect();
        if rooms.len() > MAX_LISTED_ROOMS {
            // Each listed room is two parameters of the claim: keep the ones that must
            // hold it back first (the least room), then the largest. Unlisted ones get
            // the default room, which for those with more only means a smaller claim.
            rooms.sort_by_key(|(_, room)| (*room > default, std::cmp::Reverse(*room)));
            rooms.truncate(MAX_LISTED_ROOMS);
        }
        RoomView {
            default,
            rooms: rooms.into_iter().collect(),
        }
    }

    /// The claim leased `claimed` (each takes room) and is about to commit;
    /// `filled`: it took as many rows as it asked for, so more due work may be waiting.
    pub fn leased(&self, claimed: &[ClaimedDelivery], filled: bool) {
        let mut state = self.lock();
        state.behind = filled;
        state.claiming = false;
        for delivery in claimed {
            let room = self.entry_with(&mut state, &delivery.endpoint_id, delivery.max_in_flight);
            room.in_flight += 1;
            room.touched = Instant::now();
        }
    }

    /// The claim failed before it leased anything.
    pub fn abandoned(&self) {
        self.lock().claiming = false;
    }

    /// The claim's commit failed: what [`Room::leased`] counted is free again.
    pub fn unleased(&self, claimed: &[ClaimedDelivery]) {
        let mut state = self.lock();
        for delivery in claimed {
            let room = self.entry(&mut state, &delivery.endpoint_id);
            room.in_flight = room.in_flight.saturating_sub(1);
        }
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
    /// Permits of reservations not yet handed over (all alike: any one serves).
    reserved: Mutex<Vec<OwnedSemaphorePermit>>,
    lease: Duration,
    inbox: mpsc::UnboundedSender<Vec<HandedOff>>,
    /// The dispatcher is draining: no more reservations.
    closed: std::sync::atomic::AtomicBool,
}

impl Handoff {
    /// A hand-off into a dispatcher with this room and these permits; handed-off
    /// deliveries are leased for `lease` and arrive on the returned receiver.
    pub fn new(
        room: Arc<Room>,
        permits: Arc<Semaphore>,
        lease: Duration,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Vec<HandedOff>>) {
        let (inbox, receiver) = mpsc::unbounded_channel();
        let handoff = Self {
            room,
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
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            return false;
        };
        if !self.room.try_take(endpoint, max_in_flight) {
            return false;
        }
        self.reserved().push(permit);
        true
    }

    fn cancel(&self, endpoint: &EndpointId) {
        self.room.give_back(endpoint);
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
    fn a_claim_sees_the_room_and_pauses_hand_offs_until_it_counted() {
        let room = Room::new(policy(2));
        let (busy, idle) = (endpoint(), endpoint());
        room.start(&busy);
        let view = room.begin(&[]);
        assert_eq!(view.default, 2);
        assert_eq!(view.room(&busy), 1);
        assert_eq!(view.room(&idle), 2);
        assert!(
            !room.try_take(&idle, None),
            "no hand-off while a claim is reading the room"
        );
        room.leased(&[], false);
        assert!(room.try_take(&idle, None));
        // A claim that filled its batch leaves the dispatcher behind: no hand-offs.
        room.begin(&[]);
        room.leased(&[], true);
        assert!(!room.try_take(&idle, None));
    }

    #[test]
    fn no_hand_off_follows_a_failure_until_a_healthy_answer() {
        let room = Room::new(ConcurrencyPolicy::default());
        let e = endpoint();
        room.start(&e);
        let epoch = room.epoch(&e);
        room.finish_failed(&e, Pressure::Overloaded, Duration::from_millis(5), epoch);
        assert!(!room.try_take(&e, None), "the breaker may just have opened");
        room.start(&e);
        room.finish(&e, Pressure::Answered, Duration::from_millis(5), epoch);
        assert!(room.try_take(&e, None));
    }

    #[test]
    fn an_endpoint_ceiling_bounds_its_room() {
        let room = Room::new(ConcurrencyPolicy::default());
        let e = endpoint();
        assert!(room.try_take(&e, Some(1)));
        assert!(!room.try_take(&e, Some(1)), "its own ceiling of 1 is taken");
        assert_eq!(room.limit(&e), 1);
        // The ceiling removed (a PATCH): the deployment's policy again, from the floor up.
        assert!(room.try_take(&e, None));
    }
}
