//! The Hookline under test: a fresh store, starting and stopping Hookline
//! (in-process, as a child process, or not at all with `--url`), and reading
//! its CPU time and peak RSS from `/proc`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hookline::Role;

use crate::cli::{Args, StoreKind};

/// A database made for this run only.
pub struct FreshStore {
    pub url: String,
    cleanup: Cleanup,
}

enum Cleanup {
    File(PathBuf),
    Database { admin_url: String, name: String },
}

impl FreshStore {
    pub async fn create(args: &Args, run_id: &str) -> anyhow::Result<Self> {
        let name = format!("hookline_bench_{run_id}");
        match args.store {
            StoreKind::Sqlite => {
                let path = PathBuf::from(format!("/tmp/hookline-bench-{run_id}.db"));
                Ok(Self {
                    url: format!("sqlite://{}", path.display()),
                    cleanup: Cleanup::File(path),
                })
            }
            StoreKind::Postgres => {
                use sqlx::Connection;
                let admin_url = args.postgres_url.clone();
                let mut conn =
                    sqlx::PgConnection::connect(&admin_url)
                        .await
                        .with_context(|| {
                            format!("connecting to PostgreSQL at {}", redact(&admin_url))
                        })?;
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .with_context(|| format!("creating database {name}"))?;
                let _ = conn.close().await;
                let base = admin_url
                    .rsplit_once('/')
                    .map(|(base, _)| base)
                    .unwrap_or(&admin_url);
                Ok(Self {
                    url: format!("{base}/{name}"),
                    cleanup: Cleanup::Database { admin_url, name },
                })
            }
        }
    }

    /// Where the data is, for messages (no password).
    pub fn describe(&self) -> String {
        match &self.cleanup {
            Cleanup::File(path) => path.display().to_string(),
            Cleanup::Database { name, .. } => format!("database {name}"),
        }
    }

    /// How much the data takes on disk now: the SQLite file with its WAL, or
    /// PostgreSQL's `pg_database_size`.
    pub async fn size_bytes(&self) -> anyhow::Result<u64> {
        match &self.cleanup {
            Cleanup::File(path) => Ok(["", "-wal"]
                .iter()
                .filter_map(|suffix| std::fs::metadata(format!("{}{suffix}", path.display())).ok())
                .map(|m| m.len())
                .sum()),
            Cleanup::Database { admin_url, name } => {
                use sqlx::Connection;
                let mut conn = sqlx::PgConnection::connect(admin_url).await?;
                let size: i64 = sqlx::query_scalar("SELECT pg_database_size($1)")
                    .bind(name)
                    .fetch_one(&mut conn)
                    .await?;
                let _ = conn.close().await;
                Ok(size.max(0) as u64)
            }
        }
    }

    /// PostgreSQL: turns autovacuum (and with it auto-analyze) off for every table
    /// of the fresh database, as on a server where it is off or lagging; returns how
    /// many tables. Call it once Hookline has migrated.
    pub async fn disable_autovacuum(&self) -> anyhow::Result<usize> {
        use sqlx::Connection;
        anyhow::ensure!(
            matches!(self.cleanup, Cleanup::Database { .. }),
            "autovacuum is PostgreSQL's"
        );
        let mut conn = sqlx::PgConnection::connect(&self.url).await?;
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT relname::text FROM pg_class \
             WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace",
        )
        .fetch_all(&mut conn)
        .await?;
        for table in &tables {
            sqlx::query(&format!(
                "ALTER TABLE \"{table}\" SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)"
            ))
            .execute(&mut conn)
            .await?;
        }
        let _ = conn.close().await;
        Ok(tables.len())
    }

    /// PostgreSQL: the server's `autovacuum` setting.
    pub async fn server_autovacuum(&self) -> anyhow::Result<Option<String>> {
        use sqlx::Connection;
        let Cleanup::Database { admin_url, .. } = &self.cleanup else {
            return Ok(None);
        };
        let mut conn = sqlx::PgConnection::connect(admin_url).await?;
        let setting: String = sqlx::query_scalar("SELECT current_setting('autovacuum')")
            .fetch_one(&mut conn)
            .await?;
        let _ = conn.close().await;
        Ok(Some(setting))
    }

    /// Removes the file (with its WAL) or drops the database.
    pub async fn remove(self) -> anyhow::Result<()> {
        match self.cleanup {
            Cleanup::File(path) => {
                for suffix in ["", "-wal", "-shm"] {
                    let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
                }
                Ok(())
            }
            Cleanup::Database { admin_url, name } => {
                use sqlx::Connection;
                let mut conn = sqlx::PgConnection::connect(&admin_url).await?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .execute(&mut conn)
                    .await
                    .with_context(|| format!("dropping database {name}"))?;
                let _ = conn.close().await;
                Ok(())
            }
        }
    }
}

