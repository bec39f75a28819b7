//! Deliveries end to end: publish through the API, receive at a real
//! receiver, watch retries, the DLQ and replay through the API.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, only_delivery, wait_until, Engine, Receiver, Reply, TestApp};

both_engines!(
    delivery_is_signed_so_a_standard_webhooks_verifier_accepts_it,
    server_errors_are_retried_until_success_with_the_same_webhook_id,
    client_error_goes_to_the_dlq_after_one_attempt,
    a_receivers_answer_is_kept_whatever_bytes_it_holds,
    too_many_requests_honours_retry_after,
    slow_response_times_out_and_is_retried,
    exhausted_retries_dead_letter_with_reason,
    replay_redelivers_with_the_same_webhook_id,
    resend_sends_a_succeeded_delivery_again_with_the_same_webhook_id,
    redirects_are_not_followed,
    gone_disables_the_endpoint,
    private_destinations_are_refused_where_the_connection_is_made,
    event_type_filter_selects_endpoints,
    deleting_an_endpoint_keeps_its_history,
    a_fresh_event_wakes_the_dispatcher_without_a_polling_tick,
    a_receiver_whose_certificate_no_one_trusts_gets_nothing,
);

/// TLS certificates are verified: a receiver whose certificate no trusted
/// authority signed (self-signed here, made by the test) gets nothing — no
/// handshake completes, each attempt fails as `tls`, is retried, and the
/// delivery ends in the DLQ after its attempts.
async fn a_receiver_whose_certificate_no_one_trusts_gets_nothing(engine: Engine) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let app = TestApp::spawn_with(engine, |c| c.max_attempts = 2).await;
    let made = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap();
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(made.key_pair.serialize_der());
    let tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![made.cert.der().clone()], key.into())
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (connections, handshakes) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    {
        let (connections, handshakes) = (connections.clone(), handshakes.clone());
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                connections.fetch_add(1, Ordering::SeqCst);
                if acceptor.accept(stream).await.is_ok() {
                    handshakes.fetch_add(1, Ordering::SeqCst);
                }
            }
        });
    }
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &format!("https://127.0.0.1:{port}/hook"))
        .await;
    let delivery_id = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);
    app.wait_for_delivery_state(&app_id, &delivery_id, "dead")
        .await;
    let attempts = app.attempts(&app_id, &delivery_id).await;
    assert_eq!(attempts.len(), 2);
    for attempt in &attempts {
        assert_eq!(attempt["error_kind"], "tls", "{attempt}");
        assert!(attempt["status_code"].is_null());
    }
    assert!(
        connections.load(Ordering::SeqCst) >= 2,
        "Hookline did connect"
    );
    assert_eq!(
        handshakes.load(Ordering::SeqCst),
        0,
        "no handshake completed"
    );
}

/// PostgreSQL only: an API node and a separate dispatcher node, joined by LISTEN/NOTIFY.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_event_wakes_a_dispatcher_on_another_node() {
    use hookline::{Role, Server};
    let db = crate::helpers::TestDb::new(Engine::Postgres).await;
    let mut config = crate::helpers::test_config(&db);
    // With a ten-minute safety poll, only a wake-up can deliver within the test's deadline.
    config.idle_poll_ms = 600_000;
    let api = Server::start(config.clone(), Role::Api).await.unwrap();
    let dispatcher = Server::start(config, Role::Dispatcher).await.unwrap();
    let app = TestApp {
        base: format!("http://{}", api.addr),
        http: reqwest::Client::new(),
        server: Some(api),
        db,
    };
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    for n in 0..3 {
        app.publish(&app_id, "order.paid", json!({"n": n})).await;
        receiver.wait_for_requests(n + 1).await;
    }
    dispatcher.stop().await.unwrap();
}

