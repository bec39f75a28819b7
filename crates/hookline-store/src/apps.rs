//! Apps: a producer's tenants.

use crate::db::{Row, Sql};
use hookline_core::ids::AppId;
use hookline_core::portal::PortalSettings;
use hookline_core::time::Timestamp;

use crate::records::{App, AppPatch, NewApp, Page};
use crate::Apps;
use crate::{parse_column, Result, StoreError};

pub(crate) const APP_COLUMNS: &str = "id, uid, name, created_at, updated_at, portal";

pub(crate) static FIND_APP_BY_ID: Sql =
    Sql::new(|_| format!("SELECT {APP_COLUMNS} FROM apps WHERE id = $1"));
pub(crate) static FIND_APP_BY_UID: Sql =
    Sql::new(|_| format!("SELECT {APP_COLUMNS} FROM apps WHERE uid = $1"));

pub(crate) fn app_from_row(row: &Row) -> Result<App> {
    Ok(App {
        id: parse_column(row, "id")?,
        uid: row.try_get("uid")?,
        name: row.try_get("name")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
        portal: match row.try_get::<Option<String>, _>("portal")? {
            None => PortalSettings::default(),
            Some(json) => serde_json::from_str(&json)
                .map_err(|e| StoreError::Corrupt(format!("apps.portal: {e}")))?,
        },
    })
}

fn portal_json(settings: &PortalSettings) -> Option<String> {
    (*settings != PortalSettings::default())
        .then(|| serde_json::to_string(settings).expect("portal settings serialise"))
}

/// A unique-constraint violation on `apps.uid`.
fn uid_taken(error: StoreError) -> StoreError {
    match &error {
        StoreError::Database(sqlx::Error::Database(db)) if db.is_unique_violation() => {
            StoreError::Conflict("an app with this uid already exists")
        }
        _ => error,
    }
}

impl Apps<'_> {
    /// Creates an app. A taken `uid` is a [`StoreError::Conflict`].
    #[tracing::instrument(skip_all)]
    pub async fn create_app(&self, new: NewApp, now: Timestamp) -> Result<App> {
        let app = App {
            id: AppId::generate(),
            uid: new.uid,
            name: new.name,
            created_at: now,
            updated_at: now,
            portal: new.portal,
        };
        self.engine.query(
            "INSERT INTO apps (id, uid, name, created_at, updated_at, portal) VALUES ($1, $2, $3, $4, $4, $5)",
        )
        .bind(app.id.as_str())
        .bind(app.uid.as_deref())
        .bind(&app.name)
        .bind(now.as_millis())
        .bind(portal_json(&app.portal))
        .execute(&self.writer)
        .await
        .map_err(uid_taken)?;
        Ok(app)
    }

    /// Finds an app by its id or by its `uid`: every API request does, so it is one
    /// equality on one unique index — the key's shape says which (a uid never
    /// starts like an app id), where `id = $1 OR uid = $1` would need two.
    #[tracing::instrument(skip_all, fields(app = key))]
    pub async fn find_app(&self, key: &str) -> Result<Option<App>> {
        if key.contains('\0') {
            // No row holds a NUL (PostgreSQL's text cannot), and PostgreSQL
            // refuses to even compare with one.
            return Ok(None);
        }
        let sql = if key.starts_with(AppId::PREFIX) {
            &FIND_APP_BY_ID
        } else {
            &FIND_APP_BY_UID
        };
        self.engine
            .query(sql.text(self.engine))
            .bind(key)
            .fetch_optional(&self.reader)
            .await?
            .map(|row| app_from_row(&row))
            .transpose()
    }

    /// Apps, newest first.
    #[tracing::instrument(skip_all)]
    pub async fn list_apps(&self, page: &Page) -> Result<Vec<App>> {
        // Hookline's internal app (operational webhooks) is read by its uid, not listed.
        let sql = format!(
            "SELECT {APP_COLUMNS} FROM apps WHERE ($1 IS NULL OR id < $1) AND id <> '{}' \
             ORDER BY id DESC LIMIT $2",
            hookline_core::operational::APP_ID
        );
        let rows = self
            .engine
            .query(&sql)
            .bind(page.before.as_deref())
            .bind(i64::from(page.limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(app_from_row).collect()
    }

    /// Applies a patch; `None` if the app does not exist.
    #[tracing::instrument(skip_all, fields(app = %id))]
    pub async fn update_app(
        &self,
        id: &AppId,
        patch: AppPatch,
        now: Timestamp,
    ) -> Result<Option<App>> {
        let sql = format!(
            "UPDATE apps SET name = COALESCE($2, name), \
             uid = CASE WHEN $3 THEN $4 ELSE uid END, updated_at = $5, \
             config_version = config_version + 1, \
             portal = CASE WHEN $6 THEN $7 ELSE portal END \
             WHERE id = $1 RETURNING {APP_COLUMNS}"
        );
        let (set_uid, uid) = match patch.uid {
            Some(uid) => (true, uid),
            None => (false, None),
        };
        self.engine
            .query(&sql)
            .bind(id.as_str())
            .bind(patch.name)
            .bind(set_uid)
            .bind(uid)
            .bind(now.as_millis())
            .bind(patch.portal.is_some())
            .bind(patch.portal.as_ref().and_then(portal_json))
            .fetch_optional(&self.writer)
            .await
            .map_err(uid_taken)?
            .map(|row| app_from_row(&row))
            .transpose()
    }

    /// Deletes an app and everything it owns; `false` if it did not exist.
    #[tracing::instrument(skip_all, fields(app = %id))]
    pub async fn delete_app(&self, id: &AppId) -> Result<bool> {
        let mut tx = self.writer.begin().await?;
        for table in [
            "attempts",
            "deliveries",
            "fanout",
            "events",
            "endpoints",
            "idempotency_keys",
            "api_keys",
            "replay_jobs",
            "portal_codes",
        ] {
            self.engine
                .query(&format!("DELETE FROM {table} WHERE app_id = $1"))
                .bind(id.as_str())
                .execute(&mut tx)
                .await?;
        }
        let deleted = self
            .engine
            .query("DELETE FROM apps WHERE id = $1")
            .bind(id.as_str())
            .execute(&mut tx)
            .await?
            .rows_affected();
        tx.commit().await?;
        Ok(deleted == 1)
    }
}
