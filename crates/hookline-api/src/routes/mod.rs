//! The route table. Paths follow DESIGN.md's API section.

mod apps;
mod deliveries;
mod endpoints;
mod events;
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
        .route("/v1/apps/{app}/events", post(events::publish))
        .route(
            "/v1/apps/{app}/events/batch",
            post(events::publish_batch)
                .layer(axum::extract::DefaultBodyLimit::max(BATCH_BODY_LIMIT)),
        )
        .route("/v1/apps/{app}/events/{event}", get(events::get))
        .route("/v1/apps/{app}/deliveries/{delivery}", get(deliveries::get))
        .route(
            "/v1/apps/{app}/deliveries/{delivery}/attempts",
            get(deliveries::attempts),
        )
        .route(
            "/v1/apps/{app}/deliveries/{delivery}/replay",
            post(deliveries::replay),
        )
        .route("/v1/apps/{app}/dlq", get(deliveries::dlq))
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
    fn page(self) -> ApiResult<hookline_store::Page> {
        let limit = self.limit.unwrap_or(DEFAULT_PAGE);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(ApiError::Validation(format!(
                "limit must be between 1 and {MAX_PAGE}"
            )));
        }
        Ok(hookline_store::Page {
            limit,
            before: self.before,
        })
    }
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

/// Parses a path id of the expected kind; a malformed one cannot exist, so it is 404.
fn path_id<T: std::str::FromStr>(value: &str, what: &'static str) -> ApiResult<T> {
    value.parse().map_err(|_| ApiError::NotFound(what))
}
