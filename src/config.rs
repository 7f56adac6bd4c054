//! Typed settings: embedded `config/default.toml`, then `--config FILE`, then `LEAFID__*`
//! environment variables. [`Settings::validate`] names the first bad key in one line.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::segment::tag_rules::{MAX_STEP, MIN_STEP};
use crate::segment::{SegmentConfig, Step, StepPolicy};
use crate::snowflake::cached::CachedConfig;
use crate::snowflake::engine::{GeneratorKind, SnowflakeConfig};
use crate::snowflake::layout::{BitLayout, JS_SAFE_ID_BITS, PAYLOAD_BITS, TimeUnit, parse_epoch};
use crate::snowflake::worker::WorkerStrategy;
use crate::store::DbOptions;

/// Largest `clock.max_backward_ms`: a backward step is waited out on a request thread.
pub const MAX_BACKWARD_MS: u64 = 1_000;

/// The shipped defaults, compiled in so the binary runs without files beside it.
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

/// All settings.
#[derive(Debug, Clone, Deserialize)]
pub struct Settings {
    /// HTTP listener.
    pub server: ServerSettings,
    /// The database of both engines.
    pub database: DatabaseSettings,
    /// The segment engine.
    pub segment: SegmentSettings,
    /// The snowflake engine.
    pub snowflake: SnowflakeSettings,
    /// Admin access.
    #[serde(default)]
    pub admin: AdminSettings,
    /// Clock tolerance.
    pub clock: ClockSettings,
    /// Log output.
    pub log: LogSettings,
}

/// `[server]`.
#[derive(Debug, Clone, Deserialize)]
pub struct ServerSettings {
    /// Address to bind (default loopback).
    pub host: String,
    /// Port; 0 picks a free one.
    pub port: u16,
    /// HTTP worker threads; 0 = one per core.
    pub workers: usize,
    /// Largest request body accepted.
    pub max_body_bytes: usize,
    /// Grace period after SIGTERM.
    pub shutdown_timeout_secs: u64,
    /// Readiness answers 503 for this long after SIGTERM before the listener closes.
    pub drain_secs: u64,
}

/// `[database]`.
#[derive(Debug, Clone, Deserialize)]
pub struct DatabaseSettings {
    /// `sqlite://path` or `mysql://user:pw@host:port/db`.
    pub url: String,
    /// Pool size for MySQL.
    pub max_connections: u32,
    /// Wait for a pooled connection.
    pub acquire_timeout_ms: u64,
    /// MySQL: single-statement leases for adapted steps.
    pub mysql_single_statement_lease: bool,
}

/// `[segment]`.
#[derive(Debug, Clone, Deserialize)]
pub struct SegmentSettings {
    /// Serve `/api/segment` and the tag routes.
    pub enabled: bool,
    /// Deadline of a request waiting for a segment.
    pub wait_timeout_ms: u64,
    /// Deadline of one lease.
    pub load_timeout_ms: u64,
    /// Loads in flight across tags.
    pub max_concurrent_loads: usize,
    /// Tag list refresh period.
    pub refresh_interval_secs: u64,
    /// Loads closer than this double the step.
    pub step_grow_below_secs: u64,
    /// Loads further apart than this halve the step.
    pub step_shrink_above_secs: u64,
    /// Cap of the doubling.
    pub max_step: i64,
}

/// `[snowflake]`.
#[derive(Debug, Clone, Deserialize)]
pub struct SnowflakeSettings {
    /// Serve the snowflake routes.
    pub enabled: bool,
    /// `twitter`, `uid-generator` or `js-safe`; ignored when `layout` is set.
    pub preset: String,
    /// `T/W/S` or `P+T/W/S`.
    pub layout: Option<String>,
    /// Value of the prefix bits (default: all ones).
    pub prefix_value: Option<u64>,
    /// RFC 3339 with offset (or unix ms), required with `layout`.
    pub epoch: Option<String>,
    /// `seconds` or `millis`, required with `layout`.
    pub unit: Option<String>,
    /// `cached` or `direct`.
    pub generator: String,
    /// Every id from now on must be above this.
    pub min_id_floor: u64,
    /// Start-up refuses a layout whose largest id needs more bits (53: JavaScript-safe).
    pub max_id_bits: u8,
    /// Worker id assignment.
    pub worker: WorkerSettings,
    /// Cached generator tuning.
    pub cached: CachedSettings,
}

/// `[snowflake.worker]`.
#[derive(Debug, Clone, Deserialize)]
pub struct WorkerSettings {
    /// `lease`, `disposable` or `static`.
    pub strategy: String,
    /// The id for `static`.
    pub id: Option<u64>,
    /// Lease length.
    pub lease_secs: u64,
    /// Renewal period.
    pub heartbeat_secs: u64,
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

/// `[clock]`.
#[derive(Debug, Clone, Deserialize)]
pub struct ClockSettings {
    /// A backward step up to this is waited out.
    pub max_backward_ms: u64,
}

/// `[admin]`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct AdminSettings {
    /// Bearer token for admin writes; `None`: loopback clients only.
    pub token: Option<String>,
}

