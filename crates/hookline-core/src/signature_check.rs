//! The signature checker: what a receiver got (its `webhook-*` headers and
//! body), checked against an endpoint's secrets, with the reason it does not
//! verify when it does not — a header missing, the body changed since it was
//! sent, another secret, a timestamp older than verifiers accept — in words
//! a receiver's developer can act on, in the request's language. Pure: the
//! caller passes the endpoint's [`SigningKeys`], the body as sent (when the
//! event is still kept), now and the language.
//!
//! The check is worked out once, as a [`Code`] and the facts beside it; each
//! language's table (`en`, `he`) only words it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::explain::Unit;
use crate::language::Language;
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
    /// One sentence, in the request's language, that says what to do.
    pub message: String,
}

/// Checks `received` against `keys` at `now`; `sent` is the body sent for
/// its `webhook-id`, when the event is still kept. The sentence is in `language`.
pub fn check(
    received: &Received<'_>,
    keys: &SigningKeys,
    sent: Option<&[u8]>,
    now: Timestamp,
    language: Language,
) -> Check {
    let (mut answer, details) = verify(received, keys, sent, now);
    answer.message = message(language, &answer, &details);
    answer
}

/// What a sentence names beyond the answer's own fields.
struct Details<'a> {
    /// The `webhook-*` headers absent or empty.
    missing: Vec<&'static str>,
    /// Whether one of them is absent (not only empty).
    absent: bool,
    /// `webhook-timestamp` as received, when it is no number of seconds.
    bad_timestamp: Option<&'a str>,
    /// `webhook-id`, trimmed.
    id: &'a str,
}

/// The check itself, without its sentence.
fn verify<'a>(
    received: &Received<'a>,
    keys: &SigningKeys,
    sent: Option<&[u8]>,
    now: Timestamp,
) -> (Check, Details<'a>) {
    let mut answer = Check {
        code: Code::MissingHeader,
        signature_valid: false,
        signed_with: None,
        timestamp_age_secs: None,
        first_difference: None,
        message: String::new(),
    };
    let missing: Vec<&'static str> = [
        ("webhook-id", received.id),
        ("webhook-timestamp", received.timestamp),
        ("webhook-signature", received.signature),
    ]
    .into_iter()
    .filter(|(_, value)| value.is_none_or(|v| v.trim().is_empty()))
    .map(|(name, _)| name)
    .collect();
    let mut details = Details {
        missing,
        absent: true,
        bad_timestamp: None,
        id: "",
    };
    let (Some(id), Some(timestamp), Some(signature)) =
        (received.id, received.timestamp, received.signature)
    else {
        return (answer, details);
    };
    details.absent = false;
    if !details.missing.is_empty() {
        return (answer, details);
    }
    let (id, signature) = (id.trim(), signature.trim());
    details.id = id;
    // Seconds since 1970 up to the year 9999: anything else is no timestamp.
    let Some(seconds) = timestamp
        .trim()
        .parse::<i64>()
        .ok()
        .filter(|s| (0..=253_402_300_799).contains(s))
    else {
        answer.code = Code::Malformed;
        details.bad_timestamp = Some(timestamp);
        return (answer, details);
    };
    if !signature.split(' ').any(|s| s.starts_with("v1,")) {
        answer.code = Code::Malformed;
        return (answer, details);
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
        answer.code = if age.unsigned_abs() > TOLERANCE.as_secs() {
            Code::TimestampTooOld
        } else {
            Code::Verified
        };
        return (answer, details);
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
        }
        Some(_) => answer.code = Code::WrongSecret,
        None => answer.code = Code::NoMatch,
    }
    (answer, details)
}

/// The answer's sentence in `language`.
fn message(language: Language, answer: &Check, details: &Details<'_>) -> String {
    match language {
        Language::En => en::message(answer, details),
        Language::He => he::message(answer, details),
    }
}

/// How far a timestamp is from now, in the largest unit that says it in
/// more than one: 3 hours, 12 minutes, 40 seconds.
fn span(secs: u64) -> (u64, Unit) {
    match secs {
        s if s >= 7200 => (s / 3600, Unit::Hour),
        s if s >= 120 => (s / 60, Unit::Minute),
        s => (s, Unit::Second),
    }
}

/// The checker's sentences in English.
mod en {
    use super::*;
    use crate::explain::en::amount;

