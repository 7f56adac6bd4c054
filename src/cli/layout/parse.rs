//! The flags' text into values: ids, units, instants, layouts and the planner's request. Each
//! error is one [`CliError::BadInput`] line that names the flag.

use leafid::layout_plan::{self, PlanRequest};
use leafid::snowflake::layout::{BitLayout, TimeUnit, parse_epoch, parse_timestamp};

use super::args::{LayoutFlags, PlanArgs};
use crate::cli::CliError;

/// A [`CliError::BadInput`] with `message`.
pub(super) fn bad(message: String) -> CliError {
    CliError::BadInput(message)
}

/// Parses a non-negative `i64` given as decimal text, naming `what` when it is not one.
pub(super) fn parse_id(what: &str, text: &str) -> Result<u64, CliError> {
    let trimmed = text.trim();
    let (negative, digits) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(format!(
            "{what} {text:?} is not a decimal integer (expected 0..={})",
            i64::MAX
        )));
    }
    let zero = digits.bytes().all(|b| b == b'0');
    if negative && !zero {
        return Err(bad(format!(
            "{what} {trimmed} is negative: ids are within 0..={}",
            i64::MAX
        )));
    }
    match digits.parse::<u64>() {
        Ok(n) if n <= i64::MAX as u64 => Ok(n),
        _ => Err(bad(format!(
            "{what} {trimmed} is larger than i64::MAX ({}): ids are within 0..={}",
            i64::MAX,
            i64::MAX
        ))),
    }
}

/// The unit `text` names, if any (`what` names the flag in messages).
fn parse_unit(what: &str, text: Option<&str>) -> Result<Option<TimeUnit>, CliError> {
    text.map(|t| t.parse().map_err(|e| bad(format!("{what}: {e}"))))
        .transpose()
}

/// `--now` as unix ms when given, else `now_ms`.
pub(super) fn parse_now(text: Option<&str>, now_ms: i64) -> Result<i64, CliError> {
    match text {
        None => Ok(now_ms),
        Some(t) => parse_timestamp(t).ok_or_else(|| {
            bad(format!(
                "--now {t:?} is not RFC 3339 with an explicit offset (e.g. 2025-04-16T00:00:00+08:00)"
            ))
        }),
    }
}

/// The layout the flags describe (`what` names it in messages), or `configured` when they
/// name none.
pub(super) fn resolve_layout(
    what: &str,
    flags: &LayoutFlags,
    configured: Option<BitLayout>,
) -> Result<BitLayout, CliError> {
    let base = match (flags.preset, &flags.layout) {
        (Some(preset), None) => preset.layout(),
        (Some(_), Some(_)) => {
            return Err(bad(format!(
                "{what}: give either a preset or bits with an epoch, not both"
            )));
        }
        (None, Some(bits)) => {
            let epoch = flags.epoch.as_deref().ok_or_else(|| {
                bad(format!(
                    "{what}: an epoch is needed (RFC 3339 with an explicit offset)"
                ))
            })?;
            let epoch_ms = parse_epoch(epoch).map_err(|e| bad(format!("{what}: {e}")))?;
            let unit = parse_unit(what, flags.unit.as_deref())?.unwrap_or(TimeUnit::Seconds);
            BitLayout::parse_bits(bits, unit, epoch_ms).map_err(|e| bad(format!("{what}: {e}")))?
        }
        (None, None) => configured.ok_or_else(|| {
            bad(format!(
                "no {what} given: use --layout BITS --epoch RFC3339 [--unit seconds|millis], or --preset uid-generator|twitter|js-safe"
            ))
        })?,
    };
    match &flags.prefix_value {
        None => Ok(base),
        Some(text) => {
            let value = text.trim().parse::<u64>().map_err(|_| {
                bad(format!(
                    "{what}: prefix value {text:?} is not a non-negative integer"
                ))
            })?;
            base.with_prefix_value(value)
                .map_err(|e| bad(format!("{what}: {e}")))
        }
    }
}

/// The planner's request from the flags.
pub(super) fn plan_request(args: &PlanArgs) -> Result<PlanRequest, CliError> {
    let legacy_flags = LayoutFlags {
        layout: args.legacy.clone(),
        epoch: args.legacy_epoch.clone(),
        unit: args.legacy_unit.clone(),
        prefix_value: args.legacy_prefix_value.clone(),
        preset: args.legacy_preset,
    };
    let legacy = resolve_layout("legacy layout", &legacy_flags, None)?;
    let max_legacy_id = args
        .max_legacy_id
        .as_deref()
        .map(|text| parse_id("--max-legacy-id", text).map(|id| id as i64))
        .transpose()?;
    Ok(PlanRequest {
        legacy: legacy.to_spec(true),
        max_legacy_id,
        cutover: args.cutover.clone(),
        margin_seconds: args
            .margin_seconds
            .unwrap_or(layout_plan::DEFAULT_MARGIN_SECONDS),
        worker_bits: args.worker_bits,
        seq_bits: args.seq_bits,
        workers: args.workers,
        ids_per_second: args.ids_per_second,
        ids_per_second_scope: args
            .per
            .as_deref()
            .map(|text| text.parse().map_err(|e| bad(format!("--per: {e}"))))
            .transpose()?,
        max_id_bits: args.max_id_bits,
        years: args.years,
        unit: parse_unit("--unit", args.unit.as_deref())?,
        epoch: args.epoch.clone(),
    })
}
