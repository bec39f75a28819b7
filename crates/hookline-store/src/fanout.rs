//! Lazy fan-out (docs/engine-v4.md, step 2): one narrow `fanout` row per
//! published event whose deliveries have nothing to say yet, instead of one
//! delivery row per endpoint — its part 0; targets a claim leased but could
//! not send move to further parts of the event ([`split_off`]).
//!
//! A delivery's row is written when it first has state of its own — its
//! attempt's outcome (`complete`), or a reason to wait that a claim plan gives
//! (`claim`: a full endpoint, a breaker, a parked endpoint) — and its id is
//! known before ([`DeliveryId::of_target`]: its event's, with its place among
//! the row's targets), so reads show a target without a row as a pending (or,
//! leased, in-flight) delivery under that id ([`pending`]).
//!
//! A claim leases whole rows. The dispatcher that holds a row's lease sends its
//! targets, and the turn that records the last of their outcomes deletes the
//! row; how many of a lease's targets are still out is this process's own
//! count ([`Held`]), settled only when the turn that records them commits. A
//! lease that ends (its holder died or stalled) or is given back puts the row
//! back, `reclaimed`: whoever leases it next skips the targets that have rows.

use std::collections::HashMap;
use std::sync::Mutex;

use hookline_core::ids::{AppId, DeliveryId, EndpointId, EventId};
use hookline_core::model::DeliveryState;
use hookline_core::switches::Deleted;
use hookline_core::time::Timestamp;

use crate::db::{Batch, Kind, On, Row, Sql, Tx};
use crate::records::Delivery;
use crate::{parse_column, Engine, Result};

/// `targets` as stored: `,ep_a,,ep_c,` — the endpoint at each place, empty
/// where the delivery has a row of its own.
pub(crate) fn encode_targets<'a>(
    places: impl IntoIterator<Item = Option<&'a EndpointId>>,
) -> String {
    let mut text = String::from(",");
    for place in places {
        if let Some(endpoint) = place {
            text.push_str(endpoint.as_str());
        }
        text.push(',');
    }
    text
}

/// Every place of stored `targets`, empty or not, in order.
fn slots(text: &str) -> std::str::Split<'_, char> {
    text.strip_prefix(',')
        .and_then(|t| t.strip_suffix(','))
        .unwrap_or("")
        .split(',')
}

/// The places of stored `targets` that name an endpoint, with their place.
pub(crate) fn decode_targets(text: &str) -> impl Iterator<Item = (usize, &str)> {
    slots(text)
        .enumerate()
        .filter(|(_, endpoint)| !endpoint.is_empty())
}

/// A `fanout` row as reads see it.
#[derive(Debug, Clone)]
pub(crate) struct FanoutRow {
    pub event_id: EventId,
    pub app_id: AppId,
    pub targets: String,
    pub due_at: Timestamp,
    pub leased: bool,
    pub created_at: Timestamp,
}

pub(crate) const FANOUT_COLUMNS: &str =
    "event_id, app_id, targets, due_at, lease_token, created_at";

