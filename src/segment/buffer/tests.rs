//! Unit tests of [`super::SegmentBuffer`]: the load state machine, snapshots, backoff.

use super::*;
use std::sync::atomic::AtomicUsize;

fn lease(max_id: i64, leased: i64) -> Lease {
    Lease {
        max_id,
        leased,
        db_step: Some(leased),
    }
}

fn buffer() -> SegmentBuffer {
    SegmentBuffer::new(BizTag::parse("t").unwrap())
}

#[test]
fn empty_buffer_asks_to_wait() {
    assert_eq!(buffer().try_next(), Take::Beyond);
}

#[test]
fn hands_out_a_segment_then_asks_for_the_next() {
    let b = buffer();
    b.publish(lease(11, 10), None, Duration::ZERO);
    let ids: Vec<Take> = (0..10).map(|_| b.try_next()).collect();
    assert_eq!(
        ids[0],
        Take::Id {
            id: 1,
            preload: false
        }
    );
    assert_eq!(
        ids[1],
        Take::Id {
            id: 2,
            preload: true
        },
        "10% used: preload"
    );
    assert_eq!(
        ids[9],
        Take::Id {
            id: 10,
            preload: true
        }
    );
    assert_eq!(b.try_next(), Take::Beyond);
}

#[test]
fn a_ready_next_segment_is_used_without_waiting_and_stops_preloading() {
    let b = buffer();
    b.publish(lease(101, 100), None, Duration::ZERO);
    for _ in 0..50 {
        b.try_next();
    }
    b.publish(lease(1101, 1000), None, Duration::ZERO);
    assert!(matches!(
        b.try_next(),
        Take::Id {
            id: 51,
            preload: false
        }
    ));
    let mut last = 0;
    for _ in 0..49 {
        if let Take::Id { id, .. } = b.try_next() {
            last = id;
        }
    }
    assert_eq!(last, 100);
    assert_eq!(
        b.try_next(),
        Take::Id {
            id: 101,
            preload: false
        }
    );
}

#[test]
fn a_reload_after_exhaustion_skips_abandoned_tickets_without_gaps_in_ids() {
    let b = buffer();
    b.publish(lease(3, 2), None, Duration::ZERO);
    assert!(matches!(b.try_next(), Take::Id { id: 1, .. }));
    assert!(matches!(b.try_next(), Take::Id { id: 2, .. }));
    for _ in 0..100 {
        assert_eq!(b.try_next(), Take::Beyond); // e.g. requests during an outage
    }
    b.publish(lease(1003, 1000), None, Duration::ZERO);
    assert!(matches!(b.try_next(), Take::Id { id: 3, .. }));
}

#[test]
fn never_issues_ids_below_one() {
    let b = buffer();
    b.publish(lease(3, 10), None, Duration::ZERO); // row started at max_id -7
    assert!(matches!(b.try_next(), Take::Id { id: 1, .. }));
    assert!(matches!(b.try_next(), Take::Id { id: 2, .. }));
    assert_eq!(b.try_next(), Take::Beyond);
}

#[test]
fn the_last_segment_ends_at_i64_max() {
    let b = buffer();
    b.publish(lease(i64::MAX, 2), None, Duration::ZERO);
    assert!(matches!(b.try_next(), Take::Id { id, .. } if id == i64::MAX - 2));
    assert!(matches!(b.try_next(), Take::Id { id, .. } if id == i64::MAX - 1));
    assert_eq!(b.try_next(), Take::Beyond);
}

#[test]
fn take_many_spans_both_segments_and_stops_at_the_horizon() {
    let b = buffer();
    b.publish(lease(11, 10), None, Duration::ZERO);
    b.publish(lease(31, 10), None, Duration::ZERO);
    let mut out = Vec::new();
    b.take_many(25, &mut out);
    let expected: Vec<i64> = (1..=10).chain(21..=30).collect();
    assert_eq!(out, expected);
}

