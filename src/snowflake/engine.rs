//! `SnowflakeEngine`: a generator (cached or direct) with its worker id, as the server runs it.
//!
//! Start-up obtains the worker id (`static`, `disposable` or `lease`), resumes after the last
//! timestamp a previous holder of a leased id stored, and refuses layouts that cannot serve:
//! an epoch in the future, a time field already run out, a worker id the layout cannot hold,
//! or a smallest id from now that is not above `min_id_floor`.
//!
//! With a lease, a heartbeat task renews it and stores the latest tick this server may have
//! issued from. If renewals fail until the lease is about to expire, the engine suspends itself
//! (`WorkerLeaseExpired`) *before* the expiry, leaving a margin longer than the cached
//! generator's lead over the clock, so a server taking the id over later never reissues a tick.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tracing::{error, info, warn};

use super::cached::{CachedConfig, CachedGenerator};
use super::clock::Clock;
use super::direct::DirectGenerator;
use super::error::SnowflakeError;
use super::layout::{BitLayout, TimeUnit, format_unix_ms};
use super::worker::{NodeInfo, WorkerStore, WorkerStoreError, WorkerStrategy};

/// Which generator serves ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
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
}

// The direct generator's padded state word makes it large; the engine lives in one `Arc`, so a
// box would only add an indirection to every id.
#[allow(clippy::large_enum_variant)]
enum Generator {
    Cached(CachedGenerator),
    Direct(DirectGenerator),
}

/// The lease bookkeeping of the `lease` strategy.
struct Lease {
    store: Arc<dyn WorkerStore>,
    owner: String,
    /// Unix ms until which this server may issue ids: the lease end minus a safety margin.
    valid_until_ms: AtomicI64,
}

/// The running snowflake engine.
pub struct SnowflakeEngine {
    generator: Generator,
    layout: BitLayout,
    worker_id: u64,
    strategy: WorkerStrategy,
    clock: Arc<dyn Clock>,
    /// Set while the worker lease is not known to be valid: no id is issued. Relaxed: it is a
    /// flag polled per id; the heartbeat task sets it well before the lease actually ends.
    suspended: AtomicBool,
    lease: Option<Lease>,
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

/// A point-in-time view for health, metrics and pages.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct SnowflakeStatus {
    /// `T/W/S` or `P+T/W/S`.
    pub layout: String,
    /// The layout's epoch, RFC 3339.
    pub epoch: String,
    /// `seconds` or `millis`.
    pub unit: TimeUnit,
    /// Cached or direct.
    pub generator: GeneratorKind,
    /// This server's worker id.
    pub worker_id: u64,
    /// How it was obtained.
    pub worker_strategy: String,
    /// When the time field runs out (RFC 3339).
    pub exhausted_at: String,
    /// Seconds until then.
    pub time_left_secs: i64,
    /// Whether issuing is suspended (lease not renewed).
    pub suspended: bool,
    /// Ring capacity (cached).
    pub ring_capacity: Option<usize>,
    /// Ids ready in the ring (cached).
    pub ring_available: Option<usize>,
    /// Ticks the ring is ahead of the clock (cached).
    pub ticks_ahead: Option<u64>,
    /// Ids issued since start.
    pub ids_issued: u64,
}

