//! Sending one delivery to a message broker: the endpoints whose URL names
//! one (`hookline_core::broker::Broker`) — Redis Streams, NATS JetStream,
//! RabbitMQ, Amazon SQS, SNS and EventBridge.
//!
//! Everything but the protocol is shared and lives here:
//! - **The destination guard.** The broker's host is resolved and connected
//!   to only at an address outbound requests may reach, as for HTTP (the
//!   address checked is the address connected to).
//! - **The message.** The Standard Webhooks envelope, signed exactly as an
//!   HTTP delivery is, with the same headers (`webhook-id`,
//!   `webhook-timestamp`, `webhook-signature`, `content-type`, and the
//!   ordering key and sequence when it has them) as the broker's headers or
//!   fields, so a consumer verifies it the same way.
//! - **Sessions are reused.** A session (connection, login, and whatever the
//!   protocol sets up once) that published is kept for the next message to
//!   the same place with the same login; one that failed is dropped. A kept
//!   session the broker closed meanwhile is replaced once within the attempt.
//! - **What the broker said decides the attempt as a status would**
//!   ([`Failure`]): a confirm or acknowledgement is delivered; an answer that
//!   will not change (login refused, no such stream, queue or exchange,
//!   message too large) is dead at once with the broker's words; the broker
//!   away, busy or throttling, or no answer within the request timeout, is
//!   retried with backoff. Breakers, rate limits, adaptive concurrency and
//!   ordering keys are the endpoint's, as for any endpoint.
//!
//! A kind of broker is one file: a [`Session`] (open, publish), a variant
//! of `Broker` in core, and a line in [`Brokers::send`]. Kafka would be one
//! more of each. A broker with an HTTP API (Amazon SQS, SNS and EventBridge, `aws`; Google
//! Pub/Sub would be another) is a function over the dispatcher's HTTP client
//! instead of a `Session`: the client keeps its connections, and the guard
//! and the egress proxy apply as for any HTTP delivery.

mod amqp;
mod aws;
mod nats;
mod redis;

use std::borrow::Cow;
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hookline_core::broker::Broker;
use hookline_core::classify::Outcome;
use hookline_core::destination;
use hookline_core::model::TransportError;
use hookline_core::outbound_auth::Basic;
use tokio::net::TcpStream;

use crate::sender::SendResult;

/// One message: the signed body and the headers an HTTP delivery of it has.
pub(crate) struct Message<'a> {
    /// The delivery's id: the same on every retry and replay of this delivery
    /// to this endpoint (a broker that deduplicates keys on it).
    pub delivery_id: &'a str,
    /// This attempt's time (unix seconds), as `webhook-timestamp` says.
    pub timestamp: i64,
    pub ordering_key: Option<&'a str>,
    pub headers: Vec<(&'a str, Cow<'a, str>)>,
    pub body: &'a [u8],
}

impl Message<'_> {
    /// The group a broker that keeps order per group (a FIFO queue) puts
    /// it in (`hookline_core::broker::message_group`).
    pub fn group(&self) -> String {
        hookline_core::broker::message_group(self.ordering_key)
    }
}

/// Why a session did not take the message.
#[derive(Debug)]
pub(crate) enum Failure {
    /// An answer that will not change: dead, with the broker's words.
    Refused(String),
    /// The broker away or unable for now: retried.
    Passing(TransportError, String),
    /// The connection failed (closed, reset, or closed by a broker shutting
    /// down): retried, and a kept session that fails so is replaced once
    /// within the attempt.
    Lost(String),
}

impl Failure {
    fn lost(error: std::io::Error) -> Self {
        Self::Lost(format!("the connection failed: {error}"))
    }
}

/// One kind of broker's protocol: a session opened on a guarded connection,
/// and one message published on it.
pub(crate) trait Session: Sized + Send + 'static {
    /// Where messages go (from the endpoint's URL).
    type Target: Sync;

    /// Opens a session on `stream`: the protocol's greeting, the login with
    /// the endpoint's `basic` auth when it has one, and what is set up once.
    fn open(
        stream: TcpStream,
        target: &Self::Target,
        auth: Option<&Basic>,
    ) -> impl Future<Output = Result<Self, Failure>> + Send;

    /// Publishes one message and waits for the broker to take it; what the
    /// broker answered, for the attempt log.
    fn publish(
        &mut self,
        target: &Self::Target,
        message: &Message<'_>,
    ) -> impl Future<Output = Result<String, Failure>> + Send;
}

/// Idle sessions by place and login, each with when it was last used.
struct Pool<S> {
    idle: Mutex<Idle<S>>,
}

struct Idle<S> {
    sessions: HashMap<String, Vec<(S, Instant)>>,
    /// When every key's expired sessions were last closed.
    swept: Instant,
}

/// A session idle longer is closed rather than reused (brokers close idle
/// clients that do not answer their heartbeats).
const MAX_IDLE: Duration = Duration::from_secs(30);
/// At most this many idle sessions are kept per place and login.
const MAX_IDLE_PER_KEY: usize = 64;
/// Past this many places and logins the pool starts over.
const MAX_KEYS: usize = 10_000;

impl<S> Default for Pool<S> {
    fn default() -> Self {
        Self {
            idle: Mutex::new(Idle {
                sessions: HashMap::new(),
                swept: Instant::now(),
            }),
        }
    }
}

impl<S: Session> Pool<S> {
    fn take(&self, key: &str) -> Option<S> {
        let mut idle = self.idle.lock().expect("pool poisoned");
        let sessions = idle.sessions.get_mut(key)?;
        while let Some((session, since)) = sessions.pop() {
            if since.elapsed() < MAX_IDLE {
                return Some(session);
            }
        }
        None
    }

