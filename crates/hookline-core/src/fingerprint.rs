//! The request fingerprint that `Idempotency-Key` compares.
//!
//! A SHA-256 over the method, the path and the *canonical* JSON body (object
//! keys sorted, insignificant whitespace removed), so a retried request that
//! a client re-serialised differently still matches, while any change of
//! meaning does not.

use sha2::{Digest, Sha256};

/// The hex SHA-256 fingerprint of a request with a JSON body.
pub fn request_fingerprint(method: &str, path: &str, body: &serde_json::Value) -> String {
    // serde_json's map is a BTreeMap (the `preserve_order` feature is off), so
    // serialising a parsed value sorts every object's keys.
    let canonical = serde_json::to_vec(body).expect("a JSON value always serializes");
    let mut hasher = Sha256::new();
    hasher.update(method.as_bytes());
    hasher.update(b"\n");
    hasher.update(path.as_bytes());
    hasher.update(b"\n");
    hasher.update(&canonical);
    hex(&hasher.finalize())
}

/// Lower-case hex of some bytes.
pub fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a: serde_json::Value = serde_json::from_str(r#"{"a": 1, "b": [1, 2]}"#).unwrap();
        let b: serde_json::Value = serde_json::from_str(r#"{"b":[1,2],"a":1}"#).unwrap();
        assert_eq!(
            request_fingerprint("POST", "/x", &a),
            request_fingerprint("POST", "/x", &b)
        );
    }

    #[test]
    fn any_change_of_meaning_changes_the_fingerprint() {
        let body = json!({"a": 1});
        let base = request_fingerprint("POST", "/x", &body);
        assert_ne!(base, request_fingerprint("POST", "/x", &json!({"a": 2})));
        assert_ne!(base, request_fingerprint("POST", "/y", &body));
        assert_ne!(base, request_fingerprint("PUT", "/x", &body));
        assert_eq!(base.len(), 64);
    }
}
