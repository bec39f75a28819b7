//! The write budget of the live phase: what the store wrote per delivery, and
//! how busy the whole machine was (docs/BENCHMARKS.md, "The write budget").
//!
//! - **PostgreSQL**: WAL bytes (`pg_current_wal_lsn()` at the phase's start and
//!   end; the cluster's, so keep the server otherwise quiet) and the row writes
//!   of Hookline's tables (`pg_stat_user_tables`: inserts, updates, of which
//!   HOT, deletes). An insert or a non-HOT update adds an entry to each of the
//!   table's indexes whose predicate the row meets; the statistics do not count
//!   index entries, so the report gives their upper bound, every index counted.
//!   Backends publish their table counters at most once a second, so the
//!   closing count is read once Hookline has stopped and its sessions are gone:
//!   it covers, besides the live phase, what Hookline wrote between the
//!   phase's end and its stop (the last completions, retries to a dead
//!   endpoint, leases given back), which the WAL figure, read at the phase's
//!   end, does not.
//! - **Every engine**: the bytes the Hookline process caused to be sent to
//!   storage (`write_bytes` of `/proc/<pid>/io`: on SQLite its WAL frames and
//!   checkpoints, and its log, a few lines at the default level; not `wchar`,
//!   which counts socket writes too).
//! - **The machine's busy share**: `/proc/stat`, all cores, busy time (not
//!   idle, not iowait) over all time, at the phase's start and end.

use anyhow::Context;
use serde::Serialize;

use crate::target::Pid;

/// The machine's CPU time, in ticks, from the first line of `/proc/stat`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MachineTicks {
    busy: u64,
    total: u64,
}

impl MachineTicks {
    pub fn read() -> anyhow::Result<Self> {
        let stat = std::fs::read_to_string("/proc/stat")?;
        let line = stat.lines().next().context("empty /proc/stat")?;
        // cpu user nice system idle iowait irq softirq steal (guest time is within user);
        // steal, time the hypervisor gave another guest, is left out of both.
        let ticks: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(8)
            .map(str::parse)
            .collect::<Result<_, _>>()
            .context("unexpected /proc/stat")?;
        anyhow::ensure!(ticks.len() == 8, "unexpected /proc/stat: {line}");
        let busy = ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6];
        Ok(Self {
            busy,
            total: busy + ticks[3] + ticks[4],
        })
    }

    /// The share of the machine's CPU time busy between `self` and `later`.
    pub fn busy_share_until(self, later: Self) -> f64 {
        let total = later.total.saturating_sub(self.total);
        match total {
            0 => 0.0,
            _ => later.busy.saturating_sub(self.busy) as f64 / total as f64,
        }
    }
}

/// A process's storage writes from `/proc/<pid>/io`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessIo {
    /// Bytes the process caused to be sent to storage.
    pub write_bytes: u64,
}

impl ProcessIo {
    pub fn read(pid: Pid) -> anyhow::Result<Self> {
        let io = std::fs::read_to_string(format!("{}/io", pid.dir()))?;
        let field = |name: &str| -> anyhow::Result<u64> {
            io.lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .with_context(|| format!("no {name} in /proc/<pid>/io"))?
                .trim()
                .parse()
                .with_context(|| format!("malformed {name} in /proc/<pid>/io"))
        };
        Ok(Self {
            write_bytes: field("write_bytes")?,
        })
    }
}

/// PostgreSQL's counters for one database at one moment.
#[derive(Debug, Clone, Default)]
pub struct PostgresCounters {
    /// `pg_current_wal_lsn()` as bytes since `0/0`.
    pub wal_lsn: u64,
    pub tables: Vec<TableWrites>,
}

