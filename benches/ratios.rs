//! Ratios that hold from run to run: each engine path against its baseline, interleaved.
//!
//! Criterion measures one function after another, so a figure and its baseline are minutes
//! apart and a machine whose speed drifts (a shared 2-core box: frequency, neighbours) moves
//! them differently; README's ratios moved by 2x between runs. Here every round times the
//! baseline and the subject back to back over the same number of iterations (alternating which
//! goes first), and the table shows the median ratio of the rounds with its spread (the middle
//! half of the 31 rounds, p25..p75, and min..max), so drift shows up as spread instead of
//! silently shifting the figure.
//!
//! `cargo bench --bench ratios` (about a minute); writes the table to stdout and
//! `target/ratios.md`. `RATIOS_ONLY=<text>` runs only the rows whose name contains it (for a
//! profiler). Ratio = baseline time / subject time: 1.0 is as fast as the baseline.

// criterion's `criterion_group!` and ferroid's id macro generate public items without docs.
#![allow(missing_docs)]

use std::collections::HashMap;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::{fill_forever, segment_engine, tag_names, two_threads, wide_layout};
use crossbeam_queue::ArrayQueue;
use leafid::segment::SegmentAllocator;
use leafid::snowflake::cached::{CachedConfig, CachedGenerator};
use leafid::snowflake::clock::{Clock, SystemClock};
use leafid::snowflake::direct::DirectGenerator;
use leafid::snowflake::ring::RingBuffer;

mod common;

ferroid::define_snowflake_id!(
    /// `common::wide_layout` for ferroid: sign / 39 ms / 2 worker / 22 sequence bits.
    WideId, u64,
    reserved: 1,
    timestamp: 39,
    machine_id: 2,
    sequence: 22
);

/// ferroid's lock-free generator on `wide_layout`: the fastest peer in `benches/peers.rs`, the
/// baseline that "ahead of every peer on the same layout" is measured against.
fn ferroid_wide()
-> ferroid::generator::AtomicSnowflakeGenerator<WideId, ferroid::time::MonotonicClock> {
    ferroid::generator::AtomicSnowflakeGenerator::new(
        1,
        ferroid::time::MonotonicClock::with_epoch(Duration::from_millis(
            common::WIDE_EPOCH_MS as u64,
        )),
    )
}

/// Rounds and length of one timed run (baseline side): `cargo bench` passes `--bench` and gets
/// the real run; `cargo test --all-targets` runs this binary without it, as a quick smoke check.
fn plan() -> (usize, Duration) {
    if std::env::args().any(|a| a == "--bench") {
        (31, Duration::from_millis(15))
    } else {
        (3, Duration::from_micros(200))
    }
}

/// Times `n` calls of `op` (on this thread).
fn timed<T>(n: u64, op: &impl Fn() -> T) -> Duration {
    let began = Instant::now();
    for _ in 0..n {
        black_box(op());
    }
    began.elapsed()
}

/// One line of the table.
struct Row {
    name: &'static str,
    baseline: &'static str,
    subject_ns: f64,
    baseline_ns: f64,
    ratio: f64,
    min: f64,
    p25: f64,
    p75: f64,
    max: f64,
    goal: Option<f64>,
}

