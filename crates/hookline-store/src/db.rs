//! The two native sqlx drivers behind one small query interface.
//!
//! Every statement is written once, with `$n` placeholders, and runs on
//! `sqlx::Sqlite` or `sqlx::Postgres` — never through `Any`. Values are encoded
//! straight into the driver's own argument buffer at `bind` (no intermediate
//! copy), and rows are decoded on demand from the driver's own row type.
//!
//! What differs between the engines is not spelled at call sites: a statement
//! whose text depends on the engine is a [`Sql`], built once per engine from the
//! fragments the dialect modules (`sqlite`, `postgres`) provide, such as
//! [`Engine::rows`] (a batch of rows as a table) and [`Engine::lock`].
//!
//! # Batches
//!
//! A statement over many rows binds a [`Batch`]: one array per column on
//! PostgreSQL (read back with `unnest`), one JSON array of rows on SQLite (read
//! back with `json_each`; bytes travel beside it in one blob, see `to_sqlite`). Its text is the same for 1 row and for 1,000, so each
//! statement is prepared once per connection and stays in the statement cache.

use std::io::Write as _;
use std::sync::OnceLock;

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query as SqlxQuery;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Decode, Encode, PgPool, Postgres, Row as _, Sqlite, SqlitePool, Transaction, Type};

use crate::{postgres, sqlite, Engine, Result};

/// A connection pool of one engine.
#[derive(Clone)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Pool {
    pub(crate) async fn begin(&self) -> Result<Tx> {
        Ok(match self {
            Pool::Sqlite(pool) => Tx::Sqlite(pool.begin().await?),
            Pool::Postgres(pool) => Tx::Postgres(pool.begin().await?),
        })
    }

    pub(crate) async fn close(&self) {
        match self {
            Pool::Sqlite(pool) => pool.close().await,
            Pool::Postgres(pool) => pool.close().await,
        }
    }
}

/// An open transaction of one engine.
pub(crate) enum Tx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
}

impl Tx {
    pub(crate) fn engine(&self) -> Engine {
        match self {
            Tx::Sqlite(_) => Engine::Sqlite,
            Tx::Postgres(_) => Engine::Postgres,
        }
    }

    pub(crate) async fn commit(self) -> Result<()> {
        match self {
            Tx::Sqlite(tx) => tx.commit().await?,
            Tx::Postgres(tx) => tx.commit().await?,
        }
        Ok(())
    }

    pub(crate) async fn rollback(self) -> Result<()> {
        match self {
            Tx::Sqlite(tx) => tx.rollback().await?,
            Tx::Postgres(tx) => tx.rollback().await?,
        }
        Ok(())
    }
}

/// Where a query runs: a pool (one statement, autocommit) or an open transaction.
pub(crate) enum On<'a> {
    Pool(&'a Pool),
    Tx(&'a mut Tx),
}

impl<'a> From<&'a Pool> for On<'a> {
    fn from(pool: &'a Pool) -> Self {
        On::Pool(pool)
    }
}

impl<'a> From<&'a mut Tx> for On<'a> {
    fn from(tx: &'a mut Tx) -> Self {
        On::Tx(tx)
    }
}

/// A value both drivers can bind.
pub(crate) trait Bind<'q>:
    Encode<'q, Sqlite> + Type<Sqlite> + Encode<'q, Postgres> + Type<Postgres> + Send + 'q
{
}

impl<'q, T> Bind<'q> for T where
    T: Encode<'q, Sqlite> + Type<Sqlite> + Encode<'q, Postgres> + Type<Postgres> + Send + 'q
{
}

/// A value both drivers can decode.
pub(crate) trait Decodable:
    for<'r> Decode<'r, Sqlite> + Type<Sqlite> + for<'r> Decode<'r, Postgres> + Type<Postgres>
{
}

impl<T> Decodable for T where
    T: for<'r> Decode<'r, Sqlite> + Type<Sqlite> + for<'r> Decode<'r, Postgres> + Type<Postgres>
{
}

/// A statement with its arguments, bound in the engine's own encoding.
pub(crate) enum Query<'q> {
    Sqlite(SqlxQuery<'q, Sqlite, SqliteArguments<'q>>),
    Postgres(SqlxQuery<'q, Postgres, PgArguments>),
}

