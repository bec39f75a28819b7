//! `/v1/keys`: admin and app-scoped API keys (admin only). A key is shown once,
//! when it is made; only its SHA-256 is stored.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_core::ids::ApiKeyId;
use hookline_core::signing::api_key;
use hookline_store::{ApiKey, KeyScope};
use serde::{Deserialize, Serialize};

use super::{checked_name, page_of, path_id, PageQuery};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, QueryParams};
use crate::views::ListView;
use crate::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateKey {
    name: String,
    /// Scope the key to this app (its id or uid); absent: an admin key.
    app: Option<String>,
}

#[derive(Serialize)]
pub(crate) struct KeyView {
    id: String,
    name: String,
    /// `null` for an admin key.
    app_id: Option<String>,
    created_at: hookline_core::time::Timestamp,
    /// Only in the answer that made it.
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<String>,
}

impl KeyView {
    fn new(key: &ApiKey, secret: Option<String>) -> Self {
        Self {
            id: key.id.to_string(),
            name: key.name.clone(),
            app_id: match &key.scope {
                KeyScope::Admin => None,
                KeyScope::App(app) => Some(app.to_string()),
            },
            created_at: key.created_at,
            key: secret,
        }
    }
}

/// `POST /v1/keys` → 201 with the key, shown this once.
pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: JsonBody<CreateKey>,
) -> ApiResult<(StatusCode, Json<KeyView>)> {
    caller.require_admin()?;
    let CreateKey { name, app } = body.value;
    checked_name("name", &name)?;
    let scope = match app {
        None => KeyScope::Admin,
        Some(app) => KeyScope::App(
            state
                .store
                .find_app(&app)
                .await?
                .ok_or_else(|| ApiError::Validation(format!("no app {app:?}")))?
                .id,
        ),
    };
    let secret = api_key::generate();
    let key = state
        .store
        .create_api_key(&api_key::hash(&secret), &scope, &name, state.clock.now())
        .await?;
    Ok((StatusCode::CREATED, Json(KeyView::new(&key, Some(secret)))))
}

/// `GET /v1/keys`: every key, newest first, without secrets.
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    QueryParams(query): QueryParams<PageQuery>,
) -> ApiResult<Json<ListView<KeyView>>> {
    caller.require_admin()?;
    let page = query.page::<ApiKeyId>()?;
    let keys = state.store.list_api_keys(&page).await?;
    Ok(Json(page_of(
        &keys,
        &page,
        |k| k.id.to_string(),
        |k| KeyView::new(k, None),
    )))
}

/// `DELETE /v1/keys/{key}` → 204: the key stops working at once on this process
/// and within a minute everywhere (each process caches keys it saw for 60 s).
pub(crate) async fn revoke(
    State(state): State<AppState>,
    caller: Caller,
    Path(key): Path<String>,
) -> ApiResult<StatusCode> {
    caller.require_admin()?;
    let id: ApiKeyId = path_id(&key, "key")?;
    let hash = state
        .store
        .revoke_api_key(&id)
        .await?
        .ok_or(ApiError::NotFound("key"))?;
    state.keys.remove(&hash);
    Ok(StatusCode::NO_CONTENT)
}
