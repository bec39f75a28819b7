//! Sending one delivery: a signed POST with guarded resolution.
//!
//! - **Signed** per Standard Webhooks: `webhook-id` (the event id, stable
//!   across retries and replays), `webhook-timestamp`, `webhook-signature`.
//! - **No redirects**: a 3xx is an answer, classified as dead.
//! - **SSRF guard where the connection is made**: hostnames are resolved by
//!   [`GuardedResolver`], which drops forbidden addresses before hyper sees
//!   them, so the address checked is the address connected to (no
//!   check-then-connect gap; DNS rebinding included). IP-literal URLs skip the
//!   resolver and are checked directly. Proxies from the environment are
//!   ignored, since they would connect on our behalf.
//! - **An egress proxy**, if configured (`egress_proxy`): every request goes
//!   through it, so deliveries leave from its fixed addresses. The proxy's own
//!   address is the operator's and is not checked. The proxy, not Hookline,
//!   connects to the destination, so before each attempt Hookline resolves the
//!   destination itself with the same guard and refuses a forbidden one without
//!   asking the proxy; the proxy then resolves the name again, so a name whose
//!   answers change between the two lookups (DNS rebinding) is left to the
//!   proxy's own rules (docs/SECURITY.md says how to set them).
//! - **Outbound authentication** per endpoint (`hookline_core::outbound_auth`):
//!   a static `Authorization`, or an OAuth2 token fetched through the same
//!   client (so the same guard and proxy) and shared by every delivery until it
//!   nears expiry — one fetch at a time per client configuration — and fetched
//!   again once when the receiver answers 401; a token that cannot be had makes
//!   the attempt an `auth_error` (retried). An endpoint with its own TLS (a
//!   client certificate, a server CA) gets its own client, built once.

use std::collections::HashMap;
use std::error::Error as _;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hookline_core::batch;
use hookline_core::broker::Broker;
use hookline_core::classify::Outcome;
use hookline_core::destination;
use hookline_core::ids::BatchId;
use hookline_core::model::TransportError;
use hookline_core::model::{self, request_headers, RequestParts};
use hookline_core::notify;
use hookline_core::outbound_auth::{
    parse_token_response, refresh_after, OAuth2, OutboundAuth, Tls, Token,
};
use hookline_core::transform::{self, EndpointFacts, Output, Transform};
use hookline_store::{ClaimedDelivery, Transformed, MAX_SHOWN_BODY};
use hookline_transform::Sandbox;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::brokers::{Brokers, Message};
use crate::mail::Mailer;
use crate::{DispatchError, DispatcherConfig};

pub use hookline_core::model::{ORDERING_KEY_HEADER, SEQUENCE_HEADER};

/// The destination resolved only to addresses outbound requests may not reach.
#[derive(Debug, thiserror::Error)]
#[error("destination address is forbidden (private, loopback or otherwise non-public)")]
pub struct ForbiddenDestination;

/// Name resolution failed.
#[derive(Debug, thiserror::Error)]
#[error("dns error: {0}")]
pub struct DnsFailure(std::io::Error);