impl Engine {
    /// Starts a statement on this engine.
    pub(crate) fn query(self, sql: &str) -> Query<'_> {
        match self {
            Engine::Sqlite => Query::Sqlite(sqlx::query(sql)),
            Engine::Postgres => Query::Postgres(sqlx::query(sql)),
        }
    }

    /// A batch of rows read as a table `v` with the given columns, from parameter
    /// `$first` on (PostgreSQL takes one parameter per column; SQLite one, or two
    /// when the batch has bytes or long text). A batch is always bound last.
    pub(crate) fn rows(self, first: usize, columns: &[(&str, Kind)]) -> String {
        match self {
            Engine::Sqlite => sqlite::rows(first, columns),
            Engine::Postgres => postgres::rows(first, columns),
        }
    }

    /// How many parameters a batch of these columns takes ([`Engine::rows`]).
    pub(crate) fn places(self, columns: &[(&str, Kind)]) -> usize {
        match self {
            Engine::Sqlite => {
                1 + usize::from(
                    columns
                        .iter()
                        .any(|(_, kind)| matches!(kind, Kind::Bytes | Kind::LongText)),
                )
            }
            Engine::Postgres => columns.len(),
        }
    }

    /// A condition that `column` is one of a batch's text column, bound (on
    /// PostgreSQL) at `$n`: `column = ANY($n::text[])`, whose only plan is one
    /// index probe per value. Joined to the batch alone, a table was planned
    /// (generic plans, tables analyzed while small) as a walk of its whole key
    /// with the batch inside the loop; this bounds the walk whatever the
    /// statistics say. `TRUE` on SQLite, whose planner sees the batch's size
    /// (a term all the same: `INSERT … SELECT … WHERE {this} ON CONFLICT` needs
    /// one, SQLite's parser taking `ON` for a join's otherwise).
    pub(crate) fn probes(self, column: &str, n: usize) -> String {
        match self {
            Engine::Sqlite => "TRUE".into(),
            Engine::Postgres => format!("{column} = ANY(${n}::text[])"),
        }
    }

    /// `column` is one of the batch of ids bound from `$first` (see
    /// [`Engine::probes`]).
    pub(crate) fn in_batch(self, column: &str, first: usize) -> String {
        match self {
            Engine::Sqlite => format!(
                "{column} IN (SELECT id FROM {})",
                sqlite::rows(first, &[("id", Kind::Text)])
            ),
            Engine::Postgres => self.probes(column, first),
        }
    }

    /// `column` is among what `select` returns: on PostgreSQL `= ANY(ARRAY(…))`,
    /// one index probe per value (see [`Engine::probes`]).
    pub(crate) fn among(self, column: &str, select: &str) -> String {
        match self {
            Engine::Sqlite => format!("{column} IN ({select})"),
            Engine::Postgres => format!("{column} = ANY(ARRAY({select}))"),
        }
    }

    /// A row-lock clause (`FOR UPDATE …`) on PostgreSQL; nothing on SQLite, whose
    /// single writer already serialises every transaction.
    pub(crate) fn lock(self, clause: &'static str) -> &'static str {
        match self {
            Engine::Sqlite => "",
            Engine::Postgres => clause,
        }
    }
}

