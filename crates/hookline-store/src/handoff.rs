//! A dispatcher's sending room, and handing fresh deliveries straight to it.
//!
//! [`Slots`] count what one dispatcher has in flight per endpoint: the claim
//! leases no endpoint beyond its room under the cap. The count is shared with
//! the store because publishes may take room too.
//!
//! **Hand-off.** A dispatcher that registers a [`Handoff`] with its store gets
//! fresh deliveries from publishes in the same process without claiming them:
//! the publish writes each delivery it can hand off already leased (`in_flight`
//! under a lease token, due when the lease ends) and, after its commit, passes
//! it over in memory with a permit of the dispatcher's in-flight limit. That
//! saves the claim's update of the row, a dispatcher transaction and a wake-up
//! per delivery — on the way from publish to first attempt, one commit instead
//! of two. A crash loses nothing: the lease expires and any dispatcher claims
//! the delivery again, exactly as for a claimed one.
//!
//! Only what a claim would admit without asking the database is handed off: a
//! delivery due now and free to go — unordered, or the head of its ordered
//! partition (the ones behind it are written `blocked`, as always) — to an
//! enabled endpoint whose breaker is closed and which has no rate limit, within
//! the dispatcher's free permits and its room for the endpoint — and only while
//! the dispatcher is caught up: when its last claim filled its batch, older due
//! work is waiting (retries, released partition successors, a backlog), and a
//! hand-off would send newer work ahead of it with the permits that work needs.
//! Everything else is written pending and claimed.
//!
//! **Races.** A claim reads the room, then leases rows, then counts them (before
//! its commit; a commit that fails gives them back). A publish taking room in
//! between could push an endpoint past its cap, so while a claim is between
//! reading the room and counting what it took, publishes hand nothing off (they
//! write pending rows instead). On SQLite, whose single writer already orders
//! the two transactions, that window never overlaps a publish; on PostgreSQL it
//! is the claim's statements, a millisecond or two.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hookline_core::ids::EndpointId;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

use crate::records::{AttemptRecord, ClaimedDelivery};

/// One dispatcher's requests in flight per endpoint, against its per-endpoint cap.
/// A request counts from its claim or hand-off until its attempt is *recorded*, so
/// a claim sees the breaker state the attempt produced.
#[derive(Debug)]
pub struct Slots {
    max_per_endpoint: usize,
    state: Mutex<SlotState>,
}

#[derive(Debug, Default)]
struct SlotState {
    in_flight: HashMap<EndpointId, usize>,
    /// A claim is between reading the room and counting what it leased.
    claiming: bool,
    /// The last claim took as many rows as it asked for: more due work may be waiting.
    behind: bool,
}

impl Slots {
    /// No requests in flight yet; at most `max_per_endpoint` to one endpoint.
    pub fn new(max_per_endpoint: usize) -> Arc<Self> {
        Arc::new(Self {
            max_per_endpoint,
            state: Mutex::default(),
        })
    }

    /// No per-endpoint cap (a claim outside any dispatcher).
    pub fn unlimited() -> Arc<Self> {
        Self::new(usize::MAX)
    }

    pub fn max_per_endpoint(&self) -> usize {
        self.max_per_endpoint
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        self.state.lock().expect("slots poisoned")
    }

    /// Requests to `endpoint` in flight now.
    pub fn in_flight(&self, endpoint: &EndpointId) -> usize {
        self.lock().in_flight.get(endpoint).copied().unwrap_or(0)
    }

    /// Counts a request to `endpoint` started outside a claim.
    pub fn start(&self, endpoint: &EndpointId) {
        *self.lock().in_flight.entry(endpoint.clone()).or_default() += 1;
    }

    /// Frees the slots of attempts that are now recorded.
    pub fn finish(&self, records: &[AttemptRecord]) {
        let mut state = self.lock();
        for record in records {
            release(&mut state, &record.endpoint_id);
        }
    }

    /// Starts a claim that records `recording` first: the room it may use per endpoint
    /// (as if those attempts were already recorded). Publishes hand nothing off until
    /// the claim has [counted](ClaimingSlots::count) what it leased, or is dropped.
    pub(crate) fn begin_claim(&self, recording: &[AttemptRecord]) -> ClaimingSlots<'_> {
        let mut state = self.lock();
        state.claiming = true;
        let mut in_flight = state.in_flight.clone();
        for record in recording {
            if let Some(count) = in_flight.get_mut(&record.endpoint_id) {
                *count = count.saturating_sub(1);
            }
        }
        in_flight.retain(|_, count| *count > 0);
        ClaimingSlots {
            slots: self,
            in_flight,
        }
    }

    /// Takes a slot for a hand-off, unless a claim is under way or the endpoint is full.
    fn try_take(&self, endpoint: &EndpointId) -> bool {
        let mut state = self.lock();
        let count = state.in_flight.get(endpoint).copied().unwrap_or(0);
        if state.claiming || state.behind || count >= self.max_per_endpoint {
            return false;
        }
        state.in_flight.insert(endpoint.clone(), count + 1);
        true
    }

    fn give_back(&self, endpoint: &EndpointId) {
        release(&mut self.lock(), endpoint);
    }

    /// Gives back the slots a claim counted when its transaction did not commit.
    pub(crate) fn uncount(&self, claimed: &[ClaimedDelivery]) {
        let mut state = self.lock();
        for delivery in claimed {
            release(&mut state, &delivery.endpoint_id);
        }
    }
}

