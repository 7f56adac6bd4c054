//! One lease's latency and sustained leases per second on each store, SQLite (the baseline),
//! MariaDB and PostgreSQL, measured in one run with the stores interleaved round by round, so a
//! change in the machine's load hits all three alike.
//!
//! `cargo run --release --example store_bench -- [SECONDS_PER_CASE] [ROUNDS]`
//! (`scripts/bench-stores.sh` starts the servers and runs it). The URLs come from
//! `LEAFID_TEST_MYSQL_URL` (`scripts/mariadb.sh start`) and `LEAFID_TEST_POSTGRES_URL`
//! (`scripts/postgres.sh start`); a store whose variable is unset is skipped. A database
//! `leafid_store_bench` is created (dropped first) on each server; SQLite is a file in a temp
//! directory.
//!
//! Cases, each lease an adapted-step lease (`Some(1000)`, a busy tag's steady state) through
//! `Database::segment_store` behind the durability gate, as the server leases:
//! - latency: one task leasing one tag back to back; p50 / p99 of each lease;
//! - sustained: 8 tasks over 100 tags (the pool's 8 connections; SQLite has one writer);
//! - the gate's cost: the latency case also runs on the store without the durability gate, each
//!   round, and the last column is the ratio of the two medians.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use leafid::segment::{BizTag, NewTag, SegmentStore, Step};
use leafid::store::durability::DurabilityGate;
use leafid::store::{Database, DbOptions};

/// The tags the sustained case spreads over.
const TAGS: usize = 100;
/// Tasks (and pool connections) of the sustained case.
const WORKERS: usize = 8;

/// One store under test.
struct Store {
    name: &'static str,
    leases: Arc<dyn SegmentStore>,
    /// The same store without the gate: the gate's cost per lease is the difference.
    raw: Arc<dyn SegmentStore>,
    /// Each round's median latency without the gate.
    raw_round_p50: Vec<f64>,
    /// Every sample of every round: lease latencies (µs), and sustained rates (leases/s).
    latencies: Vec<f64>,
    rates: Vec<f64>,
    /// The median latency of each round, for the per-round ratio.
    round_p50: Vec<f64>,
}

fn options(url: &str) -> DbOptions {
    DbOptions {
        url: url.to_owned(),
        max_connections: WORKERS as u32,
        acquire_timeout: Duration::from_secs(10),
        mysql_single_statement_lease: true,
        pgbouncer: false,
    }
}

/// `url` with its database replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let mut parsed = url::Url::parse(url).expect("a database URL");
    parsed.set_path(&format!("/{name}"));
    parsed.into()
}

/// Connects, migrates and seeds `TAGS` tags; the store behind the durability gate.
async fn open(name: &'static str, url: &str) -> Store {
    let db = Database::connect(&options(url))
        .await
        .unwrap_or_else(|e| panic!("{name}: {e:#}"));
    let gate = DurabilityGate::new(db.clone(), false);
    let report = gate.check_now().await.expect("durability settings");
    assert!(report.is_durable(), "{name}: {}", report.refusal());
    let raw = db.segment_store();
    let leases = gate.segment_store(raw.clone());
    for i in 0..TAGS {
        let tag = NewTag::new(
            BizTag::parse(&format!("bench-{i}")).expect("a valid tag"),
            Step::try_from(1000).expect("a valid step"),
            Some(1),
            None,
        )
        .expect("a valid tag");
        leases.create_tag(&tag).await.expect("create tag");
    }
    Store {
        name,
        leases,
        raw,
        raw_round_p50: Vec::new(),
        latencies: Vec::new(),
        rates: Vec::new(),
        round_p50: Vec::new(),
    }
}

/// Leases one tag back to back for `secs`; each lease's latency in µs.
async fn latency_case(store: &Arc<dyn SegmentStore>, secs: f64) -> Vec<f64> {
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let mut samples = Vec::new();
    while Instant::now() < deadline {
        let started = Instant::now();
        store.lease("bench-0", Some(1000)).await.expect("lease");
        samples.push(started.elapsed().as_secs_f64() * 1e6);
    }
    samples
}

