//! Operations: the on-call CLI against a real server, `/metrics` as a scraper
//! sees it, readiness, a dispatcher process's probes, configuration that fails
//! loudly, and logs that hold no secret.

use std::time::Duration;

use clap::Parser;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{
    assert_scrubbed, both_engines, wait_until, Engine, Process, Receiver, Reply, TestApp, TestDb,
    ADMIN_TOKEN,
};

both_engines!(
    the_on_call_cli_lists_replays_pauses_and_resumes,
    metrics_count_outcomes_and_name_routes_by_template,
    readiness_needs_current_migrations,
    a_dispatcher_process_answers_probes_and_nothing_else,
    a_full_run_logs_no_payload_secret_token_or_signature,
    a_fresh_process_exports_every_counter_at_zero,
);

/// Before anything happened, every counter the binary declares is exported
/// at 0 with each label value it can take: a dashboard shows 0, not "no
/// data", and an absent-series alert can tell "none yet" from "broken".
async fn a_fresh_process_exports_every_counter_at_zero(engine: Engine) {
    let db = TestDb::new(engine).await;
    let process = Process::start(&db, "serve", None, &[]).await;
    let text = reqwest::get(format!("{}/metrics", process.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let counters: Vec<&str> = hookline::metrics::all_names()
        .into_iter()
        .filter(|name| name.ends_with("_total"))
        .collect();
    assert!(counters.len() >= 7, "{counters:?}");
    for name in counters {
        let lines = series(&text, name, &[]);
        assert!(!lines.is_empty(), "{name} is missing from a fresh /metrics");
        for line in lines {
            assert!(line.ends_with(" 0"), "{line}");
        }
    }
    for (name, label) in [
        ("hookline_breaker_transitions_total", "to=\"open\""),
        ("hookline_breaker_transitions_total", "to=\"disabled\""),
        ("hookline_dlq_entries_total", "reason=\"retries_exhausted\""),
        ("hookline_attempts_total", "outcome=\"timeout\""),
        ("hookline_attempts_total", "outcome=\"5xx\""),
        ("hookline_deliveries_completed_total", "result=\"dead\""),
    ] {
        assert_eq!(series(&text, name, &[label]).len(), 1, "{name}{{{label}}}");
    }
}

/// `hookline admin <args>` against `app`, as an on-call engineer runs it.
async fn admin(app: &TestApp, args: &[&str]) -> anyhow::Result<String> {
    let argv = ["hookline admin", "--url", app.base.as_str()]
        .into_iter()
        .chain(args.iter().copied());
    let parsed = hookline::admin::AdminArgs::try_parse_from(argv)?;
    let mut out = Vec::new();
    hookline::admin::run(parsed, ADMIN_TOKEN, &mut out).await?;
    Ok(String::from_utf8(out)?)
}

async fn dead_deliveries(app: &TestApp, app_id: &str, count: usize) -> Vec<String> {
    wait_until(Duration::from_secs(30), "deliveries in the DLQ", || async {
        let page = app.get(&format!("/v1/apps/{app_id}/dlq")).await;
        let ids: Vec<String> = page["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap().to_owned())
            .collect();
        (ids.len() == count).then_some(ids)
    })
    .await
}

async fn the_on_call_cli_lists_replays_pauses_and_resumes(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    // A receiver that refuses (400): straight to the DLQ, reason client_error.
    receiver.answer_always(Reply::status(400));
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let endpoint_id = endpoint["id"].as_str().unwrap();
    for n in 0..2 {
        app.publish(&app_id, "order.paid", json!({"n": n})).await;
    }
    let dead = dead_deliveries(&app, &app_id, 2).await;

    // The DLQ, as a table and as the API's JSON.
    let table = admin(&app, &["dlq", "--app", &app_id]).await.unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("ID"), "{table}");
    assert_eq!(lines.len(), 3, "a header and the two entries: {table}");
    for id in &dead {
        let line = lines.iter().find(|l| l.starts_with(id.as_str())).unwrap();
        assert!(
            line.contains("client_error") && line.contains("dead"),
            "{line}"
        );
    }
    let listed: Value = serde_json::from_str(
        &admin(&app, &["dlq", "--app", &app_id, "--json"])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(listed["data"].as_array().unwrap().len(), 2);
    let filtered = admin(
        &app,
        &["dlq", "--app", &app_id, "--reason", "retries_exhausted"],
    )
    .await
    .unwrap();
    assert_eq!(filtered.trim(), "(none)");

    // One entry with its attempt: the 400 it got.
    let shown = admin(&app, &["show", "--app", &app_id, &dead[0]])
        .await
        .unwrap();
    let attempt_line = shown
        .lines()
        .find(|l| l.starts_with("atm_"))
        .unwrap_or_else(|| panic!("an attempt row: {shown}"));
    assert!(
        attempt_line.contains(" 400 ") && attempt_line.contains("dead"),
        "{attempt_line}"
    );

    // The receiver is fixed: count, replay one, then the rest in bulk.
    receiver.answer_always(Reply::status(200));
    let dry = admin(
        &app,
        &["replay-bulk", "--app", &app_id, "--dry-run", "--json"],
    )
    .await
    .unwrap();
    assert_eq!(serde_json::from_str::<Value>(&dry).unwrap()["count"], 2);
    let replayed = admin(&app, &["replay", "--app", &app_id, &dead[0]])
        .await
        .unwrap();
    assert!(
        replayed.contains("replayed") && replayed.contains("true"),
        "{replayed}"
    );
    app.wait_for_delivery_state(&app_id, &dead[0], "succeeded")
        .await;
    let job: Value = serde_json::from_str(
        &admin(&app, &["replay-bulk", "--app", &app_id, "--json"])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(job["total"], 1, "only the one still dead: {job}");
    app.wait_for_delivery_state(&app_id, &dead[1], "succeeded")
        .await;
    let status = admin(
        &app,
        &[
            "replay-status",
            "--app",
            &app_id,
            job["id"].as_str().unwrap(),
        ],
    )
    .await
    .unwrap();
    assert!(status.contains("total"), "{status}");
    // Each dead delivery reached the receiver exactly once more: 2 refused + 2 delivered.
    let received = receiver.wait_for_requests(4).await;
    assert_eq!(received.len(), 4);

    // Health: the breaker and the windows.
    let health = admin(&app, &["health", "--app", &app_id, endpoint_id])
        .await
        .unwrap();
    assert!(
        health.contains("breaker") && health.contains("closed"),
        "{health}"
    );
    let hour = health
        .lines()
        .find(|l| l.starts_with("hour"))
        .unwrap_or_else(|| panic!("the hour window: {health}"));
    assert!(
        hour.split_whitespace().nth(1) == Some("4"),
        "4 attempts this hour: {hour}"
    );

    // Pause: a new event is kept, not sent; resume sends it.
    let paused: Value = serde_json::from_str(
        &admin(&app, &["pause", "--app", &app_id, endpoint_id, "--json"])
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(paused["paused"], true);
    let published = app.publish(&app_id, "order.paid", json!({"n": 2})).await;
    let held = published["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let delivery = app
        .get(&format!("/v1/apps/{app_id}/deliveries/{held}"))
        .await;
    assert_eq!(
        (delivery["state"].as_str(), delivery["parked"].as_bool()),
        (Some("pending"), Some(true))
    );
    let resumed = admin(&app, &["resume", "--app", &app_id, endpoint_id])
        .await
        .unwrap();
    assert!(
        resumed
            .lines()
            .any(|l| l.starts_with("paused") && l.ends_with("false")),
        "{resumed}"
    );
    app.wait_for_delivery_state(&app_id, &held, "succeeded")
        .await;
    assert_eq!(receiver.wait_for_requests(5).await.len(), 5);

    // Errors are the API's, in words.
    let missing = admin(
        &app,
        &["show", "--app", &app_id, "dlv_01J00000000000000000000000"],
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(missing.starts_with("404 not_found"), "{missing}");
}

/// The sample of one `/metrics` line: its value for the series whose name and
/// labels contain every part of `wanted`.
fn series<'a>(text: &'a str, name: &str, labels: &[&str]) -> Vec<&'a str> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| labels.iter().all(|label| l.contains(label)))
        .collect()
}

async fn metrics_count_outcomes_and_name_routes_by_template(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let ok = Receiver::start().await;
    let refusing = Receiver::start().await;
    refusing.answer_always(Reply::status(400));
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &ok.url).await;
    app.create_endpoint(&app_id, &refusing.url).await;
    app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    ok.wait_for_requests(1).await;
    dead_deliveries(&app, &app_id, 1).await;
    use hookline_core::time::Clock as _;
    hookline::metrics::sample(app.store(), hookline_core::time::SystemClock.now()).await;

    let text = app
        .request(Method::GET, "/metrics", None, &[])
        .await
        .text()
        .await
        .unwrap();
    for (name, labels) in [
        ("hookline_attempts_total", &["outcome=\"2xx\""][..]),
        ("hookline_attempts_total", &["outcome=\"4xx\""]),
        ("hookline_dlq_entries_total", &["reason=\"client_error\""]),
        (
            "hookline_deliveries_completed_total",
            &["result=\"succeeded\""],
        ),
        ("hookline_events_accepted_total", &[]),
        ("hookline_attempt_duration_seconds_bucket", &["le="]),
        ("hookline_publish_to_first_attempt_seconds_bucket", &["le="]),
        ("hookline_publish_to_success_seconds_bucket", &["le="]),
        ("hookline_dispatch_turn_seconds_bucket", &["le="]),
        ("hookline_dispatch_last_turn_timestamp_seconds", &[]),
        (
            "hookline_api_request_duration_seconds_bucket",
            &[
                "route=\"/v1/apps/{app}/events\"",
                "method=\"POST\"",
                "status=\"202\"",
            ],
        ),
        ("hookline_queue_depth", &["lane=\"fresh\""]),
        ("hookline_queue_oldest_due_age_seconds", &["lane=\"retry\""]),
        ("hookline_dlq_size", &[]),
        ("hookline_endpoint_breakers", &["state=\"closed\""]),
        ("hookline_database_up", &[]),
    ] {
        assert!(
            !series(&text, name, labels).is_empty(),
            "no {name} {labels:?} in /metrics"
        );
    }
    assert_eq!(
        series(&text, "hookline_database_up", &[]),
        ["hookline_database_up 1"]
    );
    // Routes by template only: no id ever becomes a label value.
    for line in series(&text, "hookline_api_request_duration_seconds_count", &[]) {
        assert!(!line.contains("app_") && !line.contains("ep_"), "{line}");
    }
    // Every family the binary serves is one it declares (and documents).
    let declared = hookline::metrics::all_names();
    for line in text.lines().filter(|l| l.starts_with("# TYPE ")) {
        let family = line.split_whitespace().nth(2).unwrap();
        assert!(
            declared.contains(&family),
            "{family} is exported but not declared"
        );
    }
}

async fn readiness_needs_current_migrations(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    wait_until(Duration::from_secs(30), "/readyz to answer 200", || async {
        let response = app.request(Method::GET, "/readyz", None, &[]).await;
        (response.status() == 200).then_some(())
    })
    .await;
    // A schema older than the binary: the last migration is missing.
    let forget =
        "DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)";
    {
        use sqlx::Connection;
        match engine {
            Engine::Sqlite => {
                let mut conn = sqlx::SqliteConnection::connect(&app.db.url).await.unwrap();
                sqlx::query(forget).execute(&mut conn).await.unwrap();
            }
            Engine::Postgres => {
                let mut conn = sqlx::PgConnection::connect(&app.db.url).await.unwrap();
                sqlx::query(forget).execute(&mut conn).await.unwrap();
            }
        }
    }
    let response = app.request(Method::GET, "/readyz", None, &[]).await;
    assert_eq!(response.status(), 503);
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "not_ready");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("hookline migrate"),
        "{problem}"
    );
    // Liveness does not depend on it.
    let alive = app.request(Method::GET, "/healthz", None, &[]).await;
    assert_eq!(alive.status(), 200);
}

async fn a_dispatcher_process_answers_probes_and_nothing_else(engine: Engine) {
    if engine == Engine::Sqlite {
        // A dispatcher beside an API node needs a shared database: PostgreSQL.
        return;
    }
    let db = TestDb::new(engine).await;
    let dispatcher = Process::start(&db, "dispatcher", None, &[]).await;
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{}{path}", dispatcher.base)).send();
    wait_until(
        Duration::from_secs(30),
        "the dispatcher to be ready",
        || async { get("/readyz").await.ok().filter(|r| r.status() == 200) },
    )
    .await;
    let metrics = get("/metrics").await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains("hookline_dispatch_last_turn_timestamp_seconds"),
        "{metrics}"
    );
    // No API: an admin key gets nothing from a dispatcher.
    let apps = http
        .get(format!("{}/v1/apps", dispatcher.base))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(apps.status(), 404);
}

async fn a_full_run_logs_no_payload_secret_token_or_signature(engine: Engine) {
    let db = TestDb::new(engine).await;
    let log = std::env::temp_dir().join(format!("hookline-log-{}.txt", ulid::Ulid::new()));
    let process = Process::start_logged(
        &db,
        "serve",
        &[
            (
                "RUST_LOG",
                "info,hookline=debug,hookline_dispatch=debug,hookline_api=debug",
            ),
            ("HOOKLINE_MAX_ATTEMPTS", "2"),
            ("HOOKLINE_RETRY_BASE_MS", "10"),
            ("HOOKLINE_RETRY_CAP_MS", "20"),
        ],
        &log,
    )
    .await;
    let app = TestApp::of_process(&process, db);
    let receiver = Receiver::start().await;
    // Fail twice (one retry, then the DLQ), then accept.
    receiver.script([Reply::status(500), Reply::status(500)]);
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"headers": {"x-api-token": "tok-CUSTOM-HEADER-SECRET"}}),
        )
        .await;
    let endpoint_id = endpoint["id"].as_str().unwrap();
    let old_secret = endpoint["secret"].as_str().unwrap().to_owned();
    let published = app
        .publish(
            &app_id,
            "order.paid",
            json!({"card": "PAYLOAD-MARKER-4242"}),
        )
        .await;
    let delivery = published["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    app.wait_for_delivery_state(&app_id, &delivery, "dead")
        .await;
    let rotated = app
        .call(
            Method::POST,
            &format!("/v1/apps/{app_id}/endpoints/{endpoint_id}/secret/rotate"),
            Some(&json!({})),
            200,
        )
        .await;
    let new_secret = rotated["key"].as_str().unwrap().to_owned();
    app.replay_until_succeeded(&app_id, &delivery).await;
    let received = receiver.wait_for_requests(3).await;
    assert!(process.terminate().success(), "a clean shutdown on SIGTERM");

    let text = std::fs::read_to_string(&log).unwrap();
    let _ = std::fs::remove_file(&log);
    assert!(text.contains("listening"), "the log was captured: {text}");
    assert!(
        !text.contains('\u{1b}'),
        "no colour codes when stderr is a file"
    );
    let mut secrets = vec![
        ("the payload", "PAYLOAD-MARKER-4242".to_owned()),
        ("the admin token", ADMIN_TOKEN.to_owned()),
        (
            "the custom header's value",
            "tok-CUSTOM-HEADER-SECRET".to_owned(),
        ),
        ("the old secret", old_secret.clone()),
        ("the new secret", new_secret.clone()),
        (
            "the old secret's key",
            old_secret["whsec_".len()..].to_owned(),
        ),
        (
            "the new secret's key",
            new_secret["whsec_".len()..].to_owned(),
        ),
    ];
    for request in &received {
        for signature in request.header("webhook-signature").split(' ') {
            let value = signature.split_once(',').unwrap().1;
            secrets.push(("a signature", value.to_owned()));
        }
    }
    assert_scrubbed(&text, &secrets);
}

