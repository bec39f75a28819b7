//! Deliveries: reading them and their attempts, the DLQ, release and replay.
//! (Claiming is in `claim`, completing in `complete`.)

use crate::db::Row;
use hookline_core::ids::{AppId, DeliveryId};
use hookline_core::time::Timestamp;

use crate::claim::Lane;
use crate::records::{Attempt, Delivery, Page, ReplayOutcome};
use crate::{parse_column, parse_optional_column, Result, Store};

pub(crate) const DELIVERY_COLUMNS: &str =
    "id, app_id, event_id, endpoint_id, state, due_at, ordering_key, sequence, attempts, \
     round_started_at, last_attempt_at, dead_reason, dead_at, created_at";

pub(crate) fn delivery_from_row(row: &Row) -> Result<Delivery> {
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
        ordering_key: row.try_get("ordering_key")?,
        sequence: row.try_get::<Option<i64>, _>("sequence")?.map(|s| s as u64),
        attempts: row.try_get::<i64, _>("attempts")? as u32,
        round_started_at: Timestamp::from_millis(row.try_get("round_started_at")?),
        last_attempt_at: millis("last_attempt_at")?,
        dead_reason: parse_optional_column(row, "dead_reason")?,
        dead_at: millis("dead_at")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

fn attempt_from_row(row: &Row) -> Result<Attempt> {
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

impl Store {
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
            self.engine.query(
                "UPDATE deliveries SET state = 'pending', due_at = $3, lease_token = NULL, updated_at = $3 \
                 WHERE id = $1 AND lease_token = $2",
            )
            .bind(id.as_str())
            .bind(token)
            .bind(now.as_millis())
            .execute(&mut tx)
            .await?;
        }
        tx.commit().await?;
        self.notify_due();
        Ok(())
    }

    /// When the earliest pending delivery (or lease) falls due, if any: the
    /// smaller head of the two lane indexes.
    #[tracing::instrument(skip_all)]
    pub async fn next_due_at(&self) -> Result<Option<Timestamp>> {
        let mut earliest: Option<i64> = None;
        for lane in [Lane::Fresh, Lane::Retry] {
            let sql = format!(
                "SELECT MIN(due_at) FROM deliveries WHERE {}",
                lane.predicate()
            );
            let due: Option<i64> = self.engine.query(&sql).fetch_scalar(&self.reader).await?;
            earliest = match (earliest, due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(earliest.map(Timestamp::from_millis))
    }

    /// One delivery of an app.
    #[tracing::instrument(skip_all, fields(app = %app, delivery = %id))]
    pub async fn get_delivery(&self, app: &AppId, id: &DeliveryId) -> Result<Option<Delivery>> {
        let sql =
            format!("SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE id = $1 AND app_id = $2");
        self.engine
            .query(&sql)
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
        let rows = self.engine.query(
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
        let rows = self
            .engine
            .query(&sql)
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
        let replayed = self
            .engine
            .query(&sql)
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
