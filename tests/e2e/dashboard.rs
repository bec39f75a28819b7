//! The dashboard's listings: keyset pages that stay stable while rows arrive,
//! filters that return exactly the matching rows, and clear 400s for bad queries.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use hookline_core::model::DeliveryState;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{
    both_engines, publish_concurrently, wait_until, Engine, Receiver, Reply, TestApp,
};

both_engines!(
    every_listing_sees_each_row_once_while_new_rows_arrive,
    filters_return_exactly_the_matching_rows,
    bad_listing_queries_are_clear_400s,
    bulk_replay_sends_each_dead_delivery_once_more,
    endpoint_stats_match_what_the_receiver_saw,
    incidents_group_what_is_wrong_now_by_cause,
);

/// Every page of `path` (which has no `?` yet unless `query` adds one), `limit` at a time.
async fn walk(app: &TestApp, path: &str, limit: u32) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let sep = if path.contains('?') { '&' } else { '?' };
        let url = match &cursor {
            Some(c) => format!("{path}{sep}limit={limit}&before={c}"),
            None => format!("{path}{sep}limit={limit}"),
        };
        let page = app.get(&url).await;
        let data = page["data"].as_array().unwrap();
        assert!(data.len() <= limit as usize, "{url}");
        rows.extend(data.iter().cloned());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return rows,
        }
    }
}

