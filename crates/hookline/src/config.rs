//! Configuration: built-in defaults, then a TOML file, then `HOOKLINE_*` environment variables.
//!
//! Every key is documented in `docs/configuration.md`; the environment name
//! of a key is `HOOKLINE_` + the key in upper case (`database_url` →
//! `HOOKLINE_DATABASE_URL`).

use std::path::Path;
use std::time::Duration;

use figment::providers::{Env, Format, Serialized, Toml};
use figment::Figment;
use hookline_core::breaker::BreakerPolicy;
use hookline_core::concurrency::ConcurrencyPolicy;
use hookline_core::retry::RetryPolicy;
use hookline_dispatch::DispatcherConfig;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Config {
    /// `sqlite://hookline.db` (embedded, the default) or `postgres://…`.
    pub database_url: String,
    /// Address the HTTP API listens on.
    pub listen: String,
    /// Bootstrap admin key. Unset on a first start: one is generated and printed once.
    pub admin_token: Option<String>,
    /// The master key endpoint secrets are sealed with at rest (base64 of 32 bytes).
    /// Unset: read from `master_key_file`, generated there on the first start.
    pub master_key: Option<String>,
    /// Where the master key is kept when `master_key` is unset; unset: beside the
    /// SQLite database file (`hookline.master-key`), or in the working directory.
    pub master_key_file: Option<String>,
    /// During a master key rotation: the keys secrets may still be sealed with,
    /// comma-separated; they open secrets but never seal new ones.
    pub previous_master_keys: String,
    /// Allow endpoints on loopback/private/link-local addresses (tests, on-prem).
    pub allow_private_destinations: bool,
    /// Full-jitter backoff: the first retry waits up to this long…
    pub retry_base_ms: u64,
    /// …each later one up to twice the previous ceiling, never more than this.
    pub retry_cap_ms: u64,
    /// Attempts per delivery round before the DLQ.
    pub max_attempts: u32,
    /// A delivery older than this (since creation or replay) is not retried again.
    pub max_age_secs: u64,
    /// The longest `Retry-After` honoured.
    pub retry_after_cap_secs: u64,
    /// Timeout of one whole attempt.
    pub request_timeout_ms: u64,
    /// Largest event payload accepted (serialised JSON bytes); larger is 413.
    pub max_payload_bytes: usize,
    /// How long a claimed delivery is leased to one dispatcher.
    pub lease_ms: u64,
    /// Deliveries claimed per round trip.
    pub batch_size: u32,
    /// Concurrent requests per dispatcher process.
    pub max_in_flight: usize,
    /// The ceiling of the adaptive limit of concurrent requests per dispatcher
    /// process to any one endpoint.
    pub max_in_flight_per_endpoint: usize,
    /// Its floor: an endpoint that fails or slows down keeps at least this many.
    pub min_in_flight_per_endpoint: usize,
    /// Where a newly seen endpoint's limit starts.
    pub initial_in_flight_per_endpoint: usize,
    /// Consecutive failed attempts that open an endpoint's circuit breaker.
    pub breaker_failure_threshold: u32,
    /// The breaker's first cool-down; each failed probe doubles it…
    pub breaker_cooldown_ms: u64,
    /// …up to this.
    pub breaker_max_cooldown_ms: u64,
    /// An endpoint failing without any success for this long is disabled.
    pub endpoint_disable_after_secs: u64,
    /// On SIGTERM, how long in-flight requests may finish before their leases are released.
    pub drain_timeout_ms: u64,
    /// The longest a dispatcher sleeps without a wake-up (a safety net).
    pub idle_poll_ms: u64,
    /// Database connections per process (SQLite reads are capped at 8).
    pub db_max_connections: u32,
    /// SQLite `synchronous`: `FULL` (each commit durable) or `NORMAL`.
    pub sqlite_synchronous: String,
    /// SQLite page cache of the writer connection, in MiB (each reader gets an eighth).
    pub sqlite_cache_mib: u32,
    /// How long `Idempotency-Key` records are kept.
    pub idempotency_retention_secs: u64,
    /// How long succeeded deliveries (with their attempts) and events without
    /// deliveries are kept; 0 keeps them forever.
    pub history_retention_secs: u64,
    /// `text` or `json`.
    pub log_format: String,
    /// What a publish of a type the event type catalog lacks, or with a payload
    /// its schema refuses, gets: `accept` (with a warning in the answer) or `refuse` (422).
    pub event_type_check: String,
}

