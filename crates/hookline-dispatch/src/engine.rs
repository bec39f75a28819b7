//! The dispatch loop, the in-flight pool and the drain.
//!
//! ```text
//!   publish in this process ──(handed off, leased)──┐
//!                                                   ▼
//!   dispatch loop ──(claimed batch)──▶ one task per send (≤ max_in_flight, a Semaphore)
//!     ▲     ▲                                   │
//!     │     └──────── AttemptRecord ────────────┘
//!     │ wake: publish / replay / retry due
//! ```
//!
//! Each turn of the loop is **one transaction**: the attempts that finished
//! since the last turn are recorded (breakers, retries, partitions moved on),
//! then due work is claimed, sized to the free permits so nothing claimed waits
//! in a local queue while its lease runs. Under load a turn writes and claims
//! hundreds of deliveries for one commit; at rest a finished send or a publish
//! wakes the loop at once. Fresh deliveries that publishes in this process could
//! hand over (see `crate::room::Handoff`) arrive already leased and skip the
//! claim; their attempts are recorded by the next turn like any other.
//!
//! A turn runs as its own task in two stages (`turn::prepare`, then
//! `turn::Prepared::commit`), and the next turn may begin — when attempts
//! finished meanwhile — as soon as the last has run its statements, so its
//! records and claim run while the last waits for its commit's flush. At most
//! one turn of a dispatcher is ever running statements: the one that commits
//! waits for no lock, so the two never wait on each other in a cycle.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookline_core::breaker::Signal;
use hookline_core::classify::{breaker_signal, classify, pressure, Verdict};
use hookline_core::concurrency::Pressure;
use hookline_core::ids::{BatchId, DeliveryId, EndpointId};
use hookline_core::model::AttemptTrigger;
use hookline_core::retry::{Jitter, ThreadJitter};
use hookline_core::time::{Clock, Timestamp};
use hookline_store::{
    AttemptRecord, BatchAttempt, BatchElement, BatchRequest, ClaimedDelivery, Store,
};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::metrics::{self, EndpointLabels, Heartbeat};
use crate::room::{holds_room, HandedOff, Handoff, Room};
use crate::sender::{SendResult, Sender};
use crate::turn::{self, ClaimPolicy};
use crate::{DispatchError, DispatcherConfig};

/// The most finished attempts written in one turn.
const COMPLETION_BATCH: usize = 512;

/// A finished send, on its way from its task to the next turn.
struct Finished {
    record: AttemptRecord,
    /// The room of an attempt that failed in a way the breaker counts is held until
    /// the turn that records it has committed: that record may open the breaker,
    /// and a claim or hand-off before it is written would send the endpoint one
    /// more request than the breaker allows. (The turn's own claim, which runs
    /// after the record in the same transaction, sees that room as free: see
    /// `Room::view`.) Every other answer frees its room as it arrives.
    held: Option<HeldRoom>,
}

struct HeldRoom {
    endpoint: EndpointId,
    pressure: Pressure,
    latency: Duration,
    epoch: u64,
}

impl Finished {
    /// An attempt's answer, sent at `epoch`: its room is freed now, or (`hold`)
    /// held until the turn that records it has committed.
    fn freeing(
        room: &Room,
        record: AttemptRecord,
        pressure: Pressure,
        epoch: u64,
        hold: bool,
    ) -> Self {
        let held = if hold {
            Some(HeldRoom {
                endpoint: record.endpoint_id.clone(),
                pressure,
                latency: record.duration,
                epoch,
            })
        } else {
            room.finish(&record.endpoint_id, pressure, record.duration, epoch);
            None
        };
        Self { record, held }
    }
}

/// Moves what arrived into the turn's records, and the rooms they hold into `held`.
fn take_arrived(
    arrived: &mut Vec<Finished>,
    finished: &mut Vec<AttemptRecord>,
    held: &mut Vec<HeldRoom>,
) {
    for Finished { record, held: room } in arrived.drain(..) {
        held.extend(room);
        finished.push(record);
    }
}

/// Frees the rooms whose records a committed turn wrote.
fn release_held(held: &mut Vec<HeldRoom>, room: &Room) {
    for h in held.drain(..) {
        room.finish_failed(&h.endpoint, h.pressure, h.latency, h.epoch);
    }
}

/// At most this many turns under way in one dispatcher: the next runs its
/// statements while the last commits (`turn::Prepared`).
const TURNS_IN_FLIGHT: usize = 2;

