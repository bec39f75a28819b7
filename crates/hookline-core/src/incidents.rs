//! What is wrong now with an app's endpoints, grouped by cause: the
//! portal's home ("since 14:02 two endpoints answer 401: 312 deliveries
//! wait") and `GET /v1/apps/{app}/incidents`.
//!
//! The store finds the endpoints in trouble — failing (the breaker not closed,
//! or failures in a row), disabled, paused with deliveries held, or with
//! deliveries dead-lettered lately — and what caused it, as an
//! [`Explanation`](crate::explain::Explanation) of the newest failed attempt
//! or dead delivery. [`group`] puts the endpoints with the same trouble and
//! the same cause together, worst first, and says each group in one sentence.

use serde::{Deserialize, Serialize};

use crate::explain::{self, Action, Code};
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
/// affected), each with its sentence. `T` is the caller's endpoint.
pub fn group<T>(troubles: Vec<(T, Trouble)>) -> Vec<Group<T>> {
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
        group.message = en::message(group);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::Explanation;

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
                Code::ClientErrorNoRetry | Code::MaxAttempts | Code::MaxAge => {
                    Action::FixThenReplay
                }
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
        let groups = group(vec![
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
        ]);
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
        let groups = group(vec![
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
        ]);
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
        let groups = group(vec![
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
        ]);
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
        assert!(group::<&str>(Vec::new()).is_empty());
    }
}
