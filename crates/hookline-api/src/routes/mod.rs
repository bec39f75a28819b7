//! The route table. Paths follow DESIGN.md's API section.

mod apps;
mod deliveries;
mod endpoints;
mod event_types;
mod events;
mod keys;
mod messages;
mod notifications;
mod replays;
mod system;

use axum::http::Method;
use axum::routing::{delete, get, patch, post, MethodRouter};
use axum::Router;
use hookline_core::access::Capability::{Endpoints, Messages, Publish, Read, Replay, Secrets};

use crate::auth::Access::{self, Admin, App, Portal, Public};
use crate::error::{ApiError, ApiResult};
use crate::openapi::{params, schema, Answer, Doc};
use crate::AppState;
pub(crate) use hookline_types::PageQuery;

/// One route: its method, its path and what it requires of the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub method: Method,
    pub path: &'static str,
    pub access: Access,
}

/// Every route with its handler and its documentation. Access is declared
/// here, beside the path, and enforced by one layer ([`crate::auth::authorize`])
/// before the handler runs; the OpenAPI document is built from the same rows.
#[rustfmt::skip]
fn table() -> Vec<(Method, &'static str, Access, MethodRouter<AppState>, Doc)> {
    use Answer::{Either, Empty, Html, Json, List, Object, Text};
    use crate::openapi::id_pattern;
    use Method as M;
    use crate::views::*;
    // The limit of the batch route's body, for axum's extractors and ours.
    let batch_limit = (
        axum::extract::DefaultBodyLimit::max(BATCH_BODY_LIMIT),
        axum::Extension(crate::extract::BodyLimit(BATCH_BODY_LIMIT)),
    );
    let portal_headers = || axum::middleware::map_response(crate::portal::headers);
    let pages = params::<PageQuery>;
    vec![
        (M::POST, "/v1/apps", Admin, post(apps::create),
            Doc::new("Create an app").body(schema::<apps::CreateApp>).answers(201, Json(schema::<AppView>)).errors(&["conflict"])),
        (M::GET, "/v1/apps", Admin, get(apps::list),
            Doc::new("List apps").query(pages).cursor(id_pattern!("app_")).answers(200, List(schema::<AppView>))),
        (M::GET, "/v1/apps/{app}", App(Read), get(apps::get),
            Doc::new("Get an app").answers(200, Json(schema::<AppView>))),
        (M::PATCH, "/v1/apps/{app}", Admin, patch(apps::update),
            Doc::new("Change an app").body(schema::<apps::UpdateApp>).answers(200, Json(schema::<AppView>)).errors(&["conflict"])),
        (M::DELETE, "/v1/apps/{app}", Admin, delete(apps::delete),
            Doc::new("Delete an app and everything it owns (not the internal app `hookline`: 409)").answers(204, Empty).errors(&["conflict"])),
        (M::DELETE, "/v1/apps/{app}/keys", Admin, delete(keys::revoke_app),
            Doc::new("Revoke every key of an app, portal sessions and unopened portal links included").answers(200, Json(schema::<keys::RevokedView>))),
        (M::POST, "/v1/apps/{app}/portal-access", Admin, post(crate::portal::access),
            Doc::new("A link that opens the app's customer portal once (docs/portal.md)").body(schema::<crate::portal::PortalAccess>).answers(201, Json(schema::<crate::portal::PortalLink>))),
        (M::POST, "/v1/apps/{app}/endpoints", App(Endpoints), post(endpoints::create),
            Doc::new("Create an endpoint").body(schema::<endpoints::CreateEndpoint>).answers(201, Json(schema::<EndpointView>)).errors(&["destination_forbidden", "invalid_filter", "conflict"])),
        (M::GET, "/v1/apps/{app}/endpoints", App(Read), get(endpoints::list),
            Doc::new("List an app's endpoints").query(pages).cursor(id_pattern!("ep_")).answers(200, List(schema::<EndpointView>))),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}", App(Read), get(endpoints::get),
            Doc::new("Get an endpoint").answers(200, Json(schema::<EndpointView>))),
        (M::PATCH, "/v1/apps/{app}/endpoints/{endpoint}", App(Endpoints), patch(endpoints::update),
            Doc::new("Change, pause or resume an endpoint").body(schema::<endpoints::UpdateEndpoint>).answers(200, Json(schema::<EndpointView>)).errors(&["destination_forbidden", "invalid_filter", "conflict"])),
        (M::DELETE, "/v1/apps/{app}/endpoints/{endpoint}", App(Endpoints), delete(endpoints::delete),
            Doc::new("Delete an endpoint (its history stays)").answers(204, Empty)),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/secret", App(Secrets), get(endpoints::secret),
            Doc::new("An endpoint's signing secret").answers(200, Json(schema::<endpoints::SecretView>))),
        (M::POST, "/v1/apps/{app}/endpoints/{endpoint}/secret/rotate", App(Secrets), post(endpoints::rotate_secret),
            Doc::new("Rotate an endpoint's secret with a grace period").body(schema::<endpoints::RotateSecret>).answers(200, Json(schema::<endpoints::RotatedSecretView>)).errors(&["conflict"])),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/health", App(Read), get(endpoints::health),
            Doc::new("An endpoint's breaker and recent success rate").answers(200, Json(schema::<EndpointHealthView>))),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/attempts", App(Read), get(endpoints::attempts),
            Doc::new("Every attempt sent to an endpoint").query(params::<endpoints::AttemptsQuery>).cursor(id_pattern!("atm_")).answers(200, List(schema::<AttemptView>))),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/messages", App(Messages), get(messages::range),
            Doc::new("An endpoint's deliveries by sequence number, each signed now as a push is, to fill a gap (docs/api.md#sequence-numbers)").query(params::<hookline_types::MessagesQuery>).answers(200, Json(schema::<hookline_types::MessagesView>))),
        (M::POST, "/v1/apps/{app}/endpoints/{endpoint}/messages/commit", App(Messages), post(messages::commit),
            Doc::new("A polling endpoint's receiver handled every number up to the cursor: its pending deliveries up to there are succeeded (docs/api.md#polling-endpoints)").body(schema::<hookline_types::CommitMessages>).answers(200, Json(schema::<hookline_types::CommittedView>)).errors(&["conflict"])),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/stats", App(Read), get(endpoints::stats),
            Doc::new("An endpoint's stats (docs/api.md#endpoint-stats)").answers(200, Json(schema::<endpoints::EndpointStatsView>))),
        (M::POST, "/v1/apps/{app}/endpoints/{endpoint}/signature-check", App(Read), post(endpoints::check_signature),
            Doc::new("Checks what a receiver got against the endpoint's secrets, and says why it does not verify (docs/api.md#signature-check)").body(schema::<endpoints::CheckSignature>).answers(200, Json(schema::<hookline_core::signature_check::Check>))),
        (M::POST, "/v1/apps/{app}/filter-preview", App(Read), post(endpoints::filter_preview),
            Doc::new("Which of the app's latest events a payload filter lets through (docs/api.md#filter-preview); changes nothing").body(schema::<endpoints::FilterPreview>).answers(200, Json(schema::<endpoints::FilterPreviewView>)).errors(&["invalid_filter"])),
        (M::POST, "/v1/apps/{app}/transform-preview", App(Endpoints), post(endpoints::transform_preview),
            Doc::new("What a transform makes of one event: the body, headers and URL it would send, a skip, or how it fails (docs/api.md#transform-preview); changes nothing").body(schema::<endpoints::TransformPreview>).answers(200, Json(schema::<endpoints::TransformPreviewView>)).errors(&["invalid_transform", "transforms_unavailable", "not_found", "conflict"])),
        (M::GET, "/v1/apps/{app}/incidents", App(Read), get(endpoints::incidents),
            Doc::new("What is wrong now with the app's endpoints, grouped by cause (docs/api.md#incidents)").query(params::<endpoints::IncidentsQuery>).answers(200, Json(schema::<endpoints::IncidentsView>))),
        (M::GET, "/v1/apps/{app}/endpoints/{endpoint}/timeline", App(Read), get(endpoints::timeline),
            Doc::new("An endpoint's attempts per time bucket, with its breaker and switch changes (docs/api.md#endpoint-timeline)").query(params::<endpoints::TimelineQuery>).answers(200, Json(schema::<endpoints::TimelineView>))),
        (M::POST, "/v1/apps/{app}/endpoints/{endpoint}/test", App(Endpoints), post(endpoints::test_send),
            Doc::new("Send a test event to this endpoint only, whatever its filter").body(schema::<endpoints::TestSend>).answers(202, Json(schema::<endpoints::TestSendView>)).errors(&["conflict", "unknown_event_type", "schema_violation", "missing_capability_publish"])),
        (M::GET, "/v1/apps/{app}/notifications", App(Read), get(notifications::list),
            Doc::new("The channels the app's customers are told through when its endpoints break (docs/api.md#notifications)").answers(200, Json(schema::<notifications::NotificationChannelsView>))),
        (M::POST, "/v1/apps/{app}/notifications", App(Endpoints), post(notifications::create),
            Doc::new("Add an e-mail, Slack, Teams or Discord channel for the app's notices").body(schema::<notifications::CreateNotificationChannel>).answers(201, Json(schema::<notifications::NotificationChannelView>)).errors(&["destination_forbidden", "conflict"])),
        (M::DELETE, "/v1/apps/{app}/notifications/{channel}", App(Endpoints), delete(notifications::delete),
            Doc::new("Remove a notification channel").answers(204, Empty)),
        (M::POST, "/v1/apps/{app}/events", App(Publish), post(events::publish),
            Doc::new("Publish an event (honours Idempotency-Key)").body(schema::<events::PublishRequest>).answers(202, Json(schema::<PublishedView>)).errors(&["idempotency_key_reused", "unknown_event_type", "schema_violation"])),
        (M::GET, "/v1/apps/{app}/events", App(Read), get(events::list),
            Doc::new("List an app's events").query(params::<events::EventsQuery>).cursor(id_pattern!("msg_")).answers(200, List(schema::<EventView>))),
        (M::POST, "/v1/apps/{app}/events/batch", App(Publish), post(events::publish_batch).layer(batch_limit),
            Doc::new("Publish up to 1,000 events in one transaction (docs/api.md#batch)").body(schema::<events::BatchRequest>).answers(202, Object).errors(&["unknown_event_type", "schema_violation"])),
        (M::GET, "/v1/apps/{app}/events/{event}", App(Read), get(events::get),
            Doc::new("Get an event with its payload and deliveries").answers(200, Json(schema::<EventView>))),
        (M::GET, "/v1/apps/{app}/deliveries", App(Read), get(deliveries::list),
            Doc::new("List an app's deliveries").query(params::<deliveries::DeliveriesQuery>).cursor(DELIVERY_CURSOR).answers(200, List(schema::<DeliveryView>))),
        (M::GET, "/v1/apps/{app}/deliveries/{delivery}", App(Read), get(deliveries::get),
            Doc::new("Get a delivery").answers(200, Json(schema::<DeliveryView>))),
        (M::GET, "/v1/apps/{app}/deliveries/{delivery}/attempts", App(Read), get(deliveries::attempts),
            Doc::new("Every attempt of a delivery, across replays").query(pages).cursor(id_pattern!("atm_")).answers(200, List(schema::<AttemptView>))),
        (M::GET, "/v1/apps/{app}/attempts/{attempt}", App(Read), get(deliveries::attempt),
            Doc::new("One attempt in full").answers(200, Json(schema::<AttemptView>))),
        (M::POST, "/v1/apps/{app}/deliveries/{delivery}/replay", App(Replay), post(deliveries::replay),
            Doc::new("Replay a dead delivery; 200 when it is not dead (nothing changes)").answers(202, Json(schema::<deliveries::ReplayView>)).also(200, Json(schema::<deliveries::ReplayView>)).errors(&["endpoint_deleted", "conflict"])),
        (M::POST, "/v1/apps/{app}/deliveries/{delivery}/resend", App(Replay), post(deliveries::resend),
            Doc::new("Send a succeeded delivery again; 200 when it is not succeeded (nothing changes)").answers(202, Json(schema::<deliveries::ResendView>)).also(200, Json(schema::<deliveries::ResendView>)).errors(&["endpoint_deleted", "conflict"])),
        (M::GET, "/v1/apps/{app}/dlq", App(Read), get(deliveries::dlq),
            Doc::new("The dead-letter queue").query(params::<deliveries::DlqQuery>).cursor(DLQ_CURSOR).answers(200, List(schema::<DeliveryView>))),
        (M::POST, "/v1/apps/{app}/replays", App(Replay), post(replays::start),
            Doc::new("Bulk replay of the DLQ by filter, or its dry run (docs/api.md#bulk-replay)").body(schema::<replays::BulkReplayRequest>).answers(202, Json(schema::<replays::ReplayJobView>)).also(200, Either(schema::<replays::ReplayJobView>, schema::<replays::DryRunView>))),
        (M::GET, "/v1/apps/{app}/replays/{replay}", App(Read), get(replays::get),
            Doc::new("A bulk replay's progress and report").answers(200, Json(schema::<replays::ReplayJobView>))),
        (M::POST, "/v1/apps/{app}/replays/{replay}/cancel", App(Replay), post(replays::cancel),
            Doc::new("Cancel a bulk replay").answers(200, Json(schema::<replays::ReplayJobView>))),
        (M::POST, "/v1/event-types", Admin, post(event_types::create),
            Doc::new("Add a type to the event type catalog").body(schema::<event_types::CreateEventType>).answers(201, Json(schema::<event_types::EventTypeView>)).errors(&["conflict"])),
        (M::GET, "/v1/event-types", App(Read), get(event_types::list),
            Doc::new("The event type catalog, by name").answers(200, List(schema::<event_types::EventTypeView>))),
        (M::GET, "/v1/event-types/{name}", App(Read), get(event_types::get),
            Doc::new("One event type").answers(200, Json(schema::<event_types::EventTypeView>))),
        (M::PATCH, "/v1/event-types/{name}", Admin, patch(event_types::update),
            Doc::new("Change an event type").body(schema::<event_types::UpdateEventType>).answers(200, Json(schema::<event_types::EventTypeView>))),
        (M::DELETE, "/v1/event-types/{name}", Admin, delete(event_types::delete),
            Doc::new("Remove an event type (not one of Hookline's own `hookline.` types: 409)").answers(204, Empty).errors(&["conflict"])),
        (M::POST, "/v1/keys", Admin, post(keys::create),
            Doc::new("Make an API key (shown once)").body(keys::create_key_schema).answers(201, Json(schema::<keys::KeyView>)).errors(&["not_found"])),
        (M::GET, "/v1/keys", Admin, get(keys::list),
            Doc::new("List API keys").query(params::<keys::KeyQuery>).cursor(id_pattern!("key_")).answers(200, List(schema::<keys::KeyView>)).errors(&["not_found"])),
        (M::DELETE, "/v1/keys/{key}", Admin, delete(keys::revoke),
            Doc::new("Revoke an API key").answers(204, Empty).errors(&["conflict"])),
        (M::POST, "/portal/session", Portal, post(crate::portal::session).layer(portal_headers()),
            Doc::new("Exchange a portal link's one-time code for a session (docs/portal.md)").body(schema::<crate::portal::SessionRequest>).answers(200, Json(schema::<crate::portal::PortalSession>)).errors(&["portal_code_invalid", "portal_code_used", "portal_code_expired"])),
        (M::POST, "/portal/session/renew", Portal, post(crate::portal::renew).layer(portal_headers()),
            Doc::new("Renew the portal session whose key is the bearer: its span again from now, never past 12 h after sign-in (docs/portal.md)").answers(200, Json(schema::<crate::portal::RenewedSession>)).errors(&["not_found"])),
        (M::DELETE, "/portal/session", Portal, delete(crate::portal::sign_out).layer(portal_headers()),
            Doc::new("Sign out: end the portal session whose key is the bearer; 204 also when there is none left (docs/portal.md)").answers(204, Empty).errors(&["not_found"])),
        (M::GET, "/portal/apps/{app}/", Portal, get(crate::portal::page).layer(portal_headers()),
            Doc::new("The customer portal's page for an app (HTML)").answers(200, Html)),
        (M::GET, "/portal/static/{hash}/{*file}", Portal, get(crate::portal::asset).layer(portal_headers()),
            Doc::new("One of the portal's files, cached by content hash").answers(200, Text)),
        (M::GET, "/healthz", Public, get(system::healthz),
            Doc::new("Liveness").answers(200, Object)),
        (M::GET, "/readyz", Public, get(system::readyz),
            Doc::new("Readiness: the database answers with this binary's migrations, and this process's dispatcher is turning").answers(200, Object).errors(&["not_ready"])),
        (M::GET, "/metrics", Public, get(system::metrics),
            Doc::new("Prometheus metrics").answers(200, Text)),
        (M::GET, "/openapi.json", Public, get(system::openapi),
            Doc::new("This document").answers(200, Object)),
        (M::GET, "/problems", Public, get(system::problems),
            Doc::new("Every problem code").answers(200, Text)),
        (M::GET, "/problems/{code}", Public, get(system::problem_page),
            Doc::new("What a problem code means").answers(200, Text)),
    ]
}