pub(crate) fn fanout_from_row(row: &Row) -> Result<FanoutRow> {
    Ok(FanoutRow {
        event_id: parse_column(row, "event_id")?,
        app_id: parse_column(row, "app_id")?,
        targets: row.try_get("targets")?,
        due_at: Timestamp::from_millis(row.try_get("due_at")?),
        leased: row.try_get::<Option<String>, _>("lease_token")?.is_some(),
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

impl FanoutRow {
    /// The deliveries its targets stand for (some may have rows since: the
    /// caller leaves those out).
    pub(crate) fn pending(&self) -> Vec<Delivery> {
        decode_targets(&self.targets)
            .filter_map(|(place, endpoint)| {
                Some(pending(
                    &self.event_id,
                    &self.app_id,
                    place,
                    endpoint.parse().ok()?,
                    self,
                ))
            })
            .collect()
    }
}

/// The delivery a target without a row stands for.
fn pending(
    event: &EventId,
    app: &AppId,
    place: usize,
    endpoint: EndpointId,
    row: &FanoutRow,
) -> Delivery {
    Delivery {
        id: DeliveryId::of_target(event, place),
        app_id: app.clone(),
        event_id: event.clone(),
        endpoint_id: endpoint,
        state: if row.leased {
            DeliveryState::InFlight
        } else {
            DeliveryState::Pending
        },
        due_at: row.due_at,
        ordering_key: None,
        sequence: None,
        attempts: 0,
        round_started_at: row.created_at,
        last_attempt_at: None,
        dead_reason: None,
        dead_at: None,
        created_at: row.created_at,
    }
}

/// Of `ids`, those that have a delivery row.
pub(crate) async fn existing(
    engine: Engine,
    on: impl Into<On<'_>>,
    ids: &[DeliveryId],
) -> Result<std::collections::HashSet<DeliveryId>> {
    if ids.is_empty() {
        return Ok(Default::default());
    }
    let batch = Batch::default().text(ids.iter().map(|id| Some(id.as_str())));
    engine
        .query(EXISTING.text(engine))
        .bind_batch(batch)
        .fetch_all(on)
        .await?
        .iter()
        .map(|row| parse_column(row, "id"))
        .collect()
}

/// Which of a batch of delivery ids have rows.
pub(crate) static EXISTING: Sql = Sql::new(|engine| {
    format!(
        "SELECT d.id FROM deliveries d WHERE {}",
        engine.in_batch("d.id", 1)
    )
});

/// A lease of a `fanout` row this process holds: how many of its targets are
/// still being sent, and what writing their rows needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Held {
    pub remaining: usize,
    pub created_at: Timestamp,
    /// When the lease ends.
    pub until: Timestamp,
}

/// The `fanout` leases this process holds, by (event, lease token).
#[derive(Debug, Default)]
pub(crate) struct FanoutLeases {
    held: Mutex<HashMap<(EventId, String), Held>>,
    /// Rows whose last targets were recorded by a turn that did not know it
    /// was the last (another turn's records were not committed yet when it
    /// ran): the next turn deletes them.
    finished: Mutex<Vec<(EventId, String)>>,
}

impl FanoutLeases {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(EventId, String), Held>> {
        self.held
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn get(&self, event: &EventId, token: &str) -> Option<Held> {
        self.lock().get(&(event.clone(), token.to_owned())).copied()
    }

    /// Holds a lease with `held.remaining` targets out (after its commit).
    pub(crate) fn hold(&self, event: &EventId, token: &str, held: Held) {
        let mut leases = self.lock();
        // Leases whose holder lost track of them (a send abandoned) end with
        // their lease; forget those long over, so the map stays small.
        if leases.len() >= 4096 {
            let horizon = held.until - std::time::Duration::from_secs(600);
            leases.retain(|_, lease| lease.until >= horizon);
        }
        leases.insert((event.clone(), token.to_owned()), held);
    }

    /// `done` more targets of a lease recorded, by a turn that has committed
    /// and (`deleted`) deleted the row if they were the last it knew of.
    pub(crate) fn settle(&self, event: &EventId, token: &str, done: usize, deleted: bool) {
        let key = (event.clone(), token.to_owned());
        let mut leases = self.lock();
        let Some(held) = leases.get_mut(&key) else {
            return;
        };
        held.remaining = held.remaining.saturating_sub(done);
        if held.remaining == 0 {
            leases.remove(&key);
            if !deleted {
                drop(leases);
                self.finished_rows().push(key);
            }
        }
    }

    fn finished_rows(&self) -> std::sync::MutexGuard<'_, Vec<(EventId, String)>> {
        self.finished
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The rows to delete that [`FanoutLeases::settle`] found finished.
    pub(crate) fn finished(&self) -> Vec<(EventId, String)> {
        self.finished_rows().clone()
    }

    /// These of them deleted, by a turn that committed.
    pub(crate) fn finished_done(&self, deleted: &[(EventId, String)]) {
        if !deleted.is_empty() {
            self.finished_rows().retain(|row| !deleted.contains(row));
        }
    }

    pub(crate) fn forget(&self, event: &EventId, token: &str) {
        self.lock().remove(&(event.clone(), token.to_owned()));
    }
}

/// One row of a publish's `fanout` batch.
pub(crate) struct NewFanout<'a> {
    pub event_id: &'a EventId,
    pub app_id: &'a AppId,
    pub targets: String,
    pub n: usize,
    pub due_at: Timestamp,
    pub leased: bool,
    pub created_at: Timestamp,
}

/// The head row of the lane is leased by a claim with room for all its
/// targets, or for this many if it has more, or (it has waited
/// [`PATIENCE_MS`]) by any claim: what is beyond the claim's room moves to a
/// part of its own ([`split_off`]), or from a part to rows. Rows are leased whole, and claims are as small as the
/// dispatcher's free permits: without this, a row with more targets than
/// any claim has room for would hold the lane back for good.
pub(crate) const WHOLE: u32 = 64;

/// See [`WHOLE`]: how long fresh work may wait at the lane's head before the
/// lane counts as a backlog (`hookline_core::claim::backlog`).
pub(crate) const PATIENCE_MS: i64 = hookline_core::claim::PATIENCE_MS;

/// The fan-out lane: leases due rows, oldest (or newest) first, whole rows
/// until they hold `$4` targets, up to a row's more, but never more than `$5`
/// (the head row, if it alone has more, as [`WHOLE`] says). Parameters:
/// `$1` now, `$2` lease end, `$3` token, `$4` targets wanted, `$5` the most.
///
/// On PostgreSQL the rows read are locked (`SKIP LOCKED`: rows another node's
/// claim is leasing are passed over), and a locked row costs a WAL record
/// whether it is leased or not. So the locked read takes only the rows up to
/// the last due time the lease would reach if none were locked, counted
/// first without locks: the rows the lease takes (and the one where `$5` or
/// the head's rule stops it), and those due at the same millisecond as its
/// last (the lease orders ties by event id, the index by where the rows
/// lie). Reading `$4` rows locked — as many rows as targets wanted — locked
/// 6.6 rows per row leased at ten targets a row (~27 bytes of WAL per
/// delivery needlessly). Rows another node is leasing are counted, then
/// passed over: the claim locks only that many rows, later ones standing in
/// for those skipped, so it may hold fewer than `$4` targets (never a row
/// twice).
///
/// `of_app` reads one app's rows (`$6`) through its own index
/// (`fanout_due_by_app`): the app pass ([`FanoutRead::OfApp`]).
fn take_sql(engine: Engine, newest: bool, of_app: bool) -> String {
    let order = if newest { " DESC" } else { "" };
    let of_app = if of_app { " AND app_id = $6" } else { "" };
    let head = |limit: &str, lock: &str| {
        format!(
            "SELECT event_id, part, n, due_at FROM fanout WHERE lease_token IS NULL AND due_at <= $1{of_app} \
             ORDER BY due_at{order} LIMIT {limit}{lock}"
        )
    };
    // By key within a millisecond: two parts of one event may share a due
    // time, and rows that tie in the window's order are summed together (the
    // head's rule, `upto = n`, would then hold for neither).
    let window = format!("SUM(n) OVER (ORDER BY due_at{order}, event_id{order}, part{order})");
    let (last, reached) = match newest {
        false => ("MAX", "<="),
        true => ("MIN", ">="),
    };
    let limit = match engine {
        Engine::Postgres => format!(
            "(SELECT count(*) FROM ( \
               SELECT due_at, {last}(CASE WHEN upto - n < $4 THEN due_at END) OVER () AS last_due \
               FROM (SELECT due_at, n, {window} AS upto FROM ({}) unlocked) summed) bounded \
             WHERE due_at {reached} last_due)",
            head("$4", "")
        ),
        Engine::Sqlite => "$4".into(),
    };
    let due = format!(
        "SELECT event_id, part FROM ( \
           SELECT event_id, part, n, due_at, {window} AS upto FROM ({}) head) counted \
         WHERE (upto - n < $4 AND upto <= $5) \
            OR (upto = n AND ($5 >= CASE WHEN n < {WHOLE} THEN n ELSE {WHOLE} END \
                              OR due_at <= $1 - {PATIENCE_MS}))",
        head(&limit, engine.lock(" FOR UPDATE SKIP LOCKED")),
    );
    // Each row leased has a token of its own (part 0, nearly every row: the
    // claim's; a part split off: the claim's and its number).
    let token = "CASE WHEN part = 0 THEN $3 ELSE $3 || '.' || part END";
    match engine {
        // Exactly the rows locked (`due`, materialized once): found by event,
        // `= ANY(ARRAY(…))` on the key, one probe each whatever the statistics
        // say of the table's size (a join was planned as a walk of the whole
        // key on a table analyzed while tiny), then by part. An event's other
        // parts are neither leased nor waited for: another claim or node may
        // hold them (waiting could close a cycle with its own wait here).
        Engine::Postgres => format!(
            "WITH due AS MATERIALIZED ({due}), c AS ( \
               UPDATE fanout f SET lease_token = {token}, due_at = $2 \
               WHERE f.event_id = ANY(ARRAY(SELECT event_id FROM due)) AND {} \
               RETURNING f.event_id, f.part, f.lease_token, f.app_id, f.targets, f.reclaimed, \
                         f.created_at) \
             SELECT c.event_id, c.part, c.lease_token, c.app_id, c.targets, c.reclaimed, c.created_at, \
                    (SELECT e.body FROM events e WHERE e.id = c.event_id AND e.app_id = c.app_id) AS body, \
                    (SELECT e.seqs FROM events e WHERE e.id = c.event_id AND e.app_id = c.app_id) AS seqs \
             FROM c",
            among_parts("due")
        ),
        // One writer: the rows chosen are the rows leased.
        Engine::Sqlite => format!(
            "UPDATE fanout SET lease_token = {token}, due_at = $2 \
             WHERE (event_id, part) IN ({due}) \
             RETURNING event_id, part, lease_token, app_id, targets, reclaimed, created_at, \
                       (SELECT body FROM events WHERE events.id = fanout.event_id) AS body, \
                       (SELECT seqs FROM events WHERE events.id = fanout.event_id) AS seqs"
        ),
    }
}

/// On PostgreSQL, that `f`'s (event, part) is one of the CTE `rows`'s: a
/// filter after the probe by event (no index serves the pair, and none
/// should: the probe by event is the plan).
fn among_parts(rows: &str) -> String {
    format!("f.event_id || '/' || f.part = ANY(ARRAY(SELECT event_id || '/' || part FROM {rows}))")
}

/// Which due `fanout` rows a read of a claim takes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FanoutRead<'a> {
    /// The lane's, oldest first.
    Oldest,
    /// The lane's, newest first.
    Newest,
    /// One app's, oldest first (the app pass).
    OfApp(&'a AppId),
}

impl FanoutRead<'_> {
    /// Its statement: `$1`–`$5` as [`take_sql`] says, and for
    /// [`FanoutRead::OfApp`] the app as `$6`.
    pub(crate) fn sql(self) -> &'static Sql {
        match self {
            FanoutRead::Oldest => &TAKE_FANOUT,
            FanoutRead::Newest => &TAKE_NEWEST_FANOUT,
            FanoutRead::OfApp(_) => &TAKE_APP_FANOUT,
        }
    }
}

