//! What a publish asks of the dispatcher in its process: one small trait.
//!
//! The dispatcher owns its in-memory state — requests in flight per endpoint,
//! each endpoint's adaptive limit, its send permits, its hand-off inbox.
//! (A claim does not call into it: the dispatcher runs its own turn, see
//! `hookline_dispatch::turn`.)
//!
//! - [`Inbox`]: a publish writes a fresh delivery that a claim would admit at
//!   once already leased (`in_flight`), and after its commit passes it to the
//!   dispatcher in memory (the hand-off; see docs/architecture.md). The
//!   reservation of a delivery whose publish fails is cancelled.
//!
//! It is implemented in `hookline-dispatch`; the store never names its types.

use std::sync::Arc;
use std::time::Duration;

use hookline_core::ids::EndpointId;

use crate::records::ClaimedDelivery;

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
