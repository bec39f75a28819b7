//! Deliveries, their attempts, the DLQ and replay: the dashboard's core.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use hookline_core::ids::{AppId, AttemptId, DeliveryId, EndpointId, EventId};
use hookline_core::language::Language;
use hookline_core::retry::RetryPolicy;
use hookline_store::{
    BatchElement, Delivery, DeliveryFilter, DlqFilter, Page, ReplayOutcome, StateFilter,
};

use super::{
    name_filter, next_cursor, page, page_of, path_id, query_id, status_filter, time_range,
    PageQuery,
};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Lang, QueryParams};
use crate::views::{AttemptView, DeliveryView, ListView};
use crate::AppState;
pub(crate) use hookline_types::{DeliveriesQuery, DlqQuery, ReplayView, ResendView, StateParam};

/// `deliveries` as the API shows them, each with its event's type and its
/// newest attempt's status (one read for all); one whose event is gone since
/// it was read (retention ran in between) is left out, as a read a moment
/// later would have.
pub(crate) async fn views_of(
    state: &AppState,
    app: &AppId,
    deliveries: &[Delivery],
    language: Language,
) -> ApiResult<Vec<DeliveryView>> {
    let facts = state
        .store
        .listings()
        .delivery_facts(app, deliveries)
        .await?;
    Ok(deliveries
        .iter()
        .filter_map(|d| {
            let f = facts.get(&d.id)?;
            Some(crate::views::delivery(
                d,
                &f.event_type,
                Some((f, &state.config.retry, language)),
            ))
        })
        .collect())
}

/// One delivery as [`views_of`] shows it (404 if its event is gone).
async fn view_of(
    state: &AppState,
    app: &AppId,
    delivery: &Delivery,
    language: Language,
) -> ApiResult<DeliveryView> {
    views_of(state, app, std::slice::from_ref(delivery), language)
        .await?
        .pop()
        .ok_or(ApiError::NotFound("delivery"))
}

/// A page of deliveries: the cursor from the rows read, the views from [`views_of`].
async fn delivery_page(
    state: &AppState,
    app: &AppId,
    rows: &[Delivery],
    page: &Page,
    cursor: impl Fn(&Delivery) -> String,
    language: Language,
) -> ApiResult<ListView<DeliveryView>> {
    Ok(ListView {
        next_cursor: next_cursor(rows, page, cursor),
        data: views_of(state, app, rows, language).await?,
    })
}

pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path((app, delivery)): Path<(String, String)>,
) -> ApiResult<Json<DeliveryView>> {
    let app = caller.app(&state, &app).await?;
    let id: DeliveryId = path_id(&delivery, "delivery")?;
    let delivery = state
        .store
        .events()
        .get_delivery(&app.id, &id)
        .await?
        .ok_or(ApiError::NotFound("delivery"))?;
    Ok(Json(view_of(&state, &app.id, &delivery, language).await?))
}

/// Every attempt of a delivery, newest first, across replays.
pub(crate) async fn attempts(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path((app, delivery)): Path<(String, String)>,
    QueryParams(query): QueryParams<PageQuery>,
) -> ApiResult<Json<ListView<AttemptView>>> {
    let app = caller.app(&state, &app).await?;
    let id: DeliveryId = path_id(&delivery, "delivery")?;
    let delivery = state
        .store
        .events()
        .get_delivery(&app.id, &id)
        .await?
        .ok_or(ApiError::NotFound("delivery"))?;
    let policy = retry_policy(&state, &app.id, &delivery.endpoint_id).await?;
    let page = super::id_page::<AttemptId>(query)?;
    let attempts = state
        .store
        .listings()
        .list_attempts(&app.id, &id, &page)
        .await?;
    Ok(Json(page_of(
        &attempts,
        &page,
        |a| a.id.to_string(),
        |a| crate::views::attempt(a, &policy, language),
    )))
}

/// The retry policy `endpoint` follows: the deployment's, with the endpoint's
/// overrides while it exists.
pub(crate) async fn retry_policy(
    state: &AppState,
    app: &AppId,
    endpoint: &EndpointId,
) -> ApiResult<RetryPolicy> {
    let defaults = state.config.retry;
    Ok(state
        .store
        .endpoints()
        .get_endpoint(app, endpoint)
        .await?
        .map_or(defaults, |e| e.retry.apply(defaults)))
}