pub(crate) static TAKE_FANOUT: Sql = Sql::new(|engine| take_sql(engine, false, false));
pub(crate) static TAKE_NEWEST_FANOUT: Sql = Sql::new(|engine| take_sql(engine, true, false));
pub(crate) static TAKE_APP_FANOUT: Sql = Sql::new(|engine| take_sql(engine, false, true));

/// Up to `$2` apps after `$1` (by id; `''` from the first) with `fanout` rows
/// no claim holds, due or not: a walk of `fanout_due_by_app` that probes it
/// once per app (a loose index scan), whatever each app holds.
pub(crate) static APPS_WITH_FANOUT: Sql = Sql::new(|_| {
    let next = |after: &str| {
        format!(
            "(SELECT f.app_id FROM fanout f WHERE f.lease_token IS NULL AND f.app_id > {after} \
              ORDER BY f.app_id LIMIT 1)"
        )
    };
    format!(
        "WITH RECURSIVE apps(app_id, k) AS ( \
           SELECT {}, 1 \
           UNION ALL \
           SELECT {}, a.k + 1 FROM apps a WHERE a.app_id IS NOT NULL AND a.k < $2) \
         SELECT app_id FROM apps WHERE app_id IS NOT NULL",
        next("$1"),
        next("a.app_id")
    )
});

