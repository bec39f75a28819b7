//! How stored rows show in the API: each function renders one row as its view
//! (the view types are `hookline_types`', shared with the Rust client). Times
//! are RFC 3339 (UTC, milliseconds).

use hookline_core::transform::Transform;
use std::collections::BTreeMap;

use hookline_core::explain;
use hookline_core::language::Language;
use hookline_core::model::{request_headers, DeliveryState, RequestParts};
use hookline_core::retry::RetryPolicy;
use hookline_store::{
    ApiKey, App, Attempt, Delivery, DeliveryFacts, Endpoint, EndpointHealth, Event, EventType,
    KeyScope, ReplayJob, PARKED,
};
pub(crate) use hookline_types::{
    AppView, AttemptView, BatchMemberView, DeliveryView, EndpointHealthView, EndpointView,
    EventTypeView, EventView, FilterView, KeyView, ListView, MarkView, PublishedView,
    ReplayJobView,
};

pub(crate) fn app(app: &App) -> AppView {
    AppView {
        id: app.id.to_string(),
        uid: app.uid.clone(),
        name: app.name.clone(),
        created_at: app.created_at,
        updated_at: app.updated_at,
        portal: app.portal.clone(),
    }
}

/// What a custom header's value shows as to a caller who may not read secrets
/// (an endpoint's own headers often carry a gateway's token).
pub(crate) const HIDDEN: &str = "…";

fn shown_headers(headers: &[(String, String)], reveal: bool) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(name, value)| {
            let value = if reveal {
                value.clone()
            } else {
                HIDDEN.to_owned()
            };
            (name.clone(), value)
        })
        .collect()
}

/// `with_secret`: the signing secret is in the view (on creation);
/// `reveal`: custom header values are shown (a caller who may read secrets).
pub(crate) fn endpoint(endpoint: &Endpoint, with_secret: bool, reveal: bool) -> EndpointView {
    EndpointView {
        id: endpoint.id.to_string(),
        app_id: endpoint.app_id.to_string(),
        // A chat channel's URL is its credential (`routes::notifications`).
        url: match (&endpoint.owner_app, &endpoint.transform) {
            (Some(_), Some(Transform::Preset(_))) if !reveal => masked_url(&endpoint.url),
            _ => endpoint.url.clone(),
        },
        description: endpoint.description.clone(),
        event_types: endpoint.event_types.clone(),
        filter: endpoint.filter.clone(),
        transform: endpoint.transform.as_ref().map(|t| t.as_str().to_owned()),
        seq_in_body: endpoint.seq_in_body,
        batch: endpoint.batch,
        auth: endpoint.auth.as_ref().map(|auth| {
            let shown = if reveal {
                auth.clone()
            } else {
                auth.redacted(HIDDEN)
            };
            serde_json::to_value(shown).expect("auth serializes")
        }),
        enabled: endpoint.enabled,
        paused: endpoint.paused,
        disabled_reason: endpoint.disabled_reason.clone(),
        headers: shown_headers(&endpoint.headers, reveal),
        previous_secret_valid_until: endpoint.previous_secret.as_ref().map(|p| p.until),
        retry: endpoint.retry,
        rate_limit_per_sec: endpoint.rate_limit_per_sec,
        max_in_flight: endpoint.max_in_flight,
        ordering_on_dead: endpoint.ordering_on_dead,
        created_at: endpoint.created_at,
        updated_at: endpoint.updated_at,
        secret: with_secret.then(|| endpoint.secret.expose().to_owned()),
    }
}

