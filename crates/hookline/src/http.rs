//! The HTTP server: hyper's HTTP/1 under the limits a public API needs — a
//! cap on open connections and a deadline for each request's headers, so
//! slow or idle clients (slow loris) cannot hold the process.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// How much of the process one client may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Open connections at most; the next ones wait in the listen backlog.
    pub max_connections: usize,
    /// How long a connection may take to send a request's headers, from the
    /// moment the server waits for them (an idle keep-alive connection too).
    pub header_read_timeout: Duration,
}

/// Serves `app` on `listener` until `shutdown`; then stops accepting, lets
/// requests in progress finish and closes idle connections.
pub(crate) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = permits.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let stream = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // Out of file descriptors, or a connection reset before it
                    // was accepted: wait a little rather than spin.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // No TCP_NODELAY (as axum::serve): measured, it cost PostgreSQL runs a
        // few percent of end-to-end throughput (docs/BENCHMARKS.md).
        let service = TowerToHyperService::new(app.clone());
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            // A client that goes away or is too slow ends its connection; that
            // is no error of ours.
            let _ = connection.await;
            drop(permit);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
