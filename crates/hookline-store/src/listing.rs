//! The dashboard's listings: filtered, newest first, with keyset cursors.
//!
//! Every listing walks an index backwards from its cursor (`id < $cursor ORDER
//! BY id DESC`, ids being time-sortable; deliveries by their event, then id), so
//! a walk of every page sees each row that existed when it started exactly
//! once, however many rows arrive meanwhile. Cursors are row values
//! (`(a, b) < ($1, $2)`), which both planners turn into an index range. The
//! WHERE clause holds only the filters present, so each combination is its own
//! statement text. No listing has an index of its own: they walk indexes the
//! hot path keeps anyway, so they cost delivery nothing (docs/BENCHMARKS.md,
//! ninth round, measured what an index of their own cost).
//!
//! | listing | walks | other filters (checked along the walk) |
//! |---|---|---|
//! | an app's events | `events_by_app (app_id, id)` | type, ordering key |
//! | an app's deliveries | `events_by_app`, each event's deliveries by `deliveries_by_event` | endpoint, state, last status (the newest attempt, by `attempts_by_delivery`, or the first, in the row) |
//! | the DLQ | `deliveries_dlq (app_id, dead_at, id)`, partial on `dead` | endpoint, reason, event type |
//! | a delivery's attempts | `attempts_by_delivery (delivery_id, id)`, and the delivery's row | — |
//! | an endpoint's attempts | `attempts_by_endpoint (endpoint_id, id)` merged with `deliveries_by_endpoint (endpoint_id, first_attempt_id)` | verdict, status, start time |
//!
//! A delivery row written at its first attempt's outcome holds that attempt
//! (`first_*` columns); the attempt listings read both homes as one table
//! (`deliveries::every_attempt`).
//!
//! So a filter that matches few rows of a large app reads further to fill a
//! page: an endpoint's deliveries among many endpoints, or a rare state.
//! Time ranges on events and deliveries are event id ranges (`e.id >= first id
//! of the millisecond`, the id being made at publish), so they narrow the walk
//! itself; an attempt's id is made when it is recorded, so its range is on
//! `started_at`; the DLQ's is on `dead_at`, its index's key.

use hookline_core::time::Timestamp;

use crate::db::Query;
use crate::records::{StateFilter, StatusFilter, TimeRange, PARKED};
use crate::Engine;

/// One bound value of a filter.
pub(crate) enum Arg {
    Text(String),
    Int(i64),
}

/// The WHERE clause of a listing, with its arguments in placeholder order.
pub(crate) struct Filters {
    clauses: Vec<String>,
    args: Vec<Arg>,
}

impl Filters {
    pub(crate) fn new() -> Self {
        Self {
            clauses: Vec::new(),
            args: Vec::new(),
        }
    }

    /// `sql` with each `$?` standing for the next of `args`, in order.
    pub(crate) fn clause(&mut self, sql: &str, args: impl IntoIterator<Item = Arg>) {
        let mut parts = sql.split("$?");
        let mut clause = parts.next().unwrap_or_default().to_owned();
        let mut args = args.into_iter();
        for part in parts {
            let arg = args.next().expect("one argument per `$?`");
            self.args.push(arg);
            clause.push_str(&format!("${}{part}", self.args.len()));
        }
        assert!(args.next().is_none(), "one `$?` per argument");
        self.clauses.push(clause);
    }

    fn with(&mut self, sql: &str, arg: Arg) {
        self.clause(sql, [arg]);
    }

    pub(crate) fn text(&mut self, clause: &str, value: impl Into<String>) {
        self.with(clause, Arg::Text(value.into()));
    }

    pub(crate) fn int(&mut self, clause: &str, value: i64) {
        self.with(clause, Arg::Int(value));
    }

    pub(crate) fn text_if(&mut self, clause: &str, value: Option<impl Into<String>>) {
        if let Some(value) = value {
            self.text(clause, value);
        }
    }

    /// A clause without a value.
    pub(crate) fn fixed(&mut self, sql: &str) {
        self.clause(sql, []);
    }

    /// An id `column` within the range of creation times (`first_of` makes the
    /// lowest id of a millisecond).
    pub(crate) fn id_range(
        &mut self,
        column: &str,
        range: TimeRange,
        first_of: impl Fn(u64) -> String,
    ) {
        if let Some(since) = range.since {
            self.text(&format!("{column} >= $?"), first_of(millis(since)));
        }
        if let Some(until) = range.until {
            self.text(&format!("{column} < $?"), first_of(millis(until)));
        }
    }

    /// A millisecond `column` within the range.
    pub(crate) fn time_range(&mut self, column: &str, range: TimeRange) {
        if let Some(since) = range.since {
            self.int(&format!("{column} >= $?"), since.as_millis());
        }
        if let Some(until) = range.until {
            self.int(&format!("{column} < $?"), until.as_millis());
        }
    }