/// How Hookline runs in this benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// `--spawn BIN`: a child process, measured alone.
    Spawn,
    /// `Server::start` inside this process.
    InProcess,
    /// `--url`: someone else's process.
    External,
}

impl Mode {
    pub fn of(args: &Args) -> Self {
        if args.url.is_some() {
            Mode::External
        } else if args.spawn.is_some() {
            Mode::Spawn
        } else {
            Mode::InProcess
        }
    }
}

/// A running Hookline.
pub struct Hookline {
    /// `http://127.0.0.1:PORT`
    pub base_url: String,
    process: Process,
}

enum Process {
    Embedded(hookline::Server),
    Child {
        child: tokio::process::Child,
        pid: u32,
    },
    External,
}

impl Hookline {
    /// An instance someone else runs.
    pub fn external(base_url: &str) -> Self {
        Self {
            base_url: base_url.trim_end_matches('/').to_owned(),
            process: Process::External,
        }
    }

    /// Starts Hookline in `role` on `database_url`, in-process or (with `--spawn`) as a child.
    /// Returns once the API answers `/healthz`.
    pub async fn start(
        args: &Args,
        database_url: &str,
        token: &str,
        role: Role,
        log: &Path,
    ) -> anyhow::Result<Self> {
        let this = match &args.spawn {
            None => {
                let config = hookline::Config {
                    database_url: database_url.to_owned(),
                    listen: "127.0.0.1:0".into(),
                    admin_token: Some(token.to_owned()),
                    allow_private_destinations: true,
                    ..overrides(args)
                };
                let server = hookline::Server::start(config, role)
                    .await
                    .context("starting Hookline in-process")?;
                let addr = server.addr;
                Self {
                    base_url: format!("http://{addr}"),
                    process: Process::Embedded(server),
                }
            }
            Some(bin) => {
                let port = free_port()?;
                let mut command = tokio::process::Command::new(bin);
                command.arg(match role {
                    Role::Serve => "serve",
                    Role::Api => "api",
                    Role::Dispatcher => "dispatcher",
                });
                // Only what we set: a HOOKLINE_* variable from the calling shell must not
                // change the run.
                for (key, _) in std::env::vars_os() {
                    if key.to_string_lossy().starts_with("HOOKLINE_") {
                        command.env_remove(&key);
                    }
                }
                command
                    .env("HOOKLINE_DATABASE_URL", database_url)
                    .env("HOOKLINE_LISTEN", format!("127.0.0.1:{port}"))
                    .env("HOOKLINE_ADMIN_TOKEN", token)
                    .env("HOOKLINE_ALLOW_PRIVATE_DESTINATIONS", "true");
                if let Some(value) = args.max_in_flight {
                    command.env("HOOKLINE_MAX_IN_FLIGHT", value.to_string());
                }
                if let Some(value) = args.max_in_flight_per_endpoint {
                    command.env("HOOKLINE_MAX_IN_FLIGHT_PER_ENDPOINT", value.to_string());
                }
                if let Some(value) = args.batch_size {
                    command.env("HOOKLINE_BATCH_SIZE", value.to_string());
                }
                if let Some(value) = args.retry_base_ms {
                    command.env("HOOKLINE_RETRY_BASE_MS", value.to_string());
                }
                if let Some(value) = &args.sqlite_synchronous {
                    command.env("HOOKLINE_SQLITE_SYNCHRONOUS", value);
                }
                if let Some(value) = args.sqlite_cache_mib {
                    command.env("HOOKLINE_SQLITE_CACHE_MIB", value.to_string());
                }
                if let Some(value) = args.history_retention_secs {
                    command.env("HOOKLINE_HISTORY_RETENTION_SECS", value.to_string());
                }
                let log_file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .with_context(|| format!("opening {}", log.display()))?;
                command
                    .stdin(Stdio::null())
                    .stdout(log_file.try_clone()?)
                    .stderr(log_file)
                    .kill_on_drop(true);
                let child = command
                    .spawn()
                    .with_context(|| format!("starting {}", bin.display()))?;
                let pid = child.id().context("the child exited at once")?;
                Self {
                    base_url: format!("http://127.0.0.1:{port}"),
                    process: Process::Child { child, pid },
                }
            }
        };
        Ok(this)
    }

