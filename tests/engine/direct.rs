//! Direct generator under threads and the real clock.

use std::sync::Arc;
use std::time::Instant;

use leafid::snowflake::clock::SystemClock;
use leafid::snowflake::direct::{DEFAULT_MAX_BACKWARD_MS, DirectGenerator};
use leafid::snowflake::layout::BitLayout;

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
