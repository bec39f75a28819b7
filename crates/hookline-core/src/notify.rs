//! Customer notifications: an app's own channels for what happens to its endpoints.
//!
//! Operational events ([`crate::operational`]) tell the operator about every
//! app. A customer may also be told about its own app: each **channel** is an
//! endpoint of the internal app that belongs to the customer's app (its
//! `owner_app`), subscribed to some of [`EVENTS`] and scoped to the app by a
//! payload filter ([`scope_filter`]). Notices therefore take the same pipeline
//! as every event — stored, retried, ordered per endpoint, in the internal
//! app's log — and a channel differs from a webhook only in where it goes and
//! what it sends:
//!
//! - **e-mail**: the endpoint's URL is `mailto:<address>`; the dispatcher sends
//!   [`message`] over SMTP;
//! - **chat**: Slack, Microsoft Teams or Discord incoming webhooks; the
//!   endpoint's `transform` names the [`chat::Format`] and the dispatcher posts
//!   [`message`] in it (signed, as every POST).
//!
//! A notice names the endpoint, what happened, since when, and links into the
//! portal (`portal_url`, which the publisher adds to the payload: the app's
//! `sign_in_url` with the screen to open, or the portal page itself).
//!
//! Its words — the e-mail's subject and text, the chat's title, text and
//! link — are in the app's portal language: the payload's `language`
//! (`"he"`, which the publisher adds from `portal.language`; English
//! without one). Each fact is read from the payload once; each language's
//! table ([`en`], [`he`]) only words it.

use serde_json::Value;

use crate::chat::{Format, Message};
use crate::ids::AppId;
use crate::language::Language;
use crate::operational::Kind;

/// What a customer can be told of: its own endpoints' operational events.
pub const EVENTS: [Kind; 6] = [
    Kind::EndpointFailing,
    Kind::EndpointRecovered,
    Kind::EndpointDisabled,
    Kind::EndpointEnabled,
    Kind::DeliveryDead,
    Kind::ReplayFinished,
];

/// The most channels one app may have.
pub const MAX_CHANNELS: usize = 20;

/// Where a channel sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChannelKind {
    Email,
    Chat(Format),
}

impl ChannelKind {
    pub const ALL: [ChannelKind; 4] = [
        ChannelKind::Email,
        ChannelKind::Chat(Format::Slack),
        ChannelKind::Chat(Format::Teams),
        ChannelKind::Chat(Format::Discord),
    ];

    pub const fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Email => "email",
            ChannelKind::Chat(format) => format.as_str(),
        }
    }

    pub fn parse(text: &str) -> Option<ChannelKind> {
        ChannelKind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// A notice's name for customers: its operational type without the product's
/// prefix (`endpoint.failing`).
pub fn event_name(kind: Kind) -> &'static str {
    let name = kind.event_type();
    &name[crate::operational::TYPE_PREFIX.len()..]
}

/// The notice a customer-facing name stands for, if it is one of [`EVENTS`].
pub fn parse_event(name: &str) -> Option<Kind> {
    EVENTS.into_iter().find(|k| event_name(*k) == name)
}

/// The payload filter that keeps a channel to its app's notices.
pub fn scope_filter(app: &AppId) -> String {
    format!("/app_id = \"{app}\"")
}

/// The mail address of an e-mail channel's endpoint URL (`mailto:a@b.example`).
pub fn mail_address(url: &str) -> Option<&str> {
    url.strip_prefix("mailto:")
}

/// Checks a customer's e-mail address: one `local@domain` of at most 254
/// characters, nothing a mail header or URL could read as more than that.
pub fn check_address(address: &str) -> Result<String, &'static str> {
    let address = address.trim();
    let (local, domain) = address
        .rsplit_once('@')
        .ok_or("an e-mail address has the form name@example.com")?;
    // RFC 5322's atom characters, less those a `mailto:` URL would read as
    // more than the address (`#`, `?`, `%`, `/`).
    let fine = |c: char| c.is_ascii_alphanumeric() || "!$&'*+-=^_`{|}~.".contains(c);
    if address.len() > 254
        || local.is_empty()
        || local.len() > 64
        || !local.chars().all(fine)
        || domain.split('.').count() < 2
        || !domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
    {
        return Err("an e-mail address has the form name@example.com");
    }
    Ok(address.to_owned())
}

