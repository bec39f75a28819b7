//! Outbound authentication (docs/api.md, "Outbound authentication"), with real
//! servers: an OAuth2 token server the test runs (its token fetched once and
//! shared, fetched again once on a 401, a failing one an `auth_error` that is
//! retried), a TLS receiver that demands a client certificate from a CA the
//! test makes (rcgen), and Basic and bearer credentials — sealed at rest and
//! hidden from keys without the `secrets` capability.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use base64::Engine as _;
use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::helpers::{both_engines, only_delivery, Engine, Receiver, Reply, TestApp};
use crate::sealing::database_contents;

both_engines!(
    an_oauth2_token_is_fetched_once_shared_and_fetched_again_once_on_a_401,
    a_failing_token_endpoint_makes_retried_auth_errors_and_asks_the_receiver_nothing,
    a_client_certificate_is_presented_to_its_endpoint_only,
    basic_and_bearer_credentials_are_sent_sealed_and_hidden,
);

/// An OAuth2 token server: each fetch issues `tok-<n>`; it answers `status`
/// (200 with a token, or an OAuth2 error), and keeps what it was asked.
struct TokenServer {
    url: String,
    fetches: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<(HeaderMap, String)>>>,
}

impl TokenServer {
    async fn start(status: u16) -> Self {
        let fetches = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (count, seen) = (fetches.clone(), requests.clone());
        let app = axum::Router::new().route(
            "/oauth/token",
            axum::routing::post(move |headers: HeaderMap, body: String| {
                let n = count.fetch_add(1, Ordering::SeqCst) + 1;
                seen.lock().unwrap().push((headers, body));
                async move {
                    let status = axum::http::StatusCode::from_u16(status).unwrap();
                    let body = if status.is_success() {
                        json!({"access_token": format!("tok-{n}"), "token_type": "Bearer", "expires_in": 3600})
                    } else {
                        json!({"error": "temporarily_unavailable", "error_description": "down for a test"})
                    };
                    (status, axum::Json(body))
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/oauth/token", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self {
            url,
            fetches,
            requests,
        }
    }
}

fn oauth2(token_url: &str) -> Value {
    json!({"oauth2": {
        "token_url": token_url,
        "client_id": "hookline-client",
        "client_secret": "s3cret:value",
        "scope": "webhooks:write",
        "audience": "https://receiver.example"
    }})
}

async fn an_oauth2_token_is_fetched_once_shared_and_fetched_again_once_on_a_401(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let tokens = TokenServer::start(200).await;
    // The receiver takes the one token it believes current; anything else is 401.
    let current = Arc::new(Mutex::new("Bearer tok-1".to_owned()));
    let accepted = current.clone();
    let receiver = Receiver::start_with(move |headers| {
        let sent = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        Reply::status(if sent == *accepted.lock().unwrap() {
            200
        } else {
            401
        })
    })
    .await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(&app_id, &receiver.url, json!({"auth": oauth2(&tokens.url)}))
        .await;
    assert_eq!(endpoint["auth"]["oauth2"]["client_id"], "hookline-client");

    for n in 0..5 {
        app.publish(&app_id, "order.paid", json!({"n": n})).await;
    }
    let got = receiver.wait_for_requests(5).await;
    assert!(
        got.iter()
            .all(|r| r.header("authorization") == "Bearer tok-1"),
        "every delivery carries the one token"
    );
    assert_eq!(
        tokens.fetches.load(Ordering::SeqCst),
        1,
        "one fetch for five deliveries"
    );
    // The token request: client credentials, the client by HTTP Basic (each part form-encoded).
    let (headers, body) = tokens.requests.lock().unwrap()[0].clone();
    let basic = base64::engine::general_purpose::STANDARD.encode("hookline-client:s3cret%3Avalue");
    assert_eq!(headers["authorization"], format!("Basic {basic}").as_str());
    assert_eq!(
        body,
        "grant_type=client_credentials&scope=webhooks%3Awrite&audience=https%3A%2F%2Freceiver.example"
    );

    // The receiver stops taking tok-1: the next delivery gets a 401, a new token, and goes.
    *current.lock().unwrap() = "Bearer tok-2".to_owned();
    let delivery = only_delivery(&app.publish(&app_id, "order.paid", json!({"n": 5})).await);
    app.wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;
    let attempts = app.attempts(&app_id, &delivery).await;
    assert_eq!(attempts.len(), 1, "the 401 was answered within the attempt");
    assert_eq!(attempts[0]["status_code"], 200);
    assert_eq!(tokens.fetches.load(Ordering::SeqCst), 2);
    let statuses: Vec<u16> = receiver.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 401, 200]);
}

async fn a_failing_token_endpoint_makes_retried_auth_errors_and_asks_the_receiver_nothing(
    engine: Engine,
) {
    let app = TestApp::spawn_with(engine, |c| c.max_attempts = 2).await;
    let tokens = TokenServer::start(503).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    app.create_endpoint_with(&app_id, &receiver.url, json!({"auth": oauth2(&tokens.url)}))
        .await;
    let delivery = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);
    let dead = app
        .wait_for_delivery_state(&app_id, &delivery, "dead")
        .await;
    assert_eq!(dead["dead_reason"], "retries_exhausted", "{dead}");
    let attempts = app.attempts(&app_id, &delivery).await;
    assert_eq!(attempts.len(), 2, "an auth error is retried");
    for attempt in &attempts {
        assert_eq!(attempt["error_kind"], "auth_error", "{attempt}");
        let message = attempt["error_message"].as_str().unwrap();
        assert!(
            message.contains("503") && message.contains("temporarily_unavailable"),
            "{message}"
        );
    }
    assert!(
        receiver.requests().is_empty(),
        "nothing was sent without a token"
    );
    // (A failed fetch answers the deliveries behind it for a second: the retry,
    // this soon, may have been answered by the same one.)
    assert!(tokens.fetches.load(Ordering::SeqCst) >= 1);
}

