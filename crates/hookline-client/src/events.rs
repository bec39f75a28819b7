//! The producer API: publish one event or a batch, with idempotency keys that
//! make a retry safe; and the events an app has published.

use futures_util::Stream;
use reqwest::Method;

use crate::request::{app_path, to_json};
use crate::request::{Call, Safe};
use crate::types::{
    BatchAnswer, BatchItem, BatchItemAnswer, BatchRequest, EventView, EventsQuery, ListView,
    PublishRequest, PublishedView,
};
use crate::{segment, Client, Result};

/// A publish's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    /// The event and its deliveries (one per subscribed endpoint).
    pub event: PublishedView,
    /// The key had been used with this same event: nothing new was stored,
    /// and this is the first answer again.
    pub replayed: bool,
    /// The idempotency key it went with (yours, or the one generated).
    pub idempotency_key: String,
}

/// A fresh idempotency key, for a publish that came without one.
fn generated_key() -> String {
    format!("hkc_{}", ulid::Ulid::new())
}

impl Client {
    /// `POST /v1/apps/{app}/events` with a generated idempotency key, retried
    /// while it fails in passing (a retry repeats the key: one event, never two).
    pub async fn publish(&self, app: &str, event: &PublishRequest) -> Result<Published> {
        self.publish_with_key(app, event, &generated_key()).await
    }

    /// [`publish`](Self::publish) with your own key: the same key and body
    /// later answer the same event (`replayed`); the same key with another
    /// body is refused (`idempotency_key_reused`).
    pub async fn publish_with_key(
        &self,
        app: &str,
        event: &PublishRequest,
        idempotency_key: &str,
    ) -> Result<Published> {
        let answer = self
            .inner
            .call(Call {
                method: Method::POST,
                path: app_path(app, "/events")?,
                query: None,
                body: Some(to_json(event)?),
                idempotency_key: Some(idempotency_key),
                safe: Safe::Retry,
            })
            .await?;
        Ok(Published {
            event: answer.json()?,
            replayed: answer.replayed,
            idempotency_key: idempotency_key.to_owned(),
        })
    }

    /// `POST /v1/apps/{app}/events/batch`: up to 1,000 events in one
    /// transaction. Items without an `idempotency_key` get a generated one, so
    /// the batch is retried like a single publish. The answers are in order.
    pub async fn publish_batch(
        &self,
        app: &str,
        items: Vec<BatchItem>,
    ) -> Result<Vec<BatchItemAnswer>> {
        let events = items
            .into_iter()
            .map(|mut item| {
                item.idempotency_key.get_or_insert_with(generated_key);
                to_json(&item)
            })
            .collect::<Result<_>>()?;
        let answer = self
            .inner
            .call(Call {
                method: Method::POST,
                path: app_path(app, "/events/batch")?,
                query: None,
                body: Some(to_json(&BatchRequest { events })?),
                idempotency_key: None,
                safe: Safe::Retry,
            })
            .await?;
        Ok(answer.json::<BatchAnswer>()?.data)
    }

    /// `GET …/events/{event}`: its payload and deliveries.
    pub async fn get_event(&self, app: &str, event: &str) -> Result<EventView> {
        self.read(
            app_path(app, &format!("/events/{}", segment(event)?))?,
            None,
        )
        .await
    }

    /// One page of an app's events (payloads, without deliveries).
    pub async fn list_events(&self, app: &str, query: &EventsQuery) -> Result<ListView<EventView>> {
        self.read(app_path(app, "/events")?, Some(query)).await
    }

    /// Every event `query` matches, following the cursor.
    pub fn events_stream(
        &self,
        app: &str,
        query: EventsQuery,
    ) -> impl Stream<Item = Result<EventView>> + Send {
        self.stream(app_path(app, "/events"), query)
    }
}
