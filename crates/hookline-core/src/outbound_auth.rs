//! How Hookline authenticates itself to a receiver, besides the signature.
//!
//! An endpoint may carry (all optional, sealed at rest like its signing secret):
//!
//! - **OAuth2 client credentials** (RFC 6749 §4.4): Hookline fetches an access
//!   token from `token_url` (client id and secret sent with HTTP Basic, as
//!   §2.3.1 recommends; `scope` and `audience` in the form when given), shares
//!   it across the endpoint's deliveries until shortly before it expires
//!   ([`refresh_after`]), and sends `Authorization: Bearer <token>`; a 401 from
//!   the receiver fetches a new one once before the answer is classified;
//! - **HTTP Basic** or a **static bearer token**, sent as `Authorization`;
//! - **TLS**: a client certificate and key presented to this endpoint only
//!   (mutual TLS), and a CA to check the receiver's certificate against for a
//!   receiver behind a private CA.
//!
//! At most one of `oauth2`, `basic` and `bearer` (each is the `Authorization`
//! header). This module checks a configuration and computes what it sends; the
//! dispatcher fetches and caches tokens and builds the TLS clients.

use std::time::Duration;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::destination::{check_url, InvalidUrl};

/// The longest PEM value (a certificate chain, a key, a CA bundle).
pub const MAX_PEM: usize = 64 * 1024;
/// The longest other value (ids, secrets, scopes, tokens).
pub const MAX_VALUE: usize = 4096;

/// An endpoint's outbound authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutboundAuth {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth2: Option<OAuth2>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub basic: Option<Basic>,
    /// A static token, sent as `Authorization: Bearer <token>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<Tls>,
}

/// OAuth2 client credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuth2 {
    pub token_url: String,
    pub client_id: String,
    pub client_secret: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
}

/// HTTP Basic credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Basic {
    pub username: String,
    pub password: String,
}

/// TLS to this endpoint: a client certificate (PEM chain) with its key (PEM),
/// and a CA (PEM) its certificate is checked against besides the public roots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tls {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_ca: Option<String>,
}

/// Why an outbound authentication is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAuth {
    #[error("auth: at most one of oauth2, basic and bearer (each is the Authorization header)")]
    TwoAuthorizations,
    #[error("auth: an empty object; use null to remove the endpoint's authentication")]
    Empty,
    #[error("auth.oauth2.token_url: {0}")]
    TokenUrl(InvalidUrl),
    #[error("auth.{0} must be 1 to {MAX_VALUE} visible ASCII characters (spaces allowed inside)")]
    BadValue(&'static str),
    #[error("auth.basic.username must not contain `:`")]
    ColonInUsername,
    #[error("auth.tls.{0} must be PEM ({1}), at most {MAX_PEM} bytes")]
    BadPem(&'static str, &'static str),
    #[error("auth.tls: client_certificate and client_key go together")]
    HalfAnIdentity,
    #[error("auth.tls: an empty object; give a client certificate and key, a server CA, or both")]
    EmptyTls,
}

impl From<InvalidUrl> for InvalidAuth {
    fn from(error: InvalidUrl) -> Self {
        InvalidAuth::TokenUrl(error)
    }
}

fn visible(value: &str, field: &'static str) -> Result<(), InvalidAuth> {
    let ok = (1..=MAX_VALUE).contains(&value.len())
        && value.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
        && !value.starts_with(' ')
        && !value.ends_with(' ');
    ok.then_some(()).ok_or(InvalidAuth::BadValue(field))
}

/// The PEM blocks of `text` with their labels, or `None` if it is not PEM.
fn pem_blocks(text: &str) -> Option<Vec<&str>> {
    let mut labels = Vec::new();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    while let Some(line) = lines.next() {
        let label = line.strip_prefix("-----BEGIN ")?.strip_suffix("-----")?;
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        loop {
            let line = lines.next()?;
            if line == end {
                break;
            }
            body.push_str(line);
        }
        base64::engine::general_purpose::STANDARD
            .decode(body)
            .ok()
            .filter(|der| !der.is_empty())?;
        labels.push(label);
    }
    (!labels.is_empty()).then_some(labels)
}

