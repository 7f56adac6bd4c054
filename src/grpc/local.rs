//! Where the gRPC calls run the id service: threads of their own, each a single-threaded
//! runtime (tokio-util's [`LocalPoolHandle`]), as actix runs the HTTP handlers.
//!
//! Why: the id service is transport-free and takes the caller as `&dyn Credentials`, which
//! HTTP builds over its request (not `Sync`), so its futures are not `Send`; tonic's handlers
//! must be. A call hands a `Send` closure to the pool, which builds and runs the service's
//! future on one thread and sends back the answer. The caller's deadline runs inside that
//! thread: at the deadline the service's future is dropped there (a dropped wait hands out
//! nothing; an id already taken for it is a gap, never handed out twice).

use std::future::Future;
use std::time::Duration;

use tokio_util::task::LocalPoolHandle;
use tonic::Status;

use super::caller::within;
use crate::error::Error;
use crate::service::IdService;

/// The id service and the threads its calls run on: what every gRPC service holds.
#[derive(Clone)]
pub struct Door {
    ids: IdService,
    pool: LocalPoolHandle,
}

impl Door {
    /// The door over `ids`, its calls on `threads` threads (at least one).
    pub fn new(ids: IdService, threads: usize) -> Self {
        Self {
            ids,
            pool: LocalPoolHandle::new(threads.max(1)),
        }
    }

    /// The id service, for what needs no await (the access policy, the engines).
    pub fn ids(&self) -> &IdService {
        &self.ids
    }

    /// The pool, for a stream's task (`super::segment`).
    pub fn pool(&self) -> &LocalPoolHandle {
        &self.pool
    }

    /// Runs `call` (given the service) on the pool within the caller's deadline `limit`. A
    /// task that panicked is `internal`, never an id.
    pub async fn run<T, F, Fut>(&self, limit: Option<Duration>, call: F) -> Result<T, Status>
    where
        T: Send + 'static,
        F: FnOnce(IdService) -> Fut + Send + 'static,
        Fut: Future<Output = Result<T, Error>> + 'static,
    {
        let ids = self.ids.clone();
        self.pool
            .spawn_pinned(
                move || async move { within(limit, async { Ok(call(ids).await?) }).await },
            )
            .await
            .unwrap_or_else(|_| Err(Error::Internal.into()))
    }
}
