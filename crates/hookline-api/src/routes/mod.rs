//! The route table. Paths follow DESIGN.md's API section.

mod apps;
mod deliveries;
mod endpoints;
mod events;
mod keys;
mod replays;
mod system;

use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

use crate::error::{ApiError, ApiResult};
use crate::AppState;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/apps", post(apps::create).get(apps::list))
        .route(
            "/v1/apps/{app}",
            get(apps::get).patch(apps::update).delete(apps::delete),
        )
        .route(
            "/v1/apps/{app}/endpoints",
            post(endpoints::create).get(endpoints::list),
        )
        .route(
            "/v1/apps/{app}/endpoints/{endpoint}",
            get(endpoints::get)
                .patch(endpoints::update)
                .delete(endpoints::delete),
        )
        .route(
            "/v1/apps/{app}/endpoints/{endpoint}/secret",
            get(endpoints::secret),
        )
        .route(
            "/v1/apps/{app}/endpoints/{endpoint}/health",
            get(endpoints::health),
        )
        .route(
            "/v1/apps/{app}/endpoints/{endpoint}/attempts",
            get(endpoints::attempts),
        )
        .route(
            "/v1/apps/{app}/endpoints/{endpoint}/stats",
            get(endpoints::stats),
        )
        .route(
            "/v1/apps/{app}/events",
            post(events::publish).get(events::list),
        )
        .route(
            "/v1/apps/{app}/events/batch",
            post(events::publish_batch)
                .layer(axum::extract::DefaultBodyLimit::max(BATCH_BODY_LIMIT)),
        )
        .route("/v1/apps/{app}/events/{event}", get(events::get))
        .route("/v1/apps/{app}/deliveries", get(deliveries::list))
        .route("/v1/apps/{app}/deliveries/{delivery}", get(deliveries::get))
        .route(
            "/v1/apps/{app}/deliveries/{delivery}/attempts",
            get(deliveries::attempts),
        )
        .route(
            "/v1/apps/{app}/deliveries/{delivery}/replay",
            post(deliveries::replay),
        )
        .route(
            "/v1/apps/{app}/deliveries/{delivery}/resend",
            post(deliveries::resend),
        )
        .route("/v1/apps/{app}/dlq", get(deliveries::dlq))
        .route("/v1/apps/{app}/replays", post(replays::start))
        .route("/v1/apps/{app}/replays/{replay}", get(replays::get))
        .route(
            "/v1/apps/{app}/replays/{replay}/cancel",
            post(replays::cancel),
        )
        .route("/v1/keys", post(keys::create).get(keys::list))
        .route("/v1/keys/{key}", axum::routing::delete(keys::revoke))
        .route("/healthz", get(system::healthz))
        .route("/readyz", get(system::readyz))
        .route("/metrics", get(system::metrics))
        .fallback(system::not_found)
}

/// `?limit=&before=` on every list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PageQuery {
    limit: Option<u32>,
    before: Option<String>,
}

/// The largest batch request body (1,000 events of a few KiB each fit easily).
const BATCH_BODY_LIMIT: usize = 32 * 1024 * 1024;

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 250;

impl PageQuery {
    /// The page of a list whose cursor is an id of kind `T`.
    pub(crate) fn page<T: std::str::FromStr>(self) -> ApiResult<hookline_store::Page> {
        page(self.limit, self.before, is_id::<T>)
    }
}

/// A page of at most `limit` (1 to 250, default 50) rows after the cursor `before`,
/// which must be one this listing made (`is_cursor`); anything else is a 400.
fn page(
    limit: Option<u32>,
    before: Option<String>,
    is_cursor: impl Fn(&str) -> bool,
) -> ApiResult<hookline_store::Page> {
    let limit = limit.unwrap_or(DEFAULT_PAGE);
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(ApiError::InvalidQuery(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    if before.as_deref().is_some_and(|c| !is_cursor(c)) {
        return Err(ApiError::InvalidQuery(
            "before must be a next_cursor this listing returned".into(),
        ));
    }
    Ok(hookline_store::Page { limit, before })
}

/// Whether a cursor is an id of kind `T` (the cursor of most lists).
fn is_id<T: std::str::FromStr>(cursor: &str) -> bool {
    cursor.parse::<T>().is_ok()
}

/// A query parameter naming an id of kind `T`.
fn query_id<T: std::str::FromStr>(field: &str, value: Option<String>) -> ApiResult<Option<T>> {
    value
        .map(|v| {
            v.parse()
                .map_err(|_| ApiError::InvalidQuery(format!("{field} {v:?} is not a valid id")))
        })
        .transpose()
}

/// `since` / `until` as RFC 3339 UTC times: the half-open range `[since, until)`.
fn time_range(
    since: Option<String>,
    until: Option<String>,
) -> ApiResult<hookline_store::TimeRange> {
    let parse = |field: &str, value: Option<String>| {
        value
            .map(|v| {
                hookline_core::time::Timestamp::parse_rfc3339(&v).ok_or_else(|| {
                    ApiError::InvalidQuery(format!(
                        "{field} must be an RFC 3339 UTC time such as 2026-12-01T09:30:00Z, not {v:?}"
                    ))
                })
            })
            .transpose()
    };
    Ok(hookline_store::TimeRange {
        since: parse("since", since)?,
        until: parse("until", until)?,
    })
}

/// An HTTP status filter: `503`, or a class such as `5xx`.
fn status_filter(value: Option<String>) -> ApiResult<Option<hookline_store::StatusFilter>> {
    use hookline_store::StatusFilter;
    let Some(value) = value else {
        return Ok(None);
    };
    let bad = || {
        ApiError::InvalidQuery(format!(
            "status must be an HTTP status (100 to 599) or a class such as 5xx, not {value:?}"
        ))
    };
    let lower = value.to_ascii_lowercase();
    let filter = match lower.strip_suffix("xx") {
        Some(class) => match class.parse::<u16>() {
            Ok(class @ 1..=5) => StatusFilter::Class(class),
            _ => return Err(bad()),
        },
        None => match lower.parse::<u16>() {
            Ok(status @ 100..=599) => StatusFilter::Exact(status),
            _ => return Err(bad()),
        },
    };
    Ok(Some(filter))
}

/// Builds a list answer: a full page has a cursor to the next.
fn page_of<R, V>(
    rows: &[R],
    page: &hookline_store::Page,
    cursor: impl Fn(&R) -> String,
    view: impl Fn(&R) -> V,
) -> crate::views::ListView<V> {
    crate::views::ListView {
        next_cursor: (rows.len() as u32 == page.limit)
            .then(|| rows.last().map(&cursor))
            .flatten(),
        data: rows.iter().map(view).collect(),
    }
}

/// A free-text name (event type, ordering key, app name): 1 to 256 characters and
/// no control characters, the same on both engines (PostgreSQL's `text` cannot
/// hold NUL).
pub(crate) fn checked_name(field: &str, value: &str) -> ApiResult<()> {
    hookline_core::event_types::check_name(value)
        .map_err(|error| ApiError::Validation(format!("{field} {error}")))
}

/// Parses a path id of the expected kind; a malformed one cannot exist, so it is 404.
fn path_id<T: std::str::FromStr>(value: &str, what: &'static str) -> ApiResult<T> {
    value.parse().map_err(|_| ApiError::NotFound(what))
}