impl PostgresCounters {
    /// Reads the WAL position and the table counters of the database at `url`.
    pub async fn read(url: &str) -> anyhow::Result<Self> {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(url).await?;
        let wal_lsn: i64 = sqlx::query_scalar("SELECT (pg_current_wal_lsn() - '0/0')::bigint")
            .fetch_one(&mut conn)
            .await?;
        let rows: Vec<(String, i64, i64, i64, i64, i64)> = sqlx::query_as(
            "SELECT t.relname::text, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd, t.n_tup_del, \
                    (SELECT count(*) FROM pg_index i WHERE i.indrelid = t.relid) \
             FROM pg_stat_user_tables t ORDER BY t.relname",
        )
        .fetch_all(&mut conn)
        .await?;
        let _ = conn.close().await;
        let count = |n: i64| n.max(0) as u64;
        // (`deliveries` with about nine indexes: the upper bound is what a non-HOT write costs.)
        Ok(Self {
            wal_lsn: count(wal_lsn),
            tables: rows
                .into_iter()
                .map(|(table, ins, upd, hot, del, indexes)| TableWrites {
                    table,
                    inserts: count(ins),
                    updates: count(upd),
                    hot_updates: count(hot),
                    deletes: count(del),
                    indexes: count(indexes),
                    index_entries_at_most: 0,
                })
                .collect(),
        })
    }
}

/// Waits (up to 10 s) until no session but this one is connected to the
/// database at `url` — the stopped Hookline's backends have exited and so
/// published their table counters — then reads the counters. Returns whether
/// the sessions were gone.
pub async fn read_once_sessions_end(url: &str) -> anyhow::Result<(PostgresCounters, bool)> {
    use sqlx::Connection;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut conn = sqlx::PgConnection::connect(url).await?;
    let gone = loop {
        let others: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
        )
        .fetch_one(&mut conn)
        .await?;
        if others == 0 {
            break true;
        }
        if std::time::Instant::now() >= deadline {
            break false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let _ = conn.close().await;
    Ok((PostgresCounters::read(url).await?, gone))
}

/// The row writes of one table over the live phase.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TableWrites {
    pub table: String,
    pub inserts: u64,
    pub updates: u64,
    pub hot_updates: u64,
    pub deletes: u64,
    /// Indexes on the table (the primary key included).
    pub indexes: u64,
    /// (inserts + non-HOT updates) × indexes: every index counted, partial or not.
    pub index_entries_at_most: u64,
}

impl TableWrites {
    fn row_writes(&self) -> u64 {
        self.inserts + self.updates + self.deletes
    }
}

/// What the live phase wrote, in the report.
#[derive(Debug, Serialize)]
pub struct WriteBudget {
    /// Busy share of all the machine's cores over the live phase (1.0 = all busy).
    pub machine_busy_share: f64,
    pub postgres: Option<PostgresWrites>,
    /// The Hookline process's own writes (not measured for an external one).
    pub process: Option<ProcessWrites>,
}

#[derive(Debug, Serialize)]
pub struct PostgresWrites {
    pub wal_bytes: u64,
    pub wal_bytes_per_delivery: f64,
    /// Rows inserted, updated and deleted in Hookline's tables, per delivery.
    pub row_writes_per_delivery: f64,
    /// Of the updates, the share that was HOT (no index touched).
    pub hot_update_share: f64,
    /// Upper bound of index entries written per delivery (`TableWrites::index_entries_at_most`).
    pub index_entries_per_delivery_at_most: f64,
    /// The tables written to, most writes first.
    pub tables: Vec<TableWrites>,
}

#[derive(Debug, Serialize)]
pub struct ProcessWrites {
    pub storage_write_bytes: u64,
    pub storage_write_bytes_per_delivery: f64,
}

/// What is read at the live phase's start.
pub struct Start {
    pub machine: MachineTicks,
    /// `None` for an external Hookline.
    pub process: Option<ProcessIo>,
    pub postgres: Option<PostgresCounters>,
}

/// What is read at its end (the table counters after Hookline stopped).
pub struct End {
    pub machine: MachineTicks,
    pub process: Option<ProcessIo>,
    pub wal_lsn: Option<u64>,
    pub postgres: Option<PostgresCounters>,
}

