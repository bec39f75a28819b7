//! Publishing: the outbox transaction, `Idempotency-Key`, and group commit.
//!
//! Every publish — a single `POST …/events` or a batch — goes through
//! [`Events::publish_group`](crate::Events::publish_group): one transaction writes several events, their
//! deliveries and their idempotency records. Single publishes reach it through
//! a **group-commit queue**: a few committer tasks each take whatever requests
//! are waiting (up to [`MAX_GROUP`]) and commit them together. Under load that
//! turns one fsync per event into one per group; at low load a request is
//! committed alone, at once. Each caller still gets its answer only after its
//! own transaction committed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::db::Tx;
use hookline_core::admission;
use hookline_core::ids::{AppId, DeliveryId, EndpointId};
use hookline_core::model::DeliveryState;
use hookline_core::ordering;
use hookline_core::time::Timestamp;
use tokio::sync::{mpsc, oneshot};

use crate::claim::{self, ENDPOINT_COLUMNS};
use crate::db::{Batch, Kind, Sql};
use crate::dispatcher::Reservation;
use crate::endpoints::{due_for_new_work, event_types_from_json};
use crate::records::{
    ClaimedDelivery, Delivery, Event, IdempotencyKey, NewEvent, PublishOutcome, Published,
    StoredResponse,
};
use crate::secrets::Secrets;
use crate::Events;
use crate::{parse_column, Result, Store, StoreError};

/// The most events committed in one group.
pub const MAX_GROUP: usize = 512;
/// How often a group is retried after losing an idempotency-key race.
const KEY_RACE_RETRIES: usize = 3;

/// One event to publish.
#[derive(Debug, Clone)]
pub struct PublishItem {
    pub app: AppId,
    pub event: NewEvent,
    pub key: Option<IdempotencyKey>,
    /// When the request arrived: the event's `created_at` and its deliveries' due time.
    pub now: Timestamp,
}

type Reply = oneshot::Sender<Result<PublishOutcome>>;

/// The queue in front of the committers.
pub(crate) struct GroupCommit {
    queue: mpsc::UnboundedSender<(PublishItem, Reply)>,
}

impl GroupCommit {
    /// Starts `committers` tasks (one for SQLite, whose writer is single anyway).
    pub(crate) fn start(store: Store, committers: usize) -> Self {
        let (queue, receiver) = mpsc::unbounded_channel();
        let receiver = std::sync::Arc::new(tokio::sync::Mutex::new(receiver));
        for _ in 0..committers {
            let (store, receiver) = (store.clone(), receiver.clone());
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
                    store.events().commit_group(group).await;
                }
            });
        }
        Self { queue }
    }
}

