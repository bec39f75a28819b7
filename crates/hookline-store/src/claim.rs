//! The rows of a claim: a dispatcher turn's transaction ([`Turn`]) and the
//! statements it runs — leasing due rows by lane or by endpoint, reading their
//! endpoints, locking the endpoints a plan must hold, and executing the plan
//! (`hookline_core::claim::plan`) that says what becomes of each leased row.
//!
//! Nothing here decides: lane shares, rooms, admission, deferral and max age
//! are `hookline_core::claim`'s, and the dispatcher (`hookline_dispatch::turn`)
//! runs the turn. Claimed rows become `in_flight` until the lease ends under a
//! fresh token; on PostgreSQL `FOR UPDATE SKIP LOCKED` keeps nodes apart, and
//! the endpoints whose probe or send slots a plan hands out are locked in id
//! order (the one lock order of every transaction) before it is made.

use std::collections::HashMap;
use std::sync::Arc;

use hookline_core::claim::{
    Candidate, ClaimPlan, EndpointGate, Lane, LaneRead, Rate, Rooms, Send, SKIP_WINDOW,
};
use hookline_core::ids::{AppId, DeliveryId, EndpointId, EventId};
use hookline_core::switches::Switches;
use hookline_core::time::Timestamp;

use crate::complete::release_partition_successor;
use crate::db::{Batch, Kind, Row, Sql, Tx};
use crate::endpoints::{
    auth_from_row, batch_from_row, breaker_from_row, headers_from_row, max_in_flight_from_row,
    on_dead_from_row, retry_from_row, save_breaker, signing_from_row, transform_from_row,
    BREAKER_COLUMNS, SENDING_COLUMNS,
};
#[cfg(doc)]
use crate::fanout::FanoutLeases;
use crate::fanout::{
    decode_targets, delete_fanout, existing, insert_targets, split_off, FanoutRead, Fate, Held,
    Target, TargetRow, Unsent, APPS_WITH_FANOUT, FANOUT_HEAD, RECOVER_FANOUT,
};
use crate::records::{ClaimedDelivery, Destination};
use crate::secrets::Secrets;
use crate::Events;
use crate::{parse_column, Engine, Result, Store, StoreError};
use hookline_core::model::DeliveryState;

/// A lane's partial-index predicate, spelled exactly as in the migration so both
/// engines use the index. A lane holds pending deliveries only: leased ones are
/// in `deliveries_leased`, read by [`Turn::recover_expired`].
pub(crate) fn lane_predicate(lane: Lane) -> &'static str {
    match lane {
        Lane::Fresh => "state = 'pending' AND attempts = 0",
        Lane::Retry => "state = 'pending' AND attempts > 0",
    }
}

/// The leased deliveries' partial-index predicate (`deliveries_leased`, keyed by
/// the lease's end).
pub(crate) const LEASED: &str = "state = 'in_flight'";

/// What a claim returns per delivery: the delivery and its event's body. The
/// endpoint side is read once per endpoint of the batch ([`SENDING_COLUMNS`]),
/// not once per row: decoding rows is most of a claim's cost.
///
/// The body is a lookup per row, on both of the columns of `events_by_app`: a
/// join with `events` could be planned (generic plans, tables analyzed while
/// small) as a walk of a whole index of it.
const CLAIMED_COLUMNS: &str =
    "c.id, c.app_id, c.event_id, c.endpoint_id, c.lease_token, c.attempts, \
     c.round_started_at, c.created_at, c.ordering_key, c.sequence, \
     (SELECT e.body FROM events e WHERE e.id = c.event_id AND e.app_id = c.app_id) AS body, \
     (SELECT e.seqs FROM events e WHERE e.id = c.event_id AND e.app_id = c.app_id) AS seqs";

/// An endpoint as claims and publishes read it ([`SENDING_COLUMNS`]), the
/// rate state not yet read (see [`Turn::lock_endpoints`]).
pub(crate) fn endpoint_from_row(secrets: &Secrets, row: &Row) -> Result<ClaimEndpoint> {
    let id: EndpointId = parse_column(row, "id")?;
    Ok(ClaimEndpoint {
        destination: Arc::new(Destination {
            url: row.try_get("url")?,
            signing: signing_from_row(secrets, row, &id)?,
            headers: headers_from_row(secrets, row, &id)?,
            auth: auth_from_row(secrets, row, &id)?,
            transform: transform_from_row(row)?,
            description: row.try_get("description")?,
            seq_in_body: row.try_get::<bool, _>("seq_in_body")?,
            batch: batch_from_row(row)?,
        }),
        gate: EndpointGate {
            // A polling endpoint is sent nothing: its deliveries are parked
            // from the start, and a claim parks again what was made due.
            enabled: Switches {
                enabled: row.try_get("enabled")?,
                paused: row.try_get("paused")?,
            }
            .sending()
                && !hookline_core::destination::is_poll(&row.try_get::<String, _>("url")?),
            breaker: breaker_from_row(row)?,
            rate: row
                .try_get::<Option<i64>, _>("rate_limit_per_sec")?
                .map(|per_second| Rate {
                    per_second: per_second as u32,
                    tat_us: None,
                }),
            max_in_flight: max_in_flight_from_row(row)?,
            on_dead: on_dead_from_row(row)?,
            retry: retry_from_row(row)?,
        },
    })
}

