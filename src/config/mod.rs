//! Typed settings: embedded `config/default.toml`, then `--config FILE`, then `LEAFID__*`
//! environment variables. Enumerated values ([`Preset`],
//! [`GeneratorKind`](crate::snowflake::engine::GeneratorKind),
//! [`TimeUnit`](crate::snowflake::layout::TimeUnit),
//! [`WorkerStrategy`](crate::snowflake::worker::WorkerStrategy), [`LogFormat`]) are parsed once, while loading, and an unknown one fails in
//! one line naming its key and the accepted values; [`Settings::validate`] names the first bad
//! key of the remaining checks the same way. [`Secret`] keeps `admin.token` out of `Debug`.
//!
//! The parts: `snowflake` (the `[snowflake]` section and the engine settings built from it),
//! `values` (the spellings of enumerated values, and [`Secret`]); the other sections, loading
//! and validation are here.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::bail;
use serde::{Deserialize, Deserializer};

use crate::segment::tag_rules::{MAX_STEP, MIN_STEP};
use crate::segment::{SegmentConfig, Step, StepPolicy};
use crate::store::DbOptions;

pub mod keys;
mod snowflake;
#[cfg(test)]
mod tests;
mod values;

pub use crate::snowflake::layout::Preset;
pub use snowflake::{CachedSettings, SnowflakeSettings, WorkerSettings};
pub use values::{CallerMode, LogFormat, Secret, UnknownValue};

/// Most HTTP worker threads (`server.workers`): actix-web's own limit, which it enforces with a
/// panic.
pub const MAX_WORKERS: usize = 512;

/// Largest `clock.max_backward_ms`: a backward step is waited out on a request thread.
pub const MAX_BACKWARD_MS: u64 = 1_000;

/// The shipped defaults, compiled in so the binary runs without files beside it.
pub const DEFAULT_TOML: &str = include_str!("../../config/default.toml");

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
    /// Caller tokens: whether id requests need one.
    #[serde(default)]
    pub callers: CallersSettings,
    /// Clock tolerance.
    pub clock: ClockSettings,
    /// Log output.
    pub log: LogSettings,
    /// Id shapes: the keys of permuted tags.
    #[serde(default)]
    pub shapes: ShapesSettings,
    /// Regions: the lanes of the segment engine.
    #[serde(default)]
    pub lanes: LanesSettings,
    /// The gRPC door (`crate::grpc`).
    #[serde(default)]
    pub grpc: GrpcSettings,
    /// The keys of `shapes.keys`, read from their files once by [`Settings::load`].
    #[serde(skip)]
    pub shape_keys: std::sync::Arc<crate::shapes::keys::KeyRing>,
}

/// `[grpc]`: the gRPC door (`crate::grpc`), on its own port of `server.host` (actix-web and
/// tonic are two HTTP/2 stacks; one port would need a router in front of both).
#[derive(Debug, Clone, Deserialize)]
pub struct GrpcSettings {
    /// Whether the gRPC services are served (default off: a new port opens only when asked).
    #[serde(default)]
    pub enabled: bool,
    /// Its port; 0 picks a free one (logged as `grpc listening`). Default 9090.
    #[serde(default = "default_grpc_port")]
    pub port: u16,
}

fn default_grpc_port() -> u16 {
    9090
}

impl Default for GrpcSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            port: default_grpc_port(),
        }
    }
}

/// `[lanes]`: several independent databases, one per region (`crate::segment::lanes`).
#[derive(Debug, Clone, Default, Deserialize)]
pub struct LanesSettings {
    /// The slot (0 to 7) of this server's own database (`database.url`); absent: no lanes.
    pub slot: Option<u8>,
    /// `[lanes.others]`: the other regions' databases by slot (`"1" = "mysql://..."`), asked in
    /// slot order after the own lane.
    #[serde(default)]
    pub others: std::collections::BTreeMap<String, String>,
}

