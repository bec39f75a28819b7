//! Completing attempts: the attempt rows, each delivery's next state, the
//! endpoints' breakers and the release of ordered partitions — one transaction
//! per batch.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use hookline_core::breaker::{BreakerPolicy, BreakerState, Signal, Transition};
use hookline_core::ids::{AttemptId, DeliveryId, EndpointId};
use hookline_core::model::DeadReason;
use hookline_core::ordering::{self, OnDead};
use hookline_core::time::Timestamp;
use sqlx::any::AnyRow;
use sqlx::{Any, Row, Transaction};

use crate::endpoints::{
    breaker_from_row, disable_endpoint, due_for_new_work, move_queue, on_dead_from_row,
    save_breaker, BREAKER_COLUMNS,
};
use crate::records::{AttemptRecord, Next};
use crate::{parse_column, placeholders, Engine, Result, Store};

/// The longest `last_error` kept on an endpoint.
const LAST_ERROR_CHARS: usize = 500;
/// Attempts per multi-row statement: a dispatcher turn's usual batch (the default
/// claim batch) in one statement. 14 values each, so 1,792 — far below either
/// engine's limit. Larger chunks measured no faster and cost memory: each size is
/// its own cached prepared statement.
const COMPLETION_CHUNK: usize = 128;

/// One multi-row `INSERT` of attempt rows.
async fn insert_attempts(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    records: &[AttemptRecord],
) -> Result<()> {
    let values = (0..records.len())
        .map(|i| format!("({})", placeholders(1 + i * 14, 14)))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        "INSERT INTO attempts (id, delivery_id, app_id, endpoint_id, attempt_number, started_at, duration_ms, \
         status_code, response_body, error_kind, error_message, verdict, next_attempt_at, dead_reason) VALUES {values}"
    );
    let sql = engine.in_order(sql);
    let mut query = sqlx::query(&sql);
    for record in records {
        let next = record.next;
        let (error_kind, error_message) = match &record.error {
            Some((kind, message)) => (Some(kind.as_str()), Some(message.as_str())),
            None => (None, None),
        };
        query = query
            .bind(AttemptId::generate().to_string())
            .bind(record.delivery_id.as_str())
            .bind(record.app_id.as_str())
            .bind(record.endpoint_id.as_str())
            .bind(i64::from(record.attempt_number))
            .bind(record.started_at.as_millis())
            .bind(record.duration.as_millis() as i64)
            .bind(record.status_code.map(i64::from))
            .bind(record.response_body.as_deref())
            .bind(error_kind)
            .bind(error_message)
            .bind(next.verdict().as_str())
            .bind(next.next_attempt_at().map(Timestamp::as_millis))
            .bind(next.dead_reason().map(DeadReason::as_str));
    }
    query.execute(&mut **tx).await?;
    Ok(())
}

/// One multi-row `UPDATE` moving the deliveries on — only those whose lease the
/// record still holds. Returns the ordering keys of the updated keyed deliveries.
async fn update_deliveries(
    tx: &mut Transaction<'static, Any>,
    engine: Engine,
    records: &[AttemptRecord],
    now: Timestamp,
) -> Result<HashMap<DeliveryId, String>> {
    let values = (0..records.len())
        .map(|i| format!("({})", placeholders(1 + i * 8, 8)))
        .collect::<Vec<_>>()
        .join(", ");
    // The same statement on both engines: a VALUES list as a CTE, then UPDATE … FROM.
    let sql = format!(
        "WITH v (id, token, state, due_at, attempts, last_attempt_at, dead_reason, dead_at) AS (VALUES {values}) \
         UPDATE deliveries SET state = v.state, due_at = v.due_at, attempts = v.attempts, \
         last_attempt_at = v.last_attempt_at, dead_reason = v.dead_reason, dead_at = v.dead_at, \
         lease_token = NULL, updated_at = ${now} \
         FROM v WHERE deliveries.id = v.id AND deliveries.lease_token = v.token \
         RETURNING deliveries.id, deliveries.ordering_key",
        now = 1 + records.len() * 8
    );
    let sql = engine.in_order(sql);
    let mut query = sqlx::query(&sql);
    for record in records {
        let (state, due_at, dead_reason) = (
            record.next.state(),
            record.next.due_at(now),
            record.next.dead_reason(),
        );
        query = query
            .bind(record.delivery_id.as_str())
            .bind(record.lease_token.as_str())
            .bind(state.as_str())
            .bind(due_at.as_millis())
            .bind(i64::from(record.attempt_number))
            .bind(record.started_at.as_millis())
            .bind(dead_reason.map(DeadReason::as_str))
            .bind(dead_reason.map(|_| now.as_millis()));
    }
    query = query.bind(now.as_millis());
    let mut keyed = HashMap::new();
    for row in query.fetch_all(&mut **tx).await? {
        if let Some(key) = row.try_get::<Option<String>, _>("ordering_key")? {
            keyed.insert(parse_column(&row, "id")?, key);
        }
    }
    Ok(keyed)
}

