//! Gap-proof sequence numbers: every delivery made for an endpoint gets the
//! next of the endpoint's numbers, 1, 2, 3, … (docs/api.md, "Sequence numbers").
//!
//! They are taken in the publish's one write ([`crate::publish`]): a counter
//! row per endpoint (`endpoint_sequences`) is upserted by `last_seq + n`, its
//! lock held until the publish commits, so numbers follow commit order and a
//! publish that writes nothing takes none. Where they are kept:
//!
//! - `events.seqs`: an event's numbers by its targets' places, written once
//!   with the event; a claim reads a delivery's beside the body
//!   ([`of_place`]);
//! - `sequence_runs`: per publish and endpoint, the deliveries numbered
//!   `first_seq`, `first_seq + 1`, …, so a range of numbers is found by the
//!   primary key ([`Events::numbered_deliveries`]).
//!
//! Retention removes a run once retention has removed its events (a DLQ
//! entry keeps its run), walking each endpoint's from the oldest, and the
//! runs of deleted endpoints ([`Store::endpoints_with_old_runs`],
//! [`Store::purge_sequence_runs`]).

use hookline_core::ids::{DeliveryId, EndpointId};
use hookline_core::time::Timestamp;

use crate::db::Kind;
use crate::{parse_column, Events, Result, Store, StoreError};

/// The most numbers one read of [`Events::numbered_deliveries`] answers.
pub const MAX_SEQUENCE_RANGE: u64 = 100;

/// The number of the delivery at `place` among an event's targets, from the
/// event's `seqs` (none for an event published before numbers existed).
pub(crate) fn of_place(seqs: Option<&str>, place: usize) -> Option<u64> {
    seqs?.split(',').nth(place)?.parse().ok()
}

/// A publish's runs, one row per endpoint it numbers deliveries of: `n`
/// numbers for the deliveries listed (comma-separated, in number order).
pub(crate) const RUN_COLUMNS: &[(&str, Kind)] = &[
    ("endpoint_id", Kind::Text),
    ("n", Kind::Int),
    ("deliveries", Kind::Text),
    ("created_at", Kind::Int),
];

/// A publish's deliveries: the `k`-th (from 1) of its deliveries to its
/// endpoint, at `place` among its event's targets.
pub(crate) const PLACE_COLUMNS: &[(&str, Kind)] = &[
    ("event_id", Kind::Text),
    ("place", Kind::Int),
    ("endpoint_id", Kind::Text),
    ("k", Kind::Int),
];

/// How a publish numbers its deliveries, built in draft order.
#[derive(Debug, Default)]
pub(crate) struct Numbering {
    /// Per endpoint (in id order: the order the counters' locks are taken
    /// in), its deliveries in number order.
    pub runs: std::collections::BTreeMap<EndpointId, Vec<DeliveryId>>,
    /// (event, place, endpoint, k) of each delivery.
    pub places: Vec<(String, usize, EndpointId, u64)>,
}

impl Numbering {
    /// Numbers `delivery` of `event` at `place` to `endpoint`; its `k`.
    pub fn add(
        &mut self,
        event: &str,
        place: usize,
        endpoint: &EndpointId,
        delivery: &DeliveryId,
    ) -> u64 {
        let run = self.runs.entry(endpoint.clone()).or_default();
        run.push(delivery.clone());
        let k = run.len() as u64;
        self.places
            .push((event.to_owned(), place, endpoint.clone(), k));
        k
    }
}

/// What the publish's write answered: each endpoint's number before this
/// publish's (`endpoint base,endpoint base,…`).
pub(crate) fn read_bases(text: Option<&str>) -> Result<Vec<(EndpointId, u64)>> {
    let corrupt = |what: &str| StoreError::Corrupt(format!("sequence bases: {what}"));
    text.unwrap_or_default()
        .split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (endpoint, base) = pair.split_once(' ').ok_or_else(|| corrupt(pair))?;
            Ok((
                endpoint.parse().map_err(|_| corrupt(endpoint))?,
                base.parse().map_err(|_| corrupt(base))?,
            ))
        })
        .collect()
}

