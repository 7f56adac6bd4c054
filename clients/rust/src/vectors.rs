//! The shared client vectors (`clients/conformance/vectors/*.json`) run against this crate's
//! own rule functions: the same files every client's tests read.

use std::path::PathBuf;
use std::time::{Duration, UNIX_EPOCH};

use serde_json::Value;

use crate::bounds::{self, IdBounds};
use crate::client::valid_tag;
use crate::error::Error;
use crate::formatted::{Texts, parse_rfc3339};
use crate::servers::{Action, Answer, Outcome, Ranges, Request, action};
use crate::sizing::{Sizing, Usage};
use crate::supply::catch_up_count;

/// The cases of one vector file (failing when it has none).
fn cases(file: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../conformance/vectors")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert!(
        doc["description"].is_string() && doc["version"].is_u64(),
        "{file}"
    );
    let cases = doc["cases"].as_array().unwrap().clone();
    assert!(!cases.is_empty(), "{file} has no case");
    cases
}

fn name(c: &Value) -> &str {
    c["name"].as_str().unwrap()
}

fn u(c: &Value, k: &str) -> u64 {
    c[k].as_u64().unwrap_or_else(|| panic!("{}: {k}", name(c)))
}

#[test]
fn errors() {
    for c in cases("errors.json") {
        let status = u16::try_from(u(&c, "status")).unwrap();
        let want = match c["action"].as_str().unwrap() {
            "reject" => Action::Reject,
            "failover" => Action::Failover,
            "wait" => Action::Wait,
            other => panic!("{}: action {other}", name(&c)),
        };
        // A 200 refusal (not_formatted) is made by the formatted parser, not this table.
        if status == 200 {
            continue;
        }
        let got = action(status, c["code"].as_str().unwrap());
        assert_eq!(got, want, "{}", name(&c));
    }
}

#[test]
fn tags() {
    for c in cases("tags.json") {
        let got = valid_tag(c["tag"].as_str().unwrap());
        assert_eq!(got, c["valid"].as_bool().unwrap(), "{}", name(&c));
    }
}

#[test]
fn batch_sizing() {
    let (mut demand, mut catch_up) = (0, 0);
    for c in cases("batch.json") {
        let want = usize::try_from(u(&c, "want")).unwrap();
        let us = |k| usize::try_from(u(&c, k)).unwrap();
        let got = match c["rule"].as_str().unwrap() {
            "demand" => {
                demand += 1;
                let sizing = Sizing {
                    min: us("min"),
                    max: us("max"),
                    target: Duration::from_millis(u(&c, "target_ms")),
                };
                let batch_ids = u(&c, "batch_ids");
                let usage = (batch_ids > 0).then(|| Usage {
                    size: batch_ids,
                    used: u(&c, "used"),
                    elapsed: Duration::from_secs_f64(c["elapsed_ms"].as_f64().unwrap() / 1000.0),
                });
                sizing.next(us("size"), usage, c["starved"].as_bool().unwrap())
            }
            "catch_up" => {
                catch_up += 1;
                let floor = c["floor"].as_i64().unwrap();
                let last = c["last"].as_i64().unwrap();
                catch_up_count(floor, last, us("size"), us("limit"))
            }
            other => panic!("{}: rule {other}", name(&c)),
        };
        assert_eq!(got, want, "{}", name(&c));
    }
    assert!(demand > 0 && catch_up > 0);
}

/// The `from` and `to` values of a bounds request's query.
fn query_instants(path: &str) -> (String, String) {
    let query = path.split_once('?').unwrap().1;
    let value = |k: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
            .unwrap()
            .replace("%3A", ":")
    };
    (value("from"), value("to"))
}

#[test]
fn bounds_rounding() {
    for c in cases("bounds.json") {
        let at = |k: &str| parse_rfc3339(c[k].as_str().unwrap()).unwrap();
        let req = bounds::request(at("from"), at("to")).unwrap();
        let (from, to) = query_instants(&req.path);
        assert_eq!(
            from,
            c["query_from"].as_str().unwrap(),
            "{}: from",
            name(&c)
        );
        assert_eq!(to, c["query_to"].as_str().unwrap(), "{}: to", name(&c));
    }
}

