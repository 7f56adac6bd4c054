//! The configuration spellings of enumerated values ([`UnknownValue`] names the key when one is
//! not accepted), and [`Secret`].

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use crate::snowflake::engine::GeneratorKind;
use crate::snowflake::layout::Preset;

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

pub use crate::telemetry::LogFormat;

/// `log.format` as written: the exact spellings `text` and `json`.
impl<'de> Deserialize<'de> for LogFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
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

/// `callers.mode`: whether id requests need a caller token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CallerMode {
    /// Required as soon as the database holds an unrevoked token, and on a server bound
    /// beyond loopback always.
    #[default]
    Auto,
    /// Never required (a presented token is still checked).
    Open,
    /// Always required.
    Tokens,
}

impl std::str::FromStr for CallerMode {
    type Err = UnknownValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Self::Auto),
            "open" => Ok(Self::Open),
            "tokens" => Ok(Self::Tokens),
            other => Err(UnknownValue {
                key: "callers.mode",
                accepted: r#""auto", "open" or "tokens""#,
                got: other.to_owned(),
            }),
        }
    }
}
