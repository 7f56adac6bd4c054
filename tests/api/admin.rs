//! Tag administration, the monitor pages and health.

use reqwest::Method;

use crate::on_both_databases;
use crate::support::{Db, spawn_app, spawn_app_with};

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
