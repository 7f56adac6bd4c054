//! The client against three real servers on one MariaDB database: a server killed under load
//! costs the callers nothing (no error, no duplicate, ids still increasing), and a stalled
//! server comes back after a health probe.
//!
//! Needs `target/debug/leafid` (see `support`).

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use leafid_client::{Client, Error};
use support::{Server, create_database, create_tag};

/// Three servers on a fresh database.
fn three_servers() -> Vec<Option<Server>> {
    let db = create_database();
    // One after the other: the first applies the migrations.
    (0..3).map(|_| Some(Server::start(&db))).collect()
}

/// Kills the server the client prefers (the one it is using); its index.
fn kill_preferred(servers: &mut [Option<Server>], client: &Client) -> usize {
    let (preferred, _) = client.preferred_server();
    let i = servers
        .iter()
        .position(|s| s.as_ref().is_some_and(|s| s.address == preferred))
        .expect("the preferred server is one of ours");
    servers[i].take().unwrap().kill9();
    i
}

/// Runs `tasks` callers of `next` until `stop`; each caller's ids and the errors seen.
async fn run_callers<F, Fut>(
    tasks: usize,
    stop: Arc<AtomicBool>,
    taken: Arc<AtomicU64>,
    next: F,
) -> Vec<tokio::task::JoinHandle<(Vec<i64>, Vec<Error>)>>
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = Result<i64, Error>> + Send,
{
    (0..tasks)
        .map(|_| {
            let (stop, taken, next) = (stop.clone(), taken.clone(), next.clone());
            tokio::spawn(async move {
                let (mut ids, mut errors) = (Vec::new(), Vec::new());
                while !stop.load(Ordering::Relaxed) {
                    match next().await {
                        Ok(id) => ids.push(id),
                        Err(e) => errors.push(e),
                    }
                    taken.fetch_add(1, Ordering::Relaxed);
                    // Let the refill task run: a caller that never yields starves it.
                    if ids.len() % 64 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                (ids, errors)
            })
        })
        .collect()
}

/// No error, every caller's ids increasing, no id twice overall; the number of ids.
async fn check_callers(handles: Vec<tokio::task::JoinHandle<(Vec<i64>, Vec<Error>)>>) -> usize {
    let mut seen = HashSet::new();
    for h in handles {
        let (ids, errors) = h.await.unwrap();
        assert!(errors.is_empty(), "errors reached a caller: {errors:?}");
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "a caller's ids are not increasing"
        );
        for id in ids {
            assert!(id > 0);
            assert!(seen.insert(id), "id {id} handed out twice");
        }
    }
    seen.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn killing_the_used_server_under_load_costs_callers_nothing() {
    let mut servers = three_servers();
    let first = servers[0].as_ref().unwrap().address.clone();
    create_tag(&first, "orders", 1000).await;
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.as_ref().unwrap().address.clone()))
        .batch(500)
        .backoff(Duration::from_millis(50), Duration::from_secs(1))
        .build()
        .unwrap();

    let unknown = client.segment("no-such-tag").unwrap().next_id().await;
    assert!(
        matches!(&unknown, Err(Error::Rejected { status: 404, code, .. }) if code == "unknown_biz_tag"),
        "{unknown:?}"
    );

    let orders = client.segment("orders").unwrap();
    let (stop, taken) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let supply = orders.clone();
    let callers = run_callers(4, stop.clone(), taken.clone(), move || {
        let s = supply.clone();
        async move { s.next_id().await }
    })
    .await;

    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = kill_preferred(&mut servers, &client);
    let at_kill = taken.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::Relaxed);
    let after = taken.load(Ordering::Relaxed) - at_kill;

    let total = check_callers(callers).await;
    let stats = orders.stats();
    eprintln!("{total} ids, {after} after the kill of server {killed}; {stats:?}");
    assert!(after > 10_000, "only {after} ids after the kill");
    let (now, up) = client.preferred_server();
    assert!(
        up && now != servers_address(killed, &client),
        "still on the dead server"
    );
    assert!(stats.batches > 2 && stats.ids_received >= total as u64);
    assert_eq!(stats.ids_served, total as u64, "{stats:?}");
    assert!(stats.failovers >= 1, "the kill made no failover: {stats:?}");
}