impl LanesSettings {
    /// The other lanes as (slot, URL), in slot order, checked: slots 0 to 7, distinct from the
    /// own, and only with an own slot.
    pub fn other_lanes(&self) -> anyhow::Result<Vec<(u8, String)>> {
        let slots = crate::segment::lanes::map::SLOTS;
        if let Some(own) = self.slot
            && own >= slots
        {
            bail!(
                "invalid configuration: lanes.slot = {own}: a slot is 0 to {}",
                slots - 1
            );
        }
        if self.slot.is_none() && !self.others.is_empty() {
            bail!("invalid configuration: lanes.others needs lanes.slot (this server's own lane)");
        }
        let mut out = Vec::new();
        for (key, url) in &self.others {
            let slot: u8 = key.parse().ok().filter(|s| *s < slots).ok_or_else(|| {
                anyhow::anyhow!(
                    "invalid configuration: lanes.others.{key}: the key is a slot, 0 to {}",
                    slots - 1
                )
            })?;
            if Some(slot) == self.slot {
                bail!(
                    "invalid configuration: lanes.others.{key} has this server's own slot: two \
                     lanes with one slot could hand out one id"
                );
            }
            out.push((slot, url.clone()));
        }
        out.sort();
        Ok(out)
    }
}

/// `[shapes]`.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct ShapesSettings {
    /// `[shapes.keys]`: key id -> path of a file holding the key (64 hex characters), for
    /// permuted tags (`docs/shapes.md`). Never from the database.
    #[serde(default)]
    pub keys: std::collections::BTreeMap<String, std::path::PathBuf>,
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
    /// A request body must arrive within this (else 408 and the connection closes).
    pub body_timeout_ms: u64,
    /// A keep-alive connection with no traffic this long is closed (`crate::http::idle`).
    pub keep_alive_secs: u64,
    /// Grace period after SIGTERM.
    pub shutdown_timeout_secs: u64,
    /// Readiness answers 503 for this long after SIGTERM before the listener closes.
    pub drain_secs: u64,
    /// Where peers reach this server (strict tags' hops); empty: `http://host:port` when
    /// `host` is one address.
    #[serde(default)]
    pub advertise_url: String,
}

/// `[database]`. Its `Debug` shows the URL with the password redacted.
#[derive(Clone, Deserialize)]
pub struct DatabaseSettings {
    /// `sqlite://path`, `mysql://user:pw@host:port/db` or `postgres://user:pw@host:port/db`.
    pub url: String,
    /// Pool size for MySQL.
    pub max_connections: u32,
    /// Wait for a pooled connection.
    pub acquire_timeout_ms: u64,
    /// MySQL: single-statement leases for adapted steps.
    pub mysql_single_statement_lease: bool,
    /// PostgreSQL through PgBouncer in transaction pooling mode: no prepared statement outlives
    /// its transaction (`crate::store::postgres`).
    #[serde(default)]
    pub pgbouncer: bool,
    /// Lease from a database whose settings can lose a committed lease in a crash
    /// (`crate::store::durability`); off: no lease from it.
    #[serde(default)]
    pub allow_lossy_commits: bool,
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
            .field("pgbouncer", &self.pgbouncer)
            .field("allow_lossy_commits", &self.allow_lossy_commits)
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
    /// On a stop, give each tag's unused leased ids back to `leaf_alloc` (compare-and-set).
    pub return_unused_on_shutdown: bool,
    /// How long a strict tag's owner holds it after each write (`crate::segment::strict`).
    #[serde(default = "default_strict_lease_ms")]
    pub strict_lease_ms: u64,
}

fn default_strict_lease_ms() -> u64 {
    2000
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
    /// Bearer token for admin writes (and, with `protect_reads`, the monitor pages).
    pub token: Option<Secret>,
    /// Without a token, accept admin requests from loopback peers. Off by default: behind a
    /// same-host proxy or sidecar every request is a loopback peer.
    #[serde(default)]
    pub trust_loopback: bool,
    /// The monitor pages (`/db`, `/cache`, `/api/v1/cache`, `GET /api/v1/tags`, `/metrics`)
    /// need the admin credential too.
    #[serde(default)]
    pub protect_reads: bool,
}

