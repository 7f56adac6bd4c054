//! Typed settings: embedded `config/default.toml`, then `--config FILE`, then `LEAFID__*`
//! environment variables. [`Settings::validate`] names the first bad key in one line.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::segment::{SegmentConfig, StepPolicy};
use crate::store::DbOptions;

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
        Ok(settings)
    }

    /// Checks ranges and relations the types cannot express.
    pub fn validate(&self) -> anyhow::Result<()> {
        let s = &self.segment;
        let checks: [(bool, &str); 9] = [
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
            (
                (1..=1_000_000_000).contains(&s.max_step),
                "segment.max_step must be within 1..=1000000000",
            ),
        ];
        if let Some((_, msg)) = checks.iter().find(|(ok, _)| !ok) {
            bail!("invalid configuration: {msg}");
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

    /// Database connection options.
    pub fn db_options(&self) -> DbOptions {
        DbOptions {
            url: self.database.url.clone(),
            max_connections: self.database.max_connections,
            acquire_timeout: Duration::from_millis(self.database.acquire_timeout_ms),
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
    fn a_bad_value_names_its_key() {
        let mut s = Settings::load(None).unwrap();
        s.segment.max_step = 0;
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("segment.max_step"), "{e}");
    }
}
