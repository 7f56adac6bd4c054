//! A deadline on request bodies. actix bounds the time to receive a request's head
//! (`client_request_timeout`), not its body: a client that sends half a body and stalls would
//! keep its connection, a worker's slot and its buffer forever (50 such bodies to the anonymous
//! `POST /api/v1/layouts/plan` were all still open after 15 s). Every request that carries a
//! body, whatever its method, gets its payload wrapped in a `Deadline` stream: once
//! `server.body_timeout_ms` has passed since the request arrived, the body stream ends with a
//! `TimedOut` error, the extractor answers `408 request_timeout` in the JSON error shape.
//!
//! **The connection is closed when the body was not read to its end** (issue 44). actix closes
//! a connection whose body is unread when the answer is sent, except for a *chunked* body whose
//! reader was dropped: that one it drains, with no deadline, so a `GET` with a chunked body
//! that stalls (no route reads a `GET` body) held its connection for as long as the client
//! liked (333 s until the server stopped). So the request's own payload is [`Held`] by the
//! answer's body until that body's last byte is written: actix then sees the payload alive and
//! unfinished, and closes the connection instead of draining it. A body sent whole (its end read
//! before the answer) leaves nothing unfinished and keeps the connection. Memory stays bounded:
//! a payload nobody reads makes actix stop reading the socket (backpressure).

use std::cell::RefCell;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::HttpMessage;
use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{Payload, ServiceRequest};
use actix_web::error::PayloadError;
use actix_web::web::Bytes;
use futures_core::Stream;

/// A request's own payload, shared by the handler's body stream and the answer's body.
type Shared = Rc<RefCell<Payload>>;

/// Wraps the body of `req`, if it has one, so that it fails with `TimedOut` once `timeout` has
/// passed; the payload to hold until the answer is written ([`Held`]), `None` for a request
/// without a body (the id routes' hot path: one `take` and one put back).
pub fn apply(req: &mut ServiceRequest, timeout: Duration) -> Option<Shared> {
    let payload = req.take_payload();
    if matches!(payload, Payload::None) {
        return None;
    }
    let shared = Rc::new(RefCell::new(payload));
    let stream: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> = Box::pin(Deadline {
        inner: shared.clone(),
        sleep: Box::pin(tokio::time::sleep(timeout)),
        timeout,
        expired: false,
    });
    req.set_payload(Payload::from(stream));
    Some(shared)
}

/// An answer's body that holds the request's payload until its last byte is written (see the
/// module docs): then actix closes a connection whose request body was not read to its end.
pub struct Held {
    body: BoxBody,
    _payload: Shared,
}

impl Held {
    /// `body`, holding `payload` until it is written.
    pub fn new(body: BoxBody, payload: Shared) -> Self {
        Self {
            body,
            _payload: payload,
        }
    }
}

impl MessageBody for Held {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_next(cx)
    }
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
    /// The request's own body (also held by the answer, [`Held`]).
    inner: Shared,
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
        if let Poll::Ready(item) = Pin::new(&mut *self.inner.borrow_mut()).poll_next(cx) {
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