/// The one delivery of a publish answer.
async fn delivery_is_signed_so_a_standard_webhooks_verifier_accepts_it(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let published = app
        .publish(&app_id, "order.paid", json!({"order": 42, "total": "9.99"}))
        .await;

    let request = receiver.wait_for_requests(1).await.remove(0);
    // Verified by the official `standardwebhooks` crate, not by our own code.
    let verifier = standardwebhooks::Webhook::new(endpoint["secret"].as_str().unwrap()).unwrap();
    verifier
        .verify(&request.body, &request.headers)
        .expect("signature verifies");
    assert_eq!(request.header("webhook-id"), published["id"]);
    assert_eq!(request.header("content-type"), "application/json");
    let body = request.json();
    assert_eq!(body["type"], "order.paid");
    assert_eq!(body["data"], json!({"order": 42, "total": "9.99"}));
    assert!(body["timestamp"].is_string());

    let delivery = app
        .wait_for_delivery_state(&app_id, &only_delivery(&published), "succeeded")
        .await;
    assert_eq!(delivery["attempts"], 1);
    let attempts = app
        .attempts(&app_id, delivery["id"].as_str().unwrap())
        .await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(
        (
            attempts[0]["status_code"].as_u64(),
            attempts[0]["verdict"].as_str()
        ),
        (Some(200), Some("delivered"))
    );
    assert_eq!(attempts[0]["response_body"], "receiver says hi");

    // The attempt alone carries the body as signed, byte for byte, and its
    // headers: the standard verifier accepts them (what copy-as-curl sends).
    assert!(attempts[0].get("request_body").is_none(), "not in listings");
    let full = app
        .get(&format!(
            "/v1/apps/{app_id}/attempts/{}",
            attempts[0]["id"].as_str().unwrap()
        ))
        .await;
    let sent = full["request_body"].as_str().unwrap();
    assert_eq!(sent.as_bytes(), &request.body[..]);
    let headers = crate::helpers::header_map(&full["request_headers"]);
    assert!(!headers.is_empty(), "{full}");
    verifier
        .verify(sent.as_bytes(), &headers)
        .expect("the attempt's own record verifies");

    // The signature checker: what the receiver got verifies; each way it can
    // go wrong is told apart.
    let check_path = format!(
        "/v1/apps/{app_id}/endpoints/{}/signature-check",
        endpoint["id"].as_str().unwrap()
    );
    let got: serde_json::Map<String, Value> = request
        .headers
        .iter()
        .map(|(name, value)| (name.to_string(), json!(value.to_str().unwrap())))
        .collect();
    let body = String::from_utf8(request.body.to_vec()).unwrap();
    let check = |headers: Value, body: String| {
        let (app, path) = (&app, check_path.clone());
        async move {
            app.call(
                Method::POST,
                &path,
                Some(&json!({"headers": headers, "body": body})),
                200,
            )
            .await
        }
    };
    let ok = check(Value::Object(got.clone()), body.clone()).await;
    assert_eq!(
        (&ok["code"], &ok["signature_valid"], &ok["signed_with"]),
        (&json!("verified"), &json!(true), &json!("current")),
        "{ok}"
    );
    let changed = check(Value::Object(got.clone()), body.replace("42", "43")).await;
    assert_eq!(changed["code"], "body_changed", "{changed}");
    assert!(changed["first_difference"].is_u64(), "{changed}");
    let mut unsigned = got.clone();
    unsigned.remove("webhook-signature");
    assert_eq!(
        check(Value::Object(unsigned), body.clone()).await["code"],
        "missing_header"
    );
    // Signed with another secret, over the body sent.
    let stranger = hookline_core::signing::EndpointSecret::generate();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let id = request.header("webhook-id");
    let mut forged = got.clone();
    forged.insert("webhook-timestamp".into(), json!(now.to_string()));
    forged.insert(
        "webhook-signature".into(),
        json!(stranger.sign(id, now, body.as_bytes())),
    );
    assert_eq!(
        check(Value::Object(forged), body.clone()).await["code"],
        "wrong_secret"
    );
    // The endpoint's own secret, three hours ago.
    let secret =
        hookline_core::signing::EndpointSecret::parse(endpoint["secret"].as_str().unwrap())
            .unwrap();
    let mut stale = got.clone();
    stale.insert(
        "webhook-timestamp".into(),
        json!((now - 3 * 3600).to_string()),
    );
    stale.insert(
        "webhook-signature".into(),
        json!(secret.sign(id, now - 3 * 3600, body.as_bytes())),
    );
    let old = check(Value::Object(stale), body).await;
    assert_eq!(
        (&old["code"], &old["signature_valid"]),
        (&json!("timestamp_too_old"), &json!(true)),
        "{old}"
    );
}

