//! The snowflake worker lease cache file (`snowflake.worker.cache_file`) on the real binary: a
//! server restarted while its database (MariaDB or PostgreSQL: one test each) is unreachable (a
//! fault proxy refusing and cutting every connection; the shared server keeps running) resumes
//! its worker id from the file only while the cached lease is ahead of its margin, and never
//! shares it.
//!
//! The layout has one worker bit (two worker ids), so a server that claims while the first
//! server's lease is live has no other id to take: it must wait, and may take that id only
//! after the lease ended in the database. Every id any server issued is checked for repeats.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::on_proxied_databases;
use crate::support::Db;
use crate::support::process::ServerProcess;
use crate::support::proxy::proxied_database_on;

/// Two worker ids (one worker bit), 10 sequence bits, milliseconds since 2025.
const LAYOUT: [(&str, &str); 3] = [
    ("LEAFID__SNOWFLAKE__LAYOUT", "52/1/10"),
    ("LEAFID__SNOWFLAKE__EPOCH", "2025-01-01T00:00:00Z"),
    ("LEAFID__SNOWFLAKE__UNIT", "millis"),
];

/// The worker id of an id of [`LAYOUT`].
fn worker_of(id: i64) -> i64 {
    (id >> 10) & 1
}

/// `leafid serve` env: the lease strategy with `lease_secs` (renewed every 2 s, so the margin
/// is 3 s), the direct generator, [`LAYOUT`], and the cache file `cache` ("" for none).
fn env(lease_secs: &str, cache: &str) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        ("LEAFID__SNOWFLAKE__WORKER__STRATEGY", "lease"),
        ("LEAFID__SNOWFLAKE__WORKER__LEASE_SECS", lease_secs),
        ("LEAFID__SNOWFLAKE__WORKER__HEARTBEAT_SECS", "2"),
        ("LEAFID__SNOWFLAKE__GENERATOR", "direct"),
        ("LEAFID__SNOWFLAKE__WORKER__CACHE_FILE", cache),
    ]
    .into_iter()
    .chain(LAYOUT)
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    env.sort();
    env
}

async fn start(url: &str, env: &[(String, String)]) -> ServerProcess {
    let url = url.to_owned();
    let env = env.to_vec();
    tokio::task::spawn_blocking(move || {
        let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        ServerProcess::start(&url, &pairs)
    })
    .await
    .unwrap()
}

fn cache_path(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_owned()
}

/// `(status, body)` of a GET.
async fn get(server: &ServerProcess, path: &str) -> (u16, Value) {
    let resp = reqwest::Client::new()
        .get(format!("{}{path}", server.address))
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let status = resp.status().as_u16();
    let body = resp.json().await.unwrap_or(Value::Null);
    (status, body)
}

