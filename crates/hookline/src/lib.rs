//! The Hookline binary as a library: configuration, roles and startup, so the
//! end-to-end tests start exactly what `hookline serve` starts.
//!
//! Roles: `serve` (API + dispatcher in one process, the default), `api`,
//! `dispatcher`. Any number of `api` and `dispatcher` processes may share one
//! PostgreSQL database.

pub mod admin;
pub mod config;
mod http;
pub mod metrics;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use hookline_core::access::Capabilities;
use hookline_core::model::ReplayJobState;
use hookline_core::sealing::{Keyring, MasterKey};
use hookline_core::signing::api_key;
use hookline_core::time::{Clock, SystemClock, Timestamp};
use hookline_dispatch::Dispatcher;
use hookline_store::{KeyScope, Store, StoreConfig};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use config::Config;

#[derive(Debug, Parser)]
#[command(
    name = "hookline",
    version,
    about = "Outbound webhook delivery: durable, signed, retried, replayable."
)]
pub struct Cli {
    /// A TOML configuration file (keys as in docs/configuration.md). Environment variables override it.
    #[arg(long, global = true, env = "HOOKLINE_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Migrate, then run the API and a dispatcher in one process.
    Serve,
    /// Migrate, then run only the HTTP API.
    Api,
    /// Migrate, then run only a dispatcher.
    Dispatcher,
    /// Apply database migrations and exit.
    Migrate,
    /// Create an API key and print it once: an admin key, or one scoped to an app.
    CreateKey {
        /// Scope the key to this app, by id (`app_…`) or uid (omit for an admin key).
        #[arg(long)]
        app: Option<String>,
        /// What an app key may do, comma-separated: read, publish, endpoints,
        /// secrets, replay (required with `--app`).
        #[arg(long, requires = "app")]
        capabilities: Option<String>,
        /// When the key stops working, RFC 3339 (`2027-01-01T00:00:00Z`); omit for never.
        #[arg(long)]
        expires_at: Option<String>,
        #[arg(long, default_value = "cli")]
        name: String,
    },
    /// List the API keys (ids, names, scopes; never the keys).
    ListKeys,
    /// Re-seal every endpoint secret with `master_key`, opening them with it or a
    /// `previous_master_keys` entry; afterwards the previous keys can be dropped.
    RotateMasterKey,
    /// Revoke an API key by its id (`key_…`); the last admin key is refused.
    RevokeKey { id: String },
    /// The on-call CLI over the HTTP API: the DLQ, replays, endpoint health,
    /// pause/resume (`--url` or `HOOKLINE_URL`; the key from `HOOKLINE_TOKEN`).
    Admin(admin::AdminArgs),
    /// Configuration: `hookline config check` validates `--config` and the
    /// `HOOKLINE_*` environment without starting anything.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Run endpoints' jq transforms for a parent `hookline` process, over
    /// stdin and stdout (started by it, never by hand: `hookline_transform`).
    #[command(name = "transform-worker", hide = true)]
    TransformWorker,
}

#[derive(Debug, Clone, Subcommand)]
pub enum ConfigCommand {
    /// Load and check the configuration; exit non-zero naming the first bad key.
    Check,
}

/// Which parts a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Serve,
    Api,
    Dispatcher,
}

impl Role {
    fn runs_api(self) -> bool {
        matches!(self, Role::Serve | Role::Api)
    }
    fn runs_dispatcher(self) -> bool {
        matches!(self, Role::Serve | Role::Dispatcher)
    }
}

/// The entry point of the `hookline` binary: a transform worker at once
/// (before any runtime starts: `hookline_transform::worker`), or
/// [`main_with`] on a Tokio runtime.
pub fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Command::TransformWorker = cli.command {
        return Ok(hookline_transform::worker::serve()?);
    }
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(main_with(cli))
}

