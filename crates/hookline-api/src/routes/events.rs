//! `/v1/apps/{app}/events`: the producer API.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hookline_core::fingerprint::request_fingerprint;
use hookline_core::ids::EventId;
use hookline_core::model::envelope;
use hookline_store::{IdempotencyKey, NewEvent, PublishOutcome, Published, StoredResponse};
use serde::Deserialize;

use super::path_id;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::views::{DeliveryView, EventView, PublishedView};
use crate::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PublishRequest {
    event_type: String,
    payload: serde_json::Value,
    ordering_key: Option<String>,
}

const MAX_NAME: usize = 256;

/// `POST /v1/apps/{app}/events`: store the event and its deliveries, then answer 202.
///
/// With `Idempotency-Key`, the same key and request give the same answer (with
/// `Idempotent-Replayed: true`) and never a second event; the same key with a
/// different request is 422 `idempotency_key_reused`.
pub(crate) async fn publish(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    headers: HeaderMap,
    body: JsonBody<PublishRequest>,
) -> ApiResult<Response> {
    let app = caller.app(&state, &app).await?;
    let request = body.value;
    if request.event_type.is_empty() || request.event_type.len() > MAX_NAME {
        return Err(ApiError::Validation(format!(
            "event_type must be 1 to {MAX_NAME} characters"
        )));
    }
    if request
        .ordering_key
        .as_ref()
        .is_some_and(|k| k.is_empty() || k.len() > MAX_NAME)
    {
        return Err(ApiError::Validation(format!(
            "ordering_key must be 1 to {MAX_NAME} characters"
        )));
    }
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(value) => {
            let key = value
                .to_str()
                .ok()
                .filter(|k| !k.is_empty() && k.len() <= 255)
                .ok_or_else(|| {
                    ApiError::Validation(
                        "Idempotency-Key must be 1 to 255 visible ASCII characters".into(),
                    )
                })?;
            // The canonical path (by app id) so a request by uid and one by id match.
            let path = format!("/v1/apps/{}/events", app.id);
            Some(IdempotencyKey {
                key: key.to_owned(),
                fingerprint: request_fingerprint("POST", &path, &body.raw),
            })
        }
    };

    let now = state.clock.now();
    let body_bytes = envelope(&request.event_type, now, &request.payload);
    // The envelope adds a fixed ~60 bytes plus the type; what counts is the payload.
    let payload_len = body_bytes.len() - request.event_type.len() - 60;
    if payload_len > state.config.max_payload_bytes {
        return Err(ApiError::PayloadTooLarge {
            limit: state.config.max_payload_bytes,
        });
    }
    let new = NewEvent {
        id: EventId::generate(),
        event_type: request.event_type,
        ordering_key: request.ordering_key,
        body: body_bytes,
    };
    let outcome = state
        .store
        .publish(&app.id, new, key.as_ref(), now, &render_published)
        .await?;
    match outcome {
        PublishOutcome::Created(stored) => {
            metrics::counter!("hookline_events_accepted_total").increment(1);
            Ok(stored_response(stored, false))
        }
        PublishOutcome::Replayed(stored) => Ok(stored_response(stored, true)),
        PublishOutcome::KeyReused => Err(ApiError::IdempotencyKeyReused),
    }
}

fn render_published(published: &Published) -> StoredResponse {
    let view = PublishedView {
        id: published.event.id.as_str(),
        event_type: &published.event.event_type,
        ordering_key: published.event.ordering_key.as_deref(),
        sequence: published.event.sequence,
        created_at: published.event.created_at,
        deliveries: published
            .deliveries
            .iter()
            .map(DeliveryView::from)
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
    Path((app, event)): Path<(String, String)>,
) -> ApiResult<Json<EventView>> {
    let app = caller.app(&state, &app).await?;
    let id: EventId = path_id(&event, "event")?;
    let (event, deliveries) = state
        .store
        .get_event(&app.id, &id)
        .await?
        .ok_or(ApiError::NotFound("event"))?;
    Ok(Json(EventView::new(&event, &deliveries)))
}