fn release(state: &mut SlotState, endpoint: &EndpointId) {
    if let Some(count) = state.in_flight.get_mut(endpoint) {
        *count -= 1;
        if *count == 0 {
            state.in_flight.remove(endpoint);
        }
    }
}

/// A claim in progress: its view of the room, held until its outcome is counted.
pub(crate) struct ClaimingSlots<'a> {
    slots: &'a Slots,
    /// Requests in flight per endpoint (those with any), as the claim sees them.
    pub(crate) in_flight: HashMap<EndpointId, usize>,
}

impl ClaimingSlots<'_> {
    /// How many more requests the claim may start to `endpoint`.
    pub(crate) fn room(&self, endpoint: &EndpointId) -> usize {
        self.slots
            .max_per_endpoint
            .saturating_sub(self.in_flight.get(endpoint).copied().unwrap_or(0))
    }

    /// Counts the deliveries the claim leased (each takes a slot) and ends the claim;
    /// `filled`: it took as many rows as it asked for, so more may be due.
    pub(crate) fn count(self, claimed: &[ClaimedDelivery], filled: bool) {
        {
            let mut state = self.slots.lock();
            state.behind = filled;
            for delivery in claimed {
                *state
                    .in_flight
                    .entry(delivery.endpoint_id.clone())
                    .or_default() += 1;
            }
        }
        // Dropping `self` (the lock is released) ends the claim.
    }
}

impl Drop for ClaimingSlots<'_> {
    fn drop(&mut self) {
        self.slots.lock().claiming = false;
    }
}

/// A delivery handed from a publish to the dispatcher, with its permit.
#[derive(Debug)]
pub struct HandedOff {
    pub delivery: ClaimedDelivery,
    pub permit: OwnedSemaphorePermit,
}

/// Where publishes hand deliveries to this process's dispatcher.
#[derive(Debug)]
pub struct Handoff {
    slots: Arc<Slots>,
    permits: Arc<Semaphore>,
    lease: Duration,
    inbox: mpsc::UnboundedSender<Vec<HandedOff>>,
}

impl Handoff {
    /// A hand-off into a dispatcher with these slots and permits; handed-off
    /// deliveries are leased for `lease` and arrive on the returned receiver.
    pub fn new(
        slots: Arc<Slots>,
        permits: Arc<Semaphore>,
        lease: Duration,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<Vec<HandedOff>>) {
        let (inbox, receiver) = mpsc::unbounded_channel();
        let handoff = Self {
            slots,
            permits,
            lease,
            inbox,
        };
        (Arc::new(handoff), receiver)
    }

    pub(crate) fn lease(&self) -> Duration {
        self.lease
    }

    /// A permit and a slot for one delivery to `endpoint`, if the dispatcher has both free.
    pub(crate) fn reserve(self: &Arc<Self>, endpoint: &EndpointId) -> Option<Reservation> {
        let permit = self.permits.clone().try_acquire_owned().ok()?;
        if !self.slots.try_take(endpoint) {
            return None;
        }
        Some(Reservation {
            handoff: self.clone(),
            endpoint: endpoint.clone(),
            permit: Some(permit),
        })
    }
}

/// A slot and permit taken for a delivery being written leased. Dropped without
/// being [handed over](Reservation::hand_over) (the publish failed), it gives both back.
#[derive(Debug)]
pub(crate) struct Reservation {
    handoff: Arc<Handoff>,
    endpoint: EndpointId,
    permit: Option<OwnedSemaphorePermit>,
}

impl Reservation {
    fn take(mut self) -> OwnedSemaphorePermit {
        self.permit
            .take()
            .expect("a reservation is handed over once")
    }

    /// Passes the committed deliveries to the dispatcher. If it has stopped, their
    /// leases expire and any dispatcher claims them again.
    pub(crate) fn hand_over(handed: Vec<(Reservation, ClaimedDelivery)>) {
        let Some((first, _)) = handed.first() else {
            return;
        };
        let handoff = first.handoff.clone();
        let batch = handed
            .into_iter()
            .map(|(reservation, delivery)| HandedOff {
                permit: reservation.take(),
                delivery,
            })
            .collect();
        let _ = handoff.inbox.send(batch);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.permit.is_some() {
            self.handoff.slots.give_back(&self.endpoint);
        }
    }
}