/// The `hookline` binary's commands, on a Tokio runtime.
pub async fn main_with(cli: Cli) -> anyhow::Result<()> {
    let command = match cli.command {
        Command::Admin(args) => {
            // A client of the API: no configuration, no database.
            let token = std::env::var("HOOKLINE_TOKEN").context(
                "HOOKLINE_TOKEN must hold an API key (admin, or an app key with the capabilities the command needs)",
            )?;
            let mut out = Vec::new();
            let result = admin::run(args, &token, &mut out).await;
            std::io::Write::write_all(&mut std::io::stdout(), &out)?;
            return result;
        }
        // A sandbox's worker: no configuration, no database, no logs.
        Command::TransformWorker => return Ok(hookline_transform::worker::serve()?),
        command => command,
    };
    let config = Config::load(cli.config.as_deref())?;
    let spans = init_tracing(&config)?;
    let role = match command {
        Command::Admin(_) | Command::TransformWorker => unreachable!("handled above"),
        Command::Config {
            command: ConfigCommand::Check,
        } => {
            match &cli.config {
                Some(file) => println!("{}: valid", file.display()),
                None => println!("defaults and HOOKLINE_* environment: valid"),
            }
            return Ok(());
        }
        Command::Serve => Role::Serve,
        Command::Api => Role::Api,
        Command::Dispatcher => Role::Dispatcher,
        Command::Migrate => {
            let store = connect(&config).await?;
            store.migrate().await.context("migrating")?;
            println!("migrations applied");
            return Ok(());
        }
        Command::CreateKey {
            app,
            capabilities,
            expires_at,
            name,
        } => {
            let store = connect(&config).await?;
            store.migrate().await.context("migrating")?;
            let now = SystemClock.now();
            let scope = match app {
                None => KeyScope::Admin,
                Some(app) => {
                    let capabilities = capabilities.with_context(|| {
                        "an app key needs --capabilities: any of read,publish,endpoints,secrets,replay"
                    })?;
                    let capabilities = Capabilities::parse_text(&capabilities)?;
                    anyhow::ensure!(!capabilities.is_empty(), "--capabilities is empty");
                    KeyScope::App {
                        app: store
                            .apps()
                            .find_app(&app)
                            .await?
                            .with_context(|| {
                                format!("no app {app:?}: give an app's id (app_…) or its uid")
                            })?
                            .id,
                        capabilities,
                    }
                }
            };
            let expires_at = expires_at
                .map(|text| {
                    Timestamp::parse_rfc3339(&text)
                        .filter(|at| *at > now)
                        .with_context(|| {
                            format!("--expires-at {text:?} is not a future RFC 3339 UTC time")
                        })
                })
                .transpose()?;
            let key = api_key::generate();
            store
                .apps()
                .create_api_key(&api_key::hash(&key), &scope, &name, expires_at, now)
                .await?;
            println!("{key}");
            return Ok(());
        }
        Command::RotateMasterKey => {
            let store = connect(&config).await?;
            store.migrate().await.context("migrating")?;
            let resealed = store
                .endpoints()
                .rotate_master_key()
                .await
                .context("re-sealing endpoint secrets")?;
            println!(
                "re-sealed the secrets of {resealed} endpoints with master key {}",
                keyring(&config)?.current().id()
            );
            return Ok(());
        }
        Command::ListKeys => {
            let store = connect(&config).await?;
            store.migrate().await.context("migrating")?;
            let mut before = None;
            loop {
                let page = hookline_store::Page { limit: 250, before };
                let keys = store.apps().list_api_keys(None, &page).await?;
                for key in &keys {
                    let scope = match &key.scope {
                        KeyScope::Admin => "admin".to_owned(),
                        KeyScope::App { app, capabilities } => {
                            format!("{app}:{}", capabilities.to_text())
                        }
                    };
                    let expires = key
                        .expires_at
                        .map_or_else(|| "never".to_owned(), Timestamp::to_rfc3339);
                    println!(
                        "{}\t{}\t{}\t{}\t{}",
                        key.id,
                        scope,
                        key.name,
                        key.created_at.to_rfc3339(),
                        expires
                    );
                }
                if keys.len() < 250 {
                    return Ok(());
                }
                before = keys.last().map(|k| k.id.to_string());
            }
        }
        Command::RevokeKey { id } => {
            let store = connect(&config).await?;
            store.migrate().await.context("migrating")?;
            let id: hookline_core::ids::ApiKeyId = id
                .parse()
                .with_context(|| format!("{id:?} is not a key id (key_…)"))?;
            match store.apps().revoke_api_key(&id).await? {
                Some(_) => {
                    println!("revoked {id} (API processes forget it within a minute)");
                    return Ok(());
                }
                None => anyhow::bail!("no key {id}"),
            }
        }
    };
    let server = Server::start(config, role).await?;
    tracing::info!(addr = %server.addr, "listening");
    shutdown_signal().await;
    tracing::info!("shutting down");
    let stopped = server.stop().await;
    if let Some(provider) = spans {
        // Sends the spans still batched; a collector that is down costs a warning.
        if let Err(error) = provider.shutdown() {
            tracing::warn!(%error, "flushing spans to the OTLP collector");
        }
    }
    stopped
}

