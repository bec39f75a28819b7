//! Claiming due deliveries: lanes, leases, and admission (disabled endpoints,
//! circuit breakers, rate limits) — all in one transaction.
//!
//! 1. **Lanes.** Due work is taken from two partial indexes: retries (up to a
//!    quarter of the batch), then fresh deliveries, then retries again if room
//!    is left. A backlog of retries never delays new events, and retries
//!    are never starved by a flood of new ones. A lane's head is ranked per
//!    endpoint, so no endpoint is leased more than its room under the
//!    per-process cap; a round-robin pass finds the work of other endpoints
//!    behind the rows of capped ones.
//! 2. **Lease.** Claimed rows become `in_flight` until `now + lease` under a
//!    fresh token; on PostgreSQL `FOR UPDATE SKIP LOCKED` keeps nodes apart.
//! 3. **Admission**, per endpoint, in endpoint-id order (a fixed lock order),
//!    by the one rule of `hookline_core::admission` that publishes ask too:
//!    a disabled endpoint's deliveries are parked; an open breaker defers them
//!    to its probe time (no attempt charged, max age still enforced); when the
//!    cool-down is over exactly one claim in the cluster wins the probe by a
//!    compare-and-set on the endpoint row; a rate-limited endpoint hands out
//!    send slots from its stored GCRA state, deferring deliveries whose slot
//!    lies beyond the look-ahead.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crate::db::{Row, Tx};
use hookline_core::admission::{self, Admission};
use hookline_core::breaker::{Breaker, BreakerPolicy};
use hookline_core::ids::EndpointId;
use hookline_core::model::DeadReason;
use hookline_core::ordering::OnDead;
use hookline_core::rate;
use hookline_core::signing::{EndpointSecret, SigningKeys};
use hookline_core::time::Timestamp;

use crate::complete::{new_work_due, release_partition_successor};
use crate::db::{Batch, Kind, Sql};
use crate::dispatcher::RoomView;
use crate::endpoints::{
    breaker_from_row, headers_from_row, max_in_flight_from_row, on_dead_from_row, retry_from_row,
    signing_from_row,
};
use crate::records::{
    AttemptRecord, Claim, ClaimPolicy, ClaimedDelivery, Destination, RetryOverrides, PARKED,
};
use crate::secrets::Secrets;
use crate::{parse_column, Engine, Result, Store};

/// The two queues of due work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lane {
    /// Never attempted in this round.
    Fresh,
    /// Attempted before: waiting for its retry.
    Retry,
}

impl Lane {
    /// The lane's partial-index predicate, spelled exactly as in the migration so
    /// both engines use the index.
    pub(crate) fn predicate(self) -> &'static str {
        match self {
            Lane::Fresh => "state IN ('pending', 'in_flight') AND attempts = 0",
            Lane::Retry => "state IN ('pending', 'in_flight') AND attempts > 0",
        }
    }
}

/// What a claim returns per delivery: the delivery joined with its event's body.
/// The endpoint side is read once per endpoint of the batch ([`ENDPOINT_COLUMNS`]),
/// not once per row: decoding rows is most of a claim's cost.
const CLAIMED_COLUMNS: &str =
    "c.id, c.app_id, c.event_id, c.endpoint_id, c.lease_token, c.attempts, \
     c.round_started_at, c.created_at, c.ordering_key, c.sequence, e.body";

/// What sending and admission need of an endpoint.
pub(crate) const ENDPOINT_COLUMNS: &str =
    "id, url, secret, previous_secret, previous_secret_until, headers, enabled, paused, retry_base_ms, retry_cap_ms, max_attempts, max_age_secs, \
     rate_limit_per_sec, max_in_flight, ordering_on_dead, breaker_state, consecutive_failures, breaker_cooldown_ms, \
     next_probe_at, probe_until, failing_since";

/// The endpoint side of a claimed row.
#[derive(Clone, Copy)]
pub(crate) struct Gate {
    pub(crate) enabled: bool,
    pub(crate) breaker: Breaker,
    pub(crate) rate_limit: Option<u32>,
    /// The endpoint's own concurrency ceiling.
    pub(crate) max_in_flight: Option<u32>,
    pub(crate) on_dead: OnDead,
}

impl Gate {
    /// What the one admission rule (`hookline_core::admission`) reads.
    pub(crate) fn admission(&self) -> admission::Gate {
        admission::Gate {
            enabled: self.enabled,
            breaker: self.breaker,
            rate_limited: self.rate_limit.is_some(),
        }
    }
}

