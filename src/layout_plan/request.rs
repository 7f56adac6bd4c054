//! The planner's request (what `POST /api/v1/layouts/plan` and `leafid layout plan` ask) and its
//! validation.

use chrono::{DateTime, Months};

use super::PlanError;
use crate::snowflake::layout::{
    BitLayout, LayoutSpec, MAX_CLOCK_BACK_BITS, MAX_EPOCH_MS, PAYLOAD_BITS, TimeUnit,
    format_unix_ms, parse_epoch, parse_timestamp,
};

/// Default margin added to a cut-over: uid-generator's `CachedUidGenerator` hands out ids of
/// future seconds ahead of time, so ids of up to a day after the cut-over may exist.
pub const DEFAULT_MARGIN_SECONDS: u64 = 86_400;
/// Largest `years` accepted: keeps the horizon a representable calendar date.
pub const MAX_YEARS: u32 = 1000;

/// Largest `max_id_bits`: ids are positive `i64`s.
pub const MAX_ID_BITS: u8 = PAYLOAD_BITS;

/// Whose rate `ids_per_second` is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateScope {
    /// Each worker's peak (the default).
    #[default]
    Worker,
    /// The whole cluster's peak, shared by `workers` workers (divided, rounded up).
    Cluster,
}

impl std::str::FromStr for RateScope {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "worker" => Ok(RateScope::Worker),
            "cluster" => Ok(RateScope::Cluster),
            other => Err(format!(
                "rate scope {other:?} is neither \"worker\" nor \"cluster\""
            )),
        }
    }
}

/// What a migration needs, as JSON:
/// `{"legacy": <layout with epoch>, "max_legacy_id": N, "worker_bits": W, "seq_bits": S,
/// "years": Y}`, with `"cutover": "<RFC 3339>"` instead of `max_legacy_id` if wished.
///
/// Each dimension is given in bits, in capacity, or both: `workers` (peak worker count) for
/// `worker_bits`, `ids_per_second` (with `ids_per_second_scope`) for `seq_bits`. From capacity
/// the planner takes the fewest bits that hold it; given both, the bits are kept and must hold
/// the capacity (else `invalid_plan_request`).
///
/// Its JSON form is `http::layouts::PlanRequestBody`, which `POST /api/v1/layouts/plan` reads
/// and converts; the CLI builds it from flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanRequest {
    /// The layout being replaced, with its epoch.
    pub legacy: LayoutSpec,
    /// The highest id the legacy layout issued (observed). Exactly one of this and `cutover`.
    pub max_legacy_id: Option<i64>,
    /// When the legacy generators stop: the legacy maximum is then the largest id the legacy
    /// layout could have issued by `cutover + margin_seconds` (clamped at its largest id).
    pub cutover: Option<String>,
    /// Seconds added to `cutover` for ids handed out ahead of time; only used with `cutover`.
    pub margin_seconds: u64,
    /// Worker bits of the new layout, kept as requested. Give this, `workers`, or both.
    pub worker_bits: Option<u8>,
    /// Sequence bits of the new layout, kept as requested. Give this, `ids_per_second`, or both.
    pub seq_bits: Option<u8>,
    /// Peak number of workers (generator instances) at once: worker bits
    /// `ceil(log2(workers))`, at least 1.
    pub workers: Option<u64>,
    /// Peak ids per second, of each worker or of the cluster (`ids_per_second_scope`): sequence
    /// bits `ceil(log2(ids per tick))`, at least 1, with `ceil(ids_per_second / 1000)` ids per
    /// tick in `millis`.
    pub ids_per_second: Option<u64>,
    /// `worker` (the default): `ids_per_second` is each worker's peak; `cluster`: it is the
    /// cluster's, divided among `workers` (rounded up), which must then be given.
    pub ids_per_second_scope: Option<RateScope>,
    /// Every id of the plan is at most `2^max_id_bits - 1` (53 for ids JavaScript numbers hold
    /// exactly); the bits above are a prefix of zeros. Default 63.
    pub max_id_bits: Option<u8>,
    /// Calendar years from now through which the new layout must still issue ids.
    pub years: u32,
    /// Time unit of the new layout; the legacy unit when absent.
    pub unit: Option<TimeUnit>,
    /// Epoch of the new layout (not in the future); the planner chooses it when absent.
    pub epoch: Option<String>,
    /// Clock-back bits of the new layout (`snowflake.clock_back_bits`, at most 3), added to the
    /// worker field above the worker bits: the planned layout reads `T/cB+W/S`.
    pub clock_back_bits: Option<u8>,
    /// Regions (lanes, at most 8): `ceil(log2(regions))` region bits are added to the worker
    /// field above the worker bits, which then count each region's workers
    /// (`snowflake.worker.region_bits`, `docs/deploy.md` section 12).
    pub regions: Option<u64>,
}