fn ids(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

/// Each of `expected` exactly once in `seen` (which may hold rows made since).
fn each_once(listing: &str, seen: &[String], expected: &BTreeSet<String>) {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for id in seen {
        *counts.entry(id.as_str()).or_default() += 1;
    }
    assert!(
        counts.values().all(|&n| n == 1),
        "{listing}: a row was listed twice"
    );
    let missing: Vec<_> = expected
        .iter()
        .filter(|id| !counts.contains_key(id.as_str()))
        .collect();
    assert!(missing.is_empty(), "{listing}: missing {missing:?}");
}

async fn count(app: &TestApp, endpoint: &Value, state: DeliveryState) -> u64 {
    let id = hookline_core::ids::EndpointId::parse(endpoint["id"].as_str().unwrap()).unwrap();
    app.store()
        .endpoints()
        .count_deliveries(&id, state)
        .await
        .unwrap()
}

/// Publishes 500 events in two batches; their ids and their deliveries' ids.
async fn publish_500(app: &TestApp, app_id: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut events = BTreeSet::new();
    let mut deliveries = BTreeSet::new();
    for chunk in 0..2 {
        let batch: Vec<Value> = (0..250)
            .map(|n| json!({"event_type": "order.paid", "payload": {"n": chunk * 250 + n}}))
            .collect();
        let answer = app.publish_batch(app_id, batch).await;
        for event in answer["data"].as_array().unwrap() {
            events.insert(event["id"].as_str().unwrap().to_owned());
            for delivery in event["deliveries"].as_array().unwrap() {
                deliveries.insert(delivery["id"].as_str().unwrap().to_owned());
            }
        }
    }
    (events, deliveries)
}

/// 500 events to two endpoints that refuse them (1,000 dead deliveries, 1,000
/// attempts), then every listing walked page by page while 100 more events (200
/// deliveries) are published: each row that existed before is seen exactly once.
async fn every_listing_sees_each_row_once_while_new_rows_arrive(engine: Engine) {
    let app = std::sync::Arc::new(TestApp::spawn(engine).await);
    let receiver = Receiver::start().await;
    receiver.answer_always(Reply::status(400));
    let app_id = app.create_app().await;
    let first = app.create_endpoint(&app_id, &receiver.url).await;
    let second = app.create_endpoint(&app_id, &receiver.url).await;

    let (events, deliveries) = publish_500(&app, &app_id).await;
    assert_eq!((events.len(), deliveries.len()), (500, 1000));
    wait_until(Duration::from_secs(60), "1,000 dead deliveries", || async {
        (count(&app, &first, DeliveryState::Dead).await
            + count(&app, &second, DeliveryState::Dead).await
            == 1000)
            .then_some(())
    })
    .await;

    let more = {
        let (base, app_id) = (app.base.clone(), app_id.clone());
        tokio::spawn(async move { publish_concurrently(&base, &app_id, 100, 4).await })
    };
    let seen_events = ids(&walk(&app, &format!("/v1/apps/{app_id}/events"), 37).await);
    let delivery_rows = walk(&app, &format!("/v1/apps/{app_id}/deliveries"), 37).await;
    let seen_deliveries = ids(&delivery_rows);
    let seen_dead = ids(&walk(&app, &format!("/v1/apps/{app_id}/dlq"), 37).await);
    let mut attempts = Vec::new();
    for endpoint in [&first, &second] {
        let path = format!(
            "/v1/apps/{app_id}/endpoints/{}/attempts",
            endpoint["id"].as_str().unwrap()
        );
        attempts.extend(walk(&app, &path, 37).await);
    }
    more.await.unwrap();

    each_once("events", &seen_events, &events);
    each_once("deliveries", &seen_deliveries, &deliveries);
    each_once("dlq", &seen_dead, &deliveries);
    // One attempt per pre-existing delivery, each listed once.
    each_once("attempts", &ids(&attempts), &BTreeSet::new());
    let attempted: Vec<String> = attempts
        .iter()
        .map(|a| a["delivery_id"].as_str().unwrap().to_owned())
        .filter(|d| deliveries.contains(d))
        .collect();
    each_once("attempts by delivery", &attempted, &deliveries);
    // Newest first: events, and deliveries by their event.
    assert!(
        seen_events.windows(2).all(|w| w[0] > w[1]),
        "events newest first"
    );
    assert!(
        delivery_rows
            .windows(2)
            .all(|w| (&w[0]["event_id"].as_str(), &w[0]["id"].as_str())
                > (&w[1]["event_id"].as_str(), &w[1]["id"].as_str())),
        "deliveries newest event first"
    );
}

/// One event of the fixture: id, type, ordering key, published after `t`.
type KnownEvent = (String, &'static str, Option<&'static str>, bool);

/// What one delivery of the fixture is, to compute each filter's expected rows.
struct Known {
    id: String,
    event: String,
    event_type: &'static str,
    endpoint: &'static str,
    late: bool,
}

/// Three endpoints that answer 200, 500 (two attempts, then dead) and 404 (dead at
/// once) get nine events of three types, six before and three after a time `t`;
/// each filter on each listing answers exactly the rows it names.
async fn filters_return_exactly_the_matching_rows(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let (ok, failing, refusing) = (
        Receiver::start().await,
        Receiver::start().await,
        Receiver::start().await,
    );
    failing.answer_always(Reply::status(500));
    refusing.answer_always(Reply::status(404));
    let app_id = app.create_app().await;
    let ok_ep = app.create_endpoint(&app_id, &ok.url).await;
    let failing_ep = app
        .create_endpoint_with(&app_id, &failing.url, json!({"retry": {"max_attempts": 2}}))
        .await;
    let refusing_ep = app.create_endpoint(&app_id, &refusing.url).await;
    let name_of = |endpoint_id: &str| -> &'static str {
        if endpoint_id == ok_ep["id"] {
            "ok"
        } else if endpoint_id == failing_ep["id"] {
            "failing"
        } else {
            "refusing"
        }
    };

    const TYPES: [&str; 3] = ["order.paid", "order.refunded", "user.created"];
    let mut known = Vec::new();
    let mut event_rows: Vec<KnownEvent> = Vec::new();
    let mut t = String::new();
    for n in 0..9 {
        let late = n >= 6;
        if n == 6 {
            // `t` is a millisecond after every early id and before every late one.
            let boundary =
                hookline_core::time::Timestamp::from_system_time(std::time::SystemTime::now())
                    .as_millis()
                    + 1;
            while hookline_core::time::Timestamp::from_system_time(std::time::SystemTime::now())
                .as_millis()
                < boundary
            {
                tokio::task::yield_now().await;
            }
            t = hookline_core::time::Timestamp::from_millis(boundary).to_rfc3339();
        }
        let event_type = TYPES[n % 3];
        let key = (n % 2 == 0).then_some("k1");
        let mut body = json!({"event_type": event_type, "payload": {"n": n}});
        if let Some(key) = key {
            body["ordering_key"] = json!(key);
        }
        let published = app
            .call(
                Method::POST,
                &format!("/v1/apps/{app_id}/events"),
                Some(&body),
                202,
            )
            .await;
        let event = published["id"].as_str().unwrap().to_owned();
        event_rows.push((event.clone(), event_type, key, late));
        for d in published["deliveries"].as_array().unwrap() {
            // Just published: its event's type, no attempt yet.
            assert_eq!(d["event_type"], event_type, "{d}");
            assert_eq!(d.get("last_status"), Some(&Value::Null), "{d}");
            known.push(Known {
                id: d["id"].as_str().unwrap().to_owned(),
                event: event.clone(),
                event_type,
                endpoint: name_of(d["endpoint_id"].as_str().unwrap()),
                late,
            });
        }
    }
    assert_eq!(known.len(), 27);
    wait_until(
        Duration::from_secs(60),
        "every delivery settled",
        || async {
            (count(&app, &ok_ep, DeliveryState::Succeeded).await == 9
                && count(&app, &failing_ep, DeliveryState::Dead).await == 9
                && count(&app, &refusing_ep, DeliveryState::Dead).await == 9)
                .then_some(())
        },
    )
    .await;

    let ep = |name: &str| -> String {
        let endpoint = match name {
            "ok" => &ok_ep,
            "failing" => &failing_ep,
            _ => &refusing_ep,
        };
        endpoint["id"].as_str().unwrap().to_owned()
    };
    let some_event = known[3].event.clone();
    let set = |pick: &dyn Fn(&Known) -> bool| -> BTreeSet<String> {
        known
            .iter()
            .filter(|k| pick(k))
            .map(|k| k.id.clone())
            .collect()
    };
    let deliveries = format!("/v1/apps/{app_id}/deliveries");
    let cases: Vec<(String, BTreeSet<String>)> = vec![
        (deliveries.clone(), set(&|_| true)),
        (
            format!("{deliveries}?endpoint_id={}", ep("failing")),
            set(&|k| k.endpoint == "failing"),
        ),
        (
            format!("{deliveries}?state=succeeded"),
            set(&|k| k.endpoint == "ok"),
        ),
        (
            format!("{deliveries}?state=dead"),
            set(&|k| k.endpoint != "ok"),
        ),
        (format!("{deliveries}?state=pending"), BTreeSet::new()),
        (
            format!("{deliveries}?event_type=order.paid"),
            set(&|k| k.event_type == "order.paid"),
        ),
        (
            format!("{deliveries}?event_id={some_event}"),
            set(&|k| k.event == some_event),
        ),
        (
            format!("{deliveries}?status=500"),
            set(&|k| k.endpoint == "failing"),
        ),
        (
            format!("{deliveries}?status=4xx"),
            set(&|k| k.endpoint == "refusing"),
        ),
        (
            format!("{deliveries}?status=2xx"),
            set(&|k| k.endpoint == "ok"),
        ),
        (format!("{deliveries}?status=503"), BTreeSet::new()),
        (format!("{deliveries}?since={t}"), set(&|k| k.late)),
        (format!("{deliveries}?until={t}"), set(&|k| !k.late)),
        (
            format!(
                "{deliveries}?endpoint_id={}&event_type=user.created&since={t}",
                ep("refusing")
            ),
            set(&|k| k.endpoint == "refusing" && k.event_type == "user.created" && k.late),
        ),
    ];
    let dlq = format!("/v1/apps/{app_id}/dlq");
    let dlq_cases: Vec<(String, BTreeSet<String>)> = vec![
        (dlq.clone(), set(&|k| k.endpoint != "ok")),
        (
            format!("{dlq}?endpoint_id={}", ep("refusing")),
            set(&|k| k.endpoint == "refusing"),
        ),
        (
            format!("{dlq}?reason=retries_exhausted"),
            set(&|k| k.endpoint == "failing"),
        ),
        (
            format!("{dlq}?reason=client_error"),
            set(&|k| k.endpoint == "refusing"),
        ),
        (format!("{dlq}?reason=gone"), BTreeSet::new()),
        (
            format!("{dlq}?event_type=order.refunded&reason=client_error"),
            set(&|k| k.endpoint == "refusing" && k.event_type == "order.refunded"),
        ),
        (format!("{dlq}?until=2000-01-01T00:00:00Z"), BTreeSet::new()),
        (
            format!("{dlq}?since=2000-01-01T00:00:00Z"),
            set(&|k| k.endpoint != "ok"),
        ),
    ];
    let events = format!("/v1/apps/{app_id}/events");
    let event_set = |pick: &dyn Fn(&KnownEvent) -> bool| {
        event_rows
            .iter()
            .filter(|e| pick(e))
            .map(|e| e.0.clone())
            .collect::<BTreeSet<String>>()
    };
    let event_cases: Vec<(String, BTreeSet<String>)> = vec![
        (events.clone(), event_set(&|_| true)),
        (
            format!("{events}?event_type=user.created"),
            event_set(&|e| e.1 == "user.created"),
        ),
        (
            format!("{events}?ordering_key=k1"),
            event_set(&|e| e.2 == Some("k1")),
        ),
        (format!("{events}?since={t}"), event_set(&|e| e.3)),
        (
            format!("{events}?until={t}&event_type=order.paid"),
            event_set(&|e| !e.3 && e.1 == "order.paid"),
        ),
    ];
    for (path, expected) in cases.into_iter().chain(dlq_cases).chain(event_cases) {
        let got: BTreeSet<String> = ids(&walk(&app, &path, 4).await).into_iter().collect();
        assert_eq!(got, expected, "{path}");
    }

    // Every delivery says what its event was and what its newest attempt got:
    // in the listing, the DLQ, alone, and in its event.
    let status_of = |endpoint: &str| match endpoint {
        "ok" => 200,
        "failing" => 500,
        _ => 404,
    };
    let check = |row: &Value| {
        let k = known
            .iter()
            .find(|k| k.id == row["id"].as_str().unwrap())
            .unwrap();
        assert_eq!(row["event_type"], k.event_type, "{row}");
        assert_eq!(row["last_status"], status_of(k.endpoint), "{row}");
    };
    let listed = walk(&app, &deliveries, 4).await;
    let dead = walk(&app, &dlq, 4).await;
    assert_eq!((listed.len(), dead.len()), (27, 18));
    listed.iter().chain(&dead).for_each(check);
    for k in &known[..3] {
        let one = app
            .call(Method::GET, &format!("{deliveries}/{}", k.id), None, 200)
            .await;
        check(&one);
        let event = app
            .call(Method::GET, &format!("{events}/{}", k.event), None, 200)
            .await;
        let theirs = event["deliveries"].as_array().unwrap();
        assert_eq!(theirs.len(), 3);
        theirs.iter().for_each(check);
    }

    // An endpoint's attempts: the failing one made two per delivery, the last one dead.
    let attempts = format!("/v1/apps/{app_id}/endpoints/{}/attempts", ep("failing"));
    let all = walk(&app, &attempts, 5).await;
    assert_eq!(all.len(), 18);
    for (query, verdict, expected) in [
        ("?verdict=retry", "retry", 9),
        ("?verdict=dead", "dead", 9),
        ("?status=5xx", "", 18),
        ("?status=200", "", 0),
    ] {
        let rows = walk(&app, &format!("{attempts}{query}"), 5).await;
        assert_eq!(rows.len(), expected, "{query}");
        assert!(
            rows.iter()
                .all(|r| verdict.is_empty() || r["verdict"] == verdict),
            "{query}"
        );
    }
    // A time range on attempts is on when they started (RFC 3339 strings of one
    // format compare as times).
    let ok_attempts = format!("/v1/apps/{app_id}/endpoints/{}/attempts", ep("ok"));
    let started_late: BTreeSet<String> = walk(&app, &ok_attempts, 5)
        .await
        .iter()
        .filter(|a| a["started_at"].as_str().unwrap() >= t.as_str())
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        started_late.len() >= 3,
        "at least the late events' attempts"
    );
    let got: BTreeSet<String> =
        ids(&walk(&app, &format!("{ok_attempts}?status=200&since={t}"), 5).await)
            .into_iter()
            .collect();
    assert_eq!(got, started_late);
}

