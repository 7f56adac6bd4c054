//! The dashboard page and its assets, and `GET /api/v1/snowflake/status` that it polls.
//! (The page itself is driven in a real browser by `scripts/browser-test.sh`.)

use crate::support::{Db, spawn_app, spawn_app_with};

#[tokio::test]
async fn dashboard_is_served_at_root_and_dashboard_with_its_assets() {
    let app = spawn_app(Db::Sqlite).await;
    let root = app.get("/").await;
    assert_eq!(root.status, 200);
    assert!(
        root.content_type.starts_with("text/html"),
        "{}",
        root.content_type
    );
    assert!(root.text.contains("<title>leafid dashboard</title>"));
    assert_eq!(app.get("/dashboard").await.text, root.text);

    for (path, kind) in [
        ("/dashboard/app.js", "text/javascript"),
        ("/dashboard/style.css", "text/css"),
    ] {
        let r = app.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert!(
            r.content_type.starts_with(kind),
            "{path}: {}",
            r.content_type
        );
        assert!(r.text.len() > 1000, "{path} is suspiciously small");
    }
}

#[tokio::test]
async fn dashboard_loads_nothing_from_elsewhere() {
    let app = spawn_app(Db::Sqlite).await;
    let csp = app
        .client
        .get(format!("{}/dashboard", app.address))
        .send()
        .await
        .unwrap()
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("a Content-Security-Policy header");
    assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"));
    for path in ["/", "/dashboard/app.js", "/dashboard/style.css"] {
        let text = app.get(path).await.text;
        for outside in ["http://", "https://", "//cdn", "innerHTML"] {
            assert!(!text.contains(outside), "{path} mentions {outside}");
        }
    }
}

#[tokio::test]
async fn snowflake_status_shows_layout_worker_and_time_left() {
    let app = spawn_app(Db::Sqlite).await;
    let r = app.get("/api/v1/snowflake/status").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let s = r.json();
    assert_eq!(s["layout"], "41/10/12");
    assert_eq!(s["unit"], "millis");
    assert_eq!(s["generator"], "cached");
    assert_eq!(s["worker_strategy"], "lease");
    assert!(s["worker_id"].is_u64());
    assert_eq!(s["suspended"], false);
    // The twitter preset runs out in 2080: decades left.
    let years = s["time_left_secs"].as_i64().unwrap() / (365 * 24 * 3600);
    assert!((40..70).contains(&years), "{years} years left");
    assert!(s["ring_capacity"].as_u64().unwrap() >= s["ring_available"].as_u64().unwrap());
}

#[tokio::test]
async fn snowflake_status_is_404_engine_disabled_when_off() {
    let app = spawn_app_with(Db::Sqlite, |s| s.snowflake.enabled = false).await;
    let r = app.get("/api/v1/snowflake/status").await;
    assert_eq!((r.status, r.code().as_str()), (404, "engine_disabled"));
    assert_eq!(app.get("/dashboard").await.status, 200);
}