/// A running Hookline process (or the in-process equivalent, in tests).
pub struct Server {
    /// Where it listens: the whole API, or for a dispatcher only the routes
    /// that need no key (health, readiness, metrics).
    pub addr: SocketAddr,
    pub store: Store,
    /// The dispatch loop's heartbeat, if this role runs one.
    heartbeat: Option<hookline_dispatch::Heartbeat>,
    /// When retention last ran, on the server's clock (milliseconds; 0: never).
    last_retention: Arc<std::sync::atomic::AtomicI64>,
    /// When the operational-notice loop last finished a pass, the same way.
    last_notices: Arc<std::sync::atomic::AtomicI64>,
    shutdown: CancellationToken,
    tasks: Vec<JoinHandle<anyhow::Result<()>>>,
}

impl Server {
    /// Connects, migrates, bootstraps the admin key and starts the role's parts,
    /// on the wall clock.
    pub async fn start(config: Config, role: Role) -> anyhow::Result<Self> {
        Self::start_with_clock(config, role, Arc::new(SystemClock)).await
    }

    /// [`Server::start`] on `clock`: every part of the process — the API, the
    /// dispatcher, retention, bulk replays, the gauges — reads time from it (a
    /// test passes a `hookline_core::time::ManualClock` to make timing exact).
    /// Retention's passes are scheduled on it too ([`Server::last_retention`]).
    /// Waiting (idle polls, pauses between batches) still runs on real time.
    pub async fn start_with_clock(
        config: Config,
        role: Role,
        clock: Arc<dyn Clock>,
    ) -> anyhow::Result<Self> {
        config
            .validate()
            .map_err(|(key, problem)| anyhow::anyhow!("configuration key `{key}`: {problem}"))?;
        let store = connect(&config).await?;
        store.migrate().await.context("migrating the database")?;
        bootstrap_admin_key(&store, &config, clock.now()).await?;
        store
            .operational()
            .ensure_internal_app(clock.now())
            .await
            .context("making the operational webhooks' internal app")?;
        let shutdown = CancellationToken::new();
        let mut tasks = Vec::new();
        let mut heartbeat = None;
        let mut handoff = None;

        // The recorder first: a part started before it would record into nothing
        // (the dispatcher's first turn did, and `/metrics` lacked its last turn).
        let handle = metrics_handle();
        if role.runs_dispatcher() {
            hookline_dispatch::metrics::zero(config.metrics_endpoint_cap > 0);
        }
        if role.runs_api() {
            hookline_api::metrics::zero(config.metrics_app_label);
        }
        if role.runs_dispatcher() {
            store
                .start_wake_relay()
                .await
                .context("listening for wake-ups")?;
            let dispatcher = Dispatcher::new(store.clone(), config.dispatcher(), clock.clone())?;
            heartbeat = Some(dispatcher.heartbeat());
            // Publishes of this process hand the dispatcher what it can send at once.
            handoff = Some(dispatcher.handoff());
            let token = shutdown.clone();
            tasks.push(tokio::spawn(
                async move { Ok(dispatcher.run(token).await?) },
            ));
        } else {
            // An API-only node still tells dispatchers elsewhere about new work.
            store
                .start_wake_relay()
                .await
                .context("starting the wake relay")?;
        }
        // Every role listens: the API's roles serve the whole API, a dispatcher
        // only what needs no key (health, readiness, metrics) for its probes and scrapes.
        let listener = tokio::net::TcpListener::bind(&config.listen)
            .await
            .with_context(|| format!("binding {}", config.listen))?;
        let addr = listener.local_addr()?;
        let public_url = config
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{addr}"));
        let api_config = hookline_api::ApiConfig {
            max_payload_bytes: config.max_payload_bytes,
            allow_private_destinations: config.allow_private_destinations,
            metrics: Some(Arc::new(move || handle.render())),
            metrics_app_label: config.metrics_app_label,
            readiness: heartbeat.clone().map(|heartbeat| {
                dispatcher_readiness(heartbeat, clock.clone(), config.dispatcher())
            }),
            refuse_unchecked_events: config.event_type_check.eq_ignore_ascii_case("refuse"),
            public_url: public_url.clone(),
            email: config.smtp_url.is_some(),
            rate_limit: config.rate_limit(),
            handoff,
            retry: config.retry_policy(),
            transform_worker: config.transform_worker(),
        };
        let api = if role.runs_api() {
            hookline_api::router(store.clone(), clock.clone(), api_config)
        } else {
            hookline_api::ops_router(store.clone(), clock.clone(), api_config)
        };
        let token = shutdown.clone();
        let limits = http::Limits {
            max_connections: config.max_connections,
            header_read_timeout: Duration::from_millis(config.header_read_timeout_ms),
        };
        tasks.push(tokio::spawn(async move {
            http::serve(listener, api, limits, token).await;
            Ok(())
        }));
        let last_retention = Arc::new(std::sync::atomic::AtomicI64::new(0));
        let last_notices = Arc::new(std::sync::atomic::AtomicI64::new(0));
        if role.runs_api() {
            tasks.push(tokio::spawn(retention_loop(
                store.clone(),
                config.clone(),
                clock.clone(),
                last_retention.clone(),
                shutdown.clone(),
            )));
            tasks.push(tokio::spawn(replay_loop(
                store.clone(),
                clock.clone(),
                shutdown.clone(),
            )));
            tasks.push(tokio::spawn(operational_loop(
                store.clone(),
                config.operational_dead_window_secs,
                public_url,
                clock.clone(),
                last_notices.clone(),
                shutdown.clone(),
            )));
        }
        tasks.push(tokio::spawn({
            let (store, clock, shutdown) = (store.clone(), clock.clone(), shutdown.clone());
            let handle = metrics_handle();
            async move {
                metrics::sample_loop(store, clock, shutdown, move || handle.run_upkeep()).await;
                Ok(())
            }
        }));
        Ok(Self {
            addr,
            store,
            heartbeat,
            last_retention,
            last_notices,
            shutdown,
            tasks,
        })
    }

