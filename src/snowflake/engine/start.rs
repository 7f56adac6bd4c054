//! Starting the snowflake engine: the layout checked against the clock and the floor, the
//! worker id obtained (static, disposable, a database lease, or a cached lease resumed during an
//! outage), the generator installed, and the background claim of an engine started without a
//! worker id. The id path is in [`super`]; nothing here runs per id.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::*;

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

/// How [`SnowflakeEngine::start_with`] copes with a database it cannot reach (`lease` strategy).
#[derive(Debug, Default, Clone)]
pub struct StartOptions {
    /// The worker lease cache file: every confirmed claim and renewal is written to it, and a
    /// start that cannot reach the database may resume the lease it holds (see the module docs).
    pub cache: Option<Arc<WorkerCache>>,
    /// When the database cannot be reached and no cached lease may be resumed: start with no
    /// worker id (not ready, every id refused, the reason in [`SnowflakeStatus::pending`]) and
    /// keep claiming in the background, instead of failing.
    pub wait_for_database: bool,
    /// Whether a worker lease may be taken now: while it refuses, the not-ready answers
    /// (no worker id, lease not renewed, ring empty) are [`SnowflakeError::LossyDatabase`],
    /// naming why.
    pub lease_gate: LeaseGate,
}

impl SnowflakeEngine {
    /// Validates the layout, obtains the worker id and starts the generator (and, for a lease,
    /// its heartbeat task on the current tokio runtime).
    /// The heartbeat runs under `background`: cancelling it stops renewals.
    /// A database that cannot be reached is a start-up error (see [`Self::start_with`]).
    pub async fn start(
        config: SnowflakeConfig,
        store: Option<Arc<dyn WorkerStore>>,
        clock: Arc<dyn Clock>,
        node: NodeInfo,
        background: &Background,
    ) -> Result<Arc<Self>, StartError> {
        Self::start_with(
            config,
            store,
            clock,
            node,
            background,
            StartOptions::default(),
        )
        .await
    }

    /// [`Self::start`], with a worker lease cache file and the choice to start without a worker
    /// id while the database cannot be reached (`lease` strategy): see [`StartOptions`].
    pub async fn start_with(
        config: SnowflakeConfig,
        store: Option<Arc<dyn WorkerStore>>,
        clock: Arc<dyn Clock>,
        node: NodeInfo,
        background: &Background,
        options: StartOptions,
    ) -> Result<Arc<Self>, StartError> {
        let layout = config.layout;
        let now = clock.now_unix_ms();
        check_layout(&layout, now, config.min_id_floor)?;
        if config.strategy == WorkerStrategy::Lease {
            config.check_lease().map_err(StartError::Lease)?;
        }
        if store.is_none()
            && matches!(
                config.strategy,
                WorkerStrategy::Lease | WorkerStrategy::Disposable
            )
        {
            return Err(StartError::NoStore(config.strategy));
        }
        let engine = Arc::new(Self {
            generator: OnceLock::new(),
            layout,
            worker_id: AtomicU64::new(0),
            strategy: config.strategy,
            clock,
            stopped: AtomicBool::new(false),
            lease: OnceLock::new(),
            pending: std::sync::Mutex::new(None),
            store,
            node,
            cache: options.cache.clone(),
            heartbeat_stop: background.token(),
            heartbeat_task: std::sync::Mutex::new(None),
            config,
            direct_issued: AtomicU64::new(0),
            lease_gate: options.lease_gate.clone(),
        });
        match engine.strategy {
            WorkerStrategy::Static(id) => engine.install(id, None, None, None).await?,
            WorkerStrategy::Disposable => {
                let store = engine
                    .store
                    .as_ref()
                    .ok_or(StartError::NoStore(engine.strategy))?;
                let id = store
                    .assign_disposable(&engine.node, engine.max_claimed_worker())
                    .await?;
                info!(worker_id = id, host = %engine.node.host, port = %engine.node.port, "disposable worker id assigned");
                engine.install(id, None, None, None).await?;
            }
            WorkerStrategy::Lease => match engine.claim().await {
                Ok(()) => {}
                Err(e) if e.is_unreachable() => {
                    let resumed = engine.resume_from_cache().await;
                    if let Err(why) = resumed {
                        if !options.wait_for_database {
                            return Err(e);
                        }
                        let reason = format!(
                            "no snowflake worker id yet: {e}; {why}; claiming again until the \
                             database answers"
                        );
                        warn!(reason = %reason, "snowflake engine started without a worker id: not ready");
                        *engine.lock_pending() = Some(reason);
                        let task = background.spawn(claim_then_heartbeat(
                            Arc::downgrade(&engine),
                            engine.heartbeat_stop.clone(),
                        ));
                        *engine.lock_task() = Some(task);
                        return Ok(engine);
                    }
                }
                Err(e) => return Err(e),
            },
        }
        engine.log_started();
        if engine.lease.get().is_some() {
            let task = background.spawn(heartbeat_loop(
                Arc::downgrade(&engine),
                engine.heartbeat_stop.clone(),
            ));
            *engine.lock_task() = Some(task);
        }
        Ok(engine)
    }

