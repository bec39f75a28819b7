//! Endpoints: where an app's events go, with their breaker and rate-limit state.

use std::time::Duration;

use crate::db::{Row, Sql, Tx};
use crate::deliveries::every_attempt;
use hookline_core::batch::Batching;
use hookline_core::breaker::{Breaker, BreakerState};
use hookline_core::ids::{AppId, EndpointId};
use hookline_core::model::DeliveryState;
use hookline_core::ordering::OnDead;
use hookline_core::signing::{EndpointSecret, RetiringSecret, SigningKeys};
use hookline_core::switches::{self, Deleted};
use hookline_core::time::Timestamp;
use hookline_core::transform::Transform;

use crate::fanout;
use crate::operational::insert_notices;
use crate::records::{
    Endpoint, EndpointHealth, EndpointPatch, NewEndpoint, Page, RetryOverrides, PARKED,
};
use crate::secrets::Secrets;
use crate::timeline::insert_marks;
use crate::Endpoints;
use crate::{parse_column, Result, StoreError};
use hookline_core::operational::{Kind, Notice};

/// The columns of an endpoint, in two parts: what sending and admission need
/// (claims and publishes read only these, [`SENDING_COLUMNS`]), and the rest
/// the API shows ([`ENDPOINT_COLUMNS`]). One list, so a column added to an
/// endpoint is read by every reader that needs it.
macro_rules! sending_columns {
    () => {
        "id, url, secret, previous_secret, previous_secret_until, headers, auth, enabled, paused, \
         retry_base_ms, retry_cap_ms, max_attempts, max_age_secs, rate_limit_per_sec, max_in_flight, \
         ordering_on_dead, transform, description, seq_in_body, batch"
    };
}

/// The breaker's columns, as read by claims, completions and the health view.
macro_rules! breaker_columns {
    () => {
        "breaker_state, consecutive_failures, breaker_cooldown_ms, next_probe_at, probe_until, failing_since"
    };
}

/// An endpoint as the API shows it.
pub(crate) const ENDPOINT_COLUMNS: &str = concat!(
    sending_columns!(),
    ", app_id, event_types, payload_filter, disabled_reason, owner_app, created_at, updated_at"
);

/// What sending and admission need of an endpoint, its breaker included.
pub(crate) const SENDING_COLUMNS: &str = concat!(sending_columns!(), ", ", breaker_columns!());

/// The breaker's columns, as read by claims, completions and the health view.
pub(crate) const BREAKER_COLUMNS: &str = breaker_columns!();

pub(crate) fn retry_from_row(row: &Row) -> Result<RetryOverrides> {
    let get = |column: &str| -> Result<Option<i64>> { Ok(row.try_get::<Option<i64>, _>(column)?) };
    Ok(RetryOverrides {
        retry_base_ms: get("retry_base_ms")?.map(|v| v as u64),
        retry_cap_ms: get("retry_cap_ms")?.map(|v| v as u64),
        max_attempts: get("max_attempts")?.map(|v| v as u32),
        max_age_secs: get("max_age_secs")?.map(|v| v as u64),
    })
}

pub(crate) fn on_dead_from_row(row: &Row) -> Result<OnDead> {
    let text: String = row.try_get("ordering_on_dead")?;
    OnDead::parse(&text).ok_or_else(|| StoreError::Corrupt(format!("ordering_on_dead: {text}")))
}

/// Reads [`BREAKER_COLUMNS`] (a NULL state, from a missing endpoint, reads as closed).
pub(crate) fn breaker_from_row(row: &Row) -> Result<Breaker> {
    let millis = |column: &str| -> Result<Option<Timestamp>> {
        Ok(row
            .try_get::<Option<i64>, _>(column)?
            .map(Timestamp::from_millis))
    };
    let state: Option<String> = row.try_get("breaker_state")?;
    Ok(Breaker {
        state: match state.as_deref() {
            None => BreakerState::Closed,
            Some(text) => BreakerState::parse(text)
                .ok_or_else(|| StoreError::Corrupt(format!("breaker_state: {text}")))?,
        },
        consecutive_failures: row
            .try_get::<Option<i64>, _>("consecutive_failures")?
            .unwrap_or(0) as u32,
        cooldown: Duration::from_millis(
            row.try_get::<Option<i64>, _>("breaker_cooldown_ms")?
                .unwrap_or(0) as u64,
        ),
        next_probe_at: millis("next_probe_at")?,
        probe_until: millis("probe_until")?,
        failing_since: millis("failing_since")?,
    })
}

