//! `docs/configuration.md` lists exactly the keys `config/default.toml` ships, commented-out
//! optional keys (`# token = ...`) included: a key added, renamed or removed without its row
//! fails here. The keys are read by the server's own rule (`config::keys::shipped_keys`, which
//! also decides which keys are unknown at start-up).

use std::collections::BTreeSet;

use leafid::config::keys::shipped_keys;

fn read(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{full}: {e}"))
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