/// `[log]`.
#[derive(Debug, Clone, Deserialize)]
pub struct LogSettings {
    /// `text` or `json`.
    pub format: String,
}

impl Settings {
    /// Loads defaults, then `file` if given, then the environment; then validates.
    pub fn load(file: Option<&Path>) -> anyhow::Result<Self> {
        let mut builder = config::Config::builder().add_source(config::File::from_str(
            DEFAULT_TOML,
            config::FileFormat::Toml,
        ));
        if let Some(file) = file {
            if !file.exists() {
                bail!("configuration file {} does not exist", file.display());
            }
            builder = builder.add_source(config::File::from(file).format(config::FileFormat::Toml));
        }
        let settings: Settings = builder
            .add_source(
                config::Environment::with_prefix("LEAFID")
                    .prefix_separator("__")
                    .separator("__")
                    .try_parsing(true),
            )
            .build()
            .and_then(|c| c.try_deserialize())
            .context("invalid configuration")?;
        settings.validate()?;
        if settings.snowflake.enabled {
            settings.snowflake_config()?;
        }
        Ok(settings)
    }

    /// Checks ranges and relations the types cannot express.
    pub fn validate(&self) -> anyhow::Result<()> {
        let s = &self.segment;
        let checks: [(bool, &str); 8] = [
            (
                !self.server.host.is_empty(),
                "server.host must not be empty",
            ),
            (
                self.server.max_body_bytes >= 256,
                "server.max_body_bytes must be at least 256",
            ),
            (
                self.database.max_connections >= 1,
                "database.max_connections must be at least 1",
            ),
            (
                s.wait_timeout_ms >= 1,
                "segment.wait_timeout_ms must be at least 1",
            ),
            (
                s.load_timeout_ms >= 1,
                "segment.load_timeout_ms must be at least 1",
            ),
            (
                s.max_concurrent_loads >= 1,
                "segment.max_concurrent_loads must be at least 1",
            ),
            (
                s.refresh_interval_secs >= 1,
                "segment.refresh_interval_secs must be at least 1",
            ),
            (
                s.step_grow_below_secs <= s.step_shrink_above_secs,
                "segment.step_grow_below_secs must not exceed segment.step_shrink_above_secs",
            ),
        ];
        if let Some((_, msg)) = checks.iter().find(|(ok, _)| !ok) {
            bail!("invalid configuration: {msg}");
        }
        // The doubling cap obeys the rule of a DBA's step.
        if Step::try_from(s.max_step).is_err() {
            bail!("invalid configuration: segment.max_step must be within {MIN_STEP}..={MAX_STEP}");
        }
        if !matches!(self.log.format.as_str(), "text" | "json") {
            bail!("invalid configuration: log.format must be \"text\" or \"json\"");
        }
        if !(self.database.url.starts_with("sqlite:")
            || self.database.url.starts_with("mysql:")
            || self.database.url.starts_with("mariadb:"))
        {
            bail!("invalid configuration: database.url must start with sqlite:// or mysql://");
        }
        if self.admin.token.as_deref().is_some_and(str::is_empty) {
            bail!("invalid configuration: admin.token must not be empty when set");
        }
        Ok(())
    }

    /// The snowflake layout from `preset`, or from `layout` + `epoch` + `unit`.
    pub fn snowflake_layout(&self) -> anyhow::Result<BitLayout> {
        let sf = &self.snowflake;
        let layout = match sf.layout.as_deref() {
            None => match sf.preset.as_str() {
                "twitter" => BitLayout::twitter(),
                "uid-generator" => BitLayout::uid_generator(),
                "js-safe" => BitLayout::js_safe(),
                other => bail!(
                    "invalid configuration: snowflake.preset must be \"twitter\", \"uid-generator\" or \"js-safe\" (got {other:?})"
                ),
            },
            Some(bits) => {
                let epoch = sf.epoch.as_deref().context(
                    "invalid configuration: snowflake.epoch is required with snowflake.layout",
                )?;
                let epoch = parse_epoch(epoch)
                    .map_err(|e| anyhow::anyhow!("invalid configuration: snowflake.epoch: {e}"))?;
                let unit: TimeUnit = sf
                    .unit
                    .as_deref()
                    .context(
                        "invalid configuration: snowflake.unit is required with snowflake.layout",
                    )?
                    .parse()
                    .map_err(|e| anyhow::anyhow!("invalid configuration: snowflake.unit: {e}"))?;
                BitLayout::parse_bits(bits, unit, epoch)
                    .map_err(|e| anyhow::anyhow!("invalid configuration: snowflake.layout: {e}"))?
            }
        };
        match sf.prefix_value {
            Some(v) => layout
                .with_prefix_value(v)
                .map_err(|e| anyhow::anyhow!("invalid configuration: snowflake.prefix_value: {e}")),
            None => Ok(layout),
        }
    }

