//! The `lease` strategy's bookkeeping ([`Lease`]), the check of its settings
//! ([`SnowflakeConfig::check_lease`]) and the heartbeat task that renews it (the engine's module
//! docs say why the deadline is checked on the id path).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use super::{GeneratorKind, SnowflakeConfig, SnowflakeEngine};
use crate::snowflake::clock::Clock;
use crate::snowflake::worker::WorkerStore;

/// The lease bookkeeping of the `lease` strategy.
pub(super) struct Lease {
    /// Where the lease row lives.
    pub(super) store: Arc<dyn WorkerStore>,
    /// This process's token in the row: renewals and the release must present it.
    pub(super) owner: String,
    /// Monotonic ms ([`Clock::monotonic_ms`]) before which ids may be issued: when the last
    /// renewal the database confirmed was sent, plus the lease, minus [`safety_margin_ms`].
    /// Only raised while the lease holds (`fetch_max`), set to `i64::MIN` when it is lost.
    /// Relaxed everywhere: it is the only datum (no other memory is published with it), and a
    /// stale read can only see an earlier deadline of a lease that was valid until then.
    pub(super) deadline_ms: AtomicI64,
    /// The largest tick an id may carry: ticks ending at least a heartbeat and a second before
    /// the lease end the database confirmed (`lease_until_ms`, wall time). A wall clock stepped
    /// forward past it cannot issue ticks a later holder of the id will use. Raised with
    /// `fetch_max`, `-1` when the lease is lost. Relaxed: as `deadline_ms`.
    pub(super) max_tick: AtomicI64,
    /// The `lease_until_ms` of the last renewal sent: never lowered (a wall step back must not
    /// shorten, in the database, a lease whose ticks this server may already have issued).
    /// Written by the heartbeat task only. Relaxed: as `deadline_ms`.
    pub(super) sent_until_ms: AtomicI64,
}

impl Lease {
    /// Records a renewal (or the claim) the database confirmed, sent at monotonic `sent_ms`
    /// with `lease_until_ms`, unless its deadline already passed (`false`: stays suspended).
    pub(super) fn confirm(
        &self,
        config: &SnowflakeConfig,
        clock: &dyn Clock,
        sent_ms: i64,
        until_ms: i64,
    ) -> bool {
        let lease_ms = config.lease.as_millis() as i64;
        let deadline = sent_ms + lease_ms - safety_margin_ms(config);
        if deadline <= clock.monotonic_ms() {
            return false;
        }
        let layout = &config.layout;
        let bound_ms = until_ms - config.heartbeat.as_millis() as i64 - 1000;
        // Ticks that end by `bound_ms`: delta + 1 <= delta_at(bound_ms).
        let max_tick = layout
            .delta_at(bound_ms)
            .map_or(-1, |d| i64::try_from(d).unwrap_or(i64::MAX) - 1);
        self.max_tick.fetch_max(max_tick, Ordering::Relaxed);
        self.deadline_ms.fetch_max(deadline, Ordering::Relaxed);
        true
    }

    /// Takes the authority away for good.
    fn lose(&self) {
        self.deadline_ms.store(i64::MIN, Ordering::Relaxed);
        self.max_tick.store(-1, Ordering::Relaxed);
    }
}

impl SnowflakeConfig {
    /// Refuses lease settings under which issuing would stop before a renewal could keep it
    /// going: the lease must exceed its safety margin (the ring's lead over the clock, a
    /// heartbeat, one second) plus one more heartbeat period. The message names the keys.
    pub fn check_lease(&self) -> Result<(), String> {
        let lease_ms = self.lease.as_millis() as i64;
        let heartbeat_ms = self.heartbeat.as_millis() as i64;
        let margin_ms = safety_margin_ms(self);
        let needed_ms = margin_ms + heartbeat_ms;
        if lease_ms > needed_ms {
            return Ok(());
        }
        let lead = match self.generator {
            GeneratorKind::Cached => format!(
                "the cached ring may run {} ticks of {} ms ahead of the clock \
                 (snowflake.cached.boost_power = {})",
                lead_ticks(self),
                self.layout.unit().tick_ms(),
                self.cached.boost_power
            ),
            GeneratorKind::Direct => format!(
                "the direct generator's current tick ({} ms)",
                self.layout.unit().tick_ms()
            ),
        };
        Err(format!(
            "invalid configuration: snowflake.worker.lease_secs = {} is too short: issuing stops \
             {} ms before a lease ends ({lead}, plus snowflake.worker.heartbeat_secs = {}, plus \
             1 s) and a renewal needs one more heartbeat, so lease_secs must be at least {}; \
             or lower snowflake.cached.boost_power or snowflake.worker.heartbeat_secs",
            self.lease.as_secs(),
            margin_ms,
            self.heartbeat.as_secs(),
            needed_ms / 1000 + 1
        ))
    }
}

/// How long one worker-store call may take: half a heartbeat period, between 0.5 s and 5 s.
/// Shorter than what it protects: the lease holds at least three heartbeats, and the deadline
/// on the id path does not depend on the call returning at all.
pub(super) fn store_call_timeout(config: &SnowflakeConfig) -> Duration {
    (config.heartbeat / 2).clamp(Duration::from_millis(500), Duration::from_secs(5))
}

