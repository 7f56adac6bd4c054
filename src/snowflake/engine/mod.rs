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
//! The parts: `lease` (the lease bookkeeping, its settings check and the heartbeat task),
//! `status` ([`SnowflakeStatus`], the view for health, metrics and pages); starting, the id
//! path and shutdown are here.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
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

mod lease;
#[cfg(test)]
mod lease_tests;
mod status;

use lease::{Lease, heartbeat_loop, store_call_timeout};
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
}

/// Why the engine could not start. Each message names what to change.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The layout cannot serve now.
    #[error("{0}")]
    Layout(String),
    /// No worker id could be obtained.
    #[error("worker id: {0}")]
    Worker(#[from] WorkerStoreError),
    /// The generator refused its settings.
    #[error("snowflake generator: {0}")]
    Generator(#[from] SnowflakeError),
    /// The `lease`/`disposable` strategies need a database.
    #[error("snowflake.worker.strategy = {0} needs a database")]
    NoStore(WorkerStrategy),
    /// The lease settings cannot work (see [`SnowflakeConfig::check_lease`]).
    #[error("{0}")]
    Lease(String),
    /// The database did not answer the worker-id request in time.
    #[error("worker id: the database did not answer within {0:?}")]
    WorkerTimeout(Duration),
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
    generator: Generator,
    layout: BitLayout,
    worker_id: u64,
    strategy: WorkerStrategy,
    clock: Arc<dyn Clock>,
    /// Set for good on shutdown or when the lease was taken over: no id is issued any more.
    /// Relaxed: a flag polled per id; the lease deadline, not this flag, is what makes an
    /// expired lease unusable (see the module docs).
    stopped: AtomicBool,
    /// The `lease` strategy's bookkeeping; `None` for `static` and `disposable`.
    lease: Option<Lease>,
    /// Stops the heartbeat (cancelled by shutdown, which then waits for the task).
    heartbeat_stop: CancellationToken,
    /// The heartbeat task, awaited by [`Self::shutdown`] before the release.
    heartbeat_task: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    config: SnowflakeConfig,
    /// Ids issued by the direct generator, added once per request (the cached generator's ring
    /// cursor already counts its ids). Relaxed: a statistic.
    direct_issued: AtomicU64,
}

impl std::fmt::Debug for SnowflakeEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnowflakeEngine")
            .field("layout", &self.layout.bits_string())
            .field("worker_id", &self.worker_id)
            .finish_non_exhaustive()
    }
}

