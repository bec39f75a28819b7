//! What a publish reads of an app and its endpoints, kept in memory.
//!
//! Every publish needs its app (to answer 404, and by `uid` to find its id)
//! and the app's enabled endpoints (to route and plan each event). Read from
//! the database, those were two round trips of every publish — at light load
//! each one a wake-up of an idle backend or thread (docs/engine-v4.md, "The
//! publish: one write"). An [`AppSnapshot`] holds them instead, read once, and
//! the publish's one write checks it: the app's `config_version` and each
//! enabled endpoint's `config_version`, in id order, must be what the snapshot
//! read, or the write writes nothing and the publish reads the app again and
//! goes again. The counters move with every change a publish acts on (the
//! migration's triggers name the columns), on any node: there is no other
//! invalidation, and no age after which a snapshot is read again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use hookline_core::filter::Filter;
use hookline_core::ids::{AppId, EndpointId};

use crate::apps::{app_from_row, APP_COLUMNS};
use crate::claim;
use crate::db::{Kind, Sql};
use crate::endpoints::{event_types_from_json, SENDING_COLUMNS};
use crate::records::App;
use crate::{parse_column, Events, Result, StoreError};

/// An app and its enabled endpoints, as a publish reads them.
#[derive(Debug)]
pub struct AppSnapshot {
    pub app: App,
    /// The app's `config_version` when read.
    version: i64,
    /// Its enabled endpoints, in id order.
    pub(crate) targets: Vec<Arc<Target>>,
    /// `id:config_version` of each, joined by `,` (`None` without any): what
    /// the write compares with the rows as they are then ([`CHECK_COLUMNS`]).
    endpoints: Option<String>,
}

impl AppSnapshot {
    /// The row of the write's check batch ([`CHECK_COLUMNS`]).
    pub(crate) fn check(&self) -> (&str, i64, Option<&str>) {
        (
            self.app.id.as_str(),
            self.version,
            self.endpoints.as_deref(),
        )
    }
}

/// The check batch's columns: one row per app a publish writes events of.
pub(crate) const CHECK_COLUMNS: &[(&str, Kind)] = &[
    ("app_id", Kind::Text),
    ("version", Kind::Int),
    ("endpoints", Kind::Text),
];

/// Whether every app of the check batch (read as `s`, from parameter `$first`)
/// is as its snapshot read it: a condition for each of the write's statements.
pub(crate) fn check(engine: crate::Engine, first: usize) -> String {
    let (agg, same) = match engine {
        crate::Engine::Postgres => (
            "string_agg(e.id || ':' || e.config_version, ',' ORDER BY e.id)",
            "IS NOT DISTINCT FROM",
        ),
        crate::Engine::Sqlite => (
            "group_concat(e.id || ':' || e.config_version, ',' ORDER BY e.id)",
            "IS",
        ),
    };
    let batch = engine.rows(first, CHECK_COLUMNS);
    // The apps probed by id from the batch: a generic plan may otherwise join
    // them by walking `apps_pkey` whole (tests/e2e/plans.rs).
    let probes = engine.probes("a.id", first);
    format!(
        "(SELECT count(*) FROM {batch} \
          WHERE EXISTS (SELECT 1 FROM apps a WHERE {probes} AND a.id = v.app_id AND a.config_version = v.version) \
          AND (SELECT {agg} FROM endpoints e WHERE e.app_id = v.app_id AND e.enabled) {same} v.endpoints) \
         = (SELECT count(*) FROM {batch})"
    )
}

/// The snapshots of this process, by app id. A uid is resolved afresh on
/// every publish that names one: a uid can move from one app to another,
/// and a kept mapping could send one tenant's event to another's endpoints.
#[derive(Default)]
pub(crate) struct Snapshots {
    by_id: Mutex<HashMap<AppId, Arc<AppSnapshot>>>,
}

impl Snapshots {
    /// Past this many keys the map starts over (a bound, not an LRU: apps
    /// published to are few next to the memory one costs).
    const CAPACITY: usize = 10_000;

    fn get(&self, app: &AppId) -> Option<Arc<AppSnapshot>> {
        self.by_id.lock().expect("snapshots").get(app).cloned()
    }

    fn put(&self, snapshot: Arc<AppSnapshot>) {
        let mut map = self.by_id.lock().expect("snapshots");
        if map.len() >= Self::CAPACITY {
            map.clear();
        }
        map.insert(snapshot.app.id.clone(), snapshot);
    }