/// The margin by which issuing stops before the lease ends: the cached generator's largest lead
/// over the clock, plus a heartbeat period and one second.
pub(super) fn safety_margin_ms(config: &SnowflakeConfig) -> i64 {
    let tick_ms = config.layout.unit().tick_ms();
    lead_ticks(config).saturating_mul(tick_ms) + config.heartbeat.as_millis() as i64 + 1000
}

/// How many ticks the generator's ids may run ahead of the clock.
pub(super) fn lead_ticks(config: &SnowflakeConfig) -> i64 {
    match config.generator {
        GeneratorKind::Cached => config
            .cached
            .max_ahead_ticks
            .unwrap_or(1 << config.cached.boost_power)
            .min(i64::MAX as u64) as i64,
        GeneratorKind::Direct => 1,
    }
}

pub(super) async fn heartbeat_loop(
    engine: std::sync::Weak<SnowflakeEngine>,
    stop: CancellationToken,
) {
    let mut wait = Duration::ZERO;
    let mut was_valid = true;
    // The clock-back value the row shows (a new row, or a claimed one, starts at 0 here: the
    // first renewal after a step writes it).
    let mut recorded_clock_back = 0u64;
    loop {
        // The first renewal waits a full period (the lease was just acquired).
        wait = if wait.is_zero() {
            match engine.upgrade() {
                Some(e) => e.config.heartbeat,
                None => return,
            }
        } else {
            wait
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(wait) => {}
        }
        let Some(engine) = engine.upgrade() else {
            return;
        };
        let Some(lease) = engine.lease.get() else {
            return;
        };
        if engine.stopped.load(Ordering::Relaxed) {
            return;
        }
        let valid = engine.lease_valid_now(lease);
        if was_valid && !valid {
            error!(
                worker_id = engine.worker_id(),
                "worker lease not renewed in time: issuing suspended"
            );
        }
        was_valid = valid;
        let lease_ms = engine.config.lease.as_millis() as i64;
        let heartbeat = engine.config.heartbeat;
        let within = store_call_timeout(&engine.config);
        // Taken before the renewal is sent: the renewed lease runs from no later than this.
        let sent_ms = engine.clock.monotonic_ms();
        let until_ms = (engine.clock.now_unix_ms() + lease_ms)
            .max(lease.sent_until_ms.load(Ordering::Relaxed));
        lease.sent_until_ms.store(until_ms, Ordering::Relaxed);
        let last = engine.issued_up_to_ms();
        let renewal = tokio::select! {
            () = stop.cancelled() => return,
            r = tokio::time::timeout(
                within,
                lease.store.heartbeat(engine.worker_id(), &lease.owner, until_ms, last),
            ) => r,
        };
        match renewal {
            Ok(Ok(true)) => {
                // The cache file follows every lease end the database confirmed, usable or not;
                // written in the background, so a slow disk never holds the renewals up.
                let last_tick = engine.last_tick().map_or(-1, |t| t as i64);
                let _ = engine.write_cache(engine.worker_id(), &lease.owner, until_ms, last_tick);
                if lease.confirm(&engine.config, &*engine.clock, sent_ms, until_ms) {
                    if !was_valid {
                        info!(
                            worker_id = engine.worker_id(),
                            "worker lease renewed: issuing resumed"
                        );
                    }
                    was_valid = true;
                } else {
                    warn!(
                        worker_id = engine.worker_id(),
                        "worker lease renewal confirmed too late to use: issuing stays suspended"
                    );
                }
                wait = heartbeat;
                // After a clock step, the row shows the value ids are issued under (a failure
                // is retried at the next renewal; the value is for operators only).
                if let Some(value) = engine.clock_back().filter(|v| *v != recorded_clock_back) {
                    let write =
                        lease
                            .store
                            .record_clock_back(engine.worker_id(), &lease.owner, value);
                    if let Ok(Ok(true)) = tokio::time::timeout(within, write).await {
                        info!(
                            worker_id = engine.worker_id(),
                            clock_back = value,
                            "clock-back value stored in the worker lease row"
                        );
                        recorded_clock_back = value;
                    }
                }
            }
            Ok(Ok(false)) => {
                lease.lose();
                engine.stopped.store(true, Ordering::Relaxed);
                // Another server holds the id: no restart of this one may resume it.
                engine.remove_cache().await;
                error!(
                    worker_id = engine.worker_id(),
                    "worker lease was taken over: issuing stopped for good"
                );
                return;
            }
            Ok(Err(e)) => {
                warn!(error = %e, worker_id = engine.worker_id(), "worker lease renewal failed; retrying");
                wait = Duration::from_secs(1).min(heartbeat);
            }
            Err(_) => {
                warn!(
                    worker_id = engine.worker_id(),
                    timeout_ms = within.as_millis() as u64,
                    "worker lease renewal timed out; retrying"
                );
                wait = Duration::from_millis(100);
            }
        }
    }
}
