//! Reading events. (Writing them is `publish`; removing old ones is `retention`.)

use std::collections::HashMap;

use crate::db::{Batch, Row, Sql};
use hookline_core::ids::{AppId, DeliveryId, EventId};
use hookline_core::time::Timestamp;

use crate::deliveries::{delivery_from_row, DELIVERY_COLUMNS};
use crate::fanout;
use crate::listing::Filters;
use crate::records::{Delivery, Event, EventFilter, Page};
use crate::{parse_column, Result};
use crate::{Events, Listings};

const EVENT_COLUMNS: &str = "id, app_id, event_type, ordering_key, sequence, body, created_at";

fn event_from_row(row: &Row) -> Result<Event> {
    Ok(Event {
        id: parse_column(row, "id")?,
        app_id: parse_column(row, "app_id")?,
        event_type: row.try_get("event_type")?,
        ordering_key: row.try_get("ordering_key")?,
        sequence: row.try_get::<Option<i64>, _>("sequence")?.map(|s| s as u64),
        body: row.try_get("body")?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
    })
}

/// The bodies of an app's events (`$1`), by id (a batch from `$2`).
static EVENT_BODIES: Sql = Sql::new(|engine| {
    format!(
        "SELECT id, body FROM events WHERE app_id = $1 AND {}",
        engine.in_batch("id", 2)
    )
});

impl Events<'_> {
    /// The stored envelopes of those of `ids` that `app` still has (a batch
    /// request's members, to show the request again).
    pub async fn event_bodies(
        &self,
        app: &AppId,
        ids: &[&EventId],
    ) -> Result<HashMap<EventId, Vec<u8>>> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let rows = self
            .engine
            .query(EVENT_BODIES.text(self.engine))
            .bind(app.as_str())
            .bind_batch(Batch::default().text(ids.iter().map(|id| Some(id.as_str()))))
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|row| Ok((parse_column(row, "id")?, row.try_get("body")?)))
            .collect()
    }

    /// An event of an app with all its deliveries.
    #[tracing::instrument(skip_all, fields(app = %app, event = %id))]
    pub async fn get_event(
        &self,
        app: &AppId,
        id: &EventId,
    ) -> Result<Option<(Event, Vec<Delivery>)>> {
        let Some(row) = self
            .app_row(EVENT_COLUMNS, "events", app, id.as_str())
            .await?
        else {
            return Ok(None);
        };
        let event = event_from_row(&row)?;
        // The targets of its `fanout` row first, then the rows: a target
        // recorded between the two reads is among the rows.
        let targets = fanout::targets_of_event(self, app, id).await?;
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM deliveries WHERE app_id = $1 AND event_id = $2 ORDER BY id"
        );
        let mut deliveries: Vec<Delivery> = self
            .engine
            .query(&sql)
            .bind(app.as_str())
            .bind(id.as_str())
            .fetch_all(&self.reader)
            .await?
            .iter()
            .map(delivery_from_row)
            .collect::<Result<_>>()?;
        let written: std::collections::HashSet<DeliveryId> =
            deliveries.iter().map(|d| d.id.clone()).collect();
        deliveries.extend(targets.into_iter().filter(|d| !written.contains(&d.id)));
        deliveries.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(Some((event, deliveries)))
    }
}

impl Listings<'_> {
    /// An app's events, newest first, narrowed by `filter` (see `listing`). The
    /// cursor is the id of the last row of the previous page.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn list_events(
        &self,
        app: &AppId,
        filter: &EventFilter,
        page: &Page,
    ) -> Result<Vec<Event>> {
        let mut f = Filters::new();
        f.text("app_id = $?", app.as_str());
        f.text_if("id < $?", page.before.as_deref());
        f.id_range("id", filter.created, |ms| {
            EventId::first_of_millisecond(ms).to_string()
        });
        f.text_if("event_type = $?", filter.event_type.as_deref());
        f.text_if("ordering_key = $?", filter.ordering_key.as_deref());
        let select = format!(
            "{EVENT_COLUMNS} FROM events{}",
            self.engine.indexed_by("events_by_app"),
        );
        let rows = self.page_rows(&select, &f, "id DESC", page.limit).await?;
        rows.iter().map(event_from_row).collect()
    }

    /// How many events an app has.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn count_events(&self, app: &AppId) -> Result<u64> {
        let count: i64 = self
            .engine
            .query("SELECT COUNT(*) FROM events WHERE app_id = $1")
            .bind(app.as_str())
            .fetch_scalar(&self.reader)
            .await?;
        Ok(count as u64)
    }
}
