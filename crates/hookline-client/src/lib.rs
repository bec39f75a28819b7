//! A typed async client of Hookline's HTTP API (a webhook delivery platform).
//!
//! It speaks the server's own types ([`hookline_types`], re-exported as
//! [`types`]): the bodies it sends and the views it reads are the structs the
//! server deserialises and renders, so a change to the API that would break
//! the client breaks its build instead.
//!
//! ```no_run
//! use hookline_client::{Client, types::{CreateEndpoint, PublishRequest}};
//! use serde_json::json;
//!
//! # async fn run() -> Result<(), hookline_client::Error> {
//! let hookline = Client::new("https://hooks.example.com", "hk_…")?;
//! let endpoint = hookline
//!     .create_endpoint("acme", &CreateEndpoint::new("https://acme.example/webhooks"))
//!     .await?;
//! let published = hookline
//!     .publish("acme", &PublishRequest::new("order.paid", json!({"order": 42})))
//!     .await?;
//! println!("{} → {} deliveries", published.event.id, published.event.deliveries.len());
//! # let _ = endpoint;
//! # Ok(()) }
//! ```
//!
//! # Retries
//!
//! A publish is retried when it is safe: every publish carries an
//! `Idempotency-Key` (one is generated when you give none), so sending it
//! again after a lost answer, a timeout, a 5xx or a 429 yields the same event,
//! never a second one. Reads (`GET`) are retried the same way. Nothing else is
//! retried: creating an endpoint twice would make two, and a replay repeated
//! after a lost answer would report the wrong outcome. Delays are full-jitter
//! exponential ([`Retries`]); a `Retry-After` header is honoured up to the
//! backoff's cap.
//!
//! # Errors
//!
//! Every refusal is an [`Error::Api`] holding the server's RFC 9457
//! [`Problem`]: its stable `code` (`not_found`, `idempotency_key_reused`,
//! `invalid_filter`, … — `GET /problems` lists them) and a human `detail`.
//!
//! ```no_run
//! # use hookline_client::{Client, types::PublishRequest};
//! # async fn run(hookline: Client) -> Result<(), hookline_client::Error> {
//! let order = PublishRequest::new("order.paid", serde_json::json!({"order": 42}));
//! match hookline.publish_with_key("acme", &order, "order-42-paid").await {
//!     Ok(published) if published.replayed => println!("already published"),
//!     Ok(published) => println!("published {}", published.event.id),
//!     Err(error) if error.code() == Some("idempotency_key_reused") => {
//!         eprintln!("that key went with another event")
//!     }
//!     Err(error) => return Err(error),
//! }
//! # Ok(()) }
//! ```
//!
//! # Listings
//!
//! Lists are pages newest first ([`types::ListView`]); each listing has a
//! `*_stream` twin that follows the cursor and yields every row
//! ([`futures_util::Stream`]). The on-call round, in code: what died this
//! morning at one endpoint, then its replay.
//!
//! ```no_run
//! use futures_util::TryStreamExt;
//! use hookline_client::{BulkReplay, Client, types::{BulkReplayRequest, DlqQuery}};
//!
//! # async fn run(hookline: Client) -> Result<(), hookline_client::Error> {
//! let query = DlqQuery {
//!     endpoint_id: Some("ep_01JD3Q0G7ZB0Q4W3M5T1V9X2YB".into()),
//!     since: Some("2026-12-03T06:00:00Z".into()),
//!     ..DlqQuery::default()
//! };
//! let dead: Vec<_> = hookline.dlq_stream("acme", query.clone()).try_collect().await?;
//! println!("{} dead deliveries", dead.len());
//! let replay = BulkReplayRequest {
//!     endpoint_id: query.endpoint_id,
//!     since: query.since,
//!     ..BulkReplayRequest::default()
//! };
//! if let BulkReplay::Started(job) | BulkReplay::Running(job) =
//!     hookline.replay_dlq("acme", &replay).await?
//! {
//!     println!("replay {}: {} of {}", job.id, job.done, job.total);
//! }
//! # Ok(()) }
//! ```

mod apps;
mod deliveries;
mod endpoints;
mod events;
mod keys;
mod notifications;
mod request;

