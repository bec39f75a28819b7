//! Transformations: what an endpoint is sent instead of the envelope.
//!
//! An endpoint's `transform` is one of
//! - a **preset**, a chat's incoming-webhook format ([`chat::Format`]:
//!   `slack`, `teams`, `discord`): the event told as a [`chat::Message`]
//!   ([`notify::message`]), as customer notifications are; or
//! - a **jq program**, run on [`input`] in the sandbox
//!   (`hookline_transform`); its one value is read by [`read_output`].
//!
//! A program is never spelled as a preset's name: `slack` alone would call an
//! undefined filter. So one text column holds either ([`Transform::parse`]).
//!
//! Either way the body is what is signed and sent, and what the attempt log
//! shows.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::Value;

use crate::chat::Format;
use crate::custom_headers;
use crate::destination;

/// The longest program, in bytes.
pub const MAX_PROGRAM_BYTES: usize = 16 * 1024;

/// An endpoint's transform.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Transform {
    Preset(Format),
    Program(Arc<str>),
}

impl Transform {
    /// A preset's name, or a program's text.
    pub fn parse(text: &str) -> Transform {
        match Format::parse(text) {
            Some(format) => Transform::Preset(format),
            None => Transform::Program(text.into()),
        }
    }

    /// As stored and shown: a preset's name, or the program.
    pub fn as_str(&self) -> &str {
        match self {
            Transform::Preset(format) => format.as_str(),
            Transform::Program(program) => program,
        }
    }
}

/// What a program learns of its endpoint.
#[derive(Debug, Clone, Copy)]
pub struct EndpointFacts<'a> {
    pub id: &'a str,
    pub url: &'a str,
    pub description: &'a str,
}

/// A program's input for one delivery, as JSON text:
/// `{event_type, event_id, seq, timestamp, payload, endpoint: {id, url, description}}`,
/// read from the delivery's envelope (`{type, timestamp, data}`); `seq` is the
/// delivery's number among its endpoint's (`null` in a preview).
pub fn input(envelope: &[u8], event_id: &str, seq: Option<u64>, endpoint: EndpointFacts) -> String {
    /// The envelope's parts as they are (the payload is not parsed into a
    /// value only to be written out again: it is most of the bytes).
    #[derive(serde::Deserialize)]
    struct Parts<'a> {
        #[serde(rename = "type", borrow)]
        event_type: Option<&'a RawValue>,
        #[serde(borrow)]
        timestamp: Option<&'a RawValue>,
        #[serde(borrow)]
        data: Option<&'a RawValue>,
    }
    let parts = serde_json::from_slice::<Parts>(envelope).ok();
    fn text(part: Option<&RawValue>) -> &str {
        part.map_or("null", RawValue::get)
    }
    let (event_type, timestamp, data) = match &parts {
        Some(p) => (text(p.event_type), text(p.timestamp), text(p.data)),
        None => ("null", "null", "null"),
    };
    let facts = serde_json::json!({
        "id": endpoint.id,
        "url": endpoint.url,
        "description": endpoint.description,
    });
    format!(
        r#"{{"event_type":{},"event_id":{},"seq":{},"timestamp":{},"payload":{},"endpoint":{facts}}}"#,
        event_type,
        Value::from(event_id),
        Value::from(seq),
        timestamp,
        data,
    )
}

/// What a delivery becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// `null` (or no value): nothing is sent; the delivery is done, skipped.
    Skip,
    Send(Request),
}

/// What is sent in place of the envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// JSON.
    pub body: Vec<u8>,
    /// Added to the endpoint's own headers (checked as they are).
    pub headers: Vec<(String, String)>,
    /// Instead of the endpoint's URL (checked as it is, and by the guard).
    pub url: Option<String>,
}

/// What a preset sends for `envelope`: the event told in its chat's format.
pub fn preset(format: Format, envelope: &[u8]) -> Request {
    Request {
        body: serde_json::to_vec(&format.body(&crate::notify::message(envelope)))
            .expect("a JSON value always serializes"),
        headers: Vec::new(),
        url: None,
    }
}

/// Where a program's one value is read as a request with a URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An HTTP endpoint: `{body, headers, url}` may set all three.
    Http,
    /// A broker: the value is the message; only `body` may be set.
    Broker,
}

