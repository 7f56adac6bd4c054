//! Direct generator under threads and the real clock.

use std::sync::Arc;
use std::time::Instant;

use leafid::snowflake::clock::{Clock, SystemClock};
use leafid::snowflake::direct::{DEFAULT_MAX_BACKWARD_MS, DirectGenerator};
use leafid::snowflake::layout::{BitLayout, TimeUnit};

#[test]
fn four_threads_hammering_never_get_a_duplicate() {
    let g = DirectGenerator::new(
        BitLayout::twitter(),
        513,
        Arc::new(SystemClock),
        DEFAULT_MAX_BACKWARD_MS,
    )
    .unwrap();
    const PER_THREAD: usize = 200_000;
    let started = Instant::now();
    let per_thread: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let g = &g;
                s.spawn(move || {
                    let mut ids = Vec::with_capacity(PER_THREAD);
                    if t % 2 == 0 {
                        for _ in 0..PER_THREAD {
                            ids.push(g.next_id().unwrap());
                        }
                    } else {
                        while ids.len() < PER_THREAD {
                            let n = (PER_THREAD - ids.len()).min(37);
                            g.next_ids(n, &mut ids).unwrap();
                        }
                    }
                    ids
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let elapsed = started.elapsed();
    for ids in &per_thread {
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ids of one thread must increase"
        );
    }
    let mut all: Vec<u64> = per_thread.into_iter().flatten().collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "duplicate ids");
    assert!(all.iter().all(|&id| (id as i64) > 0));
    assert!(
        all.iter()
            .all(|&id| g.layout().decompose(id).worker_id == 513)
    );
    eprintln!(
        "direct: {total} ids in {elapsed:?} ({:.0} ids/s, debug build)",
        total as f64 / elapsed.as_secs_f64()
    );
}

/// The coarse tick under threads: with the system clock the id path reads the tick an updater
/// thread keeps, and no id may carry a tick the clock has not reached when the id is returned.
#[test]
fn ids_from_the_coarse_tick_never_run_ahead_of_the_clock() {
    // A millisecond layout with a small sequence, so ticks wrap and the clock is read too.
    let layout = BitLayout::new(0, 0, 41, 14, 8, TimeUnit::Millis, 1_600_000_000_000).unwrap();
    let g =
        DirectGenerator::new(layout, 3, Arc::new(SystemClock), DEFAULT_MAX_BACKWARD_MS).unwrap();
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                let mut last = 0;
                for _ in 0..50_000 {
                    let id = g.next_id().unwrap();
                    let now = layout.delta_at(SystemClock.now_unix_ms()).unwrap();
                    let tick = layout.decompose(id).time_delta;
                    assert!(
                        tick <= now,
                        "id from tick {tick} while the clock reads {now}"
                    );
                    assert!(id > last);
                    last = id;
                }
            });
        }
    });
}
