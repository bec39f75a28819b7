//! The benchmark's calls to Hookline's HTTP API: the management calls through
//! `hookline-client`, and what the load producers need to publish with their
//! own pre-built bodies (the load generator shares the machine it measures, so
//! it sends bytes it built once rather than serialising a request per event).

use anyhow::Context;
use futures_util::TryStreamExt;
use hookline_client::types::{CreateApp, CreateEndpoint, DeliveryView, DlqQuery};
use hookline_client::{Client, Retries};
use hookline_core::batch::Batching;

/// Hookline's API at one base URL with one bearer token.
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
    client: Client,
}

impl Api {
    pub fn new(http: reqwest::Client, base: &str, token: &str) -> anyhow::Result<Self> {
        let client = Client::builder(base, token)
            .http_client(http.clone())
            // A benchmark reports failures; it does not paper over them.
            .retries(Retries::none())
            .build()?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            client,
        })
    }

    /// A new app → its id.
    pub async fn create_app(&self, name: &str) -> anyhow::Result<String> {
        let app = CreateApp {
            name: name.to_owned(),
            ..CreateApp::default()
        };
        let created = self
            .client
            .create_app(&app)
            .await
            .context("creating the app")?;
        Ok(created.id)
    }

    /// An endpoint at `url` for every type, with an optional payload filter,
    /// transform and batching → its id.
    pub async fn create_endpoint(
        &self,
        app: &str,
        url: &str,
        filter: Option<&str>,
        transform: Option<&str>,
        batch: Option<Batching>,
    ) -> anyhow::Result<String> {
        let endpoint = CreateEndpoint {
            filter: filter.map(str::to_owned),
            transform: transform.map(str::to_owned),
            batch,
            ..CreateEndpoint::new(url)
        };
        let created = self
            .client
            .create_endpoint(app, &endpoint)
            .await
            .with_context(|| {
                format!(
                    "creating an endpoint for {url} (an external Hookline must run with \
                     HOOKLINE_ALLOW_PRIVATE_DESTINATIONS=true)"
                )
            })?;
        Ok(created.id)
    }

    /// Every entry of the app's dead-letter queue.
    pub async fn dead_letters(&self, app: &str) -> anyhow::Result<Vec<DeliveryView>> {
        let query = DlqQuery {
            limit: Some(250),
            ..DlqQuery::default()
        };
        self.client
            .dlq_stream(app, query)
            .try_collect()
            .await
            .context("reading the DLQ")
    }
}

/// The ULID of a `msg_…` id as a number.
pub fn event_key(id: &str) -> Option<u128> {
    id.strip_prefix("msg_")
        .and_then(|ulid| ulid::Ulid::from_string(ulid).ok())
        .map(u128::from)
}
