//! Amazon SQS, SNS and EventBridge (`sqs://`, `sns://`, `eventbridge://` endpoints,
//! `hookline_core::broker::AwsTarget`): one API call per message, over the
//! dispatcher's HTTP client (so through the guarded resolver and the egress
//! proxy, as any HTTP delivery), signed with Signature Version 4
//! (`hookline_core::sigv4`) with the endpoint's `auth.basic` as the access
//! key id and secret.
//!
//! - **SQS**: `SendMessage` (AWS's JSON protocol). The body is the envelope;
//!   the webhook headers are string message attributes. A FIFO queue's
//!   message group is the event's ordering key (`broker::message_group`),
//!   and its deduplication id the delivery's id.
//! - **SNS**: `Publish` (its query protocol), alike: the envelope is the
//!   message, the headers its attributes, and the same for a FIFO topic.
//! - **EventBridge**: `PutEvents` of one entry (JSON 1.1): its detail type
//!   is the event's type, its detail `{"headers": …, "body": "<envelope>"}`
//!   (the body as the exact string signed).
//!
//! What AWS answers decides the attempt: a message id is delivered; a
//! throttling error, a 5xx or no answer is retried; any other error (a
//! refused key or signature, no such queue or topic, a message too large) is
//! dead, with AWS's code and words.

use hookline_core::broker::{AwsService, AwsTarget};
use hookline_core::model::TransportError;
use hookline_core::outbound_auth::Basic;
use hookline_core::sigv4;

use super::{Failure, Message};
use crate::sender::{error_chain, transport_error_kind};

/// The most of AWS's answer read.
const MAX_ANSWER: usize = 64 * 1024;

/// Sends `message` to `target` with `client`, signed at `message.timestamp`.
pub(crate) async fn send(
    client: &reqwest::Client,
    target: &AwsTarget,
    auth: Option<&Basic>,
    message: &Message<'_>,
) -> Result<String, Failure> {
    let Some(key) = auth else {
        return Err(Failure::Refused(
            "an AWS endpoint signs with an access key: set auth.basic to its id and secret".into(),
        ));
    };
    let (content_type, target_header, body) = match &target.service {
        AwsService::Sqs { queue_url, fifo } => (
            "application/x-amz-json-1.0",
            Some("AmazonSQS.SendMessage"),
            sqs_body(queue_url, *fifo, message),
        ),
        AwsService::Sns { topic_arn, fifo } => (
            "application/x-www-form-urlencoded; charset=utf-8",
            None,
            sns_body(topic_arn, *fifo, message),
        ),
        AwsService::EventBridge { bus, source } => (
            "application/x-amz-json-1.1",
            Some("AWSEvents.PutEvents"),
            eventbridge_body(bus, source, message),
        ),
    };
    let host = target.host_header();
    let extra: Vec<(&str, &str)> = target_header
        .map(|value| vec![("x-amz-target", value)])
        .unwrap_or_default();
    let signed = sigv4::sign(
        sigv4::Credentials {
            access_key_id: &key.username,
            secret_access_key: &key.password,
        },
        sigv4::Request {
            host: &host,
            region: &target.region,
            service: target.signing_name(),
            content_type,
            headers: &extra,
            body: &body,
        },
        message.timestamp,
    );
    // SNS's query protocol answers in XML unless asked for JSON: not asked.
    let mut request = client
        .post(target.api_url())
        .header("content-type", content_type);
    for (name, value) in extra
        .iter()
        .copied()
        .chain(signed.iter().map(|(n, v)| (*n, v.as_str())))
    {
        request = request.header(name, value);
    }
    let mut response = request
        .body(body)
        .send()
        .await
        .map_err(|e| Failure::Passing(transport_error_kind(&e), error_chain(&e)))?;
    let status = response.status().as_u16();
    let mut answer = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| Failure::Lost(e.to_string()))?
    {
        answer.extend_from_slice(&chunk);
        if answer.len() > MAX_ANSWER {
            break;
        }
    }
    let answer = String::from_utf8_lossy(&answer);
    decide(&target.service, status, &answer)
}

/// SQS `SendMessage`, in AWS's JSON protocol.
fn sqs_body(queue_url: &str, fifo: bool, message: &Message<'_>) -> Vec<u8> {
    let attributes: serde_json::Map<String, serde_json::Value> = message
        .headers
        .iter()
        .map(|(name, value)| {
            (
                (*name).to_owned(),
                serde_json::json!({"DataType": "String", "StringValue": value}),
            )
        })
        .collect();
    let mut body = serde_json::json!({
        "QueueUrl": queue_url,
        "MessageBody": String::from_utf8_lossy(message.body),
        "MessageAttributes": attributes,
    });
    if fifo {
        body["MessageGroupId"] = message.group().into();
        body["MessageDeduplicationId"] = message.delivery_id.into();
    }
    serde_json::to_vec(&body).expect("a JSON value always serializes")
}

