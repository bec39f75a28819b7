//! `/v1/apps`: a producer's tenants (admin keys only, except reading one's own app).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_store::{AppPatch, NewApp};

use super::{checked_name, page_of, PageQuery};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::extract::QueryParams;
use crate::views::{AppView, ListView};
use crate::AppState;
pub(crate) use hookline_types::{CreateApp, UpdateApp};

fn validate_name(name: &str) -> ApiResult<()> {
    if name.trim().is_empty() {
        return Err(ApiError::Validation("name must not be blank".into()));
    }
    checked_name("name", name)
}

/// A uid must not look like an app id, or `{app}` lookups would be ambiguous.
fn validate_uid(uid: &str) -> ApiResult<()> {
    let ok = !uid.is_empty()
        && uid.len() <= 256
        && !uid.starts_with(hookline_core::ids::AppId::PREFIX)
        // `.` and `..` are collapsed by URL parsers: `/v1/apps/../keys` would name another path.
        && !uid.starts_with('.')
        && uid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ApiError::Validation(
            "uid must be 1 to 256 of [A-Za-z0-9-_.], not starting with `.` or `app_`".into(),
        ))
    }
}

pub(crate) async fn create(
    State(state): State<AppState>,
    body: JsonBody<CreateApp>,
) -> ApiResult<(StatusCode, Json<AppView>)> {
    let CreateApp { name, uid, portal } = body.value;
    validate_name(&name)?;
    if let Some(uid) = &uid {
        validate_uid(uid)?;
    }
    let portal = crate::portal::validated(portal.unwrap_or_default())?;
    let app = state
        .store
        .apps()
        .create_app(NewApp { uid, name, portal }, state.clock.now())
        .await?;
    Ok((StatusCode::CREATED, Json(crate::views::app(&app))))
}

pub(crate) async fn list_apps(state: &AppState, query: PageQuery) -> ApiResult<ListView<AppView>> {
    let page = super::id_page::<hookline_core::ids::AppId>(query)?;
    let apps = state.store.apps().list_apps(&page).await?;
    Ok(page_of(
        &apps,
        &page,
        |a| a.id.to_string(),
        crate::views::app,
    ))
}

pub(crate) async fn list(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<PageQuery>,
) -> ApiResult<Json<ListView<AppView>>> {
    Ok(Json(list_apps(&state, query).await?))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
) -> ApiResult<Json<AppView>> {
    let app = caller.app(&state, &app).await?;
    Ok(Json(crate::views::app(&app)))
}

pub(crate) async fn update(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    body: JsonBody<UpdateApp>,
) -> ApiResult<Json<AppView>> {
    let app = caller.app(&state, &app).await?;
    let UpdateApp { name, uid, portal } = body.value;
    if let Some(name) = &name {
        validate_name(name)?;
    }
    if let Some(Some(uid)) = &uid {
        validate_uid(uid)?;
    }
    let portal = portal.map(crate::portal::validated).transpose()?;
    let updated = state
        .store
        .apps()
        .update_app(&app.id, AppPatch { name, uid, portal }, state.clock.now())
        .await?
        .ok_or(ApiError::NotFound("app"))?;
    Ok(Json(crate::views::app(&updated)))
}

pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
) -> ApiResult<StatusCode> {
    let app = caller.app(&state, &app).await?;
    if hookline_core::operational::is_internal(&app.id) {
        return Err(ApiError::Conflict(
            "this is Hookline's internal app (operational webhooks): it cannot be deleted",
        ));
    }
    // Its customers' notification channels go first (endpoints of the internal app).
    super::notifications::remove_all(&state, &app.id).await?;
    if state.store.apps().delete_app(&app.id).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("app"))
    }
}