async fn server_errors_are_retried_until_success_with_the_same_webhook_id(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(500), Reply::status(500), Reply::status(200)]);
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let published = app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let delivery_id = only_delivery(&published);

    let delivery = app
        .wait_for_delivery_state(&app_id, &delivery_id, "succeeded")
        .await;
    assert_eq!(delivery["attempts"], 3);
    let requests = receiver.requests();
    assert_eq!(
        requests.len(),
        3,
        "delivered on the third attempt and nothing after"
    );
    assert!(requests
        .iter()
        .all(|r| r.header("webhook-id") == published["id"]));
    let attempts = app.attempts(&app_id, &delivery_id).await;
    let verdicts: Vec<_> = attempts
        .iter()
        .map(|a| {
            (
                a["status_code"].as_u64().unwrap(),
                a["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        verdicts,
        [(500, "retry"), (500, "retry"), (200, "delivered")]
    );
    assert!(attempts[0]["next_attempt_at"].is_string());
    // Each attempt says what it meant against the deployment's 5 attempts,
    // and the delivery how it ended.
    let meant: Vec<_> = attempts
        .iter()
        .map(|a| {
            let why = &a["explanation"];
            (
                why["code"].as_str().unwrap(),
                why["retries_left"].as_u64().unwrap(),
                why["max_attempts"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        meant,
        [
            ("server_error", 4, 5),
            ("server_error", 3, 5),
            ("delivered", 0, 5)
        ]
    );
    assert_eq!(
        attempts[1]["explanation"]["message"],
        "Your endpoint answered 500 Internal Server Error. It is tried again: attempt 3 of 5 is scheduled."
    );
    assert_eq!(delivery["explanation"]["code"], "delivered");
    assert_eq!(
        delivery["explanation"]["message"],
        "Delivered on attempt 3, after 2 failed attempts."
    );
}

async fn client_error_goes_to_the_dlq_after_one_attempt(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    receiver.answer_always(Reply::status(404));
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let delivery_id = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);

    let delivery = app
        .wait_for_delivery_state(&app_id, &delivery_id, "dead")
        .await;
    assert_eq!(delivery["dead_reason"], "client_error");
    assert_eq!(receiver.requests().len(), 1, "exactly one attempt");
    let dlq = app.get(&format!("/v1/apps/{app_id}/dlq")).await;
    let entries = dlq["data"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["id"], delivery_id.as_str());
    assert_eq!(entries[0]["dead_reason"], "client_error");
    // The DLQ says why, and what to do, as the delivery does.
    for why in [&entries[0]["explanation"], &delivery["explanation"]] {
        assert_eq!(
            (
                &why["code"],
                &why["action"],
                &why["status"],
                &why["retries_left"]
            ),
            (
                &json!("client_error_no_retry"),
                &json!("fix_then_replay"),
                &json!(404),
                &json!(0)
            ),
            "{why}"
        );
        let message = why["message"].as_str().unwrap();
        assert!(
            message.contains("404 Not Found") && message.contains("then replay"),
            "{message}"
        );
    }
}

/// A receiver may answer anything: NUL (which PostgreSQL's text cannot hold) and
/// bytes that are not UTF-8 are kept as U+FFFD, on both engines, and the attempt
/// is recorded like any other.
async fn a_receivers_answer_is_kept_whatever_bytes_it_holds(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    receiver.answer_always(Reply::status(404).body(b"no\0such\xffthing"));
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let delivery_id = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);

    let delivery = app
        .wait_for_delivery_state(&app_id, &delivery_id, "dead")
        .await;
    assert_eq!(delivery["dead_reason"], "client_error");
    let attempts = app.attempts(&app_id, &delivery_id).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["status_code"], 404);
    assert_eq!(attempts[0]["response_body"], "no\u{fffd}such\u{fffd}thing");
}

async fn too_many_requests_honours_retry_after(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    receiver.script([
        Reply::status(429).header("retry-after", "2"),
        Reply::status(200),
    ]);
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let delivery_id = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);

    app.wait_for_delivery_state(&app_id, &delivery_id, "succeeded")
        .await;
    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    let gap = requests[1].at - requests[0].at;
    // Retry-After is whole seconds and the attempt is stamped in milliseconds: allow the sub-ms rounding.
    assert!(
        gap >= Duration::from_millis(1990),
        "second attempt came after {gap:?}, sooner than 2 s"
    );
    let asked = &app.attempts(&app_id, &delivery_id).await[0]["explanation"];
    assert_eq!(
        (&asked["code"], &asked["action"], &asked["retry_after"]),
        (&json!("rate_limited"), &json!("wait"), &json!("2")),
        "{asked}"
    );
}

async fn slow_response_times_out_and_is_retried(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| c.request_timeout_ms = 300).await;
    let receiver = Receiver::start().await;
    receiver.script([
        Reply::status(200).after(Duration::from_secs(2)),
        Reply::status(200),
    ]);
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let delivery_id = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);

    app.wait_for_delivery_state(&app_id, &delivery_id, "succeeded")
        .await;
    let attempts = app.attempts(&app_id, &delivery_id).await;
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0]["error_kind"], "timeout");
    assert_eq!(attempts[0]["verdict"], "retry");
    assert!(attempts[0]["status_code"].is_null());
    assert_eq!(attempts[1]["verdict"], "delivered");
    assert_eq!(attempts[0]["explanation"]["code"], "timeout");
    assert_eq!(attempts[1]["explanation"]["code"], "delivered");
}

