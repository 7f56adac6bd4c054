//! The planner's request (the body of `POST /api/v1/layouts/plan`) and its validation.

use chrono::{DateTime, Months};
use serde::{Deserialize, Serialize};

use super::PlanError;
use crate::snowflake::layout::{
    BitLayout, LayoutSpec, MAX_EPOCH_MS, PAYLOAD_BITS, TimeUnit, format_unix_ms, parse_epoch,
    parse_timestamp,
};

/// Default margin added to a cut-over: uid-generator's `CachedUidGenerator` hands out ids of
/// future seconds ahead of time, so ids of up to a day after the cut-over may exist.
pub const DEFAULT_MARGIN_SECONDS: u64 = 86_400;
/// Largest `years` accepted: keeps the horizon a representable calendar date.
pub const MAX_YEARS: u32 = 1000;

fn default_margin() -> u64 {
    DEFAULT_MARGIN_SECONDS
}

/// What a migration needs, as JSON:
/// `{"legacy": <layout with epoch>, "max_legacy_id": N, "worker_bits": W, "seq_bits": S,
/// "years": Y}`, with `"cutover": "<RFC 3339>"` instead of `max_legacy_id` if wished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanRequest {
    /// The layout being replaced, with its epoch.
    pub legacy: LayoutSpec,
    /// The highest id the legacy layout issued (observed). Exactly one of this and `cutover`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub max_legacy_id: Option<i64>,
    /// When the legacy generators stop: the legacy maximum is then the largest id the legacy
    /// layout could have issued by `cutover + margin_seconds` (clamped at its largest id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutover: Option<String>,
    /// Seconds added to `cutover` for ids handed out ahead of time; only used with `cutover`.
    #[serde(default = "default_margin")]
    pub margin_seconds: u64,
    /// Worker bits of the new layout, kept as requested.
    #[schema(minimum = 1, maximum = 61)]
    pub worker_bits: u8,
    /// Sequence bits of the new layout, kept as requested.
    #[schema(minimum = 1, maximum = 61)]
    pub seq_bits: u8,
    /// Calendar years from now through which the new layout must still issue ids.
    #[schema(maximum = 1000)]
    pub years: u32,
    /// Time unit of the new layout; the legacy unit when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<TimeUnit>,
    /// Epoch of the new layout (not in the future); the planner chooses it when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
}

/// A validated request: everything the search needs, in numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needs {
    /// Every new id must be greater than this (`<= i64::MAX`).
    pub max_legacy_id: u64,
    /// Where `max_legacy_id` came from, for messages.
    pub max_source: String,
    /// Worker bits of the new layout.
    pub worker_bits: u8,
    /// Sequence bits of the new layout.
    pub seq_bits: u8,
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
        let (w, s) = (self.worker_bits, self.seq_bits);
        if w == 0 || s == 0 || u16::from(w) + u16::from(s) >= u16::from(PAYLOAD_BITS) {
            return Err(invalid(format!(
                "worker_bits {w} and seq_bits {s} must each be at least 1 and together at most 62, leaving the time field at least 1 bit"
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
            seq_bits: s,
            unit: self.unit.unwrap_or(legacy.unit()),
            epoch_ms,
            now_ms: now_unix_ms,
            horizon_ms,
            years: self.years,
        })
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
