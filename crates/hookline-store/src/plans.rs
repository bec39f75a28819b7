//! The hot statements and the plans PostgreSQL runs them with.
//!
//! A claim, a completion or a publish runs many times a second, so each of its
//! statements must be planned as an index access that costs the same with a
//! thousand rows or ten million — never a sequential scan, a hash join over the
//! whole queue or a sort of it. PostgreSQL chooses plans from statistics, and a
//! plan chosen while a table was empty (a fresh database, a test, a restore) and
//! cached in a connection's prepared statement stays in use long after the table
//! has grown: that was 13 s tails on every fresh database. How Hookline's sessions
//! rule this out is `postgres::SESSION_SETTINGS` (docs/architecture.md, "Plans
//! that do not depend on statistics").
//!
//! [`HOT_STATEMENTS`] names every hot statement (the same [`Sql`] the store
//! runs, not a copy), with sample arguments and the indexes it must read;
//! [`PlanSession`] prepares them on one of the store's own connections (so with
//! its session settings), runs them, and explains them. The plan test
//! (`tests/e2e/plans.rs`) reads those plans on a never-analyzed database, on
//! one analyzed while empty, and on one analyzed while tiny that has since grown.

use sqlx::pool::PoolConnection;
use sqlx::{Postgres, Row as _};

use crate::db::{Pool, Sql};
use crate::{
    apps, claim, complete, deliveries, endpoints, fanout, gauges, keys, publish, retention,
    snapshots,
};
use crate::{Result, Store};

/// A statement on a hot path.
pub struct HotStatement {
    pub name: &'static str,
    sql: &'static Sql,
    /// Sample arguments, as SQL literals each cast to the type its parameter is bound
    /// as (`now` is 1 800 000 000 000 ms).
    args: &'static [&'static str],
    /// The indexes its plan reads: every scan in it goes through one of these.
    pub indexes: &'static [&'static str],
}

impl HotStatement {
    /// The statement's PostgreSQL text.
    pub fn text(&self) -> &str {
        self.sql.text(crate::Engine::Postgres)
    }
}

const NOW: &str = "1800000000000::bigint";
const LANE_ARGS: &[&str] = &[
    NOW,
    "1800000030000::bigint",
    "'token'::text",
    "128::bigint",
    "128::bigint",
    "1000000::bigint",
    "ARRAY['ep_capped']::text[]",
    "ARRAY[4]::bigint[]",
];

/// What a lane's read of delivery rows reads: its due index, the rows, and
/// their events.
const FRESH_LANE_INDEXES: &[&str] = &[
    "deliveries_due_fresh",
    "deliveries_pkey",
    "events_pkey",
    "events_by_app",
];
const RETRY_LANE_INDEXES: &[&str] = &[
    "deliveries_due_retry",
    "deliveries_pkey",
    "events_pkey",
    "events_by_app",
];

const FANOUT_ARGS: &[&str] = &[
    NOW,
    "1800000030000::bigint",
    "'token'::text",
    "112::bigint",
    "128::bigint",
];