/// `GET …/attempts/{attempt}`: one attempt, in full (what was sent, what came back).
pub(crate) async fn attempt(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path((app, attempt)): Path<(String, String)>,
) -> ApiResult<Json<AttemptView>> {
    let app = caller.app(&state, &app).await?;
    let id: AttemptId = path_id(&attempt, "attempt")?;
    let attempt = state
        .store
        .events()
        .get_attempt(&app.id, &id)
        .await?
        .ok_or(ApiError::NotFound("attempt"))?;
    let policy = retry_policy(&state, &app.id, &attempt.endpoint_id).await?;
    let mut view = crate::views::attempt(&attempt, &policy, language);
    // The body as signed: what the endpoint's transform made, or its event's
    // envelope (gone once retention took it), numbered if it was.
    // (A batch that sent no request — its URL or destination refused — has
    // no body to show.)
    let batch = attempt
        .batch
        .as_ref()
        .filter(|_| attempt.sent.is_some())
        .map(|b| &b.members);
    if let Some(body) = &attempt.request_body {
        view.request_body = Some(body.clone());
    } else if let Some(members) = batch.filter(|members| !members.is_empty()) {
        // A batch's first member: the whole request, made again from its
        // elements' events (none once retention took one of them).
        let ids: Vec<&EventId> = members.iter().map(|BatchElement(event, _)| event).collect();
        let bodies = state.store.events().event_bodies(&app.id, &ids).await?;
        let elements: Vec<Vec<u8>> = members
            .iter()
            .filter_map(|BatchElement(event, seq)| {
                let body = bodies.get(event)?;
                Some(hookline_core::batch::element(body, event.as_str(), *seq))
            })
            .collect();
        view.request_body = (elements.len() == members.len()).then(|| {
            let body = hookline_core::batch::body(elements.iter().map(Vec::as_slice));
            String::from_utf8_lossy(&body).into_owned()
        });
    } else if let Some(sent) = &attempt.sent {
        view.request_body = state
            .store
            .events()
            .get_event(&app.id, &sent.event_id)
            .await?
            .map(|(event, _)| {
                let body = match (sent.seq_in_body, sent.endpoint_sequence) {
                    // A batch's later member: its own element of the array
                    // (the first member's attempt shows the whole request).
                    (_, seq) if attempt.batch.is_some() => {
                        hookline_core::batch::element(&event.body, sent.event_id.as_str(), seq)
                    }
                    (true, Some(seq)) => hookline_core::model::numbered(&event.body, seq),
                    _ => event.body,
                };
                String::from_utf8_lossy(&body).into_owned()
            });
    }
    Ok(Json(view))
}

fn state_filter(state: StateParam) -> StateFilter {
    match state {
        StateParam::Pending => StateFilter::Pending,
        StateParam::InFlight => StateFilter::InFlight,
        StateParam::Succeeded => StateFilter::Succeeded,
        StateParam::Dead => StateFilter::Dead,
        StateParam::Blocked => StateFilter::Blocked,
        StateParam::Parked => StateFilter::Parked,
    }
}

/// `GET /v1/apps/{app}/deliveries`: the app's deliveries, newest first, filtered.
pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path(app): Path<String>,
    QueryParams(query): QueryParams<DeliveriesQuery>,
) -> ApiResult<Json<ListView<DeliveryView>>> {
    let app = caller.app(&state, &app).await?;
    let filter = DeliveryFilter {
        endpoint: query_id::<EndpointId>("endpoint_id", query.endpoint_id)?,
        state: query.state.map(state_filter),
        event_type: name_filter("event_type", query.event_type)?,
        event: query_id::<EventId>("event_id", query.event_id)?,
        last_status: status_filter(query.status)?,
        created: time_range(query.since, query.until)?,
    };
    let page = page(
        query.limit,
        query.before,
        hookline_store::Listings::is_delivery_cursor,
    )?;
    let deliveries = state
        .store
        .listings()
        .list_deliveries(&app.id, &filter, &page)
        .await?;
    Ok(Json(
        delivery_page(
            &state,
            &app.id,
            &deliveries,
            &page,
            hookline_store::Listings::delivery_cursor,
            language,
        )
        .await?,
    ))
}

