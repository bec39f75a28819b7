//! An endpoint's timeline (`hookline_core::timeline`): its marks, written in
//! the transactions that made them, and its attempts counted by bucket.

use hookline_core::ids::{AppId, EndpointId};
use hookline_core::time::Timestamp;
use hookline_core::timeline::{Layout, Mark, MarkKind};

use crate::db::Tx;
use crate::deliveries::every_attempt;
use crate::{Endpoints, Result, StoreError};

/// A mark as read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMark {
    pub at: Timestamp,
    pub kind: MarkKind,
    pub reason: Option<String>,
}

/// An endpoint's timeline over a [`Layout`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timeline {
    /// `(bucket index, delivered, failed)`, for the buckets that hold attempts.
    pub counts: Vec<(i64, u64, u64)>,
    /// The marks in the layout's span, oldest first.
    pub marks: Vec<StoredMark>,
    /// The span held more attempts than the cap: only the latest were
    /// counted, and the counts are whole from this time on.
    pub complete_since: Option<Timestamp>,
}

/// Writes `marks` of `endpoint` in the caller's transaction.
pub(crate) async fn insert_marks(
    tx: &mut Tx,
    endpoint: &EndpointId,
    marks: &[Mark],
    now: Timestamp,
) -> Result<()> {
    // Monotonic: marks of one transaction share their time and read back in order.
    let mut ids = ulid::Generator::new();
    for mark in marks {
        let id = ids
            .generate()
            .map_err(|e| StoreError::Corrupt(format!("mark id: {e}")))?;
        tx.engine()
            .query(
                "INSERT INTO endpoint_marks (id, endpoint_id, at, kind, reason) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(format!("mk_{id}"))
            .bind(endpoint.as_str())
            .bind(now.as_millis())
            .bind(mark.kind.as_str())
            .bind(mark.reason)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

impl Endpoints<'_> {
    /// The endpoint's attempts in `layout`'s buckets (the latest `cap` of
    /// them at most) and its marks in the span (the caller checked that the
    /// endpoint is `app`'s, or was: marks outlive a delete, as attempts do).
    #[tracing::instrument(skip_all, fields(endpoint = %id))]
    pub async fn endpoint_timeline(
        &self,
        app: &AppId,
        id: &EndpointId,
        layout: &Layout,
        cap: u32,
    ) -> Result<Timeline> {
        // The latest attempts first, by the endpoint's indexes (as the
        // stats' sample), then counted per bucket.
        let rows = self
            .engine
            .query(&format!(
                "SELECT (started_at - $3) / $4 AS bucket, \
                   COUNT(*) AS attempts, \
                   SUM(CASE WHEN verdict = 'delivered' THEN 1 ELSE 0 END) AS delivered, \
                   MIN(started_at) AS oldest \
                 FROM (SELECT id, started_at, verdict FROM {} \
                   WHERE endpoint_id = $1 AND app_id = $2 AND id IS NOT NULL AND started_at >= $3 \
                   ORDER BY id DESC LIMIT $5) latest \
                 GROUP BY 1",
                every_attempt(self.engine, true)
            ))
            .bind(id.as_str())
            .bind(app.as_str())
            .bind(layout.since.as_millis())
            .bind(layout.width)
            .bind(i64::from(cap))
            .fetch_all(&self.reader)
            .await?;
        let mut counts = Vec::with_capacity(rows.len());
        let (mut total, mut oldest) = (0u64, i64::MAX);
        for row in &rows {
            let attempts = row.try_get::<i64, _>("attempts")?.max(0) as u64;
            let delivered = row.try_get::<i64, _>("delivered")?.max(0) as u64;
            total += attempts;
            oldest = oldest.min(row.try_get::<i64, _>("oldest")?);
            counts.push((
                row.try_get::<i64, _>("bucket")?,
                delivered,
                attempts - delivered,
            ));
        }
        let marks = self
            .engine
            .query(
                "SELECT at, kind, reason FROM endpoint_marks \
                 WHERE endpoint_id = $1 AND at >= $2 ORDER BY at, id LIMIT 1000",
            )
            .bind(id.as_str())
            .bind(layout.since.as_millis())
            .fetch_all(&self.reader)
            .await?
            .iter()
            .map(|row| {
                let kind: String = row.try_get("kind")?;
                Ok(StoredMark {
                    at: Timestamp::from_millis(row.try_get("at")?),
                    kind: MarkKind::parse(&kind)
                        .ok_or_else(|| StoreError::Corrupt(format!("mark kind: {kind}")))?,
                    reason: row.try_get("reason")?,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Timeline {
            counts,
            marks,
            complete_since: (total >= u64::from(cap)).then(|| Timestamp::from_millis(oldest)),
        })
    }
}
