//! Deliveries: claim under lease, completion, release, replay, the DLQ and attempts.

use std::sync::Arc;
use std::time::Duration;

use hookline_core::ids::{AppId, AttemptId, DeliveryId};
use hookline_core::model::{AttemptVerdict, DeadReason, DeliveryState};
use hookline_core::signing::EndpointSecret;
use hookline_core::time::Timestamp;
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::endpoints::retry_from_row;
use crate::records::{
    Attempt, AttemptRecord, ClaimedDelivery, Completion, Delivery, Page, ReplayOutcome,
};
use crate::{parse_column, parse_optional_column, Engine, Result, Store, StoreError};

pub(crate) const DELIVERY_COLUMNS: &str =
    "id, app_id, event_id, endpoint_id, state, due_at, attempts, \
     round_started_at, last_attempt_at, dead_reason, dead_at, created_at";

pub(crate) fn delivery_from_row(row: &AnyRow) -> Result<Delivery> {
    let millis = |column: &str| -> Result<Option<Timestamp>> {
        Ok(row
            .try_get::<Option<i64>, _>(column)?
            .map(Timestamp::from_millis))
    };
    Ok(Delivery {
        id: parse_column(row, "id")?,
        app_id: parse_column(row, "app_id")?,
        event_id: parse_column(row, "event_id")?,
        endpoint_id: parse_column(row, "endpoint_id")?,
        state: parse_column(row, "state")?,
        due_at: Timestamp::from_millis(row.try_get("due_at")?),
        attempts: row.try_get::<i64, _>("attempts")? as u32,
        round_started_at: Timestamp::from_millis(row.try_get("round_started_at")?),
        last_attempt_at: millis("last_attempt_at")?,
        dead_reason: parse_optional_column(row, "dead_reason")?,
        dead_at: millis("dead_at")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

fn attempt_from_row(row: &AnyRow) -> Result<Attempt> {
    Ok(Attempt {
        id: parse_column(row, "id")?,
        delivery_id: parse_column(row, "delivery_id")?,
        endpoint_id: parse_column(row, "endpoint_id")?,
        attempt_number: row.try_get::<i64, _>("attempt_number")? as u32,
        started_at: Timestamp::from_millis(row.try_get("started_at")?),
        duration_ms: row.try_get::<i64, _>("duration_ms")? as u64,
        status_code: row
            .try_get::<Option<i64>, _>("status_code")?
            .map(|s| s as u16),
        response_body: row.try_get("response_body")?,
        error_kind: parse_optional_column(row, "error_kind")?,
        error_message: row.try_get("error_message")?,
        verdict: parse_column(row, "verdict")?,
        next_attempt_at: row
            .try_get::<Option<i64>, _>("next_attempt_at")?
            .map(Timestamp::from_millis),
        dead_reason: parse_optional_column(row, "dead_reason")?,
    })
}

/// What a claim returns per delivery: the delivery joined with its endpoint and event body.
const CLAIMED_COLUMNS: &str =
    "c.id, c.app_id, c.event_id, c.endpoint_id, c.lease_token, c.attempts, \
     c.round_started_at, ep.url, ep.secret, ep.enabled, ep.retry_base_ms, ep.retry_cap_ms, \
     ep.max_attempts, ep.max_age_secs, e.body";

/// A claimed row, before it is known whether its endpoint is still there.
pub(crate) enum Claimed {
    Ready(Box<ClaimedDelivery>),
    /// The endpoint was deleted or disabled since the delivery was queued.
    Unroutable {
        id: DeliveryId,
        lease_token: String,
        reason: DeadReason,
    },
}

fn claimed_from_row(row: &AnyRow) -> Result<Claimed> {
    let id: DeliveryId = parse_column(row, "id")?;
    let lease_token: String = row.try_get("lease_token")?;
    let Some(secret) = row.try_get::<Option<String>, _>("secret")? else {
        return Ok(Claimed::Unroutable {
            id,
            lease_token,
            reason: DeadReason::EndpointDeleted,
        });
    };
    if row.try_get::<i64, _>("enabled")? == 0 {
        return Ok(Claimed::Unroutable {
            id,
            lease_token,
            reason: DeadReason::EndpointDisabled,
        });
    }
    let body: Vec<u8> = row.try_get("body")?;
    Ok(Claimed::Ready(Box::new(ClaimedDelivery {
        id,
        app_id: parse_column(row, "app_id")?,
        event_id: parse_column(row, "event_id")?,
        endpoint_id: parse_column(row, "endpoint_id")?,
        lease_token,
        attempts: row.try_get::<i64, _>("attempts")? as u32,
        round_started_at: Timestamp::from_millis(row.try_get("round_started_at")?),
        url: row.try_get("url")?,
        secret: EndpointSecret::parse(&secret)
            .map_err(|_| StoreError::Corrupt("endpoint secret".into()))?,
        retry: retry_from_row(row)?,
        body: Arc::from(body),
    })))
}

impl Store {
    /// Claims up to `limit` due deliveries — pending ones whose time has come
    /// and in-flight ones whose lease expired — leasing them until `now + lease`.
    ///
    /// Deliveries whose endpoint is gone or disabled are dead-lettered here
    /// instead of being returned (reason `endpoint_deleted` / `endpoint_disabled`;
    /// a replay after re-enabling sends them).
    #[tracing::instrument(skip_all, fields(limit))]
    pub async fn claim_due_deliveries(
        &self,
        now: Timestamp,
        lease: Duration,
        limit: u32,
    ) -> Result<Vec<ClaimedDelivery>> {
        let lease_until = (now + lease).as_millis();
        let token = ulid::Ulid::new().to_string();
        let mut tx = self.writer.begin().await?;
        let rows = match self.engine {
            // One round trip: lock due rows skipping those other nodes hold, lease them, join what sending needs.
            Engine::Postgres => {
                let sql = format!(
                    "WITH c AS ( \
                       UPDATE deliveries d SET state = 'in_flight', due_at = $2, lease_token = $3, updated_at = $1 \
                       FROM (SELECT id FROM deliveries WHERE state IN ('pending', 'in_flight') AND due_at <= $1 \
                             ORDER BY due_at LIMIT $4 FOR UPDATE SKIP LOCKED) due \
                       WHERE d.id = due.id \
                       RETURNING d.id, d.app_id, d.event_id, d.endpoint_id, d.lease_token, d.attempts, d.round_started_at) \
                     SELECT {CLAIMED_COLUMNS} FROM c JOIN events e ON e.id = c.event_id \
                     LEFT JOIN endpoints ep ON ep.id = c.endpoint_id"
                );
                sqlx::query(&sql)
                    .bind(now.as_millis())
                    .bind(lease_until)
                    .bind(&token)
                    .bind(i64::from(limit))
                    .fetch_all(&mut *tx)
                    .await?
            }
            // SQLite has one writer, so no row locking is needed; the claimed rows are
            // then found through the due index (in_flight, due_at = lease_until) and the token.
            Engine::Sqlite => {
                sqlx::query(
                    "UPDATE deliveries SET state = 'in_flight', due_at = $2, lease_token = $3, updated_at = $1 \
                     WHERE id IN (SELECT id FROM deliveries WHERE state IN ('pending', 'in_flight') AND due_at <= $1 \
                                  ORDER BY due_at LIMIT $4)",
                )
                .bind(now.as_millis())
                .bind(lease_until)
                .bind(&token)
                .bind(i64::from(limit))
                .execute(&mut *tx)
                .await?;
                let sql = format!(
                    "SELECT {CLAIMED_COLUMNS} FROM deliveries c JOIN events e ON e.id = c.event_id \
                     LEFT JOIN endpoints ep ON ep.id = c.endpoint_id \
                     WHERE c.state = 'in_flight' AND c.due_at = $1 AND c.lease_token = $2"
                );
                sqlx::query(&sql)
                    .bind(lease_until)
                    .bind(&token)
                    .fetch_all(&mut *tx)
                    .await?
            }
        };
        let mut ready = Vec::with_capacity(rows.len());
        for row in &rows {
            match claimed_from_row(row)? {
                Claimed::Ready(delivery) => ready.push(*delivery),
                Claimed::Unroutable {
                    id,
                    lease_token,
                    reason,
                } => {
                    sqlx::query(
                        "UPDATE deliveries SET state = 'dead', dead_reason = $3, dead_at = $4, due_at = $4, \
                         lease_token = NULL, updated_at = $4 WHERE id = $1 AND lease_token = $2",
                    )
                    .bind(id.as_str())
                    .bind(lease_token)
                    .bind(reason.as_str())
                    .bind(now.as_millis())
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        tx.commit().await?;
        Ok(ready)
    }

    /// Records finished attempts and moves each delivery on, all in one transaction.
    ///
    /// A delivery whose lease was lost (another node reclaimed it after expiry)
    /// keeps its new owner's state; the attempt is recorded all the same, since it happened.
    #[tracing::instrument(skip_all, fields(count = records.len()))]
    pub async fn complete_attempts(&self, records: &[AttemptRecord], now: Timestamp) -> Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer.begin().await?;
        for record in records {
            let (verdict, state, due_at, next_attempt_at, dead_reason) = match record.completion {
                Completion::Succeeded => (
                    AttemptVerdict::Delivered,
                    DeliveryState::Succeeded,
                    now,
                    None,
                    None,
                ),
                Completion::RetryAt(at) => (
                    AttemptVerdict::Retry,
                    DeliveryState::Pending,
                    at,
                    Some(at),
                    None,
                ),
                Completion::Dead(reason) => (
                    AttemptVerdict::Dead,
                    DeliveryState::Dead,
                    now,
                    None,
                    Some(reason),
                ),
            };
            let (error_kind, error_message) = match &record.error {
                Some((kind, message)) => (Some(kind.as_str()), Some(message.as_str())),
                None => (None, None),
            };
            sqlx::query(
                "INSERT INTO attempts (id, delivery_id, app_id, endpoint_id, attempt_number, started_at, duration_ms, \
                 status_code, response_body, error_kind, error_message, verdict, next_attempt_at, dead_reason) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
            )
            .bind(AttemptId::generate().as_str())
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
            .bind(verdict.as_str())
            .bind(next_attempt_at.map(Timestamp::as_millis))
            .bind(dead_reason.map(DeadReason::as_str))
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE deliveries SET state = $3, due_at = $4, attempts = $5, last_attempt_at = $6, \
                 dead_reason = $7, dead_at = $8, lease_token = NULL, updated_at = $9 \
                 WHERE id = $1 AND lease_token = $2",
            )
            .bind(record.delivery_id.as_str())
            .bind(&record.lease_token)
            .bind(state.as_str())
            .bind(due_at.as_millis())
            .bind(i64::from(record.attempt_number))
            .bind(record.started_at.as_millis())
            .bind(dead_reason.map(DeadReason::as_str))
            .bind(dead_reason.map(|_| now.as_millis()))
            .bind(now.as_millis())
            .execute(&mut *tx)
            .await?;
            if record.disable_endpoint {
                sqlx::query("UPDATE endpoints SET enabled = 0, updated_at = $2 WHERE id = $1")
                    .bind(record.endpoint_id.as_str())
                    .bind(now.as_millis())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(())
    }

    /// Gives claimed deliveries back unattempted (a draining dispatcher): pending
    /// and due now, their attempt budget untouched.
    #[tracing::instrument(skip_all, fields(count = claims.len()))]
    pub async fn release_deliveries(
        &self,
        claims: &[(DeliveryId, String)],
        now: Timestamp,
    ) -> Result<()> {
        if claims.is_empty() {
            return Ok(());
        }
        let mut tx = self.writer.begin().await?;
        for (id, token) in claims {
            sqlx::query(
                "UPDATE deliveries SET state = 'pending', due_at = $3, lease_token = NULL, updated_at = $3 \
                 WHERE id = $1 AND lease_token = $2",
            )
            .bind(id.as_str())
            .bind(token)
            .bind(now.as_millis())
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        self.notify_due();
        Ok(())
    }

    /// When the earliest pending delivery (or lease) falls due, if any.
    #[tracing::instrument(skip_all)]
    pub async fn next_due_at(&self) -> Result<Option<Timestamp>> {
        let due: Option<i64> = sqlx::query_scalar(
            "SELECT MIN(due_at) FROM deliveries WHERE state IN ('pending', 'in_flight')",
        )
        .fetch_one(&self.reader)
        .await?;
        Ok(due.map(Timestamp::from_millis))
    }

    /// One delivery of an app.
    #[tracing::instrument(skip_all, fields(app = %app, delivery = %id))]
    pub async fn get_delivery(&self, app: &AppId, id: &DeliveryId) -> Result<Option<Delivery>> {
        let sql =
            format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE id = $1 AND app_id = $2");
        sqlx::query(&sql)
            .bind(id.as_str())
            .bind(app.as_str())
            .fetch_optional(&self.reader)
            .await?
            .map(|row| delivery_from_row(&row))
            .transpose()
    }

    /// A delivery's attempts, newest first (every round's).
    #[tracing::instrument(skip_all, fields(app = %app, delivery = %id))]
    pub async fn list_attempts(
        &self,
        app: &AppId,
        id: &DeliveryId,
        page: &Page,
    ) -> Result<Vec<Attempt>> {
        let rows = sqlx::query(
            "SELECT id, delivery_id, endpoint_id, attempt_number, started_at, duration_ms, status_code, \
             response_body, error_kind, error_message, verdict, next_attempt_at, dead_reason \
             FROM attempts WHERE delivery_id = $1 AND app_id = $2 AND ($3 IS NULL OR id < $3) \
             ORDER BY id DESC LIMIT $4",
        )
        .bind(id.as_str())
        .bind(app.as_str())
        .bind(page.before.as_deref())
        .bind(i64::from(page.limit))
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(attempt_from_row).collect()
    }

    /// An app's dead deliveries, most recently dead first. The cursor is
    /// [`Store::dlq_cursor`] of the last row of the previous page.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn list_dlq(&self, app: &AppId, page: &Page) -> Result<Vec<Delivery>> {
        let (dead_at, id) = match page.before.as_deref().and_then(|c| c.split_once('_')) {
            Some((at, id)) => (at.parse::<i64>().ok(), Some(id.to_owned())),
            None => (None, None),
        };
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE app_id = $1 AND state = 'dead' \
             AND ($2 IS NULL OR dead_at < $2 OR (dead_at = $2 AND id < $3)) \
             ORDER BY dead_at DESC, id DESC LIMIT $4"
        );
        let rows = sqlx::query(&sql)
            .bind(app.as_str())
            .bind(dead_at)
            .bind(id)
            .bind(i64::from(page.limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(delivery_from_row).collect()
    }

    /// The cursor that continues a DLQ listing after `delivery`.
    pub fn dlq_cursor(delivery: &Delivery) -> String {
        format!(
            "{}_{}",
            delivery.dead_at.unwrap_or_default().as_millis(),
            delivery.id
        )
    }

    /// Moves a dead delivery back to pending, due now, in a new round (attempt
    /// count 0, max age counted afresh); the event id — and so `webhook-id` — stays.
    ///
    /// The state check is part of the `UPDATE`, so of two concurrent replays
    /// exactly one starts a round; the other sees [`ReplayOutcome::NotDead`].
    #[tracing::instrument(skip_all, fields(app = %app, delivery = %id))]
    pub async fn replay_delivery(
        &self,
        app: &AppId,
        id: &DeliveryId,
        now: Timestamp,
    ) -> Result<ReplayOutcome> {
        let sql = format!(
            "UPDATE deliveries SET state = 'pending', due_at = $3, attempts = 0, round_started_at = $3, \
             dead_reason = NULL, dead_at = NULL, updated_at = $3 \
             WHERE id = $1 AND app_id = $2 AND state = 'dead' RETURNING {DELIVERY_COLUMNS}"
        );
        let replayed = sqlx::query(&sql)
            .bind(id.as_str())
            .bind(app.as_str())
            .bind(now.as_millis())
            .fetch_optional(&self.writer)
            .await?;
        if let Some(row) = replayed {
            self.notify_due();
            return Ok(ReplayOutcome::Replayed(delivery_from_row(&row)?));
        }
        Ok(match self.get_delivery(app, id).await? {
            Some(delivery) => ReplayOutcome::NotDead(delivery),
            None => ReplayOutcome::NotFound,
        })
    }
}
