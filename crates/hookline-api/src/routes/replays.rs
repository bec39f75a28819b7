//! Bulk replays of the DLQ: a dry run that counts, then a background job with
//! progress, cancellable (`hookline_store`'s `replays`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_core::ids::{EndpointId, ReplayJobId};
use hookline_store::{DlqFilter, StartedReplay};

use super::{path_id, query_id, time_range};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::AppState;
pub(crate) use hookline_types::{BulkReplayRequest, DryRunView, ReplayJobView};

/// A body field refused as a query parameter would be: 422 here.
fn in_body(error: ApiError) -> ApiError {
    match error {
        ApiError::InvalidQuery(detail) => ApiError::Validation(detail),
        other => other,
    }
}

/// Starts a bulk replay (202), or answers the same one already running (200): a
/// repeated request replays nothing twice. With `dry_run`, only counts (200).
pub(crate) async fn start(
    State(state): State<AppState>,
    caller: Caller,
    Path(app): Path<String>,
    body: JsonBody<BulkReplayRequest>,
) -> ApiResult<(StatusCode, Json<serde_json::Value>)> {
    let app = caller.app(&state, &app).await?;
    let request = body.value;
    if let Some(event_type) = &request.event_type {
        super::checked_name("event_type", event_type)?;
    }
    let filter = DlqFilter {
        endpoint: query_id::<EndpointId>("endpoint_id", request.endpoint_id).map_err(in_body)?,
        reason: request.reason,
        event_type: request.event_type,
        died: time_range(request.since, request.until).map_err(in_body)?,
    };
    if request.dry_run {
        let count = state.store.replays().count_dlq(&app.id, &filter).await?;
        let view = DryRunView {
            dry_run: true,
            count,
        };
        return Ok((StatusCode::OK, Json(serde_json::json!(view))));
    }
    let (status, job) = match state
        .store
        .replays()
        .start_replay_job(&app.id, &filter, state.clock.now())
        .await?
    {
        StartedReplay::Started(job) => (StatusCode::ACCEPTED, job),
        StartedReplay::AlreadyRunning(job) => (StatusCode::OK, job),
    };
    Ok((
        status,
        Json(serde_json::json!(crate::views::replay_job(&job))),
    ))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, job)): Path<(String, String)>,
) -> ApiResult<Json<ReplayJobView>> {
    let app = caller.app(&state, &app).await?;
    let id: ReplayJobId = path_id(&job, "replay")?;
    let job = state
        .store
        .replays()
        .get_replay_job(&app.id, &id)
        .await?
        .ok_or(ApiError::NotFound("replay"))?;
    Ok(Json(crate::views::replay_job(&job)))
}

/// Stops a running bulk replay; what it replayed stays replayed. A finished one
/// is answered as it is.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, job)): Path<(String, String)>,
) -> ApiResult<Json<ReplayJobView>> {
    let app = caller.app(&state, &app).await?;
    let id: ReplayJobId = path_id(&job, "replay")?;
    let job = state
        .store
        .replays()
        .cancel_replay_job(&app.id, &id, state.clock.now())
        .await?
        .ok_or(ApiError::NotFound("replay"))?;
    Ok(Json(crate::views::replay_job(&job)))
}
