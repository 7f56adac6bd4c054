//! Contention and size: several servers racing on one tag with a tiny step, and 10,000 tags
//! next to a hot one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::faults::pct;
use crate::support::mysql::{create_database, exec_in};
use crate::support::process::ServerProcess;
use crate::support::{assert_increasing, assert_unique_positive};

async fn get(client: &reqwest::Client, url: &str) -> (u16, String) {
    let r = client.get(url).send().await.unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn servers_racing_on_one_tag_with_step_1_neither_repeat_nor_starve() {
    let url = create_database().await;
    // max_step 4: the adaptive step may double from 1 only to 4, so nearly every request leases.
    let env = [
        ("LEAFID__SNOWFLAKE__ENABLED", "false"),
        ("LEAFID__SEGMENT__MAX_STEP", "4"),
    ];
    let servers: Vec<ServerProcess> = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            (0..3).map(|_| ServerProcess::start(&url, &env)).collect()
        })
        .await
        .unwrap()
    };
    exec_in(
        &url,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('race', 1, 1)",
    )
    .await;
    let addresses: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.address.clone()).collect());
    let started = Instant::now();
    let clients: Vec<_> = (0..12)
        .map(|c| {
            let addresses = addresses.clone();
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let base = &addresses[c % 3];
                let (mut ids, mut lat) = (Vec::new(), Vec::new());
                for i in 0..60 {
                    let t = Instant::now();
                    let (status, text) = if (i + c) % 6 == 0 {
                        get(&client, &format!("{base}/api/v1/segment/race/ids?count=5")).await
                    } else {
                        get(&client, &format!("{base}/api/segment/get/race")).await
                    };
                    lat.push(t.elapsed());
                    assert_eq!(status, 200, "client {c} request {i} starved: {text}");
                    if text.starts_with('{') {
                        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                        ids.extend(serde_json::from_value::<Vec<i64>>(v["ids"].clone()).unwrap());
                    } else {
                        ids.push(text.parse::<i64>().unwrap());
                    }
                }
                assert_increasing(&ids);
                (ids, lat)
            })
        })
        .collect();
    let (mut all, mut lat) = (Vec::new(), Vec::new());
    for c in clients {
        let (ids, l) = tokio::time::timeout(Duration::from_secs(60), c)
            .await
            .expect("a client deadlocked")
            .unwrap();
        all.extend(ids);
        lat.extend(l);
    }
    let took = started.elapsed();
    assert_eq!(all.len(), 12 * (50 + 10 * 5));
    assert_unique_positive(&all);
    let (max_id, _) = crate::support::mysql::row(&url, "race").await.unwrap();
    lat.sort();
    eprintln!(
        "3 servers, step 1 (adaptive up to 4), 12 clients: {} ids in {:.1} s, max_id {max_id} \
         (ids leased but unused: {}), request p50 {:.1} ms p99 {:.1} ms max {:.1} ms, no duplicate",
        all.len(),
        took.as_secs_f64(),
        max_id - 1 - all.len() as i64,
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        pct(&lat, 1.0)
    );
}

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A server process seen through HTTP.
struct Remote {
    client: reqwest::Client,
    base: String,
}

impl Remote {
    /// How many tags `/api/v1/cache` lists.
    async fn cached_tags(&self) -> usize {
        let (status, text) = get(&self.client, &format!("{}/api/v1/cache", self.base)).await;
        assert_eq!(status, 200, "{text}");
        let cache: serde_json::Value = serde_json::from_str(&text).unwrap();
        cache["tags"].as_array().unwrap().len()
    }

