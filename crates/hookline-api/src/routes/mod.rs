//! The route table. Paths follow DESIGN.md's API section.

mod apps;
mod deliveries;
mod endpoints;
mod event_types;
mod events;
mod keys;
mod replays;
mod system;

use axum::http::Method;
use axum::routing::{delete, get, patch, post, MethodRouter};
use axum::Router;
use hookline_core::access::Capability::{Endpoints, Publish, Read, Replay, Secrets};
use serde::Deserialize;

use crate::auth::Access::{self, Admin, App, Public};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

/// One route: its method, its path and what it requires of the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    pub access: Access,
}

/// Every route with its handler. Access is declared here, beside the path, and
/// enforced by one layer ([`crate::auth::authorize`]) before the handler runs.
#[rustfmt::skip]
fn table() -> Vec<(Method, &'static str, Access, MethodRouter<AppState>)> {
    use Method as M;
    let batch_limit = axum::extract::DefaultBodyLimit::max(BATCH_BODY_LIMIT);
    vec![
        (M::POST, "/v1/apps", Admin, post(apps::create)),
        (M::GET, "/v1/apps", Admin, get(apps::list)),
        (M::GET, "/v1/apps/{app}", App(Read), get(apps::get)),
        (M::PATCH, "/v1/apps/{app}", Admin, patch(apps::update)),
        (M::DELETE, "/v1/apps/{app}", Admin, delete(apps::delete)),
        (M::DELETE, "/v1/apps/{app}/keys", Admin, delete(keys::revoke_app)),
        (M::POST, "/v1/apps/{app}/endpoints", App(Endpoints), post(endpoints::create)),
        (M::GET, "/v1/apps/{app}/endpoints", App(Read), get(endpoints::list)),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}", App(Read), get(endpoints::get)),
        (M::PATCH, "/v1/apps/{app}/endpoints/{endpoint}", App(Endpoints), patch(endpoints::update)),
        (M::DELETE, "/v1/apps/{app}/endpoints/{endpoint}", App(Endpoints), delete(endpoints::delete)),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/secret", App(Secrets), get(endpoints::secret)),
        (M::POST, "/v1/apps/{app}/endpoints/{endpoint}/secret/rotate", App(Secrets), post(endpoints::rotate_secret)),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/health", App(Read), get(endpoints::health)),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/attempts", App(Read), get(endpoints::attempts)),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/stats", App(Read), get(endpoints::stats)),
        (M::POST, "/v1/apps/{app}/endpoints/{endpoint}/test", App(Endpoints), post(endpoints::test_send)),
        (M::POST, "/v1/apps/{app}/events", App(Publish), post(events::publish)),
        (M::GET, "/v1/apps/{app}/events", App(Read), get(events::list)),
        (M::POST, "/v1/apps/{app}/events/batch", App(Publish), post(events::publish_batch).layer(batch_limit)),
        (M::GET, "/v1/apps/{app}/events/{event}", App(Read), get(events::get)),
        (M::GET, "/v1/apps/{app}/deliveries", App(Read), get(deliveries::list)),
        (M::GET, "/v1/apps/{app}/deliveries/{delivery}", App(Read), get(deliveries::get)),
        (M::GET, "/v1/apps/{app}/deliveries/{delivery}/attempts", App(Read), get(deliveries::attempts)),
        (M::GET, "/v1/apps/{app}/attempts/{attempt}", App(Read), get(deliveries::attempt)),
        (M::POST, "/v1/apps/{app}/deliveries/{delivery}/replay", App(Replay), post(deliveries::replay)),
        (M::POST, "/v1/apps/{app}/deliveries/{delivery}/resend", App(Replay), post(deliveries::resend)),
        (M::GET, "/v1/apps/{app}/dlq", App(Read), get(deliveries::dlq)),
        (M::POST, "/v1/apps/{app}/replays", App(Replay), post(replays::start)),
        (M::GET, "/v1/apps/{app}/replays/{replay}", App(Read), get(replays::get)),
        (M::POST, "/v1/apps/{app}/replays/{replay}/cancel", App(Replay), post(replays::cancel)),
        (M::POST, "/v1/event-types", Admin, post(event_types::create)),
        (M::GET, "/v1/event-types", App(Read), get(event_types::list)),
        (M::GET, "/v1/event-types/{name}", App(Read), get(event_types::get)),
        (M::PATCH, "/v1/event-types/{name}", Admin, patch(event_types::update)),
        (M::DELETE, "/v1/event-types/{name}", Admin, delete(event_types::delete)),
        (M::POST, "/v1/keys", Admin, post(keys::create)),
        (M::GET, "/v1/keys", Admin, get(keys::list)),
        (M::DELETE, "/v1/keys/{key}", Admin, delete(keys::revoke)),
        (M::GET, "/healthz", Public, get(system::healthz)),
        (M::GET, "/readyz", Public, get(system::readyz)),
        (M::GET, "/metrics", Public, get(system::metrics)),
        (M::GET, "/problems", Public, get(system::problems)),
        (M::GET, "/problems/{code}", Public, get(system::problem_page)),
    ]
}

/// The route list, for tests that must cover every route.
pub fn list() -> Vec<Route> {
    table()
        .into_iter()
        .map(|(method, path, access, _)| Route {
            method,
            path,
            access,
        })
        .collect()
}

pub(crate) fn routes(state: &AppState) -> Router<AppState> {
    table()
        .into_iter()
        .fold(Router::new(), |router, (_, path, access, handler)| {
            let guard = axum::middleware::from_fn_with_state(
                (state.clone(), access),
                crate::auth::authorize,
            );
            router.route(path, handler.route_layer(guard))
        })
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