impl SnowflakeEngine {
    /// Validates the layout, obtains the worker id and starts the generator (and, for a lease,
    /// its heartbeat task on the current tokio runtime).
    /// The heartbeat runs under `background`: cancelling it stops renewals.
    pub async fn start(
        config: SnowflakeConfig,
        store: Option<Arc<dyn WorkerStore>>,
        clock: Arc<dyn Clock>,
        node: NodeInfo,
        background: &Background,
    ) -> Result<Arc<Self>, StartError> {
        let layout = config.layout;
        let now = clock.now_unix_ms();
        check_layout(&layout, now, config.min_id_floor)?;
        if config.strategy == WorkerStrategy::Lease {
            config.check_lease().map_err(StartError::Lease)?;
        }
        let max_worker = layout.max_worker_id();
        let (worker_id, resume_ms, lease) = match config.strategy {
            WorkerStrategy::Static(id) => (id, 0, None),
            WorkerStrategy::Disposable => {
                let store = store.ok_or(StartError::NoStore(config.strategy))?;
                let id = store.assign_disposable(&node, max_worker).await?;
                info!(worker_id = id, host = %node.host, port = %node.port, "disposable worker id assigned");
                (id, 0, None)
            }
            WorkerStrategy::Lease => {
                let store = store.ok_or(StartError::NoStore(config.strategy))?;
                let lease_ms = config.lease.as_millis() as i64;
                // Taken before the claim is sent: the lease runs from no later than this.
                let sent_ms = clock.monotonic_ms();
                let within = config.heartbeat;
                let got = tokio::time::timeout(
                    within,
                    store.acquire_lease(&node, lease_ms, max_worker, now),
                )
                .await
                .map_err(|_| StartError::WorkerTimeout(within))??;
                info!(
                    worker_id = got.worker_id, lease_ms, last_timestamp_ms = got.last_timestamp_ms,
                    owner = %node.owner, "worker lease acquired"
                );
                let lease = Lease {
                    store,
                    owner: node.owner.clone(),
                    deadline_ms: AtomicI64::new(i64::MIN),
                    max_tick: AtomicI64::new(-1),
                    sent_until_ms: AtomicI64::new(now + lease_ms),
                };
                if !lease.confirm(&config, &*clock, sent_ms, now + lease_ms) {
                    return Err(StartError::WorkerTimeout(config.lease));
                }
                // The store hands out only an id whose lease ended before `now` (this clock),
                // and its holder's ids all lie before that end; its stored last timestamp may
                // lag them (ids issued after its last renewal). Resuming after `now` as well
                // keeps a wall clock stepped back after the claim out of those ticks.
                (got.worker_id, got.last_timestamp_ms.max(now), Some(lease))
            }
        };
        // Never issue from a tick the previous holder of this worker id may have used.
        let resume_tick = (resume_ms > 0).then(|| layout.delta_at(resume_ms).unwrap_or(0));
        let generator = match config.generator {
            GeneratorKind::Cached => {
                let mut cached = config.cached.clone();
                cached.start_after_tick = resume_tick;
                Generator::Cached(CachedGenerator::new(
                    layout,
                    worker_id,
                    clock.clone(),
                    cached,
                )?)
            }
            GeneratorKind::Direct => {
                let g =
                    DirectGenerator::new(layout, worker_id, clock.clone(), config.max_backward_ms)?;
                Generator::Direct(match resume_tick {
                    Some(t) => g.resume_after(t),
                    None => g,
                })
            }
        };
        let engine = Arc::new(Self {
            generator,
            layout,
            worker_id,
            strategy: config.strategy,
            clock,
            stopped: AtomicBool::new(false),
            lease,
            heartbeat_stop: background.token(),
            heartbeat_task: std::sync::Mutex::new(None),
            config,
            direct_issued: AtomicU64::new(0),
        });
        let status = engine.status();
        info!(
            layout = %status.layout, epoch = %status.epoch, worker_id, strategy = %engine.strategy,
            generator = ?engine.config.generator, exhausted_at = %status.exhausted_at,
            "snowflake engine started"
        );
        if status.time_left_secs < 365 * 86_400 {
            warn!(
                exhausted_at = %status.exhausted_at, time_left_secs = status.time_left_secs,
                "the snowflake layout runs out of time within a year: plan a migration (leafid layout plan)"
            );
        }
        if engine.lease.is_some() {
            let task = background.spawn(heartbeat_loop(
                Arc::downgrade(&engine),
                engine.heartbeat_stop.clone(),
            ));
            *engine.lock_task() = Some(task);
        }
        Ok(engine)
    }

    /// An id if one is ready without blocking: a ring take, or (millisecond layouts) a direct
    /// CAS. `None`: call [`Self::next_id_blocking`] off the async threads.
    pub fn try_next_id(&self) -> Option<Result<u64, SnowflakeError>> {
        if self.stopped.load(Ordering::Relaxed) {
            return Some(Err(SnowflakeError::WorkerLeaseExpired));
        }
        let id = match &self.generator {
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
            return Err(SnowflakeError::WorkerLeaseExpired);
        }
        let id = match &self.generator {
            Generator::Cached(g) => g.take(),
            Generator::Direct(g) => self.count_direct(g.next_id(), 1),
        }?;
        self.authorized(id, id)
    }

