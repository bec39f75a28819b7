//! RabbitMQ, by AMQP 0-9-1 (`amqp://` endpoints,
//! `hookline_core::broker::AmqpExchange`).
//!
//! A session connects, logs in (`PLAIN`, with the endpoint's `basic` auth, or
//! `guest`/`guest` as AMQP URLs without credentials mean), opens the URL's
//! virtual host and one channel, and turns publisher confirms on. Each
//! message is one `basic.publish` to the exchange with the routing key,
//! mandatory and persistent, its webhook headers as AMQP headers, its
//! `message-id` the delivery's id and its content type `application/json`.
//! What the broker says next decides the attempt:
//! - `basic.ack`: delivered (`RabbitMQ confirmed, delivery tag N`);
//! - `basic.return` (no queue is bound to take it), a channel or connection
//!   closed for no such exchange, refused access, a bad virtual host or a
//!   message too large: dead, with RabbitMQ's reply code and words;
//! - `basic.nack`, `connection.blocked` (a memory or disk alarm), a closed
//!   connection: retried.
//!
//! The part of AMQP a publisher needs is a few frames, so it is written here
//! rather than taken from a client crate (which would connect on its own,
//! past the destination guard).

use hookline_core::broker::AmqpExchange;
use hookline_core::model::TransportError;
use hookline_core::outbound_auth::Basic;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::{Failure, Message};

/// A connection with its virtual host open and one channel in confirm mode.
pub(crate) struct Session {
    stream: BufReader<TcpStream>,
    frame_max: usize,
    /// The delivery tag the next publish gets (confirms count from 1).
    next_tag: u64,
}

const METHOD: u8 = 1;
const HEADER: u8 = 2;
const BODY: u8 = 3;
const HEARTBEAT: u8 = 8;
const FRAME_END: u8 = 0xCE;
/// The channel every publish goes on.
const CHANNEL: u16 = 1;
/// The most of a frame read before the tune says otherwise.
const FIRST_FRAME_MAX: usize = 128 * 1024;

/// (class, method) of the methods used.
mod method {
    pub const CONNECTION_START: (u16, u16) = (10, 10);
    pub const CONNECTION_START_OK: (u16, u16) = (10, 11);
    pub const CONNECTION_TUNE: (u16, u16) = (10, 30);
    pub const CONNECTION_TUNE_OK: (u16, u16) = (10, 31);
    pub const CONNECTION_OPEN: (u16, u16) = (10, 40);
    pub const CONNECTION_OPEN_OK: (u16, u16) = (10, 41);
    pub const CONNECTION_CLOSE: (u16, u16) = (10, 50);
    pub const CONNECTION_BLOCKED: (u16, u16) = (10, 60);
    pub const CHANNEL_OPEN: (u16, u16) = (20, 10);
    pub const CHANNEL_OPEN_OK: (u16, u16) = (20, 11);
    pub const CHANNEL_CLOSE: (u16, u16) = (20, 40);
    pub const CONFIRM_SELECT: (u16, u16) = (85, 10);
    pub const CONFIRM_SELECT_OK: (u16, u16) = (85, 11);
    pub const BASIC_PUBLISH: (u16, u16) = (60, 40);
    pub const BASIC_RETURN: (u16, u16) = (60, 50);
    pub const BASIC_ACK: (u16, u16) = (60, 80);
    pub const BASIC_NACK: (u16, u16) = (60, 120);
}

/// One frame read: its type, channel and payload.
struct Frame {
    kind: u8,
    payload: Vec<u8>,
}

impl Frame {
    fn method(&self) -> Option<(u16, u16)> {
        (self.kind == METHOD && self.payload.len() >= 4).then(|| {
            (
                u16::from_be_bytes([self.payload[0], self.payload[1]]),
                u16::from_be_bytes([self.payload[2], self.payload[3]]),
            )
        })
    }

    /// The method's arguments.
    fn arguments(&self) -> Reader<'_> {
        Reader(self.payload.get(4..).unwrap_or_default())
    }
}