/// A dispatcher turn's transaction: the dispatcher records finished attempts,
/// leases due rows and executes its claim plan through it, then commits. The
/// store wakes dispatchers after the commit if the turn made work due now.
pub struct Turn {
    pub(crate) store: Store,
    pub(crate) tx: Tx,
    /// The lease token of every delivery row this turn leases.
    token: String,
    /// The lease token of the `fanout` rows it leases: another than the
    /// rows', so an outcome tells which it was leased as (an event can have
    /// a row of its own leased beside its `fanout` row in one turn). A part
    /// split off a row is leased under this token and its number (each row
    /// leased is a lease of its own: see `TAKE_FANOUT`).
    fanout_token: String,
    /// The finished `fanout` rows ([`FanoutLeases::finished`]) this turn
    /// deletes: no longer queued once it commits.
    finishing: Vec<(EventId, String)>,
    finishing_read: bool,
    /// The turn made work due now: dispatchers are woken after its commit.
    pub(crate) due_now: bool,
    /// The end of the leases this turn takes.
    lease_until: Timestamp,
    /// The `fanout` rows this turn leased, until its plan is applied.
    fanout_rows: Vec<FanoutLease>,
    /// The due time and the app of the `fanout` lane's head (`None`: empty)
    /// when this turn first read it ([`Turn::fresh_head`]).
    fresh_head: Option<Option<(Timestamp, AppId)>>,
    /// `fanout` leases this turn took, by (event, token), held once it commits.
    pub(crate) holds: Vec<(EventId, String, Held)>,
    /// Targets of held `fanout` leases this turn recorded, settled once it
    /// commits: (event, token, how many, whether the turn deleted the row).
    pub(crate) settles: Vec<(EventId, String, usize, bool)>,
}

/// A `fanout` row a turn leased.
#[derive(Debug)]
struct FanoutLease {
    event_id: EventId,
    app_id: AppId,
    /// 0: the publish's row; else a part split off it (`fanout::split_off`).
    part: i64,
    /// Its lease's token (the row's own).
    token: String,
    /// Its targets as leased.
    targets: String,
    /// Leased before and given back (see `fanout::Unsent::reclaimed`).
    reclaimed: bool,
    created_at: Timestamp,
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Turn").field("token", &self.token).finish()
    }
}

/// A leased row: the delivery joined with its event's body, without its endpoint.
#[derive(Debug, Clone)]
pub struct Leased {
    pub id: DeliveryId,
    pub app_id: AppId,
    pub event_id: EventId,
    pub endpoint_id: EndpointId,
    pub lease_token: String,
    pub attempts: u32,
    pub round_started_at: Timestamp,
    /// Its round was started by a replay or a resend.
    pub replayed: bool,
    pub ordering_key: Option<String>,
    pub sequence: Option<u64>,
    /// Its number among its endpoint's deliveries (none if made before they were numbered).
    pub endpoint_sequence: Option<u64>,
    pub body: Arc<[u8]>,
    /// One target of a `fanout` row this turn leased: it has no row yet.
    pub fanout: bool,
}

impl Leased {
    /// What the claim plan reads of it.
    pub fn candidate(&self) -> Candidate<'_> {
        Candidate {
            id: &self.id,
            endpoint: &self.endpoint_id,
            round_started_at: self.round_started_at,
            keyed: self.ordering_key.is_some(),
        }
    }

    /// The delivery to send, with its endpoint's side.
    pub fn into_claimed(self, endpoint: &ClaimEndpoint, send: &Send) -> ClaimedDelivery {
        ClaimedDelivery {
            id: self.id,
            app_id: self.app_id,
            event_id: self.event_id,
            endpoint_id: self.endpoint_id,
            lease_token: self.lease_token,
            attempts: self.attempts,
            round_started_at: self.round_started_at,
            replayed: self.replayed,
            ordering_key: self.ordering_key,
            sequence: self.sequence,
            endpoint_sequence: self.endpoint_sequence,
            send_at: send.send_at,
            probe: send.probe,
            max_in_flight: endpoint.gate.max_in_flight,
            destination: endpoint.destination.clone(),
            retry: endpoint.gate.retry,
            body: self.body,
        }
    }
}

/// The leased rows, each counted in `rooms`.
fn counted(rows: &[Row], rooms: &mut Rooms<'_>) -> Result<Vec<Leased>> {
    let leased = rows
        .iter()
        .map(leased_from_row)
        .collect::<Result<Vec<_>>>()?;
    for row in &leased {
        rooms.took(&row.endpoint_id);
    }
    Ok(leased)
}

fn leased_from_row(row: &Row) -> Result<Leased> {
    let body: Vec<u8> = row.try_get("body")?;
    let round_started_at: i64 = row.try_get("round_started_at")?;
    let id: DeliveryId = parse_column(row, "id")?;
    let seqs: Option<String> = row.try_get("seqs")?;
    Ok(Leased {
        endpoint_sequence: crate::sequences::of_place(seqs.as_deref(), id.target().1),
        id,
        app_id: parse_column(row, "app_id")?,
        event_id: parse_column(row, "event_id")?,
        endpoint_id: parse_column(row, "endpoint_id")?,
        lease_token: row.try_get("lease_token")?,
        attempts: row.try_get::<i64, _>("attempts")? as u32,
        round_started_at: Timestamp::from_millis(round_started_at),
        // A replay or resend starts a round later than the delivery's creation.
        replayed: round_started_at > row.try_get::<i64, _>("created_at")?,
        ordering_key: row.try_get("ordering_key")?,
        sequence: row.try_get::<Option<i64>, _>("sequence")?.map(|s| s as u64),
        body: Arc::from(body),
        fanout: false,
    })
}

