//! Why a delivery is where it is, and what one attempt's outcome meant: one
//! explanation, worked out here from what the store records, carried by the
//! API's deliveries and attempts, and rendered by the portal as it comes.
//!
//! An [`Explanation`] is structured (a stable [`Code`], the status, how many
//! attempts are left, when the next is due, what the customer can do about it
//! as an [`Action`]) and carries one sentence in the request's [`Language`],
//! from one of two locale tables: [`en`] (English) and [`he`] (Hebrew), each
//! the same functions of the same explanation. The structure is worked out
//! once, here; a table only words it. The sentence names no clock time: a
//! reader's time zone is the renderer's business, so the time is
//! `next_attempt_at`, beside it.
//!
//! [`delivery`] reads the delivery's state first and its newest attempt
//! second: what holds a pending delivery back (its endpoint paused or
//! disabled, the breaker open, an earlier event of its ordering key) says more
//! than the failure that came before. [`attempt`] reads one attempt alone.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::breaker::BreakerState;
use crate::language::Language;
use crate::model::{AttemptTrigger, AttemptVerdict, DeadReason, DeliveryState, TransportError};
use crate::retry::RetryPolicy;
use crate::time::Timestamp;

/// What happened, or what a delivery waits for: stable, for programs to branch on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = ExplanationCode))]
#[serde(rename_all = "snake_case")]
pub enum Code {
    /// The endpoint answered 2xx.
    Delivered,
    /// The endpoint's transform gave `null` for the event: nothing was sent, by design.
    Skipped,
    /// Pending, its round's first attempt not made yet (a new delivery, or a replayed one).
    Scheduled,
    /// Being sent right now.
    Sending,
    /// Waiting for an earlier event with the same ordering key.
    BehindEarlierEvent,
    /// Held while its endpoint is paused.
    EndpointPaused,
    /// Held while its endpoint is disabled.
    EndpointDisabled,
    /// Waiting for its polling endpoint's receiver to fetch it and commit.
    AwaitingFetch,
    /// Held while the endpoint's circuit breaker is open.
    BreakerOpen,
    /// Held while the breaker's one probe request tests the endpoint.
    BreakerHalfOpen,
    /// A 5xx answer: retried.
    ServerError,
    /// 429, or 503 with `Retry-After`: retried when the endpoint asked (or on the backoff schedule).
    RateLimited,
    /// No answer in time, or 408: retried.
    Timeout,
    /// The connection could not be made or broke (refused, reset, DNS): retried.
    ConnectionError,
    /// The TLS handshake failed: retried.
    TlsError,
    /// The endpoint's OAuth2 token could not be had: retried.
    AuthError,
    /// A 4xx other than 408, 410 and 429: not retried.
    ClientErrorNoRetry,
    /// 410 Gone: not retried, and the endpoint was disabled.
    Gone,
    /// A 3xx: redirects are not followed.
    Redirect,
    /// The address resolves to a forbidden network: not connected to.
    DestinationForbidden,
    /// Every attempt of the round failed.
    MaxAttempts,
    /// The round outlived the retry window before its attempts ran out.
    MaxAge,
    /// The endpoint was deleted while the delivery waited.
    EndpointDeleted,
    /// The endpoint's transform failed on the event: nothing was sent, not retried.
    TransformError,
}

/// What the customer can do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = ExplanationAction))]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Nothing: it is delivered, or there is nothing left to deliver to.
    None,
    /// Nothing yet: it goes on its own.
    Wait,
    /// Fix the endpoint: the retries that follow will then succeed.
    FixEndpoint,
    /// Fix the endpoint, then replay the delivery.
    FixThenReplay,
    /// Change the endpoint's URL, then replay.
    ChangeUrlThenReplay,
    /// Enable the endpoint again, then replay.
    EnableThenReplay,
    /// Resume the endpoint: the delivery is sent then.
    Resume,
    /// Enable the endpoint: the delivery is kept, and sent then.
    Enable,
}

/// Why a delivery is where it is, or what an attempt's outcome meant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Explanation {
    pub code: Code,
    /// The HTTP status of the attempt it is about (the newest), if one answered.
    pub status: Option<u16>,
    /// Why that attempt got no answer.
    pub error_kind: Option<TransportError>,
    /// Attempts made in the round (for an attempt: its number in its round).
    pub attempts: u32,
    /// Attempts a round may make: the endpoint's `retry.max_attempts`, or the deployment's.
    pub max_attempts: u32,
    /// How many more attempts may follow; 0 once delivered or dead.
    pub retries_left: u32,
    /// When the next attempt (or the breaker's probe) is due; `null` when none is.
    pub next_attempt_at: Option<Timestamp>,
    /// The endpoint's `Retry-After`, when it asked to wait.
    pub retry_after: Option<String>,
    pub action: Action,
    /// One sentence, in the request's language, that says all of the above (without clock times).
    pub message: String,
}

/// What the store knows of a delivery, for [`delivery`].
#[derive(Debug, Clone, Copy)]
pub struct DeliveryFacts<'a> {
    pub state: DeliveryState,
    /// Pending on a paused or disabled endpoint.
    pub parked: bool,
    /// Attempts in the current round.
    pub attempts: u32,
    pub next_attempt_at: Option<Timestamp>,
    pub dead_reason: Option<DeadReason>,
    pub ordering_key: Option<&'a str>,
    /// The newest attempt, of any round.
    pub newest: Option<AttemptFacts<'a>>,
    /// Its endpoint; `None` once deleted.
    pub endpoint: Option<EndpointFacts<'a>>,
    /// The retry policy its endpoint follows (the deployment's with the endpoint's overrides).
    pub policy: RetryPolicy,
}

/// What the store knows of one attempt.
#[derive(Debug, Clone, Copy)]
pub struct AttemptFacts<'a> {
    /// Its number in its round (1, 2, …).
    pub number: u32,
    pub status: Option<u16>,
    pub error_kind: Option<TransportError>,
    /// The response's `Retry-After` header.
    pub retry_after: Option<&'a str>,
    pub verdict: AttemptVerdict,
    pub next_attempt_at: Option<Timestamp>,
    pub dead_reason: Option<DeadReason>,
    pub trigger: Option<AttemptTrigger>,
    /// The endpoint's transform skipped it: nothing was sent.
    pub skipped: bool,
}

/// What the store knows of a delivery's endpoint.
#[derive(Debug, Clone, Copy)]
pub struct EndpointFacts<'a> {
    pub enabled: bool,
    pub paused: bool,
    /// `manual`, `gone` or `failing`, while disabled.
    pub disabled_reason: Option<&'a str>,
    pub breaker: BreakerState,
    pub consecutive_failures: u32,
    pub next_probe_at: Option<Timestamp>,
    /// A polling endpoint: nothing is sent to it; its receiver fetches.
    pub polled: bool,
}

/// Why `facts`' delivery is where it is, said in `language`.
pub fn delivery(facts: &DeliveryFacts<'_>, language: Language) -> Explanation {
    let max = facts.policy.max_attempts;
    // The newest attempt speaks for this round only if the round has made one
    // (a replay starts a round with none).
    let of_round = facts.newest.filter(|_| facts.attempts > 0);
    let mut explanation = Explanation {
        code: Code::Scheduled,
        status: facts.newest.and_then(|a| a.status),
        error_kind: facts.newest.and_then(|a| a.error_kind),
        attempts: facts.attempts,
        max_attempts: max,
        retries_left: 0,
        next_attempt_at: None,
        retry_after: None,
        action: Action::Wait,
        message: String::new(),
    };
    let pending = |code: Code, action: Action, next: Option<Timestamp>| {
        (code, action, next, max.saturating_sub(facts.attempts))
    };
    let (code, action, next, left) = match facts.state {
        DeliveryState::Succeeded if facts.newest.is_some_and(|a| a.skipped) => {
            (Code::Skipped, Action::None, None, 0)
        }
        DeliveryState::Succeeded => (Code::Delivered, Action::None, None, 0),
        DeliveryState::Dead => {
            let reason = facts.dead_reason.unwrap_or(DeadReason::RetriesExhausted);
            let (code, action) = dead(reason, facts.attempts, max);
            (code, action, None, 0)
        }
        DeliveryState::InFlight => pending(Code::Sending, Action::Wait, None),
        DeliveryState::Blocked => pending(Code::BehindEarlierEvent, Action::Wait, None),
        DeliveryState::Pending if facts.parked => match facts.endpoint {
            Some(endpoint) if endpoint.polled && endpoint.enabled && !endpoint.paused => {
                pending(Code::AwaitingFetch, Action::Wait, None)
            }
            Some(endpoint) if endpoint.enabled && endpoint.paused => {
                pending(Code::EndpointPaused, Action::Resume, None)
            }
            _ => pending(Code::EndpointDisabled, Action::Enable, None),
        },
        DeliveryState::Pending => match facts.endpoint.map(|e| e.breaker) {
            Some(BreakerState::Open) => pending(
                Code::BreakerOpen,
                Action::FixEndpoint,
                facts.endpoint.and_then(|e| e.next_probe_at),
            ),
            Some(BreakerState::HalfOpen) => pending(Code::BreakerHalfOpen, Action::Wait, None),
            _ => match of_round {
                Some(newest) => {
                    let code = outcome(newest.status, newest.error_kind, newest.retry_after);
                    explanation.retry_after = asked_to_wait(code, newest.retry_after);
                    let action = if code == Code::RateLimited {
                        Action::Wait
                    } else {
                        Action::FixEndpoint
                    };
                    pending(code, action, facts.next_attempt_at)
                }
                None => pending(Code::Scheduled, Action::Wait, facts.next_attempt_at),
            },
        },
    };
    explanation.code = code;
    explanation.action = action;
    explanation.next_attempt_at = next;
    explanation.retries_left = left;
    explanation.message = match language {
        Language::En => en::delivery(&explanation, facts, &facts.policy),
        Language::He => he::delivery(&explanation, facts, &facts.policy),
    };
    explanation
}

