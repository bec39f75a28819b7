//! All of Hookline's SQL.
//!
//! [`Store`] is the one way the API and the dispatcher touch the database. It
//! holds the pools, the engine and the sealing keys; its statements are split
//! by what they persist into borrowed parts — [`Apps`] (apps, keys, portal
//! sessions), [`Catalog`] (event types), [`Endpoints`], [`Events`] (events and
//! deliveries, publishing, a dispatcher's [`Turn`]), [`Replays`] and
//! [`Listings`] — reached as `store.endpoints()`, `store.events()`, …; what
//! is the whole database's (migrations, readiness, wake-ups, retention,
//! gauges, plans) stays on `Store`.
//! It speaks to SQLite (the embedded default) and PostgreSQL (scale-out)
//! through their native sqlx drivers (`db`): each statement is written once
//! with `$n` placeholders and the same columns on both schemas (times as
//! integer milliseconds); what only one engine spells its way — pools, batch
//! parameters (`unnest` arrays or `json_each`), row locks — lives in its
//! dialect module, `sqlite` or `postgres`.
//!
//! # Layout
//!
//! - `db`: the query interface over the two native drivers: pools,
//!   transactions, rows, batches, engine-dependent statements.
//! - `sqlite`, `postgres`: each engine's pools, migrations and dialect.
//! - [`records`]: the rows the store hands out and takes in.
//! - `apps`, `endpoints`, `keys`, `event_types`: management data (the last: the event type catalog).
//! - `secrets`: endpoint secrets sealed at rest under the master key, and its rotation.
//! - `publish`: the outbox write in steps ([`Publish`]), idempotency keys.
//! - `snapshots`: apps and their endpoints as publishes read them, kept in memory.
//! - `sequences`: each endpoint's gap-proof numbering of its deliveries, and
//!   finding a range of them.
//! - `events`: reading events.
//! - `listing`: the dashboard's filtered, keyset-paginated listings.
//! - `replays`: bulk replays of the DLQ, as jobs worked in batches.
//! - `retention`: removing old succeeded deliveries, their attempts, events
//!   and idempotency records in small batches.
//! - `claim`: a dispatcher turn's transaction ([`Turn`]): leasing due rows by lane
//!   or endpoint, reading and locking their endpoints, executing the claim plan.
//! - `complete`: attempts, next states, breakers and ordered partitions after sending.
//! - `deliveries`: reading deliveries and attempts, the DLQ, release, replay.
//! - `wake`: telling dispatchers that work is due, in process and across nodes.

mod apps;
mod claim;
mod complete;
mod db;
mod deliveries;
mod endpoints;
mod event_types;
mod events;
mod fanout;
mod gauges;
mod incidents;
mod keys;
mod listing;
mod operational;
pub mod plans;
mod portal;
mod postgres;
mod publish;
pub mod records;
mod replays;
mod retention;
mod secrets;
mod sequences;
mod snapshots;
mod sqlite;
mod timeline;
mod wake;

use std::str::FromStr;
use std::sync::Arc;

use db::{Pool, Row};

pub use claim::{ClaimEndpoint, Leased, Turn};
pub use complete::Written;
pub use event_types::MAX_EVENT_TYPES;
pub use gauges::{LaneGauges, QueueGauges, FAILING_AFTER, GAUGE_CAP};
pub use incidents::{EndpointTrouble, WAITING_CAP};
pub use operational::{PendingNotice, Source as NoticeSource};
pub use portal::{PortalExchange, Renewed, SESSION_CAP, SESSION_KEY_NAME};
pub use publish::{Committed, Draft, Publish, PublishItem, MAX_GROUP};
pub use records::*;
pub use replays::{ReplayJob, StartedReplay};
pub use retention::{Purged, RETENTION_BATCH};
pub use sequences::{CommittedCursor, NumberedEndpoint, MAX_SEQUENCE_RANGE};
pub use snapshots::AppSnapshot;
pub use timeline::{StoredMark, Timeline};

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
    /// The app a write is for does not exist (deleted while it was under way).
    #[error("no such app")]
    AppNotFound,
    /// A stored value that does not parse: a corrupt row or a schema mismatch.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The PostgreSQL server answers but has no database of this name.
    #[error(
        "database `{0}` does not exist on this PostgreSQL server: create it with \
         `createdb {0}` (or `CREATE DATABASE \"{0}\";` in psql), then start again"
    )]
    MissingDatabase(String),
    #[error("unsupported database URL `{0}` (use sqlite://… or postgres://…)")]
    UnsupportedUrl(String),
    /// A master key that cannot open this database's endpoint secrets.
    #[error("master key: {0}")]
    Sealing(String),
    /// The store was closed while a request waited for its commit.
    #[error("the store is shutting down")]
    Closed,
}