/// A claimed row's (or a publish's) endpoint: where and how to send, and what
/// admission and the claim plan read.
#[derive(Clone)]
pub struct ClaimEndpoint {
    pub destination: Arc<Destination>,
    /// As read without a lock; [`Turn::lock_endpoints`] reads the breaker and
    /// rate state again under one.
    pub gate: EndpointGate,
}

impl std::fmt::Debug for ClaimEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimEndpoint")
            .field("gate", &self.gate)
            .finish()
    }
}

impl Events<'_> {
    /// Begins a dispatcher turn. A turn that records no attempt (`durable` false)
    /// commits on PostgreSQL with `synchronous_commit = off`: a lease lost in a
    /// database crash costs at most a duplicate send (the delivery is claimed
    /// again), never an event; completions are durable and wait for the flush.
    pub async fn begin_turn(&self, durable: bool) -> Result<Turn> {
        let mut tx = self.writer.begin().await?;
        if self.engine == Engine::Postgres && !durable {
            self.engine
                .query("SET LOCAL synchronous_commit = off")
                .execute(&mut tx)
                .await?;
        }
        let token = ulid::Ulid::new().to_string();
        let fanout_token = format!("{token}f");
        Ok(Turn {
            store: Store::clone(self),
            tx,
            token,
            fanout_token,
            finishing: Vec::new(),
            finishing_read: false,
            due_now: false,
            lease_until: Timestamp::from_millis(0),
            fanout_rows: Vec::new(),
            fresh_head: None,
            holds: Vec::new(),
            settles: Vec::new(),
        })
    }
}

impl Turn {
    /// Gives back, pending, up to `most` of the deliveries whose lease ended after
    /// `since` (`None`: ever) and by `now`, the earliest ended first: the
    /// dispatcher that leased them died or stalled. They keep their due time (the
    /// lease's end), so the lanes claim them next, in this turn or another
    /// dispatcher's. Returns the lease ends given back. Reading only the leases
    /// that ended since the last turn keeps this off the versions of every
    /// delivery finished before (see the `deliveries_leased` migration).
    pub async fn recover_expired(
        &mut self,
        since: Option<Timestamp>,
        now: Timestamp,
        most: u32,
    ) -> Result<Vec<Timestamp>> {
        let engine = self.store.engine;
        let rows = engine
            .query(RECOVER_EXPIRED.text(engine))
            .bind(since.map_or(i64::MIN, Timestamp::as_millis))
            .bind(now.as_millis())
            .bind(i64::from(most))
            .fetch_all(&mut self.tx)
            .await?;
        let fanout = engine
            .query(RECOVER_FANOUT.text(engine))
            .bind(since.map_or(i64::MIN, Timestamp::as_millis))
            .bind(now.as_millis())
            .bind(i64::from(most))
            .fetch_all(&mut self.tx)
            .await?;
        let mut ended = rows
            .iter()
            .chain(&fanout)
            .map(|row| Ok(Timestamp::from_millis(row.try_get("due_at")?)))
            .collect::<Result<Vec<_>>>()?;
        // Of both, the earliest `most` (the caller goes on after the last).
        ended.sort_unstable();
        ended.truncate(most as usize);
        self.due_now |= !ended.is_empty();
        self.delete_finished().await?;
        Ok(ended)
    }

    /// Deletes the `fanout` rows whose last targets other turns recorded
    /// (see [`FanoutLeases::finished`]).
    pub(crate) async fn delete_finished(&mut self) -> Result<()> {
        // Once a turn (its records, then its claim, each ask).
        if self.finishing_read {
            return Ok(());
        }
        self.finishing_read = true;
        self.finishing = self.store.fanout.finished();
        let done: Vec<(&EventId, &str)> = self
            .finishing
            .iter()
            .map(|(event, token)| (event, token.as_str()))
            .collect();
        delete_fanout(&mut self.tx, &done).await
    }

    /// The due time of the oldest fresh work no claim holds — the head of the
    /// `fanout` lane — or `None` if it is empty: read once a turn (after the
    /// leases given back), and what the turn's reads of the lane cut at.
    pub async fn fresh_head(&mut self) -> Result<Option<Timestamp>> {
        Ok(self.head().await?.map(|(due, _)| due))
    }

    /// The app whose work is the `fanout` lane's head (`None`: empty), read
    /// with [`Turn::fresh_head`]: the tenant the lane's oldest-first reads serve.
    pub async fn fresh_head_app(&mut self) -> Result<Option<AppId>> {
        Ok(self.head().await?.map(|(_, app)| app))
    }

    /// The lane's head (its due time and app), read once a turn.
    async fn head(&mut self) -> Result<Option<(Timestamp, AppId)>> {
        if let Some(head) = &self.fresh_head {
            return Ok(head.clone());
        }
        let engine = self.store.engine;
        let row = engine
            .query(FANOUT_HEAD.text(engine))
            .fetch_optional(&mut self.tx)
            .await?;
        let head = match row {
            Some(row) => Some((
                Timestamp::from_millis(row.try_get("due_at")?),
                parse_column(&row, "app_id")?,
            )),
            None => None,
        };
        self.fresh_head = Some(head.clone());
        Ok(head)
    }

