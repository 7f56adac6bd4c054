//! Property tests of the planner: every plan keeps its guarantees when checked by composing ids
//! independently, no brute-force plan lasts longer, and every refusal is confirmed by a brute
//! force that finds no plan.
//!
//! Why the brute force may fix the epoch per (prefix width, value): lifting needs
//! `floor((now - epoch) / tick) >= k` (an upper bound on the epoch) and lasting needs
//! `epoch + 2^t * tick > horizon` (a lower bound), so the feasible epochs form an interval whose
//! latest point, `min(now, now - k * tick)`, is feasible whenever any is. The small world below
//! enumerates every epoch anyway.

use chrono::{DateTime, Months};
use proptest::prelude::*;

use super::search::{self, lasts, lifts};
use super::*;
use crate::snowflake::layout::{BitLayout, ComposeError, TimeUnit, format_unix_ms};

/// 2000-01-01 and 2100-01-01 in unix ms.
const Y2000_MS: i64 = 946_684_800_000;
const Y2100_MS: i64 = 4_102_444_800_000;

fn unit_of(millis: bool) -> TimeUnit {
    if millis {
        TimeUnit::Millis
    } else {
        TimeUnit::Seconds
    }
}

/// Unix ms at which `layout` runs out, without saturation.
fn end_of(layout: &BitLayout) -> i128 {
    i128::from(layout.epoch_ms())
        + (i128::from(layout.max_time_delta()) + 1) * i128::from(layout.unit().tick_ms())
}

/// A legacy layout: uid-generator's, or a random one with an epoch in 2000..2020.
fn legacy_layout() -> impl Strategy<Value = BitLayout> {
    prop_oneof![
        Just(BitLayout::uid_generator()),
        (
            0u8..=6,
            20u8..=42,
            1u8..=22,
            any::<bool>(),
            Y2000_MS..Y2000_MS + 20 * 31_556_952_000
        )
            .prop_filter_map("widths must sum to 63", |(p, t, w, millis, epoch)| {
                let s = 63u8
                    .checked_sub(p + t + w)
                    .filter(|s| (1..=22).contains(s))?;
                BitLayout::new(p, (1 << p) - 1, t, w, s, unit_of(millis), epoch).ok()
            }),
    ]
}

/// A maximum anywhere in the positive range, or a legacy id (largest worker and sequence) of a
/// random tick of the legacy layout.
fn legacy_max(legacy: BitLayout) -> impl Strategy<Value = i64> {
    prop_oneof![
        0..=i64::MAX,
        (0..=legacy.max_time_delta()).prop_map(move |delta| {
            let id = legacy.compose(delta, legacy.max_worker_id(), legacy.max_sequence());
            id.expect("fields fit") as i64
        }),
    ]
}

#[derive(Clone, Debug)]
struct Case {
    request: PlanRequest,
    now_ms: i64,
}

fn realistic_case() -> impl Strategy<Value = Case> {
    legacy_layout().prop_flat_map(|legacy| {
        (
            legacy_max(legacy),
            1u8..=24,
            1u8..=24,
            0u32..=80,
            proptest::option::of(any::<bool>()),
            Y2000_MS..Y2100_MS,
            proptest::option::weighted(0.3, 0.0..=1.0f64),
        )
            .prop_map(move |(max, w, s, years, millis, now_ms, epoch_at)| {
                // A fixed epoch anywhere between 1970 and now.
                let epoch = epoch_at.map(|f| format_unix_ms((now_ms as f64 * f) as i64));
                Case {
                    request: PlanRequest {
                        legacy: legacy.to_spec(true),
                        max_legacy_id: Some(max),
                        cutover: None,
                        margin_seconds: DEFAULT_MARGIN_SECONDS,
                        worker_bits: Some(w),
                        seq_bits: Some(s),
                        workers: None,
                        ids_per_second: None,
                        ids_per_second_scope: None,
                        max_id_bits: None,
                        years,
                        unit: millis.map(unit_of),
                        epoch,
                        clock_back_bits: None,
                        regions: None,
                    },
                    now_ms,
                }
            })
    })
}