impl Events<'_> {
    /// Writes an event and one delivery per enabled endpoint whose filter accepts
    /// it, committed (with other concurrent publishes) before this returns.
    ///
    /// With an idempotency key, a receipt of what was written is stored under the
    /// key in the same transaction. A later request with the key gets that
    /// [`Published`] again (same fingerprint) or [`PublishOutcome::KeyReused`]; of
    /// concurrent requests with one key exactly one creates the event.
    #[tracing::instrument(skip_all, fields(app = %item.app, event = %item.event.id))]
    pub async fn publish(&self, item: PublishItem) -> Result<PublishOutcome> {
        let (reply, answer) = oneshot::channel();
        self.group
            .get()
            .expect("the group committer starts with the store")
            .queue
            .send((item, reply))
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    /// Commits a gathered group; if the group's transaction fails, each item is
    /// tried alone so one bad request cannot fail its neighbours.
    async fn commit_group(&self, group: Vec<(PublishItem, Reply)>) {
        let items: Vec<PublishItem> = group.iter().map(|(item, _)| item.clone()).collect();
        if let Ok(outcomes) = self.publish_group(&items).await {
            for ((_, reply), outcome) in group.into_iter().zip(outcomes) {
                let _ = reply.send(Ok(outcome));
            }
            return;
        }
        for (item, reply) in group {
            let _ = reply.send(
                self.publish_group(std::slice::from_ref(&item))
                    .await
                    .map(|mut o| o.remove(0)),
            );
        }
    }

    /// Publishes several events (of any apps) in one transaction; one outcome per item, in order.
    #[tracing::instrument(skip_all, fields(count = items.len()))]
    pub async fn publish_group(&self, items: &[PublishItem]) -> Result<Vec<PublishOutcome>> {
        let mut attempt = 0;
        loop {
            match self.try_publish_group(items).await? {
                Some(outcomes) => return Ok(outcomes),
                // A concurrent transaction took one of our keys first: go again, and
                // the earlier answer is found this time.
                None if attempt < KEY_RACE_RETRIES => attempt += 1,
                None => return Err(StoreError::Corrupt("idempotency keys kept racing".into())),
            }
        }
    }

    /// One try of a group: `None` if an idempotency key was taken concurrently
    /// (the transaction was rolled back).
    async fn try_publish_group(
        &self,
        items: &[PublishItem],
    ) -> Result<Option<Vec<PublishOutcome>>> {
        let earlier = self.stored_answers(items).await?;
        let mut tx = self.writer.begin().await?;
        let mut endpoints: HashMap<AppId, Vec<Target>> = HashMap::new();
        // Partitions that got a delivery earlier in this group (not yet visible to queries).
        let mut touched: HashSet<(EndpointId, String)> = HashSet::new();
        // Keys answered earlier in this group: (app, key) → (fingerprint, what was written).
        let mut answered: HashMap<(AppId, String), (String, Stored)> = HashMap::new();
        let mut outcomes = Vec::with_capacity(items.len());
        let mut events = Vec::new();
        let mut keys = Vec::new();
        let mut woke = false;
        // Deliveries written leased to this process's dispatcher, passed to it after the
        // commit; if the transaction fails, dropping them gives their room back.
        let handoff = self.handoff();
        let lease_token = ulid::Ulid::new().to_string();
        let mut handed: Vec<(Reservation, ClaimedDelivery)> = Vec::new();
        let mut sequences = allocate_sequences(&mut tx, items, &earlier).await?;

        for item in items {
            if let Some(key) = &item.key {
                let slot = (item.app.clone(), key.key.clone());
                let known = answered
                    .get(&slot)
                    .cloned()
                    .or_else(|| earlier.get(&slot).cloned());
                if let Some((fingerprint, stored)) = known {
                    outcomes.push(if fingerprint == key.fingerprint {
                        stored.replay()
                    } else {
                        PublishOutcome::KeyReused
                    });
                    continue;
                }
            }
            if !endpoints.contains_key(&item.app) {
                let targets = load_targets(&mut tx, &self.secrets, &item.app).await?;
                endpoints.insert(item.app.clone(), targets);
            }
            let targets = &endpoints[&item.app];
            let sequence = item.event.ordering_key.as_ref().map(|key| {
                let next = sequences
                    .get_mut(&(item.app.clone(), key.clone()))
                    .expect("allocated for every event that is written");
                *next += 1;
                *next - 1
            });
            let accepting: Vec<&Target> = targets
                .iter()
                .filter(|t| match &item.event.only_endpoint {
                    Some(only) => t.id == *only,
                    None => t.accepts(&item.event.event_type),
                })
                .collect();
            let held = match &item.event.ordering_key {
                Some(key) if !accepting.is_empty() => {
                    held_partitions(&mut tx, key, &accepting).await?
                }
                _ => HashSet::new(),
            };
            let mut published = Vec::with_capacity(accepting.len());
            let mut body: Option<Arc<[u8]>> = None;
            for target in accepting {
                let mut due_at = target.due_at(item.now);
                let mut state = match &item.event.ordering_key {
                    None => DeliveryState::Pending,
                    Some(key) => {
                        let partition = (target.id.clone(), key.clone());
                        let earlier_in_group = !touched.insert(partition);
                        ordering::initial_state(earlier_in_group || held.contains(&target.id))
                    }
                };
                let id = DeliveryId::generate();
                let reservation = match &handoff {
                    Some(handoff)
                        if state == DeliveryState::Pending
                            && due_at <= item.now
                            && target.sends_at_once(item.now) =>
                    {
                        Reservation::take(handoff, &target.id, target.endpoint.gate.max_in_flight)
                    }
                    _ => None,
                };
                if let (Some(reservation), Some(handoff)) = (reservation, &handoff) {
                    state = DeliveryState::InFlight;
                    due_at = item.now + handoff.lease();
                    let body = body
                        .get_or_insert_with(|| Arc::from(item.event.body.as_slice()))
                        .clone();
                    handed.push((
                        reservation,
                        target.handed_off(&id, item, sequence, &lease_token, body),
                    ));
                }
                woke |= state == DeliveryState::Pending && due_at <= item.now;
                published.push(Delivery {
                    id,
                    app_id: item.app.clone(),
                    event_id: item.event.id.clone(),
                    endpoint_id: target.id.clone(),
                    state,
                    due_at,
                    ordering_key: item.event.ordering_key.clone(),
                    sequence,
                    attempts: 0,
                    round_started_at: item.now,
                    last_attempt_at: None,
                    dead_reason: None,
                    dead_at: None,
                    created_at: item.now,
                });
            }
            let published = Published {
                event: Event {
                    id: item.event.id.clone(),
                    app_id: item.app.clone(),
                    event_type: item.event.event_type.clone(),
                    ordering_key: item.event.ordering_key.clone(),
                    sequence,
                    // The answer never shows the body; it is written from `item` below.
                    body: Vec::new(),
                    created_at: item.now,
                },
                deliveries: published,
            };
            if let Some(key) = &item.key {
                answered.insert(
                    (item.app.clone(), key.key.clone()),
                    (key.fingerprint.clone(), Stored::Receipt(published.clone())),
                );
                keys.push((item, key, receipt(&published)));
            }
            events.push((item, sequence));
            outcomes.push(PublishOutcome::Created(published));
        }

        // The deliveries to write are those of the events created (not copied out).
        let deliveries: Vec<&Delivery> = outcomes
            .iter()
            .filter_map(|outcome| match outcome {
                PublishOutcome::Created(published) => Some(&published.deliveries),
                _ => None,
            })
            .flatten()
            .collect();
        insert_events(&mut tx, &events).await?;
        insert_deliveries(&mut tx, &deliveries, &lease_token).await?;
        if !insert_keys(&mut tx, &keys).await? {
            tx.rollback().await?;
            return Ok(None);
        }
        tx.commit().await?;
        Reservation::hand_over(handed);
        if woke {
            self.notify_due();
        }
        Ok(Some(outcomes))
    }

    /// The stored answers for the group's keys that were used before.
    async fn stored_answers(
        &self,
        items: &[PublishItem],
    ) -> Result<HashMap<(AppId, String), (String, Stored)>> {
        let mut found = HashMap::new();
        let keyed: Vec<(&AppId, &IdempotencyKey)> = items
            .iter()
            .filter_map(|i| i.key.as_ref().map(|k| (&i.app, k)))
            .collect();
        if keyed.is_empty() {
            return Ok(found);
        }
        let batch = Batch::default()
            .text(keyed.iter().map(|(app, _)| Some(app.as_str())))
            .text(keyed.iter().map(|(_, key)| Some(key.key.as_str())));
        let rows = self
            .engine
            .query(STORED_ANSWERS.text(self.engine))
            .bind_batch(batch)
            .fetch_all(&self.writer)
            .await?;
        for row in rows {
            let app: AppId = parse_column(&row, "app_id")?;
            let status: i64 = row.try_get("status")?;
            let body: Vec<u8> = row.try_get("response")?;
            let stored = if status == RECEIPT {
                Stored::Receipt(from_receipt(&app, &body)?)
            } else {
                Stored::Answer(StoredResponse {
                    status: status as u16,
                    body,
                })
            };
            found.insert(
                (app, row.try_get("key")?),
                (row.try_get("fingerprint")?, stored),
            );
        }
        Ok(found)
    }
}

