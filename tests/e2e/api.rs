//! The HTTP API's promises: auth, problem+json errors that lose nothing,
//! idempotent publishing, and the management round trips.

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, Engine, Receiver, TestApp};

both_engines!(
    concurrent_identical_publishes_with_one_key_make_one_event,
    same_key_with_another_body_is_refused,
    bad_input_gets_problem_json_and_writes_nothing,
    a_refused_body_does_not_break_the_producers_next_request,
    apps_and_endpoints_round_trip,
    batch_publish_is_one_transaction_with_per_event_idempotency,
    create_key_takes_an_app_by_id_or_uid_and_refuses_unknown_ones,
    keys_are_made_listed_and_revoked_over_the_api_and_the_cli,
);

async fn publish_with_key(
    app: &TestApp,
    app_id: &str,
    key: &str,
    body: &Value,
) -> (u16, Option<String>, String) {
    let response = app
        .request(
            Method::POST,
            &format!("/v1/apps/{app_id}/events"),
            Some(body),
            &[("idempotency-key", key)],
        )
        .await;
    let status = response.status().as_u16();
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap().to_owned());
    (status, replayed, response.text().await.unwrap())
}

fn app_key(app_id: &str) -> hookline_core::ids::AppId {
    hookline_core::ids::AppId::parse(app_id).unwrap()
}

