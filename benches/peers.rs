//! leafid's generators beside the crates a Rust user would pick instead, in one criterion run,
//! each next to `AtomicU64::fetch_add` measured in the same group: one thread, and two threads
//! sharing one generator, on two layouts. Prints a table of ns/id, ids/s and the ratio to
//! `fetch_add` at the end (and writes it to `target/peers.md`).
//!
//! `cargo bench --bench peers` (one run takes about three minutes).
//!
//! Layouts:
//! - **`twitter`**: 41 time bits (ms) / 10 worker bits / 12 sequence bits (leafid's
//!   `BitLayout::twitter()`, rs-snowflake's and snowflaked's fixed layouts, ferroid's
//!   `SnowflakeTwitterId`, idgenerator with `worker_id_bit_len(10).seq_bit_len(12)`). That is
//!   4096 ids per ms per worker: a generator that waits for the next millisecond is capped at
//!   ~4.1 M ids/s, and a sustained benchmark measures that cap, not the generator's own cost.
//! - **`wide`**: 41 time bits (ms, Twitter's epoch) / 1 worker bit / 21 sequence bits, the
//!   widest sequence idgenerator accepts (its worker + sequence bits are at most 22). 2^21 ids
//!   per ms is far above what any generator here makes, so this measures the generators
//!   themselves. leafid, ferroid (a `define_snowflake_id!` type) and idgenerator take it;
//!   rs-snowflake and snowflaked have one fixed layout and appear only under `twitter`. The
//!   segment engine, `uuid` v7 and `ulid` have no such cap and are in both tables.
//!
//! Those that borrow future ticks (leafid's cached ring up to its size, idgenerator's drift up
//! to 2000 ms) go faster than the cap until the lead is used up.

// criterion's `criterion_group!` and ferroid's id macro generate public items without docs.
#![allow(missing_docs)]

use common::two_threads;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use criterion::{BenchmarkGroup, Criterion, measurement::WallTime};
use ferroid::generator::AtomicSnowflakeGenerator;
use ferroid::id::{SnowflakeId, SnowflakeTwitterId};
use ferroid::time::{MonotonicClock, TWITTER_EPOCH};
use idgenerator::{CoreIdGenerator, IdGeneratorOptions};
use leafid::segment::{SegmentAllocator, SegmentConfig};
use leafid::snowflake::cached::{CachedConfig, CachedGenerator};
use leafid::snowflake::clock::SystemClock;
use leafid::snowflake::direct::{DEFAULT_MAX_BACKWARD_MS, DirectGenerator};
use leafid::snowflake::layout::{BitLayout, TimeUnit};
use leafid::testing::MemoryStore;

mod common;

ferroid::define_snowflake_id!(
    /// The `wide` layout for ferroid: 1 reserved (sign) / 41 ms / 1 machine / 21 sequence bits.
    WideId, u64,
    reserved: 1,
    timestamp: 41,
    machine_id: 1,
    sequence: 21
);

const BASELINE: &str = "baseline_fetch_add";
const TAG: &str = "tag";
/// Twitter's epoch in ms (the same for every generator on both layouts).
const EPOCH_MS: i64 = 1_288_834_974_657;

/// Bench ids in table order, with what caps their rate on `twitter` and on `wide`.
const ROWS: &[(&str, &str, &str)] = &[
    (BASELINE, "-", "-"),
    (
        "leafid_segment",
        "none (step 1,000,000)",
        "none (step 1,000,000)",
    ),
    ("leafid_cached", "4096/ms after a ring's lead", "2^21/ms"),
    ("leafid_direct", "4096/ms: waits", "2^21/ms"),
    ("rs_snowflake", "4096/ms: spins", ""),
    ("snowflaked_sync", "4096/ms: spins", ""),
    ("ferroid_atomic", "4096/ms: spins", "2^21/ms"),
    ("idgenerator", "4091/ms after 2000 ms drift", "2^21/ms"),
    ("uuid_v7", "none", "none"),
    ("ulid_monotonic", "none", "none"),
];

/// The layouts, as the groups are named.
const LAYOUTS: &[&str] = &["twitter", "wide"];

/// The generators that take a layout, built on one.
struct OnLayout<F: SnowflakeId<Ty = u64> + Sync> {
    cached: CachedGenerator,
    direct: DirectGenerator,
    ferroid: AtomicSnowflakeGenerator<F, MonotonicClock>,
    /// yitter's drift snowflake behind a mutex, as the crate's own `IdInstance` holds it.
    idgenerator: Mutex<CoreIdGenerator>,
}

impl<F: SnowflakeId<Ty = u64> + Sync> OnLayout<F> {
    fn new(layout: BitLayout) -> Self {
        let cached =
            CachedGenerator::new(layout, 1, Arc::new(SystemClock), CachedConfig::default())
                .unwrap();
        let direct =
            DirectGenerator::new(layout, 1, Arc::new(SystemClock), DEFAULT_MAX_BACKWARD_MS)
                .unwrap();
        let ferroid = AtomicSnowflakeGenerator::new(1, MonotonicClock::with_epoch(TWITTER_EPOCH));
        // `init` sleeps 500 ms, as the crate does.
        let mut idgenerator = CoreIdGenerator::default();
        idgenerator
            .init(
                IdGeneratorOptions::new()
                    .base_time(EPOCH_MS)
                    .worker_id(1)
                    .worker_id_bit_len(layout.worker_bits())
                    .seq_bit_len(layout.seq_bits()),
            )
            .unwrap();
        Self {
            cached,
            direct,
            ferroid,
            idgenerator: Mutex::new(idgenerator),
        }
    }

    fn ferroid(&self) -> u64 {
        self.ferroid.next_id(|_| std::hint::spin_loop()).to_raw()
    }
}

