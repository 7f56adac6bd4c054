//! Worker leases under faults: two server processes on one MariaDB or PostgreSQL database (one
//! test per server: `mysql`, `postgres`), where the first (A) loses its lease and the second
//! (B) takes its worker id over. No id may ever be issued by both. A loses its lease in two ways, both pinned to one renewal by a fault proxy that holds
//! the answers from the first statement A sends after being armed (its renewal: the UPDATE runs
//! on the database, the acknowledgement is held):
//!
//! - the renewal hangs mid-query while A keeps serving (a partition that drops the replies);
//! - A is frozen (SIGSTOP) with the renewal on the wire, wakes (SIGCONT) after B took over, and
//!   meets the stale acknowledgement and the requests queued while it slept. Freezing A at a
//!   random moment instead rarely exposes anything: on waking, its heartbeat usually notices
//!   the lapsed lease before the first queued request is served, even in an engine that only
//!   checks the lease in its heartbeat.
//!
//! Also the start-up checks that keep a lease and the clock's backward wait within what the
//! heartbeat can guarantee.
//!
//! The two-server tests take real time (6 s leases, renewed every 2 s) and print what they
//! measured (`--nocapture` shows it).

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::Connection;
use sqlx::mysql::MySqlConnection;
use sqlx::postgres::PgConnection;

use crate::on_proxied_databases;
use crate::support::process::ServerProcess;
use crate::support::proxy::{FaultProxy, proxied_database_on, statement_matcher};
use crate::support::{Db, assert_unique_positive, fresh_db};

/// Short leases, so a lease runs out within a test: 6 s, renewed every 2 s. The direct
/// generator issues from the clock only (no ids ahead of it), on the default millisecond layout.
const SHORT_LEASE: [(&str, &str); 4] = [
    ("LEAFID__SNOWFLAKE__WORKER__STRATEGY", "lease"),
    ("LEAFID__SNOWFLAKE__WORKER__LEASE_SECS", "6"),
    ("LEAFID__SNOWFLAKE__WORKER__HEARTBEAT_SECS", "2"),
    ("LEAFID__SNOWFLAKE__GENERATOR", "direct"),
];

/// The default layout (`twitter`, 41/10/12 in ms from 2010-11-04T01:42:54.657Z).
const EPOCH_MS: i64 = 1_288_834_974_657;

/// The worker id of a `twitter`-layout id.
fn worker_of(id: i64) -> i64 {
    (id >> 12) & 0x3ff
}

/// The unix ms of a `twitter`-layout id.
fn unix_ms_of(id: i64) -> i64 {
    (id >> 22) + EPOCH_MS
}

fn unix_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Starts `leafid serve` with [`SHORT_LEASE`] on `url`, off the async threads.
async fn start_server(url: &str) -> ServerProcess {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || ServerProcess::start(&url, &SHORT_LEASE))
        .await
        .unwrap()
}

/// The worker id `/api/v1/snowflake/status` reports.
async fn worker_id(server: &ServerProcess) -> u64 {
    let status: Value = reqwest::get(format!("{}/api/v1/snowflake/status", server.address))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    status["worker_id"]
        .as_u64()
        .unwrap_or_else(|| panic!("no worker_id in {status}"))
}

/// `lease_until_ms` of worker 0, read directly from the database (not through any proxy).
async fn lease_until_ms(url: &str) -> i64 {
    const SQL: &str = "SELECT lease_until_ms FROM leafid_worker_lease WHERE worker_id = 0";
    let until = if url.starts_with("postgres") {
        let mut conn = PgConnection::connect(url).await.expect("connect");
        sqlx::query_scalar(SQL).fetch_one(&mut conn).await
    } else {
        let mut conn = MySqlConnection::connect(url).await.expect("connect");
        sqlx::query_scalar(SQL).fetch_one(&mut conn).await
    };
    until.expect("worker 0 has a lease row")
}

