//! All of Hookline's SQL.
//!
//! [`Store`] is the one way the API and the dispatcher touch the database.
//! It speaks to SQLite (the embedded default) and PostgreSQL (scale-out)
//! through sqlx's `Any` driver with **one set of queries**: both schemas use
//! the same columns and types (times as integer milliseconds, booleans as
//! 0/1, `$n` placeholders), and the few statements that must differ — the
//! claim, which uses `FOR UPDATE SKIP LOCKED` on PostgreSQL — branch on
//! [`Engine`] at the call site.
//!
//! # Layout
//!
//! - [`records`]: the rows the store hands out and takes in.
//! - `apps`, `endpoints`, `keys`: management data.
//! - `publish`: the outbox transaction, idempotency keys, group commit.
//! - `events`: reading events.
//! - `retention`: removing old succeeded deliveries, their attempts, events
//!   and idempotency records in small batches.
//! - `claim`: claiming due work by lanes under a lease, with admission (breaker, rate limit).
//! - `complete`: attempts, next states, breakers and ordered partitions after sending.
//! - `deliveries`: reading deliveries and attempts, the DLQ, release, replay.
//! - [`dispatcher`]: the two small traits through which a claim reads the
//!   dispatcher's room and a publish hands fresh deliveries to it (the
//!   dispatcher, in `hookline-dispatch`, owns that state).
//! - `wake`: telling dispatchers that work is due, in process and across nodes.
//!
//! # Concurrency
//!
//! PostgreSQL: one pool; row locks and `SKIP LOCKED` keep nodes apart.
//! SQLite: writes go through a pool of exactly one connection, so writers queue
//! in the pool instead of failing with `SQLITE_BUSY`; reads use their own pool
//! (WAL mode lets them run beside the writer).

mod apps;
mod claim;
mod complete;
mod deliveries;
pub mod dispatcher;
mod endpoints;
mod events;
mod keys;
mod publish;
pub mod records;
mod retention;
mod wake;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Executor, Row};

pub use dispatcher::{ClaimRoom, Inbox, RoomView, Unlimited};
pub use publish::{PublishItem, Render, MAX_GROUP};
pub use records::*;
pub use retention::{Purged, RETENTION_BATCH};

/// A store error. Callers map `NotFound`/`Conflict` to user errors; the rest is internal.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A unique constraint the caller can act on (e.g. an app `uid` already taken).
    #[error("{0}")]
    Conflict(&'static str),
    /// A stored value that does not parse: a corrupt row or a schema mismatch.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("unsupported database URL `{0}` (use sqlite://… or postgres://…)")]
    UnsupportedUrl(String),
    /// The store was closed while a request waited for its commit.
    #[error("the store is shutting down")]
    Closed,
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Which database engine a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Sqlite,
    Postgres,
}

/// How to open a store.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// `sqlite://path.db` or `postgres://…`.
    pub database_url: String,
    /// Connections in the (PostgreSQL, or SQLite read) pool.
    pub max_connections: u32,
    /// SQLite `synchronous`: `FULL` (default, every commit durable) or `NORMAL`.
    pub sqlite_synchronous: String,
    /// SQLite page cache of the writer, in MiB; each reader connection gets an eighth.
    pub sqlite_cache_mib: u32,
}

impl StoreConfig {
    pub fn new(database_url: impl Into<String>) -> Self {
        Self {
            database_url: database_url.into(),
            max_connections: 16,
            sqlite_synchronous: "FULL".into(),
            sqlite_cache_mib: 32,
        }
    }
}

