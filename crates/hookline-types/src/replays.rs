//! `/v1/apps/{app}/replays`: bulk replays of the DLQ.

use hookline_core::model::{DeadReason, ReplayJobState};
use hookline_core::time::Timestamp;
use serde::{Deserialize, Serialize};

/// `POST /v1/apps/{app}/replays`: which dead deliveries to replay (every field
/// narrows it, as the DLQ listing's filters do), or with `dry_run` only how many.
#[derive(Debug, Clone, Default, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkReplayRequest {
    #[schema(pattern = r"^ep_[0-7][0-9A-HJKMNP-TV-Z]{25}$")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<DeadReason>,
    #[schema(schema_with = crate::schema::optional_name)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    #[schema(schema_with = crate::schema::optional_time)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    #[schema(schema_with = crate::schema::optional_time)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FilterView {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<DeadReason>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ReplayJobView {
    pub id: String,
    pub state: ReplayJobState,
    pub filter: FilterView,
    /// Dead deliveries that matched when it started.
    pub total: u64,
    /// Of those, reached so far.
    pub done: u64,
    /// Moved back to pending by this job.
    pub replayed: u64,
    /// Reached but no longer dead (replayed meanwhile) or with a deleted endpoint.
    pub skipped: u64,
    pub created_at: Timestamp,
    pub finished_at: Option<Timestamp>,
}

/// A dry run's answer: how many dead deliveries the filter matches now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DryRunView {
    /// Always `true`.
    pub dry_run: bool,
    pub count: u64,
}
