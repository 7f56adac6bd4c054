//! The commit durability check (issue 25) against real databases: a MariaDB of its own whose
//! `innodb_flush_log_at_trx_commit` a test turns to 0, and a SQLite file.
//!
//! - By default a server hands out no id that needs a lease from a lossy database (503
//!   `lossy_database` naming the setting), is not ready, and counts the setting in `/metrics`;
//!   fixed, it leases again; made lossy again at run time, it serves what it had leased and
//!   leases nothing more. With `database.allow_lossy_commits = true` ids flow and the setting
//!   is still reported.
//! - PostgreSQL (directly and through PgBouncer) with `synchronous_commit = off`: the same.
//! - The crash experiment: leases taken fast from the `leafid` binary, `kill -9` of `mariadbd`
//!   and of the server, MariaDB restarted (crash recovery), a new server: with the override the
//!   second server hands out ids the first one already handed out; by default the first server
//!   hands out nothing, so nothing can repeat.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::mysql::{PrivateMariaDb, exec_in, exec_url, row};
use crate::support::process::ServerProcess;
use crate::support::{Db, TestApp, metric_value, spawn_app_with, spawn_on, unique_name};

/// The gauge series of the setting the tests turn lossy.
fn series(value: &str) -> String {
    format!(
        r#"leafid_database_lossy_setting{{setting="innodb_flush_log_at_trx_commit",value="{value}"}}"#
    )
}

