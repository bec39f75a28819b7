//! Redis Streams destinations (docs/api.md#redis-streams), against the real
//! Redis on this machine (127.0.0.1:6379): each delivery one `XADD` entry,
//! signed as an HTTP delivery is, in order for an ordering key; refusals that
//! will not change dead at once with Redis's words, and replayable; Redis
//! away retried.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, wait_until, Engine, TestApp};

both_engines!(
    a_redis_stream_gets_each_event_signed_and_in_order,
    refusals_are_dead_with_rediss_words_and_its_absence_is_retried,
    redis_endpoints_are_checked_when_saved,
    a_stream_whose_name_resolves_to_loopback_is_refused_where_it_connects,
);

const REDIS: &str = "127.0.0.1:6379";

/// A reply of Redis's protocol.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    Text(String),
    Number(i64),
    Error(String),
    Nil,
    List(Vec<Reply>),
}

impl Reply {
    fn text(&self) -> &str {
        match self {
            Reply::Text(text) => text,
            other => panic!("not text: {other:?}"),
        }
    }
}

/// A connection to the machine's Redis, for the test's own commands.
struct Redis(BufReader<TcpStream>);

impl Redis {
    fn connect() -> Self {
        crate::prerequisites::redis();
        let stream =
            TcpStream::connect(REDIS).unwrap_or_else(|e| panic!("Redis is needed at {REDIS}: {e}"));
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Self(BufReader::new(stream))
    }

    fn command(&mut self, parts: &[&str]) -> Reply {
        let mut request = format!("*{}\r\n", parts.len());
        for part in parts {
            request.push_str(&format!("${}\r\n{part}\r\n", part.len()));
        }
        self.0.get_mut().write_all(request.as_bytes()).unwrap();
        self.reply()
    }

    fn reply(&mut self) -> Reply {
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at(1);
        match kind {
            "+" => Reply::Text(rest.to_owned()),
            "-" => Reply::Error(rest.to_owned()),
            ":" => Reply::Number(rest.parse().unwrap()),
            "$" if rest == "-1" => Reply::Nil,
            "$" => {
                let mut value = vec![0; rest.parse::<usize>().unwrap() + 2];
                self.0.read_exact(&mut value).unwrap();
                value.truncate(value.len() - 2);
                Reply::Text(String::from_utf8(value).unwrap())
            }
            "*" if rest == "-1" => Reply::Nil,
            "*" => Reply::List(
                (0..rest.parse::<usize>().unwrap())
                    .map(|_| self.reply())
                    .collect(),
            ),
            _ => panic!("not a Redis reply: {line:?}"),
        }
    }

    /// The stream's entries, oldest first: each its fields by name.
    fn entries(&mut self, stream: &str) -> Vec<Vec<(String, String)>> {
        let Reply::List(entries) = self.command(&["XRANGE", stream, "-", "+"]) else {
            panic!("XRANGE answered no list");
        };
        entries
            .into_iter()
            .map(|entry| {
                let Reply::List(parts) = entry else {
                    panic!("an entry")
                };
                let Reply::List(fields) = &parts[1] else {
                    panic!("its fields")
                };
                fields
                    .chunks(2)
                    .map(|pair| (pair[0].text().to_owned(), pair[1].text().to_owned()))
                    .collect()
            })
            .collect()
    }
}

/// A stream key no other test (or run) uses.
fn fresh_stream(name: &str) -> String {
    format!(
        "hookline-test-{name}-{}",
        hookline_core::ids::EventId::generate()
    )
}

/// The attempts of `delivery`, once it is dead.
async fn dead_with_attempts(app: &TestApp, app_id: &str, delivery: &str) -> Value {
    app.wait_for_delivery_state(app_id, delivery, "dead").await;
    app.get(&format!("/v1/apps/{app_id}/deliveries/{delivery}/attempts"))
        .await
}

/// Deletes `endpoint` (so the app's next publish goes to the next one alone).
async fn delete_endpoint(app: &TestApp, app_id: &str, endpoint: &Value) {
    app.call(
        Method::DELETE,
        &format!(
            "/v1/apps/{app_id}/endpoints/{}",
            endpoint["id"].as_str().unwrap()
        ),
        None,
        204,
    )
    .await;
}