/// What a turn was begun with.
struct Begun {
    /// The finished attempts it writes.
    records: Vec<AttemptRecord>,
    /// The rooms those hold until they are committed.
    held: Vec<HeldRoom>,
    /// The send permits of what it may claim.
    permits: Option<OwnedSemaphorePermit>,
    limit: u32,
}

/// A turn that ended.
struct TurnDone {
    result: hookline_store::Result<hookline_store::Claim>,
    begun: Begun,
    started: Instant,
}

/// A turn that failed: its records are written by the next.
struct Failed {
    error: hookline_store::StoreError,
    records: Vec<AttemptRecord>,
    held: Vec<HeldRoom>,
}

/// Whether the last turn begun has run its statements (or ended): then the
/// next may begin while it commits.
fn has_prepared(preparing: &mut Option<oneshot::Receiver<()>>) -> bool {
    let Some(receiver) = preparing else {
        return true;
    };
    if matches!(
        receiver.try_recv(),
        Err(oneshot::error::TryRecvError::Empty)
    ) {
        return false;
    }
    *preparing = None;
    true
}

/// Until the last turn begun has run its statements (or ended).
async fn wait_prepared(preparing: &mut Option<oneshot::Receiver<()>>) {
    if let Some(receiver) = preparing {
        let _ = receiver.await;
    }
    *preparing = None;
}

/// A delivery engine bound to one store.
pub struct Dispatcher {
    store: Store,
    config: DispatcherConfig,
    sender: Sender,
    clock: Arc<dyn Clock>,
    endpoint_labels: EndpointLabels,
    heartbeat: Heartbeat,
    /// Send permits, shared by claimed and handed-off sends.
    permits: Arc<Semaphore>,
    /// The room per endpoint, taken by claims and hand-offs, freed by answers.
    room: Arc<Room>,
    /// Where publishes of this process hand deliveries over ([`Dispatcher::handoff`]).
    handoff: Arc<Handoff>,
    /// What they hand over (taken by [`Dispatcher::run`]).
    inbox: mpsc::UnboundedReceiver<Vec<HandedOff>>,
    /// Batching endpoints' deliveries on their way into a request, by endpoint.
    gathering: Mutex<HashMap<EndpointId, mpsc::UnboundedSender<Vec<Member>>>>,
    /// Cancelled when the dispatcher stops claiming: batches gathering then
    /// leave at once.
    stopping: CancellationToken,
}

/// A delivery of a batching endpoint, waiting for its batch's request.
struct Member {
    delivery: ClaimedDelivery,
    url: Result<reqwest::Url, String>,
    /// Its send permit, until it joins a batch behind another member: a
    /// batch holds one (its first member's) from its first member's arrival
    /// to its answer, as one request does.
    permit: Option<OwnedSemaphorePermit>,
    /// Its endpoint's room epoch when it was started.
    epoch: u64,
}

/// A batch closes before its members' envelopes pass this many bytes (one
/// member may be larger alone).
const MAX_BATCH_BYTES: usize = 1024 * 1024;

/// One draw of the retry jitter for a whole batch: each member is retried at
/// the same point of its own backoff range, so members of one attempt
/// number come due together (and may go in one request again).
struct OneDraw(f64);

impl Jitter for OneDraw {
    fn uniform(&mut self, upper: u64) -> u64 {
        ((upper as f64) * self.0).round() as u64
    }
}

/// The leases of this dispatcher's sends in progress (claimed or handed off):
/// released if the drain deadline passes before they finish.
#[derive(Default)]
struct Leases(HashMap<DeliveryId, String>);

impl Leases {
    fn start(&mut self, delivery: &ClaimedDelivery) {
        self.0
            .insert(delivery.id.clone(), delivery.lease_token.clone());
    }

    /// Called once the attempt is recorded.
    fn finish(&mut self, delivery: &DeliveryId) {
        self.0.remove(delivery);
    }
}

