//! A two-node Patroni cluster (`scripts/patroni.sh`: PostgreSQL 15, one etcd, HAProxy routing
//! to the node whose `GET /primary` answers 200) failed over under load, three `leafid`
//! processes on the HAProxy URL all along (no restart: their in-memory marks are what the
//! regression guard works from). Two tags with a small step: `solo` served by server 0 alone,
//! `shared` by all three.
//!
//! Faults: the leader's node is killed (`SIGKILL` to its Patroni, postmaster and backends), with
//! its replica streaming or lagging (its walreceiver stopped for 1.5 s first, the WAL in flight
//! lost with it), and the replica takes over once the leader key expires (ttl 10 s); or a
//! `patronictl switchover`. Each with `synchronous_mode` off and on.
//!
//! What each run measures, per tag, printed and written to `target/tmp/patroni-<run>.txt`:
//! - **exposed**: distinct ids handed out before the fault at or above the promoted replica's
//!   `max_id` (its last value read while it was still a replica): ids from leases the replica
//!   never had, which it leases again (a lower bound: ids of those leases a server hands out
//!   after the fault, from segments it already held, are not counted);
//! - **twice**: ids handed out more than once (extra occurrences), and by the same server;
//! - **refused**: leases the guard refused or trimmed (`leafid_segment_regressions_total`);
//! - the time from the fault to the replica's promotion, and until every client was served
//!   from it.
//!
//! Asserted in every run: no server repeats its own id (so `solo` repeats nothing), ids repeat
//! only at or above the promoted `max_id`, each client's ids strictly increase, every id is
//! positive, every server serves from the new leader. Per run: synchronous mode, killed or
//! switched over, loses nothing (exposed 0, twice 0, refused 0); a switchover in asynchronous
//! mode neither (a clean shutdown sends all WAL to the replica first); a lagging replica
//! promoted after the kill lacks leases (exposed > 0, else the run proved nothing) and the guard
//! catches them (refused > 0).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::support::patroni;
use crate::support::process::ServerProcess;

/// The tags' row step: small, so leases are frequent and a lost one holds few ids.
const STEP: i64 = 10;
/// Servers on the HAProxy URL.
const SERVERS: usize = 3;
/// Client tasks per server and tag.
const CLIENTS: usize = 2;
/// Ids per request.
const BATCH: usize = 5;
/// Served by server 0 alone: the guard knows every id of it.
const SOLO: &str = "solo";
/// Served by every server.
const SHARED: &str = "shared";

/// Client phases, stamped on every answer.
const BEFORE: u8 = 0;
const AFTER: u8 = 1;

/// How the leader goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `scripts/patroni.sh kill-leader`, the replica streaming.
    Kill,
    /// `scripts/patroni.sh lag`, 1.5 s (and 400 ids) of leases, then `kill-leader`.
    LaggedKill,
    /// `scripts/patroni.sh switchover`.
    Switchover,
}

/// What one run measured for one tag.
#[derive(Debug, Default)]
struct TagFigures {
    /// Ids handed out, all servers.
    ids: usize,
    /// The promoted replica's `max_id` (read while still a replica).
    promoted_max_id: i64,
    /// The highest id handed out before the fault.
    highest_before: i64,
    /// Distinct ids handed out before the fault at or above `promoted_max_id`.
    exposed: usize,
    /// Extra occurrences of ids handed out more than once.
    twice: usize,
    /// Of those, a server repeating its own id.
    own_twice: usize,
    /// Leases refused or trimmed by the guard, all servers.
    refused: u64,
}

/// What one run measured.
#[derive(Debug)]
struct Figures {
    name: String,
    tags: BTreeMap<&'static str, TagFigures>,
    /// From the fault to the replica answering as a primary.
    promoted_after: Duration,
    /// From the fault until every client was served from the new leader.
    served_after: Duration,
    /// Non-200 answers (the outage).
    errors: u64,
}

impl Figures {
    fn tag(&self, tag: &str) -> &TagFigures {
        &self.tags[tag]
    }

    fn report(&self) -> String {
        let mut s = format!(
            "patroni failover, {}: replica promoted {:.1} s after the fault, every client \
             served from it after {:.1} s, {} non-200 answers\n",
            self.name,
            self.promoted_after.as_secs_f64(),
            self.served_after.as_secs_f64(),
            self.errors
        );
        for (tag, f) in &self.tags {
            s.push_str(&format!(
                "  {tag}: {} ids; promoted max_id {}, highest id before the fault {}; exposed \
                 {}; handed out twice {} (by the same server {}); leases refused or trimmed \
                 by the guard {}\n",
                f.ids,
                f.promoted_max_id,
                f.highest_before,
                f.exposed,
                f.twice,
                f.own_twice,
                f.refused
            ));
        }
        s
    }
}