    /// Claims a worker lease in the database, writes it to the cache file, and starts the
    /// generator after every tick a previous holder may have used.
    pub(super) async fn claim(&self) -> Result<(), StartError> {
        let config = &self.config;
        let store = self
            .store
            .clone()
            .ok_or(StartError::NoStore(self.strategy))?;
        let lease_ms = config.lease.as_millis() as i64;
        let now = self.clock.now_unix_ms();
        // Taken before the claim is sent: the lease runs from no later than this.
        let sent_ms = self.clock.monotonic_ms();
        let within = config.heartbeat;
        let max_worker = self.max_claimed_worker();
        let got = tokio::time::timeout(
            within,
            store.acquire_lease(&self.node, lease_ms, max_worker, now),
        )
        .await
        .map_err(|_| StartError::WorkerTimeout(within))??;
        info!(
            worker_id = got.worker_id, lease_ms, last_timestamp_ms = got.last_timestamp_ms,
            owner = %self.node.owner, "worker lease acquired"
        );
        let lease = Lease {
            store,
            owner: self.node.owner.clone(),
            deadline_ms: AtomicI64::new(i64::MIN),
            max_tick: AtomicI64::new(-1),
            sent_until_ms: AtomicI64::new(now + lease_ms),
        };
        if !lease.confirm(config, &*self.clock, sent_ms, now + lease_ms) {
            return Err(StartError::WorkerTimeout(config.lease));
        }
        // The store hands out only an id whose lease ended before `now` (this clock),
        // and its holder's ids all lie before that end; its stored last timestamp may
        // lag them (ids issued after its last renewal). Resuming after `now` as well
        // keeps a wall clock stepped back after the claim out of those ticks.
        let resume_ms = got.last_timestamp_ms.max(now);
        let resume_tick = self.layout.delta_at(resume_ms).unwrap_or(0);
        // A clock-back value may go lower: every tick the previous holders issued, under any
        // value, ends by the later of the stored last timestamp and the lease the row held (see
        // `WorkerLease::previous_lease_until_ms`); 0 for a worker id never used.
        let floor_ms = got.last_timestamp_ms.max(got.previous_lease_until_ms);
        let floor_tick = self
            .layout
            .delta_at(floor_ms.max(self.layout.epoch_ms()))
            .ok();
        if let Some(written) = self.write_cache(got.worker_id, &lease.owner, now + lease_ms, -1) {
            let _ = written.await;
        }
        self.install(got.worker_id, Some(resume_tick), floor_tick, Some(lease))
            .await
    }