/// Runs interleaved rounds of `baseline` and `subject` (each takes an iteration count
/// and returns the time it took) and summarises them.
fn compare(
    name: &'static str,
    baseline_name: &'static str,
    goal: Option<f64>,
    baseline: &dyn Fn(u64) -> Duration,
    subject: &dyn Fn(u64) -> Duration,
) -> Row {
    let (rounds, run) = plan();
    if std::env::var("RATIOS_ONLY").is_ok_and(|only| !name.contains(&only)) {
        return Row {
            name,
            baseline: baseline_name,
            subject_ns: f64::NAN,
            baseline_ns: f64::NAN,
            ratio: f64::NAN,
            min: f64::NAN,
            p25: f64::NAN,
            p75: f64::NAN,
            max: f64::NAN,
            goal,
        };
    }
    // Warm up both, then size a run to `run` on the baseline side.
    let mut n = 1_000u64;
    baseline(n);
    subject(n);
    loop {
        let took = baseline(n);
        if took >= run / 4 || n > 1 << 32 {
            n = (n as f64 * run.as_secs_f64() / took.as_secs_f64().max(1e-9)) as u64;
            break;
        }
        n *= 4;
    }
    let n = n.max(1);
    let (mut ratios, mut b_ns, mut s_ns) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (b, s) = if round % 2 == 0 {
            let b = baseline(n);
            (b, subject(n))
        } else {
            let s = subject(n);
            (baseline(n), s)
        };
        ratios.push(b.as_secs_f64() / s.as_secs_f64());
        b_ns.push(b.as_secs_f64() * 1e9 / n as f64);
        s_ns.push(s.as_secs_f64() * 1e9 / n as f64);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratio = median(&mut ratios);
    Row {
        name,
        baseline: baseline_name,
        subject_ns: median(&mut s_ns),
        baseline_ns: median(&mut b_ns),
        ratio,
        min: ratios[0],
        p25: ratios[ratios.len() / 4],
        p75: ratios[ratios.len() * 3 / 4],
        max: ratios[ratios.len() - 1],
        goal,
    }
}

fn segment_rows(rows: &mut Vec<Row>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let atomic = AtomicU64::new(0);
    let fetch_add = || atomic.fetch_add(1, Ordering::Relaxed);
    let one = tag_names(1);
    let engine = segment_engine(&rt, &one);
    let handle = rt.block_on(engine.handle(&one[0])).unwrap();
    let by_handle = || match handle.try_next_id() {
        Some(id) => id,
        None => rt.block_on(handle.next_id()).unwrap(),
    };
    let by_name = |e: &SegmentAllocator, tag: &str| match e.try_next_id(tag) {
        Some(id) => id,
        None => rt.block_on(e.next_id(tag)).unwrap(),
    };
    rows.push(compare(
        "segment `next_id`, per-tag handle, 1 thread",
        "`fetch_add`",
        Some(0.5),
        &|n| timed(n, &fetch_add),
        &|n| timed(n, &by_handle),
    ));
    rows.push(compare(
        "segment `next_id` by tag name, 1 thread",
        "`fetch_add`",
        Some(0.5),
        &|n| timed(n, &fetch_add),
        &|n| timed(n, &|| by_name(&engine, &one[0])),
    ));
    rows.push(compare(
        "segment `next_id` by tag name against the handle, 1 thread",
        "per-tag handle",
        None,
        &|n| timed(n, &by_handle),
        &|n| timed(n, &|| by_name(&engine, &one[0])),
    ));
    rows.push(compare(
        "segment `next_id` by tag name, 2 threads, one tag",
        "`fetch_add`, 2 threads, one atomic",
        Some(0.8),
        &|n| two_threads(n, &fetch_add),
        &|n| two_threads(n, &|| by_name(&engine, &one[0])),
    ));
    rows.push(compare(
        "segment `next_id`, per-tag handle, 2 threads, one tag",
        "`fetch_add`, 2 threads, one atomic",
        None,
        &|n| two_threads(n, &fetch_add),
        &|n| two_threads(n, &by_handle),
    ));
    let names = tag_names(10_000);
    let many = segment_engine(&rt, &names);
    let map: HashMap<String, AtomicU64> = names
        .iter()
        .map(|n| (n.clone(), AtomicU64::new(0)))
        .collect();
    let cursor = AtomicU64::new(0);
    let next_name = || {
        let i = cursor.fetch_add(7919, Ordering::Relaxed) as usize % names.len();
        &names[i]
    };
    rows.push(compare(
        "segment lookup + `next_id` among 10,000 tags",
        "`HashMap` lookup + `fetch_add`",
        Some(0.8),
        &|n| timed(n, &|| map[next_name()].fetch_add(1, Ordering::Relaxed)),
        &|n| timed(n, &|| by_name(&many, next_name())),
    ));
}