fn pem(
    value: &str,
    field: &'static str,
    what: &'static str,
    label_ok: fn(&str) -> bool,
    one: bool,
) -> Result<(), InvalidAuth> {
    let blocks = (value.len() <= MAX_PEM)
        .then(|| pem_blocks(value))
        .flatten()
        .filter(|labels| labels.iter().all(|l| label_ok(l)) && (!one || labels.len() == 1));
    blocks.map(|_| ()).ok_or(InvalidAuth::BadPem(field, what))
}

impl OutboundAuth {
    /// Checks a configuration: one `Authorization` at most, a token URL that
    /// outbound requests may reach, values that fit a header, PEM that parses.
    pub fn check(&self, allow_private: bool) -> Result<(), InvalidAuth> {
        let authorizations = [
            self.oauth2.is_some(),
            self.basic.is_some(),
            self.bearer.is_some(),
        ];
        match authorizations.iter().filter(|set| **set).count() {
            0 if self.tls.is_none() => return Err(InvalidAuth::Empty),
            0 | 1 => {}
            _ => return Err(InvalidAuth::TwoAuthorizations),
        }
        if let Some(oauth2) = &self.oauth2 {
            check_url(&oauth2.token_url, allow_private)?;
            visible(&oauth2.client_id, "oauth2.client_id")?;
            visible(&oauth2.client_secret, "oauth2.client_secret")?;
            if let Some(scope) = &oauth2.scope {
                visible(scope, "oauth2.scope")?;
            }
            if let Some(audience) = &oauth2.audience {
                visible(audience, "oauth2.audience")?;
            }
        }
        if let Some(basic) = &self.basic {
            visible(&basic.username, "basic.username")?;
            visible(&basic.password, "basic.password")?;
            if basic.username.contains(':') {
                return Err(InvalidAuth::ColonInUsername);
            }
        }
        if let Some(token) = &self.bearer {
            visible(token, "bearer")?;
        }
        if let Some(tls) = &self.tls {
            let certificate = |l: &str| l == "CERTIFICATE";
            match (&tls.client_certificate, &tls.client_key) {
                (Some(chain), Some(key)) => {
                    pem(
                        chain,
                        "client_certificate",
                        "CERTIFICATE blocks",
                        certificate,
                        false,
                    )?;
                    let private_key = |l: &str| l.ends_with("PRIVATE KEY");
                    pem(
                        key,
                        "client_key",
                        "one PRIVATE KEY block",
                        private_key,
                        true,
                    )?;
                }
                (None, None) if tls.server_ca.is_none() => return Err(InvalidAuth::EmptyTls),
                (None, None) => {}
                _ => return Err(InvalidAuth::HalfAnIdentity),
            }
            if let Some(ca) = &tls.server_ca {
                pem(ca, "server_ca", "CERTIFICATE blocks", certificate, false)?;
            }
        }
        Ok(())
    }

    /// The `Authorization` value of a static credential (`basic`, `bearer`);
    /// `None` for OAuth2 (its token is fetched) and without one.
    pub fn static_authorization(&self) -> Option<String> {
        if let Some(basic) = &self.basic {
            let pair = format!("{}:{}", basic.username, basic.password);
            return Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ));
        }
        self.bearer.as_ref().map(|token| format!("Bearer {token}"))
    }

    /// This configuration with every secret replaced by `hidden` (for a caller
    /// who may not read secrets): the client secret, the password, the bearer
    /// token and the client key.
    pub fn redacted(&self, hidden: &str) -> OutboundAuth {
        let mut shown = self.clone();
        if let Some(oauth2) = &mut shown.oauth2 {
            oauth2.client_secret = hidden.to_owned();
        }
        if let Some(basic) = &mut shown.basic {
            basic.password = hidden.to_owned();
        }
        if let Some(token) = &mut shown.bearer {
            *token = hidden.to_owned();
        }
        if let Some(key) = shown.tls.as_mut().and_then(|t| t.client_key.as_mut()) {
            *key = hidden.to_owned();
        }
        shown
    }
}