/// Resolves with the system resolver, then keeps only permitted addresses.
#[derive(Debug, Clone)]
pub struct GuardedResolver {
    pub allow_private: bool,
    /// The egress proxy's host: the operator's own, resolved unchecked.
    pub trusted: Option<String>,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl GuardedResolver {
    /// The permitted addresses of `host`, or why there are none.
    async fn permitted(&self, host: &str) -> Result<Vec<SocketAddr>, BoxError> {
        let allow = self.allow_private || self.trusted.as_deref() == Some(host);
        let resolved = tokio::net::lookup_host((host, 0))
            .await
            .map_err(|e| Box::new(DnsFailure(e)) as BoxError)?;
        let permitted: Vec<SocketAddr> = resolved
            .filter(|addr| allow || destination::is_public(addr.ip()))
            .collect();
        if permitted.is_empty() {
            return Err(Box::new(ForbiddenDestination));
        }
        Ok(permitted)
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let resolver = self.clone();
        Box::pin(async move {
            let permitted = resolver.permitted(name.as_str()).await?;
            Ok(Box::new(permitted.into_iter()) as Addrs)
        })
    }
}

/// What one attempt produced, ready to classify and record.
#[derive(Debug)]
pub struct SendResult {
    pub outcome: Outcome,
    pub status: Option<u16>,
    pub response_body: Option<String>,
    pub error: Option<(TransportError, String)>,
    pub duration: Duration,
    /// The signature sent (`None` if the request never left); with the
    /// delivery it gives back every header sent ([`request_headers`]).
    pub signature: Option<String>,
    /// The response's headers, at most [`MAX_RESPONSE_HEADERS`] and
    /// [`MAX_RESPONSE_HEADER_BYTES`] of them.
    pub response_headers: Vec<(String, String)>,
    /// The response body was longer than the limit and was cut.
    pub response_truncated: bool,
    /// What the endpoint's transform made of the request, if it has one.
    pub transformed: Option<Transformed>,
}

/// Response headers kept per attempt: enough to see what a receiver or its
/// gateway said, bounded so a hostile receiver cannot bloat the attempt log.
pub const MAX_RESPONSE_HEADERS: usize = 50;
pub const MAX_RESPONSE_HEADER_BYTES: usize = 8 * 1024;

impl SendResult {
    /// A destination that is not HTTP answered (no status, no headers).
    pub(crate) fn answered(outcome: Outcome, started: Instant) -> Self {
        Self {
            outcome,
            status: None,
            response_body: None,
            error: None,
            duration: started.elapsed(),
            signature: None,
            response_headers: Vec::new(),
            response_truncated: false,
            transformed: None,
        }
    }

    /// The endpoint's transform failed: nothing was sent; what went wrong is
    /// the attempt's response.
    fn transform_failed(said: String, slow: bool, started: Instant) -> Self {
        let said: String = printable_body(said.as_bytes()).chars().take(4096).collect();
        Self {
            response_body: Some(format!("the endpoint's transform failed: {said}")),
            ..Self::answered(Outcome::TransformFailed { slow }, started)
        }
    }

    /// The endpoint's transform gave `null`: nothing is sent.
    fn skipped(started: Instant) -> Self {
        Self {
            response_body: Some(
                "skipped: the endpoint's transform gave null, so nothing was sent".into(),
            ),
            transformed: Some(Transformed {
                skipped: true,
                ..Transformed::default()
            }),
            ..Self::answered(Outcome::Skipped, started)
        }
    }

    /// A destination that is not HTTP refused for good: what it said is the
    /// attempt's response.
    pub(crate) fn rejected(said: String, started: Instant) -> Self {
        Self {
            response_body: Some(said),
            ..Self::answered(Outcome::Rejected, started)
        }
    }

