//! Deliveries: reading them and their attempts, the DLQ, release and replay.
//! (Claiming is in `claim`, completing in `complete`.)

use std::collections::HashMap;

use crate::db::{Batch, Kind, Query, Row, Sql, Tx};
use hookline_core::ids::{AppId, AttemptId, DeliveryId, EndpointId, EventId};
use hookline_core::model::DeliveryState;
use hookline_core::retry::{new_round as new_round_at, Round};
use hookline_core::time::Timestamp;

use crate::claim::lane_predicate;
use crate::endpoints::{breaker_from_row, retry_from_row, BREAKER_COLUMNS};
use crate::fanout::{self, NEXT_DUE_FANOUT, RELEASE_FANOUT};
use crate::listing::{Arg, Filters};
use crate::records::{
    Attempt, AttemptFilter, BatchMember, Delivery, DeliveryFacts, DeliveryFilter, DlqFilter,
    EndpointGate, Page, ReplayOutcome, SentRequest, StateFilter,
};
use crate::{parse_column, parse_optional_column, Result, Store, StoreError};
use crate::{Engine, Events, Listings};
use hookline_core::claim::Lane;

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

/// A replay's or a resend's new round, as core decides it
/// (`hookline_core::retry::new_round`), bound from `$first` on by
/// [`bind_round`]; not dead, so no death recorded.
fn new_round(first: usize) -> String {
    let [state, due, attempts, started] = [first, first + 1, first + 2, first + 3];
    format!(
        "state = ${state}, due_at = ${due}, attempts = ${attempts}, \
         round_started_at = ${started}, dead_reason = NULL, dead_at = NULL, updated_at = ${started}"
    )
}

/// Binds [`new_round`]'s parameters, in its order.
fn bind_round<'q>(query: Query<'q>, round: &Round) -> Query<'q> {
    query
        .bind(round.state.as_str())
        .bind(round.due_at.as_millis())
        .bind(i64::from(round.attempts))
        .bind(round.round_started_at.as_millis())
}
/// A delivery with an endpoint to send to (a restart's condition beside its state,
/// which is in the same UPDATE, so of concurrent restarts exactly one starts a round).
const HAS_ENDPOINT: &str = "EXISTS (SELECT 1 FROM endpoints \
     WHERE endpoints.id = deliveries.endpoint_id AND endpoints.app_id = deliveries.app_id)";

/// [`new_round`] (from `$1`) of the dead ones of a batch of ids (`$5`).
///
/// Per row, by primary keys only: `IS NOT DISTINCT FROM` (`state` is never
/// NULL) keeps the planner off the partial `deliveries_dlq`, and on PostgreSQL
/// `OFFSET 0` keeps the endpoint's check a probe per row rather than a join
/// that walked `deliveries_by_endpoint` (generic plans, tables analyzed while
/// small; tests/e2e/plans.rs).
pub(crate) static REPLAY_BATCH: Sql = Sql::new(|engine| {
    let subquery = HAS_ENDPOINT
        .strip_suffix(')')
        .expect("HAS_ENDPOINT ends its subquery");
    let has_endpoint = match engine {
        Engine::Postgres => format!("{subquery} OFFSET 0)"),
        Engine::Sqlite => HAS_ENDPOINT.to_owned(),
    };
    format!(
        "UPDATE deliveries SET {} WHERE state IS NOT DISTINCT FROM 'dead' AND {has_endpoint} AND {}",
        new_round(1),
        engine.in_batch("id", 5)
    )
});

/// `{event}.{delivery}` of [`Listings::delivery_cursor`](crate::Listings::delivery_cursor).
fn parse_delivery_cursor(cursor: &str) -> Option<(String, String)> {
    let (event, id) = hookline_core::cursor::parse_delivery(cursor)?;
    Some((event.to_string(), id.to_string()))
}

/// `{dead_at}_{id}` of [`Listings::dlq_cursor`](crate::Listings::dlq_cursor).
fn parse_dlq_cursor(cursor: &str) -> Option<(i64, String)> {
    let (at, id) = hookline_core::cursor::parse_dlq(cursor)?;
    Some((at, id.to_string()))
}

const ATTEMPT_COLUMNS: &str =
    "id, delivery_id, endpoint_id, attempt_number, started_at, duration_ms, status_code, \
     response_body, error_kind, error_message, verdict, next_attempt_at, dead_reason, \
     detail";

