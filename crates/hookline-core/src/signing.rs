//! Standard Webhooks signing (<https://www.standardwebhooks.com>).
//!
//! `webhook-signature: v1,<base64(HMAC-SHA256(key, "{id}.{timestamp}.{body}"))>`,
//! where the key is the base64-decoded part of a `whsec_…` secret. Several
//! signatures are space-separated (during a secret rotation).

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::time::Timestamp;

/// The prefix of every endpoint secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// Why a string is not a usable endpoint secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("an endpoint secret is `whsec_` followed by the base64 of 24 to 64 bytes")]
pub struct InvalidSecret;

/// An endpoint's signing secret. Its `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct EndpointSecret {
    text: String,
    key: Vec<u8>,
}

impl EndpointSecret {
    /// A fresh secret of 32 random bytes.
    pub fn generate() -> Self {
        use rand::RngCore;
        let mut key = vec![0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        Self {
            text: format!("{SECRET_PREFIX}{}", STANDARD.encode(&key)),
            key,
        }
    }

    /// Parses `whsec_<base64>` holding 24 to 64 bytes.
    pub fn parse(text: &str) -> Result<Self, InvalidSecret> {
        let encoded = text.strip_prefix(SECRET_PREFIX).ok_or(InvalidSecret)?;
        let key = STANDARD.decode(encoded).map_err(|_| InvalidSecret)?;
        if !(24..=64).contains(&key.len()) {
            return Err(InvalidSecret);
        }
        Ok(Self {
            text: text.to_owned(),
            key,
        })
    }

    /// The `whsec_…` form, as shown to the endpoint's owner.
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// One `v1,<base64>` signature of `body` for message `id` at `timestamp` (unix seconds).
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut mac = self.mac();
        mac.update(id.as_bytes());
        mac.update(b".");
        mac.update(timestamp.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
    }

    /// Whether any `v1` signature in a (space-separated) header value matches, in constant time.
    pub fn verify(&self, id: &str, timestamp: i64, body: &[u8], header: &str) -> bool {
        use subtle::ConstantTimeEq;
        let expected = self.sign(id, timestamp, body);
        header
            .split(' ')
            .filter(|candidate| candidate.starts_with("v1,"))
            .fold(false, |found, candidate| {
                found | bool::from(candidate.as_bytes().ct_eq(expected.as_bytes()))
            })
    }

    fn mac(&self) -> Hmac<Sha256> {
        Hmac::<Sha256>::new_from_slice(&self.key).expect("HMAC accepts keys of any length")
    }
}

impl std::fmt::Debug for EndpointSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EndpointSecret(whsec_…)")
    }
}

/// A secret replaced by a rotation that keeps signing until `until`, so
/// receivers can switch to the new one without a gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetiringSecret {
    pub secret: EndpointSecret,
    pub until: Timestamp,
}

/// The secrets an endpoint's deliveries are signed with: the current one, and
/// during a rotation's grace period the one it replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SigningKeys {
    pub current: EndpointSecret,
    pub previous: Option<RetiringSecret>,
}

impl SigningKeys {
    pub fn new(current: EndpointSecret) -> Self {
        Self {
            current,
            previous: None,
        }
    }

    /// The `webhook-signature` value of an attempt stamped `timestamp` (unix
    /// seconds): the current secret's signature, then, while the grace lasts,
    /// the retiring one's, space-separated as Standard Webhooks allows.
    pub fn signature_header(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        let mut header = self.current.sign(id, timestamp, body);
        if let Some(previous) = self.previous_at(Timestamp::from_millis(timestamp * 1000)) {
            header.push(' ');
            header.push_str(&previous.sign(id, timestamp, body));
        }
        header
    }

    /// The retiring secret, if it still signs at `now`.
    pub fn previous_at(&self, now: Timestamp) -> Option<&EndpointSecret> {
        self.previous
            .as_ref()
            .filter(|p| now < p.until)
            .map(|p| &p.secret)
    }