    pub(crate) fn failed(
        kind: TransportError,
        message: String,
        started: Instant,
        signature: Option<String>,
    ) -> Self {
        Self {
            outcome: Outcome::Failed(kind),
            status: None,
            response_body: None,
            error: Some((kind, message)),
            duration: started.elapsed(),
            signature,
            response_headers: Vec::new(),
            response_truncated: false,
            transformed: None,
        }
    }
}

/// The HTTP side of the dispatcher.
#[derive(Debug, Clone)]
pub struct Sender {
    client: reqwest::Client,
    allow_private: bool,
    /// With an egress proxy: the guard that checks each destination before
    /// the proxy is asked to connect to it.
    proxied: Option<GuardedResolver>,
    max_response_body_bytes: usize,
    /// How every client is built (the shared one, and those of endpoints with
    /// their own TLS).
    settings: Arc<ClientSettings>,
    /// Clients of endpoints with a client certificate or a server CA, by that
    /// configuration.
    tls_clients: Arc<Mutex<HashMap<String, reqwest::Client>>>,
    /// OAuth2 tokens, by client configuration (one fetch shared by every delivery).
    tokens: Arc<Mutex<HashMap<String, SharedToken>>>,
    /// E-mail, if an SMTP server is configured (`mailto:` endpoints).
    mailer: Option<Mailer>,
    /// Sessions with the brokers that endpoints name (`redis://`, `nats://`, `amqp://`).
    brokers: Arc<Brokers>,
    /// Where endpoints' jq transforms run.
    transforms: Arc<Sandbox>,
}

/// One client configuration's token: fetched by whoever finds it missing or
/// expiring, while the others wait on the lock.
type SharedToken = Arc<tokio::sync::Mutex<Option<TokenSlot>>>;

#[derive(Debug)]
struct ClientSettings {
    proxy: Option<String>,
    resolver: GuardedResolver,
    request_timeout: Duration,
    max_in_flight: usize,
}

impl ClientSettings {
    fn builder(&self) -> Result<reqwest::ClientBuilder, reqwest::Error> {
        let builder = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
        let builder = match &self.proxy {
            Some(proxy) => builder.proxy(reqwest::Proxy::all(proxy)?),
            None => builder.no_proxy(),
        };
        Ok(builder
            .dns_resolver(Arc::new(self.resolver.clone()))
            .timeout(self.request_timeout)
            .connect_timeout(self.request_timeout.min(Duration::from_secs(5)))
            .pool_idle_timeout(Duration::from_secs(60))
            // Keep as many idle connections per host as we may have requests in
            // flight: with a smaller pool every burst to a busy host (many endpoints
            // often share one, like a chat provider's) opened connections only to
            // close them after one request — about a tenth of the dispatcher's CPU
            // in the benchmark profile.
            .pool_max_idle_per_host(self.max_in_flight)
            .tcp_nodelay(true)
            .user_agent(concat!("Hookline/", env!("CARGO_PKG_VERSION"))))
    }
}

/// A cached OAuth2 token, or a fetch that failed a moment ago (shared by the
/// deliveries waiting on it, so a down token endpoint is asked once a second
/// at most, not once per delivery).
#[derive(Debug)]
enum TokenSlot {
    Token { token: String, until: Instant },
    Failed { message: String, until: Instant },
}

/// How long a failed token fetch answers for the deliveries behind it.
const TOKEN_FAILURE_HOLD: Duration = Duration::from_secs(1);
/// The most of a token endpoint's answer read.
const MAX_TOKEN_RESPONSE: usize = 64 * 1024;
/// Past this many entries a cache starts over.
const CACHE_CAPACITY: usize = 10_000;

impl Sender {
    pub fn new(config: &DispatcherConfig) -> Result<Self, DispatchError> {
        let resolver = GuardedResolver {
            allow_private: config.allow_private_destinations,
            trusted: config
                .egress_proxy
                .as_deref()
                .and_then(|url| reqwest::Url::parse(url).ok())
                .and_then(|url| url.host_str().map(str::to_owned)),
        };
        let settings = ClientSettings {
            proxy: config.egress_proxy.clone(),
            resolver: resolver.clone(),
            request_timeout: config.request_timeout,
            max_in_flight: config.max_in_flight,
        };
        let client = settings.builder()?.build()?;
        Ok(Self {
            client,
            allow_private: config.allow_private_destinations,
            proxied: config.egress_proxy.is_some().then_some(resolver),
            max_response_body_bytes: config.max_response_body_bytes,
            settings: Arc::new(settings),
            tls_clients: Arc::default(),
            tokens: Arc::default(),
            mailer: config
                .smtp
                .as_ref()
                .map(|smtp| Mailer::new(smtp, config.request_timeout))
                .transpose()
                .map_err(DispatchError::Mail)?,
            brokers: Arc::default(),
            transforms: Arc::new(Sandbox::new(
                &config.transform_worker,
                hookline_transform::default_workers(),
            )),
        })
    }