/// Reads AMQP's field types off a payload; short input reads as zeros.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }
    fn u16(&mut self) -> u16 {
        let b = self.take(2);
        match b {
            [a, b] => u16::from_be_bytes([*a, *b]),
            _ => 0,
        }
    }
    fn u32(&mut self) -> u32 {
        let mut bytes = [0; 4];
        let b = self.take(4);
        bytes[..b.len()].copy_from_slice(b);
        u32::from_be_bytes(bytes)
    }
    fn u64(&mut self) -> u64 {
        let mut bytes = [0; 8];
        let b = self.take(8);
        bytes[..b.len()].copy_from_slice(b);
        u64::from_be_bytes(bytes)
    }
    fn octet(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }
    fn short_string(&mut self) -> String {
        let n = self.octet() as usize;
        String::from_utf8_lossy(self.take(n)).into_owned()
    }
}

/// Writes AMQP's field types.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn method((class, method): (u16, u16)) -> Self {
        let mut w = Self::default();
        w.u16(class).u16(method);
        w
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn octet(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    /// At most 255 bytes (names and keys are checked to fit when saved).
    fn short_string(&mut self, s: &str) -> &mut Self {
        let s = &s.as_bytes()[..s.len().min(255)];
        self.octet(s.len() as u8);
        self.0.extend_from_slice(s);
        self
    }
    fn long_string(&mut self, s: &[u8]) -> &mut Self {
        self.u32(s.len() as u32);
        self.0.extend_from_slice(s);
        self
    }
    /// A field table of text values and nested tables of booleans.
    fn table(&mut self, fields: &[(&str, Field<'_>)]) -> &mut Self {
        let mut inner = Writer::default();
        for (name, value) in fields {
            inner.short_string(name);
            match value {
                Field::Text(text) => {
                    inner.octet(b'S').long_string(text.as_bytes());
                }
                Field::Flags(flags) => {
                    let flags: Vec<(&str, Field)> =
                        flags.iter().map(|f| (*f, Field::True)).collect();
                    inner.octet(b'F').table(&flags);
                }
                Field::True => {
                    inner.octet(b't').octet(1);
                }
            }
        }
        self.long_string(&inner.0)
    }
    /// This payload as one frame of `kind` on `channel`.
    fn frame(&self, kind: u8, channel: u16, out: &mut Vec<u8>) {
        out.push(kind);
        out.extend_from_slice(&channel.to_be_bytes());
        out.extend_from_slice(&(self.0.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.0);
        out.push(FRAME_END);
    }
}

enum Field<'a> {
    Text(&'a str),
    Flags(&'a [&'a str]),
    True,
}

impl super::Session for Session {
    type Target = AmqpExchange;

    async fn open(
        stream: TcpStream,
        target: &AmqpExchange,
        auth: Option<&Basic>,
    ) -> Result<Self, Failure> {
        let mut session = Self {
            stream: BufReader::new(stream),
            frame_max: FIRST_FRAME_MAX,
            next_tag: 1,
        };
        session.write(b"AMQP\x00\x00\x09\x01").await?;
        session.expect(method::CONNECTION_START).await?;
        let (username, password) = auth
            .map(|b| (b.username.as_str(), b.password.as_str()))
            .unwrap_or(("guest", "guest"));
        let mut start_ok = Writer::method(method::CONNECTION_START_OK);
        start_ok
            .table(&[
                ("product", Field::Text("Hookline")),
                ("version", Field::Text(env!("CARGO_PKG_VERSION"))),
                (
                    "capabilities",
                    Field::Flags(&[
                        "authentication_failure_close",
                        "publisher_confirms",
                        "basic.nack",
                        "connection.blocked",
                    ]),
                ),
            ])
            .short_string("PLAIN")
            .long_string(format!("\0{username}\0{password}").as_bytes())
            .short_string("en_US");
        session.send(0, &start_ok).await?;
        let tune = session.expect(method::CONNECTION_TUNE).await?;
        let mut arguments = tune.arguments();
        let _channel_max = arguments.u16();
        let frame_max = match arguments.u32() {
            // AMQP's floor: a frame can always be 4 KiB.
            n @ 1..4096 => n.max(4096),
            0 => FIRST_FRAME_MAX as u32,
            n => n.min(FIRST_FRAME_MAX as u32),
        };
        session.frame_max = frame_max as usize;
        let mut tune_ok = Writer::method(method::CONNECTION_TUNE_OK);
        // No heartbeats: a session is used or closed within seconds (the pool's idle limit).
        tune_ok.u16(CHANNEL).u32(frame_max).u16(0);
        session.send(0, &tune_ok).await?;
        let mut open = Writer::method(method::CONNECTION_OPEN);
        open.short_string(&target.vhost).short_string("").octet(0);
        session.send(0, &open).await?;
        session.expect(method::CONNECTION_OPEN_OK).await?;
        let mut channel = Writer::method(method::CHANNEL_OPEN);
        channel.short_string("");
        session.send(CHANNEL, &channel).await?;
        session.expect(method::CHANNEL_OPEN_OK).await?;
        let mut confirm = Writer::method(method::CONFIRM_SELECT);
        confirm.octet(0);
        session.send(CHANNEL, &confirm).await?;
        session.expect(method::CONFIRM_SELECT_OK).await?;
        Ok(session)
    }

    async fn publish(
        &mut self,
        target: &AmqpExchange,
        message: &Message<'_>,
    ) -> Result<String, Failure> {
        let tag = self.next_tag;
        self.next_tag += 1;
        let mut out = Vec::with_capacity(message.body.len() + 512);
        let mut publish = Writer::method(method::BASIC_PUBLISH);
        publish
            .u16(0)
            .short_string(&target.exchange)
            .short_string(&target.routing_key)
            .octet(0b01); // mandatory, not immediate
        publish.frame(METHOD, CHANNEL, &mut out);
        let headers: Vec<(&str, Field)> = message
            .headers
            .iter()
            .filter(|(name, _)| *name != "content-type")
            .map(|(name, value)| (*name, Field::Text(value)))
            .collect();
        let mut header = Writer::default();
        header
            .u16(60)
            .u16(0)
            .u64(message.body.len() as u64)
            // content-type, headers, delivery-mode, message-id
            .u16(1 << 15 | 1 << 13 | 1 << 12 | 1 << 7)
            .short_string("application/json")
            .table(&headers)
            .octet(2) // persistent
            .short_string(message.delivery_id);
        header.frame(HEADER, CHANNEL, &mut out);
        for chunk in message.body.chunks(self.frame_max - 8) {
            Writer(chunk.to_vec()).frame(BODY, CHANNEL, &mut out);
        }
        self.write(&out).await?;
        loop {
            let frame = self.frame().await?;
            match frame.method() {
                Some(method::BASIC_ACK) | Some(method::BASIC_NACK) => {
                    let mut arguments = frame.arguments();
                    let (acked, multiple) = (arguments.u64(), arguments.octet() & 1 == 1);
                    if acked != tag && !(multiple && acked > tag) {
                        continue;
                    }
                    return match frame.method() {
                        Some(method::BASIC_ACK) => {
                            Ok(format!("RabbitMQ confirmed, delivery tag {tag}"))
                        }
                        _ => Err(Failure::Passing(
                            TransportError::Io,
                            "RabbitMQ did not take the message (basic.nack)".into(),
                        )),
                    };
                }
                Some(method::BASIC_RETURN) => {
                    let mut arguments = frame.arguments();
                    let (code, text) = (arguments.u16(), arguments.short_string());
                    return Err(Failure::Refused(format!(
                        "RabbitMQ returned the message: {code} {text} (no queue is bound to exchange {:?} with routing key {:?})",
                        target.exchange, target.routing_key
                    )));
                }
                _ => self.unexpected(&frame)?,
            }
        }
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

    async fn send(&mut self, channel: u16, method: &Writer) -> Result<(), Failure> {
        let mut out = Vec::new();
        method.frame(METHOD, channel, &mut out);
        self.write(&out).await
    }

    /// The next frame that is not a heartbeat.
    async fn frame(&mut self) -> Result<Frame, Failure> {
        loop {
            let mut head = [0; 7];
            self.stream
                .read_exact(&mut head)
                .await
                .map_err(Failure::lost)?;
            if &head[..4] == b"AMQP" {
                return Err(Failure::Refused(
                    "the server does not speak AMQP 0-9-1".into(),
                ));
            }
            let size = u32::from_be_bytes([head[3], head[4], head[5], head[6]]) as usize;
            if size > self.frame_max.max(FIRST_FRAME_MAX) {
                return Err(Failure::Refused(format!(
                    "not an AMQP frame (of {size} bytes)"
                )));
            }
            let mut payload = vec![0; size + 1];
            self.stream
                .read_exact(&mut payload)
                .await
                .map_err(Failure::lost)?;
            if payload.pop() != Some(FRAME_END) {
                return Err(Failure::Refused("not an AMQP frame".into()));
            }
            if head[0] != HEARTBEAT {
                return Ok(Frame {
                    kind: head[0],
                    payload,
                });
            }
        }
    }

    /// Reads until `expected` arrives.
    async fn expect(&mut self, expected: (u16, u16)) -> Result<Frame, Failure> {
        loop {
            let frame = self.frame().await?;
            if frame.method() == Some(expected) {
                return Ok(frame);
            }
            self.unexpected(&frame)?;
        }
    }

    /// A frame that is not the one awaited: a close or a block says why not;
    /// the body of a message returned before, and anything else, is passed over.
    fn unexpected(&self, frame: &Frame) -> Result<(), Failure> {
        match frame.method() {
            Some(closing @ (method::CONNECTION_CLOSE | method::CHANNEL_CLOSE)) => {
                let mut arguments = frame.arguments();
                let (code, text) = (arguments.u16(), arguments.short_string());
                let what = match closing {
                    method::CONNECTION_CLOSE => "connection",
                    _ => "channel",
                };
                Err(closed(what, code, &text))
            }
            Some(method::CONNECTION_BLOCKED) => {
                let reason = frame.arguments().short_string();
                Err(Failure::Passing(
                    TransportError::Io,
                    format!("RabbitMQ blocks publishers: {reason}"),
                ))
            }
            _ if frame.kind == HEADER || frame.kind == BODY || frame.kind == METHOD => Ok(()),
            _ => Err(Failure::Refused(format!(
                "not an AMQP frame (type {})",
                frame.kind
            ))),
        }
    }
}

/// A channel or connection closed by the broker: dead unless the reply code
/// says it passes (forced closed, out of resources, an internal error).
fn closed(what: &str, code: u16, text: &str) -> Failure {
    let said = format!("RabbitMQ closed the {what}: {code} {text}");
    match code {
        // Closed by the operator or a shutting-down broker: the session is gone.
        320 => Failure::Lost(said),
        506 | 541 => Failure::Passing(TransportError::Io, said),
        _ => Failure::Refused(said),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reply_codes_that_pass_are_retried_and_the_rest_are_dead() {
        assert!(matches!(closed("connection", 320, "x"), Failure::Lost(_)));
        for code in [506, 541] {
            assert!(
                matches!(
                    closed("channel", code, "x"),
                    Failure::Passing(TransportError::Io, _)
                ),
                "{code}"
            );
        }
        for code in [312, 403, 404, 406, 530, 505] {
            assert!(
                matches!(closed("channel", code, "x"), Failure::Refused(_)),
                "{code}"
            );
        }
    }

    /// Frames are written as AMQP lays them out, and read back so.
    #[test]
    fn frames_and_fields_are_laid_out_as_amqp_says() {
        let mut out = Vec::new();
        let mut close = Writer::method(method::CHANNEL_CLOSE);
        close.u16(404).short_string("NOT_FOUND").u16(60).u16(40);
        close.frame(METHOD, CHANNEL, &mut out);
        assert_eq!(&out[..3], &[METHOD, 0, 1]);
        assert_eq!(out[out.len() - 1], FRAME_END);
        let size = u32::from_be_bytes([out[3], out[4], out[5], out[6]]) as usize;
        assert_eq!(size, out.len() - 8);
        let frame = Frame {
            kind: METHOD,
            payload: out[7..out.len() - 1].to_vec(),
        };
        assert_eq!(frame.method(), Some(method::CHANNEL_CLOSE));
        let mut arguments = frame.arguments();
        assert_eq!(
            (arguments.u16(), arguments.short_string()),
            (404, "NOT_FOUND".into())
        );
        // A table: its length, then each name, type and value.
        let mut table = Writer::default();
        table.table(&[("a", Field::Text("bc")), ("f", Field::Flags(&["x"]))]);
        assert_eq!(
            table.0,
            [
                &[0, 0, 0, 20][..],
                &[1, b'a', b'S', 0, 0, 0, 2, b'b', b'c'],
                &[1, b'f', b'F', 0, 0, 0, 4, 1, b'x', b't', 1],
            ]
            .concat()
        );
        // Reading past the end gives zeros, never a panic.
        let mut short = Reader(&[1]);
        assert_eq!(
            (short.u16(), short.u64(), short.short_string()),
            (0, 0, String::new())
        );
    }
}
