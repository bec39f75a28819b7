//! API keys, stored only as SHA-256 hashes.
//!
//! Keys are 256-bit random tokens, so a fast hash is enough (no password
//! stretching needed); looking a key up by its hash means the secret itself
//! is never compared byte by byte against stored data.

use hookline_core::ids::{ApiKeyId, AppId};
use hookline_core::time::Timestamp;

use crate::records::KeyScope;
use crate::{parse_optional_column, Result, Store};

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