/// A batch of 100 snowflake ids, or the refusal's status and code.
async fn batch(server: &ServerProcess) -> Result<Vec<i64>, (u16, String)> {
    let (status, body) = get(server, "/api/v1/snowflake/ids?count=100").await;
    if status != 200 {
        return Err((status, body["code"].as_str().unwrap_or("").to_owned()));
    }
    Ok(body["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect())
}

async fn worker_id(server: &ServerProcess) -> i64 {
    let (_, status) = get(server, "/api/v1/snowflake/status").await;
    status["worker_id"].as_i64().unwrap()
}

/// Waits until `server` hands out snowflake ids, and returns the first batch.
async fn first_batch(server: &ServerProcess, within: Duration) -> Vec<i64> {
    let started = Instant::now();
    loop {
        match batch(server).await {
            Ok(ids) => return ids,
            Err(e) => assert!(
                started.elapsed() < within,
                "no snowflake id within {within:?}: {e:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn assert_no_repeat(all: &[i64]) {
    let mut seen = HashSet::with_capacity(all.len());
    for id in all {
        assert!(*id > 0, "id {id} not positive");
        assert!(seen.insert(*id), "id {id} handed out twice");
    }
}

/// The server restarted within its lease serves from the cache during the outage; a second
/// server started during the outage claims as soon as the database returns and finds the only
/// other worker id held: it waits, serving nothing, as long as the restarted server keeps
/// renewing; only after that server is killed and its lease has ended does it take the id, and
/// then only ticks after every id issued under it. No id repeats.
async fn a_server_restarted_during_an_outage_within_its_lease_serves_and_never_shares_its_worker_id(
    db: Db,
) {
    let (proxy, url, direct) = proxied_database_on(db).await;
    let dir = tempfile::tempdir().unwrap();
    let env_a = env("16", &cache_path(dir.path(), "a.json"));
    // C holds one of the two worker ids throughout, on the direct URL (no outage for it).
    let c = start(&direct, &env("16", "")).await;
    let mut all = first_batch(&c, Duration::from_secs(10)).await;
    let a = start(&url, &env_a).await;
    let mut a_ids = first_batch(&a, Duration::from_secs(10)).await;
    let w_a = worker_id(&a).await;
    assert_ne!(w_a, worker_id(&c).await);
    for _ in 0..20 {
        a_ids.extend(batch(&a).await.unwrap());
    }
    // Past one renewal, so the file holds a renewed lease and a last tick.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    a_ids.extend(batch(&a).await.unwrap());
    a.kill9();
    proxy.go_down();
    let restarted = Instant::now();
    let a2 = start(&url, &env_a).await;
    assert_eq!(worker_id(&a2).await, w_a, "the cached worker id resumed");
    let resumed = a2.log_lines("database unreachable: resumed the worker lease");
    assert_eq!(resumed.len(), 1, "{:?}", a2.log_lines(""));
    let mut a2_ids = first_batch(&a2, Duration::from_secs(2)).await;
    let first_id_ms = restarted.elapsed().as_millis();
    let newest_a = *a_ids.iter().max().unwrap();
    assert!(
        a2_ids
            .iter()
            .all(|id| *id > newest_a && worker_of(*id) == w_a),
        "the resumed server issues after every id of its previous run"
    );
    // B starts during the outage with no cache: up, not ready, no id.
    let b = start(&url, &env("16", &cache_path(dir.path(), "b.json"))).await;
    let (status, ready) = get(&b, "/health/ready").await;
    assert_eq!(status, 503, "{ready}");
    let reason = ready["message"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("no snowflake worker id yet"), "{reason}");
    assert!(matches!(batch(&b).await, Err((503, _))));
    for _ in 0..10 {
        a2_ids.extend(batch(&a2).await.unwrap());
    }
    println!(
        "outage: the restarted server's first ids {first_id_ms} ms after its spawn; {} ids \
         before the database returned",
        a2_ids.len()
    );

    // The database returns: B claims at once and finds both ids held.
    proxy.heal();
    let healed = Instant::now();
    let mut b_refusals = 0;
    while healed.elapsed() < Duration::from_secs(16) {
        a2_ids.extend(batch(&a2).await.expect("the resumed server keeps renewing"));
        all.extend(batch(&c).await.unwrap());
        match batch(&b).await {
            Ok(ids) => panic!(
                "B issued {} ids while the lease of worker {w_a} was live: {:?}",
                ids.len(),
                &ids[..3]
            ),
            Err((503, code)) => {
                assert_eq!(code, "snowflake_not_ready");
                b_refusals += 1;
            }
            Err(e) => panic!("{e:?}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Past the cached lease (12 s after A's last renewal) the resumed server still serves: it
    // renewed under the cached owner.
    let newest_a2 = *a2_ids.iter().max().unwrap();
    a2.kill9();
    // A's lease ends at most 16 s after the kill; B claims every 5 s at most.
    let killed = Instant::now();
    let b_ids = loop {
        match batch(&b).await {
            Ok(ids) => break ids,
            Err(e) => assert!(
                killed.elapsed() < Duration::from_secs(45),
                "B got no id within 45 s of A's kill: {e:?}; B's claims: {:?}",
                b.log_lines("worker id claim failed")
                    .iter()
                    .rev()
                    .take(3)
                    .collect::<Vec<_>>()
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "B's first id {} ms after A's kill",
        killed.elapsed().as_millis()
    );
    assert_eq!(
        worker_id(&b).await,
        w_a,
        "B took the id once its lease ended"
    );
    assert!(
        b_ids.iter().all(|id| *id > newest_a2),
        "B issues after every id of the previous holder"
    );
    println!(
        "B refused {b_refusals} times while worker {w_a} was leased; ids: A {}, A restarted {}, \
         B {}, C {}",
        a_ids.len(),
        a2_ids.len(),
        b_ids.len(),
        all.len()
    );
    all.extend(a_ids);
    all.extend(a2_ids);
    all.extend(b_ids);
    assert_no_repeat(&all);
}
on_proxied_databases!(
    a_server_restarted_during_an_outage_within_its_lease_serves_and_never_shares_its_worker_id
);

/// Restarted after its cached lease ended (within the margin of its end), the server comes up,
/// is not ready with the reason, hands out no id; segment tags answer 503; once the database
/// returns it claims and serves.
async fn a_server_restarted_after_its_lease_ended_is_not_ready_and_issues_no_id(db: Db) {
    let (proxy, url, direct) = proxied_database_on(db).await;
    let dir = tempfile::tempdir().unwrap();
    let env_a = env("6", &cache_path(dir.path(), "a.json"));
    let a = start(&url, &env_a).await;
    let before = first_batch(&a, Duration::from_secs(10)).await;
    a.kill9();
    proxy.go_down();
    // The lease (6 s from the last renewal, at most 2 s ago) is within its 3 s margin after 4 s.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let a2 = start(&url, &env_a).await;
    let (status, ready) = get(&a2, "/health/ready").await;
    assert_eq!(status, 503, "{ready}");
    let reason = ready["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        reason.contains("no snowflake worker id yet") && reason.contains("safety margin"),
        "{reason}"
    );
    for _ in 0..5 {
        assert_eq!(
            batch(&a2).await,
            Err((503, "snowflake_not_ready".to_owned()))
        );
    }
    let (status, body) = get(&a2, "/api/segment/get/orders").await;
    assert_eq!(
        status, 503,
        "segment tags answer 503 while the database is down: {body}"
    );
    // The database returns: the claim retried in the background succeeds.
    proxy.heal();
    let after = first_batch(&a2, Duration::from_secs(15)).await;
    let (status, _) = get(&a2, "/health/ready").await;
    assert_eq!(status, 200);
    let mut all = before;
    all.extend(after);
    assert_no_repeat(&all);
    // The segment engine that started without its database serves once it is back.
    crate::support::exec_sql(
        db,
        &direct,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES ('orders', 1, 100, 'x')",
    )
    .await;
    let (status, body) = get(&a2, "/api/segment/get/orders").await;
    assert_eq!(status, 200, "{body}");
}
on_proxied_databases!(a_server_restarted_after_its_lease_ended_is_not_ready_and_issues_no_id);

/// A corrupt cache file, or one from another layout, is ignored with a log line: the server
/// comes up without a worker id and says why.
async fn a_corrupt_cache_file_or_one_of_another_layout_is_ignored_with_a_log_line(db: Db) {
    let (proxy, url, _direct) = proxied_database_on(db).await;
    let dir = tempfile::tempdir().unwrap();
    let path = cache_path(dir.path(), "a.json");
    // A real file of this layout, then the same file read under another layout.
    let a = start(&url, &env("16", &path)).await;
    first_batch(&a, Duration::from_secs(10)).await;
    a.kill9();
    assert!(Path::new(&path).exists());
    proxy.go_down();
    let mut other_layout = env("16", &path);
    other_layout.retain(|(k, _)| !k.starts_with("LEAFID__SNOWFLAKE__LAYOUT"));
    other_layout.push(("LEAFID__SNOWFLAKE__LAYOUT".into(), "51/2/10".into()));
    let b = start(&url, &other_layout).await;
    assert_eq!(
        b.log_lines("worker lease cache of another layout or database: ignored")
            .len(),
        1
    );
    assert_eq!(get(&b, "/health/ready").await.0, 503);
    assert!(matches!(batch(&b).await, Err((503, _))));
    b.kill9();

    std::fs::write(&path, b"{\"format\": \"leafid-worker-lease-1\", \"worker_").unwrap();
    let c = start(&url, &env("16", &path)).await;
    assert_eq!(c.log_lines("worker lease cache corrupt: ignored").len(), 1);
    assert_eq!(get(&c, "/health/ready").await.0, 503);
    assert!(matches!(batch(&c).await, Err((503, _))));
}
on_proxied_databases!(a_corrupt_cache_file_or_one_of_another_layout_is_ignored_with_a_log_line);

/// A server stopped with SIGTERM released its lease, so its file is gone first: restarted
/// during an outage it has nothing to resume (a released id may be claimed by anyone at once).
async fn a_server_stopped_gracefully_leaves_no_lease_to_resume(db: Db) {
    let (proxy, url, _direct) = proxied_database_on(db).await;
    let dir = tempfile::tempdir().unwrap();
    let path = cache_path(dir.path(), "a.json");
    let mut env_a = env("16", &path);
    env_a.push(("LEAFID__SERVER__DRAIN_SECS".into(), "0".into()));
    let a = start(&url, &env_a).await;
    first_batch(&a, Duration::from_secs(10)).await;
    assert!(Path::new(&path).exists());
    let status = tokio::task::spawn_blocking(move || a.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!Path::new(&path).exists(), "removed before the release");
    proxy.go_down();
    let a2 = start(&url, &env_a).await;
    let (status, ready) = get(&a2, "/health/ready").await;
    assert_eq!(status, 503, "{ready}");
    let reason = ready["message"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("no usable cached worker lease"), "{reason}");
    assert!(matches!(batch(&a2).await, Err((503, _))));
}
on_proxied_databases!(a_server_stopped_gracefully_leaves_no_lease_to_resume);
