//! leafid's generators beside the crates a Rust user would pick instead, in one criterion run,
//! each next to `AtomicU64::fetch_add` measured in the same group: one thread, and two threads
//! sharing one generator. Prints a table of ns/id, ids/s and the ratio to `fetch_add` at the end.
//!
//! `cargo bench --bench peers` (one run takes about a minute and a half).
//!
//! Layouts: the snowflake-likes use 41 time bits (ms) / 10 worker bits / 12 sequence bits
//! (leafid's `BitLayout::twitter()`, rs-snowflake's fixed layout, snowflaked's fixed layout,
//! ferroid's `SnowflakeTwitterId`, idgenerator with `worker_id_bit_len(10).seq_bit_len(12)`).
//! That is 4096 ids per ms per worker: a generator that waits for the next millisecond is capped
//! at ~4.1 M ids/s, and a sustained benchmark measures that cap, not the generator's own cost.
//! Those that borrow future ticks (leafid's cached ring up to its size, idgenerator's drift up
//! to 2000 ms) go faster until the lead is used up. `uuid` v7 and `ulid` have no such cap (a
//! 42- / 80-bit counter per ms).

use common::two_threads;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use criterion::{BenchmarkGroup, Criterion, measurement::WallTime};
use leafid::segment::{SegmentAllocator, SegmentConfig};
use leafid::snowflake::cached::{CachedConfig, CachedGenerator};
use leafid::snowflake::clock::SystemClock;
use leafid::snowflake::direct::{DEFAULT_MAX_BACKWARD_MS, DirectGenerator};
use leafid::snowflake::layout::BitLayout;
use leafid::testing::MemoryStore;

mod common;

const SINGLE: &str = "single_thread";
const TWO: &str = "two_threads";
const BASELINE: &str = "baseline_fetch_add";
const TAG: &str = "tag";

/// Bench ids in table order, with what caps their rate on the layouts above.
const ROWS: &[(&str, &str)] = &[
    (BASELINE, "-"),
    ("leafid_segment", "none (step 1,000,000)"),
    ("leafid_cached", "4096/ms after a ring's lead"),
    ("leafid_direct", "4096/ms: waits"),
    ("rs_snowflake", "4096/ms: spins"),
    ("snowflaked_sync", "4096/ms: spins"),
    ("ferroid_atomic", "4096/ms: spins"),
    ("idgenerator", "4091/ms after 2000 ms drift"),
    ("uuid_v7", "none"),
    ("ulid_monotonic", "none"),
];

/// Every generator under test, built once and shared by both groups (as a server would).
struct Peers {
    rt: tokio::runtime::Runtime,
    segment: SegmentAllocator,
    cached: CachedGenerator,
    direct: DirectGenerator,
    rs_snowflake: Mutex<snowflake::SnowflakeIdGenerator>,
    snowflaked: snowflaked::sync::Generator,
    ferroid: ferroid::generator::AtomicSnowflakeGenerator<
        ferroid::id::SnowflakeTwitterId,
        ferroid::time::MonotonicClock,
    >,
    ulid: Mutex<ulid::Generator>,
}

impl Peers {
    fn new() -> Self {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // As `benches/engines.rs`: Leaf's step of 1,000,000 (a background preload every
        // 100,000 ids); the lease path is not what is measured.
        let store = MemoryStore::default();
        store.insert(TAG, 1, 1_000_000);
        let segment = rt.block_on(async {
            let e = SegmentAllocator::new(Arc::new(store), SegmentConfig::default());
            e.refresh_tags().await.unwrap();
            e.next_id(TAG).await.unwrap();
            e
        });
        let twitter = BitLayout::twitter();
        let cached =
            CachedGenerator::new(twitter, 1, Arc::new(SystemClock), CachedConfig::default())
                .unwrap();
        let direct =
            DirectGenerator::new(twitter, 1, Arc::new(SystemClock), DEFAULT_MAX_BACKWARD_MS)
                .unwrap();
        // rs-snowflake: 5 bits machine + 5 bits node = 10 worker bits.
        let rs_snowflake = Mutex::new(snowflake::SnowflakeIdGenerator::new(1, 1));
        let ferroid = ferroid::generator::AtomicSnowflakeGenerator::new(
            1,
            ferroid::time::MonotonicClock::with_epoch(ferroid::time::TWITTER_EPOCH),
        );
        // yitter's drift snowflake, the crate's global instance (a mutex around one generator);
        // `init` sleeps 500 ms, as the crate does.
        idgenerator::IdInstance::init(
            idgenerator::IdGeneratorOptions::new()
                .worker_id(1)
                .worker_id_bit_len(10)
                .seq_bit_len(12),
        )
        .unwrap();
        Self {
            rt,
            segment,
            cached,
            direct,
            rs_snowflake,
            snowflaked: snowflaked::sync::Generator::new(1),
            ferroid,
            ulid: Mutex::new(ulid::Generator::new()),
        }
    }