/// Every hot statement, in the order a turn meets them.
pub static HOT_STATEMENTS: &[HotStatement] = &[
    // The claim.
    HotStatement {
        name: "claim: leases that ended since the last turn",
        sql: &claim::RECOVER_EXPIRED,
        args: &["1799999999000::bigint", NOW, "128::bigint"],
        indexes: &["deliveries_leased", "deliveries_pkey"],
    },
    HotStatement {
        name: "claim: fresh lane",
        sql: &claim::TAKE_FRESH,
        args: LANE_ARGS,
        indexes: FRESH_LANE_INDEXES,
    },
    HotStatement {
        name: "claim: retry lane",
        sql: &claim::TAKE_RETRY,
        args: LANE_ARGS,
        indexes: RETRY_LANE_INDEXES,
    },
    HotStatement {
        name: "claim: newest of the fresh lane",
        sql: &claim::TAKE_NEWEST_FRESH,
        args: LANE_ARGS,
        indexes: FRESH_LANE_INDEXES,
    },
    HotStatement {
        name: "claim: newest of the retry lane",
        sql: &claim::TAKE_NEWEST_RETRY,
        args: LANE_ARGS,
        indexes: RETRY_LANE_INDEXES,
    },
    HotStatement {
        name: "claim: fan-out leases that ended since the last turn",
        sql: &fanout::RECOVER_FANOUT,
        args: &["1799999999000::bigint", NOW, "128::bigint"],
        indexes: &["fanout_leased", "fanout_pkey"],
    },
    HotStatement {
        name: "claim: fan-out lane",
        sql: &fanout::TAKE_FANOUT,
        args: FANOUT_ARGS,
        indexes: &["fanout_due", "fanout_pkey", "events_pkey", "events_by_app"],
    },
    HotStatement {
        name: "claim: newest of the fan-out lane",
        sql: &fanout::TAKE_NEWEST_FANOUT,
        args: FANOUT_ARGS,
        indexes: &["fanout_due", "fanout_pkey", "events_pkey", "events_by_app"],
    },
    HotStatement {
        name: "claim: the fan-out lane's head and its app",
        sql: &fanout::FANOUT_HEAD,
        args: &[],
        indexes: &["fanout_due"],
    },
    HotStatement {
        name: "claim: the apps with fan-out rows (the app pass)",
        sql: &fanout::APPS_WITH_FANOUT,
        args: &["''::text", "16::bigint"],
        indexes: &["fanout_due_by_app"],
    },
    HotStatement {
        name: "claim: one app's fan-out rows (the app pass)",
        sql: &fanout::TAKE_APP_FANOUT,
        args: &[
            NOW,
            "1800000030000::bigint",
            "'token'::text",
            "112::bigint",
            "128::bigint",
            "'app_01ARZ3NDEKTSV4RRFFQ69G5FAV'::text",
        ],
        indexes: &[
            "fanout_due_by_app",
            "fanout_pkey",
            "events_pkey",
            "events_by_app",
        ],
    },
    HotStatement {
        name: "claim: parts split off fan-out rows (targets without room)",
        sql: &fanout::INSERT_PART,
        args: &[
            NOW,
            "ARRAY['evt_00000001', 'evt_00000003']::text[]",
            "ARRAY[4, 1]::bigint[]",
            "ARRAY['app_1', 'app_1']::text[]",
            "ARRAY[',,,,ep_00004,', ',ep_00001,']::text[]",
            "ARRAY[1, 1]::bigint[]",
            "ARRAY[0, 1]::bigint[]",
            "ARRAY[1800000000000, 1800000000000]::bigint[]",
        ],
        indexes: &["fanout_pkey"],
    },
    HotStatement {
        name: "claim: fan-out rows left with the targets sent",
        sql: &fanout::SHRINK_FANOUT,
        args: &[
            "ARRAY['evt_00000001', 'evt_00000003']::text[]",
            "ARRAY['token', 'token']::text[]",
            "ARRAY[',ep_00001,,,,', ',,ep_00002,']::text[]",
            "ARRAY[1, 1]::bigint[]",
        ],
        indexes: &["fanout_pkey"],
    },
    HotStatement {
        name: "claim: which targets of reclaimed fan-out rows have rows",
        sql: &fanout::EXISTING,
        args: &["ARRAY['dlv_a', 'dlv_b']::text[]"],
        indexes: &["deliveries_pkey"],
    },
    HotStatement {
        name: "completion, pause, disable: fan-out rows left with no target",
        sql: &fanout::DELETE_EMPTIED,
        args: &["ARRAY['evt_00000001', 'evt_00000003']::text[]"],
        indexes: &["fanout_pkey"],
    },
    HotStatement {
        name: "claim, completion: rows of fan-out targets",
        sql: &fanout::INSERT_TARGETS,
        args: &[
            NOW,
            "ARRAY['dlv_a', 'dlv_b']::text[]",
            "ARRAY['app_1', 'app_1']::text[]",
            "ARRAY['evt_00000001', 'evt_00000003']::text[]",
            "ARRAY['ep_00001', 'ep_00002']::text[]",
            "ARRAY['token', NULL]::text[]",
            "ARRAY['dead', 'pending']::text[]",
            "ARRAY[1800000000000, 1800000060000]::bigint[]",
            "ARRAY['endpoint_deleted', NULL]::text[]",
            "ARRAY[1800000000000, NULL]::bigint[]",
            "ARRAY[1800000000000, 1800000000000]::bigint[]",
        ],
        indexes: &["fanout_pkey", "deliveries_pkey"],
    },
    HotStatement {
        name: "completion: rows of fan-out targets, their first attempts in them",
        sql: &complete::INSERT_RECORDED,
        args: &[
            NOW,
            "ARRAY['dlv_a', 'dlv_b']::text[]",
            "ARRAY['app_1', 'app_1']::text[]",
            "ARRAY['evt_00000001', 'evt_00000003']::text[]",
            "ARRAY['ep_00001', 'ep_00002']::text[]",
            "ARRAY['token', 'token']::text[]",
            "ARRAY['succeeded', 'pending']::text[]",
            "ARRAY[1800000000000, 1800000060000]::bigint[]",
            "ARRAY[1, 1]::bigint[]",
            "ARRAY[NULL, NULL]::bigint[]",
            "ARRAY[1800000000000, 1800000000000]::bigint[]",
            "ARRAY['att_a', 'att_b']::text[]",
            "ARRAY[1800000000000, 1800000000000]::bigint[]",
            "ARRAY[3, 3]::bigint[]",
            "ARRAY[200, 503]::bigint[]",
            "ARRAY['', '']::text[]",
            "ARRAY[NULL, NULL]::text[]",
            "ARRAY[NULL, NULL]::text[]",
            "ARRAY['delivered', 'retry']::text[]",
            "ARRAY[NULL, 1800000060000]::bigint[]",
            "ARRAY[NULL, NULL]::text[]",
            "ARRAY['{}', '{}']::text[]",
        ],
        indexes: &["fanout_pkey", "deliveries_pkey"],
    },
    HotStatement {
        name: "completion: fan-out rows whose targets are all recorded",
        sql: &fanout::DELETE_FANOUT,
        args: &[
            "ARRAY['evt_00000001', 'evt_00000003']::text[]",
            "ARRAY['token', 'token']::text[]",
        ],
        indexes: &["fanout_pkey"],
    },
    HotStatement {
        name: "claim: one endpoint (fair pass)",
        sql: &claim::TAKE_ENDPOINT,
        args: &[
            NOW,
            "1800000030000::bigint",
            "'token'::text",
            "16::bigint",
            "'ep_00001'::text",
        ],
        indexes: &[
            "deliveries_endpoint_pending",
            "deliveries_pkey",
            "events_pkey",
            "events_by_app",
        ],
    },
    HotStatement {
        name: "claim: the endpoints of the claimed rows",
        sql: &claim::CLAIMED_TARGETS,
        args: &["ARRAY['ep_00001', 'ep_00002']::text[]"],
        indexes: &["endpoints_pkey"],
    },
    HotStatement {
        name: "claim: endpoints of the fair pass",
        sql: &claim::FAIR_PASS,
        args: &[
            "'ep_00001'::text",
            "32::bigint",
            "ARRAY['ep_00002']::text[]",
        ],
        indexes: &["endpoints_pkey"],
    },
    HotStatement {
        name: "claim: endpoints locked (probe, rate limit)",
        sql: &claim::LOCK_GATES,
        args: &["ARRAY['ep_00001', 'ep_00002']::text[]"],
        indexes: &["endpoints_pkey"],
    },
    HotStatement {
        name: "claim: deferrals",
        sql: &claim::DEFER,
        args: &[
            "1800000060000::bigint",
            "'token'::text",
            "ARRAY['dlv_a', 'dlv_b']::text[]",
        ],
        indexes: &["deliveries_pkey"],
    },
    // The completion.
    HotStatement {
        name: "completion: deliveries moved on",
        sql: &complete::UPDATE_DELIVERIES,
        args: &[
            NOW,
            "ARRAY['dlv_a', 'dlv_b']::text[]",
            "ARRAY['token', 'token']::text[]",
            "ARRAY['succeeded', 'pending']::text[]",
            "ARRAY[1800000000000, 1800000060000]::bigint[]",
            "ARRAY[1, 1]::bigint[]",
            "ARRAY[1800000000000, 1800000000000]::bigint[]",
            "ARRAY[NULL, NULL]::text[]",
            "ARRAY[NULL, NULL]::bigint[]",
        ],
        indexes: &["deliveries_pkey"],
    },
    HotStatement {
        name: "completion: endpoints read",
        sql: &complete::READ_ENDPOINTS,
        args: &["ARRAY['ep_00001', 'ep_00002']::text[]"],
        indexes: &["endpoints_pkey"],
    },
    HotStatement {
        name: "completion: endpoints the plan changes, locked",
        sql: &complete::LOCK_ENDPOINTS,
        args: &["ARRAY['ep_00001', 'ep_00002']::text[]"],
        indexes: &["endpoints_pkey"],
    },
    HotStatement {
        name: "completion: ordering key locked",
        sql: &complete::LOCK_ORDERING_KEY,
        args: &["'app_1'::text", "'key_00001'::text"],
        indexes: &["ordering_keys_pkey"],
    },
    HotStatement {
        name: "completion: partition successor released",
        sql: &complete::RELEASE_SUCCESSOR,
        args: &["'ep_00001'::text", "'key_00001'::text", NOW, NOW],
        indexes: &["deliveries_partition", "deliveries_pkey"],
    },
    HotStatement {
        name: "completion: an endpoint's queue moved (breaker, pause)",
        sql: &endpoints::MOVE_QUEUE,
        args: &[
            "'ep_00001'::text",
            "(-9223372036854775808)::bigint",
            NOW,
            "1800000060000::bigint",
            "1000::bigint",
        ],
        indexes: &["deliveries_endpoint_pending", "deliveries_pkey"],
    },
    HotStatement {
        name: "drain: a claimed delivery given back",
        sql: &deliveries::RELEASE_DELIVERY,
        args: &["'dlv_a'::text", "'token'::text", NOW],
        indexes: &["deliveries_pkey"],
    },
    // Batches outside the turn, planned once and cached like the rest.
    HotStatement {
        name: "dashboard: what listed attempts' requests carried",
        sql: &deliveries::DELIVERY_SIDES,
        args: &["ARRAY['dlv_a', 'dlv_b']::text[]"],
        indexes: &["deliveries_pkey"],
    },
    HotStatement {
        name: "replay: a batch of dead deliveries",
        sql: &deliveries::REPLAY_BATCH,
        args: &[
            "'pending'::text",
            NOW,
            "0::bigint",
            NOW,
            "ARRAY['dlv_a', 'dlv_b']::text[]",
        ],
        indexes: &["deliveries_pkey", "endpoints_pkey", "endpoints_by_app"],
    },
    HotStatement {
        name: "retention: the attempts of removed deliveries",
        sql: &retention::DELETE_ATTEMPTS,
        args: &["ARRAY['dlv_a', 'dlv_b']::text[]"],
        indexes: &["attempts_by_delivery"],
    },
    HotStatement {
        name: "retention: removed deliveries",
        sql: &retention::DELETE_DELIVERIES,
        args: &["ARRAY['dlv_a', 'dlv_b']::text[]"],
        indexes: &["deliveries_pkey"],
    },
    // Every API request: its key (until cached) and its `{app}`.
    HotStatement {
        name: "api: a key by its hash",
        sql: &keys::FIND_KEY,
        args: &["'0123abcd'::text"],
        indexes: &["api_keys_key_hash_key"],
    },
    HotStatement {
        name: "api: an app by id",
        sql: &apps::FIND_APP_BY_ID,
        args: &["'app_1'::text"],
        indexes: &["apps_pkey"],
    },
    HotStatement {
        name: "api: an app by uid",
        sql: &apps::FIND_APP_BY_UID,
        args: &["'acme'::text"],
        indexes: &["apps_uid_key"],
    },
    // The publish (its inserts read no index but their own unique ones).
    HotStatement {
        name: "publish: an app for its snapshot, by id",
        sql: &snapshots::SNAPSHOT_APP_BY_ID,
        args: &["'app_1'::text"],
        indexes: &["apps_pkey"],
    },
    HotStatement {
        name: "publish: an app for its snapshot, by uid",
        sql: &snapshots::SNAPSHOT_APP_BY_UID,
        args: &["'acme'::text"],
        indexes: &["apps_uid_key"],
    },
    HotStatement {
        name: "publish: an app's endpoints for its snapshot",
        sql: &snapshots::SNAPSHOT_ENDPOINTS,
        args: &["'app_1'::text"],
        indexes: &["endpoints_by_app"],
    },
    HotStatement {
        // The check fails (no app is at version -1): run many times, it writes nothing.
        name: "publish: the write, its snapshots checked",
        sql: &publish::WRITE,
        args: &[
            "ARRAY['app_1']::text[]",
            "ARRAY[-1]::bigint[]",
            "ARRAY['ep_00001:0']::text[]",
            "'tokenf'::text",
            "'token'::text",
            "ARRAY['evt_a']::text[]",
            "ARRAY['app_1']::text[]",
            "ARRAY['order.paid']::text[]",
            "ARRAY[NULL]::text[]",
            "ARRAY[NULL]::bigint[]",
            "ARRAY['\\x7b7d'::bytea]::bytea[]",
            "ARRAY[1800000000000]::bigint[]",
            "ARRAY['evt_a']::text[]",
            "ARRAY['app_1']::text[]",
            "ARRAY[',ep_00001,']::text[]",
            "ARRAY[1]::bigint[]",
            "ARRAY[1800000000000]::bigint[]",
            "ARRAY[1]::bigint[]",
            "ARRAY[1800000000000]::bigint[]",
            "ARRAY['dlv_a']::text[]",
            "ARRAY['app_1']::text[]",
            "ARRAY['evt_b']::text[]",
            "ARRAY['ep_00001']::text[]",
            "ARRAY['pending']::text[]",
            "ARRAY[1800000060000]::bigint[]",
            "ARRAY[NULL]::text[]",
            "ARRAY[NULL]::bigint[]",
            "ARRAY[1800000000000]::bigint[]",
            "ARRAY['app_1']::text[]",
            "ARRAY['key-1']::text[]",
            "ARRAY['fingerprint']::text[]",
            "ARRAY[0]::bigint[]",
            "ARRAY['\\x7b7d'::bytea]::bytea[]",
            "ARRAY[1800000000000]::bigint[]",
            "ARRAY['ep_00001']::text[]",
            "ARRAY[30000000]::bigint[]",
            "ARRAY[1]::bigint[]",
            "ARRAY['ep_00001']::text[]",
            "ARRAY[2]::bigint[]",
            "ARRAY['dlv_a,dlv_b']::text[]",
            "ARRAY[1800000000000]::bigint[]",
            "ARRAY['evt_a', 'evt_b']::text[]",
            "ARRAY[0, 0]::bigint[]",
            "ARRAY['ep_00001', 'ep_00001']::text[]",
            "ARRAY[1, 2]::bigint[]",
        ],
        indexes: &["apps_pkey", "endpoints_by_app"],
    },
    HotStatement {
        name: "publish: held partitions",
        sql: &publish::HELD_PARTITIONS,
        args: &["'key_00001'::text", "ARRAY['ep_00001', 'ep_00002']::text[]"],
        indexes: &["deliveries_partition"],
    },
    HotStatement {
        name: "publish: stored idempotency answers",
        sql: &publish::STORED_ANSWERS,
        args: &["ARRAY['app_1']::text[]", "ARRAY['key-1']::text[]"],
        indexes: &["idempotency_keys_pkey"],
    },
    // The dispatcher's next wake-up, and the gauges.
    HotStatement {
        name: "next due: fresh lane",
        sql: &deliveries::NEXT_DUE_FRESH,
        args: &[],
        indexes: &["deliveries_due_fresh"],
    },
    HotStatement {
        name: "next due: fan-out lane",
        sql: &fanout::NEXT_DUE_FANOUT,
        args: &[],
        indexes: &["fanout_due"],
    },
    HotStatement {
        name: "next due: retry lane",
        sql: &deliveries::NEXT_DUE_RETRY,
        args: &[],
        indexes: &["deliveries_due_retry"],
    },
    HotStatement {
        name: "gauge: fresh lane depth",
        sql: &gauges::FRESH_DEPTH,
        args: &[],
        indexes: &["deliveries_due_fresh"],
    },
    HotStatement {
        name: "gauge: retry lane depth",
        sql: &gauges::RETRY_DEPTH,
        args: &[],
        indexes: &["deliveries_due_retry"],
    },
    HotStatement {
        name: "gauge: fresh lane due",
        sql: &gauges::FRESH_DUE,
        args: &[NOW],
        indexes: &["deliveries_due_fresh"],
    },
    HotStatement {
        name: "gauge: retry lane due",
        sql: &gauges::RETRY_DUE,
        args: &[NOW],
        indexes: &["deliveries_due_retry"],
    },
    HotStatement {
        name: "gauge: fresh lane in flight",
        sql: &gauges::FRESH_LEASED,
        args: &[],
        indexes: &["deliveries_leased"],
    },
    HotStatement {
        name: "gauge: retry lane in flight",
        sql: &gauges::RETRY_LEASED,
        args: &[],
        indexes: &["deliveries_leased"],
    },
    HotStatement {
        name: "gauge: expired leases",
        sql: &gauges::EXPIRED,
        args: &[NOW],
        indexes: &["deliveries_leased"],
    },
    HotStatement {
        name: "gauge: fan-out targets pending",
        sql: &gauges::FANOUT_DEPTH,
        args: &[],
        indexes: &["fanout_due"],
    },
    HotStatement {
        name: "gauge: fan-out targets due",
        sql: &gauges::FANOUT_DUE,
        args: &[NOW],
        indexes: &["fanout_due"],
    },
    HotStatement {
        name: "gauge: fan-out targets in flight",
        sql: &gauges::FANOUT_LEASED,
        args: &[],
        indexes: &["fanout_leased"],
    },
    HotStatement {
        name: "gauge: fan-out targets past their lease",
        sql: &gauges::FANOUT_EXPIRED,
        args: &[NOW],
        indexes: &["fanout_leased"],
    },
    HotStatement {
        name: "gauge: dead-letter queue",
        sql: &gauges::DEAD,
        args: &[],
        indexes: &["deliveries_dlq"],
    },
];