/// A delivery row's first attempt (`first_*`: written with the row, at that
/// attempt's outcome) as [`ATTEMPT_COLUMNS`], then `app_id`.
const FIRST_ATTEMPT_COLUMNS: &str = "first_attempt_id AS id, id AS delivery_id, endpoint_id, \
     CAST(1 AS BIGINT) AS attempt_number, first_started_at AS started_at, \
     first_duration_ms AS duration_ms, first_status AS status_code, \
     first_response_body AS response_body, first_error_kind AS error_kind, \
     first_error_message AS error_message, first_verdict AS verdict, \
     first_next_attempt_at AS next_attempt_at, first_dead_reason AS dead_reason, \
     first_detail AS detail, app_id";

/// Every attempt, as one table `a` of [`ATTEMPT_COLUMNS`] and `app_id`: the
/// `attempts` rows, and the first attempts that delivery rows carry. A row
/// without one has a NULL `id` here: every condition on `a` must exclude it
/// (`id IS NOT NULL`, or a comparison on `id`). No half has a condition of its
/// own, so PostgreSQL pulls both into one append of index walks, merged in id
/// order, and pushes the caller's conditions into each (SQLite does the same);
/// with `by_endpoint`, SQLite is told the indexes that walk an endpoint's
/// attempts newest first.
pub(crate) fn every_attempt(engine: Engine, by_endpoint: bool) -> String {
    let (attempts, deliveries) = if by_endpoint {
        (
            engine.indexed_by("attempts_by_endpoint"),
            engine.indexed_by("deliveries_by_endpoint"),
        )
    } else {
        Default::default()
    };
    format!(
        "(SELECT {ATTEMPT_COLUMNS}, app_id FROM attempts{attempts} UNION ALL \
         SELECT {FIRST_ATTEMPT_COLUMNS} FROM deliveries{deliveries}) a"
    )
}

/// The `detail` column as stored (see `complete::AttemptDetail`).
#[derive(serde::Deserialize)]
struct StoredDetail {
    url: String,
    signature: Option<String>,
    #[serde(default)]
    custom_header_names: Vec<String>,
    #[serde(default)]
    response_headers: Vec<(String, String)>,
    response_truncated: bool,
    trigger: hookline_core::model::AttemptTrigger,
    #[serde(default)]
    request_body: Option<String>,
    #[serde(default)]
    skipped: bool,
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    seq_in_body: bool,
    #[serde(default)]
    batch: Option<BatchMember>,
}

/// An attempt's own record of its request: its signature and custom headers,
/// and its endpoint's number (and whether the body carried it).
type OwnRequest = Option<(String, Vec<String>, Option<u64>, bool)>;

/// An attempt row, and what its request carried (`signature`, `custom_headers`)
/// for [`Store::with_requests`] to complete with its delivery's side.
fn attempt_from_row(row: &Row) -> Result<(Attempt, OwnRequest)> {
    let detail: Option<StoredDetail> = row
        .try_get::<Option<String>, _>("detail")?
        .map(|text| {
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("detail: {e}")))
        })
        .transpose()?;
    let (url, sent, response_headers, response_truncated, trigger, request_body, skipped, batch) =
        match detail {
            None => (None, None, Vec::new(), false, None, None, false, None),
            Some(d) => (
                Some(d.url),
                d.signature
                    .map(|s| (s, d.custom_header_names, d.seq, d.seq_in_body)),
                d.response_headers,
                d.response_truncated,
                Some(d.trigger),
                d.request_body,
                d.skipped,
                d.batch,
            ),
        };
    let attempt = Attempt {
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
        url,
        sent: None,
        response_headers,
        response_truncated,
        trigger,
        request_body,
        skipped,
        batch,
    };
    Ok((attempt, sent))
}

/// The event id and ordering of deliveries, by id (what an attempt's request
/// carried besides its own columns).
pub(crate) static DELIVERY_SIDES: Sql = Sql::new(|engine| {
    format!(
        "SELECT d.id, d.event_id, d.ordering_key, d.sequence FROM deliveries d WHERE {}",
        engine.in_batch("d.id", 1)
    )
});

/// The due time of a lane's head (its index's first entry), or NULL. Spelled as an
/// ordered `LIMIT 1` rather than `MIN`: PostgreSQL may plan a `MIN` it expects
/// to see few rows as an aggregate over the whole index.
fn lane_head(lane: Lane) -> String {
    format!(
        "SELECT (SELECT due_at FROM deliveries WHERE {} ORDER BY due_at LIMIT 1)",
        lane_predicate(lane)
    )
}
pub(crate) static NEXT_DUE_FRESH: Sql = Sql::new(|_| lane_head(Lane::Fresh));
pub(crate) static NEXT_DUE_RETRY: Sql = Sql::new(|_| lane_head(Lane::Retry));

