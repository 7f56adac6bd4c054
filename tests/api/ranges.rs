//! The range routes (`/api/v1/segment/{tag}/ranges`, `/api/v1/snowflake/ranges`): the ids of a
//! batch as runs of consecutive ids. What could go wrong, tried here: a run that overlaps
//! another answer's ids (the list route's, Leaf's, another range's) under concurrent callers of
//! all three routes; a count the route does not hold to; ends written inexactly; a run past
//! `i64::MAX`; a cacheable answer.

use std::collections::HashSet;

use crate::on_both_databases;
use crate::support::{Db, TestApp, assert_increasing, assert_unique_positive, spawn_app};

/// An end of a run, a number or (`stringify_ids=true`) a decimal string.
fn end(v: &serde_json::Value) -> i64 {
    match v {
        serde_json::Value::String(s) => s.parse().unwrap_or_else(|_| panic!("end {s:?}")),
        other => other.as_i64().unwrap_or_else(|| panic!("end {other}")),
    }
}

/// The runs of an answer as `(first, last)`, checked: each run non-empty, runs increasing,
/// disjoint and never adjacent, and their sizes adding up to the answer's `count`.
fn runs(body: &serde_json::Value) -> Vec<(i64, i64)> {
    let runs: Vec<(i64, i64)> = body["ranges"]
        .as_array()
        .unwrap_or_else(|| panic!("no ranges: {body}"))
        .iter()
        .map(|r| (end(&r["first"]), end(&r["last"])))
        .collect();
    let mut total = 0u64;
    for (i, &(first, last)) in runs.iter().enumerate() {
        assert!(
            0 < first && first <= last,
            "run {i} {first}..={last}: {body}"
        );
        if i > 0 {
            assert!(first > runs[i - 1].1 + 1, "runs {i} not apart: {body}");
        }
        total += (last - first) as u64 + 1;
    }
    assert_eq!(Some(total), body["count"].as_u64(), "{body}");
    runs
}

