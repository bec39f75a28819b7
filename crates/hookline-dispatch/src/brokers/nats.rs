//! NATS JetStream (`nats://` endpoints, `hookline_core::broker::NatsSubject`).
//!
//! A session reads the server's `INFO`, says `CONNECT` (with headers and "no
//! responders" on, and the endpoint's `basic` auth as user and password if it
//! has one), checks the login with a `PING`, and subscribes to an inbox of its
//! own. Each message is one `HPUB` to the endpoint's subject with a reply
//! subject in that inbox, and the webhook headers as NATS headers, plus
//! `Nats-Msg-Id: <delivery id>` so JetStream's duplicate window drops a
//! retry of a message it already stored. What the stream that captures the
//! subject acknowledges decides the attempt:
//! - `{"stream": S, "seq": N}`: delivered (`JetStream S seq N`);
//! - "no responders" (no stream captures the subject), a refused login or
//!   permission, a message over the server's `max_payload`, a JetStream
//!   error of 4xx: dead, with NATS's words;
//! - a JetStream error of 5xx (no quorum, unavailable), the server away: retried.
//!
//! The text protocol takes a page, so it is written here rather than taken
//! from a client crate.

use hookline_core::broker::NatsSubject;
use hookline_core::model::TransportError;
use hookline_core::outbound_auth::Basic;
use serde::Deserialize;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{Failure, Message};

/// A connection, logged in and subscribed to its inbox.
pub(crate) struct Session {
    stream: BufReader<TcpStream>,
    /// This session's reply subjects are `<inbox>.<n>`.
    inbox: String,
    next: u64,
    /// The largest message the server takes (its `INFO` says).
    max_payload: usize,
}

/// What the server's `INFO` says that matters here.
#[derive(Deserialize)]
struct Info {
    #[serde(default)]
    headers: bool,
    #[serde(default)]
    max_payload: usize,
    #[serde(default)]
    tls_required: bool,
}

/// A JetStream publish acknowledgement.
#[derive(Deserialize)]
struct Ack {
    stream: Option<String>,
    seq: Option<u64>,
    #[serde(default)]
    duplicate: bool,
    error: Option<AckError>,
}

#[derive(Deserialize)]
struct AckError {
    code: u16,
    #[serde(default)]
    description: String,
}

/// The longest control line read (`INFO` can be long; a reply's line is short).
const MAX_LINE: usize = 64 * 1024;

impl super::Session for Session {
    type Target = NatsSubject;

    async fn open(
        stream: TcpStream,
        _target: &NatsSubject,
        auth: Option<&Basic>,
    ) -> Result<Self, Failure> {
        let mut session = Self {
            stream: BufReader::new(stream),
            inbox: format!("_INBOX.{}", ulid::Ulid::new()),
            next: 0,
            max_payload: 0,
        };
        let line = session.line().await?;
        let info: Info = line
            .strip_prefix("INFO ")
            .and_then(|json| serde_json::from_str(json).ok())
            .ok_or_else(|| Failure::Refused(format!("not a NATS server: {line:?}")))?;
        if info.tls_required {
            return Err(Failure::Refused(
                "the NATS server requires TLS, which nats:// endpoints do not speak".into(),
            ));
        }
        if !info.headers {
            return Err(Failure::Refused(
                "the NATS server does not take headers (NATS 2.2 or later does)".into(),
            ));
        }
        session.max_payload = info.max_payload;
        let mut connect = serde_json::json!({
            "verbose": false,
            "pedantic": false,
            "headers": true,
            "no_responders": true,
            "lang": "rust",
            "version": env!("CARGO_PKG_VERSION"),
            "name": "hookline",
        });
        if let Some(basic) = auth {
            connect["user"] = basic.username.clone().into();
            connect["pass"] = basic.password.clone().into();
        }
        let hello = format!("CONNECT {connect}\r\nSUB {}.* 1\r\nPING\r\n", session.inbox);
        session.write(hello.as_bytes()).await?;
        // The login and the subscription are checked by the time the PING is answered.
        loop {
            match session.line().await?.as_str() {
                "PONG" => return Ok(session),
                "+OK" => {}
                line if line.starts_with("INFO ") => {}
                line => return Err(error_line(line)),
            }
        }
    }

