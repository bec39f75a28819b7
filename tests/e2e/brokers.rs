//! Broker destinations besides Redis (docs/api.md#brokers): NATS JetStream
//! and RabbitMQ, against the real servers on this machine (127.0.0.1:4222,
//! 127.0.0.1:5672). Each delivery is one message, signed as an HTTP delivery
//! is and in order for an ordering key; refusals that will not change are
//! dead at once with the broker's words, and replayable; a broker away is
//! retried. RabbitMQ is read back with `amqprs`, a client written by others;
//! NATS through JetStream's own API.
//!
//! The helpers every broker's tests share are here too (`redis.rs` uses them).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use std::sync::{Arc, Mutex};

use amqprs::channel::{
    BasicConsumeArguments, BasicGetArguments, Channel, ExchangeDeclareArguments,
    ExchangeDeleteArguments, QueueBindArguments, QueueDeclareArguments, QueueDeleteArguments,
};
use amqprs::connection::{Connection, OpenConnectionArguments};
use amqprs::consumer::AsyncConsumer;
use amqprs::{BasicProperties, Deliver};
use base64::Engine as _;
use reqwest::Method;
use serde_json::{json, Value};

use crate::helpers::{both_engines, wait_until, Engine, TestApp};

both_engines!(
    a_nats_subject_gets_each_event_signed_and_in_order,
    nats_refusals_are_dead_with_its_words_and_its_absence_is_retried,
    a_rabbitmq_queue_gets_each_event_signed_and_in_order,
    rabbitmq_refusals_are_dead_with_its_words_and_its_absence_is_retried,
    broker_endpoints_are_checked_when_saved,
);

const NATS: &str = "127.0.0.1:4222";
const RABBITMQ: (&str, u16) = ("127.0.0.1", 5672);

/// A message as a consumer got it: its headers (or fields, or properties)
/// by name, and its body.
pub type Received = (Vec<(String, String)>, Vec<u8>);

/// A name no other test (or run) uses.
pub fn fresh_name(name: &str) -> String {
    format!(
        "hookline-test-{name}-{}",
        hookline_core::ids::EventId::generate()
    )
}