/// The horizon computed here, not by the planner.
fn horizon(now_ms: i64, years: u32) -> i64 {
    let now = DateTime::from_timestamp_millis(now_ms).unwrap();
    (now + Months::new(12 * years)).timestamp_millis()
}

/// Checks a returned plan by composing ids with its own layout.
fn assert_plan_keeps_its_word(case: &Case, plan: &Plan) -> Result<BitLayout, TestCaseError> {
    let req = &case.request;
    let max = req.max_legacy_id.unwrap() as u64;
    let layout = plan.bit_layout().unwrap();
    let legacy_unit = req.legacy.unit;
    prop_assert_eq!(Some(layout.worker_bits()), req.worker_bits);
    prop_assert_eq!(Some(layout.seq_bits()), req.seq_bits);
    prop_assert_eq!(layout.unit(), req.unit.unwrap_or(legacy_unit));
    if let Some(epoch) = &req.epoch {
        prop_assert_eq!(
            layout.epoch_ms(),
            crate::snowflake::layout::parse_epoch(epoch).unwrap()
        );
    }
    prop_assert!(layout.epoch_ms() <= case.now_ms, "epoch in the future");

    let (top_worker, top_seq) = (layout.max_worker_id(), layout.max_sequence());
    let now_delta = layout.delta_at(case.now_ms).unwrap();
    let first = layout.compose(now_delta, 0, 0).unwrap();
    prop_assert_eq!(first, plan.first_id);
    prop_assert!(first > max, "first id {} not above {}", first, max);
    prop_assert!(layout.compose(now_delta, top_worker, top_seq).is_ok());
    let end_delta = layout.delta_at(horizon(case.now_ms, req.years)).unwrap();
    prop_assert!(
        layout.compose(end_delta, top_worker, top_seq).is_ok(),
        "dies before the horizon"
    );
    let last = layout
        .compose(layout.max_time_delta(), top_worker, top_seq)
        .unwrap();
    prop_assert_eq!(last, plan.last_id);
    prop_assert!(last <= i64::MAX as u64);
    prop_assert_eq!(
        layout.compose(layout.max_time_delta() + 1, 0, 0),
        Err(ComposeError::TimeBitsExhausted)
    );
    prop_assert_eq!(
        &plan.exhausted_at,
        &format_unix_ms(layout.exhausted_at_unix_ms())
    );
    prop_assert!(plan.checks.iter().all(|c| c.ok));
    Ok(layout)
}

/// What the brute force found: the latest end of a plan that lifts, and of one that also lasts.
#[derive(Debug, Default)]
struct Found {
    lifting_end: Option<i128>,
    lasting_end: Option<i128>,
}

impl Found {
    fn consider(&mut self, layout: &BitLayout, needs: &Needs) {
        if !lifts(layout, needs) {
            return;
        }
        let end = end_of(layout);
        self.lifting_end = self.lifting_end.max(Some(end));
        if lasts(layout, needs.horizon_ms) {
            self.lasting_end = self.lasting_end.max(Some(end));
        }
    }
}

