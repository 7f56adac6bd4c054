//! The snowflake engine over HTTP, and its worker ids in both databases.

use std::sync::Arc;

use leafid::snowflake::engine::GeneratorKind;
use leafid::snowflake::layout::TimeUnit;
use leafid::snowflake::worker::{NodeInfo, WorkerStore};
use leafid::store::{Database, DbOptions};

use crate::on_both_databases;
use crate::support::process::ServerProcess;
use crate::support::{Db, assert_unique_positive, fresh_db, spawn_app, spawn_app_with};

fn ids_of(v: &serde_json::Value) -> Vec<i64> {
    serde_json::from_value(v["ids"].clone()).unwrap()
}

async fn leaf_route_batches_and_decode_agree(db: Db) {
    let app = spawn_app(db).await;
    let r = app.get("/api/snowflake/get/any-key").await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.content_type.starts_with("text/plain"));
    let first: i64 = r.text.parse().unwrap();
    let batch = ids_of(&app.get("/api/v1/snowflake/ids?count=1000").await.json());
    assert_eq!(batch.len(), 1000);
    assert!(batch[0] > first && batch.windows(2).all(|w| w[0] < w[1]));

    let decoded = app
        .get(&format!("/api/v1/snowflake/decode/{first}"))
        .await
        .json();
    assert_eq!(decoded["id"], first);
    assert_eq!(decoded["id_str"], first.to_string());
    assert_eq!(decoded["layout"], "41/10/12");
    assert_eq!(decoded["prefix"], 0);
    let ts = chrono::DateTime::parse_from_rfc3339(decoded["timestamp"].as_str().unwrap()).unwrap();
    let age = chrono::Utc::now().signed_duration_since(ts);
    assert!(age.num_seconds().abs() < 60, "decoded time {ts} is not now");

    let leaf = app
        .get(&format!("/decodeSnowflakeId?snowflakeId={first}"))
        .await
        .json();
    assert_eq!(leaf["workerId"], decoded["worker_id"].to_string());
    assert_eq!(leaf["sequenceId"], decoded["sequence"].to_string());
    assert!(leaf["timestamp"].as_str().unwrap().contains('('));
}
on_both_databases!(leaf_route_batches_and_decode_agree);

#[tokio::test]
async fn bad_ids_to_decode_get_400() {
    let app = spawn_app(Db::Sqlite).await;
    for bad in ["abc", "-1", "9223372036854775808", "1.5", "%20"] {
        let r = app.get(&format!("/api/v1/snowflake/decode/{bad}")).await;
        assert_eq!((r.status, r.code().as_str()), (400, "invalid_id"), "{bad}");
        let r = app
            .get(&format!("/decodeSnowflakeId?snowflakeId={bad}"))
            .await;
        assert_eq!((r.status, r.code().as_str()), (400, "invalid_id"), "{bad}");
    }
    assert_eq!(app.get("/decodeSnowflakeId").await.code(), "invalid_id");
    for bad in ["0", "100001", "x"] {
        let r = app.get(&format!("/api/v1/snowflake/ids?count={bad}")).await;
        assert_eq!(r.code(), "invalid_count", "{bad}");
    }
}

async fn big_batches_and_concurrent_clients_never_repeat(db: Db) {
    let app = Arc::new(spawn_app(db).await);
    let mut all = ids_of(&app.get("/api/v1/snowflake/ids?count=100000").await.json());
    assert_eq!(all.len(), 100_000);
    let clients: Vec<_> = (0..6)
        .map(|_| {
            let app = app.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for i in 0..200 {
                    if i % 20 == 0 {
                        mine.extend(ids_of(
                            &app.get("/api/v1/snowflake/ids?count=500").await.json(),
                        ));
                    } else {
                        mine.push(
                            app.get("/api/snowflake/get/k")
                                .await
                                .text
                                .parse::<i64>()
                                .unwrap(),
                        );
                    }
                }
                assert!(mine.windows(2).all(|w| w[0] < w[1]), "per-client order");
                mine
            })
        })
        .collect();
    for c in clients {
        all.extend(c.await.unwrap());
    }
    assert_unique_positive(&all);
}
on_both_databases!(big_batches_and_concurrent_clients_never_repeat);

#[tokio::test]
async fn the_direct_generator_serves_too() {
    let app = spawn_app_with(Db::Sqlite, |s| {
        s.snowflake.generator = GeneratorKind::Direct;
    })
    .await;
    let ids = ids_of(&app.get("/api/v1/snowflake/ids?count=20000").await.json());
    assert_unique_positive(&ids);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
}