/// A validated request: everything the search needs, in numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needs {
    /// Every new id must be greater than this (`<= i64::MAX`).
    pub max_legacy_id: u64,
    /// Where `max_legacy_id` came from, for messages.
    pub max_source: String,
    /// Worker field width of the new layout: the worker bits plus `clock_back_bits`.
    pub worker_bits: u8,
    /// Clock-back bits at the top of the worker field (0: none).
    pub clock_back_bits: u8,
    /// Region bits below the clock-back bits (0: no regions): `snowflake.worker.region_bits`.
    pub region_bits: u8,
    /// Sequence bits of the new layout.
    pub seq_bits: u8,
    /// The requested peak worker count, if given (`2^worker_bits` holds it).
    pub workers: Option<u64>,
    /// The requested peak ids per second of each worker, if given (after dividing a cluster
    /// rate among the workers); `2^seq_bits` ids per tick hold it.
    pub ids_per_second: Option<u64>,
    /// Every id of the plan must be `< 2^max_id_bits` (`3..=63`).
    pub max_id_bits: u8,
    /// Time unit of the new layout.
    pub unit: TimeUnit,
    /// A fixed epoch for the new layout, or `None` to let the planner choose it.
    pub epoch_ms: Option<i64>,
    /// The planning instant: ids are issued from here on.
    pub now_ms: i64,
    /// The new layout must still issue ids (any worker, any sequence) at this instant.
    pub horizon_ms: i64,
    /// The years behind `horizon_ms`, for messages.
    pub years: u32,
}

fn invalid(message: String) -> PlanError {
    PlanError::InvalidInput(message)
}