/// A claimed batch's endpoint: where and how to send, and its gate.
pub(crate) struct Target {
    pub(crate) destination: Arc<Destination>,
    pub(crate) retry: RetryOverrides,
    pub(crate) gate: Gate,
}

pub(crate) fn target_from_row(secrets: &Secrets, row: &Row) -> Result<Target> {
    let id: EndpointId = parse_column(row, "id")?;
    Ok(Target {
        destination: Arc::new(Destination {
            url: row.try_get("url")?,
            signing: signing_from_row(secrets, row, &id)?,
            headers: headers_from_row(row)?,
        }),
        retry: retry_from_row(row)?,
        gate: Gate {
            // A paused endpoint's deliveries are parked like a disabled one's.
            enabled: row.try_get::<bool, _>("enabled")? && !row.try_get::<bool, _>("paused")?,
            breaker: breaker_from_row(row)?,
            rate_limit: row
                .try_get::<Option<i64>, _>("rate_limit_per_sec")?
                .map(|r| r as u32),
            max_in_flight: max_in_flight_from_row(row)?,
            on_dead: on_dead_from_row(row)?,
        },
    })
}

/// The destination of a deleted endpoint's delivery: never sent (admission
/// dead-letters it), so nothing in it is used.
fn nowhere() -> Arc<Destination> {
    static NOWHERE: std::sync::OnceLock<Arc<Destination>> = std::sync::OnceLock::new();
    NOWHERE
        .get_or_init(|| {
            Arc::new(Destination {
                url: String::new(),
                signing: SigningKeys::new(EndpointSecret::generate()),
                headers: Vec::new(),
            })
        })
        .clone()
}

struct Claimed {
    delivery: ClaimedDelivery,
    /// `None` for a deleted endpoint.
    gate: Option<Gate>,
}

fn claimed_from_row(row: &Row, targets: &HashMap<EndpointId, Target>) -> Result<Claimed> {
    let endpoint_id: EndpointId = parse_column(row, "endpoint_id")?;
    let target = targets.get(&endpoint_id);
    let body: Vec<u8> = row.try_get("body")?;
    let round_started_at: i64 = row.try_get("round_started_at")?;
    Ok(Claimed {
        delivery: ClaimedDelivery {
            id: parse_column(row, "id")?,
            app_id: parse_column(row, "app_id")?,
            event_id: parse_column(row, "event_id")?,
            endpoint_id,
            lease_token: row.try_get("lease_token")?,
            attempts: row.try_get::<i64, _>("attempts")? as u32,
            round_started_at: Timestamp::from_millis(round_started_at),
            // A replay or resend starts a round later than the delivery's creation.
            replayed: round_started_at > row.try_get::<i64, _>("created_at")?,
            ordering_key: row.try_get("ordering_key")?,
            sequence: row.try_get::<Option<i64>, _>("sequence")?.map(|s| s as u64),
            send_at: None,
            probe: false,
            max_in_flight: target.and_then(|t| t.gate.max_in_flight),
            destination: target.map_or_else(nowhere, |t| t.destination.clone()),
            retry: target.map(|t| t.retry).unwrap_or_default(),
            body: Arc::from(body),
        },
        gate: target.map(|t| t.gate),
    })
}

impl Store {
    /// Claims up to `limit` due deliveries — pending ones whose time has come
    /// and in-flight ones whose lease expired — leasing them until `now + lease`,
    /// and returns those admitted to be sent now (see the module docs).
    #[tracing::instrument(skip_all, fields(limit))]
    pub async fn claim_due_deliveries(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: u32,
        policy: &ClaimPolicy,
    ) -> Result<Claim> {
        self.complete_and_claim(&[], &BreakerPolicy::default(), now, lease, limit, policy)
            .await
    }