    fn put(&self, key: String, session: S) {
        let mut idle = self.idle.lock().expect("pool poisoned");
        // Sessions of places no longer sent to are closed too, not only
        // those of the key in hand (after the lock is let go: closing is I/O).
        let mut expired = Vec::new();
        if idle.swept.elapsed() >= MAX_IDLE {
            for sessions in idle.sessions.values_mut() {
                let (old, fresh): (Vec<_>, Vec<_>) = std::mem::take(sessions)
                    .into_iter()
                    .partition(|(_, since)| since.elapsed() >= MAX_IDLE);
                *sessions = fresh;
                expired.extend(old);
            }
            idle.sessions.retain(|_, sessions| !sessions.is_empty());
            idle.swept = Instant::now();
        }
        if idle.sessions.len() >= MAX_KEYS && !idle.sessions.contains_key(&key) {
            idle.sessions.clear();
        }
        let sessions = idle.sessions.entry(key).or_default();
        if sessions.len() < MAX_IDLE_PER_KEY {
            sessions.push((session, Instant::now()));
        }
        drop(idle);
        drop(expired);
    }

    /// Publishes on a kept session, or a new one; keeps the session if it published.
    async fn publish(
        &self,
        key: String,
        address: (&str, u16),
        target: &S::Target,
        auth: Option<&Basic>,
        message: &Message<'_>,
        allow_private: bool,
    ) -> Result<String, Failure> {
        if let Some(mut session) = self.take(&key) {
            match session.publish(target, message).await {
                Ok(answer) => {
                    self.put(key, session);
                    return Ok(answer);
                }
                // Closed while it waited (a broker shutting down may say so
                // first: the protocols read that as lost too): a new session
                // below. A broker that answered, even "not now", is left to
                // the retry, since a new session would meet the same answer.
                Err(Failure::Lost(_)) => {}
                Err(answered) => return Err(answered),
            }
        }
        let stream = connect(address, allow_private).await?;
        let mut session = S::open(stream, target, auth).await?;
        let answer = session.publish(target, message).await?;
        self.put(key, session);
        Ok(answer)
    }
}

/// The dispatcher's brokers: one pool of sessions per kind.
#[derive(Default)]
pub(crate) struct Brokers {
    redis: Pool<redis::Session>,
    nats: Pool<nats::Session>,
    amqp: Pool<amqp::Session>,
}

impl std::fmt::Debug for Brokers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Brokers").finish_non_exhaustive()
    }
}

impl Brokers {
    /// Publishes `message` where `url` (the endpoint's, naming `broker`)
    /// says, within `timeout`. `signature` is the one the message carries.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn send(
        &self,
        client: &reqwest::Client,
        url: &str,
        broker: &Broker,
        auth: Option<&Basic>,
        message: Message<'_>,
        signature: String,
        allow_private: bool,
        timeout: Duration,
    ) -> SendResult {
        let started = Instant::now();
        // Sessions differ by place (the URL) and login.
        let key = match auth {
            Some(basic) => format!("{url}\n{}\n{}", basic.username, basic.password),
            None => url.to_owned(),
        };
        let address = broker.address();
        let attempt = async {
            match broker {
                Broker::Redis(target) => {
                    self.redis
                        .publish(key, address, target, auth, &message, allow_private)
                        .await
                }
                Broker::Nats(target) => {
                    self.nats
                        .publish(key, address, target, auth, &message, allow_private)
                        .await
                }
                Broker::Amqp(target) => {
                    self.amqp
                        .publish(key, address, target, auth, &message, allow_private)
                        .await
                }
                // An HTTP API: the client keeps its connections.
                Broker::Aws(target) => aws::send(client, target, auth, &message).await,
            }
        };
        let name = broker.name();
        let signature = Some(signature);
        match tokio::time::timeout(timeout, attempt).await {
            Ok(Ok(answer)) => SendResult {
                response_body: Some(answer),
                signature,
                ..SendResult::answered(Outcome::Accepted, started)
            },
            Ok(Err(Failure::Refused(said))) => SendResult {
                signature,
                ..SendResult::rejected(said, started)
            },
            Ok(Err(Failure::Lost(said))) => SendResult::failed(
                TransportError::Io,
                format!("{name}: {said}"),
                started,
                signature,
            ),
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
                format!("{name} did not answer within {} ms", timeout.as_millis()),
                started,
                signature,
            ),
        }
    }
}

/// A connection to the first of the host's addresses the guard allows.
async fn connect((host, port): (&str, u16), allow_private: bool) -> Result<TcpStream, Failure> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| Failure::Passing(TransportError::Dns, format!("resolving {host}: {e}")))?
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
    let mut last = format!("{host} resolves to no address");
    for address in allowed {
        match TcpStream::connect(address).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = format!("connecting to {address}: {e}"),
        }
    }
    Err(Failure::Passing(TransportError::Connect, last))
}

#[cfg(test)]
pub(crate) mod testing {
    //! A one-shot server for the protocols' unit tests.

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server on 127.0.0.1 that says `greeting`, then answers each read
    /// with the next of `replies` (then closes); its port.
    pub async fn server(greeting: &'static [u8], replies: Vec<&'static [u8]>) -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let _ = socket.write_all(greeting).await;
            for reply in replies {
                let mut buffer = [0; 4096];
                let _ = socket.read(&mut buffer).await;
                let _ = socket.write_all(reply).await;
            }
        });
        port
    }
}
