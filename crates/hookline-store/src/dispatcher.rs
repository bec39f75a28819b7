//! What the store asks of the dispatcher in its process: two small traits.
//!
//! The dispatcher owns its in-memory state — requests in flight per endpoint,
//! each endpoint's adaptive limit, its send permits, its hand-off inbox — and
//! the store only reads or feeds it at the two moments where a transaction
//! must agree with it:
//!
//! - [`ClaimRoom`]: a claim leases no endpoint beyond the dispatcher's room for
//!   it. The claim reads the room inside its transaction, counts what it leased
//!   before its commit, and gives that back if the commit fails.
//! - [`Inbox`]: a publish writes a fresh delivery that a claim would admit at
//!   once already leased (`in_flight`), and after its commit passes it to the
//!   dispatcher in memory (the hand-off; see docs/architecture.md). The
//!   reservation of a delivery whose publish fails is cancelled. And after any
//!   commit that made work due now, the store wakes the dispatcher through it.
//!
//! Both are implemented in `hookline-dispatch`; the store never names its types.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hookline_core::ids::EndpointId;

use crate::records::{AttemptRecord, ClaimedDelivery};

/// A claim's view of the dispatcher's room per endpoint.
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

/// The claiming dispatcher's room. Between [`begin`](ClaimRoom::begin) and
/// [`leased`](ClaimRoom::leased) or [`abandoned`](ClaimRoom::abandoned), the
/// dispatcher hands nothing off, so a publish cannot take room the claim counts on.
pub trait ClaimRoom: Send + Sync + std::fmt::Debug {
    /// A claim begins, after recording `recording` in its transaction: the room it
    /// may use.
    fn begin(&self, recording: &[AttemptRecord]) -> RoomView;
    /// The claim leased `claimed` (each takes room) and ends; `filled`: it took as
    /// many rows as it asked for, so more due work may be waiting.
    fn leased(&self, claimed: &[ClaimedDelivery], filled: bool);
    /// The claim failed before it leased anything; it ends.
    fn abandoned(&self);
    /// The claim's transaction did not commit: what `leased` counted is free again.
    fn unleased(&self, claimed: &[ClaimedDelivery]);
}

/// A [`ClaimRoom`] without limits, for claims outside a dispatcher.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unlimited;

impl ClaimRoom for Unlimited {
    fn begin(&self, _: &[AttemptRecord]) -> RoomView {
        RoomView::unlimited()
    }
    fn leased(&self, _: &[ClaimedDelivery], _: bool) {}
    fn abandoned(&self) {}
    fn unleased(&self, _: &[ClaimedDelivery]) {}
}

/// Where publishes hand fresh deliveries to this process's dispatcher.
pub trait Inbox: Send + Sync + std::fmt::Debug {
    /// How long a handed-off delivery is leased.
    fn lease(&self) -> Duration;
    /// Takes a send permit and room for one delivery to `endpoint` (whose own
    /// concurrency ceiling is `max_in_flight`), if the dispatcher has both free and
    /// is caught up.
    fn reserve(&self, endpoint: &EndpointId, max_in_flight: Option<u32>) -> bool;
    /// Gives back a reservation whose delivery was not committed.
    fn cancel(&self, endpoint: &EndpointId);
    /// Passes committed deliveries, one per reservation, to the dispatcher.
    fn hand_over(&self, deliveries: Vec<ClaimedDelivery>);
    /// A commit made deliveries due now (a publish, replay, release, a closed
    /// breaker, a released partition — here or, on PostgreSQL, on another node):
    /// the dispatcher claims at once instead of at its next poll. A wake while the
    /// dispatcher is busy is kept for its next wait.
    fn wake(&self);
}

/// One reservation of a publish in progress. Dropped without being handed over
/// (the transaction failed), it is cancelled.
#[derive(Debug)]
pub(crate) struct Reservation {
    inbox: Arc<dyn Inbox>,
    endpoint: EndpointId,
    handed: bool,
}

impl Reservation {
    /// Reserves room in `inbox` for one delivery to `endpoint`.
    pub(crate) fn take(
        inbox: &Arc<dyn Inbox>,
        endpoint: &EndpointId,
        max_in_flight: Option<u32>,
    ) -> Option<Self> {
        inbox.reserve(endpoint, max_in_flight).then(|| Self {
            inbox: inbox.clone(),
            endpoint: endpoint.clone(),
            handed: false,
        })
    }

    /// Passes the committed deliveries to the dispatcher. If it has stopped, their
    /// leases expire and any dispatcher claims them again.
    pub(crate) fn hand_over(handed: Vec<(Reservation, ClaimedDelivery)>) {
        let Some(inbox) = handed.first().map(|(r, _)| r.inbox.clone()) else {
            return;
        };
        let deliveries = handed
            .into_iter()
            .map(|(mut reservation, delivery)| {
                reservation.handed = true;
                delivery
            })
            .collect();
        inbox.hand_over(deliveries);
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if !self.handed {
            self.inbox.cancel(&self.endpoint);
        }
    }
}
