//! `[snowflake]`: its settings, and the engine settings they make ([`Settings::snowflake_layout`],
//! [`Settings::snowflake_config`]).

use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;

use super::{MAX_BACKWARD_MS, Settings, parsed, parsed_opt};
use crate::snowflake::cached::CachedConfig;
use crate::snowflake::engine::{GeneratorKind, SnowflakeConfig, WorkerRegion};
use crate::snowflake::layout::{
    BitLayout, JS_SAFE_ID_BITS, LayoutArgs, PAYLOAD_BITS, Preset, ResolveError, TimeUnit,
    UnitPolicy,
};
use crate::snowflake::worker::WorkerStrategy;

/// `[snowflake]`.
#[derive(Debug, Clone, Deserialize)]
pub struct SnowflakeSettings {
    /// Serve the snowflake routes.
    pub enabled: bool,
    /// `twitter`, `uid-generator` or `js-safe`; ignored when `layout` is set.
    #[serde(deserialize_with = "parsed")]
    pub preset: Preset,
    /// `T/W/S` or `P+T/W/S`.
    pub layout: Option<String>,
    /// Value of the prefix bits (default: all ones).
    pub prefix_value: Option<u64>,
    /// RFC 3339 with offset (or unix ms), required with `layout`.
    pub epoch: Option<String>,
    /// `seconds` or `millis`, required with `layout`.
    #[serde(default, deserialize_with = "parsed_opt")]
    pub unit: Option<TimeUnit>,
    /// `cached` or `direct`.
    #[serde(deserialize_with = "parsed")]
    pub generator: GeneratorKind,
    /// Every id from now on must be above this.
    pub min_id_floor: u64,
    /// Start-up refuses a layout whose largest id needs more bits (53: JavaScript-safe).
    pub max_id_bits: u8,
    /// Clock-back bits taken from the top of the worker field (0: none); see
    /// `crate::snowflake::clock_back`.
    #[serde(default)]
    pub clock_back_bits: u8,
    /// Worker id assignment.
    pub worker: WorkerSettings,
    /// Cached generator tuning.
    pub cached: CachedSettings,
}

/// `[snowflake.worker]`, with `strategy` and `id` folded into one [`WorkerStrategy`].
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "RawWorkerSettings")]
pub struct WorkerSettings {
    /// `lease`, `disposable`, or `static` with its id (`static:N`, or `static` and `id = N`).
    pub strategy: WorkerStrategy,
    /// Lease length.
    pub lease_secs: u64,
    /// Renewal period.
    pub heartbeat_secs: u64,
    /// The worker lease cache file (`lease` strategy): written on every confirmed claim and
    /// renewal, read when the database cannot be reached at start. Empty: none.
    pub cache_file: String,
    /// Regions (`docs/deploy.md#12-regions-lanes`): the high bits of the worker id that hold the
    /// region, `lanes.slot` (0: off).
    pub region_bits: u8,
}

/// `[snowflake.worker]` as written: `strategy` is `disposable`, `lease`, `static:N` or `static`
/// (case-insensitive), the last with its id in `id`.
#[derive(Deserialize)]
struct RawWorkerSettings {
    strategy: String,
    id: Option<u64>,
    lease_secs: u64,
    heartbeat_secs: u64,
    #[serde(default)]
    cache_file: String,
    #[serde(default)]
    region_bits: u8,
}

impl TryFrom<RawWorkerSettings> for WorkerSettings {
    type Error = String;

    fn try_from(raw: RawWorkerSettings) -> Result<Self, String> {
        let strategy = WorkerStrategy::from_config(&raw.strategy, raw.id)
            .map_err(|e| format!("snowflake.worker.strategy: {e}"))?;
        Ok(Self {
            strategy,
            lease_secs: raw.lease_secs,
            heartbeat_secs: raw.heartbeat_secs,
            cache_file: raw.cache_file.trim().to_owned(),
            region_bits: raw.region_bits,
        })
    }
}

