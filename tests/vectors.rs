//! The shared client vectors (`clients/conformance/vectors/`) checked against the server:
//! tag validity through `BizTag::parse`, and every error code in `errors.json` against what the
//! server documents and names in its source. No database, no network.
//!
//! The codes are read from text (docs/api.md's "Error codes" paragraph, docs/*.md, string
//! literals under src/), not from the error type, so that moving the type does not break this.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use leafid::segment::BizTag;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cases(file: &str) -> Vec<Value> {
    let path = root().join("clients/conformance/vectors").join(file);
    let doc: Value = serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        doc["description"].is_string() && doc["version"].is_u64(),
        "{file}"
    );
    let cases = doc["cases"].as_array().unwrap().clone();
    assert!(!cases.is_empty(), "{file}");
    cases
}

#[test]
fn the_server_agrees_with_every_tag_vector() {
    for c in cases("tags.json") {
        let tag = c["tag"].as_str().unwrap();
        assert_eq!(
            BizTag::parse(tag).is_ok(),
            c["valid"].as_bool().unwrap(),
            "{}: {tag:?}",
            c["name"]
        );
    }
}

/// docs/api.md's "Error codes:" paragraph as `code -> (status, Retry-After)`: each entry is one
/// or more backticked codes joined by `/`, then the status, then `+ \`Retry-After` when it has
/// one.
fn documented_codes() -> BTreeMap<String, (u16, bool)> {
    let api = fs::read_to_string(root().join("docs/api.md")).unwrap();
    let start = api
        .find("Error codes: ")
        .expect("docs/api.md has an \"Error codes:\" paragraph");
    let para =
        api[start..api[start..].find("\n\n").map_or(api.len(), |n| start + n)].replace('\n', " ");
    let mut out = BTreeMap::new();
    let mut pending: Vec<String> = Vec::new();
    let mut rest = para.as_str();
    while let Some(open) = rest.find('`') {
        let Some(len) = rest[open + 1..].find('`') else {
            break;
        };
        let word = &rest[open + 1..open + 1 + len];
        let after = &rest[open + 2 + len..];
        rest = after;
        if word.is_empty() || !word.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
            continue;
        }
        pending.push(word.to_owned());
        if after.starts_with('/') {
            continue; // `a`/`b` 400: both share the status
        }
        let digits: String = after
            .trim_start()
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(status) = digits.parse::<u16>() {
            let retry = after.trim_start()[digits.len()..]
                .trim_start()
                .starts_with("+ `Retry-After");
            for code in pending.drain(..) {
                out.entry(code).or_insert((status, retry));
            }
        } else {
            pending.clear(); // a backticked word that is not a code (a setting, a value)
        }
    }
    out
}

/// Every `.rs` file under `dir`, concatenated.
fn sources(dir: &Path, out: &mut String) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push_str(&fs::read_to_string(&path).unwrap());
        }
    }
}

#[test]
fn every_error_vector_is_a_code_the_server_documents_and_answers() {
    let documented = documented_codes();
    assert!(documented.len() >= 25, "parsed only {documented:?}");
    let docs: String = fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| fs::read_to_string(p).unwrap())
        .collect();
    let mut src = String::new();
    sources(&root().join("src"), &mut src);

    let mut in_vectors = BTreeMap::new();
    for c in cases("errors.json") {
        let name = c["name"].as_str().unwrap();
        let code = c["code"].as_str().unwrap();
        let status = u16::try_from(c["status"].as_u64().unwrap()).unwrap();
        let retry = c["retry_after"].as_bool().unwrap();
        assert!(
            matches!(c["action"].as_str(), Some("reject" | "failover" | "wait")),
            "{name}"
        );
        // A code whose server side is still being added on another branch (`"pending"`): checked
        // here as soon as src/ answers it, skipped until then.
        if c["pending"].is_string() && !src.contains(&format!("\"{code}\"")) {
            continue;
        }
        match c["origin"].as_str() {
            // Made by a client: the server must not answer it.
            Some("client") => {
                assert!(
                    !documented.contains_key(code),
                    "{name}: {code} is a server code"
                );
                continue;
            }
            // Not leafid's answer (a proxy's, or a code under another status): a client case.
            Some("proxy") => continue,
            None => {}
            Some(other) => panic!("{name}: origin {other}"),
        }
        in_vectors.insert(code.to_owned(), (status, retry));
        // The server answers it: its stable code is a literal of the source...
        assert!(
            src.contains(&format!("\"{code}\"")),
            "{code}: not a string literal under src/"
        );
        // ...and documented, with the same status and Retry-After where api.md lists it.
        assert!(
            docs.contains(&format!("`{code}`")),
            "{code}: not documented under docs/"
        );
        if let Some(&(doc_status, doc_retry)) = documented.get(code) {
            assert_eq!(
                (status, retry),
                (doc_status, doc_retry),
                "{code} against docs/api.md"
            );
        }
    }
    // Every code docs/api.md lists is in the vectors: a new code needs a client decision.
    for code in documented.keys() {
        assert!(
            in_vectors.contains_key(code),
            "{code} (docs/api.md) is not in errors.json"
        );
    }
}

/// Every error vector against the error type itself: each server code in `errors.json` is the
/// code of one `leafid::error::Error` variant, with the status its class maps to and a
/// `Retry-After` exactly where the vector says; and every variant's code has a vector (a new
/// code needs a client decision).
#[test]
fn every_error_vector_matches_the_error_type() {
    use actix_web::ResponseError;
    use leafid::error::Error;
    let all = Error::one_of_each();
    let mut covered = std::collections::BTreeSet::new();
    for c in cases("errors.json") {
        if c["origin"].is_string() {
            continue; // a client's or a proxy's answer, not the server's
        }
        let code = c["code"].as_str().unwrap();
        let found = all.iter().find(|e| e.code() == code);
        if found.is_none() && c["pending"].is_string() {
            continue; // its server side lands on another branch (see the test above)
        }
        let e = found.unwrap_or_else(|| panic!("{code}: no Error variant answers it"));
        assert_eq!(
            u64::from(e.status_code().as_u16()),
            c["status"].as_u64().unwrap(),
            "{code}: status"
        );
        assert_eq!(
            e.retry_after().is_some(),
            c["retry_after"].as_bool().unwrap(),
            "{code}: Retry-After"
        );
        covered.insert(code.to_owned());
    }
    for e in &all {
        assert!(
            covered.contains(e.code()),
            "{}: no vector in errors.json",
            e.code()
        );
    }
}
