//! What the queue looks like now, for gauges: each figure from one bounded
//! read of an index (counts stop at [`GAUGE_CAP`]), so sampling it costs the
//! same with a backlog of a thousand or of ten million.

use hookline_core::time::Timestamp;

use crate::claim::{lane_predicate, LEASED};
use crate::db::Sql;
use crate::deliveries::{NEXT_DUE_FRESH, NEXT_DUE_RETRY};
use crate::fanout::NEXT_DUE_FANOUT;
use crate::{Result, Store};
use hookline_core::claim::Lane;

/// The most rows any gauge counts: a larger figure reads as this. Small on
/// purpose: each count walks up to this many index entries through a reader
/// connection's page cache, every sample, in every process.
pub const GAUGE_CAP: i64 = 10_000;

/// Consecutive failed attempts from which an enabled endpoint counts as failing.
pub const FAILING_AFTER: i64 = 20;

/// One lane of the queue (`fresh`: never attempted; `retry`: attempted before).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaneGauges {
    /// Pending or in flight, due or not (capped).
    pub depth: i64,
    /// Pending and due now: what a free dispatcher would claim (capped).
    pub due: i64,
    /// The due time of the lane's oldest pending due delivery.
    pub oldest_due_at: Option<Timestamp>,
}

/// The queue, the DLQ and the endpoints, as the gauges show them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueGauges {
    pub fresh: LaneGauges,
    pub retry: LaneGauges,
    /// In flight past their lease: a dispatcher died or stalled (capped).
    pub expired_leases: i64,
    /// Dead deliveries, the DLQ's size (capped).
    pub dead: i64,
    /// Enabled endpoints by breaker state (`closed`, `open`, `half_open`).
    pub breakers: Vec<(String, i64)>,
    /// Enabled endpoints with at least [`FAILING_AFTER`] consecutive failed attempts.
    pub failing_endpoints: i64,
    /// Disabled endpoints.
    pub disabled_endpoints: i64,
    pub paused_endpoints: i64,
}

/// A count of deliveries matching `filter`, stopping at [`GAUGE_CAP`].
fn capped(filter: &str) -> String {
    format!("SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE {filter} LIMIT {GAUGE_CAP}) AS c")
}

/// Per lane (each count walks one partial index): pending; of those, due by
/// `$1`; and the lane's deliveries in flight (the leased index).
pub(crate) static FRESH_DEPTH: Sql = Sql::new(|_| capped(lane_predicate(Lane::Fresh)));
pub(crate) static RETRY_DEPTH: Sql = Sql::new(|_| capped(lane_predicate(Lane::Retry)));
pub(crate) static FRESH_DUE: Sql =
    Sql::new(|_| capped(&format!("{} AND due_at <= $1", lane_predicate(Lane::Fresh))));
pub(crate) static RETRY_DUE: Sql =
    Sql::new(|_| capped(&format!("{} AND due_at <= $1", lane_predicate(Lane::Retry))));
pub(crate) static FRESH_LEASED: Sql = Sql::new(|_| capped(&format!("{LEASED} AND attempts = 0")));
pub(crate) static RETRY_LEASED: Sql = Sql::new(|_| capped(&format!("{LEASED} AND attempts > 0")));
/// In flight with the lease ended by `$1`.
pub(crate) static EXPIRED: Sql = Sql::new(|_| capped(&format!("{LEASED} AND due_at <= $1")));
/// The targets of `fanout` rows matching `filter`, over at most [`GAUGE_CAP`]
/// rows, read in due order: through `fanout_due` or `fanout_leased`, not the
/// app pass's index (`fanout_due_by_app`), which holds the same rows by app.
fn capped_targets(filter: &str) -> String {
    format!(
        "SELECT CAST(COALESCE(SUM(n), 0) AS BIGINT) \
         FROM (SELECT n FROM fanout WHERE {filter} ORDER BY due_at LIMIT {GAUGE_CAP}) AS c"
    )
}
/// Fresh work is in `fanout` rows too: pending, due by `$1`, leased, and leased
/// with the lease ended by `$1` (each walks one partial index).
pub(crate) static FANOUT_DEPTH: Sql = Sql::new(|_| capped_targets("lease_token IS NULL"));
pub(crate) static FANOUT_DUE: Sql =
    Sql::new(|_| capped_targets("lease_token IS NULL AND due_at <= $1"));
