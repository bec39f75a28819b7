//! Bulk replays of the DLQ: a job per request, worked in batches.
//!
//! A job replays the dead deliveries that match its filter and were dead when
//! it started (`dead_at <= cutoff`), so a delivery it replays that dies again is
//! not replayed twice, and nothing that dies later joins it. Each batch is one
//! transaction that moves up to `limit` deliveries from the DLQ back to pending
//! (the same `state = 'dead'` check as a single replay, so a single and a bulk
//! replay of one delivery start one round) and commits the job's progress with
//! them: a worker that dies loses nothing, and the next one to take the lease
//! resumes at the cursor. The worker loop itself is the binary's (`hookline`).
//!
//! One running job per app and filter (a partial unique index): asking for the
//! same replay while it runs answers that job.

use std::time::Duration;

use hookline_core::ids::{AppId, ReplayJobId};
use hookline_core::model::{DeadReason, ReplayJobState};
use hookline_core::time::Timestamp;

use crate::db::{Row, Tx};
use crate::listing::Arg;
use crate::operational::insert_notices;
use crate::records::{DlqFilter, TimeRange};
use crate::Replays;
use crate::{parse_column, Result, StoreError};

/// A bulk replay and how far it got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayJob {
    pub id: ReplayJobId,
    pub app_id: AppId,
    pub filter: DlqFilter,
    pub state: ReplayJobState,
    /// Dead deliveries that matched when it started.
    pub total: u64,
    /// Of those, how many it has reached (replayed, or found no longer dead).
    pub done: u64,
    /// How many it moved back to pending.
    pub replayed: u64,
    pub created_at: Timestamp,
    pub finished_at: Option<Timestamp>,
}

impl ReplayJob {
    /// Reached but not replayed: replayed meanwhile by someone else, or their
    /// endpoint was deleted.
    pub fn skipped(&self) -> u64 {
        self.done - self.replayed
    }
}

/// What asking for a bulk replay did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartedReplay {
    Started(ReplayJob),
    /// The same replay (app and filter) was running already: that job.
    AlreadyRunning(ReplayJob),
}

const JOB_COLUMNS: &str =
    "id, app_id, filter, state, total, done, replayed, created_at, finished_at";

fn job_from_row(row: &Row) -> Result<ReplayJob> {
    let filter: String = row.try_get("filter")?;
    Ok(ReplayJob {
        id: parse_column(row, "id")?,
        app_id: parse_column(row, "app_id")?,
        filter: filter_from_json(&filter)?,
        state: parse_column(row, "state")?,
        total: row.try_get::<i64, _>("total")? as u64,
        done: row.try_get::<i64, _>("done")? as u64,
        replayed: row.try_get::<i64, _>("replayed")? as u64,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        finished_at: row
            .try_get::<Option<i64>, _>("finished_at")?
            .map(Timestamp::from_millis),
    })
}

/// The filter as canonical JSON (fixed key order, absent fields omitted), so one
/// request is one text.
fn filter_to_json(filter: &DlqFilter) -> String {
    let mut object = serde_json::Map::new();
    if let Some(endpoint) = &filter.endpoint {
        object.insert("endpoint_id".into(), endpoint.as_str().into());
    }
    if let Some(reason) = filter.reason {
        object.insert("reason".into(), reason.as_str().into());
    }
    if let Some(event_type) = &filter.event_type {
        object.insert("event_type".into(), event_type.as_str().into());
    }
    if let Some(since) = filter.died.since {
        object.insert("since_ms".into(), since.as_millis().into());
    }
    if let Some(until) = filter.died.until {
        object.insert("until_ms".into(), until.as_millis().into());
    }
    serde_json::Value::Object(object).to_string()
}