    /// One dispatcher cycle in one transaction: records finished attempts (as
    /// [`Store::complete_attempts`]), then claims (as [`Store::claim_due_deliveries`]).
    /// The claim sees the breakers and partitions the completions just moved on, and
    /// the cycle costs one commit instead of two.
    #[tracing::instrument(skip_all, fields(completed = records.len(), limit))]
    pub async fn complete_and_claim(
        &self,
        records: &[AttemptRecord],
        breaker_policy: &BreakerPolicy,
        now: Timestamp,
        lease: Duration,
        limit: u32,
        policy: &ClaimPolicy,
    ) -> Result<Claim> {
        let mut tx = self.writer.begin().await?;
        if self.engine == Engine::Postgres && records.is_empty() {
            // A lease lost in a database crash costs at most a duplicate send (the
            // delivery is claimed again), never an event: no need to wait for the flush.
            // (Completions are durable: they wait.)
            self.engine
                .query("SET LOCAL synchronous_commit = off")
                .execute(&mut tx)
                .await?;
        }
        let (due_now, breaker_changes) = self
            .complete_in(&mut tx, records, breaker_policy, now)
            .await?;
        // The room is read inside the transaction (on SQLite no publish can hand work
        // off while this writer runs), and what the claim leased is counted before
        // the commit, so hand-offs pause only while the claim's statements run.
        let mut claim = if limit > 0 {
            let view = policy.room.begin(records);
            // Ends the claim in the dispatcher's room however this future ends (an
            // error, or the caller dropping it mid-claim), so hand-offs never stay paused.
            let claiming = Claiming(&*policy.room);
            let claim = self
                .claim_in(&mut tx, now, lease, limit, policy, &view)
                .await?;
            std::mem::forget(claiming);
            policy
                .room
                .leased(&claim.deliveries, claim.rows == limit as usize);
            claim
        } else {
            Claim::default()
        };
        claim.breaker_changes = breaker_changes;
        if let Err(error) = tx.commit().await {
            policy.room.unleased(&claim.deliveries);
            return Err(error);
        }
        if due_now {
            self.notify_due();
        }
        Ok(claim)
    }

    async fn claim_in(
        &self,
        tx: &mut Tx,
        now: Timestamp,
        lease: Duration,
        limit: u32,
        policy: &ClaimPolicy,
        view: &RoomView,
    ) -> Result<Claim> {
        let lease_until = now + lease;
        let token = ulid::Ulid::new().to_string();
        let claim = LaneClaim {
            engine: self.engine,
            now,
            lease_until,
            token: &token,
            default_room: view.default,
        };
        let mut rooms = Rooms::new(view);
        let retry_share = (limit / 4).max(1).min(limit);
        let mut rows = claim
            .take(tx, Source::Lane(Lane::Retry), retry_share, &mut rooms)
            .await?;
        let retries_full = rows.len() == retry_share as usize;
        // Fresh work: the lane's head (oldest due first) and, when the head alone fills
        // its part of the batch (a backlog), a slice of the newest due — so what was
        // published just now never waits behind another tenant's backlog.
        let remaining = limit - rows.len() as u32;
        let newest_share = (limit / NEWEST_SHARE_DIVISOR).min(remaining);
        let head_ask = remaining - newest_share;
        if head_ask > 0 {
            let fresh = claim
                .take(tx, Source::Lane(Lane::Fresh), head_ask, &mut rooms)
                .await?;
            let backlog = fresh.len() == head_ask as usize;
            rows.extend(fresh);
            if backlog && newest_share > 0 {
                let newest = claim
                    .take(tx, Source::Newest(Lane::Fresh), newest_share, &mut rooms)
                    .await?;
                rows.extend(newest);
            }
        }
        if retries_full && rows.len() < limit as usize {
            let more = claim
                .take(
                    tx,
                    Source::Lane(Lane::Retry),
                    limit - rows.len() as u32,
                    &mut rooms,
                )
                .await?;
            rows.extend(more);
        }
        // A lane passes over rows only of endpoints it filled to their cap.
        let saturated: Vec<EndpointId> = rooms
            .limited()
            .into_iter()
            .filter(|(_, room)| *room == 0)
            .map(|(endpoint, _)| endpoint)
            .collect();
        if rows.len() < limit as usize && !saturated.is_empty() {
            // The lanes' heads may all belong to endpoints at their cap: visit other
            // endpoints round-robin through their own index, so none starves.
            for endpoint in self.fair_pass_endpoints(tx, &saturated).await? {
                let room = rooms.of(&endpoint).min(limit as usize - rows.len()) as u32;
                if room == 0 {
                    continue;
                }
                let more = claim
                    .take(tx, Source::Endpoint(&endpoint), room, &mut rooms)
                    .await?;
                rows.extend(more);
                if rows.len() == limit as usize {
                    break;
                }
            }
        }

        let targets = self.claimed_targets(tx, &rows).await?;
        let mut by_endpoint: BTreeMap<EndpointId, Vec<Claimed>> = BTreeMap::new();
        for row in &rows {
            let claimed = claimed_from_row(row, &targets)?;
            by_endpoint
                .entry(claimed.delivery.endpoint_id.clone())
                .or_default()
                .push(claimed);
        }
        for group in by_endpoint.values_mut() {
            // Oldest first: the room and the probe go to the longest-waiting deliveries.
            group.sort_by(|a, b| a.delivery.id.cmp(&b.delivery.id));
        }
        let mut ready = Vec::with_capacity(rows.len());
        let mut deferred = Deferred::default();
        for (endpoint, group) in by_endpoint {
            let room = view.room(&endpoint);
            self.admit(
                tx,
                &mut deferred,
                &endpoint,
                group,
                room,
                now,
                policy,
                &mut ready,
            )
            .await?;
        }
        deferred.write(tx, &token).await?;
        Ok(Claim {
            deliveries: ready,
            rows: rows.len(),
            // Filled by the turn (`complete_and_claim`), which records before it claims.
            breaker_changes: Default::default(),
        })
    }