/// What a notice's envelope (as published into the internal app) says, for
/// people, in the language its data names (`"language": "he"`; English
/// without one). Any other envelope is told as its type and payload.
pub fn message(envelope: &[u8]) -> Message {
    let envelope: Value = serde_json::from_slice(envelope).unwrap_or(Value::Null);
    let event_type = envelope["type"].as_str().unwrap_or("event");
    let data = &envelope["data"];
    match Kind::parse(event_type) {
        Some(kind) => match language(data) {
            Language::En => en::notice(kind, data),
            Language::He => he::notice(kind, data),
        },
        None => Message {
            title: event_type.to_owned(),
            text: serde_json::to_string_pretty(data).unwrap_or_default(),
            link: None,
        },
    }
}

/// The language a notice is told in: its data's `language` (`"he"`), which
/// the publisher adds from the app's `portal.language`; English when it names
/// none, or one not spoken here.
fn language(data: &Value) -> Language {
    data["language"]
        .as_str()
        .map_or(Language::En, Language::negotiate)
}

// What a notice's words are made of, read from its data once for every
// language's table.

/// How an endpoint is named: its description, or its URL without the scheme,
/// or its id.
fn endpoint(data: &Value) -> Option<String> {
    let description = data["endpoint_description"].as_str().unwrap_or("");
    // One line, and short: it is a mail's subject and a chat's title.
    let description = description.split_whitespace().collect::<Vec<_>>().join(" ");
    if !description.is_empty() {
        return Some(if description.chars().count() > 80 {
            description.chars().take(79).chain(['…']).collect()
        } else {
            description
        });
    }
    match data["endpoint_url"].as_str() {
        Some(url) => {
            let bare = url.split_once("://").map_or(url, |(_, rest)| rest);
            Some(bare.split(['?', '#']).next().unwrap_or(bare).to_owned())
        }
        None => data["endpoint_id"].as_str().map(str::to_owned),
    }
}

/// "2026-12-06 14:02 UTC" from an RFC 3339 UTC time.
fn when(data: &Value, field: &str) -> Option<String> {
    let text = data[field].as_str()?;
    let (date, time) = text.split_once('T')?;
    Some(format!("{date} {} UTC", time.get(..5)?))
}

/// What the endpoint's last failure was.
enum Failure<'a> {
    /// It answered this status.
    Status(u16),
    /// Something else, as the endpoint keeps it ("timeout: …").
    Other(&'a str),
}

/// The endpoint's `last_error`: "HTTP 503" (as endpoints keep it) or "503
/// Service Unavailable" is a status; anything else is told as it is.
fn last_failure(data: &Value) -> Option<Failure<'_>> {
    let error = data["last_error"].as_str()?;
    let status = match error.strip_prefix("HTTP ") {
        Some(code) => code.parse::<u16>().ok(),
        None => error
            .split_once(' ')
            .and_then(|(code, _)| code.parse::<u16>().ok())
            .filter(|&code| crate::explain::en::http_status(code) == error),
    };
    Some(status.map_or(Failure::Other(error), Failure::Status))
}

/// The status the newest dead delivery got.
fn last_status(data: &Value) -> Option<u16> {
    data["last_status"]
        .as_u64()
        .and_then(|s| u16::try_from(s).ok())
}

fn count(data: &Value, field: &str) -> u64 {
    data[field].as_u64().unwrap_or(0)
}

/// The link into the portal (`portal_url`), called `label`.
fn link(data: &Value, label: &str) -> Option<(String, String)> {
    data["portal_url"]
        .as_str()
        .map(|url| (url.to_owned(), label.to_owned()))
}

/// The English sentences of notices.
pub mod en {
    use super::*;
    use crate::explain::en::http_status;

    fn plural(n: u64, one: &str, many: &str) -> String {
        format!("{n} {}", if n == 1 { one } else { many })
    }