    /// Leases whole due `fanout` rows until they hold `ask` targets (the
    /// first row whatever its size), each target a [`Leased`] without a row.
    /// A reclaimed row's targets that have rows are left out, and a row left
    /// with none is deleted.
    async fn lease_fanout(
        &mut self,
        read: FanoutRead<'_>,
        ask: u32,
        most: u32,
        now: Timestamp,
    ) -> Result<(Vec<Leased>, usize)> {
        let engine = self.store.engine;
        let query = engine
            .query(read.sql().text(engine))
            .bind(now.as_millis())
            .bind(self.lease_until.as_millis())
            .bind(self.fanout_token.as_str())
            .bind(i64::from(ask))
            .bind(i64::from(most));
        let query = match read {
            FanoutRead::OfApp(app) => query.bind(app.as_str()),
            FanoutRead::Oldest | FanoutRead::Newest => query,
        };
        let rows = query.fetch_all(&mut self.tx).await?;
        let mut leased = Vec::new();
        let mut reclaimed: Vec<(EventId, String)> = Vec::new();
        for row in &rows {
            let event_id: EventId = parse_column(row, "event_id")?;
            let app_id: AppId = parse_column(row, "app_id")?;
            let token: String = row.try_get("lease_token")?;
            let created_at = Timestamp::from_millis(row.try_get("created_at")?);
            let body: Arc<[u8]> = Arc::from(row.try_get::<Vec<u8>, _>("body")?);
            let seqs: Option<String> = row.try_get("seqs")?;
            let targets: String = row.try_get("targets")?;
            let was_reclaimed = row.try_get::<i64, _>("reclaimed")? != 0;
            if was_reclaimed {
                reclaimed.push((event_id.clone(), token.clone()));
            }
            for (place, endpoint) in decode_targets(&targets) {
                leased.push(Leased {
                    id: DeliveryId::of_target(&event_id, place),
                    app_id: app_id.clone(),
                    event_id: event_id.clone(),
                    endpoint_id: endpoint
                        .parse()
                        .map_err(|e| StoreError::Corrupt(format!("fanout targets: {e}")))?,
                    lease_token: token.clone(),
                    attempts: 0,
                    round_started_at: created_at,
                    replayed: false,
                    ordering_key: None,
                    sequence: None,
                    endpoint_sequence: crate::sequences::of_place(seqs.as_deref(), place),
                    body: body.clone(),
                    fanout: true,
                });
            }
            self.fanout_rows.push(FanoutLease {
                event_id,
                app_id,
                part: row.try_get("part")?,
                token,
                targets,
                reclaimed: was_reclaimed,
                created_at,
            });
        }
        if !reclaimed.is_empty() {
            let of = |l: &Leased| {
                reclaimed
                    .iter()
                    .any(|(event, token)| *event == l.event_id && *token == l.lease_token)
            };
            let ids: Vec<DeliveryId> = leased
                .iter()
                .filter(|l| of(l))
                .map(|l| l.id.clone())
                .collect();
            let written = existing(engine, &mut self.tx, &ids).await?;
            leased.retain(|l| !written.contains(&l.id));
            let empty: Vec<&(EventId, String)> = reclaimed
                .iter()
                .filter(|(event, token)| {
                    !leased
                        .iter()
                        .any(|l| l.event_id == *event && l.lease_token == *token)
                })
                .collect();
            let done: Vec<(&EventId, &str)> = empty
                .iter()
                .map(|(event, token)| (event, token.as_str()))
                .collect();
            delete_fanout(&mut self.tx, &done).await?;
            self.fanout_rows.retain(|row| {
                !empty
                    .iter()
                    .any(|(event, token)| *event == row.event_id && *token == row.token)
            });
        }
        Ok((leased, rows.len()))
    }

    /// Leases up to `ask` due rows of `read` until `lease_until`, no more per
    /// endpoint than its room in `rooms` (which counts what was leased).
    pub async fn lease_lane(
        &mut self,
        read: LaneRead,
        ask: u32,
        most: u32,
        rooms: &mut Rooms<'_>,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<Leased>> {
        self.lease_until = lease_until;
        // A `fanout` read may go up to a row past its ask: no read after it
        // goes past the claim's whole room.
        let ask = ask.min(most);
        // Fresh work is in two places: rows (deferred, released, ordered,
        // published to wait) and `fanout` rows, each in due order. The oldest
        // first: rows due before the `fanout` lane's head, then `fanout` rows,
        // then the other rows due (a released partition successor, due since
        // its publication, goes ahead of work published after it).
        let newest = match read {
            LaneRead::Oldest(Lane::Fresh) => false,
            LaneRead::Newest(Lane::Fresh) => true,
            LaneRead::Oldest(Lane::Retry) | LaneRead::Newest(Lane::Retry) => {
                return self.lease_rows(read, ask, rooms, now, lease_until).await;
            }
        };
        let cut = match newest {
            true => now,
            false => self.fresh_head().await?.map_or(now, |head| now.min(head)),
        };
        let mut leased = self.lease_rows(read, ask, rooms, cut, lease_until).await?;
        let fanout = if newest {
            FanoutRead::Newest
        } else {
            FanoutRead::Oldest
        };
        self.lease_targets(fanout, ask, most, &mut leased, rooms, now)
            .await?;
        let wanted = ask.saturating_sub(leased.len() as u32);
        if wanted > 0 && cut < now {
            leased.extend(
                self.lease_rows(read, wanted, rooms, now, lease_until)
                    .await?,
            );
        }
        Ok(leased)
    }