    /// Resumes the worker lease of the cache file, when the database cannot be reached.
    ///
    /// # Why this cannot share a worker id or repeat an id
    ///
    /// - *No other server holds this worker id until the cached lease ends.* The file holds a
    ///   lease the database confirmed, with the owner token of this server (the one that wrote
    ///   it: the file is locked by one process at a time, and removed before a release). The
    ///   database lets another server claim a worker id only once the row's `lease_until_ms` is
    ///   before that server's clock (the claim's `WHERE lease_until_ms < now`), and a renewal
    ///   never lowers it. So until `lease_until_ms`, by the clock rules of docs/guarantees.md
    ///   (servers' clocks agree within the margin's second), the id is this server's alone. Here
    ///   issuing stops a full margin before it (the same local deadline on the monotonic clock as
    ///   after a renewal, the same tick bound), unless a renewal is confirmed first.
    /// - *No tick of the previous run of this server is used again.* The new run starts after
    ///   the later of the cached last tick and the tick of "now" plus the generator's largest
    ///   lead over the clock: every id the previous run issued carries a tick at most that lead
    ///   past its clock, and its clock read no later than now. "Now" is the later of the wall
    ///   clock, the time the file was written, and (same boot) that time plus the
    ///   `CLOCK_BOOTTIME` elapsed since, a clock no wall step moves: a wall clock stepped back
    ///   across the restart does not bring old ticks back, nor lengthen the lease.
    ///
    /// `Err`: why the cache cannot be used (nothing is resumed).
    pub(super) async fn resume_from_cache(&self) -> Result<(), String> {
        let config = &self.config;
        let Some(cache) = &self.cache else {
            return Err("no worker lease cache file (snowflake.worker.cache_file)".into());
        };
        let Some(cached) = cache.load() else {
            return Err(format!(
                "no usable cached worker lease in {}",
                cache.path().display()
            ));
        };
        let store = self.store.clone().ok_or("no worker store")?;
        let wall = self.clock.now_unix_ms();
        let mono = self.clock.monotonic_ms();
        let mut now = wall.max(cached.written_unix_ms);
        if cached.boot_id.is_some() && cached.boot_id.as_deref() == cache.boot_id() {
            let elapsed = mono - cached.written_boot_ms;
            if elapsed < 0 {
                return Err(format!(
                    "the cached worker lease in {} was written later than this boot's clock reads",
                    cache.path().display()
                ));
            }
            now = now.max(cached.written_unix_ms.saturating_add(elapsed));
        }
        let left_ms = cached.lease_until_ms.saturating_sub(now);
        let lease_ms = config.lease.as_millis() as i64;
        let lease = Lease {
            store,
            owner: cached.owner.clone(),
            deadline_ms: AtomicI64::new(i64::MIN),
            max_tick: AtomicI64::new(-1),
            sent_until_ms: AtomicI64::new(cached.lease_until_ms),
        };
        // As if the renewal that confirmed `lease_until_ms` had been sent `lease_ms` before it:
        // the deadline is then `mono + left_ms - margin`.
        let sent_ms = mono.saturating_add(left_ms).saturating_sub(lease_ms);
        let expired = || {
            format!(
                "the cached lease of worker id {} ends at {}, less than the safety margin ({} ms) \
                 from now: it may not be resumed",
                cached.worker_id,
                format_unix_ms(cached.lease_until_ms),
                lease::safety_margin_ms(config)
            )
        };
        if !lease.confirm(config, &*self.clock, sent_ms, cached.lease_until_ms) {
            return Err(expired());
        }
        let lead = match config.generator {
            GeneratorKind::Cached => lease::lead_ticks(config) as u64,
            GeneratorKind::Direct => 0,
        };
        let now_tick = self.layout.delta_at(now).unwrap_or(0);
        let resume_tick = now_tick
            .saturating_add(lead)
            .max(u64::try_from(cached.last_tick).unwrap_or(0));
        if i64::try_from(resume_tick).unwrap_or(i64::MAX) >= lease.max_tick.load(Ordering::Relaxed)
        {
            return Err(expired());
        }
        let worker_id = cached.worker_id;
        let until = cached.lease_until_ms;
        let deadline_in_ms = lease.deadline_ms.load(Ordering::Relaxed) - mono;
        self.install(worker_id, Some(resume_tick), None, Some(lease))
            .await
            .map_err(|e| format!("resuming the cached lease: {e}"))?;
        warn!(
            worker_id, lease_until = %format_unix_ms(until), issuing_for_ms = deadline_in_ms,
            resume_after_tick = resume_tick, path = %cache.path().display(),
            "database unreachable: resumed the worker lease of the cache file; issuing stops \
             unless a renewal is confirmed first"
        );
        Ok(())
    }

    /// Builds the generator for `worker_id`, issuing only after `resume_tick` (a clock-back value
    /// only after `clock_back_floor`, when given, else after `resume_tick`), and makes it (and
    /// `lease`, first) visible to the id path.
    /// The largest worker id this server's database may hand out: the region's share, or the
    /// layout's whole range.
    fn max_claimed_worker(&self) -> u64 {
        self.config
            .region
            .max
            .unwrap_or_else(|| self.layout.max_worker_id())
    }