/// The `status` of an idempotency record whose `response` is a receipt (what the
/// publish wrote, rendered by the API on each answer). Earlier releases stored the
/// API's rendered answer there, with its HTTP status.
const RECEIPT: i64 = 0;

/// What an idempotency record holds.
#[derive(Clone)]
enum Stored {
    Receipt(Published),
    /// An earlier release's rendered answer (see [`StoredResponse`]).
    Answer(StoredResponse),
}

impl Stored {
    fn replay(self) -> PublishOutcome {
        match self {
            Stored::Receipt(published) => PublishOutcome::Replayed(published),
            Stored::Answer(answer) => PublishOutcome::ReplayedAnswer(answer),
        }
    }
}

/// A receipt as stored: what is needed to give the same [`Published`] back.
#[derive(serde::Serialize, serde::Deserialize)]
struct Receipt {
    event: String,
    event_type: String,
    ordering_key: Option<String>,
    sequence: Option<u64>,
    created_at: i64,
    /// (delivery, endpoint, state, due_at) as committed.
    deliveries: Vec<(String, String, String, i64)>,
}

fn receipt(published: &Published) -> Vec<u8> {
    let event = &published.event;
    serde_json::to_vec(&Receipt {
        event: event.id.to_string(),
        event_type: event.event_type.clone(),
        ordering_key: event.ordering_key.clone(),
        sequence: event.sequence,
        created_at: event.created_at.as_millis(),
        deliveries: published
            .deliveries
            .iter()
            .map(|d| {
                (
                    d.id.to_string(),
                    d.endpoint_id.to_string(),
                    d.state.as_str().to_owned(),
                    d.due_at.as_millis(),
                )
            })
            .collect(),
    })
    .expect("receipts serialize")
}

