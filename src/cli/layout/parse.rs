//! The flags' text into values: ids, units, instants, layouts and the planner's request. Each
//! error is one [`CliError::BadInput`] line that names the flag.

use leafid::layout_plan::{self, PlanRequest};
use leafid::snowflake::layout::{
    self, BitLayout, IdParseError, LayoutArgs, ResolveError, TimeUnit, UnitPolicy, parse_timestamp,
};

use super::args::{LayoutFlags, PlanArgs, Preset};
use crate::cli::CliError;

/// A [`CliError::BadInput`] with `message`.
pub(super) fn bad(message: String) -> CliError {
    CliError::BadInput(message)
}

/// Parses an id ([`layout::parse_id`]), naming `what` when the text is not one.
pub(super) fn parse_id(what: &str, text: &str) -> Result<u64, CliError> {
    let max = i64::MAX;
    layout::parse_id(text).map_err(|e| {
        let trimmed = text.trim();
        bad(match e {
            IdParseError::NotDecimal => {
                format!("{what} {text:?} is not a decimal integer (expected 0..={max})")
            }
            IdParseError::Negative => {
                format!("{what} {trimmed} is negative: ids are within 0..={max}")
            }
            IdParseError::TooLarge => format!(
                "{what} {trimmed} is larger than i64::MAX ({max}): ids are within 0..={max}"
            ),
        })
    })
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

/// An instant given to `flag` (`--from`, `--to`): RFC 3339 with an explicit offset, or unix
/// milliseconds ([`parse_timestamp`]).
pub(super) fn parse_instant(flag: &str, text: &str) -> Result<i64, CliError> {
    parse_timestamp(text).ok_or_else(|| {
        bad(format!(
            "{flag} {text:?} is neither RFC 3339 with an explicit offset (e.g. 2025-01-01T00:00:00+08:00) nor unix milliseconds"
        ))
    })
}

/// The layout the flags describe (`what` names it in messages), or `configured` when they
/// name none; the unit defaults to seconds ([`UnitPolicy::DefaultsToSeconds`]).
pub(super) fn resolve_layout(
    what: &str,
    flags: &LayoutFlags,
    configured: Option<BitLayout>,
) -> Result<BitLayout, CliError> {
    let prefix_value = flags
        .prefix_value
        .as_deref()
        .map(|text| {
            text.trim().parse::<u64>().map_err(|_| {
                bad(format!(
                    "{what}: prefix value {text:?} is not a non-negative integer"
                ))
            })
        })
        .transpose()?;
    let args = LayoutArgs {
        preset: flags.preset.map(Preset::into),
        bits: flags.layout.as_deref(),
        epoch: flags.epoch.as_deref(),
        unit: parse_unit(what, flags.unit.as_deref())?,
        prefix_value,
        otherwise: configured,
    };
    args.resolve(UnitPolicy::DefaultsToSeconds)
        .map_err(|e| match e {
            ResolveError::NoLayout => bad(format!(
                "no {what} given: use --layout BITS --epoch RFC3339 [--unit seconds|millis], or --preset uid-generator|twitter|js-safe"
            )),
            ResolveError::MissingEpoch => bad(format!(
                "{what}: an epoch is needed (RFC 3339 with an explicit offset)"
            )),
            other => bad(format!("{what}: {other}")),
        })
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
        clock_back_bits: args.clock_back_bits,
        regions: args.regions,
    })
}
