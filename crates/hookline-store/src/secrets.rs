//! Endpoint secrets sealed at rest (`hookline_core::sealing`): what the store
//! writes is never a `whsec_` value, and what it reads is opened here, once per
//! sealed value (a claim or a publish reads the same few endpoints again and again).
//! An endpoint's custom headers are sealed the same way, as one JSON value:
//! they are where receivers' tokens go (`X-Api-Key: …`, `Authorization: …`).
//! So is its outbound authentication (OAuth2 client secret, password, token,
//! client key), one JSON value too.
//!
//! The `sealing` table holds the id of the master key the database's secrets
//! are sealed with, so a process started with another key stops at once with
//! a clear error, before it could read, or write, a secret it cannot open.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hookline_core::outbound_auth::OutboundAuth;
use hookline_core::sealing::{key_id, Keyring};
use hookline_core::signing::{EndpointSecret, SECRET_PREFIX};

use crate::db::Tx;
use crate::Endpoints;
use crate::{Result, StoreError};

pub(crate) struct Secrets {
    keyring: Keyring,
    /// Opened secrets by `owner` and sealed text (a new seal is a new nonce, so
    /// a rotated secret is a new entry).
    opened: Mutex<HashMap<(String, String), EndpointSecret>>,
    /// Opened custom headers, likewise.
    opened_headers: Mutex<HashMap<(String, String), Headers>>,
    /// Opened outbound authentications, likewise.
    opened_auth: Mutex<HashMap<(String, String), Arc<OutboundAuth>>>,
}

/// An endpoint's custom headers: (name, value) pairs.
pub(crate) type Headers = Vec<(String, String)>;

impl Secrets {
    /// Past this many entries the cache starts over (endpoints are few per process).
    const CAPACITY: usize = 10_000;

    pub(crate) fn new(keyring: Keyring) -> Self {
        Self {
            keyring,
            opened: Mutex::default(),
            opened_headers: Mutex::default(),
            opened_auth: Mutex::default(),
        }
    }

    /// The stored form of `secret` for the endpoint `owner`.
    pub(crate) fn seal(&self, secret: &EndpointSecret, owner: &str) -> String {
        self.keyring.seal(secret.expose(), owner)
    }

    /// The secret a stored value of the endpoint `owner` holds.
    pub(crate) fn open(&self, sealed: &str, owner: &str) -> Result<EndpointSecret> {
        let key = (owner.to_owned(), sealed.to_owned());
        if let Some(secret) = self.opened.lock().expect("secret cache poisoned").get(&key) {
            return Ok(secret.clone());
        }
        let text = self
            .keyring
            .open(sealed, owner)
            .map_err(|e| StoreError::Sealing(format!("endpoint {owner}: {e}")))?;
        let secret = EndpointSecret::parse(&text)
            .map_err(|_| StoreError::Corrupt(format!("endpoint {owner}: secret")))?;
        let mut opened = self.opened.lock().expect("secret cache poisoned");
        if opened.len() >= Self::CAPACITY {
            opened.clear();
        }
        opened.insert(key, secret.clone());
        Ok(secret)
    }
}

impl Secrets {
    /// `value` as JSON, sealed for the endpoint `owner`.
    fn seal_json(&self, value: &impl serde::Serialize, owner: &str) -> String {
        let json = serde_json::to_string(value).expect("a sealed value serializes");
        self.keyring.seal(&json, owner)
    }

    /// The JSON value a sealed `stored` of the endpoint `owner` holds, opened
    /// once and then answered from `cache` (`what` names it in errors).
    fn open_json<T: Clone + serde::de::DeserializeOwned>(
        &self,
        cache: &Mutex<HashMap<(String, String), T>>,
        stored: &str,
        owner: &str,
        what: &str,
    ) -> Result<T> {
        let key = (owner.to_owned(), stored.to_owned());
        let mut cache = cache.lock().expect("sealed value cache poisoned");
        if let Some(value) = cache.get(&key) {
            return Ok(value.clone());
        }
        let text = self
            .keyring
            .open(stored, owner)
            .map_err(|e| StoreError::Sealing(format!("endpoint {owner}: {what}: {e}")))?;
        let value: T = serde_json::from_str(&text)
            .map_err(|e| StoreError::Corrupt(format!("endpoint {owner}: {what}: {e}")))?;
        if cache.len() >= Self::CAPACITY {
            cache.clear();
        }
        cache.insert(key, value.clone());
        Ok(value)
    }