/// The route list, for tests that must cover every route.
pub fn list() -> Vec<Route> {
    documented().into_iter().map(|(route, _)| route).collect()
}

/// Every route with its documentation (the OpenAPI document's source).
pub(crate) fn documented() -> Vec<(Route, Doc)> {
    table()
        .into_iter()
        .map(|(method, path, access, _, doc)| {
            (
                Route {
                    method,
                    path,
                    access,
                },
                doc,
            )
        })
        .collect()
}

/// Every route, or (`public_only`) only those that need no key: health,
/// readiness, metrics and the documents, for a dispatcher-only process.
pub(crate) fn routes(state: &AppState, public_only: bool) -> Router<AppState> {
    guarded(state, |_, access| !public_only || *access == Public)
}

/// The `/v1` routes again, for the customer portal's page under
/// `/portal/api` (nested there): the same handlers behind the same access
/// layer, reached with the portal's session cookie, which is scoped to
/// `/portal/` (`crate::auth::PORTAL_APP_HEADER`).
pub(crate) fn portal_api(state: &AppState) -> Router<AppState> {
    guarded(state, |path, _| path.starts_with("/v1/"))
}

/// The routes `keep` keeps, each behind the access layer of its [`Access`].
fn guarded(state: &AppState, keep: impl Fn(&str, &Access) -> bool) -> Router<AppState> {
    table()
        .into_iter()
        .filter(|(_, path, access, _, _)| keep(path, access))
        .fold(Router::new(), |router, (_, path, access, handler, _)| {
            let guard = axum::middleware::from_fn_with_state(
                (state.clone(), access),
                crate::auth::authorize,
            );
            router.route(path, handler.route_layer(guard))
        })
        .fallback(system::not_found)
}

