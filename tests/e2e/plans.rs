//! The hot statements' plans on PostgreSQL do not depend on the tables'
//! statistics (`hookline_store::plans`).
//!
//! Each test gives the tables one kind of statistics — none at all, those of an
//! empty table, those of a tiny one — has one of the store's own connections run
//! every hot statement there (as a busy process does, long enough for PostgreSQL
//! to consider caching a generic plan), then grows the queue to tens of
//! thousands of rows without analyzing it, and reads the plan each statement
//! would run with now. Every scan must go through one of the statement's own
//! indexes and be bounded (by a `LIMIT`, or an equality lookup); no sequential
//! or bitmap scan, and no sort of an unbounded scan. The plan's shape is read,
//! never its speed.

use hookline_store::plans::HotStatement;
use hookline_store::Store;
use serde_json::Value;
use sqlx::Connection;

use crate::helpers::{store_config, Engine, TestDb};

#[tokio::test]
async fn hot_statements_use_their_indexes_on_a_never_analyzed_database() {
    check_plans(Statistics::Never).await;
}

#[tokio::test]
async fn hot_statements_use_their_indexes_after_an_analyze_of_empty_tables() {
    check_plans(Statistics::OfEmptyTables).await;
}

#[tokio::test]
async fn hot_statements_use_their_indexes_on_tables_analyzed_tiny_that_have_grown() {
    check_plans(Statistics::OfTinyTables).await;
}

/// The deliveries listing with an endpoint, a last status that matches nothing,
/// a time range and a cursor (the request a schemathesis run found taking 30 s),
/// on a never-analyzed database of 3,000 events: it walks the app's events
/// (`events_by_app`) and each event's deliveries through `deliveries_by_event`
/// — never the endpoint's every delivery once per event, which is 9 million
/// subqueries here.
#[tokio::test]
async fn a_filtered_deliveries_listing_walks_event_by_event_on_a_never_analyzed_database() {
    use hookline_core::ids::{AppId, DeliveryId, EndpointId, EventId};
    use hookline_core::time::Timestamp;
    use hookline_store::{DeliveryFilter, Page, StatusFilter, TimeRange};
    let db = TestDb::new(Engine::Postgres).await;
    let store = Store::connect(&store_config(&db.url)).await.unwrap();
    store.migrate().await.unwrap();
    let mut sql = sqlx::PgConnection::connect(&db.url).await.unwrap();
    let (app, endpoint) = (AppId::generate(), EndpointId::generate());
    let events: Vec<String> = (0..3_000)
        .map(|_| EventId::generate().to_string())
        .collect();
    let deliveries: Vec<String> = (0..3_000)
        .map(|_| DeliveryId::generate().to_string())
        .collect();
    for statement in [
        "INSERT INTO apps (id, name, created_at, updated_at) VALUES ($1, 'acme', 0, 0)",
        "INSERT INTO endpoints (id, app_id, url, description, enabled, secret, created_at, updated_at) \
         VALUES ($2, $1, 'https://example.com/', '', true, 'whsec_x', 0, 0)",
        "INSERT INTO events (id, app_id, event_type, body, created_at) \
         SELECT e, $1, 'order.paid', '\\x00', 0 FROM unnest($3::text[]) e",
        "INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, attempts, \
           round_started_at, created_at, updated_at) \
         SELECT d, $1, e, $2, 'succeeded', 0, 1, 0, 0, 0 FROM unnest($4::text[], $3::text[]) AS x(d, e)",
    ] {
        sqlx::query(statement)
            .bind(app.as_str())
            .bind(endpoint.as_str())
            .bind(&events)
            .bind(&deliveries)
            .execute(&mut sql)
            .await
            .unwrap_or_else(|error| panic!("{error}: {statement}"));
    }
    let filter = DeliveryFilter {
        endpoint: Some(endpoint),
        last_status: Some(StatusFilter::Class(1)),
        created: TimeRange {
            since: Some(Timestamp::from_millis(314_000_000_000)),
            until: None,
        },
        ..DeliveryFilter::default()
    };
    let page = Page {
        limit: 51,
        before: Some("msg_7ZZZZZZZZZZZZZZZZZZZZZZZZZ.dlv_7ZZZZZZZZZZZZZZZZZZZZZZZZZ".into()),
    };
    let plan = store
        .listings()
        .explain_list_deliveries(&app, &filter, &page)
        .await
        .unwrap()
        .expect("PostgreSQL has plans");
    let plan: Value = serde_json::from_str(&plan).unwrap();
    let mut scans = Vec::new();
    scans_of(&plan[0]["Plan"], &mut scans);
    let of_deliveries: Vec<&(String, String, String)> = scans
        .iter()
        .filter(|(_, table, _)| table == "deliveries")
        .collect();
    assert!(
        !of_deliveries.is_empty()
            && of_deliveries
                .iter()
                .all(|(kind, _, index)| kind.starts_with("Index") && index == "deliveries_by_event"),
        "deliveries read event by event: {scans:?}\n{plan}"
    );
}

