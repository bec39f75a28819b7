//! One-time codes of customer portal links, and their exchange for a session.
//!
//! A code is stored only as its SHA-256, like a key. Exchanging it marks it
//! used and makes the session — an ordinary app-scoped key with the code's
//! capabilities, ending when the code would have — in one transaction, so a
//! code opens at most one session however many browsers race for it.

use hookline_core::access::Capabilities;
use hookline_core::ids::{ApiKeyId, AppId};
use hookline_core::time::Timestamp;

use crate::records::{ApiKey, KeyScope};
use crate::Apps;
use crate::{Result, StoreError};

/// What exchanging a portal code came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortalExchange {
    /// The session: store the key's hash the caller passed in, shown to the browser once.
    Session(ApiKey),
    /// No such code (never made, or revoked with its app's keys).
    Unknown,
    /// The code was exchanged before.
    Used,
    /// The code's time is over.
    Expired,
}

/// The name every portal session key carries (in `GET /v1/keys`).
pub const SESSION_KEY_NAME: &str = "portal session";

impl Apps<'_> {
    /// Stores a portal code's hash for `app`, good once until `expires_at`.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn create_portal_code(
        &self,
        code_hash: &str,
        app: &AppId,
        capabilities: Capabilities,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<()> {
        self.engine
            .query(
                "INSERT INTO portal_codes (code_hash, app_id, capabilities, created_at, expires_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(code_hash)
            .bind(app.as_str())
            .bind(capabilities.to_text())
            .bind(now.as_millis())
            .bind(expires_at.as_millis())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Exchanges the code with this hash for a session whose key has the hash
    /// `session_hash`: once, before the code expires.
    #[tracing::instrument(skip_all)]
    pub async fn exchange_portal_code(
        &self,
        code_hash: &str,
        session_hash: &str,
        now: Timestamp,
    ) -> Result<PortalExchange> {
        let mut tx = self.writer.begin().await?;
        let taken = self
            .engine
            .query(
                "UPDATE portal_codes SET used_at = $2 \
                 WHERE code_hash = $1 AND used_at IS NULL AND expires_at > $2 \
                 RETURNING app_id, capabilities, expires_at",
            )
            .bind(code_hash)
            .bind(now.as_millis())
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = taken else {
            // Why not: read in the same transaction, so the answer is about this code as it is.
            let found = self
                .engine
                .query("SELECT used_at FROM portal_codes WHERE code_hash = $1")
                .bind(code_hash)
                .fetch_optional(&mut tx)
                .await?;
            return Ok(match found {
                None => PortalExchange::Unknown,
                Some(row) if row.try_get::<Option<i64>, _>("used_at")?.is_some() => {
                    PortalExchange::Used
                }
                Some(_) => PortalExchange::Expired,
            });
        };
        let app: AppId = crate::parse_column(&row, "app_id")?;
        let capabilities = Capabilities::parse_text(&row.try_get::<String, _>("capabilities")?)
            .map_err(|e| StoreError::Corrupt(format!("portal_codes.capabilities: {e}")))?;
        let expires_at = Timestamp::from_millis(row.try_get("expires_at")?);
        let session = ApiKey {
            id: ApiKeyId::generate(),
            scope: KeyScope::App { app, capabilities },
            name: SESSION_KEY_NAME.into(),
            created_at: now,
            expires_at: Some(expires_at),
        };
        self.insert_api_key(&mut tx, session_hash, &session).await?;
        tx.commit().await?;
        Ok(PortalExchange::Session(session))
    }
}
