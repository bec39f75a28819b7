//! Sending one delivery to a Redis stream: the `redis://` endpoints
//! (`hookline_core::destination::RedisStream`).
//!
//! An attempt connects (to an address the destination guard allows, as for
//! HTTP), authenticates with the endpoint's `basic` auth if it has one
//! (`AUTH user password`), selects the URL's database, and adds one entry:
//!
//! ```text
//! XADD <stream> MAXLEN ~ <maxlen> * webhook-id <id> webhook-timestamp <ts>
//!      webhook-signature <sig> content-type application/json body <envelope>
//! ```
//!
//! signed exactly as an HTTP delivery is, so a consumer verifies it the same
//! way. The entry's id is the attempt's response. What Redis answers decides
//! the attempt as a status would: an entry id is delivered; an answer that
//! will not change (a refused login, a key that is not a stream, a protocol
//! error) is dead at once with Redis's words; Redis away, busy, loading,
//! read-only or out of memory, or no answer in time, is retried with backoff.
//! Speaking RESP (Redis's protocol) takes a page, so it is written here
//! rather than taken from a client crate.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hookline_core::classify::Outcome;
use hookline_core::destination::{self, RedisStream};
use hookline_core::model::TransportError;
use hookline_core::outbound_auth::Basic;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::sender::SendResult;

/// What one entry carries besides the stream's name.
pub struct Entry<'a> {
    pub id: &'a str,
    pub timestamp: i64,
    pub signature: &'a str,
    pub body: &'a [u8],
}

/// Error replies that say Redis cannot take the entry now, but will.
const PASSING: &[&str] = &[
    "LOADING",
    "BUSY",
    "TRYAGAIN",
    "MASTERDOWN",
    "READONLY",
    "OOM",
    "CLUSTERDOWN",
    "MISCONF",
    "NOREPLICAS",
];

/// An `ERR` that passes: the server is full of clients for now.
const TOO_MANY_CLIENTS: &str = "ERR max number of clients reached";

/// Adds `entry` to the stream `url` names, within `timeout`.
pub async fn send(
    url: &reqwest::Url,
    auth: Option<&Basic>,
    entry: Entry<'_>,
    allow_private: bool,
    timeout: Duration,
) -> SendResult {
    let started = Instant::now();
    let signature = Some(entry.signature.to_owned());
    let target = match RedisStream::of(url) {
        Ok(target) => target,
        Err(error) => return SendResult::rejected(error.to_string(), started),
    };
    let attempt = async {
        let mut connection = connect(&target, allow_private).await?;
        if let Some(basic) = auth {
            connection
                .command(&[
                    b"AUTH",
                    basic.username.as_bytes(),
                    basic.password.as_bytes(),
                ])
                .await?;
        }
        if target.db != 0 {
            connection
                .command(&[b"SELECT", target.db.to_string().as_bytes()])
                .await?;
        }
        let maxlen = target.maxlen.to_string();
        let timestamp = entry.timestamp.to_string();
        connection
            .command(&[
                b"XADD",
                target.stream.as_bytes(),
                b"MAXLEN",
                b"~",
                maxlen.as_bytes(),
                b"*",
                b"webhook-id",
                entry.id.as_bytes(),
                b"webhook-timestamp",
                timestamp.as_bytes(),
                b"webhook-signature",
                entry.signature.as_bytes(),
                b"content-type",
                b"application/json",
                b"body",
                entry.body,
            ])
            .await
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(entry_id)) => SendResult {
            response_body: Some(format!("XADD {entry_id}")),
            signature,
            ..SendResult::answered(Outcome::Accepted, started)
        },
        Ok(Err(Failure::Refused(said))) => SendResult {
            signature,
            ..SendResult::rejected(said, started)
        },
        Ok(Err(Failure::Passing(kind, said))) => {
            // Nothing left before a connection was made: no signature was sent.
            let sent = !matches!(
                kind,
                TransportError::Dns
                    | TransportError::Connect
                    | TransportError::DestinationForbidden
            );
            SendResult::failed(kind, said, started, signature.filter(|_| sent))
        }
        Err(_) => SendResult::failed(
            TransportError::Timeout,
            format!("Redis did not answer within {} ms", timeout.as_millis()),
            started,
            signature,
        ),
    }
}

/// Why an attempt did not add its entry.
enum Failure {
    /// An answer that will not change: dead, with Redis's words.
    Refused(String),
    /// Redis away or unable for now: retried.
    Passing(TransportError, String),
}

/// A connection to the first of the host's addresses the guard allows.
async fn connect(target: &RedisStream, allow_private: bool) -> Result<Connection, Failure> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((target.host.as_str(), target.port))
        .await
        .map_err(|e| {
            Failure::Passing(
                TransportError::Dns,
                format!("resolving {}: {e}", target.host),
            )
        })?
        .collect();
    let allowed: Vec<SocketAddr> = addresses
        .iter()
        .copied()
        .filter(|a| allow_private || destination::is_public(a.ip()))
        .collect();
    if allowed.is_empty() && !addresses.is_empty() {
        return Err(Failure::Passing(
            TransportError::DestinationForbidden,
            "the destination is a private, loopback or otherwise non-public address".into(),
        ));
    }
    let mut last = format!("{} resolves to no address", target.host);
    for address in allowed {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(Connection {
                    stream: BufReader::new(stream),
                });
            }
            Err(e) => last = format!("connecting to {address}: {e}"),
        }
    }
    Err(Failure::Passing(TransportError::Connect, last))
}

