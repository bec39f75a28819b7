//! Publishing: the outbox write and `Idempotency-Key`, in steps.
//!
//! A publish of one or more events (of any apps) is one atomic write, driven
//! by its caller (the API's publisher, `hookline_api::publish`):
//! [`Events::begin_publish`] reads what the items' idempotency keys answered
//! before, takes each app's [snapshot](crate::snapshots) (its enabled
//! endpoints, from memory), routes each new event (the endpoints subscribed to
//! its type whose payload filter passes) and, for ordered events only, opens a
//! transaction that numbers them and reads the state of their ordering
//! partitions — one [`Draft`] per delivery to write. The caller plans each
//! draft's first state (`hookline_core::publish::first_state`, and whether it
//! hands the delivery to its dispatcher), and [`Publish::commit`] writes the
//! events, the deliveries as planned and the keys' receipts in **one
//! statement** on PostgreSQL (one script on SQLite) that first checks the
//! snapshots: if one is stale, nothing is written and the caller begins again.
//! Without ordered events, without an idempotency key (whose earlier answer is
//! read first) and with its apps' snapshots kept, a publish is that one
//! statement: a single round trip (docs/engine-v4.md, "The publish: one
//! write"). The store plans no delivery.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use crate::db::Tx;
use hookline_core::claim::EndpointGate;
use hookline_core::ids::{AppId, DeliveryId, EndpointId};
use hookline_core::model::DeliveryState;
use hookline_core::publish::{self, FirstState, KeyUse, Partition};
use hookline_core::time::Timestamp;

use crate::db::{Batch, Kind, Sql};
use crate::fanout::{encode_targets, Held, NewFanout};
use crate::records::{
    ClaimedDelivery, Delivery, Event, IdempotencyKey, NewEvent, PublishOutcome, Published,
    StoredResponse,
};
use crate::sequences::{self, Numbering};
use crate::snapshots::{self, AppSnapshot, Target};
use crate::Engine;
use crate::Events;
use crate::{parse_column, Result, Store, StoreError};

/// The most events a caller should commit in one group.
pub const MAX_GROUP: usize = 512;

/// One event to publish.
#[derive(Debug, Clone)]
pub struct PublishItem {
    pub app: AppId,
    pub event: NewEvent,
    pub key: Option<IdempotencyKey>,
    /// When the request arrived: the event's `created_at` and its deliveries' due time.
    pub now: Timestamp,
}

/// One delivery a publish is about to write, with what its first state depends on.
#[derive(Debug, Clone)]
pub struct Draft {
    /// The item (of those the publish began with) whose event it delivers.
    pub item: usize,
    pub endpoint: EndpointId,
    /// The endpoint's gate, as its app's snapshot holds it (checked by the write).
    pub gate: EndpointGate,
    /// Its ordering partition; `None` if the event has no ordering key.
    pub partition: Option<Partition>,
}

/// What a publish wrote, once committed.
#[derive(Debug)]
pub struct Committed {
    /// One outcome per item, in order.
    pub outcomes: Vec<PublishOutcome>,
    /// The deliveries planned as handed off (written in flight), as the
    /// dispatcher sends them, in draft order.
    pub handed: Vec<ClaimedDelivery>,
}

/// What an item of a publish comes to, as far as its idempotency key tells.
#[derive(Debug, Clone)]
enum Resolved {
    /// A new event, with its sequence number if ordered.
    New { sequence: Option<u64> },
    /// Answered from an earlier use of its key.
    Earlier(PublishOutcome),
    /// Its key was used by an earlier item of this publish with the same request.
    SameAs(usize),
    /// Its key was used by an earlier item of this publish with another request.
    KeyReused,
}

/// A publish in progress: what it read ([`Events::begin_publish`]) and, if it
/// has ordered events, its open transaction. Dropped without
/// [`Publish::commit`], it writes nothing.
pub struct Publish<'a> {
    store: Store,
    /// Open only for ordered events: their numbers and partitions were read in it.
    tx: Option<Tx>,
    /// The snapshot of each app the publish writes events of.
    apps: HashMap<AppId, Arc<AppSnapshot>>,
    items: &'a [PublishItem],
    resolved: Vec<Resolved>,
    drafts: Vec<Draft>,
    /// Each draft's endpoint, with where and how to send.
    targets: Vec<Arc<Target>>,
    /// Events each endpoint's payload filter dropped, by (endpoint, unix minute).
    dropped: BTreeMap<(EndpointId, i64), i64>,
}

impl std::fmt::Debug for Publish<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publish")
            .field("items", &self.items.len())
            .field("drafts", &self.drafts.len())
            .finish()
    }
}

