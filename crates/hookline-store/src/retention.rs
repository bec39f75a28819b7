//! Retention: removing old history in small batches, so a long-running
//! deployment's database levels off instead of growing forever.
//!
//! What goes, once older than its period (counted from creation):
//!
//! - **succeeded deliveries** and their attempt rows, and **dead deliveries of a
//!   deleted endpoint** (nothing can replay them) with theirs;
//! - **events** that have no delivery left (all succeeded and removed, or the
//!   event had no subscriber);
//! - **idempotency records** (their own, shorter period);
//! - the per-minute counts of events **payload filters dropped**, and the
//!   **marks** on endpoints' timelines;
//! - the **runs of sequence numbers** (`crate::sequences`), by
//!   [`Store::purge_sequence_runs`].
//!
//! What stays: pending, in-flight, blocked and **dead** deliveries (of endpoints
//! that exist) with their
//! attempts and events — the dead-letter queue is for people to act on, and a
//! replay needs the event. Each batch is one short transaction of at most
//! [`RETENTION_BATCH`] deliveries found by a primary-key range scan (ids sort by
//! creation time, so no index is added to the hot path for this), so delivery
//! never waits behind retention for more than a batch.

use hookline_core::ids::{DeliveryId, EventId};
use hookline_core::time::Timestamp;

use crate::db::{Batch, Sql};
use crate::{Result, Store};

/// Deliveries (and at most as many events) removed per transaction.
pub const RETENTION_BATCH: u32 = 1000;

/// What one retention batch removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Purged {
    pub deliveries: u64,
    pub attempts: u64,
    pub events: u64,
}

impl Purged {
    /// Whether the batch was full: more may be waiting.
    pub fn full(&self) -> bool {
        self.deliveries >= u64::from(RETENTION_BATCH) || self.events >= u64::from(RETENTION_BATCH)
    }
}

/// The attempts of a batch of deliveries.
pub(crate) static DELETE_ATTEMPTS: Sql = Sql::new(|engine| {
    format!(
        "DELETE FROM attempts WHERE {}",
        engine.in_batch("delivery_id", 1)
    )
});

/// A batch of deliveries.
pub(crate) static DELETE_DELIVERIES: Sql =
    Sql::new(|engine| format!("DELETE FROM deliveries WHERE {}", engine.in_batch("id", 1)));

impl Store {
    /// Removes one batch of succeeded deliveries (and dead ones of deleted endpoints)
    /// created before `cutoff` (with their
    /// attempts), then one batch of events created before `cutoff` that have no
    /// delivery left. Call again while [`Purged::full`].
    #[tracing::instrument(skip_all)]
    pub async fn purge_history(&self, cutoff: Timestamp) -> Result<Purged> {
        let cutoff_ms = cutoff.as_millis().max(0) as u64;
        let mut tx = self.writer.begin().await?;
        // Succeeded deliveries, and dead ones nothing can replay, oldest first, by the
        // primary key.
        let rows = self.engine.query(
            "SELECT id, first_attempt_id FROM deliveries WHERE id < $1 AND (state = 'succeeded' OR (state = 'dead' \
             AND NOT EXISTS (SELECT 1 FROM endpoints WHERE endpoints.id = deliveries.endpoint_id))) \
             ORDER BY id LIMIT $2",
        )
        .bind(DeliveryId::first_of_millisecond(cutoff_ms).as_str())
        .bind(i64::from(RETENTION_BATCH))
        .fetch_all(&mut tx)
        .await?;
        let ids: Vec<String> = rows
            .iter()
            .map(|row| row.try_get("id"))
            .collect::<Result<_, _>>()?;
        // A delivery's first attempt goes with its row, when the row holds it.
        let mut carried = 0;
        for row in &rows {
            carried += u64::from(
                row.try_get::<Option<String>, _>("first_attempt_id")?
                    .is_some(),
            );
        }
        let mut purged = Purged::default();
        if !ids.is_empty() {
            let batch = || Batch::default().text(ids.iter().map(|id| Some(id.as_str())));
            purged.attempts = self
                .engine
                .query(DELETE_ATTEMPTS.text(self.engine))
                .bind_batch(batch())
                .execute(&mut tx)
                .await?
                .rows_affected()
                + carried;
            purged.deliveries = self
                .engine
                .query(DELETE_DELIVERIES.text(self.engine))
                .bind_batch(batch())
                .execute(&mut tx)
                .await?
                .rows_affected();
        }
        // Events without any delivery left, nor a `fanout` row still to send
        // (each probe is an index lookup by event).
        purged.events = self
            .engine
            .query(
                "DELETE FROM events WHERE id IN ( \
               SELECT id FROM events e WHERE e.id < $1 \
               AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id) \
               AND NOT EXISTS (SELECT 1 FROM fanout f WHERE f.event_id = e.id) \
               ORDER BY e.id LIMIT $2)",
            )
            .bind(EventId::first_of_millisecond(cutoff_ms).as_str())
            .bind(i64::from(RETENTION_BATCH))
            .execute(&mut tx)
            .await?
            .rows_affected();
        // The endpoints' timeline marks.
        self.engine
            .query("DELETE FROM endpoint_marks WHERE at < $1")
            .bind(cutoff.as_millis())
            .execute(&mut tx)
            .await?;
        // The counts of events payload filters dropped, by the minute.
        self.engine
            .query("DELETE FROM filter_drops WHERE minute < $1")
            .bind(cutoff.as_millis().div_euclid(60_000))
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(purged)
    }

    /// Makes the space of removed rows reusable. PostgreSQL reuses a deleted row's
    /// space only after a `VACUUM`; retention runs one itself rather than rely on
    /// autovacuum being on and keeping pace (with it off, a steady state with short
    /// retention grew without bound). `SKIP_LOCKED` passes over a table another
    /// vacuum holds. SQLite reuses freed pages by itself: nothing to do.
    #[tracing::instrument(skip_all)]
    pub async fn reclaim_space(&self) -> Result<()> {
        if self.engine == crate::Engine::Postgres {
            self.engine
                .query(
                    "VACUUM (SKIP_LOCKED) deliveries, attempts, events, idempotency_keys, sequence_runs",
                )
                .execute(&self.writer)
                .await?;
        }
        Ok(())
    }

    /// Deletes idempotency records created before `cutoff`; returns how many.
    #[tracing::instrument(skip_all)]
    pub async fn purge_idempotency_keys(&self, cutoff: Timestamp) -> Result<u64> {
        Ok(self
            .engine
            .query("DELETE FROM idempotency_keys WHERE created_at < $1")
            .bind(cutoff.as_millis())
            .execute(&self.writer)
            .await?
            .rows_affected())
    }
}