/// Every scan under `node`: its kind, table and index.
fn scans_of(node: &Value, scans: &mut Vec<(String, String, String)>) {
    if let Some(table) = node["Relation Name"].as_str() {
        scans.push((
            node["Node Type"].as_str().unwrap_or("?").to_owned(),
            table.to_owned(),
            node["Index Name"].as_str().unwrap_or("").to_owned(),
        ));
    }
    for child in node["Plans"].as_array().into_iter().flatten() {
        scans_of(child, scans);
    }
}

/// What the planner knows of the tables while the statements first run.
#[derive(Debug, Clone, Copy)]
enum Statistics {
    /// A fresh database: nothing was ever analyzed.
    Never,
    /// `ANALYZE` ran while the tables were empty.
    OfEmptyTables,
    /// `ANALYZE` ran while the tables held a handful of rows, all delivered.
    OfTinyTables,
}

async fn check_plans(statistics: Statistics) {
    let db = TestDb::new(Engine::Postgres).await;
    let store = Store::connect(&store_config(&db.url)).await.unwrap();
    store.migrate().await.unwrap();
    let mut sql = sqlx::PgConnection::connect(&db.url).await.unwrap();
    match statistics {
        Statistics::Never => {}
        Statistics::OfEmptyTables => run(&mut sql, "ANALYZE").await,
        Statistics::OfTinyTables => {
            fill(&mut sql, 0, 20, Mix::AllDelivered).await;
            run(&mut sql, "ANALYZE").await;
        }
    }
    let mut session = store
        .plan_session()
        .await
        .unwrap()
        .expect("PostgreSQL has plans");
    // More than the five custom plans after which PostgreSQL may cache a generic one.
    session.execute_all(8).await.unwrap();

    // The queue grows, as in the first seconds of a fresh deployment, unanalyzed.
    fill(&mut sql, 1_000, 5_000, Mix::Busy).await;
    let analyzed: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_user_tables WHERE relname = 'deliveries' \
         AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)",
    )
    .fetch_one(&mut sql)
    .await
    .unwrap();
    let expected_analyzed = i64::from(!matches!(statistics, Statistics::Never));
    assert_eq!(
        analyzed, expected_analyzed,
        "the statistics are as the test set them"
    );

    let plans = session.explain_all().await.unwrap();
    assert!(!plans.is_empty());
    let mut faults = Vec::new();
    for (statement, plan) in &plans {
        let plan: Value = serde_json::from_str(plan).unwrap();
        let root = &plan[0]["Plan"];
        let mut found = Vec::new();
        inspect(statement, root, &[], &mut found);
        if !found.is_empty() {
            faults.push(format!(
                "{} ({statistics:?}):\n  {}\n  plan: {}",
                statement.name,
                found.join("\n  "),
                serde_json::to_string(root).unwrap()
            ));
        }
    }
    assert!(
        faults.is_empty(),
        "hot statements planned without their indexes:\n{}",
        faults.join("\n")
    );
}

