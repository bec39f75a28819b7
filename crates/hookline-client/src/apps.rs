//! Apps, their customer-portal links, and the plumbing every resource shares:
//! reads, writes and listings that follow their cursor.

use std::collections::VecDeque;

use futures_util::Stream;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::request::{Call, ErasedQuery, Safe};
use crate::types::{
    AppView, AttemptsQuery, CreateApp, DeliveriesQuery, DlqQuery, EventsQuery, KeyQuery, ListView,
    PageQuery, PortalAccess, PortalLink, UpdateApp,
};
use crate::{segment, Client, Result};

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

    /// A `GET`, retried when it fails in passing.
    pub(crate) async fn read<T: DeserializeOwned>(
        &self,
        path: String,
        query: Option<&(dyn ErasedQuery + Sync)>,
    ) -> Result<T> {
        self.inner
            .call(Call {
                method: Method::GET,
                path,
                query,
                body: None,
                idempotency_key: None,
                safe: Safe::Retry,
            })
            .await?
            .json()
    }

    /// A change, sent once.
    pub(crate) async fn write<T: DeserializeOwned>(
        &self,
        method: Method,
        path: String,
        body: Option<&(impl Serialize + ?Sized)>,
    ) -> Result<T> {
        self.inner
            .call(Call {
                method,
                path,
                query: None,
                body: body.map(to_json).transpose()?,
                idempotency_key: None,
                safe: Safe::Once,
            })
            .await?
            .json()
    }

    /// A `DELETE` answered with no content.
    pub(crate) async fn delete(&self, path: String) -> Result<()> {
        self.inner
            .call(Call {
                method: Method::DELETE,
                path,
                query: None,
                body: None,
                idempotency_key: None,
                safe: Safe::Once,
            })
            .await
            .map(drop)
    }

    /// Every row of a listing from `query`'s page on, page after page.
    /// (A path that is not one makes a stream of that one error.)
    pub(crate) fn stream<T, Q>(
        &self,
        path: Result<String>,
        query: Q,
    ) -> impl Stream<Item = Result<T>> + Send
    where
        T: DeserializeOwned + Send + 'static,
        Q: Cursor + Serialize + Send + Sync + 'static,
    {
        struct State<T, Q> {
            client: Client,
            path: String,
            /// A path that is not one: the stream's one item.
            refused: Option<crate::Error>,
            query: Q,
            rows: VecDeque<T>,
            last_page: bool,
        }
        let (path, refused) = match path {
            Ok(path) => (path, None),
            Err(error) => (String::new(), Some(error)),
        };
        let state = State {
            client: self.clone(),
            path,
            refused,
            query,
            rows: VecDeque::new(),
            last_page: false,
        };
        futures_util::stream::try_unfold(state, |mut state| async move {
            loop {
                if let Some(row) = state.rows.pop_front() {
                    return Ok(Some((row, state)));
                }
                if state.last_page {
                    return Ok(None);
                }
                if let Some(error) = state.refused.take() {
                    return Err(error);
                }
                let page: ListView<T> = state
                    .client
                    .read(state.path.clone(), Some(&state.query))
                    .await?;
                state.rows = page.data.into();
                match page.next_cursor {
                    Some(cursor) => state.query.continue_after(cursor),
                    None => state.last_page = true,
                }
            }
        })
    }
}

pub(crate) fn to_json(body: &(impl Serialize + ?Sized)) -> Result<serde_json::Value> {
    serde_json::to_value(body).map_err(crate::Error::Encode)
}

/// `/v1/apps/{app}{rest}`.
pub(crate) fn app_path(app: &str, rest: &str) -> Result<String> {
    Ok(format!("/v1/apps/{}{rest}", segment(app)?))
}

/// A listing's query, continued on its next page.
pub(crate) trait Cursor {
    fn continue_after(&mut self, cursor: String);
}

macro_rules! cursor {
    ($($query:ty),*) => {$(
        impl Cursor for $query {
            fn continue_after(&mut self, cursor: String) {
                self.before = Some(cursor);
            }
        }
    )*};
}
cursor!(
    PageQuery,
    DeliveriesQuery,
    DlqQuery,
    EventsQuery,
    AttemptsQuery,
    KeyQuery
);
