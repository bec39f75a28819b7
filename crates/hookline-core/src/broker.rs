//! Destinations that are not HTTP: message brokers, each named by its
//! endpoint's URL scheme.
//!
//! An endpoint whose URL is `redis://…`, `nats://…`, `amqp://…`, `sqs://…`,
//! `sns://…` or `eventbridge://…` delivers into that broker instead of
//! POSTing: everything else an endpoint has
//! (event types, filters, ordering keys, breakers, rate limits, retries, the
//! dead-letter queue, the attempt log) applies unchanged. This module reads
//! such a URL into the place its messages go ([`Broker`]), once, for the API
//! (checked when saved) and the dispatcher (where it connects). Adding a
//! kind is one variant here and one file in `hookline-dispatch/src/brokers/`.

use crate::destination::InvalidUrl;

/// Where an endpoint's messages go, when that is a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broker {
    Redis(RedisStream),
    Nats(NatsSubject),
    Amqp(AmqpExchange),
    /// Amazon SQS, SNS and EventBridge: HTTPS APIs, reached as HTTP destinations are.
    Aws(AwsTarget),
}

impl Broker {
    /// The broker a URL names, `None` when its scheme is no broker's, or why
    /// it names no place a broker could take messages.
    pub fn of(url: &url::Url) -> Result<Option<Self>, InvalidUrl> {
        Ok(Some(match url.scheme() {
            "redis" => Self::Redis(RedisStream::of(url)?),
            "nats" => Self::Nats(NatsSubject::of(url)?),
            "amqp" => Self::Amqp(AmqpExchange::of(url)?),
            "sqs" | "sqs+http" | "sns" | "sns+http" | "eventbridge" | "eventbridge+http" => {
                Self::Aws(AwsTarget::of(url)?)
            }
            _ => return Ok(None),
        }))
    }

    /// Every scheme that names a broker ([`Broker::of`] reads each).
    pub const SCHEMES: &[&str] = &[
        "redis",
        "nats",
        "amqp",
        "sqs",
        "sqs+http",
        "sns",
        "sns+http",
        "eventbridge",
        "eventbridge+http",
    ];

    /// Whether an endpoint URL (as stored) names a broker.
    pub fn is_broker_url(raw: &str) -> bool {
        raw.split_once("://")
            .is_some_and(|(scheme, _)| Self::SCHEMES.contains(&scheme))
    }

    /// The host and port connected to.
    pub fn address(&self) -> (&str, u16) {
        match self {
            Self::Redis(target) => (&target.host, target.port),
            Self::Nats(target) => (&target.host, target.port),
            Self::Amqp(target) => (&target.host, target.port),
            Self::Aws(target) => (&target.host, target.port),
        }
    }

    /// The broker's name, as the attempt log and errors say it.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Redis(_) => "Redis",
            Self::Nats(_) => "NATS",
            Self::Amqp(_) => "RabbitMQ",
            Self::Aws(target) => match target.service {
                AwsService::Sqs { .. } => "Amazon SQS",
                AwsService::Sns { .. } => "Amazon SNS",
                AwsService::EventBridge { .. } => "Amazon EventBridge",
            },
        }
    }

    /// Whether it is reached over HTTP (through the egress proxy, if any).
    pub fn is_http(&self) -> bool {
        matches!(self, Self::Aws(_))
    }
}

/// A broker URL's host, read as an http URL's is: the name DNS gets is the
/// one checked (percent-decoded, punycode), and an address is an address in
/// every spelling (its host is opaque to the URL parser otherwise, since
/// these are not special schemes).
pub(crate) fn as_http(url: &url::Url) -> Result<url::Url, InvalidUrl> {
    let host = url.host_str().filter(|h| !h.is_empty());
    url::Url::parse(&format!("http://{}/", host.ok_or(InvalidUrl::NoHost)?))
        .map_err(|e| InvalidUrl::Malformed(e.to_string()))
}

/// The host to connect to, without an IPv6 literal's brackets.
fn host(url: &url::Url) -> Result<String, InvalidUrl> {
    let http = as_http(url)?;
    let host = http.host_str().ok_or(InvalidUrl::NoHost)?;
    Ok(host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned())
}