    /// When the dispatch loop last finished a turn, on the server's clock (`None`
    /// before its first, or in a role without a dispatcher).
    pub fn last_turn(&self) -> Option<Timestamp> {
        self.heartbeat.as_ref().and_then(|h| h.last_turn())
    }

    /// When retention last ran, on the server's clock: the `now` its cut-offs
    /// were taken from (`None` before its first pass, or in a role without it).
    pub fn last_retention(&self) -> Option<Timestamp> {
        beat(&self.last_retention)
    }

    /// When the operational-notice loop last finished a pass (whose windows were
    /// cut at that `now`), on the server's clock; `None` before its first.
    pub fn last_notices(&self) -> Option<Timestamp> {
        beat(&self.last_notices)
    }

    /// Stops gracefully: no new requests or claims, in-flight work finished or released.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let mut result = Ok(());
        for task in self.tasks {
            if let Err(error) = task.await.context("task panicked").and_then(|r| r) {
                tracing::error!(error = format!("{error:#}"), "task failed");
                result = Err(error);
            }
        }
        self.store.close().await;
        result
    }
}

async fn connect(config: &Config) -> anyhow::Result<Store> {
    let store_config = StoreConfig {
        database_url: config.database_url.clone(),
        max_connections: config.db_max_connections,
        sqlite_synchronous: config.sqlite_synchronous.clone(),
        sqlite_cache_mib: config.sqlite_cache_mib,
        keyring: keyring(config)?,
        acquire_timeout: Duration::from_millis(config.db_acquire_timeout_ms),
    };
    Store::connect(&store_config)
        .await
        .with_context(|| format!("connecting to {}", redact(&config.database_url)))
}

/// The master keys: `master_key` (or the key file, generated on the first start),
/// and `previous_master_keys` during a rotation.
fn keyring(config: &Config) -> anyhow::Result<Keyring> {
    let parse = |text: &str, what: &str| {
        MasterKey::parse(text).with_context(|| format!("{what} is not a master key"))
    };
    let current = match &config.master_key {
        Some(text) => parse(text, "master_key (HOOKLINE_MASTER_KEY)")?,
        None => {
            let path = config.master_key_path();
            match std::fs::read_to_string(&path) {
                Ok(text) => parse(&text, &format!("the master key file {}", path.display()))?,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    let key = MasterKey::generate();
                    write_key_file(&path, key.expose()).with_context(|| {
                        format!("writing a new master key to {}", path.display())
                    })?;
                    tracing::warn!(
                        path = %path.display(),
                        key_id = key.id(),
                        "no master_key configured: generated one into this file. Endpoint \
                         secrets are sealed with it; back it up, and give every process of \
                         this deployment the same key (HOOKLINE_MASTER_KEY)"
                    );
                    key
                }
                Err(error) => {
                    return Err(error)
                        .with_context(|| format!("reading the master key file {}", path.display()))
                }
            }
        }
    };
    let previous = config
        .previous_master_keys
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(|k| parse(k, "an entry of previous_master_keys"))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Keyring::new(current, previous))
}

