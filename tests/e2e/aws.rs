//! Amazon SQS, SNS and EventBridge destinations (docs/api.md#amazon-sqs-sns-and-eventbridge), against
//! `moto` in server mode (the AWS stand-in from PyPI), started by the test:
//! each delivery one message, signed as an HTTP delivery is, in order for an
//! ordering key (a FIFO queue); AWS's refusals dead at once with its words,
//! and replayable; AWS away retried.

use std::time::Duration;

use reqwest::Method;
use serde_json::{json, Value};

use crate::brokers::{
    absence_is_retried, assert_signed_in_order, delete_endpoint, fresh_name, header, publish_one,
    publish_ordered, refused_at_once, refused_when_saved, succeeded_saying, Received,
};
use crate::helpers::{both_engines, Engine, TestApp};

both_engines!(
    an_sqs_fifo_queue_gets_each_event_signed_and_in_order,
    an_sns_topic_gets_each_event_signed,
    an_eventbridge_bus_gets_each_event_signed_as_its_detail,
    aws_refusals_are_dead_with_its_words_and_its_absence_is_retried,
    aws_endpoints_are_checked_when_saved,
);

/// moto's default account.
const ACCOUNT: &str = "123456789012";
const REGION: &str = "us-east-1";

/// The test's own calls to moto (which does not check signatures, but reads
/// the region from one).
struct Moto {
    port: u16,
    http: reqwest::Client,
}

impl Moto {
    fn start() -> Self {
        Self {
            port: crate::prerequisites::moto(),
            http: reqwest::Client::new(),
        }
    }

    /// One call to moto's `service` (signed for its region, which moto
    /// reads, not checks); the answer's body, after a 2xx.
    async fn call(
        &self,
        service: &str,
        content_type: &str,
        target: Option<String>,
        body: String,
    ) -> String {
        let mut request = self
            .http
            .post(format!("http://127.0.0.1:{}/", self.port))
            .header(
                "authorization",
                format!("AWS4-HMAC-SHA256 Credential=test/20260101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=0"),
            )
            .header("content-type", content_type);
        if let Some(target) = &target {
            request = request.header("x-amz-target", target);
        }
        let response = request.body(body.clone()).send().await.unwrap();
        let status = response.status();
        let answer = response.text().await.unwrap();
        assert!(
            status.is_success(),
            "{service} {target:?} {body}: {status} {answer}"
        );
        answer
    }

    /// An SQS call (AWS's JSON protocol).
    async fn sqs(&self, action: &str, body: Value) -> Value {
        let target = Some(format!("AmazonSQS.{action}"));
        let answer = self
            .call(
                "sqs",
                "application/x-amz-json-1.0",
                target,
                body.to_string(),
            )
            .await;
        serde_json::from_str(&answer).unwrap_or(Value::Null)
    }

    /// An EventBridge call (JSON 1.1).
    async fn events(&self, action: &str, body: Value) -> Value {
        let target = Some(format!("AWSEvents.{action}"));
        let answer = self
            .call(
                "events",
                "application/x-amz-json-1.1",
                target,
                body.to_string(),
            )
            .await;
        serde_json::from_str(&answer).unwrap_or(Value::Null)
    }

    /// An SNS call (its query protocol); the XML answer.
    async fn sns(&self, params: &[(&str, &str)]) -> String {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(params)
            .finish();
        self.call("sns", "application/x-www-form-urlencoded", None, body)
            .await
    }

    /// Makes a queue; its name.
    async fn create_queue(&self, name: &str) -> String {
        let fifo = name.ends_with(".fifo");
        let attributes = match fifo {
            true => json!({"FifoQueue": "true"}),
            false => json!({}),
        };
        self.sqs(
            "CreateQueue",
            json!({"QueueName": name, "Attributes": attributes}),
        )
        .await;
        name.to_owned()
    }

    fn queue_url(&self, queue: &str) -> String {
        format!("http://127.0.0.1:{}/{ACCOUNT}/{queue}", self.port)
    }

    /// The endpoint URL for `queue` on moto.
    fn sqs_endpoint(&self, queue: &str) -> String {
        format!(
            "sqs+http://127.0.0.1:{}/{ACCOUNT}/{queue}?region={REGION}",
            self.port
        )
    }