/// SNS `Publish`, in its query protocol.
fn sns_body(topic_arn: &str, fifo: bool, message: &Message<'_>) -> Vec<u8> {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    form.append_pair("Action", "Publish")
        .append_pair("Version", "2010-03-31")
        .append_pair("TopicArn", topic_arn)
        .append_pair("Message", &String::from_utf8_lossy(message.body));
    for (n, (name, value)) in message.headers.iter().enumerate() {
        let entry = format!("MessageAttributes.entry.{}", n + 1);
        form.append_pair(&format!("{entry}.Name"), name)
            .append_pair(&format!("{entry}.Value.DataType"), "String")
            .append_pair(&format!("{entry}.Value.StringValue"), value);
    }
    if fifo {
        form.append_pair("MessageGroupId", &message.group())
            .append_pair("MessageDeduplicationId", message.delivery_id);
    }
    form.finish().into_bytes()
}

/// EventBridge `PutEvents` of one entry: its detail type the event's type
/// (for rules to match), its detail the headers and the body as sent (the
/// body a string, the exact bytes signed, since EventBridge re-serializes
/// JSON objects).
fn eventbridge_body(bus: &str, source: &str, message: &Message<'_>) -> Vec<u8> {
    let event_type = serde_json::from_slice::<serde_json::Value>(message.body)
        .ok()
        .and_then(|envelope| envelope["type"].as_str().map(str::to_owned))
        .unwrap_or_else(|| "webhook".to_owned());
    // EventBridge takes a detail type of at most 128 characters; an event
    // type may be longer (its first 128 still route).
    let event_type: String = event_type.chars().take(128).collect();
    let headers: serde_json::Map<String, serde_json::Value> = message
        .headers
        .iter()
        .map(|(name, value)| ((*name).to_owned(), value.as_ref().into()))
        .collect();
    let detail = serde_json::json!({
        "headers": headers,
        "body": String::from_utf8_lossy(message.body),
    });
    let body = serde_json::json!({
        "Entries": [{
            "EventBusName": bus,
            "Source": source,
            "DetailType": event_type,
            "Detail": detail.to_string(),
        }]
    });
    serde_json::to_vec(&body).expect("a JSON value always serializes")
}

/// Error codes that say AWS cannot take the message now, but will.
const PASSING: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
    "KMSThrottling",
    "KmsThrottled",
    "InternalException",
];

/// What an answer says: the message's id, or why not.
fn decide(service: &AwsService, status: u16, answer: &str) -> Result<String, Failure> {
    let json = || serde_json::from_str::<serde_json::Value>(answer).ok();
    let (name, id) = match service {
        AwsService::Sqs { .. } => (
            "SQS message",
            json().and_then(|v| v["MessageId"].as_str().map(str::to_owned)),
        ),
        AwsService::Sns { .. } => ("SNS message", element(answer, "MessageId")),
        AwsService::EventBridge { .. } => {
            let entry = json().map(|v| v["Entries"][0].clone()).unwrap_or_default();
            // A 200 can still say the entry failed, with its own code.
            if let Some(code) = entry["ErrorCode"].as_str() {
                let said = format!(
                    "EventBridge answered {status} {code}: {}",
                    entry["ErrorMessage"].as_str().unwrap_or_default()
                );
                return Err(match PASSING.contains(&code) {
                    true => Failure::Passing(TransportError::Io, said),
                    false => Failure::Refused(said),
                });
            }
            (
                "EventBridge event",
                entry["EventId"].as_str().map(str::to_owned),
            )
        }
    };
    if (200..300).contains(&status) {
        return id.map(|id| format!("{name} {id}")).ok_or_else(|| {
            Failure::Refused(format!(
                "AWS answered {status} without an id ({name}): {}",
                excerpt(answer)
            ))
        });
    }
    // The error's code: JSON's `__type` (after any `#`), or XML's <Code>.
    let (code, words) = match serde_json::from_str::<serde_json::Value>(answer) {
        Ok(json) => (
            json["__type"]
                .as_str()
                .or(json["code"].as_str())
                .map(|t| t.rsplit('#').next().unwrap_or(t).to_owned()),
            json["message"]
                .as_str()
                .or(json["Message"].as_str())
                .map(str::to_owned),
        ),
        Err(_) => (element(answer, "Code"), element(answer, "Message")),
    };
    let code = code.unwrap_or_default();
    let service = name.split(' ').next().unwrap_or(name);
    let said = format!(
        "{service} answered {status} {code}: {}",
        words.unwrap_or_else(|| excerpt(answer))
    );
    if status >= 500 || status == 429 || PASSING.contains(&code.as_str()) {
        Err(Failure::Passing(TransportError::Io, said))
    } else {
        Err(Failure::Refused(said))
    }
}

