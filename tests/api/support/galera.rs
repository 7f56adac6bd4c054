//! The test Galera cluster (3 MariaDB nodes on 127.0.0.1, `scripts/galera.sh`): its node URLs
//! from `LEAFID_TEST_GALERA_URLS` (as `scripts/test.sh` sets it), else from running
//! `scripts/galera.sh start` (installing MariaDB and galera-4 if missing), so
//! `cargo test -- --include-ignored` alone runs these tests too. A plain `cargo test` lists them
//! as ignored (`#[ignore = "needs a MariaDB Galera cluster: ..."]`), never as passed.
//!
//! The tests share one cluster and one of them kills a node, so they hold [`serial`] throughout.

use std::process::Command;
use std::sync::OnceLock;

use sqlx::Connection;
use sqlx::mysql::MySqlConnection;

/// The node URLs (`mysql://leafid:leafid@127.0.0.1:PORT`, no database), node 1 first.
/// Blocking the first time when it has to start the cluster.
pub fn node_urls() -> &'static [String] {
    static URLS: OnceLock<Vec<String>> = OnceLock::new();
    URLS.get_or_init(|| {
        let urls = match std::env::var("LEAFID_TEST_GALERA_URLS") {
            Ok(urls) => urls,
            Err(_) => script(&["start"]),
        };
        let urls: Vec<String> = urls
            .split_whitespace()
            .map(|u| u.trim_end_matches('/').to_owned())
            .collect();
        assert_eq!(urls.len(), 3, "three Galera node URLs expected: {urls:?}");
        urls
    })
}

/// Held by each Galera test for its whole run: they share the cluster and one kills a node.
/// Once held, the cluster is whole: `galera.sh start` (idempotent) brings back a node that an
/// earlier test killed and could not restart because it failed first.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let guard = LOCK.lock().await;
    tokio::task::spawn_blocking(|| {
        node_urls();
        script(&["start"])
    })
    .await
    .unwrap();
    guard
}

/// Inserts a `leaf_alloc` row through node 1 and waits until every node has applied it.
/// Replication is asynchronous to readers (`wsrep_sync_wait = 0`, as docs/deploy.md advises):
/// a server on another node that looks the tag up a moment too early answers 404, as it would
/// for any tag created elsewhere a moment ago.
pub async fn insert_tag_everywhere(urls: &[String], tag: &str, step: i64) {
    super::mysql::exec_in(
        &urls[0],
        &format!("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('{tag}', 1, {step})"),
    )
    .await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for url in urls {
        while super::mysql::row(url, tag).await.is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "{tag} not replicated to {url} within 10 s"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

/// Runs `scripts/galera.sh ARGS` and returns its stdout (panics with its stderr on failure).
/// Blocking: call it from `spawn_blocking` in async tests.
pub fn script(args: &[&str]) -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/galera.sh");
    let out = Command::new("bash")
        .arg(path)
        .args(args)
        .output()
        .expect("run scripts/galera.sh");
    assert!(
        out.status.success(),
        "scripts/galera.sh {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// A new database, created through node 1 (DDL replicates to every node), and its URL on each
/// node, node 1 first; returns once every node has it.
pub async fn create_database() -> Vec<String> {
    let nodes = tokio::task::spawn_blocking(node_urls).await.unwrap();
    let name = super::unique_name("leafid_g");
    let mut conn = MySqlConnection::connect(&nodes[0])
        .await
        .expect("connect to Galera node 1");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap();
    let urls: Vec<String> = nodes.iter().map(|n| format!("{n}/{name}")).collect();
    // DDL commits on node 1 before the other nodes have applied it: a server started on node 3
    // at once could find no such database (seen: `1049 Unknown database`). Wait until every
    // node lets a connection into it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    for url in &urls {
        loop {
            match MySqlConnection::connect(url).await {
                Ok(_) => break,
                Err(_) if std::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(e) => panic!("database {name} never reached {url}: {e}"),
            }
        }
    }
    urls
}

/// Conflicts node `url` counted so far, `None` if it does not answer:
/// `wsrep_local_cert_failures` (local transactions that failed certification at commit) plus
/// `wsrep_local_bf_aborts` (local transactions aborted by a replicated one that won). Each is a
/// 1213 that leafid, or the node's own autocommit retry (`wsrep_retry_autocommit`), retried.
pub async fn conflicts(url: &str) -> Option<u64> {
    let mut conn = MySqlConnection::connect(url).await.ok()?;
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SHOW GLOBAL STATUS WHERE Variable_name IN \
         ('wsrep_local_cert_failures', 'wsrep_local_bf_aborts')",
    )
    .fetch_all(&mut conn)
    .await
    .ok()?;
    Some(rows.iter().map(|(_, v)| v.parse::<u64>().unwrap()).sum())
}

/// [`conflicts`] of every node, node 1 first (`None`: the node is down).
pub async fn cluster_conflicts() -> Vec<Option<u64>> {
    let mut all = Vec::new();
    for url in node_urls() {
        all.push(conflicts(url).await);
    }
    all
}
