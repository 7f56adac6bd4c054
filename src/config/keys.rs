//! Unknown keys stop the start: a misspelt setting (`LEAFID__ADMIN__PROTECT_READ`, `[admin]
//! tokn = ...`) must not leave a server running without what its operator believes is on.
//!
//! The keys a source sets that [`Settings`](super::Settings) does not read are found while
//! deserializing (`serde_ignored`: exactly the keys serde skips, whatever the struct looks
//! like), then traced to where they came from (a `LEAFID__` variable or the `--config` file)
//! and matched against the known keys for a suggestion. The known keys are those
//! `config/default.toml` ships, commented-out optional ones (`# token = ...`) included: one
//! list, which `docs/configuration.md` is also checked against.

use std::collections::BTreeSet;
use std::path::Path;

use super::DEFAULT_TOML;

/// Prefix of the environment variables that set keys (`LEAFID__SERVER__PORT`).
pub const ENV_PREFIX: &str = "LEAFID__";

/// `section.key` for every assignment of the TOML text, and every commented-out one
/// (`# key = value`) under a section: the keys the server reads.
pub fn shipped_keys(toml: &str) -> BTreeSet<String> {
    let mut section = String::new();
    let mut keys = BTreeSet::new();
    for line in toml.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_owned();
            continue;
        }
        let assignment = line.strip_prefix("# ").unwrap_or(line);
        let Some((key, _)) = assignment.split_once(" = ") else {
            continue;
        };
        if !key.is_empty() && key.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
            keys.insert(format!("{section}.{key}"));
        }
    }
    keys
}

/// The keys the server knows: [`shipped_keys`] of the embedded defaults.
pub fn known_keys() -> BTreeSet<String> {
    shipped_keys(DEFAULT_TOML)
}

/// One line for the unknown key `path` (as `serde_ignored` reports it: `admin.tokn`, or
/// `admn` for a whole unknown section): its source, and the nearest known key if one is close.
pub fn describe_unknown(path: &str, file: Option<&Path>) -> String {
    let source = env_source(path, std::env::vars().map(|(k, _)| k))
        .map(|var| format!("environment variable {var}"))
        .or_else(|| file.map(|f| format!("file {}", f.display())))
        .unwrap_or_else(|| "the built-in defaults".to_owned());
    let mut line = format!("invalid configuration: unknown key {path} (from {source})");
    if let Some(near) = nearest(path, &known_keys()) {
        line.push_str(&format!("; did you mean {near}?"));
    }
    line
}

/// The `LEAFID__` variable among `vars` that sets `path` or a key under it (`path` may be a
/// whole unknown section).
fn env_source(path: &str, vars: impl Iterator<Item = String>) -> Option<String> {
    vars.filter(|v| v.starts_with(ENV_PREFIX)).find(|v| {
        let key = v[ENV_PREFIX.len()..].to_lowercase().replace("__", ".");
        key == path || key.starts_with(&format!("{path}."))
    })
}

/// The known key closest to `path` by edit distance, if it is close enough to be a typo: at
/// most a quarter of the key's length (and at least 2) apart, or the same last part in another
/// section (`server.token` -> `admin.token`).
pub fn nearest(path: &str, known: &BTreeSet<String>) -> Option<String> {
    let bound = (path.len() / 4).max(2);
    let best = known
        .iter()
        .map(|k| (edit_distance(path, k), k))
        .min_by_key(|(d, _)| *d)
        .filter(|(d, _)| *d <= bound)
        .map(|(_, k)| k.clone());
    let (section, last) = path.rsplit_once('.').unwrap_or(("", path));
    best.or_else(|| {
        // A shortened or lengthened key of the same section (`padding` -> `padding_factor`).
        known
            .iter()
            .filter_map(|k| Some((k, k.rsplit_once('.')?)))
            .find(|(_, (s, l))| {
                *s == section && !last.is_empty() && (l.starts_with(last) || last.starts_with(l))
            })
            .map(|(k, _)| k.clone())
    })
    .or_else(|| {
        known
            .iter()
            .find(|k| k.rsplit('.').next() == Some(last))
            .cloned()
    })
}

/// Levenshtein distance over bytes (keys are ASCII), two rows.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_get_the_nearest_key() {
        let known = known_keys();
        assert!(known.contains("admin.protect_reads") && known.contains("admin.token"));
        assert!(
            known.contains("snowflake.worker.id"),
            "commented-out keys count"
        );
        for (typo, meant) in [
            ("admin.protect_read", "admin.protect_reads"),
            ("admin.tokn", "admin.token"),
            ("server.worker", "server.workers"),
            ("segment.wait_timeout", "segment.wait_timeout_ms"),
            ("server.token", "admin.token"),
            ("snowflake.worker.strategi", "snowflake.worker.strategy"),
            (
                "snowflake.cached.padding",
                "snowflake.cached.padding_factor",
            ),
        ] {
            assert_eq!(nearest(typo, &known).as_deref(), Some(meant), "{typo}");
        }
        assert_eq!(nearest("completely.different", &known), None);
    }

    #[test]
    fn the_variable_that_set_a_key_is_named() {
        let vars = ["PATH", "LEAFID__ADMIN__PROTECT_READ", "LEAFID__ADMN__TOKEN"];
        let vars = || vars.iter().map(|v| (*v).to_owned());
        assert_eq!(
            env_source("admin.protect_read", vars()).as_deref(),
            Some("LEAFID__ADMIN__PROTECT_READ")
        );
        assert_eq!(
            env_source("admn", vars()).as_deref(),
            Some("LEAFID__ADMN__TOKEN")
        );
        assert_eq!(env_source("admin.token", vars()), None);
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("token", "token"), 0);
        assert_eq!(edit_distance("tokn", "token"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