fn filter_from_json(text: &str) -> Result<DlqFilter> {
    let corrupt = || StoreError::Corrupt(format!("replay filter {text}"));
    let value: serde_json::Value = serde_json::from_str(text).map_err(|_| corrupt())?;
    let text_of = |key: &str| value.get(key).and_then(|v| v.as_str());
    let time_of = |key: &str| {
        value
            .get(key)
            .and_then(|v| v.as_i64())
            .map(Timestamp::from_millis)
    };
    Ok(DlqFilter {
        endpoint: text_of("endpoint_id")
            .map(|e| e.parse().map_err(|_| corrupt()))
            .transpose()?,
        reason: text_of("reason")
            .map(|r| r.parse::<DeadReason>().map_err(|_| corrupt()))
            .transpose()?,
        event_type: text_of("event_type").map(str::to_owned),
        died: TimeRange {
            since: time_of("since_ms"),
            until: time_of("until_ms"),
        },
    })
}

impl Replays<'_> {
    /// How many of an app's dead deliveries match `filter` (a bulk replay's dry run).
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn count_dlq(&self, app: &AppId, filter: &DlqFilter) -> Result<u64> {
        let f = self.dlq_filters(app, filter);
        let sql = format!("SELECT COUNT(*) FROM deliveries d WHERE {}", f.sql());
        let count: i64 = f
            .bind(self.engine.query(&sql))
            .fetch_scalar(&self.reader)
            .await?;
        Ok(count as u64)
    }

    /// Starts a bulk replay of the dead deliveries matching `filter` now, or
    /// answers the one already running for the same app and filter.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn start_replay_job(
        &self,
        app: &AppId,
        filter: &DlqFilter,
        now: Timestamp,
    ) -> Result<StartedReplay> {
        let key = filter_to_json(filter);
        // Counted on a reader, before the transaction: on SQLite the writer is the one
        // delivery needs. (A job's total is corrected when it finishes.)
        let mut f = self.dlq_filters(app, filter);
        f.int("d.dead_at <= $?", now.as_millis());
        let count_sql = format!("SELECT COUNT(*) FROM deliveries d WHERE {}", f.sql());
        let total: i64 = f
            .bind(self.engine.query(&count_sql))
            .fetch_scalar(&self.reader)
            .await?;
        let mut tx = self.writer.begin().await?;
        let running = format!(
            "SELECT {JOB_COLUMNS} FROM replay_jobs WHERE app_id = $1 AND filter = $2 AND state = 'running'"
        );
        if let Some(row) = self
            .engine
            .query(&running)
            .bind(app.as_str())
            .bind(key.as_str())
            .fetch_optional(&mut tx)
            .await?
        {
            return Ok(StartedReplay::AlreadyRunning(job_from_row(&row)?));
        }
        let id = ReplayJobId::generate();
        // A concurrent identical request that committed first wins the unique index;
        // this one then answers its job.
        let inserted = self
            .engine
            .query(&format!(
                "INSERT INTO replay_jobs (id, app_id, filter, state, total, done, replayed, cutoff, \
                 lease_until, created_at, updated_at) \
                 VALUES ($1, $2, $3, 'running', $4, 0, 0, $5, 0, $5, $5) \
                 ON CONFLICT DO NOTHING RETURNING {JOB_COLUMNS}"
            ))
            .bind(id.as_str())
            .bind(app.as_str())
            .bind(key.as_str())
            .bind(total)
            .bind(now.as_millis())
            .fetch_optional(&mut tx)
            .await?;
        tx.commit().await?;
        match inserted {
            Some(row) => Ok(StartedReplay::Started(job_from_row(&row)?)),
            None => {
                // The identical request that won; it may have finished meanwhile.
                let latest = format!(
                    "SELECT {JOB_COLUMNS} FROM replay_jobs WHERE app_id = $1 AND filter = $2 \
                     ORDER BY created_at DESC, id DESC LIMIT 1"
                );
                let row = self
                    .engine
                    .query(&latest)
                    .bind(app.as_str())
                    .bind(key.as_str())
                    .fetch_optional(&self.writer)
                    .await?
                    .ok_or_else(|| StoreError::Corrupt("a replay job vanished".into()))?;
                Ok(StartedReplay::AlreadyRunning(job_from_row(&row)?))
            }
        }
    }

    /// One bulk replay of an app.
    #[tracing::instrument(skip_all, fields(app = %app, job = %id))]
    pub async fn get_replay_job(&self, app: &AppId, id: &ReplayJobId) -> Result<Option<ReplayJob>> {
        self.app_row(JOB_COLUMNS, "replay_jobs", app, id.as_str())
            .await?
            .map(|row| job_from_row(&row))
            .transpose()
    }

    /// Cancels a running bulk replay (what it replayed stays replayed); a
    /// finished one is answered as it is.
    #[tracing::instrument(skip_all, fields(app = %app, job = %id))]
    pub async fn cancel_replay_job(
        &self,
        app: &AppId,
        id: &ReplayJobId,
        now: Timestamp,
    ) -> Result<Option<ReplayJob>> {
        let mut tx = self.writer.begin().await?;
        let cancelled = self
            .engine
            .query(
                "UPDATE replay_jobs SET state = 'cancelled', finished_at = $3, updated_at = $3 \
                 WHERE id = $1 AND app_id = $2 AND state = 'running'",
            )
            .bind(id.as_str())
            .bind(app.as_str())
            .bind(now.as_millis())
            .execute(&mut tx)
            .await?
            .rows_affected();
        if cancelled == 1 {
            let job = job_in(&mut tx, id).await?;
            insert_notices(&mut tx, &[finished_notice(&job)], now).await?;
        }
        tx.commit().await?;
        self.get_replay_job(app, id).await
    }

    /// Takes the lease of a running job no worker holds (never taken, or its
    /// lease ran out), until `now + lease`.
    #[tracing::instrument(skip_all)]
    pub async fn take_replay_job(
        &self,
        now: Timestamp,
        lease: Duration,
    ) -> Result<Option<ReplayJobId>> {
        // Looked for on a reader first: every API process polls, and on SQLite the
        // writer is the one delivery needs; almost always there is no job.
        let waiting: Option<String> = self
            .engine
            .query(
                "SELECT id FROM replay_jobs WHERE state = 'running' AND lease_until < $1 LIMIT 1",
            )
            .bind(now.as_millis())
            .fetch_optional(&self.reader)
            .await?
            .map(|row| row.try_get("id"))
            .transpose()?;
        if waiting.is_none() {
            return Ok(None);
        }
        let sql = format!(
            "UPDATE replay_jobs SET lease_until = $2 WHERE id = ( \
               SELECT id FROM replay_jobs WHERE state = 'running' AND lease_until < $1 \
               ORDER BY lease_until LIMIT 1{}) \
             AND state = 'running' AND lease_until < $1 RETURNING id",
            self.engine.lock(" FOR UPDATE SKIP LOCKED")
        );
        self.engine
            .query(&sql)
            .bind(now.as_millis())
            .bind((now + lease).as_millis())
            .fetch_optional(&self.writer)
            .await?
            .map(|row| parse_column(&row, "id"))
            .transpose()
    }

    /// Works one batch of a job: replays up to `limit` of its deliveries after its
    /// cursor, commits them with its progress and renews the lease until
    /// `now + lease`. Answers the job as it now stands (`Completed` when nothing is
    /// left), or `None` if it is no longer running (cancelled, or finished elsewhere).
    #[tracing::instrument(skip_all, fields(job = %id))]
    pub async fn work_replay_job(
        &self,
        id: &ReplayJobId,
        now: Timestamp,
        limit: u32,
        lease: Duration,
    ) -> Result<Option<ReplayJob>> {
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "SELECT {JOB_COLUMNS}, cutoff, cursor_dead_at, cursor_id FROM replay_jobs \
             WHERE id = $1 AND state = 'running'{}",
            self.engine.lock(" FOR UPDATE")
        );
        let Some(row) = self
            .engine
            .query(&sql)
            .bind(id.as_str())
            .fetch_optional(&mut tx)
            .await?
        else {
            return Ok(None);
        };
        let job = job_from_row(&row)?;
        let cutoff: i64 = row.try_get("cutoff")?;
        let cursor: Option<(i64, String)> = match (
            row.try_get::<Option<i64>, _>("cursor_dead_at")?,
            row.try_get::<Option<String>, _>("cursor_id")?,
        ) {
            (Some(at), Some(id)) => Some((at, id)),
            _ => None,
        };

        // The next deliveries of the job, oldest death first, after the cursor.
        let mut f = self.dlq_filters(&job.app_id, &job.filter);
        f.int("d.dead_at <= $?", cutoff);
        if let Some((at, id)) = cursor {
            f.int("d.dead_at >= $?", at);
            f.clause(
                "(d.dead_at, d.id) > ($?, $?)",
                [Arg::Int(at), Arg::Text(id)],
            );
        }
        let next = format!(
            "SELECT d.id, d.dead_at FROM deliveries d{} WHERE {} ORDER BY d.dead_at, d.id LIMIT ${}",
            self.engine.indexed_by("deliveries_dlq"),
            f.sql(),
            f.after()
        );
        let rows = f
            .bind(self.engine.query(&next))
            .bind(i64::from(limit))
            .fetch_all(&mut tx)
            .await?;
        let ids: Vec<String> = rows
            .iter()
            .map(|r| r.try_get("id"))
            .collect::<Result<_, _>>()?;
        let last = match rows.last() {
            Some(row) => Some((
                row.try_get::<i64, _>("dead_at")?,
                ids[ids.len() - 1].clone(),
            )),
            None => None,
        };
        let replayed = self.replay_in(&mut tx, &ids, now).await?;

        let done = job.done + ids.len() as u64;
        let finished = ids.len() < limit as usize;
        let (state, total, done) = if finished {
            // Every matching delivery is reached: those that left the DLQ meanwhile count
            // as reached too.
            let total = job.total.max(done);
            (ReplayJobState::Completed, total, total)
        } else {
            (ReplayJobState::Running, job.total, done)
        };
        let (cursor_at, cursor_id) = match last {
            Some((at, id)) => (Some(at), Some(id)),
            None => (None, None),
        };
        self.engine
            .query(
                "UPDATE replay_jobs SET state = $2, total = $3, done = $4, replayed = replayed + $5, \
                 cursor_dead_at = COALESCE($6, cursor_dead_at), cursor_id = COALESCE($7, cursor_id), \
                 lease_until = $8, updated_at = $9, finished_at = $10 WHERE id = $1",
            )
            .bind(id.as_str())
            .bind(state.as_str())
            .bind(total as i64)
            .bind(done as i64)
            .bind(replayed as i64)
            .bind(cursor_at)
            .bind(cursor_id)
            .bind((now + lease).as_millis())
            .bind(now.as_millis())
            .bind(finished.then(|| now.as_millis()))
            .execute(&mut tx)
            .await?;
        let job = job_in(&mut tx, id).await?;
        if finished {
            insert_notices(&mut tx, &[finished_notice(&job)], now).await?;
        }
        tx.commit().await?;
        if replayed > 0 {
            self.notify_due();
        }
        Ok(Some(job))
    }
}