async fn bad_listing_queries_are_clear_400s(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let deliveries = format!("/v1/apps/{app_id}/deliveries");
    for (query, mentions) in [
        ("?limit=0", "limit"),
        ("?limit=251", "limit"),
        ("?limit=ten", "limit"),
        ("?state=lost", "state"),
        ("?status=7xx", "status"),
        ("?status=abc", "status"),
        ("?status=65535", "status"),
        ("?status=657xx", "status"),
        ("?status=0xx", "status"),
        ("?since=yesterday", "since"),
        ("?until=2026-12-01T10:00:00%2B02:00", "until"),
        ("?endpoint_id=nonsense", "endpoint_id"),
        ("?before=nonsense", "before"),
        ("?colour=red", "colour"),
    ] {
        let response = app
            .request(Method::GET, &format!("{deliveries}{query}"), None, &[])
            .await;
        assert_eq!(response.status(), 400, "{query}");
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json",
            "{query}"
        );
        let problem: Value = response.json().await.unwrap();
        assert_eq!(problem["code"], "invalid_query", "{query}");
        assert!(
            problem["detail"].as_str().unwrap().contains(mentions),
            "{query}: {problem}"
        );
    }
    for path in [
        format!("/v1/apps/{app_id}/dlq?reason=bored"),
        format!("/v1/apps/{app_id}/dlq?before=12_nonsense"),
        format!("/v1/apps/{app_id}/events?limit=1000"),
        format!("/v1/apps/{app_id}/endpoints/ep_01J00000000000000000000000/attempts?verdict=maybe"),
    ] {
        let response = app.request(Method::GET, &path, None, &[]).await;
        assert_eq!(response.status(), 400, "{path}");
    }
    app.call(
        Method::GET,
        &format!("/v1/apps/{app_id}/endpoints/ep_01J00000000000000000000000/attempts"),
        None,
        404,
    )
    .await;
}

