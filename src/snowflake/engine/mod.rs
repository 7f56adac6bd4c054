//! `SnowflakeEngine`: a generator (cached or direct) with its worker id, as the server runs it.
//!
//! Start-up obtains the worker id (`static`, `disposable` or `lease`), resumes after the last
//! timestamp a previous holder of a leased id stored, and refuses layouts that cannot serve:
//! an epoch in the future, a time field already run out, a worker id the layout cannot hold,
//! or a smallest id from now that is not above `min_id_floor`.
//!
//! # The worker lease is checked where ids are made
//!
//! With a lease, a heartbeat task renews it and stores the latest tick this server may have
//! issued from. The right to issue is a *local deadline* on the monotonic clock
//! ([`Clock::monotonic_ms`]): the moment the last renewal the database confirmed was *sent*,
//! plus the lease, minus a safety margin (the cached generator's largest lead over the clock,
//! a heartbeat period and one second). Every id is checked against it after it is generated and
//! before it is returned, on the request thread itself: a heartbeat stuck on a query whose
//! answer never comes, or a process paused past its lease (`SIGSTOP`, a frozen VM), cannot
//! issue an id after the deadline, whatever the background task is doing. Since the deadline
//! counts from the send, a renewal answered late yields a deadline that may already have
//! passed, and then issuing stays suspended. Why the margin is enough: an id checked before the
//! deadline carries a tick at most the ring's lead past it, which is still before the lease's
//! end in the database, and a server that takes the id over starts at or after that end.
//!
//! Every call to the worker store is bounded by a timeout shorter than the lease it protects;
//!
//! # A restart during a database outage
//!
//! With a cache file ([`StartOptions::cache`], `snowflake.worker.cache_file`), every claim and
//! renewal the database confirmed is also written to a local file (`cache`). A start whose claim
//! cannot reach the database resumes that lease only under the conditions stated on
//! `resume_from_cache` (the lease the database confirmed is still ahead of the margin; issuing
//! starts after every tick the previous run may have issued), with the deadline and tick bound
//! of a renewal. Otherwise ([`StartOptions::wait_for_database`]) the engine starts with no worker
//! id: every id is refused, [`SnowflakeEngine::pending_reason`] says why, and the claim is
//! retried in the background until the database answers.
//!
//! The parts: `start` (start-up: the layout checks, obtaining the worker id, the background
//! claim), `cache` (the file), `lease` (the lease bookkeeping, its settings check and the
//! heartbeat task), `status` ([`SnowflakeStatus`], the view for health, metrics and pages); the
//! id path, the lease gate's refusal and shutdown are here.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::cached::{CachedConfig, CachedGenerator};
use super::clock::Clock;
use super::direct::DirectGenerator;
use super::error::SnowflakeError;
use super::layout::{BitLayout, TimeUnit, format_unix_ms};
use super::worker::{NodeInfo, WorkerStore, WorkerStoreError, WorkerStrategy};
use crate::background::Background;
use crate::lease_gate::LeaseGate;

mod cache;
#[cfg(test)]
mod cache_tests;
mod lease;
#[cfg(test)]
mod lease_tests;
mod start;
mod status;

pub use cache::{CacheError, CachedLease, WorkerCache};

use lease::{Lease, heartbeat_loop, store_call_timeout};
pub use start::{StartError, StartOptions, check_layout};
pub use status::SnowflakeStatus;

/// Which generator serves ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratorKind {
    /// Ring buffer filled ahead of the clock (uid-generator's CachedUidGenerator).
    Cached,
    /// One CAS per id on the clock (Agrona / Twitter style).
    Direct,
}

/// Everything the engine needs to start.
#[derive(Debug, Clone)]
pub struct SnowflakeConfig {
    /// The bit layout with its epoch.
    pub layout: BitLayout,
    /// Cached or direct.
    pub generator: GeneratorKind,
    /// Where the worker id comes from.
    pub strategy: WorkerStrategy,
    /// Lease length (`lease` strategy).
    pub lease: Duration,
    /// Renewal period (`lease` strategy).
    pub heartbeat: Duration,
    /// A clock step back up to this is waited out (direct generator).
    pub max_backward_ms: u64,
    /// Cached generator settings.
    pub cached: CachedConfig,
    /// Start-up fails unless every id from now on is above this.
    pub min_id_floor: u64,
    /// The region's share of the worker ids (`snowflake.worker.region_bits`).
    pub region: WorkerRegion,
}