/// A job as its transaction `tx` sees it.
async fn job_in(tx: &mut Tx, id: &ReplayJobId) -> Result<ReplayJob> {
    let sql = format!("SELECT {JOB_COLUMNS} FROM replay_jobs WHERE id = $1");
    let engine = tx.engine();
    let row = engine
        .query(&sql)
        .bind(id.as_str())
        .fetch_one(&mut *tx)
        .await?;
    job_from_row(&row)
}

/// The operational `replay.finished` of a job that ended.
fn finished_notice(job: &ReplayJob) -> hookline_core::operational::Notice {
    hookline_core::operational::Notice::replay_finished(
        &job.app_id,
        job.id.as_str(),
        job.state.as_str(),
        (job.total, job.done, job.replayed),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filter_is_one_canonical_text_and_reads_back() {
        let filter = DlqFilter {
            endpoint: Some("ep_01J00000000000000000000000".parse().unwrap()),
            reason: Some(DeadReason::ClientError),
            event_type: Some("order.paid".into()),
            died: TimeRange {
                since: Some(Timestamp::from_millis(5)),
                until: None,
            },
        };
        let text = filter_to_json(&filter);
        assert_eq!(
            text,
            r#"{"endpoint_id":"ep_01J00000000000000000000000","event_type":"order.paid","reason":"client_error","since_ms":5}"#
        );
        assert_eq!(filter_from_json(&text).unwrap(), filter);
        assert_eq!(filter_to_json(&DlqFilter::default()), "{}");
    }
}