    /// The endpoints of the claimed rows, read once each.
    async fn claimed_targets(
        &self,
        tx: &mut Tx,
        rows: &[Row],
    ) -> Result<HashMap<EndpointId, Target>> {
        let mut ids = Vec::new();
        for row in rows {
            let id: String = row.try_get("endpoint_id")?;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let batch = Batch::default().text(ids.iter().map(|id| Some(id.as_str())));
        let found = self
            .engine
            .query(CLAIMED_TARGETS.text(self.engine))
            .bind_batch(batch)
            .fetch_all(&mut *tx)
            .await?;
        let mut targets = HashMap::with_capacity(ids.len());
        for row in found {
            targets.insert(
                parse_column(&row, "id")?,
                target_from_row(&self.secrets, &row)?,
            );
        }
        Ok(targets)
    }

    /// The next few enabled endpoints after the last fair pass's, skipping saturated ones.
    async fn fair_pass_endpoints(
        &self,
        tx: &mut Tx,
        saturated: &[EndpointId],
    ) -> Result<Vec<EndpointId>> {
        let after = self
            .fair_cursor
            .lock()
            .expect("fair cursor poisoned")
            .clone();
        let mut visit = Vec::new();
        // From the cursor to the end, then (wrapping) from the start.
        for start in [after.as_ref().map_or("", |e| e.as_str()), ""] {
            let skip = Batch::default().text(saturated.iter().map(|e| Some(e.as_str())));
            let rows = self
                .engine
                .query(FAIR_PASS.text(self.engine))
                .bind(start)
                .bind(i64::from(FAIR_PASS_ENDPOINTS) - visit.len() as i64)
                .bind_batch(skip)
                .fetch_all(&mut *tx)
                .await?;
            for row in rows {
                let endpoint: EndpointId = parse_column(&row, "id")?;
                if !visit.contains(&endpoint) {
                    visit.push(endpoint);
                }
            }
            if visit.len() >= FAIR_PASS_ENDPOINTS as usize || after.is_none() {
                break;
            }
        }
        *self.fair_cursor.lock().expect("fair cursor poisoned") = visit.last().cloned();
        Ok(visit)
    }

    /// Decides, for one endpoint's claimed deliveries, which go now.
    #[allow(clippy::too_many_arguments)]
    async fn admit(
        &self,
        tx: &mut Tx,
        deferred: &mut Deferred,
        endpoint: &EndpointId,
        group: Vec<Claimed>,
        room: usize,
        now: Timestamp,
        policy: &ClaimPolicy,
        ready: &mut Vec<ClaimedDelivery>,
    ) -> Result<()> {
        let Some(gate) = group.first().and_then(|c| c.gate) else {
            for claimed in &group {
                dead_letter(
                    tx,
                    &claimed.delivery,
                    DeadReason::EndpointDeleted,
                    now,
                    OnDead::Skip,
                )
                .await?;
            }
            return Ok(());
        };
        let on_dead = gate.on_dead;
        // This dispatcher's room for the endpoint (and the endpoint's own ceiling, for
        // an endpoint the dispatcher has not sent to yet).
        let room = room.min(gate.max_in_flight.map_or(usize::MAX, |m| m as usize));
        let mut admitted: Vec<ClaimedDelivery> = match admission::admit(&gate.admission(), now) {
            Admission::Park => {
                for claimed in &group {
                    deferred.defer(&claimed.delivery, PARKED);
                }
                return Ok(());
            }
            // No room: everything goes back, due now, and the probe waits for room.
            Admission::Send | Admission::Probe if room == 0 => {
                for claimed in &group {
                    deferred.defer(&claimed.delivery, now);
                }
                Vec::new()
            }
            Admission::Send => {
                // Within the room; the rest go back, due now.
                let mut group = group;
                if group.len() > room {
                    for claimed in group.split_off(room) {
                        deferred.defer(&claimed.delivery, now);
                    }
                }
                group.into_iter().map(|c| c.delivery).collect()
            }
            Admission::Defer(until) => {
                for claimed in &group {
                    defer_or_expire(tx, deferred, &claimed.delivery, until, now, policy, on_dead)
                        .await?;
                }
                Vec::new()
            }
            Admission::Probe => {
                let hold_until = now + policy.probe_hold;
                let won = take_probe(tx, endpoint, &gate.breaker, now, policy.probe_hold).await?;
                let mut deliveries = group.into_iter().map(|c| c.delivery);
                let probe = if won { deliveries.next() } else { None };
                for delivery in deliveries {
                    defer_or_expire(tx, deferred, &delivery, hold_until, now, policy, on_dead)
                        .await?;
                }
                probe
                    .map(|mut delivery| {
                        delivery.probe = true;
                        vec![delivery]
                    })
                    .unwrap_or_default()
            }
        };
        if let Some(per_second) = gate.rate_limit {
            admitted = self
                .reserve_send_slots(
                    tx, deferred, endpoint, admitted, per_second, now, policy, on_dead,
                )
                .await?;
        }
        ready.extend(admitted);
        Ok(())
    }

    /// Hands out send slots from the endpoint's stored GCRA state (locked on
    /// PostgreSQL, so nodes reserve from one sequence); deliveries whose slot is
    /// beyond the look-ahead wait, pending, until their slot comes.
    #[allow(clippy::too_many_arguments)]
    async fn reserve_send_slots(
        &self,
        tx: &mut Tx,
        deferred: &mut Deferred,
        endpoint: &EndpointId,
        deliveries: Vec<ClaimedDelivery>,
        per_second: u32,
        now: Timestamp,
        policy: &ClaimPolicy,
        on_dead: OnDead,
    ) -> Result<Vec<ClaimedDelivery>> {
        if deliveries.is_empty() {
            return Ok(deliveries);
        }
        let mut tat: Option<i64> = self
            .engine
            .query(RATE_STATE.text(self.engine))
            .bind(endpoint.as_str())
            .fetch_scalar(&mut *tx)
            .await?;
        let now_us = now.as_millis() * 1000;
        let horizon_us = now_us + policy.rate_lookahead.as_micros() as i64;
        let mut sendable = Vec::with_capacity(deliveries.len());
        for mut delivery in deliveries {
            let (slot, next) = rate::reserve(tat, now_us, per_second);
            if slot <= horizon_us {
                delivery.send_at = Some(Timestamp::from_millis(slot / 1000));
                tat = Some(next);
                sendable.push(delivery);
            } else {
                // Not reserved: the slot is taken by whoever claims it when it comes.
                let at = Timestamp::from_millis((slot + 999) / 1000);
                defer_or_expire(tx, deferred, &delivery, at, now, policy, on_dead).await?;
            }
        }
        self.engine
            .query("UPDATE endpoints SET rate_tat_us = $2 WHERE id = $1")
            .bind(endpoint.as_str())
            .bind(tat)
            .execute(&mut *tx)
            .await?;
        Ok(sendable)
    }
}

/// One claim's parameters, shared by its lane queries.
struct LaneClaim<'a> {
    engine: Engine,
    now: Timestamp,
    lease_until: Timestamp,
    token: &'a str,
    /// The room of an endpoint the dispatcher has no count for.
    default_room: usize,
}

