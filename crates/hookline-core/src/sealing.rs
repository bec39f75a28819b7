//! Endpoint secrets at rest: sealed with XChaCha20-Poly1305 under a master key.
//!
//! A sealed value is `v1.<key id>.<base64(nonce ‖ ciphertext)>`. The key id
//! (the first 8 hex digits of the key's SHA-256) says which master key opens
//! it, so a rotation can re-seal values one by one while old and new keys are
//! both configured; the endpoint's id is the associated data, so a sealed value
//! copied onto another endpoint's row does not open there.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

const VERSION: &str = "v1";
const NONCE_LEN: usize = 24;

/// One master key: 32 random bytes, written as base64.
#[derive(Clone)]
pub struct MasterKey {
    id: String,
    cipher: XChaCha20Poly1305,
    text: String,
}

/// Why a master key or a sealed value is unusable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error(
        "a master key is the base64 of 32 bytes (generate one with `openssl rand -base64 32`)"
    )]
    InvalidKey,
    #[error("a stored secret is not in the sealed form (v1.<key id>.<base64>)")]
    Malformed,
    #[error("a stored secret is sealed with master key {0}, which is not configured")]
    UnknownKey(String),
    #[error(
        "a stored secret does not open with master key {0}: wrong key, or the row was altered"
    )]
    Tampered(String),
}

impl MasterKey {
    /// A fresh random key.
    pub fn generate() -> Self {
        use rand::RngCore;
        let mut key = [0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut key);
        Self::from_bytes(&key)
    }

    /// Parses the base64 of 32 bytes (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<Self, SealError> {
        let bytes = STANDARD
            .decode(text.trim())
            .map_err(|_| SealError::InvalidKey)?;
        let key: [u8; 32] = bytes.try_into().map_err(|_| SealError::InvalidKey)?;
        Ok(Self::from_bytes(&key))
    }

    fn from_bytes(key: &[u8; 32]) -> Self {
        let digest = Sha256::digest(key);
        Self {
            id: digest[..4].iter().map(|b| format!("{b:02x}")).collect(),
            cipher: XChaCha20Poly1305::new(key.into()),
            text: STANDARD.encode(key),
        }
    }

    /// The key's public name, as written in every value it seals.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The base64 form, to write into a key file.
    pub fn expose(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MasterKey({})", self.id)
    }
}

/// The master keys a process holds: the current one seals; it and the previous
/// ones (during a rotation) open.
#[derive(Debug, Clone)]
pub struct Keyring {
    current: MasterKey,
    previous: Vec<MasterKey>,
}

impl Keyring {
    pub fn new(current: MasterKey, previous: Vec<MasterKey>) -> Self {
        Self { current, previous }
    }

    pub fn current(&self) -> &MasterKey {
        &self.current
    }

    /// Whether this keyring can open values sealed with the key `id`.
    pub fn holds(&self, id: &str) -> bool {
        self.key(id).is_some()
    }

    fn key(&self, id: &str) -> Option<&MasterKey> {
        std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == id)
    }

    /// Seals `plaintext` for the row `owner` (the endpoint's id) with the current key.
    pub fn seal(&self, plaintext: &str, owner: &str) -> String {
        use rand::RngCore;
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let sealed = self
            .current
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext.as_bytes(),
                    aad: owner.as_bytes(),
                },
            )
            .expect("XChaCha20-Poly1305 seals any length we store");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        format!("{VERSION}.{}.{}", self.current.id, STANDARD.encode(out))
    }

    /// Opens a value [`Keyring::seal`] made for `owner`.
    pub fn open(&self, sealed: &str, owner: &str) -> Result<String, SealError> {
        let (id, data) = key_id(sealed)
            .and_then(|id| Some((id, sealed.get(VERSION.len() + id.len() + 2..)?)))
            .ok_or(SealError::Malformed)?;
        let key = self
            .key(id)
            .ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let bytes = STANDARD.decode(data).map_err(|_| SealError::Malformed)?;
        if bytes.len() < NONCE_LEN {
            return Err(SealError::Malformed);
        }
        let (nonce, ciphertext) = bytes.split_at(NONCE_LEN);
        let plain = key
            .cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: owner.as_bytes(),
                },
            )
            .map_err(|_| SealError::Tampered(id.to_owned()))?;
        String::from_utf8(plain).map_err(|_| SealError::Tampered(id.to_owned()))
    }
}

/// The id of the master key a sealed value names, if it is in the sealed form.
pub fn key_id(sealed: &str) -> Option<&str> {
    let rest = sealed.strip_prefix(VERSION)?.strip_prefix('.')?;
    let (id, _) = rest.split_once('.')?;
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_with_their_key_for_their_owner_only() {
        let ring = Keyring::new(MasterKey::generate(), vec![]);
        let sealed = ring.seal("whsec_abc", "ep_1");
        assert!(!sealed.contains("whsec_"));
        assert_eq!(key_id(&sealed), Some(ring.current().id()));
        assert_eq!(ring.open(&sealed, "ep_1").as_deref(), Ok("whsec_abc"));
        assert_ne!(
            ring.seal("whsec_abc", "ep_1"),
            sealed,
            "a fresh nonce each time"
        );
        assert_eq!(
            ring.open(&sealed, "ep_2"),
            Err(SealError::Tampered(ring.current().id().to_owned())),
            "moved to another endpoint's row, it does not open"
        );
        let mut altered = sealed.clone();
        altered.pop();
        altered.push(if sealed.ends_with('A') { 'B' } else { 'A' });
        assert!(ring.open(&altered, "ep_1").is_err());
        assert_eq!(ring.open("whsec_abc", "ep_1"), Err(SealError::Malformed));
    }

    #[test]
    fn a_rotation_opens_old_values_and_seals_new_ones_with_the_new_key() {
        let old = MasterKey::generate();
        let new = MasterKey::generate();
        let before = Keyring::new(old.clone(), vec![]).seal("s", "ep");
        let rotating = Keyring::new(new.clone(), vec![old.clone()]);
        assert_eq!(rotating.open(&before, "ep").as_deref(), Ok("s"));
        assert_eq!(key_id(&rotating.seal("s", "ep")), Some(new.id()));
        let wrong = Keyring::new(new, vec![]);
        assert_eq!(
            wrong.open(&before, "ep"),
            Err(SealError::UnknownKey(old.id().to_owned()))
        );
    }

    #[test]
    fn keys_parse_from_base64_of_32_bytes() {
        let key = MasterKey::generate();
        let parsed = MasterKey::parse(&format!(" {}\n", key.expose())).unwrap();
        assert_eq!(parsed.id(), key.id());
        assert_eq!(
            MasterKey::parse("c2hvcnQ=").unwrap_err(),
            SealError::InvalidKey
        );
        assert_eq!(
            MasterKey::parse("not base64!").unwrap_err(),
            SealError::InvalidKey
        );
        assert!(!format!("{key:?}").contains(key.expose()));
    }
}