    /// Waits for `/healthz` (a child process needs a moment to migrate and bind).
    pub async fn wait_ready(&mut self, http: &reqwest::Client, log: &Path) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Process::Child { child, .. } = &mut self.process {
                if let Some(status) = child.try_wait()? {
                    bail!(
                        "hookline exited during startup ({status}); its log:\n{}",
                        tail(log)
                    );
                }
            }
            let url = format!("{}/healthz", self.base_url);
            if let Ok(response) = http.get(&url).send().await {
                if response.status().is_success() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!("hookline did not answer {url} within 60 s");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The process whose CPU and memory this run reports, if any.
    pub fn measured_pid(&self) -> Option<Pid> {
        match &self.process {
            Process::Embedded(_) => Some(Pid::SelfProcess),
            Process::Child { pid, .. } => Some(Pid::Child(*pid)),
            Process::External => None,
        }
    }

    /// Stops gracefully: SIGTERM to a child (SIGKILL after 30 s), `Server::stop` in-process.
    pub async fn stop(self) -> anyhow::Result<()> {
        match self.process {
            Process::Embedded(server) => server.stop().await,
            Process::Child { mut child, pid } => {
                let _ = std::process::Command::new("kill")
                    .args(["-TERM", &pid.to_string()])
                    .status();
                match tokio::time::timeout(Duration::from_secs(30), child.wait()).await {
                    Ok(status) => {
                        let status = status?;
                        anyhow::ensure!(status.success(), "hookline exited with {status}");
                        Ok(())
                    }
                    Err(_) => {
                        child.kill().await?;
                        bail!("hookline did not stop within 30 s of SIGTERM; killed")
                    }
                }
            }
            Process::External => Ok(()),
        }
    }
}

/// Hookline's defaults with this run's overrides.
fn overrides(args: &Args) -> hookline::Config {
    let mut config = hookline::Config::default();
    if let Some(value) = args.max_in_flight {
        config.max_in_flight = value;
    }
    if let Some(value) = args.max_in_flight_per_endpoint {
        config.max_in_flight_per_endpoint = value;
    }
    if let Some(value) = args.batch_size {
        config.batch_size = value;
    }
    if let Some(value) = args.retry_base_ms {
        config.retry_base_ms = value;
    }
    if let Some(value) = &args.sqlite_synchronous {
        config.sqlite_synchronous = value.clone();
    }
    if let Some(value) = args.sqlite_cache_mib {
        config.sqlite_cache_mib = value;
    }
    if let Some(value) = args.history_retention_secs {
        config.history_retention_secs = value;
    }
    config
}

/// The effective settings of a managed Hookline that this tool can override.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Effective {
    pub max_in_flight: usize,
    pub max_in_flight_per_endpoint: usize,
    pub batch_size: u32,
    pub retry_base_ms: u64,
    pub sqlite_synchronous: &'static str,
    pub sqlite_cache_mib: u32,
}

pub fn effective_settings(args: &Args) -> Effective {
    let config = overrides(args);
    Effective {
        max_in_flight: config.max_in_flight,
        max_in_flight_per_endpoint: config.max_in_flight_per_endpoint,
        batch_size: config.batch_size,
        retry_base_ms: config.retry_base_ms,
        sqlite_synchronous: if config.sqlite_synchronous.eq_ignore_ascii_case("NORMAL") {
            "NORMAL"
        } else {
            "FULL"
        },
        sqlite_cache_mib: config.sqlite_cache_mib,
    }
}

/// A port that was free a moment ago (the child binds it).
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// The last lines of a log file, for error messages.
pub fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// A database URL without its password.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            let user = userinfo.split(':').next().unwrap_or("");
            format!("{}://{user}@{}", &url[..scheme], &url[at + 1..])
        }
        _ => url.to_owned(),
    }
}

