//! Endpoints: where an app's events go.

use hookline_core::ids::{AppId, EndpointId};
use hookline_core::model::DeliveryState;
use hookline_core::time::Timestamp;
use sqlx::any::AnyRow;
use sqlx::Row;

use crate::records::{Endpoint, EndpointPatch, NewEndpoint, Page, RetryOverrides};
use crate::{parse_column, Result, Store, StoreError};

pub(crate) const ENDPOINT_COLUMNS: &str =
    "id, app_id, url, description, event_types, enabled, secret, \
     retry_base_ms, retry_cap_ms, max_attempts, max_age_secs, created_at, updated_at";

pub(crate) fn retry_from_row(row: &AnyRow) -> Result<RetryOverrides> {
    let get = |column: &str| -> Result<Option<i64>> { Ok(row.try_get::<Option<i64>, _>(column)?) };
    Ok(RetryOverrides {
        retry_base_ms: get("retry_base_ms")?.map(|v| v as u64),
        retry_cap_ms: get("retry_cap_ms")?.map(|v| v as u64),
        max_attempts: get("max_attempts")?.map(|v| v as u32),
        max_age_secs: get("max_age_secs")?.map(|v| v as u64),
    })
}

pub(crate) fn event_types_from_json(text: Option<String>) -> Result<Option<Vec<String>>> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(format!("event_types: {e}")))
    })
    .transpose()
}

