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
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `sqlite://hookline.db` (embedded, the default) or `postgres://…`.
    pub database_url: String,
    /// Address the HTTP API listens on.
    pub listen: String,
    /// The absolute URL users reach this deployment at (portal links start with
    /// it), e.g. `https://hooks.example.com`; unset: `http://` + the address it listens on.
    pub public_url: Option<String>,
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
    /// An HTTP proxy every delivery goes through (`http://host:port`), so
    /// deliveries leave from its fixed addresses; unset: direct.
    pub egress_proxy: Option<String>,
    /// The SMTP server customers' e-mail notifications go through:
    /// `smtp://user@host:587?tls=required` (STARTTLS), `smtps://user@host:465`,
    /// or `smtp://host:25` (plain, for a relay on your own network). Unset: no
    /// e-mail channels (chat channels still work).
    pub smtp_url: Option<String>,
    /// A file holding the password of `smtp_url`'s user, so that neither the
    /// configuration nor the environment holds it (a password in `smtp_url`
    /// itself works too).
    pub smtp_password_file: Option<String>,
    /// Who notification e-mails are from: `Webhooks <notify@example.com>`
    /// (required with `smtp_url`).
    pub smtp_from: Option<String>,
    /// The program whose `transform-worker` command runs endpoints' jq
    /// transforms in their sandbox; unset: this `hookline` binary itself.
    pub transform_worker: Option<String>,
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
    /// This many failed attempts in a row make an operational `hookline.endpoint.failing`.
    pub operational_failing_after: u32,
    /// Dead deliveries are announced once per endpoint per window of this many seconds.
    pub operational_dead_window_secs: u64,
    /// On SIGTERM, how long in-flight requests may finish before their leases are released.
    pub drain_timeout_ms: u64,
    /// The longest a dispatcher sleeps without a wake-up (a safety net).
    pub idle_poll_ms: u64,
    /// Database connections per process (SQLite reads are capped at 8).
    pub db_max_connections: u32,
    /// How long a request waits for the database before it is answered 503
    /// `database_unavailable`: for a PostgreSQL connection (the server is away, or
    /// every connection is busy), or for SQLite's lock held by another process.
    pub db_acquire_timeout_ms: u64,
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
    /// Also log every span (of those `RUST_LOG` lets through) as it closes,
    /// with the time it was busy and idle: where the time of a request goes.
    pub log_span_timings: bool,
    /// Export every span to an OpenTelemetry collector over OTLP/HTTP (protobuf),
    /// e.g. `http://otel-collector:4318/v1/traces`; unset: no export.
    pub otlp_endpoint: Option<String>,
    /// What a publish of a type the event type catalog lacks, or with a payload
    /// its schema refuses, gets: `accept` (with a warning in the answer) or `refuse` (422).
    pub event_type_check: String,
    /// Label `hookline_events_accepted_total` by app (one series per app: only
    /// with a bounded number of apps).
    pub metrics_app_label: bool,
    /// How many endpoints get their own series of `hookline_attempts_total`
    /// (later ones share `endpoint="other"`); 0 adds no endpoint label.
    pub metrics_endpoint_cap: usize,
    /// Requests per second one API key may make (sustained); 0: unlimited.
    pub api_rate_limit_per_sec: u32,
    /// Requests one API key may make at once above its rate.
    pub api_rate_limit_burst: u32,
    /// Whether admin keys are rate limited too.
    pub api_rate_limit_admin: bool,
    /// Open HTTP connections one process accepts at most; more wait in the
    /// listen backlog until one closes.
    pub max_connections: usize,
    /// How long a client may take to send a request's headers (and how long an
    /// idle keep-alive connection stays open); slower ones are disconnected.
    pub header_read_timeout_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        let retry = RetryPolicy::default();
        let dispatch = DispatcherConfig::default();
        Self {
            database_url: "sqlite://hookline.db".into(),
            listen: "127.0.0.1:8080".into(),
            public_url: None,
            admin_token: None,
            master_key: None,
            master_key_file: None,
            previous_master_keys: String::new(),
            allow_private_destinations: false,
            egress_proxy: None,
            smtp_url: None,
            smtp_password_file: None,
            smtp_from: None,
            transform_worker: None,
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
            operational_failing_after: dispatch.breaker.failing_notice_after,
            operational_dead_window_secs: 60,
            drain_timeout_ms: dispatch.drain_timeout.as_millis() as u64,
            idle_poll_ms: dispatch.idle_poll.as_millis() as u64,
            db_max_connections: 16,
            db_acquire_timeout_ms: 5_000,
            sqlite_synchronous: "FULL".into(),
            sqlite_cache_mib: 8,
            idempotency_retention_secs: 24 * 3600,
            history_retention_secs: 30 * 86_400,
            log_format: "text".into(),
            log_span_timings: false,
            otlp_endpoint: None,
            event_type_check: "accept".into(),
            metrics_app_label: false,
            metrics_endpoint_cap: 0,
            api_rate_limit_per_sec: 1_000,
            api_rate_limit_burst: 2_000,
            api_rate_limit_admin: false,
            max_connections: 10_000,
            header_read_timeout_ms: 30_000,
        }
    }
}

