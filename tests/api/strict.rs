//! Strict tags (issue 45): ids increasing across every server in real-time order, tried with
//! the history checker (`support::history`) on real server processes: `kill -9`, `SIGSTOP`
//! past the lease, the owner cut from its database, a graceful stop and wall clocks stepped
//! both ways, on SQLite, MariaDB, PostgreSQL and Galera. The control: two servers on one plain
//! tag, which the checker must catch interleaving.
//!
//! Every run uses a 1 s lease (`segment.strict_lease_ms`), so a failover waits about
//! `1.1 s + 0.25 s` (the margin and a renewal period) plus a request's retry pause.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::support::history::{History, Op, Verdict, check};
use crate::support::process::ServerProcess;
use crate::support::{Db, fresh_db, record_figure, spawn_on};
use leafid::testing::FaultProxy;

/// The lease every run here uses.
const LEASE_MS: u64 = 1000;

/// A failover must end within this (the bound stated in docs/guarantees.md for a 1 s lease is
/// `L + m + L/4` plus a request's retry pause, about 1.4 s; the rest is room for a loaded
/// machine and a process start).
const GAP_BOUND: Duration = Duration::from_secs(5);

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

fn env(extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("LEAFID__SEGMENT__STRICT_LEASE_MS", LEASE_MS.to_string()),
        ("LEAFID__SNOWFLAKE__ENABLED", "false".to_owned()),
        ("LEAFID__SERVER__WORKERS", "2".to_owned()),
    ];
    env.extend(extra.iter().cloned());
    env
}