/// Waits until worker 0's lease has expired in the database and returns its end (unix ms):
/// the deadline of its holder, which nothing it can do any more will move (renewals must name
/// the owner, and the next claim changes it).
async fn wait_for_lease_expiry(url: &str, at_most: Duration) -> i64 {
    let started = Instant::now();
    loop {
        let until = lease_until_ms(url).await;
        // A little past the end, so the next server's clock sees it expired too.
        if unix_ms() > until + 200 {
            return until;
        }
        assert!(
            started.elapsed() < at_most,
            "worker 0 still leased until {until} after {at_most:?}: its holder kept renewing"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One answer of a server.
#[derive(Debug)]
struct Answer {
    /// When the request was sent (unix ms).
    sent_ms: i64,
    /// When its answer (or error) came (unix ms).
    answered_ms: i64,
    /// HTTP status; 0 when no HTTP answer came (connection error, timeout).
    status: u16,
    /// The ids of a 200.
    ids: Vec<i64>,
    /// The body of anything else (or the transport error).
    body: String,
}

/// One request: a batch of 50 from the v1 route, or (every 4th) one id from Leaf's route.
async fn ask(client: &reqwest::Client, base: &str, n: usize) -> Answer {
    let single = n % 4 == 3;
    let route = if single {
        "/api/snowflake/get/x"
    } else {
        "/api/v1/snowflake/ids?count=50"
    };
    let sent_ms = unix_ms();
    let sent = client
        .get(format!("{base}{route}"))
        .timeout(Duration::from_secs(30))
        .send()
        .await;
    let answered = match sent {
        Ok(resp) => {
            let status = resp.status().as_u16();
            resp.text().await.map(|body| (status, body))
        }
        Err(e) => Err(e),
    };
    let (status, body) = answered.unwrap_or_else(|e| (0, e.to_string()));
    let answered_ms = unix_ms();
    if status != 200 {
        return Answer {
            sent_ms,
            answered_ms,
            status,
            ids: Vec::new(),
            body,
        };
    }
    let ids = if single {
        vec![
            body.parse()
                .unwrap_or_else(|_| panic!("200 {route}: {body}")),
        ]
    } else {
        let v: Value =
            serde_json::from_str(&body).unwrap_or_else(|_| panic!("200 {route}: {body}"));
        serde_json::from_value(v["ids"].clone()).unwrap_or_else(|_| panic!("200 {route}: {body}"))
    };
    Answer {
        sent_ms,
        answered_ms,
        status,
        ids,
        body: String::new(),
    }
}

/// `clients` tasks asking `base` for ids, one request at a time each, until `stop` is set (or
/// 60 s pass). After a refusal a task waits 10 ms, so a refusing server is not spun on.
fn hammer(
    base: &str,
    clients: usize,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<Vec<Answer>>> {
    (0..clients)
        .map(|c| {
            let (base, stop) = (base.to_owned(), stop.clone());
            tokio::spawn(async move {
                let client = reqwest::Client::new();
                let started = Instant::now();
                let mut answers = Vec::new();
                let mut n = c;
                while !stop.load(Ordering::Relaxed) && started.elapsed() < Duration::from_secs(60) {
                    let answer = ask(&client, &base, n).await;
                    if answer.status != 200 {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    answers.push(answer);
                    n += 1;
                }
                answers
            })
        })
        .collect()
}

/// Stops the tasks of [`hammer`] and gathers their answers, in no particular order.
async fn gather(
    stop: &AtomicBool,
    clients: Vec<tokio::task::JoinHandle<Vec<Answer>>>,
) -> Vec<Answer> {
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for c in clients {
        all.extend(c.await.unwrap());
    }
    all
}

/// Every id of the 200 answers.
fn ids(answers: &[Answer]) -> Vec<i64> {
    answers.iter().flat_map(|a| a.ids.iter().copied()).collect()
}

/// How many answers of each kind: `200`, `503 snowflake_not_ready`, `0 <transport error>`...
fn tally(answers: &[Answer]) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for a in answers {
        let kind = match (a.status, code(a)) {
            (200, _) => "200".to_owned(),
            (status, Some(code)) => format!("{status} {code}"),
            (status, None) => format!("{status} without a JSON code"),
        };
        *kinds.entry(kind).or_default() += 1;
    }
    kinds
}

/// The `code` of an error body, if it is JSON with one.
fn code(a: &Answer) -> Option<String> {
    let body: Value = serde_json::from_str(&a.body).ok()?;
    body["code"].as_str().map(str::to_owned)
}

/// Asserts every answer that is not a 200 is a clean 503 whose JSON body names why, except
/// requests for which `may_go_unanswered` allows no HTTP answer at all.
fn assert_clean_refusals(
    server: &str,
    answers: &[Answer],
    may_go_unanswered: impl Fn(&Answer) -> bool,
) {
    let refusals = answers.iter().filter(|a| a.status != 200);
    for a in refusals.filter(|a| !(a.status == 0 && may_go_unanswered(a))) {
        let code = code(a);
        assert!(
            a.status == 503
                && matches!(
                    code.as_deref(),
                    Some("snowflake_not_ready" | "database_unavailable")
                ),
            "{server} answered {} with {:?} (all answers: {:?})",
            a.status,
            a.body,
            tally(answers)
        );
    }
}

/// How many of `b` are also in `a`.
fn overlap(a: &[i64], b: &[i64]) -> usize {
    let a: HashSet<i64> = a.iter().copied().collect();
    b.iter().filter(|id| a.contains(id)).count()
}

/// Ids of worker 0 from a moment at or after `deadline_ms`.
fn worker0_ids_from(ids: &[i64], deadline_ms: i64) -> Vec<i64> {
    ids.iter()
        .copied()
        .filter(|&id| worker_of(id) == 0 && unix_ms_of(id) >= deadline_ms)
        .collect()
}

/// Stalls `proxy` from the next statement its server sends, and returns once that was sent.
/// After start-up the only statements of a server asked for snowflake ids alone are its lease
/// renewals (every 2 s here), so the statement whose answer is held is a renewal.
async fn stall_after_next_renewal(proxy: &FaultProxy, db: Db) {
    proxy.stall_after(statement_matcher(db));
    let arming = Instant::now();
    // A renewal is due every 2 s; 15 s leaves a loaded machine room to be late.
    while !proxy.is_stalled() {
        assert!(
            arming.elapsed() < Duration::from_secs(15),
            "no statement in 15 s"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn a_lease_renewal_that_hangs_mid_query_never_lets_two_servers_issue_one_id(db: Db) {
    // A reaches the database through the proxy, B directly.
    let (proxy, through_proxy, direct) = proxied_database_on(db).await;
    let a = start_server(&through_proxy).await;
    assert_eq!(worker_id(&a).await, 0, "the first server takes worker 0");
    let stop_a = Arc::new(AtomicBool::new(false));
    let clients_a = hammer(&a.address, 3, &stop_a);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // A's next statement (its next renewal: nothing else of A's touches the database now)
    // reaches MariaDB and runs, but from then on no answer comes back: the renewal hangs.
    stall_after_next_renewal(&proxy, db).await;
    let stalled_ms = unix_ms();
    // Once A's lease has run out in the database, B starts and takes worker 0 over.
    let deadline_ms = wait_for_lease_expiry(&direct, Duration::from_secs(15)).await;
    let b = start_server(&direct).await;
    let b_started_ms = unix_ms();
    let b_worker = worker_id(&b).await;
    assert_eq!(
        b_worker, 0,
        "B got worker {b_worker}, not A's expired 0: the test would prove nothing"
    );
    let stop_b = Arc::new(AtomicBool::new(false));
    let clients_b = hammer(&b.address, 3, &stop_b);
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The partition heals: A's held answers arrive late, and its lease is B's now.
    proxy.heal();
    let healed_ms = unix_ms();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (seen_a, seen_b) = tokio::join!(gather(&stop_a, clients_a), gather(&stop_b, clients_b));
    let a_worker_at_end = worker_id(&a).await;

    let (ids_a, ids_b) = (ids(&seen_a), ids(&seen_b));
    let issued_by_both = overlap(&ids_a, &ids_b);
    let before_stall = seen_a
        .iter()
        .filter(|x| x.sent_ms < stalled_ms)
        .map(|x| x.ids.len())
        .sum::<usize>();
    let a_past_deadline = worker0_ids_from(&ids_a, deadline_ms);
    let a_worker0_after_heal: usize = seen_a
        .iter()
        .filter(|x| x.sent_ms >= healed_ms)
        .flat_map(|x| &x.ids)
        .filter(|&&id| worker_of(id) == 0)
        .count();
    let first_refusal_ms = seen_a
        .iter()
        .filter(|x| x.status != 200 && x.sent_ms >= stalled_ms)
        .map(|x| x.sent_ms)
        .min();
    eprintln!(
        "hung renewal: A issued {} ids ({before_stall} before the stall), answers {:?}; its \
         lease ended {} ms after the stall, A first refused {:?} ms after the stall; B took \
         worker 0 {} ms after the stall and issued {} ids, answers {:?}; ids issued by both: \
         {issued_by_both}; A's worker-0 ids from after its lease ended: {}; A's worker-0 ids \
         requested after the heal: {a_worker0_after_heal} (worker id at the end: \
         {a_worker_at_end})",
        ids_a.len(),
        tally(&seen_a),
        deadline_ms - stalled_ms,
        first_refusal_ms.map(|t| t - stalled_ms),
        b_started_ms - stalled_ms,
        ids_b.len(),
        tally(&seen_b),
        a_past_deadline.len(),
    );

    assert!(before_stall > 0 && !ids_b.is_empty(), "no load on A or B");
    assert_eq!(
        issued_by_both, 0,
        "{issued_by_both} ids issued by both A and B"
    );
    assert_unique_positive(&ids_a);
    assert_unique_positive(&ids_b);
    assert_clean_refusals("A", &seen_a, |_| false);
    assert_clean_refusals("B", &seen_b, |_| false);
    assert!(
        a_past_deadline.is_empty(),
        "A issued {} worker-0 ids from after its lease ended, e.g. {}",
        a_past_deadline.len(),
        a_past_deadline[0]
    );
    assert!(
        first_refusal_ms.is_some_and(|t| t <= deadline_ms),
        "A did not refuse by its lease deadline (first refusal {first_refusal_ms:?}, deadline \
         {deadline_ms})"
    );
    assert_eq!(
        a_worker0_after_heal, 0,
        "A resumed issuing under worker 0 after the heal"
    );
}

on_proxied_databases!(a_lease_renewal_that_hangs_mid_query_never_lets_two_servers_issue_one_id);

async fn a_server_paused_mid_renewal_past_its_lease_issues_nothing_when_it_wakes(db: Db) {
    // A reaches the database through a proxy, only to pause A at the worst moment: with a
    // renewal on the wire.
    let (proxy, through_proxy, direct) = proxied_database_on(db).await;
    let a = start_server(&through_proxy).await;
    assert_eq!(worker_id(&a).await, 0, "the first server takes worker 0");
    // The clients keep asking A throughout: at the pause each has a request in flight on a
    // connection A already accepted, which A meets the moment it wakes.
    let stop_a = Arc::new(AtomicBool::new(false));
    let clients_a = hammer(&a.address, 6, &stop_a);
    tokio::time::sleep(Duration::from_secs(1)).await;

    // A freezes (a long GC pause, a suspended VM) right after sending its next renewal, which
    // runs on MariaDB; its acknowledgement is held until A is frozen, then delivered to it.
    stall_after_next_renewal(&proxy, db).await;
    let paused = a.pause();
    let paused_ms = unix_ms();
    proxy.heal();
    // Frozen past its lease: B takes worker 0 over.
    let deadline_ms = wait_for_lease_expiry(&direct, Duration::from_secs(15)).await;
    let b = start_server(&direct).await;
    let b_worker = worker_id(&b).await;
    assert_eq!(
        b_worker, 0,
        "B got worker {b_worker}, not A's expired 0: the test would prove nothing"
    );
    let stop_b = Arc::new(AtomicBool::new(false));
    let clients_b = hammer(&b.address, 3, &stop_b);
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A wakes to a stale "renewed" and its queued requests, while B issues under worker 0.
    paused.resume();
    let resumed_ms = unix_ms();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (seen_a, seen_b) = tokio::join!(gather(&stop_a, clients_a), gather(&stop_b, clients_b));

    let (ids_a, ids_b) = (ids(&seen_a), ids(&seen_b));
    let issued_by_both = overlap(&ids_a, &ids_b);
    let a_past_deadline = worker0_ids_from(&ids_a, deadline_ms);
    let after_wake: Vec<&Answer> = seen_a
        .iter()
        .filter(|x| x.answered_ms >= resumed_ms)
        .collect();
    let served_after_wake = after_wake.iter().filter(|x| x.status == 200).count();
    let ids_after_wake: usize = after_wake.iter().map(|x| x.ids.len()).sum();
    // While A is frozen its HTTP timers run out, and on waking it closes the connections they
    // guard, with the requests queued on them: no answer, but nothing issued either.
    let cut_by_the_freeze = |x: &Answer| x.sent_ms < resumed_ms + 1000;
    let unanswered: Vec<(i64, i64)> = seen_a
        .iter()
        .filter(|x| x.status == 0)
        .map(|x| (x.sent_ms - resumed_ms, x.answered_ms - resumed_ms))
        .collect();
    eprintln!(
        "paused mid-renewal: A frozen for {} ms (its lease ended {} ms after the pause); after \
         waking A served {served_after_wake} requests ({ids_after_wake} ids); A issued {} ids \
         in all, answers {:?}; B issued {} ids, answers {:?}; ids issued by both: \
         {issued_by_both}; A's worker-0 ids from after its lease ended: {}; requests to A \
         without an answer (sent, failed; ms from the wake): {unanswered:?}",
        resumed_ms - paused_ms,
        deadline_ms - paused_ms,
        ids_a.len(),
        tally(&seen_a),
        ids_b.len(),
        tally(&seen_b),
        a_past_deadline.len(),
    );

    assert!(!ids_a.is_empty() && !ids_b.is_empty(), "no load on A or B");
    assert_eq!(
        issued_by_both, 0,
        "{issued_by_both} ids issued by both A and B"
    );
    assert_unique_positive(&ids_a);
    assert_unique_positive(&ids_b);
    assert_clean_refusals("A", &seen_a, cut_by_the_freeze);
    assert_clean_refusals("B", &seen_b, |_| false);
    assert!(
        a_past_deadline.is_empty(),
        "A issued {} worker-0 ids from after its lease ended, e.g. {}",
        a_past_deadline.len(),
        a_past_deadline[0]
    );
}

on_proxied_databases!(a_server_paused_mid_renewal_past_its_lease_issues_nothing_when_it_wakes);

/// A child process killed (and reaped) when dropped, so a server that does start cannot
/// outlive its test.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `leafid serve` on a fresh SQLite file and port 0 with `env`, given `within` to exit: its
/// exit status (`None`: still running after `within`, then killed) and all it wrote to stderr.
fn serve_expecting_exit(env: &[(&str, &str)], within: Duration) -> (Option<ExitStatus>, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("leafid.db").display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_leafid"))
        .arg("serve")
        .env("LEAFID__DATABASE__URL", &url)
        .env("LEAFID__SERVER__PORT", "0")
        .env("LEAFID__SERVER__WORKERS", "1")
        .env("LEAFID__LOG__FORMAT", "text")
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn leafid");
    let mut stderr = child.stderr.take().unwrap();
    // Read on a thread: a server that keeps running keeps the pipe open until it is killed.
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let mut child = KillOnDrop(child);
    let started = Instant::now();
    let exit = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > within {
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(child);
    (exit, reader.join().unwrap())
}

/// Asserts `leafid serve` with `env` exits non-zero with one error line naming `key` and at
/// least one of `inputs`. It refuses before serving, in well under a second; 30 s is the limit
/// for a debug build on a loaded machine (a server that did start runs until then).
async fn assert_start_up_refused(
    env: Vec<(&'static str, &'static str)>,
    key: &str,
    inputs: &[&str],
) {
    let shown = format!("{env:?}");
    let (exit, stderr) =
        tokio::task::spawn_blocking(move || serve_expecting_exit(&env, Duration::from_secs(30)))
            .await
            .unwrap();
    let exit = exit.unwrap_or_else(|| {
        panic!("leafid started with {shown} and was still running after 30 s; stderr:\n{stderr}")
    });
    assert!(!exit.success(), "{shown}: exit {exit:?}\n{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(
        errors.len(),
        1,
        "{shown}: one error line expected:\n{stderr}"
    );
    assert!(errors[0].contains(key), "{shown}: {key} in {}", errors[0]);
    assert!(
        inputs.iter().any(|i| errors[0].contains(i)),
        "{shown}: one of {inputs:?} in {}",
        errors[0]
    );
}

/// Asserts `leafid serve` with `env` starts on a fresh SQLite file and serves an id.
async fn assert_serves_ids(env: Vec<(&'static str, &'static str)>) {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let server = tokio::task::spawn_blocking(move || ServerProcess::start(&url, &env))
        .await
        .unwrap();
    let r = reqwest::get(format!("{}/api/snowflake/get/x", server.address))
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert_eq!(status, 200, "{text}");
    assert!(text.parse::<i64>().is_ok_and(|id| id > 0), "{text}");
}

/// A seconds layout whose cached generator runs `2^boost_power` ticks ahead of the clock, with
/// a 60 s lease renewed every 10 s.
fn seconds_layout_with_boost(boost_power: &'static str) -> Vec<(&'static str, &'static str)> {
    vec![
        ("LEAFID__SNOWFLAKE__LAYOUT", "31/19/13"),
        ("LEAFID__SNOWFLAKE__UNIT", "seconds"),
        ("LEAFID__SNOWFLAKE__EPOCH", "2024-01-01T00:00:00Z"),
        ("LEAFID__SNOWFLAKE__GENERATOR", "cached"),
        ("LEAFID__SNOWFLAKE__CACHED__BOOST_POWER", boost_power),
        ("LEAFID__SNOWFLAKE__WORKER__STRATEGY", "lease"),
        ("LEAFID__SNOWFLAKE__WORKER__LEASE_SECS", "60"),
        ("LEAFID__SNOWFLAKE__WORKER__HEARTBEAT_SECS", "10"),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_refuses_a_lease_shorter_than_its_safety_margin() {
    // 64 ticks of 1 s ahead + a 10 s heartbeat + 1 s = 75 s: more than the 60 s lease.
    let refused = assert_start_up_refused(
        seconds_layout_with_boost("6"),
        "snowflake.worker.lease_secs",
        &["boost_power", "heartbeat_secs"],
    );
    // 8 ticks + 10 s + 1 s = 19 s: well inside it.
    let accepted = assert_serves_ids(seconds_layout_with_boost("3"));
    tokio::join!(refused, accepted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_refuses_a_backward_clock_wait_above_one_second() {
    // The direct generator waits a backward step out on the request's thread.
    let with_wait = |ms| {
        vec![
            ("LEAFID__SNOWFLAKE__GENERATOR", "direct"),
            ("LEAFID__CLOCK__MAX_BACKWARD_MS", ms),
        ]
    };
    let refused = assert_start_up_refused(
        with_wait("60000"),
        "clock.max_backward_ms",
        &["clock.max_backward_ms"],
    );
    let accepted = assert_serves_ids(with_wait("1000"));
    tokio::join!(refused, accepted);
}