#[tokio::test]
async fn a_migrated_layout_with_a_prefix_runs_above_its_floor() {
    let app = spawn_app_with(Db::Sqlite, |s| {
        s.snowflake.layout = Some("6+31/13/13".into());
        s.snowflake.epoch = Some("2019-10-07T23:47:11Z".into());
        s.snowflake.unit = Some(TimeUnit::Seconds);
        s.snowflake.min_id_floor = 9090949948782127403;
    })
    .await;
    let ids = ids_of(&app.get("/api/v1/snowflake/ids?count=5000").await.json());
    assert!(
        ids.iter().all(|&id| id > 9090949948782127403),
        "{:?}",
        &ids[..3]
    );
    let d = app
        .get(&format!("/api/v1/snowflake/decode/{}", ids[0]))
        .await
        .json();
    assert_eq!(d["prefix"], 63);
    assert_eq!(d["layout"], "6+31/13/13");
}

/// Two servers on one database: different worker ids, with every strategy that uses it.
async fn two_servers_on_one_database_get_different_worker_ids(db: Db) {
    for strategy in ["lease", "disposable"] {
        let (url, _dir) = fresh_db(db).await;
        let env = [("LEAFID__SNOWFLAKE__WORKER__STRATEGY", strategy)];
        let a = ServerProcess::start(&url, &env);
        let b = ServerProcess::start(&url, &env);
        let client = reqwest::Client::new();
        let mut workers = Vec::new();
        let mut ids = Vec::new();
        for s in [&a, &b] {
            let r: serde_json::Value = client
                .get(format!("{}/api/v1/snowflake/ids?count=3000", s.address))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let mine = ids_of(&r);
            let d: serde_json::Value = client
                .get(format!("{}/api/v1/snowflake/decode/{}", s.address, mine[0]))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            workers.push(d["worker_id"].as_u64().unwrap());
            ids.extend(mine);
        }
        assert_ne!(
            workers[0], workers[1],
            "{strategy}: both servers got worker {}",
            workers[0]
        );
        assert_unique_positive(&ids);
    }
}
on_both_databases!(two_servers_on_one_database_get_different_worker_ids);

fn node(owner: &str) -> NodeInfo {
    NodeInfo {
        host: "test-host".into(),
        port: "1".into(),
        owner: owner.into(),
    }
}

async fn worker_store(db: Db) -> (Arc<dyn WorkerStore>, Option<tempfile::TempDir>) {
    let (url, dir) = fresh_db(db).await;
    let opts = DbOptions {
        pgbouncer: crate::support::postgres::is_pgbouncer(&url),
        url,
        max_connections: 4,
        acquire_timeout: std::time::Duration::from_secs(5),
        mysql_single_statement_lease: true,
    };
    (Database::connect(&opts).await.unwrap().worker_store(), dir)
}

/// Leases: held ids are never handed out twice, expired ones are reused with their stored
/// timestamp, one whose timestamp is ahead of the clock is refused, and running out is an error.
async fn worker_leases_are_exclusive_reused_after_expiry_and_bounded(db: Db) {
    let (store, _dir) = worker_store(db).await;
    let now = 1_700_000_000_000i64;
    let max = 3; // worker ids 0..=3
    let mut held = Vec::new();
    for i in 0..4 {
        let l = store
            .acquire_lease(&node(&format!("o{i}")), 10_000, max, now)
            .await
            .unwrap();
        assert_eq!(l.last_timestamp_ms, 0);
        held.push(l.worker_id);
    }
    held.sort_unstable();
    assert_eq!(held, vec![0, 1, 2, 3]);
    let err = store
        .acquire_lease(&node("o9"), 10_000, max, now + 1)
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("all 4 worker ids are leased"),
        "{err}"
    );

    // o1 renews and records a timestamp; o2 records one far in the future, then both lapse.
    assert!(
        store
            .heartbeat(1, "o1", now + 20_000, now + 5_000)
            .await
            .unwrap()
    );
    assert!(
        store
            .heartbeat(2, "o2", now + 20_000, now + 900_000)
            .await
            .unwrap()
    );
    assert!(
        !store
            .heartbeat(1, "intruder", now + 20_000, now)
            .await
            .unwrap(),
        "only the owner renews"
    );
    store.release(3, "o3", now + 1_000).await.unwrap();

    let later = now + 30_000; // every lease has expired
    let mut reused = Vec::new();
    for i in 0..3 {
        let l = store
            .acquire_lease(&node(&format!("n{i}")), 10_000, max, later)
            .await
            .unwrap();
        reused.push((l.worker_id, l.last_timestamp_ms));
    }
    reused.sort_unstable();
    // Worker 2's stored time is ahead of this clock: it is refused, the others come back with
    // the timestamps their previous holders stored.
    assert_eq!(reused, vec![(0, 0), (1, now + 5_000), (3, now + 1_000)]);
    let err = store
        .acquire_lease(&node("n9"), 10_000, max, later)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ahead of this clock"), "{err}");
    assert!(
        !store
            .heartbeat(0, "o0", later + 10_000, later)
            .await
            .unwrap(),
        "o0 lost its lease"
    );
}
on_both_databases!(worker_leases_are_exclusive_reused_after_expiry_and_bounded);