/// `{event id}.{delivery id}` ([`hookline_store::Store::delivery_cursor`]).
const DELIVERY_CURSOR: &str = "^msg_[0-7][0-9A-HJKMNP-TV-Z]{25}\\.dlv_[0-7][0-9A-HJKMNP-TV-Z]{25}$";
/// `{dead_at ms}_{delivery id}` ([`hookline_store::Store::dlq_cursor`]).
const DLQ_CURSOR: &str = "^[0-9]{1,15}_dlv_[0-7][0-9A-HJKMNP-TV-Z]{25}$";

/// The largest batch request body (1,000 events of a few KiB each fit easily).
const BATCH_BODY_LIMIT: usize = 32 * 1024 * 1024;

const DEFAULT_PAGE: u32 = 50;
const MAX_PAGE: u32 = 250;

/// The page of a list whose cursor is an id of kind `T`.
pub(crate) fn id_page<T: std::str::FromStr>(query: PageQuery) -> ApiResult<hookline_store::Page> {
    page(query.limit, query.before, is_id::<T>)
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
        next_cursor: next_cursor(rows, page, cursor),
        data: rows.iter().map(view).collect(),
    }
}

/// The cursor after a full page's last row; none after a short page.
fn next_cursor<R>(
    rows: &[R],
    page: &hookline_store::Page,
    cursor: impl Fn(&R) -> String,
) -> Option<String> {
    (rows.len() as u32 == page.limit)
        .then(|| rows.last().map(&cursor))
        .flatten()
}

/// A free-text name (event type, ordering key, app name): 1 to 256 characters and
/// no control characters, the same on both engines (PostgreSQL's `text` cannot
/// hold NUL).
pub(crate) fn checked_name(field: &str, value: &str) -> ApiResult<()> {
    hookline_core::event_types::check_name(value)
        .map_err(|error| ApiError::Validation(format!("{field} {error}")))
}

/// A name filter (`?event_type=`, `?ordering_key=`): a name as [`checked_name`]
/// requires, or a 400 — it could match nothing.
fn name_filter(field: &str, value: Option<String>) -> ApiResult<Option<String>> {
    if let Some(value) = &value {
        hookline_core::event_types::check_name(value)
            .map_err(|error| ApiError::InvalidQuery(format!("{field} {error}")))?;
    }
    Ok(value)
}

/// Parses a path id of the expected kind; a malformed one cannot exist, so it is 404.
fn path_id<T: std::str::FromStr>(value: &str, what: &'static str) -> ApiResult<T> {
    value.parse().map_err(|_| ApiError::NotFound(what))
}