impl StoreError {
    /// Whether the database is away for now — unreachable, restarting, out of
    /// connections, busy, or out of space — rather than refusing this request:
    /// the same request may succeed once it is back.
    pub fn is_unavailable(&self) -> bool {
        let Self::Database(error) = self else {
            return false;
        };
        match error {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::WorkerCrashed => true,
            sqlx::Error::Database(db) => {
                let Some(code) = db.code() else {
                    return false;
                };
                if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
                    // SQLite's (extended) result codes: busy, locked, I/O error, full.
                    code.parse::<u32>()
                        .is_ok_and(|code| [5, 6, 10, 13].contains(&(code & 0xff)))
                } else {
                    // PostgreSQL's SQLSTATE (often all digits: never read as
                    // SQLite's numbers): connection exceptions (08…), the server
                    // shutting down or starting (57P01–57P03), out of disk or of
                    // connections (53100, 53300), this session ended for sitting
                    // idle in its transaction (25P03: the process was frozen).
                    code.starts_with("08")
                        || ["57P01", "57P02", "57P03", "53100", "53300", "25P03"]
                            .contains(&code.as_ref())
                }
            }
            _ => false,
        }
    }
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
    /// The master keys endpoint secrets are sealed with at rest.
    pub keyring: hookline_core::sealing::Keyring,
    /// How long a statement waits for the database — a PostgreSQL connection (a
    /// new one when the server is away), or SQLite's lock held by another
    /// process — before it fails as [`StoreError::is_unavailable`].
    pub acquire_timeout: std::time::Duration,
}

impl StoreConfig {
    pub fn new(database_url: impl Into<String>) -> Self {
        Self {
            database_url: database_url.into(),
            max_connections: 16,
            sqlite_synchronous: "FULL".into(),
            sqlite_cache_mib: 8,
            acquire_timeout: std::time::Duration::from_secs(5),
            // A fresh key: secrets written with it open only in this process.
            // The binary always passes the deployment's keyring.
            keyring: hookline_core::sealing::Keyring::new(
                hookline_core::sealing::MasterKey::generate(),
                Vec::new(),
            ),
        }
    }
}

/// The handle to Hookline's database. Cheap to clone; clones share pools.
#[derive(Clone)]
pub struct Store {
    engine: Engine,
    /// Reads (and, on PostgreSQL, writes too: the general pool).
    reader: Pool,
    /// Writes. On SQLite a single connection: the one writer SQLite allows.
    writer: Pool,
    /// The publish: on PostgreSQL a pool of its own whose sessions plan each
    /// statement once, generically (`postgres::HOT_SETTINGS`); on SQLite the writer.
    hot: Pool,
    wake: Arc<wake::Wake>,
    /// The `fanout` leases this process holds (`fanout`).
    fanout: Arc<fanout::FanoutLeases>,
    /// Seals and opens endpoint secrets (at rest they are never in the clear).
    secrets: Arc<secrets::Secrets>,
    /// Apps and their endpoints as publishes read them (`snapshots`).
    snapshots: Arc<snapshots::Snapshots>,
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
        let url = config.database_url.as_str();
        let engine = if url.starts_with("sqlite:") {
            Engine::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Engine::Postgres
        } else {
            return Err(StoreError::UnsupportedUrl(url.to_owned()));
        };
        tracing::Span::current().record("engine", tracing::field::debug(engine));
        let (reader, writer, hot) = match engine {
            Engine::Sqlite => {
                let (reader, writer) = sqlite::connect(config).await?;
                let writer = Pool::Sqlite(writer);
                (Pool::Sqlite(reader), writer.clone(), writer)
            }
            Engine::Postgres => {
                let (general, hot) = postgres::connect(config).await?;
                let general = Pool::Postgres(general);
                (general.clone(), general, Pool::Postgres(hot))
            }
        };
        let store = Self {
            engine,
            reader,
            writer,
            hot,
            wake: Arc::new(wake::Wake::new(engine)),
            fanout: Arc::default(),
            secrets: Arc::new(secrets::Secrets::new(config.keyring.clone())),
            snapshots: Arc::default(),
            database_url: url.into(),
        };
        Ok(store)
    }

    /// Applies every pending migration of this engine's schema, then checks that
    /// the master key opens this database's secrets ([`StoreError::Sealing`]
    /// if not) and seals any stored in the clear.
    #[tracing::instrument(skip_all)]
    pub async fn migrate(&self) -> Result<()> {
        match &self.writer {
            Pool::Sqlite(pool) => sqlite::migrate(pool).await?,
            Pool::Postgres(pool) => postgres::migrate(pool).await?,
        }
        self.endpoints().secure_secrets().await
    }

    pub fn engine(&self) -> Engine {
        self.engine
    }

    /// Whether the database answers a trivial query (for `/readyz`).
    pub async fn ping(&self) -> Result<()> {
        self.engine.query("SELECT 1").execute(&self.reader).await?;
        Ok(())
    }

    /// How many of this binary's migrations the database has not applied (for
    /// `/readyz`: a node must not serve a schema older than its code).
    pub async fn migrations_behind(&self) -> Result<usize> {
        let applied: Vec<i64> = self
            .engine
            .query("SELECT version FROM _sqlx_migrations WHERE success")
            .fetch_all(&self.reader)
            .await?
            .iter()
            .map(|row| row.try_get::<i64, _>("version"))
            .collect::<Result<_, _>>()?;
        let migrator = match self.engine {
            Engine::Sqlite => &sqlite::MIGRATOR,
            Engine::Postgres => &postgres::MIGRATOR,
        };
        Ok(migrator
            .iter()
            .filter(|m| !m.migration_type.is_down_migration() && !applied.contains(&m.version))
            .count())
    }

    /// Closes the pools, waiting for connections in use to come back.
    pub async fn close(&self) {
        self.hot.close().await;
        self.writer.close().await;
        self.reader.close().await;
    }
}

