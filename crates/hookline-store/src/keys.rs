//! API keys, stored only as SHA-256 hashes.
//!
//! Keys are 256-bit random tokens, so a fast hash is enough (no password
//! stretching needed); looking a key up by its hash means the secret itself
//! is never compared byte by byte against stored data.

use hookline_core::ids::{ApiKeyId, AppId};
use hookline_core::time::Timestamp;

use crate::records::{ApiKey, KeyScope, Page};
use crate::{parse_column, parse_optional_column, Result, Store, StoreError};

impl Store {
    /// Stores a key's hash with its scope, unless that hash is already stored.
    #[tracing::instrument(skip_all)]
    pub async fn insert_api_key(
        &self,
        key_hash: &str,
        scope: &KeyScope,
        name: &str,
        now: Timestamp,
    ) -> Result<()> {
        let app = match scope {
            KeyScope::Admin => None,
            KeyScope::App(app) => Some(app.as_str()),
        };
        self.engine.query(
            "INSERT INTO api_keys (id, key_hash, app_id, name, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT (key_hash) DO NOTHING",
        )
        .bind(ApiKeyId::generate().as_str())
        .bind(key_hash)
        .bind(app)
        .bind(name)
        .bind(now.as_millis())
        .execute(&self.writer)
        .await?;
        Ok(())
    }

    /// The scope of the key with this hash, if any.
    #[tracing::instrument(skip_all)]
    pub async fn find_api_key(&self, key_hash: &str) -> Result<Option<KeyScope>> {
        let Some(row) = self
            .engine
            .query("SELECT app_id FROM api_keys WHERE key_hash = $1")
            .bind(key_hash)
            .fetch_optional(&self.reader)
            .await?
        else {
            return Ok(None);
        };
        Ok(Some(
            match parse_optional_column::<AppId>(&row, "app_id")? {
                None => KeyScope::Admin,
                Some(app) => KeyScope::App(app),
            },
        ))
    }

    /// Stores a new key's hash with its scope and name; the key as listed.
    #[tracing::instrument(skip_all)]
    pub async fn create_api_key(
        &self,
        key_hash: &str,
        scope: &KeyScope,
        name: &str,
        now: Timestamp,
    ) -> Result<ApiKey> {
        let id = ApiKeyId::generate();
        let app = match scope {
            KeyScope::Admin => None,
            KeyScope::App(app) => Some(app.as_str()),
        };
        self.engine
            .query(
                "INSERT INTO api_keys (id, key_hash, app_id, name, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(id.as_str())
            .bind(key_hash)
            .bind(app)
            .bind(name)
            .bind(now.as_millis())
            .execute(&self.writer)
            .await?;
        Ok(ApiKey {
            id,
            scope: scope.clone(),
            name: name.to_owned(),
            created_at: now,
        })
    }

    /// Every key, newest first, `page.limit` at a time after the id `page.before`.
    #[tracing::instrument(skip_all)]
    pub async fn list_api_keys(&self, page: &Page) -> Result<Vec<ApiKey>> {
        let rows = self
            .engine
            .query(
                "SELECT id, app_id, name, created_at FROM api_keys \
                 WHERE ($1 IS NULL OR id < $1) ORDER BY id DESC LIMIT $2",
            )
            .bind(page.before.as_deref())
            .bind(i64::from(page.limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(ApiKey {
                    id: parse_column(row, "id")?,
                    scope: match parse_optional_column::<AppId>(row, "app_id")? {
                        None => KeyScope::Admin,
                        Some(app) => KeyScope::App(app),
                    },
                    name: row.try_get("name")?,
                    created_at: Timestamp::from_millis(row.try_get("created_at")?),
                })
            })
            .collect()
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
