//! What every gRPC service holds: the id service, and the one way a call runs it.
//!
//! A call runs the id service's future on tonic's own task, on the gRPC runtime's threads: the
//! service takes the caller as `&impl Credentials`, and a call's [`CallCredentials`] are
//! `Sync`, so the future is `Send` (the compiler checks it at every call below). HTTP passes its
//! request's credentials, which are not `Sync`, to the same functions on actix's threads.
//! (Before, each call hopped to a thread pool of its own and back: measured 0.65x of tonic's
//! hello-world in calls/s, docs/benchmarks.md.) The caller's deadline bounds the call: at the
//! deadline the service's future is dropped (a dropped wait hands out nothing; an id already
//! taken for it is a gap, never handed out twice).
//!
//! [`CallCredentials`]: super::caller::CallCredentials

use std::future::Future;
use std::time::Duration;

use tonic::Status;

use super::caller::within;
use crate::error::Error;
use crate::service::IdService;

/// The id service, as every gRPC service holds it.
#[derive(Clone)]
pub struct Door {
    ids: IdService,
}

impl Door {
    /// The door over `ids`.
    pub fn new(ids: IdService) -> Self {
        Self { ids }
    }

    /// The id service, for what needs no await (the access policy, the engines) and for a
    /// stream's task.
    pub fn ids(&self) -> &IdService {
        &self.ids
    }

    /// Awaits `call` (a call of [`Self::ids`]) within the caller's deadline `limit`: what
    /// [`Self::run`] does, without a clone of the service or of the call's arguments (the hot
    /// single-id call uses it).
    pub async fn within<T, Fut>(&self, limit: Option<Duration>, call: Fut) -> Result<T, Status>
    where
        Fut: Future<Output = Result<T, Error>> + Send,
    {
        within(limit, async { Ok(call.await?) }).await
    }

    /// Runs `call` (given the service) within the caller's deadline `limit`.
    pub async fn run<T, F, Fut>(&self, limit: Option<Duration>, call: F) -> Result<T, Status>
    where
        F: FnOnce(IdService) -> Fut,
        Fut: Future<Output = Result<T, Error>> + Send,
    {
        let ids = self.ids.clone();
        within(limit, async { Ok(call(ids).await?) }).await
    }
}