/// What a claim may still take per endpoint: the dispatcher's room (its limit
/// less its sends in flight), less what the claim has taken so far. A claim never
/// leases more of an endpoint than this: leasing rows only to hand them back over
/// the cap cost a single busy endpoint's dispatcher most of each turn, so it fell
/// behind for good.
struct Rooms<'a> {
    view: &'a RoomView,
    taken: HashMap<EndpointId, usize>,
}

impl<'a> Rooms<'a> {
    fn new(view: &'a RoomView) -> Self {
        Self {
            view,
            taken: HashMap::new(),
        }
    }

    fn of(&self, endpoint: &EndpointId) -> usize {
        self.view
            .room(endpoint)
            .saturating_sub(self.taken.get(endpoint).copied().unwrap_or(0))
    }

    /// The endpoints whose room differs from the default, with their room (possibly 0).
    fn limited(&self) -> Vec<(EndpointId, usize)> {
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

    fn record(&mut self, rows: &[Row]) -> Result<()> {
        for row in rows {
            *self
                .taken
                .entry(parse_column(row, "endpoint_id")?)
                .or_default() += 1;
        }
        Ok(())
    }
}

/// How many due rows a lane claim ranks when some endpoint is at its cap: enough to
/// see past that endpoint's rows at the head, yet bounded, so a large backlog of a
/// busy endpoint cannot make every claim walk it (the fair pass then finds the
/// other endpoints' work).
const SKIP_WINDOW: u32 = 1024;
/// Endpoints visited per fair pass.
const FAIR_PASS_ENDPOINTS: u32 = 32;
/// Under a backlog, this fraction of a claim's batch (1/8) goes to the newest due
/// fresh work rather than the oldest.
const NEWEST_SHARE_DIVISOR: u32 = 8;

/// Where a claim takes due rows from.
enum Source<'a> {
    /// A lane's due index, in due order.
    Lane(Lane),
    /// A lane's due index from its newest end (what became due last).
    Newest(Lane),
    /// One endpoint's pending deliveries (its own index), in due order.
    Endpoint(&'a EndpointId),
}

impl LaneClaim<'_> {
    /// Leases up to `limit` due deliveries from `source`, no more per endpoint than
    /// its room, returning [`CLAIMED_COLUMNS`].
    async fn take(
        &self,
        tx: &mut Tx,
        source: Source<'_>,
        limit: u32,
        rooms: &mut Rooms<'_>,
    ) -> Result<Vec<Row>> {
        let limited = match source {
            Source::Lane(_) | Source::Newest(_) => rooms.limited(),
            Source::Endpoint(_) => Vec::new(),
        };
        let sql = match source {
            Source::Endpoint(_) => &TAKE_ENDPOINT,
            Source::Lane(Lane::Fresh) => &TAKE_FRESH,
            Source::Lane(Lane::Retry) => &TAKE_RETRY,
            Source::Newest(Lane::Fresh) => &TAKE_NEWEST_FRESH,
            Source::Newest(Lane::Retry) => &TAKE_NEWEST_RETRY,
        };
        let mut query = self
            .engine
            .query(sql.text(self.engine))
            .bind(self.now.as_millis())
            .bind(self.lease_until.as_millis())
            .bind(self.token)
            .bind(i64::from(limit));
        match source {
            Source::Endpoint(endpoint) => query = query.bind(endpoint.as_str()),
            Source::Lane(_) | Source::Newest(_) => {
                // Wide enough to see past a capped endpoint's rows; else just the batch.
                let window = if limited.iter().any(|(_, room)| *room == 0) {
                    SKIP_WINDOW.max(limit * 8)
                } else {
                    limit
                };
                let rooms = Batch::default()
                    .text(limited.iter().map(|(endpoint, _)| Some(endpoint.as_str())))
                    .int(limited.iter().map(|(_, room)| Some(as_sql_count(*room))));
                query = query
                    .bind(i64::from(window))
                    .bind(as_sql_count(self.default_room))
                    .bind_batch(rooms);
            }
        }
        let rows = query.fetch_all(&mut *tx).await?;
        rooms.record(&rows)?;
        Ok(rows)
    }
}

