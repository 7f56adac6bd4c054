//! The cluster-wide migration lock (`leafid_migration_lock`) on a real MariaDB: a server waits
//! while another holds it, takes over a lock whose holder died, and runs again a migration that
//! a failed run left dirty. Galera's concurrent starts are in `galera.rs`.

use std::time::{Duration, Instant};

use sqlx::{Connection, MySqlConnection};

use crate::support::mysql::{create_database, exec_in};
use crate::support::process::ServerProcess;

const NO_SNOWFLAKE: [(&str, &str); 1] = [("LEAFID__SNOWFLAKE__ENABLED", "false")];

fn start(url: &str) -> ServerProcess {
    ServerProcess::start(url, &NO_SNOWFLAKE)
}

async fn scalar(url: &str, sql: &str) -> i64 {
    let mut conn = MySqlConnection::connect(url).await.expect("connect");
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(&mut conn)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// A new database a server started on once (so it is migrated and the lock table exists).
async fn migrated_database() -> String {
    let url = create_database().await;
    let url2 = url.clone();
    tokio::task::spawn_blocking(move || start(&url2).terminate())
        .await
        .unwrap();
    url
}

/// A migrated database whose lock "another server" holds until `until_ms`.
async fn database_with_lock_until(until_ms: impl FnOnce() -> i64) -> String {
    let url = migrated_database().await;
    exec_in(
        &url,
        &format!(
            "INSERT INTO leafid_migration_lock (id, owner, until_ms) VALUES (1, 'other', {})",
            until_ms()
        ),
    )
    .await;
    url
}

#[tokio::test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn a_server_waits_while_another_holds_the_migration_lock() {
    // The 3 s count from when the lock's end is computed, not from after the insert that
    // writes it (which a loaded machine can stretch past the margin below).
    let mut lock_taken = None;
    let url = database_with_lock_until(|| {
        lock_taken = Some(Instant::now());
        now_ms() + 3_000
    })
    .await;
    let url2 = url.clone();
    let server = tokio::task::spawn_blocking(move || start(&url2))
        .await
        .unwrap();
    let waited = lock_taken.unwrap().elapsed();
    assert!(
        waited >= Duration::from_millis(2_500),
        "started after {waited:?} while another server held the lock for 3 s"
    );
    assert_eq!(
        server
            .log_lines("another server is migrating the database")
            .len(),
        1
    );
    assert_eq!(
        server
            .log_lines("took over an expired migration lock")
            .len(),
        1,
        "the lock expired, so it was taken over"
    );
    // Released after migrating: no row left behind.
    assert_eq!(
        scalar(&url, "SELECT COUNT(*) FROM leafid_migration_lock").await,
        0
    );
}

#[tokio::test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn a_lock_left_by_a_crashed_server_is_taken_over() {
    let url = database_with_lock_until(|| now_ms() - 1).await;
    let started = Instant::now();
    let url2 = url.clone();
    let server = tokio::task::spawn_blocking(move || start(&url2))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        server
            .log_lines("took over an expired migration lock")
            .len(),
        1
    );
    assert!(server.log_lines("another server is migrating").is_empty());
}

#[tokio::test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn a_migration_left_dirty_runs_again_under_the_lock() {
    let url = migrated_database().await;
    // A run that failed half-way: sqlx marks the row unsuccessful and would refuse to start.
    exec_in(
        &url,
        "UPDATE _sqlx_migrations SET success = FALSE WHERE version = 3; \
         DROP TABLE leafid_tag_tombstone",
    )
    .await;
    let url2 = url.clone();
    let server = tokio::task::spawn_blocking(move || start(&url2))
        .await
        .unwrap();
    assert_eq!(
        server
            .log_lines("running again migrations a failed run left dirty")
            .len(),
        1
    );
    assert_eq!(
        scalar(
            &url,
            "SELECT COUNT(*) FROM _sqlx_migrations WHERE success = FALSE"
        )
        .await,
        0
    );
    // The migration really ran again: its table is back.
    assert_eq!(
        scalar(&url, "SELECT COUNT(*) FROM leafid_tag_tombstone").await,
        0
    );
}