async fn concurrent_identical_publishes_with_one_key_make_one_event(engine: Engine) {
    let app = std::sync::Arc::new(TestApp::spawn(engine).await);
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let body = json!({"event_type": "order.paid", "payload": {"order": 42}});

    let tasks: Vec<_> = (0..50)
        .map(|_| {
            let (app, app_id, body) = (app.clone(), app_id.clone(), body.clone());
            tokio::spawn(
                async move { publish_with_key(&app, &app_id, "order-42-paid", &body).await },
            )
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    assert!(
        answers.iter().all(|(status, _, _)| *status == 202),
        "{answers:?}"
    );
    let bodies: Vec<&String> = answers.iter().map(|(_, _, body)| body).collect();
    assert!(
        bodies.windows(2).all(|w| w[0] == w[1]),
        "50 identical answers"
    );
    let fresh = answers
        .iter()
        .filter(|(_, replayed, _)| replayed.is_none())
        .count();
    assert_eq!(
        fresh, 1,
        "exactly one answer is the original, the rest say Idempotent-Replayed"
    );

    assert_eq!(
        app.store()
            .listings()
            .count_events(&app_key(&app_id))
            .await
            .unwrap(),
        1
    );
    let event_id = serde_json::from_str::<Value>(bodies[0]).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let received = receiver.wait_for_requests(1).await;
    assert_eq!(received[0].header("webhook-id"), event_id);

    // Re-serialised differently (key order, spacing), it is still the same request.
    let reordered = r#"{ "payload": {"order": 42}, "event_type": "order.paid" }"#;
    let response = app
        .http
        .post(format!("{}/v1/apps/{app_id}/events", app.base))
        .bearer_auth(crate::helpers::ADMIN_TOKEN)
        .header("idempotency-key", "order-42-paid")
        .body(reordered)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["idempotent-replayed"], "true");
    assert_eq!(&response.text().await.unwrap(), bodies[0]);
}

async fn same_key_with_another_body_is_refused(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let first = json!({"event_type": "order.paid", "payload": {"order": 42}});
    let other = json!({"event_type": "order.paid", "payload": {"order": 43}});
    assert_eq!(publish_with_key(&app, &app_id, "k", &first).await.0, 202);
    let (status, _, body) = publish_with_key(&app, &app_id, "k", &other).await;
    assert_eq!(status, 422);
    let problem: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(problem["code"], "idempotency_key_reused");
    assert_eq!(
        app.store()
            .listings()
            .count_events(&app_key(&app_id))
            .await
            .unwrap(),
        1
    );
}

async fn bad_input_gets_problem_json_and_writes_nothing(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| c.max_payload_bytes = 1024).await;
    let app_id = app.create_app().await;
    let events = format!("{}/v1/apps/{app_id}/events", app.base);
    let token = crate::helpers::ADMIN_TOKEN;

    let cases: Vec<(&str, reqwest::RequestBuilder, u16, &str)> = vec![
        (
            "no token",
            app.http
                .post(&events)
                .json(&json!({"event_type": "a", "payload": {}})),
            401,
            "unauthorized",
        ),
        (
            "wrong token",
            app.http
                .post(&events)
                .bearer_auth("hk_wrong")
                .json(&json!({"event_type": "a", "payload": {}})),
            401,
            "unauthorized",
        ),
        (
            "malformed JSON",
            app.http
                .post(&events)
                .bearer_auth(token)
                .body(r#"{"event_type": "a", "payload": "#),
            400,
            "malformed_json",
        ),
        (
            "missing field",
            app.http
                .post(&events)
                .bearer_auth(token)
                .json(&json!({"payload": {}})),
            422,
            "validation_failed",
        ),
        (
            "payload too large",
            app.http
                .post(&events)
                .bearer_auth(token)
                .json(&json!({"event_type": "a", "payload": "x".repeat(2000)})),
            413,
            "payload_too_large",
        ),
        (
            "body far too large",
            app.http.post(&events).bearer_auth(token).body(format!(
                r#"{{"event_type":"a","payload":"{}"}}"#,
                "x".repeat(100_000)
            )),
            413,
            "payload_too_large",
        ),
        (
            "unknown app",
            app.http
                .post(format!(
                    "{}/v1/apps/app_01J00000000000000000000000/events",
                    app.base
                ))
                .bearer_auth(token)
                .json(&json!({"event_type": "a", "payload": {}})),
            404,
            "not_found",
        ),
        (
            "unknown event",
            app.http
                .get(format!("{events}/msg_01J00000000000000000000000"))
                .bearer_auth(token),
            404,
            "not_found",
        ),
        (
            "malformed id",
            app.http
                .get(format!("{events}/nonsense"))
                .bearer_auth(token),
            404,
            "not_found",
        ),
        (
            "unknown delivery replay",
            app.http
                .post(format!(
                    "{}/v1/apps/{app_id}/deliveries/dlv_01J00000000000000000000000/replay",
                    app.base
                ))
                .bearer_auth(token),
            404,
            "not_found",
        ),
        (
            "endpoint with a bad scheme",
            app.http
                .post(format!("{}/v1/apps/{app_id}/endpoints", app.base))
                .bearer_auth(token)
                .json(&json!({"url": "ftp://example.com"})),
            422,
            "validation_failed",
        ),
        (
            "endpoint with a bad secret",
            app.http
                .post(format!("{}/v1/apps/{app_id}/endpoints", app.base))
                .bearer_auth(token)
                .json(&json!({"url": "https://example.com", "secret": "hunter2"})),
            422,
            "validation_failed",
        ),
        (
            "endpoint with a concurrency ceiling of 0",
            app.http
                .post(format!("{}/v1/apps/{app_id}/endpoints", app.base))
                .bearer_auth(token)
                .json(&json!({"url": "https://example.com", "max_in_flight": 0})),
            422,
            "validation_failed",
        ),
        (
            "unknown field",
            app.http
                .post(&events)
                .bearer_auth(token)
                .json(&json!({"event_type": "a", "payload": {}, "colour": "red"})),
            422,
            "validation_failed",
        ),
        // NUL cannot be stored in PostgreSQL's text: the same clear refusal on both engines.
        (
            "NUL in an event type",
            app.http
                .post(&events)
                .bearer_auth(token)
                .json(&json!({"event_type": "order\u{0}paid", "payload": {}})),
            422,
            "validation_failed",
        ),
        (
            "NUL in an ordering key",
            app.http
                .post(&events)
                .bearer_auth(token)
                .json(&json!({"event_type": "a", "ordering_key": "k\u{0}", "payload": {}})),
            422,
            "validation_failed",
        ),
        (
            "NUL in an app name",
            app.http
                .post(format!("{}/v1/apps", app.base))
                .bearer_auth(token)
                .json(&json!({"name": "acme\u{0}"})),
            422,
            "validation_failed",
        ),
        (
            "NUL in an endpoint description",
            app.http
                .post(format!("{}/v1/apps/{app_id}/endpoints", app.base))
                .bearer_auth(token)
                .json(&json!({"url": "https://example.com", "description": "a\u{0}b"})),
            422,
            "validation_failed",
        ),
        (
            "a wildcard that is not a whole last segment",
            app.http
                .post(format!("{}/v1/apps/{app_id}/endpoints", app.base))
                .bearer_auth(token)
                .json(&json!({"url": "https://example.com", "event_types": ["inv*"]})),
            422,
            "validation_failed",
        ),
    ];
    for (case, request, status, code) in cases {
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), status, "{case}");
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json",
            "{case}"
        );
        let problem: Value = response.json().await.unwrap();
        assert_eq!(problem["code"], code, "{case}: {problem}");
        assert_eq!(problem["status"], status, "{case}");
        assert!(
            problem["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{case}"
        );
    }
    assert_eq!(
        app.store()
            .listings()
            .count_events(&app_key(&app_id))
            .await
            .unwrap(),
        0,
        "nothing half-written"
    );
    let endpoints = app.get(&format!("/v1/apps/{app_id}/endpoints")).await;
    assert!(endpoints["data"].as_array().unwrap().is_empty());
    let apps = app.get("/v1/apps").await;
    assert_eq!(
        apps["data"].as_array().unwrap().len(),
        1,
        "no app half-made"
    );
}