/// The [`Published`] a receipt describes: every delivery as a publish writes it
/// (attempt 0, its round starting with the event).
fn from_receipt(app: &AppId, bytes: &[u8]) -> Result<Published> {
    let corrupt = |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("receipt: {e}"));
    let receipt: Receipt = serde_json::from_slice(bytes).map_err(|e| corrupt(&e))?;
    let created_at = Timestamp::from_millis(receipt.created_at);
    let event_id: hookline_core::ids::EventId = receipt.event.parse().map_err(|e| corrupt(&e))?;
    let deliveries = receipt
        .deliveries
        .into_iter()
        .map(|(id, endpoint, state, due_at)| {
            Ok(Delivery {
                id: id.parse().map_err(|e| corrupt(&e))?,
                app_id: app.clone(),
                event_id: event_id.clone(),
                endpoint_id: endpoint.parse().map_err(|e| corrupt(&e))?,
                state: state.parse().map_err(|e| corrupt(&e))?,
                due_at: Timestamp::from_millis(due_at),
                ordering_key: receipt.ordering_key.clone(),
                sequence: receipt.sequence,
                attempts: 0,
                round_started_at: created_at,
                last_attempt_at: None,
                dead_reason: None,
                dead_at: None,
                created_at,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Published {
        event: Event {
            id: event_id,
            app_id: app.clone(),
            event_type: receipt.event_type,
            ordering_key: receipt.ordering_key,
            sequence: receipt.sequence,
            body: Vec::new(),
            created_at,
        },
        deliveries,
    })
}

/// The stored answers of the batch's (app, key) pairs that were used before.
pub(crate) static STORED_ANSWERS: Sql = Sql::new(|engine| {
    format!(
        "SELECT k.app_id, k.key, k.fingerprint, k.status, k.response FROM {} \
         JOIN idempotency_keys k ON k.app_id = v.app_id AND k.key = v.key",
        engine.rows(1, &[("app_id", Kind::Text), ("key", Kind::Text)])
    )
});

/// An enabled endpoint an app's events may go to.
struct Target {
    id: EndpointId,
    event_types: Option<Vec<String>>,
    /// Where and how to send, and the endpoint's gate (as a claim reads them).
    endpoint: claim::ClaimEndpoint,
}

impl Target {
    fn accepts(&self, event_type: &str) -> bool {
        hookline_core::event_types::subscribed(self.event_types.as_deref(), event_type)
    }

    fn due_at(&self, now: Timestamp) -> Timestamp {
        // `enabled` here is "enabled and not paused": a paused endpoint's new work is parked.
        due_for_new_work(self.endpoint.gate.enabled, &self.endpoint.gate.breaker, now)
    }

    /// Whether a fresh delivery to this endpoint may be handed off: the claim's own
    /// admission rule, asked without the database.
    fn sends_at_once(&self, now: Timestamp) -> bool {
        admission::sends_at_once(&self.endpoint.gate.admission(), now)
    }

    /// A delivery of `item` to this endpoint, as the dispatcher gets it when handed off.
    fn handed_off(
        &self,
        id: &DeliveryId,
        item: &PublishItem,
        sequence: Option<u64>,
        lease_token: &str,
        body: Arc<[u8]>,
    ) -> ClaimedDelivery {
        ClaimedDelivery {
            id: id.clone(),
            app_id: item.app.clone(),
            event_id: item.event.id.clone(),
            endpoint_id: self.id.clone(),
            lease_token: lease_token.to_owned(),
            attempts: 0,
            round_started_at: item.now,
            ordering_key: item.event.ordering_key.clone(),
            sequence,
            send_at: None,
            probe: false,
            replayed: false,
            max_in_flight: self.endpoint.gate.max_in_flight,
            destination: self.endpoint.destination.clone(),
            retry: self.endpoint.gate.retry,
            body,
        }
    }
}

/// An app's enabled endpoints, with what sending and admission need.
pub(crate) static LOAD_TARGETS: Sql = Sql::new(|_| {
    format!("SELECT event_types, {ENDPOINT_COLUMNS} FROM endpoints WHERE app_id = $1 AND enabled")
});

async fn load_targets(tx: &mut Tx, secrets: &Secrets, app: &AppId) -> Result<Vec<Target>> {
    let engine = tx.engine();
    let rows = engine
        .query(LOAD_TARGETS.text(engine))
        .bind(app.as_str())
        .fetch_all(&mut *tx)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Target {
                id: parse_column(row, "id")?,
                event_types: event_types_from_json(row.try_get("event_types")?)?,
                endpoint: claim::endpoint_from_row(secrets, row)?,
            })
        })
        .collect()
}

