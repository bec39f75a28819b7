//! Command-line options. Every option is echoed in the report and in `--json`.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use serde::Serialize;

/// Which database a managed Hookline gets (a fresh one every run).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// A fresh file /tmp/hookline-bench-<random>.db, removed afterwards.
    Sqlite,
    /// A fresh database hookline_bench_<random> on --postgres-url, dropped afterwards.
    Postgres,
}

/// What the endpoints are: where Hookline delivers, and what this tool receives from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Destination {
    /// HTTP endpoints on the in-process sink (127.0.0.1, answers 200 at once).
    Http,
    /// `amqp://` endpoints on a fresh topic exchange of the RabbitMQ at --amqp-url, whose
    /// queue this tool consumes (guest/guest); exchange and queue are deleted afterwards.
    Rabbitmq,
}

#[derive(Debug, Clone, Parser, Serialize)]
#[command(
    name = "hookline-bench",
    version,
    about = "Reproducible benchmark of Hookline on one machine (all traffic on 127.0.0.1).",
    long_about = "Reproducible benchmark of Hookline on one machine (all traffic on 127.0.0.1).\n\n\
        Runs an in-process sink receiver, starts Hookline on a fresh database, creates one app \
        and --endpoints endpoints pointing at the sink, publishes --events events with \
        --concurrency producers and measures, in one run: publish rate, end-to-end delivery \
        rate, latency from each event's due time to its arrival at the sink, attempts per \
        delivery, Hookline's CPU seconds and peak RSS, a ledger check (accepted events x \
        endpoints == unique deliveries received + dead-lettered) and the plain HTTP ceiling \
        of this machine against the same sink.\n\n\
        With --destination rabbitmq the endpoints are `amqp://` ones instead: each publishes to \
        a fresh topic exchange on the RabbitMQ at --amqp-url (guest/guest) with its own routing \
        key, and this tool consumes the exchange's queue; a message counts as delivered when it \
        is consumed, so the same ledger, rates and latencies give the throughput to RabbitMQ \
        beside HTTP. The HTTP ceiling is not measured then.\n\n\
        Recommended: --spawn target/release/hookline, which runs Hookline as its own process so \
        its CPU and memory are measured alone. Without --spawn Hookline runs inside this \
        process and CPU/RSS include the sink and the load generator. With --url the bench \
        targets an already-running Hookline and does not measure CPU/RSS.\n\n\
        A run whose ledger does not balance prints `VOID: ...` and exits non-zero.",
    after_help = "Example: hookline-bench --spawn target/release/hookline --store postgres --events 100000 --json run.json"
)]
pub struct Args {
    // ----- the Hookline under test -----
    /// Database for a managed Hookline: a fresh SQLite file or a fresh PostgreSQL database.
    #[arg(long, value_enum, default_value_t = StoreKind::Sqlite, help_heading = "Hookline under test")]
    pub store: StoreKind,