pub(crate) static FANOUT_LEASED: Sql = Sql::new(|_| capped_targets("lease_token IS NOT NULL"));
pub(crate) static FANOUT_EXPIRED: Sql =
    Sql::new(|_| capped_targets("lease_token IS NOT NULL AND due_at <= $1"));
/// The DLQ's size (its partial index).
pub(crate) static DEAD: Sql = Sql::new(|_| capped("state = 'dead'"));

impl Store {
    /// Samples the gauges (a handful of bounded index reads).
    pub async fn queue_gauges(&self, now: Timestamp) -> Result<QueueGauges> {
        let count = |sql: &'static Sql| async move {
            self.engine
                .query(sql.text(self.engine))
                .bind(now.as_millis())
                .fetch_scalar::<i64>(&self.reader)
                .await
        };
        let mut gauges = QueueGauges::default();
        for (lane, depth, due, oldest, leased) in [
            (
                Lane::Fresh,
                &FRESH_DEPTH,
                &FRESH_DUE,
                &NEXT_DUE_FRESH,
                &FRESH_LEASED,
            ),
            (
                Lane::Retry,
                &RETRY_DEPTH,
                &RETRY_DUE,
                &NEXT_DUE_RETRY,
                &RETRY_LEASED,
            ),
        ] {
            let depth: i64 = self
                .engine
                .query(depth.text(self.engine))
                .fetch_scalar(&self.reader)
                .await?;
            let leased: i64 = self
                .engine
                .query(leased.text(self.engine))
                .fetch_scalar(&self.reader)
                .await?;
            let oldest: Option<i64> = self
                .engine
                .query(oldest.text(self.engine))
                .fetch_scalar(&self.reader)
                .await?;
            let lane_gauges = LaneGauges {
                depth: (depth + leased).min(GAUGE_CAP),
                due: count(due).await?,
                oldest_due_at: oldest
                    .filter(|at| *at <= now.as_millis())
                    .map(Timestamp::from_millis),
            };
            match lane {
                Lane::Fresh => gauges.fresh = lane_gauges,
                Lane::Retry => gauges.retry = lane_gauges,
            }
        }
        let unbound = |sql: &'static Sql| async move {
            self.engine
                .query(sql.text(self.engine))
                .fetch_scalar::<i64>(&self.reader)
                .await
        };
        let (depth, due, leased) = (
            unbound(&FANOUT_DEPTH).await?,
            count(&FANOUT_DUE).await?,
            unbound(&FANOUT_LEASED).await?,
        );
        gauges.fresh.depth = (gauges.fresh.depth + depth + leased).min(GAUGE_CAP);
        gauges.fresh.due = (gauges.fresh.due + due).min(GAUGE_CAP);
        let head: Option<i64> = self
            .engine
            .query(NEXT_DUE_FANOUT.text(self.engine))
            .fetch_scalar(&self.reader)
            .await?;
        if let Some(head) = head.filter(|at| *at <= now.as_millis()) {
            let oldest = &mut gauges.fresh.oldest_due_at;
            let head = Timestamp::from_millis(head);
            *oldest = Some(oldest.map_or(head, |at| at.min(head)));
        }
        gauges.expired_leases = count(&EXPIRED).await? + count(&FANOUT_EXPIRED).await?;
        gauges.dead = self
            .engine
            .query(DEAD.text(self.engine))
            .fetch_scalar(&self.reader)
            .await?;
        let rows = self
            .engine
            .query(
                "SELECT breaker_state, enabled, paused, count(*) AS n, \
                 sum(CASE WHEN consecutive_failures >= $1 THEN 1 ELSE 0 END) AS failing \
                 FROM endpoints GROUP BY breaker_state, enabled, paused",
            )
            .bind(FAILING_AFTER)
            .fetch_all(&self.reader)
            .await?;
        for row in rows {
            let n: i64 = row.try_get("n")?;
            if !row.try_get::<bool, _>("enabled")? {
                gauges.disabled_endpoints += n;
                continue;
            }
            gauges.failing_endpoints += row.try_get::<i64, _>("failing")?;
            if row.try_get::<bool, _>("paused")? {
                gauges.paused_endpoints += n;
            }
            let state: String = row.try_get("breaker_state")?;
            match gauges.breakers.iter_mut().find(|(s, _)| *s == state) {
                Some((_, count)) => *count += n,
                None => gauges.breakers.push((state, n)),
            }
        }
        Ok(gauges)
    }
}