/// `[snowflake.cached]`.
#[derive(Debug, Clone, Deserialize)]
pub struct CachedSettings {
    /// Ring slots = (max_sequence + 1) << boost_power.
    pub boost_power: u8,
    /// Refill threshold, percent.
    pub padding_factor: u8,
    /// Wait for the filler on an empty ring.
    pub max_wait_ms: u64,
    /// Periodic top-up (0 = off).
    pub schedule_interval_secs: u64,
}

impl Settings {
    /// The snowflake layout from `preset`, or from `layout` + `epoch` + `unit` (the unit is
    /// required here: see [`UnitPolicy::Required`]), with `prefix_value` over either.
    pub fn snowflake_layout(&self) -> anyhow::Result<BitLayout> {
        let sf = &self.snowflake;
        let args = LayoutArgs {
            // The preset always has a value (its default): `layout` overrides it.
            preset: sf.layout.is_none().then_some(sf.preset),
            bits: sf.layout.as_deref(),
            epoch: sf.epoch.as_deref(),
            unit: sf.unit,
            prefix_value: sf.prefix_value,
            otherwise: None,
        };
        let layout = args.resolve(UnitPolicy::Required).map_err(|e| {
            let problem = match e {
                ResolveError::MissingEpoch => {
                    "snowflake.epoch is required with snowflake.layout".to_owned()
                }
                ResolveError::MissingUnit => {
                    "snowflake.unit is required with snowflake.layout".to_owned()
                }
                ResolveError::Epoch(e) => format!("snowflake.epoch: {e}"),
                ResolveError::Bits(e) => format!("snowflake.layout: {e}"),
                ResolveError::PrefixValue(e) => format!("snowflake.prefix_value: {e}"),
                // A preset always stands in for a missing layout, never beside one.
                ResolveError::NoLayout | ResolveError::PresetAndBits => e.to_string(),
            };
            anyhow::anyhow!("invalid configuration: {problem}")
        })?;
        match (sf.clock_back_bits, layout.clock_back_bits()) {
            (0, _) => Ok(layout),
            (asked, written) if asked == written => Ok(layout),
            (asked, 0) => layout.with_clock_back_bits(asked).map_err(|e| {
                anyhow::anyhow!("invalid configuration: snowflake.clock_back_bits: {e}")
            }),
            (asked, written) => bail!(
                "invalid configuration: snowflake.clock_back_bits = {asked} but snowflake.layout                  already gives the worker field {written} clock-back bits; set one of them"
            ),
        }
    }

    /// The region's share of the worker ids: with `snowflake.worker.region_bits = r`, the top `r`
    /// bits of the worker id (below any clock-back bits) hold `lanes.slot`, and the database
    /// hands out the rest. Two regions' servers then never hold one worker id, whatever their
    /// databases say, since each claims only from its own.
    fn worker_region(
        &self,
        layout: &BitLayout,
        strategy: WorkerStrategy,
    ) -> anyhow::Result<WorkerRegion> {
        let r = u32::from(self.snowflake.worker.region_bits);
        if r == 0 {
            return Ok(WorkerRegion::default());
        }
        let Some(slot) = self.lanes.slot else {
            bail!(
                "invalid configuration: snowflake.worker.region_bits needs lanes.slot (the region)"
            );
        };
        let worker_bits = 64 - layout.max_worker_id().leading_zeros();
        // Two different mistakes, each named: a region that does not fit the region bits, and
        // region bits that leave no worker bits.
        if u32::from(slot) >= 1 << r.min(31) {
            bail!(
                "invalid configuration: lanes.slot = {slot} does not fit \
                 snowflake.worker.region_bits = {r} (regions 0 to {}): raise region_bits to at \
                 least {}",
                (1u32 << r.min(31)) - 1,
                32 - u32::from(slot).leading_zeros()
            );
        }
        if r >= worker_bits {
            bail!(
                "invalid configuration: snowflake.worker.region_bits = {r}: the worker ids have \
                 {worker_bits} bits; at least one must be left for the region's own workers"
            );
        }
        let own = worker_bits - r;
        let region = WorkerRegion {
            base: u64::from(slot) << own,
            max: Some((1u64 << own) - 1),
        };
        if let WorkerStrategy::Static(id) = strategy
            && id > (1 << own) - 1
        {
            bail!(
                "invalid configuration: snowflake.worker.id = {id} is above {}, the largest \
                 worker id of a region with {r} region bits",
                (1u64 << own) - 1
            );
        }
        Ok(region)
    }

