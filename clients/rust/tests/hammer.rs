//! The local path hammered from several threads on one client against a real server, with
//! small batches so ranges switch all the time: no id twice, each caller's ids increase, and
//! a call that starts after another returned gets a larger id (every call's start and end
//! recorded on the monotonic clock).
//!
//! Needs `target/debug/leafid` and MariaDB (see `support`).

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use leafid_client::Client;
use support::{Server, create_database, create_tag};

/// One call: when it started and ended, and the id it got.
#[derive(Clone, Copy)]
struct Call {
    start: Instant,
    end: Instant,
    id: i64,
}

/// `threads` OS threads each take `per_thread` ids, alternating the sync `try_next_id` (with
/// `next_id` when it has nothing) and `next_id`.
fn hammer<F, A>(threads: usize, per_thread: usize, try_next: F, next: A) -> Vec<Vec<Call>>
where
    F: Fn() -> Option<i64> + Sync,
    A: Fn() -> i64 + Sync,
{
    std::thread::scope(|scope| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                let (try_next, next) = (&try_next, &next);
                scope.spawn(move || {
                    let mut calls = Vec::with_capacity(per_thread);
                    for i in 0..per_thread {
                        let start = Instant::now();
                        let id = if (i + t) % 2 == 0 {
                            try_next().unwrap_or_else(next)
                        } else {
                            next()
                        };
                        calls.push(Call {
                            start,
                            end: Instant::now(),
                            id,
                        });
                    }
                    calls
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// The three rules over every call of every caller.
fn check(callers: &[Vec<Call>]) {
    let mut seen = HashSet::new();
    for calls in callers {
        for w in calls.windows(2) {
            assert!(
                w[0].id < w[1].id,
                "a caller's ids decreased: {} then {}",
                w[0].id,
                w[1].id
            );
        }
        for c in calls {
            assert!(c.id > 0);
            assert!(seen.insert(c.id), "id {} handed out twice", c.id);
        }
    }
    // Linearizability: sorted by end, the largest id of the calls that ended before a call
    // started must be below its id.
    let mut by_end: Vec<Call> = callers.iter().flatten().copied().collect();
    by_end.sort_by_key(|c| c.end);
    let mut prefix_max = Vec::with_capacity(by_end.len());
    let mut max = 0;
    for c in &by_end {
        max = max.max(c.id);
        prefix_max.push(max);
    }
    for c in callers.iter().flatten() {
        let before = by_end.partition_point(|a| a.end < c.start);
        if before > 0 {
            assert!(
                prefix_max[before - 1] < c.id,
                "a call that started after one returned {} got {}",
                prefix_max[before - 1],
                c.id
            );
        }
    }
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn threads_hammering_one_client_get_unique_increasing_linearizable_ids() {
    let db = create_database();
    let server = Server::start(&db);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(create_tag(&server.address, "hammer", 50));
    let client = {
        let _guard = rt.enter();
        Client::builder()
            .servers([server.address.as_str()])
            // Tiny ranges (segments of 50 ids, batches of 7): switches all the time.
            .batch(7)
            .max_batch(7)
            .wait_timeout(Duration::from_secs(10))
            .build()
            .unwrap()
    };
    let supply = client.segment("hammer").unwrap();
    let snowflake = client.snowflake();
    let (threads, per_thread) = (4, 5_000);
    let callers = hammer(
        threads,
        per_thread,
        || supply.try_next_id(),
        || rt.block_on(supply.next_id()).unwrap(),
    );
    check(&callers);
    let stats = supply.stats();
    assert_eq!(stats.ids_served, (threads * per_thread) as u64);
    assert!(stats.batches >= (threads * per_thread / 7) as u64);

    let callers = hammer(
        threads,
        per_thread,
        || snowflake.try_next_id().map(|id| id as i64),
        || rt.block_on(snowflake.next_id()).unwrap() as i64,
    );
    check(&callers);
    assert_eq!(snowflake.stats().ids_served, (threads * per_thread) as u64);
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn the_batch_size_grows_with_a_fast_caller_and_errors_name_their_cause() {
    let db = create_database();
    let server = Server::start(&db);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(create_tag(&server.address, "demand", 1000));
    let _guard = rt.enter();
    let client = Client::builder()
        .servers([server.address.as_str()])
        .batch(10)
        .max_batch(100_000)
        .build()
        .unwrap();
    let supply = client.segment("demand").unwrap();
    let mut last = 0;
    for _ in 0..200_000 {
        let id = match supply.try_next_id() {
            Some(id) => id,
            None => rt.block_on(supply.next_id()).unwrap(),
        };
        assert!(id > last);
        last = id;
    }
    let stats = supply.stats();
    assert!(stats.batch_size >= 1000, "{stats:?}");
    assert!(stats.batches <= 2000, "{stats:?}");
    assert_eq!(client.stats().batch_size, stats.batch_size);

    // A cold tag with a 0 ms wait on a server that has not answered yet (a listener that
    // never does): no ids, and no server failed.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cold = Client::builder()
        .servers([format!("http://{}", silent.local_addr().unwrap())])
        .wait_timeout(Duration::ZERO)
        .build()
        .unwrap();
    let e = rt
        .block_on(cold.segment("demand").unwrap().next_id())
        .unwrap_err();
    assert!(e.to_string().contains("within the 0 ms wait"), "{e}");
    assert!(e.to_string().contains("no server has failed"), "{e}");

    // Nobody listens there: the cause is named, not just "error sending request".
    drop(server);
    let gone = Client::builder()
        .servers(["http://127.0.0.1:9"])
        .wait_timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let e = rt
        .block_on(gone.segment("demand").unwrap().next_id())
        .unwrap_err();
    assert!(
        e.to_string().to_lowercase().contains("connection refused"),
        "{e}"
    );
}
