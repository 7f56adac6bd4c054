//! `leafid keys check`: each key id of `[shapes.keys]`, its key's check value
//! (`leafid::shapes::key_check`) and what the database records for the key id
//! (`leafid_shape_key`): `match`, `mismatch` (this configuration's key file is not the one the
//! database was first used with: its tags answer `key_unavailable` on a server with it) or
//! `not bound yet` (no server has used the key id with this database). It only reads: checking
//! a new key file never binds it. Exit 1 on any mismatch, so a deploy script can stop before a
//! server starts with the wrong file.

use std::io::Write;

use clap::Subcommand;
use leafid::segment::SegmentAllocator;
use leafid::shapes::keys::KeyRing;

use super::tags::OutputFlags;
use super::{CliError, Exit};

/// `leafid keys ...`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Check every key of shapes.keys against the database (exit 1 on a mismatch).
    Check(OutputFlags),
}

impl KeysCommand {
    /// Whether the answer is JSON.
    pub fn json(&self) -> bool {
        match self {
            Self::Check(o) => o.json,
        }
    }
}

/// What the database records for a key id, against this configuration's key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyState {
    /// The database records this key's check value.
    Match,
    /// The database records another key's check value.
    Mismatch(String),
    /// No server has used the key id with this database yet.
    NotBound,
}

impl KeyState {
    fn word(&self) -> &'static str {
        match self {
            Self::Match => "match",
            Self::Mismatch(_) => "mismatch",
            Self::NotBound => "not bound yet",
        }
    }
}

/// Checks every key of `keys` against the database of `engine` (the one formatted tags are
/// served from) and writes one line (or one JSON object) per key id. [`Exit::CheckFailed`] when
/// any key mismatches.
pub async fn run(
    keys: &KeyRing,
    engine: &SegmentAllocator,
    json: bool,
    out: &mut impl Write,
) -> Result<Exit, CliError> {
    let mut rows = Vec::new();
    for id in keys.ids() {
        let check = keys.check_value(id).unwrap_or_default();
        let recorded = engine
            .store()
            .key_check(id)
            .await
            .map_err(|e| CliError::Database(e.to_string()))?;
        let state = match recorded {
            None => KeyState::NotBound,
            Some(r) if r == check => KeyState::Match,
            Some(r) => KeyState::Mismatch(r),
        };
        let file = keys
            .path(id)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        rows.push((id, file, check, state));
    }
    if json {
        let body: Vec<serde_json::Value> = rows
            .iter()
            .map(|(id, file, check, state)| {
                serde_json::json!({
                    "key_id": id, "file": file, "check_value": check,
                    "recorded": match state {
                        KeyState::Match => Some(*check),
                        KeyState::Mismatch(r) => Some(r.as_str()),
                        KeyState::NotBound => None,
                    },
                    "state": state.word(),
                })
            })
            .collect();
        writeln!(out, "{}", serde_json::Value::Array(body))?;
    } else if rows.is_empty() {
        writeln!(out, "no keys in shapes.keys")?;
    } else {
        writeln!(
            out,
            "{:<32}  {:<21}  {:<21}  state",
            "key_id", "check_value", "database"
        )?;
        for (id, file, check, state) in &rows {
            let recorded = match state {
                KeyState::Match => *check,
                KeyState::Mismatch(r) => r.as_str(),
                KeyState::NotBound => "-",
            };
            writeln!(
                out,
                "{id:<32}  {check:<21}  {recorded:<21}  {}",
                state.word()
            )?;
            if let KeyState::Mismatch(_) = state {
                writeln!(
                    out,
                    "  {file}: not the key file this database was first used with under \
                     \"{id}\"; every server needs the very same file (docs/shapes.md#rotating-a-key)"
                )?;
            }
        }
    }
    let mismatch = rows
        .iter()
        .any(|(.., s)| matches!(s, KeyState::Mismatch(_)));
    Ok(if mismatch {
        Exit::CheckFailed
    } else {
        Exit::Success
    })
}