/// The URL's query as exactly the parameters a kind takes (each at most
/// once), or why not.
fn parameters<'a>(
    url: &url::Url,
    names: &[&'a str],
    wrong: &dyn Fn(&str) -> InvalidUrl,
) -> Result<Vec<(&'a str, String)>, InvalidUrl> {
    let mut found: Vec<(&'a str, String)> = Vec::new();
    for (name, value) in url.query_pairs() {
        match names.iter().find(|n| **n == name) {
            Some(known) if !found.iter().any(|(n, _)| n == known) => {
                found.push((known, value.into_owned()));
            }
            Some(_) => return Err(wrong(&format!("names ?{name}= once"))),
            None => {
                return Err(wrong(&format!(
                    "takes {}, nothing else",
                    names
                        .iter()
                        .map(|n| format!("`{n}`"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                )))
            }
        }
    }
    Ok(found)
}

fn take(found: &mut Vec<(&str, String)>, name: &str) -> Option<String> {
    let at = found.iter().position(|(n, _)| *n == name)?;
    Some(found.remove(at).1)
}

fn wrong_for(scheme: &'static str) -> impl Fn(&str) -> InvalidUrl {
    move |what| InvalidUrl::Broker(format!("a {scheme}:// url {what}"))
}

/// Where a `redis://host[:port][/db]?stream=<key>[&maxlen=<n>]` endpoint
/// adds its deliveries: `XADD <key> MAXLEN ~ <n> * …` in database `db`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedisStream {
    pub host: String,
    pub port: u16,
    pub db: u32,
    pub stream: String,
    /// The stream's length cap (approximate, as `MAXLEN ~` trims).
    pub maxlen: u64,
}

impl RedisStream {
    /// Redis's own port.
    pub const PORT: u16 = 6379;
    /// The length cap when the URL names none.
    pub const DEFAULT_MAXLEN: u64 = 100_000;
    const MAX_KEY: usize = 256;

    /// The stream a `redis://` URL names, or why it names none.
    pub fn of(url: &url::Url) -> Result<Self, InvalidUrl> {
        let wrong = wrong_for("redis");
        let host = host(url)?;
        let db = match url.path().trim_start_matches('/') {
            "" => 0,
            db => db
                .parse::<u32>()
                .ok()
                .filter(|db| *db < 16)
                .ok_or_else(|| wrong("names its database as /0 to /15, or not at all"))?,
        };
        let mut found = parameters(url, &["stream", "maxlen"], &wrong)?;
        let stream = take(&mut found, "stream")
            .filter(|s| !s.is_empty() && s.len() <= Self::MAX_KEY)
            .ok_or_else(|| wrong("names its stream: ?stream=<key of 1 to 256 bytes>"))?;
        let maxlen = match take(&mut found, "maxlen") {
            None => Self::DEFAULT_MAXLEN,
            Some(n) => n
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=1_000_000_000).contains(n))
                .ok_or_else(|| wrong("caps its stream with maxlen=1 to 1000000000"))?,
        };
        Ok(Self {
            host,
            port: url.port().unwrap_or(Self::PORT),
            db,
            stream,
            maxlen,
        })
    }
}

/// Where a `nats://host[:port]?subject=<subject>` endpoint publishes: a
/// subject that a JetStream stream captures, which acknowledges each message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsSubject {
    pub host: String,
    pub port: u16,
    pub subject: String,
}

impl NatsSubject {
    /// NATS's own port.
    pub const PORT: u16 = 4222;
    const MAX_SUBJECT: usize = 256;