    /// Leases up to `ask` delivery rows of `read` due by `now`, no more per
    /// endpoint than its room in `rooms`.
    async fn lease_rows(
        &mut self,
        read: LaneRead,
        ask: u32,
        rooms: &mut Rooms<'_>,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<Leased>> {
        let engine = self.store.engine;
        let limited = rooms.limited();
        let window = rooms.window(ask);
        let sql = match read {
            LaneRead::Oldest(Lane::Fresh) => &TAKE_FRESH,
            LaneRead::Oldest(Lane::Retry) => &TAKE_RETRY,
            LaneRead::Newest(Lane::Fresh) => &TAKE_NEWEST_FRESH,
            LaneRead::Newest(Lane::Retry) => &TAKE_NEWEST_RETRY,
        };
        let batch = Batch::default()
            .text(limited.iter().map(|(endpoint, _)| Some(endpoint.as_str())))
            .int(limited.iter().map(|(_, room)| Some(as_sql_count(*room))));
        let rows = engine
            .query(sql.text(engine))
            .bind(now.as_millis())
            .bind(lease_until.as_millis())
            .bind(self.token.as_str())
            .bind(i64::from(ask))
            .bind(i64::from(window))
            .bind(as_sql_count(rooms.default_room()))
            .bind_batch(batch)
            .fetch_all(&mut self.tx)
            .await?;
        counted(&rows, rooms)
    }

    /// Leases `fanout` rows for `ask` targets in all in `leased`, or up to one
    /// row's more, but never more than `most`, until the turn's lease end.
    async fn lease_targets(
        &mut self,
        from: FanoutRead<'_>,
        ask: u32,
        most: u32,
        leased: &mut Vec<Leased>,
        rooms: &mut Rooms<'_>,
        now: Timestamp,
    ) -> Result<()> {
        // A target beyond its endpoint's room, or beyond the claim's ask, is
        // not leased only to be handed back: it waits as a row of its own, due
        // now, for the lanes to claim within the room (and the fair pass to
        // find past it). Rows of full endpoints only are read past, each read
        // asking for more, up to a window in all, so a full endpoint's backlog
        // does not hide the work behind it.
        let mut full: Vec<Leased> = Vec::new();
        let mut read = 0;
        loop {
            let wanted = ask.saturating_sub(leased.len() as u32);
            if wanted == 0 || read >= FANOUT_WINDOW {
                break;
            }
            let asked = wanted.max((full.len() as u32).min(SKIP_WINDOW));
            let room = most.saturating_sub(leased.len() as u32).max(asked);
            let (targets, rows) = self.lease_fanout(from, asked, room, now).await?;
            if rows == 0 {
                break;
            }
            read += targets.len() as u32;
            let skipped = full.len();
            for target in targets {
                if rooms.of(&target.endpoint_id) == 0 || leased.len() >= most as usize {
                    full.push(target);
                } else {
                    rooms.took(&target.endpoint_id);
                    leased.push(target);
                }
            }
            // Read on only past full endpoints' targets.
            if full.len() == skipped {
                break;
            }
        }
        self.split_off(&full, now).await
    }

    /// Moves the leased targets in `full` (not sent: no room) out of their
    /// publish rows to parts of their own, due now (`fanout::split_off`). A part's targets that find no room again, and
    /// those of a part that cannot be keyed, are written as rows, due now:
    /// the lanes then claim them within their endpoints' rooms, where a part
    /// would be leased and split again by every claim while its endpoint
    /// stays full.
    async fn split_off(&mut self, full: &[Leased], now: Timestamp) -> Result<()> {
        if full.is_empty() {
            return Ok(());
        }
        let of = |l: &Leased, row: &FanoutLease| {
            l.event_id == row.event_id && l.lease_token == row.token
        };
        let unsent: Vec<Unsent<'_>> = self
            .fanout_rows
            .iter()
            .filter(|row| row.part == 0)
            .filter_map(|row| {
                let endpoints: Vec<&EndpointId> = full
                    .iter()
                    .filter(|l| of(l, row))
                    .map(|l| &l.endpoint_id)
                    .collect();
                if endpoints.is_empty() {
                    return None;
                }
                let places = decode_targets(&row.targets)
                    .filter(|(_, endpoint)| endpoints.iter().any(|e| e.as_str() == *endpoint))
                    .map(|(place, _)| place)
                    .collect();
                Some(Unsent {
                    event_id: &row.event_id,
                    app_id: &row.app_id,
                    token: &row.token,
                    targets: &row.targets,
                    created_at: row.created_at,
                    places,
                    reclaimed: row.reclaimed,
                })
            })
            .collect();
        let refused = split_off(&mut self.tx, &unsent, now).await?;
        let moved = |l: &Leased| {
            unsent
                .iter()
                .any(|u| *u.event_id == l.event_id && u.token == l.lease_token)
                && !refused
                    .iter()
                    .any(|u| *u.event_id == l.event_id && u.token == l.lease_token)
        };
        let waiting: Vec<TargetRow<'_>> = full
            .iter()
            .filter(|l| !moved(l))
            .map(|target| target_row(target, Fate::waiting(now), now))
            .collect();
        insert_targets(&mut self.tx, &waiting, now).await?;
        Ok(())
    }

    /// The next `count` apps after `after` (by id; from the first without it)
    /// that have `fanout` rows no claim holds, due or not: where the app pass
    /// goes ([`Turn::lease_app`]).
    pub async fn apps_with_fanout(
        &mut self,
        after: Option<&AppId>,
        count: u32,
    ) -> Result<Vec<AppId>> {
        let engine = self.store.engine;
        let rows = engine
            .query(APPS_WITH_FANOUT.text(engine))
            .bind(after.map_or("", AppId::as_str))
            .bind(i64::from(count))
            .fetch_all(&mut self.tx)
            .await?;
        rows.iter().map(|row| parse_column(row, "app_id")).collect()
    }