fn endpoint_from_row(row: &AnyRow) -> Result<Endpoint> {
    let secret: String = row.try_get("secret")?;
    Ok(Endpoint {
        id: parse_column(row, "id")?,
        app_id: parse_column(row, "app_id")?,
        url: row.try_get("url")?,
        description: row.try_get("description")?,
        event_types: event_types_from_json(row.try_get("event_types")?)?,
        enabled: row.try_get::<i64, _>("enabled")? != 0,
        secret: hookline_core::signing::EndpointSecret::parse(&secret)
            .map_err(|_| StoreError::Corrupt("endpoint secret".into()))?,
        retry: retry_from_row(row)?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn to_i64<T: Into<u64>>(value: Option<T>) -> Option<i64> {
    value.map(|v| v.into().min(i64::MAX as u64) as i64)
}

fn event_types_json(types: &Option<Vec<String>>) -> Option<String> {
    types
        .as_ref()
        .map(|t| serde_json::to_string(t).expect("strings serialize"))
}

impl Store {
    /// Creates an endpoint of an existing app.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn create_endpoint(
        &self,
        app: &AppId,
        new: NewEndpoint,
        now: Timestamp,
    ) -> Result<Endpoint> {
        let endpoint = Endpoint {
            id: EndpointId::generate(),
            app_id: app.clone(),
            url: new.url,
            description: new.description,
            event_types: new.event_types,
            enabled: new.enabled,
            secret: new.secret,
            retry: new.retry,
            created_at: now,
            updated_at: now,
        };
        sqlx::query(
            "INSERT INTO endpoints (id, app_id, url, description, event_types, enabled, secret, \
             retry_base_ms, retry_cap_ms, max_attempts, max_age_secs, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)",
        )
        .bind(endpoint.id.as_str())
        .bind(app.as_str())
        .bind(&endpoint.url)
        .bind(&endpoint.description)
        .bind(event_types_json(&endpoint.event_types))
        .bind(i64::from(endpoint.enabled))
        .bind(endpoint.secret.expose())
        .bind(to_i64(endpoint.retry.retry_base_ms))
        .bind(to_i64(endpoint.retry.retry_cap_ms))
        .bind(to_i64(endpoint.retry.max_attempts))
        .bind(to_i64(endpoint.retry.max_age_secs))
        .bind(now.as_millis())
        .execute(&self.writer)
        .await?;
        Ok(endpoint)
    }

    /// One endpoint of an app.
    #[tracing::instrument(skip_all, fields(app = %app, endpoint = %id))]
    pub async fn get_endpoint(&self, app: &AppId, id: &EndpointId) -> Result<Option<Endpoint>> {
        let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE id = $1 AND app_id = $2");
        sqlx::query(&sql)
            .bind(id.as_str())
            .bind(app.as_str())
            .fetch_optional(&self.reader)
            .await?
            .map(|row| endpoint_from_row(&row))
            .transpose()
    }

    /// An app's endpoints, newest first.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn list_endpoints(&self, app: &AppId, page: &Page) -> Result<Vec<Endpoint>> {
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE app_id = $1 AND ($2 IS NULL OR id < $2) \
             ORDER BY id DESC LIMIT $3"
        );
        let rows = sqlx::query(&sql)
            .bind(app.as_str())
            .bind(page.before.as_deref())
            .bind(i64::from(page.limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(endpoint_from_row).collect()
    }

    /// Applies a patch; `None` if the endpoint does not exist.
    #[tracing::instrument(skip_all, fields(app = %app, endpoint = %id))]
    pub async fn update_endpoint(
        &self,
        app: &AppId,
        id: &EndpointId,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> Result<Option<Endpoint>> {
        let mut tx = self.writer.begin().await?;
        let sql = format!("SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE id = $1 AND app_id = $2");
        let Some(row) = sqlx::query(&sql)
            .bind(id.as_str())
            .bind(app.as_str())
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(None);
        };
        let mut endpoint = endpoint_from_row(&row)?;
        if let Some(url) = patch.url {
            endpoint.url = url;
        }
        if let Some(description) = patch.description {
            endpoint.description = description;
        }
        if let Some(event_types) = patch.event_types {
            endpoint.event_types = event_types;
        }
        if let Some(enabled) = patch.enabled {
            endpoint.enabled = enabled;
        }
        if let Some(retry) = patch.retry {
            endpoint.retry = retry;
        }
        endpoint.updated_at = now;
        sqlx::query(
            "UPDATE endpoints SET url = $3, description = $4, event_types = $5, enabled = $6, \
             retry_base_ms = $7, retry_cap_ms = $8, max_attempts = $9, max_age_secs = $10, updated_at = $11 \
             WHERE id = $1 AND app_id = $2",
        )
        .bind(id.as_str())
        .bind(app.as_str())
        .bind(&endpoint.url)
        .bind(&endpoint.description)
        .bind(event_types_json(&endpoint.event_types))
        .bind(i64::from(endpoint.enabled))
        .bind(to_i64(endpoint.retry.retry_base_ms))
        .bind(to_i64(endpoint.retry.retry_cap_ms))
        .bind(to_i64(endpoint.retry.max_attempts))
        .bind(to_i64(endpoint.retry.max_age_secs))
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Some(endpoint))
    }

    /// Deletes an endpoint with its deliveries and their attempts; `false` if it did not exist.
    ///
    /// Deleting is the user's explicit "stop and forget": pending deliveries to it are dropped.
    #[tracing::instrument(skip_all, fields(app = %app, endpoint = %id))]
    pub async fn delete_endpoint(&self, app: &AppId, id: &EndpointId) -> Result<bool> {
        let mut tx = self.writer.begin().await?;
        let deleted = sqlx::query("DELETE FROM endpoints WHERE id = $1 AND app_id = $2")
            .bind(id.as_str())
            .bind(app.as_str())
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if deleted == 1 {
            for table in ["attempts", "deliveries"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE endpoint_id = $1"))
                    .bind(id.as_str())
                    .execute(&mut *tx)
                    .await?;
            }
        }
        tx.commit().await?;
        Ok(deleted == 1)
    }

    /// How many of an endpoint's deliveries are in `state` (for tests and the health view).
    #[tracing::instrument(skip_all, fields(endpoint = %id))]
    pub async fn count_deliveries(&self, id: &EndpointId, state: DeliveryState) -> Result<u64> {
        let count: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM deliveries WHERE endpoint_id = $1 AND state = $2",
        )
        .bind(id.as_str())
        .bind(state.as_str())
        .fetch_one(&self.reader)
        .await?;
        Ok(count as u64)
    }
}
