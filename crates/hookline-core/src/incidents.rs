//! What is wrong now with an app's endpoints, grouped by cause: the
//! portal's home ("since 14:02 two endpoints answer 401: 312 deliveries
//! wait") and `GET /v1/apps/{app}/incidents`.
//!
//! The store finds the endpoints in trouble — failing (the breaker not closed,
//! or failures in a row), disabled, paused with deliveries held, or with
//! deliveries dead-lettered lately — and what caused it, as an
//! [`Explanation`](crate::explain::Explanation) of the newest failed attempt
//! or dead delivery. [`group`] puts the endpoints with the same trouble and
//! the same cause together, worst first, and says each group in one sentence
//! in the request's language: from [`en`] (English) or [`he`] (Hebrew), the
//! same functions of the same group.

use serde::{Deserialize, Serialize};

use crate::explain::{self, Action, Code};
use crate::language::Language;
use crate::model::TransportError;
use crate::time::Timestamp;

/// What is wrong with an endpoint, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = IncidentKind))]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Its attempts fail (the breaker is open or half-open, or the last ones
    /// failed in a row): its deliveries wait and are retried.
    Failing,
    /// Disabled (410 Gone, failing too long, or by hand): its deliveries are kept.
    Disabled,
    /// Deliveries went to the dead-letter queue lately (refused, out of retries).
    DeadLetters,
    /// Paused with deliveries held.
    Paused,
}

/// One endpoint in trouble, as the store found it.
#[derive(Debug, Clone, PartialEq)]
pub struct Trouble {
    pub kind: Kind,
    /// What caused it (the newest failed attempt's, or dead delivery's, explanation).
    pub cause: Option<explain::Explanation>,
    /// Since when: the breaker's `failing_since`, the disable or pause, the first death of the window.
    pub since: Option<Timestamp>,
    /// Deliveries that wait (pending, parked).
    pub waiting: u64,
    /// Deliveries dead-lettered in the window.
    pub dead: u64,
    /// The disable's reason.
    pub disabled_reason: Option<String>,
}

/// Endpoints with the same trouble and cause.
#[derive(Debug, Clone, PartialEq)]
pub struct Group<T> {
    pub kind: Kind,
    pub code: Option<Code>,
    pub status: Option<u16>,
    pub error_kind: Option<TransportError>,
    /// The earliest of its endpoints' `since`.
    pub since: Option<Timestamp>,
    pub waiting: u64,
    pub dead: u64,
    pub action: Action,
    pub message: String,
    /// Each endpoint (the caller's item) with its trouble.
    pub endpoints: Vec<(T, Trouble)>,
    /// What its endpoints' causes share ([`key`]).
    key: Key,
}

type Key = (Option<Code>, Option<u16>, Option<TransportError>);

/// Groups `troubles` by kind and cause (kind first, then the most deliveries
/// affected), each with its sentence in `language`. `T` is the caller's endpoint.
pub fn group<T>(troubles: Vec<(T, Trouble)>, language: Language) -> Vec<Group<T>> {
    let mut groups: Vec<Group<T>> = Vec::new();
    for (endpoint, trouble) in troubles {
        let shared = key(trouble.kind, trouble.cause.as_ref());
        let reason = trouble.disabled_reason.clone();
        let found = groups.iter_mut().find(|g| {
            g.kind == trouble.kind
                && g.key == shared
                && (g.kind != Kind::Disabled
                    || g.endpoints.first().map(|(_, t)| &t.disabled_reason) == Some(&reason))
        });
        let group = match found {
            Some(group) => group,
            None => {
                let cause = trouble.cause.as_ref();
                groups.push(Group {
                    kind: trouble.kind,
                    code: cause.map(|c| c.code),
                    status: cause.and_then(|c| c.status),
                    error_kind: cause.and_then(|c| c.error_kind),
                    key: shared,
                    since: None,
                    waiting: 0,
                    dead: 0,
                    action: action(trouble.kind, trouble.cause.as_ref()),
                    message: String::new(),
                    endpoints: Vec::new(),
                });
                groups.last_mut().expect("just pushed")
            }
        };
        group.waiting += trouble.waiting;
        group.dead += trouble.dead;
        group.since = match (group.since, trouble.since) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        group.endpoints.push((endpoint, trouble));
    }
    for group in &mut groups {
        group.message = match language {
            Language::En => en::message(group),
            Language::He => he::message(group),
        };
    }
    groups.sort_by(|a, b| {
        a.kind
            .cmp(&b.kind)
            .then((b.waiting + b.dead).cmp(&(a.waiting + a.dead)))
    });
    groups
}