/// A CA, and certificates it signs: `(certificate PEM, key PEM)`.
struct TestCa {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl TestCa {
    fn new(name: &str) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Self { cert, key }
    }

    fn issue(&self, names: &[&str], client: bool) -> (rcgen::Certificate, rcgen::KeyPair) {
        let mut params =
            rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.extended_key_usages = vec![if client {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        }];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert, key)
    }
}

/// A TLS receiver that demands a client certificate from `client_ca`; it
/// answers each request 200 and keeps the bodies of those that got through.
async fn start_mtls_receiver(
    server: &(rcgen::Certificate, rcgen::KeyPair),
    client_ca: &TestCa,
) -> (String, Arc<Mutex<Vec<String>>>) {
    use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(client_ca.cert.der().clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let key = PrivatePkcs8KeyDer::from(server.1.serialize_der());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from(server.0.der().to_vec())],
            key.into(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://127.0.0.1:{}/hook",
        listener.local_addr().unwrap().port()
    );
    let bodies = Arc::new(Mutex::new(Vec::new()));
    let kept = bodies.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, kept) = (acceptor.clone(), kept.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return; // no (or a wrong) client certificate
                };
                // One HTTP/1.1 request: its head, then content-length bytes of body.
                let mut read = Vec::new();
                let mut buf = [0u8; 4096];
                let (head_end, length) = loop {
                    let Ok(n) = tls.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    read.extend_from_slice(&buf[..n]);
                    if let Some(end) = read.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&read[..end]).to_ascii_lowercase();
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        break (end + 4, length);
                    }
                };
                while read.len() < head_end + length {
                    let Ok(n) = tls.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    read.extend_from_slice(&buf[..n]);
                }
                kept.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&read[head_end..head_end + length]).into_owned());
                let _ = tls
                    .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (url, bodies)
}