    /// Snowflake engine settings (layout included).
    pub fn snowflake_config(&self) -> anyhow::Result<SnowflakeConfig> {
        let sf = &self.snowflake;
        let generator = match sf.generator.as_str() {
            "cached" => GeneratorKind::Cached,
            "direct" => GeneratorKind::Direct,
            other => bail!(
                "invalid configuration: snowflake.generator must be \"cached\" or \"direct\" (got {other:?})"
            ),
        };
        let strategy =
            WorkerStrategy::from_config(&sf.worker.strategy, sf.worker.id).map_err(|e| {
                anyhow::anyhow!("invalid configuration: snowflake.worker.strategy: {e}")
            })?;
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
            },
            min_id_floor: sf.min_id_floor,
        };
        if strategy == WorkerStrategy::Lease {
            config.check_lease().map_err(anyhow::Error::msg)?;
        }
        Ok(config)
    }

    /// Database connection options.
    pub fn db_options(&self) -> DbOptions {
        DbOptions {
            url: self.database.url.clone(),
            max_connections: self.database.max_connections,
            acquire_timeout: Duration::from_millis(self.database.acquire_timeout_ms),
            mysql_single_statement_lease: self.database.mysql_single_statement_lease,
        }
    }

    /// Segment engine tunables.
    pub fn segment_config(&self) -> SegmentConfig {
        let s = &self.segment;
        SegmentConfig {
            policy: StepPolicy {
                grow_below: Duration::from_secs(s.step_grow_below_secs),
                shrink_above: Duration::from_secs(s.step_shrink_above_secs),
                max_step: s.max_step,
            },
            wait_timeout: Duration::from_millis(s.wait_timeout_ms),
            load_timeout: Duration::from_millis(s.load_timeout_ms),
            max_concurrent_loads: s.max_concurrent_loads,
            refresh_interval: Duration::from_secs(s.refresh_interval_secs),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_load_and_validate() {
        let s = Settings::load(None).unwrap();
        assert_eq!(s.server.port, 8080);
        assert_eq!(s.server.host, "127.0.0.1");
        assert!(s.database.url.starts_with("sqlite://"));
        assert!(s.segment.enabled && s.snowflake.enabled);
        assert!(s.admin.token.is_none());
    }

    #[test]
    fn snowflake_layouts_come_from_presets_or_explicit_bits() {
        let mut s = Settings::load(None).unwrap();
        assert_eq!(s.snowflake_layout().unwrap().bits_string(), "41/10/12");
        s.snowflake.layout = Some("7+30/13/13".into());
        assert!(
            s.snowflake_layout()
                .unwrap_err()
                .to_string()
                .contains("snowflake.epoch")
        );
        s.snowflake.epoch = Some("2016-05-20T00:00:00+08:00".into());
        s.snowflake.unit = Some("seconds".into());
        let l = s.snowflake_layout().unwrap();
        assert_eq!((l.prefix_value(), l.epoch_ms()), (127, 1_463_673_600_000));
        s.snowflake.layout = Some("7+30/13/12".into());
        assert!(
            s.snowflake_layout()
                .unwrap_err()
                .to_string()
                .contains("snowflake.layout")
        );
        s.snowflake.generator = "fast".into();
        assert!(
            s.snowflake_config()
                .unwrap_err()
                .to_string()
                .contains("snowflake.generator")
        );
    }

    #[test]
    fn max_id_bits_refuses_wider_layouts_and_takes_js_safe() {
        let mut s = Settings::load(None).unwrap();
        assert_eq!(s.snowflake.max_id_bits, 63);
        s.snowflake.max_id_bits = 53;
        let e = s.snowflake_config().unwrap_err().to_string();
        assert!(e.contains("snowflake.max_id_bits = 53"), "{e}");
        assert!(e.contains("41/10/12") && e.contains("63 bits"), "{e}");
        s.snowflake.preset = "js-safe".into();
        let c = s.snowflake_config().unwrap();
        assert_eq!(c.layout.bits_string(), "10+31/8/14");
        assert_eq!(c.layout.largest_id(), (1 << 53) - 1);
        s.snowflake.prefix_value = Some(1);
        assert!(
            s.snowflake_config().is_err(),
            "a prefix of 1 lifts ids past 2^53"
        );
        s.snowflake.prefix_value = None;
        s.snowflake.max_id_bits = 64;
        let e = s.snowflake_config().unwrap_err().to_string();
        assert!(
            e.contains("snowflake.max_id_bits must be within 1..=63"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_value_names_its_key() {
        let mut s = Settings::load(None).unwrap();
        s.segment.max_step = 0;
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("segment.max_step"), "{e}");
        s.segment.max_step = 1_000_000_001;
        let e = s.validate().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid configuration: segment.max_step must be within 1..=1000000000"
        );
        s.segment.max_step = 1_000_000_000;
        s.validate().unwrap();
    }
}