    /// PostgreSQL server on which --store postgres creates (and finally drops) its database.
    #[arg(
        long,
        default_value = "postgres://postgres@127.0.0.1:5432/postgres",
        help_heading = "Hookline under test"
    )]
    pub postgres_url: String,

    /// RECOMMENDED. Run this hookline binary as a child process (`BIN serve`, configured by
    /// HOOKLINE_* environment variables) and measure that process's CPU and peak RSS alone.
    /// Without it Hookline runs in-process (Server::start) and the CPU/RSS figures include the
    /// sink and the load generator.
    #[arg(
        long,
        value_name = "BIN",
        conflicts_with = "url",
        help_heading = "Hookline under test"
    )]
    pub spawn: Option<PathBuf>,

    /// Target an already-running Hookline at this base URL (http://127.0.0.1:PORT) instead of
    /// starting one. Needs --token, and that instance must allow private destinations. No
    /// CPU/RSS measurement, no --backlog; --store and Hookline overrides are ignored.
    #[arg(long, requires = "token", help_heading = "Hookline under test")]
    pub url: Option<String>,

    /// Admin API key of the --url instance (a managed instance gets a random one).
    #[arg(long, help_heading = "Hookline under test")]
    #[serde(skip_serializing)]
    pub token: Option<String>,

    /// Override Hookline's max_in_flight (concurrent deliveries per dispatcher). Also the
    /// concurrency of the HTTP ceiling client (default: Hookline's default, 256).
    #[arg(long, help_heading = "Hookline under test")]
    pub max_in_flight: Option<usize>,

    /// Override Hookline's max_in_flight_per_endpoint (concurrent deliveries to one endpoint).
    #[arg(long, help_heading = "Hookline under test")]
    pub max_in_flight_per_endpoint: Option<usize>,

    /// Override Hookline's batch_size (deliveries claimed per round trip).
    #[arg(long, help_heading = "Hookline under test")]
    pub batch_size: Option<u32>,

    /// Override Hookline's retry_base_ms (full-jitter backoff base). Hookline's default of
    /// 5000 ms makes the tail of a --fail-share run mostly backoff waiting.
    #[arg(long, help_heading = "Hookline under test")]
    pub retry_base_ms: Option<u64>,

    /// Override Hookline's sqlite_synchronous: FULL (the default: every acknowledged event
    /// survives power loss) or NORMAL (see docs/configuration.md for its loss window).
    #[arg(long, value_parser = ["FULL", "NORMAL"], help_heading = "Hookline under test")]
    pub sqlite_synchronous: Option<String>,

    /// Override Hookline's sqlite_cache_mib (the writer's page cache; default 8).
    #[arg(long, help_heading = "Hookline under test")]
    pub sqlite_cache_mib: Option<u32>,

    /// Override Hookline's history_retention_secs (succeeded deliveries, their attempts and
    /// events older than this are removed in small batches). With it, the report samples
    /// the database's size every second of the live phase (SQLite: the file with its WAL;
    /// PostgreSQL: pg_database_size), to show a steady state levelling off.
    #[arg(long, help_heading = "Hookline under test")]
    pub history_retention_secs: Option<u64>,

    /// PostgreSQL: turn autovacuum (and so auto-analyze) off for Hookline's tables in the
    /// fresh database, right after Hookline created them — as on a server where autovacuum
    /// is off or lagging behind. The report shows the server's own setting either way.
    #[arg(long, help_heading = "Hookline under test")]
    pub no_autovacuum: bool,

    /// Keep the database (SQLite file or PostgreSQL database) after the run, for inspection.
    #[arg(long, help_heading = "Hookline under test")]
    pub keep_store: bool,

    // ----- destination -----
    /// Where the endpoints point: the in-process HTTP sink, or a RabbitMQ exchange this tool
    /// consumes (not with --fail-share, --fail-status, --sink-latency-ms,
    /// --sink-load-latency-us or --ceiling-requests, which are the HTTP sink's).
    #[arg(long, value_enum, default_value_t = Destination::Http, help_heading = "Destination")]
    pub destination: Destination,

    /// RabbitMQ's HOST:PORT (loopback only) for --destination rabbitmq; the endpoints'
    /// `amqp://` URLs name the same address, so Hookline must reach it there too.
    #[arg(
        long,
        value_name = "HOST:PORT",
        default_value = "127.0.0.1:5672",
        help_heading = "Destination"
    )]
    pub amqp_url: String,

    // ----- workload -----
    /// Endpoints created in the app; every event fans out to all of them.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u16).range(1..=1000), help_heading = "Workload")]
    pub endpoints: u16,

    /// Extra endpoints that are down (a closed port on 127.0.0.1: connection refused), beside
    /// the --endpoints healthy ones (scenario (e): --endpoints 9 --dead-endpoints 1). Their
    /// deliveries are outside the ledger and the rates: the run measures what the healthy
    /// endpoints get while Hookline retries, and its breaker stops, the dead one.
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub dead_endpoints: u16,

    /// A payload filter (docs/api.md, "Payload filters") given to each healthy endpoint, to
    /// measure what evaluating it costs a publish. It must pass every event (the payload is
    /// {"pad":"xxx…"}: e.g. '/pad exists'), or what it drops counts as lost in the ledger.
    #[arg(long, help_heading = "Workload")]
    pub filter: Option<String>,

    /// A transform (docs/api.md, "Transformations") given to each healthy endpoint, to
    /// measure what running it costs a delivery: a preset (`slack`, `teams`, `discord`) or a
    /// jq program (`.` sends the program's input as it is). It must give a body for every
    /// event (`null` skips one, which the sink never sees: the ledger counts it lost).
    #[arg(long, help_heading = "Workload")]
    pub transform: Option<String>,

    /// Batching (docs/api.md, "Batching") for each healthy endpoint: up to this many
    /// deliveries in one request (2–100), to measure what a batch saves. (Not
    /// `--batch`, which publishes in batches.)
    #[arg(long, help_heading = "Workload")]
    pub batch_deliveries: Option<u32>,

    /// With `--batch-deliveries`: the longest a batch waits for company, in milliseconds.
    #[arg(long, default_value_t = 50, help_heading = "Workload")]
    pub batch_wait_ms: u32,

    /// Events published in the measured phase.
    #[arg(long, default_value_t = 100_000, help_heading = "Workload")]
    pub events: u64,

    /// Approximate size of each event's serialized payload, a JSON object {"pad":"xxx…"}.
    #[arg(long, default_value_t = 1024, help_heading = "Workload")]
    pub payload_bytes: usize,

    /// Concurrent producers (each has at most one publish request outstanding).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Workload")]
    pub concurrency: u32,

    /// Share of events (0..1) that carry an ordering_key (scenario (c): 0.5).
    #[arg(long, default_value_t = 0.0, value_parser = share, help_heading = "Workload")]
    pub ordered_share: f64,

    /// Distinct ordering keys; each ordered event draws one with the seeded RNG.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..), help_heading = "Workload")]
    pub keys: u64,

    /// Offered load in events per second, open loop: event i is due at t0 + i/R and its latency
    /// counts from then even if producers fall behind. 0 = as fast as the producers can go
    /// (each event is then due when its request is sent).
    #[arg(long, default_value_t = 0.0, help_heading = "Workload")]
    pub rate: f64,

    /// Events (not deliveries: each fans out to --endpoints) published BEFORE the measured
    /// phase while no dispatcher runs (Hookline in the `api` role, then restarted as `serve`),
    /// so the measured phase starts on a backlog of backlog x endpoints deliveries. They count
    /// in the delivery rate and the ledger, not in the latency percentiles. Needs a managed
    /// Hookline (not --url).
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub backlog: u64,

    /// Publish the backlog into a second app, with its own --endpoints endpoints at the
    /// same sink paths: the live events then measure how one tenant's backlog delays
    /// another tenant's deliveries (per-tenant fairness).
    #[arg(long, help_heading = "Workload")]
    pub backlog_app: bool,

    /// Publish through POST /v1/apps/{app}/events/batch in chunks of --batch-size-publish.
    #[arg(long, help_heading = "Workload")]
    pub batch: bool,

    /// Events per batch request with --batch.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Workload")]
    pub batch_size_publish: u32,

    /// Share of attempts (0..1) the sink answers with 500 instead of 200, decided by a seeded
    /// RNG. 0 by default, so a run measures throughput; with failures the tail follows
    /// Hookline's backoff (see --retry-base-ms), ordering and circuit breaker.
    #[arg(long, default_value_t = 0.0, value_parser = share, help_heading = "Workload")]
    pub fail_share: f64,

    /// The status of a failed answer: 500 (the default) is retried by Hookline; a 4xx such as
    /// 400 sends the delivery straight to the dead-letter queue (exercises the ledger's DLQ side).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u16).range(400..=599), help_heading = "Workload")]
    pub fail_status: u16,

    /// How long the sink takes to answer each request, in milliseconds (a receiver doing
    /// work: real ones take 20–300 ms). 0 answers at once.
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub sink_latency_ms: u64,

    /// Plus this many microseconds per other request in flight at the sink: a receiver
    /// that slows down under load (with --sink-latency-ms 20 and 625 here, its latency
    /// doubles at 32 concurrent requests).
    #[arg(long, default_value_t = 0, help_heading = "Workload")]
    pub sink_load_latency_us: u64,

    /// Seed of every random choice (ordering keys, sink failures), for reproducible runs.
    #[arg(long, default_value_t = 1, help_heading = "Workload")]
    pub seed: u64,

    // ----- measurement and output -----
    /// Give up waiting for the ledger to balance after this many seconds (the run is then VOID).
    #[arg(long, default_value_t = 600, help_heading = "Measurement and output")]
    pub timeout_secs: u64,

    /// Also report latency, deliveries and (PostgreSQL) the server's CPU per window of
    /// this many seconds of the events' due times — e.g. 30, to see the first minutes
    /// on a fresh database window by window. 0: off.
    #[arg(long, default_value_t = 0, help_heading = "Measurement and output")]
    pub window_secs: u64,

    /// Skip the HTTP ceiling phase.
    #[arg(long, help_heading = "Measurement and output")]
    pub no_ceiling: bool,

    /// Requests of the HTTP ceiling phase (default: as many as expected deliveries).
    #[arg(long, help_heading = "Measurement and output")]
    pub ceiling_requests: Option<u64>,

    /// No progress bars (they are also off when stdout is not a terminal).
    #[arg(long, short, help_heading = "Measurement and output")]
    pub quiet: bool,

    /// Also write every input and result as JSON to this file.
    #[arg(long, value_name = "FILE", help_heading = "Measurement and output")]
    pub json: Option<PathBuf>,
}

