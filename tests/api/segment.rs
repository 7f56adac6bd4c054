//! The segment routes as a client uses them.

use crate::on_both_databases;
use crate::support::{Db, assert_increasing, assert_unique_positive, spawn_app, spawn_app_with};

async fn leaf_route_serves_the_seeded_tag_as_plain_text(db: Db) {
    let app = spawn_app(db).await;
    if db != Db::Sqlite {
        // The seed row is part of the embedded default only; MySQL and PostgreSQL users create
        // their tags.
        app.create_tag("leaf-segment-test", 2000, 1).await;
    }
    let r = app.get("/api/segment/get/leaf-segment-test").await;
    assert_eq!(r.status, 200);
    assert!(
        r.content_type.starts_with("text/plain"),
        "{}",
        r.content_type
    );
    assert_eq!(r.text, "1");
    assert_eq!(app.leaf_id("leaf-segment-test").await, 2);
}
on_both_databases!(leaf_route_serves_the_seeded_tag_as_plain_text);

async fn batches_and_single_ids_interleave_unique_and_increasing(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("orders", 100, 1).await;
    let mut ids = Vec::new();
    for round in 0..20 {
        ids.extend(app.batch("orders", 1 + round * 37).await);
        ids.push(app.leaf_id("orders").await);
    }
    assert_increasing(&ids);
    assert_unique_positive(&ids);
    let big = app.batch("orders", 100_000).await;
    assert_eq!(big.len(), 100_000);
    assert!(big[0] > *ids.last().unwrap());
    assert_increasing(&big);
}
on_both_databases!(batches_and_single_ids_interleave_unique_and_increasing);

async fn ids_end_at_i64_max_with_biz_tag_exhausted(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("edge", 4, i64::MAX - 10).await;
    let mut ids = Vec::new();
    let last = loop {
        let r = app.get("/api/segment/get/edge").await;
        if r.status != 200 {
            break r;
        }
        ids.push(r.text.parse::<i64>().unwrap());
        assert!(ids.len() <= 10, "more ids than the range holds: {ids:?}");
    };
    assert_eq!(ids, (i64::MAX - 10..i64::MAX).collect::<Vec<_>>());
    assert_eq!(last.status, 409, "{}", last.text);
    assert_eq!(last.code(), "biz_tag_exhausted");
    // It stays exhausted and the row never wrapped.
    assert_eq!(
        app.get("/api/segment/get/edge").await.code(),
        "biz_tag_exhausted"
    );
    let row = app.get("/api/v1/tags/edge").await.json();
    assert_eq!(row["max_id"].as_i64(), Some(i64::MAX));
}
on_both_databases!(ids_end_at_i64_max_with_biz_tag_exhausted);

async fn a_batch_larger_than_what_is_left_gets_the_rest_then_biz_tag_exhausted(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("tail", 4, i64::MAX - 10).await;
    let first = app.get("/api/v1/segment/tail/ids?count=3").await.json();
    let rest = app.get("/api/v1/segment/tail/ids?count=100").await;
    assert_eq!(rest.status, 200, "{}", rest.text);
    let mut ids: Vec<i64> = serde_json::from_value(first["ids"].clone()).unwrap();
    ids.extend(serde_json::from_value::<Vec<i64>>(rest.json()["ids"].clone()).unwrap());
    assert_eq!(
        ids,
        (i64::MAX - 10..i64::MAX).collect::<Vec<_>>(),
        "no id of the tail is lost"
    );
    let after = app.get("/api/v1/segment/tail/ids?count=1").await;
    assert_eq!(
        (after.status, after.code().as_str()),
        (409, "biz_tag_exhausted")
    );
}
on_both_databases!(a_batch_larger_than_what_is_left_gets_the_rest_then_biz_tag_exhausted);

async fn concurrent_clients_get_unique_ids_each_increasing(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("hot", 10, 1).await;
    let app = std::sync::Arc::new(app);
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for i in 0..150 {
                    if i % 10 == 0 {
                        mine.extend(app.batch("hot", 25).await);
                    } else {
                        mine.push(app.leaf_id("hot").await);
                    }
                }
                assert_increasing(&mine);
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for c in clients {
        all.extend(c.await.unwrap());
    }
    assert_unique_positive(&all);
}
on_both_databases!(concurrent_clients_get_unique_ids_each_increasing);

#[tokio::test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn a_tag_inserted_by_sql_serves_at_once_not_after_the_refresh() {
    let app = spawn_app(Db::MySql).await;
    crate::support::mysql::exec_in(
        &app.db_url,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('by-sql', 500, 50)",
    )
    .await;
    assert_eq!(app.leaf_id("by-sql").await, 500);
}

#[tokio::test]
async fn the_step_doubles_for_a_busy_tag_and_the_db_step_stays_the_floor() {
    let app = spawn_app_with(Db::Sqlite, |s| s.segment.max_step = 400).await;
    app.create_tag("busy", 100, 1).await;
    for _ in 0..10 {
        app.batch("busy", 500).await;
    }
    let cache = app.get("/api/v1/cache").await.json();
    let tag = cache["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["biz_tag"] == "busy")
        .unwrap()
        .clone();
    assert_eq!(tag["step"], 400, "{tag}");
    assert_eq!(tag["db_step"], 100, "{tag}");
}

/// A DBA raises the step of a busy tag: the next loads honour it as the floor (on MySQL the
/// single-statement lease refuses a step below the row's and falls back to the transaction).
async fn a_raised_db_step_is_the_floor_from_the_next_load(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("tuned", 10, 1).await;
    let mut ids = app.batch("tuned", 200).await; // several loads: the adapted step grows
    let r = app.patch("/api/v1/tags/tuned", r#"{"step":5000}"#).await;
    assert_eq!(r.status, 200, "{}", r.text);
    for _ in 0..4 {
        ids.extend(app.batch("tuned", 3000).await);
    }
    assert_increasing(&ids);
    let cache = app.get("/api/v1/tags/tuned").await.json();
    let buffer = &cache["buffer"];
    assert_eq!(buffer["db_step"], 5000, "{buffer}");
    assert!(buffer["step"].as_i64().unwrap() >= 5000, "{buffer}");
    let sizes: Vec<u64> = buffer["segments"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["size"].as_u64().unwrap())
        .collect();
    assert!(sizes.iter().any(|&s| s >= 5000), "{sizes:?}");
}
on_both_databases!(a_raised_db_step_is_the_floor_from_the_next_load);