impl Events<'_> {
    /// The deliveries numbered `from..=to` among `endpoint`'s (at most
    /// [`MAX_SEQUENCE_RANGE`] numbers), in number order: those whose run
    /// retention has not removed. The caller checks whose endpoint it is.
    #[tracing::instrument(skip_all, fields(endpoint = %endpoint))]
    pub async fn numbered_deliveries(
        &self,
        endpoint: &EndpointId,
        from: u64,
        to: u64,
    ) -> Result<Vec<(u64, DeliveryId)>> {
        let to = to.min(from.saturating_add(MAX_SEQUENCE_RANGE - 1));
        // From the run that holds `from` (the last to start at or below it,
        // one probe of the key backwards) to the last that starts by `to`.
        let rows = self
            .engine
            .query(
                "SELECT first_seq, deliveries FROM sequence_runs \
                 WHERE endpoint_id = $1 AND first_seq <= $3 AND first_seq >= COALESCE( \
                   (SELECT max(first_seq) FROM sequence_runs WHERE endpoint_id = $1 AND first_seq <= $2), 0) \
                 ORDER BY first_seq",
            )
            .bind(endpoint.as_str())
            .bind(from as i64)
            .bind(to as i64)
            .fetch_all(&self.reader)
            .await?;
        let mut found = Vec::new();
        for row in rows {
            let first = row.try_get::<i64, _>("first_seq")? as u64;
            let deliveries: String = row.try_get("deliveries")?;
            for (i, id) in deliveries.split(',').enumerate() {
                let seq = first + i as u64;
                if (from..=to).contains(&seq) {
                    let id = id
                        .parse()
                        .map_err(|_| StoreError::Corrupt(format!("sequence run: {id}")))?;
                    found.push((seq, id));
                }
            }
        }
        Ok(found)
    }

    /// The number of `delivery` among its endpoint's (none if it was made
    /// before deliveries were numbered, or its event is gone).
    pub async fn sequence_of(&self, delivery: &DeliveryId) -> Result<Option<u64>> {
        let (event, place) = delivery.target();
        let seqs: Option<Option<String>> = self
            .engine
            .query("SELECT seqs FROM events WHERE id = $1")
            .bind(event.as_str())
            .fetch_optional(&self.reader)
            .await?
            .map(|row| row.try_get("seqs"))
            .transpose()?;
        Ok(of_place(seqs.flatten().as_deref(), place))
    }

    /// The last number `endpoint` gave a delivery (0 before its first).
    pub async fn last_sequence(&self, endpoint: &EndpointId) -> Result<u64> {
        let last: i64 = self
            .engine
            .query(
                "SELECT COALESCE((SELECT last_seq FROM endpoint_sequences WHERE endpoint_id = $1), 0)",
            )
            .bind(endpoint.as_str())
            .fetch_scalar(&self.reader)
            .await?;
        Ok(last as u64)
    }
}

/// What a polling endpoint's commit did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommittedCursor {
    /// Where the endpoint's cursor stands now (never lower than before).
    pub committed_seq: u64,
    /// Deliveries this commit moved to `succeeded`.
    pub delivered: u64,
}