/// Every prefix width; every value when there are at most 64, else a sample that includes all
/// ones; for each, the critical epochs (see the module docs) or the fixed one.
///
/// With `max_id_bits` below 63, values whose ids reach above `2^max_id_bits - 1` are left out
/// and the sample also holds the values just under that bound.
fn brute_force_bounded(needs: &Needs) -> Found {
    let (w, s) = (needs.worker_bits, needs.seq_bits);
    let free = 63 - w - s;
    let zeros = 63 - needs.max_id_bits;
    let top_id = (1u64 << needs.max_id_bits) - 1;
    let min_slot = (needs.max_legacy_id >> (w + s)) + 1;
    let tick = needs.unit.tick_ms();
    let mut found = Found::default();
    for p in 0..free {
        let t = free - p;
        let ones = (1u64 << p) - 1;
        let values: Vec<u64> = if p <= 6 {
            (0..=ones).collect()
        } else {
            let below = (1u64 << p.saturating_sub(zeros)) - 1;
            vec![
                0,
                1,
                ones / 2,
                ones - 1,
                ones,
                below / 2,
                below.max(1) - 1,
                below,
            ]
        };
        for v in values {
            let epochs = match needs.epoch_ms {
                Some(e) => vec![e],
                None => {
                    let k = min_slot.saturating_sub(v << t);
                    let back = i128::from(needs.now_ms) - i128::from(k) * i128::from(tick);
                    let back = i64::try_from(back).unwrap_or(-1);
                    vec![
                        0,
                        needs.now_ms,
                        back,
                        back - needs.now_ms.rem_euclid(tick),
                        back - tick,
                    ]
                }
            };
            for e in epochs
                .into_iter()
                .filter(|e| (0..=needs.now_ms).contains(e))
            {
                if let Ok(layout) = BitLayout::new(p, v, t, w, s, needs.unit, e) {
                    let last = layout.compose(
                        layout.max_time_delta(),
                        layout.max_worker_id(),
                        layout.max_sequence(),
                    );
                    if last.is_ok_and(|id| id <= top_id) {
                        found.consider(&layout, needs);
                    }
                }
            }
        }
    }
    found
}

/// Checks the plan or the refusal against what the brute force found.
fn assert_agrees_with(
    found: &Found,
    result: Result<BitLayout, PlanError>,
    tick: i64,
) -> Result<(), TestCaseError> {
    match result {
        Ok(layout) => {
            let best = found
                .lasting_end
                .expect("brute force finds the plan's own layout");
            // The planner aligns its epoch to a tick: at most one tick short of the optimum.
            prop_assert!(end_of(&layout) <= best);
            prop_assert!(
                end_of(&layout) + i128::from(tick) > best,
                "a longer plan exists"
            );
        }
        Err(PlanError::Impossible { need, message }) => {
            prop_assert_eq!(
                found.lasting_end,
                None,
                "a plan exists though refused: {}",
                message
            );
            if need == "years" {
                prop_assert!(found.lifting_end.is_some(), "{}", message);
            } else {
                prop_assert_eq!(found.lifting_end, None, "{}: {}", need, message);
            }
        }
        Err(other) => prop_assert!(false, "valid input refused: {other}"),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(384))]

    #[test]
    fn plans_keep_their_guarantees_and_refusals_are_right(case in realistic_case()) {
        let needs = case.request.needs(case.now_ms).unwrap();
        let found = brute_force_bounded(&needs);
        match plan(&case.request, case.now_ms) {
            Ok(answer) => {
                let layout = assert_plan_keeps_its_word(&case, &answer)?;
                assert_agrees_with(&found, Ok(layout), needs.unit.tick_ms())?;
            }
            Err(e) => assert_agrees_with(&found, Err(e), needs.unit.tick_ms())?,
        }
    }
}

/// A world small enough to enumerate every prefix width, value and millisecond of epoch.
fn small_world() -> impl Strategy<Value = Needs> {
    (1u8..=5, any::<bool>(), 0i64..=5000, any::<bool>())
        .prop_flat_map(|(free, millis, now_ms, fixed)| {
            let tick = unit_of(millis).tick_ms();
            (
                Just((free, millis, now_ms, fixed)),
                1u8..=(62 - free),
                // The block of the legacy maximum, and where in the block it lies.
                0u64..1 << free,
                any::<u64>(),
                0..=now_ms,
                0i64..=12 * tick,
            )
        })
        .prop_map(
            |((free, millis, now_ms, fixed), w, block, low, epoch, ahead)| {
                let block_bits = 63 - free;
                Needs {
                    max_legacy_id: (block << block_bits) | (low >> (64 - block_bits)),
                    max_source: "observed".to_owned(),
                    worker_bits: w,
                    clock_back_bits: 0,
                    seq_bits: block_bits - w,
                    workers: None,
                    ids_per_second: None,
                    max_id_bits: 63,
                    unit: unit_of(millis),
                    epoch_ms: fixed.then_some(epoch),
                    now_ms,
                    horizon_ms: now_ms + ahead,
                    years: 0,
                    region_bits: 0,
                }
            },
        )
}

