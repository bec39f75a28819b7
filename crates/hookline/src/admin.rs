//! `hookline admin …`: the on-call CLI, a client of the HTTP API (so it works
//! against any node, with any key the API accepts, and checks nothing the API
//! does not). Tables by default, the API's own JSON with `--json`.
//!
//! `--url` (or `HOOKLINE_URL`) names the API; the key comes from `HOOKLINE_TOKEN`,
//! never from an argument (arguments end up in shell history and `ps`).

use std::io::Write;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use serde_json::{json, Value};

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
        /// How long the link and its session last: `30m`, `8h`, `7d` (at most 7 days).
        #[arg(long, default_value = "1h")]
        ttl: humantime::Duration,
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
    /// `retries_exhausted`, `client_error`, `redirect`, `gone`, `destination_forbidden`, `endpoint_deleted`.
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
    fn fields(&self) -> Vec<(&'static str, String)> {
        [
            ("endpoint_id", &self.endpoint),
            ("reason", &self.reason),
            ("event_type", &self.event_type),
            ("since", &self.since),
            ("until", &self.until),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.clone().map(|v| (name, v)))
        .collect()
    }
}

/// Runs one command, writing what it prints to `out`.
pub async fn run(args: AdminArgs, token: &str, out: &mut impl Write) -> anyhow::Result<()> {
    let api = Api {
        base: args.url.trim_end_matches('/').to_owned(),
        token: token.to_owned(),
        http: reqwest::Client::new(),
    };
    let path = |app: &str, rest: &str| format!("/v1/apps/{}{rest}", segment(app));
    let (answer, table): (Value, Table) = match &args.command {
        AdminCommand::Dlq { filter, limit } => {
            let mut query = filter.fields();
            query.push(("limit", limit.to_string()));
            let page = api.get(&path(&filter.app, "/dlq"), &query).await?;
            let table = deliveries_table(&page["data"]);
            (page, table)
        }
        AdminCommand::Show { app, delivery } => {
            let one = api
                .get(
                    &path(app, &format!("/deliveries/{}", segment(delivery))),
                    &[],
                )
                .await?;
            let attempts = api
                .get(
                    &path(app, &format!("/deliveries/{}/attempts", segment(delivery))),
                    &[("limit", "250".into())],
                )
                .await?;
            let mut table = deliveries_table(&Value::Array(vec![one.clone()]));
            table.then = Some(Box::new(attempts_table(&attempts["data"])));
            (
                json!({"delivery": one, "attempts": attempts["data"]}),
                table,
            )
        }
        AdminCommand::Replay { app, delivery } => {
            let answer = api
                .post(
                    &path(app, &format!("/deliveries/{}/replay", segment(delivery))),
                    json!({}),
                )
                .await?;
            let table = Table::pairs(&answer, &["replayed", "detail"]);
            (answer, table)
        }
        AdminCommand::ReplayBulk { filter, dry_run } => {
            let mut body: serde_json::Map<String, Value> = filter
                .fields()
                .into_iter()
                .map(|(name, value)| (name.to_owned(), Value::String(value)))
                .collect();
            body.insert("dry_run".into(), Value::Bool(*dry_run));
            let answer = api
                .post(&path(&filter.app, "/replays"), Value::Object(body))
                .await?;
            let table = if *dry_run {
                Table::pairs(&answer, &["dry_run", "count"])
            } else {
                Table::pairs(
                    &answer,
                    &["id", "state", "total", "done", "replayed", "skipped"],
                )
            };
            (answer, table)
        }
        AdminCommand::ReplayStatus { app, replay } => {
            let answer = api
                .get(&path(app, &format!("/replays/{}", segment(replay))), &[])
                .await?;
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
            let base = path(app, &format!("/endpoints/{}", segment(endpoint)));
            let health = api.get(&format!("{base}/health"), &[]).await?;
            let stats = api.get(&format!("{base}/stats"), &[]).await?;
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
            (json!({"health": health, "stats": stats}), table)
        }
        AdminCommand::Pause { app, endpoint } | AdminCommand::Resume { app, endpoint } => {
            let paused = matches!(args.command, AdminCommand::Pause { .. });
            let answer = api
                .patch(
                    &path(app, &format!("/endpoints/{}", segment(endpoint))),
                    json!({ "paused": paused }),
                )
                .await?;
            let table = Table::pairs(&answer, &["id", "url", "enabled", "paused"]);
            (answer, table)
        }
        AdminCommand::PortalLink {
            app,
            capabilities,
            ttl,
        } => {
            let answer = api
                .post(
                    &path(app, "/portal-access"),
                    json!({ "capabilities": capabilities, "ttl_secs": ttl.as_secs() }),
                )
                .await?;
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

/// A path segment as the user typed it, percent-encoded.
fn segment(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    async fn get(&self, path: &str, query: &[(&str, String)]) -> anyhow::Result<Value> {
        self.send(self.http.get(format!("{}{path}", self.base)).query(query))
            .await
    }

    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(&body))
            .await
    }

    async fn patch(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.send(self.http.patch(format!("{}{path}", self.base)).json(&body))
            .await
    }

    /// The answer's JSON, or the API's problem as the error.
    async fn send(&self, request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .with_context(|| format!("calling {}", self.base))?;
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if !status.is_success() {
            bail!(
                "{} {}: {}",
                status.as_u16(),
                body["code"].as_str().unwrap_or("error"),
                body["detail"].as_str().unwrap_or("(no detail)")
            );
        }
        Ok(body)
    }
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