async fn exhausted_retries_dead_letter_with_reason(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| c.max_attempts = 3).await;
    let receiver = Receiver::start().await;
    receiver.answer_always(Reply::status(503));
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let delivery_id = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);

    let delivery = app
        .wait_for_delivery_state(&app_id, &delivery_id, "dead")
        .await;
    assert_eq!(delivery["dead_reason"], "retries_exhausted");
    assert_eq!(delivery["attempts"], 3);
    assert_eq!(receiver.requests().len(), 3);
    let attempts = app.attempts(&app_id, &delivery_id).await;
    assert_eq!(attempts.last().unwrap()["dead_reason"], "retries_exhausted");
    // Out of attempts, not of time: the deployment's 3, counted by the API too.
    let why = &delivery["explanation"];
    assert_eq!(
        (
            &why["code"],
            &why["attempts"],
            &why["max_attempts"],
            &why["action"]
        ),
        (
            &json!("max_attempts"),
            &json!(3),
            &json!(3),
            &json!("fix_then_replay")
        ),
        "{why}"
    );
    assert_eq!(
        why["message"],
        "Gave up after 3 of 3 attempts. The last attempt got 503 Service Unavailable from your endpoint. Fix the endpoint, then replay."
    );
    assert_eq!(attempts.last().unwrap()["explanation"], *why);

    // A per-endpoint override wins over the deployment default.
    let strict = Receiver::start().await;
    strict.answer_always(Reply::status(500));
    let app2 = app.create_app().await;
    app.create_endpoint_with(&app2, &strict.url, json!({"retry": {"max_attempts": 1}}))
        .await;
    let delivery_id = only_delivery(&app.publish(&app2, "order.paid", json!({})).await);
    let delivery = app
        .wait_for_delivery_state(&app2, &delivery_id, "dead")
        .await;
    assert_eq!(
        (delivery["attempts"].as_u64(), strict.requests().len()),
        (Some(1), 1)
    );
    assert_eq!(
        (
            &delivery["explanation"]["code"],
            &delivery["explanation"]["max_attempts"]
        ),
        (&json!("max_attempts"), &json!(1))
    );
}