fn field<'a>(entry: &'a [(String, String)], name: &str) -> &'a str {
    entry
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} in {entry:?}"))
}

async fn a_redis_stream_gets_each_event_signed_and_in_order(engine: Engine) {
    let mut redis = Redis::connect();
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let stream = fresh_stream("ordered");
    let endpoint = app
        .create_endpoint(
            &app_id,
            &format!("redis://{REDIS}/?stream={stream}&maxlen=1000"),
        )
        .await;
    let mut ids = Vec::new();
    for n in 0..5 {
        let published = app
            .call(
                Method::POST,
                &format!("/v1/apps/{app_id}/events"),
                Some(&json!({"event_type": "order.updated", "payload": {"n": n}, "ordering_key": "order-42"})),
                202,
            )
            .await;
        ids.push(published["id"].as_str().unwrap().to_owned());
    }
    let entries = wait_until(Duration::from_secs(30), "five entries", || {
        let entries = redis.entries(&stream);
        async move { (entries.len() == 5).then_some(entries) }
    })
    .await;
    // In publish order, each signed: a Standard Webhooks verifier accepts it
    // with the endpoint's secret, over the body as added.
    let verifier = standardwebhooks::Webhook::new(endpoint["secret"].as_str().unwrap()).unwrap();
    for (n, (entry, id)) in entries.iter().zip(&ids).enumerate() {
        assert_eq!(field(entry, "webhook-id"), id);
        assert_eq!(field(entry, "content-type"), "application/json");
        let body: Value = serde_json::from_str(field(entry, "body")).unwrap();
        assert_eq!(body["type"], "order.updated");
        assert_eq!(body["data"], json!({"n": n}));
        let mut headers = axum::http::HeaderMap::new();
        for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
            headers.insert(name, field(entry, name).parse().unwrap());
        }
        verifier
            .verify(field(entry, "body").as_bytes(), &headers)
            .expect("the entry's signature verifies");
    }
    // Each delivery succeeded, and its attempt says which entry it made.
    for id in &ids {
        let deliveries =
            app.get(&format!("/v1/apps/{app_id}/events/{id}")).await["deliveries"].clone();
        let delivery = deliveries[0]["id"].as_str().unwrap().to_owned();
        app.wait_for_delivery_state(&app_id, &delivery, "succeeded")
            .await;
        let attempts = app
            .get(&format!("/v1/apps/{app_id}/deliveries/{delivery}/attempts"))
            .await;
        let said = attempts["data"][0]["response_body"]
            .as_str()
            .unwrap_or_default();
        assert!(said.starts_with("XADD "), "{attempts}");
    }
    redis.command(&["DEL", &stream]);
}