impl<'q> Query<'q> {
    pub(crate) fn bind<T: Bind<'q>>(self, value: T) -> Self {
        match self {
            Query::Sqlite(q) => Query::Sqlite(q.bind(value)),
            Query::Postgres(q) => Query::Postgres(q.bind(value)),
        }
    }

    /// Binds a batch of rows (see the module docs).
    pub(crate) fn bind_batch(self, batch: Batch<'q>) -> Self {
        match self {
            Query::Sqlite(q) => {
                let (rows, bytes) = batch.to_sqlite();
                let q = q.bind(rows);
                Query::Sqlite(match bytes {
                    Some(bytes) => q.bind(bytes),
                    None => q,
                })
            }
            Query::Postgres(mut q) => {
                for column in batch.columns {
                    q = match column {
                        Column::Text(values) | Column::LongText(values) => q.bind(values),
                        Column::Int(values) => q.bind(values),
                        Column::Bytes(values) => q.bind(values),
                    };
                }
                Query::Postgres(q)
            }
        }
    }

    /// Runs the statement; how many rows it changed.
    pub(crate) async fn execute(self, on: impl Into<On<'_>>) -> Result<Done> {
        let rows_affected = match (self, on.into()) {
            (Query::Sqlite(q), On::Pool(Pool::Sqlite(pool))) => {
                q.execute(pool).await?.rows_affected()
            }
            (Query::Sqlite(q), On::Tx(Tx::Sqlite(tx))) => {
                q.execute(&mut **tx).await?.rows_affected()
            }
            (Query::Postgres(q), On::Pool(Pool::Postgres(pool))) => {
                q.execute(pool).await?.rows_affected()
            }
            (Query::Postgres(q), On::Tx(Tx::Postgres(tx))) => {
                q.execute(&mut **tx).await?.rows_affected()
            }
            _ => unreachable!("a statement runs on the engine it was built for"),
        };
        Ok(Done { rows_affected })
    }

    pub(crate) async fn fetch_all(self, on: impl Into<On<'_>>) -> Result<Vec<Row>> {
        Ok(match (self, on.into()) {
            (Query::Sqlite(q), On::Pool(Pool::Sqlite(pool))) => q
                .fetch_all(pool)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            (Query::Sqlite(q), On::Tx(Tx::Sqlite(tx))) => q
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            (Query::Postgres(q), On::Pool(Pool::Postgres(pool))) => q
                .fetch_all(pool)
                .await?
                .into_iter()
                .map(Row::Postgres)
                .collect(),
            (Query::Postgres(q), On::Tx(Tx::Postgres(tx))) => q
                .fetch_all(&mut **tx)
                .await?
                .into_iter()
                .map(Row::Postgres)
                .collect(),
            _ => unreachable!("a statement runs on the engine it was built for"),
        })
    }

    pub(crate) async fn fetch_optional(self, on: impl Into<On<'_>>) -> Result<Option<Row>> {
        Ok(match (self, on.into()) {
            (Query::Sqlite(q), On::Pool(Pool::Sqlite(pool))) => {
                q.fetch_optional(pool).await?.map(Row::Sqlite)
            }
            (Query::Sqlite(q), On::Tx(Tx::Sqlite(tx))) => {
                q.fetch_optional(&mut **tx).await?.map(Row::Sqlite)
            }
            (Query::Postgres(q), On::Pool(Pool::Postgres(pool))) => {
                q.fetch_optional(pool).await?.map(Row::Postgres)
            }
            (Query::Postgres(q), On::Tx(Tx::Postgres(tx))) => {
                q.fetch_optional(&mut **tx).await?.map(Row::Postgres)
            }
            _ => unreachable!("a statement runs on the engine it was built for"),
        })
    }

    pub(crate) async fn fetch_one(self, on: impl Into<On<'_>>) -> Result<Row> {
        self.fetch_optional(on)
            .await?
            .ok_or_else(|| sqlx::Error::RowNotFound.into())
    }

    /// The first column of the one row the statement returns.
    pub(crate) async fn fetch_scalar<T: Decodable>(self, on: impl Into<On<'_>>) -> Result<T> {
        Ok(self.fetch_one(on).await?.try_get(0)?)
    }
}

/// What a statement changed.
pub(crate) struct Done {
    rows_affected: u64,
}

impl Done {
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows_affected
    }
}

/// A result row of either engine.
pub(crate) enum Row {
    Sqlite(SqliteRow),
    Postgres(PgRow),
}

/// A column by name or position.
pub(crate) trait ColumnIndex:
    sqlx::ColumnIndex<SqliteRow> + sqlx::ColumnIndex<PgRow>
{
}

impl<I: sqlx::ColumnIndex<SqliteRow> + sqlx::ColumnIndex<PgRow>> ColumnIndex for I {}

impl Row {
    pub(crate) fn try_get<T: Decodable, I: ColumnIndex>(&self, index: I) -> Result<T, sqlx::Error> {
        match self {
            Row::Sqlite(row) => row.try_get(index),
            Row::Postgres(row) => row.try_get(index),
        }
    }
}

/// A statement whose text depends on the engine, built once per engine on first use.
pub(crate) struct Sql {
    build: fn(Engine) -> String,
    sqlite: OnceLock<String>,
    postgres: OnceLock<String>,
}

impl Sql {
    pub(crate) const fn new(build: fn(Engine) -> String) -> Self {
        Self {
            build,
            sqlite: OnceLock::new(),
            postgres: OnceLock::new(),
        }
    }

    pub(crate) fn text(&self, engine: Engine) -> &str {
        let cell = match engine {
            Engine::Sqlite => &self.sqlite,
            Engine::Postgres => &self.postgres,
        };
        cell.get_or_init(|| (self.build)(engine))
    }
}

/// A batch column's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Text,
    /// Text that may be long (a response body): on SQLite it travels with the
    /// batch's bytes, not inside the JSON rows.
    LongText,
    Int,
    Bytes,
}

/// Rows bound as one batch (see the module docs), built column by column.
#[derive(Default)]
pub(crate) struct Batch<'q> {
    columns: Vec<Column<'q>>,
}