/// A claimed delivery (`$1`, lease `$2`) given back, pending and due at `$3`.
pub(crate) static RELEASE_DELIVERY: Sql = Sql::new(|_| {
    "UPDATE deliveries SET state = 'pending', due_at = $3, lease_token = NULL, updated_at = $3 \
     WHERE id = $1 AND lease_token = $2"
        .into()
});

impl Events<'_> {
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
            // A target of a `fanout` lease gives the whole row back, reclaimed:
            // its targets recorded meanwhile have rows and are not sent again.
            let (event, _) = id.target();
            if self.fanout.get(&event, token).is_some() {
                self.engine
                    .query(RELEASE_FANOUT.text(self.engine))
                    .bind(event.as_str())
                    .bind(token)
                    .bind(now.as_millis())
                    .execute(&mut tx)
                    .await?;
                self.fanout.forget(&event, token);
                continue;
            }
            self.engine
                .query(RELEASE_DELIVERY.text(self.engine))
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

    /// When the earliest pending delivery falls due, if any: the smallest head of
    /// the lane indexes (`fanout`'s too). (A lease's end is not read here: a dispatcher's
    /// turns, at least one per `idle_poll`, give back the leases that ended.)
    #[tracing::instrument(skip_all)]
    pub async fn next_due_at(&self) -> Result<Option<Timestamp>> {
        let mut earliest: Option<i64> = None;
        for lane in [&NEXT_DUE_FRESH, &NEXT_DUE_FANOUT, &NEXT_DUE_RETRY] {
            let due: Option<i64> = self
                .engine
                .query(lane.text(self.engine))
                .fetch_scalar(&self.reader)
                .await?;
            earliest = match (earliest, due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(earliest.map(Timestamp::from_millis))
    }

    /// One attempt of an app's deliveries.
    #[tracing::instrument(skip_all, fields(app = %app, attempt = %id))]
    pub async fn get_attempt(&self, app: &AppId, id: &AttemptId) -> Result<Option<Attempt>> {
        let Some(row) = self
            .app_row(
                ATTEMPT_COLUMNS,
                &every_attempt(self.engine, false),
                app,
                id.as_str(),
            )
            .await?
        else {
            return Ok(None);
        };
        Ok(self
            .with_requests(vec![attempt_from_row(&row)?])
            .await?
            .pop())
    }

    /// One delivery of an app.
    #[tracing::instrument(skip_all, fields(app = %app, delivery = %id))]
    pub async fn get_delivery(&self, app: &AppId, id: &DeliveryId) -> Result<Option<Delivery>> {
        // A target of its event's `fanout` row, if it is one, unless its row
        // is written (read after, so a target recorded meanwhile is found).
        let (event, _) = id.target();
        let target = fanout::targets_of_event(self, app, &event)
            .await?
            .into_iter()
            .find(|d| d.id == *id);
        match self
            .app_row(DELIVERY_COLUMNS, "deliveries", app, id.as_str())
            .await?
        {
            Some(row) => delivery_from_row(&row).map(Some),
            None => Ok(target),
        }
    }

    /// Moves a dead delivery back to pending, due now, in a new round (attempt
    /// count 0, max age counted afresh); the event id — and so `webhook-id` — stays.
    ///
    /// The state check is part of the `UPDATE`, so of two concurrent replays
    /// exactly one starts a round; the other sees [`ReplayOutcome::Unchanged`]. A
    /// delivery whose endpoint was deleted stays dead ([`ReplayOutcome::EndpointDeleted`]).
    #[tracing::instrument(skip_all, fields(app = %app, delivery = %id))]
    pub async fn replay_delivery(
        &self,
        app: &AppId,
        id: &DeliveryId,
        now: Timestamp,
    ) -> Result<ReplayOutcome> {
        self.restart_delivery(app, id, DeliveryState::Dead, now)
            .await
    }

    /// Sends a succeeded delivery again, as [`Events::replay_delivery`](crate::Events::replay_delivery) does a dead
    /// one (a new round, the same `webhook-id`): for a receiver that lost what it got.
    #[tracing::instrument(skip_all, fields(app = %app, delivery = %id))]
    pub async fn resend_delivery(
        &self,
        app: &AppId,
        id: &DeliveryId,
        now: Timestamp,
    ) -> Result<ReplayOutcome> {
        self.restart_delivery(app, id, DeliveryState::Succeeded, now)
            .await
    }
}

impl Store {
    /// Completes attempts with what their requests carried: their own signature
    /// and custom headers, their delivery's event id and ordering (one query).
    async fn with_requests(&self, attempts: Vec<(Attempt, OwnRequest)>) -> Result<Vec<Attempt>> {
        let mut ids: Vec<&str> = attempts
            .iter()
            .filter(|(_, sent)| sent.is_some())
            .map(|(a, _)| a.delivery_id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut sides: HashMap<String, (EventId, Option<(String, u64)>)> = HashMap::new();
        if !ids.is_empty() {
            let engine = self.engine;
            let rows = engine
                .query(DELIVERY_SIDES.text(engine))
                .bind_batch(Batch::default().text(ids.iter().map(|id| Some(*id))))
                .fetch_all(&self.reader)
                .await?;
            for row in &rows {
                let ordering = match (
                    row.try_get::<Option<String>, _>("ordering_key")?,
                    row.try_get::<Option<i64>, _>("sequence")?,
                ) {
                    (Some(key), Some(sequence)) => Some((key, sequence as u64)),
                    _ => None,
                };
                sides.insert(
                    row.try_get("id")?,
                    (parse_column(row, "event_id")?, ordering),
                );
            }
        }
        Ok(attempts
            .into_iter()
            .map(|(mut attempt, sent)| {
                attempt.sent = sent.and_then(
                    |(signature, custom_header_names, endpoint_sequence, seq_in_body)| {
                        let (event_id, ordering) = sides.get(attempt.delivery_id.as_str())?.clone();
                        Some(SentRequest {
                            signature,
                            custom_header_names,
                            event_id,
                            ordering,
                            endpoint_sequence,
                            seq_in_body,
                        })
                    },
                );
                attempt
            })
            .collect())
    }

    /// Replays the dead ones of `ids` (as [`Events::replay_delivery`](crate::Events::replay_delivery) does one) in
    /// `tx`; how many it moved back to pending.
    pub(crate) async fn replay_in(
        &self,
        tx: &mut Tx,
        ids: &[String],
        now: Timestamp,
    ) -> Result<u64> {
        if ids.is_empty() {
            return Ok(0);
        }
        let batch = Batch::default().text(ids.iter().map(|id| Some(id.as_str())));
        let query = self.engine.query(REPLAY_BATCH.text(self.engine));
        Ok(bind_round(query, &new_round_at(now))
            .bind_batch(batch)
            .execute(tx)
            .await?
            .rows_affected())
    }

    /// A new round for a delivery in state `from` whose endpoint exists.
    async fn restart_delivery(
        &self,
        app: &AppId,
        id: &DeliveryId,
        from: DeliveryState,
        now: Timestamp,
    ) -> Result<ReplayOutcome> {
        let sql = format!(
            "UPDATE deliveries SET {} WHERE id = $5 AND app_id = $6 AND state = $7 \
             AND {HAS_ENDPOINT} RETURNING {DELIVERY_COLUMNS}",
            new_round(1)
        );
        let query = self.engine.query(&sql);
        let restarted = bind_round(query, &new_round_at(now))
            .bind(id.as_str())
            .bind(app.as_str())
            .bind(from.as_str())
            .fetch_optional(&self.writer)
            .await?;
        if let Some(row) = restarted {
            self.notify_due();
            return Ok(ReplayOutcome::Replayed(delivery_from_row(&row)?));
        }
        Ok(match self.events().get_delivery(app, id).await? {
            // In the state, and not restarted: its endpoint is gone (or it reached the
            // state just after the UPDATE looked).
            Some(delivery)
                if delivery.state == from
                    && self
                        .endpoints()
                        .get_endpoint(app, &delivery.endpoint_id)
                        .await?
                        .is_none() =>
            {
                ReplayOutcome::EndpointDeleted(delivery)
            }
            Some(delivery) => ReplayOutcome::Unchanged(delivery),
            None => ReplayOutcome::NotFound,
        })
    }
}

/// A deliveries listing's order: newest event first, then its deliveries.
const DELIVERIES_ORDER: &str = "e.id DESC, d.id DESC";

/// The newest attempt's status of the delivery `d` names: in `attempts`, or
/// the first, in the row (the listing's status filter reads it too).
const NEWEST_STATUS: &str =
    "(SELECT l.status_code FROM (SELECT a.id, a.status_code FROM attempts a \
     WHERE a.delivery_id = d.id UNION ALL SELECT d.first_attempt_id, d.first_status \
     WHERE d.first_attempt_id IS NOT NULL) l ORDER BY l.id DESC LIMIT 1)";

/// A batch of an app's deliveries (`$2…`: id, event id, endpoint id) with
/// their event's type, their newest attempt's id, and their endpoint's
/// switches, breaker and retry settings; a delivery without a row (a `fanout`
/// target, never attempted) has no attempt.
static FACTS: Sql = Sql::new(|engine| {
    let batch = engine.rows(
        2,
        &[
            ("id", Kind::Text),
            ("event_id", Kind::Text),
            ("endpoint_id", Kind::Text),
        ],
    );
    let breaker: Vec<String> = BREAKER_COLUMNS
        .split(',')
        .map(|c| format!("en.{}", c.trim()))
        .collect();
    // The events by key, one probe per value (see `Engine::probes`); the
    // row only if it is this app's, of this event.
    format!(
        "SELECT v.id, e.event_type, \
           (SELECT {NEWEST_ID} FROM deliveries d \
            WHERE d.id = v.id AND d.app_id = $1 AND d.event_id = v.event_id) AS newest_id, \
           en.id AS endpoint_found, en.enabled, en.paused, en.disabled_reason, en.retry_base_ms, \
           en.url AS endpoint_url, \
           en.retry_cap_ms, en.max_attempts, en.max_age_secs, {} \
         FROM {batch} JOIN events e ON e.id = v.event_id \
         LEFT JOIN endpoints en ON en.id = v.endpoint_id AND en.app_id = $1 \
         WHERE e.app_id = $1 AND {}",
        breaker.join(", "),
        engine.probes("e.id", 3)
    )
});

/// The id of delivery `d`'s newest attempt, of either half (see [`every_attempt`]).
const NEWEST_ID: &str =
    "(SELECT l.id FROM (SELECT a.id FROM attempts a WHERE a.delivery_id = d.id UNION ALL \
     SELECT d.first_attempt_id WHERE d.first_attempt_id IS NOT NULL) l ORDER BY l.id DESC LIMIT 1)";

/// An app's attempts by id (`$2`), from either half, each half probed by its
/// own index (`attempts`' key, `deliveries_first_attempt`): what an
/// explanation reads of them, without the response body (up to 64 KiB) and
/// the error message, which read as `NULL`.
static ATTEMPTS_BY_ID: Sql = Sql::new(|engine| {
    let narrow = |columns: &str| {
        columns
            .split(',')
            .map(|column| {
                let column = column.trim();
                match column.rsplit(' ').next() {
                    Some(name @ ("response_body" | "error_message")) => {
                        format!("CAST(NULL AS TEXT) AS {name}")
                    }
                    _ => column.to_owned(),
                }
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "SELECT {}, app_id FROM attempts WHERE app_id = $1 AND {} \
         UNION ALL SELECT {} FROM deliveries WHERE app_id = $1 AND {}",
        narrow(ATTEMPT_COLUMNS),
        engine.in_batch("id", 2),
        narrow(FIRST_ATTEMPT_COLUMNS),
        engine.in_batch("first_attempt_id", 2)
    )
});

impl Listings<'_> {
    /// Each of `deliveries`' event type, newest attempt and endpoint gate, by
    /// id: what a delivery's view shows beside its row. A delivery whose
    /// event is gone (retention ran since it was read) is not in the map.
    #[tracing::instrument(skip_all, fields(app = %app, n = deliveries.len()))]
    pub async fn delivery_facts(
        &self,
        app: &AppId,
        deliveries: &[Delivery],
    ) -> Result<HashMap<DeliveryId, DeliveryFacts>> {
        if deliveries.is_empty() {
            return Ok(HashMap::new());
        }
        let batch = Batch::default()
            .text(deliveries.iter().map(|d| Some(d.id.as_str())))
            .text(deliveries.iter().map(|d| Some(d.event_id.as_str())))
            .text(deliveries.iter().map(|d| Some(d.endpoint_id.as_str())));
        let engine = self.engine;
        let rows = engine
            .query(FACTS.text(engine))
            .bind(app.as_str())
            .bind_batch(batch)
            .fetch_all(&self.reader)
            .await?;
        let newest_ids: Vec<String> = rows
            .iter()
            .map(|row| row.try_get::<Option<String>, _>("newest_id"))
            .collect::<std::result::Result<Vec<_>, _>>()?
            .into_iter()
            .flatten()
            .collect();
        let mut newest: HashMap<DeliveryId, Attempt> = if newest_ids.is_empty() {
            HashMap::new()
        } else {
            engine
                .query(ATTEMPTS_BY_ID.text(engine))
                .bind(app.as_str())
                .bind_batch(Batch::default().text(newest_ids.iter().map(|id| Some(id.as_str()))))
                .fetch_all(&self.reader)
                .await?
                .iter()
                .map(|row| {
                    let (attempt, _) = attempt_from_row(row)?;
                    Ok((attempt.delivery_id.clone(), attempt))
                })
                .collect::<Result<_>>()?
        };
        rows.iter()
            .map(|row| {
                let id: DeliveryId = parse_column(row, "id")?;
                let found: Option<String> = row.try_get("endpoint_found")?;
                let endpoint = match found {
                    None => None,
                    Some(_) => Some(EndpointGate {
                        enabled: row.try_get("enabled")?,
                        paused: row.try_get("paused")?,
                        polled: row
                            .try_get::<Option<String>, _>("endpoint_url")?
                            .is_some_and(|url| hookline_core::destination::is_poll(&url)),
                        disabled_reason: row.try_get("disabled_reason")?,
                        breaker: breaker_from_row(row)?,
                        retry: retry_from_row(row)?,
                    }),
                };
                Ok((
                    id.clone(),
                    DeliveryFacts {
                        event_type: row.try_get("event_type")?,
                        newest: newest.remove(&id),
                        endpoint,
                    },
                ))
            })
            .collect()
    }

    /// A delivery's attempts, newest first (every round's).
    #[tracing::instrument(skip_all, fields(app = %app, delivery = %id))]
    pub async fn list_attempts(
        &self,
        app: &AppId,
        id: &DeliveryId,
        page: &Page,
    ) -> Result<Vec<Attempt>> {
        let sql = format!(
            "SELECT {ATTEMPT_COLUMNS} FROM {} \
             WHERE delivery_id = $1 AND app_id = $2 AND id IS NOT NULL \
             AND ($3 IS NULL OR id < $3) ORDER BY id DESC LIMIT $4",
            every_attempt(self.engine, false)
        );
        let rows = self
            .engine
            .query(&sql)
            .bind(id.as_str())
            .bind(app.as_str())
            .bind(page.before.as_deref())
            .bind(i64::from(page.limit))
            .fetch_all(&self.reader)
            .await?;
        let attempts = rows
            .iter()
            .map(attempt_from_row)
            .collect::<Result<Vec<_>>>()?;
        self.with_requests(attempts).await
    }

    /// An endpoint's attempts (of every delivery), newest first, narrowed by
    /// `filter`. Also answers for a deleted endpoint: its history stays.
    #[tracing::instrument(skip_all, fields(app = %app, endpoint = %endpoint))]
    pub async fn list_endpoint_attempts(
        &self,
        app: &AppId,
        endpoint: &EndpointId,
        filter: &AttemptFilter,
        page: &Page,
    ) -> Result<Vec<Attempt>> {
        let mut f = Filters::new();
        f.text("endpoint_id = $?", endpoint.as_str());
        f.text("app_id = $?", app.as_str());
        f.fixed("id IS NOT NULL");
        f.text_if("id < $?", page.before.as_deref());
        // When the attempt started (its id is made when it is recorded, later).
        f.time_range("started_at", filter.started);
        f.text_if("verdict = $?", filter.verdict.map(|v| v.as_str()));
        f.status("status_code", filter.status);
        let select = format!(
            "{ATTEMPT_COLUMNS} FROM {}",
            every_attempt(self.engine, true)
        );
        let rows = self.page_rows(&select, &f, "id DESC", page.limit).await?;
        let attempts = rows
            .iter()
            .map(attempt_from_row)
            .collect::<Result<Vec<_>>>()?;
        self.with_requests(attempts).await
    }

    /// An app's deliveries, newest first by their event (see `listing`), narrowed by
    /// `filter`. The cursor is [`Listings::delivery_cursor`](crate::Listings::delivery_cursor) of the last row of the
    /// previous page.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn list_deliveries(
        &self,
        app: &AppId,
        filter: &DeliveryFilter,
        page: &Page,
    ) -> Result<Vec<Delivery>> {
        // The `fanout` targets first, then the rows: a target recorded
        // between the two reads is among the rows.
        let targets = self.fanout_page(app, filter, page).await?;
        let (select, f) = self.deliveries_page(app, filter, page);
        let rows = self
            .page_rows(&select, &f, DELIVERIES_ORDER, page.limit)
            .await?;
        let mut deliveries = rows
            .iter()
            .map(delivery_from_row)
            .collect::<Result<Vec<_>>>()?;
        if !targets.is_empty() {
            let listed: std::collections::HashSet<DeliveryId> =
                deliveries.iter().map(|d| d.id.clone()).collect();
            deliveries.extend(targets.into_iter().filter(|d| !listed.contains(&d.id)));
            deliveries.sort_by(|a, b| (&b.event_id, &b.id).cmp(&(&a.event_id, &a.id)));
            deliveries.truncate(page.limit as usize);
        }
        Ok(deliveries)
    }

    /// At least a page (unless there are fewer) of the deliveries that
    /// `fanout` rows stand for — targets without rows of their own, pending or
    /// in flight — that `filter` and `page` let through, newest first.
    async fn fanout_page(
        &self,
        app: &AppId,
        filter: &DeliveryFilter,
        page: &Page,
    ) -> Result<Vec<Delivery>> {
        let leased = match filter.state {
            None => None,
            Some(StateFilter::Pending) => Some(false),
            Some(StateFilter::InFlight) => Some(true),
            Some(_) => return Ok(Vec::new()),
        };
        // Never attempted: no status to match.
        if filter.last_status.is_some() {
            return Ok(Vec::new());
        }
        let cursor = page.before.as_deref().and_then(parse_delivery_cursor);
        let select = format!(
            "f.event_id, f.app_id, f.targets, f.due_at, f.lease_token, f.created_at \
             FROM events e{} JOIN fanout f ON f.event_id = e.id",
            self.engine.indexed_by("events_by_app"),
        );
        let mut targets = Vec::new();
        // Events newest first, a page of them at a time, until their targets
        // fill the page: the cursor's own event, and targets that have rows,
        // take a place without giving one.
        let mut after: Option<String> = None;
        loop {
            let mut f = Filters::new();
            f.text("e.app_id = $?", app.as_str());
            f.text_if("e.id = $?", filter.event.as_ref().map(|e| e.as_str()));
            match (&after, &cursor) {
                (Some(last), _) => f.text("e.id < $?", last.clone()),
                (None, Some((event, _))) => f.text("e.id <= $?", event.clone()),
                (None, None) => {}
            }
            f.id_range("e.id", filter.created, |ms| {
                EventId::first_of_millisecond(ms).to_string()
            });
            f.text_if("e.event_type = $?", filter.event_type.as_deref());
            if let Some(endpoint) = &filter.endpoint {
                f.text("f.targets LIKE $?", format!("%,{endpoint},%"));
            }
            match leased {
                Some(true) => f.fixed("f.lease_token IS NOT NULL"),
                Some(false) => f.fixed("f.lease_token IS NULL"),
                None => {}
            }
            let rows = self.page_rows(&select, &f, "e.id DESC", page.limit).await?;
            let full = rows.len() == page.limit as usize;
            let mut read = rows
                .iter()
                .map(fanout::fanout_from_row)
                .collect::<Result<Vec<_>>>()?;
            // An event's parts may lie across the page's end: the last
            // event's are all read (the next page starts past it).
            let last = read.last().map(|row| row.event_id.clone());
            if let (true, Some(last)) = (full, &last) {
                read.retain(|row| row.event_id != *last);
                read.extend(
                    fanout::rows_of_event(self.engine, &self.reader, app, last)
                        .await?
                        .into_iter()
                        .filter(|row| leased.is_none_or(|leased| row.leased == leased)),
                );
            }
            let mut found = Vec::new();
            for row in &read {
                for delivery in row.pending() {
                    let before = cursor.as_ref().is_none_or(|(event, id)| {
                        (delivery.event_id.as_str(), delivery.id.as_str())
                            < (event.as_str(), id.as_str())
                    });
                    let endpoint = filter
                        .endpoint
                        .as_ref()
                        .is_none_or(|e| *e == delivery.endpoint_id);
                    if before && endpoint {
                        found.push(delivery);
                    }
                }
            }
            let ids: Vec<DeliveryId> = found.iter().map(|d| d.id.clone()).collect();
            let written = fanout::existing(self.engine, &self.reader, &ids).await?;
            targets.extend(found.into_iter().filter(|d| !written.contains(&d.id)));
            match last {
                Some(last) if full && targets.len() < page.limit as usize => {
                    after = Some(last.to_string());
                }
                _ => return Ok(targets),
            }
        }
    }

    /// The plan of [`Listings::list_deliveries`]'s statement on PostgreSQL
    /// (`EXPLAIN (FORMAT JSON)`), for the plan test; `None` on SQLite.
    pub async fn explain_list_deliveries(
        &self,
        app: &AppId,
        filter: &DeliveryFilter,
        page: &Page,
    ) -> Result<Option<String>> {
        let (select, f) = self.deliveries_page(app, filter, page);
        self.page_plan(&select, &f, DELIVERIES_ORDER, page.limit)
            .await
    }

    /// A deliveries listing's `… FROM …` and its conditions.
    fn deliveries_page(
        &self,
        app: &AppId,
        filter: &DeliveryFilter,
        page: &Page,
    ) -> (String, Filters) {
        // The app's events, newest first, each with its deliveries: the walk reads
        // `events_by_app` and `deliveries_by_event`, indexes the hot path has anyway.
        let mut f = Filters::new();
        f.text("e.app_id = $?", app.as_str());
        f.text_if("e.id = $?", filter.event.as_ref().map(|e| e.as_str()));
        if let Some((event, id)) = page.before.as_deref().and_then(parse_delivery_cursor) {
            f.text("e.id <= $?", event.clone());
            // On the delivery's own columns: written on `e.id`, the comparison joins
            // both tables, and a never-analyzed PostgreSQL then walked the endpoint's
            // every delivery once per event (9M subqueries, 33 s, for 3,000 events).
            f.clause(
                "(d.event_id, d.id) < ($?, $?)",
                [Arg::Text(event), Arg::Text(id)],
            );
        }
        f.id_range("e.id", filter.created, |ms| {
            EventId::first_of_millisecond(ms).to_string()
        });
        f.text_if("e.event_type = $?", filter.event_type.as_deref());
        f.text_if(
            "d.endpoint_id = $?",
            filter.endpoint.as_ref().map(|e| e.as_str()),
        );
        f.state(filter.state);
        // The newest attempt's: in `attempts`, or the first, in the row.
        f.status(NEWEST_STATUS, filter.last_status);
        let columns: Vec<String> = DELIVERY_COLUMNS
            .split(',')
            .map(|c| format!("d.{}", c.trim()))
            .collect();
        let select = format!(
            "{} FROM events e{} JOIN deliveries d{} ON d.event_id = e.id",
            columns.join(", "),
            self.engine.indexed_by("events_by_app"),
            self.engine.indexed_by("deliveries_by_event"),
        );
        (select, f)
    }

    /// The cursor that continues a delivery listing after `delivery`.
    pub fn delivery_cursor(delivery: &Delivery) -> String {
        hookline_core::cursor::delivery(&delivery.event_id, &delivery.id)
    }

    /// Whether `cursor` is one [`Listings::delivery_cursor`](crate::Listings::delivery_cursor) made.
    pub fn is_delivery_cursor(cursor: &str) -> bool {
        parse_delivery_cursor(cursor).is_some()
    }

    /// An app's dead deliveries, most recently dead first, narrowed by `filter`.
    /// The cursor is [`Listings::dlq_cursor`](crate::Listings::dlq_cursor) of the last row of the previous page.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn list_dlq(
        &self,
        app: &AppId,
        filter: &DlqFilter,
        page: &Page,
    ) -> Result<Vec<Delivery>> {
        let mut f = self.dlq_filters(app, filter);
        if let Some((dead_at, id)) = page.before.as_deref().and_then(parse_dlq_cursor) {
            f.int("d.dead_at <= $?", dead_at);
            f.clause(
                "(d.dead_at, d.id) < ($?, $?)",
                [Arg::Int(dead_at), Arg::Text(id)],
            );
        }
        let select = format!(
            "{DELIVERY_COLUMNS} FROM deliveries d{}",
            self.engine.indexed_by("deliveries_dlq"),
        );
        let rows = self
            .page_rows(&select, &f, "d.dead_at DESC, d.id DESC", page.limit)
            .await?;
        rows.iter().map(delivery_from_row).collect()
    }

    /// Whether `cursor` is one [`Listings::dlq_cursor`](crate::Listings::dlq_cursor) made.
    pub fn is_dlq_cursor(cursor: &str) -> bool {
        parse_dlq_cursor(cursor).is_some()
    }

    /// The cursor that continues a DLQ listing after `delivery`.
    pub fn dlq_cursor(delivery: &Delivery) -> String {
        hookline_core::cursor::dlq(
            delivery.dead_at.unwrap_or_default().as_millis(),
            &delivery.id,
        )
    }
}
