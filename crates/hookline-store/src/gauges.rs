//! What the queue looks like now, for gauges: each figure from one bounded
//! read of an index (counts stop at [`GAUGE_CAP`]), so sampling it costs the
//! same with a backlog of a thousand or of ten million.

use hookline_core::time::Timestamp;

use crate::{Result, Store};

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
    /// Due now: what a free dispatcher would claim (capped).
    pub due: i64,
    /// The due time of the lane's oldest due delivery.
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

impl Store {
    /// Samples the gauges (a handful of bounded index reads).
    pub async fn queue_gauges(&self, now: Timestamp) -> Result<QueueGauges> {
        let capped = |filter: &str| {
            format!("SELECT count(*) FROM (SELECT 1 FROM deliveries WHERE {filter} LIMIT {GAUGE_CAP}) AS c")
        };
        let mut gauges = QueueGauges::default();
        for (lane, attempts) in [("fresh", "attempts = 0"), ("retry", "attempts > 0")] {
            let live = format!("state IN ('pending', 'in_flight') AND {attempts}");
            let depth: i64 = self
                .engine
                .query(&capped(&live))
                .fetch_scalar(&self.reader)
                .await?;
            let due: i64 = self
                .engine
                .query(&capped(&format!("{live} AND due_at <= $1")))
                .bind(now.as_millis())
                .fetch_scalar(&self.reader)
                .await?;
            let oldest: Option<i64> = self
                .engine
                .query(&format!("SELECT min(due_at) FROM deliveries WHERE {live}"))
                .fetch_scalar(&self.reader)
                .await?;
            let lane_gauges = LaneGauges {
                depth,
                due,
                oldest_due_at: oldest
                    .filter(|at| *at <= now.as_millis())
                    .map(Timestamp::from_millis),
            };
            match lane {
                "fresh" => gauges.fresh = lane_gauges,
                _ => gauges.retry = lane_gauges,
            }
        }
        // Per lane, so each count walks that lane's partial index.
        for attempts in ["attempts = 0", "attempts > 0"] {
            let expired: i64 = self
                .engine
                .query(&capped(&format!(
                    "state IN ('pending', 'in_flight') AND {attempts} \
                     AND state = 'in_flight' AND due_at <= $1"
                )))
                .bind(now.as_millis())
                .fetch_scalar(&self.reader)
                .await?;
            gauges.expired_leases += expired;
        }
        gauges.dead = self
            .engine
            .query(&capped("state = 'dead'"))
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
