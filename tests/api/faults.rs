//! Faults between the server and a real MariaDB or PostgreSQL (one test per server, `mysql` and
//! `postgres`), injected by the fault proxy: the database unreachable, the database slow, an
//! answer that never comes. Each asserts the contract (no duplicate, clean 503s, recovery
//! without a restart) and prints what it measured (`--nocapture` shows it).

use std::time::{Duration, Instant};

use crate::on_proxied_databases;
use crate::support::proxy::spawn_behind_proxy_on;
use crate::support::{Db, TestApp, assert_increasing, assert_unique_positive};

/// The live buffer state of one tag, from `/api/v1/cache`.
pub async fn tag_state(app: &TestApp, tag: &str) -> serde_json::Value {
    let cache = app.get("/api/v1/cache").await.json();
    cache["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["biz_tag"] == tag)
        .cloned()
        .unwrap_or_else(|| panic!("{tag} not cached: {cache}"))
}

/// Waits (bounded by 30 s: a lease can take seconds on a loaded machine) until the tag's next
/// segment is loaded.
pub async fn wait_next_ready(app: &TestApp, tag: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if tag_state(app, tag).await["next_ready"] == true {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("next segment never ready: {}", tag_state(app, tag).await);
}

/// Percentile of sorted durations, in ms.
pub fn pct(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1e3
}

async fn a_database_outage_serves_buffered_ids_then_clean_503s_then_recovers_by_itself(db: Db) {
    const STEP: i64 = 100;
    // The shipped default: before the fail-fast rule every request of the outage waited this.
    const WAIT_MS: u64 = 1_500;
    let (app, proxy) = spawn_behind_proxy_on(db, |s| {
        s.segment.wait_timeout_ms = WAIT_MS;
        s.segment.load_timeout_ms = 500;
        s.segment.max_step = STEP;
        s.database.acquire_timeout_ms = 300;
        s.snowflake.enabled = false;
    })
    .await;
    app.create_tag("outage", STEP, 1).await;
    let mut ids = Vec::new();
    for _ in 0..20 {
        ids.push(app.leaf_id("outage").await);
    }
    wait_next_ready(&app, "outage").await;

    // The database goes away: live connections cut, new ones refused.
    proxy.go_down();
    let mut served_during_outage = 0;
    let first_error = loop {
        let started = Instant::now();
        let r = app.get("/api/segment/get/outage").await;
        if r.status != 200 {
            break (r, started.elapsed());
        }
        ids.push(r.text.parse().unwrap());
        served_during_outage += 1;
        assert!(served_during_outage <= 2 * STEP, "ids from nowhere");
    };
    assert_eq!(
        served_during_outage,
        2 * STEP - 20,
        "every buffered id is served"
    );
    let (r, took) = first_error;
    assert_eq!((r.status, r.code().as_str()), (503, "segments_not_ready"));
    assert!(r.retry_after.is_some(), "Retry-After on {}", r.text);
    assert!(
        took < Duration::from_millis(WAIT_MS + 1000),
        "failed after {took:?}, deadline {WAIT_MS} ms"
    );
    // The lease is known to be failing: requests without ids answer at once (fail fast), only
    // the one that starts the attempt due waits for it.
    let mut error_ms = vec![took];
    for i in 0..30 {
        let started = Instant::now();
        let path = if i % 2 == 0 {
            "/api/segment/get/outage"
        } else {
            "/api/v1/segment/outage/ids?count=3"
        };
        let r = app.get(path).await;
        error_ms.push(started.elapsed());
        assert_eq!((r.status, r.code().as_str()), (503, "segments_not_ready"));
        assert!(r.retry_after.is_some());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    error_ms.sort();
    let median = pct(&error_ms, 0.5);
    assert!(
        median < 50.0,
        "median answer during the outage {median:.1} ms"
    );
    crate::support::record_figure(
        &format!("failfast-proxy-cut-{db:?}"),
        &format!(
            "fail fast, proxy cut ({db:?}, wait_timeout {WAIT_MS} ms): {} answers without ids, \
             median {median:.1} ms, p90 {:.1} ms, max {:.1} ms",
            error_ms.len(),
            pct(&error_ms, 0.9),
            pct(&error_ms, 1.0)
        ),
    );
    let ready = app.get("/health/ready").await;
    assert_eq!((ready.status, ready.code().as_str()), (503, "not_ready"));
    assert!(
        ready.text.contains("outage"),
        "names the tag: {}",
        ready.text
    );

    // The database returns: the engine recovers on its own, no restart.
    proxy.heal();
    let healed = Instant::now();
    let recovered = loop {
        let r = app.get("/api/segment/get/outage").await;
        if r.status == 200 {
            break r.text.parse::<i64>().unwrap();
        }
        assert_eq!(r.code(), "segments_not_ready", "{}", r.text);
        assert!(healed.elapsed() < Duration::from_secs(10), "no recovery");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let recovery = healed.elapsed();
    ids.push(recovered);
    ids.extend(app.batch("outage", 250).await);
    assert_eq!(app.get("/health/ready").await.status, 200);
    assert_increasing(&ids);
    assert_unique_positive(&ids);
    eprintln!(
        "outage: {served_during_outage} ids served from memory while the database was down; \
         503 after {:.0}..{:.0} ms (wait_timeout {WAIT_MS} ms); recovered {:.0} ms after the \
         database returned; {} ids, no duplicate",
        pct(&error_ms, 0.0),
        pct(&error_ms, 1.0),
        recovery.as_secs_f64() * 1e3,
        ids.len()
    );
}

on_proxied_databases!(
    a_database_outage_serves_buffered_ids_then_clean_503s_then_recovers_by_itself
);

/// Requests from `clients` tasks, each paced at one request per `every`, for `duration`.
async fn paced_load(
    app: &std::sync::Arc<TestApp>,
    tag: &str,
    clients: usize,
    every: Duration,
    duration: Duration,
) -> (Vec<Duration>, Vec<i64>) {
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let (app, tag) = (app.clone(), tag.to_owned());
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(every);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                let until = Instant::now() + duration;
                let (mut lat, mut ids) = (Vec::new(), Vec::new());
                while Instant::now() < until {
                    tick.tick().await;
                    let started = Instant::now();
                    ids.push(app.leaf_id(&tag).await);
                    lat.push(started.elapsed());
                }
                assert_increasing(&ids);
                (lat, ids)
            })
        })
        .collect();
    let (mut lat, mut ids) = (Vec::new(), Vec::new());
    for t in tasks {
        let (l, i) = t.await.unwrap();
        lat.extend(l);
        ids.extend(i);
    }
    lat.sort();
    (lat, ids)
}

