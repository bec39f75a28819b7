//! SQLite: the embedded engine. Its pools, its migrations, and the SQL that only
//! SQLite spells this way.
//!
//! Writes go through a pool of exactly one connection, so writers queue in the
//! pool instead of failing with `SQLITE_BUSY`; reads use their own pool (WAL mode
//! lets them run beside the writer).

use std::sync::Arc;

use sqlx::sqlite::SqlitePoolOptions;
use sqlx::{Executor, SqlitePool};

use crate::db::Kind;
use crate::{Result, StoreConfig};

/// The reader and writer pools.
pub(crate) async fn connect(config: &StoreConfig) -> Result<(SqlitePool, SqlitePool)> {
    let url = url_creating_file(&config.database_url);
    let synchronous = match config.sqlite_synchronous.to_ascii_uppercase().as_str() {
        "NORMAL" => "NORMAL",
        _ => "FULL",
    };
    // The writer touches every hot index on every state change: give it a page
    // cache that holds them (SQLite's default is 2 MiB); readers need less.
    // Another process holding the file's lock is waited for as long as a
    // PostgreSQL connection would be; then the request fails as unavailable.
    let busy_ms = config.acquire_timeout.as_millis();
    let pragmas = |cache_kib: u32| -> Arc<str> {
        format!(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = {synchronous}; \
             PRAGMA busy_timeout = {busy_ms}; PRAGMA foreign_keys = OFF; \
             PRAGMA cache_size = -{cache_kib}; PRAGMA temp_store = MEMORY;"
        )
        .into()
    };
    let options = |max: u32, pragmas: Arc<str>| {
        SqlitePoolOptions::new()
            .max_connections(max)
            .acquire_timeout(config.acquire_timeout)
            // An in-process file has nothing to ping: the default check costs a
            // round trip to the connection's thread on every transaction.
            .test_before_acquire(false)
            // A connection given back still inside a transaction is closed, never
            // reused: when a COMMIT fails (a full disk) SQLite may roll the
            // transaction back on its own, the driver's ROLLBACK then fails, and
            // it would count the connection as in a transaction for good — every
            // later transaction a savepoint inside one that never commits, each
            // answered as committed (tests/e2e/outage.rs, the full disk).
            .after_release(|conn, _| {
                Box::pin(async move {
                    if !sqlx::Connection::is_in_transaction(conn) {
                        return Ok(true);
                    }
                    // A dropped transaction's rollback may still be queued on the
                    // connection's thread: let it run, then look again.
                    sqlx::Connection::ping(conn).await?;
                    Ok(!sqlx::Connection::is_in_transaction(conn))
                })
            })
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
    Ok((reader, writer))
}

pub(crate) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

pub(crate) async fn migrate(pool: &SqlitePool) -> Result<()> {
    MIGRATOR.run(pool).await?;
    Ok(())
}

/// `sqlite://file.db` → `sqlite://file.db?mode=rwc`, so a fresh start needs no setup.
fn url_creating_file(url: &str) -> String {
    if url.contains("mode=") || url.contains(":memory:") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&mode=rwc")
    } else {
        format!("{url}?mode=rwc")
    }
}

/// A batch as the table `v`: a JSON parameter `$first`, an array of rows, each an
/// array of the row's values in column order, where a bytes or long text column
/// takes two places — its value's start and length in the blob parameter
/// `$first + 1`, which holds the batch's bytes end to end (see `db::Batch`).
///
/// A row of more than one place is materialized first (`rs`): `json_each`
/// renders a row's array as new text every time its `value` is read, so read
/// straight from `json_each` a row of n columns is rendered and parsed n times;
/// read from `rs` it is rendered once and parsed once (SQLite caches the parse).
/// For the attempts INSERT (15 columns) that halves the statement's
/// instructions (callgrind: 112k against 56k per row).
pub(crate) fn rows(first: usize, columns: &[(&str, Kind)]) -> String {
    let places: usize = columns
        .iter()
        .map(|(_, kind)| match kind {
            Kind::Bytes | Kind::LongText => 2,
            Kind::Text | Kind::Int => 1,
        })
        .sum();
    let row = if places == 1 { "value" } else { "cells" };
    let mut at = 0;
    let values: Vec<String> = columns
        .iter()
        .map(|(name, kind)| {
            let value = match kind {
                Kind::Bytes | Kind::LongText => {
                    let (start, length) = (at, at + 1);
                    at += 1;
                    let slice = format!(
                        "substr(${blob}, {row} ->> {start}, {row} ->> {length})",
                        blob = first + 1
                    );
                    match kind {
                        Kind::LongText => format!("CAST({slice} AS TEXT) AS {name}"),
                        _ => format!("{slice} AS {name}"),
                    }
                }
                Kind::Text | Kind::Int => format!("{row} ->> {at} AS {name}"),
            };
            at += 1;
            value
        })
        .collect();
    if places == 1 {
        format!(
            "(SELECT {} FROM json_each(${first})) AS v",
            values.join(", ")
        )
    } else {
        format!(
            "(WITH rs AS MATERIALIZED (SELECT value AS cells FROM json_each(${first})) \
             SELECT {} FROM rs) AS v",
            values.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_reads_bytes_and_long_text_from_the_blob_at_their_two_places() {
        let table = rows(
            2,
            &[
                ("id", Kind::Text),
                ("body", Kind::Bytes),
                ("n", Kind::Int),
                ("response", Kind::LongText),
            ],
        );
        assert_eq!(
            table,
            "(WITH rs AS MATERIALIZED (SELECT value AS cells FROM json_each($2)) \
             SELECT cells ->> 0 AS id, substr($3, cells ->> 1, cells ->> 2) AS body, \
             cells ->> 3 AS n, CAST(substr($3, cells ->> 4, cells ->> 5) AS TEXT) AS response \
             FROM rs) AS v"
        );
    }

    #[test]
    fn a_batch_of_one_place_per_row_reads_json_each_directly() {
        assert_eq!(
            rows(1, &[("id", Kind::Text)]),
            "(SELECT value ->> 0 AS id FROM json_each($1)) AS v"
        );
    }
}
