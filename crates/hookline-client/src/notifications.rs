//! An app's notification channels: where its customers are told that its
//! endpoints broke (e-mail, Slack, Microsoft Teams, Discord).

use reqwest::Method;

use crate::request::app_path;
use crate::types::{CreateNotificationChannel, NotificationChannelView, NotificationChannelsView};
use crate::{segment, Client, Result};

impl Client {
    /// `GET /v1/apps/{app}/notifications`: every channel, oldest first.
    pub async fn notification_channels(&self, app: &str) -> Result<NotificationChannelsView> {
        self.read(app_path(app, "/notifications")?, None).await
    }

    /// `POST /v1/apps/{app}/notifications`.
    pub async fn create_notification_channel(
        &self,
        app: &str,
        channel: &CreateNotificationChannel,
    ) -> Result<NotificationChannelView> {
        self.write(
            Method::POST,
            app_path(app, "/notifications")?,
            Some(channel),
        )
        .await
    }

    /// `DELETE /v1/apps/{app}/notifications/{channel}`.
    pub async fn delete_notification_channel(&self, app: &str, channel: &str) -> Result<()> {
        self.delete(app_path(
            app,
            &format!("/notifications/{}", segment(channel)?),
        )?)
        .await
    }
}