async fn a_slow_database_does_not_slow_requests_down(db: Db) {
    // 400 ids/s against segments of 1000: a preload has 900 ids = 2.25 s to finish, and a lease
    // through +200 ms per round trip takes about 1 s (begin, update, select, commit).
    const STEP: i64 = 1000;
    const LATENCY_MS: u64 = 200;
    let (app, proxy) = spawn_behind_proxy_on(db, |s| {
        s.segment.max_step = STEP;
        s.snowflake.enabled = false;
    })
    .await;
    app.create_tag("slow", STEP, 1).await;
    let app = std::sync::Arc::new(app);
    let (every, phase) = (Duration::from_millis(10), Duration::from_secs(5));
    let (fast, mut ids) = paced_load(&app, "slow", 4, every, phase).await;
    let loads_before = tag_state(&app, "slow").await["loads"].as_u64().unwrap();

    proxy.set_latency(LATENCY_MS);
    let (slow, more) = paced_load(&app, "slow", 4, every, phase).await;
    ids.extend(more);
    let state = tag_state(&app, "slow").await;
    let loads_slow = state["loads"].as_u64().unwrap() - loads_before;
    let lease_ms = state["last_load_latency_ms"].as_f64().unwrap();
    proxy.heal();

    assert_unique_positive(&ids);
    eprintln!(
        "slow database (+{LATENCY_MS} ms per round trip): {} requests without, {} with; \
         p50 {:.1} / {:.1} ms, p99 {:.1} / {:.1} ms, p999 {:.1} / {:.1} ms, max {:.1} / {:.1} ms \
         (without / with); \
         {loads_slow} leases under latency, the last took {lease_ms:.0} ms",
        fast.len(),
        slow.len(),
        pct(&fast, 0.5),
        pct(&slow, 0.5),
        pct(&fast, 0.99),
        pct(&slow, 0.99),
        pct(&fast, 0.999),
        pct(&slow, 0.999),
        pct(&fast, 1.0),
        pct(&slow, 1.0),
    );
    assert!(loads_slow >= 1, "no lease happened under latency");
    assert!(
        lease_ms >= LATENCY_MS as f64 * 2.0,
        "the latency did not apply: {lease_ms} ms"
    );
    // A request that waited for a lease would take about a second: none did, and the tail stays
    // below one round trip.
    assert!(
        pct(&slow, 1.0) < lease_ms * 0.8,
        "a request waited for a lease"
    );
    assert!(
        pct(&slow, 0.99) < 150.0,
        "p99 {:.1} ms followed the database",
        pct(&slow, 0.99)
    );
}

on_proxied_databases!(a_slow_database_does_not_slow_requests_down);

async fn an_admin_write_whose_answer_never_comes_is_a_503_at_the_load_timeout(db: Db) {
    let (app, proxy) = spawn_behind_proxy_on(db, |s| {
        s.segment.load_timeout_ms = 800;
        s.database.acquire_timeout_ms = 5_000;
        s.snowflake.enabled = false;
    })
    .await;
    proxy.stall();
    let started = Instant::now();
    let res = app
        .post("/api/v1/tags", r#"{"biz_tag": "stalled", "step": 10}"#)
        .await;
    let took = started.elapsed();
    proxy.heal();
    assert_eq!(res.status, 503, "{}", res.text);
    assert_eq!(res.code(), "database_unavailable");
    assert!(took < Duration::from_secs(3), "answered after {took:?}");
}
on_proxied_databases!(an_admin_write_whose_answer_never_comes_is_a_503_at_the_load_timeout);