/// `WORKERS` tasks leasing over `TAGS` tags for `secs`; leases per second.
async fn sustained_case(store: &Arc<dyn SegmentStore>, secs: f64) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + Duration::from_secs_f64(secs);
    let tasks: Vec<_> = (0..WORKERS)
        .map(|w| {
            let (store, done) = (store.clone(), done.clone());
            tokio::spawn(async move {
                let mut i = w;
                while Instant::now() < deadline {
                    store
                        .lease(&format!("bench-{}", i % TAGS), Some(1000))
                        .await
                        .expect("lease");
                    done.fetch_add(1, Ordering::Relaxed);
                    i += WORKERS;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    done.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);

    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite://{}", dir.path().join("bench.db").display());
    let mut stores = vec![open("SQLite (file, WAL, FULL)", &sqlite).await];
    if let Ok(base) = std::env::var("LEAFID_TEST_MYSQL_URL") {
        let base = base.trim_end_matches('/');
        let mut admin = <sqlx::MySqlConnection as sqlx::Connection>::connect(base)
            .await
            .expect("connect to MariaDB");
        sqlx::raw_sql(
            "DROP DATABASE IF EXISTS leafid_store_bench; CREATE DATABASE leafid_store_bench",
        )
        .execute(&mut admin)
        .await
        .unwrap();
        stores.push(open("MariaDB", &format!("{base}/leafid_store_bench")).await);
    } else {
        eprintln!("LEAFID_TEST_MYSQL_URL unset: MariaDB skipped");
    }
    if let Ok(base) = std::env::var("LEAFID_TEST_POSTGRES_URL") {
        let mut admin = <sqlx::PgConnection as sqlx::Connection>::connect(&base)
            .await
            .expect("connect to PostgreSQL");
        sqlx::raw_sql("DROP DATABASE IF EXISTS leafid_store_bench")
            .execute(&mut admin)
            .await
            .unwrap();
        sqlx::raw_sql("CREATE DATABASE leafid_store_bench")
            .execute(&mut admin)
            .await
            .unwrap();
        stores.push(open("PostgreSQL", &with_database(&base, "leafid_store_bench")).await);
    } else {
        eprintln!("LEAFID_TEST_POSTGRES_URL unset: PostgreSQL skipped");
    }

    // Warm-up: connections open, caches filled.
    for s in &stores {
        latency_case(&s.leases, 0.2).await;
        sustained_case(&s.leases, 0.2).await;
    }
    for round in 0..rounds {
        // Rotate the order: no store always runs right after the same one.
        let n = stores.len();
        for k in 0..n {
            let s = &mut stores[(round + k) % n];
            let raw = latency_case(&s.raw, secs / 2.0).await;
            s.raw_round_p50.push(quantile(&sorted(&raw), 0.5));
            let samples = latency_case(&s.leases, secs).await;
            s.round_p50.push(quantile(&sorted(&samples), 0.5));
            s.latencies.extend(samples);
            s.rates.push(sustained_case(&s.leases, secs).await);
        }
    }

    let base_p50 = quantile(&sorted(&stores[0].latencies), 0.5);
    let base_rate = quantile(&sorted(&stores[0].rates), 0.5);
    println!(
        "| store | lease p50 | lease p99 | p50 vs SQLite | leases/s, 1 task | leases/s, {WORKERS} tasks x {TAGS} tags | vs SQLite | p50 with / without the gate |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- |");
    for s in &stores {
        let lat = sorted(&s.latencies);
        let (p50, p99) = (quantile(&lat, 0.5), quantile(&lat, 0.99));
        let rate = quantile(&sorted(&s.rates), 0.5);
        // The ratio of each round's medians to the baseline's in the same round: its spread is
        // the run's noise.
        let per_round = sorted(
            &s.round_p50
                .iter()
                .zip(&stores[0].round_p50)
                .map(|(a, b)| a / b)
                .collect::<Vec<_>>(),
        );
        // The gate's cost: each round's gated median over its ungated one, the median of those.
        let gate = sorted(
            &s.round_p50
                .iter()
                .zip(&s.raw_round_p50)
                .map(|(a, b)| a / b)
                .collect::<Vec<_>>(),
        );
        println!(
            "| {} | {:.0} µs | {:.0} µs | {:.2}x (rounds {:.2}..{:.2}) | {:.0} | {:.0} | {:.2}x | {:.2}x (rounds {:.2}..{:.2}) |",
            s.name,
            p50,
            p99,
            p50 / base_p50,
            per_round[0],
            per_round[per_round.len() - 1],
            lat.len() as f64 / (secs * rounds as f64),
            rate,
            rate / base_rate,
            quantile(&gate, 0.5),
            gate[0],
            gate[gate.len() - 1],
        );
    }
    println!(
        "\n{rounds} rounds of {secs} s per case, stores interleaved; medians over the rounds."
    );
}
