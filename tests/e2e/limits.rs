//! The limits a public API needs (issue #21): per-key request rates, a cap on
//! open connections, and a deadline for request headers (slow loris).

use std::time::Duration;

use axum::http::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{both_engines, wait_until, Engine, Process, TestApp, TestDb, ADMIN_TOKEN};

both_engines!(
    a_key_over_its_rate_gets_429_with_retry_after,
    a_client_slow_to_send_its_headers_is_disconnected,
    connections_beyond_the_cap_wait_for_one_to_close,
);

async fn a_key_over_its_rate_gets_429_with_retry_after(engine: Engine) {
    let app = TestApp::spawn_with(engine, |config| {
        config.api_rate_limit_per_sec = 1;
        config.api_rate_limit_burst = 3;
    })
    .await;
    let app_id = app.create_app().await;
    let made = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&json!({"name": "producer", "app": app_id, "capabilities": ["read"]})),
            201,
        )
        .await;
    let key = made["key"].as_str().unwrap().to_owned();
    let path = format!("/v1/apps/{app_id}/events");
    let http = reqwest::Client::new();
    let get = || async {
        http.get(format!("{}{path}", app.base))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
    };

    // The burst passes whatever the timing; then, at one a second, a request
    // within the next ten is refused.
    for _ in 0..3 {
        assert_eq!(get().await.status(), 200);
    }
    let mut refused = None;
    for _ in 0..10 {
        let response = get().await;
        if response.status() == 429 {
            refused = Some(response);
            break;
        }
        assert_eq!(response.status(), 200);
    }
    let refused = refused.expect("a request over the rate is refused");
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(retry_after, 1, "one a second: the next within a second");
    let problem: Value = refused.json().await.unwrap();
    assert_eq!(problem["code"], "rate_limited");
    assert_eq!(problem["status"], 429);

    // Admin keys are not limited by default.
    for _ in 0..20 {
        app.call(Method::GET, &path, None, 200).await;
    }
    // After Retry-After, the key works again.
    wait_until(
        Duration::from_secs(10),
        "the key to be let through",
        || async { (get().await.status() == 200).then_some(()) },
    )
    .await;
}

async fn a_client_slow_to_send_its_headers_is_disconnected(engine: Engine) {
    let db = TestDb::new(engine).await;
    let process = Process::start(
        &db,
        "serve",
        None,
        &[("HOOKLINE_HEADER_READ_TIMEOUT_MS", "1000")],
    )
    .await;
    let address = process.base.trim_start_matches("http://").to_owned();
    // Two slow loris clients: a header line every 200 ms, never the end.
    let mut clients = Vec::new();
    for _ in 0..2 {
        let address = address.clone();
        clients.push(tokio::spawn(async move {
            let mut stream = TcpStream::connect(&address).await.unwrap();
            stream
                .write_all(b"GET /healthz HTTP/1.1\r\n")
                .await
                .unwrap();
            let (mut reader, mut writer) = stream.into_split();
            let trickle = tokio::spawn(async move {
                for n in 0.. {
                    let line = format!("x-slow-{n}: 1\r\n");
                    if writer.write_all(line.as_bytes()).await.is_err() {
                        return n;
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                unreachable!()
            });
            let mut answer = Vec::new();
            let _ = reader.read_to_end(&mut answer).await;
            trickle.abort();
            answer
        }));
    }
    for client in clients {
        let answer = tokio::time::timeout(Duration::from_secs(30), client)
            .await
            .expect("the server disconnects a slow client")
            .unwrap();
        // Closed (hyper may first say 408): never a 200 for headers never finished.
        assert!(
            !String::from_utf8_lossy(&answer).contains(" 200 "),
            "{}",
            String::from_utf8_lossy(&answer)
        );
    }
    let health = reqwest::get(format!("{}/healthz", process.base))
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

/// A connection that made one request and stays open (keep-alive), so it
/// surely holds one of the server's connections.
async fn idle_connection(address: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains("\r\n\r\n{") {
        let n = stream.read(&mut buffer).await.unwrap();
        assert!(n > 0, "closed before answering");
        seen.extend_from_slice(&buffer[..n]);
    }
    assert!(String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 200"));
    stream
}

async fn connections_beyond_the_cap_wait_for_one_to_close(engine: Engine) {
    let db = TestDb::new(engine).await;
    let process = Process::start(&db, "serve", None, &[("HOOKLINE_MAX_CONNECTIONS", "2")]).await;
    let address = process.base.trim_start_matches("http://").to_owned();
    let first = idle_connection(&address).await;
    let _second = idle_connection(&address).await;

    let http = reqwest::Client::new();
    let third = tokio::spawn({
        let url = format!("{}/v1/apps", process.base);
        async move {
            http.get(url)
                .bearer_auth(ADMIN_TOKEN)
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .map(|r| r.status())
        }
    });
    // While two connections are open, the third is not served…
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!third.is_finished(), "served beyond the cap");
    // …and it is as soon as one closes.
    drop(first);
    let status = third
        .await
        .unwrap()
        .expect("served once a connection closed");
    assert_eq!(status, 200);
}