fn brute_force_exhaustive(needs: &Needs) -> Found {
    let (w, s) = (needs.worker_bits, needs.seq_bits);
    let free = 63 - w - s;
    let epochs = match needs.epoch_ms {
        Some(e) => e..=e,
        None => 0..=needs.now_ms,
    };
    let mut found = Found::default();
    for p in 0..free {
        for v in 0..1u64 << p {
            for e in epochs.clone() {
                let layout = BitLayout::new(p, v, free - p, w, s, needs.unit, e).unwrap();
                found.consider(&layout, needs);
            }
        }
    }
    found
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn small_world_plans_are_optimal_and_refusals_exhaustive(needs in small_world()) {
        let found = brute_force_exhaustive(&needs);
        let result = plan_needs(&needs);
        if let Ok(layout) = &result {
            prop_assert!(lifts(layout, &needs) && lasts(layout, needs.horizon_ms));
            if needs.epoch_ms.is_some() {
                prop_assert_eq!(Some(end_of(layout)), found.lasting_end);
            }
        }
        assert_agrees_with(&found, result, needs.unit.tick_ms())?;
    }
}

/// A request in users' terms: a peak worker count, a peak rate per worker or per cluster, and
/// sometimes a bound on the ids' bits (53 for JavaScript, or any width the legacy leaves room
/// for).
fn capacity_case() -> impl Strategy<Value = Case> {
    legacy_layout().prop_flat_map(|legacy| {
        (
            legacy_max(legacy),
            1u64..=1 << 20,
            1u64..=10_000_000,
            any::<bool>(),
            0u32..=80,
            proptest::option::of(any::<bool>()),
            Y2000_MS..Y2100_MS,
            prop_oneof![Just(None), Just(Some(53u8)), (20u8..=63).prop_map(Some)],
            any::<bool>(),
        )
            .prop_map(
                move |(max, workers, rate, cluster, years, millis, now_ms, bits, shrink)| {
                    // Half the time, keep the maximum within the bound so that bits decide.
                    let max = match bits {
                        Some(b) if shrink => max >> (63 - b),
                        _ => max,
                    };
                    Case {
                        request: PlanRequest {
                            legacy: legacy.to_spec(true),
                            max_legacy_id: Some(max),
                            cutover: None,
                            margin_seconds: DEFAULT_MARGIN_SECONDS,
                            worker_bits: None,
                            seq_bits: None,
                            workers: Some(workers),
                            ids_per_second: Some(rate),
                            ids_per_second_scope: Some(if cluster {
                                RateScope::Cluster
                            } else {
                                RateScope::Worker
                            }),
                            max_id_bits: bits,
                            years,
                            unit: millis.map(unit_of),
                            epoch: None,
                            clock_back_bits: None,
                            regions: None,
                        },
                        now_ms,
                    }
                },
            )
    })
}

/// Ids per second one worker can issue with `seq_bits` in `unit`.
fn rate_of(seq_bits: u8, unit: TimeUnit) -> u128 {
    (1u128 << seq_bits) * u128::from(1000 / unit.tick_ms() as u64)
}

