//! Answers given before the request body was read close the connection.
//!
//! A request refused early (413 over the size limit, 401 before the body is
//! looked at, an unknown app) leaves the rest of its body unread on the
//! socket. hyper then closes the connection after the answer, but without
//! saying so, and a producer's keep-alive pool hands that connection to its
//! *next* request, which fails with a broken pipe or a reset. Saying
//! `Connection: close` on such answers keeps the failure on the request that
//! earned it.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

/// Middleware: `Connection: close` on an answer whose request body was not
/// read to its end, and on every 413 (its body is read on only for a while
/// before the answer, `extract::read_limited`, and may still be arriving).
pub(crate) async fn close_if_unread(request: Request, next: Next) -> Response {
    let read = Arc::new(AtomicBool::new(request.body().is_end_stream()));
    let request = request.map(|inner| {
        Body::new(Tracked {
            inner,
            read: read.clone(),
        })
    });
    let mut response = next.run(request).await;
    if !read.load(Ordering::Relaxed) || response.status() == StatusCode::PAYLOAD_TOO_LARGE {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A request body that records when it has been read to its end.
struct Tracked {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Relaxed);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
