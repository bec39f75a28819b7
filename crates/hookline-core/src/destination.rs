//! Which addresses outbound webhook requests may reach.
//!
//! By default only public unicast addresses: a customer-supplied URL must not
//! become a way into our own network (SSRF) — loopback, private ranges,
//! link-local (cloud metadata at 169.254.169.254), CGNAT and the like are
//! refused. The dispatcher applies this to the addresses it actually connects
//! to, after resolution, so DNS rebinding cannot slip past it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an endpoint URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidUrl {
    #[error("url is not a valid URL: {0}")]
    Malformed(String),
    #[error("url must use http or https, or redis for a Redis stream")]
    Scheme,
    /// A `redis://` URL that does not name its stream as it should.
    #[error("{0}")]
    RedisStream(String),
    #[error("url must not contain credentials")]
    Credentials,
    #[error("url must have a host")]
    NoHost,
    #[error("url must be at most {MAX_URL} characters")]
    TooLong,
    #[error("url's host {0:?} is not a DNS name")]
    BadHost(String),
    /// A literal private, loopback or otherwise special address, or `localhost`.
    #[error("the destination is a private, loopback or otherwise non-public address")]
    Forbidden,
}

/// The longest endpoint URL.
pub const MAX_URL: usize = 2048;

/// Checks an endpoint URL: absolute http(s) with a host that DNS could have
/// (or an IP literal), no credentials, at most [`MAX_URL`] characters, and —
/// unless private destinations are allowed — not a literal special address
/// ([`is_public`]; decimal, octal and hex IPv4 forms are read as the address
/// they name) nor `localhost`. Names are checked again where the connection is
/// made, after resolution. Returns the URL as it will be stored.
pub fn check_url(raw: &str, allow_private: bool) -> Result<String, InvalidUrl> {
    check(raw, allow_private, false)
}

/// An endpoint's URL: as [`check_url`], or a `redis://` URL naming a stream
/// ([`RedisStream`]) under the same rules for its host.
pub fn check_endpoint_url(raw: &str, allow_private: bool) -> Result<String, InvalidUrl> {
    check(raw, allow_private, true)
}

fn check(raw: &str, allow_private: bool, redis: bool) -> Result<String, InvalidUrl> {
    if raw.len() > MAX_URL {
        return Err(InvalidUrl::TooLong);
    }
    let url = url::Url::parse(raw).map_err(|e| InvalidUrl::Malformed(e.to_string()))?;
    match url.scheme() {
        "http" | "https" => {}
        "redis" if redis => {
            RedisStream::of(&url)?;
        }
        _ => return Err(InvalidUrl::Scheme),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(InvalidUrl::Credentials);
    }
    // A redis:// host is opaque to the URL parser (not a special scheme): it
    // is read as an http one is, so an address is an address in every spelling.
    let as_http = match url.scheme() {
        "redis" => Some(
            url::Url::parse(&format!("http://{}/", url.host_str().unwrap_or_default()))
                .map_err(|e| InvalidUrl::Malformed(e.to_string()))?,
        ),
        _ => None,
    };
    let host = as_http
        .as_ref()
        .unwrap_or(&url)
        .host()
        .ok_or(InvalidUrl::NoHost)?;
    if let url::Host::Domain(name) = &host {
        // What DNS can resolve (international names arrive as punycode).
        let label = |l: &str| {
            (1..=63).contains(&l.len())
                && l.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        };
        if name.len() > 253 || !name.strip_suffix('.').unwrap_or(name).split('.').all(label) {
            return Err(InvalidUrl::BadHost((*name).to_owned()));
        }
    }
    if !allow_private {
        let forbidden = match host {
            url::Host::Ipv4(ip) => !is_public(IpAddr::V4(ip)),
            url::Host::Ipv6(ip) => !is_public(IpAddr::V6(ip)),
            url::Host::Domain(name) => {
                let name = name.strip_suffix('.').unwrap_or(name);
                name.eq_ignore_ascii_case("localhost") || name.ends_with(".localhost")
            }
        };
        if forbidden {
            return Err(InvalidUrl::Forbidden);
        }
    }
    Ok(url.to_string())
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
        let wrong = |what: &str| InvalidUrl::RedisStream(format!("a redis:// url {what}"));
        // Its host is opaque to the URL parser (redis is not a special
        // scheme): read as an http one is, the name DNS gets is the one checked.
        let host = url::Url::parse(&format!(
            "http://{}/",
            url.host_str().ok_or(InvalidUrl::NoHost)?
        ))
        .map_err(|e| InvalidUrl::Malformed(e.to_string()))?
        .host_str()
        .ok_or(InvalidUrl::NoHost)?
        .to_owned();
        let db = match url.path().trim_start_matches('/') {
            "" => 0,
            db => db
                .parse::<u32>()
                .ok()
                .filter(|db| *db < 16)
                .ok_or_else(|| wrong("names its database as /0 to /15, or not at all"))?,
        };
        let (mut stream, mut maxlen) = (None, Self::DEFAULT_MAXLEN);
        for (name, value) in url.query_pairs() {
            match &*name {
                "stream" if !value.is_empty() && value.len() <= Self::MAX_KEY => {
                    stream = Some(value.into_owned());
                }
                "maxlen" => {
                    maxlen = value
                        .parse::<u64>()
                        .ok()
                        .filter(|n| (1..=1_000_000_000).contains(n))
                        .ok_or_else(|| wrong("caps its stream with maxlen=1 to 1000000000"))?;
                }
                _ => {
                    return Err(wrong(
                        "takes ?stream=<key of 1 to 256 bytes> and &maxlen=<n>, nothing else",
                    ))
                }
            }
        }
        Ok(Self {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            port: url.port().unwrap_or(Self::PORT),
            db,
            stream: stream.ok_or_else(|| wrong("names its stream: ?stream=<key>"))?,
            maxlen,
        })
    }
}