    /// The client for an endpoint: the shared one, or (with its own TLS) one
    /// that presents its client certificate and trusts its server CA.
    fn client_for(&self, tls: Option<&Tls>) -> Result<reqwest::Client, String> {
        let Some(tls) = tls else {
            return Ok(self.client.clone());
        };
        let key = serde_json::to_string(tls).expect("TLS settings serialize");
        if let Some(client) = self.tls_clients.lock().expect("clients poisoned").get(&key) {
            return Ok(client.clone());
        }
        let failed = |what: &str, e: reqwest::Error| format!("{what}: {}", error_chain(&e));
        let mut builder = self.settings.builder().map_err(|e| failed("client", e))?;
        if let (Some(chain), Some(private_key)) = (&tls.client_certificate, &tls.client_key) {
            let pem = format!("{private_key}\n{chain}");
            let identity = reqwest::Identity::from_pem(pem.as_bytes())
                .map_err(|e| failed("the client certificate", e))?;
            builder = builder.identity(identity);
        }
        if let Some(ca) = &tls.server_ca {
            for certificate in reqwest::Certificate::from_pem_bundle(ca.as_bytes())
                .map_err(|e| failed("the server CA", e))?
            {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let client = builder.build().map_err(|e| failed("client", e))?;
        let mut clients = self.tls_clients.lock().expect("clients poisoned");
        if clients.len() >= CACHE_CAPACITY {
            clients.clear();
        }
        clients.insert(key, client.clone());
        Ok(client)
    }

    /// A bearer token for `oauth2`: the cached one, unless it is `stale` (the
    /// receiver refused it) or expiring; else fetched, once for every delivery
    /// that asks meanwhile.
    async fn token(
        &self,
        client: &reqwest::Client,
        oauth2: &OAuth2,
        stale: Option<&str>,
    ) -> Result<String, String> {
        let key = serde_json::to_string(oauth2).expect("OAuth2 settings serialize");
        let slot = {
            let mut tokens = self.tokens.lock().expect("tokens poisoned");
            if tokens.len() >= CACHE_CAPACITY {
                tokens.clear();
            }
            tokens.entry(key).or_default().clone()
        };
        let mut slot = slot.lock().await;
        let now = Instant::now();
        match &*slot {
            Some(TokenSlot::Token { token, until })
                if *until > now && stale != Some(token.as_str()) =>
            {
                return Ok(token.clone())
            }
            Some(TokenSlot::Failed { message, until }) if *until > now => {
                return Err(message.clone())
            }
            _ => {}
        }
        match self.fetch_token(client, oauth2).await {
            Ok(fetched) => {
                *slot = Some(TokenSlot::Token {
                    token: fetched.access_token.clone(),
                    until: Instant::now() + refresh_after(fetched.expires_in),
                });
                Ok(fetched.access_token)
            }
            Err(message) => {
                *slot = Some(TokenSlot::Failed {
                    message: message.clone(),
                    until: Instant::now() + TOKEN_FAILURE_HOLD,
                });
                Err(message)
            }
        }
    }

    /// Asks the token endpoint (RFC 6749 §4.4), through the same guard as a delivery.
    async fn fetch_token(
        &self,
        client: &reqwest::Client,
        oauth2: &OAuth2,
    ) -> Result<Token, String> {
        let url = Self::parse_url(&oauth2.token_url)?;
        self.check_destination(&url)
            .await
            .map_err(|(_, message)| format!("token endpoint: {message}"))?;
        let mut response = client
            .post(url)
            .header("authorization", oauth2.client_authorization())
            .header("content-type", "application/x-www-form-urlencoded")
            .header("accept", "application/json")
            .body(oauth2.token_request_body())
            .send()
            .await
            .map_err(|e| format!("token endpoint: {}", error_chain(&e)))?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("token endpoint: {}", error_chain(&e)))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_TOKEN_RESPONSE {
                return Err("token endpoint: its answer is over 64 KiB".into());
            }
        }
        parse_token_response(status, &body)
    }

    /// Refuses a destination outbound requests may not reach, before the request
    /// (a literal address; through a proxy, a name too).
    async fn check_destination(&self, url: &reqwest::Url) -> Result<(), (TransportError, String)> {
        if !self.allow_private && literal_ip(url).is_some_and(|ip| !destination::is_public(ip)) {
            return Err((
                TransportError::DestinationForbidden,
                ForbiddenDestination.to_string(),
            ));
        }
        // Through a proxy, no name of ours goes through the guarded resolver: the
        // destination is checked here first.
        if let (Some(guard), Some(host), None, false) = (
            &self.proxied,
            url.host_str(),
            literal_ip(url),
            self.allow_private,
        ) {
            if let Err(error) = guard.permitted(host).await {
                let kind = if error.is::<ForbiddenDestination>() {
                    TransportError::DestinationForbidden
                } else {
                    TransportError::Dns
                };
                return Err((kind, error.to_string()));
            }
        }
        Ok(())
    }

    /// Parses an endpoint URL for [`Self::send`]; the error is the attempt's message.
    /// (A claim's deliveries share few endpoints: the engine parses once per endpoint.)
    pub fn parse_url(url: &str) -> Result<reqwest::Url, String> {
        reqwest::Url::parse(url).map_err(|e| format!("invalid URL: {e}"))
    }