/// Nodes that pass their input's rows through, in order and without reading more
/// of it than asked: a `LIMIT` above them bounds the scan below them.
const PASS_THROUGH: &[&str] = &["LockRows", "Subquery Scan", "Result", "Materialize"];

/// Collects what is wrong with `node` and its children. `above` holds the node
/// types from the root down to `node`'s parent.
fn inspect(statement: &HotStatement, node: &Value, above: &[&str], found: &mut Vec<String>) {
    let kind = node["Node Type"].as_str().unwrap_or("?");
    let relation = node["Relation Name"].as_str();
    match kind {
        "Seq Scan" | "Bitmap Heap Scan" | "Tid Scan" | "Tid Range Scan" => {
            found.push(format!("{kind} on {}", relation.unwrap_or("?")))
        }
        "Bitmap Index Scan" => found.push(format!(
            "bitmap scan of {}",
            node["Index Name"].as_str().unwrap_or("?")
        )),
        "Index Scan" | "Index Only Scan" => {
            let index = node["Index Name"].as_str().unwrap_or("?");
            if !statement.indexes.contains(&index) {
                found.push(format!(
                    "{kind} using {index}, not one of {:?}",
                    statement.indexes
                ));
            }
            let limited = above
                .iter()
                .rev()
                .find(|k| !PASS_THROUGH.contains(k))
                .is_some_and(|k| *k == "Limit");
            let lookup = node["Index Cond"].as_str().is_some_and(is_equality);
            if !limited && !lookup {
                found.push(format!(
                    "{kind} using {index} is unbounded (no LIMIT above it, and {})",
                    match node["Index Cond"].as_str() {
                        Some(condition) => format!("its condition {condition} is a range"),
                        None => "no index condition".into(),
                    }
                ));
            }
        }
        _ => {}
    }
    let mut path = above.to_vec();
    path.push(kind);
    for child in node["Plans"].as_array().into_iter().flatten() {
        inspect(statement, child, &path, found);
    }
}

/// Whether an index condition only compares with `=` (a lookup of a few rows).
fn is_equality(condition: &str) -> bool {
    ["<", ">", "IS NOT NULL"]
        .iter()
        .all(|operator| !condition.contains(operator))
}

#[derive(Clone, Copy)]
enum Mix {
    /// Every delivery succeeded.
    AllDelivered,
    /// Mostly succeeded, with fresh, retrying, in-flight, blocked and dead ones:
    /// the queue of a busy deployment.
    Busy,
}

