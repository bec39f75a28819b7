//! Who may do what, checked over the router's own route list: an app-scoped key
//! reaches its app only (another app's resources are 404, as if absent), admin
//! routes are 403, a missing capability is 403 naming it, and a missing, expired
//! or revoked key is 401 with `WWW-Authenticate`.

use hookline_api::Access;
use hookline_core::access::{Capabilities, Capability};
use hookline_core::signing::api_key;
use hookline_core::time::Timestamp;
use hookline_store::KeyScope;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, Engine, Receiver, Reply, TestApp};

both_engines!(
    every_route_enforces_its_access_for_app_scoped_keys,
    problem_types_are_pages_this_server_serves,
);

/// The test's own entry for every route: the access it must require, and the
/// body a request to it sends. A route the router has and this table lacks, or
/// one whose declared access differs, fails the test.
#[rustfmt::skip]
fn expected(method: &Method, path: &str, receiver: &str) -> Option<(Access, Option<Value>)> {
    use Capability::{Endpoints, Messages, Publish, Read, Replay, Secrets};
    use Access::{Admin, App, Portal, Public};
    let entry = match (method.as_str(), path) {
        ("POST", "/v1/apps") => (Admin, Some(json!({"name": "x"}))),
        ("GET", "/v1/apps") => (Admin, None),
        ("GET", "/v1/apps/{app}") => (App(Read), None),
        ("PATCH", "/v1/apps/{app}") => (Admin, Some(json!({"name": "renamed"}))),
        ("DELETE", "/v1/apps/{app}") => (Admin, None),
        ("DELETE", "/v1/apps/{app}/keys") => (Admin, None),
        ("POST", "/v1/apps/{app}/portal-access") => (Admin, Some(json!({}))),
        ("POST", "/portal/session") => (Portal, Some(json!({"code": "hkp_x"}))),
        ("DELETE", "/portal/session") => (Portal, None),
        ("POST", "/portal/session/renew") => (Portal, None),
        ("GET", "/portal/apps/{app}/" | "/portal/static/{hash}/{*file}") => (Portal, None),
        ("POST", "/v1/apps/{app}/endpoints") => (App(Endpoints), Some(json!({"url": receiver}))),
        ("GET", "/v1/apps/{app}/endpoints") => (App(Read), None),
        ("GET", "/v1/apps/{app}/endpoints/{endpoint}") => (App(Read), None),
        ("PATCH", "/v1/apps/{app}/endpoints/{endpoint}") => (App(Endpoints), Some(json!({"description": "d"}))),
        ("DELETE", "/v1/apps/{app}/endpoints/{endpoint}") => (App(Endpoints), None),
        ("GET", "/v1/apps/{app}/endpoints/{endpoint}/secret") => (App(Secrets), None),
        ("POST", "/v1/apps/{app}/endpoints/{endpoint}/secret/rotate") => (App(Secrets), Some(json!({"grace_secs": 60}))),
        ("GET", "/v1/apps/{app}/endpoints/{endpoint}/health") => (App(Read), None),
        ("GET", "/v1/apps/{app}/endpoints/{endpoint}/attempts") => (App(Read), None),
        ("GET", "/v1/apps/{app}/endpoints/{endpoint}/messages") => (App(Messages), None),
        ("POST", "/v1/apps/{app}/endpoints/{endpoint}/messages/commit") => (App(Messages), Some(json!({"cursor": 0}))),
        ("GET", "/v1/apps/{app}/endpoints/{endpoint}/stats") => (App(Read), None),
        ("GET", "/v1/apps/{app}/endpoints/{endpoint}/timeline") => (App(Read), None),
        ("GET", "/v1/apps/{app}/incidents") => (App(Read), None),
        ("GET", "/v1/apps/{app}/notifications") => (App(Read), None),
        ("POST", "/v1/apps/{app}/filter-preview") => (App(Read), Some(json!({"filter": "/n > 0"}))),
        ("POST", "/v1/apps/{app}/transform-preview") => (App(Endpoints), Some(json!({"transform": "slack", "event_type": "t.x", "payload": {}}))),
        ("POST", "/v1/apps/{app}/notifications") => (App(Endpoints), Some(json!({"kind": "slack", "to": receiver}))),
        ("DELETE", "/v1/apps/{app}/notifications/{channel}") => (App(Endpoints), None),
        ("POST", "/v1/apps/{app}/endpoints/{endpoint}/signature-check") => (App(Read), Some(json!({"headers": {}, "body": ""}))),
        ("POST", "/v1/apps/{app}/events") => (App(Publish), Some(json!({"event_type": "t.x", "payload": {}}))),
        ("GET", "/v1/apps/{app}/events") => (App(Read), None),
        ("POST", "/v1/apps/{app}/events/batch") => (App(Publish), Some(json!({"events": [{"event_type": "t.x", "payload": {}}]}))),
        ("GET", "/v1/apps/{app}/events/{event}") => (App(Read), None),
        ("GET", "/v1/apps/{app}/deliveries") => (App(Read), None),
        ("GET", "/v1/apps/{app}/deliveries/{delivery}") => (App(Read), None),
        ("GET", "/v1/apps/{app}/deliveries/{delivery}/attempts") => (App(Read), None),
        ("GET", "/v1/apps/{app}/attempts/{attempt}") => (App(Read), None),
        ("POST", "/v1/apps/{app}/deliveries/{delivery}/replay") => (App(Replay), None),
        ("POST", "/v1/apps/{app}/deliveries/{delivery}/resend") => (App(Replay), None),
        ("GET", "/v1/apps/{app}/dlq") => (App(Read), None),
        ("POST", "/v1/apps/{app}/replays") => (App(Replay), Some(json!({"dry_run": true}))),
        ("GET", "/v1/apps/{app}/replays/{replay}") => (App(Read), None),
        ("POST", "/v1/apps/{app}/replays/{replay}/cancel") => (App(Replay), None),
        ("POST", "/v1/apps/{app}/endpoints/{endpoint}/test") => (App(Endpoints), Some(json!({"event_type": "t.x"}))),
        ("POST", "/v1/event-types") => (Admin, Some(json!({"name": "t.new"}))),
        ("GET", "/v1/event-types") => (App(Read), None),
        ("GET", "/v1/event-types/{name}") => (App(Read), None),
        ("PATCH", "/v1/event-types/{name}") => (Admin, Some(json!({"description": "d"}))),
        ("DELETE", "/v1/event-types/{name}") => (Admin, None),
        ("POST", "/v1/keys") => (Admin, Some(json!({"name": "x"}))),
        ("GET", "/v1/keys") => (Admin, None),
        ("DELETE", "/v1/keys/{key}") => (Admin, None),
        ("GET", "/healthz" | "/readyz" | "/metrics" | "/problems" | "/problems/{code}" | "/openapi.json") => (Public, None),
        _ => return None,
    };
    Some(entry)
}

