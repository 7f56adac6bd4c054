//! The client's local path against a bare `AtomicI64::fetch_add`, in the same run.
//!
//! No server: the supply is prefilled (`SegmentSupply::prefilled`) with one range of `CHUNK`
//! ids, the shape a server's range answer gives, so what is measured is exactly the local
//! path (`fetch_add` on the packed state + seqlock read of the range's slot + one compare).
//! Each criterion iteration takes one id; iterations run in chunks of a fresh supply, whose
//! construction is outside the timed part (`iter_custom`).
//!
//! `cargo bench -p leafid-client --bench next_id`

use std::hint::black_box;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use leafid_client::SegmentSupply;

/// Ids per prefilled supply.
const CHUNK: u64 = 1 << 30;

/// Runs `iters` takes over as many fresh supplies as needed, timing only the takes.
fn timed_takes(iters: u64, mut take: impl FnMut(&SegmentSupply, u64) -> Duration) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let n = left.min(CHUNK);
        let supply = SegmentSupply::prefilled(1..=CHUNK as i64);
        total += take(&supply, n);
        left -= n;
    }
    total
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("one_id");
    g.measurement_time(Duration::from_secs(3));
    g.warm_up_time(Duration::from_secs(1));

    let counter = AtomicI64::new(0);
    g.bench_function("AtomicI64::fetch_add", |b| {
        b.iter(|| black_box(counter.fetch_add(1, Ordering::Relaxed)))
    });

    g.bench_function("SegmentSupply::try_next_id", |b| {
        b.iter_custom(|iters| {
            timed_takes(iters, |s, n| {
                let t = Instant::now();
                for _ in 0..n {
                    black_box(s.try_next_id().unwrap());
                }
                t.elapsed()
            })
        })
    });

    g.bench_function("SegmentSupply::next_id (await)", |b| {
        b.iter_custom(|iters| {
            timed_takes(iters, |s, n| {
                rt.block_on(async {
                    let t = Instant::now();
                    for _ in 0..n {
                        black_box(s.next_id().await.unwrap());
                    }
                    t.elapsed()
                })
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