impl Store {
    /// Records finished attempts and moves each delivery on, all in one transaction:
    ///
    /// - the attempt row, and the delivery's new state (only if this dispatcher still
    ///   holds its lease: a delivery reclaimed after expiry keeps its new owner's state,
    ///   though the attempt is recorded all the same, since it happened);
    /// - each endpoint's breaker: opening defers the endpoint's pending deliveries to
    ///   the probe time; closing brings the deferred ones back to now; failing past
    ///   `disable_after` (or a 410) disables the endpoint and parks its queue;
    /// - ordered partitions: a head that succeeded (or died, when skipping) releases
    ///   its partition's next delivery.
    #[tracing::instrument(skip_all, fields(count = records.len()))]
    pub async fn complete_attempts(
        &self,
        records: &[AttemptRecord],
        breaker_policy: &BreakerPolicy,
        now: Timestamp,
    ) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer.begin().await?;
        let due_now = self
            .complete_in(&mut tx, records, breaker_policy, now)
            .await?;
        tx.commit().await?;
        if due_now {
            self.notify_due();
        }
        Ok(())
    }

    /// [`Self::complete_attempts`] inside a caller's transaction; whether it made work
    /// due now — a released partition head, or a closed breaker's deferred queue (the caller
    /// wakes dispatchers after the commit, never before).
    pub(crate) async fn complete_in(
        &self,
        tx: &mut Transaction<'static, Any>,
        records: &[AttemptRecord],
        breaker_policy: &BreakerPolicy,
        now: Timestamp,
    ) -> Result<bool> {
        if records.is_empty() {
            return Ok(false);
        }
        // (app, endpoint, ordering key, final state, dead reason) of keyed deliveries that finished.
        let mut finished_keyed = Vec::new();
        for chunk in records.chunks(COMPLETION_CHUNK) {
            insert_attempts(tx, self.engine, chunk).await?;
            let keyed = update_deliveries(tx, self.engine, chunk, now).await?;
            for record in chunk {
                let Some(key) = keyed.get(&record.delivery_id) else {
                    continue;
                };
                if let Next::RetryAt(_) = record.next {
                    continue;
                }
                let (state, reason) = (record.next.state(), record.next.dead_reason());
                finished_keyed.push((
                    record.app_id.clone(),
                    record.endpoint_id.clone(),
                    key.clone(),
                    state,
                    reason,
                ));
            }
        }

        // Breakers, in endpoint-id order (one lock order for every transaction).
        let mut by_endpoint: BTreeMap<&EndpointId, Vec<&AttemptRecord>> = BTreeMap::new();
        for record in records {
            by_endpoint
                .entry(&record.endpoint_id)
                .or_default()
                .push(record);
        }
        // Per endpoint: its `ordering_on_dead`, and when work it gets now is due.
        let mut after: BTreeMap<EndpointId, (OnDead, Timestamp)> = BTreeMap::new();
        let mut due_now = false;
        let ids: Vec<&EndpointId> = by_endpoint.keys().copied().collect();
        let mut rows = self.lock_endpoints(tx, &ids).await?;
        for (endpoint, group) in by_endpoint {
            // A deleted endpoint has no row, no breaker and no partitions left.
            if let Some(row) = rows.remove(endpoint) {
                let (new_work_due, pulled_forward) = self
                    .update_breaker(tx, endpoint, &row, &group, breaker_policy, now)
                    .await?;
                due_now |= pulled_forward;
                after.insert(endpoint.clone(), (on_dead_from_row(&row)?, new_work_due));
            }
        }

        // Ordered partitions, in (app, key) order.
        let mut releases = BTreeSet::new();
        for (app, endpoint, key, state, reason) in finished_keyed {
            let Some(&(on_dead, due)) = after.get(&endpoint) else {
                continue;
            };
            if ordering::releases_next(state, reason, on_dead) {
                releases.insert((app, key, endpoint, due));
            }
        }
        for (app, key, endpoint, due) in &releases {
            if self.engine == Engine::Postgres {
                // Serialises with publishes of this key (they upsert the same row), so a
                // delivery published as `blocked` meanwhile is seen and released here.
                sqlx::query("SELECT last_sequence FROM ordering_keys WHERE app_id = $1 AND ordering_key = $2 FOR UPDATE")
                    .bind(app.as_str())
                    .bind(key)
                    .fetch_optional(&mut **tx)
                    .await?;
            }
            due_now |=
                release_partition_successor(tx, endpoint, key, *due, now).await? && *due == now;
        }
        Ok(due_now)
    }

    /// Reads (on PostgreSQL: locks, in id order) the breaker state of the batch's endpoints.
    async fn lock_endpoints(
        &self,
        tx: &mut Transaction<'static, Any>,
        endpoints: &[&EndpointId],
    ) -> Result<HashMap<EndpointId, AnyRow>> {
        let lock = if self.engine == Engine::Postgres {
            " FOR UPDATE"
        } else {
            ""
        };
        let sql = self.engine.in_order(format!(
            "SELECT id, enabled, ordering_on_dead, {BREAKER_COLUMNS} FROM endpoints WHERE id IN ({}) \
             ORDER BY id{lock}",
            placeholders(1, endpoints.len())
        ));
        let mut query = sqlx::query(&sql);
        for endpoint in endpoints {
            query = query.bind(endpoint.as_str());
        }
        let mut rows = HashMap::new();
        for row in query.fetch_all(&mut **tx).await? {
            rows.insert(parse_column(&row, "id")?, row);
        }
        Ok(rows)
    }

    /// Applies one endpoint's attempts to its breaker (`row`: its [`Self::lock_endpoints`]
    /// row, locked). Returns when work the endpoint gets now is due, given the state this
    /// leaves it in ([`due_for_new_work`]), and whether closing the breaker brought
    /// deferred work forward to now (the caller wakes dispatchers after the commit).
    async fn update_breaker(
        &self,
        tx: &mut Transaction<'static, Any>,
        endpoint: &EndpointId,
        row: &AnyRow,
        records: &[&AttemptRecord],
        policy: &BreakerPolicy,
        now: Timestamp,
    ) -> Result<(Timestamp, bool)> {
        let enabled = row.try_get::<i64, _>("enabled")? != 0;
        let before = breaker_from_row(row)?;
        // Deliveries deferred by the breaker are due no later than this.
        let horizon = before.next_probe_at.max(before.probe_until);
        let mut breaker = before;
        let mut opened = None;
        let mut closed = false;
        let mut disable = None;
        let mut last_error = None;
        for record in records {
            if record.disable_endpoint {
                disable = Some("gone");
            }
            if record.signal == Signal::Failed {
                last_error = Some(describe_failure(record));
            }
            match breaker.record(record.signal, now, policy) {
                Transition::Opened { next_probe_at } => opened = Some(next_probe_at),
                Transition::Closed => closed = true,
                Transition::Disable => disable = disable.or(Some("failing")),
                Transition::Unchanged => {}
            }
        }
        if breaker != before {
            save_breaker(tx, endpoint, &breaker).await?;
        }
        if let Some(error) = &last_error {
            sqlx::query("UPDATE endpoints SET last_error = $2, last_failure_at = $3 WHERE id = $1")
                .bind(endpoint.as_str())
                .bind(error)
                .bind(now.as_millis())
                .execute(&mut **tx)
                .await?;
        }
        let mut pulled_forward = false;
        match (opened, breaker.state) {
            (Some(next_probe_at), BreakerState::Open) => {
                // Open: nothing of this endpoint is attempted before the probe.
                let before_probe = i64::MIN..=next_probe_at.as_millis() - 1;
                move_queue(tx, endpoint, before_probe, next_probe_at).await?;
            }
            _ if closed && breaker.state == BreakerState::Closed => {
                if let Some(horizon) = horizon {
                    let deferred = now.as_millis() + 1..=horizon.as_millis();
                    move_queue(tx, endpoint, deferred, now).await?;
                    pulled_forward = true;
                }
            }
            _ => {}
        }
        if let (Some(reason), true) = (disable, enabled) {
            tracing::warn!(endpoint = %endpoint, reason, "disabling endpoint");
            disable_endpoint(tx, endpoint, reason, now).await?;
        }
        let enabled = enabled && disable.is_none();
        Ok((due_for_new_work(enabled, &breaker, now), pulled_forward))
    }
}

