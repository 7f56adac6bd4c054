//! Unit tests of [`super::DirectGenerator`]: waits, clock steps, the coarse tick, hammering.

use super::*;
use crate::snowflake::layout::TimeUnit;
use crate::testing::ManualClock;

const EPOCH: i64 = 1_600_000_000_000;

/// 31 time bits of seconds, 22 worker bits, 10 sequence bits: 1024 ids per tick.
fn small_seq() -> BitLayout {
    BitLayout::new(0, 0, 31, 22, 10, TimeUnit::Seconds, EPOCH).unwrap()
}

fn gen_at(layout: BitLayout, ms: i64) -> (Arc<ManualClock>, DirectGenerator) {
    let clock = Arc::new(ManualClock::new(ms));
    let g = DirectGenerator::new(layout, 7, clock.clone(), DEFAULT_MAX_BACKWARD_MS).unwrap();
    (clock, g)
}

#[test]
fn ids_strictly_increase_and_decode_to_the_clock() {
    let (clock, g) = gen_at(small_seq(), EPOCH + 10_500);
    let mut last = 0;
    for i in 0..5_000 {
        if i % 700 == 0 {
            clock.advance(300);
        }
        let id = g.next_id().unwrap();
        assert!(id > last);
        last = id;
    }
    let d = g.layout().decompose(last);
    assert_eq!(d.worker_id, 7);
    assert!(d.time_delta <= g.layout().delta_at(clock.now_unix_ms()).unwrap());
}

#[test]
fn sequence_wrap_waits_for_the_next_tick() {
    let (clock, g) = gen_at(small_seq(), EPOCH + 5_000);
    // The tick starts at its random sequence: the rest of it, then one more.
    let first = g.next_id().unwrap();
    let left = 1023 - g.layout().decompose(first).sequence;
    let mut ids = vec![first];
    g.next_ids(left as usize, &mut ids).unwrap();
    assert_eq!(g.layout().decompose(*ids.last().unwrap()).sequence, 1023);
    assert_eq!(clock.sleep_count(), 0);
    let next = g.next_id().unwrap();
    assert!(clock.sleep_count() >= 1, "must have waited");
    assert_eq!(clock.now_unix_ms(), EPOCH + 6_000);
    let d = g.layout().decompose(next);
    assert_eq!((d.time_delta, d.sequence), (6, 0));
    assert!(next > *ids.last().unwrap());
}

#[test]
fn batch_spans_ticks_and_matches_single_ids() {
    let (_clock, g) = gen_at(small_seq(), EPOCH + 1_000);
    let mut ids = Vec::new();
    g.next_ids(3_000, &mut ids).unwrap();
    assert_eq!(ids.len(), 3_000);
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
    // Tick 1 from its random start `r`, tick 2 from 0 (entered by the wrap), then tick 3.
    let r = g.layout().decompose(ids[0]).sequence;
    assert!(r < 1 << spread_bits(10), "{r}");
    let last = g.layout().decompose(ids[2_999]);
    assert_eq!(
        (last.time_delta, last.sequence),
        (3, 3_000 - 2 * 1024 - 1 + r)
    );
    let second = g.layout().decompose(ids[(1024 - r) as usize]);
    assert_eq!((second.time_delta, second.sequence), (2, 0));
}

#[test]
fn small_backward_step_is_waited_out() {
    let layout = BitLayout::twitter();
    let (clock, g) = gen_at(layout, 1_700_000_000_000);
    let a = g.next_id().unwrap();
    clock.rewind(3);
    let b = g.next_id().unwrap();
    assert!(b > a);
    assert!(clock.sleep_count() >= 1);
}

#[test]
fn large_backward_step_is_an_error_and_no_past_tick_is_reused() {
    let (clock, g) = gen_at(BitLayout::twitter(), 1_700_000_000_000);
    let mut before = Vec::new();
    g.next_ids(100, &mut before).unwrap();
    clock.rewind(1_000);
    assert_eq!(
        g.next_id(),
        Err(SnowflakeError::ClockMovedBackwards { by_ms: 1_000 })
    );
    // Once the clock is back, ids continue above the old ones: the past tick is not reissued.
    clock.advance(1_000);
    let after = g.next_id().unwrap();
    assert!(after > *before.last().unwrap());
}