/// A request refused before its body was read leaves the rest of the body on
/// the socket, so the server closes that connection. It must say so: a
/// producer's keep-alive pool would otherwise send its next publish down the
/// closing connection and see a broken pipe on a request that was fine.
async fn a_refused_body_does_not_break_the_producers_next_request(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| c.max_payload_bytes = 1024).await;
    let app_id = app.create_app().await;
    let events = format!("{}/v1/apps/{app_id}/events", app.base);
    let token = crate::helpers::ADMIN_TOKEN;
    let oversized = format!(
        r#"{{"event_type":"a","payload":"{}"}}"#,
        "x".repeat(100_000)
    );

    let mut accepted = 0u64;
    for round in 0..20 {
        for (refusal, status) in [
            (app.http.post(&events).bearer_auth(token), 413),
            (app.http.post(&events).bearer_auth("hk_wrong"), 401),
        ] {
            let response = refusal.body(oversized.clone()).send().await.unwrap();
            assert_eq!(response.status().as_u16(), status, "round {round}");
            assert_eq!(
                response.headers().get("connection").map(|v| v.as_bytes()),
                Some(&b"close"[..]),
                "round {round}: a {status} with its body unread must close the connection"
            );

            let next = app
                .http
                .post(&events)
                .bearer_auth(token)
                .json(&json!({"event_type": "a", "payload": {"round": round}}))
                .send()
                .await
                .unwrap_or_else(|e| panic!("round {round}: the publish after a {status}: {e}"));
            assert_eq!(next.status().as_u16(), 202, "round {round}");
            assert_ne!(
                next.headers().get("connection").map(|v| v.as_bytes()),
                Some(&b"close"[..]),
                "an answered request keeps its connection"
            );
            accepted += 1;
        }
    }
    assert_eq!(
        app.store()
            .listings()
            .count_events(&app_key(&app_id))
            .await
            .unwrap(),
        accepted,
        "every publish after a refusal was accepted, and nothing refused was written"
    );
}