pub(crate) fn event_types_from_json(text: Option<String>) -> Result<Option<Vec<String>>> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| StoreError::Corrupt(format!("event_types: {e}")))
    })
    .transpose()
}

fn endpoint_from_row(secrets: &Secrets, row: &Row) -> Result<Endpoint> {
    let id: EndpointId = parse_column(row, "id")?;
    let SigningKeys { current, previous } = signing_from_row(secrets, row, &id)?;
    let headers = headers_from_row(secrets, row, &id)?;
    let auth = auth_from_row(secrets, row, &id)?.map(|auth| (*auth).clone());
    Ok(Endpoint {
        id,
        app_id: parse_column(row, "app_id")?,
        url: row.try_get("url")?,
        description: row.try_get("description")?,
        event_types: event_types_from_json(row.try_get("event_types")?)?,
        filter: row.try_get("payload_filter")?,
        enabled: row.try_get::<bool, _>("enabled")?,
        paused: row.try_get::<bool, _>("paused")?,
        secret: current,
        previous_secret: previous,
        headers,
        auth,
        retry: retry_from_row(row)?,
        rate_limit_per_sec: row
            .try_get::<Option<i64>, _>("rate_limit_per_sec")?
            .map(|v| v as u32),
        max_in_flight: max_in_flight_from_row(row)?,
        ordering_on_dead: on_dead_from_row(row)?,
        disabled_reason: row.try_get("disabled_reason")?,
        owner_app: row
            .try_get::<Option<String>, _>("owner_app")?
            .map(|app| {
                AppId::parse(&app).map_err(|_| StoreError::Corrupt(format!("owner_app: {app}")))
            })
            .transpose()?,
        transform: transform_from_row(row)?,
        seq_in_body: row.try_get::<bool, _>("seq_in_body")?,
        batch: batch_from_row(row)?,
        created_at: Timestamp::from_millis(row.try_get("created_at")?),
        updated_at: Timestamp::from_millis(row.try_get("updated_at")?),
    })
}

/// An endpoint row's `transform`.
pub(crate) fn transform_from_row(row: &Row) -> Result<Option<Transform>> {
    Ok(row
        .try_get::<Option<String>, _>("transform")?
        .map(|text| Transform::parse(&text)))
}

/// An endpoint row's `batch`.
pub(crate) fn batch_from_row(row: &Row) -> Result<Option<Batching>> {
    row.try_get::<Option<String>, _>("batch")?
        .map(|text| Batching::from_text(&text).map_err(StoreError::Corrupt))
        .transpose()
}

/// The signing secrets of the endpoint `id`'s row (`secret`, `previous_secret`,
/// `previous_secret_until`), opened.
pub(crate) fn signing_from_row(
    secrets: &Secrets,
    row: &Row,
    id: &EndpointId,
) -> Result<SigningKeys> {
    let current = secrets.open(&row.try_get::<String, _>("secret")?, id.as_str())?;
    let previous = match (
        row.try_get::<Option<String>, _>("previous_secret")?,
        row.try_get::<Option<i64>, _>("previous_secret_until")?,
    ) {
        (Some(sealed), Some(until)) => Some(RetiringSecret {
            secret: secrets.open(&sealed, id.as_str())?,
            until: Timestamp::from_millis(until),
        }),
        _ => None,
    };
    Ok(SigningKeys { current, previous })
}

/// The custom headers of the endpoint `id`'s row (`headers`), opened.
pub(crate) fn headers_from_row(
    secrets: &Secrets,
    row: &Row,
    id: &EndpointId,
) -> Result<Vec<(String, String)>> {
    match row.try_get::<Option<String>, _>("headers")? {
        None => Ok(Vec::new()),
        Some(stored) => secrets.open_headers(&stored, id.as_str()),
    }
}

/// The outbound authentication of the endpoint `id`'s row (`auth`), opened.
pub(crate) fn auth_from_row(
    secrets: &Secrets,
    row: &Row,
    id: &EndpointId,
) -> Result<Option<std::sync::Arc<hookline_core::outbound_auth::OutboundAuth>>> {
    row.try_get::<Option<String>, _>("auth")?
        .map(|stored| secrets.open_auth(&stored, id.as_str()))
        .transpose()
}

