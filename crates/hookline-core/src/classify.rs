//! Classification: the outcome of one attempt → what happens next.
//!
//! One pure function, [`classify`], so that the dispatcher never decides on
//! its own whether a response means "done", "try again" or "give up".

use std::time::{Duration, SystemTime};

use crate::model::{DeadReason, TransportError};

/// What one attempt produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// An HTTP response arrived. `retry_after` is the raw `Retry-After` header, if any.
    Response {
        status: u16,
        retry_after: Option<String>,
    },
    /// No response: the request failed in transport.
    Failed(TransportError),
    /// A destination that is not HTTP (an SMTP server) took the message.
    Accepted,
    /// A destination that is not HTTP refused the message for good (an SMTP
    /// 5xx reply): retrying would get the same answer.
    Rejected,
    /// The endpoint's transform failed: nothing was sent. `slow`: it used its
    /// whole time on the CPU.
    TransformFailed { slow: bool },
    /// The endpoint's transform could not be run now (no sandbox worker was
    /// free in time, or none could start): nothing was sent, not the
    /// receiver's doing nor the program's; tried again.
    TransformUnavailable,
    /// The endpoint's transform gave `null`: nothing is sent, by design.
    Skipped,
}

/// The classifier's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// 2xx: the delivery succeeded.
    Delivered,
    /// Retry with backoff; `not_before` is the wait the receiver asked for (`Retry-After`).
    Retry { not_before: Option<Duration> },
    /// Dead-letter at once. `disable_endpoint` is set for 410 Gone.
    Dead {
        reason: DeadReason,
        disable_endpoint: bool,
    },
}

/// Classifies one attempt. `now` anchors an HTTP-date `Retry-After`.
pub fn classify(outcome: &Outcome, now: SystemTime) -> Verdict {
    match outcome {
        Outcome::Failed(TransportError::DestinationForbidden) => Verdict::Dead {
            reason: DeadReason::DestinationForbidden,
            disable_endpoint: false,
        },
        Outcome::Failed(_) | Outcome::TransformUnavailable => Verdict::Retry { not_before: None },
        Outcome::Accepted | Outcome::Skipped => Verdict::Delivered,
        Outcome::TransformFailed { .. } => Verdict::Dead {
            reason: DeadReason::TransformError,
            disable_endpoint: false,
        },
        Outcome::Rejected => Verdict::Dead {
            reason: DeadReason::ClientError,
            disable_endpoint: false,
        },
        Outcome::Response {
            status,
            retry_after,
        } => match status {
            200..=299 => Verdict::Delivered,
            429 | 503 => Verdict::Retry {
                not_before: retry_after
                    .as_deref()
                    .and_then(|value| parse_retry_after(value, now)),
            },
            408 | 500..=599 => Verdict::Retry { not_before: None },
            410 => Verdict::Dead {
                reason: DeadReason::Gone,
                disable_endpoint: true,
            },
            300..=399 => Verdict::Dead {
                reason: DeadReason::Redirect,
                disable_endpoint: false,
            },
            // 1xx never reaches us as a final status; anything else is the receiver refusing the request.
            _ => Verdict::Dead {
                reason: DeadReason::ClientError,
                disable_endpoint: false,
            },
        },
    }
}

/// What an attempt says about its endpoint's health, for the circuit breaker.
pub fn breaker_signal(outcome: &Outcome) -> crate::breaker::Signal {
    use crate::breaker::Signal;
    match outcome {
        Outcome::Failed(TransportError::DestinationForbidden) => Signal::Neutral,
        // The token endpoint failed, not the receiver: nothing was sent to it.
        Outcome::Failed(TransportError::AuthError) => Signal::Neutral,
        Outcome::Failed(_) => Signal::Failed,
        Outcome::Accepted | Outcome::Rejected => Signal::Healthy,
        // Nothing was sent: the receiver's health is unknown.
        Outcome::TransformFailed { .. } | Outcome::TransformUnavailable | Outcome::Skipped => {
            Signal::Neutral
        }
        Outcome::Response { status: 429, .. } => Signal::Neutral,
        Outcome::Response {
            status: 408 | 500..=599,
            ..
        } => Signal::Failed,
        Outcome::Response { .. } => Signal::Healthy,
    }
}