    /// The stored form of the endpoint `owner`'s custom headers (`None`: none).
    pub(crate) fn seal_headers(&self, headers: &[(String, String)], owner: &str) -> Option<String> {
        (!headers.is_empty()).then(|| self.seal_json(&headers, owner))
    }

    /// The custom headers a stored value of the endpoint `owner` holds. A value
    /// in the clear (written by a release before headers were sealed, e.g. by an
    /// older node during a rolling upgrade) is read as it is; the next start seals it.
    pub(crate) fn open_headers(&self, stored: &str, owner: &str) -> Result<Headers> {
        if key_id(stored).is_none() {
            return serde_json::from_str(stored)
                .map_err(|e| StoreError::Corrupt(format!("endpoint {owner}: headers: {e}")));
        }
        self.open_json(&self.opened_headers, stored, owner, "headers")
    }

    /// The stored form of the endpoint `owner`'s outbound authentication.
    pub(crate) fn seal_auth(&self, auth: Option<&OutboundAuth>, owner: &str) -> Option<String> {
        auth.map(|auth| self.seal_json(auth, owner))
    }

    /// The outbound authentication a stored (sealed) value of the endpoint `owner` holds.
    pub(crate) fn open_auth(&self, stored: &str, owner: &str) -> Result<Arc<OutboundAuth>> {
        self.open_json(&self.opened_auth, stored, owner, "auth")
    }
}