/// The claim statements, one per source. Parameters: $1 now, $2 lease end,
/// $3 token, $4 limit, $5 window (or the endpoint), $6 the default room, then
/// the (endpoint, room) batch of endpoints whose room differs.
pub(crate) static TAKE_ENDPOINT: Sql = Sql::new(|engine| take_sql(engine, None, false));
pub(crate) static TAKE_FRESH: Sql = Sql::new(|engine| take_sql(engine, Some(Lane::Fresh), false));
pub(crate) static TAKE_RETRY: Sql = Sql::new(|engine| take_sql(engine, Some(Lane::Retry), false));
pub(crate) static TAKE_NEWEST_FRESH: Sql =
    Sql::new(|engine| take_sql(engine, Some(Lane::Fresh), true));
static TAKE_NEWEST_RETRY: Sql = Sql::new(|engine| take_sql(engine, Some(Lane::Retry), true));

/// A claim statement: from one endpoint's pending deliveries (`lane` is `None`),
/// or from a lane's due index, oldest or (`newest`) newest first.
fn take_sql(engine: Engine, lane: Option<Lane>, newest: bool) -> String {
    let due = match lane {
        // The caller asks for no more than the endpoint's room.
        None => format!(
            "SELECT id FROM deliveries WHERE endpoint_id = $5 AND state = 'pending' AND due_at <= $1 \
             ORDER BY due_at LIMIT $4{}",
            engine.lock(" FOR UPDATE SKIP LOCKED")
        ),
        // The lane's head (a derived table with its own LIMIT, so the planner scans
        // exactly that many index entries), ranked per endpoint; an endpoint's rows
        // beyond its room stay where they are.
        Some(lane) => {
            let order = if newest { " DESC" } else { "" };
            format!(
                "SELECT d.id FROM ( \
                   SELECT id, endpoint_id, \
                          ROW_NUMBER() OVER (PARTITION BY endpoint_id ORDER BY due_at{order}, id{order}) AS rn \
                   FROM (SELECT id, endpoint_id, due_at FROM deliveries WHERE {lane} AND due_at <= $1 \
                         ORDER BY due_at{order} LIMIT $5) window_rows) ranked \
                 LEFT JOIN {rooms} ON v.endpoint_id = ranked.endpoint_id \
                 JOIN deliveries d ON d.id = ranked.id \
                 WHERE ranked.rn <= COALESCE(v.room, $6) AND d.due_at <= $1 AND d.state IN ('pending', 'in_flight') \
                 ORDER BY d.due_at{order} LIMIT $4{lock}",
                lane = lane.predicate(),
                rooms = engine.rows(7, &[("endpoint_id", Kind::Text), ("room", Kind::Int)]),
                lock = engine.lock(" FOR UPDATE OF d SKIP LOCKED"),
            )
        }
    };
    match engine {
        Engine::Postgres => format!(
            "WITH c AS ( \
               UPDATE deliveries d SET state = 'in_flight', due_at = $2, lease_token = $3, updated_at = $1 \
               FROM ({due}) due WHERE d.id = due.id \
               RETURNING d.id, d.app_id, d.event_id, d.endpoint_id, d.lease_token, d.attempts, \
                         d.round_started_at, d.created_at, d.ordering_key, d.sequence) \
             SELECT {CLAIMED_COLUMNS} FROM c JOIN events e ON e.id = c.event_id"
        ),
        // SQLite's UPDATE can't feed a join, but its RETURNING may hold a subquery:
        // the body comes back in the same statement.
        Engine::Sqlite => format!(
            "UPDATE deliveries SET state = 'in_flight', due_at = $2, lease_token = $3, updated_at = $1 \
             WHERE id IN ({due}) \
             RETURNING id, app_id, event_id, endpoint_id, lease_token, attempts, round_started_at, \
                       created_at, ordering_key, sequence, \
                       (SELECT body FROM events WHERE events.id = deliveries.event_id) AS body"
        ),
    }
}