async fn apps_and_endpoints_round_trip(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let created = app
        .call(
            Method::POST,
            "/v1/apps",
            Some(&json!({"name": "Acme", "uid": "acme"})),
            201,
        )
        .await;
    let app_id = created["id"].as_str().unwrap();
    assert_eq!(
        app.get("/v1/apps/acme").await["id"],
        app_id,
        "an app is reachable by its uid"
    );
    let conflict = app
        .request(
            Method::POST,
            "/v1/apps",
            Some(&json!({"name": "B", "uid": "acme"})),
            &[],
        )
        .await;
    assert_eq!(conflict.status(), 409);
    let renamed = app
        .call(
            Method::PATCH,
            "/v1/apps/acme",
            Some(&json!({"name": "Acme Inc"})),
            200,
        )
        .await;
    assert_eq!(renamed["name"], "Acme Inc");
    assert_eq!(
        app.get("/v1/apps").await["data"].as_array().unwrap().len(),
        1
    );

    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let endpoint = app
        .call(
            Method::POST,
            "/v1/apps/acme/endpoints",
            Some(&json!({"url": "https://hooks.example.com/in", "secret": secret, "event_types": ["a"], "retry": {"max_attempts": 3}})),
            201,
        )
        .await;
    assert_eq!(endpoint["secret"], secret);
    let path = format!(
        "/v1/apps/acme/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );
    let fetched = app.get(&path).await;
    assert!(
        fetched.get("secret").is_none(),
        "the secret is shown on creation and via /secret only"
    );
    assert_eq!(fetched["retry"], json!({"max_attempts": 3}));
    assert_eq!(app.get(&format!("{path}/secret")).await["key"], secret);
    let patched = app
        .call(
            Method::PATCH,
            &path,
            Some(&json!({"enabled": false, "event_types": null, "description": "main"})),
            200,
        )
        .await;
    assert_eq!(
        (
            patched["enabled"].as_bool(),
            patched["event_types"].is_null()
        ),
        (Some(false), true)
    );
    assert_eq!(patched["description"], "main");
    assert_eq!(
        app.get("/v1/apps/acme/endpoints").await["data"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    app.call(Method::DELETE, &path, None, 204).await;
    app.call(Method::GET, &path, None, 404).await;
    app.call(Method::DELETE, "/v1/apps/acme", None, 204).await;
    app.call(Method::GET, "/v1/apps/acme", None, 404).await;
    assert_eq!(app.get("/healthz").await, json!({"status": "ok"}));
    assert_eq!(app.get("/readyz").await, json!({"status": "ready"}));
}

async fn batch_publish_is_one_transaction_with_per_event_idempotency(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let path = format!("/v1/apps/{app_id}/events/batch");
    let batch = json!({"events": [
        {"event_type": "a", "payload": {"n": 1}, "idempotency_key": "k1"},
        {"event_type": "b", "payload": {"n": 2}, "ordering_key": "o"},
        {"event_type": "c", "payload": {"n": 3}, "idempotency_key": "k3"},
    ]});
    let first = app.call(Method::POST, &path, Some(&batch), 202).await;
    let items = first["data"].as_array().unwrap();
    assert_eq!(items.len(), 3);
    assert!(items
        .iter()
        .all(|i| i["status"] == 202 && i["idempotent_replayed"] == false));
    assert_eq!(items[1]["sequence"], 1);
    assert_eq!(receiver.wait_for_requests(3).await.len(), 3);

    // Again: keyed events are replayed (same ids), the unkeyed one is new, a reused key is refused.
    let again = json!({"events": [
        {"event_type": "a", "payload": {"n": 1}, "idempotency_key": "k1"},
        {"event_type": "b", "payload": {"n": 2}},
        {"event_type": "c", "payload": {"n": 999}, "idempotency_key": "k3"},
    ]});
    let second = app.call(Method::POST, &path, Some(&again), 202).await;
    let items2 = second["data"].as_array().unwrap();
    assert_eq!(
        (
            items2[0]["id"].clone(),
            items2[0]["idempotent_replayed"].clone()
        ),
        (items[0]["id"].clone(), json!(true))
    );
    assert_ne!(items2[1]["id"], items[1]["id"]);
    assert_eq!(
        (items2[2]["status"].as_u64(), items2[2]["code"].as_str()),
        (Some(422), Some("idempotency_key_reused"))
    );
    // A key means the same in a batch and in a single publish.
    let (status, replayed, body) = publish_with_key(
        &app,
        &app_id,
        "k1",
        &json!({"event_type": "a", "payload": {"n": 1}}),
    )
    .await;
    assert_eq!((status, replayed.as_deref()), (202, Some("true")));
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["id"],
        items[0]["id"]
    );
    assert_eq!(
        app.store()
            .listings()
            .count_events(&app_key(&app_id))
            .await
            .unwrap(),
        4
    );

    // One key twice in a batch means what it means across two requests: the
    // same body is the same event, another body is refused.
    let twice = json!({"events": [
        {"event_type": "a", "payload": {"n": 7}, "idempotency_key": "dup"},
        {"event_type": "a", "payload": {"n": 7}, "idempotency_key": "dup"},
        {"event_type": "a", "payload": {"n": 8}, "idempotency_key": "dup"},
    ]});
    let answer = app.call(Method::POST, &path, Some(&twice), 202).await;
    let dup = answer["data"].as_array().unwrap();
    assert_eq!(
        (
            dup[0]["status"].as_u64(),
            dup[0]["idempotent_replayed"].clone()
        ),
        (Some(202), json!(false)),
        "{answer}"
    );
    assert_eq!(
        (dup[1]["id"].clone(), dup[1]["idempotent_replayed"].clone()),
        (dup[0]["id"].clone(), json!(true)),
        "{answer}"
    );
    assert_eq!(dup[2]["code"], "idempotency_key_reused", "{answer}");
    assert_eq!(
        app.store()
            .listings()
            .count_events(&app_key(&app_id))
            .await
            .unwrap(),
        5
    );

    // One invalid event fails the whole batch and writes nothing.
    let bad = json!({"events": [{"event_type": "a", "payload": {}}, {"payload": {}}]});
    let response = app.request(Method::POST, &path, Some(&bad), &[]).await;
    assert_eq!(response.status(), 422);
    let problem: Value = response.json().await.unwrap();
    assert!(
        problem["detail"].as_str().unwrap().starts_with("events[1]"),
        "{problem}"
    );
    assert_eq!(
        app.store()
            .listings()
            .count_events(&app_key(&app_id))
            .await
            .unwrap(),
        5
    );
    let too_many = json!({"events": vec![json!({"event_type": "a", "payload": {}}); 1001]});
    assert_eq!(
        app.request(Method::POST, &path, Some(&too_many), &[])
            .await
            .status(),
        422
    );

    // A batch is held to its own limit, not to one event's: three events of
    // 200 KiB each are one body of 600 KiB.
    let large =
        json!({"events": vec![json!({"event_type": "a", "payload": "x".repeat(200 * 1024)}); 3]});
    let large = app.call(Method::POST, &path, Some(&large), 202).await;
    assert_eq!(large["data"].as_array().unwrap().len(), 3);
}

/// `hookline create-key --app` (the real binary): an app's id or its uid make a key
/// that reaches that app only; an app that does not exist is refused.
async fn create_key_takes_an_app_by_id_or_uid_and_refuses_unknown_ones(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acme = app
        .call(
            Method::POST,
            "/v1/apps",
            Some(&json!({"name": "Acme", "uid": "acme"})),
            201,
        )
        .await;
    let other = app.create_app().await;
    let create_key = |target: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_hookline-under-test"))
            .args(["create-key", "--app", target, "--capabilities", "read"])
            .env("HOOKLINE_DATABASE_URL", &app.db.url)
            .env("HOOKLINE_MASTER_KEY", crate::helpers::TEST_MASTER_KEY)
            .env("RUST_LOG", "warn")
            .output()
            .expect("running hookline create-key")
    };
    for target in ["acme", acme["id"].as_str().unwrap()] {
        let made = create_key(target);
        assert!(made.status.success(), "--app {target}: {made:?}");
        let key = String::from_utf8(made.stdout).unwrap().trim().to_owned();
        let as_key = |path: String| {
            app.http
                .get(format!("{}{path}", app.base))
                .bearer_auth(key.clone())
                .send()
        };
        assert_eq!(as_key("/v1/apps/acme".into()).await.unwrap().status(), 200);
        assert_eq!(
            as_key(format!("/v1/apps/{other}")).await.unwrap().status(),
            404,
            "another app is out of reach"
        );
    }
    for unknown in ["nosuch", "app_01J00000000000000000000000"] {
        let refused = create_key(unknown);
        assert!(!refused.status.success(), "--app {unknown} must be refused");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("no app"), "--app {unknown}: {stderr}");
    }
}

