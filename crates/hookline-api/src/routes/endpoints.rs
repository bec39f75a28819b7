//! `/v1/apps/{app}/endpoints`: where an app's events go.

use hookline_core::batch::Batching;
use hookline_core::destination::is_poll;
use hookline_core::transform::{self, Transform};
use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_core::access::Capability;
use hookline_core::ids::{AttemptId, EndpointId, EventId};
use hookline_core::outbound_auth::OutboundAuth;
use hookline_core::signing::EndpointSecret;
use hookline_store::{
    AttemptFilter, Endpoint, EndpointPatch, NewEndpoint, Page, PublishOutcome, RetryOverrides,
};

use super::events::{prepare, PublishRequest};
use super::{checked_name, is_id, page, page_of, path_id, status_filter, time_range, PageQuery};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, Lang, QueryParams};
use crate::views::{AttemptView, EndpointHealthView, EndpointView, ListView};
use crate::AppState;
pub(crate) use hookline_types::{
    AttemptsQuery, CheckSignature, CreateEndpoint, EndpointStatsView, FilterPreview,
    FilterPreviewEvent, FilterPreviewView, IncidentEndpointView, IncidentView, IncidentsQuery,
    IncidentsView, Latency, RotateSecret, RotatedSecretView, SecretView, StatsWindow, TestSend,
    TestSendView, TimelineQuery, TimelineView, TransformOutcome, TransformPreview,
    TransformPreviewView, UpdateEndpoint,
};

/// Outbound authentication that holds together, with the custom headers it
/// goes with (one `Authorization` only).
fn validate_auth(
    state: &AppState,
    url: &str,
    auth: Option<&OutboundAuth>,
    headers: &[(String, String)],
) -> ApiResult<()> {
    use hookline_core::destination::InvalidUrl;
    use hookline_core::outbound_auth::InvalidAuth;
    // A broker takes a user and password (its login), and no HTTP header.
    if hookline_core::broker::Broker::is_broker_url(url) {
        if !headers.is_empty() {
            return Err(ApiError::Validation(
                "custom headers are for HTTP receivers: a broker's endpoint (redis://, nats://, amqp://, sqs://, sns://, eventbridge://) takes none".into(),
            ));
        }
        if auth.is_some_and(|a| a.oauth2.is_some() || a.bearer.is_some() || a.tls.is_some()) {
            return Err(ApiError::Validation(
                "a broker's endpoint (redis://, nats://, amqp://, sqs://, sns://, eventbridge://) takes `basic` auth only: its login (for AWS, the access key id and secret)".into(),
            ));
        }
    }
    let Some(auth) = auth else {
        return Ok(());
    };
    auth.check(state.config.allow_private_destinations)
        .map_err(|error| match error {
            InvalidAuth::TokenUrl(InvalidUrl::Forbidden) => ApiError::DestinationForbidden,
            other => ApiError::Validation(other.to_string()),
        })?;
    let authorizes = auth.oauth2.is_some() || auth.basic.is_some() || auth.bearer.is_some();
    if authorizes && headers.iter().any(|(name, _)| name == "authorization") {
        return Err(ApiError::Validation(
            "headers: `authorization` is what `auth` sends; remove one of the two".into(),
        ));
    }
    Ok(())
}

/// Why a polling endpoint takes no transform.
const NO_POLL_TRANSFORM: &str =
    "a polling endpoint is sent nothing, so a transform would never run: its receiver fetches the envelopes";

/// An endpoint's batching, as it will be with its URL and transform: in
/// bounds (422), and only where one request can carry many (409): an HTTP
/// endpoint without a transform (which makes one request of one event).
fn validate_batch(
    batch: Option<&Batching>,
    url: &str,
    transform: Option<&Transform>,
) -> ApiResult<()> {
    let Some(batch) = batch else {
        return Ok(());
    };
    batch.check().map_err(ApiError::Validation)?;
    let http = url.starts_with("https://") || url.starts_with("http://");
    if !http {
        return Err(ApiError::Conflict(
            "batching is for HTTP endpoints: a broker, e-mail or polling endpoint takes one message per delivery",
        ));
    }
    if transform.is_some() {
        return Err(ApiError::Conflict(
            "a transform makes one request of one event, so an endpoint with a transform is not batched: remove one of the two",
        ));
    }
    Ok(())
}

/// An endpoint URL: absolute http(s) with a host (or a broker's URL naming
/// where its messages go: `hookline_core::broker`), no credentials, and — unless private destinations are allowed —
/// not a literal private address or `localhost`. (Names are checked again
/// where the connection is made.)
pub(super) fn validate_url(state: &AppState, raw: &str) -> ApiResult<String> {
    url_problem(hookline_core::destination::check_endpoint_url(
        raw,
        state.config.allow_private_destinations,
    ))
}

/// A URL that is HTTP's alone (a chat's incoming webhook), under the same rules.
pub(super) fn validate_http_url(state: &AppState, raw: &str) -> ApiResult<String> {
    url_problem(hookline_core::destination::check_url(
        raw,
        state.config.allow_private_destinations,
    ))
}

fn url_problem(
    checked: Result<String, hookline_core::destination::InvalidUrl>,
) -> ApiResult<String> {
    use hookline_core::destination::InvalidUrl;
    checked.map_err(|error| match error {
        InvalidUrl::Forbidden => ApiError::DestinationForbidden,
        other => ApiError::Validation(other.to_string()),
    })
}

