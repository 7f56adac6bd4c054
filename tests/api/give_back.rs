//! Giving unused segment ids back on a stop (issue 22, `segment.return_unused_on_shutdown`),
//! with real server processes on SQLite and MariaDB: a rolling restart of three servers under
//! load (no duplicate; the ids wasted per stop measured with the give-back on and off), a lease
//! by another server racing the give-back, and `kill -9` in the middle of it.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use leafid::segment::{BizTag, NewTag, Step};
use leafid::store::{Database, DbOptions};

use crate::support::process::ServerProcess;
use crate::support::{Db, assert_unique_positive, fresh_db};

/// The test's own connection to the servers' database (migrated by the first connect).
async fn open(url: &str) -> Database {
    Database::connect(&DbOptions {
        url: url.to_owned(),
        max_connections: 2,
        acquire_timeout: Duration::from_secs(10),
        mysql_single_statement_lease: true,
        pgbouncer: crate::support::postgres::is_pgbouncer(url),
    })
    .await
    .unwrap()
}

async fn create(db: &Database, tag: &str, step: i64) {
    let tag = NewTag::new(
        BizTag::parse(tag).unwrap(),
        Step::try_from(step).unwrap(),
        Some(1),
        None,
    )
    .unwrap();
    db.segment_store().create_tag(&tag).await.unwrap();
}

async fn max_id(db: &Database, tag: &str) -> i64 {
    db.segment_store()
        .get_tag(tag)
        .await
        .unwrap()
        .unwrap()
        .max_id
}

/// Starts a server (off the async threads: the start blocks until it logs its port).
async fn start(
    url: &str,
    give_back: bool,
    extra: &[(&'static str, &'static str)],
) -> ServerProcess {
    let url = url.to_owned();
    let mut env: Vec<(&'static str, &'static str)> = vec![
        ("LEAFID__SNOWFLAKE__ENABLED", "false"),
        (
            "LEAFID__SEGMENT__RETURN_UNUSED_ON_SHUTDOWN",
            if give_back { "true" } else { "false" },
        ),
    ];
    env.extend_from_slice(extra);
    tokio::task::spawn_blocking(move || ServerProcess::start(&url, &env))
        .await
        .unwrap()
}

/// SIGTERM and the exit status, off the async threads.
async fn stop(server: ServerProcess) {
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
}

/// The summary line of a stopping server's give-back (waits up to 20 s for it).
async fn give_back_line(server: &ServerProcess) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(line) = server.log_lines("unused segment ids given back").pop() {
            return line;
        }
        assert!(Instant::now() < deadline, "no give-back line within 20 s");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits for a server told to stop to exit, successfully.
async fn exited(mut server: ServerProcess) {
    let status = tokio::task::spawn_blocking(move || server.wait_exit(Duration::from_secs(20)))
        .await
        .unwrap();
    assert!(
        status.is_some_and(|s| s.success()),
        "exit status {status:?}"
    );
}

/// The ids of one request to `base`: one id, or a batch of `count`; `None` on any failure.
async fn ids(client: &reqwest::Client, base: &str, tag: &str, count: usize) -> Option<Vec<i64>> {
    let url = if count == 1 {
        format!("{base}/api/segment/get/{tag}")
    } else {
        format!("{base}/api/v1/segment/{tag}/ids?count={count}")
    };
    let resp = client
        .get(url)
        .timeout(Duration::from_secs(10))
        .send()
        .await
        .ok()?;
    if !resp.status().is_success() {
        return None;
    }
    let text = resp.text().await.ok()?;
    if count == 1 {
        text.parse().ok().map(|id| vec![id])
    } else {
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        serde_json::from_value(v["ids"].clone()).ok()
    }
}

