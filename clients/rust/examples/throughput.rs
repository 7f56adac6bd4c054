//! The client's ids/s against `AtomicI64::fetch_add`, three cases (run by `bench.sh`):
//!
//! - `local`: `try_next_id` on a supply holding one huge range (no fetch in the timed part)
//!   against `AtomicI64::fetch_add(1, Relaxed)`, the same number of ids in the same thread,
//!   warmed, median of 7 rounds, subject and baseline alternated.
//! - `formatted_local`: a formatted supply's `try_next_id` (the lock-free fast take: one
//!   `fetch_add`, a seqlock read of the text's 32 bytes, the batch's ended word loaded, the
//!   text handed out as a `FormattedId`, which the caller drops without a free) on a prefilled
//!   batch of 1,000,000 `ORD-...` texts of 20 bytes, against the numeric `try_next_id` on a
//!   prefilled range (the `local` path) as the baseline: the same number of ids in the same
//!   thread, warmed, median of 7 rounds, subject and baseline alternated.
//! - `sustained_1`: one thread calling `try_next_id` (else `next_id`) on a fresh client with the
//!   default settings (batch 1000, the size following demand) for `LEAFID_BENCH_SECS` against
//!   the server, every fetch included; baseline: the counter in one thread for 1 s.
//! - `sustained_4`: four threads on one client; baseline: four threads on one shared counter.
//!
//! Environment: `LEAFID_BENCH_URL` (a running server), `LEAFID_BENCH_TAG` (an existing segment
//! tag), `LEAFID_BENCH_SECS` (default 10). Prints one `BENCH {json}` line per case on stdout.
//!
//! `LEAFID_BENCH_URL=http://127.0.0.1:8080 LEAFID_BENCH_TAG=t cargo run --release -p leafid-client --example throughput`

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use leafid_client::{Client, FormattedSupply, SegmentSupply};

/// Ids per round of the local case.
const LOCAL_IDS: i64 = 20_000_000;
const ROUNDS: usize = 7;
/// Ids per round of the formatted case (the texts made and put in the batch before the timed
/// part).
const FORMATTED_IDS: i64 = 1_000_000;

fn main() {
    let url = std::env::var("LEAFID_BENCH_URL").expect("LEAFID_BENCH_URL: a running server");
    let tag = std::env::var("LEAFID_BENCH_TAG").expect("LEAFID_BENCH_TAG: an existing tag");
    let secs: u64 = std::env::var("LEAFID_BENCH_SECS")
        .ok()
        .map_or(10, |s| s.parse().expect("LEAFID_BENCH_SECS: seconds"));
    let run = Duration::from_secs(secs);

    let (ids, base) = local();
    report(
        "local",
        ids,
        base,
        "warmed loop, median of 7 alternated rounds of 20M try_next_id vs AtomicI64::fetch_add(Relaxed), one thread",
    );

    let (ids, base) = formatted_local();
    report(
        "formatted_local",
        ids,
        base,
        "formatted next_id vs numeric next_id",
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    for threads in [1, 4] {
        let base = shared_counter(threads, Duration::from_secs(1));
        let ids = sustained(&rt, &url, &tag, threads, run);
        report(
            &format!("sustained_{threads}"),
            ids,
            base,
            &format!(
                "{threads} thread(s) on one fresh client (batch 1000, demand rule) for {secs} s vs {threads} thread(s) on one AtomicI64::fetch_add for 1 s"
            ),
        );
    }
}

fn report(case: &str, ids: f64, base: f64, method: &str) {
    println!(
        "BENCH {{\"client\":\"rust\",\"case\":\"{case}\",\"ids_per_s\":{ids:.0},\"baseline_per_s\":{base:.0},\"ratio\":{:.3},\"method\":\"{method}\"}}",
        ids / base
    );
}

/// Median ids/s of the local path and of the counter.
fn local() -> (f64, f64) {
    let counter = AtomicI64::new(0);
    let count = || {
        let t = Instant::now();
        for _ in 0..LOCAL_IDS {
            black_box(counter.fetch_add(1, Ordering::Relaxed));
        }
        t.elapsed()
    };
    let take = || {
        let supply = SegmentSupply::prefilled(1..=LOCAL_IDS);
        let t = Instant::now();
        for _ in 0..LOCAL_IDS {
            black_box(supply.try_next_id().expect("a prefilled id"));
        }
        t.elapsed()
    };
    // Warm-up.
    count();
    take();
    let (mut subject, mut baseline) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        baseline.push(count());
        subject.push(take());
    }
    let per_s = |mut v: Vec<Duration>| {
        v.sort();
        LOCAL_IDS as f64 / v[v.len() / 2].as_secs_f64()
    };
    (per_s(subject), per_s(baseline))
}

/// Median ids/s of the formatted local path and of the numeric one.
fn formatted_local() -> (f64, f64) {
    let texts = || -> Vec<String> {
        (1..=FORMATTED_IDS)
            .map(|k| format!("ORD-20261127{k:08}"))
            .collect()
    };
    let numeric = || {
        let supply = SegmentSupply::prefilled(1..=FORMATTED_IDS);
        let t = Instant::now();
        for _ in 0..FORMATTED_IDS {
            black_box(supply.try_next_id().expect("a prefilled id"));
        }
        t.elapsed()
    };
    let formatted = || {
        let supply = FormattedSupply::prefilled(texts());
        let t = Instant::now();
        for _ in 0..FORMATTED_IDS {
            black_box(supply.try_next_id().expect("a prefilled text"));
        }
        t.elapsed()
    };
    numeric();
    formatted();
    let (mut subject, mut baseline) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        baseline.push(numeric());
        subject.push(formatted());
    }
    let per_s = |mut v: Vec<Duration>| {
        v.sort();
        FORMATTED_IDS as f64 / v[v.len() / 2].as_secs_f64()
    };
    (per_s(subject), per_s(baseline))
}

/// Ids/s of `threads` threads on one shared counter for `run`.
fn shared_counter(threads: usize, run: Duration) -> f64 {
    let counter = AtomicI64::new(0);
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let n: u64 = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..4096 {
                            black_box(counter.fetch_add(1, Ordering::Relaxed));
                        }
                        n += 4096;
                        if started.elapsed() >= run {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    n as f64 / started.elapsed().as_secs_f64()
}

/// Ids/s of `threads` threads on one fresh client for `run`, every fetch included.
fn sustained(
    rt: &tokio::runtime::Runtime,
    url: &str,
    tag: &str,
    threads: usize,
    run: Duration,
) -> f64 {
    let client = {
        let _guard = rt.enter();
        Client::builder().servers([url]).build().expect("a client")
    };
    let supply = client.segment(tag).expect("a valid tag");
    let stop = AtomicBool::new(false);
    let waited = std::sync::atomic::AtomicU64::new(0);
    let started = Instant::now();
    let n: u64 = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let (mut n, mut last) = (0u64, 0i64);
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..4096 {
                            let id = match supply.try_next_id() {
                                Some(id) => id,
                                None => {
                                    waited.fetch_add(1, Ordering::Relaxed);
                                    rt.block_on(supply.next_id()).expect("an id")
                                }
                            };
                            assert!(id > last, "ids must increase");
                            last = id;
                        }
                        n += 4096;
                        if started.elapsed() >= run {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                    n
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let per_s = n as f64 / started.elapsed().as_secs_f64();
    eprintln!(
        "sustained_{threads}: {} calls found both batches spent; {:?}",
        waited.load(Ordering::Relaxed),
        client.stats()
    );
    per_s
}