/// `n` with thousands separators, computed here, not by the planner.
fn grouped(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A request in capacity terms for the same legacy and instant.
fn capacity_request(case: &Case, workers: u64, rate: u64) -> PlanRequest {
    PlanRequest {
        workers: Some(workers),
        ids_per_second: Some(rate),
        ids_per_second_scope: None,
        ..case.request.clone()
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn capacity_plans_hold_the_capacity_and_refusals_say_exactly_how_short(case in capacity_case()) {
        let req = &case.request;
        let needs = req.needs(case.now_ms).unwrap();
        let workers = req.workers.unwrap();
        let rate = match req.ids_per_second_scope {
            Some(RateScope::Cluster) => req.ids_per_second.unwrap().div_ceil(workers),
            _ => req.ids_per_second.unwrap(),
        };
        let max_id_bits = req.max_id_bits.unwrap_or(63);
        let top_id = (1u64 << max_id_bits) - 1;
        match plan(req, case.now_ms) {
            Ok(answer) => {
                let layout = answer.bit_layout().unwrap();
                // The fewest bits that hold the capacity.
                prop_assert!(layout.max_worker_id() + 1 >= workers);
                prop_assert!(layout.worker_bits() == 1 || 1u64 << (layout.worker_bits() - 1) < workers);
                let per_worker = rate_of(layout.seq_bits(), layout.unit());
                prop_assert!(per_worker >= u128::from(rate), "{} < {}", per_worker, rate);
                prop_assert!(
                    layout.seq_bits() == 1 || rate_of(layout.seq_bits() - 1, layout.unit()) < u128::from(rate)
                );
                prop_assert_eq!(answer.capacity.max_workers, layout.max_worker_id() + 1);
                prop_assert_eq!(u128::from(answer.capacity.max_ids_per_second_per_worker), per_worker);
                prop_assert_eq!(answer.capacity.ids_per_second, Some(rate));
                let case = Case {
                    request: PlanRequest {
                        worker_bits: Some(layout.worker_bits()),
                        seq_bits: Some(layout.seq_bits()),
                        ..req.clone()
                    },
                    now_ms: case.now_ms,
                };
                assert_plan_keeps_its_word(&case, &answer)?;
                prop_assert!(answer.last_id <= top_id, "last id {} above 2^{} - 1", answer.last_id, max_id_bits);
                let found = brute_force_bounded(&needs);
                assert_agrees_with(&found, Ok(layout), needs.unit.tick_ms())?;
            }
            Err(PlanError::Impossible { need, message }) => {
                prop_assert_eq!(brute_force_bounded(&needs).lasting_end, None, "{}", message);
                if need == "max_id_bits" {
                    prop_assert!(max_id_bits < 63 && needs.max_legacy_id >= top_id, "{}", message);
                    return Ok(());
                }
                let (w, s) = (needs.worker_bits, needs.seq_bits);
                let Some(fits) = search::widest_feasible(&needs) else {
                    // No split of fewer bits plans either, down to 1 + 1.
                    for bits in 2..w + s {
                        let fewer = search::with_bits(&needs, bits);
                        prop_assert_eq!(brute_force_bounded(&fewer).lasting_end, None, "{} bits", bits);
                    }
                    return Ok(());
                };
                // Exactly this many bits short: the brute force plans with them, not with one more.
                let short = w + s - fits;
                prop_assert!(message.contains(&format!(", {short} bits short: at most {fits} leave")), "{}", message);
                prop_assert!(brute_force_bounded(&search::with_bits(&needs, fits)).lasting_end.is_some());
                if short > 1 {
                    let one_more = search::with_bits(&needs, fits + 1);
                    prop_assert_eq!(brute_force_bounded(&one_more).lasting_end, None);
                }
                // The alternatives the message offers are plans.
                if fits > s {
                    let most = 1u64 << (fits - s);
                    prop_assert!(message.contains(&format!("at most {} workers at {} ids/s each", grouped(most.into()), grouped(rate.into()))), "{}", message);
                    let alt = capacity_request(&case, most, rate);
                    prop_assert!(plan(&alt, case.now_ms).is_ok(), "{} workers: {}", most, message);
                    let alt = capacity_request(&case, most + 1, rate);
                    prop_assert!(plan(&alt, case.now_ms).is_err(), "{} workers", most + 1);
                }
                if fits > w {
                    let most = rate_of(fits - w, needs.unit);
                    prop_assert!(message.contains(&format!("{} workers at {} ids/s each", grouped(workers.into()), grouped(most))), "{}", message);
                    let alt = capacity_request(&case, workers, most as u64);
                    prop_assert!(plan(&alt, case.now_ms).is_ok(), "{} ids/s: {}", most, message);
                    let alt = capacity_request(&case, workers, most as u64 + 1);
                    prop_assert!(plan(&alt, case.now_ms).is_err(), "{} ids/s", most + 1);
                }
            }
            Err(other) => {
                // Only capacity that needs more than 62 bits in all is invalid.
                let PlanError::InvalidInput(message) = other else { unreachable!() };
                prop_assert!(message.contains("at most 62"), "{}", message);
            }
        }
    }
}