async fn refusals_are_dead_with_rediss_words_and_its_absence_is_retried(engine: Engine) {
    let mut redis = Redis::connect();
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let publish_one = |app_id: String| {
        let app = &app;
        async move {
            app.publish(&app_id, "order.paid", json!({"order": 1}))
                .await["deliveries"][0]["id"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };

    // A key that is not a stream: dead at once, with Redis's words; once the
    // key is free, a replay from the dead-letter queue adds the entry.
    let taken = fresh_stream("taken");
    assert_eq!(
        redis.command(&["SET", &taken, "a string"]),
        Reply::Text("OK".into())
    );
    let endpoint = app
        .create_endpoint(&app_id, &format!("redis://{REDIS}/?stream={taken}"))
        .await;
    let dead = publish_one(app_id.clone()).await;
    let attempts = dead_with_attempts(&app, &app_id, &dead).await;
    assert_eq!(attempts["data"].as_array().unwrap().len(), 1, "not retried");
    let said = attempts["data"][0]["response_body"].as_str().unwrap();
    assert!(said.contains("WRONGTYPE"), "{said}");
    redis.command(&["DEL", &taken]);
    app.call(
        Method::POST,
        &format!("/v1/apps/{app_id}/deliveries/{dead}/replay"),
        None,
        202,
    )
    .await;
    app.wait_for_delivery_state(&app_id, &dead, "succeeded")
        .await;
    assert_eq!(redis.entries(&taken).len(), 1);
    redis.command(&["DEL", &taken]);
    delete_endpoint(&app, &app_id, &endpoint).await;

    // A refused login: dead, with Redis's words.
    let stream = fresh_stream("login");
    let refused = app
        .create_endpoint_with(
            &app_id,
            &format!("redis://{REDIS}/?stream={stream}"),
            json!({"auth": {"basic": {"username": "nobody", "password": "wrong"}}}),
        )
        .await;
    let dead = publish_one(app_id.clone()).await;
    let attempts = dead_with_attempts(&app, &app_id, &dead).await;
    let said = attempts["data"][0]["response_body"].as_str().unwrap();
    assert!(said.contains("WRONGPASS"), "{said}");
    assert!(redis.entries(&stream).is_empty());
    delete_endpoint(&app, &app_id, &refused).await;

    // No Redis there: a connection error, retried (a second attempt follows
    // the first, whose verdict was "retry").
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    app.create_endpoint(&app_id, &format!("redis://127.0.0.1:{port}/?stream=away"))
        .await;
    let waiting = publish_one(app_id.clone()).await;
    let attempts = wait_until(Duration::from_secs(30), "a retry", || async {
        let attempts = app
            .get(&format!("/v1/apps/{app_id}/deliveries/{waiting}/attempts"))
            .await;
        let attempts = attempts["data"].as_array().unwrap().clone();
        (attempts.len() >= 2).then_some(attempts)
    })
    .await;
    // Newest first: the first attempt's verdict was "retry" (Redis away is
    // not a refusal).
    let first = attempts.last().unwrap();
    assert_eq!(first["error_kind"], "connect", "{first}");
    assert_eq!(first["verdict"], "retry", "{first}");
}

async fn redis_endpoints_are_checked_when_saved(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let refused = |body: Value| {
        let app = &app;
        let app_id = app_id.clone();
        async move {
            let problem = app
                .call(
                    Method::POST,
                    &format!("/v1/apps/{app_id}/endpoints"),
                    Some(&body),
                    422,
                )
                .await;
            problem["detail"].as_str().unwrap().to_owned()
        }
    };
    let said = refused(json!({"url": format!("redis://{REDIS}/")})).await;
    assert!(said.contains("?stream="), "{said}");
    let said = refused(json!({"url": format!("redis://{REDIS}/?stream=a&maxlen=0")})).await;
    assert!(said.contains("maxlen"), "{said}");
    let said =
        refused(json!({"url": format!("redis://{REDIS}/?stream=a"), "auth": {"bearer": "t"}}))
            .await;
    assert!(said.contains("basic"), "{said}");
    let said =
        refused(json!({"url": format!("redis://{REDIS}/?stream=a"), "headers": {"x-team": "a"}}))
            .await;
    assert!(said.contains("headers"), "{said}");
    let said = refused(json!({"url": "amqp://127.0.0.1/"})).await;
    assert!(said.contains("redis"), "{said}");
    // Nothing was made.
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"],
        json!([])
    );
}

/// With private destinations refused, a name that resolves to loopback (as
/// after DNS rebinding) is refused where the connection is made: dead as
/// `destination_forbidden`, and nothing reaches Redis. The store is written
/// directly to get such an endpoint past the API's check.
async fn a_stream_whose_name_resolves_to_loopback_is_refused_where_it_connects(engine: Engine) {
    let mut redis = Redis::connect();
    let app = TestApp::spawn_with(engine, |c| c.allow_private_destinations = false).await;
    let app_id = app.create_app().await;
    let stream = fresh_stream("rebound");
    app.create_endpoint_in_store(&app_id, &format!("redis://localhost:6379/?stream={stream}"))
        .await;
    let delivery = app
        .publish(&app_id, "order.paid", json!({"order": 1}))
        .await["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let dead = app
        .wait_for_delivery_state(&app_id, &delivery, "dead")
        .await;
    assert_eq!(dead["dead_reason"], "destination_forbidden", "{dead}");
    assert!(redis.entries(&stream).is_empty());
}
