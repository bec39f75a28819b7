//! Completing attempts, in a dispatcher's turn: the attempt rows, each
//! delivery's next state, the endpoint rows the completion plan reads, and the
//! execution of that plan (`hookline_core::completion`: breakers, queue moves,
//! disables, released partitions). The dispatcher asks for the plan
//! (`hookline_dispatch::turn::record`).

use std::collections::{HashMap, HashSet};

use crate::claim::Turn;
use crate::db::Tx;
use crate::fanout::{delete_fanout, target_columns, Held};
use hookline_core::completion;
use hookline_core::ids::{AttemptId, DeliveryId, EndpointId, EventId};
use hookline_core::model::DeadReason;
use hookline_core::ordering;
use hookline_core::time::Timestamp;

use crate::db::{Batch, Kind, Sql};
use crate::endpoints::{
    breaker_from_row, disable_endpoint, move_queue, on_dead_from_row, save_breaker, BREAKER_COLUMNS,
};
use crate::operational::{count_dead, insert_notices};
use crate::records::{AttemptRecord, BatchMember};
use crate::timeline::insert_marks;
use crate::{parse_column, Engine, Result};

/// An attempt's `detail` column: what was sent and what came back, beyond the
/// columns listings filter on (read back by `deliveries::attempt_from_row`).
#[derive(serde::Serialize)]
pub(crate) struct AttemptDetail<'a> {
    pub url: &'a str,
    pub signature: Option<&'a str>,
    /// The endpoint's own headers by name: their values may be tokens, and an
    /// attempt log is no place for secrets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub custom_header_names: Vec<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub response_headers: &'a [(String, String)],
    pub response_truncated: bool,
    pub trigger: hookline_core::model::AttemptTrigger,
    /// The body sent, when a transform made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_body: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
    /// The delivery's number among its endpoint's (in a header).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    /// The body sent was the envelope with that number in it.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub seq_in_body: bool,
    /// The batch request it went in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<BatchMember>,
}

/// What a batch's attempts are stored with, wherever each goes (an `attempts`
/// row, or the delivery row its outcome writes): an id each, and the `detail`
/// column's JSON.
struct Prepared<'r> {
    records: &'r [AttemptRecord],
    ids: Vec<String>,
    /// Every detail in one buffer (one allocation per batch, not a growing
    /// String per attempt), record `i`'s ending at `ends[i]`.
    details: String,
    ends: Vec<usize>,
}

impl<'r> Prepared<'r> {
    fn new(records: &'r [AttemptRecord]) -> Self {
        let ids = records
            .iter()
            .map(|_| AttemptId::generate().to_string())
            .collect();
        let mut buffer = Vec::with_capacity(records.len() * 320);
        let mut ends = Vec::with_capacity(records.len());
        for r in records {
            let transformed = r.transformed.as_ref();
            serde_json::to_writer(
                &mut buffer,
                &AttemptDetail {
                    url: transformed
                        .and_then(|t| t.url.as_deref())
                        .unwrap_or(&r.destination.url),
                    signature: r.signature.as_deref(),
                    // The endpoint's, then the transform's (which replace
                    // one of the same name).
                    custom_header_names: r
                        .destination
                        .headers
                        .iter()
                        .map(|(name, _)| name.as_str())
                        .filter(|name| {
                            transformed.is_none_or(|t| !t.header_names.iter().any(|n| n == name))
                        })
                        .chain(
                            transformed
                                .iter()
                                .flat_map(|t| t.header_names.iter().map(String::as_str)),
                        )
                        .collect(),
                    response_headers: &r.response_headers,
                    response_truncated: r.response_truncated,
                    trigger: r.trigger,
                    request_body: transformed.filter(|t| !t.skipped).map(|t| t.body.as_str()),
                    skipped: transformed.is_some_and(|t| t.skipped),
                    seq: r.endpoint_sequence,
                    seq_in_body: r.endpoint_sequence.is_some()
                        && r.destination.seq_in_body
                        && transformed.is_none(),
                    batch: r.batch.as_ref().map(|b| BatchMember {
                        id: b.request.id.to_string(),
                        size: b.request.members.len() as u32,
                        position: b.position,
                        members: match b.position {
                            0 => b.request.members.clone(),
                            _ => Vec::new(),
                        },
                    }),
                },
            )
            .expect("a detail serializes");
            ends.push(buffer.len());
        }
        Prepared {
            records,
            ids,
            details: String::from_utf8(buffer).expect("JSON is UTF-8"),
            ends,
        }
    }

