//! A real 3-node MariaDB Galera cluster (`scripts/galera.sh`), one leafid server per node: same-tag
//! leases sent to different nodes fail certification (1213) and are retried, a node killed under
//! load leaves the others serving, and worker-id leases claimed at once on three nodes stay
//! distinct. Each test prints its figures (`--nocapture` shows them).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::assert_unique_positive;
use crate::support::galera::{
    cluster_conflicts, create_database, insert_tag_everywhere, script, serial,
};
use crate::support::process::ServerProcess;

/// The segment tests' tag: DB step 5, adapted at most to 10 (`MAX_STEP`), so every server
/// leases every few requests and the three nodes fight over the row all the time.
const TAG: &str = "galera";
const CLIENTS_PER_SERVER: usize = 4;

/// What one client saw from its server.
#[derive(Default)]
struct Tally {
    ids: Vec<i64>,
    /// When each 200 came back.
    oks: Vec<Instant>,
    /// 503 error codes and their counts.
    unavailable: BTreeMap<String, usize>,
}

/// One request (every 4th a batch of 4 on the v1 route, else Leaf's route). A non-200 must be a
/// 503 with a JSON error body; anything else (another status, a dropped connection) panics.
async fn request(client: &reqwest::Client, base: &str, n: usize) -> Result<Vec<i64>, String> {
    let batch = n.is_multiple_of(4);
    let url = if batch {
        format!("{base}/api/v1/segment/{TAG}/ids?count=4")
    } else {
        format!("{base}/api/segment/get/{TAG}")
    };
    let resp = client
        .get(url)
        .timeout(Duration::from_secs(15))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{base}: no answer: {e}"));
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    match status {
        200 if batch => {
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            Ok(serde_json::from_value(v["ids"].clone()).unwrap())
        }
        200 => Ok(vec![text.parse().unwrap()]),
        503 => {
            let v: serde_json::Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("503 without a JSON body ({e}): {text}"));
            Err(v["code"]
                .as_str()
                .unwrap_or_else(|| panic!("503 body without a code: {text}"))
                .to_owned())
        }
        _ => panic!("{base}: status {status}: {text}"),
    }
}

/// [`CLIENTS_PER_SERVER`] clients per server for `run_for`; the tallies per server.
async fn hammer(servers: &[String], run_for: Duration) -> Vec<Vec<Tally>> {
    let tasks: Vec<Vec<_>> = servers
        .iter()
        .map(|base| {
            (0..CLIENTS_PER_SERVER)
                .map(|c| {
                    let base = base.clone();
                    tokio::spawn(async move {
                        let client = reqwest::Client::new();
                        let mut tally = Tally::default();
                        let started = Instant::now();
                        let mut n = c;
                        while started.elapsed() < run_for {
                            n += 1;
                            match request(&client, &base, n).await {
                                Ok(ids) => {
                                    tally.ids.extend(ids);
                                    tally.oks.push(Instant::now());
                                }
                                Err(code) => {
                                    *tally.unavailable.entry(code).or_default() += 1;
                                    tokio::time::sleep(Duration::from_millis(20)).await;
                                }
                            }
                        }
                        tally
                    })
                })
                .collect()
        })
        .collect();
    let mut per_server = Vec::new();
    for server in tasks {
        let mut tallies = Vec::new();
        for t in server {
            tallies.push(t.await.unwrap());
        }
        per_server.push(tallies);
    }
    per_server
}

/// Starts one server per URL, all at once on a fresh database: they race to migrate it
/// (`leafid_migration_lock` lets one at a time run the migrations, whichever node it writes to).
async fn start_servers(
    urls: &[String],
    env: &[(&'static str, &'static str)],
) -> Vec<ServerProcess> {
    let starts: Vec<_> = urls
        .iter()
        .map(|url| {
            let (url, env) = (url.clone(), env.to_vec());
            tokio::task::spawn_blocking(move || ServerProcess::start(&url, &env))
        })
        .collect();
    let mut servers = Vec::new();
    for s in starts {
        servers.push(s.await.unwrap());
    }
    servers
}