impl PlanRequest {
    /// Checks the request and turns it into [`Needs`] at the instant `now_unix_ms`.
    pub fn needs(&self, now_unix_ms: i64) -> Result<Needs, PlanError> {
        if !(0..=MAX_EPOCH_MS).contains(&now_unix_ms) {
            return Err(invalid(format!(
                "now ({now_unix_ms} unix ms) must be between 1970 and 9999"
            )));
        }
        let legacy = self
            .legacy
            .build(None)
            .map_err(|e| invalid(format!("legacy: {e}")))?;
        let unit = self.unit.unwrap_or(legacy.unit());
        let (w, s, ids_per_second) = self.bits(unit)?;
        let clock_back_bits = self.clock_back_bits.unwrap_or(0);
        if clock_back_bits > MAX_CLOCK_BACK_BITS {
            return Err(invalid(format!(
                "clock_back_bits {clock_back_bits} is more than {MAX_CLOCK_BACK_BITS}"
            )));
        }
        let region_bits = match self.regions {
            None | Some(1) => 0,
            Some(n @ (0 | 9..)) => {
                return Err(invalid(format!(
                    "regions {n}: 1 to 8 (a region is a lane, lanes.slot 0 to 7)"
                )));
            }
            Some(n) => (64 - (n - 1).leading_zeros()) as u8,
        };
        let w = w
            .saturating_add(region_bits)
            .saturating_add(clock_back_bits);
        if w == 0 || s == 0 || u16::from(w) + u16::from(s) >= u16::from(PAYLOAD_BITS) {
            return Err(invalid(format!(
                "worker_bits {w} and seq_bits {s} must each be at least 1 and together at most 62, leaving the time field at least 1 bit"
            )));
        }
        let max_id_bits = self.max_id_bits.unwrap_or(MAX_ID_BITS);
        if !(3..=MAX_ID_BITS).contains(&max_id_bits) {
            return Err(invalid(format!(
                "max_id_bits {max_id_bits} is not within 3..=63 (63: any positive i64; 53: ids JavaScript numbers hold exactly)"
            )));
        }
        if self.years > MAX_YEARS {
            return Err(invalid(format!(
                "years {} is more than {MAX_YEARS}",
                self.years
            )));
        }
        let epoch_ms = match &self.epoch {
            None => None,
            Some(text) => {
                let ms = parse_epoch(text).map_err(|e| invalid(format!("epoch: {e}")))?;
                if ms > now_unix_ms {
                    return Err(invalid(format!(
                        "epoch {} is after now ({}): an epoch must not be in the future",
                        format_unix_ms(ms),
                        format_unix_ms(now_unix_ms)
                    )));
                }
                Some(ms)
            }
        };
        let (max_legacy_id, max_source) = self.legacy_max(&legacy)?;
        let horizon_ms = DateTime::from_timestamp_millis(now_unix_ms)
            .and_then(|t| t.checked_add_months(Months::new(12 * self.years)))
            .map(|t| t.timestamp_millis())
            .ok_or_else(|| invalid(format!("now + {} years is not a date", self.years)))?;
        Ok(Needs {
            max_legacy_id,
            max_source,
            worker_bits: w,
            clock_back_bits,
            region_bits,
            seq_bits: s,
            workers: self.workers,
            ids_per_second,
            max_id_bits,
            unit,
            epoch_ms,
            now_ms: now_unix_ms,
            horizon_ms,
            years: self.years,
        })
    }

    /// Worker and sequence bits from bits or capacity, and each worker's peak rate if given.
    fn bits(&self, unit: TimeUnit) -> Result<(u8, u8, Option<u64>), PlanError> {
        let workers = match self.workers {
            Some(0) => return Err(invalid("workers must be at least 1".to_owned())),
            other => other,
        };
        let scope = self.ids_per_second_scope.unwrap_or_default();
        let per_worker = match (self.ids_per_second, scope, workers) {
            (None, _, _) if self.ids_per_second_scope.is_some() => {
                return Err(invalid(
                    "ids_per_second_scope is given without ids_per_second".to_owned(),
                ));
            }
            (None, _, _) => None,
            (Some(0), _, _) => {
                return Err(invalid("ids_per_second must be at least 1".to_owned()));
            }
            (Some(rate), RateScope::Worker, _) => Some(rate),
            (Some(rate), RateScope::Cluster, Some(n)) => Some(rate.div_ceil(n)),
            (Some(rate), RateScope::Cluster, None) => {
                return Err(invalid(format!(
                    "ids_per_second {rate} cluster-wide needs workers (the peak worker count) to divide it among"
                )));
            }
        };
        let worker_bits = pick_bits(
            "worker_bits",
            self.worker_bits,
            workers.map(|n| (n, format!("workers {n}"))),
            "give worker_bits or workers (the peak number of workers at once)",
        )?;
        let seq_bits = pick_bits(
            "seq_bits",
            self.seq_bits,
            per_worker.map(|rate| {
                let per_tick = match unit {
                    TimeUnit::Seconds => rate,
                    TimeUnit::Millis => rate.div_ceil(1000),
                };
                let what = match scope {
                    RateScope::Worker => format!("ids_per_second {rate}"),
                    RateScope::Cluster => format!(
                        "ids_per_second {} cluster-wide / {} workers = {rate}",
                        self.ids_per_second.unwrap_or_default(),
                        workers.unwrap_or_default()
                    ),
                };
                (
                    per_tick,
                    format!("{what} ({per_tick} ids per {})", tick_name(unit)),
                )
            }),
            "give seq_bits or ids_per_second (the peak ids per second of each worker, or of the cluster with ids_per_second_scope \"cluster\")",
        )?;
        Ok((worker_bits, seq_bits, per_worker))
    }

