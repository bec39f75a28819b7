//! `hookline admin …`: the on-call CLI, a client of the HTTP API (so it works
//! against any node, with any key the API accepts, and checks nothing the API
//! does not). Tables by default, the API's own JSON with `--json`.
//!
//! `--url` (or `HOOKLINE_URL`) names the API; the key comes from `HOOKLINE_TOKEN`,
//! never from an argument (arguments end up in shell history and `ps`).

use std::io::Write;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use hookline_client::types::{
    BulkReplayRequest, DlqQuery, PageQuery, PortalAccess, UpdateEndpoint,
};
use hookline_client::{BulkReplay, Client};
use serde_json::Value;

#[derive(Debug, Clone, Parser)]
#[command(name = "hookline admin")]
pub struct AdminArgs {
    /// The API's base URL.
    #[arg(
        long,
        env = "HOOKLINE_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: AdminCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum AdminCommand {
    /// List the dead-letter queue, most recently dead first.
    Dlq {
        #[command(flatten)]
        filter: DlqFilter,
        /// At most this many (1–250).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// One delivery with every attempt of it.
    Show {
        #[arg(long)]
        app: String,
        delivery: String,
    },
    /// Replay one dead delivery.
    Replay {
        #[arg(long)]
        app: String,
        delivery: String,
    },
    /// Replay the DLQ entries a filter selects, in the background; `--dry-run` only counts them.
    ReplayBulk {
        #[command(flatten)]
        filter: DlqFilter,
        #[arg(long)]
        dry_run: bool,
    },
    /// A bulk replay's progress and report.
    ReplayStatus {
        #[arg(long)]
        app: String,
        replay: String,
    },
    /// An endpoint's health: breaker, failures, last error, success rate and latency.
    Health {
        #[arg(long)]
        app: String,
        endpoint: String,
    },
    /// Stop sending to an endpoint; its new deliveries are kept until it resumes.
    Pause {
        #[arg(long)]
        app: String,
        endpoint: String,
    },
    /// Send to a paused endpoint again: what it was owed is due at once.
    Resume {
        #[arg(long)]
        app: String,
        endpoint: String,
    },
    /// Print a link that opens an app's customer portal once (needs an admin key).
    PortalLink {
        /// The app, by id or uid.
        app: String,
        /// What the portal may do besides reading: endpoints, secrets, replay, publish
        /// (comma-separated).
        #[arg(long, value_delimiter = ',')]
        capabilities: Vec<String>,
        /// How long the link may wait to be opened: `30m`, `8h`, `7d` (at most 7 days).
        #[arg(long, default_value = "1h")]
        ttl: humantime::Duration,
        /// How long its session lasts between renewals (renewed while in use,
        /// never past 12 h after sign-in): `5m` to `12h`.
        #[arg(long, default_value = "1h")]
        session: humantime::Duration,
    },
}

/// The DLQ filters, as the API takes them.
#[derive(Debug, Clone, Args)]
pub struct DlqFilter {
    /// The app, by id or uid.
    #[arg(long)]
    pub app: String,
    #[arg(long)]
    pub endpoint: Option<String>,
    /// `retries_exhausted`, `client_error`, `redirect`, `gone`, `destination_forbidden`,
    /// `endpoint_deleted`, `transform_error`.
    #[arg(long)]
    pub reason: Option<String>,
    #[arg(long)]
    pub event_type: Option<String>,
    /// Dead-lettered at or after (RFC 3339).
    #[arg(long)]
    pub since: Option<String>,
    /// Dead-lettered before (RFC 3339).
    #[arg(long)]
    pub until: Option<String>,
}

impl DlqFilter {
    /// The DLQ listing's query for this filter.
    fn query(&self) -> anyhow::Result<DlqQuery> {
        Ok(DlqQuery {
            endpoint_id: self.endpoint.clone(),
            reason: self.reason.as_deref().map(named).transpose()?,
            event_type: self.event_type.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            ..DlqQuery::default()
        })
    }
}

/// A name the API spells in snake case (a dead reason, a capability), read as its type.
fn named<T: serde::de::DeserializeOwned>(name: &str) -> anyhow::Result<T> {
    serde_json::from_value(Value::String(name.to_owned()))
        .with_context(|| format!("{name:?} is not one of the names the API knows here"))
}

/// Runs one command, writing what it prints to `out`.
pub async fn run(args: AdminArgs, token: &str, out: &mut impl Write) -> anyhow::Result<()> {
    let api = Client::new(&args.url, token)?;
    let (answer, table): (Value, Table) = match &args.command {
        AdminCommand::Dlq { filter, limit } => {
            let query = DlqQuery {
                limit: Some(*limit),
                ..filter.query()?
            };
            let page = json(&api.list_dlq(&filter.app, &query).await?);
            let table = deliveries_table(&page["data"]);
            (page, table)
        }
        AdminCommand::Show { app, delivery } => {
            let one = json(&api.get_delivery(app, delivery).await?);
            let page = PageQuery {
                limit: Some(250),
                before: None,
            };
            let attempts = json(&api.delivery_attempts(app, delivery, &page).await?);
            let mut table = deliveries_table(&Value::Array(vec![one.clone()]));
            table.then = Some(Box::new(attempts_table(&attempts["data"])));
            (
                serde_json::json!({"delivery": one, "attempts": attempts["data"]}),
                table,
            )
        }
        AdminCommand::Replay { app, delivery } => {
            let answer = json(&api.replay_delivery(app, delivery).await?);
            let table = Table::pairs(&answer, &["replayed", "detail"]);
            (answer, table)
        }
        AdminCommand::ReplayBulk { filter, dry_run } => {
            let query = filter.query()?;
            let request = BulkReplayRequest {
                endpoint_id: query.endpoint_id,
                reason: query.reason,
                event_type: query.event_type,
                since: query.since,
                until: query.until,
                dry_run: *dry_run,
            };
            match api.replay_dlq(&filter.app, &request).await? {
                BulkReplay::DryRun(count) => {
                    let answer = json(&count);
                    let table = Table::pairs(&answer, &["dry_run", "count"]);
                    (answer, table)
                }
                BulkReplay::Started(job) | BulkReplay::Running(job) => {
                    let answer = json(&job);
                    let table = Table::pairs(
                        &answer,
                        &["id", "state", "total", "done", "replayed", "skipped"],
                    );
                    (answer, table)
                }
            }
        }
        AdminCommand::ReplayStatus { app, replay } => {
            let answer = json(&api.get_replay(app, replay).await?);
            let table = Table::pairs(
                &answer,
                &[
                    "id",
                    "state",
                    "total",
                    "done",
                    "replayed",
                    "skipped",
                    "created_at",
                    "finished_at",
                ],
            );
            (answer, table)
        }
        AdminCommand::Health { app, endpoint } => {
            let health = json(&api.endpoint_health(app, endpoint).await?);
            let stats = json(&api.endpoint_stats(app, endpoint).await?);
            let mut table = Table::pairs(
                &health,
                &[
                    "endpoint_id",
                    "enabled",
                    "disabled_reason",
                    "breaker",
                    "consecutive_failures",
                    "next_probe_at",
                    "failing_since",
                    "last_error",
                    "last_failure_at",
                    "recent_success_rate",
                ],
            );
            table.then = Some(Box::new(windows_table(&stats)));
            (serde_json::json!({"health": health, "stats": stats}), table)
        }
        AdminCommand::Pause { app, endpoint } | AdminCommand::Resume { app, endpoint } => {
            let patch = UpdateEndpoint {
                paused: Some(matches!(args.command, AdminCommand::Pause { .. })),
                ..UpdateEndpoint::default()
            };
            let answer = json(&api.update_endpoint(app, endpoint, &patch).await?);
            let table = Table::pairs(&answer, &["id", "url", "enabled", "paused"]);
            (answer, table)
        }
        AdminCommand::PortalLink {
            app,
            capabilities,
            ttl,
            session,
        } => {
            let access = PortalAccess {
                capabilities: capabilities
                    .iter()
                    .map(|name| named(name))
                    .collect::<anyhow::Result<_>>()?,
                ttl_secs: Some(ttl.as_secs()),
                session_secs: Some(session.as_secs()),
                screen: None,
                redeem: None,
            };
            let answer = json(&api.portal_access(app, &access).await?);
            let table = Table::pairs(&answer, &["url", "expires_at", "capabilities"]);
            (answer, table)
        }
    };
    if args.json {
        writeln!(out, "{}", serde_json::to_string_pretty(&answer)?)?;
    } else {
        table.write(out)?;
    }
    Ok(())
}

/// A view as the API's JSON (what `--json` prints and the tables read).
fn json(view: &impl serde::Serialize) -> Value {
    serde_json::to_value(view).expect("views serialize")
}

/// Rows under a header, columns padded to their widest cell.
#[derive(Default)]
struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Another table printed after this one, after a blank line.
    then: Option<Box<Table>>,
}

