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
//! Retention removes runs with the history it removes, endpoint by endpoint
//! from the oldest, and the counters and runs of deleted endpoints
//! ([`Store::purge_sequence_runs`]).

use hookline_core::ids::{DeliveryId, EndpointId};
use hookline_core::time::Timestamp;

use crate::db::Kind;
use crate::{Events, Result, Store, StoreError};

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
        // A run holds at most one publish group's deliveries: one that
        // covers `from` starts at most MAX_GROUP numbers below it.
        let lowest = from.saturating_sub(crate::MAX_GROUP as u64);
        let rows = self
            .engine
            .query(
                "SELECT first_seq, deliveries FROM sequence_runs \
                 WHERE endpoint_id = $1 AND first_seq > $2 AND first_seq <= $3 ORDER BY first_seq",
            )
            .bind(endpoint.as_str())
            .bind(lowest as i64)
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

/// Runs removed per endpoint and call.
const RUNS_BATCH: i64 = 1000;

impl Store {
    /// Removes the runs created before `cutoff`, up to a batch per endpoint
    /// from its oldest, and the counter and runs of endpoints that were
    /// deleted; how many runs it removed. Call again while it removes some.
    #[tracing::instrument(skip_all)]
    pub async fn purge_sequence_runs(&self, cutoff: Timestamp) -> Result<u64> {
        // Each numbered endpoint, whether it still exists, and when its oldest
        // run was made (one probe of the key each): only those with something
        // to remove get a transaction.
        let rows = self
            .engine
            .query(
                "SELECT s.endpoint_id, \
                        EXISTS (SELECT 1 FROM endpoints e WHERE e.id = s.endpoint_id) AS live, \
                        (SELECT r.created_at FROM sequence_runs r WHERE r.endpoint_id = s.endpoint_id \
                         ORDER BY r.first_seq LIMIT 1) AS oldest \
                 FROM endpoint_sequences s",
            )
            .fetch_all(&self.writer)
            .await?;
        let mut removed = 0;
        for row in rows {
            let endpoint: String = row.try_get("endpoint_id")?;
            let live: bool = row.try_get("live")?;
            let oldest: Option<i64> = row.try_get("oldest")?;
            if live && oldest.is_none_or(|at| at >= cutoff.as_millis()) {
                continue;
            }
            let mut tx = self.writer.begin().await?;
            // Oldest first by the key; created_at only filters that batch.
            removed += self
                .engine
                .query(
                    "DELETE FROM sequence_runs WHERE endpoint_id = $1 AND first_seq IN ( \
                       SELECT first_seq FROM sequence_runs WHERE endpoint_id = $1 \
                       ORDER BY first_seq LIMIT $2) AND (created_at < $3 OR NOT $4)",
                )
                .bind(endpoint.as_str())
                .bind(RUNS_BATCH)
                .bind(cutoff.as_millis())
                .bind(live)
                .execute(&mut tx)
                .await?
                .rows_affected();
            if !live {
                // Gone with its last runs: nothing numbers a deleted endpoint's deliveries again.
                self.engine
                    .query(
                        "DELETE FROM endpoint_sequences WHERE endpoint_id = $1 \
                         AND NOT EXISTS (SELECT 1 FROM sequence_runs WHERE endpoint_id = $1)",
                    )
                    .bind(endpoint.as_str())
                    .execute(&mut tx)
                    .await?;
            }
            tx.commit().await?;
        }
        Ok(removed)
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