/// The generators with no layout of their own choosing, built once and shared by every group
/// (as a server would).
struct Fixed {
    rt: tokio::runtime::Runtime,
    segment: SegmentAllocator,
    rs_snowflake: Mutex<snowflake::SnowflakeIdGenerator>,
    snowflaked: snowflaked::sync::Generator,
    ulid: Mutex<ulid::Generator>,
}

impl Fixed {
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
        Self {
            rt,
            segment,
            // rs-snowflake: 5 bits machine + 5 bits node = 10 worker bits.
            rs_snowflake: Mutex::new(snowflake::SnowflakeIdGenerator::new(1, 1)),
            snowflaked: snowflaked::sync::Generator::new(1),
            ulid: Mutex::new(ulid::Generator::new()),
        }
    }

    fn segment(&self) -> i64 {
        match self.segment.try_next_id(TAG) {
            Some(id) => id,
            None => self.rt.block_on(self.segment.next_id(TAG)).unwrap(),
        }
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
/// `$fixed_layout` adds the two crates whose layout is fixed at `twitter`.
/// (A macro, not a list of `dyn Fn`: each bench is monomorphised, as a caller's code would be.)
macro_rules! for_each_peer {
    ($run:ident, $g:expr, $f:expr, $l:expr, $fixed_layout:expr) => {{
        let (g, f, l) = ($g, $f, $l);
        let atomic = AtomicU64::new(0);
        $run(g, BASELINE, || atomic.fetch_add(1, Ordering::Relaxed));
        $run(g, "leafid_segment", || f.segment());
        $run(g, "leafid_cached", || l.cached.take().unwrap());
        $run(g, "leafid_direct", || l.direct.next_id().unwrap());
        if $fixed_layout {
            $run(g, "rs_snowflake", || {
                f.rs_snowflake.lock().unwrap().real_time_generate()
            });
            $run(g, "snowflaked_sync", || f.snowflaked.generate::<u64>());
        }
        $run(g, "ferroid_atomic", || l.ferroid());
        $run(g, "idgenerator", || l.idgenerator.lock().unwrap().next_id());
        $run(g, "uuid_v7", uuid::Uuid::now_v7);
        $run(g, "ulid_monotonic", || f.ulid());
    }};
}

fn one<T>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, op: impl Fn() -> T) {
    g.bench_function(name, |b| b.iter(|| black_box(op())));
}

fn two<T>(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, op: impl Fn() -> T + Sync) {
    g.bench_function(name, |b| b.iter_custom(|iters| two_threads(iters, &op)));
}

/// Both groups (one thread, two threads) on one layout.
fn on_layout<F: SnowflakeId<Ty = u64> + Sync>(
    c: &mut Criterion,
    f: &Fixed,
    layout: &str,
    l: &OnLayout<F>,
) {
    let fixed_layout = layout == "twitter";
    let mut g = c.benchmark_group(format!("{layout}_single_thread"));
    for_each_peer!(one, &mut g, f, l, fixed_layout);
    g.finish();
    let mut g = c.benchmark_group(format!("{layout}_two_threads"));
    for_each_peer!(two, &mut g, f, l, fixed_layout);
    g.finish();
    l.cached.shutdown();
}

/// Criterion's output directory (as criterion 0.5 finds it: `CARGO_TARGET_DIR`, else the
/// workspace's `target`).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
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

/// ns/id, ids/s and the ratio to `fetch_add` (>1: faster than the baseline) per generator, per
/// layout and thread count.
fn table(since: SystemTime) -> String {
    let dir = target_dir().join("criterion");
    let mut out = String::new();
    for (i, layout) in LAYOUTS.iter().enumerate() {
        for (threads, ids_per_iter) in [("single_thread", 1.0), ("two_threads", 2.0)] {
            let group = format!("{layout}_{threads}");
            let Some((base, _)) = estimates_ns(&dir, &group, BASELINE, since) else {
                continue;
            };
            let base = base / ids_per_iter;
            let _ = writeln!(
                out,
                "\n{group} (medians; ratio = fetch_add ns/id / generator ns/id)\n\
                 | generator | ns/id | ids/s | ratio to fetch_add | mean ns/id | rate cap on this layout |\n\
                 | --- | ---: | ---: | ---: | ---: | --- |"
            );
            for row in ROWS {
                let cap = if i == 0 { row.1 } else { row.2 };
                let Some((ns, mean)) = estimates_ns(&dir, &group, row.0, since) else {
                    continue;
                };
                let (ns, mean) = (ns / ids_per_iter, mean / ids_per_iter);
                let _ = writeln!(
                    out,
                    "| {} | {ns:.1} | {:.2} M | {:.3}x | {mean:.1} | {cap} |",
                    row.0,
                    1e3 / ns,
                    base / ns
                );
            }
        }
    }
    out
}

fn main() {
    let started = SystemTime::now();
    let fixed = Fixed::new();
    let mut c = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let twitter: OnLayout<SnowflakeTwitterId> = OnLayout::new(BitLayout::twitter());
    on_layout(&mut c, &fixed, LAYOUTS[0], &twitter);
    let wide = BitLayout::new(0, 0, 41, 1, 21, TimeUnit::Millis, EPOCH_MS).unwrap();
    let wide: OnLayout<WideId> = OnLayout::new(wide);
    on_layout(&mut c, &fixed, LAYOUTS[1], &wide);
    c.final_summary();
    // `cargo bench` passes `--bench`; in test mode (`cargo test --bench peers`) there are no
    // estimates to report.
    if std::env::args().any(|a| a == "--bench") {
        let table = table(started);
        println!("{table}");
        let _ = std::fs::write(target_dir().join("peers.md"), table);
    }
}
