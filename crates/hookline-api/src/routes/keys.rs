//! `/v1/keys`: admin and app-scoped API keys (admin only). A key is shown once,
//! when it is made; only its SHA-256 is stored.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_core::access::{Capabilities, Capability};
use hookline_core::ids::ApiKeyId;
use hookline_core::signing::api_key;
use hookline_core::time::Timestamp;
use hookline_store::KeyScope;

use super::{checked_name, page_of, path_id, PageQuery};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, QueryParams};
use crate::views::ListView;
use crate::AppState;
pub(crate) use hookline_types::{CreateKey, KeyQuery, KeyView, RevokedView};

/// `POST /v1/keys`'s body as the document states it: an admin key (neither
/// `app` nor `capabilities`) or an app key (both, at least one capability).
pub(crate) fn create_key_schema(
    schemas: &mut crate::openapi::Schemas,
) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    let string = crate::openapi::string;
    let name = crate::openapi::name;
    let expires_at = || {
        ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
                Type::String,
                Type::Null,
            ]))
            .pattern(Some(crate::openapi::FUTURE_PATTERN))
            .description(Some(
                "when the key stops working (RFC 3339 UTC, in the future); absent: never",
            ))
    };
    let admin = ObjectBuilder::new()
        .title(Some("admin key"))
        .property("name", name())
        .property("expires_at", expires_at())
        .required("name")
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
        ));
    let capability = crate::openapi::schema::<Capability>(schemas);
    let app = ObjectBuilder::new()
        .title(Some("app key"))
        .property("name", name())
        .property(
            "app",
            string()
                .min_length(Some(1))
                .description(Some("the app's id (app_…) or uid")),
        )
        .property(
            "capabilities",
            ArrayBuilder::new().items(capability).min_items(Some(1)),
        )
        .property("expires_at", expires_at())
        .required("name")
        .required("app")
        .required("capabilities")
        .additional_properties(Some(
            utoipa::openapi::schema::AdditionalProperties::FreeForm(false),
        ));
    OneOfBuilder::new().item(admin).item(app).into()
}

/// `POST /v1/keys` → 201 with the key, shown this once.
pub(crate) async fn create(
    State(state): State<AppState>,
    body: JsonBody<CreateKey>,
) -> ApiResult<(StatusCode, Json<KeyView>)> {
    let CreateKey {
        name,
        app,
        capabilities,
        expires_at,
    } = body.value;
    checked_name("name", &name)?;
    let now = state.clock.now();
    let expires_at = expires_at
        .map(|text| match Timestamp::parse_rfc3339(&text) {
            Some(at) if at > now => Ok(at),
            Some(_) => Err(ApiError::Validation(format!(
                "expires_at {text:?} is not in the future"
            ))),
            None => Err(ApiError::Validation(format!(
                "expires_at must be an RFC 3339 UTC time such as 2026-12-31T00:00:00Z, not {text:?}"
            ))),
        })
        .transpose()?;
    let scope =
        match (app, capabilities) {
            (None, None) => KeyScope::Admin,
            (None, Some(_)) => {
                return Err(ApiError::Validation(
                    "capabilities apply to app keys only: an admin key may do everything".into(),
                ))
            }
            (Some(_), None) => return Err(ApiError::Validation(
                "an app key needs capabilities: any of read, publish, endpoints, secrets, replay"
                    .into(),
            )),
            (Some(app), Some(capabilities)) => {
                let capabilities: Capabilities = capabilities.into_iter().collect();
                if capabilities.is_empty() {
                    return Err(ApiError::Validation(
                        "an app key needs at least one capability".into(),
                    ));
                }
                KeyScope::App {
                    app: state
                        .store
                        .apps()
                        .find_app(&app)
                        .await?
                        .ok_or(ApiError::NotFound("app"))?
                        .id,
                    capabilities,
                }
            }
        };
    let secret = api_key::generate();
    let key = state
        .store
        .apps()
        .create_api_key(&api_key::hash(&secret), &scope, &name, expires_at, now)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(crate::views::key(&key, Some(secret))),
    ))
}

/// `GET /v1/keys[?app=]`: keys newest first, without secrets.
pub(crate) async fn list(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<KeyQuery>,
) -> ApiResult<Json<ListView<KeyView>>> {
    let page = super::id_page::<ApiKeyId>(PageQuery {
        limit: query.limit,
        before: query.before,
    })?;
    let app = match query.app {
        None => None,
        Some(app) => Some(
            state
                .store
                .apps()
                .find_app(&app)
                .await?
                .ok_or(ApiError::NotFound("app"))?
                .id,
        ),
    };
    let keys = state
        .store
        .apps()
        .list_api_keys(app.as_ref(), &page)
        .await?;
    Ok(Json(page_of(
        &keys,
        &page,
        |k| k.id.to_string(),
        |k| crate::views::key(k, None),
    )))
}

/// `DELETE /v1/keys/{key}` → 204: the key stops working at once on this process
/// and within a minute everywhere (each process caches keys it saw for 60 s).
pub(crate) async fn revoke(
    State(state): State<AppState>,
    Path(key): Path<String>,
) -> ApiResult<StatusCode> {
    let id: ApiKeyId = path_id(&key, "key")?;
    let hash = state
        .store
        .apps()
        .revoke_api_key(&id)
        .await?
        .ok_or(ApiError::NotFound("key"))?;
    state.keys.remove(&hash);
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /v1/apps/{app}/keys` → `{"revoked": n}`: every key of the app, at once
/// (the customer portal's tokens after a breach, say); admin keys are untouched.
pub(crate) async fn revoke_app(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
) -> ApiResult<Json<RevokedView>> {
    let app = caller.app(&state, &app).await?;
    let hashes = state.store.apps().revoke_app_keys(&app.id).await?;
    for hash in &hashes {
        state.keys.remove(hash);
    }
    Ok(Json(RevokedView {
        revoked: hashes.len() as u64,
    }))
}