    pub fn notice(kind: Kind, data: &Value) -> Message {
        let name = endpoint(data).unwrap_or_else(|| "An endpoint".to_owned());
        let since = |field| {
            when(data, field)
                .map(|t| format!("Since {t}, "))
                .unwrap_or_default()
        };
        let failure = last_failure(data).map(|failure| match failure {
            Failure::Status(code) => http_status(code),
            Failure::Other(error) => error.to_owned(),
        });
        let (title, text, label) = match kind {
            Kind::EndpointFailing => (
                format!("{name} is failing"),
                format!(
                    "{}{} to it have failed in a row{}. Deliveries wait and are retried; nothing is lost yet. Check the endpoint, then watch it recover in the portal.",
                    since("since"),
                    plural(count(data, "consecutive_failures"), "attempt", "attempts"),
                    failure.map(|f| format!(", the last with {f}")).unwrap_or_default()
                ),
                "Open the endpoint",
            ),
            Kind::EndpointRecovered => (
                format!("{name} recovered"),
                format!(
                    "It answered successfully again after {}. Waiting deliveries are being sent.",
                    plural(count(data, "failures_before"), "failed attempt", "failed attempts")
                ),
                "Open the endpoint",
            ),
            Kind::EndpointDisabled => (
                format!("{name} was disabled"),
                match data["reason"].as_str() {
                    Some("gone") => "It answered 410 Gone, so nothing more is sent to it. If that was a mistake, enable it again in the portal.".to_owned(),
                    Some("failing") => "It failed for too long, so nothing more is sent to it. Fix it, enable it again in the portal, then recover what failed.".to_owned(),
                    _ => "It was disabled by hand: nothing more is sent to it until it is enabled again.".to_owned(),
                },
                "Open the endpoint",
            ),
            Kind::EndpointEnabled => (
                format!("{name} was enabled"),
                "Deliveries are sent to it again.".to_owned(),
                "Open the endpoint",
            ),
            Kind::DeliveryDead => {
                let n = count(data, "count");
                let last = last_status(data)
                    .map(|s| format!(", the last after {}", http_status(s)))
                    .unwrap_or_default();
                (
                    format!("{} to {name} failed for good", plural(n, "delivery", "deliveries")),
                    format!(
                        "{}{} will not be retried{last}. Fix the endpoint, then recover them in the portal.",
                        since("window_start"),
                        plural(n, "delivery", "deliveries")
                    ),
                    "See what failed",
                )
            }
            Kind::ReplayFinished => {
                let (total, replayed) = (count(data, "total"), count(data, "replayed"));
                let cancelled = data["state"].as_str() == Some("cancelled");
                (
                    if cancelled {
                        "A recovery was cancelled".to_owned()
                    } else {
                        "A recovery finished".to_owned()
                    },
                    format!(
                        "{replayed} of {} {} sent again.",
                        plural(total, "failed delivery", "failed deliveries"),
                        if replayed == 1 { "was" } else { "were" }
                    ),
                    "Open the portal",
                )
            }
            _ => (
                format!("{name} changed"),
                String::new(),
                "Open the endpoint",
            ),
        };
        Message {
            title,
            text,
            link: link(data, label),
        }
    }
}

/// The Hebrew sentences of notices: the same function as [`en`]'s, each
/// value (the endpoint's name, a time, a count, a status) isolated so it
/// keeps its direction.
pub mod he {
    use super::*;
    use crate::explain::he::{failed_attempts, http_status, iso, ATTEMPTS, DELIVERIES};

