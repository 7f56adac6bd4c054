//! Caller tokens scoped to tags (issue 44): with a token in the database an anonymous caller
//! gets 401, a `pay*` token 403 on `orders` and 200 on `pay_x`; a revoked token stops at once
//! on the server that revoked it and within `callers.refresh_secs` on another; anonymous
//! callers cannot burn a formatted tag's day; `access_token` works on Leaf's routes only; a
//! server bound beyond loopback with no choice made refuses anonymous ids and says so once;
//! the database holds hashes only. And the store contract of [`CallerTokenStore`] on every
//! store.

use std::time::{Duration, Instant};

use leafid::access::callers::{hash_token, hex};
use leafid::segment::StoreError;
use leafid::store::tokens::{CallerTokenRow, CallerTokenStore, MemoryTokens, Revoked};
use leafid::store::{Database, DbOptions};

use crate::support::process::ServerProcess;
use crate::support::{Db, Reply, TestApp, fresh_db, metric_value, spawn_on};

/// GET `path` with `token` as `Authorization: Bearer`, or none.
async fn get(app: &TestApp, path: &str, token: Option<&str>) -> Reply {
    app.send(reqwest::Method::GET, path, None, token).await
}

/// Creates a caller token through the admin API (the test servers trust loopback for admin
/// writes) and returns the secret.
async fn create_token(app: &TestApp, name: &str, tags: &[&str]) -> String {
    let body = serde_json::json!({"name": name, "tags": tags}).to_string();
    let r = app.post("/api/v1/tokens", &body).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let v = r.json();
    assert_eq!(v["name"], name);
    let token = v["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("lid_") && token.len() == 47, "{token}");
    token
}

/// Polls `path` on `app` with `token` until it answers `status`, at most `within`.
async fn answers_within(
    app: &TestApp,
    path: &str,
    token: Option<&str>,
    status: u16,
    within: Duration,
) -> Duration {
    let start = Instant::now();
    loop {
        let r = get(app, path, token).await;
        if r.status == status {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{path} still answers {} after {within:?}: {}",
            r.status,
            r.text
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn a_token_scopes_ids_and_its_revocation_reaches_every_server(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let a = spawn_on(&url, |s| s.callers.refresh_secs = 1).await;
    let b = spawn_on(&url, |s| s.callers.refresh_secs = 1).await;
    a.create_tag("orders", 100, 1).await;
    a.create_tag("pay_x", 100, 1).await;
    // No token yet, on loopback: open as before.
    assert_eq!(a.leaf_id("orders").await, 1);
    assert_eq!(b.leaf_id("orders").await, 101);

    let pay = create_token(&a, "pay", &["pay*"]).await;
    // On the server that wrote it, at once: anonymous callers need a token now.
    let r = get(&a, "/api/segment/get/orders", None).await;
    assert_eq!(
        (r.status, r.code()),
        (401, "unauthorized".into()),
        "{}",
        r.text
    );
    // On the other, within its refresh.
    answers_within(
        &b,
        "/api/v1/segment/orders/ids?count=1",
        None,
        401,
        Duration::from_secs(5),
    )
    .await;
    let www = a
        .client
        .get(format!("{}/api/segment/get/orders", a.address))
        .send()
        .await
        .unwrap();
    assert_eq!(
        www.headers()
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer")
    );

    for app in [&a, &b] {
        // Out of scope: 403, naming the token's name and the tag, never the token.
        for path in [
            "/api/segment/get/orders",
            "/api/v1/segment/orders/ids?count=5",
            "/api/v1/segment/orders/ranges?count=5",
            "/api/snowflake/get/x",
            "/api/v1/snowflake/ids?count=2",
        ] {
            let r = get(app, path, Some(&pay)).await;
            assert_eq!(
                (r.status, r.code()),
                (403, "forbidden".into()),
                "{path}: {}",
                r.text
            );
            assert!(
                r.text.contains("\\\"pay\\\"") || r.text.contains("pay"),
                "{}",
                r.text
            );
            assert!(!r.text.contains(&pay), "the token leaked: {}", r.text);
        }
        // In scope.
        let r = get(app, "/api/segment/get/pay_x", Some(&pay)).await;
        assert_eq!(r.status, 200, "{}", r.text);
        let r = get(app, "/api/v1/segment/pay_x/ids?count=3", Some(&pay)).await;
        assert_eq!(r.status, 200, "{}", r.text);
        // A wrong token: 401 even where it would be in scope.
        let r = get(app, "/api/segment/get/pay_x", Some("lid_not-a-token")).await;
        assert_eq!(r.status, 401, "{}", r.text);
    }

    // Leaf-era callers: `access_token` on Leaf's two routes, not on the v1 routes.
    let r = a
        .get(&format!("/api/segment/get/pay_x?access_token={pay}"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = a
        .get(&format!("/api/snowflake/get/k?access_token={pay}"))
        .await;
    assert_eq!(r.status, 403, "{}", r.text);
    let r = a
        .get(&format!(
            "/api/v1/segment/pay_x/ids?count=1&access_token={pay}"
        ))
        .await;
    assert_eq!(r.status, 401, "{}", r.text);

    // The admin API lists without secrets; the database holds the hash only.
    let list = a.get("/api/v1/tokens").await;
    assert_eq!(list.status, 200, "{}", list.text);
    assert!(!list.text.contains(&pay) && !list.text.contains("token_hash"));
    assert_eq!(list.json()["tokens"][0]["tags"][0], "pay*");
    let database = Database::connect(&DbOptions {
        pgbouncer: crate::support::postgres::is_pgbouncer(&url),
        url: url.clone(),
        max_connections: 2,
        acquire_timeout: Duration::from_secs(5),
        mysql_single_statement_lease: false,
    })
    .await
    .unwrap();
    let rows = database.token_store().list_tokens().await.unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].token_hash, hex(&hash_token(&pay)));
    let stored = format!("{:?}", rows[0]);
    assert!(
        !stored.contains(&pay[4..]),
        "the token itself is stored: {stored}"
    );
    database.close().await;

    // Counted, by name.
    assert!(
        metric_value(&a.address, r#"leafid_caller_requests_total{token="pay"}"#)
            .await
            .unwrap()
            >= 2.0
    );
    assert!(
        metric_value(
            &a.address,
            r#"leafid_caller_refused_total{reason="forbidden"}"#
        )
        .await
        .unwrap()
            >= 5.0
    );

    // Revoked: refused at once on the revoking server, within the refresh on the other.
    let r = a
        .send(reqwest::Method::DELETE, "/api/v1/tokens/pay", None, None)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.json()["revoked_at"].is_string(), "{}", r.text);
    let r = get(&a, "/api/segment/get/pay_x", Some(&pay)).await;
    assert_eq!(r.status, 401, "{}", r.text);
    let took = answers_within(
        &b,
        "/api/segment/get/pay_x",
        Some(&pay),
        401,
        Duration::from_secs(5),
    )
    .await;
    eprintln!("revocation reached the other server in {took:?} (refresh_secs = 1)");
    // A revoked name is not created again; an unknown one is not revoked.
    let again = a
        .post("/api/v1/tokens", r#"{"name":"pay","tags":["*"]}"#)
        .await;
    assert_eq!((again.status, again.code()), (409, "token_exists".into()));
    let r = a
        .send(reqwest::Method::DELETE, "/api/v1/tokens/nope", None, None)
        .await;
    assert_eq!((r.status, r.code()), (404, "unknown_token".into()));
    a.stop().await;
    b.stop().await;
}
crate::on_both_databases!(a_token_scopes_ids_and_its_revocation_reaches_every_server);

/// The issue's attack: 100 anonymous requests of `count=100000` on a width-6 daily tag (the
/// whole day is 999,999 numbers) take none of them; the day's first number goes to the first
/// caller with a token.
async fn anonymous_callers_cannot_burn_a_formatted_day(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let app = spawn_on(&url, |_| {}).await;
    let r = app
        .post(
            "/api/v1/tags",
            r#"{"biz_tag":"orders","step":50,"format":{"date":"yyyyMMdd","width":6,"reset":"daily","time_zone":"UTC"}}"#,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let token = create_token(&app, "shop", &["orders"]).await;
    for _ in 0..100 {
        let r = get(&app, "/api/v1/segment/orders/ids?count=100000", None).await;
        assert_eq!(r.status, 401, "{}", r.text);
    }
    let r = get(&app, "/api/segment/get/orders", Some(&token)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.text.ends_with("000001"),
        "not the day's first: {}",
        r.text
    );
    app.stop().await;
}
crate::on_both_databases!(anonymous_callers_cannot_burn_a_formatted_day);

/// A server on 0.0.0.0 with no `callers.mode` chosen refuses anonymous ids (401 naming the way
/// out) and logs one line at start; `callers.mode = "open"` serves them and warns instead.
#[tokio::test]
async fn a_server_beyond_loopback_refuses_anonymous_ids_unless_open_by_choice() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("leafid.db").display());
    let server = ServerProcess::start(&url, &[("LEAFID__SERVER__HOST", "0.0.0.0")]);
    let client = reqwest::Client::new();
    for path in ["/api/segment/get/orders", "/api/snowflake/get/k"] {
        let r = client
            .get(format!("{}{path}", server.address))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401, "{path}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["code"], "unauthorized");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains("leafid tokens create") && message.contains("callers.mode"),
            "{message}"
        );
    }
    let lines = server.log_lines("server.host is beyond loopback");
    assert_eq!(lines.len(), 1, "{:?}", server.all_logs());
    assert!(lines[0].contains("\"WARN\""), "{}", lines[0]);
    drop(server);

    let open = ServerProcess::start(
        &url,
        &[
            ("LEAFID__SERVER__HOST", "0.0.0.0"),
            ("LEAFID__CALLERS__MODE", "open"),
        ],
    );
    let r = client
        .get(format!("{}/api/snowflake/get/k", open.address))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(open.log_lines("callers.mode = \"open\"").len(), 1);
    assert!(open.log_lines("server.host is beyond loopback").is_empty());
}

/// The contract of [`CallerTokenStore`]: names and hashes unique (a revoked name included),
/// names compared exactly, the list ordered bytewise, a revoke once, racing creates of one
/// name: exactly one wins.
async fn caller_token_store_contract(store: std::sync::Arc<dyn CallerTokenStore>) {
    let row = |name: &str, hash: &str| CallerTokenRow {
        name: name.to_owned(),
        token_hash: hex(&hash_token(hash)),
        tags: "pay*,snowflake".to_owned(),
        rate_per_sec: Some(10),
        burst: None,
        period_share_ppm: Some(10_000),
        created_at_ms: 1_800_000_000_000,
        revoked_at_ms: None,
    };
    store.create_token(&row("pay", "a")).await.unwrap();
    assert!(matches!(
        store.create_token(&row("pay", "b")).await,
        Err(StoreError::AlreadyExists)
    ));
    assert!(matches!(
        store.create_token(&row("other", "a")).await,
        Err(StoreError::AlreadyExists)
    ));
    // Exactly: "Pay" is another name.
    store.create_token(&row("Pay", "c")).await.unwrap();
    store.create_token(&row("b.2-x_y", "d")).await.unwrap();
    let rows = store.list_tokens().await.unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["Pay", "b.2-x_y", "pay"]);
    assert_eq!(rows[2], row("pay", "a"), "every column reads back");
    assert_eq!(store.revoke_token("pay", 5).await.unwrap(), Revoked::Now);
    assert_eq!(
        store.revoke_token("pay", 9).await.unwrap(),
        Revoked::Already
    );
    assert_eq!(
        store.revoke_token("PAY", 9).await.unwrap(),
        Revoked::Unknown
    );
    let rows = store.list_tokens().await.unwrap();
    assert_eq!(rows[2].revoked_at_ms, Some(5), "the first revocation stays");
    assert_eq!(rows[0].revoked_at_ms, None, "\"Pay\" untouched");
    assert!(matches!(
        store.create_token(&row("pay", "e")).await,
        Err(StoreError::AlreadyExists)
    ));
    // Racing creates of one name: exactly one wins, the rest find it taken.
    let mut tasks = Vec::new();
    for i in 0..6 {
        let store = store.clone();
        let r = row("race", &format!("race{i}"));
        tasks.push(tokio::spawn(async move { store.create_token(&r).await }));
    }
    let mut won = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(()) => won += 1,
            Err(StoreError::AlreadyExists) => {}
            Err(e) => panic!("a racing create failed otherwise: {e}"),
        }
    }
    assert_eq!(won, 1);
}