fn share(text: &str) -> Result<f64, String> {
    let value: f64 = text.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err("must be between 0 and 1".into())
    }
}

impl Args {
    /// Checks that clap cannot express.
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.rate.is_finite() && self.rate >= 0.0,
            "--rate must be 0 or a positive number of events per second"
        );
        anyhow::ensure!(self.events > 0, "--events must be at least 1");
        anyhow::ensure!(
            !self.backlog_app || (self.backlog > 0 && self.fail_share == 0.0),
            "--backlog-app needs --backlog, and no --fail-share (the ledger reads the live app's DLQ)"
        );
        anyhow::ensure!(
            !self.no_autovacuum || (self.store == StoreKind::Postgres && self.managed()),
            "--no-autovacuum needs --store postgres and a Hookline this tool starts"
        );
        if self.url.is_some() {
            anyhow::ensure!(
                self.backlog == 0,
                "--backlog needs a Hookline this tool starts (it must run without a dispatcher \
                 while the backlog is published); drop --url"
            );
        }
        if let Some(url) = &self.url {
            anyhow::ensure!(
                is_loopback_url(url),
                "--url must point at 127.0.0.1 / localhost: this tool sends traffic only to this machine"
            );
        }
        if self.destination == Destination::Rabbitmq {
            anyhow::ensure!(
                self.fail_share == 0.0
                    && self.fail_status == 500
                    && self.sink_latency_ms == 0
                    && self.sink_load_latency_us == 0
                    && self.ceiling_requests.is_none(),
                "--fail-share, --fail-status, --sink-latency-ms, --sink-load-latency-us and \
                 --ceiling-requests shape the HTTP sink; with --destination rabbitmq there is \
                 none (RabbitMQ takes every message, and the HTTP ceiling is not measured)"
            );
            let (host, _) = amqp_host_port(&self.amqp_url)?;
            anyhow::ensure!(
                host == "localhost"
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback()),
                "--amqp-url must point at 127.0.0.1 / localhost: this tool sends traffic only to \
                 this machine"
            );
        }
        if self.store == StoreKind::Postgres && self.url.is_none() {
            anyhow::ensure!(
                is_loopback_url(&self.postgres_url),
                "--postgres-url must point at 127.0.0.1 / localhost"
            );
        }
        Ok(())
    }

    /// Whether this tool starts Hookline itself (in-process or --spawn).
    pub fn managed(&self) -> bool {
        self.url.is_none()
    }
}