/// A delivery as the API shows it: its row, and what
/// [`hookline_store::Listings::delivery_facts`] read beside it (`None`: only
/// its event's type, as in a publish's answer, which goes without an explanation).
pub(crate) fn delivery(
    d: &Delivery,
    event_type: &str,
    facts: Option<(&DeliveryFacts, &RetryPolicy, Language)>,
) -> DeliveryView {
    let parked = d.state == DeliveryState::Pending && d.due_at == PARKED;
    let next_attempt_at = (d.state == DeliveryState::Pending && !parked).then_some(d.due_at);
    let newest = facts.and_then(|(f, _, _)| f.newest.as_ref());
    DeliveryView {
        id: d.id.to_string(),
        event_id: d.event_id.to_string(),
        event_type: event_type.to_owned(),
        endpoint_id: d.endpoint_id.to_string(),
        state: d.state,
        ordering_key: d.ordering_key.clone(),
        sequence: d.sequence,
        attempts: d.attempts,
        next_attempt_at,
        parked,
        last_attempt_at: d.last_attempt_at,
        last_status: newest.and_then(|a| a.status_code),
        dead_reason: d.dead_reason,
        dead_at: d.dead_at,
        created_at: d.created_at,
        explanation: facts.map(|(f, defaults, language)| {
            explain::delivery(
                &explain::DeliveryFacts {
                    state: d.state,
                    parked,
                    attempts: d.attempts,
                    next_attempt_at,
                    dead_reason: d.dead_reason,
                    ordering_key: d.ordering_key.as_deref(),
                    newest: newest.map(attempt_facts),
                    endpoint: f.endpoint.as_ref().map(|e| explain::EndpointFacts {
                        enabled: e.enabled,
                        paused: e.paused,
                        disabled_reason: e.disabled_reason.as_deref(),
                        breaker: e.breaker.state,
                        consecutive_failures: e.breaker.consecutive_failures,
                        next_probe_at: e.breaker.next_probe_at,
                        polled: e.polled,
                    }),
                    policy: f
                        .endpoint
                        .as_ref()
                        .map_or(*defaults, |e| e.retry.apply(*defaults)),
                },
                language,
            )
        }),
    }
}

/// What an explanation reads of an attempt.
fn attempt_facts(a: &Attempt) -> explain::AttemptFacts<'_> {
    explain::AttemptFacts {
        number: a.attempt_number,
        status: a.status_code,
        error_kind: a.error_kind,
        retry_after: a
            .response_headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case("retry-after"))
            .map(|(_, value)| value.as_str()),
        verdict: a.verdict,
        next_attempt_at: a.next_attempt_at,
        dead_reason: a.dead_reason,
        trigger: a.trigger,
        skipped: a.skipped,
    }
}

pub(crate) fn event(event: &Event, deliveries: Option<Vec<DeliveryView>>) -> EventView {
    let payload = serde_json::from_slice::<serde_json::Value>(&event.body)
        .ok()
        .and_then(|mut envelope| envelope.get_mut("data").map(serde_json::Value::take))
        .unwrap_or(serde_json::Value::Null);
    EventView {
        id: event.id.to_string(),
        event_type: event.event_type.clone(),
        ordering_key: event.ordering_key.clone(),
        sequence: event.sequence,
        payload,
        created_at: event.created_at,
        deliveries,
    }
}

/// Headers as an object; a repeated name's values joined as HTTP allows.
fn header_object(headers: &[(String, String)]) -> BTreeMap<String, String> {
    let mut object: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        object
            .entry(name.clone())
            .and_modify(|joined| {
                joined.push_str(", ");
                joined.push_str(value);
            })
            .or_insert_with(|| value.clone());
    }
    object
}

/// What `a`'s outcome meant, under the retry policy its endpoint follows, in `language`.
pub(crate) fn attempt_explanation(
    a: &Attempt,
    policy: &RetryPolicy,
    language: Language,
) -> explain::Explanation {
    explain::attempt(&attempt_facts(a), policy, language)
}

/// An attempt, explained under the retry policy its endpoint follows, in `language`.
pub(crate) fn attempt(a: &Attempt, policy: &RetryPolicy, language: Language) -> AttemptView {
    AttemptView {
        explanation: attempt_explanation(a, policy, language),
        request_body: None,
        id: a.id.to_string(),
        delivery_id: a.delivery_id.to_string(),
        endpoint_id: a.endpoint_id.to_string(),
        attempt_number: a.attempt_number,
        started_at: a.started_at,
        duration_ms: a.duration_ms,
        status_code: a.status_code,
        response_body: a.response_body.clone(),
        error_kind: a.error_kind,
        error_message: a.error_message.clone(),
        verdict: a.verdict,
        next_attempt_at: a.next_attempt_at,
        dead_reason: a.dead_reason,
        trigger: a.trigger,
        url: a.url.clone(),
        request_headers: a
            .sent
            .as_ref()
            .map(|sent| {
                // The endpoint's own headers are kept by name only.
                let custom: Vec<(String, String)> = sent
                    .custom_header_names
                    .iter()
                    .map(|name| (name.clone(), HIDDEN.to_owned()))
                    .collect();
                // A batch request is the batch's (`request_headers` leaves
                // out one delivery's ordering and number).
                let batch = a.batch.as_ref();
                request_headers(RequestParts {
                    custom: &custom,
                    event_id: batch.map_or(sent.event_id.as_str(), |b| b.id.as_str()),
                    timestamp: a.started_at.as_secs(),
                    signature: &sent.signature,
                    ordering: sent.ordering.as_ref().map(|(k, s)| (k.as_str(), *s)),
                    endpoint_sequence: sent.endpoint_sequence,
                    batch_size: batch.map(|b| b.size),
                })
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value.into_owned()))
                .collect()
            })
            .unwrap_or_default(),
        response_headers: header_object(&a.response_headers),
        response_body_truncated: a.response_truncated,
        batch: a.batch.as_ref().map(|b| BatchMemberView {
            id: b.id.clone(),
            size: b.size,
            position: b.position,
        }),
    }
}