impl Dispatcher {
    pub fn new(
        store: Store,
        config: DispatcherConfig,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, DispatchError> {
        let sender = Sender::new(&config)?;
        let permits = Arc::new(Semaphore::new(config.max_in_flight));
        let room = Room::new(config.concurrency);
        let (handoff, inbox) = Handoff::new(room.clone(), permits.clone(), config.lease);
        Ok(Self {
            permits,
            room,
            handoff,
            inbox,
            store,
            endpoint_labels: EndpointLabels::new(config.metrics_endpoint_cap),
            config,
            sender,
            clock,
            heartbeat: Heartbeat::default(),
            gathering: Mutex::default(),
            stopping: CancellationToken::new(),
        })
    }

    /// Where publishes in this process hand this dispatcher the fresh deliveries
    /// it can send at once (the binary passes it to the API; see `crate::room::Handoff`).
    pub fn handoff(&self) -> Arc<dyn hookline_core::publish::Handoff<ClaimedDelivery>> {
        self.handoff.clone()
    }

    /// When the dispatch loop last finished a turn (for `/readyz`).
    pub fn heartbeat(&self) -> Heartbeat {
        self.heartbeat.clone()
    }

    /// Runs until `shutdown` is cancelled, then stops claiming, lets in-flight
    /// sends finish for up to `drain_timeout`, records every finished attempt,
    /// and releases the leases of the sends that did not finish.
    #[tracing::instrument(name = "dispatcher", skip_all)]
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), DispatchError> {
        // What publishes hand over; the dispatcher keeps a closed receiver in its place.
        let mut inbox = std::mem::replace(&mut self.inbox, mpsc::unbounded_channel().1);
        let (permits, room) = (self.permits.clone(), self.room.clone());
        let this = Arc::new(self);
        let mut leases = Leases::default();
        let (records_tx, mut records_rx) = mpsc::unbounded_channel();
        // Finished sends as they arrive, and the attempts the next turn's transaction
        // writes (kept in hand when a turn fails).
        let mut arrived: Vec<Finished> = Vec::new();
        let mut finished: Vec<AttemptRecord> = Vec::new();
        let mut held: Vec<HeldRoom> = Vec::new();
        // Deliveries handed off by publishes, not yet started.
        let mut handed: Vec<HandedOff> = Vec::new();
        let mut sends = JoinSet::new();
        let mut turns: JoinSet<TurnDone> = JoinSet::new();
        // The last turn begun, until it has run its statements.
        let mut preparing: Option<oneshot::Receiver<()>> = None;
        // More work may be due at once (the first turn looks).
        let mut look_again = true;
        let mut failures = 0u32;
        let policy = ClaimPolicy {
            retry: this.config.retry,
            room: Some(room.clone()),
            probe_hold: this.config.lease,
            rate_lookahead: this.config.rate_lookahead,
            ..ClaimPolicy::default()
        };

        while !shutdown.is_cancelled() {
            // Reap finished send tasks so the set does not grow.
            while sends.try_join_next().is_some() {}
            this.start_handed(
                &mut inbox,
                &mut handed,
                &mut leases,
                &mut sends,
                &records_tx,
                &room,
            );
            while finished.len() + arrived.len() < COMPLETION_BATCH {
                let Ok(done) = records_rx.try_recv() else {
                    break;
                };
                arrived.push(done);
            }
            let writing = !finished.is_empty() || !arrived.is_empty();
            // A turn begins once the last has run its statements: alone, when work
            // may be due or attempts finished; beside one that commits, when
            // attempts finished.
            if turns.len() < TURNS_IN_FLIGHT
                && has_prepared(&mut preparing)
                && (writing || (turns.is_empty() && look_again))
            {
                // The claim's permits are taken before it runs: publishes may take
                // free permits for hand-offs meanwhile.
                let claim_permits = take_permits(&permits, this.config.batch_size);
                let limit = claim_permits.as_ref().map_or(0, |p| p.num_permits() as u32);
                if limit > 0 || writing {
                    take_arrived(&mut arrived, &mut finished, &mut held);
                    let begun = Begun {
                        records: std::mem::take(&mut finished),
                        held: std::mem::take(&mut held),
                        permits: claim_permits,
                        limit,
                    };
                    preparing = Some(this.begin_turn(&mut turns, begun, &policy));
                    look_again = false;
                    continue;
                }
                // Every permit is sending: a finished send frees one (below).
            }
            if turns.is_empty() && !look_again && !writing && handed.is_empty() {
                this.wait_for_work(
                    &shutdown,
                    &mut records_rx,
                    &mut arrived,
                    &mut inbox,
                    &mut handed,
                )
                .await;
                look_again = true;
                continue;
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(done) = turns.join_next() => {
                    let done = done.expect("a dispatcher turn panicked");
                    match this.turn_done(done, &mut leases, &mut sends, &records_tx, &room) {
                        Ok(more) => {
                            failures = 0;
                            look_again |= more;
                        }
                        Err(mut back) => {
                            // The finished attempts stay in hand and are written next turn.
                            failures += 1;
                            tracing::error!(error = %back.error, failures, "dispatch turn failed; retrying");
                            finished.append(&mut back.records);
                            held.append(&mut back.held);
                            look_again = true;
                            let backoff = Duration::from_millis(100 * u64::from(failures.min(50)));
                            sleep_or_shutdown(backoff, &shutdown).await;
                        }
                    }
                }
                _ = wait_prepared(&mut preparing), if preparing.is_some() => {}
                _ = records_rx.recv_many(&mut arrived, COMPLETION_BATCH), if !writing => {}
                Some(batch) = inbox.recv() => handed.extend(batch),
            }
        }

        // Batches gathering leave now, with what they hold.
        this.stopping.cancel();
        // The turns under way finish: what they claimed is sent like the rest of
        // the drain, and the attempts of one that failed are written below.
        while let Some(done) = turns.join_next().await {
            let done = done.expect("a dispatcher turn panicked");
            if let Err(mut back) = this.turn_done(done, &mut leases, &mut sends, &records_tx, &room)
            {
                tracing::error!(error = %back.error, "dispatch turn failed while stopping");
                finished.append(&mut back.records);
                held.append(&mut back.held);
            }
        }
        // Publishes stop handing work over; what they already handed is sent like
        // the rest of the drain.
        this.handoff.close();
        this.start_handed(
            &mut inbox,
            &mut handed,
            &mut leases,
            &mut sends,
            &records_tx,
            &room,
        );
        tracing::info!(in_flight = sends.len(), "draining");
        let drained = tokio::time::timeout(this.config.drain_timeout, async {
            while sends.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            sends.abort_all();
            while sends.join_next().await.is_some() {}
        }
        // Every finished send's record is written before the leases still held — those
        // of aborted sends, and of deliveries a publish committing meanwhile handed
        // over — are released.
        drop(records_tx);
        while records_rx.recv_many(&mut arrived, COMPLETION_BATCH).await > 0 {}
        take_arrived(&mut arrived, &mut finished, &mut held);
        for batch in finished.chunks(COMPLETION_BATCH) {
            this.write_with_retries(batch).await?;
            for record in batch {
                leases.finish(&record.delivery_id);
            }
        }
        release_held(&mut held, &room);
        inbox.close();
        while let Ok(batch) = inbox.try_recv() {
            for HandedOff { delivery, .. } in batch {
                leases.start(&delivery);
            }
        }
        let unfinished: Vec<(DeliveryId, String)> = leases.0.drain().collect();
        if !unfinished.is_empty() {
            tracing::info!(count = unfinished.len(), "releasing unfinished deliveries");
            this.store
                .events()
                .release_deliveries(&unfinished, this.clock.now())
                .await?;
        }
        Ok(())
    }

    /// Begins a turn as its own task: it writes `begun.records`, claims up to
    /// `begun.limit` and commits. Returns what resolves once its statements have
    /// run (then the next turn may begin while it commits) — or, if its records
    /// opened a breaker or disabled an endpoint, once it has committed
    /// (`turn::Prepared::lets_next_overlap`).
    fn begin_turn(
        self: &Arc<Self>,
        turns: &mut JoinSet<TurnDone>,
        begun: Begun,
        policy: &ClaimPolicy,
    ) -> oneshot::Receiver<()> {
        let (prepared, prepared_rx) = oneshot::channel();
        let this = self.clone();
        let policy = policy.clone();
        turns.spawn(async move {
            let started = Instant::now();
            let mut prepared = Some(prepared);
            let result = match turn::prepare(
                &this.store,
                &begun.records,
                &this.config.breaker,
                this.clock.now(),
                this.config.lease,
                begun.limit,
                &policy,
            )
            .await
            {
                Ok(turn) => {
                    if turn.lets_next_overlap() {
                        prepared.take();
                    }
                    turn.commit().await
                }
                Err(error) => Err(error),
            };
            // Once ended, failed or not, the next turn may begin.
            drop(prepared);
            TurnDone {
                result,
                begun,
                started,
            }
        });
        prepared_rx
    }

    /// After a turn: on success frees the rooms its records held and starts the
    /// sends it claimed, and says whether more work may be due at once; on
    /// failure gives back the records it was to write and the rooms they hold.
    fn turn_done(
        self: &Arc<Self>,
        done: TurnDone,
        leases: &mut Leases,
        sends: &mut JoinSet<()>,
        records: &mpsc::UnboundedSender<Finished>,
        room: &Arc<Room>,
    ) -> Result<bool, Failed> {
        let TurnDone {
            result,
            begun:
                Begun {
                    records: written,
                    mut held,
                    permits: mut claim_permits,
                    limit,
                },
            started,
        } = done;
        let claimed = match result {
            Ok(claimed) => claimed,
            Err(error) => {
                return Err(Failed {
                    error,
                    records: written,
                    held,
                })
            }
        };
        release_held(&mut held, room);
        let now = self.clock.now();
        metrics::turn(started.elapsed(), written.len(), claimed.rows, now);
        metrics::breaker_changes(claimed.breaker_changes);
        self.heartbeat.beat(now);
        for record in &written {
            leases.finish(&record.delivery_id);
        }
        // A full batch means more may be due at once; after a write-only turn
        // (no free permit) the permits the written sends freed are claimable now.
        let look_again = limit == 0 || claimed.rows as u32 >= limit;
        // Parsed once per endpoint of the batch, not once per delivery.
        let mut urls: HashMap<String, Result<reqwest::Url, String>> = HashMap::new();
        let mut gathered: HashMap<EndpointId, Vec<Member>> = HashMap::new();
        for delivery in claimed.deliveries {
            let url = match urls.get(&delivery.destination.url) {
                Some(url) => url.clone(),
                None => {
                    let url = Sender::parse_url(&delivery.destination.url);
                    urls.insert(delivery.destination.url.clone(), url.clone());
                    url
                }
            };
            let permit = claim_permits
                .as_mut()
                .and_then(|permits| permits.split(1))
                .expect("a claim takes no more than its permits");
            leases.start(&delivery);
            if let Some(member) = self.spawn_send(sends, delivery, url, permit, records, room) {
                gathered
                    .entry(member.delivery.endpoint_id.clone())
                    .or_default()
                    .push(member);
            }
        }
        self.gather(sends, gathered, records, room);
        // Permits the claim did not use go back here.
        drop(claim_permits);
        Ok(look_again)
    }

    /// Starts the sends of every delivery handed off so far (`handed`, and what
    /// waits in the inbox).
    fn start_handed(
        self: &Arc<Self>,
        inbox: &mut mpsc::UnboundedReceiver<Vec<HandedOff>>,
        handed: &mut Vec<HandedOff>,
        leases: &mut Leases,
        sends: &mut JoinSet<()>,
        records: &mpsc::UnboundedSender<Finished>,
        room: &Arc<Room>,
    ) {
        while let Ok(batch) = inbox.try_recv() {
            handed.extend(batch);
        }
        metrics::handed_off(handed.len());
        let mut gathered: HashMap<EndpointId, Vec<Member>> = HashMap::new();
        for HandedOff { delivery, permit } in handed.drain(..) {
            let url = Sender::parse_url(&delivery.destination.url);
            leases.start(&delivery);
            if let Some(member) = self.spawn_send(sends, delivery, url, permit, records, room) {
                gathered
                    .entry(member.delivery.endpoint_id.clone())
                    .or_default()
                    .push(member);
            }
        }
        self.gather(sends, gathered, records, room);
    }

    /// Starts one send (its room in `room` is already taken); when its answer
    /// arrives the room is freed at once (or held for the turn that records it, see
    /// [`Finished`]), and its record comes back on `records`. A batching
    /// endpoint's delivery is given back as a member for [`Self::gather`]
    /// instead.
    fn spawn_send(
        self: &Arc<Self>,
        sends: &mut JoinSet<()>,
        delivery: ClaimedDelivery,
        url: Result<reqwest::Url, String>,
        permit: OwnedSemaphorePermit,
        records: &mpsc::UnboundedSender<Finished>,
        room: &Arc<Room>,
    ) -> Option<Member> {
        let epoch = room.epoch(&delivery.endpoint_id);
        if delivery.destination.batch.is_some() {
            return Some(Member {
                delivery,
                url,
                permit: Some(permit),
                epoch,
            });
        }
        let this = self.clone();
        let records = records.clone();
        let room = room.clone();
        sends.spawn(async move {
            let (record, pressure) = this.attempt(&delivery, url).await;
            let hold = holds_room(&record);
            let finished = Finished::freeing(&room, record, pressure, epoch, hold);
            drop(permit);
            // The loop outlives every send (it keeps the receiver until all are done).
            let _ = records.send(finished);
        });
        None
    }

    /// Hands each endpoint's members (of one claim, or of what publishes
    /// handed off) to its gathering in one message — so a gathering sees a
    /// claim's members together, never a part of them — or starts one (a task
    /// in `sends`, so the drain waits for it).
    fn gather(
        self: &Arc<Self>,
        sends: &mut JoinSet<()>,
        gathered: HashMap<EndpointId, Vec<Member>>,
        records: &mpsc::UnboundedSender<Finished>,
        room: &Arc<Room>,
    ) {
        if gathered.is_empty() {
            return;
        }
        let mut gathering = self.gathering.lock().expect("gathering poisoned");
        for (endpoint, members) in gathered {
            let members = match gathering.get(&endpoint) {
                Some(open) => match open.send(members) {
                    Ok(()) => continue,
                    Err(mpsc::error::SendError(members)) => members,
                },
                None => members,
            };
            let (open, queue) = mpsc::unbounded_channel();
            open.send(members).expect("the receiver is here");
            gathering.insert(endpoint.clone(), open);
            let this = self.clone();
            let records = records.clone();
            let room = room.clone();
            sends.spawn(async move { this.batches(endpoint, queue, records, room).await });
        }
    }

    /// Makes batches of one endpoint's members as they arrive. A batch takes
    /// members in order while they share its first's destination (a change
    /// to the endpoint closes it), up to `max_events` and [`MAX_BATCH_BYTES`];
    /// then it leaves at once if it is full, if a member of another
    /// destination waits, if no more can join (the endpoint's room is used
    /// up: members count in it), if it carries the half-open breaker's probe,
    /// or if the dispatcher stops; else it waits for more until `max_wait_ms`
    /// after its first member arrived (never later than the lease allows:
    /// the lease less the request timeout and the rate limit's lookahead).
    /// Ends, once its requests have answered, when no member waits.
    async fn batches(
        self: Arc<Self>,
        endpoint: EndpointId,
        mut queue: mpsc::UnboundedReceiver<Vec<Member>>,
        records: mpsc::UnboundedSender<Finished>,
        room: Arc<Room>,
    ) {
        let mut requests = JoinSet::new();
        let longest = self
            .config
            .lease
            .saturating_sub(self.config.request_timeout + self.config.rate_lookahead);
        let mut waiting: VecDeque<Member> = VecDeque::new();
        loop {
            while let Ok(members) = queue.try_recv() {
                waiting.extend(members);
            }
            if waiting.is_empty() {
                // Under the lock no member can arrive meanwhile: a later one
                // starts a new gathering.
                let mut gathering = self.gathering.lock().expect("gathering poisoned");
                match queue.try_recv() {
                    Ok(members) => waiting.extend(members),
                    Err(_) => {
                        gathering.remove(&endpoint);
                        break;
                    }
                }
            }
            let first = waiting.pop_front().expect("a member waits");
            let (most, wait) = first
                .delivery
                .destination
                .batch
                .map_or((1, Duration::ZERO), |b| {
                    (b.max_events as usize, b.max_wait().min(longest))
                });
            let until = tokio::time::Instant::now() + wait;
            let mut bytes = first.delivery.body.len();
            let mut batch = vec![first];
            loop {
                while let Some(next) = waiting.front() {
                    let fits = batch.len() < most
                        && bytes + next.delivery.body.len() <= MAX_BATCH_BYTES
                        && (Arc::ptr_eq(
                            &next.delivery.destination,
                            &batch[0].delivery.destination,
                        ) || next.delivery.destination == batch[0].delivery.destination);
                    if !fits {
                        break;
                    }
                    bytes += next.delivery.body.len();
                    // The batch is one request: it holds one permit.
                    batch.extend(waiting.pop_front().map(|member| Member {
                        permit: None,
                        ..member
                    }));
                }
                let leave = batch.len() >= most
                    || !waiting.is_empty()
                    || batch[0].delivery.probe
                    || room.is_full(&endpoint)
                    || self.stopping.is_cancelled();
                if leave {
                    break;
                }
                tokio::select! {
                    Some(members) = queue.recv() => waiting.extend(members),
                    _ = tokio::time::sleep_until(until) => break,
                    _ = self.stopping.cancelled() => break,
                }
            }
            let this = self.clone();
            let (records, room) = (records.clone(), room.clone());
            requests.spawn(async move { this.send_batch(batch, records, room).await });
            while requests.try_join_next().is_some() {}
        }
        while requests.join_next().await.is_some() {}
    }

    /// Sends one batch (it holds its first member's send permit) and hands
    /// back each member's record, as a send does.
    async fn send_batch(
        &self,
        batch: Vec<Member>,
        records: mpsc::UnboundedSender<Finished>,
        room: Arc<Room>,
    ) {
        let mut deliveries = Vec::with_capacity(batch.len());
        let mut rest = Vec::with_capacity(batch.len());
        let mut permits = Vec::with_capacity(1);
        for Member {
            delivery,
            url,
            permit,
            epoch,
        } in batch
        {
            deliveries.push(delivery);
            permits.extend(permit);
            rest.push((url, epoch));
        }
        let url = rest[0].0.clone();
        let finished = self.attempt_batch(&deliveries, url).await;
        drop(permits);
        // The batch's breaker signal is its first member's: a failed request
        // holds every member's room until it is recorded.
        let hold = finished
            .first()
            .is_some_and(|(record, _)| holds_room(record));
        for ((record, pressure), (_, epoch)) in finished.into_iter().zip(rest) {
            let _ = records.send(Finished::freeing(&room, record, pressure, epoch, hold));
        }
    }

    /// Writes finished attempts during the drain, retrying a failed write (the
    /// records stay in hand), so no outcome is dropped unless the store stays down.
    async fn write_with_retries(&self, records: &[AttemptRecord]) -> Result<(), DispatchError> {
        let mut failures = 0u32;
        loop {
            match turn::complete_attempts(
                &self.store,
                records,
                &self.config.breaker,
                self.clock.now(),
            )
            .await
            {
                Ok(changes) => {
                    metrics::breaker_changes(changes);
                    return Ok(());
                }
                Err(error) if failures < 20 => {
                    failures += 1;
                    tracing::error!(%error, failures, "writing attempts failed; retrying");
                    tokio::time::sleep(Duration::from_millis(100 * u64::from(failures))).await;
                }
                Err(error) => return Err(error.into()),
            }
        }
    }

    /// Sleeps until work may be due: a wake-up (publish, replay, retry written), the
    /// earliest due time, the idle poll, a finished send (its record is written next
    /// turn), a hand-off, or shutdown.
    async fn wait_for_work(
        &self,
        shutdown: &CancellationToken,
        records: &mut mpsc::UnboundedReceiver<Finished>,
        finished: &mut Vec<Finished>,
        inbox: &mut mpsc::UnboundedReceiver<Vec<HandedOff>>,
        handed: &mut Vec<HandedOff>,
    ) {
        let idle = self.config.idle_poll;
        let wait = match self.store.events().next_due_at().await {
            // Due work this claim did not take belongs to endpoints at their cap (or was
            // handed back over it): it becomes claimable when a send finishes.
            Ok(Some(due)) if due <= self.clock.now() => idle,
            Ok(Some(due)) => due.since(self.clock.now()).min(idle),
            Ok(None) => idle,
            Err(error) => {
                tracing::warn!(%error, "could not read the next due time");
                idle
            }
        };
        tokio::select! {
            _ = shutdown.cancelled() => {}
            _ = self.store.wait_for_due(wait) => {}
            _ = records.recv_many(finished, COMPLETION_BATCH) => {}
            Some(batch) = inbox.recv() => handed.extend(batch),
        }
    }

    /// One attempt: send, classify, decide. (The span is at debug level: nothing inside
    /// logs above it, and formatting four ids per attempt showed in the profile.)
    #[tracing::instrument(level = "debug", skip_all, fields(app = %delivery.app_id,
        endpoint = %delivery.endpoint_id, event = %delivery.event_id, delivery = %delivery.id))]
    async fn attempt(
        &self,
        delivery: &ClaimedDelivery,
        url: Result<reqwest::Url, String>,
    ) -> (AttemptRecord, Pressure) {
        if let Some(send_at) = delivery.send_at {
            // A rate-limited endpoint's reserved slot.
            tokio::time::sleep(send_at.since(self.clock.now())).await;
        }
        let started_at = self.clock.now();
        let result = self.sender.send(delivery, url, started_at.as_secs()).await;
        let now = self.clock.now();
        let verdict = classify(&result.outcome, now.to_system_time());
        let signal = breaker_signal(&result.outcome);
        let (record, pressure) = self.record(
            delivery,
            result,
            (started_at, now),
            verdict,
            signal,
            &mut ThreadJitter,
        );
        tracing::debug!(status = ?record.status_code, next = ?record.next, "attempt finished");
        (record, pressure)
    }

    /// One request carrying `deliveries` (one batching endpoint's, in order):
    /// sent once their rate-limit slots have all come, classified once, and
    /// recorded for each member alike — one verdict, one retry draw, the
    /// breaker told once (by the first member; the others say nothing of its
    /// health), and the request (its id, size and, with the first member,
    /// its elements) in every member's attempt.
    async fn attempt_batch(
        &self,
        deliveries: &[ClaimedDelivery],
        url: Result<reqwest::Url, String>,
    ) -> Vec<(AttemptRecord, Pressure)> {
        if let Some(send_at) = deliveries.iter().filter_map(|d| d.send_at).max() {
            tokio::time::sleep(send_at.since(self.clock.now())).await;
        }
        let id = BatchId::generate();
        let started_at = self.clock.now();
        let result = self
            .sender
            .send_batch(deliveries, &id, url, started_at.as_secs())
            .await;
        let now = self.clock.now();
        let verdict = classify(&result.outcome, now.to_system_time());
        let signal = breaker_signal(&result.outcome);
        let request = Arc::new(BatchRequest {
            id,
            members: deliveries
                .iter()
                .map(|d| BatchElement(d.event_id.clone(), d.endpoint_sequence))
                .collect(),
        });
        let mut draw = OneDraw(ThreadJitter.uniform(1_000_000) as f64 / 1_000_000.0);
        deliveries
            .iter()
            .enumerate()
            .map(|(position, delivery)| {
                let result = SendResult {
                    outcome: result.outcome.clone(),
                    status: result.status,
                    response_body: result.response_body.clone(),
                    error: result.error.clone(),
                    duration: result.duration,
                    signature: result.signature.clone(),
                    response_headers: result.response_headers.clone(),
                    response_truncated: result.response_truncated,
                    transformed: None,
                };
                let signal = if position == 0 {
                    signal
                } else {
                    Signal::Neutral
                };
                let (mut record, pressure) = self.record(
                    delivery,
                    result,
                    (started_at, now),
                    verdict,
                    signal,
                    &mut draw,
                );
                record.batch = Some(BatchAttempt {
                    request: request.clone(),
                    position: position as u32,
                });
                (record, pressure)
            })
            .collect()
    }

    /// The record of `delivery`'s attempt that got `result` between `at.0`
    /// and `at.1`: what comes next under its retry policy, counted in the metrics.
    fn record(
        &self,
        delivery: &ClaimedDelivery,
        result: SendResult,
        (started_at, now): (Timestamp, Timestamp),
        verdict: Verdict,
        signal: Signal,
        jitter: &mut impl Jitter,
    ) -> (AttemptRecord, Pressure) {
        let attempt_number = delivery.attempts + 1;
        let policy = delivery.retry.apply(self.config.retry);
        let next = policy.next(
            verdict,
            attempt_number,
            delivery.round_started_at,
            now,
            jitter,
        );
        metrics::attempt(
            delivery,
            &result,
            next,
            (started_at, now),
            &self.endpoint_labels,
        );
        let pressure = pressure(&result.outcome);
        let record = AttemptRecord {
            delivery_id: delivery.id.clone(),
            event_id: delivery.event_id.clone(),
            app_id: delivery.app_id.clone(),
            endpoint_id: delivery.endpoint_id.clone(),
            lease_token: delivery.lease_token.clone(),
            attempt_number,
            started_at,
            duration: result.duration,
            status_code: result.status,
            response_body: result.response_body,
            error: result.error,
            destination: delivery.destination.clone(),
            signature: result.signature,
            response_headers: result.response_headers,
            response_truncated: result.response_truncated,
            trigger: AttemptTrigger::of(delivery.probe, delivery.attempts, delivery.replayed),
            endpoint_sequence: delivery.endpoint_sequence,
            transformed: result.transformed,
            batch: None,
            next,
            signal,
            disable_endpoint: matches!(
                verdict,
                Verdict::Dead {
                    disable_endpoint: true,
                    ..
                }
            ),
        };
        (record, pressure)
    }
}

async fn sleep_or_shutdown(duration: Duration, shutdown: &CancellationToken) {
    tokio::select! {
        _ = shutdown.cancelled() => {}
        _ = tokio::time::sleep(duration) => {}
    }
}

/// Up to `most` of the free permits, taken at once (none if every permit is sending).
fn take_permits(permits: &Arc<Semaphore>, most: u32) -> Option<OwnedSemaphorePermit> {
    loop {
        let free = permits.available_permits().min(most as usize);
        if free == 0 {
            return None;
        }
        // A hand-off may take one meanwhile: then ask again for what is left.
        if let Ok(taken) = permits.clone().try_acquire_many_owned(free as u32) {
            return Some(taken);
        }
    }
}