/// What an attempt says about its receiver's load, for the endpoint's adaptive
/// concurrency. "Fewer at once": timeouts and transport failures, and the
/// statuses that mean the receiver (or its gateway) cannot keep up — 408, 429,
/// 503, 504. Any other 5xx is the receiver's own error, not its load: it says
/// nothing here (the breaker and the retries deal with it). Shrinking on every
/// 5xx took an endpoint failing 20 % of requests at random to ~8 requests in
/// flight and scenario (b) from 5.3k to 3.5k deliveries/s on SQLite.
pub fn pressure(outcome: &Outcome) -> crate::concurrency::Pressure {
    use crate::concurrency::Pressure;
    match outcome {
        Outcome::Failed(TransportError::DestinationForbidden | TransportError::AuthError) => {
            Pressure::Neutral
        }
        Outcome::Failed(_) => Pressure::Overloaded,
        Outcome::Accepted | Outcome::Rejected => Pressure::Answered,
        // A transform that ran until its time limit, or found the sandbox
        // busy: fewer of this endpoint's at once, so one endpoint's program
        // cannot take every worker. One that failed fast says nothing.
        Outcome::TransformFailed { slow: true } | Outcome::TransformUnavailable => {
            Pressure::Overloaded
        }
        Outcome::TransformFailed { slow: false } | Outcome::Skipped => Pressure::Neutral,
        Outcome::Response {
            status: 408 | 429 | 503 | 504,
            ..
        } => Pressure::Overloaded,
        Outcome::Response {
            status: 500..=599, ..
        } => Pressure::Neutral,
        Outcome::Response { .. } => Pressure::Answered,
    }
}

