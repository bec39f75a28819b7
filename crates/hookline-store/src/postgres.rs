//! PostgreSQL: the scale-out engine. Its pool, its migrations, and the SQL that
//! only PostgreSQL spells this way.
//!
//! One pool serves reads and writes; row locks and `SKIP LOCKED` keep nodes apart.

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::PgPool;

use crate::db::Kind;
use crate::{Result, StoreConfig, StoreError};

/// Settings of every Hookline session, sent when it connects: see
/// docs/architecture.md, "Plans that do not depend on statistics" and "A peer
/// frozen inside a transaction", and `crate::plans`.
pub(crate) const SESSION_SETTINGS: &[(&str, &str)] = &[
    // No Hookline transaction waits on anything but the database, so one that
    // sits idle this long belongs to a process that stopped (a freeze, a VM
    // pause, a stuck socket): the server ends it and its row locks go with it,
    // instead of every other process's turn waiting on them.
    ("idle_in_transaction_session_timeout", "5s"),
    // Plans are cached (`plan_cache_mode` as the server has it): every hot
    // statement's only plan is index probes and bounded walks, whatever the
    // statistics say, so a generic plan made while a table was empty stays good
    // once it has grown (tests/e2e/plans.rs checks each in three states).
    // Every statement is written for an index: whatever the statistics say, never
    // walk a whole table, or every match of a range, when an index path exists.
    ("enable_seqscan", "off"),
    ("enable_bitmapscan", "off"),
];

/// What the hot pool's sessions add to [`SESSION_SETTINGS`]: every statement
/// it runs is planned once per connection, generically, and never again. A
/// custom plan is made anew at every execution, and PostgreSQL keeps choosing
/// one for any statement over a batch (it cannot see an array parameter's
/// length, so it prices the generic plan for a hundred rows a batch): the
/// publish's one write spent 0.6 ms planning against 0.15 ms executing
/// (docs/engine-v4.md, "The hot pool"). The hot pool runs only the publish,
/// whose statements are written so that their generic plans are bounded
/// index accesses — `tests/e2e/plans.rs` explains every hot statement on a
/// hot connection. The rest keeps PostgreSQL's choice: the listings, whose
/// optional filters want a plan for the filters set, and the dispatcher's
/// turn, which ran 30–65 % slower with every plan generic against one slow
/// endpoint (its `fanout` deletes and shrinks took 100–790 ms).
pub(crate) const HOT_SETTINGS: &[(&str, &str)] = &[("plan_cache_mode", "force_generic_plan")];

/// The general pool and the hot pool ([`HOT_SETTINGS`]): `max_connections`
/// between them, half each (one each at the least).
pub(crate) async fn connect(config: &StoreConfig) -> Result<(PgPool, PgPool)> {
    let hot = (config.max_connections / 2).max(1);
    let general = config.max_connections.saturating_sub(hot).max(1);
    Ok((
        pool(config, general, &[]).await?,
        pool(config, hot, HOT_SETTINGS).await?,
    ))
}

async fn pool(config: &StoreConfig, size: u32, settings: &[(&str, &str)]) -> Result<PgPool> {
    let options: PgConnectOptions = config.database_url.parse()?;
    let options = options.options(SESSION_SETTINGS.iter().chain(settings).copied());
    let database = options.get_database().map(str::to_owned);
    PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(config.acquire_timeout)
        .connect_with(options)
        .await
        .map_err(|error| match &error {
            // invalid_catalog_name: the server is there, the database is not.
            sqlx::Error::Database(db) if db.code().as_deref() == Some("3D000") => {
                StoreError::MissingDatabase(database.unwrap_or_else(|| "postgres".into()))
            }
            _ => error.into(),
        })
}

pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

pub(crate) async fn migrate(pool: &PgPool) -> Result<()> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// A batch as the table `v`: one array parameter per column, zipped by `unnest`.
pub(crate) fn rows(first: usize, columns: &[(&str, Kind)]) -> String {
    let arrays: Vec<String> = columns
        .iter()
        .enumerate()
        .map(|(i, (_, kind))| {
            let kind = match kind {
                Kind::Text | Kind::LongText => "text",
                Kind::Int => "bigint",
                Kind::Bytes => "bytea",
            };
            format!("${}::{kind}[]", first + i)
        })
        .collect();
    let names: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    format!("unnest({}) AS v({})", arrays.join(", "), names.join(", "))
}