/// What one client got: the ids per tag, and how many requests failed.
type Got = (BTreeMap<&'static str, Vec<i64>>, usize);

/// Client tasks spreading requests over the servers in `live` (round robin) and the `tags`,
/// until `stop`; each returns the ids it got per tag and its failed requests.
fn spawn_load(
    clients: usize,
    live: &Arc<Mutex<Vec<String>>>,
    tags: &[&'static str],
    stop: &Arc<AtomicBool>,
    served: &Arc<AtomicUsize>,
) -> Vec<tokio::task::JoinHandle<Got>> {
    (0..clients)
        .map(|c| {
            let (live, stop, served) = (live.clone(), stop.clone(), served.clone());
            let tags = tags.to_vec();
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let mut got: BTreeMap<&'static str, Vec<i64>> = BTreeMap::new();
                let mut failed = 0;
                let mut n = c;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let base = {
                        let live = live.lock().unwrap();
                        if live.is_empty() {
                            None
                        } else {
                            Some(live[n % live.len()].clone())
                        }
                    };
                    let Some(base) = base else {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                        continue;
                    };
                    let tag = tags[n % tags.len()];
                    let count = if n % 3 == 0 { 50 } else { 1 };
                    match ids(&client, &base, tag, count).await {
                        Some(v) => {
                            served.fetch_add(v.len(), Ordering::Relaxed);
                            got.entry(tag).or_default().extend(v);
                        }
                        None => {
                            failed += 1;
                            tokio::time::sleep(Duration::from_millis(5)).await;
                        }
                    }
                }
                (got, failed)
            })
        })
        .collect()
}