/// What makes two endpoints' causes the same: for failing ones what their
/// endpoint answered (or why it did not), whichever attempt it was; for dead
/// letters that ran out of retries, only that.
fn key(kind: Kind, cause: Option<&explain::Explanation>) -> Key {
    let Some(c) = cause else {
        return (None, None, None);
    };
    match (kind, c.code) {
        (Kind::Failing, _) if c.status.is_some() => (None, c.status, None),
        (Kind::Failing, code) => (Some(code), None, c.error_kind),
        (Kind::DeadLetters, code @ (Code::MaxAttempts | Code::MaxAge)) => (Some(code), None, None),
        (_, code) => (Some(code), c.status, c.error_kind),
    }
}

fn action(kind: Kind, cause: Option<&explain::Explanation>) -> Action {
    match kind {
        Kind::Failing => Action::FixEndpoint,
        Kind::Disabled => Action::Enable,
        Kind::Paused => Action::Resume,
        Kind::DeadLetters => cause.map_or(Action::FixThenReplay, |c| match c.action {
            Action::None | Action::Wait | Action::FixEndpoint => Action::FixThenReplay,
            other => other,
        }),
    }
}

/// The groups' sentences, in English.
pub mod en {
    use super::*;

    pub fn message<T>(g: &Group<T>) -> String {
        let n = g.endpoints.len();
        let who = |one: &str, many: &str| {
            if n == 1 {
                format!("Your endpoint {one}")
            } else {
                format!("{n} endpoints {many}")
            }
        };
        match g.kind {
            Kind::Failing => format!(
                "{}: {} and {} retried.",
                who(&failing(g, false), &failing(g, true)),
                deliveries(g.waiting, "waits", "wait"),
                if g.waiting == 1 { "is" } else { "are" }
            ),
            Kind::Disabled => {
                let why = match g
                    .endpoints
                    .first()
                    .and_then(|(_, t)| t.disabled_reason.as_deref())
                {
                    Some("gone") => " after answering 410 Gone",
                    Some("failing") => " after failing for too long",
                    Some("manual") => " by hand",
                    _ => "",
                };
                let disabled = who("is disabled", "are disabled");
                match g.waiting {
                    0 => format!("{disabled}{why}."),
                    n => format!(
                        "{disabled}{why}: {} kept until it is enabled again.",
                        deliveries(n, "is", "are")
                    ),
                }
            }
            Kind::Paused => {
                let paused = who("is paused", "are paused");
                match g.waiting {
                    0 => format!("{paused}."),
                    n => format!(
                        "{paused}: {} held until it is resumed.",
                        deliveries(n, "is", "are")
                    ),
                }
            }
            Kind::DeadLetters => format!(
                "{}: {} in the dead-letter queue. {}",
                who(&refused(g, false), &refused(g, true)),
                deliveries(g.dead, "is", "are"),
                match g.action {
                    Action::ChangeUrlThenReplay => "Change the URL, then recover them.",
                    Action::EnableThenReplay => "Enable it again, then recover them.",
                    _ => "Fix it, then recover them.",
                }
            ),
        }
    }

    /// "answers 503 Service Unavailable", "times out", … (`many`: plural verbs).
    fn failing<T>(g: &Group<T>, many: bool) -> String {
        let s = |one: &str, more: &str| {
            if many {
                more.to_owned()
            } else {
                one.to_owned()
            }
        };
        match (g.status, g.code) {
            (Some(status), _) => format!(
                "{} {}",
                s("answers", "answer"),
                explain::en::http_status(status)
            ),
            (None, Some(Code::Timeout)) => s("does not answer in time", "do not answer in time"),
            (None, Some(Code::TlsError)) => s("fails the TLS handshake", "fail the TLS handshake"),
            (None, Some(Code::AuthError)) => {
                s("gets no OAuth2 access token", "get no OAuth2 access token")
            }
            (None, Some(Code::ConnectionError)) => match g.error_kind {
                Some(TransportError::Dns) => s(
                    "has a host name that does not resolve",
                    "have host names that do not resolve",
                ),
                _ => s("refuses or drops connections", "refuse or drop connections"),
            },
            _ => s("is failing", "are failing"),
        }
    }

