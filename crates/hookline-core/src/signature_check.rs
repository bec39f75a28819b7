//! The signature checker: what a receiver got (its `webhook-*` headers and
//! body), checked against an endpoint's secrets, with the reason it does not
//! verify when it does not — a header missing, the body changed since it was
//! sent, another secret, a timestamp older than verifiers accept — in words
//! a receiver's developer can act on. Pure: the caller passes the endpoint's
//! [`SigningKeys`], the body as sent (when the event is still kept) and now.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::signing::SigningKeys;
use crate::time::Timestamp;

/// How old a timestamp Standard Webhooks verifiers accept, by default.
pub const TOLERANCE: Duration = Duration::from_secs(5 * 60);

/// What a check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = SignatureCheckCode))]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// The signature verifies and the timestamp is within the tolerance.
    Verified,
    /// The signature verifies, but the timestamp is further from now than verifiers accept.
    TimestampTooOld,
    /// `webhook-id`, `webhook-timestamp` or `webhook-signature` is missing.
    MissingHeader,
    /// `webhook-timestamp` is not a number of seconds, or `webhook-signature` holds no `v1,` signature.
    Malformed,
    /// The body differs from the one sent for this `webhook-id`.
    BodyChanged,
    /// The body is the one sent, but no signature was made with this endpoint's secrets.
    WrongSecret,
    /// No signature matches, and the body sent is no longer kept to tell which changed.
    NoMatch,
}

/// What a receiver got.
#[derive(Debug, Clone, Copy)]
pub struct Received<'a> {
    pub id: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
    pub body: &'a [u8],
}

/// The checker's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = SignatureCheck))]
pub struct Check {
    pub code: Code,
    /// Whether a signature in the header was made with one of the endpoint's secrets over this body.
    pub signature_valid: bool,
    /// `current`, or `previous` (a rotation's retiring secret), when one matched.
    pub signed_with: Option<String>,
    /// How old the timestamp is, in seconds (negative: in the future).
    pub timestamp_age_secs: Option<i64>,
    /// Where the body first differs from the one sent (a byte offset), for `body_changed`.
    pub first_difference: Option<usize>,
    /// One English sentence that says what to do.
    pub message: String,
}

/// Checks `received` against `keys` at `now`; `sent` is the body sent for
/// its `webhook-id`, when the event is still kept.
pub fn check(
    received: &Received<'_>,
    keys: &SigningKeys,
    sent: Option<&[u8]>,
    now: Timestamp,
) -> Check {
    let mut answer = Check {
        code: Code::MissingHeader,
        signature_valid: false,
        signed_with: None,
        timestamp_age_secs: None,
        first_difference: None,
        message: String::new(),
    };
    let missing: Vec<&str> = [
        ("webhook-id", received.id),
        ("webhook-timestamp", received.timestamp),
        ("webhook-signature", received.signature),
    ]
    .into_iter()
    .filter(|(_, value)| value.is_none_or(|v| v.trim().is_empty()))
    .map(|(name, _)| name)
    .collect();
    let (Some(id), Some(timestamp), Some(signature)) =
        (received.id, received.timestamp, received.signature)
    else {
        answer.message = format!(
            "The request lacks {}: a Standard Webhooks request carries webhook-id, webhook-timestamp and webhook-signature.",
            missing.join(" and ")
        );
        return answer;
    };
    if !missing.is_empty() {
        answer.message = format!("{} is empty.", missing.join(" and "));
        return answer;
    }
    let (id, signature) = (id.trim(), signature.trim());
    // Seconds since 1970 up to the year 9999: anything else is no timestamp.
    let Some(seconds) = timestamp
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|s| (0..=253_402_300_799).contains(s))
    else {
        answer.code = Code::Malformed;
        answer.message =
            format!("webhook-timestamp {timestamp:?} is not a number of seconds since 1970.");
        return answer;
    };
    if !signature.split(' ').any(|s| s.starts_with("v1,")) {
        answer.code = Code::Malformed;
        answer.message =
            "webhook-signature holds no v1,… signature (several are separated by spaces).".into();
        return answer;
    }
    let age = now.as_millis().div_euclid(1000) - seconds;
    answer.timestamp_age_secs = Some(age);
    let previous = keys.previous_at(now);
    let matched = if keys.current.verify(id, seconds, received.body, signature) {
        Some("current")
    } else if previous.is_some_and(|p| p.verify(id, seconds, received.body, signature)) {
        Some("previous")
    } else {
        None
    };
    if let Some(which) = matched {
        answer.signature_valid = true;
        answer.signed_with = Some(which.into());
        let rotated = if which == "previous" {
            " It was made with the secret before the last rotation, which still signs during its grace period: switch your verifier to the current one."
        } else {
            ""
        };
        if age.unsigned_abs() > TOLERANCE.as_secs() {
            answer.code = Code::TimestampTooOld;
            answer.message = format!(
                "The signature is right, but the timestamp is {} {}: verifiers refuse timestamps more than 5 minutes away from their clock. If your server refused it on arrival, check its clock.{rotated}",
                span(age.unsigned_abs()),
                if age >= 0 { "old" } else { "in the future" }
            );
        } else {
            answer.code = Code::Verified;
            answer.message = format!("The signature is right: this request was signed by this endpoint's secret, and its timestamp is current.{rotated}");
        }
        return answer;
    }
    match sent {
        Some(sent) if sent != received.body => {
            let first = sent
                .iter()
                .zip(received.body)
                .position(|(a, b)| a != b)
                .unwrap_or(sent.len().min(received.body.len()));
            answer.code = Code::BodyChanged;
            answer.first_difference = Some(first);
            answer.message = format!(
                "The body differs from the one sent for {id} from byte {first} on: verify the raw body as received, before any JSON parsing or re-encoding (whitespace and key order count)."
            );
        }
        Some(_) => {
            answer.code = Code::WrongSecret;
            answer.message = "The body is the one sent, but no signature matches this endpoint's secrets over it: your verifier uses another secret (another endpoint's, or one a rotation replaced whose grace has ended), or webhook-id or webhook-timestamp changed on the way.".into();
        }
        None => {
            answer.code = Code::NoMatch;
            answer.message = "No signature matches this endpoint's secret over this body: either the body changed (verify the raw body, before any parsing) or your verifier uses another secret.".into();
        }
    }
    answer
}