/// `count` ids of `tag` from the segment range route, as runs (asserting 200).
async fn segment_runs(app: &TestApp, tag: &str, count: u64) -> Vec<(i64, i64)> {
    let r = app
        .get(&format!(
            "/api/v1/segment/{tag}/ranges?count={count}&stringify_ids=true"
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert_eq!(body["biz_tag"], tag, "{body}");
    assert_eq!(body["count"].as_u64(), Some(count), "{body}");
    runs(&body)
}

fn expand(runs: &[(i64, i64)]) -> Vec<i64> {
    runs.iter().flat_map(|&(a, b)| a..=b).collect()
}

async fn ranges_lists_and_leaf_ids_never_overlap_under_concurrent_callers(db: Db) {
    let app = std::sync::Arc::new(spawn_app(db).await);
    // A small step: every range crosses several segments and reloads race the callers.
    app.create_tag("ranges", 50, 1).await;
    let mut tasks = Vec::new();
    for caller in 0..6u64 {
        let app = app.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for round in 0..25u64 {
                let ids = match (caller + round) % 3 {
                    0 => expand(&segment_runs(&app, "ranges", 1 + (round * 97) % 700).await),
                    1 => app.batch("ranges", 1 + (round * 13) as usize).await,
                    _ => vec![app.leaf_id("ranges").await],
                };
                // Each caller's answers come one after the other: its ids increase.
                mine.extend(ids);
            }
            assert_increasing(&mine);
            mine
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_unique_positive(&all);
    // A million ids in one answer of a few runs, above everything before.
    let big = segment_runs(&app, "ranges", 1_000_000).await;
    assert!(big.len() <= 3, "a million ids in {} runs", big.len());
    assert!(big[0].0 > *all.iter().max().unwrap());
}
on_both_databases!(ranges_lists_and_leaf_ids_never_overlap_under_concurrent_callers);

async fn a_range_ends_at_the_last_id_then_the_tag_is_exhausted(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("near-max", 10, i64::MAX - 25).await;
    let r = app
        .get("/api/v1/segment/near-max/ranges?count=1000&stringify_ids=true")
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let got = runs(&r.json());
    // `max_id` is one past the last id leased, so the last id of a tag is `i64::MAX - 1`.
    assert_eq!(got.last().unwrap().1, i64::MAX - 1, "{got:?}");
    assert_eq!(
        expand(&got),
        ((i64::MAX - 25)..i64::MAX).collect::<Vec<_>>()
    );
    let r = app.get("/api/v1/segment/near-max/ranges?count=5").await;
    assert_eq!(r.status, 409, "{}", r.text);
    assert_eq!(r.code(), "biz_tag_exhausted");
}
on_both_databases!(a_range_ends_at_the_last_id_then_the_tag_is_exhausted);

#[tokio::test]
async fn bad_range_requests_get_the_batch_routes_errors() {
    let app = spawn_app(Db::Sqlite).await;
    for (path, status, code) in [
        (
            "/api/v1/segment/leaf-segment-test/ranges?count=0",
            400,
            "invalid_count",
        ),
        (
            "/api/v1/segment/leaf-segment-test/ranges?count=1000001",
            400,
            "invalid_count",
        ),
        (
            "/api/v1/segment/leaf-segment-test/ranges?count=x",
            400,
            "invalid_count",
        ),
        (
            "/api/v1/segment/leaf-segment-test/ranges?stringify_ids=yes",
            400,
            "invalid_request",
        ),
        (
            "/api/v1/segment/no-such-tag/ranges?count=3",
            404,
            "unknown_biz_tag",
        ),
        ("/api/v1/segment/bad%20tag/ranges", 400, "invalid_biz_tag"),
        ("/api/v1/segment//ranges", 400, "invalid_biz_tag"),
        (
            "/api/v1/snowflake/ranges?count=100001",
            400,
            "invalid_count",
        ),
        ("/api/v1/snowflake/ranges?count=-1", 400, "invalid_count"),
    ] {
        let r = app.get(path).await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (status, code),
            "{path}: {}",
            r.text
        );
    }
    // Absent count: one id, as on the list route.
    let r = app.get("/api/v1/segment/leaf-segment-test/ranges").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(expand(&runs(&r.json())).len(), 1);
}

#[tokio::test]
async fn range_answers_are_never_cacheable() {
    let app = spawn_app(Db::Sqlite).await;
    for path in [
        "/api/v1/segment/leaf-segment-test/ranges?count=10",
        "/api/v1/snowflake/ranges?count=10",
    ] {
        let r = app
            .client
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let cc = r
            .headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(cc.as_deref(), Some("no-store"), "{path}");
    }
}

#[tokio::test]
async fn snowflake_runs_hold_the_batch_ids_and_decode() {
    let app = spawn_app(Db::Sqlite).await;
    let mut seen = HashSet::new();
    let mut last = 0i64;
    for round in 0..20u64 {
        let count = 1 + round * 4999;
        let r = app
            .get(&format!(
                "/api/v1/snowflake/ranges?count={count}&stringify_ids=true"
            ))
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        let body = r.json();
        assert_eq!(body["count"].as_u64(), Some(count), "{body}");
        let got = runs(&body);
        // Within one tick a worker's sequence numbers are consecutive: at most one run per tick.
        for &(first, last_id) in &got {
            for id in [first, last_id] {
                let d = app.get(&format!("/api/v1/snowflake/decode/{id}")).await;
                assert_eq!(d.status, 200, "{}", d.text);
            }
            let (a, b) = (
                app.get(&format!("/api/v1/snowflake/decode/{first}"))
                    .await
                    .json(),
                app.get(&format!("/api/v1/snowflake/decode/{last_id}"))
                    .await
                    .json(),
            );
            assert_eq!(
                a["timestamp"], b["timestamp"],
                "a run within one tick: {a} {b}"
            );
            assert_eq!(a["worker_id"], b["worker_id"]);
        }
        let ids = expand(&got);
        assert!(ids[0] > last, "answers increase");
        last = *ids.last().unwrap();
        // Interleaved with the list route: no id of one is in the other.
        let list = app
            .get("/api/v1/snowflake/ids?count=100&stringify_ids=true")
            .await;
        let list: Vec<i64> = list.json()["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(end)
            .collect();
        assert!(list[0] > last);
        last = *list.last().unwrap();
        for id in ids.into_iter().chain(list) {
            assert!(seen.insert(id), "id {id} twice");
        }
    }
}

/// The range route's fill (the same `IdSink` path as the lists) while every answer of the
/// database is held (`stall`: the lease statements run, their answers never come), then after
/// it heals: a range may come short or be refused, never held past the wait, and no id of any
/// range is in another.
async fn ranges_through_a_stalled_database_never_overlap(db: Db) {
    let (app, proxy) = crate::support::proxy::spawn_behind_proxy_on(db, |_| {}).await;
    app.create_tag("stalled", 50, 1).await;
    let mut all: Vec<i64> = Vec::new();
    for round in 0..3 {
        for i in 0..10u64 {
            all.extend(expand(&segment_runs(&app, "stalled", 1 + i * 37).await));
        }
        if round < 2 {
            proxy.stall();
            for _ in 0..3 {
                // Taken before the request is sent: the bound covers the whole wait.
                let sent = std::time::Instant::now();
                let r = app.get("/api/v1/segment/stalled/ranges?count=500").await;
                assert!(sent.elapsed() < std::time::Duration::from_secs(20), "held");
                match r.status {
                    200 => all.extend(expand(&runs(&r.json()))),
                    503 => {}
                    other => panic!("{other} {}", r.text),
                }
            }
            proxy.heal();
        }
    }
    assert_increasing(&all);
    assert_unique_positive(&all);
}
crate::on_proxied_databases!(ranges_through_a_stalled_database_never_overlap);