/// Admin keys over the API: a key is shown once, listed without secrets, reaches
/// only its app, and stops working once revoked; the last admin key cannot be
/// revoked. The CLI lists and revokes the same keys.
async fn keys_are_made_listed_and_revoked_over_the_api_and_the_cli(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let acme = app
        .call(
            Method::POST,
            "/v1/apps",
            Some(&json!({"name": "Acme", "uid": "acme"})),
            201,
        )
        .await;
    let other = app.create_app().await;
    let made = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&json!({"name": "acme prod", "app": "acme", "capabilities": ["read"]})),
            201,
        )
        .await;
    assert_eq!(made["app_id"], acme["id"]);
    let key = made["key"].as_str().unwrap().to_owned();
    let as_key = |path: &str, key: &str| {
        app.http
            .get(format!("{}{path}", app.base))
            .bearer_auth(key)
            .send()
    };
    assert_eq!(as_key("/v1/apps/acme", &key).await.unwrap().status(), 200);
    assert_eq!(
        as_key(&format!("/v1/apps/{other}"), &key)
            .await
            .unwrap()
            .status(),
        404
    );
    // Admin-only routes say so to an app key (issue #11: 403, not 404).
    assert_eq!(
        as_key("/v1/keys", &key).await.unwrap().status(),
        403,
        "admin only"
    );
    app.call(
        Method::POST,
        "/v1/keys",
        Some(&json!({"name": "x", "app": "nosuch", "capabilities": ["read"]})),
        404,
    )
    .await;
    let ops = app
        .call(Method::POST, "/v1/keys", Some(&json!({"name": "ops"})), 201)
        .await;
    assert!(ops["app_id"].is_null());

    let listed = app.get("/v1/keys").await;
    let rows = listed["data"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "the bootstrap key, acme's and ops: {listed}");
    assert!(rows
        .iter()
        .all(|k| k.get("key").is_none() && k.get("key_hash").is_none()));
    assert!(
        !listed.to_string().contains(&key),
        "no secret in the listing"
    );

    let path = format!("/v1/keys/{}", made["id"].as_str().unwrap());
    app.call(Method::DELETE, &path, None, 204).await;
    assert_eq!(
        as_key("/v1/apps/acme", &key).await.unwrap().status(),
        401,
        "revoked"
    );
    app.call(Method::DELETE, &path, None, 404).await;

    // The CLI sees the same keys, and revokes ops; then the bootstrap key is the
    // last admin key, which neither the API nor the CLI revokes.
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_hookline-under-test"))
            .args(args)
            .env("HOOKLINE_DATABASE_URL", &app.db.url)
            .env("HOOKLINE_MASTER_KEY", crate::helpers::TEST_MASTER_KEY)
            .env("RUST_LOG", "warn")
            .output()
            .expect("running hookline")
    };
    let listing = cli(&["list-keys"]);
    assert!(listing.status.success());
    let listing = String::from_utf8(listing.stdout).unwrap();
    assert_eq!(listing.lines().count(), 2, "{listing}");
    assert!(listing.contains(ops["id"].as_str().unwrap()));
    assert!(cli(&["revoke-key", ops["id"].as_str().unwrap()])
        .status
        .success());
    let bootstrap = app.get("/v1/keys").await["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = app
        .call(Method::DELETE, &format!("/v1/keys/{bootstrap}"), None, 409)
        .await;
    assert_eq!(refused["code"], "conflict");
    assert!(!cli(&["revoke-key", &bootstrap]).status.success());
    assert!(!cli(&["revoke-key", "nonsense"]).status.success());
}