pub(crate) fn max_in_flight_from_row(row: &Row) -> Result<Option<u32>> {
    Ok(row
        .try_get::<Option<i64>, _>("max_in_flight")?
        .map(|v| v as u32))
}

fn to_i64<T: Into<u64>>(value: Option<T>) -> Option<i64> {
    value.map(|v| v.into().min(i64::MAX as u64) as i64)
}

fn event_types_json(types: &Option<Vec<String>>) -> Option<String> {
    types
        .as_ref()
        .map(|t| serde_json::to_string(t).expect("strings serialize"))
}

/// Writes a breaker back to its endpoint row.
pub(crate) async fn save_breaker(
    tx: &mut Tx,
    endpoint: &EndpointId,
    breaker: &Breaker,
) -> Result<()> {
    tx.engine().query(
        "UPDATE endpoints SET breaker_state = $2, consecutive_failures = $3, breaker_cooldown_ms = $4, \
         next_probe_at = $5, probe_until = $6, failing_since = $7 WHERE id = $1",
    )
    .bind(endpoint.as_str())
    .bind(breaker.state.as_str())
    .bind(i64::from(breaker.consecutive_failures))
    .bind(breaker.cooldown.as_millis() as i64)
    .bind(breaker.next_probe_at.map(Timestamp::as_millis))
    .bind(breaker.probe_until.map(Timestamp::as_millis))
    .bind(breaker.failing_since.map(Timestamp::as_millis))
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Disables an endpoint and parks its pending deliveries (kept, never due until re-enabled).
pub(crate) async fn disable_endpoint(
    tx: &mut Tx,
    endpoint: &EndpointId,
    reason: &str,
    now: Timestamp,
) -> Result<()> {
    tx.engine()
        .query(
            "UPDATE endpoints SET enabled = false, disabled_reason = $2, updated_at = $3 WHERE id = $1",
        )
        .bind(endpoint.as_str())
        .bind(reason)
        .bind(now.as_millis())
        .execute(&mut *tx)
        .await?;
    move_queue(tx, endpoint, i64::MIN..=PARKED.as_millis() - 1, PARKED, now).await
}

/// `$1` endpoint: up to `$5` of its pending deliveries due in `$2..=$3` made due at `$4`.
pub(crate) static MOVE_QUEUE: Sql = Sql::new(|engine| {
    format!(
        "UPDATE deliveries SET due_at = $4 WHERE {}",
        engine.among(
            "id",
            "SELECT id FROM deliveries WHERE endpoint_id = $1 AND state = 'pending' \
             AND due_at >= $2 AND due_at <= $3 AND due_at <> $4 LIMIT $5"
        )
    )
});

/// Deliveries per statement when an endpoint's queue is moved.
const QUEUE_MOVE_CHUNK: i64 = 1000;

/// Moves an endpoint's pending deliveries due within `due` (unix ms) to `to`: a breaker
/// opening or closing, an endpoint parked or resumed. In chunks, because one statement
/// over a large queue makes SQLite hold the journal of every page it changes in memory
/// (a dead endpoint's 100k-delivery queue took the process to 336 MiB).
pub(crate) async fn move_queue(
    tx: &mut Tx,
    endpoint: &EndpointId,
    due: std::ops::RangeInclusive<i64>,
    to: Timestamp,
    now: Timestamp,
) -> Result<()> {
    // Its targets in `fanout` rows move too: rows of their own, due at `to`.
    let queue = fanout::Move::Queue {
        due: due.clone(),
        to,
    };
    fanout::endpoint_targets(tx, endpoint, queue, now).await?;
    loop {
        // `due_at <> $4`: a moved row never matches again, so the loop ends.
        let engine = tx.engine();
        let moved = engine
            .query(MOVE_QUEUE.text(engine))
            .bind(endpoint.as_str())
            .bind(*due.start())
            .bind(*due.end())
            .bind(to.as_millis())
            .bind(QUEUE_MOVE_CHUNK)
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if moved < QUEUE_MOVE_CHUNK as u64 {
            return Ok(());
        }
    }
}

impl Endpoints<'_> {
    /// Creates an endpoint of an existing app.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn create_endpoint(
        &self,
        app: &AppId,
        new: NewEndpoint,
        now: Timestamp,
    ) -> Result<Endpoint> {
        let endpoint = Endpoint {
            id: EndpointId::generate(),
            app_id: app.clone(),
            url: new.url,
            description: new.description,
            event_types: new.event_types,
            filter: new.filter,
            enabled: new.enabled,
            paused: new.paused,
            secret: new.secret,
            previous_secret: None,
            headers: new.headers,
            auth: new.auth,
            retry: new.retry,
            rate_limit_per_sec: new.rate_limit_per_sec,
            max_in_flight: new.max_in_flight,
            ordering_on_dead: new.ordering_on_dead,
            disabled_reason: (!new.enabled).then(|| "manual".to_owned()),
            owner_app: new.owner_app,
            transform: new.transform,
            seq_in_body: new.seq_in_body,
            batch: new.batch,
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.writer.begin().await?;
        self.engine.query(
            "INSERT INTO endpoints (id, app_id, url, description, event_types, enabled, secret, \
             retry_base_ms, retry_cap_ms, max_attempts, max_age_secs, rate_limit_per_sec, ordering_on_dead, \
             disabled_reason, created_at, updated_at, max_in_flight, paused, headers, payload_filter, auth, \
             owner_app, transform, seq_in_body, batch) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $15, $16, $17, $18, $19, $20, \
             $21, $22, $23, $24)",
        )
        .bind(endpoint.id.as_str())
        .bind(app.as_str())
        .bind(&endpoint.url)
        .bind(&endpoint.description)
        .bind(event_types_json(&endpoint.event_types))
        .bind(endpoint.enabled)
        .bind(self.secrets.seal(&endpoint.secret, endpoint.id.as_str()))
        .bind(to_i64(endpoint.retry.retry_base_ms))
        .bind(to_i64(endpoint.retry.retry_cap_ms))
        .bind(to_i64(endpoint.retry.max_attempts))
        .bind(to_i64(endpoint.retry.max_age_secs))
        .bind(to_i64(endpoint.rate_limit_per_sec))
        .bind(endpoint.ordering_on_dead.as_str())
        .bind(endpoint.disabled_reason.as_deref())
        .bind(now.as_millis())
        .bind(to_i64(endpoint.max_in_flight))
        .bind(endpoint.paused)
        .bind(self.secrets.seal_headers(&endpoint.headers, endpoint.id.as_str()))
        .bind(endpoint.filter.as_deref())
        .bind(
            self.secrets
                .seal_auth(endpoint.auth.as_ref(), endpoint.id.as_str()),
        )
        .bind(endpoint.owner_app.as_ref().map(AppId::as_str))
        .bind(endpoint.transform.as_ref().map(Transform::as_str))
        .bind(endpoint.seq_in_body)
        .bind(endpoint.batch.as_ref().map(Batching::to_text))
        .execute(&mut tx)
        .await?;
        let created = Notice::endpoint(Kind::EndpointCreated, app, &endpoint.id);
        insert_notices(&mut tx, &[created], now).await?;
        // Created disabled or paused: marked as if switched at creation.
        let on = switches::Switches {
            enabled: true,
            paused: false,
        };
        let marks = switches::marks(on, endpoint.switches());
        insert_marks(&mut tx, &endpoint.id, &marks, now).await?;
        tx.commit().await?;
        Ok(endpoint)
    }

    /// One endpoint of an app.
    #[tracing::instrument(skip_all, fields(app = %app, endpoint = %id))]
    pub async fn get_endpoint(&self, app: &AppId, id: &EndpointId) -> Result<Option<Endpoint>> {
        self.app_row(ENDPOINT_COLUMNS, "endpoints", app, id.as_str())
            .await?
            .map(|row| endpoint_from_row(&self.secrets, &row))
            .transpose()
    }

    /// An app's endpoints, newest first.
    #[tracing::instrument(skip_all, fields(app = %app))]
    pub async fn list_endpoints(&self, app: &AppId, page: &Page) -> Result<Vec<Endpoint>> {
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE app_id = $1 AND ($2 IS NULL OR id < $2) \
             ORDER BY id DESC LIMIT $3"
        );
        let rows = self
            .engine
            .query(&sql)
            .bind(app.as_str())
            .bind(page.before.as_deref())
            .bind(i64::from(page.limit))
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|row| endpoint_from_row(&self.secrets, row))
            .collect()
    }

    /// The notification channels of `owner` (endpoints of the internal app,
    /// `hookline_core::notify`), oldest first; at most `most`.
    #[tracing::instrument(skip_all, fields(app = %owner))]
    pub async fn owned_endpoints(&self, owner: &AppId, most: u32) -> Result<Vec<Endpoint>> {
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE owner_app = $1 ORDER BY id LIMIT $2"
        );
        let rows = self
            .engine
            .query(&sql)
            .bind(owner.as_str())
            .bind(i64::from(most))
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|row| endpoint_from_row(&self.secrets, row))
            .collect()
    }

    /// Applies a patch; `None` if the endpoint does not exist.
    ///
    /// Disabling or pausing parks the endpoint's pending deliveries; enabling and
    /// resuming make them due now. Enabling also resets the breaker, so a
    /// re-enabled endpoint starts fresh. A paused endpoint still gets new
    /// deliveries (parked); a disabled one gets none.
    #[tracing::instrument(skip_all, fields(app = %app, endpoint = %id))]
    pub async fn update_endpoint(
        &self,
        app: &AppId,
        id: &EndpointId,
        patch: EndpointPatch,
        now: Timestamp,
    ) -> Result<Option<Endpoint>> {
        let mut tx = self.writer.begin().await?;
        // Locked on PostgreSQL: a pause and a resume at once apply one after the other.
        let Some(mut endpoint) = self.locked_endpoint(&mut tx, app, id).await? else {
            return Ok(None);
        };
        let before = endpoint.switches();
        if let Some(url) = patch.url {
            endpoint.url = url;
        }
        if let Some(description) = patch.description {
            endpoint.description = description;
        }
        if let Some(event_types) = patch.event_types {
            endpoint.event_types = event_types;
        }
        if let Some(filter) = patch.filter {
            endpoint.filter = filter;
        }
        if let Some(transform) = patch.transform {
            endpoint.transform = transform;
        }
        if let Some(seq_in_body) = patch.seq_in_body {
            endpoint.seq_in_body = seq_in_body;
        }
        if let Some(batch) = patch.batch {
            endpoint.batch = batch;
        }
        if let Some(enabled) = patch.enabled {
            endpoint.enabled = enabled;
        }
        if let Some(paused) = patch.paused {
            endpoint.paused = paused;
        }
        if let Some(headers) = patch.headers {
            endpoint.headers = headers;
        }
        if let Some(auth) = patch.auth {
            endpoint.auth = auth;
        }
        if let Some(retry) = patch.retry {
            endpoint.retry = retry;
        }
        if let Some(rate) = patch.rate_limit_per_sec {
            endpoint.rate_limit_per_sec = rate;
        }
        if let Some(ceiling) = patch.max_in_flight {
            endpoint.max_in_flight = ceiling;
        }
        if let Some(on_dead) = patch.ordering_on_dead {
            endpoint.ordering_on_dead = on_dead;
        }
        endpoint.updated_at = now;
        self.engine.query(
            "UPDATE endpoints SET url = $3, description = $4, event_types = $5, retry_base_ms = $6, \
             retry_cap_ms = $7, max_attempts = $8, max_age_secs = $9, rate_limit_per_sec = $10, \
             ordering_on_dead = $11, updated_at = $12, max_in_flight = $13, paused = $14, headers = $15, \
             payload_filter = $16, auth = $17, transform = $18, seq_in_body = $19, batch = $20 \
             WHERE id = $1 AND app_id = $2",
        )
        .bind(id.as_str())
        .bind(app.as_str())
        .bind(&endpoint.url)
        .bind(&endpoint.description)
        .bind(event_types_json(&endpoint.event_types))
        .bind(to_i64(endpoint.retry.retry_base_ms))
        .bind(to_i64(endpoint.retry.retry_cap_ms))
        .bind(to_i64(endpoint.retry.max_attempts))
        .bind(to_i64(endpoint.retry.max_age_secs))
        .bind(to_i64(endpoint.rate_limit_per_sec))
        .bind(endpoint.ordering_on_dead.as_str())
        .bind(now.as_millis())
        .bind(to_i64(endpoint.max_in_flight))
        .bind(endpoint.paused)
        .bind(self.secrets.seal_headers(&endpoint.headers, endpoint.id.as_str()))
        .bind(endpoint.filter.as_deref())
        .bind(
            self.secrets
                .seal_auth(endpoint.auth.as_ref(), endpoint.id.as_str()),
        )
        .bind(endpoint.transform.as_ref().map(Transform::as_str))
        .bind(endpoint.seq_in_body)
        .bind(endpoint.batch.as_ref().map(Batching::to_text))
        .execute(&mut tx)
        .await?;
        let turned = switches::turn(before, endpoint.switches());
        if turned.disable {
            disable_endpoint(&mut tx, id, switches::MANUAL, now).await?;
            endpoint.disabled_reason = Some(switches::MANUAL.into());
        }
        if turned.enable {
            self.engine
                .query("UPDATE endpoints SET enabled = true, disabled_reason = NULL WHERE id = $1")
                .bind(id.as_str())
                .execute(&mut tx)
                .await?;
            save_breaker(&mut tx, id, &Breaker::default()).await?;
            endpoint.disabled_reason = None;
        }
        // A polling endpoint's deliveries are parked whatever its switches:
        // nothing is sent to it (unparked, a claim would only park them again).
        let polled = hookline_core::destination::is_poll(&endpoint.url);
        if turned.park && !polled {
            move_queue(&mut tx, id, i64::MIN..=PARKED.as_millis() - 1, PARKED, now).await?;
        }
        if turned.unpark && !polled {
            let parked = PARKED.as_millis()..=PARKED.as_millis();
            move_queue(&mut tx, id, parked, now, now).await?;
        }
        let notices = turned.notices(app, id);
        insert_notices(&mut tx, &notices, now).await?;
        let marks = switches::marks(before, endpoint.switches());
        insert_marks(&mut tx, id, &marks, now).await?;
        tx.commit().await?;
        if turned.unpark && !polled {
            self.notify_due();
        }
        Ok(Some(endpoint))
    }

    /// An app's endpoint, its row locked for the transaction on PostgreSQL.
    async fn locked_endpoint(
        &self,
        tx: &mut Tx,
        app: &AppId,
        id: &EndpointId,
    ) -> Result<Option<Endpoint>> {
        let sql = format!(
            "SELECT {ENDPOINT_COLUMNS} FROM endpoints WHERE id = $1 AND app_id = $2{}",
            self.engine.lock(" FOR UPDATE")
        );
        self.engine
            .query(&sql)
            .bind(id.as_str())
            .bind(app.as_str())
            .fetch_optional(&mut *tx)
            .await?
            .map(|row| endpoint_from_row(&self.secrets, &row))
            .transpose()
    }

    /// Replaces an endpoint's signing secret with `new`; the current one keeps
    /// signing beside it for `grace` (see [`SigningKeys::rotate`]). `None` if the
    /// endpoint does not exist.
    #[tracing::instrument(skip_all, fields(app = %app, endpoint = %id))]
    pub async fn rotate_endpoint_secret(
        &self,
        app: &AppId,
        id: &EndpointId,
        new: EndpointSecret,
        grace: Duration,
        now: Timestamp,
    ) -> Result<Option<Endpoint>> {
        let mut tx = self.writer.begin().await?;
        // Locked on PostgreSQL: two rotations at once apply one after the other.
        let Some(mut endpoint) = self.locked_endpoint(&mut tx, app, id).await? else {
            return Ok(None);
        };
        let keys = SigningKeys {
            current: endpoint.secret,
            previous: endpoint.previous_secret,
        }
        .rotate(new, now, grace);
        self.engine
            .query(
                "UPDATE endpoints SET secret = $2, previous_secret = $3, previous_secret_until = $4, \
                 updated_at = $5 WHERE id = $1",
            )
            .bind(id.as_str())
            .bind(self.secrets.seal(&keys.current, id.as_str()))
            .bind(
                keys.previous
                    .as_ref()
                    .map(|p| self.secrets.seal(&p.secret, id.as_str())),
            )
            .bind(keys.previous.as_ref().map(|p| p.until.as_millis()))
            .bind(now.as_millis())
            .execute(&mut tx)
            .await?;
        let rotated = Notice::endpoint(Kind::EndpointSecretRotated, app, id);
        insert_notices(&mut tx, &[rotated], now).await?;
        tx.commit().await?;
        endpoint.secret = keys.current;
        endpoint.previous_secret = keys.previous;
        endpoint.updated_at = now;
        Ok(Some(endpoint))
    }

    /// Deletes an endpoint. Its history stays until retention removes it: succeeded
    /// and dead deliveries and every attempt still answer in listings and the event
    /// view. What it still owed (pending, in flight, blocked) goes to the DLQ as
    /// `endpoint_deleted`, in the same transaction, so nothing is left claimable.
    #[tracing::instrument(skip_all, fields(app = %app, endpoint = %id))]
    pub async fn delete_endpoint(
        &self,
        app: &AppId,
        id: &EndpointId,
        now: Timestamp,
    ) -> Result<bool> {
        let mut tx = self.writer.begin().await?;
        // Deliveries before the endpoint row: the order in which completions and
        // claims lock them (deliveries, then endpoints), so a delete and a completion
        // cannot deadlock on PostgreSQL. Rolled back if the endpoint is not the app's.
        // What a deletion kills, and why, is core's (`switches::Deleted`).
        let [a, b, c] = Deleted::KILLS.map(DeliveryState::as_str);
        self.engine
            .query(
                "UPDATE deliveries SET state = 'dead', dead_reason = $4, \
                 dead_at = $3, due_at = $3, lease_token = NULL, updated_at = $3 \
                 WHERE endpoint_id = $1 AND app_id = $2 AND state IN ($5, $6, $7)",
            )
            .bind(id.as_str())
            .bind(app.as_str())
            .bind(now.as_millis())
            .bind(Deleted::REASON.as_str())
            .bind(a)
            .bind(b)
            .bind(c)
            .execute(&mut tx)
            .await?;
        fanout::endpoint_targets(&mut tx, id, fanout::Move::Kill, now).await?;
        let deleted = self
            .engine
            .query("DELETE FROM endpoints WHERE id = $1 AND app_id = $2")
            .bind(id.as_str())
            .bind(app.as_str())
            .execute(&mut tx)
            .await?
            .rows_affected();
        if deleted == 1 {
            insert_notices(&mut tx, &[Deleted::notice(app, id)], now).await?;
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(deleted == 1)
    }

    /// The endpoint's breaker, last error and recent success rate; `None` if it does not exist.
    #[tracing::instrument(skip_all, fields(app = %app, endpoint = %id))]
    pub async fn endpoint_health(
        &self,
        app: &AppId,
        id: &EndpointId,
    ) -> Result<Option<EndpointHealth>> {
        let sql = format!(
            "SELECT enabled, disabled_reason, last_error, last_failure_at, {BREAKER_COLUMNS} \
             FROM endpoints WHERE id = $1 AND app_id = $2"
        );
        let Some(row) = self
            .engine
            .query(&sql)
            .bind(id.as_str())
            .bind(app.as_str())
            .fetch_optional(&self.reader)
            .await?
        else {
            return Ok(None);
        };
        // `id` is selected for SQLite: it merges the two halves' index walks
        // only when the column it orders by is in the list (else it reads the
        // endpoint's every attempt and sorts them).
        let recent = self.engine.query(&format!(
            "SELECT COUNT(*) AS total, COALESCE(SUM(CASE WHEN verdict = 'delivered' THEN 1 ELSE 0 END), 0) AS delivered \
             FROM (SELECT id, verdict FROM {} WHERE endpoint_id = $1 AND id IS NOT NULL \
             ORDER BY id DESC LIMIT 100) recent",
            every_attempt(self.engine, true)
        ))
        .bind(id.as_str())
        .fetch_one(&self.reader)
        .await?;
        Ok(Some(EndpointHealth {
            enabled: row.try_get::<bool, _>("enabled")?,
            disabled_reason: row.try_get("disabled_reason")?,
            breaker: breaker_from_row(&row)?,
            last_error: row.try_get("last_error")?,
            last_failure_at: row
                .try_get::<Option<i64>, _>("last_failure_at")?
                .map(Timestamp::from_millis),
            recent_attempts: row_count(&recent, "total")?,
            recent_delivered: row_count(&recent, "delivered")?,
        }))
    }

    /// The endpoint's attempts that started at or after `since`, newest first, at
    /// most `cap` of them (the stats' sample), walked by `attempts_by_endpoint`
    /// and `deliveries_by_endpoint` (first attempts).
    #[tracing::instrument(skip_all, fields(endpoint = %id))]
    pub async fn endpoint_attempt_sample(
        &self,
        app: &AppId,
        id: &EndpointId,
        since: Timestamp,
        cap: u32,
    ) -> Result<Vec<hookline_core::stats::Sample>> {
        let rows = self
            .engine
            .query(&format!(
                "SELECT id, duration_ms, verdict FROM {} \
                 WHERE endpoint_id = $1 AND app_id = $2 AND id IS NOT NULL AND started_at >= $3 \
                 ORDER BY id DESC LIMIT $4",
                every_attempt(self.engine, true)
            ))
            .bind(id.as_str())
            .bind(app.as_str())
            .bind(since.as_millis())
            .bind(i64::from(cap))
            .fetch_all(&self.reader)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(hookline_core::stats::Sample {
                    duration_ms: row.try_get::<i64, _>("duration_ms")?.max(0) as u64,
                    delivered: row.try_get::<String, _>("verdict")? == "delivered",
                })
            })
            .collect()
    }

    /// How many events the endpoint's payload filter dropped since `since` (by
    /// the minute: the minute that holds `since` counts whole).
    #[tracing::instrument(skip_all, fields(endpoint = %id))]
    pub async fn endpoint_filtered_since(&self, id: &EndpointId, since: Timestamp) -> Result<u64> {
        let dropped: Option<i64> = self
            .engine
            .query(
                "SELECT CAST(SUM(dropped) AS BIGINT) FROM filter_drops \
                 WHERE endpoint_id = $1 AND minute >= $2",
            )
            .bind(id.as_str())
            .bind(since.as_millis().div_euclid(60_000))
            .fetch_scalar(&self.reader)
            .await?;
        Ok(dropped.unwrap_or(0).max(0) as u64)
    }

    /// An endpoint's deliveries by state, and its dead ones by reason.
    #[tracing::instrument(skip_all, fields(endpoint = %id))]
    pub async fn endpoint_delivery_counts(
        &self,
        app: &AppId,
        id: &EndpointId,
    ) -> Result<Vec<(String, Option<String>, u64)>> {
        let rows = self
            .engine
            .query(
                "SELECT state, dead_reason, COUNT(*) AS n FROM deliveries \
                 WHERE endpoint_id = $1 AND app_id = $2 GROUP BY state, dead_reason",
            )
            .bind(id.as_str())
            .bind(app.as_str())
            .fetch_all(&self.reader)
            .await?;
        let mut counts = rows
            .iter()
            .map(|row| {
                Ok((
                    row.try_get("state")?,
                    row.try_get("dead_reason")?,
                    row.try_get::<i64, _>("n")? as u64,
                ))
            })
            .collect::<Result<Vec<(String, Option<String>, u64)>>>()?;
        // Targets of `fanout` rows: pending or in flight, without rows yet.
        for target in fanout::targets_of_endpoint(self, id).await? {
            let state = target.state.as_str();
            match counts
                .iter_mut()
                .find(|(s, reason, _)| s == state && reason.is_none())
            {
                Some((_, _, n)) => *n += 1,
                None => counts.push((state.to_owned(), None, 1)),
            }
        }
        Ok(counts)
    }

    /// How many of an endpoint's deliveries are in `state` (for tests and the health view).
    #[tracing::instrument(skip_all, fields(endpoint = %id))]
    pub async fn count_deliveries(&self, id: &EndpointId, state: DeliveryState) -> Result<u64> {
        let count: i64 = self
            .engine
            .query("SELECT COUNT(*) FROM deliveries WHERE endpoint_id = $1 AND state = $2")
            .bind(id.as_str())
            .bind(state.as_str())
            .fetch_scalar(&self.reader)
            .await?;
        // Targets of `fanout` rows too (pending or in flight, without rows yet).
        let targets = fanout::targets_of_endpoint(self, id)
            .await?
            .iter()
            .filter(|d| d.state == state)
            .count();
        Ok(count as u64 + targets as u64)
    }
}

/// A count column (`SUM` runs over 4-byte CASE integers so PostgreSQL answers BIGINT,
/// not the NUMERIC that `Any` cannot read).
fn row_count(row: &Row, column: &str) -> Result<u32> {
    Ok(row.try_get::<i64, _>(column)? as u32)
}