    /// Publishes `delivery` to the broker its endpoint's URL names
    /// (`crate::brokers`), signed and with the headers an HTTP request of it has.
    async fn publish(
        &self,
        delivery: &ClaimedDelivery,
        broker: &Broker,
        body: &[u8],
        timestamp: i64,
        started: Instant,
    ) -> SendResult {
        // A broker is reached directly: with an egress proxy (through which
        // alone this deployment reaches out) it is refused, never sent around
        // it — unless it is an HTTP API, which goes through the proxy.
        if self.proxied.is_some() && !broker.is_http() {
            return SendResult::rejected(
                format!(
                    "{} endpoints are not sent through the egress proxy, which this deployment uses for every destination",
                    broker.name()
                ),
                started,
            );
        }
        let id = delivery.event_id.as_str();
        let destination = &delivery.destination;
        let signature = destination.signing.signature_header(id, timestamp, body);
        let headers = request_headers(RequestParts {
            custom: &[],
            event_id: id,
            timestamp,
            signature: &signature,
            ordering: delivery.ordering_key.as_deref().zip(delivery.sequence),
            endpoint_sequence: delivery.endpoint_sequence,
            batch_size: None,
        });
        let message = Message {
            delivery_id: delivery.id.as_str(),
            timestamp,
            ordering_key: delivery.ordering_key.as_deref(),
            headers,
            body,
        };
        let basic = destination.auth.as_deref().and_then(|a| a.basic.as_ref());
        // An HTTP API is checked as an HTTP destination is, before the request.
        if let Broker::Aws(target) = broker {
            let checked = match Self::parse_url(&target.api_url()) {
                Ok(api) => self.check_destination(&api).await,
                Err(message) => Err((TransportError::Connect, message)),
            };
            if let Err((kind, message)) = checked {
                return SendResult::failed(kind, message, started, None);
            }
        }
        self.brokers
            .send(
                &self.client,
                &destination.url,
                broker,
                basic,
                message,
                signature.clone(),
                self.allow_private,
                self.settings.request_timeout,
            )
            .await
    }

    /// Sends one signed attempt of `delivery` to its endpoint's `url` (from
    /// [`Self::parse_url`]), stamped with `timestamp` (unix seconds).
    pub async fn send(
        &self,
        delivery: &ClaimedDelivery,
        url: Result<reqwest::Url, String>,
        timestamp: i64,
    ) -> SendResult {
        let started = Instant::now();
        let url = match url {
            Ok(url) => url,
            Err(message) => {
                return SendResult::failed(TransportError::Connect, message, started, None)
            }
        };
        if url.scheme() == "mailto" {
            return match &self.mailer {
                Some(mailer) => {
                    let message = notify::message(&delivery.body);
                    // The address as stored (not as a URL reads it).
                    let to = notify::mail_address(&delivery.destination.url).unwrap_or_default();
                    mailer.send(to, &message, delivery.event_id.as_str()).await
                }
                None => SendResult::failed(
                    TransportError::Connect,
                    "no SMTP server is configured (smtp_url)".into(),
                    started,
                    None,
                ),
            };
        }
        // The envelope as sent: with the endpoint's number in it, if it wants it.
        let body: Arc<[u8]> = match (delivery.destination.seq_in_body, delivery.endpoint_sequence) {
            (true, Some(seq)) => model::numbered(&delivery.body, seq).into(),
            _ => delivery.body.clone(),
        };
        let broker = Broker::of(&url).ok().flatten();
        let kind = match broker {
            Some(_) => transform::Kind::Broker,
            None => transform::Kind::Http,
        };
        let request = match self.transformed(delivery, kind, started).await {
            Ok(request) => request,
            Err(result) => return result,
        };
        let mut result = match (&broker, &request) {
            (Some(broker), _) => {
                let body = request.as_ref().map_or(&body[..], |r| &r.body);
                self.publish(delivery, broker, body, timestamp, started)
                    .await
            }
            (None, None) => {
                self.post(delivery, None, url, body, &[], timestamp, started)
                    .await
            }
            (None, Some(request)) => {
                let url = match &request.url {
                    Some(url) => match Self::parse_url(url) {
                        Ok(url) => url,
                        Err(message) => {
                            return SendResult::failed(
                                TransportError::Connect,
                                message,
                                started,
                                None,
                            )
                        }
                    },
                    None => url,
                };
                let body = request.body.clone().into();
                self.post(
                    delivery,
                    None,
                    url,
                    body,
                    &request.headers,
                    timestamp,
                    started,
                )
                .await
            }
        };
        result.transformed = request.map(|request| Transformed {
            body: shown(&request.body),
            url: request.url,
            header_names: request.headers.into_iter().map(|(name, _)| name).collect(),
            skipped: false,
        });
        result
    }

