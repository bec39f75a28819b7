//! API keys, stored only as SHA-256 hashes.
//!
//! Keys are 256-bit random tokens, so a fast hash is enough (no password
//! stretching needed); looking a key up by its hash means the secret itself
//! is never compared byte by byte against stored data.

use hookline_core::access::Capabilities;
use hookline_core::ids::{ApiKeyId, AppId};
use hookline_core::time::Timestamp;

use crate::db::{On, Sql};
use crate::records::{ApiKey, KeyScope, Page};
use crate::Apps;
use crate::{parse_column, parse_optional_column, Result, Row, StoreError};

/// The columns [`key_from_row`] reads.
const KEY_COLUMNS: &str = "id, app_id, name, created_at, capabilities, expires_at";

pub(crate) static FIND_KEY: Sql =
    Sql::new(|_| format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE key_hash = $1"));

impl Apps<'_> {
    /// Stores a bootstrap key's hash (an admin key from the configuration or
    /// printed on first start), unless that hash is already stored.
    #[tracing::instrument(skip_all)]
    pub async fn insert_admin_key(&self, key_hash: &str, name: &str, now: Timestamp) -> Result<()> {
        self.engine
            .query(
                "INSERT INTO api_keys (id, key_hash, app_id, name, created_at) \
                 VALUES ($1, $2, NULL, $3, $4) ON CONFLICT (key_hash) DO NOTHING",
            )
            .bind(ApiKeyId::generate().as_str())
            .bind(key_hash)
            .bind(name)
            .bind(now.as_millis())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// The key with this hash, if any (expired ones too: the caller says why it fails).
    #[tracing::instrument(skip_all)]
    pub async fn find_api_key(&self, key_hash: &str) -> Result<Option<ApiKey>> {
        self.engine
            .query(FIND_KEY.text(self.engine))
            .bind(key_hash)
            .fetch_optional(&self.reader)
            .await?
            .map(|row| key_from_row(&row))
            .transpose()
    }

    /// Stores a new key's hash with its scope, name and expiry; the key as listed.
    #[tracing::instrument(skip_all)]
    pub async fn create_api_key(
        &self,
        key_hash: &str,
        scope: &KeyScope,
        name: &str,
        expires_at: Option<Timestamp>,
        now: Timestamp,
    ) -> Result<ApiKey> {
        let key = ApiKey {
            id: ApiKeyId::generate(),
            scope: scope.clone(),
            name: name.to_owned(),
            created_at: now,
            expires_at,
        };
        self.insert_api_key(&self.writer, key_hash, &key).await?;
        Ok(key)
    }

    /// Stores `key` under `key_hash`, on a pool or in a transaction: every key
    /// made, an admin's or a portal session's, is written by this statement.
    pub(crate) async fn insert_api_key(
        &self,
        on: impl Into<On<'_>>,
        key_hash: &str,
        key: &ApiKey,
    ) -> Result<()> {
        let (app, capabilities) = match &key.scope {
            KeyScope::Admin => (None, None),
            KeyScope::App { app, capabilities } => {
                (Some(app.as_str()), Some(capabilities.to_text()))
            }
        };
        self.engine
            .query(
                "INSERT INTO api_keys (id, key_hash, app_id, name, created_at, capabilities, expires_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
            )
            .bind(key.id.as_str())
            .bind(key_hash)
            .bind(app)
            .bind(key.name.as_str())
            .bind(key.created_at.as_millis())
            .bind(capabilities)
            .bind(key.expires_at.map(Timestamp::as_millis))
            .execute(on)
            .await?;
        Ok(())
    }

    /// Keys newest first, `page.limit` at a time after the id `page.before`:
    /// every key, or only those scoped to `app`.
    #[tracing::instrument(skip_all)]
    pub async fn list_api_keys(&self, app: Option<&AppId>, page: &Page) -> Result<Vec<ApiKey>> {
        let sql = format!(
            "SELECT {KEY_COLUMNS} FROM api_keys \
             WHERE ($1 IS NULL OR app_id = $1) AND ($2 IS NULL OR id < $2) \
             ORDER BY id DESC LIMIT $3"
        );
        let rows = self
            .engine
            .query(&sql)
            .bind(app.map(AppId::as_str))
            .bind(page.before.as_deref())
            .bind(i64::from(page.limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(key_from_row).collect()
    }

    /// Revokes (removes) a key; its hash, so callers can forget it too, or `None`
    /// if there is no such key. The last admin key is refused
    /// ([`StoreError::Conflict`]): without one nobody could manage the deployment.
    #[tracing::instrument(skip_all, fields(key = %id))]
    pub async fn revoke_api_key(&self, id: &ApiKeyId) -> Result<Option<String>> {
        let mut tx = self.writer.begin().await?;
        let Some(row) = self
            .engine
            .query("SELECT key_hash, app_id FROM api_keys WHERE id = $1")
            .bind(id.as_str())
            .fetch_optional(&mut tx)
            .await?
        else {
            return Ok(None);
        };
        let hash: String = row.try_get("key_hash")?;
        if row.try_get::<Option<String>, _>("app_id")?.is_none() {
            // Locked on PostgreSQL, so two revokes at once cannot both see another admin.
            let sql = format!(
                "SELECT id FROM api_keys WHERE app_id IS NULL{}",
                self.engine.lock(" FOR UPDATE")
            );
            let admins = self.engine.query(&sql).fetch_all(&mut tx).await?.len();
            if admins <= 1 {
                return Err(StoreError::Conflict(
                    "this is the last admin key: create another one before revoking it",
                ));
            }
        }
        self.engine
            .query("DELETE FROM api_keys WHERE id = $1")
            .bind(id.as_str())
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Some(hash))
    }

    /// Revokes every key scoped to `app`, portal sessions included, and every
    /// portal link not yet opened; the keys' hashes, so callers can forget them.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn revoke_app_keys(&self, app: &AppId) -> Result<Vec<String>> {
        let mut tx = self.writer.begin().await?;
        self.engine
            .query("DELETE FROM portal_codes WHERE app_id = $1")
            .bind(app.as_str())
            .execute(&mut tx)
            .await?;
        let rows = self
            .engine
            .query("DELETE FROM api_keys WHERE app_id = $1 RETURNING key_hash")
            .bind(app.as_str())
            .fetch_all(&mut tx)
            .await?;
        tx.commit().await?;
        rows.iter()
            .map(|row| Ok(row.try_get("key_hash")?))
            .collect()
    }

    /// Whether any admin key exists (to decide whether to generate a bootstrap key).
    #[tracing::instrument(skip_all)]
    pub async fn has_admin_key(&self) -> Result<bool> {
        let row = self
            .engine
            .query("SELECT COUNT(*) AS n FROM api_keys WHERE app_id IS NULL")
            .fetch_one(&self.reader)
            .await?;
        Ok(row.try_get::<i64, _>("n")? > 0)
    }
}

fn key_from_row(row: &Row) -> Result<ApiKey> {
    let scope = match parse_optional_column::<AppId>(row, "app_id")? {
        None => KeyScope::Admin,
        Some(app) => KeyScope::App {
            app,
            // Keys made before capabilities existed could do everything in their app.
            capabilities: match row.try_get::<Option<String>, _>("capabilities")? {
                None => Capabilities::all(),
                Some(text) => Capabilities::parse_text(&text)
                    .map_err(|e| StoreError::Corrupt(format!("capabilities: {e}")))?,
            },
        },
    };
    Ok(ApiKey {
        id: parse_column(row, "id")?,
        scope,
        name: row.try_get("name")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        expires_at: row
            .try_get::<Option<i64>, _>("expires_at")?
            .map(Timestamp::from_millis),
    })
}