impl Events<'_> {
    /// Commits a polling endpoint's deliveries up to `cursor`: those still
    /// pending (or blocked behind an ordering key) become `succeeded`, a range
    /// of numbers at a time, and the cursor moves there. A cursor at or below
    /// the one committed changes nothing; `None` if `cursor` is past the last
    /// number the endpoint has given. The caller checks whose endpoint it is,
    /// and that it polls.
    #[tracing::instrument(skip_all, fields(endpoint = %endpoint))]
    pub async fn commit_messages(
        &self,
        endpoint: &EndpointId,
        cursor: u64,
        now: Timestamp,
    ) -> Result<Option<CommittedCursor>> {
        if cursor > self.last_sequence(endpoint).await? {
            return Ok(None);
        }
        let (mut committed, _) = self.poll_position(endpoint).await?;
        let mut delivered = 0;
        while committed < cursor {
            // One window of numbers at a time (a read answers at most that
            // many); numbers in it with no run left (retention took their
            // deliveries) are passed over.
            let upto = cursor.min(committed + MAX_SEQUENCE_RANGE);
            let range = self
                .numbered_deliveries(endpoint, committed + 1, upto)
                .await?;
            let mut tx = self.writer.begin().await?;
            if !range.is_empty() {
                delivered += self
                    .engine
                    .query(&format!(
                        "UPDATE deliveries SET state = 'succeeded', due_at = $2, updated_at = $2 \
                         WHERE endpoint_id = $1 AND state IN ('pending', 'blocked') AND {}",
                        self.engine.in_batch("id", 3)
                    ))
                    .bind(endpoint.as_str())
                    .bind(now.as_millis())
                    .bind_batch(
                        crate::db::Batch::default()
                            .text(range.iter().map(|(_, id)| Some(id.as_str()))),
                    )
                    .execute(&mut tx)
                    .await?
                    .rows_affected();
            }
            self.engine
                .query(
                    "INSERT INTO poll_cursors (endpoint_id, committed_seq, committed_at) VALUES ($1, $2, $3) \
                     ON CONFLICT (endpoint_id) DO UPDATE SET committed_seq = excluded.committed_seq, \
                     committed_at = excluded.committed_at \
                     WHERE poll_cursors.committed_seq < excluded.committed_seq",
                )
                .bind(endpoint.as_str())
                .bind(upto as i64)
                .bind(now.as_millis())
                .execute(&mut tx)
                .await?;
            tx.commit().await?;
            committed = upto.max(committed);
        }
        Ok(Some(CommittedCursor {
            // A concurrent commit may have gone further.
            committed_seq: committed.max(self.poll_position(endpoint).await?.0),
            delivered,
        }))
    }

    /// Where a polling endpoint's cursor stands, and when it was committed
    /// (0 and none before its first commit).
    pub async fn poll_position(&self, endpoint: &EndpointId) -> Result<(u64, Option<Timestamp>)> {
        let row = self
            .engine
            .query("SELECT committed_seq, committed_at FROM poll_cursors WHERE endpoint_id = $1")
            .bind(endpoint.as_str())
            .fetch_optional(&self.reader)
            .await?;
        Ok(match row {
            Some(row) => (
                row.try_get::<i64, _>("committed_seq")? as u64,
                Some(Timestamp::from_millis(row.try_get("committed_at")?)),
            ),
            None => (0, None),
        })
    }
}