impl OAuth2 {
    /// The token request's form body (`application/x-www-form-urlencoded`); the
    /// client authenticates with HTTP Basic ([`OAuth2::client_authorization`]).
    pub fn token_request_body(&self) -> String {
        let mut form = url::form_urlencoded::Serializer::new(String::new());
        form.append_pair("grant_type", "client_credentials");
        if let Some(scope) = &self.scope {
            form.append_pair("scope", scope);
        }
        if let Some(audience) = &self.audience {
            form.append_pair("audience", audience);
        }
        form.finish()
    }

    /// `Authorization: Basic …` of the token request: id and secret each
    /// form-encoded first (RFC 6749 §2.3.1).
    pub fn client_authorization(&self) -> String {
        let encode =
            |v: &str| url::form_urlencoded::byte_serialize(v.as_bytes()).collect::<String>();
        let pair = format!(
            "{}:{}",
            encode(&self.client_id),
            encode(&self.client_secret)
        );
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

/// A token endpoint's successful answer (RFC 6749 §5.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub access_token: String,
    /// How long it is valid, if the server said.
    pub expires_in: Option<Duration>,
}

/// A token endpoint's answer: the token, or why it is not one (the attempt's
/// `auth_error` message).
pub fn parse_token_response(status: u16, body: &[u8]) -> Result<Token, String> {
    #[derive(Deserialize)]
    struct Answer {
        access_token: Option<String>,
        token_type: Option<String>,
        expires_in: Option<serde_json::Value>,
        error: Option<String>,
        error_description: Option<String>,
    }
    let answer: Option<Answer> = serde_json::from_slice(body).ok();
    if !(200..300).contains(&status) {
        let reason = answer
            .and_then(|a| {
                a.error.map(|e| {
                    format!(
                        "{e}{}",
                        a.error_description
                            .map(|d| format!(": {d}"))
                            .unwrap_or_default()
                    )
                })
            })
            .unwrap_or_else(|| "no OAuth2 error in the body".to_owned());
        return Err(format!("the token endpoint answered {status} ({reason})"));
    }
    let answer = answer.ok_or("the token endpoint's answer is not JSON")?;
    if let Some(kind) = &answer.token_type {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(format!(
                "the token endpoint gave a {kind:?} token, not a bearer token"
            ));
        }
    }
    let access_token = answer
        .access_token
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_graphic()))
        .ok_or("the token endpoint's answer has no usable access_token")?;
    // Some servers send the number as a string.
    let expires_in = match answer.expires_in {
        Some(serde_json::Value::Number(n)) => n.as_u64(),
        Some(serde_json::Value::String(s)) => s.parse().ok(),
        _ => None,
    };
    Ok(Token {
        access_token,
        expires_in: expires_in.map(Duration::from_secs),
    })
}

