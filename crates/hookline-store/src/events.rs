//! Publishing: the outbox transaction, with `Idempotency-Key`.

use std::collections::HashSet;

use hookline_core::breaker::Admission;
use hookline_core::ids::{AppId, DeliveryId, EndpointId, EventId};
use hookline_core::model::DeliveryState;
use hookline_core::ordering;
use hookline_core::time::Timestamp;
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::deliveries::{delivery_from_row, DELIVERY_COLUMNS};
use crate::endpoints::{
    breaker_from_row, event_types_from_json, on_dead_from_row, BREAKER_COLUMNS,
};
use crate::records::{
    Delivery, Event, IdempotencyKey, NewEvent, PublishOutcome, Published, StoredResponse,
};
use crate::{parse_column, placeholders, Result, Store};

/// Rows per multi-row `INSERT` of deliveries (8 values each; far below either engine's limit).
const DELIVERY_INSERT_CHUNK: usize = 100;

fn event_from_row(row: &AnyRow) -> Result<Event> {
    Ok(Event {
        id: parse_column(row, "id")?,
        app_id: parse_column(row, "app_id")?,
        event_type: row.try_get("event_type")?,
        ordering_key: row.try_get("ordering_key")?,
        sequence: row.try_get::<Option<i64>, _>("sequence")?.map(|s| s as u64),
        body: row.try_get("body")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

impl Store {
    /// Writes an event and one pending delivery per enabled endpoint whose
    /// filter accepts it, in one transaction, and returns the answer `render`
    /// makes of it.
    ///
    /// With an idempotency key, the answer is stored under the key in the same
    /// transaction. A second request with the key gets the stored answer
    /// (same fingerprint) or [`PublishOutcome::KeyReused`]; concurrent requests
    /// with one key race on the key's primary key, and exactly one commits.
    #[tracing::instrument(skip_all, fields(app = %app, event = %new.id))]
    pub async fn publish(
        &self,
        app: &AppId,
        new: NewEvent,
        key: Option<&IdempotencyKey>,
        now: Timestamp,
        render: &(dyn Fn(&Published) -> StoredResponse + Send + Sync),
    ) -> Result<PublishOutcome> {
        if let Some(key) = key {
            if let Some(earlier) = self.idempotent_answer(app, key).await? {
                return Ok(earlier);
            }
        }
        let mut tx = self.writer.begin().await?;

        // Events sharing a key are numbered in commit order: the upsert takes the
        // key's row lock, so concurrent publishes of one key serialise here.
        let sequence = match &new.ordering_key {
            None => None,
            Some(key) => Some(
                sqlx::query_scalar::<_, i64>(
                    "INSERT INTO ordering_keys (app_id, ordering_key, last_sequence) VALUES ($1, $2, 1) \
                     ON CONFLICT (app_id, ordering_key) DO UPDATE SET last_sequence = ordering_keys.last_sequence + 1 \
                     RETURNING last_sequence",
                )
                .bind(app.as_str())
                .bind(key)
                .fetch_one(&mut *tx)
                .await? as u64,
            ),
        };

        let sql = format!(
            "SELECT id, event_types, ordering_on_dead, {BREAKER_COLUMNS} FROM endpoints WHERE app_id = $1 AND enabled = 1"
        );
        let endpoints = sqlx::query(&sql)
            .bind(app.as_str())
            .fetch_all(&mut *tx)
            .await?;
        let mut targets = Vec::with_capacity(endpoints.len());
        for row in &endpoints {
            let filter = event_types_from_json(row.try_get("event_types")?)?;
            if filter
                .as_deref()
                .is_none_or(|types| types.contains(&new.event_type))
            {
                // An open breaker defers new work to its probe time instead of letting
                // every claim pick the delivery up only to put it back.
                let due_at = match breaker_from_row(row)?.admit(now) {
                    Admission::Defer(until) => until,
                    Admission::Send | Admission::Probe => now,
                };
                targets.push((
                    parse_column::<EndpointId>(row, "id")?,
                    on_dead_from_row(row)?,
                    due_at,
                ));
            }
        }
        let held = match &new.ordering_key {
            Some(key) if !targets.is_empty() => {
                self.held_partitions(&mut tx, key, &targets).await?
            }
            _ => HashSet::new(),
        };
        let deliveries: Vec<Delivery> = targets
            .into_iter()
            .map(|(endpoint_id, _, due_at)| {
                let state = match new.ordering_key {
                    Some(_) => ordering::initial_state(held.contains(&endpoint_id)),
                    None => DeliveryState::Pending,
                };
                Delivery {
                    id: DeliveryId::generate(),
                    app_id: app.clone(),
                    event_id: new.id.clone(),
                    endpoint_id,
                    state,
                    due_at,
                    ordering_key: new.ordering_key.clone(),
                    sequence,
                    attempts: 0,
                    round_started_at: now,
                    last_attempt_at: None,
                    dead_reason: None,
                    dead_at: None,
                    created_at: now,
                }
            })
            .collect();

        sqlx::query(
            "INSERT INTO events (id, app_id, event_type, ordering_key, sequence, body, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(new.id.as_str())
        .bind(app.as_str())
        .bind(&new.event_type)
        .bind(new.ordering_key.as_deref())
        .bind(sequence.map(|s| s as i64))
        .bind(&new.body)
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?;

        for chunk in deliveries.chunks(DELIVERY_INSERT_CHUNK) {
            let values = (0..chunk.len())
                .map(|i| format!("({}, 0, $1, $1, $1)", placeholders(4 + i * 8, 8)))
                .collect::<Vec<_>>()
                .join(", ");
            let sql = format!(
                "INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, ordering_key, sequence, \
                 attempts, round_started_at, created_at, updated_at) VALUES {values}"
            );
            let mut query = sqlx::query(&sql)
                .bind(now.as_millis())
                .bind(new.ordering_key.as_deref())
                .bind(sequence.map(|s| s as i64));
            for d in chunk {
                query = query
                    .bind(d.id.as_str())
                    .bind(d.app_id.as_str())
                    .bind(d.event_id.as_str())
                    .bind(d.endpoint_id.as_str())
                    .bind(d.state.as_str())
                    .bind(d.due_at.as_millis())
                    .bind(d.ordering_key.as_deref())
                    .bind(d.sequence.map(|s| s as i64));
            }
            query.execute(&mut *tx).await?;
        }

        let published = Published {
            event: Event {
                id: new.id,
                app_id: app.clone(),
                event_type: new.event_type,
                ordering_key: new.ordering_key,
                sequence,
                body: new.body,
                created_at: now,
            },
            deliveries,
        };
        let response = render(&published);

        if let Some(key) = key {
            let inserted = sqlx::query(
                "INSERT INTO idempotency_keys (app_id, key, fingerprint, status, response, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (app_id, key) DO NOTHING",
            )
            .bind(app.as_str())
            .bind(&key.key)
            .bind(&key.fingerprint)
            .bind(i64::from(response.status))
            .bind(&response.body)
            .bind(now.as_millis())
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if inserted == 0 {
                // A concurrent request with this key committed first (PostgreSQL
                // made this insert wait for it): ours must leave no trace.
                tx.rollback().await?;
                return match self.idempotent_answer(app, key).await? {
                    Some(earlier) => Ok(earlier),
                    None => Err(crate::StoreError::Corrupt(
                        "idempotency key vanished after a conflict".into(),
                    )),
                };
            }
        }
        tx.commit().await?;
        if published
            .deliveries
            .iter()
            .any(|d| d.state == DeliveryState::Pending && d.due_at <= now)
        {
            self.notify_due();
        }
        Ok(PublishOutcome::Created(response))
    }

    /// The endpoints among `targets` whose partition for `key` has an earlier
    /// delivery that holds a new one back (per each endpoint's `ordering_on_dead`).
    async fn held_partitions(
        &self,
        tx: &mut sqlx::Transaction<'static, sqlx::Any>,
        key: &str,
        targets: &[(EndpointId, ordering::OnDead, Timestamp)],
    ) -> Result<HashSet<EndpointId>> {
        let sql = format!(
            "SELECT DISTINCT endpoint_id, state FROM deliveries \
             WHERE endpoint_id IN ({}) AND ordering_key = $1 AND state <> 'succeeded'",
            placeholders(2, targets.len())
        );
        let mut query = sqlx::query(&sql).bind(key);
        for (endpoint, _, _) in targets {
            query = query.bind(endpoint.as_str());
        }
        let mut held = HashSet::new();
        for row in query.fetch_all(&mut **tx).await? {
            let endpoint: EndpointId = parse_column(&row, "endpoint_id")?;
            let state: DeliveryState = parse_column(&row, "state")?;
            let on_dead = targets
                .iter()
                .find(|(e, _, _)| *e == endpoint)
                .map(|(_, o, _)| *o)
                .unwrap_or_default();
            if on_dead.holding_states().contains(&state) {
                held.insert(endpoint);
            }
        }
        Ok(held)
    }

    /// The stored outcome for a key already used, if it was.
    async fn idempotent_answer(
        &self,
        app: &AppId,
        key: &IdempotencyKey,
    ) -> Result<Option<PublishOutcome>> {
        let Some(row) =
            sqlx::query("SELECT fingerprint, status, response FROM idempotency_keys WHERE app_id = $1 AND key = $2")
                .bind(app.as_str())
                .bind(&key.key)
                .fetch_optional(&self.writer)
                .await?
        else {
            return Ok(None);
        };
        let fingerprint: String = row.try_get("fingerprint")?;
        if fingerprint != key.fingerprint {
            return Ok(Some(PublishOutcome::KeyReused));
        }
        Ok(Some(PublishOutcome::Replayed(StoredResponse {
            status: row.try_get::<i64, _>("status")? as u16,
            body: row.try_get("response")?,
        })))
    }

    /// An event of an app with all its deliveries.
    #[tracing::instrument(skip_all, fields(app = %app, event = %id))]
    pub async fn get_event(
        &self,
        app: &AppId,
        id: &EventId,
    ) -> Result<Option<(Event, Vec<Delivery>)>> {
        let Some(row) = sqlx::query(
            "SELECT id, app_id, event_type, ordering_key, sequence, body, created_at FROM events WHERE id = $1 AND app_id = $2",
        )
        .bind(id.as_str())
        .bind(app.as_str())
        .fetch_optional(&self.reader)
        .await?
        else {
            return Ok(None);
        };
        let event = event_from_row(&row)?;
        let sql =
            format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE event_id = $1 ORDER BY id");
        let deliveries = sqlx::query(&sql)
            .bind(id.as_str())
            .fetch_all(&self.reader)
            .await?
            .iter()
            .map(delivery_from_row)
            .collect::<Result<_>>()?;
        Ok(Some((event, deliveries)))
    }

    /// How many events an app has.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn count_events(&self, app: &AppId) -> Result<u64> {
        let count: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE app_id = $1")
            .bind(app.as_str())
            .fetch_one(&self.reader)
            .await?;
        Ok(count as u64)
    }

    /// Deletes idempotency records created before `cutoff`; returns how many.
    #[tracing::instrument(skip_all)]
    pub async fn purge_idempotency_keys(&self, cutoff: Timestamp) -> Result<u64> {
        Ok(
            sqlx::query("DELETE FROM idempotency_keys WHERE created_at < $1")
                .bind(cutoff.as_millis())
                .execute(&self.writer)
                .await?
                .rows_affected(),
        )
    }
}