impl Events<'_> {
    /// Begins publishing `items` (of any apps): reads what their idempotency
    /// keys answered before, routes each new event to the enabled endpoints
    /// of its app's snapshot subscribed to it (or only the one it names), and
    /// for ordered events opens the publish's transaction, numbers them and
    /// reads the partitions their deliveries join. Of concurrent publishes
    /// using one key exactly one commits (the others' [`Publish::commit`] finds
    /// out and they begin again, to be answered from it). An app deleted since
    /// the caller found it is [`StoreError::AppNotFound`].
    #[tracing::instrument(skip_all, fields(count = items.len()))]
    pub async fn begin_publish<'a>(&self, items: &'a [PublishItem]) -> Result<Publish<'a>> {
        let earlier = self.stored_answers(items).await?;
        let uses = publish::resolve_keys(
            items.iter().map(|item| {
                let key = item.key.as_ref()?;
                let slot = (item.app.clone(), key.key.clone());
                Some((slot, key.fingerprint.as_str()))
            }),
            |slot| Some(earlier.get(slot)?.0.as_str()),
        );
        // The items that make a new event.
        let new = || {
            items
                .iter()
                .zip(&uses)
                .filter(|(_, key_use)| **key_use == KeyUse::New)
                .map(|(item, _)| item)
        };
        let mut apps: HashMap<AppId, Arc<AppSnapshot>> = HashMap::new();
        for item in new() {
            if !apps.contains_key(&item.app) {
                let snapshot = self
                    .app_snapshot(item.app.as_str())
                    .await?
                    .ok_or(StoreError::AppNotFound)?;
                apps.insert(item.app.clone(), snapshot);
            }
        }
        let ordered = new().any(|item| item.event.ordering_key.is_some());
        let mut tx = match ordered {
            true => Some(self.hot.begin().await?),
            false => None,
        };
        let mut sequences = match &mut tx {
            Some(tx) => allocate_sequences(tx, items, &uses).await?,
            None => BTreeMap::new(),
        };
        // Partitions that got a delivery earlier in this group (not yet visible to queries).
        let mut touched: HashSet<(EndpointId, String)> = HashSet::new();
        let mut resolved = Vec::with_capacity(items.len());
        let mut drafts = Vec::new();
        let mut targets = Vec::new();
        let mut dropped = BTreeMap::new();

        for (index, (item, key_use)) in items.iter().zip(uses).enumerate() {
            match key_use {
                KeyUse::New => {}
                KeyUse::Earlier { same_request } => {
                    let key = item.key.as_ref().expect("an earlier use has a key");
                    let slot = (item.app.clone(), key.key.clone());
                    resolved.push(Resolved::Earlier(if same_request {
                        earlier[&slot].1.clone().replay()
                    } else {
                        PublishOutcome::KeyReused
                    }));
                    continue;
                }
                KeyUse::SameAs(first) => {
                    resolved.push(Resolved::SameAs(first));
                    continue;
                }
                KeyUse::KeyReused => {
                    resolved.push(Resolved::KeyReused);
                    continue;
                }
            }
            let sequence = item.event.ordering_key.as_ref().map(|key| {
                let next = sequences
                    .get_mut(&(item.app.clone(), key.clone()))
                    .expect("allocated for every event that is written");
                *next += 1;
                *next - 1
            });
            resolved.push(Resolved::New { sequence });
            // The payload, parsed once per event, if an endpoint's filter asks for it.
            let mut payload: Option<serde_json::Value> = None;
            let accepting: Vec<&Arc<Target>> = apps[&item.app]
                .targets
                .iter()
                .filter(|t| match &item.event.only_endpoint {
                    Some(only) => t.id == *only,
                    None => t.accepts(&item.event.event_type),
                })
                .filter(|t| match (&t.filter, &item.event.only_endpoint) {
                    (Some(filter), None) => {
                        let payload = payload.get_or_insert_with(|| payload_of(&item.event.body));
                        let passes = filter.matches(payload);
                        if !passes {
                            let minute = item.now.as_millis().div_euclid(60_000);
                            *dropped.entry((t.id.clone(), minute)).or_default() += 1;
                        }
                        passes
                    }
                    // A test send goes to its endpoint whatever the filter.
                    _ => true,
                })
                .collect();
            let mut unfinished = match &item.event.ordering_key {
                Some(key) if !accepting.is_empty() => {
                    let tx = tx.as_mut().expect("opened for ordered events");
                    unfinished_partitions(tx, key, &accepting).await?
                }
                _ => HashMap::new(),
            };
            for target in accepting {
                let partition = item.event.ordering_key.as_ref().map(|key| Partition {
                    earlier_in_group: !touched.insert((target.id.clone(), key.clone())),
                    unfinished: unfinished.remove(&target.id).unwrap_or_default(),
                });
                drafts.push(Draft {
                    item: index,
                    endpoint: target.id.clone(),
                    gate: target.endpoint.gate,
                    partition,
                });
                targets.push(Arc::clone(target));
            }
        }
        Ok(Publish {
            store: Store::clone(self),
            tx,
            apps,
            items,
            resolved,
            drafts,
            targets,
            dropped,
        })
    }
}