/// `leafid_segment_loads_total` of [`TAG`] on one server (0 if it cannot be read).
async fn leases(client: &reqwest::Client, base: &str) -> u64 {
    let Ok(resp) = client.get(format!("{base}/metrics")).send().await else {
        return 0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| {
            l.starts_with("leafid_segment_loads_total{") && l.contains(&format!("\"{TAG}\""))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

fn segment_env(single_statement: bool) -> Vec<(&'static str, &'static str)> {
    vec![
        ("LEAFID__SNOWFLAKE__ENABLED", "false"),
        ("LEAFID__SEGMENT__MAX_STEP", "10"),
        (
            "LEAFID__DATABASE__MYSQL_SINGLE_STATEMENT_LEASE",
            if single_statement { "true" } else { "false" },
        ),
        // The retry loop logs each 1213 it retries at debug level: counted below.
        ("RUST_LOG", "info,leafid::store=debug,leafid::segment=debug"),
    ]
}

/// Asserts each client's ids increase and no id repeats across servers; returns every id. On a
/// repeat, prints who received it and the leases (server log lines) that covered it.
fn check_ids(per_server: &[Vec<Tally>], servers: &[ServerProcess]) -> Vec<i64> {
    let mut seen: BTreeMap<i64, Vec<(usize, usize)>> = BTreeMap::new();
    for (s, tallies) in per_server.iter().enumerate() {
        for (c, t) in tallies.iter().enumerate() {
            for id in &t.ids {
                seen.entry(*id).or_default().push((s, c));
            }
        }
    }
    if let Some((id, who)) = seen.iter().find(|(_, who)| who.len() > 1) {
        eprintln!("id {id} went to (server, client) {who:?}; the leases covering it:");
        for (i, s) in servers.iter().enumerate() {
            for line in s.log_lines("segment loaded") {
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                let (max_id, size) = (v["max_id"].as_i64(), v["size"].as_i64());
                if let (Some(max_id), Some(size)) = (max_id, size)
                    && (max_id - size..max_id).contains(id)
                {
                    eprintln!("  server {i}: {line}");
                }
            }
        }
    }
    let mut all = Vec::new();
    for tallies in per_server {
        for t in tallies {
            crate::support::assert_increasing(&t.ids);
            all.extend(&t.ids);
        }
    }
    assert_unique_positive(&all);
    all
}

fn count_503(tallies: &[Tally]) -> BTreeMap<String, usize> {
    let mut codes = BTreeMap::new();
    for t in tallies {
        for (code, n) in &t.unavailable {
            *codes.entry(code.clone()).or_default() += n;
        }
    }
    codes
}

/// Where the three servers send their writes.
#[derive(Clone, Copy, Debug)]
enum Topology {
    /// One server per node: every node takes writes and certification conflicts (1213) abound.
    OnePerNode,
    /// All three servers on node 1 (docs/deploy.md's recommendation: no conflicts).
    OneWriterNode,
}

/// Three servers hammer one tag with step 5 for 8 s: no id twice, only clean 503s.
async fn three_servers_never_repeat_an_id(topology: Topology, single_statement: bool) {
    let _serial = serial().await;
    let urls = create_database().await;
    let targets = match topology {
        Topology::OnePerNode => urls.clone(),
        Topology::OneWriterNode => vec![urls[0].clone(); urls.len()],
    };
    let servers = start_servers(&targets, &segment_env(single_statement)).await;
    insert_tag_everywhere(&urls, TAG, 5).await;
    let bases: Vec<String> = servers.iter().map(|s| s.address.clone()).collect();
    let before = cluster_conflicts().await;
    let started = Instant::now();
    let per_server = hammer(&bases, Duration::from_secs(8)).await;
    let took = started.elapsed();
    let after = cluster_conflicts().await;

    let all = check_ids(&per_server, &servers);
    let client = reqwest::Client::new();
    let mut loads = 0;
    for b in &bases {
        loads += leases(&client, b).await;
    }
    let retries: usize = servers
        .iter()
        .map(|s| s.log_lines("lease conflict, retrying").len())
        .sum();
    let galera: u64 = before
        .iter()
        .zip(&after)
        .map(|(b, a)| a.unwrap() - b.unwrap())
        .sum();
    let errors: Vec<_> = per_server.iter().map(|t| count_503(t)).collect();
    let moved: usize = servers
        .iter()
        .map(|s| s.log_lines("lease lost a compare-and-set").len())
        .sum();
    let path = if single_statement {
        "single-statement"
    } else {
        "compare-and-set"
    };
    eprintln!(
        "galera, {topology:?}, {path} lease: {} ids in {:.1} s; {loads} leases = {:.0} \
         leases/s; leafid retries {retries} ({:.2}/lease) + compare-and-set misses {moved}; Galera conflicts (cert failures + BF aborts) \
         {galera} ({:.2}/lease); 503s per server {errors:?}",
        all.len(),
        took.as_secs_f64(),
        loads as f64 / took.as_secs_f64(),
        retries as f64 / loads.max(1) as f64,
        galera as f64 / loads.max(1) as f64,
    );
    assert!(loads > 30, "too few leases to have raced: {loads}");
    // The only 503 a lost race may cost is `segments_not_ready` (docs/deploy.md says so).
    for (i, codes) in errors.iter().enumerate() {
        assert!(
            codes.keys().all(|c| c == "segments_not_ready"),
            "server on node {} answered other 503s: {codes:?}",
            i + 1
        );
    }
    match topology {
        // The test is about conflicts: with every node taking writes they must have happened
        // (as 1213s retried, compare-and-set misses, or Galera's own certification counters).
        Topology::OnePerNode => assert!(
            retries + moved > 0 || galera > 0,
            "three writer nodes on one row never conflicted in {loads} leases"
        ),
        // One writer node: certification never fails, so leafid never retries a 1213.
        Topology::OneWriterNode => assert_eq!(
            retries, 0,
            "1213s retried with a single writer node ({galera} Galera conflicts)"
        ),
    }
    for (i, tallies) in per_server.iter().enumerate() {
        let ok: usize = tallies.iter().map(|t| t.oks.len()).sum();
        assert!(
            ok > 50,
            "server on node {} served only {ok} requests",
            i + 1
        );
    }
}

/// One server per node, adapted steps leased with `LAST_INSERT_ID` (one autocommit statement).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a MariaDB Galera cluster: scripts/test.sh runs it"]
async fn three_servers_one_per_galera_node_never_repeat_an_id_single_statement_lease() {
    three_servers_never_repeat_an_id(Topology::OnePerNode, true).await;
}

/// One server per node, every lease a read + compare-and-set. Leaf's transaction (`UPDATE`,
/// `SELECT`, `COMMIT`) repeated 5 ids here in about one run in four (see `MySqlStore::lease_cas`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a MariaDB Galera cluster: scripts/test.sh runs it"]
async fn three_servers_one_per_galera_node_never_repeat_an_id_compare_and_set_lease() {
    three_servers_never_repeat_an_id(Topology::OnePerNode, false).await;
}

/// The recommended topology: all servers write through node 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a MariaDB Galera cluster: scripts/test.sh runs it"]
async fn three_servers_on_one_galera_writer_node_never_repeat_an_id() {
    three_servers_never_repeat_an_id(Topology::OneWriterNode, true).await;
}

/// One server per node while node 2 is killed under load and rejoins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a MariaDB Galera cluster: scripts/test.sh runs it"]
async fn a_galera_node_killed_under_load_leaves_the_other_servers_serving() {
    let _serial = serial().await;
    let urls = create_database().await;
    let servers = start_servers(&urls, &segment_env(true)).await;
    insert_tag_everywhere(&urls, TAG, 5).await;
    let bases: Vec<String> = servers.iter().map(|s| s.address.clone()).collect();
    let killed_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let killer = {
        let killed_at = killed_at.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            tokio::task::spawn_blocking(|| script(&["kill", "2"]))
                .await
                .unwrap();
            *killed_at.lock().unwrap() = Some(Instant::now());
        })
    };
    let per_server = hammer(&bases, Duration::from_secs(10)).await;
    killer.await.unwrap();
    let killed_at = killed_at.lock().unwrap().expect("node 2 was killed");

    check_ids(&per_server, &servers);
    let mut report = Vec::new();
    for (i, tallies) in per_server.iter().enumerate() {
        let before = tallies
            .iter()
            .flat_map(|t| &t.oks)
            .filter(|&&at| at < killed_at)
            .count();
        let after: Vec<Instant> = tallies
            .iter()
            .flat_map(|t| &t.oks)
            .filter(|&&at| at > killed_at)
            .copied()
            .collect();
        let first_after = after.iter().min().map(|at| *at - killed_at);
        report.push(format!(
            "node {}: {before} ok before, {} ok after (first after {first_after:?}), 503s {:?}",
            i + 1,
            after.len(),
            count_503(tallies)
        ));
        assert!(
            before > 20,
            "node {}: only {before} ids before the kill",
            i + 1
        );
        if i != 1 {
            assert!(
                after.len() > 20,
                "the server on node {} stopped serving after node 2 died: {report:?}",
                i + 1
            );
        }
    }
    eprintln!("galera, node 2 killed under load: {}", report.join("; "));

    // Node 2 rejoins (IST), and its server serves again without a restart.
    let rejoin = Instant::now();
    tokio::task::spawn_blocking(|| script(&["start"]))
        .await
        .unwrap();
    let rejoined_in = rejoin.elapsed();
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match request(&client, &bases[1], 1).await {
            Ok(_) => break,
            Err(code) => assert!(
                Instant::now() < deadline,
                "the server on node 2 still fails ({code}) 15 s after the node rejoined"
            ),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!(
        "galera: node 2 rejoined in {:.1} s; its server served again {:.1} s later",
        rejoined_in.as_secs_f64(),
        (rejoin.elapsed() - rejoined_in).as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a MariaDB Galera cluster: scripts/test.sh runs it"]
async fn worker_leases_claimed_at_once_on_three_galera_nodes_are_distinct() {
    let _serial = serial().await;
    let urls = create_database().await;
    let env = [
        ("LEAFID__SEGMENT__ENABLED", "false"),
        ("LEAFID__SNOWFLAKE__WORKER__STRATEGY", "lease"),
    ];
    // All three at once on a fresh database: their migrations and claims race.
    let servers = start_servers(&urls, &env).await;
    let client = reqwest::Client::new();
    let mut worker_ids = Vec::new();
    let mut all = Vec::new();
    for s in &servers {
        let status: serde_json::Value = client
            .get(format!("{}/api/v1/snowflake/status", s.address))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        worker_ids.push(status["worker_id"].as_u64().expect("worker_id"));
        for _ in 0..20 {
            let r: serde_json::Value = client
                .get(format!("{}/api/v1/snowflake/ids?count=50", s.address))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let ids: Vec<u64> = serde_json::from_value(r["ids"].clone()).unwrap();
            all.extend(ids.into_iter().map(|id| id as i64));
        }
    }
    eprintln!("galera: worker ids {worker_ids:?} on nodes 1, 2, 3");
    let mut distinct = worker_ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "worker ids shared: {worker_ids:?}");
    assert_eq!(all.len(), 3000);
    assert_unique_positive(&all);
}

/// A formatted tag (issue 34) on three Galera nodes, one server per node: the period's row is
/// created on first use by whichever server asks first (the others' inserts conflict and are
/// retried or find it), and the period's leases go through the same certification as any
/// tag's. No order number twice; every one of today's period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a MariaDB Galera cluster: scripts/test.sh runs it"]
async fn a_formatted_tag_on_three_galera_nodes_never_repeats_an_id() {
    let _serial = serial().await;
    let urls = create_database().await;
    let servers = start_servers(&urls, &[("LEAFID__ADMIN__TRUST_LOOPBACK", "true")]).await;
    let client = reqwest::Client::new();
    let created = client
        .post(format!("{}/api/v1/tags", servers[0].address))
        .json(&serde_json::json!({
            "biz_tag": "orders", "step": 5,
            "format": {"prefix": "G-", "date": "yyyyMMdd", "width": 9, "reset": "daily"}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let day = chrono::Utc::now().format("%Y%m%d").to_string();
    let mut tasks = Vec::new();
    for (i, s) in servers.iter().enumerate() {
        for _ in 0..CLIENTS_PER_SERVER {
            let (client, base, day) = (client.clone(), s.address.clone(), day.clone());
            tasks.push(tokio::spawn(async move {
                let (mut ids, mut refused) = (Vec::new(), 0usize);
                let started = Instant::now();
                while started.elapsed() < Duration::from_secs(4) {
                    let r = client
                        .get(format!("{base}/api/segment/get/orders"))
                        .timeout(Duration::from_secs(15))
                        .send()
                        .await
                        .unwrap_or_else(|e| panic!("server {i}: no answer: {e}"));
                    match r.status().as_u16() {
                        200 => {
                            let id = r.text().await.unwrap();
                            assert!(id.starts_with(&format!("G-{day}")), "{id}");
                            ids.push(id);
                        }
                        503 => refused += 1,
                        other => panic!("server {i}: {other} {}", r.text().await.unwrap()),
                    }
                }
                (ids, refused)
            }));
        }
    }
    let mut all = Vec::new();
    let mut refused = 0;
    for t in tasks {
        let (ids, r) = t.await.unwrap();
        all.extend(ids);
        refused += r;
    }
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "an order number twice on Galera");
    assert!(n > 100, "only {n} ids");
    eprintln!("galera, formatted tag: {n} order numbers from 3 nodes, none twice; {refused} x 503");
}