impl SnowflakeEngine {
    /// Validates the layout, obtains the worker id and starts the generator (and, for a lease,
    /// its heartbeat task on the current tokio runtime).
    pub async fn start(
        config: SnowflakeConfig,
        store: Option<Arc<dyn WorkerStore>>,
        clock: Arc<dyn Clock>,
        node: NodeInfo,
    ) -> Result<Arc<Self>, StartError> {
        let layout = config.layout;
        let now = clock.now_unix_ms();
        check_layout(&layout, now, config.min_id_floor)?;
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
                let got = store
                    .acquire_lease(&node, lease_ms, max_worker, now)
                    .await?;
                info!(
                    worker_id = got.worker_id, lease_ms, last_timestamp_ms = got.last_timestamp_ms,
                    owner = %node.owner, "worker lease acquired"
                );
                let lease = Lease {
                    store,
                    owner: node.owner.clone(),
                    valid_until_ms: AtomicI64::new(now + lease_ms - safety_margin_ms(&config)),
                };
                (got.worker_id, got.last_timestamp_ms, Some(lease))
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
            suspended: AtomicBool::new(false),
            lease,
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
            tokio::spawn(heartbeat_loop(Arc::downgrade(&engine)));
        }
        Ok(engine)
    }

    /// An id if one is ready without blocking: a ring take, or (millisecond layouts) a direct
    /// CAS. `None`: call [`Self::next_id_blocking`] off the async threads.
    pub fn try_next_id(&self) -> Option<Result<u64, SnowflakeError>> {
        if self.suspended.load(Ordering::Relaxed) {
            return Some(Err(SnowflakeError::WorkerLeaseExpired));
        }
        match &self.generator {
            Generator::Cached(g) => g.try_take().map(Ok),
            // A millisecond layout waits at most about a millisecond for the next tick.
            Generator::Direct(g) if self.layout.unit() == TimeUnit::Millis => {
                Some(self.count_direct(g.next_id(), 1))
            }
            Generator::Direct(_) => None,
        }
    }

    /// The next id; may block briefly (the ring's bounded wait, or the next tick).
    pub fn next_id_blocking(&self) -> Result<u64, SnowflakeError> {
        if self.suspended.load(Ordering::Relaxed) {
            return Err(SnowflakeError::WorkerLeaseExpired);
        }
        match &self.generator {
            Generator::Cached(g) => g.take(),
            Generator::Direct(g) => self.count_direct(g.next_id(), 1),
        }
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
        if self.suspended.load(Ordering::Relaxed) {
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
        Ok(out)
    }

    /// The layout.
    pub fn layout(&self) -> &BitLayout {
        &self.layout
    }

    /// This server's worker id.
    pub fn worker_id(&self) -> u64 {
        self.worker_id
    }

    /// Whether issuing is suspended because the worker lease was not renewed.
    pub fn is_suspended(&self) -> bool {
        self.suspended.load(Ordering::Relaxed)
    }

    /// Health, metrics and page data.
    pub fn status(&self) -> SnowflakeStatus {
        let exhausted_at = self.layout.exhausted_at_unix_ms();
        let stats = match &self.generator {
            Generator::Cached(g) => Some(g.stats()),
            Generator::Direct(_) => None,
        };
        SnowflakeStatus {
            layout: self.layout.bits_string(),
            epoch: format_unix_ms(self.layout.epoch_ms()),
            unit: self.layout.unit(),
            generator: self.config.generator,
            worker_id: self.worker_id,
            worker_strategy: self.strategy.to_string(),
            exhausted_at: format_unix_ms(exhausted_at),
            time_left_secs: (exhausted_at - self.clock.now_unix_ms()) / 1000,
            suspended: self.is_suspended(),
            ring_capacity: stats.map(|s| s.capacity),
            ring_available: stats.map(|s| s.available),
            ticks_ahead: stats.map(|s| s.ticks_ahead),
            ids_issued: match stats {
                Some(s) => s.taken,
                None => self.direct_issued.load(Ordering::Relaxed),
            },
        }
    }

    /// The end (unix ms) of the latest tick this server may have issued ids from.
    fn issued_up_to_ms(&self) -> i64 {
        let tick = match &self.generator {
            Generator::Cached(g) => g.stats().last_filled_tick,
            Generator::Direct(g) => g.last_tick(),
        };
        tick.map_or(0, |t| self.layout.tick_start_unix_ms(t + 1))
    }

    /// Stops the generator and releases a lease (on shutdown).
    pub async fn shutdown(&self) {
        self.suspended.store(true, Ordering::Relaxed);
        if let Generator::Cached(g) = &self.generator {
            g.shutdown();
        }
        if let Some(lease) = &self.lease {
            let last = self.issued_up_to_ms();
            match lease
                .store
                .release(self.worker_id, &lease.owner, last)
                .await
            {
                Ok(()) => info!(worker_id = self.worker_id, "worker lease released"),
                Err(e) => warn!(error = %e, "could not release the worker lease; it will expire"),
            }
        }
    }
}

/// The margin by which issuing stops before the lease ends: the cached generator's largest lead
/// over the clock, plus a heartbeat period and one second.
fn safety_margin_ms(config: &SnowflakeConfig) -> i64 {
    let tick_ms = config.layout.unit().tick_ms();
    let ring_ticks = match config.generator {
        GeneratorKind::Cached => config
            .cached
            .max_ahead_ticks
            .unwrap_or(1 << config.cached.boost_power) as i64,
        GeneratorKind::Direct => 1,
    };
    ring_ticks * tick_ms + config.heartbeat.as_millis() as i64 + 1000
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

async fn heartbeat_loop(engine: std::sync::Weak<SnowflakeEngine>) {
    let mut next_renewal = 0i64;
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let Some(engine) = engine.upgrade() else {
            return;
        };
        let Some(lease) = &engine.lease else { return };
        let now = engine.clock.now_unix_ms();
        let valid_until = lease.valid_until_ms.load(Ordering::Relaxed);
        if now >= valid_until && !engine.suspended.swap(true, Ordering::Relaxed) {
            error!(
                worker_id = engine.worker_id,
                "worker lease not renewed in time: issuing suspended"
            );
        }
        if now < next_renewal {
            continue;
        }
        let lease_ms = engine.config.lease.as_millis() as i64;
        let last = engine.issued_up_to_ms();
        match lease
            .store
            .heartbeat(engine.worker_id, &lease.owner, now + lease_ms, last)
            .await
        {
            Ok(true) => {
                lease.valid_until_ms.store(
                    now + lease_ms - safety_margin_ms(&engine.config),
                    Ordering::Relaxed,
                );
                next_renewal = now + engine.config.heartbeat.as_millis() as i64;
                if engine.suspended.swap(false, Ordering::Relaxed) {
                    info!(
                        worker_id = engine.worker_id,
                        "worker lease renewed: issuing resumed"
                    );
                }
            }
            Ok(false) => {
                error!(
                    worker_id = engine.worker_id,
                    "worker lease was taken over: issuing stopped for good"
                );
                engine.suspended.store(true, Ordering::Relaxed);
                return;
            }
            Err(e) => {
                warn!(error = %e, worker_id = engine.worker_id, "worker lease renewal failed; retrying");
                next_renewal = now + 1000;
            }
        }
    }
}
