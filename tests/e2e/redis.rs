//! Redis Streams destinations (docs/api.md#redis-streams), against the real
//! Redis on this machine (127.0.0.1:6379): each delivery one `XADD` entry,
//! signed as an HTTP delivery is, in order for an ordering key; refusals that
//! will not change dead at once with Redis's words, and replayable; Redis
//! away retried.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::brokers::{
    absence_is_retried, assert_signed_in_order, closed_port, delete_endpoint, fresh_name, header,
    publish_one, publish_ordered, refused_at_once, refused_when_saved, succeeded_saying, Received,
};
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
    fresh_name(name)
}

/// The entries as messages: each its fields but `body`, and its body.
fn as_messages(entries: &[Vec<(String, String)>]) -> Vec<Received> {
    entries
        .iter()
        .map(|entry| (entry.clone(), field(entry, "body").as_bytes().to_vec()))
        .collect()
}

fn field<'a>(entry: &'a [(String, String)], name: &str) -> &'a str {
    header(entry, name)
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
    let ids = publish_ordered(&app, &app_id, 5).await;
    let entries = wait_until(Duration::from_secs(30), "five entries", || {
        let entries = redis.entries(&stream);
        async move { (entries.len() == 5).then_some(entries) }
    })
    .await;
    // In publish order, each signed: a Standard Webhooks verifier accepts it
    // with the endpoint's secret, over the body as added.
    assert_signed_in_order(&endpoint, &ids, &as_messages(&entries));
    for entry in &entries {
        assert_eq!(field(entry, "content-type"), "application/json");
    }
    // Each delivery succeeded, and its attempt says which entry it made.
    for said in succeeded_saying(&app, &app_id, &ids).await {
        assert!(said.starts_with("XADD "), "{said}");
    }
    redis.command(&["DEL", &stream]);
}

async fn refusals_are_dead_with_rediss_words_and_its_absence_is_retried(engine: Engine) {
    let mut redis = Redis::connect();
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;

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
    let dead = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &dead).await;
    assert!(said.contains("WRONGTYPE"), "{said}");
    redis.command(&["DEL", &taken]);
    app.replay_until_succeeded(&app_id, &dead).await;
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
    let dead = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &dead).await;
    assert!(said.contains("WRONGPASS"), "{said}");
    assert!(redis.entries(&stream).is_empty());
    delete_endpoint(&app, &app_id, &refused).await;

    // No Redis there: a connection error, retried (a second attempt follows
    // the first, whose verdict was "retry").
    absence_is_retried(
        &app,
        &app_id,
        &format!("redis://127.0.0.1:{}/?stream=away", closed_port()),
        json!({}),
    )
    .await;
}

async fn redis_endpoints_are_checked_when_saved(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let refused = |body: Value| refused_when_saved(&app, &app_id, body);
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
    let said = refused(json!({"url": "amqps://127.0.0.1/"})).await;
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