    /// One id from the Leaf route (asserting 200).
    async fn leaf_id(&self, tag: &str) -> i64 {
        let (status, text) = get(
            &self.client,
            &format!("{}/api/segment/get/{tag}", self.base),
        )
        .await;
        assert_eq!(status, 200, "{text}");
        text.parse().unwrap_or_else(|_| panic!("not an id: {text}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn ten_thousand_tags_and_a_hot_tag_keep_memory_bounded_and_requests_flowing() {
    const TAGS: usize = 10_000;
    let url = create_database().await;
    // A server process of its own, so its memory is measured alone: an in-process server's
    // would include whatever the tests running beside it allocate (a panicking test's
    // backtrace symbolization took 330 MiB once).
    let server = {
        let url = url.clone();
        tokio::task::spawn_blocking(move || {
            ServerProcess::start(
                &url,
                &[
                    ("LEAFID__SERVER__WORKERS", "2"),
                    ("LEAFID__SEGMENT__REFRESH_INTERVAL_SECS", "1"),
                    ("LEAFID__SNOWFLAKE__ENABLED", "false"),
                    // A cold tag's first lease races the refresh and the hot client for
                    // MariaDB: on a loaded machine it can take more than 1 s, which would be a
                    // 503 here. (The hot tag's bound is its latency, asserted below, not this.)
                    ("LEAFID__SEGMENT__WAIT_TIMEOUT_MS", "10000"),
                ],
            )
        })
        .await
        .unwrap()
    };
    let app = Remote {
        client: reqwest::Client::new(),
        base: server.address.clone(),
    };
    let values: Vec<String> = std::iter::once("('hot', 1, 1000)".to_owned())
        .chain((0..TAGS).map(|i| format!("('cold-{i:05}', 1, 10)")))
        .collect();
    exec_in(
        &url,
        &format!(
            "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES {}",
            values.join(",")
        ),
    )
    .await;
    let app = Arc::new(app);
    // Wait (bounded by 60 s: the refresh runs every second, but reads and registers 10,001
    // rows, slow on a loaded machine) for the refresh loop to pick the rows up.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let n = app.cached_tags().await;
        if n > TAGS {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the refresh loop registered {n} of {} tags in 60 s",
            TAGS + 1
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let rss_start = rss_kib(server.pid());

    // Two passes over every cold tag (a load each, then ids from memory) while a client hammers
    // the hot tag and the refresh loop re-reads 10,001 rows every second.
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let hot = {
        let (app, done) = (app.clone(), done.clone());
        tokio::spawn(async move {
            let (mut ids, mut lat) = (Vec::new(), Vec::new());
            let until = Instant::now() + Duration::from_secs(60);
            while Instant::now() < until && !done.load(std::sync::atomic::Ordering::Relaxed) {
                let t = Instant::now();
                ids.push(app.leaf_id("hot").await);
                lat.push(t.elapsed());
            }
            (ids, lat)
        })
    };
    let mut rss_after_pass = Vec::new();
    for pass in 0..2 {
        let cold: Vec<_> = (0..4)
            .map(|w| {
                let app = app.clone();
                tokio::spawn(async move {
                    let mut ids = Vec::new();
                    for i in (w..TAGS).step_by(4) {
                        ids.push(app.leaf_id(&format!("cold-{i:05}")).await);
                    }
                    ids
                })
            })
            .collect();
        for c in cold {
            let ids = c.await.unwrap();
            assert!(ids.iter().all(|&id| id == pass + 1), "pass {pass}");
        }
        rss_after_pass.push(rss_kib(server.pid()));
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let (hot_ids, mut lat) = hot.await.unwrap();
    assert_increasing(&hot_ids);
    assert_unique_positive(&hot_ids);
    lat.sort();
    assert_eq!(app.cached_tags().await, TAGS + 1);
    let grown_mib = |kib: u64| kib.saturating_sub(rss_start) as f64 / 1024.0;
    eprintln!(
        "{TAGS} tags + a hot tag: RSS +{:.1} MiB after the first pass, +{:.1} MiB after the \
         second; hot tag {} requests meanwhile, p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        grown_mib(rss_after_pass[0]),
        grown_mib(rss_after_pass[1]),
        hot_ids.len(),
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        pct(&lat, 1.0)
    );
    assert!(
        grown_mib(rss_after_pass[0]) < 64.0,
        "10,000 loaded tags should cost a few MiB"
    );
    assert!(
        grown_mib(rss_after_pass[1]) < grown_mib(rss_after_pass[0]) + 16.0,
        "memory keeps growing with refreshes and repeat requests"
    );
    assert!(
        pct(&lat, 1.0) < 1000.0,
        "the hot tag stalled behind the refresh or the cold loads"
    );
}
