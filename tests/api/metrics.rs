//! `GET /metrics`: the families are there and move with traffic.

use std::collections::HashMap;

use crate::on_both_databases;
use crate::support::{Db, TestApp, spawn_app};

/// One scrape: series (name with labels, as printed) to value.
async fn scrape(app: &TestApp) -> HashMap<String, f64> {
    let r = app.get("/metrics").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.content_type.starts_with("text/plain"),
        "{}",
        r.content_type
    );
    r.text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("series and value");
            (series.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

fn value(m: &HashMap<String, f64>, series: &str) -> f64 {
    *m.get(series).unwrap_or_else(|| {
        let mut names: Vec<_> = m.keys().collect();
        names.sort();
        panic!("no {series} in {names:#?}")
    })
}

const LEAF_ROUTE: &str = "/api/segment/get/{biz_tag:.*}";

async fn families_move_with_traffic(db: Db) {
    let app = spawn_app(db).await;
    app.create_tag("m", 10, 1).await;
    for _ in 0..25 {
        app.leaf_id("m").await;
    }
    assert_eq!(app.get("/api/v1/snowflake/ids?count=5").await.status, 200);
    assert_eq!(app.get("/api/segment/get/nope").await.status, 404);
    assert_eq!(app.get("/no/such/route").await.status, 404);

    let first = scrape(&app).await;
    let issued = r#"leafid_ids_issued_total{biz_tag="m",engine="segment"}"#;
    assert_eq!(value(&first, issued), 25.0);
    let snowflake_issued = r#"leafid_ids_issued_total{biz_tag="",engine="snowflake"}"#;
    assert!(value(&first, snowflake_issued) >= 5.0);
    // Steps 10 then 20 served the 25 ids; a third load may still be in flight.
    assert!(value(&first, r#"leafid_segment_loads_total{biz_tag="m"}"#) >= 2.0);
    assert_eq!(
        value(&first, r#"leafid_segment_load_failures_total{biz_tag="m"}"#),
        0.0
    );
    assert!(
        value(
            &first,
            r#"leafid_segment_load_duration_seconds_count{biz_tag="m"}"#
        ) >= 2.0
    );
    assert!(
        value(
            &first,
            r#"leafid_segment_load_duration_seconds_bucket{biz_tag="m",le="+Inf"}"#
        ) >= 2.0
    );
    assert!(value(&first, r#"leafid_segment_step{biz_tag="m"}"#) >= 10.0);
    assert_eq!(
        value(&first, r#"leafid_segment_db_step{biz_tag="m"}"#),
        10.0
    );
    let current = r#"leafid_segment_remaining_ids{biz_tag="m",segment="current"}"#;
    let next = r#"leafid_segment_remaining_ids{biz_tag="m",segment="next"}"#;
    assert!(value(&first, current) + value(&first, next) > 0.0);
    let capacity = value(&first, "leafid_snowflake_ring_capacity");
    assert!(capacity > 0.0);
    assert!(value(&first, "leafid_snowflake_ring_available") <= capacity);
    assert!(value(&first, "leafid_snowflake_worker_id") >= 0.0);
    assert!(value(&first, "leafid_snowflake_time_left_seconds") > 365.0 * 86_400.0);
    assert_eq!(value(&first, "leafid_snowflake_suspended"), 0.0);
    let ok =
        format!(r#"leafid_http_requests_total{{method="GET",route="{LEAF_ROUTE}",status="200"}}"#);
    assert_eq!(value(&first, &ok), 25.0);
    let unknown =
        format!(r#"leafid_http_requests_total{{method="GET",route="{LEAF_ROUTE}",status="404"}}"#);
    assert_eq!(value(&first, &unknown), 1.0);
    let unmatched = r#"leafid_http_requests_total{method="GET",route="unmatched",status="404"}"#;
    assert_eq!(
        value(&first, unmatched),
        1.0,
        "raw paths never become labels"
    );
    assert!(!first.keys().any(|k| k.contains("/no/such/route")));

    for _ in 0..5 {
        app.leaf_id("m").await;
    }
    let second = scrape(&app).await;
    assert_eq!(value(&second, issued), 30.0);
    assert_eq!(value(&second, &ok), 30.0);
    let scrapes = r#"leafid_http_requests_total{method="GET",route="/metrics",status="200"}"#;
    assert_eq!(value(&second, scrapes), 1.0, "the first scrape is counted");
    app.stop().await;
}
on_both_databases!(families_move_with_traffic);