    async fn publish(
        &mut self,
        target: &NatsSubject,
        message: &Message<'_>,
    ) -> Result<String, Failure> {
        // "No responders" also answers while a stream elects its leader or
        // recovers after a restart: asked again twice, 250 ms apart (as the
        // NATS clients do), before it means that no stream captures the subject.
        let mut tries = 0;
        loop {
            match self.publish_once(target, message).await {
                Err(Failure::Refused(said)) if said.contains(NO_RESPONDERS) && tries < 2 => {
                    tries += 1;
                    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                }
                answer => return answer,
            }
        }
    }
}

/// How a refusal for want of a stream says so.
const NO_RESPONDERS: &str = "(NATS: no responders)";

impl Session {
    /// One `HPUB` and the reply to it.
    async fn publish_once(
        &mut self,
        target: &NatsSubject,
        message: &Message<'_>,
    ) -> Result<String, Failure> {
        let mut headers = String::from("NATS/1.0\r\n");
        for (name, value) in &message.headers {
            headers.push_str(&format!("{name}: {value}\r\n"));
        }
        headers.push_str(&format!("Nats-Msg-Id: {}\r\n\r\n", message.delivery_id));
        let total = headers.len() + message.body.len();
        if self.max_payload > 0 && total > self.max_payload {
            return Err(Failure::Refused(format!(
                "the message is {total} bytes with its headers; the NATS server takes at most {} (max_payload)",
                self.max_payload
            )));
        }
        self.next += 1;
        let reply = format!("{}.{}", self.inbox, self.next);
        let mut request = format!(
            "HPUB {} {reply} {} {total}\r\n{headers}",
            target.subject,
            headers.len()
        )
        .into_bytes();
        request.extend_from_slice(message.body);
        request.extend_from_slice(b"\r\n");
        self.write(&request).await?;
        loop {
            let line = self.line().await?;
            let mut words = line.split(' ');
            match words.next().unwrap_or_default() {
                "PING" => self.write(b"PONG\r\n").await?,
                "PONG" | "+OK" | "INFO" => {}
                "MSG" | "HMSG" => {
                    let words: Vec<&str> = words.collect();
                    let (subject, sizes) = match (line.starts_with("HMSG"), words.as_slice()) {
                        (false, [subject, _sid, total]) => (*subject, (None, *total)),
                        (false, [subject, _sid, _reply, total]) => (*subject, (None, *total)),
                        (true, [subject, _sid, header, total]) => {
                            (*subject, (Some(*header), *total))
                        }
                        (true, [subject, _sid, _reply, header, total]) => {
                            (*subject, (Some(*header), *total))
                        }
                        _ => return Err(Failure::Refused(format!("not a NATS message: {line:?}"))),
                    };
                    let size = |n: &str| {
                        n.parse::<usize>()
                            .ok()
                            .filter(|n| *n <= MAX_LINE)
                            .ok_or_else(|| {
                                Failure::Refused(format!("not a NATS message: {line:?}"))
                            })
                    };
                    let (header_size, total) = (sizes.0.map(size).transpose()?, size(sizes.1)?);
                    let mut payload = vec![0; total + 2];
                    self.stream
                        .read_exact(&mut payload)
                        .await
                        .map_err(Failure::lost)?;
                    payload.truncate(total);
                    // A late answer to an earlier message of this session.
                    if subject != reply {
                        continue;
                    }
                    let header_size = header_size.unwrap_or(0).min(total);
                    let (head, body) = payload.split_at(header_size);
                    return acknowledgement(&target.subject, head, body);
                }
                _ => return Err(error_line(&line)),
            }
        }
    }
}