/// Writes a new key file readable by its owner only.
fn write_key_file(path: &std::path::Path, key: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path)?;
    file.write_all(format!("{key}\n").as_bytes())?;
    file.sync_all()
}

/// A database URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}://…@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// Ensures an admin key exists: the configured one, or a generated one printed once.
async fn bootstrap_admin_key(store: &Store, config: &Config, now: Timestamp) -> anyhow::Result<()> {
    match &config.admin_token {
        Some(token) => {
            store
                .apps()
                .insert_admin_key(&api_key::hash(token), "bootstrap", now)
                .await?
        }
        None if !store.apps().has_admin_key().await? => {
            let key = api_key::generate();
            store
                .apps()
                .insert_admin_key(&api_key::hash(&key), "bootstrap", now)
                .await?;
            // Printed once, on stdout and not in the logs: it is not stored anywhere in clear.
            println!("Generated admin API key (shown only this once): {key}");
        }
        None => {}
    }
    Ok(())
}

/// Removes expired idempotency records, and history older than its retention in
/// small batches (see `hookline_store`'s `retention`), every tenth of the shorter
/// period (at most hourly, at least every second).
async fn retention_loop(
    store: Store,
    config: Config,
    clock: Arc<dyn Clock>,
    last_run: Arc<std::sync::atomic::AtomicI64>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let keys = Duration::from_secs(config.idempotency_retention_secs);
    let history = Duration::from_secs(config.history_retention_secs);
    let shortest = if history.is_zero() {
        keys
    } else {
        keys.min(history)
    };
    // How often a pass runs, on the server's clock; the loop looks at the clock
    // at least every second of real time, so a test clock moved on is noticed.
    let interval = (shortest / 10).clamp(Duration::from_secs(1), Duration::from_secs(3600));
    let look = interval.min(Duration::from_secs(1));
    let mut next_pass = clock.now();
    // Rows removed since the space was last reclaimed.
    let mut unreclaimed = 0u64;
    // Where each endpoint's walk of its sequence runs goes on from, and
    // passes since the walks last started from the oldest.
    let mut run_cursors = RunCursors::default();
    loop {
        let now = clock.now();
        if now < next_pass {
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(look) => continue,
            }
        }
        next_pass = now + interval;
        // Polling endpoints' deliveries nobody committed within their max age.
        match store
            .expire_polled(now, Duration::from_secs(config.max_age_secs))
            .await
        {
            Ok(0) => {}
            Ok(expired) => tracing::info!(expired, "uncommitted polled deliveries dead-lettered"),
            Err(error) => tracing::warn!(%error, "expiring polled deliveries failed"),
        }
        match store.purge_idempotency_keys(now - keys).await {
            Ok(0) => {}
            Ok(removed) => {
                unreclaimed += removed;
                tracing::info!(removed, "expired idempotency keys removed");
            }
            Err(error) => tracing::warn!(%error, "idempotency retention failed"),
        }
        if !history.is_zero() {
            let removed = purge_history(&store, now - history, &shutdown).await;
            unreclaimed += removed.deliveries + removed.attempts + removed.events;
            unreclaimed +=
                purge_sequence_runs(&store, now - history, &mut run_cursors, &shutdown).await;
        }
        if unreclaimed >= RECLAIM_AFTER_ROWS {
            match store.reclaim_space().await {
                Ok(()) => unreclaimed = 0,
                Err(error) => tracing::warn!(%error, "reclaiming the space of removed rows failed"),
            }
        }
        last_run.store(now.as_millis(), std::sync::atomic::Ordering::SeqCst);
    }
}

/// Deliveries a bulk replay moves back to pending per transaction.
const REPLAY_BATCH: u32 = 500;
/// A bulk replay worker's lease: another process resumes the job this long after
/// its worker stopped renewing it.
const REPLAY_LEASE: Duration = Duration::from_secs(30);

