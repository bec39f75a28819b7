//! One-time codes of customer portal links, and their exchange for a session.
//!
//! A code is stored only as its SHA-256, like a key. Exchanging it marks it
//! used and makes the session — an ordinary app-scoped key with the code's
//! capabilities — in one transaction, so a code opens at most one session
//! however many browsers race for it. The session lasts its own span (chosen
//! with the link, apart from the link's lifetime) and is renewed while in use,
//! never past [`SESSION_CAP`] after sign-in.

use std::time::Duration;

use hookline_core::access::Capabilities;
use hookline_core::ids::{ApiKeyId, AppId};
use hookline_core::time::Timestamp;

use crate::records::{ApiKey, KeyScope};
use crate::Apps;
use crate::{Result, StoreError};

/// What exchanging a portal code came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortalExchange {
    /// The session: store the key's hash the caller passed in, shown to the
    /// browser once; with the latest a renewal can take it to (`None`: a
    /// session of a code made before sessions had their own span, which ends
    /// with its link and is not renewed).
    Session(ApiKey, Option<Timestamp>),
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
        session: Duration,
        now: Timestamp,
    ) -> Result<()> {
        self.engine
            .query(
                "INSERT INTO portal_codes (code_hash, app_id, capabilities, created_at, expires_at, \
                 session_secs) VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(code_hash)
            .bind(app.as_str())
            .bind(capabilities.to_text())
            .bind(now.as_millis())
            .bind(expires_at.as_millis())
            .bind(session.as_secs() as i64)
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
                 RETURNING app_id, capabilities, expires_at, session_secs",
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
        // The session lasts its own span (a code made before sessions had one:
        // until the link's end, not renewable).
        let renew = row.try_get::<Option<i64>, _>("session_secs")?;
        let expires_at = match renew {
            Some(secs) => session_end(now, now, secs),
            None => Timestamp::from_millis(row.try_get("expires_at")?),
        };
        let session = ApiKey {
            id: ApiKeyId::generate(),
            scope: KeyScope::App { app, capabilities },
            name: SESSION_KEY_NAME.into(),
            created_at: now,
            expires_at: Some(expires_at),
        };
        self.insert_api_key(&mut tx, session_hash, &session).await?;
        self.engine
            .query("UPDATE api_keys SET renew_secs = $2 WHERE key_hash = $1")
            .bind(session_hash)
            .bind(renew)
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        let renewable_until = renew.map(|_| now + SESSION_CAP);
        Ok(PortalExchange::Session(session, renewable_until))
    }
}

/// When a portal session signed in at `signed_in` and (re)newed at `now` ends:
/// its span from now, never past [`SESSION_CAP`] after sign-in.
fn session_end(signed_in: Timestamp, now: Timestamp, secs: i64) -> Timestamp {
    let span = Duration::from_secs(secs.max(0) as u64);
    (now + span).min(signed_in + SESSION_CAP)
}

/// The longest a portal session lasts, however often it is renewed.
pub const SESSION_CAP: Duration = Duration::from_secs(12 * 60 * 60);

/// A renewed portal session: its new end, and the latest it can be renewed to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Renewed {
    pub expires_at: Timestamp,
    pub renewable_until: Timestamp,
}

impl Apps<'_> {
    /// Renews the live portal session whose key has this hash: it now ends its
    /// span from `now`, never past [`SESSION_CAP`] after sign-in. `None`: no
    /// such session (ended, signed out, not a session, or made not renewable).
    #[tracing::instrument(skip_all)]
    pub async fn renew_portal_session(
        &self,
        session_hash: &str,
        now: Timestamp,
    ) -> Result<Option<Renewed>> {
        let mut tx = self.writer.begin().await?;
        let row = self
            .engine
            .query(
                "SELECT created_at, renew_secs FROM api_keys \
                 WHERE key_hash = $1 AND name = $2 AND app_id IS NOT NULL \
                 AND renew_secs IS NOT NULL AND expires_at > $3",
            )
            .bind(session_hash)
            .bind(SESSION_KEY_NAME)
            .bind(now.as_millis())
            .fetch_optional(&mut tx)
            .await?;
        let Some(row) = row else {
            return Ok(None);
        };
        let signed_in = Timestamp::from_millis(row.try_get("created_at")?);
        let expires_at = session_end(signed_in, now, row.try_get("renew_secs")?);
        self.engine
            .query("UPDATE api_keys SET expires_at = $2 WHERE key_hash = $1")
            .bind(session_hash)
            .bind(expires_at.as_millis())
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Some(Renewed {
            expires_at,
            renewable_until: signed_in + SESSION_CAP,
        }))
    }
}