/// What one attempt's outcome meant, under the retry policy its endpoint
/// follows, said in `language`.
pub fn attempt(facts: &AttemptFacts<'_>, policy: &RetryPolicy, language: Language) -> Explanation {
    let max = policy.max_attempts;
    let (code, action, left) = match facts.verdict {
        AttemptVerdict::Delivered if facts.skipped => (Code::Skipped, Action::None, 0),
        AttemptVerdict::Delivered => (Code::Delivered, Action::None, 0),
        AttemptVerdict::Dead => {
            let reason = facts.dead_reason.unwrap_or(DeadReason::RetriesExhausted);
            let (code, action) = dead(reason, facts.number, max);
            (code, action, 0)
        }
        AttemptVerdict::Retry => {
            let code = outcome(facts.status, facts.error_kind, facts.retry_after);
            let action = if code == Code::RateLimited {
                Action::Wait
            } else {
                Action::FixEndpoint
            };
            (code, action, max.saturating_sub(facts.number))
        }
    };
    let mut explanation = Explanation {
        code,
        status: facts.status,
        error_kind: facts.error_kind,
        attempts: facts.number,
        max_attempts: max,
        retries_left: left,
        next_attempt_at: facts.next_attempt_at.filter(|_| left > 0),
        retry_after: asked_to_wait(code, facts.retry_after),
        action,
        message: String::new(),
    };
    explanation.message = match language {
        Language::En => en::attempt(&explanation, policy),
        Language::He => he::attempt(&explanation, policy),
    };
    explanation
}

/// The code of an attempt's outcome from what it got.
fn outcome(status: Option<u16>, error: Option<TransportError>, retry_after: Option<&str>) -> Code {
    match (status, error) {
        (Some(200..=299), _) => Code::Delivered,
        (Some(429), _) => Code::RateLimited,
        (Some(503), _) if retry_after.is_some() => Code::RateLimited,
        (Some(408), _) => Code::Timeout,
        (Some(500..=599), _) => Code::ServerError,
        (Some(410), _) => Code::Gone,
        (Some(300..=399), _) => Code::Redirect,
        (Some(_), _) => Code::ClientErrorNoRetry,
        (None, Some(TransportError::Timeout)) => Code::Timeout,
        (None, Some(TransportError::Tls)) => Code::TlsError,
        (None, Some(TransportError::AuthError)) => Code::AuthError,
        (None, Some(TransportError::DestinationForbidden)) => Code::DestinationForbidden,
        (None, _) => Code::ConnectionError,
    }
}

fn asked_to_wait(code: Code, retry_after: Option<&str>) -> Option<String> {
    (code == Code::RateLimited)
        .then(|| retry_after.map(|value| value.trim().to_owned()))
        .flatten()
}

/// A dead delivery's code and action, from its reason.
fn dead(reason: DeadReason, attempts: u32, max: u32) -> (Code, Action) {
    match reason {
        DeadReason::RetriesExhausted if attempts >= max => {
            (Code::MaxAttempts, Action::FixThenReplay)
        }
        DeadReason::RetriesExhausted => (Code::MaxAge, Action::FixThenReplay),
        DeadReason::ClientError => (Code::ClientErrorNoRetry, Action::FixThenReplay),
        DeadReason::Redirect => (Code::Redirect, Action::ChangeUrlThenReplay),
        DeadReason::Gone => (Code::Gone, Action::EnableThenReplay),
        DeadReason::DestinationForbidden => {
            (Code::DestinationForbidden, Action::ChangeUrlThenReplay)
        }
        DeadReason::EndpointDeleted => (Code::EndpointDeleted, Action::None),
        DeadReason::TransformError => (Code::TransformError, Action::FixThenReplay),
    }
}

/// A unit a span of time is said in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    Hour,
    Minute,
    Second,
}

/// A span as a count of the largest unit that divides it whole: 24 hours,
/// 90 minutes, 45 seconds.
fn whole(d: Duration) -> (u64, Unit) {
    match d.as_secs() {
        s if s >= 3600 && s % 3600 == 0 => (s / 3600, Unit::Hour),
        s if s >= 60 && s % 60 == 0 => (s / 60, Unit::Minute),
        s => (s, Unit::Second),
    }
}

/// The English table: each explanation as an English sentence. [`he`] is
/// the same functions in Hebrew.
pub mod en {
    use super::*;

    /// A delivery's sentence.
    /// A skipped delivery's (and its attempt's) sentence.
    const SKIPPED: &str =
        "Skipped: the endpoint's transform gave null for this event, so nothing was sent.";

    pub fn delivery(e: &Explanation, facts: &DeliveryFacts<'_>, policy: &RetryPolicy) -> String {
        match e.code {
            Code::Skipped => SKIPPED.to_owned(),
            Code::Delivered => {
                let replayed = facts.newest.and_then(|a| a.trigger) == Some(AttemptTrigger::Replay);
                match e.attempts {
                    0 | 1 if replayed => "Delivered when it was sent again.".to_owned(),
                    0 | 1 => "Delivered on the first attempt.".to_owned(),
                    n => format!(
                        "Delivered on attempt {n}, after {}.",
                        plural(n - 1, "failed attempt")
                    ),
                }
            }
            Code::Scheduled if facts.newest.is_some() => {
                "Sent again: the first attempt of its new round is scheduled.".to_owned()
            }
            Code::Scheduled => "Waiting for its first attempt.".to_owned(),
            Code::Sending => "Being sent to your endpoint right now.".to_owned(),
            Code::BehindEarlierEvent => format!(
                "Waiting for an earlier event with the same ordering key{} to be delivered first. If that one failed, replay it: this one follows.",
                facts
                    .ordering_key
                    .map(|key| format!(" ({key})"))
                    .unwrap_or_default()
            ),
            Code::EndpointPaused => {
                "Your endpoint is paused: this delivery waits, and is sent as soon as you resume the endpoint."
                    .to_owned()
            }
            Code::AwaitingFetch => {
                "Your endpoint is a polling one: this delivery waits for your receiver to fetch it, and is delivered once your receiver commits past its number."
                    .to_owned()
            }
            Code::EndpointDisabled => {
                let why = match facts.endpoint.and_then(|e| e.disabled_reason) {
                    Some("manual") => " (by hand)",
                    Some("gone") => " (it answered 410 Gone)",
                    Some("failing") => " (it kept failing for too long)",
                    _ => "",
                };
                format!(
                    "Your endpoint is disabled{why}: this delivery is kept, and is sent once the endpoint is enabled again."
                )
            }
            Code::BreakerOpen => {
                let failed = match facts.endpoint.map_or(0, |e| e.consecutive_failures) {
                    0 => "your endpoint kept failing".to_owned(),
                    n => format!("your endpoint failed {} in a row", times(n)),
                };
                format!(
                    "The circuit breaker is open: {failed}. Deliveries wait until a probe request succeeds."
                )
            }
            Code::BreakerHalfOpen => {
                "The circuit breaker is half-open: one probe request is testing your endpoint, and the rest follow once it succeeds."
                    .to_owned()
            }
            Code::ServerError
            | Code::RateLimited
            | Code::Timeout
            | Code::ConnectionError
            | Code::TlsError
            | Code::AuthError => {
                format!("{}. {}", failure(e), next_attempt(e.attempts + 1, e.max_attempts))
            }
            _ => dead(e, policy),
        }
    }

    /// An attempt's sentence.
    pub fn attempt(e: &Explanation, policy: &RetryPolicy) -> String {
        match e.code {
            Code::Delivered => format!("Delivered: {}.", answered(e.status)),
            Code::Skipped => SKIPPED.to_owned(),
            _ if e.retries_left > 0 => {
                format!(
                    "{}. {}",
                    failure(e),
                    next_attempt(e.attempts + 1, e.max_attempts)
                )
            }
            _ => dead(e, policy),
        }
    }