    /// The legacy maximum and a few words on where it came from.
    fn legacy_max(&self, legacy: &BitLayout) -> Result<(u64, String), PlanError> {
        match (self.max_legacy_id, &self.cutover) {
            (Some(id), None) => {
                let id = u64::try_from(id).map_err(|_| {
                    invalid(format!(
                        "max_legacy_id {id} is negative: give the largest non-negative legacy id"
                    ))
                })?;
                Ok((id, "observed".to_owned()))
            }
            (None, Some(text)) => {
                let cutover = parse_timestamp(text).ok_or_else(|| {
                    invalid(format!(
                        "cutover {text:?} is not RFC 3339 with an explicit offset"
                    ))
                })?;
                let margin_ms = i64::try_from(self.margin_seconds)
                    .unwrap_or(i64::MAX)
                    .saturating_mul(1000);
                let until = cutover.saturating_add(margin_ms);
                let max = match legacy.delta_at(until) {
                    Err(_) => {
                        return Err(invalid(format!(
                            "cutover {} + {} s is before the legacy epoch {}",
                            format_unix_ms(cutover),
                            self.margin_seconds,
                            format_unix_ms(legacy.epoch_ms())
                        )));
                    }
                    // Past the legacy time field: clamp at the largest id it can express.
                    Ok(delta) if delta > legacy.max_time_delta() => legacy.largest_id(),
                    Ok(delta) => legacy
                        .compose(delta, legacy.max_worker_id(), legacy.max_sequence())
                        .map_err(|e| invalid(format!("legacy: {e}")))?,
                };
                let source = format!(
                    "largest legacy id possible by cutover {} + {} s",
                    format_unix_ms(cutover),
                    self.margin_seconds
                );
                Ok((max, source))
            }
            (Some(_), Some(_)) => Err(invalid(
                "give either max_legacy_id or cutover, not both".to_owned(),
            )),
            (None, None) => Err(invalid(
                "give max_legacy_id (the highest legacy id observed) or cutover".to_owned(),
            )),
        }
    }
}

/// `ceil(log2(n))`, at least 1: the fewest bits whose `2^bits` values hold `n`.
pub fn bits_for(n: u64) -> u8 {
    match n {
        0..=2 => 1,
        n => (64 - (n - 1).leading_zeros()) as u8,
    }
}

/// The bits of one dimension: as given, derived from a count (`need`: the count and how to name
/// it), or given and checked against the count.
fn pick_bits(
    name: &str,
    given: Option<u8>,
    need: Option<(u64, String)>,
    missing: &str,
) -> Result<u8, PlanError> {
    match (given, need) {
        (None, None) => Err(invalid(missing.to_owned())),
        (Some(bits), None) => Ok(bits),
        (None, Some((count, _))) => Ok(bits_for(count)),
        (Some(bits), Some((count, what))) => {
            let holds = 1u128 << bits.min(64);
            if holds < u128::from(count) {
                return Err(invalid(format!(
                    "{name} {bits} holds {holds}, fewer than {what}: give at least {} {name}, or leave {name} out to derive it",
                    bits_for(count)
                )));
            }
            Ok(bits)
        }
    }
}

/// One tick, in words: `second` or `ms`.
pub(super) fn tick_name(unit: TimeUnit) -> &'static str {
    match unit {
        TimeUnit::Seconds => "second",
        TimeUnit::Millis => "ms",
    }
}
