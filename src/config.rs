//! Typed settings: embedded `config/default.toml`, then `--config FILE`, then `LEAFID__*`
//! environment variables. Enumerated values ([`Preset`], [`GeneratorKind`], [`TimeUnit`],
//! [`WorkerStrategy`], [`LogFormat`]) are parsed once, while loading, and an unknown one fails in
//! one line naming its key and the accepted values; [`Settings::validate`] names the first bad
//! key of the remaining checks the same way. [`Secret`] keeps `admin.token` out of `Debug`.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::bail;
use serde::{Deserialize, Deserializer};

use crate::segment::tag_rules::{MAX_STEP, MIN_STEP};
use crate::segment::{SegmentConfig, Step, StepPolicy};
use crate::snowflake::cached::CachedConfig;
use crate::snowflake::engine::{GeneratorKind, SnowflakeConfig};
pub use crate::snowflake::layout::Preset;
use crate::snowflake::layout::{
    BitLayout, JS_SAFE_ID_BITS, LayoutArgs, PAYLOAD_BITS, ResolveError, TimeUnit, UnitPolicy,
};
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

/// `[database]`. Its `Debug` shows the URL with the password redacted.
#[derive(Clone, Deserialize)]
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

impl std::fmt::Debug for DatabaseSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseSettings")
            .field("url", &crate::store::redact(&self.url))
            .field("max_connections", &self.max_connections)
            .field("acquire_timeout_ms", &self.acquire_timeout_ms)
            .field(
                "mysql_single_statement_lease",
                &self.mysql_single_statement_lease,
            )
            .finish()
    }
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
}

/// `[snowflake.worker]` as written: `strategy` is `disposable`, `lease`, `static:N` or `static`
/// (case-insensitive), the last with its id in `id`.
#[derive(Deserialize)]
struct RawWorkerSettings {
    strategy: String,
    id: Option<u64>,
    lease_secs: u64,
    heartbeat_secs: u64,
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
    pub token: Option<Secret>,
}

/// `[log]`.
#[derive(Debug, Clone, Deserialize)]
pub struct LogSettings {
    /// `text` or `json`.
    pub format: LogFormat,
}

/// A value outside the accepted spellings of its key.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("{key} must be {accepted} (got {got:?})")]
pub struct UnknownValue {
    /// The dotted key, e.g. `snowflake.generator`.
    pub key: &'static str,
    /// The accepted values, quoted, for the message.
    pub accepted: &'static str,
    /// The value given.
    pub got: String,
}

/// `snowflake.preset` (exact spellings `twitter`, `uid-generator`, `js-safe`). The type lives
/// with the layout; its configuration spelling lives here.
impl FromStr for Preset {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        Preset::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownValue {
                key: "snowflake.preset",
                accepted: r#""twitter", "uid-generator" or "js-safe""#,
                got: s.to_owned(),
            })
    }
}

/// `snowflake.generator` (exact spellings `cached`, `direct`). The type lives with the engine;
/// its configuration spelling lives here.
impl FromStr for GeneratorKind {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        match s {
            "cached" => Ok(Self::Cached),
            "direct" => Ok(Self::Direct),
            _ => Err(UnknownValue {
                key: "snowflake.generator",
                accepted: r#""cached" or "direct""#,
                got: s.to_owned(),
            }),
        }
    }
}

/// `log.format`: how log lines are written (exact spellings `text`, `json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

impl FromStr for LogFormat {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, UnknownValue> {
        match s {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            _ => Err(UnknownValue {
                key: "log.format",
                accepted: r#""text" or "json""#,
                got: s.to_owned(),
            }),
        }
    }
}

impl TryFrom<String> for LogFormat {
    type Error = UnknownValue;

    fn try_from(s: String) -> Result<Self, UnknownValue> {
        s.parse()
    }
}

/// A configured secret (`admin.token`): `Debug` and `Display` print `***`, so it never reaches
/// a log line by accident; [`Secret::expose`] is the one way to the value.
#[derive(Clone, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The value itself: compare it in constant time, never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// A string setting parsed with the type's `FromStr` (its error names the problem).
fn parsed<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    String::deserialize(d)?
        .parse()
        .map_err(serde::de::Error::custom)
}

