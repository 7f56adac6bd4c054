//! Cached generator: uniqueness under consumers, the lead bound, exhaustion, shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leafid::snowflake::cached::{CachedConfig, CachedGenerator};
use leafid::snowflake::clock::{Clock, SystemClock};
use leafid::snowflake::error::SnowflakeError;
use leafid::snowflake::layout::{BitLayout, TimeUnit};
use leafid::testing::{FrozenClock, ManualClock};

const EPOCH: i64 = 1_600_000_000_000;

/// 10 sequence bits (1024 ids a tick), seconds, so tests reach the lead bound quickly.
fn small_layout(time_bits: u8) -> BitLayout {
    BitLayout::new(
        0,
        0,
        time_bits,
        53 - time_bits,
        10,
        TimeUnit::Seconds,
        EPOCH,
    )
    .unwrap()
}

/// Stress tests check uniqueness and bounds, not latency: a generous wait keeps them steady on
/// a loaded 2-core machine, where the filler thread can be descheduled for a while.
fn patient() -> CachedConfig {
    CachedConfig {
        max_wait: Duration::from_secs(5),
        ..CachedConfig::default()
    }
}

fn consume(g: &CachedGenerator, clock: &dyn Clock, consumers: usize, per: usize) -> Vec<Vec<u64>> {
    let max_ahead = (g.stats().capacity as u64) >> g.layout().seq_bits();
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..consumers)
            .map(|c| {
                s.spawn(move || {
                    let mut ids = Vec::with_capacity(per);
                    while ids.len() < per {
                        let before = ids.len();
                        if c % 2 == 0 {
                            ids.push(g.take().unwrap());
                        } else {
                            let n = (per - ids.len()).min(100);
                            g.take_many(n, &mut ids).unwrap();
                        }
                        // Every id taken is within the lead bound of the clock as read after it.
                        let now_tick = g.layout().delta_at(clock.now_unix_ms()).unwrap();
                        for &id in &ids[before..] {
                            let tick = g.layout().decompose(id).time_delta;
                            assert!(
                                tick <= now_tick + max_ahead,
                                "tick {tick} too far past {now_tick}"
                            );
                        }
                    }
                    ids
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn assert_unique_positive_and_increasing(per_consumer: Vec<Vec<u64>>) -> Vec<u64> {
    for ids in &per_consumer {
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "ids of one consumer must increase"
        );
    }
    let mut all: Vec<u64> = per_consumer.into_iter().flatten().collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "duplicate ids");
    assert!(all.iter().all(|&id| (id as i64) > 0), "non-positive id");
    all
}

#[test]
fn four_consumers_get_unique_increasing_ids_within_the_lead_bound() {
    // uid-generator's layout: 8192 ids a second, ring of 65536 (8 seconds). 1.2M ids need
    // about 150 seconds of manual time: the filler repeatedly waits at its bound, and its
    // sleeps move the manual clock on.
    let start = 1_700_000_000_000;
    let clock = Arc::new(ManualClock::new(start));
    let g = CachedGenerator::new(BitLayout::uid_generator(), 29, clock.clone(), patient()).unwrap();
    let started = Instant::now();
    let per_consumer = consume(&g, &*clock, 4, 300_000);
    let elapsed = started.elapsed();
    let all = assert_unique_positive_and_increasing(per_consumer);
    let first_tick = g.layout().decompose(all[0]).time_delta;
    assert_eq!(
        first_tick,
        g.layout().delta_at(start).unwrap(),
        "starts at the current tick"
    );
    assert!(
        all.iter()
            .all(|&id| g.layout().decompose(id).worker_id == 29)
    );
    let stats = g.stats();
    assert!(stats.ticks_ahead <= 8, "{stats:?}");
    eprintln!(
        "cached (manual clock): {} ids in {elapsed:?} ({:.0} ids/s, debug build)",
        all.len(),
        all.len() as f64 / elapsed.as_secs_f64()
    );
}

#[test]
fn four_consumers_on_the_system_clock() {
    let g =
        CachedGenerator::new(BitLayout::twitter(), 1, Arc::new(SystemClock), patient()).unwrap();
    let started = Instant::now();
    let per_consumer = consume(&g, &SystemClock, 4, 250_000);
    let elapsed = started.elapsed();
    let all = assert_unique_positive_and_increasing(per_consumer);
    eprintln!(
        "cached (system clock, twitter layout): {} ids in {elapsed:?} ({:.0} ids/s, debug build)",
        all.len(),
        all.len() as f64 / elapsed.as_secs_f64()
    );
}

#[test]
fn start_up_fills_whole_ticks_ahead_and_stops_at_the_bound() {
    let clock = Arc::new(FrozenClock::new(EPOCH + 100_000));
    let config = CachedConfig {
        max_wait: Duration::from_millis(30),
        ..CachedConfig::default()
    };
    let g = CachedGenerator::new(small_layout(31), 3, clock.clone(), config).unwrap();
    let stats = g.stats();
    assert_eq!(stats.capacity, 8 * 1024);
    assert_eq!(stats.available, 8 * 1024);
    // Ticks 100..=107 are in the ring, each whole.
    assert_eq!(stats.last_filled_tick, Some(107));
    assert_eq!(stats.ticks_ahead, 7);

    // The bound is 8 ticks past the clock: ticks 100..=108 can be issued, no more.
    let mut ids = Vec::new();
    g.take_many(4_500, &mut ids).unwrap(); // below 50%: the filler is asked for more
    let deadline = Instant::now() + Duration::from_secs(5);
    while g.stats().last_filled_tick != Some(108) {
        assert!(
            Instant::now() < deadline,
            "filler did not reach the bound: {:?}",
            g.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(g.stats().last_filled_tick, Some(108), "went past the bound");
    g.take_many(9 * 1024 - 4_500, &mut ids).unwrap();
    let last = g.layout().decompose(*ids.last().unwrap());
    assert_eq!((last.time_delta, last.sequence), (108, 1023));
    assert_eq!(g.take(), Err(SnowflakeError::Exhausted));
    assert_eq!(g.stats().ticks_ahead, 8);

    // One second later, one more tick may be borrowed.
    clock.advance(1_000);
    let next = g.take().unwrap();
    let d = g.layout().decompose(next);
    assert_eq!((d.time_delta, d.sequence), (109, 0));
}

#[test]
fn a_consumer_that_drains_below_the_padding_factor_triggers_a_refill() {
    let clock = Arc::new(ManualClock::new(EPOCH + 5_000));
    let g = CachedGenerator::new(small_layout(31), 3, clock, CachedConfig::default()).unwrap();
    let mut ids = Vec::new();
    for _ in 0..5 * 1024 {
        ids.push(g.take().unwrap()); // the ring goes below 50% of 8192 at the 4097th
    }
    // The filler tops the ring up past the threshold with ticks after the first 8 (5..=12).
    // (Not necessarily to full: a pass ends when it catches up with the consumer.)
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let stats = g.stats();
        if stats.available >= 4 * 1024 && stats.last_filled_tick > Some(12) {
            break;
        }
        assert!(Instant::now() < deadline, "no refill: {stats:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_schedule_tops_up_without_a_request() {
    let clock = Arc::new(ManualClock::new(EPOCH + 5_000));
    let config = CachedConfig {
        padding_factor: 1,
        schedule_interval: Some(Duration::from_millis(5)),
        ..CachedConfig::default()
    };
    let g = CachedGenerator::new(small_layout(31), 3, clock, config).unwrap();
    let mut ids = Vec::new();
    g.take_many(1_000, &mut ids).unwrap(); // still above 1%: no request
    let deadline = Instant::now() + Duration::from_secs(5);
    while g.stats().available < 8 * 1024 {
        assert!(
            Instant::now() < deadline,
            "no scheduled refill: {:?}",
            g.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn time_bits_exhaustion_is_an_error_never_a_wrapped_id() {
    // 8 time bits: the last tick is 255. Starting at tick 250 leaves 6 ticks of 1024 ids.
    let layout = small_layout(8);
    let clock = Arc::new(ManualClock::new(EPOCH + 250_000));
    let g = CachedGenerator::new(layout, 3, clock.clone(), CachedConfig::default()).unwrap();
    let mut ids = Vec::new();
    let err = loop {
        match g.take() {
            Ok(id) => ids.push(id),
            Err(e) => break e,
        }
    };
    assert_eq!(err, SnowflakeError::TimeBitsExhausted);
    assert_eq!(ids.len(), 6 * 1024);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    assert!(
        ids.iter()
            .all(|&id| (id as i64) > 0 && layout.decompose(id).time_delta <= 255)
    );
    assert!(g.stats().time_bits_exhausted);
    assert_eq!(g.take(), Err(SnowflakeError::TimeBitsExhausted));

    clock.set(EPOCH + 256_000);
    let e = CachedGenerator::new(layout, 3, clock, CachedConfig::default()).unwrap_err();
    assert_eq!(e, SnowflakeError::TimeBitsExhausted);
}

#[test]
fn shutdown_joins_the_filler_and_leaves_the_ring_drainable() {
    let clock = Arc::new(ManualClock::new(EPOCH + 5_000));
    let g = CachedGenerator::new(small_layout(31), 3, clock, CachedConfig::default()).unwrap();
    g.shutdown();
    g.shutdown(); // idempotent
    let mut ids = Vec::new();
    g.take_many(8 * 1024, &mut ids).unwrap();
    assert_eq!(g.take(), Err(SnowflakeError::ShutDown));
    assert_eq!(g.stats().available, 0);
}

#[test]
fn drop_stops_the_filler() {
    let clock = Arc::new(ManualClock::new(EPOCH + 5_000));
    let config = CachedConfig {
        schedule_interval: Some(Duration::from_millis(1)),
        ..CachedConfig::default()
    };
    let g = CachedGenerator::new(small_layout(31), 3, clock.clone(), config).unwrap();
    drop(g);
    // The filler held the only other reference to the clock: it has exited.
    assert_eq!(Arc::strong_count(&clock), 1);
}

#[test]
fn start_after_a_stored_tick() {
    let clock = Arc::new(ManualClock::new(EPOCH + 5_000));
    let config = CachedConfig {
        start_after_tick: Some(6),
        ..CachedConfig::default()
    };
    let g = CachedGenerator::new(small_layout(31), 3, clock.clone(), config).unwrap();
    assert_eq!(g.layout().decompose(g.take().unwrap()).time_delta, 7);

    // A stored tick further ahead than the generator may borrow is refused.
    let config = CachedConfig {
        start_after_tick: Some(100),
        ..CachedConfig::default()
    };
    let e = CachedGenerator::new(small_layout(31), 3, clock, config).unwrap_err();
    assert_eq!(e, SnowflakeError::ClockMovedBackwards { by_ms: 88_000 });
}

#[test]
fn bad_settings_are_refused() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(EPOCH + 5_000));
    let max = small_layout(31).max_worker_id();
    let e = CachedGenerator::new(small_layout(31), max + 1, clock.clone(), patient());
    assert_eq!(
        e.unwrap_err(),
        SnowflakeError::WorkerIdTooLarge {
            worker_id: max + 1,
            max
        }
    );
    let config = CachedConfig {
        padding_factor: 0,
        ..CachedConfig::default()
    };
    assert!(matches!(
        CachedGenerator::new(small_layout(31), 1, clock, config),
        Err(SnowflakeError::InvalidConfig(_))
    ));
}

#[test]
fn huge_sequence_fields_get_a_capped_ring() {
    // 30 sequence bits: one tick is 2^30 ids, far more than the ring cap.
    let layout = BitLayout::new(0, 0, 30, 3, 30, TimeUnit::Millis, EPOCH).unwrap();
    let clock = Arc::new(ManualClock::new(EPOCH + 10));
    let config = CachedConfig {
        boost_power: 0,
        ..CachedConfig::default()
    };
    let g = CachedGenerator::new(layout, 1, clock, config).unwrap();
    let stats = g.stats();
    assert_eq!(stats.capacity, leafid::snowflake::cached::MAX_RING_SLOTS);
    assert_eq!(stats.last_filled_tick, Some(10));
    let a = g.take().unwrap();
    let b = g.take().unwrap();
    assert!(b > a);
}

#[test]
fn generators_can_be_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<CachedGenerator>();
    assert_send_sync::<leafid::snowflake::direct::DirectGenerator>();
    assert_send_sync::<leafid::snowflake::ring::RingBuffer>();
}
