//! Telling dispatchers that work is due, so a fresh event is picked up in
//! milliseconds rather than on a polling tick.
//!
//! In process, the store wakes the local dispatcher through its [`Inbox`](crate::Inbox)
//! (`Inbox::wake`; the dispatcher owns the signal) right after a commit that
//! created due work. Across PostgreSQL nodes, the same moment sets off a
//! `NOTIFY hookline_wake`, and every node `LISTEN`s and wakes its own. The remote signal is
//! sent by one relay task after the commit (never inside the publishing
//! transaction, where `NOTIFY` would serialise all commits on a global lock),
//! and bursts coalesce into one notification.

use std::time::Duration;

use sqlx::postgres::PgListener;
use tokio::sync::Notify;

use crate::{Engine, Result, Store};

const CHANNEL: &str = "hookline_wake";

pub(crate) struct Wake {
    /// Asks the relay task to send a PostgreSQL `NOTIFY` (PostgreSQL only).
    remote: Option<Notify>,
}

impl Wake {
    pub(crate) fn new(engine: Engine) -> Self {
        Self {
            remote: (engine == Engine::Postgres).then(Notify::new),
        }
    }
}

impl Store {
    /// Signals that deliveries are due now: wakes this process's dispatcher and, on
    /// PostgreSQL, every other node's.
    pub fn notify_due(&self) {
        self.wake_local();
        if let Some(remote) = &self.wake.remote {
            remote.notify_one();
        }
    }

    /// Wakes this process's dispatcher, if one takes work from this store.
    fn wake_local(&self) {
        if let Some(inbox) = self.handoff() {
            inbox.wake();
        }
    }

    /// On PostgreSQL, starts the tasks that carry wake-ups between nodes: one sends
    /// `NOTIFY` after local publishes, one `LISTEN`s and wakes the local dispatcher.
    /// Both end when the store is closed. On SQLite (one node) it does nothing.
    pub async fn start_wake_relay(&self) -> Result<()> {
        if self.engine != Engine::Postgres {
            return Ok(());
        }
        let mut listener = PgListener::connect(&self.database_url).await?;
        listener.listen(CHANNEL).await?;

        let store = self.clone();
        tokio::spawn(async move {
            loop {
                match listener.try_recv().await {
                    Ok(Some(_)) => store.wake_local(),
                    // The connection dropped; PgListener reconnects on the next call.
                    // Wake anyway: a notification may have been missed meanwhile.
                    Ok(None) => store.wake_local(),
                    Err(error) => {
                        if store.writer.is_closed() {
                            return;
                        }
                        tracing::warn!(%error, "wake listener failed; retrying");
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
            }
        });

        let store = self.clone();
        tokio::spawn(async move {
            let remote = store
                .wake
                .remote
                .as_ref()
                .expect("PostgreSQL has a remote wake");
            loop {
                remote.notified().await;
                if store.writer.is_closed() {
                    return;
                }
                if let Err(error) = store
                    .engine
                    .query("SELECT pg_notify($1, '')")
                    .bind(CHANNEL)
                    .execute(&store.writer)
                    .await
                {
                    tracing::warn!(%error, "could not notify other nodes");
                }
            }
        });
        Ok(())
    }
}