/// `null` (every type) or 1 to 100 names and `group.*` patterns
/// (`hookline_core::event_types`).
fn validate_event_types(types: &Option<Vec<String>>) -> ApiResult<()> {
    let Some(types) = types else {
        return Ok(());
    };
    if types.is_empty() || types.len() > 100 {
        return Err(ApiError::Validation(
            "event_types must be null (all types) or 1 to 100 names".into(),
        ));
    }
    for pattern in types {
        hookline_core::event_types::check_pattern(pattern).map_err(|error| {
            ApiError::Validation(format!("event_types entry {pattern:?} {error}"))
        })?;
    }
    Ok(())
}

/// A payload filter parses (`hookline_core::filter`); the error names the position.
fn validate_filter(filter: &Option<String>) -> ApiResult<()> {
    if let Some(source) = filter {
        hookline_core::filter::Filter::parse(source)
            .map_err(|error| ApiError::InvalidFilter(format!("filter {error}")))?;
    }
    Ok(())
}

/// Catalog examples a transform is tried on when saved, at most.
const EXAMPLES_TRIED: usize = 20;

/// An endpoint's transform (`hookline_core::transform`): a preset's name, or
/// a jq program that compiles in the sandbox and, run on the catalog example
/// of each of the endpoint's event types that has one, gives something that
/// can be sent. The error says where the program is wrong, or on which
/// example it failed and how.
async fn validate_transform(
    state: &AppState,
    text: Option<String>,
    endpoint: TransformFacts<'_>,
) -> ApiResult<Option<Transform>> {
    let Some(text) = text else {
        return Ok(None);
    };
    if text.len() > transform::MAX_PROGRAM_BYTES || text.contains('\0') || text.trim().is_empty() {
        return Err(ApiError::InvalidTransform(format!(
            "transform must be a preset's name (slack, teams, discord) or a jq program of 1 to {} bytes without NUL",
            transform::MAX_PROGRAM_BYTES
        )));
    }
    let transform = Transform::parse(&text);
    let Transform::Program(program) = &transform else {
        return Ok(Some(transform));
    };
    let refused = |error: hookline_transform::Error, on: Option<&str>| match error {
        hookline_transform::Error::Program(error) | hookline_transform::Error::TooSlow(error) => {
            ApiError::InvalidTransform(match on {
                None => format!("transform {error}"),
                Some(event_type) => {
                    format!("transform failed on the catalog example of {event_type}: {error}")
                }
            })
        }
        hookline_transform::Error::Unavailable(message) => ApiError::TransformsUnavailable(message),
    };
    state
        .transforms
        .check(program)
        .await
        .map_err(|e| refused(e, None))?;
    let kind = match hookline_core::broker::Broker::is_broker_url(endpoint.url) {
        true => transform::Kind::Broker,
        false => transform::Kind::Http,
    };
    let examples = state.store.catalog().list_event_types().await?;
    let examples = examples
        .iter()
        .filter(|t| hookline_core::event_types::subscribed(endpoint.event_types, &t.name))
        .filter_map(|t| Some((t.name.as_str(), t.example.as_ref()?)))
        .take(EXAMPLES_TRIED);
    let now = state.clock.now();
    for (event_type, example) in examples {
        let envelope = hookline_core::model::envelope(event_type, now, example);
        let input = transform::input(
            &envelope,
            "evt_example",
            None,
            transform::EndpointFacts {
                id: endpoint.id,
                url: endpoint.url,
                description: endpoint.description,
            },
        );
        let input = serde_json::value::RawValue::from_string(input).expect("the input is JSON");
        let outputs = state
            .transforms
            .run(program, &input)
            .await
            .map_err(|e| refused(e, Some(event_type)))?;
        transform::read_output(&outputs, kind, state.config.allow_private_destinations).map_err(
            |said| {
                ApiError::InvalidTransform(format!(
                    "transform failed on the catalog example of {event_type}: {said}"
                ))
            },
        )?;
    }
    Ok(Some(transform))
}

/// What a transform is checked against: the endpoint as it will be.
#[derive(Clone, Copy)]
struct TransformFacts<'a> {
    id: &'a str,
    url: &'a str,
    description: &'a str,
    event_types: Option<&'a [String]>,
}

/// A description may be empty or span lines, but hold no NUL (PostgreSQL's `text`
/// cannot), the same on both engines.
fn validate_description(description: &str) -> ApiResult<()> {
    if description.len() > 1024 || description.contains('\0') {
        return Err(ApiError::Validation(
            "description must be at most 1024 characters, without NUL".into(),
        ));
    }
    Ok(())
}

/// Custom headers, checked (`hookline_core::custom_headers`) and lower-cased.
fn validate_headers(headers: BTreeMap<String, String>) -> ApiResult<Vec<(String, String)>> {
    let headers: Vec<(String, String)> = headers.into_iter().collect();
    hookline_core::custom_headers::check(&headers)
        .map_err(|e| ApiError::Validation(format!("headers: {e}")))
}

/// The most deliveries per second a limit may name (beyond it, a limit protects nothing).
const MAX_RATE_LIMIT: u32 = 100_000;

fn validate_rate_limit(rate: Option<u32>) -> ApiResult<()> {
    validate_optional_count("rate_limit_per_sec", rate, MAX_RATE_LIMIT, "unlimited")
}

/// The highest concurrency ceiling an endpoint may name (the process's own
/// `max_in_flight` bounds it further).
const MAX_IN_FLIGHT: u32 = 1024;