/// 1,000 dead deliveries (500 events at two receivers that refused them), then
/// the receivers recover: the dry run counts 1,000; a bulk replay, an identical
/// request while it runs and a single replay of one of them at the same moment
/// send each delivery exactly once more; the job's progress reaches 1000/1000.
async fn bulk_replay_sends_each_dead_delivery_once_more(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receivers = [Receiver::start().await, Receiver::start().await];
    let app_id = app.create_app().await;
    let mut endpoints = Vec::new();
    for receiver in &receivers {
        receiver.answer_always(Reply::status(400));
        endpoints.push(app.create_endpoint(&app_id, &receiver.url).await);
    }
    let (events, deliveries) = publish_500(&app, &app_id).await;
    assert_eq!((events.len(), deliveries.len()), (500, 1000));
    let some_delivery = deliveries.iter().next().unwrap().clone();
    wait_until(Duration::from_secs(60), "1,000 dead deliveries", || async {
        (count(&app, &endpoints[0], DeliveryState::Dead).await
            + count(&app, &endpoints[1], DeliveryState::Dead).await
            == 1000)
            .then_some(())
    })
    .await;

    let replays = format!("/v1/apps/{app_id}/replays");
    let dry = |body: Value| {
        let replays = replays.clone();
        let app = &app;
        async move { app.call(Method::POST, &replays, Some(&body), 200).await }
    };
    assert_eq!(dry(json!({"dry_run": true})).await["count"], 1000);
    let first_endpoint = endpoints[0]["id"].as_str().unwrap();
    assert_eq!(
        dry(json!({"dry_run": true, "endpoint_id": first_endpoint, "reason": "client_error"}))
            .await["count"],
        500
    );
    assert_eq!(
        dry(json!({"dry_run": true, "reason": "gone"})).await["count"],
        0
    );

    for receiver in &receivers {
        receiver.answer_always(Reply::status(200));
    }
    let single = format!("/v1/apps/{app_id}/deliveries/{some_delivery}/replay");
    let everything = json!({});
    let (bulk, single) = tokio::join!(
        app.request(Method::POST, &replays, Some(&everything), &[]),
        app.request(Method::POST, &single, None, &[]),
    );
    assert_eq!(bulk.status(), 202);
    let job: Value = bulk.json().await.unwrap();
    let single_won = match single.status().as_u16() {
        202 => 1,
        200 => 0,
        other => panic!("single replay answered {other}"),
    };
    // The same request again: while the job runs, that job; if it already finished,
    // a new one that finds nothing dead.
    let again = app
        .request(Method::POST, &replays, Some(&everything), &[])
        .await;
    let again_status = again.status().as_u16();
    let again: Value = again.json().await.unwrap();
    match again_status {
        200 => assert_eq!(again["id"], job["id"]),
        202 => assert_eq!(again["total"], 0, "{again}"),
        other => panic!("the repeated bulk replay answered {other}"),
    }

    let job_path = format!("{replays}/{}", job["id"].as_str().unwrap());
    let finished = wait_until(
        Duration::from_secs(60),
        "the bulk replay to finish",
        || async {
            let job = app.get(&job_path).await;
            (job["state"] == "completed").then_some(job)
        },
    )
    .await;
    // The single replay won either before the job counted the DLQ (999 to do,
    // none skipped) or while the job ran (1000 to do, that one skipped).
    let total = finished["total"].as_u64().unwrap();
    let skipped = finished["skipped"].as_u64().unwrap();
    assert!(
        (total == 1000 && skipped == single_won)
            || (total == 999 && single_won == 1 && skipped == 0),
        "{finished}"
    );
    assert_eq!(finished["done"].as_u64().unwrap(), total);
    assert_eq!(finished["replayed"].as_u64().unwrap(), 1000 - single_won);

    for receiver in &receivers {
        let got = receiver.wait_for_requests(1000).await;
        let delivered: Vec<String> = got
            .iter()
            .filter(|r| r.status == 200)
            .map(|r| r.header("webhook-id").to_owned())
            .collect();
        each_once("replayed deliveries", &delivered, &events);
        assert_eq!(delivered.len(), 500);
    }
    assert!(app.get(&format!("/v1/apps/{app_id}/dlq")).await["data"]
        .as_array()
        .unwrap()
        .is_empty());
    assert_eq!(
        app.call(Method::POST, &format!("{job_path}/cancel"), None, 200)
            .await["state"],
        "completed"
    );
}