/// How long a token fetched now is used: until a tenth of its life, at most
/// a minute, is left (so a delivery never carries one that expires on the
/// way); five minutes if the server did not say; never less than a second.
pub fn refresh_after(expires_in: Option<Duration>) -> Duration {
    match expires_in {
        None => Duration::from_secs(300),
        Some(life) => {
            let margin = (life / 10).min(Duration::from_secs(60));
            life.saturating_sub(margin).max(Duration::from_secs(1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str =
        "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----\n";
    const KEY: &str =
        "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49\n-----END PRIVATE KEY-----\n";

    fn oauth2() -> OAuth2 {
        OAuth2 {
            token_url: "https://auth.example.com/token".into(),
            client_id: "hookline".into(),
            client_secret: "s3cr:t/+".into(),
            scope: Some("webhooks:write read".into()),
            audience: None,
        }
    }

    #[test]
    fn one_authorization_at_most_and_something_at_all() {
        let both = OutboundAuth {
            oauth2: Some(oauth2()),
            bearer: Some("t".into()),
            ..Default::default()
        };
        assert_eq!(both.check(false), Err(InvalidAuth::TwoAuthorizations));
        assert_eq!(
            OutboundAuth::default().check(false),
            Err(InvalidAuth::Empty)
        );
        let tls_only = OutboundAuth {
            tls: Some(Tls {
                client_certificate: None,
                client_key: None,
                server_ca: Some(CERT.into()),
            }),
            ..Default::default()
        };
        assert_eq!(tls_only.check(false), Ok(()));
    }

    #[test]
    fn the_token_url_is_guarded_like_an_endpoint_url() {
        let mut auth = OutboundAuth {
            oauth2: Some(oauth2()),
            ..Default::default()
        };
        assert_eq!(auth.check(false), Ok(()));
        auth.oauth2.as_mut().unwrap().token_url = "http://127.0.0.1:9/token".into();
        assert_eq!(
            auth.check(false),
            Err(InvalidAuth::TokenUrl(InvalidUrl::Forbidden))
        );
        assert_eq!(
            auth.check(true),
            Ok(()),
            "when private destinations are allowed"
        );
        auth.oauth2.as_mut().unwrap().token_url = "ftp://auth.example.com".into();
        assert_eq!(
            auth.check(true),
            Err(InvalidAuth::TokenUrl(InvalidUrl::Scheme))
        );
    }

    #[test]
    fn values_must_fit_a_header() {
        for (auth, field) in [
            (
                OutboundAuth {
                    bearer: Some("two\nlines".into()),
                    ..Default::default()
                },
                "bearer",
            ),
            (
                OutboundAuth {
                    basic: Some(Basic {
                        username: "".into(),
                        password: "p".into(),
                    }),
                    ..Default::default()
                },
                "basic.username",
            ),
            (
                OutboundAuth {
                    oauth2: Some(OAuth2 {
                        client_secret: "x".repeat(MAX_VALUE + 1),
                        ..oauth2()
                    }),
                    ..Default::default()
                },
                "oauth2.client_secret",
            ),
        ] {
            assert_eq!(auth.check(false), Err(InvalidAuth::BadValue(field)));
        }
        let colon = OutboundAuth {
            basic: Some(Basic {
                username: "a:b".into(),
                password: "p".into(),
            }),
            ..Default::default()
        };
        assert_eq!(colon.check(false), Err(InvalidAuth::ColonInUsername));
    }

    #[test]
    fn tls_takes_pem_and_a_whole_identity() {
        let tls = |cert: Option<&str>, key: Option<&str>, ca: Option<&str>| OutboundAuth {
            tls: Some(Tls {
                client_certificate: cert.map(str::to_owned),
                client_key: key.map(str::to_owned),
                server_ca: ca.map(str::to_owned),
            }),
            ..Default::default()
        };
        assert_eq!(tls(Some(CERT), Some(KEY), None).check(false), Ok(()));
        let chain = format!("{CERT}{CERT}");
        assert_eq!(
            tls(Some(&chain), Some(KEY), Some(&chain)).check(false),
            Ok(())
        );
        assert_eq!(
            tls(Some(CERT), None, None).check(false),
            Err(InvalidAuth::HalfAnIdentity)
        );
        assert_eq!(
            tls(None, None, None).check(false),
            Err(InvalidAuth::EmptyTls)
        );
        assert!(matches!(
            tls(Some(KEY), Some(KEY), None).check(false),
            Err(InvalidAuth::BadPem("client_certificate", _))
        ));
        let two_keys = format!("{KEY}{KEY}");
        assert!(matches!(
            tls(Some(CERT), Some(&two_keys), None).check(false),
            Err(InvalidAuth::BadPem("client_key", _))
        ));
        assert!(matches!(
            tls(Some(CERT), Some("not pem"), None).check(false),
            Err(InvalidAuth::BadPem("client_key", _))
        ));
        let bad_base64 = CERT.replace("MIIB", "M!IB");
        assert!(matches!(
            tls(None, None, Some(&bad_base64)).check(false),
            Err(InvalidAuth::BadPem("server_ca", _))
        ));
    }

    #[test]
    fn static_credentials_become_the_authorization_header() {
        let basic = OutboundAuth {
            basic: Some(Basic {
                username: "user".into(),
                password: "pass".into(),
            }),
            ..Default::default()
        };
        assert_eq!(basic.static_authorization().unwrap(), "Basic dXNlcjpwYXNz");
        let bearer = OutboundAuth {
            bearer: Some("tok".into()),
            ..Default::default()
        };
        assert_eq!(bearer.static_authorization().unwrap(), "Bearer tok");
        let oauth = OutboundAuth {
            oauth2: Some(oauth2()),
            ..Default::default()
        };
        assert_eq!(oauth.static_authorization(), None);
    }

    #[test]
    fn the_token_request_is_form_encoded_with_basic_client_authentication() {
        let o = oauth2();
        assert_eq!(
            o.token_request_body(),
            "grant_type=client_credentials&scope=webhooks%3Awrite+read"
        );
        let with_audience = OAuth2 {
            scope: None,
            audience: Some("https://api.example".into()),
            ..oauth2()
        };
        assert_eq!(
            with_audience.token_request_body(),
            "grant_type=client_credentials&audience=https%3A%2F%2Fapi.example"
        );
        // "hookline:s3cr%3At%2F%2B", base64.
        let expected = base64::engine::general_purpose::STANDARD.encode("hookline:s3cr%3At%2F%2B");
        assert_eq!(o.client_authorization(), format!("Basic {expected}"));
    }

    #[test]
    fn token_answers_are_read_or_explained() {
        let ok = parse_token_response(
            200,
            br#"{"access_token":"abc","token_type":"Bearer","expires_in":3600}"#,
        );
        assert_eq!(
            ok,
            Ok(Token {
                access_token: "abc".into(),
                expires_in: Some(Duration::from_secs(3600))
            })
        );
        let as_string = parse_token_response(200, br#"{"access_token":"abc","expires_in":"60"}"#);
        assert_eq!(as_string.unwrap().expires_in, Some(Duration::from_secs(60)));
        let refused = parse_token_response(
            401,
            br#"{"error":"invalid_client","error_description":"bad secret"}"#,
        );
        assert_eq!(
            refused,
            Err("the token endpoint answered 401 (invalid_client: bad secret)".into())
        );
        assert_eq!(
            parse_token_response(503, b"down"),
            Err("the token endpoint answered 503 (no OAuth2 error in the body)".into())
        );
        assert!(parse_token_response(200, b"<html>")
            .unwrap_err()
            .contains("not JSON"));
        assert!(parse_token_response(200, br#"{"token_type":"bearer"}"#)
            .unwrap_err()
            .contains("access_token"));
        assert!(
            parse_token_response(200, br#"{"access_token":"a","token_type":"mac"}"#)
                .unwrap_err()
                .contains("not a bearer")
        );
    }

    #[test]
    fn tokens_are_refreshed_before_they_expire() {
        let secs = Duration::from_secs;
        assert_eq!(refresh_after(Some(secs(3600))), secs(3540));
        assert_eq!(refresh_after(Some(secs(100))), secs(90));
        assert_eq!(refresh_after(Some(secs(1))), secs(1));
        assert_eq!(refresh_after(Some(secs(0))), secs(1));
        assert_eq!(refresh_after(None), secs(300));
    }

    #[test]
    fn redacted_hides_every_secret_and_keeps_the_rest() {
        let auth = OutboundAuth {
            oauth2: Some(oauth2()),
            tls: Some(Tls {
                client_certificate: Some(CERT.into()),
                client_key: Some(KEY.into()),
                server_ca: None,
            }),
            ..Default::default()
        };
        let shown = auth.redacted("…");
        let o = shown.oauth2.as_ref().unwrap();
        assert_eq!(o.client_secret, "…");
        assert_eq!(
            (o.client_id.as_str(), o.token_url.as_str()),
            ("hookline", "https://auth.example.com/token")
        );
        let tls = shown.tls.as_ref().unwrap();
        assert_eq!(tls.client_key.as_deref(), Some("…"));
        assert_eq!(tls.client_certificate.as_deref(), Some(CERT));
    }
}