/// [`parsed`] for an optional setting.
fn parsed_opt<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    Option::<String>::deserialize(d)?
        .map(|s| s.parse().map_err(serde::de::Error::custom))
        .transpose()
}

/// One line for a deserialization error: the key, then the problem (the key once if the
/// problem already names it).
fn describe(e: config::ConfigError) -> String {
    match e {
        config::ConfigError::At {
            error,
            key: Some(key),
            ..
        } => {
            let msg = error.to_string();
            if msg.contains(key.as_str()) {
                msg
            } else {
                format!("{key}: {msg}")
            }
        }
        other => other.to_string(),
    }
}

impl Settings {
    /// Loads defaults, then `file` if given, then the environment; parses every enumerated
    /// value once, then validates.
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
        Self::from_builder(
            builder.add_source(
                config::Environment::with_prefix("LEAFID")
                    .prefix_separator("__")
                    .separator("__")
                    .try_parsing(true),
            ),
        )
    }

    /// Deserializes the layered sources, then validates.
    fn from_builder(
        builder: config::ConfigBuilder<config::builder::DefaultState>,
    ) -> anyhow::Result<Self> {
        let settings: Settings = builder
            .build()
            .and_then(|c| c.try_deserialize())
            .map_err(|e| anyhow::anyhow!("invalid configuration: {}", describe(e)))?;
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
        if !(self.database.url.starts_with("sqlite:")
            || self.database.url.starts_with("mysql:")
            || self.database.url.starts_with("mariadb:"))
        {
            bail!("invalid configuration: database.url must start with sqlite:// or mysql://");
        }
        if self
            .admin
            .token
            .as_ref()
            .is_some_and(|t| t.expose().is_empty())
        {
            bail!("invalid configuration: admin.token must not be empty when set");
        }
        Ok(())
    }

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
        args.resolve(UnitPolicy::Required).map_err(|e| {
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
        })
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
        s.snowflake.unit = Some(TimeUnit::Seconds);
        let l = s.snowflake_layout().unwrap();
        assert_eq!((l.prefix_value(), l.epoch_ms()), (127, 1_463_673_600_000));
        s.snowflake.layout = Some("7+30/13/12".into());
        assert!(
            s.snowflake_layout()
                .unwrap_err()
                .to_string()
                .contains("snowflake.layout")
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
        s.snowflake.preset = Preset::JsSafe;
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

    /// The defaults with `toml` layered over them (no environment: tests run in parallel).
    fn with(toml: &str) -> anyhow::Result<Settings> {
        Settings::from_builder(
            config::Config::builder()
                .add_source(config::File::from_str(
                    DEFAULT_TOML,
                    config::FileFormat::Toml,
                ))
                .add_source(config::File::from_str(toml, config::FileFormat::Toml)),
        )
    }

    /// The one line a refused value gives.
    fn refusal(toml: &str) -> String {
        format!("{:#}", with(toml).unwrap_err())
    }

    #[test]
    fn defaults_are_typed() {
        let s = Settings::load(None).unwrap();
        assert_eq!(s.snowflake.preset, Preset::Twitter);
        assert_eq!(s.snowflake.generator, GeneratorKind::Cached);
        assert_eq!(s.snowflake.unit, None);
        assert_eq!(s.snowflake.worker.strategy, WorkerStrategy::Lease);
        assert_eq!(s.log.format, LogFormat::Text);
    }

    #[test]
    fn presets_accept_their_exact_spellings_only() {
        for p in [Preset::Twitter, Preset::UidGenerator, Preset::JsSafe] {
            assert_eq!(p.as_str().parse(), Ok(p));
        }
        let s = with("[snowflake]\npreset = \"js-safe\"").unwrap();
        assert_eq!(s.snowflake.preset, Preset::JsSafe);
        // uid-generator parses; its exhausted time field is refused later, by the engine.
        let s = with("[snowflake]\npreset = \"uid-generator\"\nenabled = false").unwrap();
        assert_eq!(s.snowflake.preset, Preset::UidGenerator);
        for bad in ["Twitter", "js_safe", " twitter", ""] {
            assert!(bad.parse::<Preset>().is_err(), "{bad:?}");
        }
        assert_eq!(
            refusal("[snowflake]\npreset = \"snowflake\""),
            r#"invalid configuration: snowflake.preset must be "twitter", "uid-generator" or "js-safe" (got "snowflake")"#
        );
    }

    #[test]
    fn generators_accept_their_exact_spellings_only() {
        assert_eq!("cached".parse(), Ok(GeneratorKind::Cached));
        assert_eq!("direct".parse(), Ok(GeneratorKind::Direct));
        for bad in ["Direct", "fast", ""] {
            assert!(bad.parse::<GeneratorKind>().is_err(), "{bad:?}");
        }
        let s = with("[snowflake]\ngenerator = \"direct\"").unwrap();
        assert_eq!(s.snowflake.generator, GeneratorKind::Direct);
        assert_eq!(
            refusal("[snowflake]\ngenerator = \"fast\""),
            r#"invalid configuration: snowflake.generator must be "cached" or "direct" (got "fast")"#
        );
    }

    #[test]
    fn units_accept_seconds_and_millis() {
        let s = with("[snowflake]\nunit = \"millis\"").unwrap();
        assert_eq!(s.snowflake.unit, Some(TimeUnit::Millis));
        let s = with("[snowflake]\nunit = \" seconds \"").unwrap();
        assert_eq!(
            s.snowflake.unit,
            Some(TimeUnit::Seconds),
            "trimmed, as before"
        );
        let e = refusal("[snowflake]\nunit = \"ms\"");
        assert!(
            e.starts_with("invalid configuration: snowflake.unit: ") && e.contains("\"ms\""),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }

    #[test]
    fn worker_strategies_take_every_spelling_and_static_carries_its_id() {
        let strategy = |toml: &str| with(toml).map(|s| s.snowflake.worker.strategy);
        let cases = [
            ("strategy = \"lease\"", WorkerStrategy::Lease),
            ("strategy = \"Disposable\"", WorkerStrategy::Disposable),
            ("strategy = \" LEASE \"", WorkerStrategy::Lease),
            ("strategy = \"static:7\"", WorkerStrategy::Static(7)),
            ("strategy = \"static\"\nid = 3", WorkerStrategy::Static(3)),
            ("strategy = \"static:5\"\nid = 3", WorkerStrategy::Static(5)),
            ("strategy = \"lease\"\nid = 3", WorkerStrategy::Lease),
        ];
        for (toml, want) in cases {
            let got = strategy(&format!("[snowflake.worker]\n{toml}")).unwrap();
            assert_eq!(got, want, "{toml}");
        }
        assert_eq!(
            refusal("[snowflake.worker]\nstrategy = \"static\""),
            "invalid configuration: snowflake.worker.strategy: static worker strategy needs an id (static:N)"
        );
        assert_eq!(
            refusal("[snowflake.worker]\nstrategy = \"random\""),
            "invalid configuration: snowflake.worker.strategy: unknown worker strategy \"random\": \
             expected disposable, lease or static"
        );
        let e = refusal("[snowflake.worker]\nstrategy = \"static:x\"");
        assert!(
            e.contains("snowflake.worker.strategy") && e.contains("\"x\""),
            "{e}"
        );
    }

    #[test]
    fn log_formats_accept_text_and_json_only() {
        assert_eq!(with("").unwrap().log.format, LogFormat::Text);
        let s = with("[log]\nformat = \"json\"").unwrap();
        assert_eq!(s.log.format, LogFormat::Json);
        for bad in ["JSON", "pretty", ""] {
            assert!(bad.parse::<LogFormat>().is_err(), "{bad:?}");
        }
        assert_eq!(
            refusal("[log]\nformat = \"pretty\""),
            r#"invalid configuration: log.format must be "text" or "json" (got "pretty")"#
        );
    }

    #[test]
    fn the_admin_token_never_prints() {
        let s = with("[admin]\ntoken = \"s3cret\"").unwrap();
        let token = s.admin.token.as_ref().unwrap();
        assert_eq!(token.expose(), "s3cret");
        assert_eq!(format!("{token:?} {token}"), "*** ***");
        let all = format!("{s:?}");
        assert!(
            !all.contains("s3cret") && all.contains("token: Some(***)"),
            "{all}"
        );
        assert_eq!(
            refusal("[admin]\ntoken = \"\""),
            "invalid configuration: admin.token must not be empty when set"
        );
    }
}