    /// An HTTP status `column` (or expression) within the filter's range.
    pub(crate) fn status(&mut self, column: &str, status: Option<StatusFilter>) {
        if let Some(status) = status {
            let (low, high) = status.range();
            self.int(&format!("{column} >= $?"), i64::from(low));
            self.int(&format!("{column} < $?"), i64::from(high));
        }
    }

    /// A delivery state as the dashboard names it (`d` is the deliveries table).
    pub(crate) fn state(&mut self, state: Option<StateFilter>) {
        let Some(state) = state else {
            return;
        };
        match state {
            StateFilter::Pending => {
                self.fixed("d.state = 'pending'");
                self.int("d.due_at <> $?", PARKED.as_millis());
            }
            StateFilter::Parked => {
                self.fixed("d.state = 'pending'");
                self.int("d.due_at = $?", PARKED.as_millis());
            }
            StateFilter::InFlight => self.fixed("d.state = 'in_flight'"),
            StateFilter::Succeeded => self.fixed("d.state = 'succeeded'"),
            StateFilter::Dead => self.fixed("d.state = 'dead'"),
            StateFilter::Blocked => self.fixed("d.state = 'blocked'"),
        }
    }

    /// The clauses joined by `AND` (`TRUE` when there are none).
    pub(crate) fn sql(&self) -> String {
        if self.clauses.is_empty() {
            "TRUE".into()
        } else {
            self.clauses.join(" AND ")
        }
    }

    /// The placeholder after the filters' own (for the limit).
    pub(crate) fn after(&self) -> usize {
        self.args.len() + 1
    }

    pub(crate) fn bind<'q>(&'q self, mut query: Query<'q>) -> Query<'q> {
        for arg in &self.args {
            query = match arg {
                Arg::Text(value) => query.bind(value.as_str()),
                Arg::Int(value) => query.bind(*value),
            };
        }
        query
    }
}

fn millis(at: Timestamp) -> u64 {
    u64::try_from(at.as_millis()).unwrap_or(0)
}

impl Engine {
    /// Names the index a listing must walk, on SQLite (whose planner, without
    /// statistics, may pick another index that also satisfies the ORDER BY);
    /// PostgreSQL plans by its statistics.
    pub(crate) fn indexed_by(self, index: &'static str) -> String {
        match self {
            Engine::Sqlite => format!(" INDEXED BY {index}"),
            Engine::Postgres => String::new(),
        }
    }
}

/// A listing page's statement: `limit` is its last parameter.
fn page_sql(select: &str, filters: &Filters, order: &str) -> String {
    format!(
        "SELECT {select} WHERE {} ORDER BY {order} LIMIT ${}",
        filters.sql(),
        filters.after()
    )
}

impl crate::Store {
    /// The WHERE clause of an app's dead deliveries matching `filter` (`d` is
    /// the deliveries table), shared by the DLQ listing, its count and bulk replays.
    pub(crate) fn dlq_filters(
        &self,
        app: &hookline_core::ids::AppId,
        filter: &crate::records::DlqFilter,
    ) -> Filters {
        let mut f = Filters::new();
        f.text("d.app_id = $?", app.as_str());
        f.fixed("d.state = 'dead'");
        f.time_range("d.dead_at", filter.died);
        f.text_if(
            "d.endpoint_id = $?",
            filter.endpoint.as_ref().map(|e| e.as_str()),
        );
        f.text_if("d.dead_reason = $?", filter.reason.map(|r| r.as_str()));
        f.text_if(
            "EXISTS (SELECT 1 FROM events e WHERE e.id = d.event_id AND e.event_type = $?)",
            filter.event_type.as_deref(),
        );
        f
    }

    /// One page of a listing on a reader: `SELECT {select} WHERE {filters} ORDER BY
    /// {order} LIMIT {limit}`, the limit bound after the filters.
    pub(crate) async fn page_rows(
        &self,
        select: &str,
        filters: &Filters,
        order: &str,
        limit: u32,
    ) -> crate::Result<Vec<crate::db::Row>> {
        let sql = page_sql(select, filters, order);
        filters
            .bind(self.engine.query(&sql))
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await
    }

    /// The plan PostgreSQL runs [`Self::page_rows`]'s statement with
    /// (`EXPLAIN (FORMAT JSON)`, with the same arguments), for the plan test;
    /// `None` on SQLite.
    pub(crate) async fn page_plan(
        &self,
        select: &str,
        filters: &Filters,
        order: &str,
        limit: u32,
    ) -> crate::Result<Option<String>> {
        use sqlx::Row as _;
        let sql = format!("EXPLAIN (FORMAT JSON) {}", page_sql(select, filters, order));
        let rows = filters
            .bind(self.engine.query(&sql))
            .bind(i64::from(limit))
            .fetch_all(&self.reader)
            .await?;
        Ok(match rows.first() {
            Some(crate::db::Row::Postgres(row)) => Some(row.try_get_unchecked::<String, _>(0)?),
            _ => None,
        })
    }
}