impl Default for Config {
    fn default() -> Self {
        let retry = RetryPolicy::default();
        let dispatch = DispatcherConfig::default();
        Self {
            database_url: "sqlite://hookline.db".into(),
            listen: "127.0.0.1:8080".into(),
            admin_token: None,
            master_key: None,
            master_key_file: None,
            previous_master_keys: String::new(),
            allow_private_destinations: false,
            retry_base_ms: retry.base.as_millis() as u64,
            retry_cap_ms: retry.cap.as_millis() as u64,
            max_attempts: retry.max_attempts,
            max_age_secs: retry.max_age.as_secs(),
            retry_after_cap_secs: retry.retry_after_cap.as_secs(),
            request_timeout_ms: dispatch.request_timeout.as_millis() as u64,
            max_payload_bytes: 256 * 1024,
            lease_ms: dispatch.lease.as_millis() as u64,
            batch_size: dispatch.batch_size,
            max_in_flight: dispatch.max_in_flight,
            max_in_flight_per_endpoint: dispatch.concurrency.ceiling as usize,
            min_in_flight_per_endpoint: dispatch.concurrency.floor as usize,
            initial_in_flight_per_endpoint: dispatch.concurrency.initial as usize,
            breaker_failure_threshold: dispatch.breaker.failure_threshold,
            breaker_cooldown_ms: dispatch.breaker.cooldown.as_millis() as u64,
            breaker_max_cooldown_ms: dispatch.breaker.max_cooldown.as_millis() as u64,
            endpoint_disable_after_secs: dispatch.breaker.disable_after.as_secs(),
            drain_timeout_ms: dispatch.drain_timeout.as_millis() as u64,
            idle_poll_ms: dispatch.idle_poll.as_millis() as u64,
            db_max_connections: 16,
            sqlite_synchronous: "FULL".into(),
            sqlite_cache_mib: 32,
            idempotency_retention_secs: 24 * 3600,
            history_retention_secs: 30 * 86_400,
            log_format: "text".into(),
            event_type_check: "accept".into(),
        }
    }
}

impl Config {
    /// Defaults ← `file` (if it exists) ← `HOOKLINE_*` environment.
    pub fn load(file: Option<&Path>) -> Result<Self, Box<figment::Error>> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            figment = figment.merge(Toml::file(file));
        }
        figment
            .merge(Env::prefixed("HOOKLINE_"))
            .extract()
            .map_err(Box::new)
    }

    /// Where the master key file is (when `master_key` is unset).
    pub fn master_key_path(&self) -> std::path::PathBuf {
        if let Some(file) = &self.master_key_file {
            return file.into();
        }
        let sqlite_file = self
            .database_url
            .strip_prefix("sqlite://")
            .or_else(|| self.database_url.strip_prefix("sqlite:"))
            .map(|rest| rest.split('?').next().unwrap_or(rest));
        match sqlite_file {
            Some(file) if file != ":memory:" && !file.is_empty() => Path::new(file)
                .parent()
                .unwrap_or(Path::new(""))
                .join("hookline.master-key"),
            _ => "hookline.master-key".into(),
        }
    }

    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            base: Duration::from_millis(self.retry_base_ms),
            cap: Duration::from_millis(self.retry_cap_ms),
            max_attempts: self.max_attempts.max(1),
            max_age: Duration::from_secs(self.max_age_secs),
            retry_after_cap: Duration::from_secs(self.retry_after_cap_secs),
        }
    }

    /// The adaptive per-endpoint limit: floor ≤ initial ≤ ceiling, each at least 1.
    pub fn concurrency_policy(&self) -> ConcurrencyPolicy {
        let count = |n: usize| u32::try_from(n.max(1)).unwrap_or(u32::MAX);
        let ceiling = count(self.max_in_flight_per_endpoint);
        let floor = count(self.min_in_flight_per_endpoint).min(ceiling);
        ConcurrencyPolicy {
            floor,
            initial: count(self.initial_in_flight_per_endpoint).clamp(floor, ceiling),
            ceiling,
            ..ConcurrencyPolicy::default()
        }
    }

    pub fn dispatcher(&self) -> DispatcherConfig {
        DispatcherConfig {
            retry: self.retry_policy(),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            // A lease of 0 would make leased rows due again within the same claim.
            lease: Duration::from_millis(self.lease_ms.max(1)),
            batch_size: self.batch_size.max(1),
            max_in_flight: self.max_in_flight.max(1),
            concurrency: self.concurrency_policy(),
            breaker: BreakerPolicy {
                failure_threshold: self.breaker_failure_threshold.max(1),
                cooldown: Duration::from_millis(self.breaker_cooldown_ms),
                max_cooldown: Duration::from_millis(
                    self.breaker_max_cooldown_ms.max(self.breaker_cooldown_ms),
                ),
                disable_after: Duration::from_secs(self.endpoint_disable_after_secs),
            },
            allow_private_destinations: self.allow_private_destinations,
            idle_poll: Duration::from_millis(self.idle_poll_ms.max(1)),
            drain_timeout: Duration::from_millis(self.drain_timeout_ms),
            ..DispatcherConfig::default()
        }
    }
}