#[tokio::test]
async fn caller_token_store_contract_in_memory() {
    caller_token_store_contract(std::sync::Arc::new(MemoryTokens::default())).await;
}

async fn caller_token_store_contract_on(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let database = Database::connect(&DbOptions {
        pgbouncer: crate::support::postgres::is_pgbouncer(&url),
        url,
        max_connections: 8,
        acquire_timeout: Duration::from_secs(5),
        mysql_single_statement_lease: false,
    })
    .await
    .unwrap();
    caller_token_store_contract(database.token_store()).await;
    database.close().await;
}
crate::on_both_databases!(caller_token_store_contract_on);

/// `leafid tokens create/list/revoke` straight on the database: the token printed once and
/// admitted by a server on that database, a name taken exits 1, a bad name 2, the list never
/// shows a secret, a revocation reaches the server within its refresh.
#[tokio::test]
async fn the_cli_creates_lists_and_revokes_tokens_on_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("leafid.db").display());
    let cli = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_leafid"))
            .args(args)
            .env("LEAFID__DATABASE__URL", &url)
            .output()
            .unwrap()
    };
    let out = cli(&[
        "tokens",
        "create",
        "pay",
        "--tags",
        "pay*, snowflake",
        "--rate",
        "100",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let token = text.lines().next().unwrap().to_owned();
    assert!(token.starts_with("lid_") && token.len() == 47, "{text}");
    assert_eq!(
        cli(&["tokens", "create", "pay", "--tags", "x"])
            .status
            .code(),
        Some(1)
    );
    assert_eq!(
        cli(&["tokens", "create", "a b", "--tags", "x"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        cli(&["tokens", "create", "ok", "--tags", "a b"])
            .status
            .code(),
        Some(2)
    );

    let app = spawn_on(&url, |s| s.callers.refresh_secs = 1).await;
    app.create_tag("pay_x", 10, 1).await;
    let r = get(&app, "/api/segment/get/pay_x", Some(&token)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    let r = get(&app, "/api/snowflake/get/k", Some(&token)).await;
    assert_eq!(r.status, 200, "{}", r.text);

    let list = cli(&["tokens", "list", "--json"]);
    assert_eq!(list.status.code(), Some(0));
    let listed = String::from_utf8(list.stdout).unwrap();
    assert!(
        !listed.contains(&token) && listed.contains("\"pay*\""),
        "{listed}"
    );
    assert_eq!(cli(&["tokens", "revoke", "pay"]).status.code(), Some(0));
    assert_eq!(cli(&["tokens", "revoke", "nope"]).status.code(), Some(1));
    answers_within(
        &app,
        "/api/segment/get/pay_x",
        Some(&token),
        401,
        Duration::from_secs(5),
    )
    .await;
    app.stop().await;
}