async fn replay_redelivers_with_the_same_webhook_id(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(400), Reply::status(200)]);
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let published = app.publish(&app_id, "order.paid", json!({"n": 7})).await;
    let delivery_id = only_delivery(&published);
    app.wait_for_delivery_state(&app_id, &delivery_id, "dead")
        .await;

    let path = format!("/v1/apps/{app_id}/deliveries/{delivery_id}/replay");
    let replay = app.call(reqwest::Method::POST, &path, None, 202).await;
    assert_eq!(replay["replayed"], true);
    let delivery = app
        .wait_for_delivery_state(&app_id, &delivery_id, "succeeded")
        .await;
    assert_eq!(delivery["attempts"], 1, "a replay starts a new round");

    let requests = receiver.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0].header("webhook-id"),
        requests[1].header("webhook-id")
    );
    assert_eq!(requests[1].header("webhook-id"), published["id"]);
    assert_eq!(requests[0].json()["data"], requests[1].json()["data"]);
    // The history of both rounds is kept; replaying again changes nothing.
    assert_eq!(app.attempts(&app_id, &delivery_id).await.len(), 2);
    let again = app.call(reqwest::Method::POST, &path, None, 200).await;
    assert_eq!(again["replayed"], false);
    assert_eq!(again["delivery"]["state"], "succeeded");
    assert!(app.get(&format!("/v1/apps/{app_id}/dlq")).await["data"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// A customer lost what they received: resend the succeeded delivery, a new round
/// with the same `webhook-id` and payload; on one that has not succeeded (here
/// dead) nothing changes.
async fn resend_sends_a_succeeded_delivery_again_with_the_same_webhook_id(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(200), Reply::status(200), Reply::status(404)]);
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let published = app.publish(&app_id, "order.paid", json!({"n": 8})).await;
    let delivery_id = only_delivery(&published);
    app.wait_for_delivery_state(&app_id, &delivery_id, "succeeded")
        .await;

    let path = format!("/v1/apps/{app_id}/deliveries/{delivery_id}/resend");
    let resent = app.call(reqwest::Method::POST, &path, None, 202).await;
    assert_eq!(resent["resent"], true);
    let requests = receiver.wait_for_requests(2).await;
    let delivery = app
        .wait_for_delivery_state(&app_id, &delivery_id, "succeeded")
        .await;
    assert_eq!(delivery["attempts"], 1, "a resend starts a new round");
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].header("webhook-id"), published["id"]);
    assert_eq!(requests[0].json()["data"], requests[1].json()["data"]);
    assert_eq!(app.attempts(&app_id, &delivery_id).await.len(), 2);

    // A dead delivery is not resent (it is replayed): nothing changes.
    let dead = only_delivery(&app.publish(&app_id, "order.paid", json!({"n": 9})).await);
    app.wait_for_delivery_state(&app_id, &dead, "dead").await;
    let refused = app
        .call(
            reqwest::Method::POST,
            &format!("/v1/apps/{app_id}/deliveries/{dead}/resend"),
            None,
            200,
        )
        .await;
    assert_eq!(refused["resent"], false);
    assert_eq!(refused["delivery"]["state"], "dead");
    assert_eq!(receiver.requests().len(), 3);
}

