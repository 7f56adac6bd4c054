//! A deadline on request bodies. actix bounds the time to receive a request's head
//! (`client_request_timeout`), not its body: a client that sends half a body and stalls would
//! keep its connection, a worker's slot and its buffer forever (50 such bodies to the anonymous
//! `POST /api/v1/layouts/plan` were all still open after 15 s). Every request that may carry a
//! body (any method but `GET` and `HEAD`) gets its payload wrapped in a `Deadline` stream: once
//! `server.body_timeout_ms` has passed since the request arrived, the body stream ends with a
//! `TimedOut` error, the extractor answers `408 request_timeout` in the JSON error shape, and
//! actix closes the connection, whose body was never read to its end.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::HttpMessage;
use actix_web::dev::{Payload, ServiceRequest};
use actix_web::error::PayloadError;
use actix_web::http::Method;
use actix_web::web::Bytes;
use futures_core::Stream;

/// Wraps the body of `req` (unless it is a `GET` or `HEAD`, which carry none that anything
/// here reads) so that it fails with `TimedOut` once `timeout` has passed.
pub fn apply(req: &mut ServiceRequest, timeout: Duration) {
    if matches!(*req.method(), Method::GET | Method::HEAD) {
        return;
    }
    let inner = req.take_payload();
    let stream: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> = Box::pin(Deadline {
        inner,
        sleep: Box::pin(tokio::time::sleep(timeout)),
        timeout,
        expired: false,
    });
    req.set_payload(Payload::from(stream));
}

/// The timeout a `Deadline` error carries, in milliseconds (0 if it is not one).
pub fn timeout_ms(e: &std::io::Error) -> u64 {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<Expired>())
        .map_or(0, |x| x.0)
}

/// The error inside the `TimedOut` I/O error: the deadline in milliseconds.
#[derive(Debug)]
struct Expired(u64);

impl std::fmt::Display for Expired {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "request body not received within {} ms", self.0)
    }
}

impl std::error::Error for Expired {}

/// A body stream that ends with `TimedOut` at its deadline.
struct Deadline {
    /// The request's own body.
    inner: Payload,
    /// Fires at the deadline.
    sleep: Pin<Box<tokio::time::Sleep>>,
    /// For the error.
    timeout: Duration,
    /// The error was yielded: the stream is over.
    expired: bool,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.expired {
            return Poll::Ready(None);
        }
        if let Poll::Ready(item) = Pin::new(&mut self.inner).poll_next(cx) {
            return Poll::Ready(item);
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.expired = true;
            let ms = self.timeout.as_millis() as u64;
            return Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                Expired(ms),
            )))));
        }
        Poll::Pending
    }
}
