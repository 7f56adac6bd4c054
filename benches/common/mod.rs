//! Helpers shared by the benches (each bench includes this module; not every bench uses all).
#![allow(dead_code)]

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use leafid::segment::{SegmentAllocator, SegmentConfig};
use leafid::snowflake::layout::{BitLayout, TimeUnit};
use leafid::testing::MemoryStore;

/// Runs `op` on two threads at once, `iters` times each; the wall time for both threads to do
/// all of theirs (so the time per op pair is this divided by `iters`).
pub fn two_threads<T>(iters: u64, op: &(impl Fn() -> T + Sync)) -> Duration {
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let t = s.spawn(|| {
            start.wait();
            for _ in 0..iters {
                black_box(op());
            }
        });
        start.wait();
        let began = Instant::now();
        for _ in 0..iters {
            black_box(op());
        }
        t.join().unwrap();
        began.elapsed()
    })
}

/// `tag-00000`, `tag-00001`, ...
pub fn tag_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("tag-{i:05}")).collect()
}

/// A segment engine on an in-memory store with Leaf's step (a background preload every
/// 100,000 ids, as in production; the lease path is not what is measured); every tag already
/// served once.
pub fn segment_engine(rt: &tokio::runtime::Runtime, names: &[String]) -> SegmentAllocator {
    let store = MemoryStore::default();
    for n in names {
        store.insert(n, 1, 1_000_000);
    }
    rt.block_on(async {
        let e = SegmentAllocator::new(Arc::new(store), SegmentConfig::default());
        e.refresh_tags().await.unwrap();
        for n in names {
            e.next_id(n).await.unwrap();
        }
        e
    })
}

/// A millisecond layout with a 22-bit sequence (4M ids per ms): the generators' own cost shows,
/// not the layout's capacity. (The `twitter` preset caps one worker at 4096 ids per ms.)
pub fn wide_layout() -> BitLayout {
    BitLayout::new(0, 0, 39, 2, 22, TimeUnit::Millis, WIDE_EPOCH_MS).unwrap()
}

/// [`wide_layout`]'s epoch (unix ms).
pub const WIDE_EPOCH_MS: i64 = 1_600_000_000_000;

/// Keeps a queue full from a producer thread until `stop`.
pub fn fill_forever(stop: &AtomicBool, push: impl Fn(u64) -> bool) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if push(n) {
            n += 1;
        } else {
            std::hint::spin_loop();
        }
    }
}