async fn redirects_are_not_followed(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let elsewhere = Receiver::start().await;
    receiver.answer_always(Reply::status(302).header("location", &elsewhere.url));
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    let delivery_id = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);

    let delivery = app
        .wait_for_delivery_state(&app_id, &delivery_id, "dead")
        .await;
    assert_eq!(delivery["dead_reason"], "redirect");
    assert_eq!(receiver.requests().len(), 1);
    assert!(
        elsewhere.requests().is_empty(),
        "the redirect target was never contacted"
    );
}

async fn gone_disables_the_endpoint(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    receiver.answer_always(Reply::status(410));
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let delivery_id = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);

    let delivery = app
        .wait_for_delivery_state(&app_id, &delivery_id, "dead")
        .await;
    assert_eq!(delivery["dead_reason"], "gone");
    assert_eq!(
        (
            &delivery["explanation"]["code"],
            &delivery["explanation"]["action"]
        ),
        (&json!("gone"), &json!("enable_then_replay"))
    );
    let endpoint = app
        .get(&format!(
            "/v1/apps/{app_id}/endpoints/{}",
            endpoint["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(endpoint["enabled"], false);
    let next = app.publish(&app_id, "order.paid", json!({})).await;
    assert!(
        next["deliveries"].as_array().unwrap().is_empty(),
        "a disabled endpoint gets no new deliveries"
    );
}

async fn private_destinations_are_refused_where_the_connection_is_made(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| c.allow_private_destinations = false).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;

    // A literal loopback address is refused when the endpoint is created…
    let refused = app
        .request(
            reqwest::Method::POST,
            &format!("/v1/apps/{app_id}/endpoints"),
            Some(&json!({"url": receiver.url})),
            &[],
        )
        .await;
    assert_eq!(refused.status(), 422);
    assert_eq!(
        refused.json::<Value>().await.unwrap()["code"],
        "destination_forbidden"
    );

    // …and a public-looking name that resolves to loopback (as after DNS rebinding) is
    // refused by the dispatcher at connect time. The store is written directly to get
    // such an endpoint past the API's check.
    let endpoint = app
        .create_endpoint_in_store(&app_id, &receiver.url_by_localhost())
        .await;
    let delivery_id = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);
    let delivery = app
        .wait_for_delivery_state(&app_id, &delivery_id, "dead")
        .await;
    assert_eq!(delivery["dead_reason"], "destination_forbidden");
    assert!(
        receiver.requests().is_empty(),
        "no request reached the private address"
    );
    let attempts = app.attempts(&app_id, &delivery_id).await;
    assert_eq!(attempts[0]["error_kind"], "destination_forbidden");
    assert_eq!(attempts[0]["endpoint_id"], endpoint.id.as_str());
}