/// The payload (`data`) of an event's envelope; `null` if the body has none.
fn payload_of(body: &[u8]) -> serde_json::Value {
    #[derive(serde::Deserialize)]
    struct Envelope {
        #[serde(default)]
        data: serde_json::Value,
    }
    serde_json::from_slice::<Envelope>(body).map_or(serde_json::Value::Null, |e| e.data)
}

impl Publish<'_> {
    /// The deliveries to write, in item order; the caller plans one first state for each.
    pub fn drafts(&self) -> &[Draft] {
        &self.drafts
    }

    /// Writes the new events, their deliveries in the planned first states (one
    /// per [draft](Publish::drafts), in order; those `in_flight` leased to the
    /// dispatcher they are handed to) and the receipts of their keys, and
    /// commits; wakes dispatchers if a delivery is due now. `None` if a
    /// concurrent publish committed one of the keys first (rolled back: begin again).
    #[tracing::instrument(level = "debug", name = "publish_commit", skip_all)]
    pub async fn commit(mut self, plan: &[FirstState]) -> Result<Option<Committed>> {
        assert_eq!(plan.len(), self.drafts.len(), "one first state per draft");
        let lease_token = ulid::Ulid::new().to_string();
        // The `fanout` rows' lease token is another than the rows' (see `Turn`).
        let fanout_token = format!("{lease_token}f");
        let mut planned = self.drafts.iter().zip(&self.targets).zip(plan).peekable();
        let mut outcomes: Vec<PublishOutcome> = Vec::with_capacity(self.items.len());
        let mut handed = Vec::new();
        let mut events = Vec::new();
        let mut keys = Vec::new();
        let mut woke = false;
        // Per event written as a `fanout` row: (item, targets, n, due, leased).
        let mut fanout: Vec<(usize, String, usize, Timestamp, bool)> = Vec::new();
        let mut lazy_ids: HashSet<DeliveryId> = HashSet::new();
        // Each delivery's place in its endpoint's numbers, and per handed
        // delivery its endpoint's and its `k` (numbered once committed).
        let mut numbering = Numbering::default();
        let mut handed_ks: Vec<u64> = Vec::new();
        for (index, (item, resolved)) in self.items.iter().zip(&self.resolved).enumerate() {
            let sequence = match resolved {
                Resolved::New { sequence } => *sequence,
                Resolved::Earlier(outcome) => {
                    outcomes.push(outcome.clone());
                    continue;
                }
                Resolved::SameAs(first) => {
                    outcomes.push(match &outcomes[*first] {
                        PublishOutcome::Created(published) => {
                            PublishOutcome::Replayed(published.clone())
                        }
                        other => other.clone(),
                    });
                    continue;
                }
                Resolved::KeyReused => {
                    outcomes.push(PublishOutcome::KeyReused);
                    continue;
                }
            };
            let mut deliveries = Vec::new();
            let mut body: Option<Arc<[u8]>> = None;
            while let Some(((_, target), first)) =
                planned.next_if(|((draft, _), _)| draft.item == index)
            {
                // Known from the event and the target's place, as the fan-out row
                // will tell it (docs/engine-v4.md).
                let id = DeliveryId::of_target(&item.event.id, deliveries.len());
                let k = numbering.add(item.event.id.as_str(), deliveries.len(), &target.id, &id);
                if first.state == DeliveryState::InFlight {
                    handed_ks.push(k);
                    let body = body
                        .get_or_insert_with(|| Arc::from(item.event.body.as_slice()))
                        .clone();
                    // An unordered event's handed deliveries are its `fanout` row's.
                    let token = match item.event.ordering_key {
                        None => &fanout_token,
                        Some(_) => &lease_token,
                    };
                    handed.push(target.handed_off(&id, item, sequence, token, body));
                }
                woke |= first.state == DeliveryState::Pending && first.due_at <= item.now;
                deliveries.push(Delivery {
                    id,
                    app_id: item.app.clone(),
                    event_id: item.event.id.clone(),
                    endpoint_id: target.id.clone(),
                    state: first.state,
                    due_at: first.due_at,
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
            // Deliveries with nothing to say yet are one `fanout` row, not rows
            // of their own (docs/engine-v4.md): those handed to this process's
            // dispatcher (the row leased), else those due now. An ordered event's
            // deliveries are state of their partition and are all written.
            if item.event.ordering_key.is_none() {
                let handed_here = deliveries
                    .iter()
                    .any(|d| d.state == DeliveryState::InFlight);
                let lazy = |d: &Delivery| match handed_here {
                    true => d.state == DeliveryState::InFlight,
                    false => d.state == DeliveryState::Pending && d.due_at <= item.now,
                };
                let n = deliveries.iter().filter(|d| lazy(d)).count();
                if n > 0 {
                    lazy_ids.extend(deliveries.iter().filter(|d| lazy(d)).map(|d| d.id.clone()));
                    fanout.push((
                        index,
                        encode_targets(
                            deliveries.iter().map(|d| lazy(d).then_some(&d.endpoint_id)),
                        ),
                        n,
                        match handed_here {
                            // The lease's end: that of the handed deliveries.
                            true => deliveries
                                .iter()
                                .filter(|d| d.state == DeliveryState::InFlight)
                                .map(|d| d.due_at)
                                .max()
                                .expect("handed"),
                            false => item.now,
                        },
                        handed_here,
                    ));
                }
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
                deliveries,
            };
            if let Some(key) = &item.key {
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
            .filter(|d| !lazy_ids.contains(&d.id))
            .collect();
        let rows: Vec<NewFanout<'_>> = fanout
            .iter()
            .map(|(index, targets, n, due_at, leased)| {
                let item = &self.items[*index];
                NewFanout {
                    event_id: &item.event.id,
                    app_id: &item.app,
                    targets: targets.clone(),
                    n: *n,
                    due_at: *due_at,
                    leased: *leased,
                    created_at: item.now,
                }
            })
            .collect();
        let write = Write {
            apps: self.apps.values().map(|app| app.check()).collect(),
            events: &events,
            fanout: &rows,
            fanout_token: &fanout_token,
            deliveries: &deliveries,
            lease_token: &lease_token,
            keys: &keys,
            dropped: &self.dropped,
            numbering: &numbering,
            created_at: self
                .items
                .first()
                .map_or(Timestamp::from_millis(0), |i| i.now),
        };
        match write.run(&self.store, self.tx.take()).await? {
            Written::Done(bases) => {
                let bases: HashMap<EndpointId, u64> = bases.into_iter().collect();
                for (delivery, k) in handed.iter_mut().zip(handed_ks) {
                    delivery.endpoint_sequence = bases.get(&delivery.endpoint_id).map(|b| b + k);
                }
            }
            Written::Stale => {
                self.store.snapshots.forget(self.apps.keys());
                return Ok(None);
            }
            Written::KeyTaken => return Ok(None),
        }
        for row in rows.iter().filter(|row| row.leased) {
            let held = Held {
                remaining: row.n,
                created_at: row.created_at,
                until: row.due_at,
            };
            self.store.fanout.hold(row.event_id, &fanout_token, held);
        }
        if woke {
            self.store.notify_due();
        }
        Ok(Some(Committed { outcomes, handed }))
    }
}

impl Events<'_> {
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
            .fetch_all(&self.hot)
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
         JOIN idempotency_keys k ON k.app_id = v.app_id AND k.key = v.key WHERE {} AND {}",
        engine.rows(1, &[("app_id", Kind::Text), ("key", Kind::Text)]),
        engine.probes("k.app_id", 1),
        engine.probes("k.key", 2)
    )
});

impl Target {
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
            // Known once the publish's write has numbered it.
            endpoint_sequence: None,
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
/// earlier use of their idempotency key (or a duplicate key in the group: what
/// `uses` says of each) take none, so sequences have no gaps.
async fn allocate_sequences(
    tx: &mut Tx,
    items: &[PublishItem],
    uses: &[KeyUse],
) -> Result<BTreeMap<(AppId, String), u64>> {
    let mut counts: BTreeMap<(AppId, String), u64> = BTreeMap::new();
    for (item, key_use) in items.iter().zip(uses) {
        if *key_use != KeyUse::New {
            continue;
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

/// The states of the unfinished deliveries of ordering key `key` per endpoint of `targets`.
async fn unfinished_partitions(
    tx: &mut Tx,
    key: &str,
    targets: &[&Arc<Target>],
) -> Result<HashMap<EndpointId, Vec<DeliveryState>>> {
    let engine = tx.engine();
    let endpoints = Batch::default().text(targets.iter().map(|t| Some(t.id.as_str())));
    let rows = engine
        .query(HELD_PARTITIONS.text(engine))
        .bind(key)
        .bind_batch(endpoints)
        .fetch_all(&mut *tx)
        .await?;
    let mut unfinished: HashMap<EndpointId, Vec<DeliveryState>> = HashMap::new();
    for row in rows {
        unfinished
            .entry(parse_column(&row, "endpoint_id")?)
            .or_default()
            .push(parse_column(&row, "state")?);
    }
    Ok(unfinished)
}

const EVENT_COLUMNS: &[(&str, Kind)] = &[
    ("id", Kind::Text),
    ("app_id", Kind::Text),
    ("event_type", Kind::Text),
    ("ordering_key", Kind::Text),
    ("sequence", Kind::Int),
    ("body", Kind::Bytes),
    ("created_at", Kind::Int),
];

const FANOUT_COLUMNS: &[(&str, Kind)] = &[
    ("event_id", Kind::Text),
    ("app_id", Kind::Text),
    ("targets", Kind::Text),
    ("n", Kind::Int),
    ("due_at", Kind::Int),
    ("leased", Kind::Int),
    ("created_at", Kind::Int),
];

const DELIVERY_COLUMNS: &[(&str, Kind)] = &[
    ("id", Kind::Text),
    ("app_id", Kind::Text),
    ("event_id", Kind::Text),
    ("endpoint_id", Kind::Text),
    ("state", Kind::Text),
    ("due_at", Kind::Int),
    ("ordering_key", Kind::Text),
    ("sequence", Kind::Int),
    ("created_at", Kind::Int),
];

const KEY_COLUMNS: &[(&str, Kind)] = &[
    ("app_id", Kind::Text),
    ("key", Kind::Text),
    ("fingerprint", Kind::Text),
    ("status", Kind::Int),
    ("response", Kind::Bytes),
    ("created_at", Kind::Int),
];

const DROP_COLUMNS: &[(&str, Kind)] = &[
    ("endpoint_id", Kind::Text),
    ("minute", Kind::Int),
    ("dropped", Kind::Int),
];

/// The publish's one write: the check of its apps' snapshots, then the keys'
/// receipts, the endpoints' sequence counters ([`crate::sequences`]), the
/// events with their numbers, their `fanout` rows, the deliveries written as
/// rows, the numbers' runs and the filters' drop counts, each statement
/// writing only if the check holds. On PostgreSQL one statement
/// (data-modifying `WITH`s, the check read once); on SQLite a script run in
/// one call to the writer's thread. It answers whether the check held, and
/// each numbered endpoint's number before this publish's (`bases`).
/// Parameters, in order: the check batch ([`snapshots::CHECK_COLUMNS`]), the
/// `fanout` rows' lease token, the rows' lease token, then one batch per
/// table, then the runs and the places. The keys are inserted without `ON
/// CONFLICT`: a key a concurrent publish committed first fails the write as
/// a unique violation (on PostgreSQL after waiting for that publish).
pub(crate) static WRITE: Sql = Sql::new(|engine| {
    // Parameters are numbered in the order they are bound.
    let mut at = 1;
    let mut take = |places: usize| {
        at += places;
        at - places
    };
    let check_at = take(engine.places(snapshots::CHECK_COLUMNS));
    let (fanout_token, lease_token) = (take(1), take(1));
    let mut batch = |columns| engine.rows(take(engine.places(columns)), columns);
    let events = batch(EVENT_COLUMNS);
    let fanout = batch(FANOUT_COLUMNS);
    let deliveries = batch(DELIVERY_COLUMNS);
    let keys = batch(KEY_COLUMNS);
    let drops = batch(DROP_COLUMNS);
    let runs = batch(sequences::RUN_COLUMNS);
    let places = batch(sequences::PLACE_COLUMNS);
    // A batch under another name than `v`, to join it.
    let named = |table: &str, name: &str| match table.strip_suffix(" AS v") {
        Some(table) => format!("{table} AS {name}"),
        // PostgreSQL's `unnest(…) AS v(columns)`.
        None => table.replacen(" AS v(", &format!(" AS {name}("), 1),
    };
    let check = snapshots::check(engine, check_at);
    // Each statement's condition: the check, read once on PostgreSQL.
    let holds = match engine {
        Engine::Postgres => "(SELECT ok FROM ok)".to_owned(),
        Engine::Sqlite => check.clone(),
    };
    // The endpoints' counters, in endpoint order (the order every publish
    // takes their locks in); on PostgreSQL after the keys, whose inserts
    // wait for a concurrent publish of one of them: keys, then counters.
    let count = |after_keys: &str| {
        format!(
            "INSERT INTO endpoint_sequences (endpoint_id, last_seq) \
             SELECT endpoint_id, n FROM {runs} WHERE {holds}{after_keys} ORDER BY endpoint_id \
             ON CONFLICT (endpoint_id) DO UPDATE SET last_seq = endpoint_sequences.last_seq + excluded.last_seq"
        )
    };
    // Each endpoint's number before this publish's, and each event's numbers
    // by place: relations the writes read (CTEs on PostgreSQL, where the
    // counters' new values are the upsert's RETURNING; on SQLite the table,
    // upserted by the statement before).
    let (bases, seqs) = match engine {
        Engine::Postgres => ("bases".to_owned(), "seqs".to_owned()),
        Engine::Sqlite => {
            let bases = format!(
                "(SELECT r.endpoint_id AS endpoint_id, s.last_seq - r.n AS base, \
                  r.deliveries AS deliveries, r.created_at AS created_at \
                  FROM {} JOIN endpoint_sequences s ON s.endpoint_id = r.endpoint_id)",
                named(&runs, "r")
            );
            let seqs = format!(
                "(SELECT p.event_id AS event_id, group_concat(b.base + p.k, ',' ORDER BY p.place) AS seqs \
                  FROM {} JOIN {bases} b ON b.endpoint_id = p.endpoint_id GROUP BY p.event_id)",
                named(&places, "p")
            );
            (bases, seqs)
        }
    };
    let insert_keys = format!(
        "INSERT INTO idempotency_keys (app_id, key, fingerprint, status, response, created_at) \
         SELECT app_id, key, fingerprint, status, response, created_at FROM {keys} WHERE {holds}"
    );
    let writes = [
        format!(
            "INSERT INTO events (id, app_id, event_type, ordering_key, sequence, body, created_at, seqs) \
             SELECT v.id, v.app_id, v.event_type, v.ordering_key, v.sequence, v.body, v.created_at, n.seqs \
             FROM {events} LEFT JOIN {seqs} n ON n.event_id = v.id WHERE {holds}"
        ),
        format!(
            "INSERT INTO fanout (event_id, app_id, targets, n, due_at, lease_token, created_at) \
             SELECT event_id, app_id, targets, n, due_at, \
                    CASE WHEN leased = 1 THEN ${fanout_token} ELSE NULL END, created_at \
             FROM {fanout} WHERE {holds}"
        ),
        format!(
            "INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, ordering_key, \
             sequence, attempts, round_started_at, created_at, updated_at, lease_token) \
             SELECT id, app_id, event_id, endpoint_id, state, due_at, ordering_key, sequence, \
             0, created_at, created_at, created_at, CASE WHEN state = 'in_flight' THEN ${lease_token} END \
             FROM {deliveries} WHERE {holds}"
        ),
        format!(
            "INSERT INTO sequence_runs (endpoint_id, first_seq, deliveries, created_at) \
             SELECT endpoint_id, base + 1, deliveries, created_at FROM {bases} b WHERE {holds}"
        ),
        format!(
            "INSERT INTO filter_drops (endpoint_id, minute, dropped) \
             SELECT endpoint_id, minute, dropped FROM {drops} WHERE {holds} \
             ON CONFLICT (endpoint_id, minute) DO UPDATE SET dropped = filter_drops.dropped + excluded.dropped"
        ),
    ];
    match engine {
        Engine::Postgres => {
            let writes: Vec<String> = writes
                .iter()
                .enumerate()
                .map(|(i, statement)| format!(", w{i} AS ({statement})"))
                .collect();
            format!(
                "WITH ok AS MATERIALIZED (SELECT {check} AS ok), \
                 keyed AS ({insert_keys} RETURNING 1), \
                 counted AS ({} RETURNING endpoint_id, last_seq), \
                 bases AS (SELECT r.endpoint_id, c.last_seq - r.n AS base, r.deliveries, r.created_at \
                   FROM {} JOIN counted c ON c.endpoint_id = r.endpoint_id), \
                 seqs AS (SELECT p.event_id, string_agg((b.base + p.k)::text, ',' ORDER BY p.place) AS seqs \
                   FROM {} JOIN bases b ON b.endpoint_id = p.endpoint_id GROUP BY p.event_id){} \
                 SELECT ok, (SELECT string_agg(endpoint_id || ' ' || base::text, ',') FROM bases) AS bases \
                 FROM ok",
                count(" AND (SELECT count(*) FROM keyed) >= 0"),
                named(&runs, "r"),
                named(&places, "p"),
                writes.concat()
            )
        }
        Engine::Sqlite => format!(
            "{insert_keys}; {}; {}; \
             SELECT {check} AS ok, (SELECT group_concat(endpoint_id || ' ' || base, ',') FROM {bases}) AS bases",
            count(""),
            writes.join("; ")
        ),
    }
});

/// Whether a failed write lost an idempotency key to a concurrent publish:
/// only the keys' own constraint (another unique violation — an event
/// written twice — is an error, not a race to run again).
fn key_taken(error: &dyn sqlx::error::DatabaseError) -> bool {
    error.is_unique_violation()
        && match error.constraint() {
            Some(constraint) => constraint == "idempotency_keys_pkey",
            // SQLite names no constraint; its message names the columns.
            None => error.message().contains("idempotency_keys."),
        }
}

/// What [`Write::run`] came to.
enum Written {
    /// Each numbered endpoint's number before this publish's.
    Done(Vec<(EndpointId, u64)>),
    /// A snapshot was stale: nothing was written.
    Stale,
    /// A concurrent publish committed one of the keys first: nothing was written.
    KeyTaken,
}

/// What a publish writes ([`WRITE`]).
struct Write<'a> {
    /// Each app's (id, config version, endpoints' versions) as its snapshot read them.
    apps: Vec<(&'a str, i64, Option<&'a str>)>,
    events: &'a [(&'a PublishItem, Option<u64>)],
    fanout: &'a [NewFanout<'a>],
    fanout_token: &'a str,
    /// The deliveries written as rows, those in flight (handed off) under `lease_token`.
    deliveries: &'a [&'a Delivery],
    lease_token: &'a str,
    keys: &'a [(&'a PublishItem, &'a IdempotencyKey, Vec<u8>)],
    dropped: &'a BTreeMap<(EndpointId, i64), i64>,
    numbering: &'a Numbering,
    /// When the runs were made (retention counts from it).
    created_at: Timestamp,
}

