//! The test Patroni cluster (`scripts/patroni.sh`): two PostgreSQL 15 nodes, one etcd, HAProxy
//! in front on Patroni's `GET /primary`. Its HAProxy URL from `LEAFID_TEST_PATRONI_URL` (as
//! `scripts/test.sh` sets it), else from running `scripts/patroni.sh start` (installing the
//! packages if missing), so `cargo test -- --include-ignored` alone runs these tests too. A
//! plain `cargo test` lists them as ignored, never as passed.
//!
//! Every test fails the cluster over, so they hold [`serial`] throughout and each starts with
//! [`start`], which brings a killed node back as a replica.

use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sqlx::Connection;
use sqlx::postgres::PgConnection;

/// The HAProxy URL (`postgres://leafid:leafid@127.0.0.1:PORT/leafid`). Blocking the first time
/// when it has to build the cluster.
pub fn url() -> &'static str {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match std::env::var("LEAFID_TEST_PATRONI_URL") {
        Ok(url) => url.trim().to_owned(),
        Err(_) => script(&["start"]),
    })
}

/// Held by each failover test for its whole run: they share the cluster and fail it over.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}

/// `scripts/patroni.sh start`, then `sync on|off`: a leader with a streaming replica, in the
/// synchronous mode asked.
pub async fn start(synchronous: bool) {
    tokio::task::spawn_blocking(move || {
        let configured = url().to_owned();
        let printed = script(&["start"]);
        assert_eq!(
            printed, configured,
            "scripts/patroni.sh serves another URL than LEAFID_TEST_PATRONI_URL"
        );
        script(&["sync", if synchronous { "on" } else { "off" }]);
    })
    .await
    .unwrap();
}

/// Runs `scripts/patroni.sh ARGS` off the runtime; its stdout.
pub async fn run(args: &'static [&'static str]) -> String {
    tokio::task::spawn_blocking(move || script(args))
        .await
        .unwrap()
}

/// Runs `scripts/patroni.sh ARGS` and returns its stdout (panics with its stderr on failure).
/// Blocking.
pub fn script(args: &[&str]) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/patroni.sh");
    let out = Command::new("bash")
        .arg(path)
        .args(args)
        .output()
        .expect("run scripts/patroni.sh");
    assert!(
        out.status.success(),
        "scripts/patroni.sh {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The URL of database `db` through HAProxy (always the leader).
pub fn db_url(db: &str) -> String {
    with_database(url(), db)
}

/// The URL of database `db` on node `name` (`pg1` or `pg2`) directly, bypassing HAProxy: a
/// replica answers reads.
pub async fn node_url(name: &str, db: &str) -> String {
    let nodes = run(&["nodes"]).await;
    let index = match name {
        "pg1" => 0,
        "pg2" => 1,
        other => panic!("no node {other}"),
    };
    let node = nodes.lines().nth(index).expect("two node URLs");
    with_database(node, db)
}

/// `url` with its database (the last path segment) replaced by `db`.
fn with_database(url: &str, db: &str) -> String {
    let (server, _) = url.rsplit_once('/').expect("a URL with a database");
    format!("{server}/{db}")
}

/// Creates an empty database on the leader (through HAProxy); its name.
pub async fn create_database(prefix: &str) -> String {
    let name = super::unique_name(prefix);
    exec(url(), &format!("CREATE DATABASE {name}")).await;
    name
}

/// Runs statements at `url`, retrying the connection for up to 10 s (HAProxy may be between
/// two leaders).
pub async fn exec(url: &str, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match PgConnection::connect(url).await {
            Ok(mut conn) => {
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
                    .execute(&mut conn)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
                return;
            }
            Err(e) if Instant::now() > deadline => panic!("connect to {url}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The `max_id` of every tag at `url` and whether that node is a replica (`pg_is_in_recovery`),
/// or `None` when it does not answer (within 1 s) or lacks the table.
pub async fn max_ids(url: &str) -> Option<(Vec<(String, i64)>, bool)> {
    let read = async {
        let mut conn = PgConnection::connect(url).await.ok()?;
        let (recovery,): (bool,) = sqlx::query_as("SELECT pg_is_in_recovery()")
            .fetch_one(&mut conn)
            .await
            .ok()?;
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT biz_tag::text, max_id FROM leaf_alloc ORDER BY biz_tag")
                .fetch_all(&mut conn)
                .await
                .ok()?;
        Some((rows, recovery))
    };
    tokio::time::timeout(Duration::from_secs(1), read)
        .await
        .ok()
        .flatten()
}