impl Store {
    /// Dead-letters what polling endpoints' receivers did not commit in time:
    /// their pending (or blocked) deliveries whose round began before `now`
    /// less the endpoint's `max_age_secs` (else `default_max_age`) — the rule
    /// a pushed delivery's retries end by — with the reason
    /// `retries_exhausted`: a thousand at a time, found through the
    /// endpoint's pending (and partition) index. How many went.
    #[tracing::instrument(skip_all)]
    pub async fn expire_polled(
        &self,
        now: Timestamp,
        default_max_age: std::time::Duration,
    ) -> Result<u64> {
        let endpoints = self
            .engine
            .query("SELECT id, max_age_secs FROM endpoints WHERE url = $1")
            .bind(hookline_core::destination::POLL_URL)
            .fetch_all(&self.reader)
            .await?;
        let mut expired = 0;
        for endpoint in endpoints {
            let id: EndpointId = parse_column(&endpoint, "id")?;
            let max_age = endpoint
                .try_get::<Option<i64>, _>("max_age_secs")?
                .map_or(default_max_age, |secs| {
                    std::time::Duration::from_secs(secs.max(0) as u64)
                });
            let cutoff = (now - max_age).as_millis();
            for waiting in [
                "state = 'pending' AND endpoint_id IS NOT NULL",
                "state = 'blocked' AND ordering_key IS NOT NULL",
            ] {
                loop {
                    let mut tx = self.writer.begin().await?;
                    let gone = self
                        .engine
                        .query(&format!(
                            "UPDATE deliveries SET state = 'dead', dead_reason = 'retries_exhausted', \
                             dead_at = $3, due_at = $3, updated_at = $3, lease_token = NULL \
                             WHERE id IN (SELECT id FROM deliveries \
                               WHERE endpoint_id = $1 AND {waiting} AND round_started_at < $2 LIMIT 1000) \
                             RETURNING id, event_id, app_id"
                        ))
                        .bind(id.as_str())
                        .bind(cutoff)
                        .bind(now.as_millis())
                        .fetch_all(&mut tx)
                        .await?;
                    // Counted as a push's deaths are, for the operator's
                    // `hookline.delivery.dead` (`operational`).
                    if let Some(last) = gone.last() {
                        let count = hookline_core::operational::DeadCount {
                            reason: hookline_core::model::DeadReason::RetriesExhausted,
                            count: gone.len() as u64,
                            last_status: None,
                            last_delivery: last.try_get("id")?,
                            last_event: last.try_get("event_id")?,
                            last_at: now,
                        };
                        let app: hookline_core::ids::AppId = parse_column(last, "app_id")?;
                        crate::operational::count_dead(&mut tx, &[(id.clone(), app, count)])
                            .await?;
                    }
                    tx.commit().await?;
                    expired += gone.len() as u64;
                    if gone.len() < 1000 {
                        break;
                    }
                }
            }
        }
        Ok(expired)
    }
}

/// Runs looked at per read while retention walks an endpoint's (a run holds
/// up to a publish's worth of ids, 1,000 for a batch).
const RUNS_BATCH: i64 = 100;

/// An endpoint whose runs retention has something to look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumberedEndpoint {
    pub id: EndpointId,
    /// It still exists (a deleted one's runs all go).
    pub live: bool,
}

