//! A simulated migration: legacy 28/22/13 generators issue ids up to a cut-over (borrowing
//! future seconds up to the margin, as `CachedUidGenerator` does), then generators of the
//! planned layout take over with the same worker ids. Per worker the merged ids must strictly
//! increase, and no id may repeat anywhere.

use std::collections::HashSet;

use proptest::prelude::*;

use super::*;
use crate::snowflake::layout::{BitLayout, parse_epoch};

/// Ticks a generator is sampled at in `from..=to`: the first and last `edge` ticks and about
/// `spread` evenly spaced ones between (all of them when the range is small).
fn sample_ticks(from: u64, to: u64, edge: u64, spread: u64) -> Vec<u64> {
    let mut ticks: Vec<u64> = (from..=to.min(from.saturating_add(edge))).collect();
    let step = ((to - from) / spread.max(1)).max(1);
    ticks.extend((from..=to).step_by(usize::try_from(step).unwrap_or(usize::MAX)));
    ticks.extend(to.saturating_sub(edge).max(from)..=to);
    ticks.sort_unstable();
    ticks.dedup();
    ticks
}

/// The ids one worker's generator issues at `ticks`: a few sequences per tick, in order.
fn issue(layout: &BitLayout, worker: u64, ticks: &[u64]) -> Vec<u64> {
    let top = layout.max_sequence();
    ticks
        .iter()
        .flat_map(|&tick| {
            [0, 1, top / 2, top].map(|seq| layout.compose(tick, worker, seq).expect("fields fit"))
        })
        .collect()
}

/// Runs the migration at `cutover` and checks the merged ids; `Err` when the planner refused.
fn migrate(
    cutover: &str,
    margin_seconds: u64,
    worker_bits: u8,
    years: u32,
) -> Result<Plan, PlanError> {
    let legacy = BitLayout::uid_generator();
    let now = parse_epoch(cutover).unwrap();
    let request = PlanRequest {
        legacy: legacy.to_spec(true),
        max_legacy_id: None,
        cutover: Some(cutover.to_owned()),
        margin_seconds,
        worker_bits: Some(worker_bits),
        seq_bits: Some(13),
        workers: None,
        ids_per_second: None,
        ids_per_second_scope: None,
        max_id_bits: None,
        years,
        unit: None,
        epoch: None,
        clock_back_bits: None,
        regions: None,
    };
    let plan = plan(&request, now)?;
    let new = plan.bit_layout().unwrap();

    // The legacy generators may have handed out seconds up to cutover + margin.
    let borrowed_until = now + 1000 * margin_seconds as i64;
    let legacy_last = legacy
        .delta_at(borrowed_until)
        .unwrap()
        .min(legacy.max_time_delta());
    let new_first = new.delta_at(now).unwrap();
    let shared_top = legacy.max_worker_id().min(new.max_worker_id());
    let mut seen = HashSet::new();
    for worker in [0, 1, 29, shared_top / 2, shared_top] {
        let mut ids = issue(&legacy, worker, &sample_ticks(0, legacy_last, 200, 500));
        ids.extend(issue(
            &new,
            worker,
            &sample_ticks(new_first, new.max_time_delta(), 200, 500),
        ));
        for pair in ids.windows(2) {
            assert!(
                pair[0] < pair[1],
                "worker {worker}: {} then {}",
                pair[0],
                pair[1]
            );
        }
        for id in ids {
            assert!(id <= i64::MAX as u64);
            assert!(seen.insert(id), "id {id} issued twice");
        }
    }
    Ok(plan)
}

#[test]
fn migrations_at_several_cutovers_never_repeat_or_go_back() {
    for cutover in [
        "2018-08-11T06:00:00+08:00",
        "2024-10-07T06:51:06+08:00",
        "2024-11-01T00:00:00Z",
    ] {
        let plan = migrate(cutover, 86_400, 13, 10).unwrap();
        assert!(plan.checks.iter().all(|c| c.ok), "{cutover}");
    }
}

#[test]
fn a_cutover_at_exhaustion_is_refused_not_simulated() {
    let err = migrate("2024-11-20T13:24:15Z", 86_400, 13, 10).unwrap_err();
    assert!(matches!(err, PlanError::Impossible { ref need, .. } if need == "max_legacy_id"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_migrations_never_repeat_or_go_back(
        // From a day after the legacy epoch to two days before it runs out.
        cutover_s in 1_463_760_000i64..1_731_936_000,
        margin_seconds in 0u64..=3 * 86_400,
        worker_bits in 8u8..=16,
        years in 0u32..=20,
    ) {
        let cutover = crate::snowflake::layout::format_unix_ms(cutover_s * 1000);
        match migrate(&cutover, margin_seconds, worker_bits, years) {
            Ok(_) | Err(PlanError::Impossible { .. }) => {}
            Err(e) => prop_assert!(false, "{e}"),
        }
    }
}
