//! Bulk replays of the DLQ: a dry run that counts, then a background job with
//! progress, cancellable (`hookline_store`'s `replays`).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_core::ids::{EndpointId, ReplayJobId};
use hookline_core::model::{DeadReason, ReplayJobState};
use hookline_core::time::Timestamp;
use hookline_store::{DlqFilter, ReplayJob, StartedReplay};
use serde::{Deserialize, Serialize};

use super::{path_id, query_id, time_range};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::JsonBody;
use crate::AppState;

/// `POST /v1/apps/{app}/replays`: which dead deliveries to replay (every field
/// narrows it, as the DLQ listing's filters do), or with `dry_run` only how many.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct BulkReplayRequest {
    #[schema(pattern = r"^ep_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    endpoint_id: Option<String>,
    reason: Option<DeadReason>,
    #[schema(schema_with = crate::openapi::optional_name)]
    event_type: Option<String>,
    #[schema(schema_with = crate::openapi::optional_time)]
    since: Option<String>,
    #[schema(schema_with = crate::openapi::optional_time)]
    until: Option<String>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct FilterView {
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<DeadReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<Timestamp>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct ReplayJobView {
    id: String,
    state: ReplayJobState,
    filter: FilterView,
    /// Dead deliveries that matched when it started.
    total: u64,
    /// Of those, reached so far.
    done: u64,
    /// Moved back to pending by this job.
    replayed: u64,
    /// Reached but no longer dead (replayed meanwhile) or with a deleted endpoint.
    skipped: u64,
    created_at: Timestamp,
    finished_at: Option<Timestamp>,
}

impl From<&ReplayJob> for ReplayJobView {
    fn from(job: &ReplayJob) -> Self {
        Self {
            id: job.id.to_string(),
            state: job.state,
            filter: FilterView {
                endpoint_id: job.filter.endpoint.as_ref().map(ToString::to_string),
                reason: job.filter.reason,
                event_type: job.filter.event_type.clone(),
                since: job.filter.died.since,
                until: job.filter.died.until,
            },
            total: job.total,
            done: job.done,
            replayed: job.replayed,
            skipped: job.skipped(),
            created_at: job.created_at,
            finished_at: job.finished_at,
        }
    }
}

/// A dry run's answer: how many dead deliveries the filter matches now.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct DryRunView {
    /// Always `true`.
    dry_run: bool,
    count: u64,
}

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
    Ok((status, Json(serde_json::json!(ReplayJobView::from(&job)))))
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
    Ok(Json(ReplayJobView::from(&job)))
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
    Ok(Json(ReplayJobView::from(&job)))
}