    /// "refused deliveries with 401 Unauthorized", "ran out of retries", ….
    fn refused<T>(g: &Group<T>, _many: bool) -> String {
        match (g.code, g.status) {
            (Some(Code::MaxAttempts | Code::MaxAge), _) => "ran out of retries".to_owned(),
            (Some(Code::Redirect), Some(status)) => {
                format!("redirected with {}", explain::en::http_status(status))
            }
            (Some(Code::DestinationForbidden), _) => {
                "has an address in a forbidden network".to_owned()
            }
            (Some(Code::EndpointDeleted), _) => "was deleted with deliveries waiting".to_owned(),
            (Some(Code::TransformError), _) => "has a transform that fails".to_owned(),
            (_, Some(status)) => format!(
                "refused deliveries with {}",
                explain::en::http_status(status)
            ),
            _ => "lost deliveries".to_owned(),
        }
    }

    fn deliveries(n: u64, one: &str, many: &str) -> String {
        match n {
            0 => format!("no deliveries {many}"),
            1 => format!("1 delivery {one}"),
            n => format!("{n} deliveries {many}"),
        }
    }
}

/// The groups' sentences, in Hebrew: the same functions as [`en`], each
/// value (a count, a status) isolated so it keeps its direction.
pub mod he {
    use super::*;
    use crate::explain::he::{http_status, iso, DELIVERIES};

    pub fn message<T>(g: &Group<T>) -> String {
        let n = g.endpoints.len();
        let who = |one: &str, many: &str| match n {
            1 => format!("נקודת הקצה שלכם {one}"),
            2 => format!("שתי נקודות קצה {many}"),
            n => format!("{} נקודות קצה {many}", iso(n)),
        };
        // A word's form for one endpoint, or for more.
        let s = |one: &'static str, many: &'static str| if n == 1 { one } else { many };
        match g.kind {
            Kind::Failing => format!(
                "{}: {}.",
                who(&failing(g, false), &failing(g, true)),
                deliveries(g.waiting, "ממתינה לניסיון חוזר", "ממתינות לניסיון חוזר")
            ),
            Kind::Disabled => {
                let why = match g
                    .endpoints
                    .first()
                    .and_then(|(_, t)| t.disabled_reason.as_deref())
                {
                    Some("gone") => format!(" אחרי {} {}", s("שענתה", "שענו"), http_status(410)),
                    Some("failing") => format!(" אחרי {} זמן רב מדי", s("שנכשלה", "שנכשלו")),
                    Some("manual") => " ידנית".to_owned(),
                    _ => String::new(),
                };
                let disabled = who("מושבתת", "מושבתות");
                match g.waiting {
                    0 => format!("{disabled}{why}."),
                    n => format!(
                        "{disabled}{why}: {} עד {}.",
                        deliveries(n, "נשמרת", "נשמרות"),
                        s("שהיא תופעל שוב", "שהן יופעלו שוב")
                    ),
                }
            }
            Kind::Paused => {
                let paused = who("מושהית", "מושהות");
                match g.waiting {
                    0 => format!("{paused}."),
                    n => format!(
                        "{paused}: {} עד שההשהיה תבוטל.",
                        deliveries(n, "ממתינה", "ממתינות")
                    ),
                }
            }
            Kind::DeadLetters => format!(
                "{}: {}. {}",
                who(&refused(g, false), &refused(g, true)),
                deliveries(
                    g.dead,
                    "נמצאת בתור המסירות שנכשלו",
                    "נמצאות בתור המסירות שנכשלו"
                ),
                match g.action {
                    Action::ChangeUrlThenReplay => "שנו את הכתובת ואז שחזרו את המסירות.",
                    Action::EnableThenReplay => s(
                        "הפעילו אותה מחדש ואז שחזרו את המסירות.",
                        "הפעילו אותן מחדש ואז שחזרו את המסירות."
                    ),
                    _ => s(
                        "תקנו אותה ואז שחזרו את המסירות.",
                        "תקנו אותן ואז שחזרו את המסירות."
                    ),
                }
            ),
        }
    }