/// A PostgreSQL URL naming a database the server lacks: the error says so, and how to make it.
#[tokio::test]
async fn a_missing_postgres_database_says_how_to_create_it() {
    let admin = crate::helpers::postgres_admin_url();
    let (server, _) = admin.rsplit_once('/').unwrap();
    let config = hookline::Config {
        database_url: format!("{server}/hookline_no_such_database"),
        master_key: Some(crate::helpers::TEST_MASTER_KEY.into()),
        ..hookline::Config::default()
    };
    let error = hookline::Server::start(config, hookline::Role::Serve)
        .await
        .err()
        .expect("no such database");
    let text = format!("{error:#}");
    assert!(
        text.contains("database `hookline_no_such_database` does not exist")
            && text.contains("createdb hookline_no_such_database"),
        "{text}"
    );
}

/// `hookline config check` as an operator runs it: the real binary, its exit
/// status and what it says, for a good file, `HOOKLINE_CONFIG`, a misspelt
/// variable, a missing file and a value out of range.
#[test]
fn config_check_names_the_bad_key_and_where_it_came_from() {
    let dir = std::env::temp_dir();
    let file = |name: &str, text: &str| {
        let path = dir.join(format!("hookline-{name}-{}.toml", ulid::Ulid::new()));
        std::fs::write(&path, text).unwrap();
        path
    };
    let run = |env: &[(&str, &str)], args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_hookline-under-test"))
            .env_clear()
            .envs(env.iter().copied())
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&output.stdout).into_owned()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), text)
    };
    let good = file("good", "max_attempts = 5\n");
    let good_path = good.to_str().unwrap();
    let (ok, text) = run(&[], &["--config", good_path, "config", "check"]);
    assert!(ok && text.contains("valid"), "{text}");
    // The documented variable for the file is not mistaken for a key.
    let (ok, text) = run(
        &[("HOOKLINE_CONFIG", good_path), ("HOOKLINE_TOKEN", "x")],
        &["config", "check"],
    );
    assert!(ok, "{text}");
    let (ok, text) = run(&[("HOOKLINE_MAX_ATEMPTS", "3")], &["config", "check"]);
    assert!(
        !ok && text.contains("max_atempts") && text.contains("HOOKLINE_"),
        "{text}"
    );
    let (ok, text) = run(
        &[],
        &["--config", "/nonexistent/hookline.toml", "config", "check"],
    );
    assert!(
        !ok && text.contains("configuration file /nonexistent/hookline.toml does not exist"),
        "{text}"
    );
    let bad = file("bad", "max_attempts = 0\n");
    let (ok, text) = run(&[], &["--config", bad.to_str().unwrap(), "config", "check"]);
    assert!(
        !ok && text.contains(&format!(
            "configuration key `max_attempts` (TOML file {}): must be 1 to 1000, not 0",
            bad.display()
        )),
        "{text}"
    );
    for path in [good, bad] {
        let _ = std::fs::remove_file(path);
    }
}