fn validate_max_in_flight(ceiling: Option<u32>) -> ApiResult<()> {
    validate_optional_count(
        "max_in_flight",
        ceiling,
        MAX_IN_FLIGHT,
        "the deployment's ceiling",
    )
}

/// An optional count: `null` (meaning `when_null`) or 1 to `max`.
fn validate_optional_count(
    field: &str,
    value: Option<u32>,
    max: u32,
    when_null: &str,
) -> ApiResult<()> {
    match value {
        Some(v) if v == 0 || v > max => Err(ApiError::Validation(format!(
            "{field} must be null ({when_null}) or 1 to {max}"
        ))),
        _ => Ok(()),
    }
}

fn validate_retry(retry: &RetryOverrides) -> ApiResult<()> {
    retry
        .check()
        .map_err(|error| ApiError::Validation(error.to_string()))
}

pub(crate) async fn find(
    state: &AppState,
    caller: &Caller,
    app: &str,
    endpoint: &str,
) -> ApiResult<Endpoint> {
    let app = caller.app(state, app).await?;
    let id: EndpointId = path_id(endpoint, "endpoint")?;
    state
        .store
        .endpoints()
        .get_endpoint(&app.id, &id)
        .await?
        .ok_or(ApiError::NotFound("endpoint"))
}

pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    body: JsonBody<CreateEndpoint>,
) -> ApiResult<(StatusCode, Json<EndpointView>)> {
    let app = caller.app(&state, &app).await?;
    let new = body.value;
    let url = validate_url(&state, &new.url)?;
    validate_event_types(&new.event_types)?;
    validate_filter(&new.filter)?;
    validate_description(&new.description)?;
    validate_retry(&new.retry)?;
    validate_rate_limit(new.rate_limit_per_sec)?;
    validate_max_in_flight(new.max_in_flight)?;
    let headers = validate_headers(new.headers.unwrap_or_default())?;
    validate_auth(&state, &url, new.auth.as_ref(), &headers)?;
    if is_poll(&url) && new.transform.is_some() {
        return Err(ApiError::Conflict(NO_POLL_TRANSFORM));
    }
    let transform = validate_transform(
        &state,
        new.transform,
        TransformFacts {
            id: "ep_new",
            url: &url,
            description: &new.description,
            event_types: new.event_types.as_deref(),
        },
    )
    .await?;
    validate_batch(new.batch.as_ref(), &url, transform.as_ref())?;
    let secret = match new.secret {
        Some(text) => {
            EndpointSecret::parse(&text).map_err(|e| ApiError::Validation(e.to_string()))?
        }
        None => EndpointSecret::generate(),
    };
    let endpoint = state
        .store
        .endpoints()
        .create_endpoint(
            &app.id,
            NewEndpoint {
                url,
                description: new.description,
                event_types: new.event_types,
                filter: new.filter,
                enabled: new.enabled,
                paused: new.paused,
                secret,
                headers,
                auth: new.auth,
                retry: new.retry,
                rate_limit_per_sec: new.rate_limit_per_sec,
                max_in_flight: new.max_in_flight,
                ordering_on_dead: new.ordering_on_dead,
                owner_app: None,
                transform,
                seq_in_body: new.seq_in_body,
                batch: new.batch,
            },
            state.clock.now(),
        )
        .await?;
    // The secret is in the answer only for a caller who may reveal it anyway.
    Ok((
        StatusCode::CREATED,
        Json(crate::views::endpoint(
            &endpoint,
            caller.can(Capability::Secrets),
            caller.can(Capability::Secrets),
        )),
    ))
}

pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    QueryParams(query): QueryParams<PageQuery>,
) -> ApiResult<Json<ListView<EndpointView>>> {
    let app = caller.app(&state, &app).await?;
    let page = super::id_page::<EndpointId>(query)?;
    let endpoints = state
        .store
        .endpoints()
        .list_endpoints(&app.id, &page)
        .await?;
    Ok(Json(page_of(
        &endpoints,
        &page,
        |e| e.id.to_string(),
        |e| crate::views::endpoint(e, false, caller.can(Capability::Secrets)),
    )))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
) -> ApiResult<Json<EndpointView>> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    Ok(Json(crate::views::endpoint(
        &endpoint,
        false,
        caller.can(Capability::Secrets),
    )))
}

/// `GET …/secret`: the signing secret, for the endpoint's owner to verify with.
pub(crate) async fn secret(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
) -> ApiResult<Json<SecretView>> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    Ok(Json(SecretView {
        key: endpoint.secret.expose().to_owned(),
    }))
}