fn snowflake_rows(rows: &mut Vec<Row>) {
    let atomic = AtomicU64::new(0);
    let fetch_add = || atomic.fetch_add(1, Ordering::Relaxed);
    let direct = DirectGenerator::new(wide_layout(), 1, Arc::new(SystemClock), 5).unwrap();
    rows.push(compare(
        "direct snowflake `next_id` (coarse tick)",
        "`fetch_add`",
        None,
        &|n| timed(n, &fetch_add),
        &|n| timed(n, &|| direct.next_id().unwrap()),
    ));
    let ferroid = ferroid_wide();
    let ferroid_id = || ferroid.next_id(|_| std::hint::spin_loop()).to_raw();
    rows.push(compare(
        "direct snowflake `next_id` (coarse tick), same layout as the peer",
        "ferroid 2.0 atomic generator",
        Some(1.0),
        &|n| timed(n, &ferroid_id),
        &|n| timed(n, &|| direct.next_id().unwrap()),
    ));
    rows.push(compare(
        "direct snowflake `next_id`, 2 threads, same layout as the peer",
        "ferroid 2.0 atomic generator, 2 threads",
        Some(1.0),
        &|n| two_threads(n, &ferroid_id),
        &|n| two_threads(n, &|| direct.next_id().unwrap()),
    ));
    let precise = DirectGenerator::new(wide_layout(), 1, Arc::new(ClockPerId), 5).unwrap();
    rows.push(compare(
        "direct snowflake `next_id` (clock read per id)",
        "`fetch_add`",
        None,
        &|n| timed(n, &fetch_add),
        &|n| timed(n, &|| precise.next_id().unwrap()),
    ));
    let config = CachedConfig {
        boost_power: 0,
        ..CachedConfig::default()
    };
    let cached = CachedGenerator::new(wide_layout(), 1, Arc::new(SystemClock), config).unwrap();
    rows.push(compare(
        "cached snowflake take, 1 consumer",
        "`fetch_add`",
        Some(0.5),
        &|n| timed(n, &fetch_add),
        &|n| timed(n, &|| cached.take().unwrap()),
    ));
    cached.shutdown();

    // The ring against crossbeam's ArrayQueue, each kept full by a producer thread.
    let stop = AtomicBool::new(false);
    let queue = ArrayQueue::new(1 << 16);
    let ring = RingBuffer::new(1 << 16);
    std::thread::scope(|s| {
        s.spawn(|| fill_forever(&stop, |v| queue.push(v).is_ok()));
        s.spawn(|| fill_forever(&stop, |v| ring.try_put(v).is_ok()));
        let pop = || loop {
            if let Some(v) = queue.pop() {
                break v;
            }
        };
        let take = || loop {
            if let Some(v) = ring.try_take() {
                break v;
            }
        };
        rows.push(compare(
            "ring take, 1 consumer (producer thread refilling)",
            "`ArrayQueue` pop, same setup",
            None,
            &|n| timed(n, &pop),
            &|n| timed(n, &take),
        ));
        stop.store(true, Ordering::Relaxed);
    });
}

/// The system clock without the direct generator's coarse tick: it reads the clock per id,
/// as before the tick (the row that shows what the tick saves).
struct ClockPerId;

impl Clock for ClockPerId {
    fn now_unix_ms(&self) -> i64 {
        SystemClock.now_unix_ms()
    }
    fn sleep_ms(&self, ms: u64) {
        SystemClock.sleep_ms(ms);
    }
    fn monotonic_ms(&self) -> i64 {
        SystemClock.monotonic_ms()
    }
    fn moves_by_itself(&self) -> bool {
        false
    }
}

fn main() {
    let mut rows = Vec::new();
    segment_rows(&mut rows);
    snowflake_rows(&mut rows);
    let mut out = String::from(
        "| path | ns/op | baseline (same rounds) | ns/op | ratio (median) | p25..p75 | min..max | goal |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for r in &rows {
        let goal = match r.goal {
            Some(g) if r.ratio >= g => format!(">= {g}x ✓"),
            Some(g) => format!(">= {g}x ✗"),
            None => "—".into(),
        };
        out.push_str(&format!(
            "| {} | {:.1} | {} | {:.1} | **{:.2}x** | {:.2}..{:.2} | {:.2}..{:.2} | {} |\n",
            r.name,
            r.subject_ns,
            r.baseline,
            r.baseline_ns,
            r.ratio,
            r.p25,
            r.p75,
            r.min,
            r.max,
            goal
        ));
    }
    print!("{out}");
    let _ = std::fs::create_dir_all("target");
    let _ = std::fs::write("target/ratios.md", &out);
}
