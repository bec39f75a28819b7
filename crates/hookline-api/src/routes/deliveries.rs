//! Deliveries, their attempts, the DLQ and replay: the dashboard's core.

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_core::ids::DeliveryId;
use hookline_store::{ReplayOutcome, Store};
use serde::Serialize;

use super::{page_of, path_id, PageQuery};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::views::{AttemptView, DeliveryView, ListView};
use crate::AppState;

pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, delivery)): Path<(String, String)>,
) -> ApiResult<Json<DeliveryView>> {
    let app = caller.app(&state, &app).await?;
    let id: DeliveryId = path_id(&delivery, "delivery")?;
    let delivery = state
        .store
        .get_delivery(&app.id, &id)
        .await?
        .ok_or(ApiError::NotFound("delivery"))?;
    Ok(Json(DeliveryView::from(&delivery)))
}

/// Every attempt of a delivery, newest first, across replays.
pub(crate) async fn attempts(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, delivery)): Path<(String, String)>,
    Query(query): Query<PageQuery>,
) -> ApiResult<Json<ListView<AttemptView>>> {
    let app = caller.app(&state, &app).await?;
    let id: DeliveryId = path_id(&delivery, "delivery")?;
    if state.store.get_delivery(&app.id, &id).await?.is_none() {
        return Err(ApiError::NotFound("delivery"));
    }
    let page = query.page()?;
    let attempts = state.store.list_attempts(&app.id, &id, &page).await?;
    Ok(Json(page_of(
        &attempts,
        &page,
        |a| a.id.to_string(),
        |a| AttemptView::from(a),
    )))
}

/// The app's dead-letter queue, most recently dead first.
pub(crate) async fn dlq(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    Query(query): Query<PageQuery>,
) -> ApiResult<Json<ListView<DeliveryView>>> {
    let app = caller.app(&state, &app).await?;
    let page = query.page()?;
    let dead = state.store.list_dlq(&app.id, &page).await?;
    Ok(Json(page_of(&dead, &page, Store::dlq_cursor, |d| {
        DeliveryView::from(d)
    })))
}

#[derive(Serialize)]
pub(crate) struct ReplayView {
    /// Whether this request started a new round.
    replayed: bool,
    detail: String,
    delivery: DeliveryView,
}

/// Replays one dead delivery (same event, same `webhook-id`). Replaying a
/// delivery that is not dead changes nothing and says so (200, `replayed: false`).
pub(crate) async fn replay(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, delivery)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<ReplayView>)> {
    let app = caller.app(&state, &app).await?;
    let id: DeliveryId = path_id(&delivery, "delivery")?;
    match state
        .store
        .replay_delivery(&app.id, &id, state.clock.now())
        .await?
    {
        ReplayOutcome::Replayed(delivery) => Ok((
            StatusCode::ACCEPTED,
            Json(ReplayView {
                replayed: true,
                detail: "the delivery is pending again and will be attempted now".into(),
                delivery: DeliveryView::from(&delivery),
            }),
        )),
        ReplayOutcome::NotDead(delivery) => Ok((
            StatusCode::OK,
            Json(ReplayView {
                replayed: false,
                detail: format!(
                    "the delivery is {}, not dead; nothing changed",
                    delivery.state
                ),
                delivery: DeliveryView::from(&delivery),
            }),
        )),
        ReplayOutcome::NotFound => Err(ApiError::NotFound("delivery")),
    }
}