/// One client's answers: (server, tag, ids in order with the phase of each answer).
type Received = (usize, &'static str, Vec<(i64, u8)>);

async fn failover_run(synchronous: bool, fault: Fault) -> Figures {
    let name = format!(
        "{}-{}",
        if synchronous { "sync" } else { "async" },
        match fault {
            Fault::Kill => "kill",
            Fault::LaggedKill => "lagged-kill",
            Fault::Switchover => "switchover",
        }
    );
    let _serial = patroni::serial().await;
    patroni::start(synchronous).await;
    let db = patroni::create_database("leafid_pf").await;
    let url = patroni::db_url(&db);
    let env = [
        ("LEAFID__SNOWFLAKE__ENABLED", "false"),
        ("LEAFID__SEGMENT__MAX_STEP", "40"),
        ("LEAFID__SEGMENT__WAIT_TIMEOUT_MS", "300"),
        ("LEAFID__SEGMENT__LOAD_TIMEOUT_MS", "1000"),
        ("LEAFID__DATABASE__ACQUIRE_TIMEOUT_MS", "1000"),
    ];
    let mut procs = Vec::new();
    for _ in 0..SERVERS {
        let url = url.clone();
        procs.push(
            tokio::task::spawn_blocking(move || ServerProcess::start(&url, &env))
                .await
                .unwrap(),
        );
    }
    patroni::exec(
        &url,
        &format!(
            "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('{SOLO}', 1, {STEP}), \
             ('{SHARED}', 1, {STEP})"
        ),
    )
    .await;
    let leader = patroni::run(&["leader"]).await;
    let survivor = if leader == "pg1" { "pg2" } else { "pg1" };
    let survivor_url = patroni::node_url(survivor, &db).await;
    wait_for_rows(&survivor_url).await;

    let stop = Arc::new(AtomicBool::new(false));
    let phase = Arc::new(AtomicU8::new(BEFORE));
    let errors = Arc::new(AtomicU64::new(0));
    // Per tag, the promoted replica's max_id once known (0: SOLO, 1: SHARED); per client, the
    // ids it was served from there.
    let promoted_from = Arc::new([AtomicI64::new(i64::MAX), AtomicI64::new(i64::MAX)]);
    let mut plan = Vec::new();
    for server in 0..SERVERS {
        let tags: &[&'static str] = if server == 0 {
            &[SOLO, SHARED]
        } else {
            &[SHARED]
        };
        for &tag in tags {
            plan.extend((0..CLIENTS).map(|_| (server, tag)));
        }
    }
    let served_new: Arc<Vec<AtomicU64>> = Arc::new(plan.iter().map(|_| 0.into()).collect());
    let mut clients = Vec::new();
    for (client, &(server, tag)) in plan.iter().enumerate() {
        let address = procs[server].address.clone();
        let (stop, phase, errors) = (stop.clone(), phase.clone(), errors.clone());
        let (promoted_from, served_new) = (promoted_from.clone(), served_new.clone());
        let slot = usize::from(tag == SHARED);
        clients.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let mut got = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let r = http
                    .get(format!("{address}/api/v1/segment/{tag}/ids?count={BATCH}"))
                    .timeout(Duration::from_secs(2))
                    .send()
                    .await;
                let now = phase.load(Ordering::Relaxed);
                match r {
                    Ok(r) if r.status() == 200 => {
                        let body: serde_json::Value = r.json().await.unwrap();
                        for id in body["ids"].as_array().unwrap() {
                            let id = id.as_i64().unwrap();
                            if now == AFTER && id >= promoted_from[slot].load(Ordering::Relaxed) {
                                served_new[client].fetch_add(1, Ordering::Relaxed);
                            }
                            got.push((id, now));
                        }
                    }
                    _ => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            let out: Received = (server, tag, got);
            out
        }));
    }

    // Replicated load first.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    if fault == Fault::LaggedKill {
        patroni::run(&["lag"]).await;
        // At least 1.5 s, and until the leader leased 400 ids of the shared tag the replica
        // lacks (a machine busy with other tests may serve slowly).
        let lagged_at = shared_max_id(&url).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while shared_max_id(&url).await < lagged_at + 400 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    phase.store(AFTER, Ordering::Relaxed);
    let fault_at = Instant::now();
    let faulted = tokio::spawn(async move {
        match fault {
            Fault::Kill | Fault::LaggedKill => patroni::run(&["kill-leader"]).await,
            Fault::Switchover => patroni::run(&["switchover"]).await,
        }
    });
    // The survivor's max_ids, read while it is a replica until it answers as a primary: its
    // last values read as a replica are what it was promoted with (it receives nothing more
    // once the leader is gone; a switchover's leader stops before the promotion).
    let mut last_as_replica: Option<Vec<(String, i64)>> = None;
    let deadline = Instant::now() + Duration::from_secs(45);
    let promoted_after = loop {
        match patroni::max_ids(&survivor_url).await {
            Some((rows, true)) => last_as_replica = Some(rows),
            Some((_, false)) => break fault_at.elapsed(),
            None => {}
        }
        assert!(
            Instant::now() < deadline,
            "{name}: {survivor} was not promoted within 45 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    faulted.await.unwrap();
    let rows = last_as_replica.expect("the survivor answered as a replica after the fault");
    let promoted: HashMap<String, i64> = rows.into_iter().collect();
    promoted_from[0].store(promoted[SOLO], Ordering::Relaxed);
    promoted_from[1].store(promoted[SHARED], Ordering::Relaxed);

    // Load goes on until every client is served from the new leader (a server's lease backoff
    // after the outage is up to a few seconds), then a little longer.
    let deadline = Instant::now() + Duration::from_secs(25);
    while served_new.iter().any(|n| n.load(Ordering::Relaxed) == 0) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let served_after = fault_at.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);

    let mut received = Vec::new();
    for c in clients {
        received.push(c.await.unwrap());
    }
    let mut refused: HashMap<&str, u64> = HashMap::new();
    for (server, p) in procs.iter().enumerate() {
        let mut counted = 0;
        for tag in [SOLO, SHARED] {
            let n = regressions(&p.address, tag).await;
            *refused.entry(tag).or_default() += n;
            counted += n;
        }
        // Logged when caught, at most once per 10 s (a run after the fault is shorter than
        // 30 s: at most 3 lines per server), counted every time.
        let logged = p.log_lines("segment lease at or below").len();
        assert!(
            (counted == 0) == (logged == 0) && logged <= 3,
            "{name}: server {server} counted {counted} regressions and logged {logged} lines"
        );
    }
    drop(procs);
    // Each run's database goes: a node killed later is cloned anew, faster when small.
    patroni::exec(patroni::url(), &format!("DROP DATABASE {db} WITH (FORCE)")).await;

    // Checks every run must pass.
    for (client, (server, tag, got)) in received.iter().enumerate() {
        assert!(
            got.windows(2).all(|w| w[0].0 < w[1].0),
            "{name}: the ids of client {client} (server {server}, {tag}) went back"
        );
        assert!(
            got.iter().all(|&(id, _)| id > 0),
            "{name}: a non-positive id"
        );
        assert!(
            served_new[client].load(Ordering::Relaxed) > 0,
            "{name}: client {client} (server {server}, {tag}) never served from the new leader"
        );
    }
    let mut tags = BTreeMap::new();
    for tag in [SOLO, SHARED] {
        let from = promoted[tag];
        let mut seen: HashMap<i64, Vec<usize>> = HashMap::new();
        let mut highest_before = 0;
        for (server, t, got) in &received {
            if *t != tag {
                continue;
            }
            for &(id, at) in got {
                seen.entry(id).or_default().push(*server);
                if at == BEFORE {
                    highest_before = highest_before.max(id);
                }
            }
        }
        let exposed = received
            .iter()
            .filter(|(_, t, _)| *t == tag)
            .flat_map(|(_, _, got)| got.iter())
            .filter(|&&(id, at)| at == BEFORE && id >= from)
            .map(|&(id, _)| id)
            .collect::<std::collections::HashSet<_>>()
            .len();
        let own_twice = seen
            .values()
            .map(|s| {
                let mut d = s.clone();
                d.sort_unstable();
                d.dedup();
                s.len() - d.len()
            })
            .sum();
        let below: Vec<i64> = seen
            .iter()
            .filter(|(id, s)| s.len() > 1 && **id < from)
            .map(|(id, _)| *id)
            .collect();
        assert!(
            below.is_empty(),
            "{name}: {tag}: ids below the promoted max_id {from} handed out twice: {below:?}"
        );
        tags.insert(
            tag,
            TagFigures {
                ids: seen.values().map(Vec::len).sum(),
                promoted_max_id: from,
                highest_before,
                exposed,
                twice: seen.values().map(|s| s.len() - 1).sum(),
                own_twice,
                refused: refused[tag],
            },
        );
    }
    let f = Figures {
        name,
        tags,
        promoted_after,
        served_after,
        errors: errors.load(Ordering::Relaxed),
    };
    let report = f.report();
    eprint!("{report}");
    let file = format!("{}/patroni-{}.txt", env!("CARGO_TARGET_TMPDIR"), f.name);
    std::fs::write(&file, &report).unwrap_or_else(|e| panic!("write {file}: {e}"));
    for (tag, t) in &f.tags {
        assert_eq!(
            t.own_twice, 0,
            "{tag}: a server repeated its own ids: {f:?}"
        );
    }
    assert_eq!(
        f.tag(SOLO).twice,
        0,
        "one server knows every id it handed out: {f:?}"
    );
    f
}

