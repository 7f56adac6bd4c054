//! The search: which prefix width and epoch lift the new ids above the legacy maximum and leave
//! the most time; the JSON answer with its checks; the refusals.

use serde::{Deserialize, Serialize};

use super::{Needs, PlanError, PlanRequest};
use crate::snowflake::layout::{
    BitLayout, LayoutError, LayoutSpec, PAYLOAD_BITS, TimeUnit, format_unix_ms, parse_epoch,
};

/// Milliseconds in a mean Gregorian year, used only to print years.
const YEAR_MS: f64 = 365.2425 * 86_400_000.0;

/// The planner's answer, as JSON: `{"layout", "epoch", "first_id", "last_id", "exhausted_at",
/// "capacity", "checks"}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The new layout, without its epoch.
    pub layout: LayoutSpec,
    /// The new layout's epoch, RFC 3339 UTC.
    pub epoch: String,
    /// Smallest id the new layout can issue from now on (tick at now, worker 0, sequence 0).
    pub first_id: u64,
    /// Largest id the new layout can issue (last tick, largest worker id and sequence).
    pub last_id: u64,
    /// First instant the new layout cannot represent, RFC 3339 UTC.
    pub exhausted_at: String,
    /// What the new layout holds, beside what was asked for: the headroom.
    pub capacity: PlanCapacity,
    /// The guarantees, each verified by composing ids with the new layout.
    pub checks: Vec<PlanCheck>,
}

/// What a plan's layout holds, in users' terms.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanCapacity {
    /// The requested peak worker count, when `workers` was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u64>,
    /// The requested peak ids per second of each worker (a cluster rate divided among the
    /// workers, rounded up), when `ids_per_second` was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids_per_second: Option<u64>,
    /// Worker ids the layout has: `2^worker_bits`.
    pub max_workers: u64,
    /// Ids per second each worker can issue: `2^seq_bits` per tick, sustained. The direct
    /// generator starts a tick it enters from an older one at a random sequence below
    /// `2^min(8, seq_bits - 4)` (ids sharded by `id % 2^k` spread), so the first tick of a
    /// burst holds at least `2^seq_bits - 2^min(8, seq_bits - 4) + 1` ids (over 15/16 of it;
    /// `snowflake::direct::min_ids_in_a_tick`); later ticks of the burst hold all `2^seq_bits`.
    pub max_ids_per_second_per_worker: u64,
    /// Ids per second of the cluster with every worker id in use (saturates at `u64::MAX`).
    pub max_ids_per_second_cluster: u64,
    /// Every id is at most `2^max_id_bits - 1`.
    pub max_id_bits: u8,
    /// The top bits of the worker id that hold the region (`snowflake.worker.region_bits`);
    /// 0 without regions.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub region_bits: u8,
}

fn is_zero(bits: &u8) -> bool {
    *bits == 0
}

impl PlanCapacity {
    fn of(layout: &BitLayout, needs: &Needs) -> Self {
        let per_worker = rate_of(layout.seq_bits(), layout.unit());
        let max_workers = layout.max_worker_id() + 1;
        PlanCapacity {
            workers: needs.workers,
            ids_per_second: needs.ids_per_second,
            max_workers,
            max_ids_per_second_per_worker: saturate(per_worker),
            max_ids_per_second_cluster: saturate(per_worker * u128::from(max_workers)),
            max_id_bits: needs.max_id_bits,
            region_bits: needs.region_bits,
        }
    }
}

/// Ids per second of one worker with `seq_bits` sequence bits.
pub(super) fn rate_of(seq_bits: u8, unit: TimeUnit) -> u128 {
    (1u128 << seq_bits) * u128::from(1000 / unit.tick_ms().unsigned_abs())
}

