//! The egress proxy (`egress_proxy`): deliveries go through a real HTTP proxy
//! started by the test, and the destination guard still refuses what it must,
//! without asking the proxy.

use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::helpers::{both_engines, only_delivery, Engine, Receiver, TestApp};

both_engines!(
    deliveries_go_out_through_the_egress_proxy,
    a_forbidden_destination_is_refused_before_the_proxy_is_asked,
);

/// A forwarding HTTP proxy on 127.0.0.1: takes absolute-form requests
/// (`POST http://host:port/path`), sends them on and answers with what came
/// back; it records each request line it forwarded.
struct Proxy {
    url: String,
    forwarded: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let forwarded: Arc<Mutex<Vec<String>>> = Arc::default();
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let log = forwarded.clone();
        let app = axum::Router::new().fallback(move |request: Request| {
            let (client, log) = (client.clone(), log.clone());
            async move { forward(&client, &log, request).await }
        });
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { url, forwarded }
    }

    fn forwarded(&self) -> Vec<String> {
        self.forwarded.lock().unwrap().clone()
    }
}

async fn forward(client: &reqwest::Client, log: &Mutex<Vec<String>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if parts.uri.scheme().is_none() {
        return (axum::http::StatusCode::BAD_REQUEST, "not a proxy request").into_response();
    }
    log.lock()
        .unwrap()
        .push(format!("{} {}", parts.method, parts.uri));
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let mut outbound = client.request(parts.method, parts.uri.to_string());
    for (name, value) in &parts.headers {
        let name = name.as_str();
        if !(name == "host" || name.starts_with("proxy-") || name == "connection") {
            outbound = outbound.header(name, value);
        }
    }
    let answer = outbound.body(body).send().await.unwrap();
    let status = answer.status();
    let body = answer.bytes().await.unwrap();
    (status, body).into_response()
}

/// With `egress_proxy` set, a delivery reaches the receiver through the proxy,
/// signed as ever, and the proxy forwarded exactly that one request.
async fn deliveries_go_out_through_the_egress_proxy(engine: Engine) {
    let proxy = Proxy::start().await;
    let proxy_url = proxy.url.clone();
    let app = TestApp::spawn_with(engine, |c| c.egress_proxy = Some(proxy_url)).await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    let endpoint = app.create_endpoint(&app_id, &receiver.url).await;
    let published = app
        .publish(&app_id, "order.paid", json!({"order": 42}))
        .await;
    let delivery = only_delivery(&published);
    app.wait_for_delivery_state(&app_id, &delivery, "succeeded")
        .await;

    let got = receiver.requests();
    assert_eq!(got.len(), 1);
    assert!(
        standardwebhooks::Webhook::new(endpoint["secret"].as_str().unwrap())
            .unwrap()
            .verify(&got[0].body, &got[0].headers)
            .is_ok()
    );
    assert_eq!(proxy.forwarded(), [format!("POST {}", receiver.url)]);
}

/// Private destinations not allowed, a proxy configured (on loopback: the
/// operator's own address is not checked): an endpoint whose name resolves to
/// loopback is refused by Hookline's own check before the attempt, so neither
/// the proxy nor the receiver sees a request.
async fn a_forbidden_destination_is_refused_before_the_proxy_is_asked(engine: Engine) {
    let proxy = Proxy::start().await;
    let proxy_url = proxy.url.clone();
    let app = TestApp::spawn_with(engine, |c| {
        c.allow_private_destinations = false;
        c.egress_proxy = Some(proxy_url);
    })
    .await;
    let receiver = Receiver::start().await;
    let app_id = app.create_app().await;
    // `localhost` is refused when an endpoint is saved; written to the store
    // directly, it stands for a public name that resolves to loopback.
    app.create_endpoint_in_store(&app_id, &receiver.url_by_localhost())
        .await;
    let delivery = only_delivery(&app.publish(&app_id, "order.paid", json!({})).await);
    let dead = app
        .wait_for_delivery_state(&app_id, &delivery, "dead")
        .await;
    assert_eq!(dead["dead_reason"], "destination_forbidden");
    let attempts = app.attempts(&app_id, &delivery).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["error_kind"], "destination_forbidden");
    assert!(proxy.forwarded().is_empty(), "the proxy was never asked");
    assert!(receiver.requests().is_empty());
}