/// Publishes one event; its one delivery's id.
pub async fn publish_one(app: &TestApp, app_id: &str) -> String {
    app.publish(app_id, "order.paid", json!({"order": 1})).await["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Publishes `count` events with one ordering key; their ids, in order.
pub async fn publish_ordered(app: &TestApp, app_id: &str, count: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for n in 0..count {
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
    ids
}

/// The attempts of `delivery`, once it is dead.
pub async fn dead_with_attempts(app: &TestApp, app_id: &str, delivery: &str) -> Value {
    app.wait_for_delivery_state(app_id, delivery, "dead").await;
    app.get(&format!("/v1/apps/{app_id}/deliveries/{delivery}/attempts"))
        .await
}

/// The one attempt of a delivery that died at once; what the broker said.
pub async fn refused_at_once(app: &TestApp, app_id: &str, delivery: &str) -> String {
    let attempts = dead_with_attempts(app, app_id, delivery).await;
    assert_eq!(
        attempts["data"].as_array().unwrap().len(),
        1,
        "not retried: {attempts}"
    );
    // Explained as a refusal, not as an HTTP status it never had.
    let explained = attempts["data"][0]["explanation"]["message"]
        .as_str()
        .unwrap();
    assert!(
        explained.contains("refused the message for good"),
        "{explained}"
    );
    attempts["data"][0]["response_body"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Tries to make an endpoint of `body`, which must be refused (422); the
/// problem's detail.
pub async fn refused_when_saved(app: &TestApp, app_id: &str, body: Value) -> String {
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

/// Deletes `endpoint` (so the app's next publish goes to the next one alone).
pub async fn delete_endpoint(app: &TestApp, app_id: &str, endpoint: &Value) {
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

/// Waits until a delivery to `url` (where nothing listens; the endpoint made
/// with `extra`) was retried: its first attempt a connection error with the
/// verdict "retry".
pub async fn absence_is_retried(app: &TestApp, app_id: &str, url: &str, extra: Value) {
    let endpoint = app.create_endpoint_with(app_id, url, extra).await;
    let waiting = publish_one(app, app_id).await;
    let attempts = wait_until(Duration::from_secs(30), "a retry", || async {
        let attempts = app
            .get(&format!("/v1/apps/{app_id}/deliveries/{waiting}/attempts"))
            .await;
        let attempts = attempts["data"].as_array().unwrap().clone();
        (attempts.len() >= 2).then_some(attempts)
    })
    .await;
    // Newest first: the first attempt's verdict was "retry".
    let first = attempts.last().unwrap();
    assert_eq!(first["error_kind"], "connect", "{first}");
    assert_eq!(first["verdict"], "retry", "{first}");
    delete_endpoint(app, app_id, &endpoint).await;
}

/// A port on 127.0.0.1 where nothing listens.
pub fn closed_port() -> u16 {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    closed.local_addr().unwrap().port()
}

/// The value of header `name` among `headers`.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> &'a str {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("no {name} in {headers:?}"))
}

/// Checks that messages (headers and body, in the order received) are the
/// events `ids`, in that order, each `order.updated` with `{"n": i}`, and
/// signed: a Standard Webhooks verifier accepts each with `endpoint`'s
/// secret, over the body as received.
pub fn assert_signed_in_order(endpoint: &Value, ids: &[String], messages: &[Received]) {
    assert_eq!(messages.len(), ids.len(), "{messages:?}");
    let verifier = standardwebhooks::Webhook::new(endpoint["secret"].as_str().unwrap()).unwrap();
    for (n, ((headers, body), id)) in messages.iter().zip(ids).enumerate() {
        assert_eq!(header(headers, "webhook-id"), id);
        assert_eq!(header(headers, "hookline-ordering-key"), "order-42");
        let parsed: Value = serde_json::from_slice(body).unwrap();
        assert_eq!(parsed["type"], "order.updated");
        assert_eq!(parsed["data"], json!({"n": n}));
        let mut map = axum::http::HeaderMap::new();
        for name in ["webhook-id", "webhook-timestamp", "webhook-signature"] {
            map.insert(name, header(headers, name).parse().unwrap());
        }
        verifier
            .verify(body, &map)
            .expect("the message's signature verifies");
    }
}

/// Waits for each event's delivery to succeed; its attempt's words, one per event.
pub async fn succeeded_saying(app: &TestApp, app_id: &str, ids: &[String]) -> Vec<String> {
    let mut said = Vec::new();
    for id in ids {
        let deliveries =
            app.get(&format!("/v1/apps/{app_id}/events/{id}")).await["deliveries"].clone();
        let delivery = deliveries[0]["id"].as_str().unwrap().to_owned();
        app.wait_for_delivery_state(app_id, &delivery, "succeeded")
            .await;
        let attempts = app
            .get(&format!("/v1/apps/{app_id}/deliveries/{delivery}/attempts"))
            .await;
        said.push(
            attempts["data"][0]["response_body"]
                .as_str()
                .unwrap_or_default()
                .to_owned(),
        );
    }
    said
}

// ---------------------------------------------------------------- NATS

/// A connection to the machine's NATS, for the test's own requests to
/// JetStream's API.
struct Nats {
    stream: BufReader<TcpStream>,
    /// This connection's own reply subjects are `<inbox>.<n>`.
    inbox: String,
    next: u32,
    /// The largest message the server takes (its greeting says).
    max_payload: usize,
}

impl Nats {
    fn connect() -> Self {
        crate::prerequisites::nats();
        let stream = TcpStream::connect(NATS).unwrap_or_else(|e| {
            panic!(
                "NATS with JetStream is needed at {NATS} (Debian's nats-server, run with -js): {e}"
            )
        });
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut nats = Self {
            stream: BufReader::new(stream),
            inbox: format!("_INBOX.{}", fresh_name("nats").replace('.', "_")),
            next: 0,
            max_payload: 0,
        };
        let line = nats.line();
        let info: Value = serde_json::from_str(line.trim_start_matches("INFO ")).unwrap();
        assert_eq!(
            info["jetstream"], true,
            "the NATS at {NATS} must run JetStream (nats-server -js): {line}"
        );
        nats.max_payload = info["max_payload"].as_u64().unwrap() as usize;
        let hello = format!(
            "CONNECT {{\"verbose\":false,\"headers\":true}}\r\nSUB {}.* 1\r\nPING\r\n",
            nats.inbox
        );
        nats.write(hello.as_bytes());
        assert_eq!(nats.line(), "PONG");
        nats
    }

    fn write(&mut self, bytes: &[u8]) {
        self.stream.get_mut().write_all(bytes).unwrap();
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.stream.read_line(&mut line).unwrap();
        line.trim_end().to_owned()
    }

    /// JetStream's answer to `request` on API subject `subject`.
    fn api(&mut self, subject: &str, request: Value) -> Value {
        self.next += 1;
        let reply = format!("{}.{}", self.inbox, self.next);
        let body = request.to_string();
        self.write(format!("PUB {subject} {reply} {}\r\n{body}\r\n", body.len()).as_bytes());
        loop {
            let line = self.line();
            let words: Vec<&str> = line.split(' ').collect();
            match words.as_slice() {
                ["MSG", subject, _, size] => {
                    let mut payload = vec![0; size.parse::<usize>().unwrap() + 2];
                    self.stream.read_exact(&mut payload).unwrap();
                    if *subject == reply {
                        payload.truncate(payload.len() - 2);
                        return serde_json::from_slice(&payload).unwrap();
                    }
                }
                ["PING"] => self.write(b"PONG\r\n"),
                _ => {}
            }
        }
    }

    /// Makes a stream (kept in memory) that captures `subjects`.
    fn create_stream(&mut self, name: &str, subjects: &[&str]) {
        let created = self.api(
            &format!("$JS.API.STREAM.CREATE.{name}"),
            json!({"name": name, "subjects": subjects, "storage": "memory", "max_age": 600_000_000_000u64}),
        );
        assert!(created.get("error").is_none(), "{created}");
    }

    fn delete_stream(&mut self, name: &str) {
        self.api(&format!("$JS.API.STREAM.DELETE.{name}"), json!({}));
    }

    /// The stream's messages, oldest first: each its headers and body.
    fn messages(&mut self, name: &str) -> Vec<Received> {
        let info = self.api(&format!("$JS.API.STREAM.INFO.{name}"), json!({}));
        let count = info["state"]["messages"].as_u64().unwrap_or(0);
        let base64 = base64::engine::general_purpose::STANDARD;
        (1..=count)
            .map(|seq| {
                let got = self.api(
                    &format!("$JS.API.STREAM.MSG.GET.{name}"),
                    json!({"seq": seq}),
                );
                let message = &got["message"];
                let head = base64
                    .decode(message["hdrs"].as_str().unwrap_or_default())
                    .unwrap();
                let headers = String::from_utf8(head)
                    .unwrap()
                    .lines()
                    .skip(1)
                    .filter_map(|line| line.split_once(": "))
                    .map(|(n, v)| (n.to_owned(), v.to_owned()))
                    .collect();
                let body = base64
                    .decode(message["data"].as_str().unwrap_or_default())
                    .unwrap();
                (headers, body)
            })
            .collect()
    }
}

/// A JetStream stream name (no dots) and a subject it captures, unique to a test.
fn fresh_stream_and_subject(name: &str) -> (String, String) {
    let stream = fresh_name(name).replace('-', "_");
    let subject = format!("{}.orders", stream.to_lowercase());
    (stream, subject)
}

async fn a_nats_subject_gets_each_event_signed_and_in_order(engine: Engine) {
    let mut nats = Nats::connect();
    let (stream, subject) = fresh_stream_and_subject("ordered");
    nats.create_stream(&stream, &[&subject]);
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint(&app_id, &format!("nats://{NATS}/?subject={subject}"))
        .await;
    let ids = publish_ordered(&app, &app_id, 5).await;
    let said = succeeded_saying(&app, &app_id, &ids).await;
    // Each delivery's attempt says where JetStream stored it: one stream, in order.
    let expected: Vec<String> = (1..=5)
        .map(|n| format!("JetStream {stream} seq {n}"))
        .collect();
    let messages = nats.messages(&stream);
    assert_signed_in_order(&endpoint, &ids, &messages);
    // JetStream's duplicate window keys on the delivery: a retry is not stored twice.
    for ((headers, _), id) in messages.iter().zip(&ids) {
        let event = app.get(&format!("/v1/apps/{app_id}/events/{id}")).await;
        assert_eq!(
            header(headers, "Nats-Msg-Id"),
            event["deliveries"][0]["id"].as_str().unwrap()
        );
    }
    let mut in_seq_order = said.clone();
    in_seq_order.sort_by_key(|s| s.rsplit(' ').next().unwrap().parse::<u32>().unwrap());
    assert_eq!(in_seq_order, expected, "{said:?}");
    nats.delete_stream(&stream);
}

async fn nats_refusals_are_dead_with_its_words_and_its_absence_is_retried(engine: Engine) {
    let mut nats = Nats::connect();
    let max_payload = nats.max_payload;
    // The API takes an event larger than the NATS server does.
    let app = TestApp::spawn_with(engine, |c| c.max_payload_bytes = 2 * max_payload).await;
    let app_id = app.create_app().await;

    // A subject no stream captures: dead at once, saying so; once a stream
    // captures it, a replay from the dead-letter queue stores the message.
    let (stream, subject) = fresh_stream_and_subject("uncaptured");
    let endpoint = app
        .create_endpoint(&app_id, &format!("nats://{NATS}/?subject={subject}"))
        .await;
    let dead = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &dead).await;
    assert!(
        said.contains("no JetStream stream captures") && said.contains(&subject),
        "{said}"
    );
    nats.create_stream(&stream, &[&subject]);
    app.replay_until_succeeded(&app_id, &dead).await;
    assert_eq!(nats.messages(&stream).len(), 1);
    nats.delete_stream(&stream);
    delete_endpoint(&app, &app_id, &endpoint).await;

    // A message over the server's max_payload: dead at once, saying so.
    let (stream, subject) = fresh_stream_and_subject("large");
    nats.create_stream(&stream, &[&subject]);
    let endpoint = app
        .create_endpoint(&app_id, &format!("nats://{NATS}/?subject={subject}"))
        .await;
    let big = app
        .publish(
            &app_id,
            "order.paid",
            json!({"note": "x".repeat(max_payload)}),
        )
        .await["deliveries"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let said = refused_at_once(&app, &app_id, &big).await;
    assert!(said.contains("max_payload"), "{said}");
    assert!(nats.messages(&stream).is_empty());
    nats.delete_stream(&stream);
    delete_endpoint(&app, &app_id, &endpoint).await;

    // No NATS there: a connection error, retried.
    absence_is_retried(
        &app,
        &app_id,
        &format!("nats://127.0.0.1:{}/?subject=a", closed_port()),
        json!({}),
    )
    .await;
}

// ------------------------------------------------------------ RabbitMQ

/// A connection to the machine's RabbitMQ, as guest, for the test's own
/// declarations and reads.
async fn rabbitmq() -> (Connection, Channel) {
    crate::prerequisites::rabbitmq();
    let (host, port) = RABBITMQ;
    let connection = Connection::open(&OpenConnectionArguments::new(host, port, "guest", "guest"))
        .await
        .unwrap_or_else(|e| {
            panic!("RabbitMQ is needed at {host}:{port} with guest/guest (Debian's rabbitmq-server): {e}")
        });
    let channel = connection.open_channel(None).await.unwrap();
    (connection, channel)
}

/// Declares a topic exchange and a queue bound to it with `routing_key`.
async fn exchange_with_queue(channel: &Channel, name: &str, routing_key: &str) {
    channel
        .exchange_declare(ExchangeDeclareArguments::new(name, "topic"))
        .await
        .unwrap();
    channel
        .queue_declare(QueueDeclareArguments::new(name))
        .await
        .unwrap();
    channel
        .queue_bind(QueueBindArguments::new(name, name, routing_key))
        .await
        .unwrap();
}

async fn remove(channel: &Channel, name: &str) {
    let _ = channel.queue_delete(QueueDeleteArguments::new(name)).await;
    let _ = channel
        .exchange_delete(ExchangeDeleteArguments::new(name))
        .await;
}

/// Every message in `queue`, oldest first (taken off it).
async fn take_all(channel: &Channel, queue: &str) -> Vec<Received> {
    let mut messages = Vec::new();
    while let Some((_, properties, body)) = channel
        .basic_get(BasicGetArguments::new(queue).no_ack(true).finish())
        .await
        .unwrap()
    {
        let mut headers: Vec<(String, String)> = properties
            .headers()
            .map(|table| {
                table
                    .as_ref()
                    .iter()
                    .map(|(name, value)| {
                        let value = match value {
                            amqprs::FieldValue::S(text) => text.as_ref().clone(),
                            other => other.to_string(),
                        };
                        (name.as_ref().clone(), value)
                    })
                    .collect()
            })
            .unwrap_or_default();
        headers.push((
            "message-id".into(),
            properties.message_id().cloned().unwrap_or_default(),
        ));
        headers.push((
            "delivery-mode".into(),
            properties.delivery_mode().unwrap_or(0).to_string(),
        ));
        headers.push((
            "content-type".into(),
            properties.content_type().cloned().unwrap_or_default(),
        ));
        messages.push((headers, body));
    }
    messages
}

/// A RabbitMQ queue bound to a fresh exchange, read as it fills by a
/// consumer (`amqprs`) that logs every message as a receipt, in arrival
/// order: an inbox like an HTTP `Receiver`'s, for the history checker.
pub struct Queue {
    /// The endpoint URL that publishes into it.
    pub url: String,
    log: Arc<Mutex<Vec<crate::helpers::Received>>>,
    _connection: Connection,
    _channel: Channel,
}

impl Queue {
    pub async fn start(name: &str) -> Self {
        let (connection, channel) = rabbitmq().await;
        let name = fresh_name(name);
        exchange_with_queue(&channel, &name, "#").await;
        let log = Arc::default();
        channel
            .basic_consume(
                Collector {
                    log: Arc::clone(&log),
                },
                BasicConsumeArguments::new(&name, &name)
                    .manual_ack(false)
                    .finish(),
            )
            .await
            .unwrap();
        let (host, port) = RABBITMQ;
        Self {
            url: format!("amqp://{host}:{port}/?exchange={name}&routing_key=deliveries"),
            log,
            _connection: connection,
            _channel: channel,
        }
    }

    /// Every message received so far, as receipts the broker took (status 200).
    pub fn requests(&self) -> Vec<crate::helpers::Received> {
        self.log.lock().unwrap().clone()
    }
}

struct Collector {
    log: Arc<Mutex<Vec<crate::helpers::Received>>>,
}

#[async_trait::async_trait]
impl AsyncConsumer for Collector {
    async fn consume(
        &mut self,
        _channel: &Channel,
        _deliver: Deliver,
        properties: BasicProperties,
        content: Vec<u8>,
    ) {
        let mut headers = axum::http::HeaderMap::new();
        for (name, value) in properties
            .headers()
            .map(|t| t.as_ref().iter())
            .into_iter()
            .flatten()
        {
            if let amqprs::FieldValue::S(text) = value {
                headers.insert(
                    axum::http::HeaderName::from_bytes(name.as_ref().as_bytes()).unwrap(),
                    text.as_ref().parse().unwrap(),
                );
            }
        }
        self.log.lock().unwrap().push(crate::helpers::Received {
            headers,
            body: content.into(),
            at: std::time::Instant::now(),
            wall: std::time::SystemTime::now(),
            status: 200,
        });
    }
}

async fn a_rabbitmq_queue_gets_each_event_signed_and_in_order(engine: Engine) {
    let (_connection, channel) = rabbitmq().await;
    let name = fresh_name("ordered");
    exchange_with_queue(&channel, &name, "orders.*").await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let (host, port) = RABBITMQ;
    let endpoint = app
        .create_endpoint(
            &app_id,
            &format!("amqp://{host}:{port}/?exchange={name}&routing_key=orders.updated"),
        )
        .await;
    let ids = publish_ordered(&app, &app_id, 5).await;
    let said = succeeded_saying(&app, &app_id, &ids).await;
    assert!(
        said.iter().all(|s| s.starts_with("RabbitMQ confirmed")),
        "{said:?}"
    );
    let messages = take_all(&channel, &name).await;
    assert_signed_in_order(&endpoint, &ids, &messages);
    for ((headers, _), id) in messages.iter().zip(&ids) {
        let event = app.get(&format!("/v1/apps/{app_id}/events/{id}")).await;
        assert_eq!(
            header(headers, "message-id"),
            event["deliveries"][0]["id"].as_str().unwrap()
        );
        assert_eq!(header(headers, "delivery-mode"), "2", "persistent");
        assert_eq!(header(headers, "content-type"), "application/json");
    }
    remove(&channel, &name).await;

    // Straight to a queue through the default exchange: its name is the routing key.
    delete_endpoint(&app, &app_id, &endpoint).await;
    let queue = fresh_name("direct");
    channel
        .queue_declare(QueueDeclareArguments::new(&queue))
        .await
        .unwrap();
    let direct = app
        .create_endpoint(
            &app_id,
            &format!("amqp://{host}:{port}?routing_key={queue}"),
        )
        .await;
    let ids = publish_ordered(&app, &app_id, 2).await;
    succeeded_saying(&app, &app_id, &ids).await;
    assert_signed_in_order(&direct, &ids, &take_all(&channel, &queue).await);
    remove(&channel, &queue).await;
}

async fn rabbitmq_refusals_are_dead_with_its_words_and_its_absence_is_retried(engine: Engine) {
    let (_connection, channel) = rabbitmq().await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let (host, port) = RABBITMQ;

    // No such exchange: dead at once with RabbitMQ's words; once it exists
    // with a queue bound, a replay from the dead-letter queue delivers.
    let name = fresh_name("missing");
    let url = format!("amqp://{host}:{port}/?exchange={name}&routing_key=orders.paid");
    let endpoint = app.create_endpoint(&app_id, &url).await;
    let dead = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &dead).await;
    assert!(said.contains("404") && said.contains("NOT_FOUND"), "{said}");
    exchange_with_queue(&channel, &name, "orders.#").await;
    app.replay_until_succeeded(&app_id, &dead).await;
    assert_eq!(take_all(&channel, &name).await.len(), 1);

    // An exchange no queue takes this key from: returned, so dead, saying so.
    channel
        .queue_delete(QueueDeleteArguments::new(&name))
        .await
        .unwrap();
    let unroutable = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &unroutable).await;
    assert!(said.contains("312") && said.contains("NO_ROUTE"), "{said}");
    remove(&channel, &name).await;
    delete_endpoint(&app, &app_id, &endpoint).await;

    // A refused login: dead, with RabbitMQ's words.
    let name = fresh_name("login");
    exchange_with_queue(&channel, &name, "#").await;
    let refused = app
        .create_endpoint_with(
            &app_id,
            &format!("amqp://{host}:{port}/?exchange={name}"),
            json!({"auth": {"basic": {"username": "nobody", "password": "wrong"}}}),
        )
        .await;
    let dead = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &dead).await;
    assert!(
        said.contains("403") && said.contains("ACCESS_REFUSED"),
        "{said}"
    );
    assert!(take_all(&channel, &name).await.is_empty());
    remove(&channel, &name).await;
    delete_endpoint(&app, &app_id, &refused).await;

    // No RabbitMQ there: a connection error, retried.
    absence_is_retried(
        &app,
        &app_id,
        &format!("amqp://127.0.0.1:{}/?exchange=a", closed_port()),
        json!({}),
    )
    .await;
}

async fn broker_endpoints_are_checked_when_saved(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let refused = |body: Value| refused_when_saved(&app, &app_id, body);
    let said = refused(json!({"url": format!("nats://{NATS}/")})).await;
    assert!(said.contains("?subject="), "{said}");
    let said = refused(json!({"url": format!("nats://{NATS}/?subject=orders.*")})).await;
    assert!(said.contains("wildcards"), "{said}");
    let said = refused(json!({"url": "amqp://127.0.0.1:5672/"})).await;
    assert!(said.contains("?exchange="), "{said}");
    let said = refused(json!({"url": "amqp://127.0.0.1:5672/a/b?exchange=x"})).await;
    assert!(said.contains("virtual host"), "{said}");
    let said =
        refused(json!({"url": format!("nats://{NATS}/?subject=a"), "auth": {"bearer": "t"}})).await;
    assert!(said.contains("basic"), "{said}");
    let said =
        refused(json!({"url": "amqp://127.0.0.1/?exchange=x", "headers": {"x-team": "a"}})).await;
    assert!(said.contains("headers"), "{said}");
    // Nothing was made.
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"],
        json!([])
    );
    // With private destinations refused, a broker on loopback is refused when saved.
    let guarded = TestApp::spawn_with(engine, |c| c.allow_private_destinations = false).await;
    let guarded_app = guarded.create_app().await;
    for url in ["nats://127.0.0.1/?subject=a", "amqp://[::1]/?exchange=a"] {
        let problem = guarded
            .call(
                Method::POST,
                &format!("/v1/apps/{guarded_app}/endpoints"),
                Some(&json!({"url": url})),
                422,
            )
            .await;
        assert_eq!(problem["code"], "destination_forbidden", "{url}: {problem}");
    }
}
