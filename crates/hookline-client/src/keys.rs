//! API keys (admin) and the event type catalog.

use futures_util::Stream;
use reqwest::Method;

use crate::request::app_path;
use crate::types::{
    CreateEventType, CreateKey, EventTypeView, KeyQuery, KeyView, ListView, RevokedView,
    UpdateEventType,
};
use crate::{segment, Client, Result};

impl Client {
    /// `POST /v1/keys`: the answer's `key` is shown this once.
    pub async fn create_key(&self, key: &CreateKey) -> Result<KeyView> {
        self.write(Method::POST, "/v1/keys".into(), Some(key)).await
    }

    pub async fn list_keys(&self, query: &KeyQuery) -> Result<ListView<KeyView>> {
        self.read("/v1/keys".into(), Some(query)).await
    }

    /// Every key (of one app, with `query.app`), following the cursor.
    pub fn keys_stream(&self, query: KeyQuery) -> impl Stream<Item = Result<KeyView>> + Send {
        self.stream(Ok("/v1/keys".into()), query)
    }

    /// `DELETE /v1/keys/{key}`.
    pub async fn revoke_key(&self, key: &str) -> Result<()> {
        self.delete(format!("/v1/keys/{}", segment(key)?)).await
    }

    /// `DELETE /v1/apps/{app}/keys`: every key of an app, portal sessions included.
    pub async fn revoke_app_keys(&self, app: &str) -> Result<RevokedView> {
        self.write(Method::DELETE, app_path(app, "/keys")?, None::<&()>)
            .await
    }

    /// `POST /v1/event-types` (admin).
    pub async fn create_event_type(&self, event_type: &CreateEventType) -> Result<EventTypeView> {
        self.write(Method::POST, "/v1/event-types".into(), Some(event_type))
            .await
    }

    /// The whole catalog, by name (one page holds it).
    pub async fn list_event_types(&self) -> Result<ListView<EventTypeView>> {
        self.read("/v1/event-types".into(), None).await
    }

    pub async fn get_event_type(&self, name: &str) -> Result<EventTypeView> {
        self.read(format!("/v1/event-types/{}", segment(name)?), None)
            .await
    }

    pub async fn update_event_type(
        &self,
        name: &str,
        patch: &UpdateEventType,
    ) -> Result<EventTypeView> {
        self.write(
            Method::PATCH,
            format!("/v1/event-types/{}", segment(name)?),
            Some(patch),
        )
        .await
    }

    pub async fn delete_event_type(&self, name: &str) -> Result<()> {
        self.delete(format!("/v1/event-types/{}", segment(name)?))
            .await
    }
}
