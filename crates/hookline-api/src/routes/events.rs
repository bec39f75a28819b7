//! `/v1/apps/{app}/events`: the producer API.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hookline_core::fingerprint::request_fingerprint;
use hookline_core::ids::AppId;
use hookline_core::ids::EventId;
use hookline_core::model::envelope;
use hookline_store::{
    EventFilter, IdempotencyKey, NewEvent, PublishItem, PublishOutcome, Published, StoredResponse,
};

use super::{checked_name, is_id, name_filter, page, page_of, path_id, time_range};
use crate::auth::Caller;
use crate::catalog::{Snapshot, Warning};
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, Lang, QueryParams};
use crate::views::{EventView, ListView, PublishedView};
use crate::AppState;
pub(crate) use hookline_types::{BatchRequest, EventsQuery, PublishRequest};

/// The most events in one batch request.
pub(crate) const MAX_BATCH: usize = 1000;

/// Validates one event and builds what the store writes. `raw` is the request
/// (or batch item) as parsed JSON, without its idempotency key: the fingerprint
/// is taken over it, on the canonical single-event path, so a key means the same
/// whether it came with a single publish or inside a batch.
///
/// The catalog's warnings come back beside it (or, where the deployment refuses
/// such publishes, its error).
pub(crate) fn prepare(
    state: &AppState,
    catalog: &Snapshot,
    app: &AppId,
    request: PublishRequest,
    raw: &serde_json::Value,
    key: Option<&str>,
) -> ApiResult<(PublishItem, Vec<Warning>)> {
    checked_name("event_type", &request.event_type)?;
    if request
        .event_type
        .starts_with(hookline_core::operational::TYPE_PREFIX)
        && !hookline_core::operational::is_internal(app)
    {
        return Err(ApiError::Validation(
            "event types starting with `hookline.` are Hookline's own (operational webhooks)"
                .into(),
        ));
    }
    if let Some(key) = &request.ordering_key {
        checked_name("ordering_key", key)?;
    }
    let key = match key {
        None => None,
        Some(key)
            if (1..=255).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            Some(IdempotencyKey {
                key: key.to_owned(),
                fingerprint: request_fingerprint("POST", &format!("/v1/apps/{app}/events"), raw),
            })
        }
        Some(_) => {
            return Err(ApiError::Validation(
                "an idempotency key must be 1 to 255 visible ASCII characters".into(),
            ))
        }
    };
    let warnings = catalog.judge(
        state.config.refuse_unchecked_events,
        &request.event_type,
        &request.payload,
    )?;
    let now = state.clock.now();
    let body = envelope(&request.event_type, now, &request.payload);
    // What counts against the limit is the payload, not the envelope around it.
    let payload_len = serde_json::to_vec(&request.payload).map_or(usize::MAX, |p| p.len());
    if payload_len > state.config.max_payload_bytes {
        return Err(ApiError::PayloadTooLarge {
            limit: state.config.max_payload_bytes,
        });
    }
    let item = PublishItem {
        app: app.clone(),
        event: NewEvent {
            id: EventId::generate(),
            event_type: request.event_type,
            ordering_key: request.ordering_key,
            body,
            only_endpoint: None,
        },
        key,
        now,
    };
    Ok((item, warnings))
}

/// `POST /v1/apps/{app}/events`: store the event and its deliveries, then answer 202.
///
/// With `Idempotency-Key`, the same key and request give the same answer (with
/// `Idempotent-Replayed: true`) and never a second event; the same key with a
/// different request is 422 `idempotency_key_reused`.
#[tracing::instrument(level = "debug", name = "publish_request", skip_all)]
pub(crate) async fn publish(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    headers: HeaderMap,
    body: JsonBody<PublishRequest>,
) -> ApiResult<Response> {
    let app = caller.publishing_app(&state, &app).await?;
    let key =
        match headers.get("idempotency-key") {
            None => None,
            Some(value) => Some(value.to_str().map_err(|_| {
                ApiError::Validation("Idempotency-Key must be visible ASCII".into())
            })?),
        };
    let catalog = state.catalog.snapshot(&state.store).await?;
    let (item, warnings) = prepare(&state, &catalog, &app.id, body.value, &body.raw, key)?;
    match state.publisher.publish(item).await? {
        PublishOutcome::Created(published) => {
            crate::metrics::events_accepted(&state, &app.id, 1);
            Ok(stored_response(
                render_published(&published, &warnings),
                false,
            ))
        }
        PublishOutcome::Replayed(published) => Ok(stored_response(
            render_published(&published, &warnings),
            true,
        )),
        PublishOutcome::ReplayedAnswer(stored) => Ok(stored_response(stored, true)),
        PublishOutcome::KeyReused => Err(ApiError::IdempotencyKeyReused),
    }
}