/// The next sequence number of an ordering key. The upsert takes the key's row
/// lock until commit, so concurrent publishes of one key are numbered in commit order.
async fn next_sequences(tx: &mut Tx, app: &AppId, key: &str, count: u64) -> Result<u64> {
    let last: i64 = tx.engine().query(
        "INSERT INTO ordering_keys (app_id, ordering_key, last_sequence) VALUES ($1, $2, $3) \
         ON CONFLICT (app_id, ordering_key) DO UPDATE SET last_sequence = ordering_keys.last_sequence + $3 \
         RETURNING last_sequence",
    )
    .bind(app.as_str())
    .bind(key)
    .bind(count as i64)
    .fetch_scalar(&mut *tx)
    .await?;
    Ok(last as u64 + 1 - count)
}

/// Reserves the sequence numbers of every ordered event the group will write,
/// key by key in (app, key) order — the lock order every transaction uses, so
/// concurrent groups sharing keys cannot deadlock. Returns the first number of
/// each key's range; events take them in group order. Events answered from an
/// earlier use of their idempotency key (or a duplicate key in the group) take
/// none, so sequences have no gaps.
async fn allocate_sequences(
    tx: &mut Tx,
    items: &[PublishItem],
    earlier: &HashMap<(AppId, String), (String, Stored)>,
) -> Result<BTreeMap<(AppId, String), u64>> {
    let mut counts: BTreeMap<(AppId, String), u64> = BTreeMap::new();
    let mut seen_keys = HashSet::new();
    for item in items {
        if let Some(key) = &item.key {
            let slot = (item.app.clone(), key.key.clone());
            if earlier.contains_key(&slot) || !seen_keys.insert(slot) {
                continue;
            }
        }
        if let Some(ordering_key) = &item.event.ordering_key {
            *counts
                .entry((item.app.clone(), ordering_key.clone()))
                .or_default() += 1;
        }
    }
    let mut first = BTreeMap::new();
    for ((app, key), count) in counts {
        let start = next_sequences(tx, &app, &key, count).await?;
        first.insert((app, key), start);
    }
    Ok(first)
}