#[test]
fn ids_issued_survives_slot_reuse_and_failures_and_latency_are_recorded() {
    let b = buffer();
    b.publish(lease(11, 10), None, Duration::from_millis(2));
    for _ in 0..4 {
        b.try_next();
    }
    assert_eq!(b.snapshot().ids_issued, 4);
    b.publish(lease(21, 10), None, Duration::from_millis(3));
    for _ in 0..10 {
        b.try_next();
    }
    b.fail_load("down".into());
    b.publish(lease(31, 10), None, Duration::from_millis(4)); // reuses slot 0
    b.try_next();
    let snap = b.snapshot();
    assert_eq!(snap.ids_issued, 15);
    assert_eq!(snap.load_failures_total, 1);
    assert_eq!(snap.load_latency.count(), 3);
    assert_eq!(snap.loads, 3);
}

#[test]
fn plan_load_is_skipped_while_the_next_segment_is_ready() {
    let b = buffer();
    let p = StepPolicy::default();
    assert_eq!(b.plan_load(&p), Some(LoadPlan { step: None }));
    b.publish(lease(101, 100), None, Duration::ZERO);
    assert_eq!(b.plan_load(&p), None, "nothing used yet");
    for _ in 0..10 {
        b.try_next();
    }
    assert!(b.plan_load(&p).is_some());
    b.publish(lease(201, 100), None, Duration::ZERO);
    assert_eq!(b.plan_load(&p), None, "next is ready");
}

#[test]
fn backoff_grows_after_failures_and_clears_on_success() {
    let b = buffer();
    assert!(b.try_begin_load());
    assert!(!b.try_begin_load(), "single flight");
    b.fail_load("down".into());
    assert!(!b.try_begin_load(), "backoff");
    assert!(b.backoff_left() > Duration::ZERO);
    b.retry_at_ms.store(0, Ordering::Relaxed);
    assert!(b.try_begin_load());
    b.publish(lease(11, 10), None, Duration::ZERO);
    assert_eq!(b.backoff_left(), Duration::ZERO);
    assert_eq!(b.snapshot().consecutive_failures, 0);
}

/// Several threads take ids while a loader thread keeps publishing segments: every id is
/// unique and positive, and each thread sees its own ids strictly increase.
#[test]
fn hammered_by_threads_while_reloading_ids_stay_unique_and_increasing() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 50_000;
    let b = buffer();
    let policy = StepPolicy::default();
    let done = AtomicUsize::new(0);
    let mut all: Vec<i64> = std::thread::scope(|s| {
        let loader = s.spawn(|| {
            let mut max_id = 1i64;
            while done.load(Ordering::Acquire) < THREADS {
                if b.try_begin_load() {
                    if b.plan_load(&policy).is_some() {
                        let step = 97 + (max_id % 13); // odd sizes exercise the edges
                        max_id += step;
                        b.publish(lease(max_id, step), Some(step), Duration::ZERO);
                    } else {
                        b.finish_load();
                    }
                }
                std::thread::yield_now();
            }
        });
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::with_capacity(PER_THREAD);
                    let mut batch = Vec::new();
                    while mine.len() < PER_THREAD {
                        if mine.len() % 7 == 0 {
                            batch.clear();
                            b.take_many(5, &mut batch);
                            mine.extend_from_slice(&batch);
                        } else if let Take::Id { id, .. } = b.try_next() {
                            mine.push(id);
                        } else {
                            std::thread::yield_now();
                        }
                    }
                    done.fetch_add(1, Ordering::Release);
                    assert!(mine.windows(2).all(|w| w[0] < w[1]), "per-thread order");
                    mine
                })
            })
            .collect();
        let all = workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect();
        loader.join().unwrap();
        all
    });
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "duplicate ids");
    assert!(all[0] >= 1);
}

/// The give-back's arithmetic ([`SegmentBuffer::close`]): a lease `(max_id, leased)` grants
/// the ids `[max_id - leased, max_id)`; what comes back is the tail that no ticket reached.
mod give_back {
    use super::*;

    fn take(b: &SegmentBuffer, n: usize) -> Vec<i64> {
        let mut out = Vec::new();
        b.take_many(n as u64, &mut out);
        assert_eq!(out.len(), n, "the segments had {n} ids");
        out
    }

