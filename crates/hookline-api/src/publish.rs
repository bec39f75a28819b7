//! Publishing: one transaction per group of events, planned by core, with an
//! optional hand-off to the dispatcher of this process.
//!
//! [`publish_group`] drives one publish through the store's steps: it begins
//! the transaction ([`Events::begin_publish`]), asks core for each delivery's
//! first state ([`first_state`]), reserves room in the [`Handoff`] for each that
//! a claim would send at once, has the store write and commit, and hands the
//! committed deliveries over (or, if the commit failed, gives their room back).
//!
//! Single publishes reach it through the [`Publisher`]'s **group-commit queue**:
//! a few committer tasks each take whatever requests are waiting (up to
//! [`MAX_GROUP`]) and commit them together. Under load that turns one fsync per
//! event into one per group; at low load a request is committed alone, at once.
//! Each caller gets its answer only after its own transaction committed.

use std::sync::Arc;

use hookline_core::ids::EndpointId;
use hookline_core::publish::{first_state, FirstState, Handoff};
use hookline_store::{
    ClaimedDelivery, Engine, PublishItem, PublishOutcome, Store, StoreError, MAX_GROUP,
};
use tokio::sync::{mpsc, oneshot};

/// The hand-off of this process's dispatcher, as the binary wires it.
pub type DispatchHandoff = dyn Handoff<ClaimedDelivery>;

/// How often a group is begun again after losing a race: one of its
/// idempotency keys committed first by another publish, or an app's snapshot
/// made stale by a change to its endpoints (`hookline_store::AppSnapshot`).
/// Each try reads a fresh snapshot. An app with dozens of endpoints whose
/// breakers are probing moves its versions every few tens of milliseconds
/// (a probe's start and its answer each count): schemathesis' app lost four
/// races in a row once (a 500), so a publish now tries eleven times.
const KEY_RACE_RETRIES: usize = 10;

/// Publishes several events (of any apps) in one transaction; one outcome per
/// item, in order. Deliveries a claim would send at once go to `handoff`'s
/// dispatcher, leased, if it has room for them.
///
/// With an idempotency key, a receipt of what was written is stored under the
/// key in the same transaction. A later request with the key gets that answer
/// again (same fingerprint) or [`PublishOutcome::KeyReused`]; of concurrent
/// requests with one key exactly one creates the event.
#[tracing::instrument(skip_all, fields(count = items.len()))]
pub async fn publish_group(
    store: &Store,
    handoff: Option<&DispatchHandoff>,
    items: &[PublishItem],
) -> hookline_store::Result<Vec<PublishOutcome>> {
    let mut attempt = 0;
    loop {
        let publish = store.events().begin_publish(items).await?;
        let mut reserved = Reserved::new(handoff);
        let drafts = publish.drafts();
        let mut plan: Vec<FirstState> = Vec::with_capacity(drafts.len());
        // One event's drafts at a time: an unordered event's deliveries are
        // handed off all or none, since those not handed would be written as
        // rows of their own beside its `fanout` row (docs/engine-v4.md).
        for event in drafts.chunk_by(|a, b| a.item == b.item) {
            let now = items[event[0].item].now;
            let firsts: Vec<FirstState> = event
                .iter()
                .map(|draft| first_state(&draft.gate, draft.partition.as_ref(), now))
                .collect();
            let unordered = event.iter().all(|draft| draft.partition.is_none());
            let before = reserved.endpoints.len();
            let mut handed = Vec::with_capacity(event.len());
            let mut refused = false;
            for (draft, first) in event.iter().zip(&firsts) {
                // Once one is refused, an unordered event reserves no more.
                let take = first.may_hand_off && !(unordered && refused);
                let taken = take && reserved.take(&draft.endpoint, draft.gate.max_in_flight);
                refused |= take && !taken;
                handed.push(taken);
            }
            if unordered && refused {
                reserved.cancel_since(before);
                handed.iter_mut().for_each(|handed| *handed = false);
            }
            for (first, handed) in firsts.into_iter().zip(handed) {
                plan.push(match handoff {
                    Some(handoff) if handed => first.handed(now, handoff.lease()),
                    _ => first,
                });
            }
        }
        match publish.commit(&plan).await? {
            Some(committed) => {
                reserved.hand_over(committed.handed);
                return Ok(committed.outcomes);
            }
            // A concurrent publish took one of our keys first (go again, and the
            // earlier answer is found this time), or an app's endpoints changed
            // since its snapshot was read (go again from a fresh one).
            None if attempt < KEY_RACE_RETRIES => attempt += 1,
            None => return Err(StoreError::Corrupt("publishes kept racing".into())),
        }
    }
}

