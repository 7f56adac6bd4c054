//! [`SnowflakeStatus`]: a point-in-time view of the engine for health, metrics and pages.

use std::sync::atomic::Ordering;

use super::{Generator, GeneratorKind, SnowflakeEngine};
use crate::snowflake::layout::{TimeUnit, format_unix_ms};

/// A point-in-time view for health, metrics and pages.
#[derive(Debug, Clone)]
pub struct SnowflakeStatus {
    /// `T/W/S` or `P+T/W/S`.
    pub layout: String,
    /// The layout's epoch, RFC 3339.
    pub epoch: String,
    /// `seconds` or `millis`.
    pub unit: TimeUnit,
    /// Cached or direct.
    pub generator: GeneratorKind,
    /// The worker id this server's ids carry: with regions, the region's base plus the
    /// database's worker id (`database_worker_id`).
    pub worker_id: u64,
    /// The worker id as the database's `WORKER_NODE` row holds it (equal to `worker_id`
    /// without regions).
    pub database_worker_id: u64,
    /// How it was obtained.
    pub worker_strategy: String,
    /// When the time field runs out (RFC 3339).
    pub exhausted_at: String,
    /// Seconds until then.
    pub time_left_secs: i64,
    /// Whether issuing is suspended (no worker id yet, lease not renewed in time, taken over,
    /// or shut down).
    pub suspended: bool,
    /// Why no worker id is held yet (started during a database outage without a usable cached
    /// lease); `None` once one is held.
    pub pending: Option<String>,
    /// Milliseconds before issuing stops unless the worker lease is renewed (`lease` only).
    pub lease_left_ms: Option<i64>,
    /// Ring capacity (cached).
    pub ring_capacity: Option<usize>,
    /// Ids ready in the ring (cached).
    pub ring_available: Option<usize>,
    /// Ticks the ring is ahead of the clock (cached).
    pub ticks_ahead: Option<u64>,
    /// Ids issued since start.
    pub ids_issued: u64,
    /// The clock-back value ids are issued under now (`None`: the layout has no clock-back
    /// bits); it rises by one on each backward clock step this run outlived.
    pub clock_back: Option<u64>,
    /// The largest clock-back value: backward steps this run can outlive (0: none).
    pub max_clock_back: u64,
}

impl SnowflakeEngine {
    /// Health, metrics and page data.
    pub fn status(&self) -> SnowflakeStatus {
        let exhausted_at = self.layout.exhausted_at_unix_ms();
        let stats = match self.generator.get() {
            Some(Generator::Cached(g)) => Some(g.stats()),
            _ => None,
        };
        SnowflakeStatus {
            layout: self.layout.bits_string(),
            epoch: format_unix_ms(self.layout.epoch_ms()),
            unit: self.layout.unit(),
            generator: self.config.generator,
            worker_id: self.config.region.base + self.worker_id(),
            database_worker_id: self.worker_id(),
            worker_strategy: self.strategy.to_string(),
            exhausted_at: format_unix_ms(exhausted_at),
            time_left_secs: (exhausted_at - self.clock.now_unix_ms()) / 1000,
            suspended: self.is_suspended(),
            pending: self.pending_reason(),
            lease_left_ms: self.lease_left_ms(),
            ring_capacity: stats.map(|s| s.capacity),
            ring_available: stats.map(|s| s.available),
            ticks_ahead: stats.map(|s| s.ticks_ahead),
            ids_issued: match stats {
                Some(s) => s.taken,
                None => self.direct_issued.load(Ordering::Relaxed),
            },
            clock_back: self.clock_back(),
            max_clock_back: self.layout.max_clock_back(),
        }
    }
}