    /// The subject a `nats://` URL names, or why it names none: dot-separated
    /// tokens of printable ASCII, without the wildcards `*` and `>` (a
    /// message goes to one subject).
    pub fn of(url: &url::Url) -> Result<Self, InvalidUrl> {
        let wrong = wrong_for("nats");
        let host = host(url)?;
        if !matches!(url.path(), "" | "/") {
            return Err(wrong("has no path: its subject is ?subject=<subject>"));
        }
        let mut found = parameters(url, &["subject"], &wrong)?;
        let token = |t: &str| {
            !t.is_empty() && t != "*" && t != ">" && t.bytes().all(|b| b.is_ascii_graphic())
        };
        let subject = take(&mut found, "subject")
            .filter(|s| s.len() <= Self::MAX_SUBJECT && s.split('.').all(token))
            .ok_or_else(|| {
                wrong(
                    "names one subject: ?subject=<tokens separated by dots, no spaces or wildcards, at most 256 bytes>",
                )
            })?;
        Ok(Self {
            host,
            port: url.port().unwrap_or(Self::PORT),
            subject,
        })
    }
}

/// Where an `amqp://host[:port][/vhost]?exchange=<name>&routing_key=<key>`
/// endpoint publishes (AMQP 0-9-1, as RabbitMQ speaks it): to `exchange` (the
/// default exchange when absent, whose routing key is a queue's name) with
/// `routing_key`, mandatory (a message no queue takes is returned, not lost)
/// and persistent, confirmed by the broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmqpExchange {
    pub host: String,
    pub port: u16,
    /// `/` when the URL's path is empty or `/`; else its path, percent-decoded
    /// (`/%2F` is `/` as well).
    pub vhost: String,
    pub exchange: String,
    pub routing_key: String,
}

impl AmqpExchange {
    /// AMQP's own port.
    pub const PORT: u16 = 5672;
    /// AMQP's short strings: names, keys, virtual hosts.
    const MAX_NAME: usize = 255;

    /// The exchange and routing key an `amqp://` URL names, or why it names none.
    pub fn of(url: &url::Url) -> Result<Self, InvalidUrl> {
        let wrong = wrong_for("amqp");
        let host = host(url)?;
        let path = url.path().strip_prefix('/').unwrap_or_default();
        let vhost = match path {
            "" => "/".to_owned(),
            path => percent_encoding::percent_decode_str(path)
                .decode_utf8()
                .map_err(|_| wrong("names its virtual host in UTF-8"))?
                .into_owned(),
        };
        if vhost.len() > Self::MAX_NAME || path.contains('/') {
            return Err(wrong(
                "names one virtual host of at most 255 bytes (write / inside it as %2F)",
            ));
        }
        let mut found = parameters(url, &["exchange", "routing_key"], &wrong)?;
        let exchange = take(&mut found, "exchange").unwrap_or_default();
        let routing_key = take(&mut found, "routing_key").unwrap_or_default();
        if exchange.len() > Self::MAX_NAME || routing_key.len() > Self::MAX_NAME {
            return Err(wrong(
                "names an exchange and a routing key of at most 255 bytes",
            ));
        }
        if exchange.is_empty() && routing_key.is_empty() {
            return Err(wrong(
                "names its ?exchange=<name> (and &routing_key=<key>), or a queue of the default exchange as ?routing_key=<queue>",
            ));
        }
        Ok(Self {
            host,
            port: url.port().unwrap_or(Self::PORT),
            vhost,
            exchange,
            routing_key,
        })
    }
}

/// An Amazon SQS queue, SNS topic or EventBridge bus, reached over its HTTPS API with
/// Signature Version 4 (`crate::sigv4`; the access key is the endpoint's
/// `auth.basic`):
/// - `sqs://sqs.<region>.amazonaws.com/<account>/<queue>`: the queue's URL
///   as AWS gives it, with `sqs` for `https`;
/// - `sns://sns.<region>.amazonaws.com/?topic=<topic ARN>`;
/// - `eventbridge://events.<region>.amazonaws.com/?bus=<bus>[&source=<source>]`.
///
/// The region is the host's (`<service>.<region>.amazonaws.com`), the ARN's,
/// or `?region=`. `sqs+http://`, `sns+http://` and `eventbridge+http://` speak plain HTTP, for a
/// local stand-in (LocalStack, moto): they are refused unless private
/// destinations are allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsTarget {
    pub host: String,
    pub port: u16,
    /// `https`, or `http` for a local stand-in.
    pub scheme: &'static str,
    pub region: String,
    pub service: AwsService,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AwsService {
    /// `queue_url` is the queue's URL over `scheme`; a FIFO queue's name ends
    /// in `.fifo`.
    Sqs {
        queue_url: String,
        fifo: bool,
    },
    Sns {
        topic_arn: String,
        fifo: bool,
    },
    /// An event bus (its name or ARN); `source` is each event's source
    /// (`hookline` unless named), its detail type the event's type.
    EventBridge {
        bus: String,
        source: String,
    },
}