pub(crate) fn health(endpoint: &Endpoint, health: &EndpointHealth) -> EndpointHealthView {
    EndpointHealthView {
        endpoint_id: endpoint.id.to_string(),
        enabled: health.enabled,
        disabled_reason: health.disabled_reason.clone(),
        breaker: health.breaker.state,
        consecutive_failures: health.breaker.consecutive_failures,
        next_probe_at: health.breaker.next_probe_at,
        failing_since: health.breaker.failing_since,
        last_error: health.last_error.clone(),
        last_failure_at: health.last_failure_at,
        recent_success_rate: (health.recent_attempts > 0)
            .then(|| f64::from(health.recent_delivered) / f64::from(health.recent_attempts)),
        recent_attempts: health.recent_attempts,
        polling: None,
    }
}

pub(crate) fn replay_job(job: &ReplayJob) -> ReplayJobView {
    ReplayJobView {
        id: job.id.to_string(),
        state: job.state,
        filter: FilterView {
            endpoint_id: job.filter.endpoint.as_ref().map(ToString::to_string),
            reason: job.filter.reason,
            event_type: job.filter.event_type.clone(),
            since: job.filter.died.since,
            until: job.filter.died.until,
        },
        total: job.total,
        done: job.done,
        replayed: job.replayed,
        skipped: job.skipped(),
        created_at: job.created_at,
        finished_at: job.finished_at,
    }
}

pub(crate) fn event_type(t: &EventType) -> EventTypeView {
    EventTypeView {
        name: t.name.clone(),
        description: t.description.clone(),
        schema: t.schema.clone(),
        example: t.example.clone(),
        deprecated: t.deprecated,
        created_at: t.created_at,
        updated_at: t.updated_at,
    }
}

/// `secret`: the key itself, only in the answer that made it.
pub(crate) fn key(key: &ApiKey, secret: Option<String>) -> KeyView {
    KeyView {
        id: key.id.to_string(),
        name: key.name.clone(),
        app_id: match &key.scope {
            KeyScope::Admin => None,
            KeyScope::App { app, .. } => Some(app.to_string()),
        },
        capabilities: match &key.scope {
            KeyScope::Admin => None,
            KeyScope::App { capabilities, .. } => Some(capabilities.iter().collect()),
        },
        created_at: key.created_at,
        expires_at: key.expires_at,
        key: secret,
    }
}

/// A URL that is its own credential (a chat's incoming webhook), shown as its
/// origin, its first path segment and its last four characters.
pub(crate) fn masked_url(url: &str) -> String {
    let (origin, path) = match url.split_once("://") {
        Some((scheme, rest)) => match rest.find('/') {
            Some(slash) => (format!("{scheme}://{}", &rest[..slash]), &rest[slash + 1..]),
            None => (format!("{scheme}://{rest}"), ""),
        },
        None => (String::new(), url),
    };
    let first = path.split('/').next().unwrap_or("");
    if first.is_empty() {
        return format!("{origin}/…");
    }
    let chars: Vec<char> = path.chars().collect();
    if chars.len() <= first.chars().count() + 4 {
        return format!("{origin}/{first}/…");
    }
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("{origin}/{first}/…{tail}")
}

#[cfg(test)]
mod masking {
    use super::masked_url;

    #[test]
    fn a_chat_urls_secret_part_is_hidden() {
        assert_eq!(
            masked_url("https://hooks.slack.com/services/T0001/B0002/XXXXsecretXy9z"),
            "https://hooks.slack.com/services/…Xy9z"
        );
        assert_eq!(
            masked_url("https://discord.com/api/webhooks/1234/tokenAbCd"),
            "https://discord.com/api/…AbCd"
        );
        assert_eq!(masked_url("https://a.example/x"), "https://a.example/x/…");
        assert_eq!(masked_url("https://a.example"), "https://a.example/…");
    }
}