    #[test]
    fn nothing_leased_gives_nothing() {
        assert_eq!(buffer().close(), Unused::Nothing);
    }

    #[test]
    fn an_untouched_lease_goes_back_whole() {
        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        assert_eq!(b.close(), Unused::Range { from: 1, to: 101 });
    }

    #[test]
    fn a_used_lease_gives_back_from_its_first_unused_id() {
        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        assert_eq!(take(&b, 37).last(), Some(&37));
        assert_eq!(b.close(), Unused::Range { from: 38, to: 101 });
    }

    #[test]
    fn the_last_ticket_of_the_lease_leaves_one_id_or_none() {
        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        take(&b, 99);
        assert_eq!(b.close(), Unused::Range { from: 100, to: 101 });

        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        take(&b, 100);
        assert_eq!(b.close(), Unused::Nothing, "every id handed out");
    }

    #[test]
    fn a_waiting_request_s_ticket_past_the_segment_leaves_nothing() {
        let b = buffer();
        b.publish(lease(11, 10), None, Duration::ZERO);
        take(&b, 10);
        assert_eq!(b.try_next(), Take::Beyond, "a ticket past the segment");
        assert_eq!(b.close(), Unused::Nothing);
    }

    #[test]
    fn a_next_segment_that_follows_gives_back_from_the_current_one() {
        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        take(&b, 30);
        b.publish(lease(201, 100), None, Duration::ZERO);
        assert_eq!(b.close(), Unused::Range { from: 31, to: 201 });
    }

    #[test]
    fn at_the_boundary_between_current_and_next() {
        // Current spent to its last id: the next segment goes back whole.
        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        take(&b, 30);
        b.publish(lease(201, 100), None, Duration::ZERO);
        take(&b, 70);
        assert_eq!(b.close(), Unused::Range { from: 101, to: 201 });
        // One id of the next segment handed out.
        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        take(&b, 30);
        b.publish(lease(201, 100), None, Duration::ZERO);
        assert_eq!(take(&b, 71).last(), Some(&101));
        assert_eq!(b.close(), Unused::Range { from: 102, to: 201 });
    }

    #[test]
    fn a_next_segment_after_another_server_s_lease_gives_back_only_itself() {
        // Another server leased [101, 201) in between: it must never be given back.
        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        take(&b, 30);
        b.publish(lease(301, 100), None, Duration::ZERO);
        assert_eq!(b.close(), Unused::Range { from: 201, to: 301 });
    }

    #[test]
    fn a_trimmed_lease_gives_back_only_the_ids_above_the_mark() {
        // The database regressed: the lease [1, 101) starts below this server's mark 50.
        let b = SegmentBuffer::above(BizTag::parse("t").unwrap(), 50);
        b.publish(lease(101, 100), None, Duration::ZERO);
        assert_eq!(b.close(), Unused::Range { from: 50, to: 101 });
    }

    #[test]
    fn a_closed_tag_hands_out_nothing_and_publishes_nothing() {
        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        take(&b, 5);
        assert_eq!(b.close(), Unused::Range { from: 6, to: 101 });
        assert!(b.is_closed());
        assert_eq!(b.try_next(), Take::Beyond);
        let mut out = Vec::new();
        b.take_many(10, &mut out);
        assert!(out.is_empty(), "{out:?}");
        assert!(!b.try_begin_load(), "no load after the close");
        assert_eq!(
            b.publish(lease(201, 100), None, Duration::ZERO),
            Publish::Closed
        );
        assert_eq!(b.try_next(), Take::Beyond, "the late lease is not served");
        assert_eq!(b.remaining(), 0);
    }

    #[test]
    fn a_load_in_flight_gives_nothing_back() {
        let b = buffer();
        b.publish(lease(101, 100), None, Duration::ZERO);
        assert!(b.try_begin_load());
        assert_eq!(b.close(), Unused::LoadInFlight);
        assert_eq!(b.try_next(), Take::Beyond, "closed all the same");
    }