/// Up to `$3` leases of rows that ended in (`$1`, `$2`] given back, reclaimed,
/// the earliest first; their lease ends returned.
pub(crate) static RECOVER_FANOUT: Sql = Sql::new(|engine| {
    let ended = format!(
        "SELECT event_id, part FROM fanout \
         WHERE lease_token IS NOT NULL AND due_at > $1 AND due_at <= $2 \
         ORDER BY due_at LIMIT $3{}",
        engine.lock(" FOR UPDATE SKIP LOCKED")
    );
    match engine {
        // Exactly the rows locked, as `take_sql` leases them.
        Engine::Postgres => format!(
            "WITH ended AS MATERIALIZED ({ended}) \
             UPDATE fanout f SET lease_token = NULL, reclaimed = 1 WHERE f.event_id = ANY(ARRAY(SELECT event_id FROM ended)) AND {} \
             RETURNING f.due_at",
            among_parts("ended")
        ),
        Engine::Sqlite => format!(
            "UPDATE fanout SET lease_token = NULL, reclaimed = 1 \
             WHERE (event_id, part) IN ({ended}) RETURNING due_at"
        ),
    }
});

/// A lease given back unfinished (a draining dispatcher): the row due at `$3`, reclaimed.
pub(crate) static RELEASE_FANOUT: Sql = Sql::new(|_| {
    "UPDATE fanout SET lease_token = NULL, reclaimed = 1, due_at = $3 \
     WHERE event_id = $1 AND lease_token = $2"
        .into()
});

/// Rows whose every target has its row, by (event, lease token).
pub(crate) static DELETE_FANOUT: Sql = Sql::new(|engine| {
    let batch = engine.rows(1, &[("event_id", Kind::Text), ("token", Kind::Text)]);
    match engine {
        // The rows of the batch's events by key, then matched against the
        // batch (hashed: see `batch_events`). `COALESCE`: a plan could read
        // `= token` through the partial index `fanout_leased` (all of it).
        Engine::Postgres => format!(
            "DELETE FROM fanout f WHERE {} \
             AND (f.event_id, COALESCE(f.lease_token, '')) IN (SELECT event_id, token FROM {batch})",
            engine.probes("f.event_id", 1)
        ),
        // By `rowid`: the row under the token, not the event's other parts.
        Engine::Sqlite => format!(
            "DELETE FROM fanout WHERE rowid IN ( \
               SELECT f.rowid FROM {batch} JOIN fanout f \
               ON f.event_id = v.event_id AND f.lease_token = v.token)"
        ),
    }
});