/// The host and port of `--amqp-url`: `HOST:PORT`, `[V6]:PORT` or just `HOST` (port
/// 5672); an `amqp://` prefix and a trailing `/` are tolerated.
pub fn amqp_host_port(address: &str) -> anyhow::Result<(String, u16)> {
    let address = address.strip_prefix("amqp://").unwrap_or(address);
    let address = address.trim_end_matches('/');
    let (host, port) = if let Some(rest) = address.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| anyhow::anyhow!("--amqp-url {address}: an unclosed '['"))?;
        (host, after.strip_prefix(':'))
    } else {
        match address.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (address, None),
        }
    };
    anyhow::ensure!(
        !host.is_empty() && !host.contains(['/', '@', '?']),
        "--amqp-url must be HOST:PORT (e.g. 127.0.0.1:5672), not {address}"
    );
    let port = match port {
        Some(port) => port
            .parse::<u16>()
            .map_err(|_| anyhow::anyhow!("--amqp-url {address}: {port} is not a port"))?,
        None => 5672,
    };
    Ok((host.to_owned(), port))
}

/// `scheme://[user@]host[:port]/…` with a loopback host.
fn is_loopback_url(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host = if let Some(stripped) = host_port.strip_prefix('[') {
        stripped.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls_pass() {
        assert!(is_loopback_url("http://127.0.0.1:8080"));
        assert!(is_loopback_url("http://localhost:8080/x"));
        assert!(is_loopback_url(
            "postgres://postgres@127.0.0.1:5432/postgres"
        ));
        assert!(is_loopback_url("http://[::1]:80"));
        assert!(!is_loopback_url("http://10.0.0.1:8080"));
        assert!(!is_loopback_url("postgres://u@db.example.com/x"));
        assert!(!is_loopback_url("nonsense"));
    }

    #[test]
    fn amqp_addresses_parse() {
        assert_eq!(
            amqp_host_port("127.0.0.1:5672").unwrap(),
            ("127.0.0.1".to_owned(), 5672)
        );
        assert_eq!(
            amqp_host_port("amqp://localhost:5673/").unwrap(),
            ("localhost".to_owned(), 5673)
        );
        assert_eq!(
            amqp_host_port("[::1]:5672").unwrap(),
            ("::1".to_owned(), 5672)
        );
        assert_eq!(
            amqp_host_port("localhost").unwrap(),
            ("localhost".to_owned(), 5672)
        );
        assert!(amqp_host_port("127.0.0.1:x").is_err());
        assert!(amqp_host_port("guest@127.0.0.1:5672").is_err());
    }

    #[test]
    fn the_cli_is_consistent() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
}
