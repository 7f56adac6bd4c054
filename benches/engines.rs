//! In-process benchmarks of the engines, each beside its baseline measured in the same run:
//! `AtomicU64::fetch_add` (1 thread, and 2 threads on one atomic), a `HashMap` lookup, and
//! `crossbeam_queue::ArrayQueue` for the ring. README reports the ratios.
//!
//! `cargo bench --bench engines` (add `-- --quick` for a shorter run).

// criterion's `criterion_group!` and ferroid's id macro generate public items without docs.
#![allow(missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::{fill_forever, segment_engine, tag_names, two_threads, wide_layout};
use criterion::{Criterion, criterion_group, criterion_main};
use crossbeam_queue::ArrayQueue;
use leafid::segment::SegmentAllocator;
use leafid::snowflake::cached::{CachedConfig, CachedGenerator};
use leafid::snowflake::clock::SystemClock;
use leafid::snowflake::direct::DirectGenerator;
use leafid::snowflake::layout::BitLayout;

mod common;
use leafid::snowflake::ring::RingBuffer;

/// `try_next_id`, falling back to the async path on the rare segment boundary it has to wait on.
fn next_id(rt: &tokio::runtime::Runtime, e: &SegmentAllocator, tag: &str) -> i64 {
    match e.try_next_id(tag) {
        Some(id) => id,
        None => rt.block_on(e.next_id(tag)).unwrap(),
    }
}

fn segment(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let atomic = AtomicU64::new(0);
    let mut g = c.benchmark_group("segment");
    g.bench_function("baseline_fetch_add_1_thread", |b| {
        b.iter(|| black_box(atomic.fetch_add(1, Ordering::Relaxed)));
    });
    let engine = segment_engine(&rt, &tag_names(1));
    let handle = rt.block_on(engine.handle("tag-00000")).unwrap();
    let by_handle = || match handle.try_next_id() {
        Some(id) => id,
        None => rt.block_on(handle.next_id()).unwrap(),
    };
    g.bench_function("next_id_1_thread", |b| b.iter(|| black_box(by_handle())));
    g.bench_function("next_id_by_name_1_thread", |b| {
        b.iter(|| black_box(next_id(&rt, &engine, "tag-00000")));
    });
    g.bench_function("baseline_fetch_add_2_threads", |b| {
        b.iter_custom(|iters| two_threads(iters, &|| atomic.fetch_add(1, Ordering::Relaxed)));
    });
    g.bench_function("next_id_2_threads_one_tag", |b| {
        b.iter_custom(|iters| two_threads(iters, &by_handle));
    });
    g.bench_function("next_id_by_name_2_threads_one_tag", |b| {
        b.iter_custom(|iters| two_threads(iters, &|| next_id(&rt, &engine, "tag-00000")));
    });
    let names = tag_names(10_000);
    let many = segment_engine(&rt, &names);
    let map: std::collections::HashMap<String, AtomicU64> = names
        .iter()
        .map(|n| (n.clone(), AtomicU64::new(0)))
        .collect();
    let mut i = 0usize;
    g.bench_function("baseline_hashmap_lookup_fetch_add_10k_tags", |b| {
        b.iter(|| {
            i = (i + 7919) % names.len();
            black_box(map[&names[i]].fetch_add(1, Ordering::Relaxed))
        });
    });
    g.bench_function("next_id_10k_tags", |b| {
        b.iter(|| {
            i = (i + 7919) % names.len();
            black_box(next_id(&rt, &many, &names[i]))
        });
    });
    g.finish();
}

fn snowflake(c: &mut Criterion) {
    let atomic = AtomicU64::new(0);
    let mut g = c.benchmark_group("snowflake");
    g.bench_function("baseline_fetch_add_1_thread", |b| {
        b.iter(|| black_box(atomic.fetch_add(1, Ordering::Relaxed)));
    });

    let direct = DirectGenerator::new(wide_layout(), 1, Arc::new(SystemClock), 5).unwrap();
    g.bench_function("direct_next_id", |b| {
        b.iter(|| black_box(direct.next_id().unwrap()));
    });
    let twitter = DirectGenerator::new(BitLayout::twitter(), 1, Arc::new(SystemClock), 5).unwrap();
    g.bench_function("direct_next_id_twitter_layout_capped", |b| {
        b.iter(|| black_box(twitter.next_id().unwrap()));
    });

    // Ring baselines: one producer thread keeps each queue full while the bench pops.
    let stop = AtomicBool::new(false);
    let queue = ArrayQueue::new(1 << 16);
    let ring = RingBuffer::new(1 << 16);
    std::thread::scope(|s| {
        s.spawn(|| fill_forever(&stop, |n| queue.push(n).is_ok()));
        s.spawn(|| fill_forever(&stop, |n| ring.try_put(n).is_ok()));
        let pop = |q: &ArrayQueue<u64>| loop {
            if let Some(v) = q.pop() {
                break v;
            }
        };
        let take = |r: &RingBuffer| loop {
            if let Some(v) = r.try_take() {
                break v;
            }
        };
        g.bench_function("baseline_arrayqueue_pop_1_consumer", |b| {
            b.iter(|| black_box(pop(&queue)));
        });
        g.bench_function("ring_take_1_consumer", |b| {
            b.iter(|| black_box(take(&ring)));
        });
        g.bench_function("baseline_arrayqueue_pop_2_consumers", |b| {
            b.iter_custom(|iters| two_threads(iters, &|| pop(&queue)));
        });
        g.bench_function("ring_take_2_consumers", |b| {
            b.iter_custom(|iters| two_threads(iters, &|| take(&ring)));
        });
        stop.store(true, Ordering::Relaxed);
    });

    let config = CachedConfig {
        boost_power: 0,
        ..CachedConfig::default()
    };
    let cached = CachedGenerator::new(wide_layout(), 1, Arc::new(SystemClock), config).unwrap();
    g.bench_function("cached_take_1_consumer", |b| {
        b.iter(|| black_box(cached.take().unwrap()));
    });
    g.bench_function("cached_take_2_consumers", |b| {
        b.iter_custom(|iters| two_threads(iters, &|| cached.take().unwrap()));
    });
    cached.shutdown();
    g.finish();
}

fn layout(c: &mut Criterion) {
    let l = BitLayout::uid_generator();
    let mut g = c.benchmark_group("layout");
    let mut n = 0u64;
    g.bench_function("compose", |b| {
        b.iter(|| {
            n = n.wrapping_add(1);
            black_box(
                l.compose(black_box(n & 0xFFF_FFFF), 29, n & 0x1FFF)
                    .unwrap(),
            )
        });
    });
    g.bench_function("decompose", |b| {
        b.iter(|| black_box(l.decompose(black_box(9_090_949_948_782_127_403))));
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    targets = segment, snowflake, layout
}
criterion_main!(benches);