/// User + system CPU seconds so far of every process named `postgres` on this
/// machine (the local PostgreSQL server: its postmaster, backends and workers).
/// Processes that ended meanwhile drop out, so take differences over short spans.
pub fn postgres_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|name| name.trim_end() == "postgres")
        })
        .filter_map(|pid| Pid::Child(pid).cpu_seconds().ok())
        .sum()
}

/// What `/proc/<pid>/stat` says of a process's CPU, in seconds.
struct Stat {
    parent: u32,
    own: f64,
    /// Its children's that it has waited for.
    reaped: f64,
}

/// Which process `/proc` is read for.
#[derive(Debug, Clone, Copy)]
pub enum Pid {
    SelfProcess,
    Child(u32),
}

impl Pid {
    pub fn dir(self) -> String {
        match self {
            Pid::SelfProcess => "/proc/self".into(),
            Pid::Child(pid) => format!("/proc/{pid}"),
        }
    }

    /// User + system CPU seconds so far (all threads), from `/proc/<pid>/stat`.
    pub fn cpu_seconds(self) -> anyhow::Result<f64> {
        Ok(self.stat()?.own)
    }

    /// [`Self::cpu_seconds`] with its child processes' (Hookline's transform
    /// workers): those it has reaped, and those alive now.
    pub fn cpu_seconds_with_children(self) -> anyhow::Result<f64> {
        let stat = self.stat()?;
        let Pid::Child(pid) = self else {
            return Ok(stat.own + stat.reaped);
        };
        let alive: f64 = std::fs::read_dir("/proc")?
            .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter_map(|child| Pid::Child(child).stat().ok())
            .filter(|child| child.parent == pid)
            .map(|child| child.own + child.reaped)
            .sum();
        Ok(stat.own + stat.reaped + alive)
    }

    fn stat(self) -> anyhow::Result<Stat> {
        /// `sysconf(_SC_CLK_TCK)`, which is 100 on every Linux this runs on.
        const TICKS_PER_SECOND: f64 = 100.0;
        let stat = std::fs::read_to_string(format!("{}/stat", self.dir()))?;
        // The command name (field 2) is in parentheses and may hold spaces: split after it.
        let after_name = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest)
            .context("unexpected /proc/<pid>/stat")?;
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        // fields[0] is field 3 (state), fields[1] field 4 (the parent);
        // utime, stime, cutime and cstime are fields 14 to 17.
        let field = |n: usize| -> anyhow::Result<u64> {
            Ok(fields
                .get(n - 3)
                .context("a short /proc/<pid>/stat")?
                .parse()?)
        };
        Ok(Stat {
            parent: field(4)? as u32,
            own: (field(14)? + field(15)?) as f64 / TICKS_PER_SECOND,
            reaped: (field(16)? + field(17)?) as f64 / TICKS_PER_SECOND,
        })
    }

    /// Peak resident set size in bytes (`VmHWM`).
    pub fn peak_rss_bytes(self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("{}/status", self.dir()))?;
        let line = status
            .lines()
            .find(|line| line.starts_with("VmHWM:"))
            .context("no VmHWM in /proc/<pid>/status")?;
        let kib: u64 = line
            .split_whitespace()
            .nth(1)
            .context("malformed VmHWM")?
            .parse()?;
        Ok(kib * 1024)
    }

    /// Resets the peak RSS to the current RSS (`echo 5 > clear_refs`), so the peak covers
    /// only what follows. Returns false where the kernel does not allow it.
    pub fn reset_peak_rss(self) -> bool {
        std::fs::write(format!("{}/clear_refs", self.dir()), "5").is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_self_is_readable() {
        assert!(Pid::SelfProcess.cpu_seconds().unwrap() >= 0.0);
        assert!(Pid::SelfProcess.peak_rss_bytes().unwrap() > 0);
    }

    #[test]
    fn redact_hides_only_the_password() {
        assert_eq!(
            redact("postgres://u:secret@127.0.0.1/db"),
            "postgres://u@127.0.0.1/db"
        );
        assert_eq!(
            redact("postgres://postgres@127.0.0.1:5432/postgres"),
            "postgres://postgres@127.0.0.1:5432/postgres"
        );
    }
}