pub(crate) async fn delete_fanout(tx: &mut Tx, done: &[(&EventId, &str)]) -> Result<()> {
    if done.is_empty() {
        return Ok(());
    }
    let batch = Batch::default()
        .text(done.iter().map(|(event, _)| Some(event.as_str())))
        .text(done.iter().map(|(_, token)| Some(*token)));
    let engine = tx.engine();
    engine
        .query(DELETE_FANOUT.text(engine))
        .bind_batch(batch)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// `targets` with only the places `keep` names left, the others emptied, and
/// how many places still name an endpoint.
pub(crate) fn keep_places(text: &str, keep: impl Fn(usize) -> bool) -> (String, usize) {
    let mut kept = String::from(",");
    let mut n = 0;
    for (place, endpoint) in slots(text).enumerate() {
        if !endpoint.is_empty() && keep(place) {
            kept.push_str(endpoint);
            n += 1;
        }
        kept.push(',');
    }
    (kept, n)
}

/// A leased publish row (part 0) some of whose targets its claim does not
/// send (their endpoints have no room): those move to a part of their own,
/// not leased and due now, which the lanes lease again like any row
/// ([`split_off`]). Due now, as the rows such targets were written as before
/// parts: due at their publication, a part waits behind an older backlog
/// of another app's work that the lanes' newest reads pass over (measured:
/// a second app's p95 beside a million pending went from 20 ms to 9 s).
#[derive(Debug)]
pub(crate) struct Unsent<'a> {
    pub event_id: &'a EventId,
    pub app_id: &'a AppId,
    /// The row's lease (its own: see `TAKE_FANOUT`).
    pub token: &'a str,
    /// The row's targets as leased.
    pub targets: &'a str,
    pub created_at: Timestamp,
    /// The places not sent.
    pub places: Vec<usize>,
    /// The row was leased before and given back: some of its targets may
    /// have rows, written by a holder whose lease ended (its records may
    /// commit after this claim read them), and the part's next holder
    /// looks for them as this one did.
    pub reclaimed: bool,
}

impl Unsent<'_> {
    /// The part the unsent places move to: keyed by its first place + 1.
    /// Parts are split off part 0 only (a part whose targets find no room
    /// again writes them as rows), so no other part of the event has that
    /// key: a part's key names a place it took from part 0, and that place
    /// is never in part 0 again. `INSERT_PART`'s `ON CONFLICT` stands guard.
    fn part(&self) -> i64 {
        self.places.iter().min().map_or(0, |p| *p as i64 + 1)
    }
}

/// New parts, not leased, due at `$1`; the keys written returned.
pub(crate) static INSERT_PART: Sql = Sql::new(|engine| {
    format!(
        "INSERT INTO fanout (event_id, part, app_id, targets, n, due_at, reclaimed, created_at) \
         SELECT event_id, part, app_id, targets, n, $1, reclaimed, created_at FROM {} \
         WHERE TRUE ON CONFLICT (event_id, part) DO NOTHING RETURNING event_id, part",
        engine.rows(
            2,
            &[
                ("event_id", Kind::Text),
                ("part", Kind::Int),
                ("app_id", Kind::Text),
                ("targets", Kind::Text),
                ("n", Kind::Int),
                ("reclaimed", Kind::Int),
                ("created_at", Kind::Int),
            ]
        )
    )
});

/// Leased rows left with the targets their claim sends, by (event, token).
pub(crate) static SHRINK_FANOUT: Sql = Sql::new(|engine| {
    let batch = engine.rows(
        1,
        &[
            ("event_id", Kind::Text),
            ("token", Kind::Text),
            ("targets", Kind::Text),
            ("n", Kind::Int),
        ],
    );
    match engine {
        Engine::Postgres => format!(
            "UPDATE fanout f SET targets = v.targets, n = v.n FROM {batch} \
             WHERE f.event_id = v.event_id AND f.lease_token IS NOT DISTINCT FROM v.token AND {}",
            engine.probes("f.event_id", 1)
        ),
        Engine::Sqlite => format!(
            "UPDATE fanout SET targets = v.targets, n = v.n FROM {batch} \
             WHERE fanout.event_id = v.event_id AND fanout.lease_token = v.token"
        ),
    }
});

/// Moves each publish row's unsent targets to a part of their own; the row
/// keeps the rest (a row left with none is deleted with its lease). Returns the rows whose part could not be written (see [`Unsent::part`]):
/// the caller writes those targets as rows instead.
pub(crate) async fn split_off<'a>(
    tx: &mut Tx,
    unsent: &'a [Unsent<'a>],
    now: Timestamp,
) -> Result<Vec<&'a Unsent<'a>>> {
    if unsent.is_empty() {
        return Ok(Vec::new());
    }
    let engine = tx.engine();
    let parts: Vec<(String, usize)> = unsent
        .iter()
        .map(|u| keep_places(u.targets, |place| u.places.contains(&place)))
        .collect();
    let batch = Batch::default()
        .text(unsent.iter().map(|u| Some(u.event_id.as_str())))
        .int(unsent.iter().map(|u| Some(u.part())))
        .text(unsent.iter().map(|u| Some(u.app_id.as_str())))
        .text(parts.iter().map(|(targets, _)| Some(targets.as_str())))
        .int(parts.iter().map(|(_, n)| Some(*n as i64)))
        .int(unsent.iter().map(|u| Some(i64::from(u.reclaimed))))
        .int(unsent.iter().map(|u| Some(u.created_at.as_millis())));
    let mut written = std::collections::HashSet::new();
    for row in engine
        .query(INSERT_PART.text(engine))
        .bind(now.as_millis())
        .bind_batch(batch)
        .fetch_all(&mut *tx)
        .await?
    {
        let event: EventId = parse_column(&row, "event_id")?;
        written.insert((event, row.try_get::<i64, _>("part")?));
    }
    let (moved, refused): (Vec<&Unsent>, Vec<&Unsent>) = unsent
        .iter()
        .partition(|u| written.contains(&(u.event_id.clone(), u.part())));
    if !moved.is_empty() {
        let left: Vec<(String, usize)> = moved
            .iter()
            .map(|u| keep_places(u.targets, |place| !u.places.contains(&place)))
            .collect();
        let batch = Batch::default()
            .text(moved.iter().map(|u| Some(u.event_id.as_str())))
            .text(moved.iter().map(|u| Some(u.token)))
            .text(left.iter().map(|(targets, _)| Some(targets.as_str())))
            .int(left.iter().map(|(_, n)| Some(*n as i64)));
        engine
            .query(SHRINK_FANOUT.text(engine))
            .bind_batch(batch)
            .execute(&mut *tx)
            .await?;
    }
    Ok(refused)
}

