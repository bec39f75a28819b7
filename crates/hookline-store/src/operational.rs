//! Operational webhooks' rows (`hookline_core::operational`): the notices
//! written in the transactions that made them happen, the dead deliveries
//! counted per endpoint, window and reason, and the internal app they are
//! published into. The publishing loop reads what is pending, publishes it
//! (each notice under its own idempotency key, so a crash between the publish
//! and the delete publishes nothing twice) and deletes it.

use hookline_core::ids::{AppId, EndpointId};
use hookline_core::operational::{self, DeadCount, Kind, Notice};
use hookline_core::time::Timestamp;

use crate::db::{Batch, Kind as Column, Row, Sql, Tx};
use crate::records::{EventType, NewApp};
use crate::{parse_column, Operational, Result, StoreError};

/// Writes `notices` in the caller's transaction.
pub(crate) async fn insert_notices(tx: &mut Tx, notices: &[Notice], now: Timestamp) -> Result<()> {
    for notice in notices {
        tx.engine()
            .query(
                "INSERT INTO operational_notices (id, event_type, data, created_at) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(format!("op_{}", ulid::Ulid::new()))
            .bind(notice.kind.event_type())
            .bind(notice.data.to_string())
            .bind(now.as_millis())
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// Adds to the endpoints' dead counts of their windows.
static COUNT_DEAD: Sql = Sql::new(|engine| {
    format!(
        "INSERT INTO operational_dead (endpoint_id, window_index, reason, app_id, count, last_status, \
           last_delivery_id, last_event_id, last_at) \
         SELECT endpoint_id, window_index, reason, app_id, count, last_status, last_delivery_id, \
           last_event_id, last_at FROM {} WHERE true \
         ON CONFLICT (endpoint_id, window_index, reason) DO UPDATE SET \
           count = operational_dead.count + excluded.count, last_status = excluded.last_status, \
           last_delivery_id = excluded.last_delivery_id, last_event_id = excluded.last_event_id, \
           last_at = excluded.last_at",
        engine.rows(
            1,
            &[
                ("endpoint_id", Column::Text),
                ("window_index", Column::Int),
                ("reason", Column::Text),
                ("app_id", Column::Text),
                ("count", Column::Int),
                ("last_status", Column::Int),
                ("last_delivery_id", Column::Text),
                ("last_event_id", Column::Text),
                ("last_at", Column::Int),
            ]
        )
    )
});

/// Counts a completion's dead deliveries by the second (the publishing loop
/// adds seconds up into its windows), sorted by endpoint and reason: the order
/// every transaction takes these rows' locks in.
pub(crate) async fn count_dead(tx: &mut Tx, dead: &[(EndpointId, AppId, DeadCount)]) -> Result<()> {
    if dead.is_empty() {
        return Ok(());
    }
    let rows: Vec<(&EndpointId, i64, &AppId, &DeadCount)> = dead
        .iter()
        .map(|(e, a, c)| (e, operational::second_of(c.last_at), a, c))
        .collect();
    add_dead(tx, rows).await
}

/// Adds dead counts to the rows of their (endpoint, second, reason).
async fn add_dead(
    tx: &mut Tx,
    mut rows: Vec<(&EndpointId, i64, &AppId, &DeadCount)>,
) -> Result<()> {
    rows.sort_by(|x, y| (x.0, x.1, x.3.reason.as_str()).cmp(&(y.0, y.1, y.3.reason.as_str())));
    let batch = Batch::default()
        .text(rows.iter().map(|r| Some(r.0.as_str())))
        .int(rows.iter().map(|r| Some(r.1)))
        .text(rows.iter().map(|r| Some(r.3.reason.as_str())))
        .text(rows.iter().map(|r| Some(r.2.as_str())))
        .int(rows.iter().map(|r| Some(r.3.count as i64)))
        .int(rows.iter().map(|r| r.3.last_status.map(i64::from)))
        .text(rows.iter().map(|r| Some(r.3.last_delivery.as_str())))
        .text(rows.iter().map(|r| Some(r.3.last_event.as_str())))
        .int(rows.iter().map(|r| Some(r.3.last_at.as_millis())));
    let engine = tx.engine();
    engine
        .query(COUNT_DEAD.text(engine))
        .bind_batch(batch)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// A dead-count row's counts.
fn dead_count(row: &Row) -> Result<DeadCount> {
    Ok(DeadCount {
        reason: parse_column(row, "reason")?,
        count: row.try_get::<i64, _>("count")?.max(0) as u64,
        last_status: row
            .try_get::<Option<i64>, _>("last_status")?
            .map(|s| s as u16),
        last_delivery: row.try_get("last_delivery_id")?,
        last_event: row.try_get("last_event_id")?,
        last_at: Timestamp::from_millis(row.try_get("last_at")?),
    })
}

/// A notice waiting to be published.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingNotice {
    /// Its idempotency key: a notice's id, or `dead:<endpoint>:<window start, ms>`.
    pub key: String,
    pub kind: Kind,
    pub data: serde_json::Value,
    /// When it happened (the event's `created_at` is when it is published).
    pub at: Timestamp,
    /// What deleting it takes.
    pub source: Source,
}

/// Where a pending notice is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Notice(String),
    /// An endpoint's dead counts of the seconds `from..=to`.
    Dead {
        endpoint: EndpointId,
        from: i64,
        to: i64,
    },
}

impl Operational<'_> {
    /// Makes the internal app (uid `hookline`, or none if an app already has that
    /// uid) and the catalog's `hookline.` types, if missing.
    #[tracing::instrument(skip_all)]
    pub async fn ensure_internal_app(&self, now: Timestamp) -> Result<()> {
        let app = NewApp {
            uid: Some(operational::APP_UID.into()),
            name: "Hookline (operational webhooks)".into(),
            portal: Default::default(),
        };
        for uid in [app.uid.as_deref(), None] {
            let inserted = self
                .engine
                .query(
                    "INSERT INTO apps (id, uid, name, created_at, updated_at) VALUES ($1, $2, $3, $4, $4) \
                     ON CONFLICT DO NOTHING",
                )
                .bind(operational::APP_ID)
                .bind(uid)
                .bind(&app.name)
                .bind(now.as_millis())
                .execute(&self.writer)
                .await?
                .rows_affected();
            let exists =
                inserted == 1 || self.apps().find_app(operational::APP_ID).await?.is_some();
            if exists {
                break;
            }
        }
        for kind in Kind::ALL {
            let created = self
                .catalog()
                .create_event_type(&EventType {
                    name: kind.event_type().into(),
                    description: kind.description().into(),
                    schema: Some(kind.schema()),
                    example: Some(kind.example()),
                    deprecated: false,
                    created_at: now,
                    updated_at: now,
                })
                .await;
            match created {
                Ok(()) | Err(StoreError::Conflict(_)) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// Records notices now, in a transaction of their own.
    pub async fn notify(&self, notices: &[Notice], now: Timestamp) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        insert_notices(&mut tx, notices, now).await?;
        tx.commit().await
    }

    /// Up to `limit` notices to publish, oldest first: those recorded, and one
    /// per endpoint for each window of `window_ms` that closed before `now`,
    /// with the dead counts of its seconds added up.
    #[tracing::instrument(skip_all)]
    pub async fn pending(
        &self,
        now: Timestamp,
        window_ms: i64,
        limit: u32,
    ) -> Result<Vec<PendingNotice>> {
        let mut pending = Vec::new();
        let rows = self
            .engine
            .query(
                "SELECT id, event_type, data, created_at FROM operational_notices \
                 ORDER BY id LIMIT $1",
            )
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?;
        for row in rows {
            let id: String = row.try_get("id")?;
            let event_type: String = row.try_get("event_type")?;
            let kind = Kind::parse(&event_type)
                .ok_or_else(|| StoreError::Corrupt(format!("operational notice {event_type}")))?;
            let data: String = row.try_get("data")?;
            pending.push(PendingNotice {
                key: id.clone(),
                kind,
                data: serde_json::from_str(&data)
                    .map_err(|e| StoreError::Corrupt(format!("operational notice: {e}")))?,
                at: Timestamp::from_millis(row.try_get("created_at")?),
                source: Source::Notice(id),
            });
        }
        let rows = self
            .engine
            .query(
                "SELECT endpoint_id, window_index, reason, app_id, count, last_status, \
                   last_delivery_id, last_event_id, last_at FROM operational_dead \
                 WHERE window_index < $1 ORDER BY window_index, endpoint_id, reason LIMIT $2",
            )
            .bind(operational::open_window_first_second(now, window_ms))
            .bind(i64::from(limit) * 8)
            .fetch_all(&self.reader)
            .await?;
        let cut = rows.len() as i64 == i64::from(limit) * 8;
        let seconds = rows
            .iter()
            .map(|row| {
                Ok((
                    parse_column(row, "endpoint_id")?,
                    row.try_get("window_index")?,
                    parse_column(row, "app_id")?,
                    dead_count(row)?,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        for window in operational::dead_windows(seconds, window_ms, cut) {
            let (from, to) = window.seconds();
            pending.push(PendingNotice {
                key: window.key(),
                kind: Kind::DeliveryDead,
                data: operational::dead_payload(
                    &window.app,
                    &window.endpoint,
                    &window.counts,
                    window.start(),
                ),
                at: window.last_at(),
                source: Source::Dead {
                    endpoint: window.endpoint,
                    from,
                    to,
                },
            });
        }
        Ok(pending)
    }

    /// Settles notices after their publish: `told` ones are removed; a dead-count
    /// notice's rows are taken out by one statement and whatever it did not
    /// tell (counts that reached its window after it was read, or all of them
    /// when `told` is false: its window had been told before, under the same
    /// key) goes into the second `into`, to be told with a later window. So no
    /// death is lost between the read and the removal, nor told twice.
    pub async fn settle(&self, notices: &[(PendingNotice, bool)], into: i64) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        for (notice, told) in notices {
            match &notice.source {
                // An audit notice's key is its own id: refused, it was told before.
                Source::Notice(id) => {
                    self.engine
                        .query("DELETE FROM operational_notices WHERE id = $1")
                        .bind(id.as_str())
                        .execute(&mut tx)
                        .await?;
                }
                Source::Dead { endpoint, from, to } => {
                    let rows = self
                        .engine
                        .query(
                            "DELETE FROM operational_dead WHERE endpoint_id = $1 \
                             AND window_index >= $2 AND window_index <= $3 \
                             RETURNING reason, app_id, count, last_status, last_delivery_id, \
                               last_event_id, last_at",
                        )
                        .bind(endpoint.as_str())
                        .bind(*from)
                        .bind(*to)
                        .fetch_all(&mut tx)
                        .await?;
                    let Some(first) = rows.first() else {
                        continue;
                    };
                    let app: AppId = parse_column(first, "app_id")?;
                    let counts = rows.iter().map(dead_count).collect::<Result<Vec<_>>>()?;
                    let untold = operational::untold(&counts, told.then_some(&notice.data));
                    let rows = untold
                        .iter()
                        .map(|count| (endpoint, into, &app, count))
                        .collect();
                    add_dead(&mut tx, rows).await?;
                }
            }
        }
        tx.commit().await
    }
}