    /// Leases one app's oldest due `fanout` rows (its own index) for up to `ask`
    /// targets, never more than `most`, until `lease_until`, as the lane leases
    /// its rows: within `rooms`, and what finds no room moves to a part, or to
    /// rows.
    pub async fn lease_app(
        &mut self,
        app: &AppId,
        ask: u32,
        most: u32,
        rooms: &mut Rooms<'_>,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<Leased>> {
        self.lease_until = lease_until;
        let mut leased = Vec::new();
        self.lease_targets(
            FanoutRead::OfApp(app),
            ask.min(most),
            most,
            &mut leased,
            rooms,
            now,
        )
        .await?;
        Ok(leased)
    }

    /// Leases up to `ask` of one endpoint's pending due rows (its own index).
    pub async fn lease_endpoint(
        &mut self,
        endpoint: &EndpointId,
        ask: u32,
        rooms: &mut Rooms<'_>,
        now: Timestamp,
        lease_until: Timestamp,
    ) -> Result<Vec<Leased>> {
        let engine = self.store.engine;
        let rows = engine
            .query(TAKE_ENDPOINT.text(engine))
            .bind(now.as_millis())
            .bind(lease_until.as_millis())
            .bind(self.token.as_str())
            .bind(i64::from(ask))
            .bind(endpoint.as_str())
            .fetch_all(&mut self.tx)
            .await?;
        counted(&rows, rooms)
    }

    /// Up to `count` enabled endpoints after `after` in id order (from the first
    /// when `None`), except `skip`.
    pub async fn endpoints_after(
        &mut self,
        after: Option<&EndpointId>,
        skip: &[EndpointId],
        count: u32,
    ) -> Result<Vec<EndpointId>> {
        let engine = self.store.engine;
        let skip = Batch::default().text(skip.iter().map(|e| Some(e.as_str())));
        engine
            .query(FAIR_PASS.text(engine))
            .bind(after.map_or("", |e| e.as_str()))
            .bind(i64::from(count))
            .bind_batch(skip)
            .fetch_all(&mut self.tx)
            .await?
            .iter()
            .map(|row| parse_column(row, "id"))
            .collect()
    }

    /// The endpoints of `leased`, read once each (a deleted one is absent).
    pub async fn endpoints(
        &mut self,
        leased: &[Leased],
    ) -> Result<HashMap<EndpointId, ClaimEndpoint>> {
        let mut ids: Vec<&str> = Vec::new();
        for row in leased {
            if !ids.contains(&row.endpoint_id.as_str()) {
                ids.push(row.endpoint_id.as_str());
            }
        }
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let engine = self.store.engine;
        let batch = Batch::default().text(ids.iter().map(|id| Some(*id)));
        let found = engine
            .query(CLAIMED_TARGETS.text(engine))
            .bind_batch(batch)
            .fetch_all(&mut self.tx)
            .await?;
        let mut endpoints = HashMap::with_capacity(ids.len());
        for row in found {
            endpoints.insert(
                parse_column(&row, "id")?,
                endpoint_from_row(&self.store.secrets, &row)?,
            );
        }
        Ok(endpoints)
    }

    /// Locks `endpoints` (on PostgreSQL, in id order; SQLite's one writer already
    /// holds them) and reads their breaker and rate state again under the lock, into
    /// their gates: what the plan then does with a probe or send slots, no other
    /// claim in the cluster can do at the same time.
    pub async fn lock_endpoints(
        &mut self,
        endpoints: &mut HashMap<EndpointId, ClaimEndpoint>,
        ids: &[EndpointId],
    ) -> Result<()> {
        if ids.is_empty() {
            return Ok(());
        }
        let engine = self.store.engine;
        let batch = Batch::default().text(ids.iter().map(|e| Some(e.as_str())));
        let rows = engine
            .query(LOCK_GATES.text(engine))
            .bind_batch(batch)
            .fetch_all(&mut self.tx)
            .await?;
        for row in rows {
            let id: EndpointId = parse_column(&row, "id")?;
            if let Some(endpoint) = endpoints.get_mut(&id) {
                endpoint.gate.breaker = breaker_from_row(&row)?;
                if let Some(rate) = &mut endpoint.gate.rate {
                    rate.tat_us = row.try_get("rate_tat_us")?;
                }
            }
        }
        Ok(())
    }