/// Whether outbound requests may connect to `ip` when private destinations are not allowed.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_public_v4(v4),
            None => is_public_v6(v6),
        },
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || ip.is_multicast()
        || ip.is_documentation()
        || a == 0                              // "this network"
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 192 && b == 0 && ip.octets()[2] == 0) // IETF protocol assignments
        || (a == 198 && (b == 18 || b == 19))  // benchmarking 198.18/15
        || (a == 192 && b == 88 && ip.octets()[2] == 99) // 6to4 relay anycast
        || ip == Ipv4Addr::new(168, 63, 129, 16) // Azure's host endpoint (metadata, DNS)
        || a >= 240) // reserved
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    let first = s[0];
    // An IPv4 address carried inside: judged as that address.
    let embedded = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        is_public_v4(Ipv4Addr::new(a, b, c, d))
    };
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local fc00::/7 (AWS metadata fd00:ec2::254)
        || (first & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (first & 0xffc0) == 0xfec0 // site-local fec0::/10 (deprecated, still routed by some)
        || first == 0x2001 && s[1] == 0x0db8 // documentation 2001:db8::/32
        || (first & 0xfff0) == 0x3ff0 // documentation 3fff::/20
        || first == 0x2001 && s[1] == 0 // Teredo: tunnels to an address it hides
        || first == 0x0100 && s[1..4] == [0, 0, 0] // discard-only 100::/64
        || first == 0x0064 && s[1] == 0xff9b // NAT64 (64:ff9b::/32 and ::1/48) can reach private v4
        || first == 0x2002 && !embedded(s[1], s[2]) // 6to4 of a non-public v4
        || s[..6] == [0; 6] && !embedded(s[6], s[7])) // IPv4-compatible ::a.b.c.d
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ] {
            assert!(
                matches!(stream(bad), Err(InvalidUrl::RedisStream(_))),
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
            check_endpoint_url("amqp://broker.example.com/", false),
            Err(InvalidUrl::Scheme)
        );
        // Only an endpoint may be a stream: an OAuth2 token URL or a chat
        // webhook is HTTP.
        assert_eq!(
            check_url("redis://cache.example.com/?stream=a", false),
            Err(InvalidUrl::Scheme)
        );
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

    /// Every kind of address the guard must refuse, and public ones beside
    /// them, in one table.
    #[test]
    fn every_special_address_is_refused_and_public_ones_are_not() {
        let table: &[(&str, bool, &str)] = &[
            ("127.0.0.1", false, "IPv4 loopback"),
            ("127.255.255.254", false, "IPv4 loopback, end of range"),
            ("10.1.2.3", false, "private 10/8"),
            ("172.16.0.1", false, "private 172.16/12"),
            ("172.31.255.255", false, "private 172.16/12, end"),
            ("192.168.1.1", false, "private 192.168/16"),
            (
                "169.254.169.254",
                false,
                "link-local: AWS, GCP, Azure, OpenStack metadata",
            ),
            ("169.254.170.2", false, "link-local: ECS task metadata"),
            ("100.100.100.200", false, "CGNAT: Alibaba metadata"),
            ("100.64.0.1", false, "CGNAT 100.64/10"),
            ("168.63.129.16", false, "Azure host endpoint"),
            ("192.0.0.192", false, "IETF assignments: Oracle metadata"),
            ("0.0.0.0", false, "unspecified"),
            ("0.1.2.3", false, "this network 0/8"),
            ("255.255.255.255", false, "broadcast"),
            ("224.0.0.1", false, "multicast"),
            ("239.255.255.250", false, "multicast (SSDP)"),
            ("192.0.2.1", false, "documentation TEST-NET-1"),
            ("198.51.100.1", false, "documentation TEST-NET-2"),
            ("203.0.113.1", false, "documentation TEST-NET-3"),
            ("198.18.0.1", false, "benchmarking"),
            ("192.88.99.1", false, "6to4 relay anycast"),
            ("240.0.0.1", false, "reserved"),
            ("::1", false, "IPv6 loopback"),
            ("::", false, "IPv6 unspecified"),
            ("fd00::1", false, "unique local"),
            (
                "fd00:ec2::254",
                false,
                "unique local: AWS metadata over IPv6",
            ),
            ("fe80::1", false, "link-local"),
            ("fec0::1", false, "site-local"),
            ("ff02::1", false, "IPv6 multicast"),
            ("2001:db8::1", false, "IPv6 documentation"),
            ("3fff::1", false, "IPv6 documentation 3fff::/20"),
            ("100::1", false, "discard-only"),
            ("::ffff:127.0.0.1", false, "IPv4-mapped loopback"),
            ("::ffff:10.0.0.1", false, "IPv4-mapped private"),
            ("::ffff:169.254.169.254", false, "IPv4-mapped metadata"),
            ("::127.0.0.1", false, "IPv4-compatible loopback"),
            ("::10.0.0.1", false, "IPv4-compatible private"),
            ("64:ff9b::a00:1", false, "NAT64 of 10.0.0.1"),
            ("64:ff9b::808:808", false, "NAT64 (could reach anything)"),
            ("64:ff9b:1::a00:1", false, "local-use NAT64"),
            ("2002:7f00:1::", false, "6to4 of 127.0.0.1"),
            ("2002:a9fe:a9fe::", false, "6to4 of 169.254.169.254"),
            ("2001::1", false, "Teredo"),
            ("1.1.1.1", true, "public IPv4"),
            ("8.8.8.8", true, "public IPv4"),
            ("100.128.0.1", true, "just past CGNAT"),
            ("172.32.0.1", true, "just past 172.16/12"),
            ("2606:4700::1111", true, "public IPv6"),
            ("2002:808:808::", true, "6to4 of a public address"),
            ("::ffff:8.8.8.8", true, "IPv4-mapped public"),
            ("::8.8.8.8", true, "IPv4-compatible public"),
        ];
        for (address, public, what) in table {
            assert_eq!(
                is_public(address.parse().unwrap()),
                *public,
                "{address} ({what})"
            );
        }
    }

    /// Endpoint URLs, private destinations not allowed: the spellings of a
    /// special address are read as that address; credentials, other schemes
    /// and hosts no DNS name can have are refused.
    #[test]
    fn endpoint_urls_are_checked_in_every_spelling() {
        use InvalidUrl::*;
        let table: &[(&str, Result<&str, InvalidUrl>)] = &[
            (
                "https://hooks.example.com/in",
                Ok("https://hooks.example.com/in"),
            ),
            (
                "HTTPS://Hooks.Example.COM:8443/a?b=c",
                Ok("https://hooks.example.com:8443/a?b=c"),
            ),
            ("https://8.8.8.8/", Ok("https://8.8.8.8/")),
            (
                "https://[2606:4700::1111]/",
                Ok("https://[2606:4700::1111]/"),
            ),
            (
                "https://bücher.example/",
                Ok("https://xn--bcher-kva.example/"),
            ),
            ("http://127.0.0.1/", Err(Forbidden)),
            ("http://2130706433/", Err(Forbidden)),
            ("http://0x7f000001/", Err(Forbidden)),
            ("http://0177.0.0.1/", Err(Forbidden)),
            ("http://0x7f.1/", Err(Forbidden)),
            ("http://127.1/", Err(Forbidden)),
            ("http://0/", Err(Forbidden)),
            ("http://169.254.169.254/latest/meta-data/", Err(Forbidden)),
            ("http://[::1]/", Err(Forbidden)),
            ("http://[::ffff:7f00:1]/", Err(Forbidden)),
            ("http://[::ffff:127.0.0.1]/", Err(Forbidden)),
            ("http://[fd00:ec2::254]/", Err(Forbidden)),
            ("http://localhost:8080/", Err(Forbidden)),
            ("http://LOCALHOST./", Err(Forbidden)),
            ("http://api.localhost/", Err(Forbidden)),
            ("https://user:pass@hooks.example.com/", Err(Credentials)),
            ("https://user@hooks.example.com/", Err(Credentials)),
            ("ftp://hooks.example.com/", Err(Scheme)),
            ("file:///etc/passwd", Err(Scheme)),
            ("gopher://127.0.0.1:6379/_INFO", Err(Scheme)),
            ("https://aa*.example/", Err(BadHost("aa*.example".into()))),
            (
                "https://a b.example/",
                Err(Malformed("invalid international domain name".into())),
            ),
            (
                "hooks.example.com/in",
                Err(Malformed("relative URL without a base".into())),
            ),
        ];
        for (raw, expected) in table {
            let got = check_url(raw, false);
            assert_eq!(
                got.as_deref().map_err(Clone::clone),
                expected.clone(),
                "{raw}"
            );
        }
        assert_eq!(
            check_url(&format!("https://a.example/{}", "x".repeat(MAX_URL)), false),
            Err(TooLong)
        );
        // Allowed when the deployment allows private destinations (tests, on-prem).
        assert_eq!(
            check_url("http://127.0.0.1:9/", true).as_deref(),
            Ok("http://127.0.0.1:9/")
        );
        assert_eq!(
            check_url("http://localhost/", true).as_deref(),
            Ok("http://localhost/")
        );
    }
}
