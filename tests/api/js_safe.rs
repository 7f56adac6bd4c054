//! JavaScript clients: `stringify_ids=true` answers ids as decimal strings that Node's
//! `JSON.parse` reads exactly (it rounds the JSON numbers of snowflake ids and of segment ids
//! above 2^53), and the `js-safe` preset issues ids that are exact even as numbers.

use crate::on_both_databases;
use crate::support::{Db, Reply, TestApp, fresh_db, spawn_app, spawn_app_with};

/// `Number.MAX_SAFE_INTEGER`.
const JS_MAX_SAFE: u64 = (1 << 53) - 1;

/// A segment tag's first id: just above 2^62, not a multiple of the doubles' spacing there
/// (1024), so JSON numbers round it.
const NEAR_2_62: i64 = (1 << 62) + 1001;

/// Runs Node's `JSON.parse` on `body` and returns `String(x)` of every id it read: the elements
/// of `ids`, or `id` of a decode body.
fn node_parse_ids(body: &str) -> Vec<String> {
    node_parse(body, &[])
}

/// Runs Node's `JSON.parse` on `body` and returns `String(x)` of each field named in `fields`
/// (a dotted path: `max_id`, `tags.0.segments.0.min_id`), or (none named) of every id as
/// [`node_parse_ids`] reads them.
fn node_parse(body: &str, fields: &[&str]) -> Vec<String> {
    use std::io::Write;
    let script = "let s = ''; process.stdin.on('data', d => s += d).on('end', () => { \
                  const v = JSON.parse(s); const f = process.argv.slice(1); \
                  const at = k => k.split('.').reduce((o, p) => o[p], v); \
                  const xs = f.length ? f.map(at) : (Array.isArray(v.ids) ? v.ids : [v.id]); \
                  for (const x of xs) console.log(String(x)); })";
    let mut child = std::process::Command::new("node")
        .args(["-e", script])
        .args(fields)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("node (Node.js) is on PATH");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(body.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "node failed on {body}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The ids of a batch body as Rust reads them, exactly: numbers or decimal strings.
fn exact_ids(r: &Reply) -> Vec<String> {
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => {
                assert!(n.is_u64(), "{n} is not an integer");
                n.to_string()
            }
            other => panic!("id {other} is neither a number nor a string"),
        })
        .collect()
}

fn as_u64(ids: &[String]) -> Vec<u64> {
    ids.iter().map(|s| s.parse().unwrap()).collect()
}