    /// Takers run while the tag closes: every id they got lies below the range given back,
    /// and together they hold each leased id at most once.
    #[test]
    fn takers_racing_the_close_never_get_an_id_given_back() {
        for round in 0..200 {
            let b = buffer();
            b.publish(lease(1_001, 1_000), None, Duration::ZERO);
            b.publish(lease(2_001, 1_000), None, Duration::ZERO);
            let (ids, unused) = std::thread::scope(|s| {
                let takers: Vec<_> = (0..3)
                    .map(|k| {
                        let b = &b;
                        s.spawn(move || {
                            let mut got = Vec::new();
                            loop {
                                if k == 0 {
                                    let mut out = Vec::new();
                                    b.take_many(7, &mut out);
                                    if out.is_empty() {
                                        return got;
                                    }
                                    got.extend(out);
                                } else {
                                    match b.try_next() {
                                        Take::Id { id, .. } => got.push(id),
                                        Take::Beyond => return got,
                                    }
                                }
                            }
                        })
                    })
                    .collect();
                // Let the takers get going, a varying amount.
                for _ in 0..(round * 7) {
                    std::hint::spin_loop();
                }
                let unused = b.close();
                let ids: Vec<i64> = takers.into_iter().flat_map(|t| t.join().unwrap()).collect();
                (ids, unused)
            });
            let mut sorted = ids.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), ids.len(), "an id twice");
            match unused {
                Unused::Range { from, to } => {
                    assert_eq!(to, 2_001);
                    assert!(
                        ids.iter().all(|&id| id < from),
                        "round {round}: an id at or above {from}"
                    );
                    assert_eq!(
                        ids.len() as i64,
                        from - 1,
                        "every id below {from} handed out"
                    );
                }
                Unused::Nothing => assert_eq!(ids.len(), 2_000),
                Unused::LoadInFlight => panic!("no load ran"),
            }
        }
    }
}

#[test]
fn a_capped_lease_never_takes_more_than_its_share_of_what_is_left() {
    use super::LeaseCap;
    // A width-6 period from 1: 999,999 numbers, ids 1..=999_999, end 1,000,000.
    let cap = LeaseCap::new(1, 1_000_000, 1_000_000_000);
    assert_eq!(
        cap.first,
        999_999 / 32,
        "a huge DBA step is cut to the share"
    );
    assert_eq!(LeaseCap::new(1, 1_000_000, 1000).first, 1000);
    // Whatever the adaptive step wants, never more than 1/32 of what is left...
    let mut leased_to = 1;
    let mut leases = 0;
    while leased_to < 1_000_000 {
        let left = 1_000_000 - leased_to;
        let ask = cap.bound(i64::MAX / 4, leased_to);
        assert!(ask >= 1);
        assert!(
            ask <= (left / LeaseCap::SHARE).max(left.min(LeaseCap::FLOOR)),
            "{ask} of {left}"
        );
        leased_to += ask;
        leases += 1;
    }
    // ... and the whole period is still reachable, in a bounded number of leases.
    assert_eq!(leased_to, 1_000_000);
    assert!(leases < 400, "{leases}");
    // Spent: one number at a time (the request answers that the period is spent).
    assert_eq!(cap.bound(5000, 1_000_000), 1);
    assert_eq!(cap.bound(5000, 2_000_000), 1);
    // A small width is not leased one number at a time.
    let tiny = LeaseCap::new(1, 100, 50);
    assert_eq!(tiny.first, 50);
    assert_eq!(tiny.bound(100, 51), 49);
}

#[test]
fn a_capped_buffer_asks_its_first_step_then_a_bounded_adaptive_one() {
    use super::LeaseCap;
    let policy = StepPolicy::default();
    let buf = SegmentBuffer::new(BizTag::parse("orders").unwrap()).capped(LeaseCap::new(
        1,
        1_000_000,
        1_000_000_000,
    ));
    // The first lease asks explicitly (the row's stored step, 1, would otherwise be the ask).
    let plan = buf.plan_load(&policy).unwrap();
    assert_eq!(plan.step, Some(999_999 / 32));
    // An uncapped buffer keeps the row's own step for its first lease.
    let plain = buffer();
    assert_eq!(plain.plan_load(&policy).unwrap().step, None);
}