fn start(db_url: &str, env: &[(&'static str, String)]) -> ServerProcess {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    ServerProcess::start(db_url, &env)
}

async fn create_strict(client: &reqwest::Client, address: &str, tag: &str, step: i64) {
    let r = client
        .post(format!("{address}/api/v1/tags"))
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"biz_tag":"{tag}","step":{step},"order":"strict"}}"#
        ))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let body = r.text().await.unwrap();
    assert_eq!(status, 201, "{body}");
    assert!(body.contains(r#""order":"strict""#), "{body}");
}

/// Callers asking the servers in turn, each request recorded.
struct Load {
    history: History,
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    /// `callers` tasks, each asking the servers in `addresses` in turn, Leaf's route and the
    /// batch route alternately (1 to 4 ids), until stopped.
    fn start(addresses: Arc<RwLock<Vec<String>>>, tag: &str, callers: usize) -> Self {
        let history = History::default();
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..callers)
            .map(|k| {
                let (history, stop, addresses) = (history.clone(), stop.clone(), addresses.clone());
                let tag = tag.to_owned();
                tokio::spawn(async move {
                    // Long enough that a request to a paused server completes after SIGCONT.
                    let client = reqwest::Client::builder()
                        .timeout(Duration::from_secs(10))
                        .build()
                        .unwrap();
                    let mut i = k;
                    // Relaxed: a stop flag; nothing is published with it.
                    while !stop.load(Ordering::Relaxed) {
                        let (server, address) = {
                            let a = addresses.read().unwrap();
                            let s = i % a.len();
                            (s, a[s].clone())
                        };
                        i += 1;
                        let start = Instant::now();
                        let ids = ask(&client, &address, &tag, i).await;
                        let end = Instant::now();
                        match ids {
                            Some(ids) => history.record(Op {
                                start,
                                end,
                                server,
                                ids,
                            }),
                            None => tokio::time::sleep(Duration::from_millis(20)).await,
                        }
                    }
                })
            })
            .collect();
        Self {
            history,
            stop,
            tasks,
        }
    }

    /// Waits until `n` more requests got ids (at most 30 s).
    async fn flowing(&self, n: usize) {
        let target = self.history.len() + n;
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.history.len() < target {
            assert!(Instant::now() < deadline, "no strict ids for 30 s");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// How long after `at` the first request sent after `at` got its ids (at most 30 s).
    async fn gap_after(&self, at: Instant) -> Duration {
        let deadline = at + Duration::from_secs(30);
        loop {
            if let Some(end) = self.history.first_sent_after(at) {
                return end - at;
            }
            assert!(
                Instant::now() < deadline,
                "no strict id 30 s after the fault"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn finish(self) -> Verdict {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.tasks {
            t.await.unwrap();
        }
        check(&self.history.ops())
    }
}

/// One request: Leaf's route on odd turns, the batch route (1 to 4 ids) on even ones. `None`
/// for any answer but 200 with ids.
async fn ask(client: &reqwest::Client, address: &str, tag: &str, turn: usize) -> Option<Vec<i64>> {
    if turn % 2 == 1 {
        let r = client
            .get(format!("{address}/api/segment/get/{tag}"))
            .send()
            .await
            .ok()?;
        if r.status() != 200 {
            return None;
        }
        return Some(vec![r.text().await.ok()?.trim().parse().ok()?]);
    }
    let count = 1 + turn % 4;
    let r = client
        .get(format!("{address}/api/v1/segment/{tag}/ids?count={count}"))
        .send()
        .await
        .ok()?;
    if r.status() != 200 {
        return None;
    }
    let v: serde_json::Value = r.json().await.ok()?;
    assert_eq!(v["strict"], true, "a strict tag's answer says so: {v}");
    v["ids"]
        .as_array()?
        .iter()
        .map(serde_json::Value::as_i64)
        .collect()
}

/// The server that owns `tag` now (its tag view says `strict_owner.here`), waiting up to 10 s.
async fn owner(client: &reqwest::Client, addresses: &RwLock<Vec<String>>, tag: &str) -> usize {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let list = addresses.read().unwrap().clone();
        for (i, a) in list.iter().enumerate() {
            let Ok(r) = client.get(format!("{a}/api/v1/tags/{tag}")).send().await else {
                continue;
            };
            let Ok(v) = r.json::<serde_json::Value>().await else {
                continue;
            };
            if v["strict_owner"]["here"] == true {
                return i;
            }
        }
        assert!(Instant::now() < deadline, "no server owns {tag}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// What to do to the owner in each round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `kill -9`, then a new server in its place.
    Kill9,
    /// `SIGSTOP` for 2.5 leases, then `SIGCONT` (its requests in flight complete after).
    Pause,
    /// SIGTERM (it releases the tag), then a new server in its place.
    Graceful,
    /// Its database connection cut for 2.5 leases, then healed (proxied databases only).
    Partition,
    /// Its wall clock stepped an hour forward, another's an hour back (libfaketime).
    ClockSteps,
}

/// Three servers on `urls` (one per server: the same database, or Galera's nodes, or each
/// through its own fault proxy), six callers, `rounds` rounds of `fault` on the owner. Returns
/// the checker's verdict and each round's failover gap.
async fn run(
    urls: Vec<String>,
    proxies: Vec<FaultProxy>,
    fault: Fault,
    rounds: usize,
) -> (Verdict, Vec<Duration>) {
    let tag = "msgs";
    let client = reqwest::Client::new();
    let clock_files: Vec<tempfile::NamedTempFile> = (0..urls.len())
        .map(|_| tempfile::NamedTempFile::new().unwrap())
        .collect();
    let env_of = |i: usize| {
        if fault != Fault::ClockSteps {
            return env(&[]);
        }
        assert!(
            std::path::Path::new(LIBFAKETIME).exists(),
            "{LIBFAKETIME} is missing: scripts/test.sh installs Debian's faketime"
        );
        std::fs::write(clock_files[i].path(), "+0\n").unwrap();
        env(&[
            ("LD_PRELOAD", LIBFAKETIME.to_owned()),
            (
                "FAKETIME_TIMESTAMP_FILE",
                clock_files[i].path().display().to_string(),
            ),
            ("FAKETIME_NO_CACHE", "1".to_owned()),
            // A boot-time clock is never stepped (NTP steps the wall clock only).
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1".to_owned()),
        ])
    };
    let mut servers: Vec<Option<ServerProcess>> = (0..urls.len())
        .map(|i| Some(start(&urls[i], &env_of(i))))
        .collect();
    let addresses = Arc::new(RwLock::new(
        servers
            .iter()
            .map(|s| s.as_ref().unwrap().address.clone())
            .collect::<Vec<_>>(),
    ));
    let first = addresses.read().unwrap()[0].clone();
    create_strict(&client, &first, tag, 50).await;
    let load = Load::start(addresses.clone(), tag, 6);
    load.flowing(50).await;
    let mut gaps = Vec::new();
    for round in 0..rounds {
        load.flowing(100).await;
        let i = owner(&client, &addresses, tag).await;
        let at = Instant::now();
        match fault {
            Fault::Kill9 => {
                servers[i].take().unwrap().kill9();
                gaps.push(load.gap_after(at).await);
                let s = start(&urls[i], &env_of(i));
                addresses.write().unwrap()[i] = s.address.clone();
                servers[i] = Some(s);
            }
            Fault::Graceful => {
                let s = servers[i].take().unwrap();
                let status = tokio::task::spawn_blocking(move || s.terminate())
                    .await
                    .unwrap();
                assert!(status.success(), "a graceful stop exits 0: {status}");
                gaps.push(load.gap_after(at).await);
                let s = start(&urls[i], &env_of(i));
                addresses.write().unwrap()[i] = s.address.clone();
                servers[i] = Some(s);
            }
            Fault::Pause => {
                let paused = servers[i].as_ref().unwrap().pause();
                // From the stop on (the owner served until it took hold). The pause lasts its
                // time whatever happens: on SQLite an owner stopped inside a write holds the
                // file's lock, and no server can write (take the tag over) until it goes on.
                let at = Instant::now();
                tokio::time::sleep(Duration::from_millis(LEASE_MS * 5 / 2)).await;
                paused.resume();
                gaps.push(load.gap_after(at).await);
                load.flowing(20).await;
            }
            Fault::Partition => {
                proxies[i].go_down();
                gaps.push(load.gap_after(at).await);
                let held = Duration::from_millis(LEASE_MS * 5 / 2);
                tokio::time::sleep(held.saturating_sub(at.elapsed())).await;
                proxies[i].heal();
                load.flowing(20).await;
            }
            Fault::ClockSteps => {
                let other = (i + 1) % urls.len();
                let (fwd, back) = if round % 2 == 0 {
                    ("+3600", "-3600")
                } else {
                    ("-7200", "+7200")
                };
                std::fs::write(clock_files[i].path(), format!("{fwd}\n")).unwrap();
                std::fs::write(clock_files[other].path(), format!("{back}\n")).unwrap();
                load.flowing(100).await;
                gaps.push(Duration::ZERO);
                std::fs::write(clock_files[i].path(), "+0\n").unwrap();
                std::fs::write(clock_files[other].path(), "+0\n").unwrap();
            }
        }
    }
    load.flowing(30).await;
    let verdict = load.finish().await;
    drop(servers);
    (verdict, gaps)
}

fn assert_held(name: &str, verdict: &Verdict, gaps: &[Duration]) {
    let longest = gaps.iter().max().copied().unwrap_or_default();
    record_figure(
        &format!("strict-{name}"),
        &format!(
            "strict {name}: {} requests, {} ids, {} duplicates, {} violations; failover gaps {:?} (longest {longest:?}); longest time without a strict id {:?}",
            verdict.ops,
            verdict.ids,
            verdict.duplicates,
            verdict.violations,
            gaps,
            verdict.longest_gap
        ),
    );
    assert_eq!(verdict.duplicates, 0, "{name}: an id twice");
    assert_eq!(
        verdict.violations, 0,
        "{name}: real-time order broken: {:?}",
        verdict.first
    );
    assert!(
        verdict.ops > 200,
        "{name}: too few requests served ({})",
        verdict.ops
    );
    assert!(longest < GAP_BOUND, "{name}: a failover took {longest:?}");
}

/// The same database URL for three servers (a fresh one of `db`), and its temp directory.
async fn one_database(db: Db) -> (Vec<String>, Option<tempfile::TempDir>) {
    let (url, dir) = fresh_db(db).await;
    (vec![url.clone(), url.clone(), url], dir)
}

/// The control and the checker's own test: two servers on one *plain* tag, asked in turn by one
/// caller, interleave (the checker must say so), and on a strict tag the same calls do not.
#[tokio::test]
async fn the_checker_catches_two_plain_servers_and_passes_a_strict_tag() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let a = spawn_on(&url, |_| {}).await;
    let b = spawn_on(&url, |_| {}).await;
    a.create_tag("plain", 100, 1).await;
    create_strict(&a.client, &a.address, "strict", 100).await;
    for (tag, plain) in [("plain", true), ("strict", false)] {
        let history = History::default();
        for turn in 0..40 {
            let (server, app) = if turn % 2 == 0 { (0, &a) } else { (1, &b) };
            let start = Instant::now();
            let id = app.leaf_id(tag).await;
            history.record(Op {
                start,
                end: Instant::now(),
                server,
                ids: vec![id],
            });
        }
        let v = check(&history.ops());
        assert_eq!(v.duplicates, 0, "{tag}: {v:?}");
        if plain {
            assert!(
                v.violations > 0,
                "the checker must catch two servers interleaving: {v:?}"
            );
        } else {
            assert_eq!(v.violations, 0, "{tag}: {:?}", v.first);
        }
    }
    // A strict tag cannot be formatted, nor made plain again under its name.
    let r = a
        .post(
            "/api/v1/tags",
            r#"{"biz_tag":"strict2","step":10,"order":"strict","format":{"width":6,"reset":"never"}}"#,
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (400, "invalid_request".to_owned()),
        "{}",
        r.text
    );
    let r = a
        .send(reqwest::Method::DELETE, "/api/v1/tags/strict", None, None)
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    let r = a
        .post(
            "/api/v1/tags",
            r#"{"biz_tag":"strict","step":10,"max_id":1000}"#,
        )
        .await;
    assert_eq!(r.status, 409, "a strict name keeps its order: {}", r.text);
    a.stop().await;
    b.stop().await;
}

/// `kill -9` of the owner, ten rounds, three servers on one SQLite file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs time (about 30 s): scripts/test.sh runs it"]
async fn kill9_of_the_owner_ten_times_on_sqlite() {
    let (urls, _dir) = one_database(Db::Sqlite).await;
    let (v, gaps) = run(urls, Vec::new(), Fault::Kill9, 10).await;
    assert_held("kill9-sqlite", &v, &gaps);
}

/// `SIGSTOP` of the owner past its lease, then `SIGCONT`, ten rounds, on one SQLite file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs time (about 40 s): scripts/test.sh runs it"]
async fn sigstop_of_the_owner_ten_times_on_sqlite() {
    let (urls, _dir) = one_database(Db::Sqlite).await;
    let (v, gaps) = run(urls, Vec::new(), Fault::Pause, 10).await;
    assert_held("sigstop-sqlite", &v, &gaps);
}

/// A graceful stop of the owner (it releases the tag), three rounds, on one SQLite file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs time (about 10 s): scripts/test.sh runs it"]
async fn graceful_stops_of_the_owner_on_sqlite() {
    let (urls, _dir) = one_database(Db::Sqlite).await;
    let (v, gaps) = run(urls, Vec::new(), Fault::Graceful, 3).await;
    assert_held("graceful-sqlite", &v, &gaps);
}

/// Wall clocks stepped an hour and two hours, both ways, on the owner and another server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs libfaketime: scripts/test.sh runs it"]
async fn wall_clock_steps_on_sqlite() {
    let (urls, _dir) = one_database(Db::Sqlite).await;
    let (v, gaps) = run(urls, Vec::new(), Fault::ClockSteps, 4).await;
    assert_held("clock-steps-sqlite", &v, &gaps);
}

/// `kill -9`, `SIGSTOP` and the owner cut from the database, on MariaDB and PostgreSQL, each
/// server through its own fault proxy.
async fn faults_on_a_server_database(db: Db) {
    for fault in [Fault::Kill9, Fault::Pause, Fault::Partition] {
        let mut proxies = Vec::new();
        let mut urls = Vec::new();
        let (first, url, direct) = crate::support::proxy::proxied_database_on(db).await;
        proxies.push(first);
        urls.push(url);
        for _ in 0..2 {
            let p = FaultProxy::start(crate::support::proxy::socket_of(&direct))
                .await
                .unwrap();
            urls.push(crate::support::proxy::through(&p, &direct));
            proxies.push(p);
        }
        let (v, gaps) = run(urls, proxies, fault, 2).await;
        assert_held(&format!("{fault:?}-{db:?}").to_lowercase(), &v, &gaps);
    }
}
crate::on_proxied_databases!(faults_on_a_server_database);

/// Three servers, one on each Galera node (multi-primary: takeovers and renewals from
/// different nodes conflict at certification), with `kill -9` and `SIGSTOP` of the owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a MariaDB Galera cluster: scripts/test.sh runs it"]
async fn kill9_and_sigstop_on_galera() {
    let _serial = crate::support::galera::serial().await;
    for fault in [Fault::Kill9, Fault::Pause] {
        let urls = crate::support::galera::create_database().await;
        let (v, gaps) = run(urls, Vec::new(), fault, 2).await;
        assert_held(&format!("{fault:?}-galera").to_lowercase(), &v, &gaps);
    }
}

/// A strict tag deleted on a server that does not own it stops being served by its owner
/// within a renewal period (the owner row goes; the owner's next renewal fails), then answers
/// 404 everywhere.
#[tokio::test]
async fn a_deleted_strict_tag_stops_being_served_by_its_owner() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let tweak = |s: &mut leafid::config::Settings| s.segment.strict_lease_ms = LEASE_MS;
    let a = spawn_on(&url, tweak).await;
    let b = spawn_on(&url, tweak).await;
    create_strict(&a.client, &a.address, "gone", 1000).await;
    let first = a.leaf_id("gone").await;
    assert!(
        b.leaf_id("gone").await > first,
        "b forwards to a, the owner"
    );
    let events = |app: &crate::support::TestApp, event: &'static str| {
        let address = app.address.clone();
        async move {
            let series = format!(r#"leafid_strict_events_total{{event="{event}"}}"#);
            crate::support::metric_value(&address, &series)
                .await
                .unwrap_or(0.0)
        }
    };
    assert_eq!(
        events(&a, "takeover").await,
        1.0,
        "a took the tag over once"
    );
    assert_eq!(events(&b, "hop").await, 1.0, "b passed one request to a");
    let deleted = Instant::now();
    let r = b
        .send(reqwest::Method::DELETE, "/api/v1/tags/gone", None, None)
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    let mut served_after = Duration::ZERO;
    loop {
        let r = a.get("/api/segment/get/gone").await;
        if r.status == 404 {
            break;
        }
        assert_eq!(r.status, 200, "{}", r.text);
        served_after = deleted.elapsed();
        // The promise is a renewal period (`L/4`, measured about 230 ms); twice the lease is
        // room for a busy machine, and still far below "until the owner runs out".
        assert!(
            served_after < Duration::from_millis(2 * LEASE_MS),
            "the owner served a deleted tag {served_after:?} after the delete"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(b.get("/api/segment/get/gone").await.status, 404);
    record_figure(
        "strict-delete",
        &format!(
            "strict delete: the owner served the deleted tag up to {served_after:?} after the delete"
        ),
    );
    a.stop().await;
    b.stop().await;
}

/// The owner's door for hops refuses a caller without the owner row's key: 401 on the owner
/// with a wrong key, 503 on a server that owns nothing (for any name, existing or not).
#[tokio::test]
async fn the_hop_door_refuses_callers_without_the_peer_key() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let a = spawn_on(&url, |_| {}).await;
    create_strict(&a.client, &a.address, "door", 100).await;
    a.leaf_id("door").await;
    let hop = |tag: String, key: &'static str| {
        let (client, address) = (a.client.clone(), a.address.clone());
        async move {
            let r = client
                .post(format!("{address}/internal/v1/strict/{tag}/ids?count=5"))
                .header("leafid-peer-key", key)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let body: serde_json::Value = r.json().await.unwrap();
            (status, body["code"].as_str().unwrap_or_default().to_owned())
        }
    };
    assert_eq!(
        hop("door".into(), "guess").await,
        (401, "unauthorized".to_owned())
    );
    for i in 0..200 {
        assert_eq!(
            hop(format!("nope{i}"), "guess").await,
            (503, "segments_not_ready".to_owned())
        );
    }
    let r = a
        .client
        .post(format!("{}/internal/v1/strict/door/ids?count=5", a.address))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "no key at all");
    a.stop().await;
}

/// Admins racing on two servers to create one name as strict and as plain (or formatted): one
/// create wins per name, the other gets 409, and both servers then serve the name the winner's
/// way (a strict name is never also a plain one, so no server hands out its ids from a buffer of
/// its own).
#[tokio::test]
async fn admins_racing_to_create_one_name_strict_and_plain_get_one_kind() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let a = spawn_on(&url, |_| {}).await;
    let b = spawn_on(&url, |_| {}).await;
    for i in 0..20 {
        let name = format!("race{i}");
        let strict = format!(r#"{{"biz_tag":"{name}","step":10,"order":"strict"}}"#);
        let other = if i % 2 == 0 {
            format!(r#"{{"biz_tag":"{name}","step":10}}"#)
        } else {
            format!(r#"{{"biz_tag":"{name}","step":10,"format":{{"width":6,"reset":"never"}}}}"#)
        };
        let (first, second) = if i % 3 == 0 { (&a, &b) } else { (&b, &a) };
        let (r1, r2) = tokio::join!(
            first.post("/api/v1/tags", &strict),
            second.post("/api/v1/tags", &other)
        );
        let won: Vec<u16> = [r1.status, r2.status]
            .into_iter()
            .filter(|s| *s == 201)
            .collect();
        assert_eq!(won.len(), 1, "{name}: {} / {}", r1.text, r2.text);
        assert!(
            [r1.status, r2.status].contains(&409),
            "{name}: {} / {}",
            r1.text,
            r2.text
        );
        let strict_won = r1.status == 201;
        for app in [&a, &b] {
            let r = app.get(&format!("/api/segment/get/{name}")).await;
            assert_eq!(r.status, 200, "{name}: {}", r.text);
            let view = app.get(&format!("/api/v1/tags/{name}")).await.json();
            let order = if strict_won { "strict" } else { "per_server" };
            assert_eq!(view["order"], order, "{name}: {view}");
        }
    }
    a.stop().await;
    b.stop().await;
}

/// An operator's slip: two servers given one `server.advertise_url` (here b is given a's). Once
/// b owns the tag, a finds the owner row naming its own address: it sends no hop, answers
/// `segments_not_ready` at once (not after the segment wait), counts `address_clash` and logs
/// it; b goes on serving, and no id is handed out twice or out of order. When b stops
/// (releasing the tag), a takes it over and serves above everything b handed out.
#[tokio::test]
async fn two_servers_given_one_advertised_address_never_mix_their_ids() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let tweak = |s: &mut leafid::config::Settings| s.segment.strict_lease_ms = LEASE_MS;
    // A segment wait of 20 s: a refusal within 10 s shows that no wait was served, with room
    // for a busy core.
    let tweak = move |s: &mut leafid::config::Settings| {
        tweak(s);
        s.segment.wait_timeout_ms = 20_000;
    };
    let a = spawn_on(&url, tweak).await;
    let a_address = a.address.clone();
    let b = spawn_on(&url, move |s| {
        tweak(s);
        s.server.advertise_url = a_address;
    })
    .await;
    create_strict(&b.client, &b.address, "clash", 1000).await;
    let mut last = 0;
    for _ in 0..20 {
        let id = b.leaf_id("clash").await;
        assert!(id > last, "{id} after {last}");
        last = id;
    }
    for _ in 0..5 {
        let asked = Instant::now();
        let r = a.get("/api/segment/get/clash").await;
        assert_eq!(r.status, 503, "{}", r.text);
        assert_eq!(r.json()["code"], "segments_not_ready", "{}", r.text);
        // The reference is taken before the request; the refusal comes without the wait.
        assert!(
            asked.elapsed() < Duration::from_secs(10),
            "{:?}",
            asked.elapsed()
        );
        let id = b.leaf_id("clash").await;
        assert!(id > last, "{id} after {last}");
        last = id;
    }
    let series = r#"leafid_strict_events_total{event="address_clash"}"#;
    let clashes = crate::support::metric_value(&a.address, series).await;
    assert_eq!(clashes, Some(5.0), "counted on a");
    b.stop().await;
    let mut after = None;
    let until = Instant::now() + GAP_BOUND;
    while after.is_none() && Instant::now() < until {
        let r = a.get("/api/segment/get/clash").await;
        if r.status == 200 {
            after = r.text.parse::<i64>().ok();
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let after = after.expect("a takes the tag over once b released it");
    assert!(after > last, "{after} after {last}");
    a.stop().await;
}

/// `count=1000` of the tag `paced` with the caller token `t`.
async fn paced_batch(app: &crate::support::TestApp, t: &str) -> crate::support::Reply {
    app.send(
        reqwest::Method::GET,
        "/api/v1/segment/paced/ids?count=1000",
        None,
        Some(t),
    )
    .await
}

/// One caller's burst on a strict tag: its token's rate is charged by the server it reached,
/// before the hop (one bucket per server, as for every tag), so a token with a burst of 20 gets
/// 20 ids from the owner through the other server, then `429 quota_exhausted`; the hop itself is
/// not charged again at the owner; another token goes on, its ids above every earlier one.
#[tokio::test]
async fn a_burst_on_a_strict_tag_is_charged_where_it_arrives() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let tweak = |s: &mut leafid::config::Settings| s.segment.strict_lease_ms = LEASE_MS;
    let a = spawn_on(&url, tweak).await;
    create_strict(&a.client, &a.address, "paced", 1000).await;
    let mut last = a.leaf_id("paced").await; // a owns the tag
    let token = |body: serde_json::Value| {
        let a = &a;
        async move {
            let r = a.post("/api/v1/tokens", &body.to_string()).await;
            assert_eq!(r.status, 201, "{}", r.text);
            r.json()["token"].as_str().unwrap().to_owned()
        }
    };
    let slow = token(
        serde_json::json!({"name": "slow", "tags": ["paced"], "rate_per_sec": 1, "burst": 20}),
    )
    .await;
    let free = token(serde_json::json!({"name": "free", "tags": ["*"]})).await;
    // Started after the tokens: it reads them at its start (a running server within the
    // tokens' refresh interval).
    let b = spawn_on(&url, tweak).await;
    let mut taken = 0;
    for (server, app) in [("b, through the hop", &b), ("a, the owner", &a)] {
        let r = paced_batch(app, &slow).await;
        assert_eq!(r.status, 200, "{server}: {}", r.text);
        assert_eq!(r.json()["strict"], true, "{}", r.text);
        let ids: Vec<i64> = serde_json::from_value(r.json()["ids"].clone()).unwrap();
        assert_eq!(ids.len(), 20, "{server}: the burst");
        assert!(
            ids[0] > last && ids.windows(2).all(|w| w[0] < w[1]),
            "{server}: {ids:?} after {last}"
        );
        last = *ids.last().unwrap();
        taken += ids.len();
        // At 1 id/s a slow machine may let one more id through; then the bucket is empty.
        let mut tries = 0;
        let r = loop {
            let r = paced_batch(app, &slow).await;
            if r.status != 200 || tries == 3 {
                break r;
            }
            let ids: Vec<i64> = serde_json::from_value(r.json()["ids"].clone()).unwrap();
            assert!(ids[0] > last, "{server}: {ids:?} after {last}");
            last = *ids.last().unwrap();
            taken += ids.len();
            tries += 1;
        };
        assert_eq!(r.status, 429, "{server}: {}", r.text);
        assert_eq!(r.json()["code"], "quota_exhausted", "{}", r.text);
        let r = paced_batch(app, &free).await;
        assert_eq!(r.status, 200, "{server}: {}", r.text);
        let ids: Vec<i64> = serde_json::from_value(r.json()["ids"].clone()).unwrap();
        assert!(
            ids.len() > 20 && ids[0] > last,
            "{server}: {} ids from {} after {last}",
            ids.len(),
            ids[0]
        );
        last = *ids.last().unwrap();
    }
    assert!(taken <= 2 * 20 + 6, "the slow token took {taken}");
    a.stop().await;
    b.stop().await;
}

/// `leafid_strict_events_total{event}` of the server at `address` (0 before its first).
async fn strict_events(address: &str, event: &str) -> f64 {
    let series = format!(r#"leafid_strict_events_total{{event="{event}"}}"#);
    crate::support::metric_value(address, &series)
        .await
        .unwrap_or(0.0)
}

/// Hops coalesced: 24 callers at once on a server that does not own the tag, each asking 15
/// times (Leaf's route and the batch route in turn) while callers on the owner ask too. Every
/// request is answered, the history checker finds no id twice and none out of real-time order
/// across both servers, and the forwarding server sent fewer HTTP hops than it forwarded
/// requests (requests that arrived while a hop was on its way went together in the next).
#[tokio::test]
async fn concurrent_requests_through_another_server_share_hops_and_keep_order() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let tweak = |s: &mut leafid::config::Settings| s.segment.strict_lease_ms = LEASE_MS;
    let a = spawn_on(&url, tweak).await;
    let b = spawn_on(&url, tweak).await;
    create_strict(&a.client, &a.address, "shared", 1000).await;
    a.leaf_id("shared").await; // a owns the tag
    let history = History::default();
    let mut tasks = Vec::new();
    for k in 0..28 {
        // 24 callers on b, 4 on the owner.
        let (server, address) = if k < 24 {
            (1, b.address.clone())
        } else {
            (0, a.address.clone())
        };
        let history = history.clone();
        tasks.push(tokio::spawn(async move {
            let client = reqwest::Client::new();
            for turn in 0..15 {
                let start = Instant::now();
                let ids = ask(&client, &address, "shared", turn + k)
                    .await
                    .unwrap_or_else(|| panic!("caller {k} turn {turn}: no ids"));
                history.record(Op {
                    start,
                    end: Instant::now(),
                    server,
                    ids,
                });
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let verdict = check(&history.ops());
    assert_eq!(verdict.ops, 28 * 15);
    assert_eq!(
        (verdict.duplicates, verdict.violations),
        (0, 0),
        "{:?}",
        verdict.first
    );
    let metric = |event: &'static str| strict_events(&b.address, event);
    let (forwarded, sent) = (metric("hop").await, metric("hop_sent").await);
    assert_eq!(
        forwarded,
        24.0 * 15.0,
        "every request on b went to the owner"
    );
    assert!(
        sent < forwarded,
        "{sent} hops for {forwarded} requests: none shared"
    );
    record_figure(
        "strict-coalesced",
        &format!(
            "strict hops coalesced: {forwarded} requests through another server in {sent} hops"
        ),
    );
    a.stop().await;
    b.stop().await;
}

/// A hop that fails while it carries a coalesced batch: 24 callers, eleven in twelve of their
/// requests on a server that does not own the tag (so its hops carry several requests each),
/// while the owner is stopped (`SIGSTOP`) for 2.5 leases. Every request of a failed batch looks
/// at the owner row again; the non-owner takes the tag over; the checker finds no id twice and
/// none out of real-time order, and a failover ends within the bound. While the owner was
/// stopped (no hop can be answered then) the non-owner counted more failed requests than hops
/// sent, so some failed hop carried several. (Counted to the end of the run instead, the hops
/// answered after the owner went on outnumbered them: that assertion failed once.)
#[tokio::test]
async fn a_hop_failing_with_a_coalesced_batch_loses_nothing_and_keeps_order() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let a = start(&url, &env(&[]));
    let b = start(&url, &env(&[]));
    let client = reqwest::Client::new();
    let tag = "batched";
    create_strict(&client, &a.address, tag, 50).await;
    let mut list = vec![a.address.clone()];
    list.extend(std::iter::repeat_n(b.address.clone(), 11));
    let addresses = Arc::new(RwLock::new(list));
    // The owner is whoever served first: make it `a`, before `b` is asked.
    assert!(ask(&client, &a.address, tag, 1).await.is_some());
    assert_eq!(owner(&client, &addresses, tag).await, 0, "a owns {tag}");
    let load = Load::start(addresses.clone(), tag, 24);
    load.flowing(200).await;
    let metric = |event: &'static str| strict_events(&b.address, event);
    let (failed_before, sent_before) = (metric("hop_failed").await, metric("hop_sent").await);
    let paused = a.pause();
    let at = Instant::now();
    tokio::time::sleep(Duration::from_millis(LEASE_MS * 5 / 2)).await;
    let (failed_stopped, sent_stopped) = (
        metric("hop_failed").await - failed_before,
        metric("hop_sent").await - sent_before,
    );
    paused.resume();
    let gap = load.gap_after(at).await;
    load.flowing(200).await;
    let (failed, sent) = (
        metric("hop_failed").await - failed_before,
        metric("hop_sent").await - sent_before,
    );
    let verdict = load.finish().await;
    assert_held("coalesced-pause", &verdict, &[gap]);
    assert!(failed >= 1.0, "no hop failed while the owner was stopped");
    assert!(
        failed_stopped > sent_stopped,
        "{failed_stopped} failed requests in {sent_stopped} hops while the owner was stopped: \
         no failed hop carried a batch"
    );
    record_figure(
        "strict-coalesced-pause-hops",
        &format!(
            "strict coalesced-pause: while the owner was stopped {failed_stopped} failed \
             requests in {sent_stopped} hops sent; to the end {failed} in {sent}"
        ),
    );
}