impl WriteBudget {
    pub fn of(start: &Start, end: &End, deliveries: u64) -> Self {
        let per = |n: u64| match deliveries {
            0 => 0.0,
            d => n as f64 / d as f64,
        };
        let postgres = start
            .postgres
            .as_ref()
            .zip(end.postgres.as_ref())
            .map(|(before, after)| {
                let mut tables: Vec<TableWrites> = after
                    .tables
                    .iter()
                    .map(|a| {
                        let b = before.tables.iter().find(|b| b.table == a.table);
                        let since =
                            |f: fn(&TableWrites) -> u64| f(a).saturating_sub(b.map_or(0, f));
                        let (inserts, updates, hot_updates) = (
                            since(|t| t.inserts),
                            since(|t| t.updates),
                            since(|t| t.hot_updates),
                        );
                        TableWrites {
                            table: a.table.clone(),
                            inserts,
                            updates,
                            hot_updates,
                            deletes: since(|t| t.deletes),
                            indexes: a.indexes,
                            index_entries_at_most: (inserts + updates).saturating_sub(hot_updates)
                                * a.indexes,
                        }
                    })
                    .filter(|t| t.row_writes() > 0)
                    .collect();
                tables.sort_by_key(|t| std::cmp::Reverse(t.row_writes()));
                let sum = |f: fn(&TableWrites) -> u64| tables.iter().map(f).sum::<u64>();
                let wal_bytes = end
                    .wal_lsn
                    .unwrap_or(after.wal_lsn)
                    .saturating_sub(before.wal_lsn);
                let updates = sum(|t| t.updates);
                PostgresWrites {
                    wal_bytes,
                    wal_bytes_per_delivery: per(wal_bytes),
                    row_writes_per_delivery: per(sum(TableWrites::row_writes)),
                    hot_update_share: match updates {
                        0 => 0.0,
                        u => sum(|t| t.hot_updates) as f64 / u as f64,
                    },
                    index_entries_per_delivery_at_most: per(sum(|t| t.index_entries_at_most)),
                    tables,
                }
            });
        let process = start.process.zip(end.process).map(|(before, after)| {
            let storage = after.write_bytes.saturating_sub(before.write_bytes);
            ProcessWrites {
                storage_write_bytes: storage,
                storage_write_bytes_per_delivery: per(storage),
            }
        });
        Self {
            machine_busy_share: start.machine.busy_share_until(end.machine),
            postgres,
            process,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_counters_are_readable() {
        let ticks = MachineTicks::read().unwrap();
        assert!(ticks.total >= ticks.busy && ticks.total > 0);
        ProcessIo::read(Pid::SelfProcess).unwrap();
    }

    #[test]
    fn the_budget_is_the_difference_per_delivery() {
        let table = |inserts, updates, hot_updates| TableWrites {
            table: "deliveries".into(),
            inserts,
            updates,
            hot_updates,
            indexes: 3,
            ..TableWrites::default()
        };
        let start = Start {
            machine: MachineTicks {
                busy: 10,
                total: 100,
            },
            process: Some(ProcessIo { write_bytes: 1_000 }),
            postgres: Some(PostgresCounters {
                wal_lsn: 5_000,
                tables: vec![table(10, 0, 0)],
            }),
        };
        let end = End {
            machine: MachineTicks {
                busy: 70,
                total: 200,
            },
            process: Some(ProcessIo { write_bytes: 5_096 }),
            wal_lsn: Some(15_000),
            postgres: Some(PostgresCounters {
                wal_lsn: 99_999,
                tables: vec![table(20, 20, 10)],
            }),
        };
        let budget = WriteBudget::of(&start, &end, 10);
        assert_eq!(budget.machine_busy_share, 0.6);
        let pg = budget.postgres.unwrap();
        assert_eq!(
            pg.wal_bytes, 10_000,
            "the WAL read at the phase's end, not after the stop"
        );
        assert_eq!(pg.wal_bytes_per_delivery, 1_000.0);
        assert_eq!(pg.row_writes_per_delivery, 3.0);
        assert_eq!(pg.hot_update_share, 0.5);
        // (10 inserts + 10 non-HOT updates) x 3 indexes.
        assert_eq!(pg.index_entries_per_delivery_at_most, 6.0);
        let process = budget.process.unwrap();
        assert_eq!(process.storage_write_bytes, 4_096);
        assert_eq!(process.storage_write_bytes_per_delivery, 409.6);
    }
}