/// Ten events: the receiver takes 30 ms to accept eight and refuses two at once.
/// The stats say so: 8 succeeded and 2 dead (client_error), 10 attempts in the
/// hour at a success rate of 0.8, and a median latency of at least 30 ms.
async fn endpoint_stats_match_what_the_receiver_saw(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let mut replies: Vec<Reply> = (0..8)
        .map(|_| Reply::status(200).after(Duration::from_millis(30)))
        .collect();
    replies.extend([Reply::status(404), Reply::status(404)]);
    receiver.script(replies);
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    for n in 0..10 {
        app.publish(&app_id, "order.paid", json!({"n": n})).await;
    }
    wait_until(
        Duration::from_secs(30),
        "every delivery settled",
        || async {
            (count(&app, &endpoint, DeliveryState::Succeeded).await == 8
                && count(&app, &endpoint, DeliveryState::Dead).await == 2)
                .then_some(())
        },
    )
    .await;
    assert_eq!(receiver.requests().len(), 10);

    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}/stats",
        endpoint["id"].as_str().unwrap()
    );
    let stats = app.get(&path).await;
    assert_eq!(stats["deliveries"]["succeeded"], 8, "{stats}");
    assert_eq!(stats["deliveries"]["dead"], 2);
    assert_eq!(stats["deliveries"]["pending"], 0);
    assert_eq!(stats["dlq_by_reason"], json!({"client_error": 2}));
    assert_eq!(stats["breaker"], "closed");
    for window in ["hour", "day", "week"] {
        let w = &stats["windows"][window];
        assert_eq!(w["attempts"], 10, "{window}");
        assert_eq!(w["delivered"], 8, "{window}");
        assert_eq!(w["success_rate"], 0.8, "{window}");
        assert_eq!(w["sampled"], false, "{window}");
        assert_eq!(w["filtered"], 0, "{window}: no filter, nothing dropped");
        let p50 = w["latency_ms"]["p50"].as_u64().unwrap();
        let p99 = w["latency_ms"]["p99"].as_u64().unwrap();
        assert!(p50 >= 30 && p99 >= p50, "{window}: {w}");
    }
    app.call(
        Method::GET,
        &format!("/v1/apps/{app_id}/endpoints/ep_01J00000000000000000000000/stats"),
        None,
        404,
    )
    .await;
}

