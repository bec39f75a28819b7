//! `GET /v1/apps/{app}/endpoints/{endpoint}/messages`: an endpoint's
//! deliveries by their sequence numbers, each signed as a push is, so a
//! receiver that sees a gap in the numbers can fetch what it lacks (docs/api.md,
//! "Sequence numbers").

use std::collections::{BTreeMap, HashMap};

use axum::extract::{Path, State};
use axum::Json;
use hookline_core::model::{self, DeliveryState, ENDPOINT_SEQUENCE_HEADER};
use hookline_core::signing::SigningKeys;
use hookline_store::MAX_SEQUENCE_RANGE;
use hookline_types::{
    CommitMessages, CommittedView, MessageState, MessageView, MessagesQuery, MessagesView,
};

use super::endpoints::find;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::extract::{JsonBody, QueryParams};
use crate::AppState;

/// The longest a fetch waits for a number (`wait_secs`).
const MAX_WAIT_SECS: u32 = 30;
/// How often a waiting fetch looks at the endpoint's counter.
const POLL_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

/// `POST …/messages/commit {cursor}`: a polling endpoint's receiver handled
/// every number up to `cursor`: its deliveries up to there that are still
/// pending become `succeeded`, and the cursor moves there (never back). 409
/// for an endpoint that does not poll, or a cursor past its last number.
pub(crate) async fn commit(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
    body: JsonBody<CommitMessages>,
) -> ApiResult<Json<CommittedView>> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    if !hookline_core::destination::is_poll(&endpoint.url) {
        return Err(ApiError::Conflict(
            "only a polling endpoint's receiver commits its deliveries (its url is poll:)",
        ));
    }
    let cursor = body.value.cursor;
    if cursor > i64::MAX as u64 {
        return Err(ApiError::Validation(format!(
            "cursor must be at most {}",
            i64::MAX
        )));
    }
    let events = state.store.events();
    let committed = events
        .commit_messages(&endpoint.id, cursor, state.clock.now())
        .await?
        .ok_or(ApiError::Conflict(
            "the cursor is past the last number the endpoint has given",
        ))?;
    Ok(Json(CommittedView {
        endpoint_id: endpoint.id.to_string(),
        committed_seq: committed.committed_seq,
        delivered: committed.delivered,
        last_seq: events.last_sequence(&endpoint.id).await?,
    }))
}

/// `GET …/messages?from_seq=&to_seq=`: the numbers of the range that exist (up
/// to the endpoint's last), at most [`MAX_SEQUENCE_RANGE`] of them, each with
/// its envelope signed now; `next_seq` where the range goes on. A range that
/// ends below its start is empty.
pub(crate) async fn range(
    State(state): State<AppState>,
    caller: Caller,
    Path((app, endpoint)): Path<(String, String)>,
    QueryParams(query): QueryParams<MessagesQuery>,
) -> ApiResult<Json<MessagesView>> {
    let endpoint = find(&state, &caller, &app, &endpoint).await?;
    if query.after.is_some_and(|after| after >= i64::MAX as u64) {
        return Err(ApiError::InvalidQuery(format!(
            "after must be below {}",
            i64::MAX
        )));
    }
    let limit = match query.limit {
        None => MAX_SEQUENCE_RANGE,
        Some(limit @ 1..=100) => u64::from(limit),
        Some(_) => return Err(ApiError::InvalidQuery("limit must be from 1 to 100".into())),
    };
    // Where the read starts: `from_seq`, or past a consumer's cursor.
    let from = query
        .from_seq
        .unwrap_or(1)
        .max(query.after.map_or(1, |after| after + 1));
    if query.from_seq == Some(0) || query.to_seq == Some(0) {
        return Err(ApiError::InvalidQuery(
            "from_seq and to_seq must be 1 or more: an endpoint's numbers start at 1".into(),
        ));
    }
    // Numbers are stored as 64-bit signed integers.
    if from.max(query.to_seq.unwrap_or(0)) > i64::MAX as u64 {
        return Err(ApiError::InvalidQuery(format!(
            "from_seq and to_seq must be at most {}",
            i64::MAX
        )));
    }
    let wait = match query.wait_secs {
        Some(secs) if secs > MAX_WAIT_SECS => {
            return Err(ApiError::InvalidQuery(format!(
                "wait_secs must be at most {MAX_WAIT_SECS}"
            )))
        }
        secs => std::time::Duration::from_secs(u64::from(secs.unwrap_or(0))),
    };
    let events = state.store.events();
    let mut last_seq = events.last_sequence(&endpoint.id).await?;
    // A long poll: until a number at or past `from` exists, or the wait is over
    // (the counter is read again every quarter second: a publish on any node
    // moves it).
    let deadline = tokio::time::Instant::now() + wait;
    while last_seq < from && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(POLL_EVERY.min(deadline - tokio::time::Instant::now())).await;
        last_seq = events.last_sequence(&endpoint.id).await?;
    }
    let asked = query
        .to_seq
        .unwrap_or(from.saturating_add(MAX_SEQUENCE_RANGE - 1))
        .min(last_seq);
    let end = asked.min(from.saturating_add(limit.min(MAX_SEQUENCE_RANGE) - 1));
    let mut view = MessagesView {
        endpoint_id: endpoint.id.to_string(),
        last_seq,
        messages: Vec::new(),
        next_seq: (end < asked).then_some(end + 1),
    };
    if from > end {
        return Ok(Json(view));
    }
    let numbered: HashMap<u64, _> = events
        .numbered_deliveries(&endpoint.id, from, end)
        .await?
        .into_iter()
        .collect();
    let keys = SigningKeys {
        current: endpoint.secret.clone(),
        previous: endpoint.previous_secret.clone(),
    };
    let timestamp = state.clock.now().as_secs();
    for seq in from..=end {
        let purged = |delivery_id: Option<String>| MessageView {
            seq,
            state: MessageState::Purged,
            delivery_id,
            event_id: None,
            event_type: None,
            body: None,
            headers: BTreeMap::new(),
        };
        let Some(id) = numbered.get(&seq) else {
            view.messages.push(purged(None));
            continue;
        };
        let (event_id, _) = id.target();
        let found = events.get_event(&endpoint.app_id, &event_id).await?;
        let Some((event, delivery)) = found.and_then(|(event, deliveries)| {
            let delivery = deliveries.into_iter().find(|d| d.id == *id)?;
            Some((event, delivery))
        }) else {
            view.messages.push(purged(Some(id.to_string())));
            continue;
        };
        let body = match endpoint.seq_in_body {
            true => model::numbered(&event.body, seq),
            false => event.body,
        };
        let signature = keys.signature_header(event.id.as_str(), timestamp, &body);
        view.messages.push(MessageView {
            seq,
            state: match delivery.state {
                DeliveryState::Pending | DeliveryState::InFlight | DeliveryState::Blocked => {
                    MessageState::Pending
                }
                DeliveryState::Succeeded => MessageState::Succeeded,
                DeliveryState::Dead => MessageState::Dead,
            },
            delivery_id: Some(id.to_string()),
            event_id: Some(event.id.to_string()),
            event_type: Some(event.event_type),
            body: Some(String::from_utf8_lossy(&body).into_owned()),
            headers: BTreeMap::from([
                ("webhook-id".to_owned(), event.id.to_string()),
                ("webhook-timestamp".to_owned(), timestamp.to_string()),
                ("webhook-signature".to_owned(), signature),
                (ENDPOINT_SEQUENCE_HEADER.to_owned(), seq.to_string()),
            ]),
        });
    }
    Ok(Json(view))
}