/// With `otlp_endpoint` set, spans reach an OpenTelemetry collector over
/// OTLP/HTTP: a stand-in collector on 127.0.0.1 receives protobuf batches
/// from the `hookline` service, and the last batch is flushed at SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_are_exported_over_otlp_when_configured() {
    use std::sync::{Arc, Mutex};
    /// Each request the collector got: its content type and body.
    type Batches = Arc<Mutex<Vec<(String, Vec<u8>)>>>;
    let received: Batches = Arc::default();
    let collector = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post({
            let received = received.clone();
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| async move {
                let kind = headers
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                received.lock().unwrap().push((kind, body.to_vec()));
                axum::http::StatusCode::OK
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, collector).await.unwrap() });

    let db = TestDb::new(Engine::Sqlite).await;
    let process = Process::start(
        &db,
        "serve",
        None,
        &[("HOOKLINE_OTLP_ENDPOINT", &endpoint), ("RUST_LOG", "info")],
    )
    .await;
    let app = TestApp::of_process(&process, db);
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    receiver.wait_for_requests(1).await;
    assert!(process.terminate().success());

    let batches = received.lock().unwrap().clone();
    assert!(!batches.is_empty(), "no span batch reached the collector");
    for (kind, body) in &batches {
        assert_eq!(kind, "application/x-protobuf");
        // Protobuf keeps strings as they are: the resource's service name.
        assert!(
            body.windows(8).any(|w| w == b"hookline"),
            "a batch without the service name"
        );
    }
}