    /// `value` if this server still holds its worker id and `newest` (the largest id in
    /// `value`) carries a tick the lease covers: checked *after* the ids were generated, so
    /// their ticks were read (direct) or filled (cached) before the deadline. Ids refused here
    /// are dropped, never reissued (a gap).
    #[inline]
    fn authorized<T>(&self, value: T, newest: u64) -> Result<T, SnowflakeError> {
        let Some(lease) = &self.lease else {
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
        if self.stopped.load(Ordering::Relaxed) {
            return Err(SnowflakeError::WorkerLeaseExpired);
        }
        let mut out = Vec::with_capacity(n);
        match &self.generator {
            Generator::Cached(g) => g.take_many(n, &mut out)?,
            Generator::Direct(g) => {
                let result = g.next_ids(n, &mut out);
                // On an error the ids appended so far are dropped by the caller: never reissued.
                self.direct_issued
                    .fetch_add(out.len() as u64, Ordering::Relaxed);
                result?
            }
        }
        // One check after the whole batch: every id in it was generated before this reading,
        // and the last is the largest.
        let newest = out.last().copied().unwrap_or(0);
        self.authorized(out, newest)
    }

    /// The layout.
    pub fn layout(&self) -> &BitLayout {
        &self.layout
    }

    /// This server's worker id.
    pub fn worker_id(&self) -> u64 {
        self.worker_id
    }

    /// Whether issuing is suspended: the worker lease was not renewed in time, was taken over,
    /// or the engine shut down.
    pub fn is_suspended(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
            || self
                .lease
                .as_ref()
                .is_some_and(|lease| !self.lease_valid_now(lease))
    }

    /// Milliseconds left before issuing stops unless the lease is renewed (`None` without a
    /// lease; 0 once suspended).
    pub fn lease_left_ms(&self) -> Option<i64> {
        let lease = self.lease.as_ref()?;
        let left =
            (lease.deadline_ms.load(Ordering::Relaxed)).saturating_sub(self.clock.monotonic_ms());
        Some(left.max(0))
    }

    fn lock_task(&self) -> std::sync::MutexGuard<'_, Option<tokio::task::JoinHandle<()>>> {
        self.heartbeat_task
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The end (unix ms) of the latest tick this server may have issued ids from.
    fn issued_up_to_ms(&self) -> i64 {
        let tick = match &self.generator {
            Generator::Cached(g) => g.stats().last_filled_tick,
            Generator::Direct(g) => g.last_tick(),
        };
        tick.map_or(0, |t| self.layout.tick_start_unix_ms(t + 1))
    }

    /// Stops issuing, stops and awaits the heartbeat, then releases a lease (on shutdown).
    /// No renewal can follow the release: the heartbeat is gone, and the release clears the
    /// row's owner, which every renewal must match.
    pub async fn shutdown(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        if let Generator::Cached(g) = &self.generator {
            g.shutdown();
        }
        self.heartbeat_stop.cancel();
        let task = self.lock_task().take();
        if let Some(task) = task {
            let _ = task.await;
        }
        if let Some(lease) = &self.lease {
            let last = self.issued_up_to_ms();
            let within = store_call_timeout(&self.config);
            let released = tokio::time::timeout(
                within,
                lease.store.release(self.worker_id, &lease.owner, last),
            )
            .await;
            match released {
                Ok(Ok(())) => info!(worker_id = self.worker_id, "worker lease released"),
                Ok(Err(e)) => {
                    warn!(error = %e, "could not release the worker lease; it will expire")
                }
                Err(_) => warn!(
                    timeout_ms = within.as_millis() as u64,
                    "worker lease release timed out; it will expire"
                ),
            }
        }
    }
}

/// Refuses layouts that cannot serve from `now_ms`.
pub fn check_layout(layout: &BitLayout, now_ms: i64, floor: u64) -> Result<(), StartError> {
    if layout.epoch_ms() > now_ms {
        return Err(StartError::Layout(format!(
            "snowflake.epoch {} is in the future",
            format_unix_ms(layout.epoch_ms())
        )));
    }
    if layout.exhausted_at_unix_ms() <= now_ms {
        return Err(StartError::Layout(format!(
            "snowflake layout {} ran out of time on {}: plan a migration with `leafid layout plan`",
            layout.bits_string(),
            format_unix_ms(layout.exhausted_at_unix_ms())
        )));
    }
    match layout.smallest_id_from(now_ms) {
        Ok(smallest) if smallest > floor => Ok(()),
        Ok(smallest) => Err(StartError::Layout(format!(
            "snowflake layout {} can still issue {smallest}, not above snowflake.min_id_floor = {floor}",
            layout.bits_string()
        ))),
        Err(e) => Err(StartError::Layout(format!(
            "snowflake layout {}: {e}",
            layout.bits_string()
        ))),
    }
}