    pub(super) fn message(answer: &Check, details: &Details<'_>) -> String {
        let rotated = if answer.signed_with.as_deref() == Some("previous") {
            " It was made with the secret before the last rotation, which still signs during its grace period: switch your verifier to the current one."
        } else {
            ""
        };
        match answer.code {
            Code::MissingHeader if details.absent => format!(
                "The request lacks {}: a Standard Webhooks request carries webhook-id, webhook-timestamp and webhook-signature.",
                details.missing.join(" and ")
            ),
            Code::MissingHeader => format!("{} is empty.", details.missing.join(" and ")),
            Code::Malformed => match details.bad_timestamp {
                Some(timestamp) => format!(
                    "webhook-timestamp {timestamp:?} is not a number of seconds since 1970."
                ),
                None => "webhook-signature holds no v1,… signature (several are separated by spaces).".into(),
            },
            Code::TimestampTooOld => {
                let age = answer.timestamp_age_secs.unwrap_or_default();
                let (n, unit) = span(age.unsigned_abs());
                let (tolerance, tolerance_unit) = span(TOLERANCE.as_secs());
                format!(
                    "The signature is right, but the timestamp is {} {}: verifiers refuse timestamps more than {} away from their clock. If your server refused it on arrival, check its clock.{rotated}",
                    amount(n, unit),
                    if age >= 0 { "old" } else { "in the future" },
                    amount(tolerance, tolerance_unit)
                )
            }
            Code::Verified => format!("The signature is right: this request was signed by this endpoint's secret, and its timestamp is current.{rotated}"),
            Code::BodyChanged => format!(
                "The body differs from the one sent for {} from byte {} on: verify the raw body as received, before any JSON parsing or re-encoding (whitespace and key order count).",
                details.id,
                answer.first_difference.unwrap_or_default()
            ),
            Code::WrongSecret => "The body is the one sent, but no signature matches this endpoint's secrets over it: your verifier uses another secret (another endpoint's, or one a rotation replaced whose grace has ended), or webhook-id or webhook-timestamp changed on the way.".into(),
            Code::NoMatch => "No signature matches this endpoint's secret over this body: either the body changed (verify the raw body, before any parsing) or your verifier uses another secret.".into(),
        }
    }
}

/// The checker's sentences in Hebrew: the same function as `en`'s, each
/// value (a header's name, a count, the id) isolated so it keeps its direction.
mod he {
    use super::*;
    use crate::explain::he::{amount, iso};

    pub(super) fn message(answer: &Check, details: &Details<'_>) -> String {
        let rotated = if answer.signed_with.as_deref() == Some("previous") {
            " היא נוצרה עם הסוד שלפני ההחלפה האחרונה, שעדיין חותם בתקופת החסד שלו: העבירו את המאמת שלכם לסוד הנוכחי."
        } else {
            ""
        };
        let one = details.missing.len() == 1;
        match answer.code {
            Code::MissingHeader if details.absent => format!(
                "{} {}: בקשת Standard Webhooks כוללת את הכותרות {}.",
                if one { "בבקשה חסרה הכותרת" } else { "בבקשה חסרות הכותרות" },
                headers(&details.missing),
                headers(&["webhook-id", "webhook-timestamp", "webhook-signature"])
            ),
            Code::MissingHeader => format!(
                "{} {} {}.",
                if one { "הכותרת" } else { "הכותרות" },
                headers(&details.missing),
                if one { "ריקה" } else { "ריקות" }
            ),
            Code::Malformed => match details.bad_timestamp {
                Some(timestamp) => format!(
                    "הערך {} של {} אינו מספר שניות מאז 1970.",
                    iso(format!("{timestamp:?}")),
                    iso("webhook-timestamp")
                ),
                None => format!(
                    "הכותרת {} אינה מכילה חתימת v1,… (כמה חתימות מופרדות ברווחים).",
                    iso("webhook-signature")
                ),
            },
            Code::TimestampTooOld => {
                let age = answer.timestamp_age_secs.unwrap_or_default();
                let (n, unit) = span(age.unsigned_abs());
                let (tolerance, tolerance_unit) = span(TOLERANCE.as_secs());
                let when = if age >= 0 {
                    format!("מלפני {}", amount(n, unit))
                } else {
                    format!("{} בעתיד", amount(n, unit))
                };
                format!(
                    "החתימה נכונה, אבל חותמת הזמן היא {when}: מאמתי חתימות דוחים חותמות זמן שרחוקות מהשעון שלהם ביותר מ־{}. אם השרת שלכם דחה את הבקשה כשהגיעה, בדקו את השעון שלו.{rotated}",
                    amount(tolerance, tolerance_unit)
                )
            }
            Code::Verified => format!("החתימה נכונה: הבקשה נחתמה בסוד של נקודת הקצה הזו, וחותמת הזמן שלה עדכנית.{rotated}"),
            Code::BodyChanged => format!(
                "גוף הבקשה שונה מזה שנשלח עבור {}, החל מבייט {}: אמתו את גוף הבקשה הגולמי כפי שהתקבל, לפני כל פענוח או קידוד מחדש של JSON (גם רווחים וסדר המפתחות משנים).",
                iso(details.id),
                iso(answer.first_difference.unwrap_or_default())
            ),
            Code::WrongSecret => format!(
                "גוף הבקשה הוא זה שנשלח, אבל אף חתימה לא תואמת לסודות של נקודת הקצה הזו: המאמת שלכם משתמש בסוד אחר (של נקודת קצה אחרת, או סוד שהוחלף ותקופת החסד שלו הסתיימה), או ש־{} או {} השתנו בדרך.",
                iso("webhook-id"),
                iso("webhook-timestamp")
            ),
            Code::NoMatch => "אף חתימה לא תואמת לסוד של נקודת הקצה הזו על גוף הבקשה הזה: או שגוף הבקשה השתנה (אמתו את גוף הבקשה הגולמי, לפני כל פענוח), או שהמאמת שלכם משתמש בסוד אחר.".into(),
        }
    }

