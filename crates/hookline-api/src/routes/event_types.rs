//! `/v1/event-types`: the deployment's event type catalog. Admins manage it;
//! every key may read it (a customer portal lists what an endpoint can subscribe to).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_store::{EventType, EventTypePatch};

use super::checked_name;
use crate::catalog::check_definition;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::views::ListView;
use crate::AppState;
pub(crate) use hookline_types::{CreateEventType, EventTypeView, UpdateEventType};

fn validate_description(description: &str) -> ApiResult<()> {
    if description.len() > 1024 || description.contains('\0') {
        return Err(ApiError::Validation(
            "description must be at most 1024 characters, without NUL".into(),
        ));
    }
    Ok(())
}

/// `POST /v1/event-types` → 201.
pub(crate) async fn create(
    State(state): State<AppState>,
    body: JsonBody<CreateEventType>,
) -> ApiResult<(StatusCode, Json<EventTypeView>)> {
    let new = body.value;
    checked_name("name", &new.name)?;
    if new
        .name
        .starts_with(hookline_core::operational::TYPE_PREFIX)
    {
        return Err(ApiError::Conflict(
            "types starting with `hookline.` are Hookline's own (operational webhooks)",
        ));
    }
    if new.name.contains('*') {
        return Err(ApiError::Validation(
            "name is a type, not a pattern: it cannot hold `*`".into(),
        ));
    }
    validate_description(&new.description)?;
    check_definition(new.schema.as_ref(), new.example.as_ref())?;
    let now = state.clock.now();
    let event_type = EventType {
        name: new.name,
        description: new.description,
        schema: new.schema,
        example: new.example,
        deprecated: new.deprecated,
        created_at: now,
        updated_at: now,
    };
    state.store.catalog().create_event_type(&event_type).await?;
    state.catalog.invalidate();
    Ok((
        StatusCode::CREATED,
        Json(crate::views::event_type(&event_type)),
    ))
}

/// `GET /v1/event-types`: the whole catalog, by name (it holds at most 1,000).
pub(crate) async fn list(
    State(state): State<AppState>,
) -> ApiResult<Json<ListView<EventTypeView>>> {
    let types = state.store.catalog().list_event_types().await?;
    Ok(Json(ListView {
        data: types.iter().map(crate::views::event_type).collect(),
        next_cursor: None,
    }))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<Json<EventTypeView>> {
    let event_type = state
        .store
        .catalog()
        .get_event_type(&name)
        .await?
        .ok_or(ApiError::NotFound("event type"))?;
    Ok(Json(crate::views::event_type(&event_type)))
}

/// `PATCH /v1/event-types/{name}`: `schema: null` / `example: null` remove them.
pub(crate) async fn update(
    State(state): State<AppState>,
    Path(name): Path<String>,
    body: JsonBody<UpdateEventType>,
) -> ApiResult<Json<EventTypeView>> {
    let patch = body.value;
    if let Some(description) = &patch.description {
        validate_description(description)?;
    }
    let current = state
        .store
        .catalog()
        .get_event_type(&name)
        .await?
        .ok_or(ApiError::NotFound("event type"))?;
    let schema = patch.schema.clone().unwrap_or(current.schema);
    let example = patch.example.clone().unwrap_or(current.example);
    check_definition(schema.as_ref(), example.as_ref())?;
    let updated = state
        .store
        .catalog()
        .update_event_type(
            &name,
            EventTypePatch {
                description: patch.description,
                schema: patch.schema,
                example: patch.example,
                deprecated: patch.deprecated,
            },
            state.clock.now(),
        )
        .await?
        .ok_or(ApiError::NotFound("event type"))?;
    state.catalog.invalidate();
    Ok(Json(crate::views::event_type(&updated)))
}

/// `DELETE /v1/event-types/{name}` → 204; published events keep their type.
pub(crate) async fn delete(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    if name.starts_with(hookline_core::operational::TYPE_PREFIX) {
        return Err(ApiError::Conflict(
            "types starting with `hookline.` are Hookline's own (operational webhooks)",
        ));
    }
    if !state.store.catalog().delete_event_type(&name).await? {
        return Err(ApiError::NotFound("event type"));
    }
    state.catalog.invalidate();
    Ok(StatusCode::NO_CONTENT)
}
