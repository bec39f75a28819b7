//! Telling dispatchers that work is due, so a fresh event is picked up in
//! milliseconds rather than on a polling tick.
//!
//! The signal is the store's own: right after a commit that made deliveries due
//! now, the store raises it ([`Store::notify_due`]) and a dispatcher in this
//! process waits on it ([`Store::wait_for_due`]). Across PostgreSQL nodes the
//! same moment sets off a `NOTIFY hookline_wake`, and every node `LISTEN`s and
//! raises its own. The remote signal is sent by one relay task after the commit
//! (never inside the publishing transaction, where `NOTIFY` would serialise all
//! commits on a global lock), and bursts coalesce into one notification.
//!
//! The relay tasks hold no `Store`: they end when the last clone of the store
//! that started them is dropped (or its pool is closed).

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::{watch, Notify};

use crate::db::Pool;
use crate::{Engine, Result, Store};

const CHANNEL: &str = "hookline_wake";

pub(crate) struct Wake {
    /// Work became due: `notify_one` keeps a permit while no one waits, so a
    /// wake between a dispatcher's "claimed nothing" and its wait is not lost.
    local: Arc<Notify>,
    /// Asks the relay task to send a PostgreSQL `NOTIFY` (PostgreSQL only).
    remote: Option<Arc<Notify>>,
    /// Dropped with the store: the relay tasks watch it and end.
    alive: watch::Sender<()>,
}

impl Wake {
    pub(crate) fn new(engine: Engine) -> Self {
        Self {
            local: Arc::default(),
            remote: (engine == Engine::Postgres).then(Arc::default),
            alive: watch::channel(()).0,
        }
    }
}

impl Store {
    /// Signals that deliveries are due now: wakes this process's dispatcher and, on
    /// PostgreSQL, every other node's.
    pub fn notify_due(&self) {
        self.wake.local.notify_one();
        if let Some(remote) = &self.wake.remote {
            remote.notify_one();
        }
    }

    /// Waits until a commit here (or, with the relay started, on another node)
    /// made work due, or `timeout`. One waiter is woken per signal.
    pub async fn wait_for_due(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.wake.local.notified()).await;
    }

    /// On PostgreSQL, starts the tasks that carry wake-ups between nodes: one sends
    /// `NOTIFY` after local commits, one `LISTEN`s and raises the local signal.
    /// Both end when the store is dropped or closed. On SQLite (one node) it does nothing.
    pub async fn start_wake_relay(&self) -> Result<()> {
        let Pool::Postgres(pool) = &self.writer else {
            return Ok(());
        };
        let mut listener = PgListener::connect(&self.database_url).await?;
        listener.listen(CHANNEL).await?;

        let local = self.wake.local.clone();
        let mut alive = self.wake.alive.subscribe();
        let closed = pool.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = alive.changed() => return,
                    received = listener.try_recv() => match received {
                        Ok(Some(_)) => local.notify_one(),
                        // The connection dropped; PgListener reconnects on the next call.
                        // Wake anyway: a notification may have been missed meanwhile.
                        Ok(None) => local.notify_one(),
                        Err(error) => {
                            if closed.is_closed() {
                                return;
                            }
                            tracing::warn!(%error, "wake listener failed; retrying");
                            tokio::time::sleep(Duration::from_millis(500)).await;
                        }
                    },
                }
            }
        });

        let remote = self
            .wake
            .remote
            .clone()
            .expect("PostgreSQL has a remote wake");
        let mut alive = self.wake.alive.subscribe();
        let pool = pool.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = alive.changed() => return,
                    _ = remote.notified() => {}
                }
                if pool.is_closed() {
                    return;
                }
                if let Err(error) = sqlx::query("SELECT pg_notify($1, '')")
                    .bind(CHANNEL)
                    .execute(&pool)
                    .await
                {
                    tracing::warn!(%error, "could not notify other nodes");
                }
            }
        });
        Ok(())
    }
}