/// A region's share of the worker ids: the database's worker id `w` (at most `max`) is issued
/// as `base + w`. The default: the whole range, `base` 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerRegion {
    /// Added to the database's worker id.
    pub base: u64,
    /// The largest worker id the region's database may hand out (`None`: the layout's).
    pub max: Option<u64>,
}

// The direct generator's padded state word makes it large; the engine lives in one `Arc`, so a
// box would only add an indirection to every id.
#[allow(clippy::large_enum_variant)]
enum Generator {
    Cached(CachedGenerator),
    Direct(DirectGenerator),
}

/// The running snowflake engine.
pub struct SnowflakeEngine {
    /// Set once a worker id is held (at start, or later by the claim retried in the
    /// background); `None`: no id can be issued.
    generator: OnceLock<Generator>,
    layout: BitLayout,
    /// This server's worker id; meaningful once `generator` is set (written before it).
    worker_id: AtomicU64,
    strategy: WorkerStrategy,
    clock: Arc<dyn Clock>,
    /// Set for good on shutdown or when the lease was taken over: no id is issued any more.
    /// Relaxed: a flag polled per id; the lease deadline, not this flag, is what makes an
    /// expired lease unusable (see the module docs).
    stopped: AtomicBool,
    /// The `lease` strategy's bookkeeping, set before `generator`; unset for `static` and
    /// `disposable`.
    lease: OnceLock<Lease>,
    /// Why no worker id is held yet (start-up during a database outage); `None` once held.
    pending: std::sync::Mutex<Option<String>>,
    /// Where the worker store lives (`lease` and `disposable`).
    store: Option<Arc<dyn WorkerStore>>,
    /// Who this process is, for claims.
    node: NodeInfo,
    /// The worker lease cache file, if configured.
    cache: Option<Arc<WorkerCache>>,
    /// Stops the heartbeat (cancelled by shutdown, which then waits for the task).
    heartbeat_stop: CancellationToken,
    /// The heartbeat task (or the background claim followed by it), awaited by
    /// [`Self::shutdown`] before the release.
    heartbeat_task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    config: SnowflakeConfig,
    /// Ids issued by the direct generator, added once per request (the cached generator's ring
    /// cursor already counts its ids). Relaxed: a statistic.
    direct_issued: AtomicU64,
    /// See [`StartOptions::lease_gate`].
    lease_gate: LeaseGate,
}

impl std::fmt::Debug for SnowflakeEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnowflakeEngine")
            .field("layout", &self.layout.bits_string())
            .field("worker_id", &self.worker_id())
            .finish_non_exhaustive()
    }
}

impl SnowflakeEngine {
    /// An id if one is ready without blocking: a ring take, or (millisecond layouts) a direct
    /// CAS. `None`: call [`Self::next_id_blocking`] off the async threads.
    pub fn try_next_id(&self) -> Option<Result<u64, SnowflakeError>> {
        self.try_next_id_unrefined()
            .map(|r| r.map_err(|e| self.refusal_or(e)))
    }

    /// [`Self::try_next_id`] before the lease gate's reason is put on a refusal.
    #[inline]
    fn try_next_id_unrefined(&self) -> Option<Result<u64, SnowflakeError>> {
        if self.stopped.load(Ordering::Relaxed) {
            return Some(Err(SnowflakeError::WorkerLeaseExpired));
        }
        let Some(generator) = self.generator.get() else {
            return Some(Err(SnowflakeError::WorkerLeaseExpired));
        };
        let id = match generator {
            Generator::Cached(g) => Ok(g.try_take()?),
            // A millisecond layout waits at most about a millisecond for the next tick.
            Generator::Direct(g) if self.layout.unit() == TimeUnit::Millis => {
                self.count_direct(g.next_id(), 1)
            }
            Generator::Direct(_) => return None,
        };
        Some(id.and_then(|id| self.authorized(id, id)))
    }