/// The address the client was given at `i` (servers are given in order).
fn servers_address(i: usize, client: &Client) -> String {
    // The killed server stays down (its probes fail): it is the one down server.
    let down = client.down_servers();
    assert_eq!(down.len(), 1, "down: {down:?} (killed index {i})");
    down[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn snowflake_ids_survive_a_killed_server() {
    let mut servers = three_servers();
    let client = Client::builder()
        .servers(servers.iter().map(|s| s.as_ref().unwrap().address.clone()))
        .batch(1000)
        .backoff(Duration::from_millis(50), Duration::from_secs(1))
        .build()
        .unwrap();
    let snowflake = client.snowflake();
    let (stop, taken) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let supply = snowflake.clone();
    let callers = run_callers(2, stop.clone(), taken.clone(), move || {
        let s = supply.clone();
        async move { s.next_id().await.map(|id| id as i64) }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    kill_preferred(&mut servers, &client);
    let at_kill = taken.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let after = taken.load(Ordering::Relaxed) - at_kill;
    let total = check_callers(callers).await;
    eprintln!(
        "{total} snowflake ids, {after} after the kill; {:?}",
        snowflake.stats()
    );
    assert!(after > 1000, "only {after} ids after the kill");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn a_stalled_server_is_skipped_then_brought_back_by_a_probe() {
    let db = create_database();
    let (a, b) = (Server::start(&db), Server::start(&db));
    create_tag(&b.address, "pay", 100).await;
    let client = Client::builder()
        .servers([a.address.clone(), b.address.clone()])
        .batch(10)
        // What tells the stalled server apart; also what the healthy one must answer within,
        // its first batch a lease on MariaDB by a debug build on a possibly loaded machine
        // (300 ms could mark it down too).
        .request_timeout(Duration::from_secs(2))
        .backoff(Duration::from_millis(50), Duration::from_millis(400))
        .build()
        .unwrap();
    let pay = client.segment("pay").unwrap();

    a.signal("STOP"); // frozen: connections are accepted by the kernel, never answered
    let first = pay.next_id().await.expect("b answers");
    assert_eq!(client.down_servers(), vec![a.address.clone()]);
    assert_eq!(client.preferred_server(), (b.address.clone(), true));

    a.signal("CONT");
    let mut waited = Duration::ZERO;
    while !client.down_servers().is_empty() {
        assert!(waited < Duration::from_secs(5), "a never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
        waited += Duration::from_millis(50);
    }
    // Still increasing after the refills that follow.
    let mut last = first;
    for _ in 0..50 {
        let id = pay.next_id().await.unwrap();
        assert!(id > last);
        last = id;
    }
}

/// A server with the snowflake engine switched off answers 404 `engine_disabled`: that refusal
/// is its own, not the cluster's, so the client asks the next server instead of failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn a_server_without_the_engine_is_skipped_not_final() {
    let db = create_database();
    let off = Server::start_with(&db, &[("LEAFID__SNOWFLAKE__ENABLED", "false")]);
    let on = Server::start(&db);
    let client = Client::builder()
        .servers([off.address.clone(), on.address.clone()])
        .batch(100)
        .backoff(Duration::from_millis(50), Duration::from_millis(400))
        .build()
        .unwrap();
    let snowflake = client.snowflake();
    let first = snowflake
        .next_id()
        .await
        .expect("the second server answers");
    let second = snowflake.next_id().await.unwrap();
    assert!(second > first);
    // (`off` is down only until its next probe: its `/health/ready` answers 200.)
    assert_eq!(client.preferred_server().0, on.address);
    assert_eq!(snowflake.stats().failovers, 1, "{:?}", snowflake.stats());

    // A refusal that holds everywhere (an unknown tag) is still final and reaches the caller.
    let unknown = client.segment("no-such-tag").unwrap().next_id().await;
    assert!(
        matches!(&unknown, Err(Error::Rejected { status: 404, code, .. }) if code == "unknown_biz_tag"),
        "{unknown:?}"
    );
}

/// Any 4xx that is not a refusal of the request itself is that server's failure. Here a real
/// server reached through a base URL with a path it does not route answers `404 not_found`:
/// the client asks the next server at once, the caller sees no error, and the stats count one
/// failover (later batches go straight to the server that answered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn a_4xx_of_one_server_only_fails_over_and_is_counted() {
    let db = create_database();
    let server = Server::start(&db);
    create_tag(&server.address, "acct", 100).await;
    let wrong = format!("{}/elsewhere", server.address);
    let client = Client::builder()
        .servers([wrong.clone(), server.address.clone()])
        .batch(10)
        .backoff(Duration::from_millis(50), Duration::from_millis(400))
        .build()
        .unwrap();
    let acct = client.segment("acct").unwrap();
    let mut last = 0;
    for _ in 0..25 {
        let id = acct.next_id().await.expect("the second server answers");
        assert!(id > last);
        last = id;
    }
    assert_eq!(client.preferred_server(), (server.address.clone(), true));
    assert_eq!(client.down_servers(), vec![wrong], "its probes get 404 too");
    let stats = client.stats();
    assert_eq!(
        stats,
        acct.stats(),
        "one supply: the client's total is its own"
    );
    assert_eq!(stats.failovers, 1, "{stats:?}");
    assert_eq!(stats.ids_served, 25, "{stats:?}");
    // 10, then 20, then 40 ids (the size doubles with a fast caller).
    assert!(stats.batches >= 2 && stats.discarded_ids == 0, "{stats:?}");
}
