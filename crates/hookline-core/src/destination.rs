//! Which addresses outbound webhook requests may reach.
//!
//! By default only public unicast addresses: a customer-supplied URL must not
//! become a way into our own network (SSRF) — loopback, private ranges,
//! link-local (cloud metadata at 169.254.169.254), CGNAT and the like are
//! refused. The dispatcher applies this to the addresses it actually connects
//! to, after resolution, so DNS rebinding cannot slip past it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::broker::Broker;

/// Why an endpoint URL is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidUrl {
    #[error("url is not a valid URL: {0}")]
    Malformed(String),
    #[error(
        "url must use http or https, or name a broker: redis, nats, amqp, sqs, sns or eventbridge"
    )]
    Scheme,
    /// A broker's URL (`crate::broker`) that does not name its destination as it should.
    #[error("{0}")]
    Broker(String),
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

/// An endpoint's URL: as [`check_url`], or a broker's URL naming where its
/// messages go ([`Broker`]) under the same rules for its host.
pub fn check_endpoint_url(raw: &str, allow_private: bool) -> Result<String, InvalidUrl> {
    if raw == POLL_URL {
        return Ok(POLL_URL.to_owned());
    }
    check(raw, allow_private, true)
}

/// The URL of a polling endpoint: it is sent nothing; its receiver fetches
/// its deliveries by number and commits what it handled (docs/api.md,
/// "Polling endpoints").
pub const POLL_URL: &str = "poll:";

/// Whether an endpoint's URL makes it a polling endpoint.
pub fn is_poll(url: &str) -> bool {
    url == POLL_URL
}

fn check(raw: &str, allow_private: bool, brokers: bool) -> Result<String, InvalidUrl> {
    if raw.len() > MAX_URL {
        return Err(InvalidUrl::TooLong);
    }
    let url = url::Url::parse(raw).map_err(|e| InvalidUrl::Malformed(e.to_string()))?;
    let broker = match url.scheme() {
        "http" | "https" => false,
        _ if brokers => match Broker::of(&url)? {
            Some(Broker::Aws(aws)) if aws.is_plain_http() && !allow_private => {
                return Err(InvalidUrl::Broker(format!(
                    "a {}:// url speaks plain HTTP, for a local stand-in, and is taken only where private destinations are allowed: use {}://",
                    url.scheme(),
                    url.scheme().trim_end_matches("+http")
                )))
            }
            Some(_) => true,
            None => return Err(InvalidUrl::Scheme),
        },
        _ => return Err(InvalidUrl::Scheme),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(InvalidUrl::Credentials);
    }
    // A broker's host is opaque to the URL parser (not a special scheme): it
    // is read as an http one is, so an address is an address in every spelling.
    let as_http = match broker {
        true => Some(crate::broker::as_http(&url)?),
        false => None,
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