    /// A dead delivery's (or its last attempt's) sentence.
    fn dead(e: &Explanation, policy: &RetryPolicy) -> String {
        match e.code {
            Code::EndpointDeleted => {
                "The endpoint was deleted while this delivery was waiting, so there is nowhere to send it again."
                    .to_owned()
            }
            Code::TransformError => {
                "The endpoint's transform failed on this event, so nothing was sent (the attempt's response says why). A failing transform is not retried: fix it, then replay."
                    .to_owned()
            }
            Code::Gone => {
                "Your endpoint answered 410 Gone, so it was disabled and sending stopped. Enable the endpoint again, then replay."
                    .to_owned()
            }
            Code::Redirect => format!(
                "Your endpoint answered {}. Redirects are not followed: change the endpoint's URL to the final address, then replay.",
                status_or(e.status, "a redirect")
            ),
            Code::DestinationForbidden => {
                "Your endpoint's address resolves to a private or otherwise forbidden network, so no connection was made. Use a public address, then replay."
                    .to_owned()
            }
            // A destination that is not HTTP (a broker, mail) refused without a status.
            Code::ClientErrorNoRetry if e.status.is_none() => {
                "Your endpoint refused the message for good (the attempt's response says what it answered). Refusals are not retried: fix the endpoint, then replay."
                    .to_owned()
            }
            Code::ClientErrorNoRetry => format!(
                "Your endpoint answered {}{}. 4xx answers are not retried: fix the endpoint, then replay.",
                status_or(e.status, "a 4xx status"),
                client_error(e.status)
            ),
            Code::MaxAge => format!(
                "Gave up after {}: the delivery grew older than the retry window ({}). The last attempt {}. Fix the endpoint, then replay.",
                plural(e.attempts, "attempt"),
                span(policy.max_age),
                last(e)
            ),
            _ => format!(
                "Gave up after {} of {} attempts. The last attempt {}. Fix the endpoint, then replay.",
                e.attempts,
                e.max_attempts,
                last(e)
            ),
        }
    }

    /// What went wrong, as a sentence without its full stop.
    fn failure(e: &Explanation) -> String {
        match (e.code, e.status) {
            (Code::RateLimited, Some(status)) => match &e.retry_after {
                Some(wait) => format!(
                    "Your endpoint answered {} and asked to wait (Retry-After: {wait})",
                    http_status(status)
                ),
                None => format!(
                    "Your endpoint answered {} without a Retry-After, so retries back off on their own schedule",
                    http_status(status)
                ),
            },
            (_, Some(status)) => format!("Your endpoint answered {}", http_status(status)),
            (Code::Timeout, None) => "Your endpoint did not answer in time".to_owned(),
            (Code::TlsError, None) => "The TLS (HTTPS) handshake with your endpoint failed".to_owned(),
            (Code::AuthError, None) => {
                "No access token could be had for your endpoint: its OAuth2 token endpoint failed or refused"
                    .to_owned()
            }
            _ => match e.error_kind {
                Some(TransportError::Dns) => "Your endpoint's host name could not be resolved".to_owned(),
                Some(TransportError::Io) => {
                    "The connection to your endpoint failed while sending or reading".to_owned()
                }
                _ => "Could not connect to your endpoint: the connection was refused or reset"
                    .to_owned(),
            },
        }
    }

    /// "got 503 Service Unavailable from your endpoint", "timed out", … (after "The last attempt").
    fn last(e: &Explanation) -> String {
        match (e.status, e.error_kind) {
            (Some(status), _) => format!("got {} from your endpoint", http_status(status)),
            (None, Some(TransportError::Timeout)) => "timed out".to_owned(),
            (None, Some(TransportError::Tls)) => "failed in the TLS (HTTPS) handshake".to_owned(),
            (None, Some(TransportError::Dns)) => {
                "could not resolve your endpoint's host name".to_owned()
            }
            (None, Some(TransportError::AuthError)) => {
                "could not get an access token for your endpoint".to_owned()
            }
            (None, Some(TransportError::Io)) => "failed while sending or reading".to_owned(),
            (None, Some(_)) => "could not connect: the connection was refused or reset".to_owned(),
            (None, None) => "did not succeed".to_owned(),
        }
    }

    fn next_attempt(number: u32, max: u32) -> String {
        format!("It is tried again: attempt {number} of {max} is scheduled.")
    }

    /// What a 4xx most often means, after its status.
    fn client_error(status: Option<u16>) -> &'static str {
        match status {
            Some(400 | 422) => ": it refused the payload",
            Some(401 | 403) => {
                ": it refused the request. Check that it verifies signatures with this endpoint's secret, and the endpoint's authentication settings"
            }
            Some(404) => ": nothing answers at the endpoint's URL",
            Some(405) => ": it does not take POST requests",
            Some(413) => ": the payload is too large for it",
            Some(415) => ": it does not take JSON",
            _ => "",
        }
    }

    fn answered(status: Option<u16>) -> String {
        format!("your endpoint answered {}", status_or(status, "2xx"))
    }

    fn status_or(status: Option<u16>, otherwise: &str) -> String {
        status.map_or_else(|| otherwise.to_owned(), http_status)
    }

    /// "503 Service Unavailable"; an unusual code stays a number.
    pub fn http_status(code: u16) -> String {
        let phrase = match code {
            200 => "OK",
            201 => "Created",
            202 => "Accepted",
            204 => "No Content",
            301 => "Moved Permanently",
            302 => "Found",
            303 => "See Other",
            307 => "Temporary Redirect",
            308 => "Permanent Redirect",
            400 => "Bad Request",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            409 => "Conflict",
            410 => "Gone",
            413 => "Payload Too Large",
            415 => "Unsupported Media Type",
            422 => "Unprocessable Entity",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            501 => "Not Implemented",
            502 => "Bad Gateway",
            503 => "Service Unavailable",
            504 => "Gateway Timeout",
            _ => return code.to_string(),
        };
        format!("{code} {phrase}")
    }

    fn plural(n: u32, word: &str) -> String {
        format!("{n} {word}{}", if n == 1 { "" } else { "s" })
    }

    fn times(n: u32) -> String {
        match n {
            1 => "once".to_owned(),
            n => format!("{n} times"),
        }
    }

    /// "24 hours", "90 minutes", "45 seconds".
    fn span(d: Duration) -> String {
        let (n, unit) = whole(d);
        amount(n, unit)
    }

    /// "1 hour", "5 minutes".
    pub(crate) fn amount(n: u64, unit: Unit) -> String {
        let word = match unit {
            Unit::Hour => "hour",
            Unit::Minute => "minute",
            Unit::Second => "second",
        };
        format!("{n} {word}{}", if n == 1 { "" } else { "s" })
    }
}

/// The Hebrew table: the same functions as [`en`], in Hebrew, which is
/// written right to left. Every value set into a sentence (a status, a count,
/// a key) is a bidi isolate ([`Language::isolate`]), so it keeps its own
/// direction; one and two are said in words, as Hebrew counts them.
pub mod he {
    use super::*;

    /// A delivery's sentence.
    /// A skipped delivery's (and its attempt's) sentence.
    const SKIPPED: &str =
        "דולגה: הטרנספורמציה של נקודת הקצה החזירה \u{2068}null\u{2069} לאירוע הזה, ולכן לא נשלח דבר.";

    pub fn delivery(e: &Explanation, facts: &DeliveryFacts<'_>, policy: &RetryPolicy) -> String {
        match e.code {
            Code::Skipped => SKIPPED.to_owned(),
            Code::Delivered => {
                let replayed = facts.newest.and_then(|a| a.trigger) == Some(AttemptTrigger::Replay);
                match e.attempts {
                    0 | 1 if replayed => "נמסרה כשנשלחה שוב.".to_owned(),
                    0 | 1 => "נמסרה בניסיון הראשון.".to_owned(),
                    n => format!(
                        "נמסרה בניסיון {}, אחרי {}.",
                        iso(n),
                        failed_attempts(u64::from(n - 1))
                    ),
                }
            }
            Code::Scheduled if facts.newest.is_some() => {
                "נשלחה שוב: הניסיון הראשון בסבב החדש שלה מתוזמן.".to_owned()
            }
            Code::Scheduled => "ממתינה לניסיון הראשון שלה.".to_owned(),
            Code::Sending => "נשלחת לנקודת הקצה שלכם ממש עכשיו.".to_owned(),
            Code::BehindEarlierEvent => format!(
                "ממתינה שאירוע קודם עם אותו מפתח סדר{} יימסר לפניה. אם המסירה שלו נכשלה, שלחו אותו שוב: זו תבוא אחריו.",
                facts
                    .ordering_key
                    .map(|key| format!(" ({})", iso(key)))
                    .unwrap_or_default()
            ),
            Code::EndpointPaused => {
                "נקודת הקצה שלכם מושהית: המסירה הזו ממתינה, ותישלח ברגע שתבטלו את ההשהיה של נקודת הקצה."
                    .to_owned()
            }
            Code::AwaitingFetch => {
                "נקודת הקצה שלכם מושכת את המסירות בעצמה: המסירה הזו ממתינה שהמקבל שלכם יאחזר אותה, ונחשבת כנמסרה כשהמקבל מאשר את המספר שלה."
                    .to_owned()
            }
            Code::EndpointDisabled => {
                let why = match facts.endpoint.and_then(|e| e.disabled_reason) {
                    Some("manual") => " (ידנית)".to_owned(),
                    Some("gone") => format!(" (היא ענתה {})", http_status(410)),
                    Some("failing") => " (היא נכשלה שוב ושוב זמן רב מדי)".to_owned(),
                    _ => String::new(),
                };
                format!(
                    "נקודת הקצה שלכם מושבתת{why}: המסירה הזו נשמרת, ותישלח כשנקודת הקצה תופעל שוב."
                )
            }
            Code::BreakerOpen => {
                let failed = match facts.endpoint.map_or(0, |e| e.consecutive_failures) {
                    0 => "נקודת הקצה שלכם המשיכה להיכשל".to_owned(),
                    n => format!("נקודת הקצה שלכם נכשלה {} ברצף", times(n)),
                };
                format!("מפסק הזרם פתוח: {failed}. המסירות ממתינות עד שבקשת בדיקה תצליח.")
            }
            Code::BreakerHalfOpen => {
                "מפסק הזרם חצי־פתוח: בקשת בדיקה יחידה בודקת את נקודת הקצה שלכם, והשאר יישלחו אחרי שהיא תצליח."
                    .to_owned()
            }
            Code::ServerError
            | Code::RateLimited
            | Code::Timeout
            | Code::ConnectionError
            | Code::TlsError
            | Code::AuthError => {
                format!("{}. {}", failure(e), next_attempt(e.attempts + 1, e.max_attempts))
            }
            _ => dead(e, policy),
        }
    }