/// Parses `Retry-After` as delta-seconds or an HTTP-date (RFC 9110 §10.2.3).
///
/// A date in the past means "now" (zero); an unparseable value is ignored.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16) -> Outcome {
        Outcome::Response {
            status,
            retry_after: None,
        }
    }

    /// Every transport failure but a forbidden destination (our own refusal).
    const FAILED_IN_TRANSPORT: [TransportError; 5] = [
        TransportError::Timeout,
        TransportError::Connect,
        TransportError::Dns,
        TransportError::Tls,
        TransportError::Io,
    ];

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    #[test]
    fn a_mail_server_taking_the_message_delivers_it_and_refusing_it_for_good_kills_it() {
        assert_eq!(classify(&Outcome::Accepted, now()), Verdict::Delivered);
        assert_eq!(
            classify(&Outcome::Rejected, now()),
            Verdict::Dead {
                reason: DeadReason::ClientError,
                disable_endpoint: false
            }
        );
        // The server answered: healthy for the breaker, no sign of load.
        assert_eq!(
            breaker_signal(&Outcome::Rejected),
            crate::breaker::Signal::Healthy
        );
        assert_eq!(
            pressure(&Outcome::Accepted),
            crate::concurrency::Pressure::Answered
        );
    }

    #[test]
    fn success_codes_are_delivered() {
        for status in [200, 201, 202, 204, 299] {
            assert_eq!(classify(&response(status), now()), Verdict::Delivered);
        }
    }

    #[test]
    fn server_errors_timeouts_and_transport_failures_retry() {
        for status in [500, 502, 503, 504, 599, 408, 429] {
            assert_eq!(
                classify(&response(status), now()),
                Verdict::Retry { not_before: None },
                "status {status}"
            );
        }
        for error in FAILED_IN_TRANSPORT {
            assert_eq!(
                classify(&Outcome::Failed(error), now()),
                Verdict::Retry { not_before: None }
            );
        }
    }

    #[test]
    fn other_client_errors_and_redirects_are_dead_at_once() {
        for status in [400, 401, 403, 404, 405, 409, 413, 422] {
            assert_eq!(
                classify(&response(status), now()),
                Verdict::Dead {
                    reason: DeadReason::ClientError,
                    disable_endpoint: false
                }
            );
        }
        for status in [301, 302, 307, 308] {
            assert_eq!(
                classify(&response(status), now()),
                Verdict::Dead {
                    reason: DeadReason::Redirect,
                    disable_endpoint: false
                }
            );
        }
    }

    #[test]
    fn gone_disables_the_endpoint() {
        assert_eq!(
            classify(&response(410), now()),
            Verdict::Dead {
                reason: DeadReason::Gone,
                disable_endpoint: true
            }
        );
    }

    #[test]
    fn forbidden_destination_is_dead() {
        assert_eq!(
            classify(
                &Outcome::Failed(TransportError::DestinationForbidden),
                now()
            ),
            Verdict::Dead {
                reason: DeadReason::DestinationForbidden,
                disable_endpoint: false
            }
        );
    }

    #[test]
    fn retry_after_seconds_and_http_date_are_honoured_on_429_and_503() {
        let seconds = Outcome::Response {
            status: 429,
            retry_after: Some("2".into()),
        };
        assert_eq!(
            classify(&seconds, now()),
            Verdict::Retry {
                not_before: Some(Duration::from_secs(2))
            }
        );
        let date = httpdate::fmt_http_date(now() + Duration::from_secs(90));
        let dated = Outcome::Response {
            status: 503,
            retry_after: Some(date),
        };
        assert_eq!(
            classify(&dated, now()),
            Verdict::Retry {
                not_before: Some(Duration::from_secs(90))
            }
        );
    }

    #[test]
    fn breaker_signals() {
        use crate::breaker::Signal;
        assert_eq!(breaker_signal(&response(200)), Signal::Healthy);
        assert_eq!(breaker_signal(&response(404)), Signal::Healthy);
        assert_eq!(breaker_signal(&response(503)), Signal::Failed);
        assert_eq!(breaker_signal(&response(408)), Signal::Failed);
        assert_eq!(breaker_signal(&response(429)), Signal::Neutral);
        assert_eq!(
            breaker_signal(&Outcome::Failed(TransportError::Connect)),
            Signal::Failed
        );
        assert_eq!(
            breaker_signal(&Outcome::Failed(TransportError::DestinationForbidden)),
            Signal::Neutral
        );
        // The token endpoint failed: the receiver was not asked.
        assert_eq!(
            breaker_signal(&Outcome::Failed(TransportError::AuthError)),
            Signal::Neutral
        );
    }

    #[test]
    fn an_auth_error_is_retried() {
        assert_eq!(
            classify(
                &Outcome::Failed(TransportError::AuthError),
                SystemTime::UNIX_EPOCH
            ),
            Verdict::Retry { not_before: None }
        );
    }

    #[test]
    fn load_pressure() {
        use crate::concurrency::Pressure;
        for status in [200, 204, 301, 400, 404, 410] {
            assert_eq!(pressure(&response(status)), Pressure::Answered, "{status}");
        }
        for status in [408, 429, 503, 504] {
            assert_eq!(
                pressure(&response(status)),
                Pressure::Overloaded,
                "{status}"
            );
        }
        for status in [500, 501, 502, 505, 599] {
            assert_eq!(pressure(&response(status)), Pressure::Neutral, "{status}");
        }
        for error in FAILED_IN_TRANSPORT {
            assert_eq!(
                pressure(&Outcome::Failed(error)),
                Pressure::Overloaded,
                "{error:?}"
            );
        }
        for error in [
            TransportError::DestinationForbidden,
            TransportError::AuthError,
        ] {
            assert_eq!(
                pressure(&Outcome::Failed(error)),
                Pressure::Neutral,
                "{error:?}"
            );
        }
    }

    #[test]
    fn retry_after_edge_cases() {
        assert_eq!(
            parse_retry_after(" 5 ", now()),
            Some(Duration::from_secs(5))
        );
        assert_eq!(parse_retry_after("soon", now()), None);
        assert_eq!(parse_retry_after("-3", now()), None);
        let past = httpdate::fmt_http_date(now() - Duration::from_secs(10));
        assert_eq!(parse_retry_after(&past, now()), Some(Duration::ZERO));
    }
}
