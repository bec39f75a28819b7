//! Redis Streams (`redis://` endpoints, `hookline_core::broker::RedisStream`).
//!
//! A session connects, authenticates with the endpoint's `basic` auth if it
//! has one (`AUTH user password`) and selects the URL's database; each
//! message is one entry:
//!
//! ```text
//! XADD <stream> MAXLEN ~ <maxlen> * content-type application/json webhook-id <id>
//!      webhook-timestamp <ts> webhook-signature <sig> [ordering fields] body <envelope>
//! ```
//!
//! The entry's id is the attempt's response. An answer that will not change
//! (a refused login, a key that is not a stream, a protocol error) is dead at
//! once with Redis's words; Redis busy, loading, read-only or out of memory is
//! retried. Speaking RESP (Redis's protocol) takes a page, so it is written
//! here rather than taken from a client crate.

use hookline_core::broker::RedisStream;
use hookline_core::model::TransportError;
use hookline_core::outbound_auth::Basic;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{Failure, Message};

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

/// A connection, logged in, with its database selected.
pub(crate) struct Session {
    stream: BufReader<TcpStream>,
}

impl super::Session for Session {
    type Target = RedisStream;

    async fn open(
        stream: TcpStream,
        target: &RedisStream,
        auth: Option<&Basic>,
    ) -> Result<Self, Failure> {
        let mut session = Self {
            stream: BufReader::new(stream),
        };
        if let Some(basic) = auth {
            session
                .command(&[
                    b"AUTH",
                    basic.username.as_bytes(),
                    basic.password.as_bytes(),
                ])
                .await?;
        }
        if target.db != 0 {
            session
                .command(&[b"SELECT", target.db.to_string().as_bytes()])
                .await?;
        }
        Ok(session)
    }

    async fn publish(
        &mut self,
        target: &RedisStream,
        message: &Message<'_>,
    ) -> Result<String, Failure> {
        let maxlen = target.maxlen.to_string();
        let mut parts: Vec<&[u8]> = vec![
            b"XADD",
            target.stream.as_bytes(),
            b"MAXLEN",
            b"~",
            maxlen.as_bytes(),
            b"*",
        ];
        for (name, value) in &message.headers {
            parts.extend([name.as_bytes(), value.as_bytes()]);
        }
        parts.extend([&b"body"[..], message.body]);
        let id = self.command(&parts).await?;
        Ok(format!("XADD {id}"))
    }
}

/// The longest reply line read (an entry id, an error's words).
const MAX_LINE: usize = 4096;

impl Session {
    /// Sends one command; its reply as text, or why it failed.
    async fn command(&mut self, parts: &[&[u8]]) -> Result<String, Failure> {
        let mut request = format!("*{}\r\n", parts.len()).into_bytes();
        for part in parts {
            request.extend_from_slice(format!("${}\r\n", part.len()).as_bytes());
            request.extend_from_slice(part);
            request.extend_from_slice(b"\r\n");
        }
        let lost = Failure::lost;
        self.stream
            .get_mut()
            .write_all(&request)
            .await
            .map_err(lost)?;
        let line = self.line().await?;
        // The first byte says what the reply is (a server may send anything).
        let rest = line.get(1..).unwrap_or_default();
        match line.as_bytes().first() {
            Some(b'+' | b':') => Ok(rest.to_owned()),
            Some(b'$') => {
                let length: usize = rest
                    .parse()
                    .ok()
                    .filter(|length| *length <= MAX_LINE)
                    .ok_or_else(|| Failure::Refused(format!("not a Redis answer: {line:?}")))?;
                let mut value = vec![0; length + 2];
                self.stream.read_exact(&mut value).await.map_err(lost)?;
                value.truncate(length);
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

    /// One reply line, without its CRLF. A line longer than [`MAX_LINE`]
    /// is no answer to these commands (and would leave the rest unread).
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
        if line.last() != Some(&b'\n') {
            return Err(Failure::Refused(format!(
                "not a Redis answer: a line over {MAX_LINE} bytes"
            )));
        }
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        Ok(String::from_utf8_lossy(&line).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{testing, Session as _};
    use super::*;

    /// Publishes one message to a server that answers `reply`.
    async fn publish_to(reply: &'static [u8]) -> Result<String, Failure> {
        let port = testing::server(b"", vec![reply]).await;
        let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        let target =
            RedisStream::of(&url::Url::parse("redis://127.0.0.1/?stream=s").unwrap()).unwrap();
        let mut session = Session::open(stream, &target, None).await?;
        let message = Message {
            delivery_id: "dlv_1",
            timestamp: 1,
            ordering_key: None,
            headers: vec![("webhook-id", "msg_1".into())],
            body: b"{}",
        };
        session.publish(&target, &message).await
    }

    #[tokio::test]
    async fn what_redis_answers_decides_the_attempt() {
        let added = publish_to(b"$15\r\n1733500000000-0\r\n").await;
        assert_eq!(added.unwrap(), "XADD 1733500000000-0");
        let refused = publish_to(b"-WRONGTYPE Operation against a key\r\n").await;
        assert!(matches!(refused, Err(Failure::Refused(_))), "{refused:?}");
        let loading = publish_to(b"-LOADING Redis is loading\r\n").await;
        assert!(
            matches!(loading, Err(Failure::Passing(TransportError::Io, _))),
            "{loading:?}"
        );
        let full = publish_to(b"-ERR max number of clients reached\r\n").await;
        assert!(
            matches!(full, Err(Failure::Passing(TransportError::Io, _))),
            "{full:?}"
        );
        let gone = publish_to(b"").await;
        assert!(matches!(gone, Err(Failure::Lost(_))), "{gone:?}");
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
            match publish_to(reply).await {
                Err(Failure::Refused(said)) => {
                    assert!(said.starts_with("not a Redis answer"), "{said}")
                }
                other => panic!("{reply:?}: {other:?}"),
            }
        }
    }
}
