//! The endpoints of an app that may be in trouble, with what the incidents
//! view (`hookline_core::incidents`) reads of each: its switches and
//! breaker, its waiting deliveries, its deliveries dead-lettered lately and
//! the newest of them, and when it was last disabled or paused.

use hookline_core::breaker::{Breaker, BreakerState};
use hookline_core::ids::{AppId, EndpointId};
use hookline_core::retry::RetryOverrides;
use hookline_core::time::Timestamp;

use crate::deliveries::{delivery_from_row, DELIVERY_COLUMNS};
use crate::endpoints::{breaker_from_row, retry_from_row, BREAKER_COLUMNS};
use crate::records::Delivery;
use crate::{fanout, parse_column, Endpoints, Result};

/// Waiting deliveries are counted up to this many per endpoint.
pub const WAITING_CAP: u64 = 100_000;

/// An endpoint that is disabled, paused, failing or has dead deliveries lately.
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointTrouble {
    pub id: EndpointId,
    pub url: String,
    pub description: String,
    pub enabled: bool,
    pub paused: bool,
    pub disabled_reason: Option<String>,
    pub breaker: Breaker,
    pub retry: RetryOverrides,
    /// Pending (due, deferred or parked), up to [`WAITING_CAP`].
    pub waiting: u64,
    /// Dead-lettered since the asked time…
    pub dead: u64,
    /// …the first of them at…
    pub first_dead_at: Option<Timestamp>,
    /// …and the newest of them.
    pub newest_dead: Option<Delivery>,
    /// When it was last disabled (while it is) or paused (while it is).
    pub switched_at: Option<Timestamp>,
}

impl EndpointTrouble {
    /// Whether its attempts fail now: the breaker not closed, or as many
    /// failures in a row as make the failing gauge count it
    /// ([`FAILING_AFTER`](crate::FAILING_AFTER); one transient failure is no incident).
    pub fn failing(&self) -> bool {
        self.breaker.state != BreakerState::Closed
            || i64::from(self.breaker.consecutive_failures) >= crate::FAILING_AFTER
    }
}

impl Endpoints<'_> {
    /// The app's endpoints in trouble now, in id order: disabled, paused with
    /// deliveries held, failing, or with deliveries dead-lettered since
    /// `dead_since` (of endpoints that still exist).
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn troubles(
        &self,
        app: &AppId,
        dead_since: Timestamp,
    ) -> Result<Vec<EndpointTrouble>> {
        let engine = self.engine;
        let dead: std::collections::HashMap<String, (u64, i64)> = engine
            .query(
                "SELECT endpoint_id, COUNT(*) AS n, MIN(dead_at) AS first FROM deliveries \
                 WHERE app_id = $1 AND state = 'dead' AND dead_at >= $2 GROUP BY endpoint_id",
            )
            .bind(app.as_str())
            .bind(dead_since.as_millis())
            .fetch_all(&self.reader)
            .await?
            .iter()
            .map(|row| {
                Ok((
                    row.try_get::<String, _>("endpoint_id")?,
                    (
                        row.try_get::<i64, _>("n")?.max(0) as u64,
                        row.try_get::<i64, _>("first")?,
                    ),
                ))
            })
            .collect::<Result<_>>()?;
        let rows = engine
            .query(&format!(
                "SELECT id, url, description, enabled, paused, disabled_reason, retry_base_ms, \
                   retry_cap_ms, max_attempts, max_age_secs, {BREAKER_COLUMNS} \
                 FROM endpoints WHERE app_id = $1 ORDER BY id"
            ))
            .bind(app.as_str())
            .fetch_all(&self.reader)
            .await?;
        let mut troubles = Vec::new();
        for row in &rows {
            let id: EndpointId = parse_column(row, "id")?;
            let (dead, first_dead) = dead.get(id.as_str()).copied().unwrap_or((0, 0));
            let mut trouble = EndpointTrouble {
                url: row.try_get("url")?,
                description: row.try_get("description")?,
                enabled: row.try_get("enabled")?,
                paused: row.try_get("paused")?,
                disabled_reason: row.try_get("disabled_reason")?,
                breaker: breaker_from_row(row)?,
                retry: retry_from_row(row)?,
                waiting: 0,
                dead,
                first_dead_at: (dead > 0).then(|| Timestamp::from_millis(first_dead)),
                newest_dead: None,
                switched_at: None,
                id,
            };
            let switched = !trouble.enabled || trouble.paused;
            if !switched && !trouble.failing() && dead == 0 {
                continue;
            }
            trouble.waiting = self.waiting(&trouble.id).await?;
            if trouble.paused
                && trouble.enabled
                && !trouble.failing()
                && dead == 0
                && trouble.waiting == 0
            {
                continue;
            }
            if dead > 0 {
                trouble.newest_dead = engine
                    .query(&format!(
                        "SELECT {DELIVERY_COLUMNS} FROM deliveries \
                         WHERE app_id = $1 AND state = 'dead' AND dead_at >= $2 AND endpoint_id = $3 \
                         ORDER BY dead_at DESC, id DESC LIMIT 1"
                    ))
                    .bind(app.as_str())
                    .bind(dead_since.as_millis())
                    .bind(trouble.id.as_str())
                    .fetch_optional(&self.reader)
                    .await?
                    .map(|row| delivery_from_row(&row))
                    .transpose()?;
            }
            if switched {
                let kind = if trouble.enabled {
                    "paused"
                } else {
                    "disabled"
                };
                let at: Option<i64> = engine
                    .query(
                        "SELECT MAX(at) FROM endpoint_marks WHERE endpoint_id = $1 AND kind = $2",
                    )
                    .bind(trouble.id.as_str())
                    .bind(kind)
                    .fetch_scalar(&self.reader)
                    .await?;
                trouble.switched_at = at.map(Timestamp::from_millis);
            }
            troubles.push(trouble);
        }
        Ok(troubles)
    }

    /// The endpoint's pending deliveries (rows, by the pending index, up to
    /// the cap) and its `fanout` targets not yet written.
    async fn waiting(&self, id: &EndpointId) -> Result<u64> {
        let rows: i64 = self
            .engine
            .query(
                "SELECT COUNT(*) FROM (SELECT 1 FROM deliveries \
                 WHERE endpoint_id = $1 AND state = 'pending' LIMIT $2) w",
            )
            .bind(id.as_str())
            .bind(WAITING_CAP as i64)
            .fetch_scalar(&self.reader)
            .await?;
        let targets = fanout::targets_of_endpoint(self, id).await?.len() as u64;
        Ok((rows.max(0) as u64 + targets).min(WAITING_CAP))
    }
}