/// Six endpoints: two answer 503 (their breakers open), one refuses with 401,
/// one is paused with a delivery held, one is disabled by hand, one is
/// healthy. The incidents are those four troubles, grouped by cause, worst
/// first, each said in one sentence; the healthy endpoint is in none.
async fn incidents_group_what_is_wrong_now_by_cause(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| {
        c.breaker_failure_threshold = 2;
        c.breaker_cooldown_ms = 600_000;
    })
    .await;
    let app_id = app.create_app().await;
    let incidents_path = format!("/v1/apps/{app_id}/incidents");
    let all_good = app.get(&incidents_path).await;
    assert_eq!(all_good["data"], json!([]), "nothing is wrong yet");

    let (down, refusing, healthy) = (
        Receiver::start().await,
        Receiver::start().await,
        Receiver::start().await,
    );
    down.answer_always(Reply::status(503));
    refusing.answer_always(Reply::status(401));
    let endpoint = |url: &str, types: &[&str]| {
        let (app, app_id, url) = (&app, app_id.clone(), url.to_owned());
        let types: Vec<String> = types.iter().map(|t| t.to_string()).collect();
        async move {
            app.create_endpoint_with(&app_id, &url, json!({ "event_types": types }))
                .await["id"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let (first_down, second_down) = (
        endpoint(&down.url, &["order.paid"]).await,
        endpoint(&down.url, &["order.paid"]).await,
    );
    let refused = endpoint(&refusing.url, &["invoice.paid"]).await;
    let paused = endpoint(&healthy.url, &["user.created"]).await;
    let disabled = endpoint(&healthy.url, &["user.deleted"]).await;
    let fine = endpoint(&healthy.url, &["order.paid"]).await;
    for (id, patch) in [
        (&paused, json!({"paused": true})),
        (&disabled, json!({"enabled": false})),
    ] {
        app.call(
            Method::PATCH,
            &format!("/v1/apps/{app_id}/endpoints/{id}"),
            Some(&patch),
            200,
        )
        .await;
    }
    for (event_type, n) in [("order.paid", 2), ("invoice.paid", 2), ("user.created", 1)] {
        for _ in 0..n {
            app.publish(&app_id, event_type, json!({})).await;
        }
    }

    let incidents = wait_until(
        Duration::from_secs(30),
        "four incidents, both breakers open",
        || async {
            let answer = app.get(&incidents_path).await;
            let data = answer["data"].as_array().unwrap();
            let settled = data.len() == 4
                && data[0]["endpoints"]
                    .as_array()
                    .is_some_and(|e| e.len() == 2 && e.iter().all(|e| e["breaker"] == "open"))
                && data[2]["dead"] == 2;
            settled.then_some(answer)
        },
    )
    .await;
    let said: Vec<(&str, &str, Vec<&str>, &str)> = incidents["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["kind"].as_str().unwrap(),
                i["action"].as_str().unwrap(),
                i["endpoints"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["endpoint_id"].as_str().unwrap())
                    .collect(),
                i["message"].as_str().unwrap(),
            )
        })
        .collect();
    let mut down_both = vec![first_down.as_str(), second_down.as_str()];
    down_both.sort();
    assert_eq!(
        said,
        vec![
            ("failing", "fix_endpoint", down_both, "2 endpoints answer 503 Service Unavailable: 4 deliveries wait and are retried."),
            ("disabled", "enable", vec![disabled.as_str()], "Your endpoint is disabled by hand."),
            ("dead_letters", "fix_then_replay", vec![refused.as_str()], "Your endpoint refused deliveries with 401 Unauthorized: 2 deliveries are in the dead-letter queue. Fix it, then recover them."),
            ("paused", "resume", vec![paused.as_str()], "Your endpoint is paused: 1 delivery is held until it is resumed."),
        ]
    );
    let data = &incidents["data"];
    assert_eq!(
        (&data[0]["code"], &data[0]["status"], &data[0]["waiting"]),
        (&json!("server_error"), &json!(503), &json!(4))
    );
    assert_eq!(
        (&data[2]["code"], &data[2]["status"]),
        (&json!("client_error_no_retry"), &json!(401))
    );
    for incident in data.as_array().unwrap() {
        assert!(
            incident["since"].is_string(),
            "each says since when: {incident}"
        );
    }
    for e in data[0]["endpoints"].as_array().unwrap() {
        assert!(e["next_probe_at"].is_string(), "{e}");
        assert_eq!(e["cause"]["code"], "server_error", "{e}");
    }
    let named: Vec<&str> = data
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["endpoints"].as_array().unwrap())
        .map(|e| e["endpoint_id"].as_str().unwrap())
        .collect();
    assert!(
        !named.contains(&fine.as_str()),
        "the healthy endpoint is in no incident"
    );
    // The healthy endpoint got its two orders; the paused one held its event.
    let got = healthy.wait_for_requests(2).await;
    assert!(
        got.iter().all(|r| r.json()["type"] == "order.paid"),
        "only the orders reached the healthy receiver"
    );
    // Deaths older than `since` are not counted; a bad time is a clear 400.
    let later = app
        .get(&format!("{incidents_path}?since=2999-01-01T00:00:00Z"))
        .await;
    assert!(
        later["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["kind"] != "dead_letters"),
        "{later}"
    );
    app.call(
        Method::GET,
        &format!("{incidents_path}?since=yesterday"),
        None,
        400,
    )
    .await;
}
