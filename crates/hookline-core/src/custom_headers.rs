//! Headers an endpoint's owner adds to every request sent to it (a tenant id,
//! a static token their gateway wants).
//!
//! They can never replace what Hookline itself sends: the Standard Webhooks
//! headers (`webhook-*`), Hookline's own (`hookline-*`), the body's framing and
//! type, and the hop-by-hop headers a proxy would strip (RFC 9110 §7.6.1).

/// At most this many custom headers per endpoint.
pub const MAX_HEADERS: usize = 20;
/// At most this many bytes of names and values together.
pub const MAX_TOTAL_BYTES: usize = 4096;

const RESERVED: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
    "content-type",
    "content-encoding",
];

/// Why a set of custom headers is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidHeaders {
    #[error("at most {MAX_HEADERS} custom headers, of at most {MAX_TOTAL_BYTES} bytes together")]
    TooMany,
    #[error("header name {0:?} is not a valid HTTP field name")]
    BadName(String),
    #[error("header {0:?} has a value that is not visible ASCII (or is empty)")]
    BadValue(String),
    #[error("header {0:?} is set by Hookline itself (webhook-*, hookline-*, hop-by-hop, framing) and cannot be overridden")]
    Reserved(String),
    #[error("header {0:?} is given twice (names are case-insensitive)")]
    Duplicate(String),
}

/// Checks an endpoint's custom headers; the names lower-cased, as stored and sent.
pub fn check(headers: &[(String, String)]) -> Result<Vec<(String, String)>, InvalidHeaders> {
    let total: usize = headers.iter().map(|(n, v)| n.len() + v.len()).sum();
    if headers.len() > MAX_HEADERS || total > MAX_TOTAL_BYTES {
        return Err(InvalidHeaders::TooMany);
    }
    let mut checked: Vec<(String, String)> = Vec::with_capacity(headers.len());
    for (name, value) in headers {
        let is_token_char = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(is_token_char) {
            return Err(InvalidHeaders::BadName(name.clone()));
        }
        let lower = name.to_ascii_lowercase();
        if lower.starts_with("webhook-")
            || lower.starts_with("hookline-")
            || RESERVED.contains(&lower.as_str())
        {
            return Err(InvalidHeaders::Reserved(name.clone()));
        }
        let visible = |c: char| c == ' ' || c == '\t' || c.is_ascii_graphic();
        if value.trim().is_empty() || !value.chars().all(visible) {
            return Err(InvalidHeaders::BadValue(name.clone()));
        }
        if checked.iter().any(|(n, _)| *n == lower) {
            return Err(InvalidHeaders::Duplicate(name.clone()));
        }
        checked.push((lower, value.trim().to_owned()));
    }
    Ok(checked)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, value: &str) -> Result<Vec<(String, String)>, InvalidHeaders> {
        check(&[(name.to_owned(), value.to_owned())])
    }

    #[test]
    fn ordinary_headers_pass_lower_cased() {
        assert_eq!(
            one("X-Tenant", " acme "),
            Ok(vec![("x-tenant".into(), "acme".into())])
        );
        assert!(one("Authorization", "Bearer abc").is_ok());
    }

    #[test]
    fn hookline_and_transport_headers_are_refused() {
        for name in [
            "webhook-id",
            "Webhook-Signature",
            "hookline-sequence",
            "Connection",
            "Transfer-Encoding",
            "Host",
            "Content-Type",
            "TE",
            "Upgrade",
        ] {
            assert_eq!(
                one(name, "x"),
                Err(InvalidHeaders::Reserved(name.into())),
                "{name}"
            );
        }
    }

    #[test]
    fn malformed_names_values_and_duplicates_are_refused() {
        assert_eq!(
            one("X Bad", "x"),
            Err(InvalidHeaders::BadName("X Bad".into()))
        );
        assert_eq!(one("", "x"), Err(InvalidHeaders::BadName("".into())));
        assert_eq!(
            one("X-A", "line\r\nX-Evil: 1"),
            Err(InvalidHeaders::BadValue("X-A".into()))
        );
        assert_eq!(one("X-A", ""), Err(InvalidHeaders::BadValue("X-A".into())));
        assert_eq!(
            one("X-A", "caf\u{e9}"),
            Err(InvalidHeaders::BadValue("X-A".into()))
        );
        let twice = [
            ("X-A".to_owned(), "1".to_owned()),
            ("x-a".to_owned(), "2".to_owned()),
        ];
        assert_eq!(check(&twice), Err(InvalidHeaders::Duplicate("x-a".into())));
        let many: Vec<_> = (0..=MAX_HEADERS)
            .map(|i| (format!("x-{i}"), "v".to_owned()))
            .collect();
        assert_eq!(check(&many), Err(InvalidHeaders::TooMany));
        assert_eq!(
            one("x-big", &"v".repeat(MAX_TOTAL_BYTES)),
            Err(InvalidHeaders::TooMany)
        );
    }
}