/// Waits until the clients got `more` ids beyond what they had.
async fn more_load(served: &AtomicUsize, more: usize) {
    let target = served.load(Ordering::Relaxed) + more;
    let deadline = Instant::now() + Duration::from_secs(60);
    while served.load(Ordering::Relaxed) < target {
        assert!(Instant::now() < deadline, "the load stalled");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const TAGS: [&str; 3] = ["gb-a", "gb-b", "gb-c"];

/// What one rolling restart measured.
struct Rolled {
    /// Ids the clients got.
    served: u64,
    /// Ids leased from the database over the run (the rows' growth), net of the give-backs.
    leased: u64,
    /// Ids the stopping servers gave back, from their logs.
    returned: u64,
    /// Give-backs applied and found the row moved, over all stops and tags.
    applied: u64,
    moved: u64,
}

impl Rolled {
    /// Ids leased and never handed out, per graceful stop (three restarts, three final stops).
    fn wasted_per_stop(&self) -> u64 {
        (self.leased - self.served) / 6
    }
}

/// Stops a server with SIGTERM; with the give-back on, returns its summary line's
/// `(returned_ids, returned_tags, moved)`.
async fn stop_measured(server: ServerProcess, give_back: bool) -> (u64, u64, u64) {
    server.send_term();
    if !give_back {
        // Turned off: the stop gives nothing back (and says nothing about it).
        let logs = tokio::task::spawn_blocking(move || {
            let mut server = server;
            let status = server.wait_exit(Duration::from_secs(20));
            (status, server.log_lines("unused segment ids given back"))
        })
        .await
        .unwrap();
        assert!(
            logs.0.is_some_and(|s| s.success()),
            "exit status {:?}",
            logs.0
        );
        assert!(
            logs.1.is_empty(),
            "gave back while turned off: {:?}",
            logs.1
        );
        return (0, 0, 0);
    }
    let line = give_back_line(&server).await;
    exited(server).await;
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {line}"));
    (n("returned_ids"), n("returned_tags"), n("moved"))
}

/// Three servers under load; each in turn is taken out of rotation, stopped with SIGTERM and
/// replaced; then all three stop. Every id is unique, below its row's final `max_id`, and a
/// server started afterwards issues none of them again. `max_step` "1000" fixes the step (the
/// tags' step is 1000); "1000000" is the default adaptive step.
async fn rolling_restart(db: Db, give_back: bool, max_step: &'static str) -> Rolled {
    let (url, _dir) = fresh_db(db).await;
    let database = open(&url).await;
    for tag in TAGS {
        create(&database, tag, 1000).await;
    }
    let env = [("LEAFID__SEGMENT__MAX_STEP", max_step)];
    let mut servers = Vec::new();
    for _ in 0..3 {
        servers.push(start(&url, give_back, &env).await);
    }
    let live = Arc::new(Mutex::new(
        servers
            .iter()
            .map(|s| s.address.clone())
            .collect::<Vec<_>>(),
    ));
    let (halt, served) = (Arc::new(AtomicBool::new(false)), Arc::default());
    let load = spawn_load(6, &live, &TAGS, &halt, &served);
    let mut stats = Vec::new();
    for server in &mut servers {
        more_load(&served, 5_000).await;
        // Out of rotation first (as a load balancer after the drain), then SIGTERM.
        live.lock().unwrap().retain(|a| a != &server.address);
        let replacement = start(&url, give_back, &env).await;
        let old = std::mem::replace(server, replacement);
        stats.push(stop_measured(old, give_back).await);
        live.lock().unwrap().push(server.address.clone());
    }
    more_load(&served, 5_000).await;
    halt.store(true, Ordering::Relaxed);
    let mut got: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for t in load {
        let (ids, _failed) = t.await.unwrap();
        for (tag, v) in ids {
            got.entry(tag).or_default().extend(v);
        }
    }
    for server in servers {
        stats.push(stop_measured(server, give_back).await);
    }
    let mut leased = 0;
    // A server started now leases from the rows: none of its ids may repeat one served.
    let next = start(&url, give_back, &env).await;
    let client = reqwest::Client::new();
    for tag in TAGS {
        let ids = got.get(tag).cloned().unwrap_or_default();
        assert_unique_positive(&ids);
        let end = max_id(&database, tag).await;
        leased += (end - 1) as u64;
        assert!(
            ids.iter().all(|&id| id < end),
            "{tag}: an id handed out is at or above the row's max_id {end}"
        );
        let fresh = self::ids(&client, &next.address, tag, 500).await.unwrap();
        let seen: HashSet<i64> = ids.iter().copied().collect();
        assert!(
            fresh.iter().all(|id| !seen.contains(id)),
            "{tag}: the next server issued an id served before"
        );
        assert_eq!(
            fresh[0], end,
            "{tag}: the next server starts at the row's max_id"
        );
    }
    next.kill9();
    database.close().await;
    Rolled {
        served: got.values().map(|v| v.len() as u64).sum(),
        leased,
        returned: stats.iter().map(|s| s.0).sum(),
        applied: stats.iter().map(|s| s.1).sum(),
        moved: stats.iter().map(|s| s.2).sum(),
    }
}

async fn rolling_restart_under_load_wastes_less_and_never_repeats_an_id(db: Db) {
    for (max_step, label) in [("1000", "fixed step 1000"), ("1000000", "adaptive step")] {
        let off = rolling_restart(db, false, max_step).await;
        let on = rolling_restart(db, true, max_step).await;
        eprintln!(
            "rolling restart of 3 servers on 3 tags, {db:?}, {label}: give-back off: {} ids \
             served, {} leased, {} wasted per stop; on: {} served, {} leased, {} wasted per \
             stop ({} ids given back in {} of {} tag stops, {} found the row moved)",
            off.served,
            off.leased,
            off.wasted_per_stop(),
            on.served,
            on.leased,
            on.wasted_per_stop(),
            on.returned,
            on.applied,
            on.applied + on.moved,
            on.moved,
        );
        // The last server to stop holds the last lease of each tag: at least those go back.
        assert!(on.applied >= 3, "{} give-backs applied", on.applied);
        assert!(on.returned > 0);
    }
}
crate::on_both_databases!(rolling_restart_under_load_wastes_less_and_never_repeats_an_id);

/// A server whose last lease is not the row's end any more (another server leased after it)
/// gives nothing back; and rounds of a server stopping while another leases the same tag under
/// load never make an id repeat.
async fn a_lease_by_another_server_wins_over_the_give_back(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let database = open(&url).await;
    create(&database, "gb-race", 100).await;
    let client = reqwest::Client::new();
    // Step fixed at 100: under load `b` leases many times a second, racing `c`'s give-backs.
    let small = [("LEAFID__SEGMENT__MAX_STEP", "100")];
    let a = start(&url, true, &small).await;
    let b = start(&url, true, &small).await;
    let mut all = ids(&client, &a.address, "gb-race", 1).await.unwrap();
    assert_eq!(all, vec![1], "a leased [1, 101)");
    all.extend(ids(&client, &b.address, "gb-race", 1).await.unwrap());
    assert_eq!(all[1], 101, "b leased [101, 201)");
    a.send_term();
    let line = give_back_line(&a).await;
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(
        (v["moved"].as_u64(), v["returned_tags"].as_u64()),
        (Some(1), Some(0)),
        "{line}"
    );
    assert_eq!(max_id(&database, "gb-race").await, 201, "b's lease stands");
    exited(a).await;

    // Rounds: `c` stops while `b` leases the same tag under load.
    let live_b = Arc::new(Mutex::new(vec![b.address.clone()]));
    let (halt, served) = (Arc::new(AtomicBool::new(false)), Arc::default());
    let load_b = spawn_load(2, &live_b, &["gb-race"], &halt, &served);
    let mut returned = 0;
    const ROUNDS: u64 = 8;
    for _ in 0..ROUNDS {
        let c = start(&url, true, &small).await;
        let live_c = Arc::new(Mutex::new(vec![c.address.clone()]));
        let (halt_c, served_c) = (Arc::new(AtomicBool::new(false)), Arc::default());
        let load_c = spawn_load(2, &live_c, &["gb-race"], &halt_c, &served_c);
        more_load(&served_c, 500).await;
        halt_c.store(true, Ordering::Relaxed);
        for t in load_c {
            all.extend(t.await.unwrap().0.into_values().flatten());
        }
        c.send_term();
        let line = give_back_line(&c).await;
        exited(c).await;
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        returned += v["returned_tags"].as_u64().unwrap();
    }
    more_load(&served, 500).await;
    halt.store(true, Ordering::Relaxed);
    for t in load_b {
        all.extend(t.await.unwrap().0.into_values().flatten());
    }
    stop(b).await;
    assert_unique_positive(&all);
    let end = max_id(&database, "gb-race").await;
    assert!(all.iter().all(|&id| id < end));
    let next = start(&url, true, &[]).await;
    let fresh = ids(&client, &next.address, "gb-race", 200).await.unwrap();
    let seen: HashSet<i64> = all.iter().copied().collect();
    assert!(fresh.iter().all(|id| !seen.contains(id)));
    eprintln!(
        "{db:?}: {} ids over {ROUNDS} rounds of a server stopping while another leases; \
         {returned} give-backs applied, the others found the row moved; no duplicate",
        all.len()
    );
    next.kill9();
    database.close().await;
}
crate::on_both_databases!(a_lease_by_another_server_wins_over_the_give_back);

/// `kill -9` while the give-back runs: each tag's row is either back at its first unused id or
/// still at the end of the lease (one statement each), and a server started afterwards repeats
/// no id that was handed out.
async fn kill_9_in_the_middle_of_the_give_back(db: Db) {
    const N: usize = 300;
    let (url, _dir) = fresh_db(db).await;
    let database = open(&url).await;
    let tags: Vec<String> = (0..N).map(|i| format!("gb-kill-{i:03}")).collect();
    for tag in &tags {
        create(&database, tag, 1000).await;
    }
    let client = reqwest::Client::new();
    let mut landed_in_the_middle = false;
    let mut handed: BTreeMap<String, Vec<i64>> = BTreeMap::new();
    for attempt in 0..4 {
        // Debug logs: one line per tag given back, so the kill can follow the first one.
        let a = start(&url, true, &[("RUST_LOG", "info,leafid::segment=debug")]).await;
        let mut before = BTreeMap::new();
        for tag in &tags {
            let got = ids(&client, &a.address, tag, 3).await.unwrap();
            handed.entry(tag.clone()).or_default().extend(&got);
            before.insert(tag.clone(), max_id(&database, tag).await);
        }
        a.send_term();
        let deadline = Instant::now() + Duration::from_secs(20);
        while a.log_lines("unused ids given back").is_empty() {
            assert!(Instant::now() < deadline, "no tag given back within 20 s");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::task::spawn_blocking(move || a.kill9())
            .await
            .unwrap();
        let mut applied = 0;
        for tag in &tags {
            let first_unused = handed[tag].iter().max().unwrap() + 1;
            let now = max_id(&database, tag).await;
            if now == first_unused {
                applied += 1;
            } else {
                assert_eq!(now, before[tag], "{tag}: neither given back nor left alone");
            }
        }
        eprintln!("{db:?} attempt {attempt}: kill -9 after {applied} of {N} give-backs");
        if applied > 0 && applied < N {
            landed_in_the_middle = true;
            break;
        }
    }
    let next = start(&url, true, &[]).await;
    for (tag, seen) in &handed {
        let mut all = seen.clone();
        all.extend(ids(&client, &next.address, tag, 20).await.unwrap());
        assert_unique_positive(&all);
    }
    next.kill9();
    database.close().await;
    assert!(
        landed_in_the_middle,
        "the kill never landed in the middle of the give-back"
    );
}
crate::on_both_databases!(kill_9_in_the_middle_of_the_give_back);

/// One server alone on a tag, stopped and started again: with the give-back the row goes back to
/// exactly the first id it did not hand out and the next server continues from there (nothing
/// wasted); without it, the rest of the current and next segments is wasted.
async fn a_lone_server_s_restart_wastes_nothing(db: Db) {
    let mut wasted = Vec::new();
    for give_back in [false, true] {
        let (url, _dir) = fresh_db(db).await;
        let database = open(&url).await;
        create(&database, "gb-lone", 1000).await;
        let fixed = [("LEAFID__SEGMENT__MAX_STEP", "1000")];
        let server = start(&url, give_back, &fixed).await;
        let client = reqwest::Client::new();
        let mut got = Vec::new();
        for count in [100; 12].into_iter().chain([34]) {
            got.extend(
                ids(&client, &server.address, "gb-lone", count)
                    .await
                    .unwrap(),
            );
        }
        assert_eq!(got, (1..=1234).collect::<Vec<i64>>());
        // Past 10% of the second segment: the third, [2001, 3001), is loaded ahead.
        let deadline = Instant::now() + Duration::from_secs(10);
        while max_id(&database, "gb-lone").await != 3001 {
            assert!(
                Instant::now() < deadline,
                "the third segment was not leased"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        stop_measured(server, give_back).await;
        let end = max_id(&database, "gb-lone").await;
        wasted.push(end - 1235);
        if give_back {
            assert_eq!(end, 1235, "back to the first id never handed out");
        } else {
            assert_eq!(end, 3001, "the current and the next segment leased");
        }
        let next = start(&url, give_back, &fixed).await;
        assert_eq!(
            ids(&client, &next.address, "gb-lone", 1).await.unwrap(),
            vec![end]
        );
        next.kill9();
        database.close().await;
    }
    eprintln!(
        "{db:?}: one server alone on a tag, 1,234 ids then SIGTERM: {} ids wasted without the \
         give-back, {} with it",
        wasted[0], wasted[1]
    );
}
crate::on_both_databases!(a_lone_server_s_restart_wastes_nothing);

/// Galera, one server per node, step 100: each server in turn stops under load and gives back
/// while the servers on the other nodes lease the same tag: a give-back racing a lease on
/// another node is a certification conflict (one of them fails) or finds the row moved; no id
/// is ever handed out twice, and a server started afterwards repeats none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a MariaDB Galera cluster: scripts/test.sh runs it"]
async fn on_galera_a_give_back_racing_leases_on_other_nodes_never_repeats_an_id() {
    use crate::support::galera::{create_database, insert_tag_everywhere, serial};
    let _serial = serial().await;
    let urls = create_database().await;
    let env = [("LEAFID__SEGMENT__MAX_STEP", "100")];
    // The first server migrates the database; the others find it migrated.
    let mut servers = vec![start(&urls[0], true, &env).await];
    for url in &urls[1..] {
        servers.push(start(url, true, &env).await);
    }
    insert_tag_everywhere(&urls, "gb-galera", 100).await;
    let live = Arc::new(Mutex::new(
        servers
            .iter()
            .map(|s| s.address.clone())
            .collect::<Vec<_>>(),
    ));
    let (halt, served) = (Arc::new(AtomicBool::new(false)), Arc::default());
    let load = spawn_load(6, &live, &["gb-galera"], &halt, &served);
    let mut outcomes = BTreeMap::new();
    for (node, server) in servers.iter_mut().enumerate() {
        more_load(&served, 2_000).await;
        live.lock().unwrap().retain(|a| a != &server.address);
        let replacement = start(&urls[node], true, &env).await;
        let old = std::mem::replace(server, replacement);
        old.send_term();
        let line = give_back_line(&old).await;
        exited(old).await;
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        for k in ["returned_tags", "moved", "failed", "in_flight", "nothing"] {
            *outcomes.entry(k).or_insert(0) += v[k].as_u64().unwrap();
        }
        live.lock().unwrap().push(server.address.clone());
    }
    more_load(&served, 2_000).await;
    halt.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for t in load {
        all.extend(t.await.unwrap().0.into_values().flatten());
    }
    // The final stops, with the load over: the server holding the last lease gives back.
    for server in servers {
        server.send_term();
        let line = give_back_line(&server).await;
        exited(server).await;
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        for k in ["returned_tags", "moved", "failed", "in_flight", "nothing"] {
            *outcomes.entry(k).or_insert(0) += v[k].as_u64().unwrap();
        }
    }
    assert_unique_positive(&all);
    assert!(outcomes["returned_tags"] >= 1, "{outcomes:?}");
    let next = start(&urls[1], true, &env).await;
    let client = reqwest::Client::new();
    let fresh = ids(&client, &next.address, "gb-galera", 100).await.unwrap();
    let seen: HashSet<i64> = all.iter().copied().collect();
    assert!(fresh.iter().all(|id| !seen.contains(id)));
    next.kill9();
    eprintln!(
        "Galera, one server per node, step 100: {} ids over 3 restarts under load and 3 final \
         stops, no duplicate; give-backs: {outcomes:?}",
        all.len()
    );
}