    /// "עונה [503] השירות אינו זמין", "לא עונה בזמן", … (`many`: plural verbs).
    fn failing<T>(g: &Group<T>, many: bool) -> String {
        let s = |one: &str, more: &str| {
            if many {
                more.to_owned()
            } else {
                one.to_owned()
            }
        };
        match (g.status, g.code) {
            (Some(status), _) => format!("{} {}", s("עונה", "עונות"), http_status(status)),
            (None, Some(Code::Timeout)) => s("לא עונה בזמן", "לא עונות בזמן"),
            (None, Some(Code::TlsError)) => {
                s("נכשלת בלחיצת היד של TLS", "נכשלות בלחיצת היד של TLS")
            }
            (None, Some(Code::AuthError)) => s(
                "לא מקבלת אסימון גישה של OAuth2",
                "לא מקבלות אסימון גישה של OAuth2",
            ),
            (None, Some(Code::ConnectionError)) => match g.error_kind {
                Some(TransportError::Dns) => s(
                    "מפנה לשם מארח שלא מתורגם לכתובת",
                    "מפנות לשמות מארח שלא מתורגמים לכתובת",
                ),
                _ => s("דוחה או מנתקת חיבורים", "דוחות או מנתקות חיבורים"),
            },
            _ => s("נכשלת", "נכשלות"),
        }
    }

    /// "דחתה מסירות עם [401] לא מורשה", "מיצתה את הניסיונות החוזרים", ….
    fn refused<T>(g: &Group<T>, many: bool) -> String {
        let s = |one: &str, more: &str| {
            if many {
                more.to_owned()
            } else {
                one.to_owned()
            }
        };
        match (g.code, g.status) {
            (Some(Code::MaxAttempts | Code::MaxAge), _) => {
                s("מיצתה את הניסיונות החוזרים", "מיצו את הניסיונות החוזרים")
            }
            (Some(Code::Redirect), Some(status)) => {
                format!("{} {}", s("ענתה בהפניה", "ענו בהפניה"), http_status(status))
            }
            (Some(Code::DestinationForbidden), _) => s("נמצאת ברשת אסורה", "נמצאות ברשת אסורה"),
            (Some(Code::EndpointDeleted), _) => s(
                "נמחקה כשמסירות עוד המתינו לה",
                "נמחקו כשמסירות עוד המתינו להן",
            ),
            (Some(Code::TransformError), _) => {
                s("הטרנספורמציה שלה נכשלת", "הטרנספורמציות שלהן נכשלות")
            }
            (_, Some(status)) => format!(
                "{} {}",
                s("דחתה מסירות עם", "דחו מסירות עם"),
                http_status(status)
            ),
            _ => s("איבדה מסירות", "איבדו מסירות"),
        }
    }