/// The text of the first `<name>…</name>` in an XML answer.
fn element(xml: &str, name: &str) -> Option<String> {
    let start = xml.find(&format!("<{name}>"))? + name.len() + 2;
    let end = start + xml[start..].find(&format!("</{name}>"))?;
    Some(xml[start..end].trim().to_owned())
}

fn excerpt(answer: &str) -> String {
    answer.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqs() -> AwsService {
        AwsService::Sqs {
            queue_url: "https://sqs.us-east-1.amazonaws.com/123456789012/q".into(),
            fifo: false,
        }
    }

    fn sns() -> AwsService {
        AwsService::Sns {
            topic_arn: "arn:aws:sns:us-east-1:123456789012:t".into(),
            fifo: false,
        }
    }

    #[test]
    fn what_aws_answers_decides_the_attempt() {
        let sent = decide(
            &sqs(),
            200,
            r#"{"MessageId":"5fea7756","MD5OfMessageBody":"x"}"#,
        );
        assert_eq!(sent.unwrap(), "SQS message 5fea7756");
        let published = decide(
            &sns(),
            200,
            "<PublishResponse><PublishResult><MessageId>94f20ce6</MessageId></PublishResult></PublishResponse>",
        );
        assert_eq!(published.unwrap(), "SNS message 94f20ce6");
        let missing = decide(
            &sqs(),
            400,
            r#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}"#,
        );
        assert!(
            matches!(&missing, Err(Failure::Refused(said)) if said.contains("QueueDoesNotExist") && said.contains("does not exist")),
            "{missing:?}"
        );
        let throttled = decide(
            &sns(),
            400,
            "<ErrorResponse><Error><Type>Sender</Type><Code>Throttling</Code><Message>Rate exceeded</Message></Error></ErrorResponse>",
        );
        assert!(
            matches!(throttled, Err(Failure::Passing(TransportError::Io, _))),
            "{throttled:?}"
        );
        let refused_key = decide(
            &sns(),
            403,
            "<ErrorResponse><Error><Code>InvalidClientTokenId</Code><Message>The security token included in the request is invalid.</Message></Error></ErrorResponse>",
        );
        assert!(
            matches!(refused_key, Err(Failure::Refused(_))),
            "{refused_key:?}"
        );
        assert!(matches!(decide(&sqs(), 503, ""), Err(Failure::Passing(..))));
        let bus = AwsService::EventBridge {
            bus: "b".into(),
            source: "hookline".into(),
        };
        let put = decide(
            &bus,
            200,
            r#"{"FailedEntryCount":0,"Entries":[{"EventId":"e1"}]}"#,
        );
        assert_eq!(put.unwrap(), "EventBridge event e1");
        let throttled_entry = decide(
            &bus,
            200,
            r#"{"FailedEntryCount":1,"Entries":[{"ErrorCode":"ThrottlingException","ErrorMessage":"Rate exceeded"}]}"#,
        );
        assert!(
            matches!(throttled_entry, Err(Failure::Passing(..))),
            "{throttled_entry:?}"
        );
        let refused_entry = decide(
            &bus,
            200,
            r#"{"FailedEntryCount":1,"Entries":[{"ErrorCode":"MalformedDetail","ErrorMessage":"Detail is malformed."}]}"#,
        );
        assert!(
            matches!(refused_entry, Err(Failure::Refused(_))),
            "{refused_entry:?}"
        );
        assert!(matches!(
            decide(&sqs(), 200, "{}"),
            Err(Failure::Refused(_))
        ));
    }

    #[test]
    fn a_fifo_message_is_grouped_by_its_ordering_key_and_deduplicated_by_its_delivery() {
        let message = Message {
            delivery_id: "dlv_1",
            timestamp: 1,
            ordering_key: Some("order-42"),
            headers: vec![("webhook-id", "msg_1".into())],
            body: br#"{"type":"a"}"#,
        };
        let body: serde_json::Value =
            serde_json::from_slice(&sqs_body("q", true, &message)).unwrap();
        assert_eq!(body["MessageGroupId"], "order-42");
        assert_eq!(body["MessageDeduplicationId"], "dlv_1");
        assert_eq!(body["MessageBody"], r#"{"type":"a"}"#);
        assert_eq!(
            body["MessageAttributes"]["webhook-id"],
            serde_json::json!({"DataType": "String", "StringValue": "msg_1"})
        );
        let form = String::from_utf8(sns_body("arn", true, &message)).unwrap();
        assert!(
            form.contains("MessageAttributes.entry.1.Name=webhook-id"),
            "{form}"
        );
        assert!(form.contains("MessageGroupId=order-42"), "{form}");
        let unordered = Message {
            ordering_key: None,
            ..message
        };
        assert_eq!(unordered.group(), "hookline");
    }
}