    /// Waits for `count` messages on `queue`; each its attributes and body,
    /// in the order received.
    async fn receive(&self, queue: &str, count: usize) -> Vec<Received> {
        let mut received: Vec<Received> = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while received.len() < count {
            assert!(
                std::time::Instant::now() < deadline,
                "{count} messages on {queue} within 30 s; got {received:?}"
            );
            let got = self
                .sqs(
                    "ReceiveMessage",
                    json!({"QueueUrl": self.queue_url(queue), "MaxNumberOfMessages": 10, "MessageAttributeNames": ["All"], "WaitTimeSeconds": 1}),
                )
                .await;
            for message in got["Messages"].as_array().cloned().unwrap_or_default() {
                let attributes = message["MessageAttributes"]
                    .as_object()
                    .map(|attributes| {
                        attributes
                            .iter()
                            .map(|(name, value)| {
                                (
                                    name.clone(),
                                    value["StringValue"].as_str().unwrap().to_owned(),
                                )
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let body = message["Body"].as_str().unwrap().as_bytes().to_vec();
                received.push((attributes, body));
            }
        }
        received
    }
}

/// A queue or topic name moto has not seen (letters, digits, `-`, `_`).
fn fresh(name: &str) -> String {
    fresh_name(name).replace('.', "-")
}

/// An access key (moto takes any).
fn key() -> Value {
    json!({"auth": {"basic": {"username": "AKIDEXAMPLE", "password": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}}})
}

async fn an_sqs_fifo_queue_gets_each_event_signed_and_in_order(engine: Engine) {
    let moto = Moto::start();
    let queue = moto
        .create_queue(&format!("{}.fifo", fresh("ordered")))
        .await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(&app_id, &moto.sqs_endpoint(&queue), key())
        .await;
    let ids = publish_ordered(&app, &app_id, 5).await;
    let said = succeeded_saying(&app, &app_id, &ids).await;
    assert!(
        said.iter().all(|s| s.starts_with("SQS message ")),
        "{said:?}"
    );
    // The FIFO queue keeps the order it was given: the ordering key's.
    assert_signed_in_order(&endpoint, &ids, &moto.receive(&queue, 5).await);
}

async fn an_sns_topic_gets_each_event_signed(engine: Engine) {
    let moto = Moto::start();
    // A topic whose messages a queue receives raw (body and attributes as published).
    let queue = moto.create_queue(&fresh("topic-reader")).await;
    let topic = fresh("topic");
    let created = moto
        .sns(&[("Action", "CreateTopic"), ("Name", &topic)])
        .await;
    let arn = format!("arn:aws:sns:{REGION}:{ACCOUNT}:{topic}");
    assert!(created.contains(&arn), "{created}");
    moto.sns(&[
        ("Action", "Subscribe"),
        ("TopicArn", &arn),
        ("Protocol", "sqs"),
        (
            "Endpoint",
            &format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}"),
        ),
        ("Attributes.entry.1.key", "RawMessageDelivery"),
        ("Attributes.entry.1.value", "true"),
    ])
    .await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &format!("sns+http://127.0.0.1:{}/?topic={arn}", moto.port),
            key(),
        )
        .await;
    let ids = publish_ordered(&app, &app_id, 3).await;
    let said = succeeded_saying(&app, &app_id, &ids).await;
    assert!(
        said.iter().all(|s| s.starts_with("SNS message ")),
        "{said:?}"
    );
    // The queue behind the topic is a standard one, which promises no order:
    // each message is checked against its event (the SQS test checks order).
    let mut received = moto.receive(&queue, 3).await;
    received.sort_by_key(|(headers, _)| {
        ids.iter()
            .position(|id| id == header(headers, "webhook-id"))
    });
    assert_signed_in_order(&endpoint, &ids, &received);
}

async fn an_eventbridge_bus_gets_each_event_signed_as_its_detail(engine: Engine) {
    let moto = Moto::start();
    // A bus whose rule sends Hookline's events to a queue.
    let queue = moto.create_queue(&fresh("bus-reader")).await;
    let bus = fresh("bus");
    moto.events("CreateEventBus", json!({"Name": bus})).await;
    moto.events(
        "PutRule",
        json!({"Name": "all", "EventBusName": bus, "EventPattern": json!({"source": ["acme.orders"]}).to_string()}),
    )
    .await;
    moto.events(
        "PutTargets",
        json!({"Rule": "all", "EventBusName": bus, "Targets": [{"Id": "queue", "Arn": format!("arn:aws:sqs:{REGION}:{ACCOUNT}:{queue}")}]}),
    )
    .await;
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &format!(
                "eventbridge+http://127.0.0.1:{}/?bus={bus}&source=acme.orders&region={REGION}",
                moto.port
            ),
            key(),
        )
        .await;
    let ids = publish_ordered(&app, &app_id, 3).await;
    let said = succeeded_saying(&app, &app_id, &ids).await;
    assert!(
        said.iter().all(|s| s.starts_with("EventBridge event ")),
        "{said:?}"
    );
    // Each event as the rule's target got it: detail type and source for
    // rules, the headers and the exact body signed in its detail.
    let mut received: Vec<Received> = moto
        .receive(&queue, 3)
        .await
        .into_iter()
        .map(|(_, event)| {
            let event: Value = serde_json::from_slice(&event).unwrap();
            assert_eq!(event["detail-type"], "order.updated", "{event}");
            assert_eq!(event["source"], "acme.orders", "{event}");
            let detail = &event["detail"];
            let headers = detail["headers"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(name, value)| (name.clone(), value.as_str().unwrap().to_owned()))
                .collect();
            (
                headers,
                detail["body"].as_str().unwrap().as_bytes().to_vec(),
            )
        })
        .collect();
    received.sort_by_key(|(headers, _)| {
        ids.iter()
            .position(|id| id == header(headers, "webhook-id"))
    });
    assert_signed_in_order(&endpoint, &ids, &received);
}

async fn aws_refusals_are_dead_with_its_words_and_its_absence_is_retried(engine: Engine) {
    let moto = Moto::start();
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;

    // No such queue: dead at once with AWS's words; once it exists, a replay
    // from the dead-letter queue delivers.
    let queue = fresh("missing");
    let endpoint = app
        .create_endpoint_with(&app_id, &moto.sqs_endpoint(&queue), key())
        .await;
    let dead = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &dead).await;
    assert!(said.contains("QueueDoesNotExist"), "{said}");
    moto.create_queue(&queue).await;
    app.replay_until_succeeded(&app_id, &dead).await;
    assert_eq!(moto.receive(&queue, 1).await.len(), 1);
    delete_endpoint(&app, &app_id, &endpoint).await;