/// `POST …/signature-check`: what a receiver got, checked against the
/// endpoint's secrets (never shown), with the body sent for its `webhook-id`
/// when the event is still kept (to tell a changed body from another secret).
pub(crate) async fn check_signature(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path((app, endpoint)): Path<(String, String)>,
    body: JsonBody<CheckSignature>,
) -> ApiResult<Json<hookline_core::signature_check::Check>> {
    use hookline_core::signature_check::{check, Received};
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    let got = body.value;
    let header = |name: &str| {
        got.headers
            .iter()
            .find(|(key, _)| key.trim().eq_ignore_ascii_case(name))
            .map(|(_, value)| value.as_str())
    };
    let id = header("webhook-id");
    let event = match id.and_then(|id| hookline_core::ids::EventId::parse(id.trim()).ok()) {
        Some(event) => state
            .store
            .events()
            .get_event(&endpoint.app_id, &event)
            .await?
            // Only an event this endpoint was sent says what it got.
            .and_then(|(event, deliveries)| {
                let delivery = deliveries
                    .into_iter()
                    .find(|d| d.endpoint_id == endpoint.id)?;
                Some((event, delivery))
            }),
        None => None,
    };
    // What was sent: the envelope, with the delivery's number in it if the
    // body received has one (the endpoint's `seq_in_body` when it was sent).
    let sent = match event {
        Some((event, delivery)) => {
            let numbered = serde_json::from_str::<serde_json::Value>(&got.body)
                .is_ok_and(|body| body.get("seq").is_some());
            match state.store.events().sequence_of(&delivery.id).await? {
                Some(seq) if numbered => Some(hookline_core::model::numbered(&event.body, seq)),
                _ => Some(event.body),
            }
        }
        None => None,
    };
    let keys = hookline_core::signing::SigningKeys {
        current: endpoint.secret.clone(),
        previous: endpoint.previous_secret.clone(),
    };
    Ok(Json(check(
        &Received {
            id,
            timestamp: header("webhook-timestamp"),
            signature: header("webhook-signature"),
            body: got.body.as_bytes(),
        },
        &keys,
        sent.as_deref(),
        state.clock.now(),
        language,
    )))
}

/// The longest grace a rotation may give the old secret.
const MAX_GRACE_SECS: u64 = 7 * 86_400;
const DEFAULT_GRACE_SECS: u64 = 86_400;

/// `POST …/secret/rotate`: a new signing secret. For `grace_secs` (default 24 h)
/// every delivery carries both signatures, so receivers switch without a gap.
pub(crate) async fn rotate_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
    body: JsonBody<RotateSecret>,
) -> ApiResult<Json<RotatedSecretView>> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    let RotateSecret { key, grace_secs } = body.value;
    let new = match key {
        Some(text) => {
            EndpointSecret::parse(&text).map_err(|e| ApiError::Validation(e.to_string()))?
        }
        None => EndpointSecret::generate(),
    };
    if new == endpoint.secret {
        return Err(ApiError::Conflict("key is the endpoint's current secret"));
    }
    let grace = grace_secs.unwrap_or(DEFAULT_GRACE_SECS);
    if grace > MAX_GRACE_SECS {
        return Err(ApiError::Validation(format!(
            "grace_secs must be 0 to {MAX_GRACE_SECS} (7 days)"
        )));
    }
    let rotated = state
        .store
        .endpoints()
        .rotate_endpoint_secret(
            &endpoint.app_id,
            &endpoint.id,
            new,
            std::time::Duration::from_secs(grace),
            state.clock.now(),
        )
        .await?
        .ok_or(ApiError::NotFound("endpoint"))?;
    Ok(Json(RotatedSecretView {
        key: rotated.secret.expose().to_owned(),
        previous_valid_until: rotated.previous_secret.map(|p| p.until),
    }))
}

pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
    body: JsonBody<UpdateEndpoint>,
) -> ApiResult<Json<EndpointView>> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    // A customer's notification channel is made by its app, for its app: where
    // it sends and what it gets (its scope filter) change only there.
    let switches_only = body
        .raw
        .as_object()
        .is_some_and(|fields| fields.keys().all(|k| k == "enabled" || k == "paused"));
    if endpoint.owner_app.is_some() && !switches_only {
        return Err(ApiError::Conflict(
            "this endpoint is a notification channel of another app (its /notifications): only `enabled` and `paused` change here",
        ));
    }
    let patch = body.value;
    let url = patch
        .url
        .as_deref()
        .map(|u| validate_url(&state, u))
        .transpose()?;
    if url
        .as_deref()
        .is_some_and(|url| is_poll(url) != is_poll(&endpoint.url))
    {
        return Err(ApiError::Conflict(
            "an endpoint does not change between polling (poll:) and being sent to: make another",
        ));
    }
    let polled = is_poll(url.as_deref().unwrap_or(&endpoint.url));
    if polled && matches!(patch.transform, Some(Some(_))) {
        return Err(ApiError::Conflict(NO_POLL_TRANSFORM));
    }
    if let Some(types) = &patch.event_types {
        validate_event_types(types)?;
    }
    if let Some(filter) = &patch.filter {
        validate_filter(filter)?;
    }
    if let Some(description) = &patch.description {
        validate_description(description)?;
    }
    if let Some(retry) = &patch.retry {
        validate_retry(retry)?;
    }
    if let Some(rate) = patch.rate_limit_per_sec {
        validate_rate_limit(rate)?;
    }
    if let Some(ceiling) = patch.max_in_flight {
        validate_max_in_flight(ceiling)?;
    }
    let headers = patch.headers.map(validate_headers).transpose()?;
    // The endpoint as it will be, for its transform.
    let becomes = TransformFacts {
        id: endpoint.id.as_str(),
        url: url.as_deref().unwrap_or(&endpoint.url),
        description: patch
            .description
            .as_deref()
            .unwrap_or(&endpoint.description),
        event_types: match &patch.event_types {
            Some(types) => types.as_deref(),
            None => endpoint.event_types.as_deref(),
        },
    };
    let transform = match patch.transform {
        Some(text) => Some(validate_transform(&state, text, becomes).await?),
        None => {
            // Its program, tried again on what the endpoint becomes: a new URL
            // (a broker takes a body only) or new types (other examples).
            if let Some(Transform::Program(program)) = &endpoint.transform {
                if url.is_some() || patch.event_types.is_some() {
                    validate_transform(&state, Some(program.to_string()), becomes).await?;
                }
            }
            None
        }
    };
    validate_batch(
        match &patch.batch {
            Some(batch) => batch.as_ref(),
            None => endpoint.batch.as_ref(),
        },
        url.as_deref().unwrap_or(&endpoint.url),
        match &transform {
            Some(transform) => transform.as_ref(),
            None => endpoint.transform.as_ref(),
        },
    )?;
    if patch.auth.is_some() || headers.is_some() || url.is_some() {
        // The endpoint as it will be: the patch over what it is.
        let auth = match &patch.auth {
            Some(auth) => auth.as_ref(),
            None => endpoint.auth.as_ref(),
        };
        validate_auth(
            &state,
            url.as_deref().unwrap_or(&endpoint.url),
            auth,
            headers.as_deref().unwrap_or(&endpoint.headers),
        )?;
    }
    let updated = state
        .store
        .endpoints()
        .update_endpoint(
            &endpoint.app_id,
            &endpoint.id,
            EndpointPatch {
                url,
                description: patch.description,
                event_types: patch.event_types,
                filter: patch.filter,
                transform,
                seq_in_body: patch.seq_in_body,
                batch: patch.batch,
                enabled: patch.enabled,
                paused: patch.paused,
                headers,
                auth: patch.auth,
                retry: patch.retry,
                rate_limit_per_sec: patch.rate_limit_per_sec,
                max_in_flight: patch.max_in_flight,
                ordering_on_dead: patch.ordering_on_dead,
            },
            state.clock.now(),
        )
        .await?
        .ok_or(ApiError::NotFound("endpoint"))?;
    Ok(Json(crate::views::endpoint(
        &updated,
        false,
        caller.can(Capability::Secrets),
    )))
}

pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    if state
        .store
        .endpoints()
        .delete_endpoint(&endpoint.app_id, &endpoint.id, state.clock.now())
        .await?
    {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("endpoint"))
    }
}

/// `GET …/health`: the breaker's state, consecutive failures, next probe time,
/// last error and the success rate of the last 100 attempts.
pub(crate) async fn health(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
) -> ApiResult<Json<EndpointHealthView>> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    let health = state
        .store
        .endpoints()
        .endpoint_health(&endpoint.app_id, &endpoint.id)
        .await?
        .ok_or(ApiError::NotFound("endpoint"))?;
    let mut view = crate::views::health(&endpoint, &health);
    if is_poll(&endpoint.url) {
        let events = state.store.events();
        let (committed_seq, committed_at) = events.poll_position(&endpoint.id).await?;
        let last_seq = events.last_sequence(&endpoint.id).await?;
        view.polling = Some(hookline_types::PollingView {
            committed_seq,
            last_seq,
            waiting: last_seq.saturating_sub(committed_seq),
            committed_at,
        });
    }
    Ok(Json(view))
}

/// `GET …/endpoints/{endpoint}/attempts`: every attempt sent to the endpoint, newest
/// first, filtered. A deleted endpoint's attempts still answer (its history stays
/// until retention removes it); an id that never had an endpoint nor attempts is 404.
pub(crate) async fn attempts(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path((app, endpoint)): Path<(String, String)>,
    QueryParams(query): QueryParams<AttemptsQuery>,
) -> ApiResult<Json<ListView<AttemptView>>> {
    let app = caller.app(&state, &app).await?;
    let id: EndpointId = path_id(&endpoint, "endpoint")?;
    let filter = AttemptFilter {
        verdict: query.verdict,
        status: status_filter(query.status)?,
        started: time_range(query.since, query.until)?,
    };
    let first_page = query.before.is_none();
    let page = page(query.limit, query.before, is_id::<AttemptId>)?;
    let attempts = state
        .store
        .listings()
        .list_endpoint_attempts(&app.id, &id, &filter, &page)
        .await?;
    // Unknown unless the endpoint exists or once did (its attempts stay after a delete).
    if attempts.is_empty()
        && first_page
        && state
            .store
            .endpoints()
            .get_endpoint(&app.id, &id)
            .await?
            .is_none()
        && state
            .store
            .listings()
            .list_endpoint_attempts(&app.id, &id, &AttemptFilter::default(), &page)
            .await?
            .is_empty()
    {
        return Err(ApiError::NotFound("endpoint"));
    }
    let policy = super::deliveries::retry_policy(&state, &app.id, &id).await?;
    Ok(Json(page_of(
        &attempts,
        &page,
        |a| a.id.to_string(),
        |a| crate::views::attempt(a, &policy, language),
    )))
}

/// Attempts read per window for the stats (the most recent ones, when a window
/// holds more): the documented precision of the percentiles and rates.
const STATS_SAMPLE: u32 = 10_000;

/// How far back dead-lettered deliveries count as an incident, unless asked.
const INCIDENTS_LOOKBACK: std::time::Duration = std::time::Duration::from_secs(86_400);
/// The furthest back `since` reaches.
const INCIDENTS_FURTHEST: std::time::Duration = std::time::Duration::from_secs(7 * 86_400);