    /// "מסירה אחת ממתינה", "שתי מסירות ממתינות", "אין מסירות שממתינות".
    fn deliveries(n: u64, one: &str, many: &str) -> String {
        match n {
            0 => format!("אין מסירות ש{many}"),
            1 => format!("{} {one}", DELIVERIES.count(n)),
            n => format!("{} {many}", DELIVERIES.count(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::hebrew_checks::{assert_twin, visible};
    use crate::explain::Explanation;

    /// The grouping under test, in `language`. An English one is checked
    /// against its Hebrew twin on the way, so every case below covers both
    /// tables: the same groups, each said in Hebrew with the same numbers.
    fn group<T: Clone + PartialEq + std::fmt::Debug>(
        troubles: Vec<(T, Trouble)>,
        language: Language,
    ) -> Vec<Group<T>> {
        let groups = super::group(troubles.clone(), language);
        if language == Language::En {
            let hebrew = super::group(troubles, Language::He);
            let unsaid = |g: &Group<T>| Group {
                message: String::new(),
                ..g.clone()
            };
            assert_eq!(groups.len(), hebrew.len());
            for (english, hebrew) in groups.iter().zip(&hebrew) {
                assert_eq!(unsaid(english), unsaid(hebrew));
                assert_twin(&english.message, &hebrew.message);
            }
        }
        groups
    }

    fn cause(
        code: Code,
        status: Option<u16>,
        error_kind: Option<TransportError>,
    ) -> Option<Explanation> {
        Some(Explanation {
            code,
            status,
            error_kind,
            attempts: 1,
            max_attempts: 20,
            retries_left: 0,
            next_attempt_at: None,
            retry_after: None,
            action: match code {
                Code::Redirect | Code::DestinationForbidden => Action::ChangeUrlThenReplay,
                Code::Gone => Action::EnableThenReplay,
                Code::ClientErrorNoRetry
                | Code::MaxAttempts
                | Code::MaxAge
                | Code::TransformError => Action::FixThenReplay,
                _ => Action::FixEndpoint,
            },
            message: String::new(),
        })
    }

    fn trouble(
        kind: Kind,
        cause: Option<Explanation>,
        since: i64,
        waiting: u64,
        dead: u64,
    ) -> Trouble {
        Trouble {
            kind,
            cause,
            since: Some(Timestamp::from_millis(since)),
            waiting,
            dead,
            disabled_reason: None,
        }
    }

    #[test]
    fn endpoints_with_the_same_trouble_and_cause_are_one_group() {
        let groups = group(
            vec![
                (
                    "a",
                    trouble(
                        Kind::Failing,
                        cause(Code::ServerError, Some(503), None),
                        300,
                        10,
                        0,
                    ),
                ),
                (
                    "b",
                    trouble(
                        Kind::DeadLetters,
                        cause(Code::ClientErrorNoRetry, Some(401), None),
                        100,
                        0,
                        7,
                    ),
                ),
                (
                    "c",
                    trouble(
                        Kind::Failing,
                        cause(Code::ServerError, Some(503), None),
                        200,
                        302,
                        0,
                    ),
                ),
                (
                    "d",
                    trouble(
                        Kind::Failing,
                        cause(Code::ConnectionError, None, Some(TransportError::Connect)),
                        50,
                        1,
                        0,
                    ),
                ),
            ],
            Language::En,
        );
        type Shape<'a> = (Kind, Option<u16>, Vec<&'a str>, u64, Option<i64>);
        let shape: Vec<Shape> = groups
            .iter()
            .map(|g| {
                (
                    g.kind,
                    g.status,
                    g.endpoints.iter().map(|(e, _)| *e).collect(),
                    g.waiting + g.dead,
                    g.since.map(|t| t.as_millis()),
                )
            })
            .collect();
        assert_eq!(
            shape,
            vec![
                (Kind::Failing, Some(503), vec!["a", "c"], 312, Some(200)),
                (Kind::Failing, None, vec!["d"], 1, Some(50)),
                (Kind::DeadLetters, Some(401), vec!["b"], 7, Some(100)),
            ]
        );
        assert_eq!(
            groups[0].message,
            "2 endpoints answer 503 Service Unavailable: 312 deliveries wait and are retried."
        );
        assert_eq!(groups[0].action, Action::FixEndpoint);
        assert_eq!(
            groups[1].message,
            "Your endpoint refuses or drops connections: 1 delivery waits and is retried."
        );
        assert_eq!(
            groups[2].message,
            "Your endpoint refused deliveries with 401 Unauthorized: 7 deliveries are in the dead-letter queue. Fix it, then recover them."
        );
        assert_eq!(groups[2].action, Action::FixThenReplay);
    }

    #[test]
    fn each_trouble_says_what_it_is_and_what_to_do() {
        let mut disabled = trouble(Kind::Disabled, None, 0, 3, 0);
        disabled.disabled_reason = Some("gone".into());
        let mut manual = trouble(Kind::Disabled, None, 0, 0, 0);
        manual.disabled_reason = Some("manual".into());
        let groups = group(
            vec![
                ("paused", trouble(Kind::Paused, None, 0, 1, 0)),
                ("gone", disabled),
                ("manual", manual),
                (
                    "timeout",
                    trouble(
                        Kind::Failing,
                        cause(Code::Timeout, None, Some(TransportError::Timeout)),
                        0,
                        2,
                        0,
                    ),
                ),
                (
                    "redirect",
                    trouble(
                        Kind::DeadLetters,
                        cause(Code::Redirect, Some(301), None),
                        0,
                        0,
                        1,
                    ),
                ),
                (
                    "exhausted",
                    trouble(
                        Kind::DeadLetters,
                        cause(Code::MaxAttempts, Some(502), None),
                        0,
                        0,
                        4,
                    ),
                ),
            ],
            Language::En,
        );
        let said: Vec<(&str, Action, &str)> = groups
            .iter()
            .map(|g| (g.endpoints[0].0, g.action, g.message.as_str()))
            .collect();
        assert_eq!(
            said,
            vec![
                ("timeout", Action::FixEndpoint, "Your endpoint does not answer in time: 2 deliveries wait and are retried."),
                ("gone", Action::Enable, "Your endpoint is disabled after answering 410 Gone: 3 deliveries are kept until it is enabled again."),
                ("manual", Action::Enable, "Your endpoint is disabled by hand."),
                ("exhausted", Action::FixThenReplay, "Your endpoint ran out of retries: 4 deliveries are in the dead-letter queue. Fix it, then recover them."),
                ("redirect", Action::ChangeUrlThenReplay, "Your endpoint redirected with 301 Moved Permanently: 1 delivery is in the dead-letter queue. Change the URL, then recover them."),
                ("paused", Action::Resume, "Your endpoint is paused: 1 delivery is held until it is resumed."),
            ]
        );
    }

    #[test]
    fn what_the_endpoint_answered_groups_failing_ones_and_running_out_groups_dead_ones() {
        let groups = group(
            vec![
                (
                    "a",
                    trouble(
                        Kind::Failing,
                        cause(Code::ServerError, Some(503), None),
                        0,
                        1,
                        0,
                    ),
                ),
                (
                    "b",
                    trouble(
                        Kind::Failing,
                        cause(Code::RateLimited, Some(503), None),
                        0,
                        1,
                        0,
                    ),
                ),
                (
                    "c",
                    trouble(
                        Kind::DeadLetters,
                        cause(Code::MaxAttempts, Some(502), None),
                        0,
                        0,
                        1,
                    ),
                ),
                (
                    "d",
                    trouble(
                        Kind::DeadLetters,
                        cause(Code::MaxAge, Some(503), None),
                        0,
                        0,
                        1,
                    ),
                ),
                (
                    "e",
                    trouble(
                        Kind::DeadLetters,
                        cause(Code::MaxAttempts, Some(503), None),
                        0,
                        0,
                        1,
                    ),
                ),
            ],
            Language::En,
        );
        let members: Vec<Vec<&str>> = groups
            .iter()
            .map(|g| g.endpoints.iter().map(|(e, _)| *e).collect())
            .collect();
        assert_eq!(members, vec![vec!["a", "b"], vec!["c", "e"], vec!["d"]]);
        assert_eq!(
            groups[0].code,
            Some(Code::ServerError),
            "the first one's cause names the group"
        );
    }

    #[test]
    fn nothing_wrong_is_no_group() {
        assert!(group::<&str>(Vec::new(), Language::En).is_empty());
    }

    #[test]
    fn the_hebrew_table_says_each_group_in_hebrew() {
        let mut gone = trouble(Kind::Disabled, None, 0, 3, 0);
        gone.disabled_reason = Some("gone".into());
        let failing = |waiting| {
            trouble(
                Kind::Failing,
                cause(Code::ServerError, Some(503), None),
                0,
                waiting,
                0,
            )
        };
        let groups = group(
            vec![
                ("a", failing(300)),
                ("b", failing(12)),
                ("gone", gone),
                ("paused", trouble(Kind::Paused, None, 0, 1, 0)),
                (
                    "refused",
                    trouble(
                        Kind::DeadLetters,
                        cause(Code::ClientErrorNoRetry, Some(401), None),
                        0,
                        0,
                        7,
                    ),
                ),
                (
                    "dns",
                    trouble(
                        Kind::Failing,
                        cause(Code::ConnectionError, None, Some(TransportError::Dns)),
                        0,
                        2,
                        0,
                    ),
                ),
            ],
            Language::He,
        );
        let said: Vec<String> = groups.iter().map(|g| visible(&g.message)).collect();
        assert_eq!(
            said,
            [
                "שתי נקודות קצה עונות [503] השירות אינו זמין: [312] מסירות ממתינות לניסיון חוזר.",
                "נקודת הקצה שלכם מפנה לשם מארח שלא מתורגם לכתובת: שתי מסירות ממתינות לניסיון חוזר.",
                "נקודת הקצה שלכם מושבתת אחרי שענתה [410] המשאב הוסר: [3] מסירות נשמרות עד שהיא תופעל שוב.",
                "נקודת הקצה שלכם דחתה מסירות עם [401] לא מורשה: [7] מסירות נמצאות בתור המסירות שנכשלו. תקנו אותה ואז שחזרו את המסירות.",
                "נקודת הקצה שלכם מושהית: מסירה אחת ממתינה עד שההשהיה תבוטל.",
            ]
        );
    }
}
