//! Apps and their customer-portal links.

use futures_util::Stream;
use reqwest::Method;

use crate::request::app_path;
use crate::types::{AppView, CreateApp, ListView, PageQuery, PortalAccess, PortalLink, UpdateApp};
use crate::{Client, Result};

impl Client {
    /// `POST /v1/apps` (admin).
    pub async fn create_app(&self, app: &CreateApp) -> Result<AppView> {
        self.write(Method::POST, "/v1/apps".into(), Some(app)).await
    }

    /// `GET /v1/apps/{app}`: by id or by your own uid.
    pub async fn get_app(&self, app: &str) -> Result<AppView> {
        self.read(app_path(app, "")?, None).await
    }

    /// `GET /v1/apps` (admin): one page.
    pub async fn list_apps(&self, page: &PageQuery) -> Result<ListView<AppView>> {
        self.read("/v1/apps".into(), Some(page)).await
    }

    /// Every app, following the cursor.
    pub fn apps_stream(&self, page: PageQuery) -> impl Stream<Item = Result<AppView>> + Send {
        self.stream(Ok("/v1/apps".into()), page)
    }

    /// `PATCH /v1/apps/{app}` (admin).
    pub async fn update_app(&self, app: &str, patch: &UpdateApp) -> Result<AppView> {
        self.write(Method::PATCH, app_path(app, "")?, Some(patch))
            .await
    }

    /// `DELETE /v1/apps/{app}` (admin): the app and everything it owns.
    pub async fn delete_app(&self, app: &str) -> Result<()> {
        self.delete(app_path(app, "")?).await
    }

    /// `POST /v1/apps/{app}/portal-access` (admin): a link that opens the
    /// app's customer portal once.
    pub async fn portal_access(&self, app: &str, access: &PortalAccess) -> Result<PortalLink> {
        self.write(Method::POST, app_path(app, "/portal-access")?, Some(access))
            .await
    }
}