    /// The next id; may block briefly (the ring's bounded wait, or the next tick).
    pub fn next_id_blocking(&self) -> Result<u64, SnowflakeError> {
        if self.stopped.load(Ordering::Relaxed) {
            return Err(self.refusal_or(SnowflakeError::WorkerLeaseExpired));
        }
        let id = match self.generator.get() {
            Some(Generator::Cached(g)) => g.take(),
            Some(Generator::Direct(g)) => self.count_direct(g.next_id(), 1),
            None => Err(SnowflakeError::WorkerLeaseExpired),
        }
        .map_err(|e| self.refusal_or(e))?;
        self.authorized(id, id).map_err(|e| self.refusal_or(e))
    }

    /// A refusal for want of a worker lease (none held, not renewed, the ring not refilled
    /// for it) while the lease gate refuses is that refusal, naming the setting: the lease was
    /// refused for it (`crate::lease_gate`). Other errors pass unchanged.
    fn refusal_or(&self, e: SnowflakeError) -> SnowflakeError {
        match e {
            SnowflakeError::Exhausted
            | SnowflakeError::WorkerLeaseExpired
            | SnowflakeError::ShutDown => match self.lease_gate.refusal() {
                Some(why) => SnowflakeError::LossyDatabase(why),
                None => e,
            },
            other => other,
        }
    }

    /// `value` if this server still holds its worker id and `newest` (the largest id in
    /// `value`) carries a tick the lease covers: checked *after* the ids were generated, so
    /// their ticks were read (direct) or filled (cached) before the deadline. Ids refused here
    /// are dropped, never reissued (a gap).
    #[inline]
    fn authorized<T>(&self, value: T, newest: u64) -> Result<T, SnowflakeError> {
        let Some(lease) = self.lease.get() else {
            return Ok(value);
        };
        let tick = self.layout.decompose(newest).time_delta as i64;
        if tick > lease.max_tick.load(Ordering::Relaxed) || !self.lease_valid_now(lease) {
            return Err(SnowflakeError::WorkerLeaseExpired);
        }
        Ok(value)
    }

    /// Whether the lease's monotonic deadline lies ahead.
    #[inline]
    fn lease_valid_now(&self, lease: &Lease) -> bool {
        self.clock.monotonic_ms() < lease.deadline_ms.load(Ordering::Relaxed)
    }

    /// Adds `n` to the direct generator's issued count when `result` is an id.
    fn count_direct<T>(
        &self,
        result: Result<T, SnowflakeError>,
        n: u64,
    ) -> Result<T, SnowflakeError> {
        if result.is_ok() {
            self.direct_issued.fetch_add(n, Ordering::Relaxed);
        }
        result
    }

    /// `n` increasing ids; may block (use off the async threads).
    pub fn next_ids_blocking(&self, n: usize) -> Result<Vec<u64>, SnowflakeError> {
        self.next_ids_unrefined(n).map_err(|e| self.refusal_or(e))
    }

    /// [`Self::next_ids_blocking`] before the lease gate's reason is put on a refusal.
    fn next_ids_unrefined(&self, n: usize) -> Result<Vec<u64>, SnowflakeError> {
        if self.stopped.load(Ordering::Relaxed) {
            return Err(SnowflakeError::WorkerLeaseExpired);
        }
        let mut out = Vec::with_capacity(n);
        match self.generator.get() {
            Some(Generator::Cached(g)) => g.take_many(n, &mut out)?,
            Some(Generator::Direct(g)) => {
                let result = g.next_ids(n, &mut out);
                // On an error the ids appended so far are dropped by the caller: never reissued.
                self.direct_issued
                    .fetch_add(out.len() as u64, Ordering::Relaxed);
                result?;
            }
            None => return Err(SnowflakeError::WorkerLeaseExpired),
        }
        // One check after the whole batch: every id in it was generated before this reading.
        // The largest id has the latest tick (time sits above every other field); it is the
        // last one unless the batch spans a clock-back step.
        let newest = if self.layout.clock_back_bits() == 0 {
            out.last().copied().unwrap_or(0)
        } else {
            out.iter().copied().max().unwrap_or(0)
        };
        self.authorized(out, newest)
    }

