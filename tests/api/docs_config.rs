//! `docs/configuration.md` lists exactly the keys `config/default.toml` ships, commented-out
//! optional keys (`# token = ...`) included: a key added, renamed or removed without its row
//! fails here.

use std::collections::BTreeSet;

fn read(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
}

/// `section.key` for every assignment in the TOML text, and every commented-out one
/// (`# key = value`) under a section.
fn shipped_keys(toml: &str) -> BTreeSet<String> {
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

/// The first cell of every row of the page's key table.
fn documented_keys(page: &str) -> BTreeSet<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once('`'))
        .map(|(key, _)| key.to_owned())
        .filter(|key| key.contains('.') && !key.contains(' '))
        .collect()
}

#[test]
fn the_configuration_page_lists_exactly_the_shipped_keys() {
    let shipped = shipped_keys(&read("config/default.toml"));
    let documented = documented_keys(&read("docs/configuration.md"));
    assert!(shipped.len() >= 40, "only {} keys found", shipped.len());
    let missing: Vec<_> = shipped.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(&shipped).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/configuration.md lacks {missing:?} and lists {extra:?}, not in config/default.toml"
    );
}

#[test]
fn every_documented_key_has_its_environment_variable() {
    for line in read("docs/configuration.md").lines() {
        let cells: Vec<&str> = line.split(" | ").collect();
        let Some(key) = cells[0]
            .strip_prefix("| `")
            .and_then(|k| k.strip_suffix('`'))
        else {
            continue;
        };
        if !key.contains('.') {
            continue;
        }
        let env = format!("`LEAFID__{}`", key.to_uppercase().replace('.', "__"));
        assert_eq!(cells.get(1).copied(), Some(env.as_str()), "{line}");
    }
}
