//! `/v1/apps/{app}/notifications`: the channels an app's customers are told
//! through when its endpoints break (`hookline_core::notify`).
//!
//! A channel is an endpoint of the internal app owned by the customer's app,
//! subscribed to the notices it asked for and filtered to its app's: made,
//! listed and removed here only, by whoever may manage the app's endpoints.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_core::ids::EndpointId;
use hookline_core::notify::{self, ChannelKind as Kind};
use hookline_core::operational;
use hookline_core::signing::EndpointSecret;
use hookline_core::transform::Transform;
use hookline_store::{Endpoint, NewEndpoint};

use super::endpoints::validate_http_url;
use super::path_id;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::AppState;
pub(crate) use hookline_types::{
    ChannelKind, CreateNotificationChannel, NotificationChannelView, NotificationChannelsView,
    NotificationEvent,
};

pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
) -> ApiResult<Json<NotificationChannelsView>> {
    let app = caller.app(&state, &app).await?;
    let owned = state
        .store
        .endpoints()
        .owned_endpoints(&app.id, notify::MAX_CHANNELS as u32)
        .await?;
    Ok(Json(NotificationChannelsView {
        data: owned.iter().filter_map(view).collect(),
    }))
}

pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    body: JsonBody<CreateNotificationChannel>,
) -> ApiResult<(StatusCode, Json<NotificationChannelView>)> {
    let new = body.value;
    let app = caller.app(&state, &app).await?;
    if operational::is_internal(&app.id) {
        return Err(ApiError::Validation(
            "the operational app's own deliveries make no notices: give it endpoints instead"
                .into(),
        ));
    }
    let kind = new.kind.core();
    let url = match kind {
        Kind::Email if !state.config.email => return Err(ApiError::Validation(
            "e-mail notifications are not set up on this deployment (its operator sets smtp_url)"
                .into(),
        )),
        Kind::Email => format!(
            "mailto:{}",
            notify::check_address(&new.to)
                .map_err(|message| ApiError::Validation(format!("to: {message}")))?
        ),
        Kind::Chat(_) => validate_http_url(&state, new.to.trim())?,
    };
    let mut events = new
        .events
        .unwrap_or_else(|| NotificationEvent::ALL.to_vec());
    events.sort();
    events.dedup();
    if events.is_empty() {
        return Err(ApiError::Validation(
            "events: name at least one, or leave it out for all".into(),
        ));
    }
    let endpoints = state.store.endpoints();
    let owned = endpoints
        .owned_endpoints(&app.id, notify::MAX_CHANNELS as u32)
        .await?;
    if owned.len() >= notify::MAX_CHANNELS {
        return Err(ApiError::Conflict(
            "the app has its 20 notification channels already (the most it may have): remove one first",
        ));
    }
    let channel = endpoints
        .create_endpoint(
            &operational::app_id(),
            NewEndpoint {
                url,
                description: format!("{} notifications of {}", kind.as_str(), app.id),
                event_types: Some(
                    events
                        .iter()
                        .map(|e| e.kind().event_type().to_owned())
                        .collect(),
                ),
                filter: Some(notify::scope_filter(&app.id)),
                enabled: true,
                paused: false,
                secret: EndpointSecret::generate(),
                headers: Vec::new(),
                auth: None,
                retry: Default::default(),
                rate_limit_per_sec: None,
                max_in_flight: None,
                ordering_on_dead: Default::default(),
                owner_app: Some(app.id.clone()),
                transform: match kind {
                    Kind::Chat(format) => Some(Transform::Preset(format)),
                    Kind::Email => None,
                },
                // Hookline's own notices, told in words: no envelope to number.
                seq_in_body: false,
                batch: None,
            },
            state.clock.now(),
        )
        .await?;
    let view = view(&channel).expect("a channel just made is a channel");
    Ok((StatusCode::CREATED, Json(view)))
}

pub(crate) async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, channel)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let app = caller.app(&state, &app).await?;
    let id: EndpointId = path_id(&channel, "notification channel")?;
    let internal = operational::app_id();
    let endpoints = state.store.endpoints();
    let found = endpoints.get_endpoint(&internal, &id).await?;
    if found.and_then(|e| e.owner_app) != Some(app.id) {
        return Err(ApiError::NotFound("notification channel"));
    }
    endpoints
        .delete_endpoint(&internal, &id, state.clock.now())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Removes every channel of `app` (which is being deleted).
pub(super) async fn remove_all(state: &AppState, app: &hookline_core::ids::AppId) -> ApiResult<()> {
    let endpoints = state.store.endpoints();
    let internal = operational::app_id();
    for channel in endpoints
        .owned_endpoints(app, notify::MAX_CHANNELS as u32 * 2)
        .await?
    {
        endpoints
            .delete_endpoint(&internal, &channel.id, state.clock.now())
            .await?;
    }
    Ok(())
}

/// A channel as its app sees it; `None` for an endpoint that is not one.
fn view(endpoint: &Endpoint) -> Option<NotificationChannelView> {
    endpoint.owner_app.as_ref()?;
    let (kind, to) = match (notify::mail_address(&endpoint.url), &endpoint.transform) {
        (Some(address), _) => (Kind::Email, address.to_owned()),
        (None, Some(Transform::Preset(format))) => {
            (Kind::Chat(*format), crate::views::masked_url(&endpoint.url))
        }
        (None, _) => return None,
    };
    Some(NotificationChannelView {
        id: endpoint.id.to_string(),
        kind: ChannelKind::of(kind),
        to,
        events: endpoint
            .event_types
            .iter()
            .flatten()
            .filter_map(|t| operational::Kind::parse(t).and_then(NotificationEvent::of))
            .collect(),
        enabled: endpoint.enabled,
        disabled_reason: endpoint.disabled_reason.clone(),
        created_at: endpoint.created_at,
    })
}