    /// An attempt's sentence.
    pub fn attempt(e: &Explanation, policy: &RetryPolicy) -> String {
        match e.code {
            Code::Delivered => format!("נמסרה: {}.", answered(e.status)),
            Code::Skipped => SKIPPED.to_owned(),
            _ if e.retries_left > 0 => {
                format!(
                    "{}. {}",
                    failure(e),
                    next_attempt(e.attempts + 1, e.max_attempts)
                )
            }
            _ => dead(e, policy),
        }
    }

    /// A dead delivery's (or its last attempt's) sentence.
    fn dead(e: &Explanation, policy: &RetryPolicy) -> String {
        match e.code {
            Code::EndpointDeleted => {
                "נקודת הקצה נמחקה בזמן שהמסירה הזו המתינה, ולכן אין לאן לשלוח אותה שוב."
                    .to_owned()
            }
            Code::TransformError => {
                "הטרנספורמציה של נקודת הקצה נכשלה על האירוע הזה, ולכן לא נשלח דבר (תגובת הניסיון אומרת למה). על טרנספורמציה שנכשלת אין ניסיונות חוזרים: תקנו אותה ואז שלחו שוב."
                    .to_owned()
            }
            Code::Gone => format!(
                "נקודת הקצה שלכם ענתה {}, ולכן היא הושבתה והשליחה נעצרה. הפעילו מחדש את נקודת הקצה ואז שלחו שוב.",
                http_status(410)
            ),
            Code::Redirect => format!(
                "נקודת הקצה שלכם ענתה {}. מסירות לא עוקבות אחרי הפניות: שנו את הכתובת של נקודת הקצה לכתובת הסופית ואז שלחו שוב.",
                status_or(e.status, "בהפניה")
            ),
            Code::DestinationForbidden => {
                "הכתובת של נקודת הקצה שלכם מובילה לרשת פרטית או לרשת אסורה אחרת, ולכן לא נוצר חיבור. השתמשו בכתובת ציבורית ואז שלחו שוב."
                    .to_owned()
            }
            Code::ClientErrorNoRetry if e.status.is_none() => {
                "נקודת הקצה שלכם דחתה את ההודעה לצמיתות (תגובת הניסיון אומרת מה ענתה). על דחיות אין ניסיונות חוזרים: תקנו את נקודת הקצה ואז שלחו שוב."
                    .to_owned()
            }
            Code::ClientErrorNoRetry => format!(
                "נקודת הקצה שלכם ענתה {}{}. על תשובות 4xx אין ניסיונות חוזרים: תקנו את נקודת הקצה ואז שלחו שוב.",
                status_or(e.status, "בסטטוס 4xx"),
                client_error(e.status)
            ),
            Code::MaxAge => format!(
                "השליחה הופסקה אחרי {}: המסירה חרגה מחלון הניסיונות החוזרים ({}). הניסיון האחרון {}. תקנו את נקודת הקצה ואז שלחו שוב.",
                ATTEMPTS.count(u64::from(e.attempts)),
                span(policy.max_age),
                last(e)
            ),
            _ => format!(
                "השליחה הופסקה אחרי ניסיון {} מתוך {}. הניסיון האחרון {}. תקנו את נקודת הקצה ואז שלחו שוב.",
                iso(e.attempts),
                iso(e.max_attempts),
                last(e)
            ),
        }
    }

    /// What went wrong, as a sentence without its full stop.
    fn failure(e: &Explanation) -> String {
        match (e.code, e.status) {
            (Code::RateLimited, Some(status)) => match &e.retry_after {
                Some(wait) => format!(
                    "נקודת הקצה שלכם ענתה {} וביקשה להמתין ({})",
                    http_status(status),
                    iso(format!("Retry-After: {wait}"))
                ),
                None => format!(
                    "נקודת הקצה שלכם ענתה {} בלי כותרת Retry-After, ולכן הניסיונות החוזרים מתרווחים לפי לוח הזמנים שלהם",
                    http_status(status)
                ),
            },
            (_, Some(status)) => format!("נקודת הקצה שלכם ענתה {}", http_status(status)),
            (Code::Timeout, None) => "נקודת הקצה שלכם לא ענתה בזמן".to_owned(),
            (Code::TlsError, None) => {
                "לחיצת היד של TLS (HTTPS) עם נקודת הקצה שלכם נכשלה".to_owned()
            }
            (Code::AuthError, None) => {
                "לא התקבל אסימון גישה לנקודת הקצה שלכם: שירות האסימונים של OAuth2 שלה נכשל או סירב"
                    .to_owned()
            }
            _ => match e.error_kind {
                Some(TransportError::Dns) => {
                    "לא ניתן היה לתרגם לכתובת את שם המארח של נקודת הקצה שלכם".to_owned()
                }
                Some(TransportError::Io) => {
                    "החיבור לנקודת הקצה שלכם נכשל בזמן השליחה או הקריאה".to_owned()
                }
                _ => "לא ניתן היה להתחבר לנקודת הקצה שלכם: החיבור נדחה או נותק".to_owned(),
            },
        }
    }

    /// "קיבל [503] השירות אינו זמין מנקודת הקצה שלכם", … (after "הניסיון האחרון").
    fn last(e: &Explanation) -> String {
        match (e.status, e.error_kind) {
            (Some(status), _) => format!("קיבל {} מנקודת הקצה שלכם", http_status(status)),
            (None, Some(TransportError::Timeout)) => "לא נענה בזמן".to_owned(),
            (None, Some(TransportError::Tls)) => "נכשל בלחיצת היד של TLS (HTTPS)".to_owned(),
            (None, Some(TransportError::Dns)) => {
                "לא הצליח לתרגם לכתובת את שם המארח של נקודת הקצה שלכם".to_owned()
            }
            (None, Some(TransportError::AuthError)) => {
                "לא הצליח לקבל אסימון גישה לנקודת הקצה שלכם".to_owned()
            }
            (None, Some(TransportError::Io)) => "נכשל בזמן השליחה או הקריאה".to_owned(),
            (None, Some(_)) => "לא הצליח להתחבר: החיבור נדחה או נותק".to_owned(),
            (None, None) => "לא הצליח".to_owned(),
        }
    }

    fn next_attempt(number: u32, max: u32) -> String {
        format!(
            "יהיה ניסיון חוזר: ניסיון {} מתוך {} מתוזמן.",
            iso(number),
            iso(max)
        )
    }