    pub fn notice(kind: Kind, data: &Value) -> Message {
        // "נקודת הקצה [orders.acme.io/hooks]"; "נקודת קצה" when it has no name.
        let endpoint = endpoint(data).map_or_else(
            || "נקודת קצה".to_owned(),
            |name| format!("נקודת הקצה {}", iso(name)),
        );
        let since = |field| {
            when(data, field)
                .map(|t| format!("מאז {}, ", iso(t)))
                .unwrap_or_default()
        };
        let failure = last_failure(data).map(|failure| match failure {
            Failure::Status(code) => http_status(code),
            Failure::Other(error) => iso(error),
        });
        let (title, text, label) = match kind {
            Kind::EndpointFailing => {
                let n = count(data, "consecutive_failures");
                (
                    format!("{endpoint} נכשלת"),
                    format!(
                        "{}{} לשלוח אליה {} ברצף{}. המסירות ממתינות לניסיון חוזר; שום דבר עוד לא אבד. בדקו את נקודת הקצה, ואז עקבו בפורטל אחרי ההתאוששות שלה.",
                        since("since"),
                        ATTEMPTS.count(n),
                        if n == 1 { "נכשל" } else { "נכשלו" },
                        failure.map(|f| format!(", האחרון עם {f}")).unwrap_or_default()
                    ),
                    "פתחו את נקודת הקצה",
                )
            }
            Kind::EndpointRecovered => (
                format!("{endpoint} חזרה לפעול"),
                format!(
                    "היא ענתה שוב בהצלחה אחרי {}. המסירות הממתינות נשלחות עכשיו.",
                    failed_attempts(count(data, "failures_before"))
                ),
                "פתחו את נקודת הקצה",
            ),
            Kind::EndpointDisabled => (
                format!("{endpoint} הושבתה"),
                match data["reason"].as_str() {
                    Some("gone") => format!(
                        "היא ענתה {}, ולכן לא יישלח אליה דבר נוסף. אם זו הייתה טעות, הפעילו אותה מחדש בפורטל.",
                        http_status(410)
                    ),
                    Some("failing") => "היא נכשלה זמן רב מדי, ולכן לא יישלח אליה דבר נוסף. תקנו אותה, הפעילו אותה מחדש בפורטל, ואז שחזרו את מה שנכשל.".to_owned(),
                    _ => "היא הושבתה ידנית: לא יישלח אליה דבר עד שתופעל מחדש.".to_owned(),
                },
                "פתחו את נקודת הקצה",
            ),
            Kind::EndpointEnabled => (
                format!("{endpoint} הופעלה"),
                "המסירות נשלחות אליה שוב.".to_owned(),
                "פתחו את נקודת הקצה",
            ),
            Kind::DeliveryDead => {
                let n = count(data, "count");
                let one = n == 1;
                let last = last_status(data)
                    .map(|s| format!(", האחרונה אחרי {}", http_status(s)))
                    .unwrap_or_default();
                (
                    format!(
                        "{} ל{endpoint} {} סופית",
                        DELIVERIES.count(n),
                        if one { "נכשלה" } else { "נכשלו" }
                    ),
                    format!(
                        "{}{} {} עוד ניסיון חוזר{last}. תקנו את נקודת הקצה, ואז שחזרו {} בפורטל.",
                        since("window_start"),
                        DELIVERIES.count(n),
                        if one { "לא תקבל" } else { "לא יקבלו" },
                        if one { "אותה" } else { "אותן" }
                    ),
                    "ראו מה נכשל",
                )
            }
            Kind::ReplayFinished => {
                let (total, replayed) = (count(data, "total"), count(data, "replayed"));
                let cancelled = data["state"].as_str() == Some("cancelled");
                (
                    if cancelled {
                        "שחזור בוטל".to_owned()
                    } else {
                        "שחזור הסתיים".to_owned()
                    },
                    format!(
                        "{} מתוך {} {} {} שוב.",
                        iso(replayed),
                        DELIVERIES.count(total),
                        if total == 1 { "שנכשלה" } else { "שנכשלו" },
                        if replayed == 1 { "נשלחה" } else { "נשלחו" }
                    ),
                    "פתחו את הפורטל",
                )
            }
            _ => (
                format!("{endpoint} השתנתה"),
                String::new(),
                "פתחו את נקודת הקצה",
            ),
        };
        Message {
            title,
            text,
            link: link(data, label),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::hebrew_checks::{assert_hebrew, assert_twin, visible};
    use crate::model::envelope;
    use crate::time::Timestamp;
    use serde_json::json;

    fn tell(kind: Kind, data: &Value) -> Message {
        message(&envelope(
            kind.event_type(),
            Timestamp::from_millis(1_800_000_000_000),
            data,
        ))
    }

    /// The notice of `kind` about `data`, in English. Its Hebrew twin (the
    /// same data with `"language": "he"`) is checked on the way, so every
    /// case below covers both tables: a Hebrew title, text and link label
    /// that name the same numbers, and the same link.
    fn told(kind: Kind, data: Value) -> Message {
        let english = tell(kind, &data);
        let mut hebrew = data;
        hebrew["language"] = "he".into();
        let hebrew = tell(kind, &hebrew);
        assert_twin(&english.title, &hebrew.title);
        if english.text.is_empty() {
            assert!(hebrew.text.is_empty(), "{}", hebrew.text);
        } else {
            assert_twin(&english.text, &hebrew.text);
        }
        assert_eq!(
            english.link.as_ref().map(|(url, _)| url),
            hebrew.link.as_ref().map(|(url, _)| url)
        );
        if let Some((_, label)) = &hebrew.link {
            assert_hebrew(label);
        }
        english
    }

    #[test]
    fn a_failing_notice_names_the_endpoint_what_it_answers_since_when_and_links_to_it() {
        let m = told(
            Kind::EndpointFailing,
            json!({"app_id": "app_1", "endpoint_id": "ep_1", "endpoint_url": "https://orders.acme.io/hooks?x=1",
                "endpoint_description": "", "consecutive_failures": 20, "last_error": "HTTP 503",
                "since": "2026-12-06T14:02:11.000Z", "portal_url": "https://p.example/#/endpoints/ep_1"}),
        );
        assert_eq!(m.title, "orders.acme.io/hooks is failing");
        assert_eq!(
            m.text,
            "Since 2026-12-06 14:02 UTC, 20 attempts to it have failed in a row, the last with 503 Service Unavailable. \
             Deliveries wait and are retried; nothing is lost yet. Check the endpoint, then watch it recover in the portal."
        );
        assert_eq!(
            m.link,
            Some((
                "https://p.example/#/endpoints/ep_1".into(),
                "Open the endpoint".into()
            ))
        );
    }

    #[test]
    fn an_endpoint_is_named_by_its_description_first() {
        let m = told(
            Kind::EndpointRecovered,
            json!({"app_id": "app_1", "endpoint_id": "ep_1", "endpoint_url": "https://a.example/",
                "endpoint_description": "Orders", "failures_before": 1}),
        );
        assert_eq!(m.title, "Orders recovered");
        let long = told(
            Kind::EndpointEnabled,
            json!({"app_id": "app_1", "endpoint_id": "ep_1", "endpoint_description": format!("Orders\n\tinto {}", "x".repeat(200))}),
        );
        assert_eq!(long.title.chars().count(), 80 + " was enabled".len());
        assert!(long.title.starts_with("Orders into xxx") && long.title.contains("… was enabled"));
        assert_eq!(
            m.text,
            "It answered successfully again after 1 failed attempt. Waiting deliveries are being sent."
        );
        assert_eq!(m.link, None);
    }

    #[test]
    fn every_notice_a_customer_can_get_has_its_own_words() {
        for kind in EVENTS {
            let m = told(kind, kind.example());
            assert!(!m.title.is_empty() && !m.text.is_empty(), "{kind:?}");
            assert!(!m.title.contains("hookline") && !m.text.contains("Hookline"));
        }
        let dead = told(Kind::DeliveryDead, Kind::DeliveryDead.example());
        assert_eq!(
            dead.title,
            "42 deliveries to ep_01J0000000000000000000000B failed for good"
        );
        assert_eq!(
            dead.text,
            "Since 2026-12-03 10:00 UTC, 42 deliveries will not be retried, the last after 400 Bad Request. \
             Fix the endpoint, then recover them in the portal."
        );
        let disabled = told(Kind::EndpointDisabled, Kind::EndpointDisabled.example());
        assert!(disabled.text.starts_with("It answered 410 Gone"));
        let replay = told(Kind::ReplayFinished, Kind::ReplayFinished.example());
        assert_eq!(replay.text, "118 of 120 failed deliveries were sent again.");
    }

    #[test]
    fn another_event_is_told_as_its_type_and_payload() {
        let m = message(br#"{"type":"order.paid","timestamp":"x","data":{"id":7}}"#);
        assert_eq!(m.title, "order.paid");
        assert_eq!(m.text, "{\n  \"id\": 7\n}");
    }

    #[test]
    fn customer_names_drop_the_products_prefix_and_read_back() {
        assert_eq!(event_name(Kind::EndpointFailing), "endpoint.failing");
        assert_eq!(event_name(Kind::DeliveryDead), "delivery.dead");
        for kind in EVENTS {
            assert_eq!(parse_event(event_name(kind)), Some(kind));
        }
        assert_eq!(parse_event("endpoint.created"), None);
        assert_eq!(parse_event("hookline.endpoint.failing"), None);
    }

    #[test]
    fn the_scope_filter_keeps_a_channel_to_its_app() {
        let app = AppId::parse("app_01J0000000000000000000000A").unwrap();
        let filter = crate::filter::Filter::parse(&scope_filter(&app)).unwrap();
        assert!(filter.matches(&json!({"app_id": "app_01J0000000000000000000000A"})));
        assert!(!filter.matches(&json!({"app_id": "app_01J0000000000000000000000B"})));
    }

    #[test]
    fn addresses_are_one_plain_mailbox() {
        assert_eq!(check_address(" ops@acme.io "), Ok("ops@acme.io".into()));
        for bad in [
            "ops",
            "@acme.io",
            "ops@acme",
            "a b@acme.io",
            "ops@acme.io\r\nBcc: x@y.z",
            "ops@-.",
            "a@b@c.io",
        ] {
            assert!(check_address(bad).is_err(), "{bad:?}");
        }
        for kind in ChannelKind::ALL {
            assert_eq!(ChannelKind::parse(kind.as_str()), Some(kind));
        }
    }

    #[test]
    fn a_notice_is_told_in_the_language_its_data_names() {
        let hebrew = |kind: Kind, mut data: Value| {
            data["language"] = "he".into();
            let m = tell(kind, &data);
            (
                visible(&m.title),
                visible(&m.text),
                m.link.map(|(_, label)| label),
            )
        };
        assert_eq!(
            hebrew(
                Kind::EndpointFailing,
                json!({"app_id": "app_1", "endpoint_id": "ep_1", "endpoint_url": "https://orders.acme.io/hooks",
                    "consecutive_failures": 20, "last_error": "HTTP 503", "since": "2026-12-06T14:02:11.000Z",
                    "portal_url": "https://p.example/#/endpoints/ep_1"})
            ),
            (
                "נקודת הקצה [orders.acme.io/hooks] נכשלת".to_owned(),
                "מאז [2026-12-06 14:02 UTC], [20] ניסיונות לשלוח אליה נכשלו ברצף, האחרון עם [503] השירות אינו זמין. \
                 המסירות ממתינות לניסיון חוזר; שום דבר עוד לא אבד. בדקו את נקודת הקצה, ואז עקבו בפורטל אחרי ההתאוששות שלה."
                    .to_owned(),
                Some("פתחו את נקודת הקצה".to_owned()),
            )
        );
        assert_eq!(
            hebrew(Kind::DeliveryDead, Kind::DeliveryDead.example()),
            (
                "[42] מסירות לנקודת הקצה [ep_01J0000000000000000000000B] נכשלו סופית".to_owned(),
                "מאז [2026-12-03 10:00 UTC], [42] מסירות לא יקבלו עוד ניסיון חוזר, האחרונה אחרי [400] בקשה שגויה. \
                 תקנו את נקודת הקצה, ואז שחזרו אותן בפורטל."
                    .to_owned(),
                None,
            )
        );
        let recovered = json!({"app_id": "app_1", "endpoint_id": "ep_1", "endpoint_description": "הזמנות", "failures_before": 2});
        assert_eq!(
            hebrew(Kind::EndpointRecovered, recovered).1,
            "היא ענתה שוב בהצלחה אחרי שני ניסיונות שנכשלו. המסירות הממתינות נשלחות עכשיו."
        );
        assert_eq!(
            hebrew(Kind::ReplayFinished, Kind::ReplayFinished.example()),
            (
                "שחזור הסתיים".to_owned(),
                "[118] מתוך [120] מסירות שנכשלו נשלחו שוב.".to_owned(),
                None,
            )
        );
        // A language not spoken here, or none, is English.
        for language in [json!("fr"), json!(7), Value::Null] {
            let mut data = Kind::EndpointEnabled.example();
            data["language"] = language;
            assert_eq!(
                tell(Kind::EndpointEnabled, &data).text,
                "Deliveries are sent to it again."
            );
        }
    }
}
