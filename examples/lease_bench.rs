//! Database lease benchmark on MySQL/MariaDB: leases per second for one tag (1 and 8
//! connections) and for many tags (8 connections), with the read + compare-and-set lease and with
//! the single-statement `LAST_INSERT_ID(max_id + step)` lease, measured alternately in one run.
//!
//! `cargo run --release --example lease_bench -- [MYSQL_URL] [SECONDS_PER_CASE]`
//! (default URL: `$LEAFID_TEST_MYSQL_URL`, as `scripts/mariadb.sh start` prints; a database
//! `leafid_lease_bench` is created there).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leafid::segment::LeaseStore;
use leafid::store::mysql::MySqlStore;
use sqlx::Connection;

async fn run_case(store: Arc<MySqlStore>, tags: &[String], workers: usize, secs: f64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..workers)
        .map(|w| {
            let (store, done) = (store.clone(), done.clone());
            let tags = tags.to_vec();
            tokio::spawn(async move {
                let mut i = w;
                while Instant::now() < deadline {
                    // Some(step): the adapted-step lease, the steady state of a busy tag.
                    store
                        .lease(&tags[i % tags.len()], Some(1000))
                        .await
                        .expect("lease");
                    done.fetch_add(1, Ordering::Relaxed);
                    i += workers;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / secs
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let base = args
        .next()
        .or_else(|| std::env::var("LEAFID_TEST_MYSQL_URL").ok())
        .expect("give a MySQL URL or set LEAFID_TEST_MYSQL_URL");
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let base = base.trim_end_matches('/');
    let mut admin = sqlx::mysql::MySqlConnection::connect(base)
        .await
        .expect("connect");
    sqlx::raw_sql("DROP DATABASE IF EXISTS leafid_lease_bench; CREATE DATABASE leafid_lease_bench")
        .execute(&mut admin)
        .await
        .unwrap();
    let url = format!("{base}/leafid_lease_bench");
    let store = MySqlStore::connect(&url, 8, Duration::from_secs(5))
        .await
        .unwrap();
    store.migrate().await.unwrap();
    let tags: Vec<String> = (0..100).map(|i| format!("bench-{i}")).collect();
    for t in &tags {
        sqlx::query("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, 1000)")
            .bind(t)
            .execute(store.pool())
            .await
            .unwrap();
    }
    let one = &tags[..1];
    let cases: [(&str, &[String], usize); 3] = [
        ("1 tag, 1 connection", one, 1),
        ("1 tag, 8 connections", one, 8),
        ("100 tags, 8 connections", &tags, 8),
    ];
    println!(
        "{:<26} {:>22} {:>22} {:>7}",
        "case", "read+CAS /s", "LAST_INSERT_ID /s", "ratio"
    );
    for (name, tags, workers) in cases {
        let mut tx = Vec::new();
        let mut single = Vec::new();
        for _ in 0..3 {
            let s = Arc::new(store.clone().with_single_statement_lease(false));
            tx.push(run_case(s, tags, workers, secs / 3.0).await);
            let s = Arc::new(store.clone().with_single_statement_lease(true));
            single.push(run_case(s, tags, workers, secs / 3.0).await);
        }
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (t, s) = (median(&mut tx), median(&mut single));
        println!("{name:<26} {t:>22.0} {s:>22.0} {:>7.2}", s / t);
    }
}