/// `fanout` as the other side of a join to a batch of targets (`f`): on
/// PostgreSQL the rows of the batch's events (bound at `$n`), read once by
/// key and fenced (`OFFSET 0`) so the join hashes them against the batch.
/// With an event's parts under one key prefix, a generic plan otherwise
/// probes the key once per batch row with the whole batch's array in the
/// condition: a batch of 512 records took ~100 ms.
pub(crate) fn batch_events(engine: Engine, n: usize) -> String {
    match engine {
        Engine::Postgres => format!(
            "(SELECT event_id, part, lease_token FROM fanout \
              WHERE event_id = ANY(${n}::text[]) OFFSET 0) f"
        ),
        Engine::Sqlite => "fanout f".into(),
    }
}

/// Delivery rows written for targets of `fanout` rows before any attempt
/// (one written at its outcome carries the attempt: `complete::INSERT_RECORDED`),
/// `$1` being now: only while the row is leased under the batch's token (a
/// holder whose lease was taken over writes nothing: the new holder's outcome
/// stands), or, with no token, while it exists; never over a row written
/// first. Returns the ids written.
pub(crate) static INSERT_TARGETS: Sql = Sql::new(|engine| {
    format!(
        "INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, attempts, \
           round_started_at, dead_reason, dead_at, created_at, updated_at) \
         SELECT v.id, v.app_id, v.event_id, v.endpoint_id, v.state, v.due_at, 0, \
           v.created_at, v.dead_reason, v.dead_at, v.created_at, $1 FROM {} \
         JOIN {} ON f.event_id = v.event_id AND (v.token IS NULL OR f.lease_token = v.token) \
         WHERE TRUE ON CONFLICT (id) DO NOTHING RETURNING id",
        engine.rows(
            2,
            &target_columns(&[
                ("dead_reason", Kind::Text),
                ("dead_at", Kind::Int),
                ("created_at", Kind::Int),
            ])
        ),
        batch_events(engine, 4),
    )
});

/// The leading columns of a batch of target rows ([`INSERT_TARGETS`],
/// `complete::INSERT_RECORDED`): which delivery, under which lease, in which
/// state and when due; then `rest`. `event_id` is `$4` when the batch starts
/// at `$2`.
pub(crate) fn target_columns(rest: &[(&'static str, Kind)]) -> Vec<(&'static str, Kind)> {
    const LEADING: [(&str, Kind); 7] = [
        ("id", Kind::Text),
        ("app_id", Kind::Text),
        ("event_id", Kind::Text),
        ("endpoint_id", Kind::Text),
        ("token", Kind::Text),
        ("state", Kind::Text),
        ("due_at", Kind::Int),
    ];
    LEADING.iter().chain(rest).copied().collect()
}

/// One delivery row written for a target, never attempted.
pub(crate) struct TargetRow<'a> {
    pub id: &'a DeliveryId,
    pub app_id: &'a AppId,
    pub event_id: &'a EventId,
    pub endpoint_id: &'a EndpointId,
    /// The lease of the `fanout` row the writer holds; `None`: it holds none.
    pub token: Option<&'a str>,
    pub state: DeliveryState,
    pub due_at: Timestamp,
    pub dead_reason: Option<&'a str>,
    pub dead_at: Option<Timestamp>,
    pub created_at: Timestamp,
}

/// What becomes of a target that gets its row before any attempt: its state,
/// when due, and (dead) why.
#[derive(Clone, Copy)]
pub(crate) struct Fate<'a> {
    pub state: DeliveryState,
    pub due_at: Timestamp,
    pub reason: Option<&'a str>,
}

/// Which delivery a target is, and since when.
pub(crate) struct Target<'a> {
    pub id: &'a DeliveryId,
    pub app_id: &'a AppId,
    pub event_id: &'a EventId,
    pub endpoint_id: &'a EndpointId,
    pub created_at: Timestamp,
}

impl<'a> From<&'a Delivery> for Target<'a> {
    fn from(d: &'a Delivery) -> Self {
        Target {
            id: &d.id,
            app_id: &d.app_id,
            event_id: &d.event_id,
            endpoint_id: &d.endpoint_id,
            created_at: d.created_at,
        }
    }
}