    /// What `delivery` becomes under its endpoint's transform: `None` without
    /// one; a finished attempt when the transform failed or skipped it.
    async fn transformed(
        &self,
        delivery: &ClaimedDelivery,
        kind: transform::Kind,
        started: Instant,
    ) -> Result<Option<transform::Request>, SendResult> {
        let destination = &delivery.destination;
        let program = match &destination.transform {
            None => return Ok(None),
            Some(Transform::Preset(format)) => {
                return Ok(Some(transform::preset(*format, &delivery.body)))
            }
            Some(Transform::Program(program)) => program,
        };
        let input = transform::input(
            &delivery.body,
            delivery.event_id.as_str(),
            delivery.endpoint_sequence,
            EndpointFacts {
                id: delivery.endpoint_id.as_str(),
                url: &destination.url,
                description: &destination.description,
            },
        );
        let input = serde_json::value::RawValue::from_string(input).expect("the input is JSON");
        match self.transforms.run(program, &input).await {
            Ok(outputs) => match transform::read_output(&outputs, kind, self.allow_private) {
                Ok(Output::Send(request)) => Ok(Some(request)),
                Ok(Output::Skip) => Err(SendResult::skipped(started)),
                Err(said) => Err(SendResult::transform_failed(said, false, started)),
            },
            Err(hookline_transform::Error::Program(error)) => Err(SendResult::transform_failed(
                error.to_string(),
                false,
                started,
            )),
            Err(hookline_transform::Error::TooSlow(error)) => Err(SendResult::transform_failed(
                error.to_string(),
                true,
                started,
            )),
            // Not the program's fault, nor the receiver's: tried again later.
            Err(error @ hookline_transform::Error::Unavailable(_)) => Err(SendResult {
                outcome: Outcome::TransformUnavailable,
                ..SendResult::failed(TransportError::Io, error.to_string(), started, None)
            }),
        }
    }

    /// Sends one signed request carrying `deliveries` — all of one batching
    /// endpoint, in order — as a JSON array of their envelopes
    /// (`hookline_core::batch`), identified by `id`; its answer is every
    /// member's.
    pub async fn send_batch(
        &self,
        deliveries: &[ClaimedDelivery],
        id: &BatchId,
        url: Result<reqwest::Url, String>,
        timestamp: i64,
    ) -> SendResult {
        let started = Instant::now();
        let first = deliveries.first().expect("a batch has members");
        let url = match url {
            Ok(url) => url,
            Err(message) => {
                return SendResult::failed(TransportError::Connect, message, started, None)
            }
        };
        let elements: Vec<Vec<u8>> = deliveries
            .iter()
            .map(|d| batch::element(&d.body, d.event_id.as_str(), d.endpoint_sequence))
            .collect();
        let body: Arc<[u8]> = batch::body(elements.iter().map(Vec::as_slice)).into();
        let size = deliveries.len() as u32;
        self.post(
            first,
            Some((id.as_str(), size)),
            url,
            body,
            &[],
            timestamp,
            started,
        )
        .await
    }