/// `GET /v1/apps/{app}/incidents`: the app's endpoints in trouble, grouped by cause.
pub(crate) async fn incidents(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path(app): Path<String>,
    QueryParams(query): QueryParams<IncidentsQuery>,
) -> ApiResult<Json<IncidentsView>> {
    use hookline_core::incidents::{group, Kind, Trouble};
    let app = caller.app(&state, &app).await?;
    let now = state.clock.now();
    // At most a week back: the count walks the dead-letter queue's index.
    let since = super::time_range(query.since, None)?
        .since
        .unwrap_or(now - INCIDENTS_LOOKBACK)
        .max(now - INCIDENTS_FURTHEST);
    let troubles = state.store.endpoints().troubles(&app.id, since).await?;
    let mut found = Vec::with_capacity(troubles.len());
    for t in troubles {
        let policy = t.retry.apply(state.config.retry);
        // Disabled, then paused (nothing is sent either way), then failing,
        // then dead letters: the first that applies.
        let (kind, cause, from) = if !t.enabled {
            (Kind::Disabled, None, t.switched_at)
        } else if t.paused {
            (Kind::Paused, None, t.switched_at)
        } else if t.failing() {
            let newest = state
                .store
                .listings()
                .list_endpoint_attempts(
                    &app.id,
                    &t.id,
                    &AttemptFilter::default(),
                    &Page {
                        limit: 1,
                        before: None,
                    },
                )
                .await?;
            let cause = newest
                .first()
                .map(|a| crate::views::attempt_explanation(a, &policy, language));
            (Kind::Failing, cause, t.breaker.failing_since)
        } else if t.dead > 0 {
            let cause = match &t.newest_dead {
                Some(d) => {
                    super::deliveries::views_of(&state, &app.id, std::slice::from_ref(d), language)
                        .await?
                        .pop()
                        .and_then(|v| v.explanation)
                }
                None => None,
            };
            (Kind::DeadLetters, cause, t.first_dead_at)
        } else {
            continue;
        };
        let trouble = Trouble {
            kind,
            cause,
            since: from,
            waiting: t.waiting,
            dead: t.dead,
            disabled_reason: t.disabled_reason.clone(),
        };
        found.push((t, trouble));
    }
    let data = group(found, language)
        .into_iter()
        .map(|g| IncidentView {
            kind: g.kind,
            code: g.code,
            status: g.status,
            error_kind: g.error_kind,
            since: g.since,
            waiting: g.waiting,
            dead: g.dead,
            action: g.action,
            message: g.message,
            endpoints: g
                .endpoints
                .into_iter()
                .map(|(e, t)| IncidentEndpointView {
                    endpoint_id: e.id.to_string(),
                    url: e.url,
                    description: e.description,
                    enabled: e.enabled,
                    paused: e.paused,
                    disabled_reason: e.disabled_reason,
                    breaker: e.breaker.state,
                    consecutive_failures: e.breaker.consecutive_failures,
                    next_probe_at: e.breaker.next_probe_at,
                    since: t.since,
                    waiting: t.waiting,
                    dead: t.dead,
                    cause: t.cause,
                })
                .collect(),
        })
        .collect();
    Ok(Json(IncidentsView {
        data,
        since,
        checked_at: now,
    }))
}

/// The most attempts a timeline counts (the latest ones): a busy endpoint's
/// week is whole from `complete_since` on.
const TIMELINE_SAMPLE: u32 = 100_000;

/// `GET …/endpoints/{endpoint}/timeline`: attempts per bucket, and the marks.
pub(crate) async fn timeline(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
    QueryParams(query): QueryParams<TimelineQuery>,
) -> ApiResult<Json<TimelineView>> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    let window = query.window.unwrap_or_default();
    let layout = window.layout(state.clock.now());
    let timeline = state
        .store
        .endpoints()
        .endpoint_timeline(&endpoint.app_id, &endpoint.id, &layout, TIMELINE_SAMPLE)
        .await?;
    Ok(Json(TimelineView {
        endpoint_id: endpoint.id.to_string(),
        window,
        bucket_secs: window.bucket().as_secs(),
        since: layout.since,
        until: layout.until,
        buckets: layout.fill(&timeline.counts),
        marks: timeline
            .marks
            .into_iter()
            .map(|m| crate::views::MarkView {
                at: m.at,
                kind: m.kind,
                reason: m.reason,
            })
            .collect(),
        complete_since: timeline.complete_since,
        sample_cap: TIMELINE_SAMPLE,
    }))
}

/// `GET …/endpoints/{endpoint}/stats`: deliveries by state, the DLQ by reason,
/// the breaker, and per window (hour, day, week) the success rate and latency
/// percentiles of its attempts.
pub(crate) async fn stats(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
) -> ApiResult<Json<EndpointStatsView>> {
    use hookline_core::stats::summarize;
    use std::time::Duration;
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    let health = state
        .store
        .endpoints()
        .endpoint_health(&endpoint.app_id, &endpoint.id)
        .await?
        .ok_or(ApiError::NotFound("endpoint"))?;
    let mut by_state: BTreeMap<String, u64> =
        ["pending", "in_flight", "blocked", "succeeded", "dead"]
            .into_iter()
            .map(|name| (name.to_owned(), 0))
            .collect();
    let mut by_reason = BTreeMap::new();
    for (delivery_state, reason, count) in state
        .store
        .endpoints()
        .endpoint_delivery_counts(&endpoint.app_id, &endpoint.id)
        .await?
    {
        *by_state.entry(delivery_state).or_default() += count;
        if let Some(reason) = reason {
            by_reason.insert(reason, count);
        }
    }
    let now = state.clock.now();
    let mut windows = BTreeMap::new();
    for (name, span) in [
        ("hour", Duration::from_secs(3600)),
        ("day", Duration::from_secs(86_400)),
        ("week", Duration::from_secs(7 * 86_400)),
    ] {
        let sample = state
            .store
            .endpoints()
            .endpoint_attempt_sample(&endpoint.app_id, &endpoint.id, now - span, STATS_SAMPLE)
            .await?;
        let summary = summarize(&sample);
        let filtered = state
            .store
            .endpoints()
            .endpoint_filtered_since(&endpoint.id, now - span)
            .await?;
        windows.insert(
            name.to_owned(),
            StatsWindow {
                attempts: summary.attempts,
                delivered: summary.delivered,
                success_rate: summary.success_rate,
                latency_ms: Latency {
                    p50: summary.p50_ms,
                    p95: summary.p95_ms,
                    p99: summary.p99_ms,
                },
                // The window held more attempts than the sample: the figures are the latest ones'.
                sampled: summary.attempts == u64::from(STATS_SAMPLE),
                filtered,
            },
        );
    }
    Ok(Json(EndpointStatsView {
        endpoint_id: endpoint.id.to_string(),
        deliveries: by_state,
        dlq_by_reason: by_reason,
        breaker: health.breaker.state,
        consecutive_failures: health.breaker.consecutive_failures,
        last_error: health.last_error,
        last_failure_at: health.last_failure_at,
        windows,
        sample_cap: STATS_SAMPLE,
    }))
}