#[test]
fn responses() {
    let text = |v: &Value| v.as_str().unwrap().to_owned();
    for c in cases("responses.json") {
        let body = c["body"].as_str().unwrap().as_bytes();
        let valid = c["valid"].as_bool().unwrap();
        match c["kind"].as_str().unwrap() {
            "ranges" => {
                let tag = c["tag"].as_str().map(str::to_owned);
                let asked = usize::try_from(u(&c, "asked")).unwrap();
                let req = Request::new("/r".into(), asked, 1_000_000, tag);
                match <Ranges as Answer>::parse(body, &req, "http://s") {
                    Ok(Ranges { runs, strict }) => {
                        assert!(valid, "{}: accepted", name(&c));
                        let want_strict = c.get("strict").and_then(Value::as_bool).unwrap_or(false);
                        assert_eq!(strict, want_strict, "{}: strict", name(&c));
                        let got: Vec<[String; 2]> = runs
                            .iter()
                            .map(|r| [r.first.to_string(), r.last.to_string()])
                            .collect();
                        let want: Vec<[String; 2]> = c["runs"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|r| [text(&r[0]), text(&r[1])])
                            .collect();
                        assert_eq!(got, want, "{}", name(&c));
                    }
                    Err(Outcome::Fault(_)) => assert!(!valid, "{}: refused", name(&c)),
                    Err(Outcome::Rejected(e) | Outcome::Throttled { error: e, .. }) => {
                        panic!("{}: rejected {e}", name(&c))
                    }
                }
            }
            "bounds" => {
                let req = bounds::request(UNIX_EPOCH, UNIX_EPOCH).unwrap();
                match IdBounds::parse(body, &req, "http://s") {
                    Ok(b) => {
                        assert!(valid, "{}: accepted", name(&c));
                        assert_eq!(b.min_id.to_string(), text(&c["min_id"]), "{}", name(&c));
                        assert_eq!(b.max_id.to_string(), text(&c["max_id"]), "{}", name(&c));
                    }
                    Err(Outcome::Fault(_)) => assert!(!valid, "{}: refused", name(&c)),
                    Err(Outcome::Rejected(e) | Outcome::Throttled { error: e, .. }) => {
                        panic!("{}: rejected {e}", name(&c))
                    }
                }
            }
            other => panic!("{}: kind {other}", name(&c)),
        }
    }
}

#[test]
fn rfc3339() {
    for c in cases("rfc3339.json") {
        let got = parse_rfc3339(c["text"].as_str().unwrap()).map(|t| {
            match t.duration_since(UNIX_EPOCH) {
                Ok(d) => i64::try_from(d.as_millis()).unwrap(),
                // Floor before 1970 too.
                Err(e) => -i64::try_from(e.duration().as_nanos().div_ceil(1_000_000)).unwrap(),
            }
        });
        let want = c["valid"]
            .as_bool()
            .unwrap()
            .then(|| c["unix_ms"].as_i64().unwrap());
        assert_eq!(got, want, "{}", name(&c));
    }
}

#[test]
fn formats() {
    for c in cases("formats.json") {
        let tag = c["tag"].as_str().unwrap().to_owned();
        let asked = usize::try_from(u(&c, "asked")).unwrap();
        let req = Request::list("/r".into(), asked, 100_000, tag);
        let got =
            <Texts as Answer>::parse(c["body"].as_str().unwrap().as_bytes(), &req, "http://s");
        match (c["result"].as_str().unwrap(), got) {
            ("ok", Ok(t)) => {
                let ids: Vec<&str> = c["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap())
                    .collect();
                assert_eq!(t.ids.iter().collect::<Vec<_>>(), ids, "{}", name(&c));
                assert_eq!(t.ordered, c["ordered"].as_bool().unwrap(), "{}", name(&c));
                let ms = t.period_end.duration_since(UNIX_EPOCH).unwrap().as_millis();
                assert_eq!(ms, u128::from(u(&c, "period_end_ms")), "{}", name(&c));
            }
            ("not_formatted", Err(Outcome::Rejected(Error::Rejected { code, status, .. }))) => {
                assert_eq!(
                    (code.as_str(), status),
                    ("not_formatted", 200),
                    "{}",
                    name(&c)
                );
            }
            ("fault", Err(Outcome::Fault(_))) => {}
            (want, got) => panic!("{}: want {want}, got an answer: {}", name(&c), got.is_ok()),
        }
    }
}