    /// Executes a claim plan over `leased` (the rows it was made from) at `now`.
    pub async fn apply_claim(
        &mut self,
        plan: &ClaimPlan,
        leased: &[Leased],
        now: Timestamp,
    ) -> Result<()> {
        let engine = self.store.engine;
        for (endpoint, breaker) in &plan.breakers {
            save_breaker(&mut self.tx, endpoint, breaker).await?;
        }
        for (endpoint, tat) in &plan.rates {
            engine
                .query("UPDATE endpoints SET rate_tat_us = $2 WHERE id = $1")
                .bind(endpoint.as_str())
                .bind(*tat)
                .execute(&mut self.tx)
                .await?;
        }
        let mut written: Vec<TargetRow<'_>> = Vec::new();
        for (index, reason) in &plan.dead {
            let row = &leased[*index];
            if row.fanout {
                let dead = Fate {
                    state: DeliveryState::Dead,
                    due_at: now,
                    reason: Some(reason.as_str()),
                };
                written.push(target_row(row, dead, now));
                continue;
            }
            engine
                .query(
                    "UPDATE deliveries SET state = 'dead', dead_reason = $3, dead_at = $4, due_at = $4, \
                     lease_token = NULL, updated_at = $4 WHERE id = $1 AND lease_token = $2",
                )
                .bind(row.id.as_str())
                .bind(&row.lease_token)
                .bind(reason.as_str())
                .bind(now.as_millis())
                .execute(&mut self.tx)
                .await?;
        }
        for release in &plan.releases {
            let row = &leased[release.index];
            let key = row
                .ordering_key
                .as_deref()
                .expect("only keyed rows release");
            // Planned only for endpoints that exist (a deleted one has no partitions).
            release_partition_successor(&mut self.tx, &row.endpoint_id, key, release.due, now)
                .await?;
        }
        for (until, indices) in &plan.defer {
            for &index in indices.iter().filter(|i| leased[**i].fanout) {
                written.push(target_row(&leased[index], Fate::waiting(*until), now));
            }
            let ids = Batch::default().text(
                indices
                    .iter()
                    .filter(|i| !leased[**i].fanout)
                    .map(|i| Some(leased[*i].id.as_str())),
            );
            engine
                .query(DEFER.text(engine))
                .bind(until.as_millis())
                .bind(self.token.as_str())
                .bind_batch(ids)
                .execute(&mut self.tx)
                .await?;
        }
        insert_targets(&mut self.tx, &written, now).await?;
        // Each `fanout` row leased: held while its sent targets are out, or
        // deleted now if the plan sends none of them.
        let fanout_rows = std::mem::take(&mut self.fanout_rows);
        let mut sent: Vec<(&FanoutLease, usize)> = fanout_rows.iter().map(|row| (row, 0)).collect();
        for send in &plan.send {
            let row = &leased[send.index];
            if let Some(entry) = sent
                .iter_mut()
                .find(|(lease, _)| lease.event_id == row.event_id && lease.token == row.lease_token)
            {
                entry.1 += row.fanout as usize;
            }
        }
        let done: Vec<(&EventId, &str)> = sent
            .iter()
            .filter(|(_, n)| *n == 0)
            .map(|(lease, _)| (&lease.event_id, lease.token.as_str()))
            .collect();
        delete_fanout(&mut self.tx, &done).await?;
        for (lease, remaining) in sent.into_iter().filter(|(_, n)| *n > 0) {
            let held = Held {
                remaining,
                created_at: lease.created_at,
                until: self.lease_until,
            };
            self.holds
                .push((lease.event_id.clone(), lease.token.clone(), held));
        }
        Ok(())
    }

    /// Commits the turn, then wakes dispatchers if it made work due now, and
    /// holds and settles the `fanout` leases it took and recorded.
    pub async fn commit(self) -> Result<()> {
        self.tx.commit().await?;
        let leases = &self.store.fanout;
        leases.finished_done(&self.finishing);
        for (event, token, held) in &self.holds {
            leases.hold(event, token, *held);
        }
        for (event, token, done, deleted) in &self.settles {
            leases.settle(event, token, *done, *deleted);
        }
        if self.due_now {
            self.store.notify_due();
        }
        Ok(())
    }
}

/// The row of a leased `fanout` target that is not sent now, as `fate` says.
fn target_row<'a>(row: &'a Leased, fate: Fate<'a>, now: Timestamp) -> TargetRow<'a> {
    let target = Target {
        id: &row.id,
        app_id: &row.app_id,
        event_id: &row.event_id,
        endpoint_id: &row.endpoint_id,
        created_at: row.round_started_at,
    };
    TargetRow::unattempted(target, Some(&row.lease_token), fate, now)
}

/// How many `fanout` targets one lane read looks through at most for ones
/// with room (the rest move to parts, or rows, due now).
const FANOUT_WINDOW: u32 = 16 * SKIP_WINDOW;

/// The claim statements, one per source. Parameters: $1 now, $2 lease end,
/// $3 token, $4 limit, $5 window (or the endpoint), $6 the default room, then
/// the (endpoint, room) batch of endpoints whose room differs.
pub(crate) static TAKE_ENDPOINT: Sql = Sql::new(|engine| take_sql(engine, None, false));
pub(crate) static TAKE_FRESH: Sql = Sql::new(|engine| take_sql(engine, Some(Lane::Fresh), false));
pub(crate) static TAKE_RETRY: Sql = Sql::new(|engine| take_sql(engine, Some(Lane::Retry), false));
pub(crate) static TAKE_NEWEST_FRESH: Sql =
    Sql::new(|engine| take_sql(engine, Some(Lane::Fresh), true));
pub(crate) static TAKE_NEWEST_RETRY: Sql =
    Sql::new(|engine| take_sql(engine, Some(Lane::Retry), true));