    /// The layout.
    pub fn layout(&self) -> &BitLayout {
        &self.layout
    }

    /// This server's worker id (0 while [`Self::pending_reason`] says none is held yet).
    pub fn worker_id(&self) -> u64 {
        self.worker_id.load(Ordering::Relaxed)
    }

    /// Why no worker id is held yet (started during a database outage without a usable cached
    /// lease; claims are retried in the background); `None` once one is held.
    pub fn pending_reason(&self) -> Option<String> {
        if self.generator.get().is_some() {
            return None;
        }
        self.lock_pending().clone()
    }

    /// Whether issuing is suspended: no worker id yet, the worker lease was not renewed in
    /// time, was taken over, or the engine shut down.
    pub fn is_suspended(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
            || self.generator.get().is_none()
            || self
                .lease
                .get()
                .is_some_and(|lease| !self.lease_valid_now(lease))
    }

    /// Milliseconds left before issuing stops unless the lease is renewed (`None` without a
    /// lease; 0 once suspended).
    pub fn lease_left_ms(&self) -> Option<i64> {
        let lease = match self.lease.get() {
            Some(lease) => lease,
            None if self.strategy == WorkerStrategy::Lease => return Some(0),
            None => return None,
        };
        let left =
            (lease.deadline_ms.load(Ordering::Relaxed)).saturating_sub(self.clock.monotonic_ms());
        Some(left.max(0))
    }

    fn lock_task(&self) -> std::sync::MutexGuard<'_, Option<tokio::task::JoinHandle<()>>> {
        self.heartbeat_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The latest tick this server may have issued ids from.
    /// The clock-back value ids are issued under now; `None` without clock-back bits.
    pub fn clock_back(&self) -> Option<u64> {
        if self.layout.clock_back_bits() == 0 {
            return None;
        }
        Some(match self.generator.get() {
            Some(Generator::Cached(g)) => g.stats().clock_back,
            Some(Generator::Direct(g)) => g.clock_back(),
            None => 0,
        })
    }

    fn last_tick(&self) -> Option<u64> {
        match self.generator.get()? {
            Generator::Cached(g) => g.stats().last_filled_tick,
            Generator::Direct(g) => g.last_tick(),
        }
    }

    /// The end (unix ms) of the latest tick this server may have issued ids from.
    fn issued_up_to_ms(&self) -> i64 {
        self.last_tick()
            .map_or(0, |t| self.layout.tick_start_unix_ms(t + 1))
    }

    /// Stops issuing, stops and awaits the heartbeat, then releases a lease (on shutdown).
    /// No renewal can follow the release: the heartbeat is gone, and the release clears the
    /// row's owner, which every renewal must match. The cache file is removed first: a
    /// released lease may be claimed by anyone at once, so no restart may resume it; if the
    /// removal fails, the lease is left to expire instead.
    pub async fn shutdown(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        if let Some(Generator::Cached(g)) = self.generator.get() {
            g.shutdown();
        }
        self.heartbeat_stop.cancel();
        let task = self.lock_task().take();
        if let Some(task) = task {
            let _ = task.await;
        }
        if let Some(lease) = self.lease.get() {
            if !self.remove_cache().await {
                warn!(
                    worker_id = self.worker_id(),
                    "worker lease not released (its cache file may remain): it will expire"
                );
                return;
            }
            let last = self.issued_up_to_ms();
            let within = store_call_timeout(&self.config);
            let released = tokio::time::timeout(
                within,
                lease.store.release(self.worker_id(), &lease.owner, last),
            )
            .await;
            match released {
                Ok(Ok(())) => info!(worker_id = self.worker_id(), "worker lease released"),
                Ok(Err(e)) => {
                    warn!(error = %e, "could not release the worker lease; it will expire");
                }
                Err(_) => warn!(
                    timeout_ms = within.as_millis() as u64,
                    "worker lease release timed out; it will expire"
                ),
            }
        }
    }
}