/// The endpoints of a batch with an unfinished delivery of ordering key `$1`, with its state.
pub(crate) static HELD_PARTITIONS: Sql = Sql::new(|engine| {
    format!(
        "SELECT DISTINCT endpoint_id, state FROM deliveries \
         WHERE endpoint_id IN (SELECT endpoint_id FROM {}) AND ordering_key = $1 AND state <> 'succeeded'",
        engine.rows(2, &[("endpoint_id", Kind::Text)])
    )
});

/// The endpoints whose partition for `key` has an earlier delivery holding a new one
/// back (by each endpoint's `ordering_on_dead`).
async fn held_partitions(
    tx: &mut Tx,
    key: &str,
    targets: &[&Target],
) -> Result<HashSet<EndpointId>> {
    let engine = tx.engine();
    let endpoints = Batch::default().text(targets.iter().map(|t| Some(t.id.as_str())));
    let rows = engine
        .query(HELD_PARTITIONS.text(engine))
        .bind(key)
        .bind_batch(endpoints)
        .fetch_all(&mut *tx)
        .await?;
    let mut held = HashSet::new();
    for row in rows {
        let endpoint: EndpointId = parse_column(&row, "endpoint_id")?;
        let state: DeliveryState = parse_column(&row, "state")?;
        let on_dead = targets
            .iter()
            .find(|t| t.id == endpoint)
            .map(|t| t.endpoint.gate.on_dead)
            .unwrap_or_default();
        if on_dead.holding_states().contains(&state) {
            held.insert(endpoint);
        }
    }
    Ok(held)
}

static INSERT_EVENTS: Sql = Sql::new(|engine| {
    format!(
        "INSERT INTO events (id, app_id, event_type, ordering_key, sequence, body, created_at) \
         SELECT id, app_id, event_type, ordering_key, sequence, body, created_at FROM {}",
        engine.rows(
            1,
            &[
                ("id", Kind::Text),
                ("app_id", Kind::Text),
                ("event_type", Kind::Text),
                ("ordering_key", Kind::Text),
                ("sequence", Kind::Int),
                ("body", Kind::Bytes),
                ("created_at", Kind::Int),
            ]
        )
    )
});

async fn insert_events(tx: &mut Tx, events: &[(&PublishItem, Option<u64>)]) -> Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let batch = Batch::default()
        .text(events.iter().map(|(item, _)| Some(item.event.id.as_str())))
        .text(events.iter().map(|(item, _)| Some(item.app.as_str())))
        .text(
            events
                .iter()
                .map(|(item, _)| Some(item.event.event_type.as_str())),
        )
        .text(
            events
                .iter()
                .map(|(item, _)| item.event.ordering_key.as_deref()),
        )
        .int(
            events
                .iter()
                .map(|(_, sequence)| sequence.map(|s| s as i64)),
        )
        .bytes(
            events
                .iter()
                .map(|(item, _)| Some(item.event.body.as_slice())),
        )
        .int(events.iter().map(|(item, _)| Some(item.now.as_millis())));
    let engine = tx.engine();
    engine
        .query(INSERT_EVENTS.text(engine))
        .bind_batch(batch)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// `$1`: the lease token of the deliveries written in flight (handed off).