/// A claim statement: from one endpoint's pending deliveries (`lane` is `None`),
/// or from a lane's due index, oldest or (`newest`) newest first.
fn take_sql(engine: Engine, lane: Option<Lane>, newest: bool) -> String {
    let due = match lane {
        // The caller asks for no more than the endpoint's room.
        None => format!(
            "SELECT id FROM deliveries WHERE endpoint_id = $5 AND state = 'pending' AND due_at <= $1 \
             ORDER BY due_at LIMIT $4{}",
            engine.lock(" FOR UPDATE SKIP LOCKED")
        ),
        // The lane's head (a derived table with its own LIMIT, so the planner scans
        // exactly that many index entries), ranked per endpoint; an endpoint's rows
        // beyond its room stay where they are.
        Some(lane) => {
            let order = if newest { " DESC" } else { "" };
            format!(
                "SELECT d.id FROM deliveries d WHERE {chosen} \
                 AND d.due_at <= $1 AND d.state = 'pending' \
                 ORDER BY d.due_at{order} LIMIT $4{lock}",
                chosen = engine.among(
                    "d.id",
                    &format!(
                        "SELECT ranked.id FROM ( \
                           SELECT id, endpoint_id, \
                                  ROW_NUMBER() OVER (PARTITION BY endpoint_id ORDER BY due_at{order}, id{order}) AS rn \
                           FROM (SELECT id, endpoint_id, due_at FROM deliveries WHERE {lane} AND due_at <= $1 \
                                 ORDER BY due_at{order} LIMIT $5) window_rows) ranked \
                         LEFT JOIN {rooms} ON v.endpoint_id = ranked.endpoint_id \
                         WHERE ranked.rn <= COALESCE(v.room, $6)",
                        lane = lane_predicate(lane),
                        rooms = engine.rows(7, &[("endpoint_id", Kind::Text), ("room", Kind::Int)]),
                    )
                ),
                lock = engine.lock(" FOR UPDATE SKIP LOCKED"),
            )
        }
    };
    match engine {
        // The chosen rows by primary key, `= ANY(ARRAY(…))`: one probe each,
        // whatever the statistics say (`Engine::among`; a join with the
        // chosen rows was planned as a walk of the whole key). The rows `due`
        // locks (`FOR UPDATE`, its one FROM item being `deliveries d`) are the
        // rows updated: the array is computed once.
        Engine::Postgres => format!(
            "WITH c AS ( \
               UPDATE deliveries d SET state = 'in_flight', due_at = $2, lease_token = $3, updated_at = $1 \
               WHERE d.id = ANY(ARRAY({due})) \
               RETURNING d.id, d.app_id, d.event_id, d.endpoint_id, d.lease_token, d.attempts, \
                         d.round_started_at, d.created_at, d.ordering_key, d.sequence) \
             SELECT {CLAIMED_COLUMNS} FROM c"
        ),
        // SQLite's UPDATE can't feed a join, but its RETURNING may hold a subquery:
        // the body comes back in the same statement.
        Engine::Sqlite => format!(
            "UPDATE deliveries SET state = 'in_flight', due_at = $2, lease_token = $3, updated_at = $1 \
             WHERE id IN ({due}) \
             RETURNING id, app_id, event_id, endpoint_id, lease_token, attempts, round_started_at, \
                       created_at, ordering_key, sequence, \
                       (SELECT body FROM events WHERE events.id = deliveries.event_id) AS body, \
                       (SELECT seqs FROM events WHERE events.id = deliveries.event_id) AS seqs"
        ),
    }
}

/// Up to `$3` leases that ended in (`$1`, `$2`] given back, pending (`$2`: now),
/// the earliest first. On PostgreSQL the rows are locked as they are read, and
/// the read's condition checked again on a row one committed meanwhile (one its
/// dispatcher recorded is no longer in flight); SQLite has one writer.
pub(crate) static RECOVER_EXPIRED: Sql = Sql::new(|engine| {
    format!(
        "UPDATE deliveries SET state = 'pending', lease_token = NULL, updated_at = $2 \
         WHERE {} RETURNING due_at",
        engine.among(
            "id",
            &format!(
                "SELECT id FROM deliveries WHERE {LEASED} AND due_at > $1 AND due_at <= $2 \
                 ORDER BY due_at LIMIT $3{}",
                engine.lock(" FOR UPDATE SKIP LOCKED")
            )
        )
    )
});

/// The endpoints of a claim's rows, read once each.
pub(crate) static CLAIMED_TARGETS: Sql = Sql::new(|engine| {
    format!(
        // In id order: the primary key's, so PostgreSQL walks no other index
        // of `endpoints` to find them (a generic plan walked `endpoints_by_app`).
        "SELECT {SENDING_COLUMNS} FROM endpoints WHERE {} ORDER BY id",
        engine.in_batch("id", 1)
    )
});

/// Enabled endpoints after `$1`, up to `$2`, except the batch (saturated ones).
pub(crate) static FAIR_PASS: Sql = Sql::new(|engine| {
    format!(
        "SELECT id FROM endpoints WHERE enabled AND id > $1 \
         AND id NOT IN (SELECT id FROM {}) ORDER BY id LIMIT $2",
        engine.rows(3, &[("id", Kind::Text)])
    )
});

/// The breaker and GCRA state of the batch's endpoints, locked in id order on PostgreSQL.
pub(crate) static LOCK_GATES: Sql = Sql::new(|engine| {
    format!(
        "SELECT id, rate_tat_us, {BREAKER_COLUMNS} FROM endpoints \
         WHERE {} ORDER BY id{}",
        engine.in_batch("id", 1),
        engine.lock(" FOR UPDATE")
    )
});

/// Claimed rows of lease `$2` put back, pending, due at `$1`.
pub(crate) static DEFER: Sql = Sql::new(|engine| {
    format!(
        "UPDATE deliveries SET state = 'pending', due_at = $1, lease_token = NULL \
         WHERE lease_token = $2 AND {}",
        engine.in_batch("id", 3)
    )
});

/// A count as a bound parameter ("no cap" is `usize::MAX`).
fn as_sql_count(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}