    // No such topic: dead at once, saying so.
    let arn = format!("arn:aws:sns:{REGION}:{ACCOUNT}:{}", fresh("no-topic"));
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &format!("sns+http://127.0.0.1:{}/?topic={arn}", moto.port),
            key(),
        )
        .await;
    let dead = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &dead).await;
    assert!(said.contains("NotFound"), "{said}");
    delete_endpoint(&app, &app_id, &endpoint).await;

    // No such event bus: dead at once, saying so.
    let endpoint = app
        .create_endpoint_with(
            &app_id,
            &format!(
                "eventbridge+http://127.0.0.1:{}/?bus={}&region={REGION}",
                moto.port,
                fresh("no-bus")
            ),
            key(),
        )
        .await;
    let dead = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &dead).await;
    assert!(said.contains("ResourceNotFound"), "{said}");
    delete_endpoint(&app, &app_id, &endpoint).await;

    // Without an access key: dead, saying what to set.
    let queue = moto.create_queue(&fresh("keyless")).await;
    let endpoint = app
        .create_endpoint(&app_id, &moto.sqs_endpoint(&queue))
        .await;
    let dead = publish_one(&app, &app_id).await;
    let said = refused_at_once(&app, &app_id, &dead).await;
    assert!(said.contains("auth.basic"), "{said}");
    delete_endpoint(&app, &app_id, &endpoint).await;

    // No AWS there: a connection error, retried.
    let closed = crate::brokers::closed_port();
    let url = format!("sqs+http://127.0.0.1:{closed}/{ACCOUNT}/away?region={REGION}");
    absence_is_retried(&app, &app_id, &url, key()).await;
}

async fn aws_endpoints_are_checked_when_saved(engine: Engine) {
    let app = TestApp::spawn(engine).await;
    let app_id = app.create_app().await;
    let refused = |body: Value| refused_when_saved(&app, &app_id, body);
    let said = refused(json!({"url": "sqs://sqs.example.com/123456789012/orders"})).await;
    assert!(said.contains("region"), "{said}");
    let said = refused(json!({"url": "sqs://sqs.us-east-1.amazonaws.com/orders"})).await;
    assert!(said.contains("account"), "{said}");
    let said = refused(json!({"url": "sns://sns.us-east-1.amazonaws.com/?topic=orders"})).await;
    assert!(said.contains("ARN"), "{said}");
    let said = refused(json!({"url": "eventbridge://events.us-east-1.amazonaws.com/"})).await;
    assert!(said.contains("?bus="), "{said}");
    // Nothing was made.
    assert_eq!(
        app.get(&format!("/v1/apps/{app_id}/endpoints")).await["data"],
        json!([])
    );
    // Plain HTTP is for a local stand-in: refused where private destinations are.
    let guarded = TestApp::spawn_with(engine, |c| c.allow_private_destinations = false).await;
    let guarded_app = guarded.create_app().await;
    let problem = guarded
        .call(
            Method::POST,
            &format!("/v1/apps/{guarded_app}/endpoints"),
            Some(&json!({"url": "sqs+http://stand-in.example.com/123456789012/orders?region=us-east-1"})),
            422,
        )
        .await;
    assert!(
        problem["detail"].as_str().unwrap().contains("sqs://"),
        "{problem}"
    );
}