/// One of the store's own PostgreSQL connections (with its session settings), with
/// every hot statement prepared on it as `hot_<i>`.
pub struct PlanSession {
    /// Taken only by `drop`.
    connection: Option<PoolConnection<Postgres>>,
}

impl Store {
    /// A [`PlanSession`]; `None` on SQLite, whose planner needs no statistics to
    /// use these indexes.
    pub async fn plan_session(&self) -> Result<Option<PlanSession>> {
        // A hot connection: generic plans (`postgres::HOT_SETTINGS`), those
        // the publish runs with, and those PostgreSQL may choose for the rest
        // once it has planned them five times.
        let Pool::Postgres(pool) = &self.hot else {
            return Ok(None);
        };
        let mut connection = pool.acquire().await?;
        for (i, statement) in HOT_STATEMENTS.iter().enumerate() {
            let types: Vec<&str> = statement
                .args
                .iter()
                .map(|arg| arg.rsplit_once("::").map_or("text", |(_, kind)| kind))
                .collect();
            let types = match types.is_empty() {
                true => String::new(),
                false => format!("({})", types.join(", ")),
            };
            sqlx::raw_sql(&format!("PREPARE hot_{i}{types} AS {}", statement.text()))
                .execute(&mut *connection)
                .await?;
        }
        Ok(Some(PlanSession {
            connection: Some(connection),
        }))
    }
}