/// Many servers racing for leases at once still get distinct ids.
async fn racing_lease_claims_never_share_an_id(db: Db) {
    let (store, _dir) = worker_store(db).await;
    let claims: Vec<_> = (0..16)
        .map(|i| {
            let store = store.clone();
            tokio::spawn(async move {
                store
                    .acquire_lease(&node(&format!("r{i}")), 60_000, 1023, 1_000)
                    .await
                    .unwrap()
                    .worker_id
            })
        })
        .collect();
    let mut ids = Vec::new();
    for c in claims {
        ids.push(c.await.unwrap());
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 16);
}
on_both_databases!(racing_lease_claims_never_share_an_id);

async fn disposable_ids_are_new_every_start_and_bounded(db: Db) {
    let (store, _dir) = worker_store(db).await;
    let a = store.assign_disposable(&node("a"), 2).await.unwrap();
    let b = store.assign_disposable(&node("b"), 2).await.unwrap();
    assert_eq!((a, b), (1, 2));
    let err = store.assign_disposable(&node("c"), 2).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("above the layout's largest worker id"),
        "{err}"
    );
}
on_both_databases!(disposable_ids_are_new_every_start_and_bounded);

/// Start-up refuses what cannot serve, with one line naming the key.
#[tokio::test]
async fn invalid_snowflake_settings_stop_start_up_with_a_clear_line() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let cases: [(&[(&str, &str)], &str); 6] = [
        (
            &[("LEAFID__SNOWFLAKE__PRESET", "uid-generator")],
            "ran out of time",
        ),
        (
            &[
                ("LEAFID__SNOWFLAKE__LAYOUT", "30/20/12"),
                ("LEAFID__SNOWFLAKE__EPOCH", "2020-01-01T00:00:00Z"),
                ("LEAFID__SNOWFLAKE__UNIT", "seconds"),
            ],
            "snowflake.layout",
        ),
        (
            &[
                ("LEAFID__SNOWFLAKE__LAYOUT", "30/0/33"),
                ("LEAFID__SNOWFLAKE__EPOCH", "2020-01-01T00:00:00Z"),
                ("LEAFID__SNOWFLAKE__UNIT", "seconds"),
            ],
            "snowflake.layout",
        ),
        (
            &[
                ("LEAFID__SNOWFLAKE__LAYOUT", "30/20/13"),
                ("LEAFID__SNOWFLAKE__EPOCH", "2999-01-01T00:00:00+08:00"),
                ("LEAFID__SNOWFLAKE__UNIT", "seconds"),
            ],
            "in the future",
        ),
        (
            &[("LEAFID__SNOWFLAKE__MIN_ID_FLOOR", "9000000000000000000")],
            "snowflake.min_id_floor",
        ),
        (
            &[
                ("LEAFID__SNOWFLAKE__WORKER__STRATEGY", "static"),
                ("LEAFID__SNOWFLAKE__WORKER__ID", "5000"),
            ],
            "worker id 5000 is larger",
        ),
    ];
    for (env, expected) in cases {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_leafid"))
            .env("LEAFID__DATABASE__URL", &url)
            .env("LEAFID__SERVER__PORT", "0")
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{env:?} started");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("ERROR")).collect();
        assert_eq!(errors.len(), 1, "{env:?}: {stderr}");
        assert!(errors[0].contains(expected), "{env:?}: {}", errors[0]);
    }
}
