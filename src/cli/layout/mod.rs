//! `leafid layout {decode, bounds, plan, check}`: the flags, and the commands as functions that write to
//! any [`Write`] so tests can read what they print.
//!
//! Layouts are written as on the server: `T/W/S` or `P+T/W/S` (`28/22/13`, `7+30/13/13`) with
//! an epoch (RFC 3339 with an explicit offset, or unix milliseconds) and a unit (`seconds`, the
//! default, or `millis`); `--preset uid-generator|twitter|js-safe` stands for all three. The text is
//! parsed here rather than by clap so that a bad value gets one line naming it, not a usage page.
//!
//! `check` takes its layout and floor from the flags or, when they are left out, from
//! [`Configured`]: the slot for what `--config` will supply once the server's configuration has
//! snowflake keys. `bounds` takes its layout the same way (the range is always given).
//!
//! The parts: `args` (the clap flags), `parse` (their text into layouts, ids and the planner's
//! request), `output` (the text answers) and the commands themselves, here.

use std::io::Write;

use leafid::layout_plan::{self, PlanError};
use leafid::snowflake::layout::BitLayout;

use super::{CliError, Exit};

mod args;
mod output;
mod parse;
#[cfg(test)]
mod tests;

pub use args::{BoundsArgs, CheckArgs, DecodeArgs, LayoutCommand, PlanArgs};

use output::{bounds_json, write_bounds, write_check, write_decode, write_plan};
use parse::{bad, parse_id, parse_instant, parse_now, plan_request, resolve_layout};

/// What the configuration supplies to `check` when the flags leave it out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Configured {
    /// The configured snowflake layout with its epoch and prefix value.
    pub layout: Option<BitLayout>,
    /// `snowflake.min_id_floor`.
    pub min_id_floor: Option<u64>,
}

/// Runs a layout command at the instant `now_ms` (unix ms; `--now` overrides it), writing its
/// answer to `out`.
pub fn run(
    command: &LayoutCommand,
    configured: &Configured,
    now_ms: i64,
    out: &mut impl Write,
) -> Result<Exit, CliError> {
    match command {
        LayoutCommand::Decode(args) => decode(args, out),
        LayoutCommand::Bounds(args) => bounds(args, configured, out),
        LayoutCommand::Plan(args) => plan(args, now_ms, out),
        LayoutCommand::Check(args) => check(args, configured, now_ms, out),
    }
}

/// `leafid layout decode`.
pub fn decode(args: &DecodeArgs, out: &mut impl Write) -> Result<Exit, CliError> {
    let id = parse_id("id", &args.id)?;
    let layout = resolve_layout("layout", &args.layout, None)?;
    // The region and the worker within it (`snowflake.worker.region_bits`), when asked.
    let region = match args.region_bits.filter(|&r| r > 0) {
        None => None,
        Some(r) => {
            let bits = 64 - layout.max_worker_id().leading_zeros();
            if u32::from(r) >= bits {
                return Err(bad(format!(
                    "--region-bits {r}: the layout's worker ids have {bits} bits, and at least \
                     one must be left for a region's workers"
                )));
            }
            let worker = layout.decode(id).fields.worker_id;
            let own = bits - u32::from(r);
            Some((worker >> own, worker & ((1 << own) - 1)))
        }
    };
    if args.json {
        let mut v = layout_plan::decode_json(&layout, id);
        if let (Some((region, worker)), Some(map)) = (region, v.as_object_mut()) {
            map.insert("region".into(), region.into());
            map.insert("region_worker_id".into(), worker.into());
        }
        writeln!(out, "{v}")?;
        return Ok(Exit::Success);
    }
    write_decode(out, &layout, id)?;
    if let Some((region, worker)) = region {
        writeln!(out, "region      {region} (worker {worker} of the region)")?;
    }
    Ok(Exit::Success)
}

/// `leafid layout bounds`: [`BitLayout::id_bounds`] of `[--from, --to)`; a range it refuses is
/// bad input (exit 2), its message naming the epoch or the instant the layout runs out.
pub fn bounds(
    args: &BoundsArgs,
    configured: &Configured,
    out: &mut impl Write,
) -> Result<Exit, CliError> {
    let from = parse_instant("--from", &args.from)?;
    let to = parse_instant("--to", &args.to)?;
    let layout = resolve_layout("layout", &args.layout, configured.layout)?;
    let ids = layout
        .id_bounds(from, to)
        .map_err(|e| bad(format!("layout {}: {e}", layout.bits_string())))?;
    if args.json {
        writeln!(out, "{}", bounds_json(&layout, from, to, ids))?;
    } else {
        write_bounds(out, &layout, from, to, ids)?;
    }
    Ok(Exit::Success)
}

impl From<PlanError> for CliError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::InvalidInput(message) => CliError::BadInput(message),
            PlanError::Impossible { need, message } => CliError::PlanImpossible { need, message },
        }
    }
}

/// `leafid layout plan`.
pub fn plan(args: &PlanArgs, now_ms: i64, out: &mut impl Write) -> Result<Exit, CliError> {
    let now_ms = parse_now(args.now.as_deref(), now_ms)?;
    let request = plan_request(args)?;
    let answer = layout_plan::plan(&request, now_ms)?;
    if args.json {
        let json = serde_json::to_string(&answer).map_err(std::io::Error::other)?;
        writeln!(out, "{json}")?;
    } else {
        // `plan` validated the request already, so this cannot fail where it did not.
        let needs = request.needs(now_ms)?;
        write_plan(out, &answer, &needs, now_ms)?;
    }
    Ok(Exit::Success)
}

/// `leafid layout check`: [`Exit::CheckFailed`] when the layout is not safe.
pub fn check(
    args: &CheckArgs,
    configured: &Configured,
    now_ms: i64,
    out: &mut impl Write,
) -> Result<Exit, CliError> {
    let now_ms = parse_now(args.now.as_deref(), now_ms)?;
    let layout = resolve_layout("layout", &args.layout, configured.layout)?;
    let floor = match (&args.floor, configured.min_id_floor) {
        (Some(text), _) => parse_id("--floor", text)?,
        (None, Some(floor)) => floor,
        (None, None) => {
            return Err(bad(
                "no floor given: use --floor ID (the highest id the legacy layout issued)"
                    .to_owned(),
            ));
        }
    };
    let report = layout_plan::check(&layout, floor, now_ms);
    if args.json {
        let json = serde_json::to_string(&report).map_err(std::io::Error::other)?;
        writeln!(out, "{json}")?;
    } else {
        write_check(out, &report, &layout, now_ms)?;
    }
    Ok(if report.ok {
        Exit::Success
    } else {
        Exit::CheckFailed
    })
}