impl PlanSession {
    fn connection(&mut self) -> &mut sqlx::PgConnection {
        self.connection.as_mut().expect("taken only by drop")
    }

    fn execute(i: usize, statement: &HotStatement) -> String {
        match statement.args {
            [] => format!("EXECUTE hot_{i}"),
            args => format!("EXECUTE hot_{i}({})", args.join(", ")),
        }
    }

    /// Runs every hot statement `times` times, in a transaction that is rolled back:
    /// what a busy process does with its prepared statements (and what makes
    /// PostgreSQL consider caching a generic plan for each).
    pub async fn execute_all(&mut self, times: usize) -> Result<()> {
        sqlx::raw_sql("BEGIN").execute(self.connection()).await?;
        for _ in 0..times {
            for (i, statement) in HOT_STATEMENTS.iter().enumerate() {
                sqlx::raw_sql(&Self::execute(i, statement))
                    .execute(self.connection())
                    .await?;
            }
        }
        sqlx::raw_sql("ROLLBACK").execute(self.connection()).await?;
        Ok(())
    }

    /// The plan each hot statement runs with now, as `EXPLAIN (FORMAT JSON)` gives it.
    pub async fn explain_all(&mut self) -> Result<Vec<(&'static HotStatement, String)>> {
        let mut plans = Vec::with_capacity(HOT_STATEMENTS.len());
        for (i, statement) in HOT_STATEMENTS.iter().enumerate() {
            let row = sqlx::raw_sql(&format!(
                "EXPLAIN (FORMAT JSON) {}",
                Self::execute(i, statement)
            ))
            .fetch_one(self.connection())
            .await?;
            plans.push((statement, row.try_get_unchecked::<String, _>(0)?));
        }
        Ok(plans)
    }
}

impl Drop for PlanSession {
    fn drop(&mut self) {
        // Its prepared statements and any cached plans go with the connection, which
        // never returns to the pool with them.
        if let Some(connection) = self.connection.take() {
            drop(connection.detach());
        }
    }
}