impl AwsTarget {
    /// The URL its API is called at.
    pub fn api_url(&self) -> String {
        format!("{}://{}:{}/", self.scheme, self.bracketed_host(), self.port)
    }

    /// The `host` header's value (the port only when it is not the scheme's).
    pub fn host_header(&self) -> String {
        match (self.scheme, self.port) {
            ("https", 443) | ("http", 80) => self.bracketed_host(),
            (_, port) => format!("{}:{port}", self.bracketed_host()),
        }
    }

    fn bracketed_host(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]", self.host),
            false => self.host.clone(),
        }
    }

    /// The service's signing name.
    pub fn signing_name(&self) -> &'static str {
        match self.service {
            AwsService::Sqs { .. } => "sqs",
            AwsService::Sns { .. } => "sns",
            AwsService::EventBridge { .. } => "events",
        }
    }

    fn of(url: &url::Url) -> Result<Self, InvalidUrl> {
        let (kind, scheme) = url
            .scheme()
            .split_once('+')
            .unwrap_or((url.scheme(), "https"));
        let wrong = |what: &str| InvalidUrl::Broker(format!("a {}:// url {what}", url.scheme()));
        let host = host(url)?;
        let port = url
            .port()
            .unwrap_or(if scheme == "https" { 443 } else { 80 });
        let names: &[&str] = match kind {
            "sqs" => &["region"],
            "sns" => &["region", "topic"],
            _ => &["region", "bus", "source"],
        };
        let mut found = parameters(url, names, &wrong)?;
        // The API's host: sqs.<region>…, sns.<region>…, events.<region>….
        let prefix = match kind {
            "eventbridge" => "events",
            kind => kind,
        };
        let from_host = host
            .strip_prefix(&format!("{prefix}."))
            .and_then(|rest| rest.strip_suffix(".amazonaws.com"))
            .filter(|region| !region.is_empty() && !region.contains('.'))
            .map(str::to_owned);
        let named = take(&mut found, "region");
        let region_ok = |r: &String| {
            (1..=32).contains(&r.len())
                && r.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        let no_path = |what: &str| match url.path() {
            "" | "/" => Ok(()),
            _ => Err(wrong(&format!("has no path: {what}"))),
        };
        let (service, from_arn) = match kind {
            "sqs" => {
                let segments: Vec<&str> = url.path().trim_start_matches('/').split('/').collect();
                let [account, queue] = segments.as_slice() else {
                    return Err(wrong("is the queue's URL: /<account id>/<queue name>"));
                };
                let name_ok = (1..=80).contains(&queue.len())
                    && queue
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.');
                if account.len() != 12 || !account.bytes().all(|b| b.is_ascii_digit()) || !name_ok {
                    return Err(wrong(
                        "is the queue's URL: /<12-digit account id>/<queue name of 1 to 80 letters, digits, - and _>",
                    ));
                }
                let queue_url = format!(
                    "{scheme}://{}{}/{account}/{queue}",
                    host,
                    url.port().map(|p| format!(":{p}")).unwrap_or_default()
                );
                let fifo = queue.ends_with(".fifo");
                (AwsService::Sqs { queue_url, fifo }, None)
            }
            "sns" => {
                no_path("its topic is ?topic=<topic ARN>")?;
                let arn = take(&mut found, "topic")
                    .ok_or_else(|| wrong("names its topic: ?topic=<topic ARN>"))?;
                // arn:<partition>:sns:<region>:<account>:<name>
                let parts: Vec<&str> = arn.split(':').collect();
                let region = match parts.as_slice() {
                    ["arn", _, "sns", region, account, name]
                        if account.len() == 12 && !name.is_empty() && name.len() <= 256 =>
                    {
                        region.to_string()
                    }
                    _ => {
                        return Err(wrong(
                            "names its topic by ARN: arn:aws:sns:<region>:<account id>:<name>",
                        ))
                    }
                };
                let fifo = arn.ends_with(".fifo");
                (
                    AwsService::Sns {
                        topic_arn: arn,
                        fifo,
                    },
                    Some(region),
                )
            }
            _ => {
                no_path("its bus is ?bus=<event bus name or ARN>")?;
                let bus = take(&mut found, "bus")
                    .ok_or_else(|| wrong("names its event bus: ?bus=<name or ARN>"))?;
                let bus_name_ok = |n: &str| {
                    (1..=256).contains(&n.len())
                        && n.bytes().all(|b| {
                            b.is_ascii_alphanumeric() || matches!(b, b'/' | b'.' | b'_' | b'-')
                        })
                };
                // arn:<partition>:events:<region>:<account>:event-bus/<name>
                let from_bus_arn = match bus.split(':').collect::<Vec<_>>().as_slice() {
                    ["arn", _, "events", region, account, resource] => match resource
                        .strip_prefix("event-bus/")
                    {
                        Some(name) if account.len() == 12 && bus_name_ok(name) => {
                            Some(region.to_string())
                        }
                        _ => return Err(wrong(
                            "names its bus by ARN as arn:aws:events:<region>:<account id>:event-bus/<name>",
                        )),
                    },
                    _ if bus_name_ok(&bus) => None,
                    _ => {
                        return Err(wrong(
                            "names its bus: 1 to 256 letters, digits and / . _ -, or its ARN",
                        ))
                    }
                };
                let name_ok = |n: &String| {
                    (1..=256).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_graphic())
                };
                let source = take(&mut found, "source").unwrap_or_else(|| "hookline".to_owned());
                if !name_ok(&source) || source.starts_with("aws.") {
                    return Err(wrong(
                        "names a source of 1 to 256 characters, not aws.*: &source=<source>",
                    ));
                }
                (AwsService::EventBridge { bus, source }, from_bus_arn)
            }
        };
        if let (Some(named), Some(arn)) = (&named, &from_arn) {
            if named != arn {
                return Err(wrong(&format!(
                    "names region {named}, and its ARN region {arn}: name one"
                )));
            }
        }
        let region = named
            .or(from_arn)
            .or(from_host)
            .filter(region_ok)
            .ok_or_else(|| {
                wrong("names its region: its host is <service>.<region>.amazonaws.com, or ?region=<region>")
            })?;
        Ok(Self {
            host,
            port,
            scheme: if scheme == "https" { "https" } else { "http" },
            region,
            service,
        })
    }

    /// Whether it speaks plain HTTP (a local stand-in).
    pub fn is_plain_http(&self) -> bool {
        self.scheme == "http"
    }
}