    /// POSTs `body`, signed, to `url` (checked by the guard), with the
    /// endpoint's headers and then `extra` (a transform's). A batch request
    /// (`batch`: its id and size) is identified by the batch's id, and carries
    /// no one delivery's ordering or number in its headers.
    #[allow(clippy::too_many_arguments)]
    async fn post(
        &self,
        delivery: &ClaimedDelivery,
        batch: Option<(&str, u32)>,
        url: reqwest::Url,
        body: Arc<[u8]>,
        extra: &[(String, String)],
        timestamp: i64,
        started: Instant,
    ) -> SendResult {
        let id = batch.map_or(delivery.event_id.as_str(), |(id, _)| id);
        let destination = &delivery.destination;
        if let Err((kind, message)) = self.check_destination(&url).await {
            return SendResult::failed(kind, message, started, None);
        }
        let auth = destination.auth.as_deref();
        let client = match self.client_for(auth.and_then(|a| a.tls.as_ref())) {
            Ok(client) => client,
            Err(message) => return SendResult::failed(TransportError::Tls, message, started, None),
        };
        let oauth2 = auth.and_then(|a| a.oauth2.as_ref());
        let mut authorization = match oauth2 {
            Some(oauth2) => match self.token(&client, oauth2, None).await {
                Ok(token) => Some(token),
                Err(message) => {
                    return SendResult::failed(TransportError::AuthError, message, started, None)
                }
            },
            None => None,
        };
        // What is signed is what is sent (a transform's body, if any).
        let signature = destination.signing.signature_header(id, timestamp, &body);
        // The endpoint's own headers first, then a transform's (which win
        // over one of the same name); Hookline's cannot be among them
        // (refused: hookline_core::custom_headers).
        let custom: Vec<(String, String)>;
        let custom = if extra.is_empty() {
            &destination.headers[..]
        } else {
            custom = destination
                .headers
                .iter()
                .filter(|(name, _)| !extra.iter().any(|(added, _)| added == name))
                .chain(extra)
                .cloned()
                .collect();
            &custom[..]
        };
        let sent = request_headers(RequestParts {
            custom,
            event_id: id,
            timestamp,
            signature: &signature,
            ordering: delivery.ordering_key.as_deref().zip(delivery.sequence),
            endpoint_sequence: delivery.endpoint_sequence,
            batch_size: batch.map(|(_, size)| size),
        });
        let static_authorization = auth.and_then(OutboundAuth::static_authorization);
        let request = |token: Option<&str>| {
            let mut request = client.post(url.clone());
            let authorization = match token {
                Some(token) => Some(format!("Bearer {token}")),
                None => static_authorization.clone(),
            };
            for (name, value) in &sent {
                // The endpoint's authentication wins over a custom header of that name.
                if authorization.is_none() || !name.eq_ignore_ascii_case("authorization") {
                    request = request.header(*name, value.as_ref());
                }
            }
            if let Some(authorization) = authorization {
                request = request.header("authorization", authorization);
            }
            request.body(bytes::Bytes::from_owner(body.clone()))
        };

        let mut response = match request(authorization.as_deref()).send().await {
            Ok(response) => response,
            Err(error) => {
                let kind = transport_error_kind(&error);
                return SendResult::failed(kind, error_chain(&error), started, Some(signature));
            }
        };
        // A 401 with an OAuth2 token: the token may have been revoked or expired
        // early. One new token, one more request; its answer is the attempt's.
        if let (401, Some(oauth2)) = (response.status().as_u16(), oauth2) {
            authorization = match self.token(&client, oauth2, authorization.as_deref()).await {
                Ok(token) => Some(token),
                Err(message) => {
                    return SendResult::failed(
                        TransportError::AuthError,
                        format!("the receiver answered 401; {message}"),
                        started,
                        Some(signature),
                    )
                }
            };
            response = match request(authorization.as_deref()).send().await {
                Ok(response) => response,
                Err(error) => {
                    let kind = transport_error_kind(&error);
                    return SendResult::failed(kind, error_chain(&error), started, Some(signature));
                }
            };
        }
        let response_headers = kept_headers(response.headers());
        let status = response.status().as_u16();
        let retry_after = response
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let mut body = Vec::new();
        let mut error = None;
        let mut truncated = false;
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let room = self.max_response_body_bytes - body.len();
                    truncated = chunk.len() > room;
                    body.extend_from_slice(&chunk[..chunk.len().min(room)]);
                    if body.len() >= self.max_response_body_bytes {
                        // Exactly at the limit: cut if the length says more follows
                        // (never wait for a receiver that holds its body open).
                        truncated = truncated
                            || response
                                .content_length()
                                .is_none_or(|length| length > body.len() as u64);
                        break;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
        }
        // A status line arrived, so the receiver answered; a body cut short by the
        // timeout still counts as that answer, with the error noted.
        SendResult {
            outcome: Outcome::Response {
                status,
                retry_after,
            },
            status: Some(status),
            response_body: Some(printable_body(&body)),
            error: error.map(|e| (transport_error_kind(&e), error_chain(&e))),
            duration: started.elapsed(),
            signature: Some(signature),
            response_headers,
            response_truncated: truncated,
            transformed: None,
        }
    }
}

/// A transformed body as the attempt log shows it: text, cut at
/// [`MAX_SHOWN_BODY`] bytes on a character boundary.
fn shown(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut end = text.len().min(MAX_SHOWN_BODY);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// The response headers an attempt keeps: in order, names lower-case (as the
/// HTTP library gives them), values as text; at most [`MAX_RESPONSE_HEADERS`]
/// and [`MAX_RESPONSE_HEADER_BYTES`].
fn kept_headers(headers: &reqwest::header::HeaderMap) -> Vec<(String, String)> {
    let mut kept = Vec::new();
    let mut bytes = 0;
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes());
        let value = if value.contains('\0') {
            value.replace('\0', "\u{fffd}")
        } else {
            value.into_owned()
        };
        bytes += name.as_str().len() + value.len();
        if kept.len() == MAX_RESPONSE_HEADERS || bytes > MAX_RESPONSE_HEADER_BYTES {
            break;
        }
        kept.push((name.as_str().to_owned(), value));
    }
    kept
}

