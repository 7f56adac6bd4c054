//! Tag administration, the monitor pages and health.

use reqwest::Method;

use crate::on_both_databases;
use crate::support::{Db, assert_unique_positive, spawn_app, spawn_app_with};

async fn a_dba_creates_inspects_changes_and_deletes_a_tag(db: Db) {
    let app = spawn_app(db).await;
    let r = app
        .post(
            "/api/v1/tags",
            r#"{"biz_tag":"pay","step":500,"max_id":1000,"description":"payments"}"#,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["max_id"], 1000);

    let dup = app
        .post("/api/v1/tags", r#"{"biz_tag":"pay","step":5}"#)
        .await;
    assert_eq!((dup.status, dup.code().as_str()), (409, "biz_tag_exists"));

    assert_eq!(app.leaf_id("pay").await, 1000);
    let shown = app.get("/api/v1/tags/pay").await.json();
    assert_eq!(shown["step"], 500);
    assert_eq!(shown["description"], "payments");
    assert_eq!(shown["buffer"]["segments"].as_array().unwrap().len(), 2);
    assert!(shown["max_id"].as_i64().unwrap() >= 1500, "{shown}");

    let changed = app.patch("/api/v1/tags/pay", r#"{"step":2000}"#).await;
    assert_eq!(changed.status, 200, "{}", changed.text);
    assert_eq!(changed.json()["step"], 2000);
    assert_eq!(changed.json()["description"], "payments");

    let list = app.get("/api/v1/tags").await.json();
    assert!(
        list["tags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["biz_tag"] == "pay" && t["step"] == 2000)
    );

    let del = app
        .send(Method::DELETE, "/api/v1/tags/pay", None, None)
        .await;
    assert_eq!(del.status, 204);
    let gone = app.get("/api/segment/get/pay").await;
    assert_eq!(
        (gone.status, gone.code().as_str()),
        (404, "unknown_biz_tag")
    );
    assert_eq!(app.get("/api/v1/tags/pay").await.status, 404);
    assert_eq!(
        app.patch("/api/v1/tags/pay", r#"{"step":3}"#).await.code(),
        "unknown_biz_tag"
    );
}
on_both_databases!(a_dba_creates_inspects_changes_and_deletes_a_tag);

#[tokio::test]
async fn with_an_admin_token_writes_need_it_and_nothing_is_written_without() {
    let app = spawn_app_with(Db::Sqlite, |s| s.admin.token = Some("s3cret".into())).await;
    let body = r#"{"biz_tag":"guarded","step":10}"#;
    for token in [None, Some("wrong")] {
        let r = app
            .send(Method::POST, "/api/v1/tags", Some(body), token)
            .await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "unauthorized"),
            "{token:?}"
        );
    }
    assert_eq!(
        app.get("/api/v1/tags/guarded").await.status,
        404,
        "nothing written"
    );
    let r = app
        .send(
            Method::PATCH,
            "/api/v1/tags/leaf-segment-test",
            Some(r#"{"step":1}"#),
            None,
        )
        .await;
    assert_eq!(r.status, 401);
    let r = app
        .send(
            Method::DELETE,
            "/api/v1/tags/leaf-segment-test",
            None,
            Some("nope"),
        )
        .await;
    assert_eq!(r.status, 401);
    let r = app
        .send(Method::POST, "/api/v1/tags", Some(body), Some("s3cret"))
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    // Reads stay open.
    assert_eq!(
        app.get("/api/v1/tags/leaf-segment-test").await.json()["step"],
        2000
    );
}

#[tokio::test]
async fn by_default_no_admin_write_is_accepted_not_even_from_loopback() {
    // The shipped configuration: no token, loopback not trusted.
    let app = spawn_app_with(Db::Sqlite, |s| {
        s.admin = leafid::config::Settings::load(None).unwrap().admin;
    })
    .await;
    let r = app
        .post("/api/v1/tags", r#"{"biz_tag":"open-door","step":10}"#)
        .await;
    assert_eq!((r.status, r.code().as_str()), (401, "unauthorized"));
    assert!(r.text.contains("admin.token"), "{}", r.text);
    let r = app
        .patch("/api/v1/tags/leaf-segment-test", r#"{"step":1}"#)
        .await;
    assert_eq!(r.status, 401);
    let r = app
        .send(Method::DELETE, "/api/v1/tags/leaf-segment-test", None, None)
        .await;
    assert_eq!(r.status, 401);
    assert_eq!(app.get("/api/v1/tags/open-door").await.status, 404);
    // Monitor pages stay open unless admin.protect_reads.
    assert_eq!(
        app.get("/api/v1/tags/leaf-segment-test").await.json()["step"],
        2000
    );
    assert_eq!(app.get("/db").await.status, 200);
}

#[tokio::test]
async fn protect_reads_puts_the_monitor_pages_behind_the_token() {
    let app = spawn_app_with(Db::Sqlite, |s| {
        s.admin.token = Some("s3cret".into());
        s.admin.protect_reads = true;
    })
    .await;
    for page in [
        "/db",
        "/cache",
        "/api/v1/cache",
        "/api/v1/tags",
        "/api/v1/tags/leaf-segment-test",
        "/metrics",
    ] {
        let r = app.send(Method::GET, page, None, None).await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (401, "unauthorized"),
            "{page}"
        );
        let r = app.send(Method::GET, page, None, Some("s3cret")).await;
        assert_eq!(r.status, 200, "{page}: {}", r.text);
    }
    for open in [
        "/api/segment/get/leaf-segment-test",
        "/api/snowflake/get/x",
        "/health/live",
        "/health/ready",
        "/openapi.json",
    ] {
        assert_eq!(app.get(open).await.status, 200, "{open}");
    }
}

#[tokio::test]
async fn monitor_pages_show_buffers_and_rows() {
    let app = spawn_app(Db::Sqlite).await;
    app.leaf_id("leaf-segment-test").await;
    let cache = app.get("/cache").await;
    assert!(cache.content_type.starts_with("text/html"));
    assert!(
        cache.text.contains("leaf-segment-test") && cache.text.contains("Current"),
        "{}",
        cache.text
    );
    let db = app.get("/db").await;
    assert!(db.text.contains("leaf-segment-test") && db.text.contains("2000"));
    let json = app.get("/api/v1/cache").await.json();
    let tag = &json["tags"][0];
    assert_eq!(tag["biz_tag"], "leaf-segment-test");
    assert_eq!(tag["segments"][1]["min_id"], 1);
    assert_eq!(tag["segments"][1]["state"], "current");
    assert!(tag["last_load_unix_ms"].as_i64().is_some());
}

#[tokio::test]
async fn health_routes_answer() {
    let app = spawn_app(Db::Sqlite).await;
    assert_eq!(app.get("/health/live").await.status, 200);
    // Every response carries its request id, distinct per request.
    let ids: Vec<String> = {
        let mut v = Vec::new();
        for path in [
            "/health/live",
            "/api/segment/get/leaf-segment-test",
            "/no/such/route",
        ] {
            let r = app
                .client
                .get(format!("{}{path}", app.address))
                .send()
                .await
                .unwrap();
            v.push(r.headers()["x-request-id"].to_str().unwrap().to_owned());
        }
        v
    };
    assert!(ids[0] != ids[1] && ids[1] != ids[2], "{ids:?}");
    let ready = app.get("/health/ready").await;
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json()["database"], "up");
}

/// Deleting a tag and creating it again without `max_id` would re-issue every id it handed
/// out: refused with 409 naming the high-water mark; with `max_id` at the mark it resumes.
async fn a_deleted_tag_is_not_restarted_below_the_ids_it_issued(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("reborn", 10, 1).await;
    let mut ids = app.batch("reborn", 25).await;
    ids.push(app.leaf_id("reborn").await);
    let del = app
        .send(Method::DELETE, "/api/v1/tags/reborn", None, None)
        .await;
    assert_eq!(del.status, 204, "{}", del.text);
    let high_water = ids.iter().max().unwrap() + 1;

    let again = app
        .post("/api/v1/tags", r#"{"biz_tag":"reborn","step":10}"#)
        .await;
    assert_eq!(
        (again.status, again.code().as_str()),
        (409, "max_id_below_deleted"),
        "{}",
        again.text
    );
    let message = again.json()["message"].as_str().unwrap().to_owned();
    // The mark is the row's max_id at deletion: at or above every id issued.
    let mark: i64 = message
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .max()
        .unwrap_or_else(|| panic!("no number in {message}"));
    assert!(mark >= high_water, "{message}");
    assert!(
        message.contains("reborn") && message.contains(&format!("\"max_id\": {mark}")),
        "{message}"
    );
    assert_eq!(app.get("/api/v1/tags/reborn").await.status, 404);
    let below = app
        .post(
            "/api/v1/tags",
            &format!(r#"{{"biz_tag":"reborn","step":10,"max_id":{}}}"#, mark - 1),
        )
        .await;
    assert_eq!(below.status, 409, "{}", below.text);

    app.create_tag("reborn", 10, mark).await;
    let first = app.leaf_id("reborn").await;
    assert!(first >= mark, "first id {first} below the mark {mark}");
    ids.push(first);
    ids.extend(app.batch("reborn", 25).await);
    assert_unique_positive(&ids);
}
on_both_databases!(a_deleted_tag_is_not_restarted_below_the_ids_it_issued);

/// Every HTTP worker thread keeps the buffer of a tag it serves again and again (the by-name
/// fast path, `segment::allocator::thread_tags`): a delete must reach those copies before the
/// next request, or the deleted tag would go on handing out ids from memory.
async fn a_deleted_tag_serves_no_id_from_any_threads_copy(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("hot", 1000, 1).await;
    let mut ids = Vec::new();
    // Many keep-alive requests in a row: every worker thread sees the tag repeatedly.
    for _ in 0..200 {
        ids.push(app.leaf_id("hot").await);
    }
    let del = app
        .send(Method::DELETE, "/api/v1/tags/hot", None, None)
        .await;
    assert_eq!(del.status, 204, "{}", del.text);

    for _ in 0..200 {
        let r = app.get("/api/segment/get/hot").await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (404, "unknown_biz_tag"),
            "an id after the delete: {}",
            r.text
        );
    }
    assert_unique_positive(&ids);
}
on_both_databases!(a_deleted_tag_serves_no_id_from_any_threads_copy);

/// MySQL compares `biz_tag` case-insensitively: `Orders` finds the row `orders`. Only the
/// stored spelling serves, so one row never gets two buffers.
#[tokio::test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn on_mysql_a_tag_serves_only_under_its_stored_spelling() {
    let app = spawn_app(Db::MySql).await;
    app.create_tag("orders", 10, 1).await;
    for path in [
        "/api/segment/get/Orders",
        "/api/v1/segment/ORDERS/ids?count=3",
    ] {
        let r = app.get(path).await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (404, "unknown_biz_tag"),
            "{path}: {}",
            r.text
        );
    }
    let mut ids = vec![app.leaf_id("orders").await];
    ids.extend(app.batch("orders", 30).await);
    assert_eq!(app.get("/api/segment/get/Orders").await.status, 404);
    assert_unique_positive(&ids);
    let cache = app.get("/api/v1/cache").await.json();
    let cached: Vec<&str> = cache["tags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["biz_tag"].as_str())
        .filter(|t| t.eq_ignore_ascii_case("orders"))
        .collect();
    assert_eq!(cached, ["orders"]);

    // Deleting under another spelling deletes the row (MySQL finds it) and drops its buffer.
    let del = app
        .send(Method::DELETE, "/api/v1/tags/ORDERS", None, None)
        .await;
    assert_eq!(del.status, 204, "{}", del.text);
    let gone = app.get("/api/segment/get/orders").await;
    assert_eq!(
        (gone.status, gone.code().as_str()),
        (404, "unknown_biz_tag"),
        "{}",
        gone.text
    );
}

#[tokio::test]
async fn the_api_document_lists_the_refusal_of_a_deleted_tags_restart() {
    let app = spawn_app(Db::Sqlite).await;
    let doc = app.get("/openapi.json").await.json();
    let conflict = &doc["paths"]["/api/v1/tags"]["post"]["responses"]["409"]["description"];
    let conflict = conflict.as_str().unwrap_or_default();
    assert!(
        conflict.contains("biz_tag_exists") && conflict.contains("max_id_below_deleted"),
        "{conflict}"
    );
}