/// One app's resources, to fill a route's path with.
struct Tenant {
    app: String,
    endpoint: String,
    event: String,
    delivery: String,
    replay: String,
    attempt: String,
}

impl Tenant {
    async fn make(app: &TestApp, uid: &str, receiver: &str) -> Self {
        let made = app
            .call(
                Method::POST,
                "/v1/apps",
                Some(&json!({"name": uid, "uid": uid})),
                201,
            )
            .await;
        let id = made["id"].as_str().unwrap().to_owned();
        let endpoint = app.create_endpoint(&id, receiver).await["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let published = app.publish(&id, "t.x", json!({"n": 1})).await;
        let event = published["id"].as_str().unwrap().to_owned();
        let delivery = published["deliveries"][0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        app.wait_for_delivery_state(&id, &delivery, "succeeded")
            .await;
        let job = app
            .call(
                Method::POST,
                &format!("/v1/apps/{id}/replays"),
                Some(&json!({})),
                202,
            )
            .await;
        let attempt = app.attempts(&id, &delivery).await[0]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        Self {
            app: id,
            endpoint,
            event,
            delivery,
            replay: job["id"].as_str().unwrap().to_owned(),
            attempt,
        }
    }

    fn fill(&self, path: &str, endpoint: &str) -> String {
        path.replace("{app}", &self.app)
            .replace("{endpoint}", endpoint)
            .replace("{event}", &self.event)
            .replace("{delivery}", &self.delivery)
            .replace("{replay}", &self.replay)
            .replace("{attempt}", &self.attempt)
            .replace("{channel}", endpoint)
            .replace("{key}", "key_01J00000000000000000000000")
            .replace("{code}", "not_found")
            .replace("{name}", "t.x")
            .replace("{hash}", "0")
            .replace("{*file}", "js/main.js")
    }
}

/// A key for `app` made over the API with these capabilities.
async fn app_key(app: &TestApp, for_app: &str, capabilities: &[Capability]) -> String {
    let made = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&json!({"name": "portal", "app": for_app, "capabilities": capabilities})),
            201,
        )
        .await;
    assert_eq!(made["capabilities"], json!(capabilities));
    made["key"].as_str().unwrap().to_owned()
}