/// The response body as kept in the attempt log: UTF-8 (invalid sequences and NUL
/// become U+FFFD), so any receiver's answer is stored alike on both engines
/// (PostgreSQL's `text` cannot hold NUL).
fn printable_body(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    if text.contains('\0') {
        text.replace('\0', "\u{fffd}")
    } else {
        text.into_owned()
    }
}

fn literal_ip(url: &reqwest::Url) -> Option<IpAddr> {
    match url.host()? {
        url::Host::Ipv4(v4) => Some(IpAddr::V4(v4)),
        url::Host::Ipv6(v6) => Some(IpAddr::V6(v6)),
        url::Host::Domain(_) => None,
    }
}

/// Maps a reqwest failure onto the classifier's transport errors.
pub(crate) fn transport_error_kind(error: &reqwest::Error) -> TransportError {
    if error.is_timeout() {
        return TransportError::Timeout;
    }
    let mut source = error.source();
    while let Some(cause) = source {
        if cause.is::<ForbiddenDestination>() {
            return TransportError::DestinationForbidden;
        }
        if cause.is::<DnsFailure>() {
            return TransportError::Dns;
        }
        if cause.is::<std::io::Error>() {
            let io = cause.downcast_ref::<std::io::Error>().expect("checked");
            if io.kind() == std::io::ErrorKind::TimedOut {
                return TransportError::Timeout;
            }
        }
        let text = cause.to_string().to_ascii_lowercase();
        if text.contains("certificate") || text.contains("tls") || text.contains("handshake") {
            return TransportError::Tls;
        }
        source = cause.source();
    }
    if error.is_connect() {
        TransportError::Connect
    } else {
        TransportError::Io
    }
}

/// The error with its causes, `a: b: c`, for the attempt row.
pub(crate) fn error_chain(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    async fn resolve(allow_private: bool, name: &str) -> Result<Vec<SocketAddr>, String> {
        resolve_trusting(allow_private, None, name).await
    }

    async fn resolve_trusting(
        allow_private: bool,
        trusted: Option<&str>,
        name: &str,
    ) -> Result<Vec<SocketAddr>, String> {
        GuardedResolver {
            allow_private,
            trusted: trusted.map(str::to_owned),
        }
        .resolve(Name::from_str(name).unwrap())
        .await
        .map(|addrs| addrs.collect())
        .map_err(|e| e.to_string())
    }

    #[tokio::test]
    async fn names_resolving_to_loopback_are_refused_unless_allowed() {
        let refused = resolve(false, "localhost").await.unwrap_err();
        assert_eq!(refused, ForbiddenDestination.to_string());
        let allowed = resolve(true, "localhost").await.unwrap();
        assert!(allowed.iter().all(|a| a.ip().is_loopback()) && !allowed.is_empty());
    }

    #[tokio::test]
    async fn the_egress_proxys_own_host_is_the_operators_and_resolves_unchecked() {
        let proxy = resolve_trusting(false, Some("localhost"), "localhost")
            .await
            .unwrap();
        assert!(proxy.iter().all(|a| a.ip().is_loopback()) && !proxy.is_empty());
        let other = resolve_trusting(false, Some("proxy.internal"), "localhost")
            .await
            .unwrap_err();
        assert_eq!(other, ForbiddenDestination.to_string());
    }

    #[test]
    fn literal_addresses_are_recognised() {
        let v4 = reqwest::Url::parse("http://127.0.0.1:8080/x").unwrap();
        let v6 = reqwest::Url::parse("http://[::1]/x").unwrap();
        let name = reqwest::Url::parse("http://example.com/x").unwrap();
        assert_eq!(literal_ip(&v4), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(literal_ip(&v6), Some("::1".parse().unwrap()));
        assert_eq!(literal_ip(&name), None);
    }
}