/// The hand-off reservations of a publish in progress; dropped without being
/// handed over (the transaction failed), each is cancelled.
struct Reserved<'h> {
    handoff: Option<&'h DispatchHandoff>,
    endpoints: Vec<EndpointId>,
}

impl<'h> Reserved<'h> {
    fn new(handoff: Option<&'h DispatchHandoff>) -> Self {
        Self {
            handoff,
            endpoints: Vec::new(),
        }
    }

    /// Reserves room for one delivery to `endpoint`, if the dispatcher has it.
    fn take(&mut self, endpoint: &EndpointId, max_in_flight: Option<u32>) -> bool {
        let Some(handoff) = self.handoff else {
            return false;
        };
        let taken = handoff.reserve(endpoint, max_in_flight);
        if taken {
            self.endpoints.push(endpoint.clone());
        }
        taken
    }

    /// Cancels the reservations after the first `kept`.
    fn cancel_since(&mut self, kept: usize) {
        if let Some(handoff) = self.handoff {
            for endpoint in self.endpoints.drain(kept..) {
                handoff.cancel(&endpoint);
            }
        }
    }

    /// Passes the committed deliveries, one per reservation, to the dispatcher.
    /// If it has stopped, their leases expire and any dispatcher claims them again.
    fn hand_over(mut self, deliveries: Vec<ClaimedDelivery>) {
        debug_assert_eq!(deliveries.len(), self.endpoints.len());
        self.endpoints.clear();
        if let Some(handoff) = self.handoff.filter(|_| !deliveries.is_empty()) {
            handoff.hand_over(deliveries);
        }
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        if let Some(handoff) = self.handoff {
            for endpoint in &self.endpoints {
                handoff.cancel(endpoint);
            }
        }
    }
}

type Reply = oneshot::Sender<hookline_store::Result<PublishOutcome>>;

/// Publishes for the API: single events through the group-commit queue, batches
/// at once; both hand deliveries to the dispatcher of this process, if wired.
/// Cheap to clone; its committer tasks end when the last clone is dropped.
#[derive(Clone)]
pub struct Publisher {
    store: Store,
    handoff: Option<Arc<DispatchHandoff>>,
    queue: mpsc::UnboundedSender<(PublishItem, Reply)>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("handoff", &self.handoff.is_some())
            .finish()
    }
}

impl Publisher {
    /// Starts the committer tasks: one on SQLite, whose writer is single anyway;
    /// on PostgreSQL a few, which commit groups in parallel.
    pub fn start(store: Store, handoff: Option<Arc<DispatchHandoff>>) -> Self {
        let committers = match store.engine() {
            Engine::Sqlite => 1,
            Engine::Postgres => 4,
        };
        let (queue, receiver) = mpsc::unbounded_channel();
        let receiver = Arc::new(tokio::sync::Mutex::new(receiver));
        for _ in 0..committers {
            let (store, handoff, receiver) = (store.clone(), handoff.clone(), receiver.clone());
            tokio::spawn(async move {
                loop {
                    let mut group = Vec::new();
                    {
                        // One committer at a time gathers a group; the others commit meanwhile.
                        let mut receiver = receiver.lock().await;
                        if receiver.recv_many(&mut group, MAX_GROUP).await == 0 {
                            return;
                        }
                    }
                    commit_group(&store, handoff.as_deref(), group).await;
                }
            });
        }
        Self {
            store,
            handoff,
            queue,
        }
    }

    /// Writes an event and one delivery per enabled endpoint that takes it,
    /// committed (with other concurrent publishes) before this returns.
    #[tracing::instrument(skip_all, fields(app = %item.app, event = %item.event.id))]
    pub async fn publish(&self, item: PublishItem) -> hookline_store::Result<PublishOutcome> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((item, reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Publishes a batch in one transaction of its own ([`publish_group`]).
    pub async fn publish_group(
        &self,
        items: &[PublishItem],
    ) -> hookline_store::Result<Vec<PublishOutcome>> {
        publish_group(&self.store, self.handoff.as_deref(), items).await
    }
}

/// Commits a gathered group; if the group's transaction fails, each item is
/// tried alone so one bad request cannot fail its neighbours.
async fn commit_group(
    store: &Store,
    handoff: Option<&DispatchHandoff>,
    group: Vec<(PublishItem, Reply)>,
) {
    let items: Vec<PublishItem> = group.iter().map(|(item, _)| item.clone()).collect();
    if let Ok(outcomes) = publish_group(store, handoff, &items).await {
        for ((_, reply), outcome) in group.into_iter().zip(outcomes) {
            let _ = reply.send(Ok(outcome));
        }
        return;
    }
    for (item, reply) in group {
        let _ = reply.send(
            publish_group(store, handoff, std::slice::from_ref(&item))
                .await
                .map(|mut o| o.remove(0)),
        );
    }
}