    /// Forgets the snapshots of `apps`: a write found one of them stale.
    pub(crate) fn forget<'a>(&self, apps: impl IntoIterator<Item = &'a AppId>) {
        let mut map = self.by_id.lock().expect("snapshots");
        for app in apps {
            map.remove(app);
        }
    }
}

pub(crate) static SNAPSHOT_APP_BY_ID: Sql =
    Sql::new(|_| format!("SELECT {APP_COLUMNS}, config_version FROM apps WHERE id = $1"));
pub(crate) static SNAPSHOT_APP_BY_UID: Sql =
    Sql::new(|_| format!("SELECT {APP_COLUMNS}, config_version FROM apps WHERE uid = $1"));

/// An app's enabled endpoints, with what routing, sending and admission need.
pub(crate) static SNAPSHOT_ENDPOINTS: Sql = Sql::new(|_| {
    format!(
        "SELECT event_types, payload_filter, config_version, {SENDING_COLUMNS} FROM endpoints \
         WHERE app_id = $1 AND enabled ORDER BY id"
    )
});

impl Events<'_> {
    /// The app `key` names (its id, or its uid) with its enabled endpoints, as
    /// a publish reads them: kept from an earlier publish, or read now. `None`
    /// if there is no such app. By id a kept snapshot answers with no read;
    /// by uid the app is read every time (which app a uid names can change),
    /// and its endpoints only if its version moved.
    #[tracing::instrument(skip_all, fields(app = key))]
    pub async fn app_snapshot(&self, key: &str) -> Result<Option<Arc<AppSnapshot>>> {
        let by_id = key.starts_with(AppId::PREFIX);
        if by_id {
            if let Some(snapshot) = key.parse().ok().and_then(|id| self.snapshots.get(&id)) {
                return Ok(Some(snapshot));
            }
        }
        if key.contains('\0') {
            // No row holds a NUL (see `find_app`).
            return Ok(None);
        }
        let by = match by_id {
            true => &SNAPSHOT_APP_BY_ID,
            false => &SNAPSHOT_APP_BY_UID,
        };
        let engine = self.engine;
        let Some(row) = engine
            .query(by.text(engine))
            .bind(key)
            .fetch_optional(&self.reader)
            .await?
        else {
            return Ok(None);
        };
        let app = app_from_row(&row)?;
        let version: i64 = row.try_get("config_version")?;
        if let Some(kept) = self.snapshots.get(&app.id) {
            if kept.version == version {
                return Ok(Some(kept));
            }
        }
        let rows = engine
            .query(SNAPSHOT_ENDPOINTS.text(engine))
            .bind(app.id.as_str())
            .fetch_all(&self.reader)
            .await?;
        let mut targets = Vec::with_capacity(rows.len());
        let mut endpoints: Vec<String> = Vec::with_capacity(rows.len());
        for row in &rows {
            let target = Target {
                id: parse_column(row, "id")?,
                event_types: event_types_from_json(row.try_get("event_types")?)?,
                filter: row
                    .try_get::<Option<String>, _>("payload_filter")?
                    .map(|source| Filter::parse(&source))
                    .transpose()
                    .map_err(|e| StoreError::Corrupt(format!("payload_filter: {e}")))?,
                endpoint: claim::endpoint_from_row(&self.secrets, row)?,
            };
            let version: i64 = row.try_get("config_version")?;
            endpoints.push(format!("{}:{version}", target.id));
            targets.push(Arc::new(target));
        }
        let snapshot = Arc::new(AppSnapshot {
            app,
            version,
            targets,
            endpoints: (!endpoints.is_empty()).then(|| endpoints.join(",")),
        });
        self.snapshots.put(Arc::clone(&snapshot));
        Ok(Some(snapshot))
    }
}

/// An enabled endpoint an app's events may go to.
#[derive(Debug)]
pub(crate) struct Target {
    pub id: EndpointId,
    pub event_types: Option<Vec<String>>,
    pub filter: Option<Filter>,
    /// Where and how to send, and the endpoint's gate (as a claim reads them).
    pub endpoint: claim::ClaimEndpoint,
}

impl Target {
    pub fn accepts(&self, event_type: &str) -> bool {
        hookline_core::event_types::subscribed(self.event_types.as_deref(), event_type)
    }
}