/// One part of the store, named for what it persists: a borrowed handle with
/// that part's statements (`store.endpoints().create_endpoint(…)`). Each
/// part's methods live in the module of its rows; what they share (pools,
/// engine, secrets) is the [`Store`]'s.
macro_rules! parts {
    ($($(#[$doc:meta])* $part:ident => $accessor:ident;)+) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy)]
        pub struct $part<'a>(&'a Store);

        impl std::ops::Deref for $part<'_> {
            type Target = Store;
            fn deref(&self) -> &Store {
                self.0
            }
        }

        impl std::fmt::Debug for $part<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_tuple(stringify!($part)).field(&self.0.engine).finish()
            }
        }

        impl Store {
            $(#[$doc])*
            pub fn $accessor(&self) -> $part<'_> {
                $part(self)
            }
        }
    )+};
}

parts! {
    /// Apps, their API keys and portal sessions (`apps`, `keys`, `portal`).
    Apps => apps;
    /// The event type catalog (`event_types`).
    Catalog => catalog;
    /// Endpoints: settings, sealed secrets, health and delivery counts (`endpoints`, `secrets`).
    Endpoints => endpoints;
    /// Events and their deliveries: publishing, reading one, replaying or resending
    /// one, releasing leases, recording attempts (`publish`, `events`, `deliveries`, `complete`).
    Events => events;
    /// Bulk replays of the DLQ, as jobs worked in batches (`replays`).
    Replays => replays;
    /// Operational webhooks' notices and the internal app (`operational`).
    Operational => operational;
    /// The dashboard's filtered, keyset-paginated listings (`listing`, and the
    /// listing methods of `events` and `deliveries`).
    Listings => listings;
}

/// Reads a text column and parses it into a domain enum or id.
impl Store {
    /// The row of `table` with this `id` that belongs to `app` (`columns`
    /// selected), read on the reader: every "one X of an app" lookup.
    async fn app_row(
        &self,
        columns: &str,
        table: &str,
        app: &hookline_core::ids::AppId,
        id: &str,
    ) -> Result<Option<Row>> {
        let sql = format!("SELECT {columns} FROM {table} WHERE id = $1 AND app_id = $2");
        self.engine
            .query(&sql)
            .bind(id)
            .bind(app.as_str())
            .fetch_optional(&self.reader)
            .await
    }
}

fn parse_column<T: FromStr>(row: &Row, column: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    let text: String = row.try_get(column)?;
    text.parse()
        .map_err(|e: T::Err| StoreError::Corrupt(format!("{column}: {e}")))
}

/// Like [`parse_column`] for a nullable column.
fn parse_optional_column<T: FromStr>(row: &Row, column: &str) -> Result<Option<T>>
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

#[cfg(test)]
mod unavailable_tests {
    use super::StoreError;

    #[test]
    fn a_database_that_is_away_is_unavailable_and_a_refusal_is_not() {
        for away in [
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
        ] {
            assert!(StoreError::Database(away).is_unavailable());
        }
        assert!(!StoreError::Database(sqlx::Error::RowNotFound).is_unavailable());
        assert!(!StoreError::Conflict("taken").is_unavailable());
        assert!(!StoreError::Corrupt("x".into()).is_unavailable());
    }
}