/// Reads what a program gave (the JSON texts of its first two values): one
/// value is the body, or `{body, headers, url}` (an object of those keys
/// only, `body` among them); `null` or none skips the delivery. Anything else
/// is what is wrong with it, for the attempt log.
pub fn read_output(outputs: &[String], kind: Kind, allow_private: bool) -> Result<Output, String> {
    let text = match outputs {
        [] => return Ok(Output::Skip),
        [one] => one,
        _ => {
            return Err(
                "it gave more than one value; a transform gives one (or null to skip)".into(),
            )
        }
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("it gave a value that is not JSON: {e}"))?;
    let fields = match &value {
        Value::Null => return Ok(Output::Skip),
        Value::Object(map)
            if map.contains_key("body")
                && map
                    .keys()
                    .all(|k| ["body", "headers", "url"].contains(&k.as_str())) =>
        {
            map
        }
        _ => {
            return Ok(Output::Send(Request {
                body: text.as_bytes().to_vec(),
                headers: Vec::new(),
                url: None,
            }))
        }
    };
    if kind == Kind::Broker && fields.len() > 1 {
        return Err("a broker's message is a body only: it has no headers or URL to set".into());
    }
    let body = match &fields["body"] {
        Value::Null => return Ok(Output::Skip),
        body => body.to_string().into_bytes(),
    };
    let headers = match fields.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(headers)) => {
            let headers = headers
                .iter()
                .map(|(name, value)| match value {
                    Value::String(value) => Ok((name.clone(), value.clone())),
                    _ => Err(format!("header {name:?} is not a string")),
                })
                .collect::<Result<Vec<_>, _>>()?;
            custom_headers::check(&headers).map_err(|e| e.to_string())?
        }
        Some(_) => return Err("headers is not an object of strings".into()),
    };
    let url = match fields.get("url") {
        None | Some(Value::Null) => None,
        Some(Value::String(url)) => {
            Some(destination::check_url(url, allow_private).map_err(|e| format!("url: {e}"))?)
        }
        Some(_) => return Err("url is not a string".into()),
    };
    Ok(Output::Send(Request { body, headers, url }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Output, String> {
        read_output(&[text.to_owned()], Kind::Http, false)
    }

    fn body(text: &str) -> Output {
        Output::Send(Request {
            body: text.as_bytes().to_vec(),
            headers: Vec::new(),
            url: None,
        })
    }

    #[test]
    fn presets_and_programs_share_one_spelling() {
        assert_eq!(Transform::parse("slack"), Transform::Preset(Format::Slack));
        assert_eq!(Transform::parse("discord").as_str(), "discord");
        let program = Transform::parse("{text: .event_type}");
        assert_eq!(program, Transform::Program("{text: .event_type}".into()));
        assert_eq!(program.as_str(), "{text: .event_type}");
    }

    #[test]
    fn the_input_names_the_event_and_the_endpoint() {
        let envelope =
            br#"{"type":"order.paid","timestamp":"2026-12-07T00:00:00Z","data":{"id":42}}"#;
        let facts = EndpointFacts {
            id: "ep_1",
            url: "https://example.com/hook",
            description: "Orders",
        };
        let text = input(envelope, "evt_1", Some(41), facts);
        assert!(!text.contains('\n'), "one line: {text}");
        let input: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            input,
            serde_json::json!({
                "event_type": "order.paid",
                "event_id": "evt_1",
                "seq": 41,
                "timestamp": "2026-12-07T00:00:00Z",
                "payload": {"id": 42},
                "endpoint": {"id": "ep_1", "url": "https://example.com/hook", "description": "Orders"},
            })
        );
        // What is not an envelope gives nulls, not an error.
        let input: Value =
            serde_json::from_str(&super::input(b"[1]", "evt_1", None, facts)).unwrap();
        assert_eq!(input["payload"], Value::Null);
        assert_eq!(input["event_id"], "evt_1");
        assert_eq!(input["seq"], Value::Null);
    }

    #[test]
    fn one_value_is_the_body_as_given() {
        assert_eq!(read(r#"{"text":"hi"}"#), Ok(body(r#"{"text":"hi"}"#)));
        assert_eq!(read("[1,2]"), Ok(body("[1,2]")));
        assert_eq!(read(r#""plain""#), Ok(body(r#""plain""#)));
        // An object with other keys beside body is a body too.
        assert_eq!(
            read(r#"{"body":1,"other":2}"#),
            Ok(body(r#"{"body":1,"other":2}"#))
        );
    }

    #[test]
    fn null_or_nothing_skips() {
        assert_eq!(read("null"), Ok(Output::Skip));
        assert_eq!(read(r#"{"body":null}"#), Ok(Output::Skip));
        assert_eq!(read_output(&[], Kind::Http, false), Ok(Output::Skip));
    }

    #[test]
    fn body_headers_and_url_are_read_and_checked() {
        assert_eq!(
            read(
                r#"{"body":{"a":1},"headers":{"X-Tenant":"t1"},"url":"https://hooks.example.com/x"}"#
            ),
            Ok(Output::Send(Request {
                body: br#"{"a":1}"#.to_vec(),
                headers: vec![("x-tenant".into(), "t1".into())],
                url: Some("https://hooks.example.com/x".into()),
            }))
        );
        let refused = [
            (
                r#"{"body":1,"headers":{"webhook-id":"x"}}"#,
                "set by Hookline",
            ),
            (r#"{"body":1,"headers":{"a":1}}"#, "not a string"),
            (r#"{"body":1,"headers":[]}"#, "not an object"),
            (r#"{"body":1,"url":"http://127.0.0.1/"}"#, "url:"),
            (r#"{"body":1,"url":"ftp://example.com/"}"#, "url:"),
            (r#"{"body":1,"url":7}"#, "not a string"),
        ];
        for (text, says) in refused {
            let error = read(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
        assert!(read_output(&["1".into(), "2".into()], Kind::Http, false)
            .unwrap_err()
            .contains("more than one value"));
        assert!(read_output(
            &[r#"{"body":1,"url":"https://a.example/"}"#.into()],
            Kind::Broker,
            false
        )
        .unwrap_err()
        .contains("body only"));
        assert_eq!(
            read_output(&[r#"{"body":{"a":1}}"#.into()], Kind::Broker, false),
            Ok(body(r#"{"a":1}"#))
        );
    }
}