/// "3 hours", "12 minutes", "40 seconds".
fn span(secs: u64) -> String {
    let (n, unit) = match secs {
        s if s >= 7200 => (s / 3600, "hours"),
        s if s >= 120 => (s / 60, "minutes"),
        s => (s, "seconds"),
    };
    format!("{n} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::EndpointSecret;

    const NOW: Timestamp = Timestamp::from_millis(1_800_000_000_000);
    const BODY: &[u8] =
        br#"{"type":"order.paid","timestamp":"2027-01-15T08:00:00Z","data":{"n":1}}"#;

    fn signed(keys: &SigningKeys, at_secs: i64, body: &[u8]) -> (String, String) {
        (
            at_secs.to_string(),
            keys.signature_header("msg_1", at_secs, body),
        )
    }

    fn received<'a>(timestamp: &'a str, signature: &'a str, body: &'a [u8]) -> Received<'a> {
        Received {
            id: Some("msg_1"),
            timestamp: Some(timestamp),
            signature: Some(signature),
            body,
        }
    }

    #[test]
    fn each_reason_is_told_apart() {
        let keys = SigningKeys::new(EndpointSecret::generate());
        let now = NOW.as_millis() / 1000;
        let (ts, sig) = signed(&keys, now - 10, BODY);
        let ok = check(&received(&ts, &sig, BODY), &keys, Some(BODY), NOW);
        assert_eq!(
            (ok.code, ok.signature_valid, ok.signed_with.as_deref()),
            (Code::Verified, true, Some("current"))
        );
        assert_eq!(ok.timestamp_age_secs, Some(10));

        let (old_ts, old_sig) = signed(&keys, now - 3 * 3600, BODY);
        let old = check(&received(&old_ts, &old_sig, BODY), &keys, Some(BODY), NOW);
        assert_eq!(
            (old.code, old.signature_valid),
            (Code::TimestampTooOld, true)
        );
        assert!(old.message.contains("3 hours old"), "{}", old.message);

        let changed =
            br#"{"type":"order.paid","timestamp":"2027-01-15T08:00:00Z","data":{"n": 1}}"#;
        let body = check(&received(&ts, &sig, changed), &keys, Some(BODY), NOW);
        assert_eq!(
            (body.code, body.first_difference),
            (Code::BodyChanged, Some(68))
        );

        let other = SigningKeys::new(EndpointSecret::generate());
        let (ts2, sig2) = signed(&other, now, BODY);
        let wrong = check(&received(&ts2, &sig2, BODY), &keys, Some(BODY), NOW);
        assert_eq!(
            (wrong.code, wrong.signature_valid),
            (Code::WrongSecret, false)
        );
        let unknown = check(&received(&ts2, &sig2, BODY), &keys, None, NOW);
        assert_eq!(unknown.code, Code::NoMatch);

        let mut missing = received(&ts, &sig, BODY);
        missing.signature = None;
        let lacks = check(&missing, &keys, Some(BODY), NOW);
        assert_eq!(lacks.code, Code::MissingHeader);
        assert!(
            lacks.message.contains("webhook-signature"),
            "{}",
            lacks.message
        );
        assert_eq!(
            check(&received("soon", &sig, BODY), &keys, None, NOW).code,
            Code::Malformed
        );
        for extreme in ["-9223372036854775808", "9223372036854775807", "-1"] {
            let answer = check(&received(extreme, &sig, BODY), &keys, None, NOW);
            assert_eq!(answer.code, Code::Malformed, "{extreme}");
        }
        assert_eq!(
            check(&received(&ts, "v2,abc", BODY), &keys, None, NOW).code,
            Code::Malformed
        );
    }

    #[test]
    fn a_rotations_retiring_secret_verifies_while_it_signs_and_says_so() {
        let old = EndpointSecret::generate();
        let rotated = SigningKeys::new(old.clone()).rotate(
            EndpointSecret::generate(),
            NOW,
            Duration::from_secs(3600),
        );
        let now = NOW.as_millis() / 1000;
        let (ts, sig) = (now.to_string(), old.sign("msg_1", now, BODY));
        let answer = check(&received(&ts, &sig, BODY), &rotated, Some(BODY), NOW);
        assert_eq!(
            (answer.code, answer.signed_with.as_deref()),
            (Code::Verified, Some("previous"))
        );
        assert!(answer.message.contains("rotation"), "{}", answer.message);
        // After the grace, it no longer does.
        let later = NOW + Duration::from_secs(7200);
        let after = check(&received(&ts, &sig, BODY), &rotated, Some(BODY), later);
        assert_eq!(after.code, Code::WrongSecret);
    }
}