/// Polls `f` every 100 ms until it holds, for at most `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !f().await {
        assert!(Instant::now() < deadline, "not within {within:?}: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A fresh database on the private instance; its URL.
async fn database_on(db: &PrivateMariaDb, prefix: &str) -> String {
    let name = unique_name(prefix);
    exec_url(&db.url, &format!("CREATE DATABASE {name}")).await;
    format!("{}/{name}", db.url)
}

async fn set_flush(db: &PrivateMariaDb, value: u8) {
    exec_url(
        &db.url,
        &format!("SET GLOBAL innodb_flush_log_at_trx_commit = {value}"),
    )
    .await;
}

/// Asserts the reply is the refusal naming `value` and the override.
fn assert_refused(r: &crate::support::Reply, value: &str) {
    assert_eq!(
        (r.status, r.code().as_str()),
        (503, "lossy_database"),
        "{}",
        r.text
    );
    assert_eq!(r.retry_after.as_deref(), Some("5"));
    let message = r.json()["message"].as_str().unwrap().to_owned();
    for part in [
        format!("innodb_flush_log_at_trx_commit = {value}"),
        "set innodb_flush_log_at_trx_commit = 1".into(),
        "database.allow_lossy_commits = true".into(),
    ] {
        assert!(message.contains(&part), "{part:?} not in {message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB (a private instance): scripts/test.sh runs it"]
async fn a_lossy_mariadb_gets_no_lease_unless_the_override_says_so() {
    let db = tokio::task::spawn_blocking(|| PrivateMariaDb::start("durability"))
        .await
        .unwrap();
    let url = database_on(&db, "leafid_d").await;
    set_flush(&db, 0).await;
    // With the binlog off (scripts/mariadb.sh: --skip-log-bin), sync_binlog cannot lose a
    // commit: set to 0 here, it must not be reported.
    exec_url(&db.url, "SET GLOBAL sync_binlog = 0").await;
    let app = spawn_on(&url, |s| s.snowflake.worker.cache_file = String::new()).await;
    app.create_tag("lossy", 10, 1).await;

    // Arrange done: every route that would need a lease refuses, naming the setting.
    assert_refused(&app.get("/api/segment/get/lossy").await, "0");
    let batch = app.get("/api/v1/segment/lossy/ids?count=5").await;
    assert_refused(&batch, "0");
    assert!(!batch.text.contains("sync_binlog"), "{}", batch.text);
    let ready = app.get("/health/ready").await;
    assert_eq!((ready.status, ready.code().as_str()), (503, "not_ready"));
    assert!(
        ready.text.contains("innodb_flush_log_at_trx_commit = 0"),
        "{}",
        ready.text
    );
    assert_eq!(metric_value(&app.address, &series("0")).await, Some(1.0));
    // The worker-id claim is refused too: no snowflake id either.
    assert_refused(&app.get("/api/snowflake/get/x").await, "0");
    assert_refused(&app.get("/api/v1/snowflake/ids?count=3").await, "0");
    assert_eq!(
        row(&url, "lossy").await,
        Some((1, 10)),
        "nothing was leased"
    );

    // The DBA fixes it: leases flow again, without a restart.
    set_flush(&db, 1).await;
    eventually(Duration::from_secs(10), "ids after the fix", || async {
        app.get("/api/segment/get/lossy").await.status == 200
    })
    .await;
    assert_eq!(metric_value(&app.address, &series("0")).await, None);
    eventually(Duration::from_secs(20), "ready after the fix", || async {
        app.get("/health/ready").await.status == 200
    })
    .await;
    assert!(!app.get("/health/ready").await.text.contains("durability"));

    // Turned lossy again at run time: what was leased is still served, nothing more is leased.
    set_flush(&db, 2).await;
    eventually(Duration::from_secs(10), "not ready once lossy", || async {
        app.get("/health/ready").await.status == 503
    })
    .await;
    let (leased_to, _) = row(&url, "lossy").await.unwrap();
    let served = drain_memory(&app, "lossy").await;
    assert!(
        served.iter().all(|&id| id < leased_to),
        "an id at or above the committed max_id {leased_to}: {served:?}"
    );
    assert_refused(&app.get("/api/segment/get/lossy").await, "2");
    assert_eq!(
        row(&url, "lossy").await.unwrap().0,
        leased_to,
        "a lease went through"
    );
    assert_eq!(metric_value(&app.address, &series("2")).await, Some(1.0));

    // The override: ids flow, the setting is still reported.
    let allowed = spawn_on(&url, |s| {
        s.database.allow_lossy_commits = true;
        s.snowflake.enabled = false;
    })
    .await;
    let id = allowed.leaf_id("lossy").await;
    assert!(
        id >= leased_to,
        "{id} below the committed max_id {leased_to}"
    );
    let ready = allowed.get("/health/ready").await;
    assert_eq!(ready.status, 200, "{}", ready.text);
    let listed = &ready.json()["durability"];
    assert_eq!(
        listed[0]["setting"], "innodb_flush_log_at_trx_commit",
        "{listed}"
    );
    assert_eq!(listed[0]["value"], "2", "{listed}");
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(
        metric_value(&allowed.address, &series("2")).await,
        Some(1.0)
    );

    set_flush(&db, 1).await;
    allowed.stop().await;
    app.stop().await;
}

/// Takes ids one at a time until the server answers anything but 200; the ids.
async fn drain_memory(app: &TestApp, tag: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    loop {
        let r = app.get(&format!("/api/segment/get/{tag}")).await;
        if r.status != 200 {
            return ids;
        }
        ids.push(r.text.parse().unwrap());
        assert!(
            ids.len() < 10_000,
            "ids keep coming from a refused database"
        );
    }
}

#[tokio::test]
async fn the_sqlite_file_leafid_opens_reports_durable_commits() {
    let app = spawn_app_with(Db::Sqlite, |s| s.snowflake.enabled = false).await;
    app.create_tag("file", 10, 1).await;
    assert_eq!(app.leaf_id("file").await, 1);
    let ready = app.get("/health/ready").await;
    assert_eq!(ready.status, 200, "{}", ready.text);
    assert!(!ready.text.contains("durability"), "{}", ready.text);
    let metrics = app.get("/metrics").await.text;
    assert!(
        !metrics.contains("leafid_database_lossy_setting{"),
        "a lossy setting reported for leafid's own SQLite file: {metrics}"
    );
    app.stop().await;
}

/// PostgreSQL with `synchronous_commit = off` for the database (its owner may set that; `fsync`
/// is server-wide): no lease, directly or through PgBouncer, until the override.
async fn postgres_with_synchronous_commit_off_gets_no_lease(db: Db) {
    use crate::support::postgres::{row as pg_row, server_url, with_database};
    let (url, _) = crate::support::fresh_db(db).await;
    let name = url.rsplit('/').next().unwrap().to_owned();
    let server = with_database(server_url(), &name);
    crate::support::postgres::exec_in(
        &server,
        &format!("ALTER DATABASE {name} SET synchronous_commit = off"),
    )
    .await;
    let app = spawn_on(&url, |s| s.snowflake.enabled = false).await;
    app.create_tag("pg", 10, 1).await;
    let r = app.get("/api/segment/get/pg").await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (503, "lossy_database"),
        "{}",
        r.text
    );
    for part in [
        "synchronous_commit = off",
        "set synchronous_commit = on",
        "database.allow_lossy_commits = true",
    ] {
        assert!(r.text.contains(part), "{part:?} not in {}", r.text);
    }
    assert_eq!(app.get("/health/ready").await.status, 503);
    let series = r#"leafid_database_lossy_setting{setting="synchronous_commit",value="off"}"#;
    assert_eq!(metric_value(&app.address, series).await, Some(1.0));
    assert_eq!(
        pg_row(&server, "pg").await,
        Some((1, 10)),
        "nothing was leased"
    );

    let allowed = spawn_on(&url, |s| {
        s.snowflake.enabled = false;
        s.database.allow_lossy_commits = true;
    })
    .await;
    assert_eq!(allowed.leaf_id("pg").await, 1);
    let ready = allowed.get("/health/ready").await;
    assert_eq!(ready.status, 200, "{}", ready.text);
    assert_eq!(
        ready.json()["durability"][0]["setting"],
        "synchronous_commit"
    );
    allowed.stop().await;
    app.stop().await;
}

mod postgres_with_synchronous_commit_off_gets_no_lease {
    #[tokio::test]
    #[ignore = "needs PostgreSQL: scripts/test.sh runs it"]
    async fn postgres() {
        super::postgres_with_synchronous_commit_off_gets_no_lease(crate::support::Db::Postgres)
            .await;
    }
    #[tokio::test]
    #[ignore = "needs PgBouncer and PostgreSQL: scripts/test.sh runs it"]
    async fn pgbouncer() {
        super::postgres_with_synchronous_commit_off_gets_no_lease(crate::support::Db::PgBouncer)
            .await;
    }
}

/// What one crash run saw.
struct CrashRun {
    /// Ids the first server handed out (before and just after `kill -9` of MariaDB).
    before: Vec<i64>,
    /// Its error codes.
    errors: BTreeMap<String, usize>,
    /// Ids the second server handed out.
    after: Vec<i64>,
    /// `max_id` of the row once MariaDB recovered, and the highest id handed out before.
    recovered_max_id: i64,
    /// Ids handed out by both servers.
    twice: usize,
}

/// What one client task took: ids, and error codes (or `"connection"`) with their counts.
type Taken = (Vec<i64>, BTreeMap<String, usize>);

/// Batches of 5 from `base` until `stop`, by 4 clients; `served` counts the ids.
fn hammer(
    base: &str,
    stop: &Arc<AtomicBool>,
    served: &Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<Taken>> {
    (0..4)
        .map(|_| {
            let (base, stop, served) = (base.to_owned(), stop.clone(), served.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let (mut ids, mut errors) = (Vec::new(), BTreeMap::new());
                while !stop.load(Ordering::Relaxed) {
                    let sent = client
                        .get(format!("{base}/api/v1/segment/crash/ids?count=5"))
                        .timeout(Duration::from_secs(5))
                        .send()
                        .await;
                    let Ok(resp) = sent else {
                        *errors.entry("connection".to_owned()).or_insert(0) += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    };
                    let ok = resp.status().is_success();
                    let Ok(body) = resp.json::<serde_json::Value>().await else {
                        *errors.entry("connection".to_owned()).or_insert(0) += 1;
                        continue;
                    };
                    if ok {
                        let got: Vec<i64> = serde_json::from_value(body["ids"].clone()).unwrap();
                        served.fetch_add(got.len(), Ordering::Relaxed);
                        ids.extend(got);
                    } else {
                        let code = body["code"].as_str().unwrap_or("?").to_owned();
                        *errors.entry(code).or_insert(0) += 1;
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                (ids, errors)
            })
        })
        .collect()
}

/// One run: a server leasing fast (step 10) on a MariaDB with
/// `innodb_flush_log_at_trx_commit = 0`, `kill -9` of `mariadbd` then of the server, MariaDB
/// started again (crash recovery; the setting is back to its default, 1), a new server taking
/// ids up to past the first one's highest.
async fn crash_run(db: &Arc<PrivateMariaDb>, allow_lossy: bool) -> CrashRun {
    let url = database_on(db, "leafid_k").await;
    let env = [
        ("LEAFID__SNOWFLAKE__ENABLED", "false"),
        ("LEAFID__SEGMENT__MAX_STEP", "10"),
        ("LEAFID__SEGMENT__WAIT_TIMEOUT_MS", "300"),
        ("LEAFID__SEGMENT__LOAD_TIMEOUT_MS", "1000"),
        ("LEAFID__SEGMENT__RETURN_UNUSED_ON_SHUTDOWN", "false"),
        ("LEAFID__DATABASE__ACQUIRE_TIMEOUT_MS", "1000"),
        (
            "LEAFID__DATABASE__ALLOW_LOSSY_COMMITS",
            if allow_lossy { "true" } else { "false" },
        ),
    ];
    let start = |url: String| tokio::task::spawn_blocking(move || ServerProcess::start(&url, &env));
    set_flush(db, 0).await;
    let first = start(url.clone()).await.unwrap();
    exec_in(
        &url,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('crash', 1, 10)",
    )
    .await;
    let (stop, served) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    let clients = hammer(&first.address, &stop, &served);
    // Under load for a while: with the override, leases run right up to the kill.
    let began = Instant::now();
    while began.elapsed() < Duration::from_millis(1500)
        || (allow_lossy && served.load(Ordering::Relaxed) < 2000)
    {
        assert!(began.elapsed() < Duration::from_secs(30), "no load");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killing = db.clone();
    tokio::task::spawn_blocking(move || killing.kill9())
        .await
        .unwrap();
    tokio::task::spawn_blocking(move || first.kill9())
        .await
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let (mut before, mut errors) = (Vec::new(), BTreeMap::new());
    for c in clients {
        let (ids, errs) = c.await.unwrap();
        before.extend(ids);
        for (k, v) in errs {
            *errors.entry(k).or_insert(0) += v;
        }
    }

    let restarting = db.clone();
    tokio::task::spawn_blocking(move || restarting.start_again())
        .await
        .unwrap();
    let (recovered_max_id, _) = row(&url, "crash").await.unwrap();
    let second = start(url.clone()).await.unwrap();
    let highest = before.iter().copied().max().unwrap_or(0);
    let client = reqwest::Client::new();
    let mut after = Vec::new();
    let began = Instant::now();
    while after.iter().copied().max().unwrap_or(0) <= highest {
        assert!(
            began.elapsed() < Duration::from_secs(30),
            "the second server is stuck"
        );
        let r = client
            .get(format!(
                "{}/api/v1/segment/crash/ids?count=100",
                second.address
            ))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.text().await.unwrap());
        let body: serde_json::Value = r.json().await.unwrap();
        after.extend(serde_json::from_value::<Vec<i64>>(body["ids"].clone()).unwrap());
    }
    let handed: HashSet<i64> = before.iter().copied().collect();
    let twice = after.iter().filter(|id| handed.contains(id)).count();
    CrashRun {
        before,
        errors,
        after,
        recovered_max_id,
        twice,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB (a private instance): scripts/test.sh runs it"]
async fn kill_9_of_a_lossy_mariadb_repeats_ids_only_with_the_override() {
    let db = tokio::task::spawn_blocking(|| PrivateMariaDb::start("durability-crash"))
        .await
        .unwrap();
    let db = Arc::new(db);
    let runs: usize = std::env::var("LEAFID_CRASH_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);

    let mut total = 0;
    for run in 1..=runs {
        let r = crash_run(&db, true).await;
        let highest = r.before.iter().copied().max().unwrap_or(0);
        eprintln!(
            "override on, run {run}: {} ids before the kill (highest {highest}), max_id after \
             recovery {} ({} ids lost from the row), {} ids after the restart, {} handed out \
             twice; errors {:?}",
            r.before.len(),
            r.recovered_max_id,
            (highest + 1 - r.recovered_max_id).max(0),
            r.after.len(),
            r.twice,
            r.errors
        );
        assert!(r.before.len() >= 2000, "too little load before the kill");
        total += r.twice;
    }
    eprintln!("override on: {total} ids handed out twice in {runs} runs");
    // innodb_flush_log_at_trx_commit = 0 loses up to a second of commits; with leases every
    // few milliseconds up to the kill, a run without any loss proves nothing about the check.
    assert!(
        total > 0,
        "no id handed out twice in {runs} runs: the crash lost no lease, the experiment proved nothing"
    );

    let r = crash_run(&db, false).await;
    eprintln!(
        "default: {} ids before the kill (errors {:?}), {} after the restart, {} handed out twice",
        r.before.len(),
        r.errors,
        r.after.len(),
        r.twice
    );
    assert!(
        r.before.is_empty(),
        "ids from a lossy database: {:?}",
        r.before
    );
    // "connection": requests cut by the server's own kill -9.
    assert!(
        r.errors
            .keys()
            .all(|code| code == "lossy_database" || code == "connection"),
        "{:?}",
        r.errors
    );
    assert!(r.errors.get("lossy_database").is_some_and(|&n| n > 0));
    assert_eq!(r.twice, 0);
}