    /// Headers' names, isolated: "[a]", "[a] ו־[b]", "[a], [b] ו־[c]".
    fn headers(names: &[&str]) -> String {
        let names: Vec<String> = names.iter().map(iso).collect();
        match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} ו־{last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::hebrew_checks::{assert_twin, visible};
    use crate::signing::EndpointSecret;

    /// The check under test, in `language`. An English one is checked
    /// against its Hebrew twin on the way, so every case below covers both
    /// tables: the same answer, said in Hebrew with the same numbers.
    fn check(
        received: &Received<'_>,
        keys: &SigningKeys,
        sent: Option<&[u8]>,
        now: Timestamp,
        language: Language,
    ) -> Check {
        let answer = super::check(received, keys, sent, now, language);
        if language == Language::En {
            let hebrew = super::check(received, keys, sent, now, Language::He);
            let unsaid = |c: &Check| Check {
                message: String::new(),
                ..c.clone()
            };
            assert_eq!(unsaid(&answer), unsaid(&hebrew));
            assert_twin(&answer.message, &hebrew.message);
        }
        answer
    }

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
        let ok = check(
            &received(&ts, &sig, BODY),
            &keys,
            Some(BODY),
            NOW,
            Language::En,
        );
        assert_eq!(
            (ok.code, ok.signature_valid, ok.signed_with.as_deref()),
            (Code::Verified, true, Some("current"))
        );
        assert_eq!(ok.timestamp_age_secs, Some(10));

        let (old_ts, old_sig) = signed(&keys, now - 3 * 3600, BODY);
        let old = check(
            &received(&old_ts, &old_sig, BODY),
            &keys,
            Some(BODY),
            NOW,
            Language::En,
        );
        assert_eq!(
            (old.code, old.signature_valid),
            (Code::TimestampTooOld, true)
        );
        assert!(old.message.contains("3 hours old"), "{}", old.message);

        let changed =
            br#"{"type":"order.paid","timestamp":"2027-01-15T08:00:00Z","data":{"n": 1}}"#;
        let body = check(
            &received(&ts, &sig, changed),
            &keys,
            Some(BODY),
            NOW,
            Language::En,
        );
        assert_eq!(
            (body.code, body.first_difference),
            (Code::BodyChanged, Some(68))
        );

        let other = SigningKeys::new(EndpointSecret::generate());
        let (ts2, sig2) = signed(&other, now, BODY);
        let wrong = check(
            &received(&ts2, &sig2, BODY),
            &keys,
            Some(BODY),
            NOW,
            Language::En,
        );
        assert_eq!(
            (wrong.code, wrong.signature_valid),
            (Code::WrongSecret, false)
        );
        let unknown = check(&received(&ts2, &sig2, BODY), &keys, None, NOW, Language::En);
        assert_eq!(unknown.code, Code::NoMatch);

        let mut missing = received(&ts, &sig, BODY);
        missing.signature = None;
        let lacks = check(&missing, &keys, Some(BODY), NOW, Language::En);
        assert_eq!(lacks.code, Code::MissingHeader);
        assert!(
            lacks.message.contains("webhook-signature"),
            "{}",
            lacks.message
        );
        assert_eq!(
            check(
                &received("soon", &sig, BODY),
                &keys,
                None,
                NOW,
                Language::En
            )
            .code,
            Code::Malformed
        );
        for extreme in ["-9223372036854775808", "9223372036854775807", "-1"] {
            let answer = check(
                &received(extreme, &sig, BODY),
                &keys,
                None,
                NOW,
                Language::En,
            );
            assert_eq!(answer.code, Code::Malformed, "{extreme}");
        }
        assert_eq!(
            check(
                &received(&ts, "v2,abc", BODY),
                &keys,
                None,
                NOW,
                Language::En
            )
            .code,
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
        let answer = check(
            &received(&ts, &sig, BODY),
            &rotated,
            Some(BODY),
            NOW,
            Language::En,
        );
        assert_eq!(
            (answer.code, answer.signed_with.as_deref()),
            (Code::Verified, Some("previous"))
        );
        assert!(answer.message.contains("rotation"), "{}", answer.message);
        // After the grace, it no longer does.
        let later = NOW + Duration::from_secs(7200);
        let after = check(
            &received(&ts, &sig, BODY),
            &rotated,
            Some(BODY),
            later,
            Language::En,
        );
        assert_eq!(after.code, Code::WrongSecret);
    }

    #[test]
    fn the_hebrew_table_says_each_answer_in_hebrew() {
        let keys = SigningKeys::new(EndpointSecret::generate());
        let now = NOW.as_millis() / 1000;
        let hebrew = |received: &Received<'_>, sent: Option<&[u8]>| {
            visible(&check(received, &keys, sent, NOW, Language::He).message)
        };
        let (ts, sig) = signed(&keys, now - 10, BODY);
        assert_eq!(
            hebrew(&received(&ts, &sig, BODY), Some(BODY)),
            "החתימה נכונה: הבקשה נחתמה בסוד של נקודת הקצה הזו, וחותמת הזמן שלה עדכנית."
        );
        let (old_ts, old_sig) = signed(&keys, now - 3 * 3600, BODY);
        assert_eq!(
            hebrew(&received(&old_ts, &old_sig, BODY), Some(BODY)),
            "החתימה נכונה, אבל חותמת הזמן היא מלפני [3] שעות: מאמתי חתימות דוחים חותמות זמן שרחוקות מהשעון שלהם ביותר מ־[5] דקות. אם השרת שלכם דחה את הבקשה כשהגיעה, בדקו את השעון שלו."
        );
        let changed =
            br#"{"type":"order.paid","timestamp":"2027-01-15T08:00:00Z","data":{"n": 1}}"#;
        assert_eq!(
            hebrew(&received(&ts, &sig, changed), Some(BODY)),
            "גוף הבקשה שונה מזה שנשלח עבור [msg_1], החל מבייט [68]: אמתו את גוף הבקשה הגולמי כפי שהתקבל, לפני כל פענוח או קידוד מחדש של JSON (גם רווחים וסדר המפתחות משנים)."
        );
        let mut missing = received(&ts, &sig, BODY);
        missing.timestamp = None;
        missing.signature = None;
        assert_eq!(
            hebrew(&missing, None),
            "בבקשה חסרות הכותרות [webhook-timestamp] ו־[webhook-signature]: בקשת Standard Webhooks כוללת את הכותרות [webhook-id], [webhook-timestamp] ו־[webhook-signature]."
        );
        let mut empty = received(&ts, &sig, BODY);
        empty.id = Some(" ");
        assert_eq!(hebrew(&empty, None), "הכותרת [webhook-id] ריקה.");
        assert_eq!(
            hebrew(&received("soon", &sig, BODY), None),
            "הערך [\"soon\"] של [webhook-timestamp] אינו מספר שניות מאז 1970."
        );
        // An empty header's English twin, which the tests above do not meet.
        assert_eq!(
            check(&empty, &keys, None, NOW, Language::En).message,
            "webhook-id is empty."
        );
    }
}