    pub(super) async fn install(
        &self,
        worker_id: u64,
        resume_tick: Option<u64>,
        clock_back_floor: Option<u64>,
        lease: Option<Lease>,
    ) -> Result<(), StartError> {
        let config = &self.config;
        let layout = self.layout;
        // The database's worker id within the region's share (`WorkerRegion`): issued as the
        // region's base plus it. `self.worker_id` stays the database's (renewals, release).
        let issued_as = config.region.base + worker_id;
        let generator = match config.generator {
            GeneratorKind::Cached => {
                let mut cached = config.cached.clone();
                cached.start_after_tick = resume_tick;
                cached.clock_back_floor_tick = clock_back_floor;
                // A start ahead of the clock by more than the ring may lead (a resumed cached
                // lease starts past its previous run's lead) is waited out: about a tick.
                let mut waited = 0;
                loop {
                    match CachedGenerator::new(
                        layout,
                        issued_as,
                        self.clock.clone(),
                        cached.clone(),
                    ) {
                        Err(SnowflakeError::ClockMovedBackwards { by_ms })
                            if waited < 3 && by_ms <= 10_000 =>
                        {
                            waited += 1;
                            if self.clock.moves_by_itself() {
                                tokio::time::sleep(Duration::from_millis(by_ms)).await;
                            } else {
                                self.clock.sleep_ms(by_ms);
                            }
                        }
                        other => break Generator::Cached(other?),
                    }
                }
            }
            GeneratorKind::Direct => {
                let g = DirectGenerator::new(
                    layout,
                    issued_as,
                    self.clock.clone(),
                    config.max_backward_ms,
                )?;
                let g = match resume_tick {
                    Some(t) => g.resume_after(t),
                    None => g,
                };
                Generator::Direct(match clock_back_floor {
                    Some(t) => g.with_clock_back_floor(t),
                    None => g,
                })
            }
        };
        self.worker_id.store(worker_id, Ordering::Relaxed);
        if let Some(lease) = lease {
            // Set once: a second install cannot happen (claims run only while unset).
            let _ = self.lease.set(lease);
        }
        // Release/acquire through the `OnceLock`: whoever sees the generator sees the lease
        // and the worker id.
        let _ = self.generator.set(generator);
        *self.lock_pending() = None;
        Ok(())
    }

    /// Writes the lease the database just confirmed to the cache file, on a blocking thread;
    /// await the handle to know it is written. A failure is logged: the previous file stays,
    /// which only understates the lease. A write that lands late cannot outlive a release:
    /// [`WorkerCache::remove`] closes the cache under the same lock.
    pub(super) fn write_cache(
        &self,
        worker_id: u64,
        owner: &str,
        lease_until_ms: i64,
        last_tick: i64,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let cache = self.cache.clone()?;
        let record = cache.record(
            worker_id,
            owner,
            lease_until_ms,
            last_tick,
            self.clock.now_unix_ms(),
            self.clock.monotonic_ms(),
        );
        Some(tokio::task::spawn_blocking(move || {
            if let Err(e) = cache.store(&record) {
                warn!(error = %e, path = %cache.path().display(), "could not write the worker lease cache file");
            }
        }))
    }

    /// Removes the cache file (off the async threads); `false` if it may still be there.
    pub(super) async fn remove_cache(&self) -> bool {
        let Some(cache) = self.cache.clone() else {
            return true;
        };
        let path = cache.path().display().to_string();
        match tokio::task::spawn_blocking(move || cache.remove()).await {
            Ok(Ok(())) => true,
            Ok(Err(e)) => {
                warn!(error = %e, path, "could not remove the worker lease cache file");
                false
            }
            Err(e) => {
                warn!(error = %e, path, "could not remove the worker lease cache file");
                false
            }
        }
    }

    pub(super) fn log_started(&self) {
        let status = self.status();
        info!(
            layout = %status.layout, epoch = %status.epoch, worker_id = status.worker_id,
            strategy = %self.strategy, generator = ?self.config.generator,
            exhausted_at = %status.exhausted_at, "snowflake engine started"
        );
        if status.time_left_secs < 365 * 86_400 {
            warn!(
                exhausted_at = %status.exhausted_at, time_left_secs = status.time_left_secs,
                "the snowflake layout runs out of time within a year: plan a migration (leafid layout plan)"
            );
        }
    }
}

impl StartError {
    /// Whether the database could not be reached (or did not answer in time), as opposed to a
    /// refusal that waiting cannot cure.
    pub(super) fn is_unreachable(&self) -> bool {
        matches!(
            self,
            Self::WorkerTimeout(_) | Self::Worker(WorkerStoreError::Unavailable(_))
        )
    }
}

/// The background claim of an engine started without a worker id, retried (1 s, doubling to
/// 5 s) until it succeeds, then the heartbeat.
pub(super) async fn claim_then_heartbeat(
    engine: std::sync::Weak<SnowflakeEngine>,
    stop: CancellationToken,
) {
    let mut wait = Duration::from_secs(1);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let Some(strong) = engine.upgrade() else {
            return;
        };
        if strong.stopped.load(Ordering::Relaxed) {
            return;
        }
        let claimed = tokio::select! {
            () = stop.cancelled() => return,
            r = strong.claim() => r,
        };
        match claimed {
            Ok(()) => {
                info!(
                    worker_id = strong.worker_id(),
                    "worker id obtained after start-up: issuing snowflake ids"
                );
                strong.log_started();
                break;
            }
            Err(e) => {
                let reason = format!(
                    "no snowflake worker id yet: {e}; claiming again until the database answers"
                );
                warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "worker id claim failed");
                *strong.lock_pending() = Some(reason);
                wait = (wait * 2).min(Duration::from_secs(5));
            }
        }
    }
    heartbeat_loop(engine, stop).await;
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