/// The catalog's example payload of `event_type`, for a send or a preview
/// that names no payload of its own (409 when the type has none).
async fn catalog_example(state: &AppState, event_type: &str) -> ApiResult<serde_json::Value> {
    state
        .store
        .catalog()
        .get_event_type(event_type)
        .await?
        .and_then(|t| t.example)
        .ok_or(ApiError::Conflict(
            "no payload given, and the event type catalog has no example of this type",
        ))
}

/// `POST …/endpoints/{endpoint}/test` → 202: an event of `event_type` with the
/// given payload (or the catalog's example) through the normal pipeline — stored,
/// signed, retried, listed — to this endpoint only, whatever its filter.
pub(crate) async fn test_send(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
    body: JsonBody<TestSend>,
) -> ApiResult<(StatusCode, Json<TestSendView>)> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    let TestSend {
        event_type,
        payload,
    } = body.value;
    // A payload of the caller's own is a publish: without that capability a key
    // may send only the catalog's example (it cannot forge an event).
    if payload.is_some() && !caller.can(Capability::Publish) {
        return Err(ApiError::MissingCapability(Capability::Publish));
    }
    checked_name("event_type", &event_type)?;
    let payload = match payload {
        Some(payload) => payload,
        None => catalog_example(&state, &event_type).await?,
    };
    if !endpoint.enabled {
        return Err(ApiError::Conflict(
            "the endpoint is disabled: enable it to send it a test event",
        ));
    }
    // Sent whatever the filter; the answer says whether a publish would reach it.
    let passes_filter = match &endpoint.filter {
        None => true,
        Some(source) => hookline_core::filter::Filter::parse(source)
            .map_err(|e| ApiError::Internal(format!("a stored filter: {e}").into()))?
            .matches(&payload),
    };
    let catalog = state.catalog.snapshot(&state.store).await?;
    let raw = serde_json::json!({"event_type": event_type, "payload": payload});
    let request = PublishRequest {
        event_type,
        payload,
        ordering_key: None,
    };
    let (mut item, warnings) = prepare(&state, &catalog, &endpoint.app_id, request, &raw, None)?;
    item.event.only_endpoint = Some(endpoint.id.clone());
    let published = match state.publisher.publish(item).await? {
        PublishOutcome::Created(published) => published,
        // Without an idempotency key a publish is always new.
        _ => return Err(ApiError::Internal("a test send was not created".into())),
    };
    crate::metrics::events_accepted(&state, &endpoint.app_id, 1);
    let delivery = published.deliveries.first().ok_or(ApiError::Conflict(
        "the endpoint is disabled: enable it to send it a test event",
    ))?;
    Ok((
        StatusCode::ACCEPTED,
        Json(TestSendView {
            event_id: published.event.id.to_string(),
            delivery_id: delivery.id.to_string(),
            passes_filter,
            warnings,
        }),
    ))
}

/// Events read per page, and at most, to find a filter preview's.
const PREVIEW_EVENTS: usize = 50;
const PREVIEW_SCAN: u32 = 250;

/// `POST /v1/apps/{app}/filter-preview`: the app's latest events of the
/// types (at most 50, among its latest 250), each with whether the filter
/// lets it through — before an endpoint is given the filter. Changes nothing.
pub(crate) async fn filter_preview(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    body: JsonBody<FilterPreview>,
) -> ApiResult<Json<FilterPreviewView>> {
    let app = caller.app(&state, &app).await?;
    let FilterPreview {
        filter,
        event_types,
    } = body.value;
    validate_event_types(&event_types)?;
    validate_filter(&filter)?;
    let filter = filter
        .as_deref()
        .map(hookline_core::filter::Filter::parse)
        .transpose()
        .map_err(|error| ApiError::InvalidFilter(format!("filter {error}")))?;
    let events = state.store.listings();
    let mut page = Page {
        limit: PREVIEW_EVENTS as u32,
        before: None,
    };
    let (mut data, mut scanned) = (Vec::new(), 0);
    while data.len() < PREVIEW_EVENTS && scanned < PREVIEW_SCAN {
        let batch = events
            .list_events(&app.id, &hookline_store::EventFilter::default(), &page)
            .await?;
        scanned += batch.len() as u32;
        let wanted = batch.iter().filter(|event| {
            hookline_core::event_types::subscribed(event_types.as_deref(), &event.event_type)
        });
        for event in wanted.take(PREVIEW_EVENTS - data.len()) {
            // The payload is read only when there is a filter to run over it.
            let passed = filter.as_ref().is_none_or(|f| {
                let envelope: serde_json::Value =
                    serde_json::from_slice(&event.body).unwrap_or(serde_json::Value::Null);
                f.matches(&envelope["data"])
            });
            data.push(FilterPreviewEvent {
                event_id: event.id.to_string(),
                event_type: event.event_type.clone(),
                created_at: event.created_at,
                passed,
            });
        }
        match batch.last() {
            Some(last) if batch.len() == PREVIEW_EVENTS => page.before = Some(last.id.to_string()),
            _ => break,
        }
    }
    let passed = data.iter().filter(|event| event.passed).count() as u32;
    Ok(Json(FilterPreviewView {
        data,
        passed,
        scanned,
    }))
}