/// The app's dead-letter queue, most recently dead first, filtered; `since` and
/// `until` bound when the deliveries died.
pub(crate) async fn dlq(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path(app): Path<String>,
    QueryParams(query): QueryParams<DlqQuery>,
) -> ApiResult<Json<ListView<DeliveryView>>> {
    let app = caller.app(&state, &app).await?;
    let filter = DlqFilter {
        endpoint: query_id::<EndpointId>("endpoint_id", query.endpoint_id)?,
        reason: query.reason,
        event_type: name_filter("event_type", query.event_type)?,
        died: time_range(query.since, query.until)?,
    };
    let page = page(
        query.limit,
        query.before,
        hookline_store::Listings::is_dlq_cursor,
    )?;
    let dead = state
        .store
        .listings()
        .list_dlq(&app.id, &filter, &page)
        .await?;
    Ok(Json(
        delivery_page(
            &state,
            &app.id,
            &dead,
            &page,
            hookline_store::Listings::dlq_cursor,
            language,
        )
        .await?,
    ))
}

/// Replays one dead delivery (same event, same `webhook-id`). Replaying a
/// delivery that is not dead changes nothing and says so (200, `replayed: false`).
/// A polling endpoint's deliveries are not sent again: its receiver fetches
/// any of them by number, in whatever state (409).
async fn refuse_polled(state: &AppState, app: &AppId, id: &DeliveryId) -> ApiResult<()> {
    let Some(delivery) = state.store.events().get_delivery(app, id).await? else {
        return Ok(());
    };
    let endpoint = state
        .store
        .endpoints()
        .get_endpoint(app, &delivery.endpoint_id)
        .await?;
    match endpoint {
        Some(endpoint) if hookline_core::destination::is_poll(&endpoint.url) => {
            Err(ApiError::Conflict(
                "a polling endpoint's delivery is not sent again: its receiver fetches it by its number",
            ))
        }
        _ => Ok(()),
    }
}

pub(crate) async fn replay(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path((app, delivery)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<ReplayView>)> {
    let app = caller.app(&state, &app).await?;
    let id: DeliveryId = path_id(&delivery, "delivery")?;
    refuse_polled(&state, &app.id, &id).await?;
    match state
        .store
        .events()
        .replay_delivery(&app.id, &id, state.clock.now())
        .await?
    {
        ReplayOutcome::Replayed(delivery) => Ok((
            StatusCode::ACCEPTED,
            Json(ReplayView {
                replayed: true,
                detail: "the delivery is pending again and will be attempted now".into(),
                delivery: view_of(&state, &app.id, &delivery, language).await?,
            }),
        )),
        ReplayOutcome::Unchanged(delivery) => Ok((
            StatusCode::OK,
            Json(ReplayView {
                replayed: false,
                detail: format!(
                    "the delivery is {}, not dead; nothing changed",
                    delivery.state
                ),
                delivery: view_of(&state, &app.id, &delivery, language).await?,
            }),
        )),
        ReplayOutcome::EndpointDeleted(_) => Err(ApiError::EndpointDeleted),
        ReplayOutcome::NotFound => Err(ApiError::NotFound("delivery")),
    }
}

/// Sends a succeeded delivery again (a new round, the same `webhook-id`), for a
/// receiver that lost what it got. On a delivery that has not succeeded it
/// changes nothing and says so (200, `resent: false`; a dead one is replayed).
pub(crate) async fn resend(
    State(state): State<AppState>,
    caller: Caller,
    Lang(language): Lang,
    Path((app, delivery)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<ResendView>)> {
    let app = caller.app(&state, &app).await?;
    let id: DeliveryId = path_id(&delivery, "delivery")?;
    refuse_polled(&state, &app.id, &id).await?;
    let (status, resent, detail, delivery) = match state
        .store
        .events()
        .resend_delivery(&app.id, &id, state.clock.now())
        .await?
    {
        ReplayOutcome::Replayed(delivery) => (
            StatusCode::ACCEPTED,
            true,
            "the delivery is pending again and will be sent now, with the same webhook-id".into(),
            delivery,
        ),
        ReplayOutcome::Unchanged(delivery) => (
            StatusCode::OK,
            false,
            format!(
                "the delivery is {}, not succeeded; nothing changed{}",
                delivery.state,
                if delivery.state == hookline_core::model::DeliveryState::Dead {
                    " (replay a dead delivery instead)"
                } else {
                    ""
                }
            ),
            delivery,
        ),
        ReplayOutcome::EndpointDeleted(_) => return Err(ApiError::EndpointDeleted),
        ReplayOutcome::NotFound => return Err(ApiError::NotFound("delivery")),
    };
    Ok((
        status,
        Json(ResendView {
            resent,
            detail,
            delivery: view_of(&state, &app.id, &delivery, language).await?,
        }),
    ))
}