static INSERT_DELIVERIES: Sql = Sql::new(|engine| {
    format!(
        "INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, ordering_key, sequence, \
         attempts, round_started_at, created_at, updated_at, lease_token) \
         SELECT id, app_id, event_id, endpoint_id, state, due_at, ordering_key, sequence, \
         0, created_at, created_at, created_at, CASE WHEN state = 'in_flight' THEN $1 END FROM {}",
        engine.rows(
            2,
            &[
                ("id", Kind::Text),
                ("app_id", Kind::Text),
                ("event_id", Kind::Text),
                ("endpoint_id", Kind::Text),
                ("state", Kind::Text),
                ("due_at", Kind::Int),
                ("ordering_key", Kind::Text),
                ("sequence", Kind::Int),
                ("created_at", Kind::Int),
            ]
        )
    )
});

/// Writes `deliveries` (all created at their round's start); those in flight
/// (handed off) under `lease_token`.
async fn insert_deliveries(tx: &mut Tx, deliveries: &[&Delivery], lease_token: &str) -> Result<()> {
    if deliveries.is_empty() {
        return Ok(());
    }
    debug_assert!(deliveries
        .iter()
        .all(|d| d.round_started_at == d.created_at));
    let batch = Batch::default()
        .text(deliveries.iter().map(|d| Some(d.id.as_str())))
        .text(deliveries.iter().map(|d| Some(d.app_id.as_str())))
        .text(deliveries.iter().map(|d| Some(d.event_id.as_str())))
        .text(deliveries.iter().map(|d| Some(d.endpoint_id.as_str())))
        .text(deliveries.iter().map(|d| Some(d.state.as_str())))
        .int(deliveries.iter().map(|d| Some(d.due_at.as_millis())))
        .text(deliveries.iter().map(|d| d.ordering_key.as_deref()))
        .int(deliveries.iter().map(|d| d.sequence.map(|s| s as i64)))
        .int(deliveries.iter().map(|d| Some(d.created_at.as_millis())));
    let engine = tx.engine();
    engine
        .query(INSERT_DELIVERIES.text(engine))
        .bind(lease_token)
        .bind_batch(batch)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

// `WHERE true`: SQLite reads `ON CONFLICT` after `SELECT … FROM t` as a join's clause without it.
static INSERT_KEYS: Sql = Sql::new(|engine| {
    format!(
        "INSERT INTO idempotency_keys (app_id, key, fingerprint, status, response, created_at) \
         SELECT app_id, key, fingerprint, status, response, created_at FROM {} WHERE true \
         ON CONFLICT (app_id, key) DO NOTHING",
        engine.rows(
            1,
            &[
                ("app_id", Kind::Text),
                ("key", Kind::Text),
                ("fingerprint", Kind::Text),
                ("status", Kind::Int),
                ("response", Kind::Bytes),
                ("created_at", Kind::Int),
            ]
        )
    )
});

/// Stores the answers under their keys; `false` if a concurrent transaction
/// committed one of the keys first (PostgreSQL made this insert wait for it).
async fn insert_keys(
    tx: &mut Tx,
    keys: &[(&PublishItem, &IdempotencyKey, Vec<u8>)],
) -> Result<bool> {
    if keys.is_empty() {
        return Ok(true);
    }
    let batch = Batch::default()
        .text(keys.iter().map(|(item, _, _)| Some(item.app.as_str())))
        .text(keys.iter().map(|(_, key, _)| Some(key.key.as_str())))
        .text(
            keys.iter()
                .map(|(_, key, _)| Some(key.fingerprint.as_str())),
        )
        .int(keys.iter().map(|_| Some(RECEIPT)))
        .bytes(keys.iter().map(|(_, _, receipt)| Some(receipt.as_slice())))
        .int(keys.iter().map(|(item, _, _)| Some(item.now.as_millis())));
    let engine = tx.engine();
    let written = engine
        .query(INSERT_KEYS.text(engine))
        .bind_batch(batch)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    Ok(written == keys.len() as u64)
}