#[test]
fn jump_back_within_tolerance_never_reissues_a_past_tick() {
    let (clock, g) = gen_at(BitLayout::twitter(), 1_700_000_000_000);
    let mut ids = Vec::new();
    for _ in 0..50 {
        g.next_ids(10, &mut ids).unwrap();
        clock.advance(2);
        g.next_ids(10, &mut ids).unwrap();
        clock.rewind(4);
    }
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), ids.len());
    assert!(ids.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn worker_id_too_large_is_rejected() {
    let clock = Arc::new(ManualClock::new(EPOCH));
    let max = small_seq().max_worker_id();
    let e = DirectGenerator::new(small_seq(), max + 1, clock.clone(), 5).unwrap_err();
    assert_eq!(
        e,
        SnowflakeError::WorkerIdTooLarge {
            worker_id: max + 1,
            max
        }
    );
    assert!(DirectGenerator::new(small_seq(), max, clock, 5).is_ok());
}

#[test]
fn time_past_the_field_is_time_bits_exhausted_never_a_wrapped_id() {
    // 8 time bits of seconds: the last tick is 255.
    let layout = BitLayout::new(0, 0, 8, 45, 10, TimeUnit::Seconds, EPOCH).unwrap();
    let (clock, g) = gen_at(layout, EPOCH + 255_000);
    let mut ids = Vec::new();
    // The rest of the last tick from its random start; the error comes once it is used up.
    assert_eq!(
        g.next_ids(1024, &mut ids),
        Err(SnowflakeError::TimeBitsExhausted)
    );
    let r = layout.decompose(ids[0]).sequence;
    assert_eq!(ids.len() as u64, 1024 - r);
    assert!(
        ids.iter()
            .all(|&id| (id as i64) > 0 && layout.decompose(id).time_delta == 255)
    );
    assert_eq!(layout.decompose(*ids.last().unwrap()).sequence, 1023);
    // The last tick's sequence is used up and there is no next tick.
    assert_eq!(g.next_id(), Err(SnowflakeError::TimeBitsExhausted));
    clock.advance(10_000);
    assert_eq!(g.next_id(), Err(SnowflakeError::TimeBitsExhausted));
}

#[test]
fn resume_after_skips_the_stored_tick() {
    let (clock, g) = gen_at(small_seq(), EPOCH + 9_000);
    let g = g.resume_after(9);
    let id = g.next_id().unwrap();
    assert_eq!(g.layout().decompose(id).time_delta, 10);
    assert_eq!(clock.now_unix_ms(), EPOCH + 10_000);
}

#[test]
fn before_epoch_is_an_error() {
    let (_clock, g) = gen_at(small_seq(), EPOCH - 1);
    assert_eq!(g.next_id(), Err(SnowflakeError::BeforeEpoch));
}

/// The updater stalled at tick 98 while the clock went on to 100: ids come from tick 98
/// (reached, never ahead) until its sequence wraps, then from the clock's own tick, without
/// waiting.
#[test]
fn a_stalled_coarse_tick_issues_from_an_older_tick_then_reads_the_clock() {
    let (clock, g) = gen_at(small_seq(), EPOCH + 100_400);
    g.set_coarse_tick(Some(98));
    // Tick 98 from its random start, to its end.
    let mut ids = vec![g.next_id().unwrap()];
    let left = 1023 - g.layout().decompose(ids[0]).sequence;
    g.next_ids(left as usize, &mut ids).unwrap();
    assert!(
        ids.iter()
            .all(|&id| g.layout().decompose(id).time_delta == 98)
    );
    let next = g.next_id().unwrap();
    assert_eq!(g.layout().decompose(next).time_delta, 100);
    assert!(next > *ids.last().unwrap());
    assert_eq!(
        clock.sleep_count(),
        0,
        "the clock was past the wrapped tick"
    );
}

/// A cached tick behind the state never hides a step back: the precise path sees it and
/// refuses (or waits out) as without the cache.
#[test]
fn a_coarse_tick_behind_the_state_leaves_step_back_handling_to_the_clock() {
    let (clock, g) = gen_at(BitLayout::twitter(), 1_700_000_000_000);
    let before = g.next_id().unwrap();
    let tick = g.layout().decompose(before).time_delta;
    g.set_coarse_tick(Some(tick - 1));
    clock.rewind(1_000);
    assert_eq!(
        g.next_id(),
        Err(SnowflakeError::ClockMovedBackwards { by_ms: 1_000 })
    );
    clock.advance(1_000);
    assert!(g.next_id().unwrap() > before);
}

#[test]
fn the_updater_parks_when_no_id_is_asked_for_and_the_next_id_wakes_it() {
    use crate::snowflake::clock::SystemClock;
    let layout = BitLayout::twitter();
    let g = DirectGenerator::new(layout, 1, Arc::new(SystemClock), 5).unwrap();
    let parked = |g: &DirectGenerator| g.coarse.parked.load(Ordering::Acquire);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !parked(&g) {
        assert!(Instant::now() < deadline, "the updater never parked");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        g.coarse.load(),
        0,
        "a parked updater leaves no tick to trust"
    );
    let id = g.next_id().unwrap();
    assert!(layout.decompose(id).time_delta <= layout.delta_at(SystemClock.now_unix_ms()).unwrap());
    let deadline = Instant::now() + Duration::from_secs(5);
    while g.coarse.load() == 0 {
        assert!(Instant::now() < deadline, "the updater was not woken");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!parked(&g));
}

#[test]
fn the_updater_follows_a_real_clock_and_stops_with_the_generator() {
    use crate::snowflake::clock::SystemClock;
    let layout = BitLayout::twitter();
    let g = DirectGenerator::new(layout, 1, Arc::new(SystemClock), 5).unwrap();
    assert!(g.updater.is_some());
    let before = layout.delta_at(SystemClock.now_unix_ms()).unwrap();
    // Polled, not a fixed sleep: on a loaded machine the updater thread may not run for a
    // while. (It parks only after a thousand refreshes, a second or more.)
    let deadline = Instant::now() + Duration::from_secs(5);
    let cached = loop {
        let held = g.coarse.load(); // tick + 1; 0: none yet
        if held > before + 1 {
            break held - 1;
        }
        assert!(
            Instant::now() < deadline,
            "the updater holds {held} (tick + 1), not past tick {before}, after 5 s"
        );
        std::thread::sleep(Duration::from_millis(1));
    };
    let after = layout.delta_at(SystemClock.now_unix_ms()).unwrap();
    assert!(
        before < cached && cached <= after,
        "{before} {cached} {after}"
    );
    let id = g.next_id().unwrap();
    assert!(layout.decompose(id).time_delta <= layout.delta_at(SystemClock.now_unix_ms()).unwrap());
    drop(g); // joins the updater: a leak would hang here
}

proptest::proptest! {
    // Each sequence wrap on a manual millisecond clock spins ~3 ms of real time before
    // sleeping on the clock: fewer cases keep this quick in debug.
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    #[test]
    fn ids_increase_whatever_the_clock_does(
        steps in proptest::collection::vec((-40i64..60, 1usize..40), 1..60),
        spread in proptest::bool::ANY,
    ) {
        let (clock, g) = gen_at(millis_layout(spread), EPOCH + 1_000_000);
        let mut last = 0u64;
        for (step, batch) in steps {
            if step >= 0 { clock.advance(step as u64) } else { clock.rewind((-step) as u64) }
            let mut ids = Vec::new();
            match g.next_ids(batch, &mut ids) {
                Ok(()) => proptest::prop_assert_eq!(ids.len(), batch),
                Err(SnowflakeError::ClockMovedBackwards { by_ms }) => {
                    proptest::prop_assert!(by_ms > DEFAULT_MAX_BACKWARD_MS);
                }
                Err(e) => proptest::prop_assert!(false, "unexpected {e}"),
            }
            for id in ids {
                proptest::prop_assert!(id > last);
                last = id;
            }
        }
    }

    /// As above with a cached tick that an updater refreshes now and then (or leaves
    /// stale): ids still increase, and none carries a tick the clock has not reached.
    #[test]
    fn ids_increase_and_never_run_ahead_with_a_lagging_coarse_tick(
        steps in proptest::collection::vec((-40i64..60, 1usize..40, proptest::bool::ANY), 1..60),
        one_by_one in proptest::bool::ANY,
        spread in proptest::bool::ANY,
    ) {
        let (clock, g) = gen_at(millis_layout(spread), EPOCH + 1_000_000);
        let layout = *g.layout();
        let mut reached = layout.delta_at(clock.now_unix_ms()).unwrap();
        let mut last = 0u64;
        for (step, batch, refresh) in steps {
            if step >= 0 { clock.advance(step as u64) } else { clock.rewind((-step) as u64) }
            let now = layout.delta_at(clock.now_unix_ms()).unwrap();
            if refresh {
                g.set_coarse_tick(Some(now));
            }
            let mut ids = Vec::new();
            // One id per call (`next_id`, one CAS from the cached tick) or batches (`next_ids`).
            let taken = if one_by_one {
                (0..batch).try_for_each(|_| g.next_id().map(|id| ids.push(id)))
            } else {
                g.next_ids(batch, &mut ids)
            };
            match taken {
                Ok(()) => proptest::prop_assert_eq!(ids.len(), batch),
                Err(SnowflakeError::ClockMovedBackwards { by_ms }) => {
                    proptest::prop_assert!(by_ms > DEFAULT_MAX_BACKWARD_MS);
                }
                Err(e) => proptest::prop_assert!(false, "unexpected {e}"),
            }
            // Waits move the manual clock: what it reached includes them.
            reached = reached.max(layout.delta_at(clock.now_unix_ms()).unwrap());
            for id in ids {
                proptest::prop_assert!(id > last);
                proptest::prop_assert!(layout.decompose(id).time_delta <= reached);
                last = id;
            }
        }
    }
}

proptest::proptest! {
    /// The generator's own composer (fixed bits composed once, one range check per id) gives
    /// exactly `BitLayout::compose` for any layout, worker and position, and refuses a
    /// position past the last tick instead of spilling into the prefix or the sign.
    #[test]
    fn compose_matches_the_layouts_composer(
        prefix_bits in 0u8..20,
        worker_bits in 1u8..20,
        seq_bits in 1u8..20,
        raw in proptest::prelude::any::<(u64, u64, u64, u64)>(),
    ) {
        let time_bits = 63 - prefix_bits - worker_bits - seq_bits;
        let all = |bits: u8| (1u64 << bits) - 1;
        let prefix = raw.0 & all(prefix_bits);
        let layout =
            BitLayout::new(prefix_bits, prefix, time_bits, worker_bits, seq_bits, TimeUnit::Millis, EPOCH)
                .unwrap();
        let worker = raw.1 & all(worker_bits);
        let g = DirectGenerator::new(layout, worker, Arc::new(ManualClock::new(EPOCH)), 5).unwrap();
        // Ticks up to one past the last, so both sides of the bound are tried.
        let tick = raw.2 % (all(time_bits) + 2);
        let seq = raw.3 & all(seq_bits);
        let pos = (tick << seq_bits) | seq;
        match layout.compose(tick, worker, seq) {
            Ok(id) => proptest::prop_assert_eq!(g.compose(pos).unwrap(), id),
            Err(_) => proptest::prop_assert!(g.compose(pos).is_err()),
        }
    }
}

/// Millisecond layout with few sequence bits, so batches wrap ticks often: 4 (no random start)
/// or, with `spread`, 5 (a new tick starts at sequence 0 or 1 at random).
fn millis_layout(spread: bool) -> BitLayout {
    let seq_bits = if spread { 5 } else { 4 };
    BitLayout::new(0, 0, 41, 22 - seq_bits, seq_bits, TimeUnit::Millis, EPOCH).unwrap()
}

#[test]
fn spread_bits_stop_at_8_and_leave_fifteen_sixteenths_of_a_tick() {
    let table: Vec<(u8, u8)> = [1u8, 4, 5, 8, 12, 13, 14, 22]
        .iter()
        .map(|&s| (s, spread_bits(s)))
        .collect();
    assert_eq!(
        table,
        [
            (1, 0),
            (4, 0),
            (5, 1),
            (8, 4),
            (12, 8),
            (13, 8),
            (14, 8),
            (22, 8)
        ]
    );
    for s in 1u8..=22 {
        let layout = BitLayout::new(0, 0, 63 - 10 - s, 10, s, TimeUnit::Millis, EPOCH).unwrap();
        let full = 1u64 << s;
        let least = min_ids_in_a_tick(&layout);
        assert_eq!(least, full - (1 << spread_bits(s)) + 1);
        assert!(16 * least > 15 * full, "{s} bits: {least} of {full}");
    }
    assert_eq!(min_ids_in_a_tick(&BitLayout::twitter()), 3841);
}

/// One id per tick (a quiet caller): each tick's sequence starts at its own random value below
/// `2^8`, so `id % 16` and `id % 2` spread evenly; both paths (the cached tick and a clock
/// reading) are taken. On the old code every id had sequence 0: one shard held them all.
#[test]
fn one_id_per_tick_spreads_over_id_mod_16_on_both_paths() {
    let (clock, g) = gen_at(BitLayout::twitter(), 1_700_000_000_000);
    let layout = *g.layout();
    let (mut mod16, mut mod2) = ([0u32; 16], [0u32; 2]);
    let mut last = 0;
    const N: u32 = 4_096;
    for i in 0..N {
        clock.advance(1 + u64::from(i % 3));
        let now = layout.delta_at(clock.now_unix_ms()).unwrap();
        g.set_coarse_tick((i % 2 == 0).then_some(now));
        let id = g.next_id().unwrap();
        assert!(id > last);
        last = id;
        let d = layout.decompose(id);
        assert_eq!(d.time_delta, now);
        assert!(d.sequence < 256, "{d:?}");
        mod16[(id % 16) as usize] += 1;
        mod2[(id % 2) as usize] += 1;
    }
    // 256 expected per shard of 16 (sd 15.5): 128 away would be 8 sd.
    assert!(mod16.iter().all(|&n| (128..=384).contains(&n)), "{mod16:?}");
    assert!(mod2.iter().all(|&n| n * 100 <= N * 55), "{mod2:?}");
}

/// The same seed gives the same starts (the offset is a function of the seed and the tick);
/// another seed gives other starts.
#[test]
fn a_ticks_start_is_a_function_of_the_seed_and_the_tick() {
    let starts = |seed: u64| {
        let (clock, g) = gen_at(small_seq(), EPOCH + 1_000);
        let g = g.with_spread_seed(seed);
        (0..64)
            .map(|_| {
                clock.advance(1_000);
                g.layout().decompose(g.next_id().unwrap()).sequence
            })
            .collect::<Vec<_>>()
    };
    let a = starts(1);
    assert_eq!(a, starts(1));
    assert_ne!(a, starts(2));
    let expected: Vec<u64> = (2..66)
        .map(|tick| tick_offset(1, tick, (1 << spread_bits(10)) - 1))
        .collect();
    assert_eq!(a, expected);
}

/// A tick the state reached by a wrap keeps its sequence 0, whichever path serves it: a
/// sustained burst loses no sequence, only the first tick of a burst starts at random.
#[test]
fn a_tick_entered_by_a_wrap_starts_at_zero_on_both_paths() {
    for coarse in [false, true] {
        let (clock, g) = gen_at(small_seq(), EPOCH + 20_000);
        let mut ids = vec![g.next_id().unwrap()];
        let left = 1023 - g.layout().decompose(ids[0]).sequence;
        g.next_ids(left as usize, &mut ids).unwrap();
        clock.advance(1_000);
        if coarse {
            g.set_coarse_tick(Some(21));
        }
        let d = g.layout().decompose(g.next_id().unwrap());
        assert_eq!((d.time_delta, d.sequence), (21, 0), "coarse {coarse}");
    }
}

/// A step back beyond the tolerance moves to the next clock-back value at the clock's tick,
/// from a random start too: ids of the new value spread, and none repeats an earlier one.
#[test]
fn a_new_clock_back_value_starts_its_ticks_at_random_too() {
    let layout = BitLayout::twitter().with_clock_back_bits(2).unwrap();
    let (clock, g) = gen_at(layout, 1_700_000_000_000);
    let mut ids = Vec::new();
    for _ in 0..50 {
        clock.advance(1);
        ids.push(g.next_id().unwrap());
    }
    clock.rewind(1_000);
    let mut starts = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let id = g.next_id().unwrap();
        let d = layout.decompose(id);
        assert_eq!(d.clock_back, 1);
        assert!(d.sequence < 256);
        starts.insert(d.sequence);
        ids.push(id);
        clock.advance(1);
    }
    assert!(starts.len() > 100, "{} distinct starts", starts.len());
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n);
}