    /// What a 4xx most often means, after its status.
    fn client_error(status: Option<u16>) -> &'static str {
        match status {
            Some(400 | 422) => ": היא דחתה את התוכן",
            Some(401 | 403) => {
                ": היא דחתה את הבקשה. בדקו שהיא מאמתת חתימות עם הסוד של נקודת הקצה הזו, ובדקו את הגדרות האימות של נקודת הקצה"
            }
            Some(404) => ": שום דבר לא עונה בכתובת של נקודת הקצה",
            Some(405) => ": היא לא מקבלת בקשות POST",
            Some(413) => ": התוכן גדול מדי בשבילה",
            Some(415) => ": היא לא מקבלת JSON",
            _ => "",
        }
    }

    fn answered(status: Option<u16>) -> String {
        format!("נקודת הקצה שלכם ענתה {}", status_or(status, "2xx"))
    }

    fn status_or(status: Option<u16>, otherwise: &str) -> String {
        status.map_or_else(|| otherwise.to_owned(), http_status)
    }

    /// "[503] השירות אינו זמין"; an unusual code stays a number.
    pub fn http_status(code: u16) -> String {
        let phrase = match code {
            200 => "תקין",
            201 => "נוצר",
            202 => "התקבל",
            204 => "אין תוכן",
            301 => "הועבר לצמיתות",
            302 => "נמצא",
            303 => "ראו כתובת אחרת",
            307 => "הפניה זמנית",
            308 => "הפניה קבועה",
            400 => "בקשה שגויה",
            401 => "לא מורשה",
            403 => "גישה אסורה",
            404 => "לא נמצא",
            405 => "השיטה אינה מותרת",
            408 => "תם הזמן הקצוב לבקשה",
            409 => "התנגשות",
            410 => "המשאב הוסר",
            413 => "התוכן גדול מדי",
            415 => "סוג מדיה לא נתמך",
            422 => "לא ניתן לעבד את הבקשה",
            429 => "יותר מדי בקשות",
            500 => "שגיאת שרת פנימית",
            501 => "לא מומש",
            502 => "שער שגוי",
            503 => "השירות אינו זמין",
            504 => "תם הזמן הקצוב בשער",
            _ => return iso(code),
        };
        format!("{} {phrase}", iso(code))
    }

    /// `value` set into a Hebrew sentence: isolated, so it keeps its direction.
    pub(crate) fn iso(value: impl std::fmt::Display) -> String {
        Language::He.isolate(value)
    }

    /// A noun as Hebrew counts it: one and two in words ("ניסיון אחד", "שני
    /// ניסיונות"), more as a number before the plural.
    #[derive(Debug, Clone, Copy)]
    pub(crate) struct Noun {
        pub one: &'static str,
        /// Two, when Hebrew says it in a word (a dual, or "שני"/"שתי").
        pub two: Option<&'static str>,
        pub many: &'static str,
    }

    impl Noun {
        pub(crate) fn count(self, n: u64) -> String {
            match (n, self.two) {
                (1, _) => self.one.to_owned(),
                (2, Some(two)) => two.to_owned(),
                (n, _) => format!("{} {}", iso(n), self.many),
            }
        }
    }

    pub(crate) const ATTEMPTS: Noun = Noun {
        one: "ניסיון אחד",
        two: Some("שני ניסיונות"),
        many: "ניסיונות",
    };

    pub(crate) const DELIVERIES: Noun = Noun {
        one: "מסירה אחת",
        two: Some("שתי מסירות"),
        many: "מסירות",
    };

    /// "ניסיון אחד שנכשל", "שני ניסיונות שנכשלו".
    pub(crate) fn failed_attempts(n: u64) -> String {
        let failed = if n == 1 { "שנכשל" } else { "שנכשלו" };
        format!("{} {failed}", ATTEMPTS.count(n))
    }

    fn times(n: u32) -> String {
        Noun {
            one: "פעם אחת",
            two: Some("פעמיים"),
            many: "פעמים",
        }
        .count(u64::from(n))
    }

    /// "[24] שעות", "[90] דקות", "[45] שניות".
    fn span(d: Duration) -> String {
        let (n, unit) = whole(d);
        amount(n, unit)
    }

    /// "שעה אחת", "שעתיים", "[2] דקות", "[5] דקות".
    pub(crate) fn amount(n: u64, unit: Unit) -> String {
        let noun = match unit {
            Unit::Hour => Noun {
                one: "שעה אחת",
                two: Some("שעתיים"),
                many: "שעות",
            },
            // No dual: "[2] דקות".
            Unit::Minute => Noun {
                one: "דקה אחת",
                two: None,
                many: "דקות",
            },
            Unit::Second => Noun {
                one: "שנייה אחת",
                two: None,
                many: "שניות",
            },
        };
        noun.count(n)
    }
}

/// What the tests of every table with Hebrew sentences check of them (here,
/// and in `incidents`, `signature_check` and `notify`).
#[cfg(test)]
pub(crate) mod hebrew_checks {
    /// Latin words a Hebrew sentence may hold outside an isolated value.
    const LATIN_TOKENS: [&str; 15] = [
        "HTTP",
        "HTTPS",
        "TLS",
        "OAuth2",
        "JSON",
        "POST",
        "Retry-After",
        "2xx",
        "3xx",
        "4xx",
        "5xx",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
        "v1",
    ];

    fn is_hebrew_letter(c: char) -> bool {
        ('\u{05D0}'..='\u{05EA}').contains(&c)
    }

    /// `s` with each isolate (LRI, RLI or FSI … PDI) and what it holds made a space.
    fn outside_isolates(s: &str) -> String {
        let mut depth = 0usize;
        let mut outside = String::new();
        for c in s.chars() {
            match c {
                '\u{2066}'..='\u{2068}' => {
                    if depth == 0 {
                        outside.push(' ');
                    }
                    depth += 1;
                }
                '\u{2069}' => depth = depth.saturating_sub(1),
                c if depth == 0 => outside.push(c),
                _ => {}
            }
        }
        outside
    }

    /// A Hebrew sentence: Hebrew letters, its isolates closed, and no Latin
    /// word outside an isolate but the allowed tokens (`HTTP`, `webhook-id`,
    /// `Standard Webhooks`, …).
    pub(crate) fn assert_hebrew(s: &str) {
        assert!(s.chars().any(is_hebrew_letter), "no Hebrew in {s:?}");
        let opened = s
            .chars()
            .filter(|c| ('\u{2066}'..='\u{2068}').contains(c))
            .count();
        assert_eq!(
            opened,
            s.matches('\u{2069}').count(),
            "an isolate left open in {s:?}"
        );
        let outside = outside_isolates(s).replace("Standard Webhooks", " ");
        assert!(!outside.contains('{'), "a placeholder left in {s:?}");
        let latin = |c: char| c == '-' || (c.is_alphanumeric() && !is_hebrew_letter(c));
        for word in outside.split(|c: char| !latin(c)) {
            let word = word.trim_matches('-');
            if word.chars().any(char::is_alphabetic) {
                assert!(
                    LATIN_TOKENS.contains(&word),
                    "{word:?} outside an isolate in {s:?}"
                );
            }
        }
    }

    /// The numbers `s` names, in order of their spelling: its runs of digits,
    /// Hebrew's words for one and two ("אחת", "שתי", "פעמיים", …), and
    /// English's "once" as a count ("once in a row").
    pub(crate) fn numbers(s: &str) -> Vec<String> {
        let mut found: Vec<String> = s
            .split(|c: char| !c.is_alphanumeric())
            .filter_map(|word| match word {
                "אחד" | "אחת" => Some("1".to_owned()),
                "שני" | "שתי" | "פעמיים" | "שעתיים" | "יומיים" => {
                    Some("2".to_owned())
                }
                w if !w.is_empty() && w.chars().all(|c| c.is_ascii_digit()) => Some(w.to_owned()),
                _ => None,
            })
            .collect();
        found.extend(s.matches("once in a row").map(|_| "1".to_owned()));
        found.sort();
        found
    }

    /// `hebrew` is a Hebrew sentence that names the numbers `english` names.
    pub(crate) fn assert_twin(english: &str, hebrew: &str) {
        assert!(!english.is_empty(), "no English sentence for {hebrew:?}");
        assert_hebrew(hebrew);
        assert_eq!(
            numbers(english),
            numbers(hebrew),
            "{english:?} and {hebrew:?} name other numbers"
        );
    }

    /// `s` with its isolates shown as `[` `]`, for tests to spell a sentence out.
    pub(crate) fn visible(s: &str) -> String {
        s.replace(&['\u{2066}', '\u{2067}', '\u{2068}'][..], "[")
            .replace('\u{2069}', "]")
    }
}

#[cfg(test)]
mod tests {
    use super::hebrew_checks::{assert_hebrew, assert_twin, visible};
    use super::*;

    /// The explanation under test, in `language`. An English one is checked
    /// against its Hebrew twin on the way ([`twin`]), so every case below
    /// covers both tables.
    fn delivery(facts: &DeliveryFacts<'_>, language: Language) -> Explanation {
        let explanation = super::delivery(facts, language);
        if language == Language::En {
            twin(&explanation, &super::delivery(facts, Language::He));
        }
        explanation
    }

    /// [`delivery`]'s twin for an attempt.
    fn attempt(facts: &AttemptFacts<'_>, policy: &RetryPolicy, language: Language) -> Explanation {
        let explanation = super::attempt(facts, policy, language);
        if language == Language::En {
            twin(&explanation, &super::attempt(facts, policy, Language::He));
        }
        explanation
    }

    /// The same explanation in both languages, but for its sentence: a Hebrew
    /// one that names the same numbers.
    fn twin(english: &Explanation, hebrew: &Explanation) {
        let unsaid = |e: &Explanation| Explanation {
            message: String::new(),
            ..e.clone()
        };
        assert_eq!(unsaid(english), unsaid(hebrew));
        assert_twin(&english.message, &hebrew.message);
    }