impl Fate<'_> {
    /// Pending, due at `due_at`.
    pub(crate) fn waiting(due_at: Timestamp) -> Self {
        Fate {
            state: DeliveryState::Pending,
            due_at,
            reason: None,
        }
    }
}

impl<'a> TargetRow<'a> {
    /// The row of `target`, never attempted, as `fate` says, written under
    /// `token` (see [`INSERT_TARGETS`]) at `now`.
    pub(crate) fn unattempted(
        target: Target<'a>,
        token: Option<&'a str>,
        fate: Fate<'a>,
        now: Timestamp,
    ) -> Self {
        TargetRow {
            id: target.id,
            app_id: target.app_id,
            event_id: target.event_id,
            endpoint_id: target.endpoint_id,
            token,
            state: fate.state,
            due_at: fate.due_at,
            dead_reason: fate.reason,
            dead_at: fate.reason.map(|_| now),
            created_at: target.created_at,
        }
    }
}

pub(crate) async fn insert_targets(
    tx: &mut Tx,
    rows: &[TargetRow<'_>],
    now: Timestamp,
) -> Result<std::collections::HashSet<DeliveryId>> {
    if rows.is_empty() {
        return Ok(Default::default());
    }
    let batch = Batch::default()
        .text(rows.iter().map(|r| Some(r.id.as_str())))
        .text(rows.iter().map(|r| Some(r.app_id.as_str())))
        .text(rows.iter().map(|r| Some(r.event_id.as_str())))
        .text(rows.iter().map(|r| Some(r.endpoint_id.as_str())))
        .text(rows.iter().map(|r| r.token))
        .text(rows.iter().map(|r| Some(r.state.as_str())))
        .int(rows.iter().map(|r| Some(r.due_at.as_millis())))
        .text(rows.iter().map(|r| r.dead_reason))
        .int(rows.iter().map(|r| r.dead_at.map(Timestamp::as_millis)))
        .int(rows.iter().map(|r| Some(r.created_at.as_millis())));
    let engine = tx.engine();
    engine
        .query(INSERT_TARGETS.text(engine))
        .bind(now.as_millis())
        .bind_batch(batch)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(|row| parse_column(row, "id"))
        .collect()
}

/// The due time of the fan-out lane's head, or NULL.
pub(crate) static NEXT_DUE_FANOUT: Sql = Sql::new(|_| {
    "SELECT (SELECT due_at FROM fanout WHERE lease_token IS NULL ORDER BY due_at LIMIT 1)".into()
});

/// The head of the `fanout` lane: its due time and its app (none: empty).
pub(crate) static FANOUT_HEAD: Sql = Sql::new(|_| {
    "SELECT due_at, app_id FROM fanout WHERE lease_token IS NULL ORDER BY due_at LIMIT 1".into()
});

/// The rows (parts) of an event, by its id.
pub(crate) static FANOUT_OF_EVENT: Sql = Sql::new(|_| {
    format!("SELECT {FANOUT_COLUMNS} FROM fanout WHERE event_id = $1 AND app_id = $2")
});

/// The deliveries an event's `fanout` rows stand for (some may have rows
/// since: a caller reads the rows after this, and they win).
pub(crate) async fn targets_of_event(
    store: &crate::Store,
    app: &AppId,
    event: &EventId,
) -> Result<Vec<Delivery>> {
    Ok(rows_of_event(store.engine, &store.reader, app, event)
        .await?
        .iter()
        .flat_map(FanoutRow::pending)
        .collect())
}

/// An event's `fanout` rows (its parts).
pub(crate) async fn rows_of_event(
    engine: Engine,
    on: impl Into<On<'_>>,
    app: &AppId,
    event: &EventId,
) -> Result<Vec<FanoutRow>> {
    engine
        .query(FANOUT_OF_EVENT.text(engine))
        .bind(event.as_str())
        .bind(app.as_str())
        .fetch_all(on)
        .await?
        .iter()
        .map(fanout_from_row)
        .collect()
}

/// A `fanout` row names endpoint `$1` among its targets (endpoint ids are
/// unique across apps). No index serves it: `fanout` holds live work only.
const NAMES_ENDPOINT: &str = "targets LIKE '%,' || $1 || ',%'";

/// The targets to `endpoint` among `rows`.
fn targets_to(rows: &[FanoutRow], endpoint: &EndpointId) -> Vec<Delivery> {
    rows.iter()
        .flat_map(FanoutRow::pending)
        .filter(|d| d.endpoint_id == *endpoint)
        .collect()
}

/// The deliveries to `endpoint` that `fanout` rows stand for, without rows.
pub(crate) async fn targets_of_endpoint(
    store: &crate::Store,
    endpoint: &EndpointId,
) -> Result<Vec<Delivery>> {
    let engine = store.engine;
    let rows = engine
        .query(&format!(
            "SELECT {FANOUT_COLUMNS} FROM fanout WHERE {NAMES_ENDPOINT}"
        ))
        .bind(endpoint.as_str())
        .fetch_all(&store.reader)
        .await?
        .iter()
        .map(fanout_from_row)
        .collect::<Result<Vec<_>>>()?;
    let mut targets = targets_to(&rows, endpoint);
    let ids: Vec<DeliveryId> = targets.iter().map(|d| d.id.clone()).collect();
    let written = existing(engine, &store.reader, &ids).await?;
    targets.retain(|d| !written.contains(&d.id));
    Ok(targets)
}

/// What becomes of an endpoint's targets in `fanout` rows ([`endpoint_targets`]).
pub(crate) enum Move {
    /// The endpoint is deleted: every target, leased or not, dead
    /// ([`Deleted::REASON`]).
    Kill,
    /// Its queue moves (a breaker opening, a pause, a disable): the targets
    /// of rows not leased and due in the range, pending and due at `to`.
    Queue {
        due: std::ops::RangeInclusive<i64>,
        to: Timestamp,
    },
}

/// Gives an endpoint's targets in `fanout` rows rows of their own, as `how`
/// says, and empties their places; a row left with no target and no lease is
/// deleted. In the caller's transaction.
pub(crate) async fn endpoint_targets(
    tx: &mut Tx,
    endpoint: &EndpointId,
    how: Move,
    now: Timestamp,
) -> Result<()> {
    let engine = tx.engine();
    let (lease, due) = match &how {
        Move::Kill => ("", (i64::MIN, i64::MAX)),
        Move::Queue { due, .. } => (" AND lease_token IS NULL", (*due.start(), *due.end())),
    };
    let rows = engine
        .query(&format!(
            "SELECT {FANOUT_COLUMNS} FROM fanout WHERE {NAMES_ENDPOINT} \
             AND due_at >= $2 AND due_at <= $3{lease}{}",
            // A row a claim is leasing meanwhile is left to it: its plan
            // defers, parks or kills the target (it reads the endpoint after).
            // Waiting for it could close a cycle with the claim's wait for the
            // endpoint's row, which a completion holds.
            engine.lock(" FOR UPDATE SKIP LOCKED")
        ))
        .bind(endpoint.as_str())
        .bind(due.0)
        .bind(due.1)
        .fetch_all(&mut *tx)
        .await?;
    if rows.is_empty() {
        return Ok(());
    }
    let rows = rows
        .iter()
        .map(fanout_from_row)
        .collect::<Result<Vec<_>>>()?;
    let targets = targets_to(&rows, endpoint);
    let fate = match how {
        Move::Kill => Fate {
            state: DeliveryState::Dead,
            due_at: now,
            reason: Some(Deleted::REASON.as_str()),
        },
        Move::Queue { to, .. } => Fate::waiting(to),
    };
    let written: Vec<TargetRow<'_>> = targets
        .iter()
        .map(|target| TargetRow::unattempted(target.into(), None, fate, now))
        .collect();
    insert_targets(tx, &written, now).await?;
    let events = || Batch::default().text(rows.iter().map(|r| Some(r.event_id.as_str())));
    engine
        .query(&format!(
            // The one part of each event that names the endpoint.
            "UPDATE fanout SET targets = replace(targets, ',' || $1 || ',', ',,'), n = n - 1 \
             WHERE {} AND {NAMES_ENDPOINT}",
            engine.in_batch("event_id", 2)
        ))
        .bind(endpoint.as_str())
        .bind_batch(events())
        .execute(&mut *tx)
        .await?;
    engine
        .query(DELETE_EMPTIED.text(engine))
        .bind_batch(events())
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// The unleased rows of a batch of events left with no target. `COALESCE`:
/// `lease_token IS NULL` is `fanout_due`'s condition, and a generic plan
/// could walk that whole index instead of probing the key once per event.
pub(crate) static DELETE_EMPTIED: Sql = Sql::new(|engine| {
    format!(
        "DELETE FROM fanout WHERE {} AND n = 0 AND COALESCE(lease_token, '') = ''",
        engine.in_batch("event_id", 1)
    )
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_keep_each_endpoints_place() {
        let (a, c): (EndpointId, EndpointId) = (
            "ep_01J0000000000000000000000A".parse().unwrap(),
            "ep_01J0000000000000000000000C".parse().unwrap(),
        );
        let text = encode_targets([Some(&a), None, Some(&c)]);
        assert_eq!(text, format!(",{a},,{c},"));
        let decoded: Vec<(usize, &str)> = decode_targets(&text).collect();
        assert_eq!(decoded, vec![(0, a.as_str()), (2, c.as_str())]);
        assert_eq!(decode_targets(&format!(",{a},")).count(), 1);
        assert_eq!(decode_targets(",,").count(), 0);
        // A part takes places out of a row; both keep every place.
        assert_eq!(
            keep_places(&text, |place| place == 2),
            (format!(",,,{c},"), 1)
        );
        assert_eq!(
            keep_places(&text, |place| place != 2),
            (format!(",{a},,,"), 1)
        );
        assert_eq!(keep_places(&text, |_| false), (",,,,".to_owned(), 0));
    }
}