/// The endpoints of a claim's rows, read once each.
pub(crate) static CLAIMED_TARGETS: Sql = Sql::new(|engine| {
    format!(
        "SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE id IN (SELECT id FROM {})",
        engine.rows(1, &[("id", Kind::Text)])
    )
});

/// Enabled endpoints after `$1`, up to `$2`, except the batch (saturated ones).
pub(crate) static FAIR_PASS: Sql = Sql::new(|engine| {
    format!(
        "SELECT id FROM endpoints WHERE enabled AND id > $1 \
         AND id NOT IN (SELECT id FROM {}) ORDER BY id LIMIT $2",
        engine.rows(3, &[("id", Kind::Text)])
    )
});

/// An endpoint's GCRA state (locked on PostgreSQL).
pub(crate) static RATE_STATE: Sql = Sql::new(|engine| {
    format!(
        "SELECT rate_tat_us FROM endpoints WHERE id = $1{}",
        engine.lock(" FOR UPDATE")
    )
});

/// Claimed rows of lease `$2` put back, pending, due at `$1`.
pub(crate) static DEFER: Sql = Sql::new(|engine| {
    format!(
        "UPDATE deliveries SET state = 'pending', due_at = $1, lease_token = NULL \
         WHERE lease_token = $2 AND id IN (SELECT id FROM {})",
        engine.rows(3, &[("id", Kind::Text)])
    )
});