    fn detail(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.details[start..self.ends[i]]
    }

    /// The attempt columns of records `at`, in [`ATTEMPT_FIELDS`]'s order,
    /// after the columns `batch` has.
    fn columns<'q>(&'q self, batch: Batch<'q>, at: &'q [usize]) -> Batch<'q> {
        let r = move || at.iter().map(|&i| &self.records[i]);
        let errors = move || {
            r().map(|r| match &r.error {
                Some((kind, message)) => (Some(kind.as_str()), Some(message.as_str())),
                None => (None, None),
            })
        };
        batch
            .text(at.iter().map(|&i| Some(self.ids[i].as_str())))
            .int(r().map(|r| Some(r.started_at.as_millis())))
            .int(r().map(|r| Some(r.duration.as_millis() as i64)))
            .int(r().map(|r| r.status_code.map(i64::from)))
            .long_text(r().map(|r| r.response_body.as_deref()))
            .text(errors().map(|(kind, _)| kind))
            .long_text(errors().map(|(_, message)| message))
            .text(r().map(|r| Some(r.next.verdict().as_str())))
            .int(r().map(|r| r.next.next_attempt_at().map(Timestamp::as_millis)))
            .text(r().map(|r| r.next.dead_reason().map(DeadReason::as_str)))
            .long_text(at.iter().map(|&i| Some(self.detail(i))))
    }
}

/// An attempt's own columns, as a batch binds them ([`Prepared::columns`]).
const ATTEMPT_FIELDS: [(&str, Kind); 11] = [
    ("attempt_id", Kind::Text),
    ("started_at", Kind::Int),
    ("duration_ms", Kind::Int),
    ("status_code", Kind::Int),
    ("response_body", Kind::LongText),
    ("error_kind", Kind::Text),
    ("error_message", Kind::LongText),
    ("verdict", Kind::Text),
    ("next_attempt_at", Kind::Int),
    ("dead_reason", Kind::Text),
    ("detail", Kind::LongText),
];