    const NEXT: Timestamp = Timestamp::from_millis(1_700_000_060_000);
    const PROBE: Timestamp = Timestamp::from_millis(1_700_000_090_000);

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 8,
            max_age: Duration::from_secs(24 * 3600),
            ..RetryPolicy::default()
        }
    }

    fn endpoint() -> EndpointFacts<'static> {
        EndpointFacts {
            enabled: true,
            paused: false,
            disabled_reason: None,
            breaker: BreakerState::Closed,
            consecutive_failures: 0,
            next_probe_at: None,
            polled: false,
        }
    }

    /// The newest attempt, number `number`, that got `status` (or `error`).
    fn got(
        number: u32,
        status: Option<u16>,
        error: Option<TransportError>,
    ) -> AttemptFacts<'static> {
        let code = outcome(status, error, None);
        let (verdict, dead_reason) = match code {
            Code::Delivered => (AttemptVerdict::Delivered, None),
            Code::ClientErrorNoRetry => (AttemptVerdict::Dead, Some(DeadReason::ClientError)),
            Code::Gone => (AttemptVerdict::Dead, Some(DeadReason::Gone)),
            Code::Redirect => (AttemptVerdict::Dead, Some(DeadReason::Redirect)),
            Code::DestinationForbidden => {
                (AttemptVerdict::Dead, Some(DeadReason::DestinationForbidden))
            }
            _ => (AttemptVerdict::Retry, None),
        };
        AttemptFacts {
            number,
            status,
            error_kind: error,
            retry_after: None,
            verdict,
            next_attempt_at: (verdict == AttemptVerdict::Retry).then_some(NEXT),
            dead_reason,
            trigger: Some(if number == 1 {
                AttemptTrigger::First
            } else {
                AttemptTrigger::Retry
            }),
            skipped: false,
        }
    }

    /// A delivery whose newest attempt is `newest`, in the state that attempt leaves it in.
    fn after(newest: AttemptFacts<'static>) -> DeliveryFacts<'static> {
        let (state, dead_reason) = match newest.verdict {
            AttemptVerdict::Delivered => (DeliveryState::Succeeded, None),
            AttemptVerdict::Retry => (DeliveryState::Pending, None),
            AttemptVerdict::Dead => (DeliveryState::Dead, newest.dead_reason),
        };
        DeliveryFacts {
            state,
            parked: false,
            attempts: newest.number,
            next_attempt_at: newest.next_attempt_at,
            dead_reason,
            ordering_key: None,
            newest: Some(newest),
            endpoint: Some(endpoint()),
            policy: policy(),
        }
    }

    fn fresh() -> DeliveryFacts<'static> {
        DeliveryFacts {
            state: DeliveryState::Pending,
            parked: false,
            attempts: 0,
            next_attempt_at: Some(NEXT),
            dead_reason: None,
            ordering_key: None,
            newest: None,
            endpoint: Some(endpoint()),
            policy: policy(),
        }
    }

    struct Want {
        code: Code,
        action: Action,
        retries_left: u32,
        next: Option<Timestamp>,
        says: &'static [&'static str],
    }

    fn want(
        code: Code,
        action: Action,
        retries_left: u32,
        next: Option<Timestamp>,
        says: &'static [&'static str],
    ) -> Want {
        Want {
            code,
            action,
            retries_left,
            next,
            says,
        }
    }

    fn check(name: &str, explanation: &Explanation, want: &Want) {
        assert_eq!(explanation.code, want.code, "{name}: {explanation:?}");
        assert_eq!(explanation.action, want.action, "{name}: {explanation:?}");
        assert_eq!(
            explanation.retries_left, want.retries_left,
            "{name}: {explanation:?}"
        );
        assert_eq!(
            explanation.next_attempt_at, want.next,
            "{name}: {explanation:?}"
        );
        for words in want.says {
            assert!(
                explanation.message.contains(words),
                "{name}: {:?} lacks {words:?}",
                explanation.message
            );
        }
        assert!(
            !explanation.message.contains("{"),
            "{name}: {}",
            explanation.message
        );
    }

    #[test]
    fn every_outcome_of_an_attempt_explains_the_delivery_it_leaves() {
        let status = |s: u16| Some(s);
        let error = |e: TransportError| Some(e);
        let cases: Vec<(&str, AttemptFacts<'static>, Want)> = vec![
            (
                "2xx first",
                got(1, status(200), None),
                want(
                    Code::Delivered,
                    Action::None,
                    0,
                    None,
                    &["Delivered on the first attempt."],
                ),
            ),
            (
                "2xx after retries",
                got(3, status(204), None),
                want(
                    Code::Delivered,
                    Action::None,
                    0,
                    None,
                    &["Delivered on attempt 3, after 2 failed attempts."],
                ),
            ),
            (
                "a broker refused, without a status",
                AttemptFacts {
                    verdict: AttemptVerdict::Dead,
                    dead_reason: Some(DeadReason::ClientError),
                    next_attempt_at: None,
                    ..got(1, None, None)
                },
                want(
                    Code::ClientErrorNoRetry,
                    Action::FixThenReplay,
                    0,
                    None,
                    &["refused the message for good", "then replay"],
                ),
            ),
            (
                "the transform failed",
                AttemptFacts {
                    verdict: AttemptVerdict::Dead,
                    dead_reason: Some(DeadReason::TransformError),
                    next_attempt_at: None,
                    ..got(1, None, None)
                },
                want(
                    Code::TransformError,
                    Action::FixThenReplay,
                    0,
                    None,
                    &["transform failed", "nothing was sent", "then replay"],
                ),
            ),
            (
                "the transform skipped it",
                AttemptFacts {
                    verdict: AttemptVerdict::Delivered,
                    skipped: true,
                    next_attempt_at: None,
                    ..got(1, None, None)
                },
                want(
                    Code::Skipped,
                    Action::None,
                    0,
                    None,
                    &["Skipped", "gave null", "nothing was sent"],
                ),
            ),
            (
                "400",
                got(1, status(400), None),
                want(
                    Code::ClientErrorNoRetry,
                    Action::FixThenReplay,
                    0,
                    None,
                    &[
                        "400 Bad Request",
                        "refused the payload",
                        "4xx answers are not retried",
                        "then replay",
                    ],
                ),
            ),
            (
                "401",
                got(1, status(401), None),
                want(
                    Code::ClientErrorNoRetry,
                    Action::FixThenReplay,
                    0,
                    None,
                    &["401 Unauthorized", "verifies signatures"],
                ),
            ),
            (
                "403",
                got(1, status(403), None),
                want(
                    Code::ClientErrorNoRetry,
                    Action::FixThenReplay,
                    0,
                    None,
                    &["403 Forbidden", "authentication settings"],
                ),
            ),
            (
                "404",
                got(1, status(404), None),
                want(
                    Code::ClientErrorNoRetry,
                    Action::FixThenReplay,
                    0,
                    None,
                    &["404 Not Found", "nothing answers at the endpoint's URL"],
                ),
            ),
            (
                "405",
                got(1, status(405), None),
                want(
                    Code::ClientErrorNoRetry,
                    Action::FixThenReplay,
                    0,
                    None,
                    &["does not take POST"],
                ),
            ),
            (
                "413",
                got(1, status(413), None),
                want(
                    Code::ClientErrorNoRetry,
                    Action::FixThenReplay,
                    0,
                    None,
                    &["too large"],
                ),
            ),
            (
                "422",
                got(1, status(422), None),
                want(
                    Code::ClientErrorNoRetry,
                    Action::FixThenReplay,
                    0,
                    None,
                    &["422 Unprocessable Entity", "refused the payload"],
                ),
            ),
            (
                "418",
                got(1, status(418), None),
                want(
                    Code::ClientErrorNoRetry,
                    Action::FixThenReplay,
                    0,
                    None,
                    &["answered 418. 4xx answers are not retried"],
                ),
            ),
            (
                "410",
                got(1, status(410), None),
                want(
                    Code::Gone,
                    Action::EnableThenReplay,
                    0,
                    None,
                    &["410 Gone", "it was disabled", "Enable the endpoint again"],
                ),
            ),
            (
                "3xx",
                got(1, status(301), None),
                want(
                    Code::Redirect,
                    Action::ChangeUrlThenReplay,
                    0,
                    None,
                    &["301 Moved Permanently", "Redirects are not followed"],
                ),
            ),
            (
                "429 without Retry-After",
                got(2, status(429), None),
                want(
                    Code::RateLimited,
                    Action::Wait,
                    6,
                    Some(NEXT),
                    &[
                        "429 Too Many Requests without a Retry-After",
                        "attempt 3 of 8",
                    ],
                ),
            ),
            (
                "5xx",
                got(1, status(503), None),
                want(
                    Code::ServerError,
                    Action::FixEndpoint,
                    7,
                    Some(NEXT),
                    &["503 Service Unavailable.", "attempt 2 of 8 is scheduled"],
                ),
            ),
            (
                "500",
                got(4, status(500), None),
                want(
                    Code::ServerError,
                    Action::FixEndpoint,
                    4,
                    Some(NEXT),
                    &["500 Internal Server Error", "attempt 5 of 8"],
                ),
            ),
            (
                "408",
                got(1, status(408), None),
                want(
                    Code::Timeout,
                    Action::FixEndpoint,
                    7,
                    Some(NEXT),
                    &["408 Request Timeout"],
                ),
            ),
            (
                "timeout",
                got(1, None, error(TransportError::Timeout)),
                want(
                    Code::Timeout,
                    Action::FixEndpoint,
                    7,
                    Some(NEXT),
                    &["did not answer in time"],
                ),
            ),
            (
                "connection refused",
                got(1, None, error(TransportError::Connect)),
                want(
                    Code::ConnectionError,
                    Action::FixEndpoint,
                    7,
                    Some(NEXT),
                    &["refused or reset"],
                ),
            ),
            (
                "dns",
                got(1, None, error(TransportError::Dns)),
                want(
                    Code::ConnectionError,
                    Action::FixEndpoint,
                    7,
                    Some(NEXT),
                    &["host name could not be resolved"],
                ),
            ),
            (
                "io",
                got(1, None, error(TransportError::Io)),
                want(
                    Code::ConnectionError,
                    Action::FixEndpoint,
                    7,
                    Some(NEXT),
                    &["while sending or reading"],
                ),
            ),
            (
                "tls",
                got(1, None, error(TransportError::Tls)),
                want(
                    Code::TlsError,
                    Action::FixEndpoint,
                    7,
                    Some(NEXT),
                    &["TLS (HTTPS) handshake"],
                ),
            ),
            (
                "auth_error",
                got(1, None, error(TransportError::AuthError)),
                want(
                    Code::AuthError,
                    Action::FixEndpoint,
                    7,
                    Some(NEXT),
                    &["access token", "OAuth2"],
                ),
            ),
            (
                "destination forbidden",
                got(1, None, error(TransportError::DestinationForbidden)),
                want(
                    Code::DestinationForbidden,
                    Action::ChangeUrlThenReplay,
                    0,
                    None,
                    &["forbidden network", "public address"],
                ),
            ),
        ];
        for (name, newest, want) in &cases {
            check(name, &delivery(&after(*newest), Language::En), want);
        }
    }

    #[test]
    fn a_429_or_503_that_asks_to_wait_says_so_and_waits() {
        for status in [429, 503] {
            let mut newest = got(2, Some(status), None);
            newest.retry_after = Some(" 30 ");
            let explanation = delivery(&after(newest), Language::En);
            check(
                "asked to wait",
                &explanation,
                &want(
                    Code::RateLimited,
                    Action::Wait,
                    6,
                    Some(NEXT),
                    &["asked to wait (Retry-After: 30)", "attempt 3 of 8"],
                ),
            );
            assert_eq!(explanation.retry_after.as_deref(), Some("30"));
        }
        // A Retry-After on another status is not a request to wait.
        let mut newest = got(1, Some(500), None);
        newest.retry_after = Some("30");
        let explanation = delivery(&after(newest), Language::En);
        assert_eq!(
            (explanation.code, explanation.retry_after),
            (Code::ServerError, None)
        );
    }

    #[test]
    fn a_round_that_ran_out_says_whether_attempts_or_age_ended_it() {
        let mut last = got(8, Some(502), None);
        last.verdict = AttemptVerdict::Dead;
        last.dead_reason = Some(DeadReason::RetriesExhausted);
        last.next_attempt_at = None;
        check(
            "max attempts",
            &delivery(&after(last), Language::En),
            &want(
                Code::MaxAttempts,
                Action::FixThenReplay,
                0,
                None,
                &[
                    "Gave up after 8 of 8 attempts",
                    "got 502 Bad Gateway",
                    "then replay",
                ],
            ),
        );
        check(
            "max attempts, the attempt",
            &attempt(&last, &policy(), Language::En),
            &want(
                Code::MaxAttempts,
                Action::FixThenReplay,
                0,
                None,
                &["Gave up after 8 of 8 attempts"],
            ),
        );
        let mut last = got(5, None, Some(TransportError::Timeout));
        last.verdict = AttemptVerdict::Dead;
        last.dead_reason = Some(DeadReason::RetriesExhausted);
        last.next_attempt_at = None;
        check(
            "max age",
            &delivery(&after(last), Language::En),
            &want(
                Code::MaxAge,
                Action::FixThenReplay,
                0,
                None,
                &[
                    "after 5 attempts",
                    "older than the retry window (24 hours)",
                    "timed out",
                ],
            ),
        );
    }

    #[test]
    fn what_holds_a_pending_delivery_back_speaks_before_its_last_failure() {
        let failed = after(got(3, Some(503), None));
        let with = |f: &dyn Fn(&mut DeliveryFacts<'static>)| {
            let mut facts = failed;
            f(&mut facts);
            delivery(&facts, Language::En)
        };
        check(
            "paused",
            &with(&|f| {
                f.parked = true;
                f.next_attempt_at = None;
                f.endpoint = Some(EndpointFacts {
                    paused: true,
                    ..endpoint()
                });
            }),
            &want(
                Code::EndpointPaused,
                Action::Resume,
                5,
                None,
                &["paused", "resume"],
            ),
        );
        check(
            "polled",
            &with(&|f| {
                f.parked = true;
                f.next_attempt_at = None;
                f.endpoint = Some(EndpointFacts {
                    polled: true,
                    ..endpoint()
                });
            }),
            &want(
                Code::AwaitingFetch,
                Action::Wait,
                5,
                None,
                &["polling", "fetch", "commits"],
            ),
        );
        check(
            "disabled",
            &with(&|f| {
                f.parked = true;
                f.endpoint = Some(EndpointFacts {
                    enabled: false,
                    disabled_reason: Some("failing"),
                    ..endpoint()
                });
            }),
            &want(
                Code::EndpointDisabled,
                Action::Enable,
                5,
                None,
                &["disabled (it kept failing for too long)", "enabled again"],
            ),
        );
        check(
            "breaker open",
            &with(&|f| {
                f.endpoint = Some(EndpointFacts {
                    breaker: BreakerState::Open,
                    consecutive_failures: 12,
                    next_probe_at: Some(PROBE),
                    ..endpoint()
                })
            }),
            &want(
                Code::BreakerOpen,
                Action::FixEndpoint,
                5,
                Some(PROBE),
                &["circuit breaker is open", "12 times in a row", "probe"],
            ),
        );
        check(
            "breaker half-open",
            &with(&|f| {
                f.endpoint = Some(EndpointFacts {
                    breaker: BreakerState::HalfOpen,
                    ..endpoint()
                })
            }),
            &want(Code::BreakerHalfOpen, Action::Wait, 5, None, &["half-open"]),
        );
        check(
            "sending",
            &with(&|f| f.state = DeliveryState::InFlight),
            &want(Code::Sending, Action::Wait, 5, None, &["right now"]),
        );
        check(
            "blocked",
            &with(&|f| {
                f.state = DeliveryState::Blocked;
                f.ordering_key = Some("order-42");
            }),
            &want(
                Code::BehindEarlierEvent,
                Action::Wait,
                5,
                None,
                &["same ordering key (order-42)"],
            ),
        );
        // The failure's status stays beside what holds it back.
        assert_eq!(
            with(&|f| f.state = DeliveryState::Blocked).status,
            Some(503)
        );
    }

    #[test]
    fn a_delivery_without_an_attempt_in_its_round_is_scheduled() {
        check(
            "new",
            &delivery(&fresh(), Language::En),
            &want(
                Code::Scheduled,
                Action::Wait,
                8,
                Some(NEXT),
                &["Waiting for its first attempt."],
            ),
        );
        // Replayed: the dead round's attempt is the newest, the new round has none.
        let mut replayed = fresh();
        replayed.newest = Some(got(1, Some(400), None));
        let explanation = delivery(&replayed, Language::En);
        check(
            "replayed",
            &explanation,
            &want(
                Code::Scheduled,
                Action::Wait,
                8,
                Some(NEXT),
                &["Sent again"],
            ),
        );
        assert_eq!(explanation.status, Some(400));
        // …and delivered in its new round.
        let mut delivered = got(1, Some(200), None);
        delivered.trigger = Some(AttemptTrigger::Replay);
        check(
            "delivered on replay",
            &delivery(&after(delivered), Language::En),
            &want(
                Code::Delivered,
                Action::None,
                0,
                None,
                &["when it was sent again"],
            ),
        );
    }

    #[test]
    fn a_delivery_whose_endpoint_was_deleted_has_nothing_to_do() {
        let facts = DeliveryFacts {
            state: DeliveryState::Dead,
            dead_reason: Some(DeadReason::EndpointDeleted),
            endpoint: None,
            ..fresh()
        };
        check(
            "deleted",
            &delivery(&facts, Language::En),
            &want(Code::EndpointDeleted, Action::None, 0, None, &["deleted"]),
        );
        // Parked on an endpoint that is gone since: disabled, not paused.
        let facts = DeliveryFacts {
            parked: true,
            endpoint: None,
            ..fresh()
        };
        assert_eq!(delivery(&facts, Language::En).code, Code::EndpointDisabled);
    }

    #[test]
    fn an_attempt_says_what_its_own_outcome_meant() {
        let policy = policy();
        check(
            "delivered",
            &attempt(&got(2, Some(200), None), &policy, Language::En),
            &want(
                Code::Delivered,
                Action::None,
                0,
                None,
                &["Delivered: your endpoint answered 200 OK."],
            ),
        );
        check(
            "retried",
            &attempt(&got(2, Some(502), None), &policy, Language::En),
            &want(
                Code::ServerError,
                Action::FixEndpoint,
                6,
                Some(NEXT),
                &["502 Bad Gateway", "attempt 3 of 8"],
            ),
        );
        check(
            "refused",
            &attempt(&got(1, Some(404), None), &policy, Language::En),
            &want(
                Code::ClientErrorNoRetry,
                Action::FixThenReplay,
                0,
                None,
                &["404 Not Found"],
            ),
        );
        // An endpoint's own max_attempts counts.
        let tight = RetryPolicy {
            max_attempts: 3,
            ..policy
        };
        let explanation = attempt(
            &got(2, None, Some(TransportError::Connect)),
            &tight,
            Language::En,
        );
        assert_eq!((explanation.max_attempts, explanation.retries_left), (3, 1));
        assert!(
            explanation.message.contains("attempt 3 of 3"),
            "{}",
            explanation.message
        );
    }

    #[test]
    fn no_sentence_names_the_product() {
        // The portal is white-labelled: its sentences come from here.
        let mut said = Vec::new();
        for status in [200, 301, 400, 401, 404, 410, 429, 500, 503] {
            for number in [1, 8] {
                let mut newest = got(number, Some(status), None);
                newest.retry_after = Some("30");
                said.push(delivery(&after(newest), Language::En).message);
                said.push(attempt(&newest, &policy(), Language::En).message);
            }
        }
        for error in [
            TransportError::Timeout,
            TransportError::Connect,
            TransportError::Dns,
            TransportError::Io,
            TransportError::Tls,
            TransportError::AuthError,
            TransportError::DestinationForbidden,
        ] {
            said.push(delivery(&after(got(1, None, Some(error))), Language::En).message);
        }
        let mut exhausted = got(8, Some(502), None);
        exhausted.verdict = AttemptVerdict::Dead;
        exhausted.dead_reason = Some(DeadReason::RetriesExhausted);
        said.push(delivery(&after(exhausted), Language::En).message);
        exhausted.number = 3;
        said.push(delivery(&after(exhausted), Language::En).message);
        for message in said {
            assert!(!message.contains("Hookline"), "{message}");
        }
    }

    #[test]
    fn every_code_and_action_serialises_in_snake_case() {
        let json =
            serde_json::to_value(delivery(&after(got(1, Some(400), None)), Language::En)).unwrap();
        assert_eq!(json["code"], "client_error_no_retry");
        assert_eq!(json["action"], "fix_then_replay");
        assert_eq!(json["status"], 400);
        assert_eq!(json["retries_left"], 0);
        assert_eq!(json["next_attempt_at"], serde_json::Value::Null);
    }

    #[test]
    fn the_hebrew_table_says_each_explanation_in_hebrew() {
        let hebrew = |facts: &DeliveryFacts<'_>| visible(&delivery(facts, Language::He).message);
        assert_eq!(
            hebrew(&after(got(3, Some(204), None))),
            "נמסרה בניסיון [3], אחרי שני ניסיונות שנכשלו."
        );
        assert_eq!(
            hebrew(&after(got(1, Some(503), None))),
            "נקודת הקצה שלכם ענתה [503] השירות אינו זמין. יהיה ניסיון חוזר: ניסיון [2] מתוך [8] מתוזמן."
        );
        assert_eq!(
            hebrew(&after(got(1, Some(401), None))),
            "נקודת הקצה שלכם ענתה [401] לא מורשה: היא דחתה את הבקשה. בדקו שהיא מאמתת חתימות עם הסוד של נקודת הקצה הזו, ובדקו את הגדרות האימות של נקודת הקצה. על תשובות 4xx אין ניסיונות חוזרים: תקנו את נקודת הקצה ואז שלחו שוב."
        );
        assert_eq!(
            hebrew(&after(got(1, Some(418), None))),
            "נקודת הקצה שלכם ענתה [418]. על תשובות 4xx אין ניסיונות חוזרים: תקנו את נקודת הקצה ואז שלחו שוב."
        );
        let mut last = got(5, None, Some(TransportError::Timeout));
        last.verdict = AttemptVerdict::Dead;
        last.dead_reason = Some(DeadReason::RetriesExhausted);
        last.next_attempt_at = None;
        assert_eq!(
            hebrew(&after(last)),
            "השליחה הופסקה אחרי [5] ניסיונות: המסירה חרגה מחלון הניסיונות החוזרים ([24] שעות). הניסיון האחרון לא נענה בזמן. תקנו את נקודת הקצה ואז שלחו שוב."
        );
        let mut blocked = after(got(3, Some(503), None));
        blocked.state = DeliveryState::Blocked;
        blocked.ordering_key = Some("order-42");
        assert_eq!(
            hebrew(&blocked),
            "ממתינה שאירוע קודם עם אותו מפתח סדר ([order-42]) יימסר לפניה. אם המסירה שלו נכשלה, שלחו אותו שוב: זו תבוא אחריו."
        );
        let mut open = after(got(3, Some(503), None));
        open.endpoint = Some(EndpointFacts {
            breaker: BreakerState::Open,
            consecutive_failures: 2,
            next_probe_at: Some(PROBE),
            ..endpoint()
        });
        assert_eq!(
            hebrew(&open),
            "מפסק הזרם פתוח: נקודת הקצה שלכם נכשלה פעמיים ברצף. המסירות ממתינות עד שבקשת בדיקה תצליח."
        );
        let mut asked = got(2, Some(429), None);
        asked.retry_after = Some("30");
        assert_eq!(
            visible(&attempt(&asked, &policy(), Language::He).message),
            "נקודת הקצה שלכם ענתה [429] יותר מדי בקשות וביקשה להמתין ([Retry-After: 30]). יהיה ניסיון חוזר: ניסיון [3] מתוך [8] מתוזמן."
        );
        assert_eq!(
            visible(&attempt(&got(2, Some(200), None), &policy(), Language::He).message),
            "נמסרה: נקודת הקצה שלכם ענתה [200] תקין."
        );
        // The brackets above are the isolates: a status is its number, isolated, and its phrase.
        assert_eq!(he::http_status(503), "\u{2068}503\u{2069} השירות אינו זמין");
        assert_eq!(he::http_status(599), "\u{2068}599\u{2069}");
    }

    #[test]
    fn hebrew_counts_say_one_and_two_in_words() {
        let said: Vec<String> = [
            he::failed_attempts(1),
            he::failed_attempts(2),
            he::failed_attempts(3),
            he::amount(1, Unit::Hour),
            he::amount(2, Unit::Hour),
            he::amount(24, Unit::Hour),
            he::amount(1, Unit::Minute),
            he::amount(2, Unit::Minute),
            he::amount(2, Unit::Second),
        ]
        .iter()
        .map(|s| visible(s))
        .collect();
        assert_eq!(
            said,
            [
                "ניסיון אחד שנכשל",
                "שני ניסיונות שנכשלו",
                "[3] ניסיונות שנכשלו",
                "שעה אחת",
                "שעתיים",
                "[24] שעות",
                "דקה אחת",
                "[2] דקות",
                "[2] שניות",
            ]
        );
        // Every reason phrase the English table names has a Hebrew one.
        for code in (100..600).filter(|&c| en::http_status(c) != c.to_string()) {
            let hebrew = he::http_status(code);
            assert_hebrew(&hebrew);
            assert!(hebrew.starts_with(&Language::He.isolate(code)), "{hebrew}");
        }
    }

    #[test]
    fn the_hebrew_check_refuses_latin_outside_isolates_and_other_numbers() {
        assert_hebrew(
            "נקודת הקצה \u{2068}https://a.example/x\u{2069} ענתה \u{2068}503\u{2069} דרך HTTPS.",
        );
        for wrong in [
            "נקודת הקצה endpoint נכשלה.",
            "ענתה \u{2068}503 בלי סוף.",
            "no Hebrew at all",
            "",
        ] {
            let caught = std::panic::catch_unwind(|| assert_hebrew(wrong));
            assert!(caught.is_err(), "{wrong:?}");
        }
        assert_eq!(
            super::hebrew_checks::numbers("נכשלה פעמיים, \u{2068}3\u{2069} מסירות"),
            ["2", "3"]
        );
        assert!(std::panic::catch_unwind(|| assert_twin(
            "failed 2 times",
            "נכשלה \u{2068}3\u{2069} פעמים"
        ))
        .is_err());
    }
}
