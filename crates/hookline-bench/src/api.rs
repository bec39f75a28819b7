//! The few management calls the benchmark makes to Hookline's HTTP API.

use anyhow::{bail, Context};
use serde::Deserialize;
use serde_json::json;

/// Hookline's API at one base URL with one bearer token.
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

#[derive(Deserialize)]
struct Page<T> {
    data: Vec<T>,
    next_cursor: Option<String>,
}

/// One entry of the dead-letter queue.
#[derive(Debug, Deserialize)]
pub struct DeadLetter {
    pub event_id: String,
    pub endpoint_id: String,
}

impl Api {
    pub fn new(http: reqwest::Client, base: &str, token: &str) -> Self {
        Self {
            http,
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
        }
    }

    /// `POST /v1/apps {"name"}` → the app id.
    pub async fn create_app(&self, name: &str) -> anyhow::Result<String> {
        let created: Created = self
            .post_json("/v1/apps", &json!({ "name": name }), 201)
            .await
            .context("creating the app")?;
        Ok(created.id)
    }

    /// `POST /v1/apps/{app}/endpoints {"url", "filter"}` → the endpoint id.
    pub async fn create_endpoint(
        &self,
        app: &str,
        url: &str,
        filter: Option<&str>,
    ) -> anyhow::Result<String> {
        let mut body = json!({ "url": url });
        if let Some(filter) = filter {
            // Only when given: a Hookline before filters refuses the field.
            body["filter"] = json!(filter);
        }
        let created: Created = self
            .post_json(&format!("/v1/apps/{app}/endpoints"), &body, 201)
            .await
            .with_context(|| {
                format!(
                    "creating an endpoint for {url} (an external Hookline must run with \
                     HOOKLINE_ALLOW_PRIVATE_DESTINATIONS=true)"
                )
            })?;
        Ok(created.id)
    }

    /// Every entry of the app's dead-letter queue (`GET …/dlq?limit=250`, following `next_cursor`).
    pub async fn dead_letters(&self, app: &str) -> anyhow::Result<Vec<DeadLetter>> {
        let mut all = Vec::new();
        let mut before: Option<String> = None;
        loop {
            let mut request = self
                .http
                .get(format!("{}/v1/apps/{app}/dlq", self.base))
                .bearer_auth(&self.token)
                .query(&[("limit", "250")]);
            if let Some(cursor) = &before {
                request = request.query(&[("before", cursor.as_str())]);
            }
            let response = request.send().await.context("reading the DLQ")?;
            let page: Page<DeadLetter> = expect_json(response, 200)
                .await
                .context("reading the DLQ")?;
            all.extend(page.data);
            match page.next_cursor {
                Some(cursor) => before = Some(cursor),
                None => return Ok(all),
            }
        }
    }

    async fn post_json<T: for<'de> Deserialize<'de>>(
        &self,
        path: &str,
        body: &serde_json::Value,
        status: u16,
    ) -> anyhow::Result<T> {
        let response = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await?;
        expect_json(response, status).await
    }
}

/// The body as JSON if the status is `status`, else an error with the status and the body.
pub async fn expect_json<T: for<'de> Deserialize<'de>>(
    response: reqwest::Response,
    status: u16,
) -> anyhow::Result<T> {
    let actual = response.status();
    let bytes = response.bytes().await?;
    if actual.as_u16() != status {
        bail!(
            "expected {status}, got {actual}: {}",
            String::from_utf8_lossy(&bytes[..bytes.len().min(500)])
        );
    }
    serde_json::from_slice(&bytes).context("unexpected JSON")
}

/// The ULID of a `msg_…` id as a number.
pub fn event_key(id: &str) -> Option<u128> {
    id.strip_prefix("msg_")
        .and_then(|ulid| ulid::Ulid::from_string(ulid).ok())
        .map(u128::from)
}