impl Write<'_> {
    /// Writes and commits: in `tx` if the publish has one; else as one
    /// statement on PostgreSQL, and in a transaction of its own on SQLite.
    async fn run(&self, store: &Store, tx: Option<Tx>) -> Result<Written> {
        if self.events.is_empty() {
            // Every item was answered from an earlier use of its key.
            if let Some(tx) = tx {
                tx.commit().await?;
            }
            return Ok(Written::Done(Vec::new()));
        }
        debug_assert!(self
            .deliveries
            .iter()
            .all(|d| d.round_started_at == d.created_at));
        let engine = store.engine;
        let check = Batch::default()
            .text(self.apps.iter().map(|(app, _, _)| Some(*app)))
            .int(self.apps.iter().map(|(_, version, _)| Some(*version)))
            .text(self.apps.iter().map(|(_, _, endpoints)| *endpoints));
        let events = Batch::default()
            .text(
                self.events
                    .iter()
                    .map(|(item, _)| Some(item.event.id.as_str())),
            )
            .text(self.events.iter().map(|(item, _)| Some(item.app.as_str())))
            .text(
                self.events
                    .iter()
                    .map(|(item, _)| Some(item.event.event_type.as_str())),
            )
            .text(
                self.events
                    .iter()
                    .map(|(item, _)| item.event.ordering_key.as_deref()),
            )
            .int(
                self.events
                    .iter()
                    .map(|(_, sequence)| sequence.map(|s| s as i64)),
            )
            .bytes(
                self.events
                    .iter()
                    .map(|(item, _)| Some(item.event.body.as_slice())),
            )
            .int(
                self.events
                    .iter()
                    .map(|(item, _)| Some(item.now.as_millis())),
            );
        let fanout = Batch::default()
            .text(self.fanout.iter().map(|r| Some(r.event_id.as_str())))
            .text(self.fanout.iter().map(|r| Some(r.app_id.as_str())))
            .text(self.fanout.iter().map(|r| Some(r.targets.as_str())))
            .int(self.fanout.iter().map(|r| Some(r.n as i64)))
            .int(self.fanout.iter().map(|r| Some(r.due_at.as_millis())))
            .int(self.fanout.iter().map(|r| Some(i64::from(r.leased))))
            .int(self.fanout.iter().map(|r| Some(r.created_at.as_millis())));
        let deliveries = Batch::default()
            .text(self.deliveries.iter().map(|d| Some(d.id.as_str())))
            .text(self.deliveries.iter().map(|d| Some(d.app_id.as_str())))
            .text(self.deliveries.iter().map(|d| Some(d.event_id.as_str())))
            .text(self.deliveries.iter().map(|d| Some(d.endpoint_id.as_str())))
            .text(self.deliveries.iter().map(|d| Some(d.state.as_str())))
            .int(self.deliveries.iter().map(|d| Some(d.due_at.as_millis())))
            .text(self.deliveries.iter().map(|d| d.ordering_key.as_deref()))
            .int(self.deliveries.iter().map(|d| d.sequence.map(|s| s as i64)))
            .int(
                self.deliveries
                    .iter()
                    .map(|d| Some(d.created_at.as_millis())),
            );
        // In (app, key) order, the order every publish takes these rows'
        // locks in, so concurrent publishes sharing keys cannot deadlock.
        let mut keys: Vec<_> = self.keys.iter().collect();
        keys.sort_by(|a, b| (&a.0.app, &a.1.key).cmp(&(&b.0.app, &b.1.key)));
        let keys = Batch::default()
            .text(keys.iter().map(|(item, _, _)| Some(item.app.as_str())))
            .text(keys.iter().map(|(_, key, _)| Some(key.key.as_str())))
            .text(
                keys.iter()
                    .map(|(_, key, _)| Some(key.fingerprint.as_str())),
            )
            .int(keys.iter().map(|_| Some(RECEIPT)))
            .bytes(keys.iter().map(|(_, _, receipt)| Some(receipt.as_slice())))
            .int(keys.iter().map(|(item, _, _)| Some(item.now.as_millis())));
        // In (endpoint, minute) order: the order every publish takes these
        // rows' locks in, so concurrent publishes cannot deadlock.
        let drops = Batch::default()
            .text(
                self.dropped
                    .keys()
                    .map(|(endpoint, _)| Some(endpoint.as_str())),
            )
            .int(self.dropped.keys().map(|(_, minute)| Some(*minute)))
            .int(self.dropped.values().map(|count| Some(*count)));
        let runs = &self.numbering.runs;
        let run_deliveries: Vec<String> = runs
            .values()
            .map(|ids| {
                let ids: Vec<&str> = ids.iter().map(DeliveryId::as_str).collect();
                ids.join(",")
            })
            .collect();
        let runs = Batch::default()
            .text(runs.keys().map(|endpoint| Some(endpoint.as_str())))
            .int(runs.values().map(|ids| Some(ids.len() as i64)))
            .text(run_deliveries.iter().map(|ids| Some(ids.as_str())))
            .int(runs.values().map(|_| Some(self.created_at.as_millis())));
        let places = &self.numbering.places;
        let places = Batch::default()
            .text(places.iter().map(|(event, ..)| Some(event.as_str())))
            .int(places.iter().map(|(_, place, ..)| Some(*place as i64)))
            .text(
                places
                    .iter()
                    .map(|(_, _, endpoint, _)| Some(endpoint.as_str())),
            )
            .int(places.iter().map(|(.., k)| Some(*k as i64)));
        let query = engine
            .query(WRITE.text(engine))
            .bind_batch(check)
            .bind(self.fanout_token)
            .bind(self.lease_token)
            .bind_batch(events)
            .bind_batch(fanout)
            .bind_batch(deliveries)
            .bind_batch(keys)
            .bind_batch(drops)
            .bind_batch(runs)
            .bind_batch(places);
        let mut tx = match (tx, engine) {
            (Some(tx), _) => Some(tx),
            (None, Engine::Sqlite) => Some(store.hot.begin().await?),
            (None, Engine::Postgres) => None,
        };
        let answer = match &mut tx {
            Some(tx) => query.fetch_one(tx).await,
            None => query.fetch_one(&store.hot).await,
        };
        let written = match answer {
            Ok(row) => match row.try_get::<bool, _>("ok")? {
                true => Written::Done(sequences::read_bases(
                    row.try_get::<Option<String>, _>("bases")?.as_deref(),
                )?),
                false => Written::Stale,
            },
            Err(StoreError::Database(sqlx::Error::Database(e))) if key_taken(&*e) => {
                Written::KeyTaken
            }
            Err(e) => return Err(e),
        };
        if let Some(tx) = tx {
            match written {
                Written::Done(_) => tx.commit().await?,
                _ => tx.rollback().await?,
            }
        }
        Ok(written)
    }
}