/// When work an endpoint gets now is due ([`due_for_new_work`] of its current row;
/// `None` if the endpoint is gone).
pub(crate) async fn new_work_due(
    tx: &mut Transaction<'static, Any>,
    endpoint: &EndpointId,
    now: Timestamp,
) -> Result<Option<Timestamp>> {
    let sql = format!("SELECT enabled, {BREAKER_COLUMNS} FROM endpoints WHERE id = $1");
    let Some(row) = sqlx::query(&sql)
        .bind(endpoint.as_str())
        .fetch_optional(&mut **tx)
        .await?
    else {
        return Ok(None);
    };
    let enabled = row.try_get::<i64, _>("enabled")? != 0;
    Ok(Some(due_for_new_work(
        enabled,
        &breaker_from_row(&row)?,
        now,
    )))
}

/// Makes the next `blocked` delivery of a partition pending, due at `due` (from
/// [`new_work_due`]: now, the breaker's probe time, or `PARKED` for a disabled
/// endpoint); whether the partition had one waiting.
///
/// When the endpoint takes new work now, the delivery is due since it was
/// published: the fresh lane is served oldest first, so it goes ahead of work
/// published after it instead of queueing behind the whole backlog once per
/// step of its partition (with 50 events per key under load, that put minutes
/// between a partition's first and last delivery).
pub(crate) async fn release_partition_successor(
    tx: &mut Transaction<'static, Any>,
    endpoint: &EndpointId,
    key: &str,
    due: Timestamp,
    now: Timestamp,
) -> Result<bool> {
    // `state <> 'succeeded'` is implied by `state = 'blocked'`, but spelled out: it is the
    // partition index's predicate, and without it SQLite walked all the endpoint's deliveries.
    let released = sqlx::query(
        "UPDATE deliveries SET state = 'pending', \
           due_at = CASE WHEN $3 <= $4 THEN created_at ELSE $3 END, updated_at = $4 WHERE id = ( \
           SELECT id FROM deliveries WHERE endpoint_id = $1 AND ordering_key = $2 AND state = 'blocked' \
             AND state <> 'succeeded' \
           ORDER BY sequence LIMIT 1)",
    )
    .bind(endpoint.as_str())
    .bind(key)
    .bind(due.as_millis())
    .bind(now.as_millis())
    .execute(&mut **tx)
    .await?
    .rows_affected();
    Ok(released == 1)
}

/// A short description of a failed attempt for the endpoint's `last_error`.
fn describe_failure(record: &AttemptRecord) -> String {
    let text = match (&record.status_code, &record.error) {
        (Some(status), _) => format!("HTTP {status}"),
        (None, Some((kind, message))) => format!("{kind}: {message}"),
        (None, None) => "failed".to_owned(),
    };
    text.chars().take(LAST_ERROR_CHARS).collect()
}
