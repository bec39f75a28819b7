//! The event type catalog: names producers publish, with a description, an
//! optional JSON Schema of the payload, an example and a deprecated flag.
//! The store keeps the rows; checking payloads against them is the API's.

use hookline_core::time::Timestamp;

use crate::db::Row;
use crate::records::{EventType, EventTypePatch};
use crate::Catalog;
use crate::{Result, StoreError};

/// The most types the catalog holds (it is listed whole).
pub const MAX_EVENT_TYPES: i64 = 1000;

const COLUMNS: &str = "name, description, schema, example, deprecated, created_at, updated_at";

fn json_column(row: &Row, column: &str) -> Result<Option<serde_json::Value>> {
    row.try_get::<Option<String>, _>(column)?
        .map(|text| {
            serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("{column}: {e}")))
        })
        .transpose()
}

fn event_type_from_row(row: &Row) -> Result<EventType> {
    Ok(EventType {
        name: row.try_get("name")?,
        description: row.try_get("description")?,
        schema: json_column(row, "schema")?,
        example: json_column(row, "example")?,
        deprecated: row.try_get::<bool, _>("deprecated")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

fn json_text(value: &Option<serde_json::Value>) -> Option<String> {
    value.as_ref().map(|v| v.to_string())
}

impl Catalog<'_> {
    /// Adds a type to the catalog; [`StoreError::Conflict`] if the name is taken
    /// or the catalog is full.
    #[tracing::instrument(skip_all, fields(name = %event_type.name))]
    pub async fn create_event_type(&self, event_type: &EventType) -> Result<()> {
        let mut tx = self.writer.begin().await?;
        let count: i64 = self
            .engine
            .query("SELECT COUNT(*) AS n FROM event_types")
            .fetch_one(&mut tx)
            .await?
            .try_get("n")?;
        if count >= MAX_EVENT_TYPES {
            return Err(StoreError::Conflict(
                "the catalog holds 1,000 event types, its most",
            ));
        }
        let inserted = self
            .engine
            .query(
                "INSERT INTO event_types (name, description, schema, example, deprecated, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $6) ON CONFLICT (name) DO NOTHING",
            )
            .bind(&event_type.name)
            .bind(&event_type.description)
            .bind(json_text(&event_type.schema))
            .bind(json_text(&event_type.example))
            .bind(event_type.deprecated)
            .bind(event_type.created_at.as_millis())
            .execute(&mut tx)
            .await?
            .rows_affected();
        if inserted == 0 {
            return Err(StoreError::Conflict("an event type with this name exists"));
        }
        tx.commit().await?;
        Ok(())
    }

    /// One type of the catalog.
    #[tracing::instrument(skip_all)]
    pub async fn get_event_type(&self, name: &str) -> Result<Option<EventType>> {
        if name.contains('\0') {
            // As `find_app`: no row holds a NUL.
            return Ok(None);
        }
        let sql = format!("SELECT {COLUMNS} FROM event_types WHERE name = $1");
        self.engine
            .query(&sql)
            .bind(name)
            .fetch_optional(&self.reader)
            .await?
            .map(|row| event_type_from_row(&row))
            .transpose()
    }

    /// The catalog, by name — without Hookline's own `hookline.` types (read
    /// by name): the listing is what customers' endpoints subscribe to.
    #[tracing::instrument(skip_all)]
    pub async fn list_event_types(&self) -> Result<Vec<EventType>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM event_types WHERE substr(name, 1, 9) <> 'hookline.' ORDER BY name"
        );
        let rows = self.engine.query(&sql).fetch_all(&self.reader).await?;
        rows.iter().map(event_type_from_row).collect()
    }

    /// Applies a change; `None` if there is no such type.
    #[tracing::instrument(skip_all)]
    pub async fn update_event_type(
        &self,
        name: &str,
        patch: EventTypePatch,
        now: Timestamp,
    ) -> Result<Option<EventType>> {
        let mut tx = self.writer.begin().await?;
        let sql = format!(
            "SELECT {COLUMNS} FROM event_types WHERE name = $1{}",
            self.engine.lock(" FOR UPDATE")
        );
        let Some(row) = self
            .engine
            .query(&sql)
            .bind(name)
            .fetch_optional(&mut tx)
            .await?
        else {
            return Ok(None);
        };
        let mut event_type = event_type_from_row(&row)?;
        if let Some(description) = patch.description {
            event_type.description = description;
        }
        if let Some(schema) = patch.schema {
            event_type.schema = schema;
        }
        if let Some(example) = patch.example {
            event_type.example = example;
        }
        if let Some(deprecated) = patch.deprecated {
            event_type.deprecated = deprecated;
        }
        event_type.updated_at = now;
        self.engine
            .query(
                "UPDATE event_types SET description = $2, schema = $3, example = $4, deprecated = $5, \
                 updated_at = $6 WHERE name = $1",
            )
            .bind(name)
            .bind(&event_type.description)
            .bind(json_text(&event_type.schema))
            .bind(json_text(&event_type.example))
            .bind(event_type.deprecated)
            .bind(now.as_millis())
            .execute(&mut tx)
            .await?;
        tx.commit().await?;
        Ok(Some(event_type))
    }

    /// Removes a type from the catalog; `false` if there was none. Events already
    /// published with it are untouched.
    #[tracing::instrument(skip_all)]
    pub async fn delete_event_type(&self, name: &str) -> Result<bool> {
        Ok(self
            .engine
            .query("DELETE FROM event_types WHERE name = $1")
            .bind(name)
            .execute(&self.writer)
            .await?
            .rows_affected()
            == 1)
    }
}