struct Connection {
    stream: BufReader<TcpStream>,
}

/// The longest reply line read (an entry id, an error's words).
const MAX_LINE: usize = 4096;

impl Connection {
    /// Sends one command; its reply as text, or why it failed.
    async fn command(&mut self, parts: &[&[u8]]) -> Result<String, Failure> {
        let mut request = format!("*{}\r\n", parts.len()).into_bytes();
        for part in parts {
            request.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
            request.extend_from_slice(part);
            request.extend_from_slice(b"\r\n");
        }
        let lost = |e: std::io::Error| {
            Failure::Passing(
                TransportError::Io,
                format!("the connection to Redis failed: {e}"),
            )
        };
        self.stream
            .get_mut()
            .write_all(&request)
            .await
            .map_err(lost)?;
        let line = self.line().await.map_err(lost)?;
        // The first byte says what the reply is (a server may send anything).
        let rest = line.get(1..).unwrap_or_default();
        match line.as_bytes().first() {
            Some(b'+' | b':') => Ok(rest.to_owned()),
            Some(b'$') => {
                let length: usize = rest
                    .parse()
                    .map_err(|_| Failure::Refused(format!("Redis answered {line:?}")))?;
                let mut value = vec![0; length.min(MAX_LINE) + 2];
                self.stream.read_exact(&mut value).await.map_err(lost)?;
                value.truncate(length.min(MAX_LINE));
                Ok(String::from_utf8_lossy(&value).into_owned())
            }
            Some(b'-') => {
                let code = rest.split(' ').next().unwrap_or_default();
                if PASSING.contains(&code) || rest.starts_with(TOO_MANY_CLIENTS) {
                    Err(Failure::Passing(
                        TransportError::Io,
                        format!("Redis answered: {rest}"),
                    ))
                } else {
                    Err(Failure::Refused(format!("Redis answered: {rest}")))
                }
            }
            _ => Err(Failure::Refused(format!("not a Redis answer: {line:?}"))),
        }
    }

    /// One reply line, without its CRLF.
    async fn line(&mut self) -> std::io::Result<String> {
        let mut line = Vec::new();
        let read = (&mut self.stream)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await?;
        if read == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
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
    use tokio::net::TcpListener;

    /// A server on 127.0.0.1 that answers the first command with `reply`.
    async fn server(reply: &'static [u8]) -> reqwest::Url {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buffer = [0; 1024];
            let _ = socket.read(&mut buffer).await;
            let _ = socket.write_all(reply).await;
        });
        reqwest::Url::parse(&format!("redis://127.0.0.1:{port}/?stream=s")).unwrap()
    }

    async fn send_to(url: &reqwest::Url) -> SendResult {
        let entry = Entry {
            id: "msg_1",
            timestamp: 1,
            signature: "v1,x",
            body: b"{}",
        };
        send(url, None, entry, true, Duration::from_secs(5)).await
    }

    #[tokio::test]
    async fn what_redis_answers_decides_the_attempt() {
        let added = send_to(&server(b"$15\r\n1733500000000-0\r\n").await).await;
        assert_eq!(added.outcome, Outcome::Accepted);
        assert_eq!(added.response_body.as_deref(), Some("XADD 1733500000000-0"));
        let refused = send_to(&server(b"-WRONGTYPE Operation against a key\r\n").await).await;
        assert_eq!(refused.outcome, Outcome::Rejected);
        let loading = send_to(&server(b"-LOADING Redis is loading\r\n").await).await;
        assert_eq!(loading.outcome, Outcome::Failed(TransportError::Io));
        let full = send_to(&server(b"-ERR max number of clients reached\r\n").await).await;
        assert_eq!(full.outcome, Outcome::Failed(TransportError::Io));
        let gone = send_to(&server(b"").await).await;
        assert_eq!(gone.outcome, Outcome::Failed(TransportError::Io));
    }

    /// A server that answers bytes no Redis would (not even UTF-8): dead,
    /// said, never a panic of the sending task.
    #[tokio::test]
    async fn a_reply_that_is_not_redis_is_refused_not_a_panic() {
        for reply in [
            &b"\xff\xfe\r\n"[..],
            b"\xc3\xa9t\xc3\xa9\r\n",
            b"HTTP/1.1 200 OK\r\n",
        ] {
            let url = server(Box::leak(reply.to_vec().into_boxed_slice())).await;
            let answer = send_to(&url).await;
            assert_eq!(answer.outcome, Outcome::Rejected, "{reply:?}");
            assert!(
                answer
                    .response_body
                    .as_deref()
                    .is_some_and(|said| said.starts_with("not a Redis answer")),
                "{answer:?}"
            );
        }
    }
}