/// The handle to Hookline's database. Cheap to clone; clones share pools.
#[derive(Clone)]
pub struct Store {
    engine: Engine,
    /// Reads (and, on PostgreSQL, writes too).
    reader: AnyPool,
    /// Writes. On SQLite a single connection: the one writer SQLite allows.
    writer: AnyPool,
    wake: Arc<wake::Wake>,
    /// The group-commit queue for publishes (set right after construction:
    /// its committer tasks hold clones of the store).
    group: Arc<std::sync::OnceLock<publish::GroupCommit>>,
    /// This process's dispatcher, if one takes fresh deliveries straight from publishes.
    handoff: Arc<std::sync::Mutex<Option<Arc<dyn Inbox>>>>,
    /// Where the claim's round-robin pass over endpoints continues.
    fair_cursor: Arc<std::sync::Mutex<Option<hookline_core::ids::EndpointId>>>,
    database_url: Arc<str>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("engine", &self.engine)
            .finish()
    }
}

impl Store {
    /// Connects (creating an SQLite file if missing). Does not migrate.
    #[tracing::instrument(skip_all, fields(engine))]
    pub async fn connect(config: &StoreConfig) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let url = config.database_url.as_str();
        let engine = if url.starts_with("sqlite:") {
            Engine::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Engine::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        };
        tracing::Span::current().record("engine", tracing::field::debug(engine));
        let (reader, writer) = match engine {
            Engine::Sqlite => {
                let url = sqlite_url_creating_file(url);
                let synchronous = match config.sqlite_synchronous.to_ascii_uppercase().as_str() {
                    "NORMAL" => "NORMAL",
                    _ => "FULL",
                };
                // The writer touches every hot index on every state change: give it a page
                // cache that holds them (SQLite's default is 2 MiB); readers need less.
                let pragmas = |cache_kib: u32| -> Arc<str> {
                    format!(
                        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; \
                         PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = OFF; \
                         PRAGMA cache_size = -{cache_kib}; PRAGMA temp_store = MEMORY;"
                    )
                    .into()
                };
                let options = |max: u32, pragmas: Arc<str>| {
                    AnyPoolOptions::new()
                        .max_connections(max)
                        // An in-process file has nothing to ping: the default check costs a
                        // round trip to the connection's thread on every transaction.
                        .test_before_acquire(false)
                        .after_connect(move |conn, _| {
                            let pragmas = pragmas.clone();
                            Box::pin(async move {
                                conn.execute(&*pragmas).await?;
                                Ok(())
                            })
                        })
                };
                let cache_kib = config.sqlite_cache_mib.max(1) * 1024;
                let writer = options(1, pragmas(cache_kib)).connect(&url).await?;
                let reader = options(config.max_connections.clamp(1, 8), pragmas(cache_kib / 8))
                    .connect(&url)
                    .await?;
                (reader, writer)
            }
            Engine::Postgres => {
                let pool = AnyPoolOptions::new()
                    .max_connections(config.max_connections.max(2))
                    .acquire_timeout(Duration::from_secs(30))
                    .connect(url)
                    .await?;
                (pool.clone(), pool)
            }
        };
        let store = Self {
            engine,
            reader,
            writer,
            wake: Arc::new(wake::Wake::new(engine)),
            group: Arc::default(),
            handoff: Arc::default(),
            fair_cursor: Arc::default(),
            database_url: url.into(),
        };
        // SQLite has one writer, so one committer; PostgreSQL commits groups in parallel.
        let committers = match engine {
            Engine::Sqlite => 1,
            Engine::Postgres => 4,
        };
        let _ = store
            .group
            .set(publish::GroupCommit::start(store.clone(), committers));
        Ok(store)
    }

    /// Applies every pending migration of this engine's schema.
    #[tracing::instrument(skip_all)]
    pub async fn migrate(&self) -> Result<()> {
        match self.engine {
            Engine::Sqlite => {
                sqlx::migrate!("../../migrations/sqlite")
                    .run(&self.writer)
                    .await?
            }
            Engine::Postgres => {
                sqlx::migrate!("../../migrations/postgres")
                    .run(&self.writer)
                    .await?
            }
        }
        Ok(())
    }

    /// From now on, publishes through this store (and its clones) hand fresh
    /// deliveries they can to the dispatcher behind `inbox` (see [`Inbox`]).
    pub fn accept_handoffs(&self, inbox: Arc<dyn Inbox>) {
        *self.handoff.lock().expect("handoff poisoned") = Some(inbox);
    }

    /// Publishes stop handing deliveries off (the dispatcher is draining).
    pub fn stop_handoffs(&self) {
        *self.handoff.lock().expect("handoff poisoned") = None;
    }

    fn handoff(&self) -> Option<Arc<dyn Inbox>> {
        self.handoff.lock().expect("handoff poisoned").clone()
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Whether the database answers a trivial query (for `/readyz`).
    pub async fn ping(&self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&self.reader).await?;
        Ok(())
    }

    /// Closes the pools, waiting for connections in use to come back.
    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