    /// Snowflake engine settings (layout included).
    pub fn snowflake_config(&self) -> anyhow::Result<SnowflakeConfig> {
        let sf = &self.snowflake;
        let generator = sf.generator;
        let strategy = sf.worker.strategy;
        if sf.worker.heartbeat_secs == 0 || sf.worker.lease_secs < 3 * sf.worker.heartbeat_secs {
            bail!(
                "invalid configuration: snowflake.worker.lease_secs must be at least 3 x snowflake.worker.heartbeat_secs (> 0)"
            );
        }
        if !(1..=99).contains(&sf.cached.padding_factor) {
            bail!("invalid configuration: snowflake.cached.padding_factor must be within 1..=99");
        }
        if sf.cached.boost_power > 10 {
            bail!("invalid configuration: snowflake.cached.boost_power must be at most 10");
        }
        if self.clock.max_backward_ms > MAX_BACKWARD_MS {
            bail!(
                "invalid configuration: clock.max_backward_ms = {} is above {MAX_BACKWARD_MS}: \
                 the direct generator waits a backward step out on request threads",
                self.clock.max_backward_ms
            );
        }
        let layout = self.snowflake_layout()?;
        if !(1..=PAYLOAD_BITS).contains(&sf.max_id_bits) {
            bail!(
                "invalid configuration: snowflake.max_id_bits must be within 1..={PAYLOAD_BITS} (got {})",
                sf.max_id_bits
            );
        }
        // The js-safe preset promises ids JavaScript holds as numbers: it brings its own bound,
        // so a prefix value that lifts its ids past 2^53 - 1 is refused with the default
        // `max_id_bits = 63` too.
        let js_safe_preset = sf.layout.is_none() && sf.preset == Preset::JsSafe;
        if js_safe_preset && layout.id_bits() > JS_SAFE_ID_BITS {
            bail!(
                "invalid configuration: snowflake.preset = \"js-safe\" keeps every id within \
                 {JS_SAFE_ID_BITS} bits, but snowflake.prefix_value = {} makes ids up to {} ({} \
                 bits); leave the prefix at 0 or choose snowflake.layout",
                layout.prefix_value(),
                layout.largest_id(),
                layout.id_bits()
            );
        }
        if layout.id_bits() > sf.max_id_bits {
            bail!(
                "invalid configuration: snowflake.max_id_bits = {} but layout {} issues ids up to {} \
                 ({} bits); choose a layout whose largest id fits (preset \"js-safe\" for {JS_SAFE_ID_BITS})",
                sf.max_id_bits,
                layout.bits_string(),
                layout.largest_id(),
                layout.id_bits()
            );
        }
        let config = SnowflakeConfig {
            layout,
            generator,
            strategy,
            lease: Duration::from_secs(sf.worker.lease_secs),
            heartbeat: Duration::from_secs(sf.worker.heartbeat_secs),
            max_backward_ms: self.clock.max_backward_ms,
            cached: CachedConfig {
                boost_power: sf.cached.boost_power,
                padding_factor: sf.cached.padding_factor,
                max_wait: Duration::from_millis(sf.cached.max_wait_ms),
                schedule_interval: (sf.cached.schedule_interval_secs > 0)
                    .then(|| Duration::from_secs(sf.cached.schedule_interval_secs)),
                start_after_tick: None,
                max_ahead_ticks: None,
                max_backward_ms: self.clock.max_backward_ms,
                clock_back_floor_tick: None,
            },
            min_id_floor: sf.min_id_floor,
            region: self.worker_region(&layout, strategy)?,
        };
        if strategy == WorkerStrategy::Lease {
            config.check_lease().map_err(anyhow::Error::msg)?;
        }
        Ok(config)
    }
}