#[tokio::test]
#[ignore = "needs Node.js: scripts/test.sh runs it"]
async fn stringified_snowflake_ids_survive_node_json_parse_and_numbers_do_not() {
    let app = spawn_app(Db::Sqlite).await;
    let before: u64 = app.get("/api/snowflake/get/js").await.text.parse().unwrap();

    let r = app
        .get("/api/v1/snowflake/ids?count=3&stringify_ids=true")
        .await;
    assert!(
        r.text.contains(r#""ids":[""#),
        "ids are not strings: {}",
        r.text
    );
    let exact = exact_ids(&r);
    assert_eq!(node_parse_ids(&r.text), exact, "node read other ids");
    let ids = as_u64(&exact);
    let after: u64 = app.get("/api/snowflake/get/js").await.text.parse().unwrap();
    assert!(before < ids[0] && ids[0] < ids[1] && ids[1] < ids[2] && ids[2] < after);
    assert!(before > JS_MAX_SAFE, "a Twitter-layout id is above 2^53");

    // The same route without the parameter (and with `false`) answers numbers, which Node rounds.
    for query in ["count=3", "count=3&stringify_ids=false"] {
        let r = app.get(&format!("/api/v1/snowflake/ids?{query}")).await;
        assert!(!r.text.contains(r#""ids":[""#), "{query}: {}", r.text);
        let exact = exact_ids(&r);
        let node = node_parse_ids(&r.text);
        assert_ne!(node, exact, "{query}: Node read the numbers exactly");
    }

    // Decode: `id` a string that Node reads exactly; `id_str` as before.
    let id = ids[1];
    let r = app
        .get(&format!("/api/v1/snowflake/decode/{id}?stringify_ids=true"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["id"], id.to_string());
    assert_eq!(r.json()["id_str"], id.to_string());
    assert_eq!(node_parse_ids(&r.text), [id.to_string()]);
    let plain = app.get(&format!("/api/v1/snowflake/decode/{id}")).await;
    assert_eq!(plain.json()["id"].as_u64(), Some(id));
    assert_ne!(node_parse_ids(&plain.text), [id.to_string()]);

    // The planner's decoder under an explicit layout.
    let path = format!(
        "/api/v1/layouts/decode/{id}?layout=41/10/12&epoch=1288834974657&unit=millis&stringify_ids=true"
    );
    let r = app.get(&path).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(node_parse_ids(&r.text), [id.to_string()]);
    assert_eq!(
        r.json()["time_delta"],
        app.get(&format!("/api/v1/snowflake/decode/{id}"))
            .await
            .json()["time_delta"]
    );
}

async fn stringified_segment_ids_near_2_62_survive_node_json_parse(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("big", 1000, NEAR_2_62).await;
    let first = app.leaf_id("big").await;
    assert_eq!(first, NEAR_2_62);

    let r = app
        .get("/api/v1/segment/big/ids?count=3&stringify_ids=true")
        .await;
    assert_eq!(r.json()["biz_tag"], "big");
    let exact = exact_ids(&r);
    assert_eq!(node_parse_ids(&r.text), exact, "node read other ids");
    let expected: Vec<String> = (first + 1..first + 4).map(|i| i.to_string()).collect();
    assert_eq!(exact, expected);

    let r = app.get("/api/v1/segment/big/ids?count=3").await;
    let exact = exact_ids(&r);
    assert_eq!(
        exact,
        (first + 4..first + 7)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
    );
    assert_ne!(
        node_parse_ids(&r.text),
        exact,
        "Node read the numbers exactly"
    );
}
on_both_databases!(
    stringified_segment_ids_near_2_62_survive_node_json_parse,
    sqlite_ignored = "needs Node.js: scripts/test.sh runs it"
);

/// The admin and monitor bodies carry ids too: a row's `max_id` and a buffer's `min_id`,
/// `max_id` and `next_id`. With `stringify_ids=true` Node reads every one exactly (on the list,
/// the single row, a create and an update); as numbers near 2^62 it rounds them.
async fn stringified_tag_and_cache_ids_survive_node_json_parse(db: Db) {
    let app = spawn_app(db).await;
    let r = app
        .post(
            "/api/v1/tags?stringify_ids=true",
            &format!(r#"{{"biz_tag":"big","step":1000,"max_id":{NEAR_2_62}}}"#),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(node_parse(&r.text, &["max_id"]), [NEAR_2_62.to_string()]);
    assert_eq!(app.leaf_id("big").await, NEAR_2_62);

    // Exact values as Rust reads them (numbers or strings), then Node against them.
    let exact = |r: &Reply, fields: &[&str]| -> Vec<String> {
        assert_eq!(r.status, 200, "{}", r.text);
        let json = r.json();
        fields
            .iter()
            .map(|f| {
                let v = f
                    .split('.')
                    .fold(&json, |v, k| k.parse::<usize>().map_or(&v[k], |i| &v[i]));
                match v {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(n) => n.as_i64().expect("an integer").to_string(),
                    other => panic!("{f} is {other} in {}", r.text),
                }
            })
            .collect()
    };
    // The loaded slot (the other one is empty: its ids are null).
    let cache = app.get("/api/v1/cache").await.json();
    let slot = cache["tags"][0]["segments"]
        .as_array()
        .unwrap()
        .iter()
        .position(|s| !s["min_id"].is_null())
        .expect("a loaded segment");
    let cached = [
        format!("tags.0.segments.{slot}.min_id"),
        format!("tags.0.segments.{slot}.max_id"),
        format!("tags.0.segments.{slot}.next_id"),
    ];
    let row = [
        "max_id".to_owned(),
        format!("buffer.segments.{slot}.min_id"),
        format!("buffer.segments.{slot}.next_id"),
    ];
    let listed = [
        "tags.0.max_id".to_owned(),
        format!("tags.0.buffer.segments.{slot}.max_id"),
    ];
    for (path, fields) in [
        ("/api/v1/cache", &cached[..]),
        ("/api/v1/tags/big", &row[..]),
        ("/api/v1/tags", &listed[..]),
    ] {
        let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
        let fields = &fields[..];
        let strings = app.get(&format!("{path}?stringify_ids=true")).await;
        let want = exact(&strings, fields);
        assert!(
            want.iter().all(|id| id.parse::<i64>().unwrap() > 1 << 53),
            "{path}: {want:?}"
        );
        assert!(
            strings.text.contains(&format!("\"{}\"", want[0])),
            "{path}: not a string: {}",
            strings.text
        );
        assert_eq!(
            node_parse(&strings.text, fields),
            want,
            "{path}: node read other ids"
        );

        let numbers = app.get(path).await;
        let want = exact(&numbers, fields);
        assert_ne!(
            node_parse(&numbers.text, fields),
            want,
            "{path}: Node read the numbers exactly: nothing to protect"
        );
    }

    let r = app
        .patch(
            "/api/v1/tags/big?stringify_ids=true",
            r#"{"description":"near 2^62"}"#,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.json()["max_id"].is_string(), "{}", r.text);
    assert_eq!(node_parse(&r.text, &["max_id"]), exact(&r, &["max_id"]));
}
on_both_databases!(
    stringified_tag_and_cache_ids_survive_node_json_parse,
    sqlite_ignored = "needs Node.js: scripts/test.sh runs it"
);

#[tokio::test]
async fn stringify_ids_other_than_true_or_false_is_invalid_request() {
    let app = spawn_app(Db::Sqlite).await;
    app.create_tag("t", 10, 1).await;
    for value in ["yes", "1", "", "TRUE"] {
        for path in [
            "/api/v1/snowflake/ids?count=2&".to_owned(),
            "/api/v1/segment/t/ids?count=2&".to_owned(),
            "/api/v1/snowflake/decode/12345?".to_owned(),
            "/api/v1/layouts/decode/12345?layout=41/10/12&epoch=1288834974657&".to_owned(),
            "/api/v1/tags?".to_owned(),
            "/api/v1/tags/t?".to_owned(),
            "/api/v1/cache?".to_owned(),
        ] {
            let r = app.get(&format!("{path}stringify_ids={value}")).await;
            assert_eq!(r.status, 400, "{path}{value}: {}", r.text);
            assert_eq!(r.code(), "invalid_request", "{path}{value}");
            assert!(
                r.json()["message"]
                    .as_str()
                    .unwrap()
                    .contains("stringify_ids"),
                "{}",
                r.text
            );
        }
    }
}

/// A server on the `js-safe` preset under `max_id_bits = 53`, which it passes.
async fn js_safe_app(db: Db) -> TestApp {
    spawn_app_with(db, |s| {
        s.snowflake.preset = leafid::config::Preset::JsSafe;
        s.snowflake.max_id_bits = 53;
    })
    .await
}

#[tokio::test]
#[ignore = "needs Node.js: scripts/test.sh runs it"]
async fn the_js_safe_preset_issues_ids_that_node_reads_exactly_as_numbers() {
    let app = js_safe_app(Db::Sqlite).await;
    let r = app.get("/api/v1/snowflake/ids?count=5000").await;
    let exact = exact_ids(&r);
    let ids = as_u64(&exact);
    assert_eq!(ids.len(), 5000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids do not increase");
    assert!(
        ids.iter().all(|&id| id > 0 && id <= JS_MAX_SAFE),
        "an id is above 2^53 - 1: {}",
        ids.last().unwrap()
    );
    assert_eq!(node_parse_ids(&r.text), exact, "node rounded a js-safe id");

    let decoded = app
        .get(&format!("/api/v1/snowflake/decode/{}", ids[0]))
        .await
        .json();
    assert_eq!(decoded["layout"], "10+31/8/14");
    assert_eq!(decoded["prefix"], 0);
    let ts = chrono::DateTime::parse_from_rfc3339(decoded["timestamp"].as_str().unwrap()).unwrap();
    let age = chrono::Utc::now().signed_duration_since(ts);
    assert!(age.num_seconds().abs() < 60, "decoded time {ts} is not now");
}

/// `snowflake.max_id_bits = 53` refuses the Twitter layout at start, in one line naming the key.
#[tokio::test]
async fn max_id_bits_53_refuses_the_twitter_preset_at_start() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_leafid"))
        .env("LEAFID__DATABASE__URL", &url)
        .env("LEAFID__SERVER__PORT", "0")
        .env("LEAFID__SNOWFLAKE__PRESET", "twitter")
        .env("LEAFID__SNOWFLAKE__MAX_ID_BITS", "53")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started: {stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("snowflake.max_id_bits") && errors[0].contains("41/10/12"),
        "{}",
        errors[0]
    );
}

/// The planner's `first_id` and `last_id` (9.09e18 and up) as strings: Node reads them exactly;
/// as numbers it rounds them.
#[tokio::test]
#[ignore = "needs Node.js: scripts/test.sh runs it"]
async fn stringified_plan_ids_survive_node_json_parse_and_numbers_do_not() {
    let app = spawn_app(Db::Sqlite).await;
    let body = serde_json::json!({
        "legacy": {"time_bits": 28, "worker_bits": 22, "seq_bits": 13, "unit": "seconds",
                   "epoch": "2016-05-20T00:00:00+08:00"},
        "max_legacy_id": 9_090_949_948_782_127_403_u64, "worker_bits": 13, "seq_bits": 13,
        "years": 10})
    .to_string();

    let strings = app
        .post("/api/v1/layouts/plan?stringify_ids=true", &body)
        .await;
    let numbers = app.post("/api/v1/layouts/plan", &body).await;

    assert_eq!(strings.status, 200, "{}", strings.text);
    assert_eq!(numbers.status, 200, "{}", numbers.text);
    // Each body against its own exact values (the clock may move the plan's epoch between the
    // two calls).
    let fields = ["first_id", "last_id"];
    let exact = |r: &Reply| -> Vec<String> {
        fields
            .iter()
            .map(|f| match &r.json()[f] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Number(n) => n.as_u64().expect("an integer").to_string(),
                other => panic!("{f} is {other}"),
            })
            .collect()
    };
    assert!(strings.json()["first_id"].is_string(), "{}", strings.text);
    assert_eq!(
        node_parse(&strings.text, &fields),
        exact(&strings),
        "node read other ids"
    );
    assert_ne!(
        node_parse(&numbers.text, &fields),
        exact(&numbers),
        "Node read the numbers exactly: nothing to protect"
    );
}