/// `[callers]`: caller tokens scoped to tags (`crate::access::callers`).
#[derive(Debug, Clone, Deserialize)]
pub struct CallersSettings {
    /// `auto` (default: tokens required once any exists, and always beyond loopback), `open`
    /// or `tokens`.
    #[serde(default, deserialize_with = "parsed")]
    pub mode: CallerMode,
    /// How often the token list is read again from the database (a revocation reaches the
    /// other servers within this).
    #[serde(default = "default_callers_refresh")]
    pub refresh_secs: u64,
}

fn default_callers_refresh() -> u64 {
    5
}

impl Default for CallersSettings {
    fn default() -> Self {
        Self {
            mode: CallerMode::Auto,
            refresh_secs: default_callers_refresh(),
        }
    }
}

/// Whether `host` (`server.host`) is a loopback address or `localhost`: a server bound there is
/// reached only from its own machine.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

/// `[log]`.
#[derive(Debug, Clone, Deserialize)]
pub struct LogSettings {
    /// `text` or `json`.
    pub format: LogFormat,
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
            file,
            builder.add_source(
                config::Environment::with_prefix("LEAFID")
                    .prefix_separator("__")
                    .separator("__")
                    .try_parsing(true),
            ),
        )
    }

    /// Deserializes the layered sources (an unknown key stops it: [`keys`]), then validates.
    fn from_builder(
        file: Option<&Path>,
        builder: config::ConfigBuilder<config::builder::DefaultState>,
    ) -> anyhow::Result<Self> {
        let config = builder
            .build()
            .map_err(|e| anyhow::anyhow!("invalid configuration: {}", describe(e)))?;
        let mut unknown = Vec::new();
        let mut settings: Settings =
            serde_ignored::deserialize(config, |path| unknown.push(path.to_string()))
                .map_err(|e| anyhow::anyhow!("invalid configuration: {}", describe(e)))?;
        if let Some(path) = unknown.first() {
            bail!("{}", keys::describe_unknown(path, file));
        }
        settings.validate()?;
        if settings.snowflake.enabled {
            settings.snowflake_config()?;
        }
        settings.shape_keys = std::sync::Arc::new(settings.read_shape_keys()?);
        settings.lanes.other_lanes()?;
        Ok(settings)
    }

    /// Checks ranges and relations the types cannot express. Runs before anything is bound or
    /// claimed, and bounds every number: a value actix or tokio would panic on (513 workers, a
    /// timeout that overflows an `Instant`) is a one-line error here instead.
    pub fn validate(&self) -> anyhow::Result<()> {
        const DAY: u64 = 86_400;
        let (sv, db, s) = (&self.server, &self.database, &self.segment);
        let (worker, cached) = (&self.snowflake.worker, &self.snowflake.cached);
        // (key, value, smallest, largest)
        let ranges: [(&str, u64, u64, u64); 21] = [
            ("server.workers", sv.workers as u64, 0, MAX_WORKERS as u64),
            (
                "server.max_body_bytes",
                sv.max_body_bytes as u64,
                256,
                16 << 20,
            ),
            ("server.body_timeout_ms", sv.body_timeout_ms, 1, 600_000),
            ("server.keep_alive_secs", sv.keep_alive_secs, 1, 3_600),
            (
                "server.shutdown_timeout_secs",
                sv.shutdown_timeout_secs,
                0,
                3_600,
            ),
            ("server.drain_secs", sv.drain_secs, 0, 3_600),
            (
                "database.max_connections",
                db.max_connections.into(),
                1,
                1_000,
            ),
            (
                "database.acquire_timeout_ms",
                db.acquire_timeout_ms,
                1,
                600_000,
            ),
            ("segment.wait_timeout_ms", s.wait_timeout_ms, 1, 600_000),
            ("segment.load_timeout_ms", s.load_timeout_ms, 1, 600_000),
            ("segment.strict_lease_ms", s.strict_lease_ms, 100, 600_000),
            (
                "segment.max_concurrent_loads",
                s.max_concurrent_loads as u64,
                1,
                10_000,
            ),
            (
                "segment.refresh_interval_secs",
                s.refresh_interval_secs,
                1,
                DAY,
            ),
            (
                "segment.step_grow_below_secs",
                s.step_grow_below_secs,
                0,
                30 * DAY,
            ),
            (
                "segment.step_shrink_above_secs",
                s.step_shrink_above_secs,
                0,
                30 * DAY,
            ),
            ("snowflake.worker.lease_secs", worker.lease_secs, 0, 7 * DAY),
            (
                "snowflake.worker.heartbeat_secs",
                worker.heartbeat_secs,
                0,
                DAY,
            ),
            (
                "snowflake.cached.max_wait_ms",
                cached.max_wait_ms,
                0,
                60_000,
            ),
            (
                "snowflake.cached.schedule_interval_secs",
                cached.schedule_interval_secs,
                0,
                DAY,
            ),
            (
                "clock.max_backward_ms",
                self.clock.max_backward_ms,
                0,
                u64::MAX,
            ),
            ("callers.refresh_secs", self.callers.refresh_secs, 1, 3_600),
        ];
        if let Some((key, v, lo, hi)) = ranges.iter().find(|(_, v, lo, hi)| v < lo || v > hi) {
            bail!("invalid configuration: {key} = {v} is outside {lo}..={hi}");
        }
        if sv.host.is_empty() {
            bail!("invalid configuration: server.host must not be empty");
        }
        // Two listeners on one fixed port: the second bind would fail after the engines
        // started; said here, before anything is bound.
        if self.grpc.enabled && self.grpc.port != 0 && self.grpc.port == sv.port {
            bail!(
                "invalid configuration: grpc.port = {} is server.port too: the gRPC door needs \
                 a port of its own (0 picks a free one)",
                self.grpc.port
            );
        }
        if s.step_grow_below_secs > s.step_shrink_above_secs {
            bail!(
                "invalid configuration: segment.step_grow_below_secs must not exceed segment.step_shrink_above_secs"
            );
        }
        // The doubling cap obeys the rule of a DBA's step.
        if Step::try_from(s.max_step).is_err() {
            bail!("invalid configuration: segment.max_step must be within {MIN_STEP}..={MAX_STEP}");
        }
        if !(self.database.url.starts_with("sqlite:")
            || self.database.url.starts_with("mysql:")
            || self.database.url.starts_with("mariadb:")
            || self.database.url.starts_with("postgres:")
            || self.database.url.starts_with("postgresql:"))
        {
            bail!(
                "invalid configuration: database.url must start with sqlite://, mysql:// or postgres://"
            );
        }
        if let Some(token) = &self.admin.token {
            let t = token.expose();
            if t.trim().is_empty() {
                bail!("invalid configuration: admin.token must not be empty or blank when set");
            }
            // A header value loses surrounding spaces and cannot carry control characters: such
            // a token could never be sent, so no request would ever match it.
            if t.trim() != t || !t.bytes().all(|b| b == b' ' || b.is_ascii_graphic()) {
                bail!(
                    "invalid configuration: admin.token must be printable ASCII without leading \
                     or trailing spaces (it is sent in an Authorization header)"
                );
            }
        }
        Ok(())
    }

    /// Database connection options.
    pub fn db_options(&self) -> DbOptions {
        DbOptions {
            url: self.database.url.clone(),
            max_connections: self.database.max_connections,
            acquire_timeout: Duration::from_millis(self.database.acquire_timeout_ms),
            mysql_single_statement_lease: self.database.mysql_single_statement_lease,
            pgbouncer: self.database.pgbouncer,
        }
    }

    /// The keys of permuted tags, read from their files: a missing, unreadable, malformed or
    /// world-readable key file stops the start, naming the key.
    pub fn read_shape_keys(&self) -> anyhow::Result<crate::shapes::keys::KeyRing> {
        crate::shapes::keys::KeyRing::load(&self.shapes.keys)
            .map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))
    }

    /// The segment engine's tunables, with the keys of permuted tags.
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
            // Open here; `startup` wires it to the database's durability gate.
            lease_gate: Default::default(),
            keys: self.shape_keys.clone(),
        }
    }
}