/// `(status, code, has WWW-Authenticate, body)` of a request with an optional key.
async fn send(
    app: &TestApp,
    method: &Method,
    path: &str,
    body: &Option<Value>,
    key: Option<&str>,
) -> (u16, String, bool, Value) {
    let mut request = app
        .http
        .request(method.clone(), format!("{}{path}", app.base));
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenge = response.headers().contains_key("www-authenticate");
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap_or(Value::Null);
    let code = body["code"].as_str().unwrap_or_default().to_owned();
    (status, code, challenge, body)
}

async fn every_route_enforces_its_access_for_app_scoped_keys(engine: Engine) {
    let receiver = Receiver::start().await;
    receiver.answer_always(Reply::status(200));
    let app = TestApp::spawn(engine).await;
    app.call(
        Method::POST,
        "/v1/event-types",
        Some(&json!({"name": "t.x", "example": {"n": 0}})),
        201,
    )
    .await;
    let a = Tenant::make(&app, "tenant-a", &receiver.url).await;
    let b = Tenant::make(&app, "tenant-b", &receiver.url).await;

    let all_of_a = app_key(&app, &a.app, &Capability::ALL).await;
    let b_key = app_key(&app, &b.app, &[Capability::Read]).await;
    // Expired a second ago (written straight to the store: the API refuses a past expiry).
    let expired = api_key::generate();
    let now = Timestamp::from_system_time(std::time::SystemTime::now());
    app.store()
        .apps()
        .create_api_key(
            &api_key::hash(&expired),
            &KeyScope::App {
                app: a.app.parse().unwrap(),
                capabilities: Capabilities::all(),
            },
            "expired",
            Some(Timestamp::from_millis(now.as_millis() - 1_000)),
            now,
        )
        .await
        .unwrap();
    let revoked = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&json!({"name": "gone", "app": a.app, "capabilities": ["read"]})),
            201,
        )
        .await;
    app.call(
        Method::DELETE,
        &format!("/v1/keys/{}", revoked["id"].as_str().unwrap()),
        None,
        204,
    )
    .await;
    let revoked = revoked["key"].as_str().unwrap().to_owned();

    let routes = hookline_api::route_list();
    assert!(routes.len() > 30, "the router lists its routes");
    for route in &routes {
        let label = format!("{} {}", route.method, route.path);
        let (access, body) = expected(&route.method, route.path, &receiver.url)
            .unwrap_or_else(|| panic!("{label} has no entry in the access test's table"));
        assert_eq!(
            route.access, access,
            "{label} declares other access than it must"
        );
        let on_a = a.fill(route.path, &a.endpoint);
        let on_b = b.fill(route.path, &b.endpoint);
        match route.access {
            Access::Public => {
                let (status, ..) = send(&app, &route.method, &on_a, &body, None).await;
                assert!(![401, 403].contains(&status), "{label} is public: {status}");
                continue;
            }
            Access::Portal => {
                // No key is asked for (a code the handler checks may still be refused).
                let (status, code, ..) = send(&app, &route.method, &on_a, &body, None).await;
                assert!(
                    status != 403 && code != "unauthorized",
                    "{label} needs no key: {status} {code}"
                );
                continue;
            }
            Access::Admin => {
                let (status, code, ..) =
                    send(&app, &route.method, &on_a, &body, Some(&all_of_a)).await;
                assert_eq!((status, code.as_str()), (403, "admin_only"), "{label}");
            }
            Access::App(needed) => {
                // (A route outside any app, the catalog, has no other app to reach.)
                if route.path.contains("{app}") {
                    let (status, code, ..) =
                        send(&app, &route.method, &on_b, &body, Some(&all_of_a)).await;
                    assert_eq!(
                        (status, code.as_str()),
                        (404, "not_found"),
                        "{label}: app B's resource is out of reach of app A's key"
                    );
                }

                let others: Vec<Capability> = Capability::ALL
                    .into_iter()
                    .filter(|c| *c != needed)
                    .collect();
                let lacking = app_key(&app, &a.app, &others).await;
                let (status, code, ..) =
                    send(&app, &route.method, &on_a, &body, Some(&lacking)).await;
                assert_eq!(
                    (status, code),
                    (403, format!("missing_capability_{needed}")),
                    "{label} needs {needed}"
                );

                // The capability alone suffices (a DELETE gets a throwaway endpoint).
                let only = app_key(&app, &a.app, &[needed]).await;
                let target = if route.method == Method::DELETE {
                    // A notification channel's route gets a channel.
                    let spare = if route.path.contains("{channel}") {
                        app.call(
                            Method::POST,
                            &format!("/v1/apps/{}/notifications", a.app),
                            Some(&json!({"kind": "slack", "to": receiver.url})),
                            201,
                        )
                        .await
                    } else {
                        app.create_endpoint(&a.app, &receiver.url).await
                    };
                    a.fill(route.path, spare["id"].as_str().unwrap())
                } else {
                    on_a.clone()
                };
                let (status, code, _, answer) =
                    send(&app, &route.method, &target, &body, Some(&only)).await;
                assert!(
                    ![401, 403, 404].contains(&status),
                    "{label} with only {needed}: {status} {code}"
                );
                if route.method == Method::POST && route.path == "/v1/apps/{app}/endpoints" {
                    assert!(
                        answer.get("secret").is_none(),
                        "the secret is shown only to a key that may reveal it: {answer}"
                    );
                }
            }
        }
        for (who, key) in [
            ("no key", None),
            ("an expired key", Some(expired.as_str())),
            ("a revoked key", Some(revoked.as_str())),
        ] {
            let (status, code, challenge, _) = send(&app, &route.method, &on_a, &body, key).await;
            assert_eq!(
                (status, code.as_str()),
                (401, "unauthorized"),
                "{label} with {who}"
            );
            assert!(
                challenge,
                "{label} with {who}: a 401 carries WWW-Authenticate"
            );
        }
    }

    // Every key of app A at once; app B's key and the admin key are untouched.
    let revoked_all = app
        .call(
            Method::DELETE,
            &format!("/v1/apps/{}/keys", a.app),
            None,
            200,
        )
        .await;
    assert!(
        revoked_all["revoked"].as_u64().unwrap() >= 3,
        "{revoked_all}"
    );
    let (status, ..) = send(
        &app,
        &Method::GET,
        &format!("/v1/apps/{}", a.app),
        &None,
        Some(&all_of_a),
    )
    .await;
    assert_eq!(status, 401, "revoked with the rest of its app's keys");
    let (status, ..) = send(
        &app,
        &Method::GET,
        &format!("/v1/apps/{}", b.app),
        &None,
        Some(&b_key),
    )
    .await;
    assert_eq!(status, 200, "another app's key still works");
    assert!(app.get(&format!("/v1/keys?app={}", a.app)).await["data"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// A problem's `type` resolves (against the server) to a page explaining its
/// code; a wrong method is a problem+json 405 that keeps `Allow`.
async fn problem_types_are_pages_this_server_serves(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let response = app.request(Method::PUT, "/v1/apps", None, &[]).await;
    assert_eq!(response.status(), 405);
    assert_eq!(
        response.headers()["content-type"],
        "application/problem+json"
    );
    let allow = response.headers()["allow"].to_str().unwrap().to_owned();
    assert!(allow.contains("GET") && allow.contains("POST"), "{allow}");
    let problem: Value = response.json().await.unwrap();
    assert_eq!(problem["code"], "method_not_allowed");

    let missing = app
        .request(
            Method::GET,
            "/v1/apps/app_01J00000000000000000000000",
            None,
            &[],
        )
        .await;
    assert_eq!(missing.status(), 404);
    let problem: Value = missing.json().await.unwrap();
    assert_eq!(problem["type"], "/problems/not_found");
    let page = app
        .http
        .get(format!("{}{}", app.base, problem["type"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        page.status(),
        200,
        "no key is needed to read what an error means"
    );
    let text = page.text().await.unwrap();
    assert!(
        text.starts_with("not_found\n") && text.contains("HTTP 404"),
        "{text}"
    );
    let index = app
        .http
        .get(format!("{}/problems", app.base))
        .send()
        .await
        .unwrap();
    let index = index.text().await.unwrap();
    for code in [
        "unauthorized",
        "admin_only",
        "missing_capability_replay",
        "internal",
    ] {
        assert!(
            index.lines().any(|l| l.starts_with(&format!("{code}\t"))),
            "{code}"
        );
    }
    let unknown = app
        .http
        .get(format!("{}/problems/nosuch", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
}
