//! Soak test: N minutes of mixed load on several leafid servers sharing one MariaDB database,
//! with faults injected between the servers and the database, then a check that no id was ever
//! issued twice. Not part of CI.
//!
//! ```sh
//! export LEAFID_TEST_MYSQL_URL=$(scripts/mariadb.sh start)   # or --mysql-url URL
//! cargo run --release --example soak -- --minutes 2 [--servers 2] [--clients 8]
//! ```
//!
//! Each server runs in this process on 127.0.0.1 and reaches MariaDB through its own
//! [`FaultProxy`]. Clients mix segment ids (single and batches, on a tag with a large step, one
//! with step 10 and one with step 1) and snowflake ids (single and batches), spread over the
//! servers. Every 10 s a fault is injected: a database outage on one or all servers, +200 ms on
//! every round trip, live connections cut, or a server stopped without grace and started again.
//! The report (stdout and `target/soak-report.txt`) gives requests, ids, errors by code,
//! latency percentiles and duplicates; the exit status is 1 if any id repeated, any id was not
//! positive, or any answer was an unexpected error.

use std::collections::BTreeMap;
use std::net::ToSocketAddrs;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use clap::Parser;
use leafid::config::Settings;
use leafid::startup::Application;
use leafid::testing::FaultProxy;
use sqlx::Connection;
use sqlx::mysql::MySqlConnection;

/// Command line.
#[derive(Debug, Parser)]
struct Args {
    /// How long to run, in minutes (fractions allowed).
    #[arg(long, default_value_t = 2.0)]
    minutes: f64,
    /// The MariaDB/MySQL server (no database name); a fresh database is created there. The
    /// test MariaDB's port differs per checkout: `scripts/mariadb.sh start` prints its URL.
    #[arg(long, env = "LEAFID_TEST_MYSQL_URL")]
    mysql_url: String,
    /// Servers sharing the database.
    #[arg(long, default_value_t = 2)]
    servers: usize,
    /// Concurrent clients.
    #[arg(long, default_value_t = 8)]
    clients: usize,
}

/// Segment tags and their steps: a roomy one, a small one, and one leased id by id.
const TAGS: [(&str, i64); 3] = [("soak-big", 1000), ("soak-small", 10), ("soak-one", 1)];

/// What one client saw.
#[derive(Default)]
struct ClientLog {
    /// Segment ids per tag index.
    segment: [Vec<i64>; 3],
    /// Snowflake ids.
    snowflake: Vec<u64>,
    /// Successful requests.
    ok: u64,
    /// Errors by code (`connection` for transport errors).
    errors: BTreeMap<String, u64>,
    /// Latency of every request, in microseconds.
    latency_us: Vec<u32>,
}

/// A small deterministic generator, enough to vary the load.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// One server in this process, behind its proxy.
struct Server {
    proxy: FaultProxy,
    db_url: String,
    handle: actix_web::dev::ServerHandle,
}

fn settings(db_url: &str) -> anyhow::Result<Settings> {
    let mut s = Settings::load(None)?;
    s.server.port = 0;
    s.server.workers = 2;
    s.server.shutdown_timeout_secs = 2;
    s.database.url = db_url.to_owned();
    s.database.acquire_timeout_ms = 1000;
    s.segment.wait_timeout_ms = 1000;
    s.segment.load_timeout_ms = 2000;
    s.segment.max_step = 10_000;
    s.snowflake.worker.strategy = leafid::snowflake::worker::WorkerStrategy::Lease;
    Ok(s)
}

async fn start_server(db_url: &str) -> anyhow::Result<(String, actix_web::dev::ServerHandle)> {
    let app = Application::build(settings(db_url)?).await?;
    let address = format!("http://127.0.0.1:{}", app.port());
    let handle = app.handle();
    tokio::spawn(app.run_until_stopped());
    Ok((address, handle))
}

async fn one_request(client: &reqwest::Client, url: &str) -> Result<serde_json::Value, String> {
    let resp = client
        .get(url)
        .send()
        .await
        .map_err(|_| "connection".to_owned())?;
    let status = resp.status();
    let text = resp.text().await.map_err(|_| "connection".to_owned())?;
    if status.is_success() {
        // Leaf routes answer a bare number; v1 routes a JSON object.
        serde_json::from_str(&text).map_err(|_| format!("bad body {text:?}"))
    } else {
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        Err(v["code"].as_str().unwrap_or("not_json").to_owned())
    }
}