/// `POST /v1/apps/{app}/events/batch`: up to 1,000 events in one transaction.
///
/// Each item is `{"event_type", "payload", "ordering_key"?, "idempotency_key"?}`.
/// Validation is all or nothing (422 naming the first bad item, nothing
/// written). Idempotency is per event: the answer lists, in order, each event's
/// single-publish answer with `"status": 202` and `"idempotent_replayed"`, or
/// `"status": 422, "code": "idempotency_key_reused"` for an item whose key was
/// used with a different event (the others are still written).
pub(crate) async fn publish_batch(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    body: JsonBody<BatchRequest>,
) -> ApiResult<(StatusCode, Json<serde_json::Value>)> {
    let app = caller.publishing_app(&state, &app).await?;
    let events = body.value.events;
    if events.is_empty() || events.len() > MAX_BATCH {
        return Err(ApiError::Validation(format!(
            "events must hold 1 to {MAX_BATCH} events"
        )));
    }
    let catalog = state.catalog.snapshot(&state.store).await?;
    let mut items = Vec::with_capacity(events.len());
    let mut warnings = Vec::with_capacity(events.len());
    for (index, mut raw) in events.into_iter().enumerate() {
        let key = match raw.as_object_mut().map(|o| o.remove("idempotency_key")) {
            Some(Some(serde_json::Value::String(key))) => Some(key),
            Some(None) | Some(Some(serde_json::Value::Null)) => None,
            _ => {
                return Err(ApiError::Validation(format!(
                    "events[{index}]: an event is an object; idempotency_key is a string"
                )))
            }
        };
        let request: PublishRequest = serde_json::from_value(raw.clone())
            .map_err(|e| ApiError::Validation(format!("events[{index}]: {e}")))?;
        let (item, item_warnings) =
            prepare(&state, &catalog, &app.id, request, &raw, key.as_deref()).map_err(
                |e| match e {
                    ApiError::Validation(detail) => {
                        ApiError::Validation(format!("events[{index}]: {detail}"))
                    }
                    ApiError::UnknownEventType(detail) => {
                        ApiError::UnknownEventType(format!("events[{index}]: {detail}"))
                    }
                    ApiError::SchemaViolation(detail) => {
                        ApiError::SchemaViolation(format!("events[{index}]: {detail}"))
                    }
                    other => other,
                },
            )?;
        items.push(item);
        warnings.push(item_warnings);
    }
    let outcomes = state.publisher.publish_group(&items).await?;
    let mut created = 0u64;
    let data: Vec<serde_json::Value> = outcomes
        .into_iter()
        .zip(&warnings)
        .map(|(outcome, warnings)| match outcome {
            PublishOutcome::Created(published) => {
                created += 1;
                batch_item(&render_published(&published, warnings), false)
            }
            PublishOutcome::Replayed(published) => {
                batch_item(&render_published(&published, warnings), true)
            }
            PublishOutcome::ReplayedAnswer(stored) => batch_item(&stored, true),
            PublishOutcome::KeyReused => serde_json::json!({
                "status": 422,
                "code": "idempotency_key_reused",
                "detail": ApiError::IdempotencyKeyReused.to_string(),
            }),
        })
        .collect();
    crate::metrics::events_accepted(&state, &app.id, created);
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "data": data })),
    ))
}

/// A batch answer's entry: the single-publish answer, with its status and replay flag.
fn batch_item(stored: &StoredResponse, replayed: bool) -> serde_json::Value {
    let mut item: serde_json::Value =
        serde_json::from_slice(&stored.body).unwrap_or(serde_json::Value::Null);
    if let Some(object) = item.as_object_mut() {
        object.insert("status".into(), stored.status.into());
        object.insert("idempotent_replayed".into(), replayed.into());
    }
    item
}

/// The answer to a publish (and, the same again, to each replay of its key),
/// with what the event type catalog found wrong, if anything.
pub(crate) fn render_published(published: &Published, warnings: &[Warning]) -> StoredResponse {
    let view = PublishedView {
        warnings: warnings.to_vec(),
        id: published.event.id.to_string(),
        event_type: published.event.event_type.clone(),
        ordering_key: published.event.ordering_key.clone(),
        sequence: published.event.sequence,
        created_at: published.event.created_at,
        deliveries: published
            .deliveries
            .iter()
            .map(|d| crate::views::delivery(d, &published.event.event_type, None))
            .collect(),
    };
    StoredResponse {
        status: StatusCode::ACCEPTED.as_u16(),
        body: serde_json::to_vec(&view).expect("views serialize"),
    }
}

fn stored_response(stored: StoredResponse, replayed: bool) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::ACCEPTED);
    let mut response =
        (status, [("content-type", "application/json")], stored.body).into_response();
    if replayed {
        response
            .headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

/// `GET /v1/apps/{app}/events/{event}`: the event, its payload and its deliveries.
pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path((app, event)): Path<(String, String)>,
) -> ApiResult<Json<EventView>> {
    let app = caller.app(&state, &app).await?;
    let id: EventId = path_id(&event, "event")?;
    let (event, deliveries) = state
        .store
        .events()
        .get_event(&app.id, &id)
        .await?
        .ok_or(ApiError::NotFound("event"))?;
    let deliveries = super::deliveries::views_of(&state, &app.id, &deliveries, language).await?;
    Ok(Json(crate::views::event(&event, Some(deliveries))))
}

/// `GET /v1/apps/{app}/events`: the app's events with their payloads, newest
/// first, filtered (their deliveries are in `GET …/events/{event}` and
/// `GET …/deliveries?event_id=`).
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    QueryParams(query): QueryParams<EventsQuery>,
) -> ApiResult<Json<ListView<EventView>>> {
    let app = caller.app(&state, &app).await?;
    let filter = EventFilter {
        event_type: name_filter("event_type", query.event_type)?,
        ordering_key: name_filter("ordering_key", query.ordering_key)?,
        created: time_range(query.since, query.until)?,
    };
    let page = page(query.limit, query.before, is_id::<EventId>)?;
    let events = state
        .store
        .listings()
        .list_events(&app.id, &filter, &page)
        .await?;
    Ok(Json(page_of(
        &events,
        &page,
        |e| e.id.to_string(),
        |e| crate::views::event(e, None),
    )))
}
