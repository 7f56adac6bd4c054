//! Bad input: each gets its documented status and JSON error, nothing is written, and the
//! server keeps serving.

use reqwest::Method;

use crate::on_both_databases;
use crate::support::{Db, TestApp, spawn_app_with};

fn expect(r: &crate::support::Reply, status: u16, code: &str, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.text);
    assert!(
        r.content_type.starts_with("application/json"),
        "{what}: {}",
        r.content_type
    );
    assert_eq!(r.code(), code, "{what}");
    assert!(!r.json()["message"].as_str().unwrap().is_empty(), "{what}");
}

async fn tag_count(app: &TestApp) -> usize {
    app.get("/api/v1/tags").await.json()["tags"]
        .as_array()
        .unwrap()
        .len()
}

async fn bad_input_gets_clear_errors_and_writes_nothing(db: Db) {
    let app = spawn_app_with(db, |s| s.server.max_body_bytes = 1024).await;
    app.create_tag("good", 10, 1).await;
    let before = tag_count(&app).await;
    let long = "x".repeat(129);

    for (path, what) in [
        ("/api/segment/get/".to_owned(), "empty tag"),
        (format!("/api/segment/get/{long}"), "129-byte tag"),
        ("/api/segment/get/%C3%A9t%C3%A9".to_owned(), "non-ASCII tag"),
        ("/api/segment/get/a%2Fb".to_owned(), "encoded slash"),
        ("/api/segment/get/a/b".to_owned(), "slash"),
        ("/api/segment/get/a%20b".to_owned(), "encoded space"),
        (
            "/api/segment/get/x'%3B%20DROP%20TABLE%20leaf_alloc%3B--".to_owned(),
            "SQL metacharacters",
        ),
        (
            "/api/v1/segment/a%20b/ids?count=1".to_owned(),
            "bad tag on the batch route",
        ),
        (
            "/api/v1/tags/a%2Fb".to_owned(),
            "bad tag on the admin route",
        ),
    ] {
        expect(&app.get(&path).await, 400, "invalid_biz_tag", what);
    }
    expect(
        &app.get("/api/segment/get/no-such-tag").await,
        404,
        "unknown_biz_tag",
        "unknown tag",
    );
    expect(
        &app.get("/api/v1/segment/no-such-tag/ids?count=2").await,
        404,
        "unknown_biz_tag",
        "unknown tag batch",
    );

    for count in [
        "0",
        "-1",
        "100001",
        "18446744073709551616",
        "abc",
        "1.5",
        "",
        "1e3",
    ] {
        let r = app
            .get(&format!("/api/v1/segment/good/ids?count={count}"))
            .await;
        expect(&r, 400, "invalid_count", &format!("count={count}"));
    }

    for step in [
        "0",
        "-1",
        "1000000001",
        "\"abc\"",
        "1.5",
        "null",
        "9223372036854775808",
    ] {
        let body = format!(r#"{{"biz_tag":"new-tag","step":{step}}}"#);
        expect(
            &app.post("/api/v1/tags", &body).await,
            400,
            "invalid_step",
            &format!("create step={step}"),
        );
        let body = format!(r#"{{"step":{step}}}"#);
        expect(
            &app.patch("/api/v1/tags/good", &body).await,
            400,
            "invalid_step",
            &format!("patch step={step}"),
        );
    }
    for max_id in ["0", "-5", "\"1\"", "9223372036854775807"] {
        let body = format!(r#"{{"biz_tag":"new-tag","step":10,"max_id":{max_id}}}"#);
        expect(
            &app.post("/api/v1/tags", &body).await,
            400,
            "invalid_max_id",
            &format!("max_id={max_id}"),
        );
    }
    for (body, what) in [
        ("{not json", "malformed JSON"),
        ("[]", "wrong shape"),
        (r#"{"biz_tag":5,"step":10}"#, "tag of the wrong type"),
        (r#"{"step":10}"#, "missing tag"),
        (
            r#"{"biz_tag":"new-tag","step":10,"extra":true}"#,
            "unknown field",
        ),
        (
            r#"{"biz_tag":"new-tag","step":10,"description":7}"#,
            "description of the wrong type",
        ),
    ] {
        expect(
            &app.post("/api/v1/tags", body).await,
            400,
            "invalid_request",
            what,
        );
    }
    expect(
        &app.post("/api/v1/tags", r#"{"biz_tag":"a b","step":10}"#)
            .await,
        400,
        "invalid_biz_tag",
        "bad tag in body",
    );
    expect(
        &app.patch("/api/v1/tags/good", "{}").await,
        400,
        "invalid_request",
        "empty patch",
    );
    let huge = format!(
        r#"{{"biz_tag":"new-tag","step":10,"description":"{}"}}"#,
        "d".repeat(4096)
    );
    expect(
        &app.post("/api/v1/tags", &huge).await,
        413,
        "payload_too_large",
        "oversized body",
    );
    let plain = app.send(Method::POST, "/api/v1/tags", None, None).await;
    expect(&plain, 400, "invalid_request", "no body");
    expect(
        &app.get("/no/such/route").await,
        404,
        "not_found",
        "unknown route",
    );

    assert_eq!(tag_count(&app).await, before, "nothing was written");
    let row = app.get("/api/v1/tags/good").await.json();
    assert_eq!(row["step"], 10, "the patch attempts changed nothing");
    assert_eq!(app.leaf_id("good").await, 1, "the server keeps serving");
}
on_both_databases!(bad_input_gets_clear_errors_and_writes_nothing);

/// What the first test does not reach: the snowflake routes, non-ASCII and percent-encoded
/// junk in every position, and tags that only fail inside a JSON body.
async fn junk_on_the_snowflake_routes_and_in_bodies_gets_clear_errors(db: Db) {
    let app = spawn_app_with(db, |s| s.server.max_body_bytes = 1024).await;
    app.create_tag("good", 10, 1).await;
    let before = tag_count(&app).await;

    // Leaf's snowflake route only logs its key (as Leaf does): junk there still gets an id.
    for key in [
        "%C3%A9t%C3%A9",
        "a%2Fb",
        "a%20b",
        "x'%3B%20DROP%20TABLE%20WORKER_NODE%3B--",
        "",
    ] {
        let r = app.get(&format!("/api/snowflake/get/{key}")).await;
        assert_eq!(r.status, 200, "key {key:?}: {}", r.text);
        assert!(r.text.parse::<i64>().is_ok_and(|id| id > 0), "{}", r.text);
    }
    for id in [
        "%C3%A9",
        "1%2F2",
        "%20%20",
        "0x10",
        "1e3",
        "%EF%BC%91",
        "1%00",
        "99999999999999999999999",
        "1;DROP%20TABLE%20x",
    ] {
        expect(
            &app.get(&format!("/api/v1/snowflake/decode/{id}")).await,
            400,
            "invalid_id",
            &format!("decode {id}"),
        );
        expect(
            &app.get(&format!("/decodeSnowflakeId?snowflakeId={id}"))
                .await,
            400,
            "invalid_id",
            &format!("leaf decode {id}"),
        );
    }
    for count in ["-1", "1e3", "%EF%BC%95", "18446744073709551616", "", "1%00"] {
        expect(
            &app.get(&format!("/api/v1/snowflake/ids?count={count}"))
                .await,
            400,
            "invalid_count",
            &format!("snowflake count={count}"),
        );
        expect(
            &app.get(&format!("/api/v1/segment/good/ids?count={count}"))
                .await,
            400,
            "invalid_count",
            &format!("segment count={count}"),
        );
    }
    for (tag, what) in [
        ("%FF%FE", "invalid UTF-8"),
        ("a%00b", "NUL byte"),
        ("%E2%80%8Bgood", "zero-width space"),
        ("good%0A", "newline"),
        ("good%09", "tab"),
    ] {
        let r = app.get(&format!("/api/segment/get/{tag}")).await;
        expect(&r, 400, "invalid_biz_tag", what);
        let r = app.get(&format!("/api/v1/segment/{tag}/ids?count=2")).await;
        expect(&r, 400, "invalid_biz_tag", what);
    }
    let long = "y".repeat(129);
    for (tag, what) in [
        ("", "empty tag in body"),
        (long.as_str(), "129-byte tag in body"),
        ("\u{e9}t\u{e9}", "non-ASCII tag in body"),
        ("x';DROP TABLE leaf_alloc;--", "SQL in body"),
        ("a/b", "slash in body"),
    ] {
        let body = serde_json::json!({"biz_tag": tag, "step": 10}).to_string();
        expect(
            &app.post("/api/v1/tags", &body).await,
            400,
            "invalid_biz_tag",
            what,
        );
    }
    for (body, what) in [
        (r#"{"step":"10"}"#, "step as a string"),
        (r#"{"step":[10]}"#, "step as an array"),
        (r#"{"step":1e9}"#, "step as a float"),
    ] {
        expect(
            &app.patch("/api/v1/tags/good", body).await,
            400,
            "invalid_step",
            what,
        );
    }
    let huge = format!(r#"{{"description":"{}"}}"#, "d".repeat(4096));
    expect(
        &app.patch("/api/v1/tags/good", &huge).await,
        413,
        "payload_too_large",
        "oversized patch",
    );
    let wrong_type = app
        .client
        .post(format!("{}/api/v1/tags", app.address))
        .header("content-type", "text/plain")
        .body(r#"{"biz_tag":"plain","step":10}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_type.status(), 400, "JSON sent as text/plain");

    assert_eq!(tag_count(&app).await, before, "nothing was written");
    let row = app.get("/api/v1/tags/good").await.json();
    assert_eq!(
        (row["step"].as_i64(), row["max_id"].as_i64()),
        (Some(10), Some(1))
    );
    assert_eq!(app.leaf_id("good").await, 1, "the server keeps serving");
}
on_both_databases!(junk_on_the_snowflake_routes_and_in_bodies_gets_clear_errors);