fn saturate(n: u128) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// `1234567` as `1,234,567`.
pub(super) fn grouped(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() * 4 / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One verified guarantee of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanCheck {
    /// Stable snake_case name, e.g. `first_id_above_max_legacy_id`.
    pub name: String,
    /// Whether it holds (always true in a returned plan).
    pub ok: bool,
    /// The numbers behind it, for people.
    pub detail: String,
}

impl Plan {
    /// The new layout with its epoch, ready for a generator.
    pub fn bit_layout(&self) -> Result<BitLayout, LayoutError> {
        self.layout.build(Some(parse_epoch(&self.epoch)?))
    }
}

/// Plans a migration for `request` at the instant `now_unix_ms`.
pub fn plan(request: &PlanRequest, now_unix_ms: i64) -> Result<Plan, PlanError> {
    let needs = request.needs(now_unix_ms)?;
    let layout = plan_needs(&needs)?;
    answer(&layout, &needs)
}

/// [`plan`] at the current time of the system clock.
pub fn plan_now(request: &PlanRequest) -> Result<Plan, PlanError> {
    plan(request, chrono::Utc::now().timestamp_millis())
}

/// The layout that lifts every id from `needs.now_ms` on above `needs.max_legacy_id` and runs
/// out last; refused when it does not last through `needs.horizon_ms`.
///
/// A chosen epoch is first tried on a tick boundary of unix time (a readable epoch, at most one
/// tick of life less); only if no such plan lasts is it placed to the millisecond.
pub fn plan_needs(needs: &Needs) -> Result<BitLayout, PlanError> {
    match search(needs) {
        Ok(layout) => Ok(layout),
        Err(None) => Err(refuse_lift(needs)),
        Err(Some(best)) => Err(refuse_years(needs, &best)),
    }
}

/// The plan, or the lifting layout that lasts longest (none when no layout lifts).
fn search(needs: &Needs) -> Result<BitLayout, Option<BitLayout>> {
    let best = |aligned: bool| {
        (0..free_bits(needs))
            .filter_map(|prefix_bits| candidate(needs, prefix_bits, aligned))
            // Equal ends: the wider prefix, whose epoch is more recent.
            .max_by_key(|layout| (life_end(layout), layout.prefix_bits()))
    };
    if let Some(layout) = best(true).filter(|l| lasts(l, needs.horizon_ms)) {
        return Ok(layout);
    }
    match best(false) {
        Some(layout) if lasts(&layout, needs.horizon_ms) => Ok(layout),
        other => Err(other),
    }
}

/// `needs` with `bits` worker and sequence bits together: the sequence bits kept where they
/// fit (so the worker bits give way first), at least 1 bit each.
pub(super) fn with_bits(needs: &Needs, bits: u8) -> Needs {
    let seq_bits = needs.seq_bits.min(bits - 1);
    Needs {
        worker_bits: bits - seq_bits,
        seq_bits,
        ..needs.clone()
    }
}

/// The most worker + sequence bits, fewer than requested, with which a plan exists. Whether a
/// plan exists depends only on the sum (the search never looks at how it is split), so the
/// request is exactly `worker_bits + seq_bits - widest_feasible` bits short.
pub(super) fn widest_feasible(needs: &Needs) -> Option<u8> {
    let bits = needs.worker_bits + needs.seq_bits;
    (2..bits)
        .rev()
        .find(|&fewer| search(&with_bits(needs, fewer)).is_ok())
}

/// `p + t`: what the worker and sequence fields leave below `max_id_bits`.
fn free_bits(needs: &Needs) -> u8 {
    needs
        .max_id_bits
        .saturating_sub(needs.worker_bits + needs.seq_bits)
}

/// The zero bits above `max_id_bits`, the top of every prefix.
fn zero_bits(needs: &Needs) -> u8 {
    PAYLOAD_BITS - needs.max_id_bits
}

/// `2^bits - 1`.
fn all_ones(bits: u8) -> u64 {
    (1u64 << bits) - 1
}

/// Index of the first `2^(w+s)`-id block wholly above the legacy maximum.
fn min_slot(needs: &Needs) -> u64 {
    (needs.max_legacy_id >> (needs.worker_bits + needs.seq_bits)) + 1
}

/// The best layout with `prefix_bits` ones below `max_id_bits` (and zeros above), if any lifts:
/// with the fixed epoch, or with the latest epoch that lifts (on a tick boundary when
/// `aligned`).
fn candidate(needs: &Needs, prefix_bits: u8, aligned: bool) -> Option<BitLayout> {
    let time_bits = free_bits(needs) - prefix_bits;
    let value = all_ones(prefix_bits);
    let epoch_ms = match needs.epoch_ms {
        Some(epoch_ms) => epoch_ms,
        None => latest_lifting_epoch(needs, value << time_bits, aligned)?,
    };
    let layout = BitLayout::new(
        zero_bits(needs) + prefix_bits,
        value,
        time_bits,
        needs.worker_bits,
        needs.seq_bits,
        needs.unit,
        epoch_ms,
    )
    .and_then(|l| l.with_clock_back_bits(needs.clock_back_bits))
    .ok()?;
    lifts(&layout, needs).then_some(layout)
}

/// The latest epoch (not after now, not before 1970) at which a layout whose tick 0 is in block
/// `base_slot` is, at now, in the first block above the legacy maximum. Any later epoch fails
/// to lift, any earlier one runs out sooner. `aligned` rounds it down to a tick of unix time.
fn latest_lifting_epoch(needs: &Needs, base_slot: u64, aligned: bool) -> Option<i64> {
    let ticks_back = min_slot(needs).saturating_sub(base_slot);
    let tick = needs.unit.tick_ms();
    let start = if aligned {
        needs.now_ms - needs.now_ms.rem_euclid(tick)
    } else {
        needs.now_ms
    };
    let epoch = i128::from(start) - i128::from(ticks_back) * i128::from(tick);
    i64::try_from(epoch).ok().filter(|epoch| *epoch >= 0)
}

/// Unix ms at which the layout runs out, without saturation (for ranking).
fn life_end(layout: &BitLayout) -> i128 {
    i128::from(layout.epoch_ms())
        + (i128::from(layout.max_time_delta()) + 1) * i128::from(layout.unit().tick_ms())
}

/// Whether every id the layout issues from `needs.now_ms` on is above the legacy maximum.
pub(super) fn lifts(layout: &BitLayout, needs: &Needs) -> bool {
    layout
        .smallest_id_from(needs.now_ms)
        .is_ok_and(|id| id > needs.max_legacy_id)
}

/// Whether the layout can still issue its largest worker id and sequence at `at_ms`.
pub(super) fn lasts(layout: &BitLayout, at_ms: i64) -> bool {
    layout
        .delta_at(at_ms)
        .and_then(|delta| layout.compose(delta, layout.max_worker_id(), layout.max_sequence()))
        .is_ok()
}

fn years_between(from_ms: i64, to_ms: i64) -> f64 {
    (i128::from(to_ms) - i128::from(from_ms)) as f64 / YEAR_MS
}

/// The answer for a chosen layout, each guarantee verified again by composing ids.
fn answer(layout: &BitLayout, needs: &Needs) -> Result<Plan, PlanError> {
    let max = needs.max_legacy_id;
    let first = layout.smallest_id_from(needs.now_ms).ok();
    let last = layout
        .compose(
            layout.max_time_delta(),
            layout.max_worker_id(),
            layout.max_sequence(),
        )
        .ok();
    let exhausted_at = format_unix_ms(layout.exhausted_at_unix_ms());
    let check = |name: &str, ok: bool, detail: String| PlanCheck {
        name: name.to_owned(),
        ok,
        detail,
    };
    let checks = vec![
        check(
            "first_id_above_max_legacy_id",
            first.is_some_and(|id| id > max),
            format!(
                "first_id {} > max_legacy_id {max} ({})",
                first.map_or_else(|| "none".to_owned(), |id| id.to_string()),
                needs.max_source
            ),
        ),
        check(
            "last_id_within_i64",
            last.is_some_and(|id| id <= i64::MAX as u64),
            format!(
                "last_id {} <= i64::MAX {}",
                last.map_or_else(|| "none".to_owned(), |id| id.to_string()),
                i64::MAX
            ),
        ),
        check(
            "years_of_life",
            lasts(layout, needs.horizon_ms),
            format!(
                "issues every worker id and sequence through {} ({} years from now); runs out at {exhausted_at}, {:.2} years from now",
                format_unix_ms(needs.horizon_ms),
                needs.years,
                years_between(needs.now_ms, layout.exhausted_at_unix_ms())
            ),
        ),
        check(
            "epoch_not_in_future",
            layout.epoch_ms() <= needs.now_ms,
            format!(
                "epoch {} <= now {}",
                format_unix_ms(layout.epoch_ms()),
                format_unix_ms(needs.now_ms)
            ),
        ),
    ];
    let capacity = PlanCapacity::of(layout, needs);
    let mut checks = checks;
    if needs.max_id_bits < PAYLOAD_BITS {
        checks.insert(
            2,
            check(
                "last_id_within_max_id_bits",
                last.is_some_and(|id| id <= all_ones(needs.max_id_bits)),
                format!(
                    "last_id {} <= 2^{} - 1 = {}",
                    last.map_or_else(|| "none".to_owned(), |id| id.to_string()),
                    needs.max_id_bits,
                    all_ones(needs.max_id_bits)
                ),
            ),
        );
    }
    if let Some(workers) = needs.workers {
        checks.push(check(
            "holds_workers",
            capacity.max_workers >= workers,
            format!(
                "{} worker bits: {} worker ids >= {} workers",
                layout.worker_bits(),
                grouped(capacity.max_workers.into()),
                grouped(workers.into())
            ),
        ));
    }
    if let Some(rate) = needs.ids_per_second {
        checks.push(check(
            "holds_ids_per_second",
            capacity.max_ids_per_second_per_worker >= rate,
            format!(
                "{} sequence bits: {} ids/s per worker >= {} ids/s per worker; {} ids/s with all {} worker ids",
                layout.seq_bits(),
                grouped(capacity.max_ids_per_second_per_worker.into()),
                grouped(rate.into()),
                grouped(capacity.max_ids_per_second_cluster.into()),
                grouped(capacity.max_workers.into())
            ),
        ));
    }
    if let Some(failed) = checks.iter().find(|c| !c.ok) {
        // Unreachable when the search is right; refusing beats answering with a broken plan.
        return Err(PlanError::impossible(
            &failed.name,
            format!(
                "plan failed its own check {}: {}",
                failed.name, failed.detail
            ),
        ));
    }
    Ok(Plan {
        layout: layout.to_spec(false),
        epoch: format_unix_ms(layout.epoch_ms()),
        first_id: first.unwrap_or_default(),
        last_id: last.unwrap_or_default(),
        exhausted_at,
        capacity,
        checks,
    })
}

/// No prefix width lifts: say whether there is no room at all or the epoch is in the way.
fn refuse_lift(needs: &Needs) -> PlanError {
    let (max, w, s) = (needs.max_legacy_id, needs.worker_bits, needs.seq_bits);
    let now = format_unix_ms(needs.now_ms);
    let bits = needs.max_id_bits;
    let top = all_ones(bits);
    if bits < PAYLOAD_BITS && max >= top {
        // No bit split helps: every id of at most `bits` bits is at most the maximum.
        let least = 64 - (max + 1).leading_zeros();
        return PlanError::impossible(
            "max_id_bits",
            format!(
                "max_legacy_id {max} ({}) is not below 2^{bits} - 1 = {top}, the largest id max_id_bits {bits} allows: no id within {bits} bits is above it; ids above it need max_id_bits {least} or more",
                needs.max_source
            ),
        );
    }
    let ceiling = if bits < PAYLOAD_BITS {
        format!("2^{bits} - 1 (max_id_bits {bits})")
    } else {
        "i64::MAX".to_owned()
    };
    let message = if min_slot(needs) > all_ones(free_bits(needs)) {
        format!(
            "max_legacy_id {max} ({}) leaves no room above it for {w} worker bits and {s} sequence bits: every tick takes an aligned block of 2^{} ids and none fits between it and {ceiling}",
            needs.max_source,
            w + s
        )
    } else {
        match needs.epoch_ms {
            Some(epoch_ms) => {
                let message = format!(
                    "with epoch {} no prefix width lifts the ids issued from now ({now}) above max_legacy_id {max} while its time field still covers now; leave out \"epoch\" to let the planner choose one",
                    format_unix_ms(epoch_ms)
                );
                return PlanError::impossible("epoch", message + &shortfall(needs));
            }
            None => format!(
                "lifting the ids issued from now ({now}) above max_legacy_id {max} with {w} worker bits and {s} sequence bits needs an epoch before 1970-01-01"
            ),
        }
    };
    PlanError::impossible("max_legacy_id", message + &shortfall(needs))
}

/// The layout that lasts longest still runs out before the horizon.
fn refuse_years(needs: &Needs, best: &BitLayout) -> PlanError {
    let unit = needs.unit;
    let tick = unit.tick_ms();
    let aligned_now = needs.now_ms - needs.now_ms.rem_euclid(tick);
    let needed_ticks = (needs.horizon_ms - aligned_now) / tick + 1;
    let needed_bits = 64 - (needed_ticks - 1).leading_zeros();
    let left_ticks = best.max_time_delta() + 1 - best.delta_at(needs.now_ms).unwrap_or(0);
    let message = format!(
        "years {} needs ids through {}, {needed_ticks} {unit} from now ({needed_bits} time bits), but with {} worker bits and {} sequence bits only {left_ticks} {unit} remain above max_legacy_id {} ({}): the best layout, {best}, runs out at {} ({:.2} years from now)",
        needs.years,
        format_unix_ms(needs.horizon_ms),
        needs.worker_bits,
        needs.seq_bits,
        needs.max_legacy_id,
        needs.max_source,
        format_unix_ms(best.exhausted_at_unix_ms()),
        years_between(needs.now_ms, best.exhausted_at_unix_ms())
    );
    PlanError::impossible("years", message + &shortfall(needs))
}

/// How many worker + sequence bits too many the request asks for, and what fits instead in
/// users' terms: `"; 9 worker bits (300 workers) + 16 sequence bits (50,000 ids/s per worker) =
/// 25 bits, 3 bits short: at most 22 leave 20 years; with 20 years, at most 64 workers at
/// 50,000 ids/s each, or 300 workers at 8,192 ids/s each"`.
fn shortfall(needs: &Needs) -> String {
    let (w, s) = (needs.worker_bits, needs.seq_bits);
    let sum = w + s;
    let asked = format!(
        "{w} worker bits{} + {s} sequence bits{} = {sum} bits",
        needs
            .workers
            .map_or_else(String::new, |n| format!(" ({} workers)", grouped(n.into()))),
        needs.ids_per_second.map_or_else(String::new, |n| format!(
            " ({} ids/s per worker)",
            grouped(n.into())
        ))
    );
    let Some(fits) = widest_feasible(needs) else {
        return if sum > 2 {
            format!(
                "; {asked}, and no plan exists with fewer either, down to 1 worker bit and 1 sequence bit"
            )
        } else {
            String::new()
        };
    };
    let years = needs.years;
    let workers = needs.workers.map_or(1u128 << w, u128::from);
    let rate = needs
        .ids_per_second
        .map_or_else(|| rate_of(s, needs.unit), u128::from);
    let mut options = Vec::new();
    if fits > s {
        options.push(format!(
            "at most {} workers at {} ids/s each",
            grouped(1u128 << (fits - s)),
            grouped(rate)
        ));
    }
    if fits > w {
        options.push(format!(
            "{} workers at {} ids/s each",
            grouped(workers),
            grouped(rate_of(fits - w, needs.unit))
        ));
    }
    if options.is_empty() {
        let few = fits / 2;
        options.push(format!(
            "at most {} workers at {} ids/s each",
            grouped(1u128 << few),
            grouped(rate_of(fits - few, needs.unit))
        ));
    }
    format!(
        "; {asked}, {} bits short: at most {fits} leave {years} years; with {years} years, {}",
        sum - fits,
        options.join(", or ")
    )
}
