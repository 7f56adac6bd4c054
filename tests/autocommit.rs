//! A MariaDB whose DBA set `SET GLOBAL autocommit = 0`: leafid forces `autocommit = 1` on each
//! session, so tag writes, single-statement leases and worker leases are committed and visible
//! to other connections, and a restart continues above every id handed out before.
//!
//! Its own test binary and its own MariaDB instance: it changes a global setting, which the
//! shared test server must never see.

use std::time::Duration;

use leafid::config::Settings;
use leafid::startup::Application;
use sqlx::Connection;
use sqlx::mysql::MySqlConnection;

#[path = "api/support/mysql.rs"]
#[allow(dead_code)]
mod mysql;

use mysql::PrivateMariaDb;

/// Used by `mysql::create_database` (not called here).
#[allow(dead_code)]
fn unique_name(prefix: &str) -> String {
    format!("{prefix}_{}", std::process::id())
}

/// A free port below the ephemeral range (private instances must not collide with it).
fn free_low_port() -> u16 {
    (23_400..23_700)
        .find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok())
        .expect("a free port in 23400..23700")
}

struct Server {
    address: String,
    handle: actix_web::dev::ServerHandle,
    client: reqwest::Client,
}

impl Server {
    async fn start(db_url: &str) -> Self {
        let mut s = Settings::load(None).unwrap();
        s.server.port = 0;
        s.server.workers = 1;
        s.server.shutdown_timeout_secs = 1;
        // The test creates its tag from loopback; admin writes need this or a token since #24.
        s.admin.trust_loopback = true;
        s.database.url = db_url.to_owned();
        s.database.mysql_single_statement_lease = true;
        s.segment.wait_timeout_ms = 2000;
        s.snowflake.worker.strategy = leafid::snowflake::worker::WorkerStrategy::Lease;
        s.snowflake.worker.lease_secs = 5;
        s.snowflake.worker.heartbeat_secs = 1;
        let app = Application::build(s).await.expect("server starts");
        let address = format!("http://127.0.0.1:{}", app.port());
        let handle = app.handle();
        tokio::spawn(app.run_until_stopped());
        Self {
            address,
            handle,
            client: reqwest::Client::new(),
        }
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .client
            .get(format!("{}{path}", self.address))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    async fn ids(&self, tag: &str) -> Vec<i64> {
        let mut ids = Vec::new();
        for _ in 0..15 {
            let (status, text) = self.get(&format!("/api/segment/get/{tag}")).await;
            assert_eq!(status, 200, "{text}");
            ids.push(text.parse().unwrap());
        }
        let (status, text) = self
            .get(&format!("/api/v1/segment/{tag}/ids?count=40"))
            .await;
        assert_eq!(status, 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        ids.extend(serde_json::from_value::<Vec<i64>>(v["ids"].clone()).unwrap());
        ids
    }
}

/// What another session sees: `(max_id of tag, worker leases with an owner)`.
async fn seen_from_outside(db_url: &str, tag: &str) -> (Option<i64>, Vec<(i64, String, i64)>) {
    // A fresh connection: with the global default, its reads start a new snapshot.
    let mut conn = MySqlConnection::connect(db_url).await.unwrap();
    let max_id = sqlx::query_scalar("SELECT max_id FROM leaf_alloc WHERE biz_tag = ?")
        .bind(tag)
        .fetch_optional(&mut conn)
        .await
        .unwrap();
    let leases = sqlx::query_as(
        "SELECT worker_id, owner, lease_until_ms FROM leafid_worker_lease WHERE owner <> ''",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
    (max_id, leases)
}

#[tokio::test]
#[ignore = "needs MariaDB (a private instance): scripts/test.sh runs it"]
async fn with_global_autocommit_off_every_write_is_committed() {
    let port = free_low_port();
    let db = tokio::task::spawn_blocking(move || PrivateMariaDb::start_on("autocommit", port))
        .await
        .unwrap();
    mysql::exec_url(
        &db.url,
        "SET GLOBAL autocommit = 1; DROP DATABASE IF EXISTS leafid_ac; CREATE DATABASE leafid_ac; \
         SET GLOBAL autocommit = 0",
    )
    .await;
    let db_url = format!("{}/leafid_ac", db.url);

    let server = Server::start(&db_url).await;
    let created = server
        .client
        .post(format!("{}/api/v1/tags", server.address))
        .header("content-type", "application/json")
        .body(r#"{"biz_tag":"ac","step":10}"#)
        .send()
        .await
        .unwrap();
    let status = created.status().as_u16();
    assert_eq!(status, 201, "{}", created.text().await.unwrap());
    let before = server.ids("ac").await;
    let (status, text) = server.get("/api/snowflake/get/any").await;
    assert_eq!(status, 200, "{text}");
    let highest = *before.iter().max().unwrap();

    // Another session sees the leases and the worker lease.
    let (max_id, leases) = seen_from_outside(&db_url, "ac").await;
    let max_id = max_id.expect("the tag is visible from another connection");
    assert!(
        max_id > highest,
        "max_id {max_id} seen from another connection is not above the ids handed out (up to {highest})"
    );
    assert_eq!(leases.len(), 1, "worker lease visible: {leases:?}");
    // The heartbeat (every second) is committed too: another session sees the lease move on
    // (polled: a loaded machine may delay a heartbeat well past its second).
    let first_until = leases[0].2;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, leases) = seen_from_outside(&db_url, "ac").await;
        if leases.len() == 1 && leases[0].2 > first_until {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "heartbeat not visible in 20 s: {leases:?} (was {first_until})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The release at shutdown is committed too: no lease keeps an owner.
    server.handle.stop(true).await;
    let mut waited = Duration::ZERO;
    loop {
        let (_, leases) = seen_from_outside(&db_url, "ac").await;
        if leases.is_empty() {
            break;
        }
        assert!(
            waited < Duration::from_secs(5),
            "the worker lease is still owned 5 s after shutdown: {leases:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += Duration::from_millis(100);
    }

    // A restart continues above every id handed out before.
    let server = Server::start(&db_url).await;
    let after = server.ids("ac").await;
    let lowest = *after.iter().min().unwrap();
    assert!(
        lowest > highest,
        "after restart id {lowest} is not above {highest} handed out before"
    );
    server.handle.stop(true).await;

    mysql::exec_url(&db.url, "SET GLOBAL autocommit = 1").await;
    tokio::task::spawn_blocking(move || {
        db.stop();
        drop(db);
    })
    .await
    .unwrap();
}