/// The message group of a FIFO queue or topic for an event: its ordering
/// key when AWS takes it as one (1 to 128 printable ASCII characters, no
/// space), else `h-` and the key's SHA-256 in hex (the same for every event
/// of the key, so its order holds); `hookline` for events without a key.
pub fn message_group(ordering_key: Option<&str>) -> String {
    use sha2::{Digest, Sha256};
    match ordering_key {
        None => "hookline".to_owned(),
        Some(key)
            if (1..=128).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            key.to_owned()
        }
        Some(key) => format!(
            "h-{}",
            Sha256::digest(key.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::destination::{check_endpoint_url, check_url};

    fn broker(raw: &str) -> Result<Option<Broker>, InvalidUrl> {
        Broker::of(&url::Url::parse(raw).unwrap())
    }

    #[test]
    fn a_redis_url_names_its_stream() {
        let stream = |raw: &str| RedisStream::of(&url::Url::parse(raw).unwrap());
        assert_eq!(
            stream("redis://cache.example.com/2?stream=orders&maxlen=500"),
            Ok(RedisStream {
                host: "cache.example.com".into(),
                port: 6379,
                db: 2,
                stream: "orders".into(),
                maxlen: 500,
            })
        );
        let plain = stream("redis://10.0.0.5:6380?stream=a%20b").unwrap();
        assert_eq!(
            (plain.port, plain.db, plain.stream.as_str()),
            (6380, 0, "a b")
        );
        assert_eq!(plain.maxlen, RedisStream::DEFAULT_MAXLEN);
        for bad in [
            "redis://cache.example.com/",
            "redis://cache.example.com/?stream=",
            "redis://cache.example.com/16?stream=a",
            "redis://cache.example.com/x?stream=a",
            "redis://cache.example.com/?stream=a&maxlen=0",
            "redis://cache.example.com/?stream=a&block=1",
            "redis://cache.example.com/?stream=a&stream=b",
        ] {
            assert!(
                matches!(stream(bad), Err(InvalidUrl::Broker(_))),
                "{bad}: {:?}",
                stream(bad)
            );
        }
        // The rest of an endpoint URL's rules hold for it too.
        assert_eq!(
            check_endpoint_url("redis://:secret@cache.example.com/?stream=a", false),
            Err(InvalidUrl::Credentials)
        );
        assert_eq!(
            check_endpoint_url("redis://127.0.0.1/?stream=a", false),
            Err(InvalidUrl::Forbidden)
        );
        assert_eq!(
            check_endpoint_url("redis://2130706433/?stream=a", false),
            Err(InvalidUrl::Forbidden),
            "127.0.0.1 in decimal"
        );
        assert_eq!(
            check_endpoint_url("redis://[::1]:6380/?stream=a", false),
            Err(InvalidUrl::Forbidden)
        );
        assert!(check_endpoint_url("redis://127.0.0.1/?stream=a", true).is_ok());
        assert_eq!(
            check_endpoint_url("amqps://broker.example.com/?exchange=a", false),
            Err(InvalidUrl::Scheme)
        );
        // Only an endpoint may be a broker: an OAuth2 token URL or a chat
        // webhook is HTTP.
        for raw in [
            "redis://cache.example.com/?stream=a",
            "nats://nats.example.com/?subject=a",
            "amqp://mq.example.com/?exchange=a",
        ] {
            assert_eq!(check_url(raw, false), Err(InvalidUrl::Scheme), "{raw}");
            assert!(check_endpoint_url(raw, false).is_ok(), "{raw}");
            assert!(Broker::is_broker_url(raw), "{raw}");
        }
        assert!(!Broker::is_broker_url("https://redis.example.com/"));
        // Every scheme said to be a broker's is read as one.
        for scheme in Broker::SCHEMES {
            let raw = format!("{scheme}://broker.example.com/");
            assert!(Broker::is_broker_url(&raw), "{raw}");
            assert!(
                matches!(broker(&raw), Err(InvalidUrl::Broker(_))),
                "{raw}: {:?}",
                broker(&raw)
            );
        }
        // The name resolved is the name checked: percent-decoded, punycode.
        let host = |raw: &str| {
            RedisStream::of(&url::Url::parse(raw).unwrap())
                .unwrap()
                .host
        };
        assert_eq!(
            host("redis://b%C3%BCcher.example/?stream=a"),
            "xn--bcher-kva.example"
        );
        assert_eq!(host("redis://[::1]:6380/?stream=a"), "::1");
    }

    #[test]
    fn a_nats_url_names_one_subject() {
        assert_eq!(
            broker("nats://nats.example.com?subject=acme.orders.paid"),
            Ok(Some(Broker::Nats(NatsSubject {
                host: "nats.example.com".into(),
                port: 4222,
                subject: "acme.orders.paid".into(),
            })))
        );
        assert_eq!(
            broker("nats://10.0.0.7:4333/?subject=a")
                .unwrap()
                .unwrap()
                .address(),
            ("10.0.0.7", 4333)
        );
        for bad in [
            "nats://n.example.com/",
            "nats://n.example.com/?subject=",
            "nats://n.example.com/?subject=a.*.b",
            "nats://n.example.com/?subject=a.>",
            "nats://n.example.com/?subject=a..b",
            "nats://n.example.com/?subject=a%20b",
            "nats://n.example.com/orders?subject=a",
            "nats://n.example.com/?subject=a&queue=b",
        ] {
            assert!(
                matches!(broker(bad), Err(InvalidUrl::Broker(_))),
                "{bad}: {:?}",
                broker(bad)
            );
        }
        assert_eq!(
            check_endpoint_url("nats://127.0.0.1/?subject=a", false),
            Err(InvalidUrl::Forbidden)
        );
        assert_eq!(
            check_endpoint_url("nats://user:pw@n.example.com/?subject=a", false),
            Err(InvalidUrl::Credentials)
        );
    }

    #[test]
    fn an_amqp_url_names_its_exchange_and_routing_key() {
        let amqp = |raw: &str| match broker(raw) {
            Ok(Some(Broker::Amqp(target))) => Ok(target),
            other => Err(format!("{other:?}")),
        };
        assert_eq!(
            amqp("amqp://mq.example.com/?exchange=acme&routing_key=orders.paid"),
            Ok(AmqpExchange {
                host: "mq.example.com".into(),
                port: 5672,
                vhost: "/".into(),
                exchange: "acme".into(),
                routing_key: "orders.paid".into(),
            })
        );
        let default_exchange = amqp("amqp://mq.example.com:5673?routing_key=inbox").unwrap();
        assert_eq!(
            (
                default_exchange.port,
                default_exchange.vhost.as_str(),
                default_exchange.exchange.as_str()
            ),
            (5673, "/", "")
        );
        assert_eq!(
            amqp("amqp://mq.example.com/%2F?exchange=a").unwrap().vhost,
            "/"
        );
        assert_eq!(
            amqp("amqp://mq.example.com/prod?exchange=a").unwrap().vhost,
            "prod"
        );
        for bad in [
            "amqp://mq.example.com/",
            "amqp://mq.example.com/?exchange=&routing_key=",
            "amqp://mq.example.com/a/b?exchange=a",
            "amqp://mq.example.com/?exchange=a&mandatory=false",
        ] {
            assert!(amqp(bad).is_err(), "{bad}");
            assert!(matches!(broker(bad), Err(InvalidUrl::Broker(_))), "{bad}");
        }
        let long = format!("amqp://mq.example.com/?exchange={}", "x".repeat(256));
        assert!(matches!(broker(&long), Err(InvalidUrl::Broker(_))));
        assert_eq!(
            check_endpoint_url("amqp://[::1]/?exchange=a", false),
            Err(InvalidUrl::Forbidden)
        );
        assert_eq!(broker("https://mq.example.com/"), Ok(None));
    }

    #[test]
    fn aws_urls_name_a_queue_or_a_topic_and_a_region() {
        let aws = |raw: &str| match broker(raw) {
            Ok(Some(Broker::Aws(target))) => Ok(target),
            other => Err(format!("{other:?}")),
        };
        let queue = aws("sqs://sqs.eu-west-1.amazonaws.com/123456789012/orders").unwrap();
        assert_eq!(
            queue,
            AwsTarget {
                host: "sqs.eu-west-1.amazonaws.com".into(),
                port: 443,
                scheme: "https",
                region: "eu-west-1".into(),
                service: AwsService::Sqs {
                    queue_url: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders".into(),
                    fifo: false,
                },
            }
        );
        assert_eq!(queue.api_url(), "https://sqs.eu-west-1.amazonaws.com:443/");
        assert_eq!(queue.host_header(), "sqs.eu-west-1.amazonaws.com");
        let local =
            aws("sqs+http://127.0.0.1:5000/123456789012/orders.fifo?region=us-east-1").unwrap();
        assert_eq!(local.host_header(), "127.0.0.1:5000");
        assert_eq!(
            local.service,
            AwsService::Sqs {
                queue_url: "http://127.0.0.1:5000/123456789012/orders.fifo".into(),
                fifo: true,
            }
        );
        let bus = aws("eventbridge://events.eu-central-1.amazonaws.com/?bus=acme").unwrap();
        assert_eq!(
            (bus.region.as_str(), bus.signing_name(), &bus.service),
            (
                "eu-central-1",
                "events",
                &AwsService::EventBridge {
                    bus: "acme".into(),
                    source: "hookline".into()
                }
            )
        );
        let local =
            aws("eventbridge+http://127.0.0.1:5000/?bus=b&source=acme.orders&region=us-east-1")
                .unwrap();
        assert_eq!(local.api_url(), "http://127.0.0.1:5000/");
        let by_arn = aws(
            "eventbridge://e.example.com/?bus=arn:aws:events:eu-west-1:123456789012:event-bus/x",
        )
        .unwrap();
        assert_eq!(by_arn.region, "eu-west-1", "the ARN's region");
        let topic =
            aws("sns://sns.us-east-2.amazonaws.com/?topic=arn:aws:sns:us-east-2:123456789012:acme")
                .unwrap();
        assert_eq!(topic.region, "us-east-2");
        assert_eq!(topic.signing_name(), "sns");
        for bad in [
            "sqs://sqs.example.com/123456789012/orders",
            "sqs://sqs.eu-west-1.amazonaws.com/orders",
            "sqs://sqs.eu-west-1.amazonaws.com/1234/orders",
            "sqs://sqs.eu-west-1.amazonaws.com/123456789012/a%20b",
            "sqs://sqs.eu-west-1.amazonaws.com/123456789012/orders?topic=x",
            "sqs://sqs.eu-west-1.amazonaws.com/123456789012/orders?region=EU",
            "sns://sns.us-east-2.amazonaws.com/",
            "sns://sns.us-east-2.amazonaws.com/?topic=acme",
            "sns://sns.us-east-2.amazonaws.com/x?topic=arn:aws:sns:us-east-2:123456789012:acme",
            "eventbridge://events.eu-central-1.amazonaws.com/",
            "eventbridge://events.eu-central-1.amazonaws.com/?bus=a&source=aws.s3",
            "eventbridge://events.eu-central-1.amazonaws.com/?bus=a&topic=b",
            "eventbridge://eventbridge.example.com/?bus=a",
            "eventbridge://events.eu-central-1.amazonaws.com/?bus=a%20b",
            "eventbridge://events.eu-central-1.amazonaws.com/?bus=arn:aws:events:eu-west-1:1:event-bus/x",
            "eventbridge://e.example.com/?bus=arn:aws:events:eu-west-1:123456789012:event-bus/x&region=us-east-1",
        ] {
            assert!(
                matches!(broker(bad), Err(InvalidUrl::Broker(_))),
                "{bad}: {:?}",
                broker(bad)
            );
        }
        // A local stand-in over plain HTTP only where private destinations are.
        let raw = "sqs+http://127.0.0.1:5000/123456789012/orders?region=us-east-1";
        assert!(check_endpoint_url(raw, true).is_ok());
        assert!(matches!(
            check_endpoint_url(raw, false),
            Err(InvalidUrl::Broker(_))
        ));
        assert!(matches!(
            check_endpoint_url(
                "sns+http://stand-in.example.com/?topic=arn:aws:sns:us-east-2:123456789012:acme",
                false
            ),
            Err(InvalidUrl::Broker(_))
        ));
    }

    #[test]
    fn a_message_group_is_the_ordering_key_when_aws_takes_it() {
        assert_eq!(message_group(None), "hookline");
        assert_eq!(message_group(Some("order-42")), "order-42");
        for key in ["order 42", "commande-é", &"k".repeat(129)] {
            let group = message_group(Some(key));
            assert!(
                group.starts_with("h-") && group.len() == 66,
                "{key}: {group}"
            );
            assert_eq!(group, message_group(Some(key)), "the same for every event");
        }
        assert_ne!(message_group(Some("a b")), message_group(Some("a c")));
    }
}