async fn a_client_certificate_is_presented_to_its_endpoint_only(engine: Engine) {
    let app = TestApp::spawn_with(engine, |c| c.max_attempts = 1).await;
    let ca = TestCa::new("Receiver CA");
    let server = ca.issue(&["127.0.0.1"], false);
    let client = ca.issue(&["hookline.example"], true);
    let (url, bodies) = start_mtls_receiver(&server, &ca).await;
    let app_id = app.create_app().await;
    let with_certificate = app
        .create_endpoint_with(
            &app_id,
            &url,
            json!({"auth": {"tls": {
                "client_certificate": client.0.pem(),
                "client_key": client.1.serialize_pem(),
                "server_ca": ca.cert.pem(),
            }}}),
        )
        .await;
    // Another endpoint of the same receiver, trusting its CA but with no certificate.
    let without = app
        .create_endpoint_with(
            &app_id,
            &url,
            json!({"auth": {"tls": {"server_ca": ca.cert.pem()}}}),
        )
        .await;
    let published = app.publish(&app_id, "order.paid", json!({"n": 1})).await;
    let delivery_of = |endpoint: &Value| {
        published["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|d| d["endpoint_id"] == endpoint["id"])
            .unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    app.wait_for_delivery_state(&app_id, &delivery_of(&with_certificate), "succeeded")
        .await;
    let refused = delivery_of(&without);
    app.wait_for_delivery_state(&app_id, &refused, "dead").await;
    let attempts = app.attempts(&app_id, &refused).await;
    // Refused at the connection, never answered. Under TLS 1.3 the server asks
    // for the certificate after the client's handshake is done, so its refusal
    // reaches the client either during the handshake (`tls`) or as the
    // connection closing under the first request (`io`): which one is a race.
    assert_eq!(attempts[0]["status_code"], Value::Null, "{:?}", attempts[0]);
    assert!(
        ["tls", "io"].contains(&attempts[0]["error_kind"].as_str().unwrap_or("")),
        "{:?}",
        attempts[0]
    );

    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(
        bodies.len(),
        1,
        "only the endpoint with the certificate got through"
    );
    let body: Value = serde_json::from_str(&bodies[0]).unwrap();
    assert_eq!(body["data"], json!({"n": 1}));

    // The key is a secret: hidden from a key without `secrets`, never in the clear at rest.
    let path = format!(
        "/v1/apps/{app_id}/endpoints/{}",
        with_certificate["id"].as_str().unwrap()
    );
    let shown = app.get(&path).await;
    assert!(shown["auth"]["tls"]["client_key"]
        .as_str()
        .unwrap()
        .contains("PRIVATE KEY"));
    let key_body = client.1.serialize_pem();
    let key_line = key_body.lines().nth(1).unwrap();
    assert!(!database_contents(engine, &app.db).contains(key_line));
}

async fn basic_and_bearer_credentials_are_sent_sealed_and_hidden(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoints = format!("/v1/apps/{app_id}/endpoints");
    let basic = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"auth": {"basic": {"username": "hooks", "password": "pa55-Basic-Secret"}}}),
        )
        .await;
    let bearer = app
        .create_endpoint_with(
            &app_id,
            &receiver.url,
            json!({"auth": {"bearer": "static-Bearer-Token-77"}}),
        )
        .await;
    app.publish(&app_id, "order.paid", json!({})).await;
    let mut sent: Vec<String> = receiver
        .wait_for_requests(2)
        .await
        .iter()
        .map(|r| r.header("authorization").to_owned())
        .collect();
    sent.sort();
    let encoded = base64::engine::general_purpose::STANDARD.encode("hooks:pa55-Basic-Secret");
    assert_eq!(
        sent,
        [
            format!("Basic {encoded}"),
            "Bearer static-Bearer-Token-77".into()
        ]
    );

    // Sealed at rest.
    let contents = database_contents(engine, &app.db);
    for secret in ["pa55-Basic-Secret", "static-Bearer-Token-77"] {
        assert!(
            !contents.contains(secret),
            "{secret} is in the database in the clear"
        );
    }
    // Shown to a key with `secrets`, hidden from one without.
    let reader = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&json!({"name": "reader", "app": app_id, "capabilities": ["read"]})),
            201,
        )
        .await["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let basic_path = format!("{endpoints}/{}", basic["id"].as_str().unwrap());
    let as_reader: Value = app
        .http
        .get(format!("{}{basic_path}", app.base))
        .bearer_auth(&reader)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        as_reader["auth"],
        json!({"basic": {"username": "hooks", "password": "…"}})
    );
    assert_eq!(
        app.get(&basic_path).await["auth"]["basic"]["password"],
        "pa55-Basic-Secret"
    );

    // What does not hold together is refused, and nothing changes.
    for (auth, headers, says) in [
        (
            json!({"bearer": "a", "basic": {"username": "u", "password": "p"}}),
            json!(null),
            "at most one",
        ),
        (
            json!({"bearer": "a"}),
            json!({"authorization": "Bearer b"}),
            "authorization",
        ),
        (json!({}), json!(null), "empty"),
        (
            json!({"tls": {"client_certificate": "not pem", "client_key": "x"}}),
            json!(null),
            "PEM",
        ),
    ] {
        let mut body = json!({"auth": auth});
        if !headers.is_null() {
            body["headers"] = headers;
        }
        let refused = app.call(Method::PATCH, &basic_path, Some(&body), 422).await;
        assert!(
            refused["detail"].as_str().unwrap().contains(says),
            "{refused}"
        );
    }
    let bearer_path = format!("{endpoints}/{}", bearer["id"].as_str().unwrap());
    let refused = app
        .call(
            Method::PATCH,
            &bearer_path,
            Some(&json!({"headers": {"Authorization": "Basic x"}})),
            422,
        )
        .await;
    assert!(refused["detail"]
        .as_str()
        .unwrap()
        .contains("authorization"));
    assert_eq!(
        app.get(&basic_path).await["auth"]["basic"]["username"],
        "hooks"
    );
    // `null` removes it.
    let removed = app
        .call(
            Method::PATCH,
            &bearer_path,
            Some(&json!({"auth": null})),
            200,
        )
        .await;
    assert_eq!(removed["auth"], Value::Null);
}