/// Adds `count` events (numbered from `first`) of one app, each with a delivery to
/// ten of its endpoints, half of them ordered; endpoints of other apps; and as
/// many other apps as events, each with a key.
async fn fill(sql: &mut sqlx::PgConnection, first: i64, count: i64, mix: Mix) {
    let last = first + count - 1;
    // Fifty endpoints an app, as many apps as events per hundred.
    let endpoints = 50 * (count / 100).max(1);
    let state = match mix {
        Mix::AllDelivered => "'succeeded'".to_owned(),
        Mix::Busy => "CASE WHEN i % 100 < 88 THEN 'succeeded' WHEN i % 100 < 92 THEN 'pending' \
             WHEN i % 100 < 94 THEN 'in_flight' WHEN i % 100 < 96 THEN 'dead' \
             WHEN i % 2 = 0 THEN 'blocked' ELSE 'pending' END"
            .to_owned(),
    };
    run(
        sql,
        &format!(
            "INSERT INTO apps (id, name, created_at, updated_at) VALUES ('app_1', 'acme', 0, 0) \
               ON CONFLICT DO NOTHING;
             INSERT INTO apps (id, uid, name, created_at, updated_at)
               SELECT 'app_' || a, 'tenant-' || a, 'tenant', 0, 0 FROM generate_series(2, {count} + 1) a
               ON CONFLICT DO NOTHING;
             INSERT INTO api_keys (id, key_hash, app_id, name, created_at)
               SELECT 'key_' || a, md5('key' || a), 'app_' || a, 'k', 0 FROM generate_series(2, {count} + 1) a
               ON CONFLICT DO NOTHING;
             INSERT INTO endpoints (id, app_id, url, description, enabled, secret, created_at, updated_at)
               SELECT 'ep_' || lpad(e::text, 5, '0'), 'app_' || (1 + (e - 1) / 50),
                      'https://example.com/' || e, '', true, 'whsec_x', 0, 0
               FROM generate_series(1, {endpoints}) e ON CONFLICT DO NOTHING;
             INSERT INTO events (id, app_id, event_type, ordering_key, sequence, body, created_at)
               SELECT 'evt_' || lpad(i::text, 8, '0'), 'app_1', 'order.paid',
                      CASE WHEN i % 2 = 0 THEN 'key_' || lpad((i % 500)::text, 5, '0') END,
                      CASE WHEN i % 2 = 0 THEN i END,
                      convert_to(repeat('x', 1024), 'UTF8'), 1800000000000 - ({last} - i) * 20
               FROM generate_series({first}, {last}) i;
             INSERT INTO ordering_keys (app_id, ordering_key, last_sequence)
               SELECT 'app_1', 'key_' || lpad(k::text, 5, '0'), {last} FROM generate_series(0, 499) k
               ON CONFLICT DO NOTHING;
             INSERT INTO idempotency_keys (app_id, key, fingerprint, status, response, created_at)
               SELECT 'app_1', 'key-' || i, 'f', 0, '\\x00', 0 FROM generate_series({first}, {last}) i;
             INSERT INTO deliveries (id, app_id, event_id, endpoint_id, state, due_at, lease_token,
                                     attempts, round_started_at, created_at, updated_at, dead_reason,
                                     dead_at, ordering_key, sequence)
               SELECT 'dlv_' || lpad(i::text, 8, '0') || '_' || e, 'app_1', 'evt_' || lpad(i::text, 8, '0'),
                      'ep_' || lpad(e::text, 5, '0'), s.state,
                      CASE WHEN s.state = 'dead' THEN 1800000000000 - ({last} - i) * 20
                           ELSE 1800000000000 - ({last} - i) * 20 + (i % 7 - 3) * 1000 END,
                      CASE WHEN s.state = 'in_flight' THEN 'token' END,
                      CASE WHEN s.state IN ('pending', 'in_flight') AND i % 3 = 0 THEN 2 ELSE 0 END,
                      1800000000000 - ({last} - i) * 20, 1800000000000 - ({last} - i) * 20, 0,
                      CASE WHEN s.state = 'dead' THEN 'retries_exhausted' END,
                      CASE WHEN s.state = 'dead' THEN 1800000000000 END,
                      CASE WHEN i % 2 = 0 THEN 'key_' || lpad((i % 500)::text, 5, '0') END,
                      CASE WHEN i % 2 = 0 THEN i END
               FROM generate_series({first}, {last}) i, generate_series(1, 10) e,
                    LATERAL (SELECT {state} AS state) s;
             INSERT INTO fanout (event_id, app_id, targets, n, due_at, lease_token, created_at)
               SELECT 'evt_' || lpad(i::text, 8, '0'), 'app_1', ',ep_00001,ep_00002,', 2,
                      1800000000000 - ({last} - i) * 20 + (i % 7 - 3) * 1000,
                      CASE WHEN i % 4 = 1 THEN 'token' END, 1800000000000 - ({last} - i) * 20
               FROM generate_series({first}, {last}) i WHERE i % 2 = 1;"
        ),
    )
    .await;
}

async fn run(sql: &mut sqlx::PgConnection, statements: &str) {
    sqlx::raw_sql(statements)
        .execute(sql)
        .await
        .unwrap_or_else(|error| panic!("{error}: {statements}"));
}