/// `POST /v1/apps/{app}/transform-preview`: runs a transform on one event —
/// one of the app's, a payload, a catalog example, or the app's latest — and
/// answers what would be sent, or that it would be skipped, or how it fails.
/// A program that does not compile is 422 `invalid_transform`, as when saved.
/// Changes nothing.
pub(crate) async fn transform_preview(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    body: JsonBody<TransformPreview>,
) -> ApiResult<Json<TransformPreviewView>> {
    let app = caller.app(&state, &app).await?;
    let TransformPreview {
        transform: text,
        event_id,
        event_type,
        payload,
        endpoint_id,
    } = body.value;
    let endpoint = match endpoint_id {
        Some(id) => Some(find(&state, &caller, app.id.as_str(), id.as_str()).await?),
        None => None,
    };
    let (url, description) = endpoint
        .as_ref()
        .map_or(("https://example.com/webhook", ""), |e| {
            (e.url.as_str(), e.description.as_str())
        });
    let facts = TransformFacts {
        id: endpoint.as_ref().map_or("ep_new", |e| e.id.as_str()),
        url,
        description,
        // Only this event is tried.
        event_types: Some(&[]),
    };
    let transform = validate_transform(&state, Some(text), facts)
        .await?
        .expect("a transform was given");
    // The event: its envelope, as stored or as a publish would make it.
    let (event_id, event_type, envelope) = match (event_id, event_type) {
        (Some(id), _) => {
            let id: EventId = path_id(&id, "event")?;
            let (event, _) = state
                .store
                .events()
                .get_event(&app.id, &id)
                .await?
                .ok_or(ApiError::NotFound("event"))?;
            (Some(id.to_string()), event.event_type, event.body.to_vec())
        }
        (None, Some(event_type)) => {
            checked_name("event_type", &event_type)?;
            let payload = match payload {
                Some(payload) => payload,
                None => catalog_example(&state, &event_type).await?,
            };
            let envelope = hookline_core::model::envelope(&event_type, state.clock.now(), &payload);
            (None, event_type, envelope)
        }
        (None, None) => {
            let latest = state
                .store
                .listings()
                .list_events(
                    &app.id,
                    &hookline_store::EventFilter::default(),
                    &Page {
                        limit: 1,
                        before: None,
                    },
                )
                .await?;
            let event = latest.into_iter().next().ok_or(ApiError::Conflict(
                "the app has no event to try it on: give an event_type (and a payload)",
            ))?;
            (
                Some(event.id.to_string()),
                event.event_type,
                event.body.to_vec(),
            )
        }
    };
    let input = transform::input(
        &envelope,
        event_id.as_deref().unwrap_or("evt_example"),
        None,
        transform::EndpointFacts {
            id: facts.id,
            url: facts.url,
            description: facts.description,
        },
    );
    let kind = match hookline_core::broker::Broker::is_broker_url(url) {
        true => transform::Kind::Broker,
        false => transform::Kind::Http,
    };
    let output = match &transform {
        Transform::Preset(format) => Ok(transform::Output::Send(transform::preset(
            *format, &envelope,
        ))),
        Transform::Program(program) => {
            let raw = serde_json::value::RawValue::from_string(input.clone()).expect("JSON");
            match state.transforms.run(program, &raw).await {
                Ok(outputs) => {
                    transform::read_output(&outputs, kind, state.config.allow_private_destinations)
                }
                Err(
                    hookline_transform::Error::Program(error)
                    | hookline_transform::Error::TooSlow(error),
                ) => Err(error.to_string()),
                Err(hookline_transform::Error::Unavailable(message)) => {
                    return Err(ApiError::TransformsUnavailable(message))
                }
            }
        }
    };
    let mut view = TransformPreviewView {
        event_id,
        event_type,
        input: serde_json::from_str(&input).expect("the input is JSON"),
        outcome: TransformOutcome::Skip,
        body: None,
        headers: BTreeMap::new(),
        url: None,
        error: None,
    };
    match output {
        Ok(transform::Output::Skip) => {}
        Ok(transform::Output::Send(request)) => {
            view.outcome = TransformOutcome::Send;
            view.body = Some(String::from_utf8_lossy(&request.body).into_owned());
            view.headers = request.headers.into_iter().collect();
            view.url = request.url;
        }
        Err(said) => {
            view.outcome = TransformOutcome::Error;
            view.error = Some(said);
        }
    }
    Ok(Json(view))
}