/// `sqlite://file.db` → `sqlite://file.db?mode=rwc`, so a fresh start needs no setup.
fn sqlite_url_creating_file(url: &str) -> String {
    if url.contains("mode=") || url.contains(":memory:") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// Reads a text column and parses it into a domain enum or id.
fn parse_column<T: FromStr>(row: &AnyRow, column: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    let text: String = row.try_get(column)?;
    text.parse()
        .map_err(|e: T::Err| StoreError::Corrupt(format!("{column}: {e}")))
}

/// Like [`parse_column`] for a nullable column.
fn parse_optional_column<T: FromStr>(row: &AnyRow, column: &str) -> Result<Option<T>>
where
    T::Err: std::fmt::Display,
{
    let text: Option<String> = row.try_get(column)?;
    text.map(|t| {
        t.parse()
            .map_err(|e: T::Err| StoreError::Corrupt(format!("{column}: {e}")))
    })
    .transpose()
}

impl Engine {
    /// A statement with many values, as this engine should prepare it. Written
    /// with `$1, $2, …` in textual order, each exactly once, it becomes SQLite's
    /// anonymous `?` there: SQLite resolves `$n` names through a list, so
    /// preparing and binding N of them costs O(N²) — with 100-row `INSERT`s that
    /// was a third of the SQLite writer's time (perf: `sqlite3_bind_parameter_name`).
    pub(crate) fn in_order(self, sql: String) -> String {
        if self == Engine::Postgres {
            return sql;
        }
        let mut out = String::with_capacity(sql.len());
        let mut expected = 1usize;
        let mut rest = sql.as_str();
        while let Some(at) = rest.find('$') {
            out.push_str(&rest[..at]);
            let digits = rest[at + 1..]
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len() - at - 1);
            if rest[at + 1..at + 1 + digits].parse::<usize>().ok() != Some(expected) {
                // Still correct as written, only slower; tests run every statement on SQLite.
                debug_assert!(false, "in_order: placeholders must be $1, $2, … in order");
                return sql;
            }
            out.push('?');
            expected += 1;
            rest = &rest[at + 1 + digits..];
        }
        out.push_str(rest);
        out
    }
}

/// Builds `$start, $start+1, …` for `count` values (a dynamic `IN (…)` list).
fn placeholders(start: usize, count: usize) -> String {
    (start..start + count)
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_makes_numbered_placeholders_anonymous_on_sqlite_only() {
        let sql = format!(
            "INSERT INTO t VALUES ({}), ({})",
            placeholders(1, 2),
            placeholders(3, 2)
        );
        assert_eq!(
            Engine::Sqlite.in_order(sql.clone()),
            "INSERT INTO t VALUES (?, ?), (?, ?)"
        );
        assert_eq!(Engine::Postgres.in_order(sql.clone()), sql);
        // $10 is one placeholder, not $1 followed by a 0.
        let ten = format!("SELECT {}", placeholders(1, 10));
        assert_eq!(Engine::Sqlite.in_order(ten).matches('?').count(), 10);
    }

    #[test]
    #[should_panic(expected = "in_order")]
    fn in_order_refuses_reordered_or_repeated_placeholders() {
        // Anonymous `?` would bind these in the wrong order: debug builds stop here.
        Engine::Sqlite.in_order("SELECT $2, $1".to_owned());
    }
}