/// A batch's columns: `leading`, then [`ATTEMPT_FIELDS`].
fn with_attempt_fields(leading: &[(&'static str, Kind)]) -> Vec<(&'static str, Kind)> {
    leading.iter().chain(&ATTEMPT_FIELDS).copied().collect()
}

static INSERT_ATTEMPTS: Sql = Sql::new(|engine| {
    format!(
        "INSERT INTO attempts (id, delivery_id, app_id, endpoint_id, attempt_number, started_at, \
           duration_ms, status_code, response_body, error_kind, error_message, verdict, \
           next_attempt_at, dead_reason, detail) \
         SELECT attempt_id, delivery_id, app_id, endpoint_id, attempt_number, started_at, \
           duration_ms, status_code, response_body, error_kind, error_message, verdict, \
           next_attempt_at, dead_reason, detail FROM {}",
        engine.rows(
            1,
            &with_attempt_fields(&[
                ("delivery_id", Kind::Text),
                ("app_id", Kind::Text),
                ("endpoint_id", Kind::Text),
                ("attempt_number", Kind::Int),
            ])
        )
    )
});

/// The `attempts` rows of records `at`, in one statement.
async fn insert_attempts(tx: &mut Tx, prepared: &Prepared<'_>, at: &[usize]) -> Result<()> {
    if at.is_empty() {
        return Ok(());
    }
    let r = || at.iter().map(|&i| &prepared.records[i]);
    let batch = Batch::default()
        .text(r().map(|r| Some(r.delivery_id.as_str())))
        .text(r().map(|r| Some(r.app_id.as_str())))
        .text(r().map(|r| Some(r.endpoint_id.as_str())))
        .int(r().map(|r| Some(i64::from(r.attempt_number))));
    let batch = prepared.columns(batch, at);
    let engine = tx.engine();
    engine
        .query(INSERT_ATTEMPTS.text(engine))
        .bind_batch(batch)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Deliveries a transform skipped count with what the endpoint's payload
/// filter dropped (its stats' `filtered`), by the minute: one upsert per
/// endpoint with skips in the batch, in endpoint order, the order publishes
/// lock these rows in (so neither waits on the other in a cycle). Only the
/// deliveries that `moved` on count (one whose lease was lost is its new
/// owner's to count). A batch without skips writes nothing.
async fn count_skips(
    tx: &mut Tx,
    records: &[AttemptRecord],
    moved: &HashSet<DeliveryId>,
    now: Timestamp,
) -> Result<()> {
    let minute = now.as_millis().div_euclid(60_000);
    let mut skips: std::collections::BTreeMap<&str, i64> = std::collections::BTreeMap::new();
    for r in records {
        if r.transformed.as_ref().is_some_and(|t| t.skipped) && moved.contains(&r.delivery_id) {
            *skips.entry(r.endpoint_id.as_str()).or_default() += 1;
        }
    }
    for (endpoint, skipped) in skips {
        tx.engine()
            .query(
                "INSERT INTO filter_drops (endpoint_id, minute, dropped) VALUES ($1, $2, $3) \
                 ON CONFLICT (endpoint_id, minute) DO UPDATE SET dropped = filter_drops.dropped + excluded.dropped",
            )
            .bind(endpoint)
            .bind(minute)
            .bind(skipped)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// The delivery rows of `fanout` targets written at their first attempt's
/// outcome, the attempt in the row (`first_*`), `$1` being now: only while
/// the `fanout` row is leased under the record's token (a holder whose lease
/// was taken over writes nothing: the new holder's outcome stands), and never
/// over a row written first. Returns the ids written. (`IS NOT DISTINCT FROM`,
/// the token being never NULL here, is `=` that no plan reads through the
/// partial index `fanout_leased`: on tables analyzed while small, a generic
/// plan walked all of it.)
pub(crate) static INSERT_RECORDED: Sql = Sql::new(|engine| {
    format!(
        "INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, attempts, \
           round_started_at, last_attempt_at, dead_reason, dead_at, created_at, updated_at, \
           first_attempt_id, first_started_at, first_duration_ms, first_status, \
           first_response_body, first_error_kind, first_error_message, first_verdict, \
           first_next_attempt_at, first_dead_reason, first_detail) \
         SELECT v.id, v.app_id, v.event_id, v.endpoint_id, v.state, v.due_at, v.attempts, \
           v.created_at, v.started_at, v.dead_reason, v.dead_at, v.created_at, $1, \
           v.attempt_id, v.started_at, v.duration_ms, v.status_code, v.response_body, \
           v.error_kind, v.error_message, v.verdict, v.next_attempt_at, v.dead_reason, v.detail \
         FROM {} JOIN {} ON f.event_id = v.event_id \
           AND f.lease_token IS NOT DISTINCT FROM v.token \
         WHERE TRUE ON CONFLICT (id) DO NOTHING RETURNING id, first_attempt_id",
        engine.rows(
            2,
            &with_attempt_fields(&target_columns(&[
                ("attempts", Kind::Int),
                ("dead_at", Kind::Int),
                ("created_at", Kind::Int),
            ]))
        ),
        crate::fanout::batch_events(engine, 4)
    )
});

/// Writes the rows of records `at` (targets of `fanout` leases, created at
/// `created[i]`) with their attempts in them ([`INSERT_RECORDED`]). Returns
/// the deliveries written and the attempts in them (by attempt id: two
/// records of one delivery, of an old lease and its successor's, may be in
/// one batch, and only the successor's writes the row).
async fn insert_recorded(
    tx: &mut Tx,
    prepared: &Prepared<'_>,
    at: &[usize],
    created: &[Timestamp],
    now: Timestamp,
) -> Result<(HashSet<DeliveryId>, HashSet<String>)> {
    if at.is_empty() {
        return Ok(Default::default());
    }
    let r = || at.iter().map(|&i| &prepared.records[i]);
    let batch = Batch::default()
        .text(r().map(|r| Some(r.delivery_id.as_str())))
        .text(r().map(|r| Some(r.app_id.as_str())))
        .text(r().map(|r| Some(r.event_id.as_str())))
        .text(r().map(|r| Some(r.endpoint_id.as_str())))
        .text(r().map(|r| Some(r.lease_token.as_str())))
        .text(r().map(|r| Some(r.next.state().as_str())))
        .int(r().map(|r| Some(r.next.due_at(now).as_millis())))
        .int(r().map(|r| Some(i64::from(r.attempt_number))))
        .int(r().map(|r| r.next.dead_reason().map(|_| now.as_millis())))
        .int(created.iter().map(|at| Some(at.as_millis())));
    let batch = prepared.columns(batch, at);
    let engine = tx.engine();
    let rows = engine
        .query(INSERT_RECORDED.text(engine))
        .bind(now.as_millis())
        .bind_batch(batch)
        .fetch_all(&mut *tx)
        .await?;
    let mut written = (HashSet::new(), HashSet::new());
    for row in &rows {
        written.0.insert(parse_column(row, "id")?);
        written.1.insert(row.try_get("first_attempt_id")?);
    }
    Ok(written)
}

/// `$1`: now. Only rows whose lease the record still holds are moved on.
pub(crate) static UPDATE_DELIVERIES: Sql = Sql::new(|engine| {
    format!(
        "UPDATE deliveries SET state = v.state, due_at = v.due_at, attempts = v.attempts, \
         last_attempt_at = v.last_attempt_at, dead_reason = v.dead_reason, dead_at = v.dead_at, \
         lease_token = NULL, updated_at = $1 \
         FROM {} WHERE deliveries.id = v.id AND deliveries.lease_token = v.token AND {} \
         RETURNING deliveries.id, deliveries.ordering_key",
        engine.rows(
            2,
            &[
                ("id", Kind::Text),
                ("token", Kind::Text),
                ("state", Kind::Text),
                ("due_at", Kind::Int),
                ("attempts", Kind::Int),
                ("last_attempt_at", Kind::Int),
                ("dead_reason", Kind::Text),
                ("dead_at", Kind::Int),
            ]
        ),
        engine.probes("deliveries.id", 2)
    )
});

/// One `UPDATE` moving the batch's deliveries on — only those whose lease the
/// record still holds. Returns those updated, and the ordering keys of the keyed ones.
async fn update_deliveries(
    tx: &mut Tx,
    records: &[&AttemptRecord],
    now: Timestamp,
) -> Result<(HashSet<DeliveryId>, HashMap<DeliveryId, String>)> {
    if records.is_empty() {
        return Ok(Default::default());
    }
    let batch = Batch::default()
        .text(records.iter().map(|r| Some(r.delivery_id.as_str())))
        .text(records.iter().map(|r| Some(r.lease_token.as_str())))
        .text(records.iter().map(|r| Some(r.next.state().as_str())))
        .int(records.iter().map(|r| Some(r.next.due_at(now).as_millis())))
        .int(records.iter().map(|r| Some(i64::from(r.attempt_number))))
        .int(records.iter().map(|r| Some(r.started_at.as_millis())))
        .text(
            records
                .iter()
                .map(|r| r.next.dead_reason().map(DeadReason::as_str)),
        )
        .int(
            records
                .iter()
                .map(|r| r.next.dead_reason().map(|_| now.as_millis())),
        );
    let engine = tx.engine();
    let rows = engine
        .query(UPDATE_DELIVERIES.text(engine))
        .bind(now.as_millis())
        .bind_batch(batch)
        .fetch_all(&mut *tx)
        .await?;
    let mut moved = HashSet::with_capacity(rows.len());
    let mut keyed = HashMap::new();
    for row in rows {
        let id: DeliveryId = parse_column(&row, "id")?;
        if let Some(key) = row.try_get::<Option<String>, _>("ordering_key")? {
            keyed.insert(id.clone(), key);
        }
        moved.insert(id);
    }
    Ok((moved, keyed))
}

/// What writing a batch's attempts moved on ([`Turn::write_attempts`]).
#[derive(Debug, Default)]
pub struct Written {
    /// The deliveries whose lease the record still held: only these moved on.
    pub moved: HashSet<DeliveryId>,
    /// The ordering keys of the keyed ones among them.
    pub keyed: HashMap<DeliveryId, String>,
}

impl Turn {
    /// Writes the attempt rows and moves each delivery to `Next::state` — only
    /// those whose lease the record still holds: a delivery reclaimed after its
    /// lease expired keeps its new owner's state, though the attempt is
    /// recorded all the same, since it happened.
    pub async fn write_attempts(
        &mut self,
        records: &[AttemptRecord],
        now: Timestamp,
    ) -> Result<Written> {
        if records.is_empty() {
            return Ok(Written::default());
        }
        self.delete_finished().await?;
        // A target of a `fanout` lease this process holds has no row yet: its
        // row is written now, in its next state and with this attempt in it
        // (unless a holder of an earlier lease of the row wrote it first). The
        // others are rows moved on, their attempts in `attempts`.
        let prepared = Prepared::new(records);
        let leases = &self.store.fanout;
        let mut held: Vec<(&EventId, &str, Held, usize)> = Vec::new();
        let mut targets: Vec<usize> = Vec::new();
        let mut created: Vec<Timestamp> = Vec::new();
        let mut rows: Vec<&AttemptRecord> = Vec::with_capacity(records.len());
        for (i, r) in records.iter().enumerate() {
            let lease = match held
                .iter_mut()
                .find(|(event, token, _, _)| *event == &r.event_id && *token == r.lease_token)
            {
                Some(entry) => Some(entry),
                None => match leases.get(&r.event_id, &r.lease_token) {
                    Some(lease) => {
                        held.push((&r.event_id, r.lease_token.as_str(), lease, 0));
                        held.last_mut()
                    }
                    None => None,
                },
            };
            let Some((_, _, lease, done)) = lease else {
                rows.push(r);
                continue;
            };
            *done += 1;
            targets.push(i);
            created.push(lease.created_at);
        }
        let (mut moved, keyed) = update_deliveries(&mut self.tx, &rows, now).await?;
        let (written, inline) =
            insert_recorded(&mut self.tx, &prepared, &targets, &created, now).await?;
        // Every attempt is recorded, whether or not its delivery moved on: it
        // happened. Those not in a row they wrote go to `attempts`.
        let apart: Vec<usize> = (0..records.len())
            .filter(|&i| !inline.contains(&prepared.ids[i]))
            .collect();
        insert_attempts(&mut self.tx, &prepared, &apart).await?;
        moved.extend(written);
        count_skips(&mut self.tx, records, &moved, now).await?;
        // A lease whose last targets these are: its row goes in this turn.
        let done: Vec<(&EventId, &str)> = held
            .iter()
            .filter(|(_, _, lease, done)| lease.remaining == *done)
            .map(|(event, token, _, _)| (*event, *token))
            .collect();
        delete_fanout(&mut self.tx, &done).await?;
        for (event, token, lease, done) in held {
            let deleted = lease.remaining == done;
            self.settles
                .push((event.clone(), token.to_owned(), done, deleted));
        }
        Ok(Written { moved, keyed })
    }

    /// What the completion plan reads of these endpoints, without a lock.
    pub async fn completion_endpoints(
        &mut self,
        endpoints: &[&EndpointId],
    ) -> Result<HashMap<EndpointId, completion::EndpointRow>> {
        read_endpoints(&mut self.tx, endpoints, false).await
    }

    /// On PostgreSQL locks these endpoints (in id order) and reads them again,
    /// for a plan that changes them to be made again from rows no other
    /// transaction changes before the commit; `None` on SQLite, whose one
    /// writer already holds them all.
    pub async fn lock_completion_endpoints(
        &mut self,
        endpoints: &[&EndpointId],
    ) -> Result<Option<HashMap<EndpointId, completion::EndpointRow>>> {
        if self.store.engine != Engine::Postgres {
            return Ok(None);
        }
        Ok(Some(read_endpoints(&mut self.tx, endpoints, true).await?))
    }

    /// Executes a completion plan (`hookline_core::completion::plan`): breakers
    /// and last errors saved, queues moved, endpoints disabled, notices and
    /// dead counts written, ordered partitions' successors released. Work it
    /// makes due now wakes dispatchers after the commit, never before.
    pub async fn apply_completion(
        &mut self,
        plan: &completion::CompletionPlan,
        now: Timestamp,
    ) -> Result<()> {
        let engine = self.store.engine;
        let tx = &mut self.tx;
        for (endpoint, change) in &plan.endpoints {
            if let Some(breaker) = &change.breaker {
                save_breaker(tx, endpoint, breaker).await?;
            }
            if let Some(error) = &change.last_error {
                engine
                    .query(
                        "UPDATE endpoints SET last_error = $2, last_failure_at = $3 WHERE id = $1",
                    )
                    .bind(endpoint.as_str())
                    .bind(error)
                    .bind(now.as_millis())
                    .execute(&mut *tx)
                    .await?;
            }
            if let Some(queue) = &change.queue_move {
                let due = queue.from.as_millis()..=queue.to.as_millis();
                move_queue(tx, endpoint, due, queue.at, now).await?;
            }
            if let Some(reason) = change.disable {
                tracing::warn!(endpoint = %endpoint, reason = reason.as_str(), "disabling endpoint");
                disable_endpoint(tx, endpoint, reason.as_str(), now).await?;
            }
            insert_notices(tx, &change.notices, now).await?;
            insert_marks(tx, endpoint, &change.marks, now).await?;
        }
        count_dead(tx, &plan.dead).await?;
        let mut due_now = plan.due_now;
        for release in &plan.releases {
            if engine == Engine::Postgres {
                // Serialises with publishes of this key (they upsert the same row), so a
                // delivery published as `blocked` meanwhile is seen and released here.
                engine
                    .query(LOCK_ORDERING_KEY.text(engine))
                    .bind(release.app.as_str())
                    .bind(&release.key)
                    .fetch_optional(&mut *tx)
                    .await?;
            }
            due_now |=
                release_partition_successor(tx, &release.endpoint, &release.key, release.due, now)
                    .await?
                    && release.due == now;
        }
        self.due_now |= due_now;
        Ok(())
    }
}

/// Reads what the completion plan reads of the batch's endpoints; with `lock`,
/// locks them (on PostgreSQL, in id order).
async fn read_endpoints(
    tx: &mut Tx,
    endpoints: &[&EndpointId],
    lock: bool,
) -> Result<HashMap<EndpointId, completion::EndpointRow>> {
    let engine = tx.engine();
    let ids = Batch::default().text(endpoints.iter().map(|e| Some(e.as_str())));
    let sql = if lock {
        &LOCK_ENDPOINTS
    } else {
        &READ_ENDPOINTS
    };
    let found = engine
        .query(sql.text(engine))
        .bind_batch(ids)
        .fetch_all(&mut *tx)
        .await?;
    let mut rows = HashMap::new();
    for row in found {
        rows.insert(
            parse_column(&row, "id")?,
            completion::EndpointRow {
                enabled: row.try_get::<bool, _>("enabled")?,
                breaker: breaker_from_row(&row)?,
                on_dead: on_dead_from_row(&row)?,
            },
        );
    }
    Ok(rows)
}

/// The batch's endpoints with their breakers; [`LOCK_ENDPOINTS`] locks them in
/// id order on PostgreSQL.
fn endpoints_sql(engine: Engine, lock: bool) -> String {
    format!(
        "SELECT id, enabled, ordering_on_dead, {BREAKER_COLUMNS} FROM endpoints \
         WHERE {} ORDER BY id{}",
        engine.in_batch("id", 1),
        if lock { engine.lock(" FOR UPDATE") } else { "" }
    )
}
pub(crate) static READ_ENDPOINTS: Sql = Sql::new(|engine| endpoints_sql(engine, false));
pub(crate) static LOCK_ENDPOINTS: Sql = Sql::new(|engine| endpoints_sql(engine, true));

/// Makes the next `blocked` delivery of a partition pending, due as
/// `hookline_core::ordering::successor_due` says of `due` (from
/// `due_for_new_work`: now, the breaker's probe time, or `PARKED` for a disabled
/// or paused endpoint); whether the partition had one waiting.
pub(crate) async fn release_partition_successor(
    tx: &mut Tx,
    endpoint: &EndpointId,
    key: &str,
    due: Timestamp,
    now: Timestamp,
) -> Result<bool> {
    let engine = tx.engine();
    let released = engine
        .query(RELEASE_SUCCESSOR.text(engine))
        .bind(endpoint.as_str())
        .bind(key)
        .bind(ordering::successor_due(due, now).map(Timestamp::as_millis))
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?
        .rows_affected();
    Ok(released == 1)
}

/// One ordering key's row, locked (PostgreSQL only).
pub(crate) static LOCK_ORDERING_KEY: Sql = Sql::new(|_| {
    "SELECT last_sequence FROM ordering_keys WHERE app_id = $1 AND ordering_key = $2 FOR UPDATE"
        .into()
});

/// `$1` endpoint, `$2` key: the partition's next `blocked` delivery made pending, due
/// at `$3` (since its creation when NULL), at `$4`.
///
/// `state <> 'succeeded'` is implied by `state = 'blocked'`, but spelled out: it is the
/// partition index's predicate, and without it SQLite walked all the endpoint's deliveries.
pub(crate) static RELEASE_SUCCESSOR: Sql = Sql::new(|_| {
    "UPDATE deliveries SET state = 'pending', \
       due_at = COALESCE($3, created_at), updated_at = $4 WHERE id = ( \
       SELECT id FROM deliveries WHERE endpoint_id = $1 AND ordering_key = $2 AND state = 'blocked' \
         AND state <> 'succeeded' \
       ORDER BY sequence LIMIT 1)"
        .into()
});