async fn event_type_filter_selects_endpoints(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let orders = Receiver::start().await;
    let group = Receiver::start().await;
    let everything = Receiver::start().await;
    let app_id = app.create_app().await;
    let exact = app
        .create_endpoint_with(&app_id, &orders.url, json!({"event_types": ["order.paid"]}))
        .await;
    let wildcard = app
        .create_endpoint_with(&app_id, &group.url, json!({"event_types": ["order.*"]}))
        .await;
    let all = app.create_endpoint(&app_id, &everything.url).await;

    // Which endpoints each event is fanned out to, as the publish answers it.
    let (exact, wildcard, all) = (&exact["id"], &wildcard["id"], &all["id"]);
    for (event_type, expected) in [
        ("user.created", vec![all]),
        ("order.paid", vec![exact, wildcard, all]),
        ("order.refund.created", vec![wildcard, all]),
        ("orders.closed", vec![all]),
        ("order", vec![all]),
    ] {
        let published = app
            .publish(&app_id, event_type, json!({"t": event_type}))
            .await;
        let mut got: Vec<&Value> = published["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| &d["endpoint_id"])
            .collect();
        let mut expected = expected;
        got.sort_by_key(|v| v.as_str().unwrap().to_owned());
        expected.sort_by_key(|v| v.as_str().unwrap().to_owned());
        assert_eq!(got, expected, "{event_type}");
    }
    let types = |requests: Vec<crate::helpers::Received>| {
        let mut types: Vec<String> = requests
            .iter()
            .map(|r| r.json()["type"].as_str().unwrap().to_owned())
            .collect();
        types.sort();
        types
    };
    assert_eq!(
        types(everything.wait_for_requests(5).await),
        [
            "order",
            "order.paid",
            "order.refund.created",
            "orders.closed",
            "user.created"
        ]
    );
    assert_eq!(
        types(group.wait_for_requests(2).await),
        ["order.paid", "order.refund.created"]
    );
    assert_eq!(types(orders.wait_for_requests(1).await), ["order.paid"]);
}

/// Deleting an endpoint stops its deliveries but keeps the proof: what it got
/// still answers with every attempt, and what it was still owed is in the DLQ as
/// `endpoint_deleted` (a replay of it is refused: there is nowhere to send it).
async fn deleting_an_endpoint_keeps_its_history(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    receiver.script([Reply::status(200)]);
    receiver.answer_always(Reply::status(429).header("retry-after", "3600"));
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"retry": {"max_age_secs": 86400}}),
        )
        .await;
    let endpoint_path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        endpoint["id"].as_str().unwrap()
    );
    let first = app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let delivered = only_delivery(&first);
    app.wait_for_delivery_state(&app_id, &delivered, "succeeded")
        .await;
    let owed = only_delivery(&app.publish(&app_id, "order.paid", json!({"n": 2})).await);
    wait_until(
        Duration::from_secs(10),
        "the 429 to be recorded",
        || async { (app.attempts(&app_id, &owed).await.len() == 1).then_some(()) },
    )
    .await;

    app.call(reqwest::Method::DELETE, &endpoint_path, None, 204)
        .await;
    app.call(reqwest::Method::GET, &endpoint_path, None, 404)
        .await;

    let kept = app
        .get(&format!("/v1/apps/{app_id}/deliveries/{delivered}"))
        .await;
    assert_eq!(kept["state"], "succeeded");
    let attempts = app.attempts(&app_id, &delivered).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["status_code"], 200);
    let event = app
        .get(&format!(
            "/v1/apps/{app_id}/events/{}",
            first["id"].as_str().unwrap()
        ))
        .await;
    assert_eq!(event["deliveries"][0]["id"], delivered.as_str());
    assert_eq!(event["deliveries"][0]["state"], "succeeded");

    let dead = app
        .get(&format!("/v1/apps/{app_id}/deliveries/{owed}"))
        .await;
    assert_eq!(dead["state"], "dead");
    assert_eq!(dead["dead_reason"], "endpoint_deleted");
    assert_eq!(app.attempts(&app_id, &owed).await[0]["status_code"], 429);
    let dlq = app.get(&format!("/v1/apps/{app_id}/dlq")).await;
    let entries = dlq["data"].as_array().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0]["id"], owed.as_str());
    let refused = app
        .call(
            reqwest::Method::POST,
            &format!("/v1/apps/{app_id}/deliveries/{owed}/replay"),
            None,
            409,
        )
        .await;
    assert_eq!(refused["code"], "endpoint_deleted");
    assert_eq!(
        receiver.requests().len(),
        2,
        "nothing sent after the delete"
    );
}

async fn a_fresh_event_wakes_the_dispatcher_without_a_polling_tick(engine: Engine) {
    // With a ten-minute safety poll, only the in-process wake-up can deliver within the test's deadline.
    let app = TestApp::spawn_with(engine, |c| c.idle_poll_ms = 600_000).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint(&app_id, &receiver.url).await;
    for n in 0..3 {
        app.publish(&app_id, "order.paid", json!({"n": n})).await;
        receiver.wait_for_requests(n + 1).await;
    }
}