use std::sync::Arc;
use std::time::Duration;

pub use hookline_types as types;
pub use hookline_types::Problem;

pub use deliveries::BulkReplay;
pub use events::Published;
pub use request::Retries;

/// What a call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server refused the request (4xx) or failed (5xx, after retries):
    /// its problem+json answer.
    #[error("{} {}: {}", .0.status, .0.code, .0.detail)]
    Api(Problem),
    /// No answer: connection refused or reset, a timeout, TLS (after retries).
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    /// A request body that does not serialize to JSON.
    #[error("a request body that does not serialize: {0}")]
    Encode(#[source] serde_json::Error),
    /// An answer this client cannot read (not the server's JSON).
    #[error("an answer of {status} that is not what the API sends: {reason}")]
    Unexpected { status: u16, reason: String },
    /// An id or name that cannot be a path segment (empty, `.` or `..`).
    #[error("{0:?} is not an id or name the API has")]
    Segment(String),
    /// The base URL given to the client is not an absolute http(s) URL.
    #[error("the base URL {0:?} is not an absolute http(s) URL")]
    BaseUrl(String),
}

impl Error {
    /// The problem's stable code, when the server answered with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Api(problem) => Some(&problem.code),
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A Hookline API client. Cheap to clone: clones share one connection pool.
#[derive(Clone)]
pub struct Client {
    inner: Arc<request::Inner>,
}

impl Client {
    /// A client of the Hookline at `base` (`https://hooks.example.com`) with
    /// the API key `token`, with default timeouts and retries.
    pub fn new(base: &str, token: &str) -> Result<Self> {
        Self::builder(base, token).build()
    }

    /// A client with its timeouts, retries or HTTP client chosen.
    pub fn builder(base: &str, token: &str) -> ClientBuilder {
        ClientBuilder {
            base: base.to_owned(),
            token: token.to_owned(),
            timeout: Duration::from_secs(30),
            retries: Retries::default(),
            http: None,
            language: None,
        }
    }
}

/// Builds a [`Client`].
#[derive(Debug)]
pub struct ClientBuilder {
    base: String,
    token: String,
    timeout: Duration,
    retries: Retries,
    http: Option<reqwest::Client>,
    language: Option<hookline_core::language::Language>,
}

impl ClientBuilder {
    /// The language of the sentences the API writes for people
    /// (explanations, incidents, the signature check): sent as
    /// `Accept-Language` with every request (default: none, English).
    pub fn language(mut self, language: hookline_core::language::Language) -> Self {
        self.language = Some(language);
        self
    }

    /// How long one request may take, answer included (default 30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How publishes and reads are retried ([`Retries::none`] turns it off).
    pub fn retries(mut self, retries: Retries) -> Self {
        self.retries = retries;
        self
    }

    /// Use this HTTP client (its pool, proxy and TLS settings); the timeout
    /// set here is then the client's own.
    pub fn http_client(mut self, http: reqwest::Client) -> Self {
        self.http = Some(http);
        self
    }

    pub fn build(self) -> Result<Client> {
        let base = self.base.trim_end_matches('/').to_owned();
        let valid = reqwest::Url::parse(&base)
            .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.has_host());
        if !valid {
            return Err(Error::BaseUrl(self.base));
        }
        let http = match self.http {
            Some(http) => http,
            None => reqwest::Client::builder()
                .timeout(self.timeout)
                .user_agent(concat!("hookline-client/", env!("CARGO_PKG_VERSION")))
                .build()?,
        };
        Ok(Client {
            inner: Arc::new(request::Inner {
                http,
                base,
                authorization: format!("Bearer {}", self.token),
                retries: self.retries,
                language: self.language,
            }),
        })
    }
}

/// A path segment, percent-encoded. Empty, `.` and `..` are refused: URL
/// parsers collapse them (encoded or not), so `..` as an endpoint id would
/// name the app itself.
fn segment(value: &str) -> Result<String> {
    if matches!(value, "" | "." | "..") {
        return Err(Error::Segment(value.to_owned()));
    }
    Ok(value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect())
}