async fn client_loop(
    seed: u64,
    addresses: Arc<RwLock<Vec<String>>>,
    stop: Arc<AtomicBool>,
) -> ClientLog {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("http client");
    let mut rng = XorShift(seed | 1);
    let mut log = ClientLog::default();
    while !stop.load(Ordering::Relaxed) {
        let base = {
            let a = addresses.read().unwrap_or_else(|e| e.into_inner());
            a[rng.next() as usize % a.len()].clone()
        };
        let tag = rng.next() as usize % TAGS.len();
        let count = 1 + rng.next() % 50;
        let kind = rng.next() % 4;
        let url = match kind {
            0 => format!("{base}/api/segment/get/{}", TAGS[tag].0),
            1 => format!("{base}/api/v1/segment/{}/ids?count={count}", TAGS[tag].0),
            2 => format!("{base}/api/snowflake/get/soak"),
            _ => format!("{base}/api/v1/snowflake/ids?count={count}"),
        };
        let started = Instant::now();
        let result = one_request(&client, &url).await;
        log.latency_us
            .push(started.elapsed().as_micros().min(u32::MAX as u128) as u32);
        match result {
            Ok(v) => {
                log.ok += 1;
                match kind {
                    0 => log.segment[tag].push(v.as_i64().expect("id")),
                    1 => log.segment[tag].extend(
                        v["ids"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|x| x.as_i64().unwrap()),
                    ),
                    2 => log.snowflake.push(v.as_u64().expect("id")),
                    _ => log.snowflake.extend(
                        v["ids"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|x| x.as_u64().unwrap()),
                    ),
                }
            }
            Err(code) => {
                *log.errors.entry(code).or_default() += 1;
                // A client backs off a little after an error, as a real one would.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    log
}

/// Sorts `ids` and returns how many values occur more than once.
fn duplicates<T: Ord + Copy>(ids: &mut [T]) -> usize {
    ids.sort_unstable();
    ids.windows(2).filter(|w| w[0] == w[1]).count()
}

fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    f64::from(sorted[i]) / 1e3
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if std::env::var_os("RUST_LOG").is_some() {
        leafid::telemetry::init(leafid::config::LogFormat::Text);
    }
    let base_url = args.mysql_url.trim_end_matches('/').to_owned();
    let upstream = {
        let rest = base_url
            .rsplit_once('@')
            .map_or(base_url.as_str(), |(_, r)| r);
        let host_port = rest.split('/').next().unwrap_or(rest);
        anyhow::ensure!(
            host_port.starts_with("127.0.0.1:") || host_port.starts_with("localhost:"),
            "the soak test only sends traffic to 127.0.0.1"
        );
        host_port
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| anyhow::anyhow!("cannot resolve {host_port}"))?
    };
    let db_name = format!(
        "leafid_soak_{}_{}",
        std::process::id(),
        chrono::Utc::now().timestamp()
    );
    let mut admin = MySqlConnection::connect(&base_url).await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db_name}")))
        .execute(&mut admin)
        .await?;
    let (scheme, rest) = base_url.split_once("://").unwrap_or(("mysql", &base_url));
    let creds = rest.rsplit_once('@').map_or("", |(c, _)| c);

    let mut servers = Vec::new();
    let mut addresses = Vec::new();
    for _ in 0..args.servers.max(1) {
        let proxy = FaultProxy::start(upstream).await?;
        let db_url = format!("{scheme}://{creds}@{}/{db_name}", proxy.addr());
        let (address, handle) = start_server(&db_url).await?;
        addresses.push(address);
        servers.push(Server {
            proxy,
            db_url,
            handle,
        });
    }
    let mut db = MySqlConnection::connect(&format!("{base_url}/{db_name}")).await?;
    for (tag, step) in TAGS {
        sqlx::query("INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES (?, 1, ?)")
            .bind(tag)
            .bind(step)
            .execute(&mut db)
            .await?;
    }
    let addresses = Arc::new(RwLock::new(addresses));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let clients: Vec<_> = (0..args.clients.max(1))
        .map(|c| {
            tokio::spawn(client_loop(
                0x9E37_79B9_7F4A_7C15 ^ (c as u64 + 1),
                addresses.clone(),
                stop.clone(),
            ))
        })
        .collect();

    // Faults, one every 10 s, in rotation.
    let run_for = Duration::from_secs_f64(args.minutes * 60.0);
    let mut fault_log = Vec::new();
    let restarts = AtomicU64::new(0);
    let mut round = 0usize;
    while started.elapsed() + Duration::from_secs(10) <= run_for {
        tokio::time::sleep(Duration::from_secs(5)).await;
        let n = servers.len();
        let at = started.elapsed().as_secs();
        match round % 5 {
            0 => {
                let s = &servers[round % n];
                s.proxy.go_down();
                tokio::time::sleep(Duration::from_secs(3)).await;
                s.proxy.heal();
                fault_log.push(format!(
                    "{at:>4} s: database unreachable for 3 s from one server"
                ));
            }
            1 => {
                servers.iter().for_each(|s| s.proxy.set_latency(200));
                tokio::time::sleep(Duration::from_secs(4)).await;
                servers.iter().for_each(|s| s.proxy.heal());
                fault_log.push(format!(
                    "{at:>4} s: +200 ms per database round trip for 4 s, all servers"
                ));
            }
            2 => {
                servers.iter().for_each(|s| s.proxy.cut());
                fault_log.push(format!(
                    "{at:>4} s: live database connections cut, all servers"
                ));
            }
            3 => {
                servers.iter().for_each(|s| s.proxy.go_down());
                tokio::time::sleep(Duration::from_secs(2)).await;
                servers.iter().for_each(|s| s.proxy.heal());
                fault_log.push(format!(
                    "{at:>4} s: database unreachable for 2 s, all servers"
                ));
            }
            _ => {
                let i = round % n;
                servers[i].handle.stop(false).await;
                let (address, handle) = start_server(&servers[i].db_url).await?;
                servers[i].handle = handle;
                addresses.write().unwrap_or_else(|e| e.into_inner())[i] = address;
                restarts.fetch_add(1, Ordering::Relaxed);
                fault_log.push(format!(
                    "{at:>4} s: server {i} stopped without grace and started again"
                ));
            }
        }
        round += 1;
    }
    let left = run_for.saturating_sub(started.elapsed());
    tokio::time::sleep(left).await;
    stop.store(true, Ordering::Relaxed);

    let mut total = ClientLog::default();
    for c in clients {
        let log = c.await?;
        total.ok += log.ok;
        for (k, v) in log.errors {
            *total.errors.entry(k).or_default() += v;
        }
        for (i, ids) in log.segment.into_iter().enumerate() {
            total.segment[i].extend(ids);
        }
        total.snowflake.extend(log.snowflake);
        total.latency_us.extend(log.latency_us);
    }
    let elapsed = started.elapsed();
    for s in &servers {
        s.handle.stop(true).await;
    }

    let mut lines = Vec::new();
    let requests = total.ok + total.errors.values().sum::<u64>();
    lines.push(format!(
        "leafid soak: {:.1} min, {} servers, {} clients, MariaDB through a fault proxy",
        elapsed.as_secs_f64() / 60.0,
        servers.len(),
        args.clients
    ));
    lines.push(format!(
        "requests: {requests} ({:.0}/s), ok {}, errors {:?}",
        requests as f64 / elapsed.as_secs_f64(),
        total.ok,
        total.errors
    ));
    let mut failed = false;
    let mut id_total = 0usize;
    for (i, (tag, step)) in TAGS.iter().enumerate() {
        let ids = &mut total.segment[i];
        let dup = duplicates(ids);
        let bad = ids.first().is_some_and(|&f| f <= 0);
        failed |= dup > 0 || bad;
        id_total += ids.len();
        lines.push(format!(
            "segment {tag} (step {step}): {} ids, {dup} duplicates, smallest {:?}",
            ids.len(),
            ids.first()
        ));
    }
    let dup = duplicates(&mut total.snowflake);
    let bad = total
        .snowflake
        .iter()
        .any(|&id| id == 0 || id > i64::MAX as u64);
    failed |= dup > 0 || bad;
    id_total += total.snowflake.len();
    lines.push(format!(
        "snowflake: {} ids, {dup} duplicates",
        total.snowflake.len()
    ));
    total.latency_us.sort_unstable();
    lines.push(format!(
        "ids: {id_total}; latency p50 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
        pct(&total.latency_us, 0.5),
        pct(&total.latency_us, 0.99),
        pct(&total.latency_us, 0.999),
        pct(&total.latency_us, 1.0)
    ));
    let expected = [
        "segments_not_ready",
        "snowflake_not_ready",
        "connection",
        "database_unavailable",
    ];
    let unexpected: Vec<_> = total
        .errors
        .keys()
        .filter(|k| !expected.contains(&k.as_str()))
        .collect();
    failed |= !unexpected.is_empty();
    lines.push(format!("faults ({}):", fault_log.len()));
    lines.extend(fault_log.iter().map(|f| format!("  {f}")));
    lines.push(if failed {
        format!("RESULT: FAILED (unexpected errors {unexpected:?})")
    } else {
        "RESULT: ok, every id unique and positive".to_owned()
    });
    let report = lines.join("\n") + "\n";
    print!("{report}");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/target/soak-report.txt");
    std::fs::write(path, &report)?;
    println!("report written to {path}");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP DATABASE {db_name}")))
        .execute(&mut admin)
        .await?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
