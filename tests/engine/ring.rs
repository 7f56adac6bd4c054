//! Ring buffer under many producers and consumers: every id put is taken exactly once.

use std::sync::atomic::{AtomicUsize, Ordering};

use leafid::snowflake::ring::{Full, RingBuffer};

const PRODUCERS: u64 = 2;
const CONSUMERS: usize = 4;
fn run(capacity: usize, per_producer: u64) {
    let ring = RingBuffer::new(capacity);
    let total = (PRODUCERS * per_producer) as usize;
    let taken = AtomicUsize::new(0);
    let per_consumer: Vec<Vec<u64>> = std::thread::scope(|s| {
        for p in 0..PRODUCERS {
            let ring = &ring;
            s.spawn(move || {
                // Producer `p` puts p, p + PRODUCERS, p + 2 * PRODUCERS, ...
                for i in 0..per_producer {
                    let mut id = i * PRODUCERS + p;
                    while let Err(Full(back)) = ring.try_put(id) {
                        id = back;
                        std::thread::yield_now();
                    }
                }
            });
        }
        let consumers: Vec<_> = (0..CONSUMERS)
            .map(|_| {
                let (ring, taken) = (&ring, &taken);
                s.spawn(move || {
                    let mut got = Vec::new();
                    while taken.load(Ordering::Relaxed) < total {
                        match ring.try_take() {
                            Some(id) => {
                                got.push(id);
                                taken.fetch_add(1, Ordering::Relaxed);
                            }
                            None => std::thread::yield_now(),
                        }
                    }
                    got
                })
            })
            .collect();
        consumers.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // FIFO per producer: what one consumer got from one producer is in put order.
    for got in &per_consumer {
        for p in 0..PRODUCERS {
            let mine: Vec<u64> = got
                .iter()
                .copied()
                .filter(|id| id % PRODUCERS == p)
                .collect();
            assert!(
                mine.windows(2).all(|w| w[0] < w[1]),
                "out of order for producer {p}"
            );
        }
    }
    let mut all: Vec<u64> = per_consumer.into_iter().flatten().collect();
    assert_eq!(all.len(), total, "an id was lost or taken twice");
    all.sort_unstable();
    assert!(
        all.iter().copied().eq(0..total as u64),
        "not every id exactly once"
    );
    assert!(ring.is_empty());
    assert_eq!(ring.try_take(), None);
}

#[test]
fn two_producers_four_consumers_small_ring() {
    run(64, 600_000);
}

#[test]
fn two_producers_four_consumers_tiny_ring() {
    // Capacity 2 mostly exercises full/empty contention; fewer ids keep it quick in debug.
    run(2, 150_000);
}

#[test]
fn full_and_empty_are_exact_after_many_laps() {
    let ring = RingBuffer::new(8);
    for lap in 0..1_000u64 {
        for i in 0..8 {
            ring.try_put(lap * 8 + i).unwrap();
        }
        assert_eq!(ring.len(), 8);
        assert_eq!(ring.try_put(u64::MAX), Err(Full(u64::MAX)));
        for i in 0..8 {
            assert_eq!(ring.try_take(), Some(lap * 8 + i));
        }
        assert_eq!(ring.try_take(), None);
        assert_eq!(ring.len(), 0);
    }
}