enum Column<'q> {
    Text(Vec<Option<&'q str>>),
    LongText(Vec<Option<&'q str>>),
    Int(Vec<Option<i64>>),
    Bytes(Vec<Option<&'q [u8]>>),
}

impl<'q> Batch<'q> {
    pub(crate) fn text(mut self, values: impl IntoIterator<Item = Option<&'q str>>) -> Self {
        self.columns
            .push(Column::Text(values.into_iter().collect()));
        self
    }

    /// A [`Kind::LongText`] column.
    pub(crate) fn long_text(mut self, values: impl IntoIterator<Item = Option<&'q str>>) -> Self {
        self.columns
            .push(Column::LongText(values.into_iter().collect()));
        self
    }

    pub(crate) fn int(mut self, values: impl IntoIterator<Item = Option<i64>>) -> Self {
        self.columns.push(Column::Int(values.into_iter().collect()));
        self
    }

    pub(crate) fn bytes(mut self, values: impl IntoIterator<Item = Option<&'q [u8]>>) -> Self {
        self.columns
            .push(Column::Bytes(values.into_iter().collect()));
        self
    }

    fn len(&self) -> usize {
        self.columns.first().map_or(0, |c| match c {
            Column::Text(v) | Column::LongText(v) => v.len(),
            Column::Int(v) => v.len(),
            Column::Bytes(v) => v.len(),
        })
    }

    /// SQLite's two parameters: `[[row 0's values], [row 1's values], …]` as JSON,
    /// where a bytes value is its place in the second, `[start, length]` (1-based,
    /// as `substr` counts), and the bytes of the whole batch laid end to end (`None`
    /// without a bytes column). Keeping bytes out of the JSON keeps each row's text
    /// short: SQLite renders and parses each row's text (once per row, see
    /// `sqlite::rows`).
    fn to_sqlite(&self) -> (String, Option<Vec<u8>>) {
        let mut blob: Option<Vec<u8>> = self
            .columns
            .iter()
            .any(|c| matches!(c, Column::Bytes(_) | Column::LongText(_)))
            .then(Vec::new);
        // Bytes, not a String: values are written straight into it, with no
        // allocation per value.
        let mut out: Vec<u8> = Vec::with_capacity(64 * self.len().max(1));
        out.push(b'[');
        for row in 0..self.len() {
            if row > 0 {
                out.push(b',');
            }
            out.push(b'[');
            for (i, column) in self.columns.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match column {
                    Column::Text(values) => match values[row] {
                        Some(text) => {
                            serde_json::to_writer(&mut out, text).expect("strings serialize")
                        }
                        None => out.extend_from_slice(b"null"),
                    },
                    Column::Int(values) => match values[row] {
                        Some(n) => {
                            let _ = write!(&mut out, "{n}");
                        }
                        None => out.extend_from_slice(b"null"),
                    },
                    Column::LongText(values) => match values[row] {
                        Some(text) => {
                            let blob = blob.as_mut().expect("made for a long text column");
                            let _ = write!(&mut out, "{},{}", blob.len() + 1, text.len());
                            blob.extend_from_slice(text.as_bytes());
                        }
                        None => out.extend_from_slice(b"null,null"),
                    },
                    Column::Bytes(values) => match values[row] {
                        Some(bytes) => {
                            let blob = blob.as_mut().expect("made for a bytes column");
                            let _ = write!(&mut out, "{},{}", blob.len() + 1, bytes.len());
                            blob.extend_from_slice(bytes);
                        }
                        None => out.extend_from_slice(b"null,null"),
                    },
                }
            }
            out.push(b']');
        }
        out.push(b']');
        let out = String::from_utf8(out).expect("JSON is UTF-8");
        (out, blob)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_is_json_rows_for_sqlite_with_bytes_laid_end_to_end_beside_it() {
        let batch = Batch::default()
            .text([Some("a\"b"), None, Some("c")])
            .bytes([Some(&[0u8, 255][..]), None, Some(&[7u8][..])])
            .int([Some(7), None, Some(-1)]);
        let (rows, bytes) = batch.to_sqlite();
        assert_eq!(
            rows,
            r#"[["a\"b",1,2,7],[null,null,null,null],["c",3,1,-1]]"#
        );
        assert_eq!(bytes, Some(vec![0, 255, 7]));
        assert_eq!(
            Batch::default().text([Some("x")]).to_sqlite(),
            (r#"[["x"]]"#.to_owned(), None)
        );
        assert_eq!(Batch::default().to_sqlite(), ("[]".to_owned(), None));
    }
}