/// `HOOKLINE_*` variables that are not configuration keys: the file, the
/// on-call CLI's URL and token, the benchmark scripts' binary, the test suite's.
const NOT_KEYS: &[&str] = &[
    "config",
    "url",
    "token",
    "bin",
    "test_postgres_url",
    "write_openapi",
    "fault_events",
    "fault_kill_ms",
    "fault_seed",
    "portal_screenshots",
];

/// A configuration that cannot be used, with the key and where its value came from.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration file {0} does not exist")]
    MissingFile(std::path::PathBuf),
    #[error("{0}")]
    Parse(Box<figment::Error>),
    #[error("configuration key `{key}` ({origin}): {problem}")]
    Invalid {
        key: &'static str,
        /// Where the value came from: the file, the environment, or the default.
        origin: String,
        problem: String,
    },
}

impl Config {
    /// Defaults ← `file` ← `HOOKLINE_*` environment, then checked: a file that
    /// does not exist, a key that is not one (`max_atempts`) or a value out of
    /// range is an error that names the key and where its value came from.
    pub fn load(file: Option<&Path>) -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Config::default()));
        if let Some(file) = file {
            if !file.is_file() {
                return Err(ConfigError::MissingFile(file.to_owned()));
            }
            figment = figment.merge(Toml::file(file));
        }
        let figment = figment.merge(Env::prefixed("HOOKLINE_").ignore(NOT_KEYS));
        let config: Config = figment
            .extract()
            .map_err(|error| ConfigError::Parse(Box::new(error)))?;
        config.validate().map_err(|(key, problem)| {
            let origin = figment
                .find_metadata(key)
                .map(|meta| match &meta.source {
                    Some(source) => format!("{} {source}", meta.name),
                    None => meta.name.to_string(),
                })
                .unwrap_or_else(|| "default".into());
            ConfigError::Invalid {
                key,
                origin,
                problem,
            }
        })?;
        Ok(config)
    }

    /// Every value in its range: the first key that is not, with what is wrong.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        fn at_least(
            key: &'static str,
            value: u64,
            least: u64,
        ) -> Result<(), (&'static str, String)> {
            if value < least {
                return Err((key, format!("must be at least {least}, not {value}")));
            }
            Ok(())
        }
        fn one_of(
            key: &'static str,
            value: &str,
            allowed: &[&str],
        ) -> Result<(), (&'static str, String)> {
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(value)) {
                return Err((key, format!("must be one of {allowed:?}, not {value:?}")));
            }
            Ok(())
        }
        let url = self.database_url.as_str();
        if !(url.starts_with("sqlite:")
            || url.starts_with("postgres://")
            || url.starts_with("postgresql://"))
        {
            return Err((
                "database_url",
                "must start with sqlite:, postgres:// or postgresql://".into(),
            ));
        }
        if let Some(public) = &self.public_url {
            let ok = (public.starts_with("http://") || public.starts_with("https://"))
                && !public.contains(['#', '?', ' ']);
            if !ok {
                return Err((
                    "public_url",
                    "must be an http:// or https:// URL without a query or fragment".into(),
                ));
            }
        }
        at_least(
            "operational_failing_after",
            u64::from(self.operational_failing_after),
            1,
        )?;
        at_least(
            "operational_dead_window_secs",
            self.operational_dead_window_secs,
            1,
        )?;
        at_least("db_acquire_timeout_ms", self.db_acquire_timeout_ms, 1)?;
        at_least("max_connections", self.max_connections as u64, 1)?;
        at_least("header_read_timeout_ms", self.header_read_timeout_ms, 1)?;
        if self.api_rate_limit_per_sec > 0 {
            at_least("api_rate_limit_burst", self.api_rate_limit_burst.into(), 1)?;
        }
        // The retry settings have the bounds an endpoint's overrides have.
        hookline_core::retry::RetryOverrides {
            retry_base_ms: Some(self.retry_base_ms),
            retry_cap_ms: Some(self.retry_cap_ms),
            max_attempts: Some(self.max_attempts),
            max_age_secs: Some(self.max_age_secs),
        }
        .check()
        .map_err(|error| (error.field, error.message))?;
        at_least("request_timeout_ms", self.request_timeout_ms, 1)?;
        at_least("max_payload_bytes", self.max_payload_bytes as u64, 1)?;
        at_least("lease_ms", self.lease_ms, 1)?;
        at_least("batch_size", self.batch_size.into(), 1)?;
        if self.batch_size > 10_000 {
            return Err((
                "batch_size",
                format!("must be at most 10000, not {}", self.batch_size),
            ));
        }
        at_least("max_in_flight", self.max_in_flight as u64, 1)?;
        at_least(
            "min_in_flight_per_endpoint",
            self.min_in_flight_per_endpoint as u64,
            1,
        )?;
        at_least(
            "max_in_flight_per_endpoint",
            self.max_in_flight_per_endpoint as u64,
            1,
        )?;
        at_least(
            "initial_in_flight_per_endpoint",
            self.initial_in_flight_per_endpoint as u64,
            1,
        )?;
        at_least(
            "breaker_failure_threshold",
            self.breaker_failure_threshold.into(),
            1,
        )?;
        at_least(
            "breaker_max_cooldown_ms",
            self.breaker_max_cooldown_ms,
            self.breaker_cooldown_ms,
        )
        .map_err(|(key, _)| {
            (
                key,
                format!(
                    "must be at least breaker_cooldown_ms ({})",
                    self.breaker_cooldown_ms
                ),
            )
        })?;
        at_least("idle_poll_ms", self.idle_poll_ms, 1)?;
        at_least("db_max_connections", self.db_max_connections.into(), 1)?;
        at_least("sqlite_cache_mib", self.sqlite_cache_mib.into(), 1)?;
        one_of(
            "sqlite_synchronous",
            &self.sqlite_synchronous,
            &["FULL", "NORMAL"],
        )?;
        one_of("log_format", &self.log_format, &["text", "json"])?;
        if let Some(proxy) = &self.egress_proxy {
            let parsed = reqwest::Url::parse(proxy)
                .map_err(|e| ("egress_proxy", format!("not a URL ({e}): {proxy}")))?;
            if parsed.scheme() != "http" || parsed.host_str().is_none() {
                return Err((
                    "egress_proxy",
                    format!("must be an http:// proxy URL with a host, not {proxy}"),
                ));
            }
        }
        if let Some(smtp) = &self.smtp_url {
            let parsed =
                reqwest::Url::parse(smtp).map_err(|e| ("smtp_url", format!("not a URL ({e})")))?;
            if !matches!(parsed.scheme(), "smtp" | "smtps") || parsed.host_str().is_none() {
                return Err((
                    "smtp_url",
                    "must be an smtp:// or smtps:// URL with a host".into(),
                ));
            }
            if self.smtp_from.is_none() {
                return Err(("smtp_from", "is required with smtp_url".into()));
            }
            if let Some(file) = &self.smtp_password_file {
                if parsed.username().is_empty() {
                    return Err((
                        "smtp_url",
                        "names no user for smtp_password_file's password".into(),
                    ));
                }
                std::fs::read_to_string(file).map_err(|e| {
                    (
                        "smtp_password_file",
                        format!("cannot be read ({e}): {file}"),
                    )
                })?;
            }
        }
        if let Some(endpoint) = &self.otlp_endpoint {
            if !(endpoint.starts_with("http://") || endpoint.starts_with("https://")) {
                return Err((
                    "otlp_endpoint",
                    format!("must be an http:// or https:// URL, not {endpoint:?}"),
                ));
            }
        }
        one_of(
            "event_type_check",
            &self.event_type_check,
            &["accept", "refuse"],
        )?;
        if self.metrics_endpoint_cap > 1000 {
            return Err((
                "metrics_endpoint_cap",
                format!("must be at most 1000, not {}", self.metrics_endpoint_cap),
            ));
        }
        Ok(())
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
            max_attempts: self.max_attempts,
            max_age: Duration::from_secs(self.max_age_secs),
            retry_after_cap: Duration::from_secs(self.retry_after_cap_secs),
        }
    }

    /// The adaptive per-endpoint limit: floor ≤ initial ≤ ceiling (a ceiling
    /// below the floor or the start lowers them: `max_in_flight_per_endpoint = 1`
    /// means one at a time, whatever the other two say).
    pub fn concurrency_policy(&self) -> ConcurrencyPolicy {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let ceiling = count(self.max_in_flight_per_endpoint);
        let floor = count(self.min_in_flight_per_endpoint).min(ceiling);
        ConcurrencyPolicy {
            floor,
            initial: count(self.initial_in_flight_per_endpoint).clamp(floor, ceiling),
            ceiling,
            ..ConcurrencyPolicy::default()
        }
    }

    /// The per-key request rate limit, unless `api_rate_limit_per_sec` is 0.
    pub fn rate_limit(&self) -> Option<hookline_api::RateLimit> {
        Some(hookline_api::RateLimit {
            per_sec: std::num::NonZeroU32::new(self.api_rate_limit_per_sec)?,
            burst: std::num::NonZeroU32::new(self.api_rate_limit_burst)?,
            admin: self.api_rate_limit_admin,
        })
    }

    pub fn dispatcher(&self) -> DispatcherConfig {
        DispatcherConfig {
            retry: self.retry_policy(),
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            lease: Duration::from_millis(self.lease_ms),
            batch_size: self.batch_size,
            max_in_flight: self.max_in_flight,
            concurrency: self.concurrency_policy(),
            breaker: BreakerPolicy {
                failure_threshold: self.breaker_failure_threshold,
                cooldown: Duration::from_millis(self.breaker_cooldown_ms),
                max_cooldown: Duration::from_millis(self.breaker_max_cooldown_ms),
                disable_after: Duration::from_secs(self.endpoint_disable_after_secs),
                failing_notice_after: self.operational_failing_after,
            },
            allow_private_destinations: self.allow_private_destinations,
            egress_proxy: self.egress_proxy.clone(),
            idle_poll: Duration::from_millis(self.idle_poll_ms),
            drain_timeout: Duration::from_millis(self.drain_timeout_ms),
            metrics_endpoint_cap: self.metrics_endpoint_cap,
            smtp: self.smtp(),
            transform_worker: self.transform_worker(),
            ..DispatcherConfig::default()
        }
    }

    /// The transform sandbox's worker program.
    pub fn transform_worker(&self) -> std::path::PathBuf {
        self.transform_worker
            .as_ref()
            .map_or_else(hookline_transform::default_worker, Into::into)
    }

    /// The SMTP server (its password file is read when the dispatcher starts,
    /// which fails if it cannot be).
    pub fn smtp(&self) -> Option<hookline_dispatch::mail::SmtpConfig> {
        Some(hookline_dispatch::mail::SmtpConfig {
            url: self.smtp_url.clone()?,
            password_file: self.smtp_password_file.clone(),
            from: self.smtp_from.clone()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, text: &str) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "hookline-config-{}-{name}.toml",
            std::process::id()
        ));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let path = std::path::Path::new("/nonexistent/hookline.toml");
        let error = Config::load(Some(path)).unwrap_err().to_string();
        assert_eq!(
            error,
            "configuration file /nonexistent/hookline.toml does not exist"
        );
    }

    #[test]
    fn an_unknown_key_is_an_error_naming_the_key_and_the_file() {
        let path = file("typo", "max_atempts = 3\n");
        let error = Config::load(Some(&path)).unwrap_err().to_string();
        assert!(error.contains("max_atempts"), "{error}");
        assert!(error.contains(&path.display().to_string()), "{error}");
        let _ = std::fs::remove_file(path);
    }

    #[test]
    fn smtp_needs_a_sender_and_takes_its_password_from_a_file() {
        let bad = |text: &str, key: &str| {
            let path = file(&format!("smtp-{key}"), text);
            let error = Config::load(Some(&path)).unwrap_err().to_string();
            assert!(error.contains(key), "{text}: {error}");
            let _ = std::fs::remove_file(path);
        };
        bad("smtp_url = \"smtp://mail.example:587\"\n", "smtp_from");
        bad(
            "smtp_url = \"https://mail.example\"\nsmtp_from = \"a@b.example\"\n",
            "smtp_url",
        );
        bad(
            "smtp_url = \"smtp://mail.example\"\nsmtp_from = \"a@b.example\"\nsmtp_password_file = \"/nonexistent/pw\"\n",
            "smtp_url",
        );
        let password = file("smtp-password", "s3cr3t\n");
        let config = Config {
            smtp_url: Some("smtp://notify@mail.example:587?tls=required".into()),
            smtp_from: Some("Webhooks <notify@example.com>".into()),
            smtp_password_file: Some(password.display().to_string()),
            ..Config::default()
        };
        config.validate().unwrap();
        let smtp = config.smtp().unwrap();
        assert_eq!(smtp.url, "smtp://notify@mail.example:587?tls=required");
        assert_eq!(smtp.password_file, config.smtp_password_file);
        assert_eq!(smtp.from, "Webhooks <notify@example.com>");
        // The password is read when the mailer is made (and never printed).
        hookline_dispatch::mail::Mailer::new(&smtp, Duration::from_secs(1)).unwrap();
        assert!(!format!("{:?}", config.dispatcher()).contains("s3cr3t"));
        let _ = std::fs::remove_file(password);
    }

    #[test]
    fn a_value_out_of_range_is_an_error_naming_the_key_and_the_file() {
        for (text, key) in [
            ("max_attempts = 0\n", "max_attempts"),
            ("batch_size = 20000\n", "batch_size"),
            ("log_format = \"yaml\"\n", "log_format"),
            ("retry_base_ms = 5000\nretry_cap_ms = 10\n", "retry_cap_ms"),
            ("max_attempts = 1001\n", "max_attempts"),
            ("max_age_secs = 0\n", "max_age_secs"),
            (
                "max_in_flight_per_endpoint = 0\n",
                "max_in_flight_per_endpoint",
            ),
            ("database_url = \"mysql://x\"\n", "database_url"),
        ] {
            let path = file(key, text);
            let error = Config::load(Some(&path)).unwrap_err().to_string();
            assert!(
                error.starts_with(&format!(
                    "configuration key `{key}` (TOML file {})",
                    path.display()
                )),
                "{text}: {error}"
            );
            let _ = std::fs::remove_file(path);
        }
    }

    #[test]
    fn the_defaults_are_valid() {
        assert_eq!(Config::default().validate(), Ok(()));
    }
}