/// Waits until the replica at `url` has both tags' rows (and, before them, the database).
async fn wait_for_rows(url: &str) {
    for _ in 0..400 {
        if patroni::max_ids(url)
            .await
            .is_some_and(|(rows, _)| rows.len() == 2)
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the rows never reached the replica");
}

/// The shared tag's `max_id` at `url` (the leader, through HAProxy), retried for up to 10 s.
async fn shared_max_id(url: &str) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some((rows, _)) = patroni::max_ids(url).await
            && let Some((_, max_id)) = rows.into_iter().find(|(tag, _)| tag == SHARED)
        {
            return max_id;
        }
        assert!(Instant::now() < deadline, "the leader does not answer");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `leafid_segment_regressions_total{biz_tag=TAG}` of one server.
async fn regressions(address: &str, tag: &str) -> u64 {
    let series = format!(r#"leafid_segment_regressions_total{{biz_tag="{tag}"}}"#);
    crate::support::metric_value(address, &series)
        .await
        .map_or(0, |v| v as u64)
}

/// Asserts a run lost nothing and the guard had nothing to catch.
fn assert_nothing_lost(f: &Figures) {
    for (tag, t) in &f.tags {
        assert!(
            t.promoted_max_id >= t.highest_before,
            "{tag}: the promoted replica lacks leases: {f:?}"
        );
        assert_eq!((t.exposed, t.twice, t.refused), (0, 0, 0), "{tag}: {f:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_mode_kill_of_the_leader_loses_no_lease_and_repeats_no_id() {
    let f = failover_run(true, Fault::Kill).await;
    assert_nothing_lost(&f);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_mode_switchover_loses_no_lease_and_repeats_no_id() {
    let f = failover_run(true, Fault::Switchover).await;
    assert_nothing_lost(&f);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asynchronous_switchover_loses_no_lease_the_leader_sends_its_wal_before_stopping() {
    let f = failover_run(false, Fault::Switchover).await;
    assert_nothing_lost(&f);
}

/// Ignored by default to keep the file under 90 s on 2 cores (each kill costs a ttl); run it
/// with `--ignored` for the figures (docs/deploy.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures only: the lagged kill below is the asynchronous kill the suite runs"]
async fn asynchronous_kill_of_the_leader_repeats_only_other_servers_ids() {
    // Measured, not asserted: a streaming replica on loopback is at most a few leases behind
    // when its leader dies, often none. The checks of every run hold whatever it lost: no server
    // repeats its own ids, repeats lie at or above the promoted max_id.
    let f = failover_run(false, Fault::Kill).await;
    let solo = f.tag(SOLO);
    assert!(
        solo.exposed == 0 || solo.refused > 0,
        "lost leases not caught: {f:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asynchronous_kill_with_a_lagging_replica_is_caught_by_the_guard() {
    let f = failover_run(false, Fault::LaggedKill).await;
    let (solo, shared) = (f.tag(SOLO), f.tag(SHARED));
    assert!(
        solo.exposed > 0 && shared.exposed > 0,
        "the lag lost no lease: the run proved nothing: {f:?}"
    );
    assert!(solo.refused > 0 && shared.refused > 0, "{f:?}");
    // Measured, not asserted to be zero: a server cannot know the ids another one handed out.
}