/// Writes an endpoint's sealed custom headers.
async fn write_sealed_headers(tx: &mut Tx, id: &str, headers: Option<String>) -> Result<()> {
    tx.engine()
        .query("UPDATE endpoints SET headers = $2 WHERE id = $1")
        .bind(id)
        .bind(headers)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// Writes an endpoint's sealed secrets.
async fn write_sealed(
    tx: &mut Tx,
    id: &str,
    secret: Option<String>,
    previous: Option<String>,
) -> Result<()> {
    tx.engine()
        .query("UPDATE endpoints SET secret = $2, previous_secret = $3 WHERE id = $1")
        .bind(id)
        .bind(secret)
        .bind(previous)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

impl Endpoints<'_> {
    /// After migrating: refuses a master key this database's secrets were not
    /// sealed with, and seals secrets stored before sealing existed.
    pub(crate) async fn secure_secrets(&self) -> Result<()> {
        let keyring = &self.secrets.keyring;
        let mut tx = self.writer.begin().await?;
        // Claim a fresh database for this key, then read whose it is: of two
        // processes starting at once with different keys, the second refuses.
        self.engine
            .query("INSERT INTO sealing (id, key_id) VALUES (1, $1) ON CONFLICT (id) DO NOTHING")
            .bind(keyring.current().id())
            .execute(&mut tx)
            .await?;
        let stored: String = self
            .engine
            .query("SELECT key_id FROM sealing WHERE id = 1")
            .fetch_one(&mut tx)
            .await?
            .try_get("key_id")?;
        if !keyring.holds(&stored) {
            return Err(StoreError::Sealing(format!(
                "this database's endpoint secrets are sealed with master key {stored}, but the \
                 configured master key is {} and no previous_master_keys entry is {stored}: \
                 configure the key this database was set up with",
                keyring.current().id()
            )));
        }
        // Secrets stored in the clear by a version before sealing: sealed now.
        let plain = format!("{SECRET_PREFIX}%");
        let rows = self
            .engine
            .query(
                "SELECT id, secret, previous_secret FROM endpoints \
                 WHERE secret LIKE $1 OR previous_secret LIKE $1",
            )
            .bind(&plain)
            .fetch_all(&mut tx)
            .await?;
        for row in &rows {
            let id: String = row.try_get("id")?;
            let seal = |value: Option<String>| -> Result<Option<String>> {
                value
                    .map(|v| match key_id(&v) {
                        Some(_) => Ok(v),
                        None => EndpointSecret::parse(&v)
                            .map(|s| self.secrets.seal(&s, &id))
                            .map_err(|_| StoreError::Corrupt(format!("endpoint {id}: secret"))),
                    })
                    .transpose()
            };
            let secret = seal(row.try_get("secret")?)?;
            let previous = seal(row.try_get("previous_secret")?)?;
            write_sealed(&mut tx, &id, secret, previous).await?;
        }
        // Custom headers stored in the clear by a version before they were sealed.
        let clear_headers = self
            .engine
            .query("SELECT id, headers FROM endpoints WHERE headers IS NOT NULL")
            .fetch_all(&mut tx)
            .await?;
        let mut headers_sealed = 0;
        for row in &clear_headers {
            let id: String = row.try_get("id")?;
            let stored: String = row.try_get("headers")?;
            if key_id(&stored).is_none() {
                let headers = self.secrets.open_headers(&stored, &id)?;
                write_sealed_headers(&mut tx, &id, self.secrets.seal_headers(&headers, &id))
                    .await?;
                headers_sealed += 1;
            }
        }
        // Every value must open with a key this process holds, not only the one the
        // database names (a process with an older key may have written during a
        // rotation): refused here rather than failing claims later.
        let all = self
            .engine
            .query("SELECT secret, previous_secret, headers, auth FROM endpoints")
            .fetch_all(&mut tx)
            .await?;
        for row in &all {
            for value in [
                Some(row.try_get::<String, _>("secret")?),
                row.try_get::<Option<String>, _>("previous_secret")?,
                row.try_get::<Option<String>, _>("headers")?,
                row.try_get::<Option<String>, _>("auth")?,
            ]
            .into_iter()
            .flatten()
            {
                if let Some(id) = key_id(&value).filter(|id| !keyring.holds(id)) {
                    return Err(StoreError::Sealing(format!(
                        "an endpoint secret is sealed with master key {id}, which is not configured: \
                         add it to previous_master_keys and run `hookline rotate-master-key`"
                    )));
                }
            }
        }
        tx.commit().await?;
        if !rows.is_empty() {
            tracing::info!(
                endpoints = rows.len(),
                "sealed endpoint secrets stored in the clear"
            );
        }
        if headers_sealed > 0 {
            tracing::info!(
                endpoints = headers_sealed,
                "sealed custom headers stored in the clear"
            );
        }
        Ok(())
    }

    /// Re-seals every endpoint secret (and custom headers and outbound authentication) with the current master key and records it as
    /// the database's key; the number of endpoints. Every secret must open with a
    /// key this process holds (the current one or a previous one).
    #[tracing::instrument(skip_all)]
    pub async fn rotate_master_key(&self) -> Result<u64> {
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            // In id order: the order completions lock endpoints in.
            "SELECT id, secret, previous_secret, headers, auth FROM endpoints ORDER BY id{}",
            self.engine.lock(" FOR UPDATE")
        );
        let rows = self.engine.query(&sql).fetch_all(&mut tx).await?;
        for row in &rows {
            let id: String = row.try_get("id")?;
            let reseal = |value: Option<String>| -> Result<Option<String>> {
                value
                    .map(|v| Ok(self.secrets.seal(&self.secrets.open(&v, &id)?, &id)))
                    .transpose()
            };
            let secret = reseal(row.try_get("secret")?)?;
            let previous = reseal(row.try_get("previous_secret")?)?;
            write_sealed(&mut tx, &id, secret, previous).await?;
            if let Some(stored) = row.try_get::<Option<String>, _>("headers")? {
                let headers = self.secrets.open_headers(&stored, &id)?;
                write_sealed_headers(&mut tx, &id, self.secrets.seal_headers(&headers, &id))
                    .await?;
            }
            if let Some(stored) = row.try_get::<Option<String>, _>("auth")? {
                let auth = self.secrets.open_auth(&stored, &id)?;
                self.engine
                    .query("UPDATE endpoints SET auth = $2 WHERE id = $1")
                    .bind(id.as_str())
                    .bind(self.secrets.seal_auth(Some(&auth), &id))
                    .execute(&mut tx)
                    .await?;
            }
        }
        self.engine
            .query(
                "INSERT INTO sealing (id, key_id) VALUES (1, $1) \
                 ON CONFLICT (id) DO UPDATE SET key_id = excluded.key_id",
            )
            .bind(self.secrets.keyring.current().id())
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(rows.len() as u64)
    }
}