/// Works bulk replays (`hookline_store`'s `replays`): takes a running job no
/// process holds, replays it batch by batch (each batch renews the lease and
/// commits the progress), and looks for the next one every half second. Every
/// API process runs one, so a job outlives the process that started it.
async fn replay_loop(
    store: Store,
    clock: Arc<dyn Clock>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    loop {
        match store
            .replays()
            .take_replay_job(clock.now(), REPLAY_LEASE)
            .await
        {
            Ok(Some(job)) => {
                while !shutdown.is_cancelled() {
                    match store
                        .replays()
                        .work_replay_job(&job, clock.now(), REPLAY_BATCH, REPLAY_LEASE)
                        .await
                    {
                        Ok(Some(progress)) if progress.state == ReplayJobState::Running => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                        Ok(Some(progress)) => {
                            tracing::info!(job = %job, replayed = progress.replayed,
                                skipped = progress.skipped(), "bulk replay completed");
                            break;
                        }
                        // Cancelled (or finished by another process).
                        Ok(None) => break,
                        Err(error) => {
                            // The lease runs out and this or another process resumes it.
                            tracing::warn!(%error, job = %job, "bulk replay batch failed");
                            break;
                        }
                    }
                }
                if shutdown.is_cancelled() {
                    return Ok(());
                }
                continue;
            }
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, "looking for bulk replays failed"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

/// Operational notices published per group.
const NOTICE_BATCH: u32 = 100;

/// Publishes operational notices (`hookline_store`'s `operational`) into the
/// internal app, every half second: each under its own idempotency key, so a
/// notice published by two processes, or again after a crash before its delete,
/// is one event. Ordered per endpoint the notice is about.
async fn operational_loop(
    store: Store,
    dead_window_secs: u64,
    public_url: String,
    clock: Arc<dyn Clock>,
    last_pass: Arc<std::sync::atomic::AtomicI64>,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let window_ms = (dead_window_secs.saturating_mul(1000)).min(i64::MAX as u64) as i64;
    loop {
        let now = clock.now();
        let more = match publish_notices(&store, now, window_ms, &public_url).await {
            Ok(published) => {
                last_pass.store(now.as_millis(), std::sync::atomic::Ordering::SeqCst);
                published >= NOTICE_BATCH as usize
            }
            Err(error) => {
                tracing::warn!(%error, "publishing operational notices failed");
                false
            }
        };
        if more {
            continue;
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

/// A loop's last pass as a time (0: none yet).
fn beat(last: &std::sync::atomic::AtomicI64) -> Option<Timestamp> {
    match last.load(std::sync::atomic::Ordering::SeqCst) {
        0 => None,
        millis => Some(Timestamp::from_millis(millis)),
    }
}

/// One group of pending notices published and deleted; how many.
async fn publish_notices(
    store: &Store,
    now: Timestamp,
    window_ms: i64,
    public_url: &str,
) -> anyhow::Result<usize> {
    use hookline_store::{IdempotencyKey, NewEvent, PublishItem};
    let pending = store
        .operational()
        .pending(now, window_ms, NOTICE_BATCH)
        .await?;
    if pending.is_empty() {
        return Ok(0);
    }
    let app = hookline_core::operational::app_id();
    let mut told = Vec::with_capacity(pending.len());
    let mut apps = HashMap::new();
    for notice in &pending {
        told.push(told_data(store, notice, public_url, &mut apps).await?);
    }
    let items: Vec<PublishItem> = pending
        .iter()
        .zip(&told)
        .map(|(notice, data)| {
            let event_type = notice.kind.event_type();
            PublishItem {
                app: app.clone(),
                event: NewEvent {
                    id: hookline_core::ids::EventId::generate(),
                    event_type: event_type.to_owned(),
                    ordering_key: notice.data["endpoint_id"].as_str().map(str::to_owned),
                    body: hookline_core::model::envelope(event_type, now, data),
                    only_endpoint: None,
                },
                // The key names the notice, the fingerprint what it says: a notice
                // published again after a crash is the same request (one event);
                // counts that reached a window after it was told are another.
                key: Some(IdempotencyKey {
                    key: notice.key.clone(),
                    fingerprint: hookline_core::fingerprint::request_fingerprint(
                        "NOTICE",
                        &notice.key,
                        &notice.data,
                    ),
                }),
                now,
            }
        })
        .collect();
    let outcomes = hookline_api::publish::publish_group(&store.events(), None, &items).await?;
    // Refused (the key came with other counts before): its window was told, and
    // what is in it now is told with the open window (`settle`).
    let settled: Vec<_> = pending
        .into_iter()
        .zip(&outcomes)
        .map(|(notice, outcome)| {
            let told = !matches!(outcome, hookline_store::PublishOutcome::KeyReused);
            (notice, told)
        })
        .collect();
    let into = hookline_core::operational::window_of(now, 1000);
    store.operational().settle(&settled, into).await?;
    Ok(settled.len())
}

/// What a notice's event says: its data, and what people need to read it
/// (`hookline_core::notify`): the endpoint's URL and description, since when
/// it fails, a link into the app's portal, and the portal's language (which
/// the notice is worded in). Looked up when it is told, so
/// the notice's idempotency fingerprint stays its own data.
async fn told_data(
    store: &Store,
    notice: &hookline_store::PendingNotice,
    public_url: &str,
    apps: &mut HashMap<String, Option<hookline_store::App>>,
) -> anyhow::Result<serde_json::Value> {
    use hookline_core::ids::{AppId, EndpointId};
    let mut data = notice.data.clone();
    let Some(app) = data["app_id"].as_str().and_then(|a| AppId::parse(a).ok()) else {
        return Ok(data);
    };
    // Only what a customer can be told of, about a customer's endpoint (not an
    // audit of the internal app's own, whose URLs may be chat credentials).
    if !hookline_core::notify::EVENTS.contains(&notice.kind)
        || hookline_core::operational::is_internal(&app)
    {
        return Ok(data);
    }
    let endpoint = data["endpoint_id"]
        .as_str()
        .and_then(|e| EndpointId::parse(e).ok());
    if let Some(id) = &endpoint {
        if let Some(found) = store.endpoints().get_endpoint(&app, id).await? {
            // Without its query or fragment, where a receiver may keep a token.
            let url = found.url.split(['?', '#']).next().unwrap_or_default();
            data["endpoint_url"] = url.into();
            data["endpoint_description"] = found.description.into();
        }
        if notice.kind == hookline_core::operational::Kind::EndpointFailing {
            let health = store.endpoints().endpoint_health(&app, id).await?;
            let since = health
                .and_then(|h| h.breaker.failing_since)
                .unwrap_or(notice.at);
            data["since"] = since.to_rfc3339().into();
        }
    }
    let found = match apps.get(app.as_str()) {
        Some(found) => found.clone(),
        None => {
            let found = store.apps().find_app(app.as_str()).await?;
            apps.insert(app.as_str().to_owned(), found.clone());
            found
        }
    };
    if let Some(found) = found {
        let screen = match &endpoint {
            Some(id) => format!("/endpoints/{id}"),
            None => "/status".to_owned(),
        };
        data["portal_url"] = found.portal.link(public_url, app.as_str(), &screen).into();
        if let Some(language) = found.portal.language {
            data["language"] = language.tag().into();
        }
    }
    Ok(data)
}

/// How many removed rows make retention reclaim their space (`Store::reclaim_space`):
/// often enough that a steady state levels off, rarely enough that each vacuum
/// has something to do.
const RECLAIM_AFTER_ROWS: u64 = 10_000;

/// Batches of old history until a batch is not full; each is its own short
/// transaction, with a pause between them so delivery keeps the writer. Returns
/// what was removed.
async fn purge_history(
    store: &Store,
    cutoff: Timestamp,
    shutdown: &CancellationToken,
) -> hookline_store::Purged {
    let mut removed = hookline_store::Purged::default();
    while !shutdown.is_cancelled() {
        match store.purge_history(cutoff).await {
            Ok(batch) => {
                removed.deliveries += batch.deliveries;
                removed.attempts += batch.attempts;
                removed.events += batch.events;
                if !batch.full() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => {
                tracing::warn!(%error, "history retention failed");
                break;
            }
        }
    }
    if removed != hookline_store::Purged::default() {
        tracing::info!(
            deliveries = removed.deliveries,
            attempts = removed.attempts,
            events = removed.events,
            "old history removed"
        );
    }
    removed
}

/// Where retention's walks of endpoints' sequence runs go on from, pass to
/// pass: runs a dead delivery's event keeps are looked at again only every
/// [`RunCursors::RESTART_EVERY`] passes, not every pass.
#[derive(Default)]
struct RunCursors {
    after: std::collections::HashMap<hookline_core::ids::EndpointId, u64>,
    passes: u32,
}

impl RunCursors {
    const RESTART_EVERY: u32 = 24;
}

/// The runs of sequence numbers made before `cutoff` whose events are gone
/// (and deleted endpoints'), endpoint by endpoint, a batch at a time with a
/// pause between, until each walk reaches the runs made since; how many went.
async fn purge_sequence_runs(
    store: &Store,
    cutoff: Timestamp,
    cursors: &mut RunCursors,
    shutdown: &CancellationToken,
) -> u64 {
    cursors.passes += 1;
    if cursors.passes >= RunCursors::RESTART_EVERY {
        cursors.passes = 0;
        cursors.after.clear();
    }
    let endpoints = match store.endpoints_with_old_runs(cutoff).await {
        Ok(endpoints) => endpoints,
        Err(error) => {
            tracing::warn!(%error, "sequence number retention failed");
            return 0;
        }
    };
    let mut removed = 0;
    'endpoints: for endpoint in endpoints {
        let mut after = cursors.after.get(&endpoint.id).copied().unwrap_or(0);
        loop {
            if shutdown.is_cancelled() {
                break 'endpoints;
            }
            match store.purge_sequence_runs(&endpoint, cutoff, after).await {
                Ok((batch, next)) => {
                    removed += batch;
                    match next {
                        Some(next) => after = next,
                        None => break,
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(error) => {
                    tracing::warn!(%error, "sequence number retention failed");
                    break 'endpoints;
                }
            }
        }
        cursors.after.insert(endpoint.id, after);
    }
    if removed > 0 {
        tracing::info!(runs = removed, "old sequence number runs removed");
    }
    removed
}

/// `/readyz`'s check of the dispatch loop: it must have finished a turn within
/// a few of its longest idle waits (a turn stuck on the database, or a loop
/// that died, stops its heartbeat).
fn dispatcher_readiness(
    heartbeat: hookline_dispatch::Heartbeat,
    clock: Arc<dyn Clock>,
    config: hookline_dispatch::DispatcherConfig,
) -> hookline_api::Readiness {
    let stale_after = config.idle_poll * 3 + Duration::from_secs(10);
    Arc::new(move || match heartbeat.last_turn() {
        None => Err("the dispatcher has not finished its first turn".into()),
        Some(at) => {
            let age =
                Duration::from_millis((clock.now().as_millis() - at.as_millis()).max(0) as u64);
            if age > stale_after {
                Err(format!(
                    "the dispatcher's last turn was {}s ago (expected within {}s)",
                    age.as_secs(),
                    stale_after.as_secs()
                ))
            } else {
                Ok(())
            }
        }
    })
}

/// The process-wide Prometheus recorder (installed once, shared by in-process servers).
fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = metrics::recorder();
            let handle = recorder.handle();
            let _ = ::metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Logs to stderr (text, or JSON lines), and with `otlp_endpoint` set also
/// every span to an OpenTelemetry collector over OTLP/HTTP. Returns the
/// exporter's provider, to flush at exit.
fn init_tracing(
    config: &Config,
) -> anyhow::Result<Option<opentelemetry_sdk::trace::SdkTracerProvider>> {
    use std::io::IsTerminal as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let spans = if config.log_span_timings {
        tracing_subscriber::fmt::format::FmtSpan::CLOSE
    } else {
        tracing_subscriber::fmt::format::FmtSpan::NONE
    };
    let fmt = tracing_subscriber::fmt::layer()
        // Colour codes only for a person at a terminal, never into a file or a collector.
        .with_ansi(std::io::stderr().is_terminal())
        .with_span_events(spans)
        .with_writer(std::io::stderr);
    let fmt = if config.log_format.eq_ignore_ascii_case("json") {
        fmt.json().boxed()
    } else {
        fmt.boxed()
    };
    let (otel, provider) = match &config.otlp_endpoint {
        None => (None, None),
        Some(endpoint) => {
            use opentelemetry::trace::TracerProvider as _;
            use opentelemetry_otlp::WithExportConfig as _;
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_endpoint(endpoint.as_str())
                .build()
                .with_context(|| format!("the OTLP exporter for {endpoint}"))?;
            let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
                .with_batch_exporter(exporter)
                .with_resource(
                    opentelemetry_sdk::Resource::builder()
                        .with_service_name("hookline")
                        .build(),
                )
                .build();
            let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("hookline"));
            (Some(layer), Some(provider))
        }
    };
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init();
    Ok(provider)
}

/// SIGTERM or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