impl Table {
    fn new(header: &[&str], rows: Vec<Vec<String>>) -> Self {
        Self {
            header: header.iter().map(|h| h.to_uppercase()).collect(),
            rows,
            then: None,
        }
    }

    /// One object as `FIELD  value` lines, in the given order.
    fn pairs(object: &Value, fields: &[&str]) -> Self {
        let rows = fields
            .iter()
            .map(|field| vec![(*field).to_owned(), cell(&object[*field])])
            .collect();
        Self::new(&["field", "value"], rows)
    }

    fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        if self.rows.is_empty() {
            writeln!(out, "(none)")?;
        } else {
            let widths: Vec<usize> = (0..self.header.len())
                .map(|i| {
                    self.rows
                        .iter()
                        .map(|row| row[i].chars().count())
                        .chain([self.header[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            for row in std::iter::once(&self.header).chain(&self.rows) {
                let line: Vec<String> = row
                    .iter()
                    .zip(&widths)
                    .map(|(cell, width)| format!("{cell:<width$}"))
                    .collect();
                writeln!(out, "{}", line.join("  ").trim_end())?;
            }
        }
        if let Some(then) = &self.then {
            writeln!(out)?;
            then.write(out)?;
        }
        Ok(())
    }
}

fn cell(value: &Value) -> String {
    match value {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn rows(list: &Value, fields: &[&str]) -> Vec<Vec<String>> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .map(|item| fields.iter().map(|f| cell(&item[*f])).collect())
                .collect()
        })
        .unwrap_or_default()
}

fn deliveries_table(list: &Value) -> Table {
    let fields = [
        "id",
        "event_id",
        "endpoint_id",
        "state",
        "attempts",
        "dead_reason",
        "dead_at",
        "last_attempt_at",
    ];
    Table::new(&fields, rows(list, &fields))
}

fn attempts_table(list: &Value) -> Table {
    let fields = [
        "id",
        "attempt_number",
        "trigger",
        "started_at",
        "status_code",
        "duration_ms",
        "verdict",
        "error_kind",
    ];
    Table::new(&fields, rows(list, &fields))
}

/// The stats' windows: one row per window.
fn windows_table(stats: &Value) -> Table {
    let mut table = Table::new(
        &[
            "window",
            "attempts",
            "success_rate",
            "p50_ms",
            "p95_ms",
            "p99_ms",
        ],
        Vec::new(),
    );
    for name in ["hour", "day", "week"] {
        let window = &stats["windows"][name];
        if !window.is_null() {
            table.rows.push(vec![
                name.to_owned(),
                cell(&window["attempts"]),
                cell(&window["success_rate"]),
                cell(&window["latency_ms"]["p50"]),
                cell(&window["latency_ms"]["p95"]),
                cell(&window["latency_ms"]["p99"]),
            ]);
        }
    }
    table
}
