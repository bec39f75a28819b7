//! PostgreSQL: the scale-out engine. Its pool, its migrations, and the SQL that
//! only PostgreSQL spells this way.
//!
//! One pool serves reads and writes; row locks and `SKIP LOCKED` keep nodes apart.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::PgPool;

use crate::db::Kind;
use crate::{Result, StoreConfig};

pub(crate) async fn connect(config: &StoreConfig) -> Result<PgPool> {
    Ok(PgPoolOptions::new()
        .max_connections(config.max_connections.max(2))
        .acquire_timeout(Duration::from_secs(30))
        .connect(&config.database_url)
        .await?)
}

pub(crate) async fn migrate(pool: &PgPool) -> Result<()> {
    sqlx::migrate!("../../migrations/postgres")
        .run(pool)
        .await?;
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