/// A claim in progress in the dispatcher's room: dropped before it counted what it
/// leased, it ends the claim there.
struct Claiming<'a>(&'a dyn crate::dispatcher::ClaimRoom);

impl Drop for Claiming<'_> {
    fn drop(&mut self) {
        self.0.abandoned();
    }
}

/// A count as a bound parameter ("no cap" is `usize::MAX`).
fn as_sql_count(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

/// The breaker's probe, taken by compare-and-set on exactly the state this claim
/// read: of all concurrent claims in the cluster, one sees its update succeed.
async fn take_probe(
    tx: &mut Tx,
    endpoint: &EndpointId,
    read: &Breaker,
    now: Timestamp,
    hold: Duration,
) -> Result<bool> {
    let mut probing = *read;
    probing.start_probe(now, hold);
    let taken = tx.engine().query(
        "UPDATE endpoints SET breaker_state = $2, probe_until = $3 \
         WHERE id = $1 AND breaker_state = $4 AND COALESCE(next_probe_at, 0) = $5 AND COALESCE(probe_until, 0) = $6",
    )
    .bind(endpoint.as_str())
    .bind(probing.state.as_str())
    .bind(probing.probe_until.map(Timestamp::as_millis))
    .bind(read.state.as_str())
    .bind(read.next_probe_at.map_or(0, Timestamp::as_millis))
    .bind(read.probe_until.map_or(0, Timestamp::as_millis))
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(taken == 1)
}

/// Claimed deliveries put back, pending, with no attempt charged: by the time they
/// are due again. Written with one statement per distinct time (most claims defer
/// none, or all to one time), not one per delivery.
#[derive(Default)]
struct Deferred(BTreeMap<Timestamp, Vec<String>>);

impl Deferred {
    fn defer(&mut self, delivery: &ClaimedDelivery, until: Timestamp) {
        self.0
            .entry(until)
            .or_default()
            .push(delivery.id.to_string());
    }

    /// Writes the deferrals (all rows of one claim share its lease `token`).
    async fn write(self, tx: &mut Tx, token: &str) -> Result<()> {
        let engine = tx.engine();
        for (until, ids) in self.0 {
            let ids = Batch::default().text(ids.iter().map(|id| Some(id.as_str())));
            engine
                .query(DEFER.text(engine))
                .bind(until.as_millis())
                .bind(token)
                .bind_batch(ids)
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }
}

/// Defers a delivery, unless waiting until `until` would take it past its max age:
/// then it is dead-lettered (`retries_exhausted`) — deferral never stops the clock.
async fn defer_or_expire(
    tx: &mut Tx,
    deferred: &mut Deferred,
    delivery: &ClaimedDelivery,
    until: Timestamp,
    now: Timestamp,
    policy: &ClaimPolicy,
    on_dead: OnDead,
) -> Result<()> {
    let max_age = delivery.retry.apply(policy.retry).max_age;
    if until.since(delivery.round_started_at) > max_age {
        dead_letter(tx, delivery, DeadReason::RetriesExhausted, now, on_dead).await
    } else {
        deferred.defer(delivery, until);
        Ok(())
    }
}

/// Dead-letters a claimed delivery without an attempt, releasing its partition's next if due.
async fn dead_letter(
    tx: &mut Tx,
    delivery: &ClaimedDelivery,
    reason: DeadReason,
    now: Timestamp,
    on_dead: OnDead,
) -> Result<()> {
    tx.engine().query(
        "UPDATE deliveries SET state = 'dead', dead_reason = $3, dead_at = $4, due_at = $4, lease_token = NULL, \
         updated_at = $4 WHERE id = $1 AND lease_token = $2",
    )
    .bind(delivery.id.as_str())
    .bind(&delivery.lease_token)
    .bind(reason.as_str())
    .bind(now.as_millis())
    .execute(&mut *tx)
    .await?;
    if let Some(key) = &delivery.ordering_key {
        if hookline_core::ordering::releases_next(
            hookline_core::model::DeliveryState::Dead,
            Some(reason),
            on_dead,
        ) {
            if let Some(due) = new_work_due(tx, &delivery.endpoint_id, now).await? {
                release_partition_successor(tx, &delivery.endpoint_id, key, due, now).await?;
            }
        }
    }
    Ok(())
}