    /// A rotation to `new` at `now`: the current secret keeps signing for `grace`
    /// (none: it stops at once). A rotation during another's grace retires the
    /// current secret; the one before it stops.
    pub fn rotate(self, new: EndpointSecret, now: Timestamp, grace: std::time::Duration) -> Self {
        Self {
            previous: (!grace.is_zero()).then(|| RetiringSecret {
                secret: self.current,
                until: now + grace,
            }),
            current: new,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_standard_webhooks_reference_vector() {
        // From the Standard Webhooks reference test suite.
        let secret = EndpointSecret::parse("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let signature = secret.sign(
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1614265330,
            br#"{"test": 2432232314}"#,
        );
        assert_eq!(signature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    #[test]
    fn verify_accepts_own_signature_among_several_and_rejects_tampering() {
        let old = EndpointSecret::generate();
        let new = EndpointSecret::generate();
        let keys = SigningKeys::new(old.clone()).rotate(
            new.clone(),
            Timestamp::from_millis(0),
            std::time::Duration::from_secs(60),
        );
        let header = keys.signature_header("msg_1", 10, b"{}");
        assert_eq!(header.split(' ').count(), 2, "both sign during the grace");
        assert!(old.verify("msg_1", 10, b"{}", &header));
        assert!(new.verify("msg_1", 10, b"{}", &header));
        assert!(!new.verify("msg_1", 11, b"{}", &header));
        assert!(!new.verify("msg_1", 10, b"{ }", &header));
        assert!(!EndpointSecret::generate().verify("msg_1", 10, b"{}", &header));
    }

    #[test]
    fn a_rotation_signs_with_both_secrets_until_the_grace_ends() {
        let old = EndpointSecret::generate();
        let new = EndpointSecret::generate();
        let at = |secs: i64| Timestamp::from_millis(secs * 1000);
        let keys = SigningKeys::new(old.clone()).rotate(
            new.clone(),
            at(100),
            std::time::Duration::from_secs(50),
        );
        let during = keys.signature_header("msg_1", 149, b"{}");
        assert!(old.verify("msg_1", 149, b"{}", &during));
        assert!(new.verify("msg_1", 149, b"{}", &during));
        let after = keys.signature_header("msg_1", 150, b"{}");
        assert!(!old.verify("msg_1", 150, b"{}", &after));
        assert!(new.verify("msg_1", 150, b"{}", &after));
        assert_eq!(after.split(' ').count(), 1);

        // No grace: the old secret stops at once. A second rotation retires the
        // current secret and drops the one before it.
        let now =
            SigningKeys::new(old.clone()).rotate(new.clone(), at(100), std::time::Duration::ZERO);
        assert_eq!(now.previous, None);
        let third = EndpointSecret::generate();
        let again = keys.rotate(third.clone(), at(120), std::time::Duration::from_secs(10));
        assert_eq!(again.current, third);
        assert_eq!(again.previous.as_ref().map(|p| &p.secret), Some(&new));
        assert_eq!(again.previous.map(|p| p.until), Some(at(130)));
    }

    #[test]
    fn secrets_parse_only_in_the_documented_form() {
        let generated = EndpointSecret::generate();
        assert_eq!(
            EndpointSecret::parse(generated.expose()),
            Ok(generated.clone())
        );
        assert!(EndpointSecret::parse("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").is_err());
        assert!(EndpointSecret::parse("whsec_not base64!").is_err());
        assert!(EndpointSecret::parse("whsec_c2hvcnQ=").is_err());
        assert!(!format!("{generated:?}").contains(&generated.expose()[6..]));
    }
}

/// API keys: `hk_` + 64 hex digits (256 random bits).
pub mod api_key {
    use sha2::{Digest, Sha256};

    /// A fresh API key. Shown once; only [`hash`] of it is stored.
    pub fn generate() -> String {
        use rand::RngCore;
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        format!("hk_{}", crate::fingerprint::hex(&bytes))
    }

    /// A fresh one-time portal code (the fragment of a portal link): like a key,
    /// random and stored only as its [`hash`], but good for one exchange.
    pub fn generate_portal_code() -> String {
        use rand::RngCore;
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        format!("hkp_{}", crate::fingerprint::hex(&bytes))
    }

    /// The stored form of a key: hex SHA-256. Lookups go by this hash, so a
    /// presented key is never compared byte by byte with a stored secret.
    pub fn hash(key: &str) -> String {
        crate::fingerprint::hex(&Sha256::digest(key.as_bytes()))
    }
}