impl Store {
    /// The endpoints with runs retention may remove: those whose oldest run
    /// was made before `cutoff`, and deleted ones with runs left (one probe of
    /// the key each). A deleted endpoint's counter row stays: it is what
    /// finds a run that a publish racing the deletion may still write.
    #[tracing::instrument(skip_all)]
    pub async fn endpoints_with_old_runs(
        &self,
        cutoff: Timestamp,
    ) -> Result<Vec<NumberedEndpoint>> {
        let rows = self
            .engine
            .query(
                "SELECT endpoint_id, live FROM ( \
                   SELECT s.endpoint_id, \
                          EXISTS (SELECT 1 FROM endpoints e WHERE e.id = s.endpoint_id) AS live, \
                          (SELECT r.created_at FROM sequence_runs r WHERE r.endpoint_id = s.endpoint_id \
                           ORDER BY r.first_seq LIMIT 1) AS oldest \
                   FROM endpoint_sequences s) c \
                 WHERE oldest IS NOT NULL AND (oldest < $1 OR NOT live)",
            )
            .bind(cutoff.as_millis())
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(NumberedEndpoint {
                    id: parse_column(row, "endpoint_id")?,
                    live: row.try_get("live")?,
                })
            })
            .collect()
    }

    /// One step of retention's walk of `endpoint`'s runs, from the one after
    /// `after` (0: the oldest) by the key: of up to a batch made before
    /// `cutoff` (any, for a deleted endpoint), removes those none of whose
    /// events is left — retention removes an event only once none of its
    /// deliveries is, so a dead, pending or blocked delivery keeps its run.
    /// Returns how many it removed, and where to go on from (`None`: the
    /// walk reached the runs made since the cutoff, or the end).
    #[tracing::instrument(skip_all, fields(endpoint = %endpoint.id))]
    pub async fn purge_sequence_runs(
        &self,
        endpoint: &NumberedEndpoint,
        cutoff: Timestamp,
        after: u64,
    ) -> Result<(u64, Option<u64>)> {
        let runs = self
            .engine
            .query(
                "SELECT first_seq, deliveries, created_at FROM sequence_runs \
                 WHERE endpoint_id = $1 AND first_seq > $2 ORDER BY first_seq LIMIT $3",
            )
            .bind(endpoint.id.as_str())
            .bind(after as i64)
            .bind(RUNS_BATCH)
            .fetch_all(&self.reader)
            .await?;
        let mut old: Vec<(i64, Vec<DeliveryId>)> = Vec::new();
        for run in &runs {
            if endpoint.live && run.try_get::<i64, _>("created_at")? >= cutoff.as_millis() {
                break;
            }
            let deliveries: String = run.try_get("deliveries")?;
            let ids = deliveries
                .split(',')
                .map(|id| {
                    id.parse()
                        .map_err(|_| StoreError::Corrupt(format!("sequence run: {id}")))
                })
                .collect::<Result<_>>()?;
            old.push((run.try_get("first_seq")?, ids));
        }
        let Some(&(last, _)) = old.last() else {
            return Ok((0, None));
        };
        let more = old.len() == runs.len() && runs.len() == RUNS_BATCH as usize;
        let gone = match endpoint.live {
            true => self.runs_without_events(&old).await?,
            false => old.iter().map(|(first, _)| *first).collect(),
        };
        let mut removed = 0;
        if !gone.is_empty() {
            removed = self
                .engine
                .query(&format!(
                    "DELETE FROM sequence_runs WHERE endpoint_id = $1 AND first_seq IN (SELECT n FROM {})",
                    self.engine.rows(2, &[("n", Kind::Int)])
                ))
                .bind(endpoint.id.as_str())
                .bind_batch(crate::db::Batch::default().int(gone.iter().map(|n| Some(*n))))
                .execute(&self.writer)
                .await?
                .rows_affected();
        }
        Ok((removed, more.then_some(last as u64)))
    }

    /// Of `runs`, the first numbers of those none of whose events is left.
    async fn runs_without_events(&self, runs: &[(i64, Vec<DeliveryId>)]) -> Result<Vec<i64>> {
        let events: Vec<String> = runs
            .iter()
            .flat_map(|(_, ids)| ids.iter().map(|id| id.target().0.to_string()))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let left: std::collections::HashSet<String> = self
            .engine
            .query(&format!(
                "SELECT id FROM events WHERE {}",
                self.engine.in_batch("id", 1)
            ))
            .bind_batch(crate::db::Batch::default().text(events.iter().map(|id| Some(id.as_str()))))
            .fetch_all(&self.reader)
            .await?
            .iter()
            .map(|row| row.try_get("id"))
            .collect::<Result<_, _>>()?;
        Ok(runs
            .iter()
            .filter(|(_, ids)| ids.iter().all(|id| !left.contains(id.target().0.as_str())))
            .map(|(first, _)| *first)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delivery_reads_its_number_at_its_place() {
        assert_eq!(of_place(Some("41,7,3"), 0), Some(41));
        assert_eq!(of_place(Some("41,7,3"), 2), Some(3));
        assert_eq!(of_place(Some("41,7,3"), 3), None);
        assert_eq!(of_place(None, 0), None);
    }

    #[test]
    fn bases_read_back() {
        let bases = read_bases(Some("ep_01H00000000000000000000000 40")).unwrap();
        assert_eq!(bases[0].1, 40);
        assert!(read_bases(None).unwrap().is_empty());
        assert!(read_bases(Some("nonsense")).is_err());
    }
}