/// What a reply to a publish says: the stream's acknowledgement, or why not.
fn acknowledgement(subject: &str, head: &[u8], body: &[u8]) -> Result<String, Failure> {
    // A status in the headers: `NATS/1.0 503` is "no responders".
    let status = String::from_utf8_lossy(head.split(|b| *b == b'\r').next().unwrap_or_default())
        .trim()
        .to_owned();
    if status.starts_with("NATS/1.0 503") {
        return Err(Failure::Refused(format!(
            "no JetStream stream captures the subject {subject} {NO_RESPONDERS}"
        )));
    }
    let ack: Ack = serde_json::from_slice(body).map_err(|_| {
        Failure::Refused(format!(
            "not a JetStream acknowledgement: {:?}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ))
    })?;
    match (ack.error, ack.stream, ack.seq) {
        (Some(error), ..) => {
            let said = format!("JetStream answered {}: {}", error.code, error.description);
            if error.code >= 500 || error.code == 429 || error.code == 408 {
                Err(Failure::Passing(TransportError::Io, said))
            } else {
                Err(Failure::Refused(said))
            }
        }
        (None, Some(stream), Some(seq)) => Ok(match ack.duplicate {
            true => format!("JetStream {stream} seq {seq} (a duplicate, stored before)"),
            false => format!("JetStream {stream} seq {seq}"),
        }),
        _ => Err(Failure::Refused(format!(
            "not a JetStream acknowledgement: {:?}",
            String::from_utf8_lossy(&body[..body.len().min(200)])
        ))),
    }
}

/// A `-ERR` (or anything else unexpected) from the server.
fn error_line(line: &str) -> Failure {
    let Some(error) = line.strip_prefix("-ERR ") else {
        return Failure::Refused(format!("not a NATS answer: {line:?}"));
    };
    let error = error.trim_matches('\'');
    let said = format!("NATS answered: {error}");
    let lower = error.to_ascii_lowercase();
    // The server closes the connection after saying so.
    if lower.contains("stale connection") {
        return Failure::Lost(said);
    }
    // Login, permissions, size and protocol errors will not change.
    if lower.contains("authorization")
        || lower.contains("authentication")
        || lower.contains("permissions")
        || lower.contains("maximum payload")
        || lower.contains("unknown protocol")
        || lower.contains("invalid")
    {
        Failure::Refused(said)
    } else {
        Failure::Passing(TransportError::Io, said)
    }
}

impl Session {
    async fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.stream
            .get_mut()
            .write_all(bytes)
            .await
            .map_err(Failure::lost)
    }

    /// One control line, without its CRLF.
    async fn line(&mut self) -> Result<String, Failure> {
        let mut line = Vec::new();
        let read = (&mut self.stream)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await
            .map_err(Failure::lost)?;
        if read == 0 {
            return Err(Failure::lost(std::io::ErrorKind::UnexpectedEof.into()));
        }
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_jetstream_acknowledges_decides_the_attempt() {
        let stored = acknowledgement("a", b"", br#"{"stream":"ORDERS","seq":41}"#);
        assert_eq!(stored.unwrap(), "JetStream ORDERS seq 41");
        let again = acknowledgement(
            "a",
            b"",
            br#"{"stream":"ORDERS","seq":41,"duplicate":true}"#,
        );
        assert!(again.unwrap().contains("duplicate"));
        let nobody = acknowledgement("acme.orders", b"NATS/1.0 503\r\n\r\n", b"");
        assert!(
            matches!(&nobody, Err(Failure::Refused(said)) if said.contains("acme.orders")),
            "{nobody:?}"
        );
        let too_big = acknowledgement(
            "a",
            b"",
            br#"{"error":{"code":400,"err_code":10054,"description":"message size exceeds maximum allowed"}}"#,
        );
        assert!(matches!(too_big, Err(Failure::Refused(_))), "{too_big:?}");
        let no_quorum = acknowledgement(
            "a",
            b"",
            br#"{"error":{"code":503,"description":"JetStream system temporarily unavailable"}}"#,
        );
        assert!(
            matches!(no_quorum, Err(Failure::Passing(TransportError::Io, _))),
            "{no_quorum:?}"
        );
        let garbage = acknowledgement("a", b"", b"\xff\xfe");
        assert!(matches!(garbage, Err(Failure::Refused(_))), "{garbage:?}");
    }

    #[test]
    fn server_errors_that_will_not_change_are_refusals() {
        for line in [
            "-ERR 'Authorization Violation'",
            "-ERR 'Permissions Violation for Publish to \"a\"'",
            "-ERR 'Maximum Payload Violation'",
            "HTTP/1.1 200 OK",
        ] {
            assert!(matches!(error_line(line), Failure::Refused(_)), "{line}");
        }
        assert!(matches!(
            error_line("-ERR 'Stale Connection'"),
            Failure::Lost(_)
        ));
        assert!(matches!(
            error_line("-ERR 'Slow Consumer'"),
            Failure::Passing(TransportError::Io, _)
        ));
    }
}