    fn segment(&self) -> i64 {
        match self.segment.try_next_id(TAG) {
            Some(id) => id,
            None => self.rt.block_on(self.segment.next_id(TAG)).unwrap(),
        }
    }

    fn ferroid(&self) -> u64 {
        self.ferroid.next_id(|_| std::hint::spin_loop()).to_raw()
    }

    fn ulid(&self) -> u128 {
        let mut g = self.ulid.lock().unwrap();
        match g.generate() {
            Ok(u) => u.0,
            Err(overflow) => overflow.commit_overflow_increment().0,
        }
    }
}

/// Calls `$run(group, name, op)` for every generator; `op` takes one id from the shared one.
/// (A macro, not a list of `dyn Fn`: each bench is monomorphised, as a caller's code would be.)
macro_rules! for_each_peer {
    ($run:ident, $g:expr, $p:expr, $atomic:expr) => {{
        let (g, p, atomic) = ($g, $p, $atomic);
        $run(g, BASELINE, || atomic.fetch_add(1, Ordering::Relaxed));
        $run(g, "leafid_segment", || p.segment());
        $run(g, "leafid_cached", || p.cached.take().unwrap());
        $run(g, "leafid_direct", || p.direct.next_id().unwrap());
        $run(g, "rs_snowflake", || {
            p.rs_snowflake.lock().unwrap().real_time_generate()
        });
        $run(g, "snowflaked_sync", || p.snowflaked.generate::<u64>());
        $run(g, "ferroid_atomic", || p.ferroid());
        $run(g, "idgenerator", idgenerator::IdInstance::next_id);
        $run(g, "uuid_v7", uuid::Uuid::now_v7);
        $run(g, "ulid_monotonic", || p.ulid());
    }};
}

fn one<T>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, op: impl Fn() -> T) {
    g.bench_function(name, |b| b.iter(|| black_box(op())));
}

fn two<T>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, op: impl Fn() -> T + Sync) {
    g.bench_function(name, |b| b.iter_custom(|iters| two_threads(iters, &op)));
}

fn single_thread(c: &mut Criterion, p: &Peers) {
    let atomic = AtomicU64::new(0);
    let mut g = c.benchmark_group(SINGLE);
    for_each_peer!(one, &mut g, p, &atomic);
    g.finish();
}

fn two_thread(c: &mut Criterion, p: &Peers) {
    let atomic = AtomicU64::new(0);
    let mut g = c.benchmark_group(TWO);
    for_each_peer!(two, &mut g, p, &atomic);
    g.finish();
}

/// Criterion's output directory (as criterion 0.5 finds it: `CARGO_TARGET_DIR`, else the
/// workspace's `target`).
fn criterion_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
        .join("criterion")
}

/// The median and mean times per iteration, in ns, if this run wrote them (not a stale earlier
/// run's). The mean shows what the median hides: a generator that stalls in some samples.
fn estimates_ns(dir: &Path, group: &str, name: &str, since: SystemTime) -> Option<(f64, f64)> {
    let path = dir
        .join(group)
        .join(name)
        .join("new")
        .join("estimates.json");
    if std::fs::metadata(&path).ok()?.modified().ok()? < since {
        return None;
    }
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).ok()?).ok()?;
    Some((
        json["median"]["point_estimate"].as_f64()?,
        json["mean"]["point_estimate"].as_f64()?,
    ))
}

/// ns/id, ids/s and the ratio to `fetch_add` (>1: faster than the baseline) per generator.
fn print_table(since: SystemTime) {
    let dir = criterion_dir();
    for (group, ids_per_iter) in [(SINGLE, 1.0), (TWO, 2.0)] {
        let Some((base, _)) = estimates_ns(&dir, group, BASELINE, since) else {
            continue;
        };
        let base = base / ids_per_iter;
        println!("\n{group} (medians; ratio = fetch_add ns/id / generator ns/id)");
        println!(
            "| generator | ns/id | ids/s | ratio to fetch_add | mean ns/id | rate cap on this layout |"
        );
        println!("| --- | ---: | ---: | ---: | ---: | --- |");
        for (name, cap) in ROWS {
            let Some((ns, mean)) = estimates_ns(&dir, group, name, since) else {
                continue;
            };
            let (ns, mean) = (ns / ids_per_iter, mean / ids_per_iter);
            println!(
                "| {name} | {ns:.1} | {:.2} M | {:.3}x | {mean:.1} | {cap} |",
                1e3 / ns,
                base / ns
            );
        }
    }
}

fn main() {
    let started = SystemTime::now();
    let peers = Peers::new();
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    single_thread(&mut c, &peers);
    two_thread(&mut c, &peers);
    c.final_summary();
    peers.cached.shutdown();
    // `cargo bench` passes `--bench`; in test mode (`cargo test --bench peers`) there are no
    // estimates to report.
    if std::env::args().any(|a| a == "--bench") {
        print_table(started);
    }
}
