//! `leafid layout {decode, plan, check}`: the flags, and the commands as functions that write to
//! any [`Write`] so tests can read what they print.
//!
//! Layouts are written as on the server: `T/W/S` or `P+T/W/S` (`28/22/13`, `7+30/13/13`) with
//! an epoch (RFC 3339 with an explicit offset, or unix milliseconds) and a unit (`seconds`, the
//! default, or `millis`); `--preset uid-generator|twitter|js-safe` stands for all three. The text is
//! parsed here rather than by clap so that a bad value gets one line naming it, not a usage page.
//!
//! `check` takes its layout and floor from the flags or, when they are left out, from
//! [`Configured`]: the slot for what `--config` will supply once the server's configuration has
//! snowflake keys.

use std::io::Write;

use clap::{ArgGroup, Args, Subcommand, ValueEnum};
use leafid::layout_plan::{self, CheckReport, Plan, PlanError, PlanRequest};
use leafid::snowflake::layout::{
    BitLayout, TimeUnit, format_unix_ms, parse_epoch, parse_timestamp,
};

use super::{CliError, Exit};

/// Milliseconds in a mean Gregorian year, only to print years.
const YEAR_MS: f64 = 365.2425 * 86_400_000.0;

/// `leafid layout ...`: decode ids, plan a migration to a new layout, check a layout.
#[derive(Debug, Subcommand)]
pub enum LayoutCommand {
    /// Show an id's fields (prefix, time delta, timestamp, worker id, sequence) under a layout.
    Decode(DecodeArgs),
    /// Plan a new layout whose ids stay positive and above every legacy id.
    Plan(PlanArgs),
    /// Check that a layout can never issue an id <= a floor from now on, and until when it lasts.
    Check(CheckArgs),
}

/// A named layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// 28/22/13, seconds, epoch 2016-05-20T00:00:00+08:00.
    UidGenerator,
    /// 41/10/12, milliseconds, epoch 1288834974657 (unix ms).
    Twitter,
    /// 10+31/8/14 with the prefix at 0, seconds, epoch 2025-01-01Z: every id <= 2^53 - 1.
    JsSafe,
}

impl Preset {
    fn layout(self) -> BitLayout {
        match self {
            Preset::UidGenerator => BitLayout::uid_generator(),
            Preset::Twitter => BitLayout::twitter(),
            Preset::JsSafe => BitLayout::js_safe(),
        }
    }
}

/// A layout on the command line: `--layout` with `--epoch` (and `--unit`), or `--preset`.
#[derive(Clone, Debug, Default, Args)]
pub struct LayoutFlags {
    /// Bit widths, T/W/S or P+T/W/S (e.g. 28/22/13, 7+30/13/13).
    #[arg(
        long,
        value_name = "BITS",
        requires = "epoch",
        conflicts_with = "preset"
    )]
    pub layout: Option<String>,
    /// Epoch of the layout: RFC 3339 with an explicit offset, or unix milliseconds.
    #[arg(long, value_name = "RFC3339", requires = "layout")]
    pub epoch: Option<String>,
    /// Length of one tick: seconds (the default) or millis.
    #[arg(long, value_name = "UNIT", requires = "layout")]
    pub unit: Option<String>,
    /// Value of the prefix bits (default: all ones, the usual mask).
    #[arg(long, value_name = "N")]
    pub prefix_value: Option<String>,
    /// A named layout instead of --layout/--epoch/--unit.
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
}

/// `leafid layout decode ID ...`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which_layout").required(true).args(["layout", "preset"])))]
pub struct DecodeArgs {
    /// The id, a decimal integer in 0..=9223372036854775807.
    #[arg(value_name = "ID", allow_hyphen_values = true)]
    pub id: String,
    /// The layout to read it with.
    #[command(flatten)]
    pub layout: LayoutFlags,
    /// Print `{"id", "prefix", "time_delta", "timestamp", "worker_id", "sequence"}`.
    #[arg(long)]
    pub json: bool,
}

/// `leafid layout plan ...`: the flags of the HTTP route's body (DESIGN.md section 6).
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("legacy_layout").required(true).args(["legacy", "legacy_preset"])))]
#[command(group(ArgGroup::new("legacy_max").required(true).args(["max_legacy_id", "cutover"])))]
pub struct PlanArgs {
    /// The legacy layout's bit widths, T/W/S or P+T/W/S (e.g. 28/22/13).
    #[arg(long, value_name = "BITS", requires = "legacy_epoch")]
    pub legacy: Option<String>,
    /// The legacy layout's epoch: RFC 3339 with an explicit offset, or unix milliseconds.
    #[arg(long, value_name = "RFC3339", requires = "legacy")]
    pub legacy_epoch: Option<String>,
    /// The legacy layout's unit: seconds (the default) or millis.
    #[arg(long, value_name = "UNIT", requires = "legacy")]
    pub legacy_unit: Option<String>,
    /// The legacy layout's prefix value, if it has prefix bits (default: all ones).
    #[arg(long, value_name = "N")]
    pub legacy_prefix_value: Option<String>,
    /// A named legacy layout instead of --legacy/--legacy-epoch/--legacy-unit.
    #[arg(long, value_enum, conflicts_with = "legacy")]
    pub legacy_preset: Option<Preset>,
    /// The highest legacy id observed (take it from your tables, plus any margin you want).
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    pub max_legacy_id: Option<String>,
    /// When the legacy generators stop (RFC 3339): the legacy maximum is then the largest id
    /// the legacy layout could issue by the cut-over plus the margin.
    #[arg(long, value_name = "RFC3339")]
    pub cutover: Option<String>,
    /// Seconds of ids handed out ahead of time, added to --cutover (default 86400, one day).
    #[arg(long, value_name = "S", requires = "cutover")]
    pub margin_seconds: Option<u64>,
    /// Worker bits of the new layout (2^W worker ids); or give --workers.
    #[arg(long, value_name = "W")]
    pub worker_bits: Option<u8>,
    /// Sequence bits of the new layout (2^S ids per tick and worker); or give --ids-per-second.
    #[arg(long, value_name = "S")]
    pub seq_bits: Option<u8>,
    /// Peak number of workers at once: worker bits ceil(log2(N)), at least 1. With
    /// --worker-bits too, the bits are kept and must hold N.
    #[arg(long, value_name = "N")]
    pub workers: Option<u64>,
    /// Peak ids per second of each worker (or of the cluster, with --per cluster): sequence bits
    /// ceil(log2(ids per tick)), at least 1. With --seq-bits too, the bits are kept and must
    /// hold it.
    #[arg(long, value_name = "N")]
    pub ids_per_second: Option<u64>,
    /// Whose rate --ids-per-second is: worker (the default) or cluster (divided among
    /// --workers, rounded up).
    #[arg(long, value_name = "SCOPE", requires = "ids_per_second")]
    pub per: Option<String>,
    /// Every id of the plan at most 2^M - 1 (53: ids JavaScript numbers hold exactly);
    /// default 63.
    #[arg(long, value_name = "M")]
    pub max_id_bits: Option<u8>,
    /// Years from now through which the new layout must still issue ids.
    #[arg(long, value_name = "Y")]
    pub years: u32,
    /// A fixed epoch for the new layout (not in the future); the planner chooses it otherwise.
    #[arg(long, value_name = "RFC3339")]
    pub epoch: Option<String>,
    /// Unit of the new layout: seconds or millis (default: the legacy unit).
    #[arg(long, value_name = "UNIT")]
    pub unit: Option<String>,
    /// Plan as of this instant instead of the clock (RFC 3339), e.g. to reproduce a plan.
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Print the JSON answer of `POST /api/v1/layouts/plan`.
    #[arg(long)]
    pub json: bool,
}

/// `leafid layout check ...`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The layout to check (from the configuration when left out).
    #[command(flatten)]
    pub layout: LayoutFlags,
    /// Every id from now on must be greater than this: the highest legacy id.
    #[arg(long, value_name = "ID", allow_hyphen_values = true)]
    pub floor: Option<String>,
    /// Check as of this instant instead of the clock (RFC 3339).
    #[arg(long, value_name = "RFC3339")]
    pub now: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

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
        LayoutCommand::Plan(args) => plan(args, now_ms, out),
        LayoutCommand::Check(args) => check(args, configured, now_ms, out),
    }
}

fn bad(message: String) -> CliError {
    CliError::BadInput(message)
}

/// Parses a non-negative `i64` given as decimal text, naming `what` when it is not one.
fn parse_id(what: &str, text: &str) -> Result<u64, CliError> {
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

fn parse_unit(what: &str, text: Option<&str>) -> Result<Option<TimeUnit>, CliError> {
    text.map(|t| t.parse().map_err(|e| bad(format!("{what}: {e}"))))
        .transpose()
}

fn parse_now(text: Option<&str>, now_ms: i64) -> Result<i64, CliError> {
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
fn resolve_layout(
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

/// `leafid layout decode`.
pub fn decode(args: &DecodeArgs, out: &mut impl Write) -> Result<Exit, CliError> {
    let id = parse_id("id", &args.id)?;
    let layout = resolve_layout("layout", &args.layout, None)?;
    if args.json {
        writeln!(out, "{}", layout_plan::decode_json(&layout, id))?;
        return Ok(Exit::Success);
    }
    let fields = layout.decompose(id);
    let at = layout.tick_start_unix_ms(fields.time_delta);
    writeln!(out, "id          {id}")?;
    writeln!(out, "layout      {layout}")?;
    writeln!(out, "prefix      {}", fields.prefix)?;
    writeln!(out, "time_delta  {} {}", fields.time_delta, layout.unit())?;
    writeln!(out, "timestamp   {}", format_unix_ms(at))?;
    writeln!(out, "worker_id   {}", fields.worker_id)?;
    writeln!(out, "sequence    {}", fields.sequence)?;
    if !layout.owns(id) {
        writeln!(
            out,
            "note: prefix {} is not this layout's prefix {}: this layout did not issue the id",
            fields.prefix,
            layout.prefix_value()
        )?;
    }
    Ok(Exit::Success)
}

/// The planner's request from the flags.
fn plan_request(args: &PlanArgs) -> Result<PlanRequest, CliError> {
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

fn years_from(now_ms: i64, at_ms: i64) -> f64 {
    (i128::from(at_ms) - i128::from(now_ms)) as f64 / YEAR_MS
}

fn write_plan(
    out: &mut impl Write,
    plan: &Plan,
    needs: &layout_plan::Needs,
    now_ms: i64,
) -> Result<(), CliError> {
    let layout = plan
        .bit_layout()
        .map_err(|e| bad(format!("the plan's layout does not parse: {e}")))?;
    writeln!(
        out,
        "needs          {} worker bits{}, {} sequence bits{}, {} years from {}",
        needs.worker_bits,
        needs
            .workers
            .map_or_else(String::new, |n| format!(" (for {n} workers)")),
        needs.seq_bits,
        needs
            .ids_per_second
            .map_or_else(String::new, |n| format!(" (for {n} ids/s per worker)")),
        needs.years,
        format_unix_ms(now_ms)
    )?;
    if needs.max_id_bits < layout_plan::MAX_ID_BITS {
        writeln!(
            out,
            "max id bits    {} (every id <= {})",
            needs.max_id_bits,
            (1u64 << needs.max_id_bits) - 1
        )?;
    }
    writeln!(
        out,
        "max legacy id  {} ({})",
        needs.max_legacy_id, needs.max_source
    )?;
    writeln!(out, "new layout     {}", layout.bits_string())?;
    if layout.prefix_bits() > 0 {
        writeln!(out, "prefix value   {}", layout.prefix_value())?;
    }
    writeln!(out, "unit           {}", layout.unit())?;
    writeln!(out, "epoch          {}", plan.epoch)?;
    let capacity = &plan.capacity;
    writeln!(
        out,
        "capacity       {} workers x {} ids/s each = {} ids/s",
        capacity.max_workers,
        capacity.max_ids_per_second_per_worker,
        capacity.max_ids_per_second_cluster
    )?;
    writeln!(out, "first id       {}", plan.first_id)?;
    writeln!(out, "last id        {}", plan.last_id)?;
    writeln!(
        out,
        "exhausted at   {} ({:.2} years from now)",
        plan.exhausted_at,
        years_from(now_ms, layout.exhausted_at_unix_ms())
    )?;
    writeln!(out, "checks")?;
    for check in &plan.checks {
        let mark = if check.ok { "ok" } else { "FAILED" };
        writeln!(out, "  {mark:<6} {}: {}", check.name, check.detail)?;
    }
    writeln!(
        out,
        "server configuration (then run `leafid layout check` with it before starting):"
    )?;
    writeln!(out, "[snowflake]")?;
    writeln!(out, "layout = \"{}\"", layout.bits_string())?;
    if layout.prefix_bits() > 0 {
        writeln!(out, "prefix_value = {}", layout.prefix_value())?;
    }
    writeln!(out, "epoch = \"{}\"", plan.epoch)?;
    writeln!(out, "unit = \"{}\"", layout.unit())?;
    writeln!(out, "min_id_floor = {}", needs.max_legacy_id)?;
    Ok(())
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

fn write_check(
    out: &mut impl Write,
    report: &CheckReport,
    layout: &BitLayout,
    now_ms: i64,
) -> Result<(), CliError> {
    let years_left = years_from(now_ms, layout.exhausted_at_unix_ms()).max(0.0);
    writeln!(out, "layout        {layout}")?;
    writeln!(out, "floor         {}", report.floor)?;
    writeln!(out, "now           {}", report.now)?;
    match report.first_id {
        Some(id) => writeln!(out, "first id      {id}")?,
        None => writeln!(out, "first id      none: the time field has run out")?,
    }
    writeln!(
        out,
        "exhausted at  {} ({years_left:.2} years from now)",
        report.exhausted_at
    )?;
    let verdict = if report.ok { "yes" } else { "NO" };
    writeln!(out, "safe          {verdict}: {}", report.detail)?;
    if report.ok && years_left < 1.0 {
        writeln!(
            out,
            "warning: under one year left before the time field runs out: plan the next layout now"
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// DESIGN.md section 6: 28/22/13 since 2016-05-20T00:00:00+08:00.
    const DESIGN_ID: &str = "9090949948782127403";
    const UID_EPOCH: &str = "2016-05-20T00:00:00+08:00";

    fn ms(text: &str) -> i64 {
        parse_epoch(text).unwrap()
    }

    /// 2025-04-16T00:00:00+08:00, DESIGN.md's cut-over.
    fn now() -> i64 {
        ms("2025-04-16T00:00:00+08:00")
    }

    fn flags(bits: &str, epoch: &str) -> LayoutFlags {
        LayoutFlags {
            layout: Some(bits.to_owned()),
            epoch: Some(epoch.to_owned()),
            ..LayoutFlags::default()
        }
    }

    fn decode_args(id: &str, layout: LayoutFlags, json: bool) -> DecodeArgs {
        DecodeArgs {
            id: id.to_owned(),
            layout,
            json,
        }
    }

    fn plan_args(max: Option<&str>, cutover: Option<&str>, worker_bits: u8) -> PlanArgs {
        PlanArgs {
            legacy: Some("28/22/13".to_owned()),
            legacy_epoch: Some(UID_EPOCH.to_owned()),
            legacy_unit: None,
            legacy_prefix_value: None,
            legacy_preset: None,
            max_legacy_id: max.map(str::to_owned),
            cutover: cutover.map(str::to_owned),
            margin_seconds: None,
            worker_bits: Some(worker_bits),
            seq_bits: Some(13),
            workers: None,
            ids_per_second: None,
            per: None,
            max_id_bits: None,
            years: 10,
            epoch: None,
            unit: None,
            now: None,
            json: false,
        }
    }

    fn check_args(layout: LayoutFlags, floor: Option<&str>) -> CheckArgs {
        CheckArgs {
            layout,
            floor: floor.map(str::to_owned),
            now: None,
            json: true,
        }
    }

    /// Runs a command and returns its exit or error and what it printed.
    fn output(command: LayoutCommand, configured: &Configured) -> (Result<Exit, CliError>, String) {
        let mut out = Vec::new();
        let result = run(&command, configured, now(), &mut out);
        (result, String::from_utf8(out).unwrap())
    }

    fn bad_input(result: Result<Exit, CliError>) -> String {
        match result {
            Err(e @ CliError::BadInput(_)) => {
                assert_eq!(e.code(), 2);
                e.to_string()
            }
            other => panic!("expected bad input, got {other:?}"),
        }
    }

    #[test]
    fn decode_prints_the_design_ids_fields() {
        let args = decode_args(DESIGN_ID, flags("28/22/13", UID_EPOCH), false);
        let (result, text) = output(LayoutCommand::Decode(args), &Configured::default());
        assert_eq!(result.unwrap(), Exit::Success);
        assert!(text.contains("time_delta  264581466 seconds"), "{text}");
        assert!(text.contains("worker_id   29\n"), "{text}");
        assert!(text.contains("sequence    2347\n"), "{text}");
        assert!(text.contains("timestamp   2024-10-06T22:51:06Z"), "{text}");
        assert!(!text.contains("note:"), "{text}");
    }

    #[test]
    fn decode_json_has_exactly_the_contract_keys() {
        let args = decode_args(
            DESIGN_ID,
            LayoutFlags {
                preset: Some(Preset::UidGenerator),
                ..LayoutFlags::default()
            },
            true,
        );
        let (result, text) = output(LayoutCommand::Decode(args), &Configured::default());
        assert_eq!(result.unwrap(), Exit::Success);
        let json: Value = serde_json::from_str(&text).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "id",
                "prefix",
                "sequence",
                "time_delta",
                "timestamp",
                "worker_id"
            ]
        );
        assert_eq!(json["time_delta"], 264_581_466);
        assert_eq!(json["id"], 9_090_949_948_782_127_403_u64);
    }

    #[test]
    fn decode_notes_an_id_of_another_layout() {
        let args = decode_args(DESIGN_ID, flags("7+30/13/13", UID_EPOCH), false);
        let (_, text) = output(LayoutCommand::Decode(args), &Configured::default());
        assert!(
            text.contains("note: prefix 126 is not this layout's prefix 127"),
            "{text}"
        );
    }

    #[test]
    fn bad_ids_and_layouts_are_named_in_one_line() {
        for (id, expected) in [
            ("abc", "id \"abc\" is not a decimal integer"),
            ("", "id \"\" is not a decimal integer"),
            ("-5", "id -5 is negative"),
            ("9223372036854775808", "is larger than i64::MAX"),
            ("99999999999999999999999", "is larger than i64::MAX"),
            ("1.5", "is not a decimal integer"),
        ] {
            let args = decode_args(id, flags("28/22/13", UID_EPOCH), false);
            let message = bad_input(output(LayoutCommand::Decode(args), &Configured::default()).0);
            assert!(message.contains(expected), "{id:?}: {message}");
            assert!(!message.contains('\n'), "{message}");
        }
        for (layout, expected) in [
            (flags("28/22/12", UID_EPOCH), "must be 63"),
            (flags("28-22-13", UID_EPOCH), "invalid layout"),
            (flags("28/22/13", "2016-05-20"), "invalid epoch"),
            (
                LayoutFlags {
                    unit: Some("hours".to_owned()),
                    ..flags("28/22/13", UID_EPOCH)
                },
                "invalid time unit",
            ),
            (
                LayoutFlags {
                    prefix_value: Some("128".to_owned()),
                    ..flags("7+30/13/13", UID_EPOCH)
                },
                "does not fit in 7 prefix bits",
            ),
            (LayoutFlags::default(), "no layout given"),
        ] {
            let args = decode_args("1", layout, false);
            let message = bad_input(output(LayoutCommand::Decode(args), &Configured::default()).0);
            assert!(message.contains(expected), "{message}");
        }
        assert_eq!(parse_id("id", "-0").unwrap(), 0);
        assert_eq!(parse_id("id", " +42 ").unwrap(), 42);
        assert_eq!(
            parse_id("id", "9223372036854775807").unwrap(),
            i64::MAX as u64
        );
    }

    #[test]
    fn plan_json_is_the_planners_answer() {
        let mut args = plan_args(Some(DESIGN_ID), None, 13);
        args.json = true;
        let (result, text) = output(LayoutCommand::Plan(args), &Configured::default());
        assert_eq!(result.unwrap(), Exit::Success);
        let request = plan_request(&plan_args(Some(DESIGN_ID), None, 13)).unwrap();
        let expected = serde_json::to_value(layout_plan::plan(&request, now()).unwrap()).unwrap();
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), expected);
        assert!(expected["first_id"].as_u64().unwrap() > 9_090_949_948_782_127_403);
    }

    #[test]
    fn plan_text_shows_the_layout_checks_and_configuration() {
        let args = plan_args(None, Some("2024-10-01T00:00:00+08:00"), 13);
        let (result, text) = output(LayoutCommand::Plan(args), &Configured::default());
        assert_eq!(result.unwrap(), Exit::Success);
        for needle in [
            "max legacy id  ",
            "largest legacy id possible by cutover 2024-09-30T16:00:00Z + 86400 s",
            "  ok     first_id_above_max_legacy_id: ",
            "  ok     years_of_life: ",
            "[snowflake]\nlayout = \"",
            "min_id_floor = ",
        ] {
            assert!(text.contains(needle), "{needle:?} in\n{text}");
        }
        assert!(!text.contains("FAILED"), "{text}");
    }

    #[test]
    fn impossible_plans_name_the_need() {
        let mut args = plan_args(Some(DESIGN_ID), None, 13);
        args.years = 100;
        match output(LayoutCommand::Plan(args), &Configured::default()).0 {
            Err(e @ CliError::PlanImpossible { .. }) => {
                assert_eq!(e.code(), 1);
                assert!(
                    e.to_string().starts_with("plan impossible (years): "),
                    "{e}"
                );
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        let args = plan_args(Some("9223372036854775807"), None, 13);
        match output(LayoutCommand::Plan(args), &Configured::default()).0 {
            Err(CliError::PlanImpossible { need, .. }) => assert_eq!(need, "max_legacy_id"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn invalid_plan_requests_are_bad_input() {
        let message = bad_input(
            output(
                LayoutCommand::Plan(plan_args(Some(DESIGN_ID), None, 0)),
                &Configured::default(),
            )
            .0,
        );
        assert!(message.contains("worker_bits 0"), "{message}");
        let mut args = plan_args(None, Some("soon"), 13);
        args.json = true;
        let message = bad_input(output(LayoutCommand::Plan(args), &Configured::default()).0);
        assert!(message.contains("cutover \"soon\""), "{message}");
        let mut args = plan_args(Some(DESIGN_ID), None, 13);
        args.now = Some("tomorrow".to_owned());
        let message = bad_input(output(LayoutCommand::Plan(args), &Configured::default()).0);
        assert!(message.contains("--now \"tomorrow\""), "{message}");
    }

    #[test]
    fn check_passes_above_the_floor_and_fails_at_it() {
        let floor = (127u64 << 56).to_string();
        let mask = || flags("7+30/13/13", "2025-04-16T00:00:00+08:00");
        let (result, text) = output(
            LayoutCommand::Check(check_args(mask(), Some(DESIGN_ID))),
            &Configured::default(),
        );
        assert_eq!(result.unwrap(), Exit::Success);
        let report: CheckReport = serde_json::from_str(&text).unwrap();
        assert!(report.ok);
        assert_eq!(report.first_id, Some(127 << 56));

        let (result, _) = output(
            LayoutCommand::Check(check_args(mask(), Some(&floor))),
            &Configured::default(),
        );
        assert_eq!(result.unwrap(), Exit::CheckFailed);
        assert_eq!(Exit::CheckFailed.code(), 1);
    }

    #[test]
    fn check_uses_the_time_field_not_the_bare_prefix() {
        // The bare 28/22/13 layout's smallest id is 0, but from 2025-04-16 on it has run out.
        let mut args = check_args(flags("28/22/13", UID_EPOCH), Some("1"));
        args.json = false;
        let (result, text) = output(LayoutCommand::Check(args), &Configured::default());
        assert_eq!(result.unwrap(), Exit::CheckFailed);
        assert!(text.contains("first id      none"), "{text}");
        assert!(
            text.contains("safe          NO: time field ran out"),
            "{text}"
        );
        // A 30-bit time field from 2016 has ids from now far above a small floor.
        let mut args = check_args(flags("30/20/13", UID_EPOCH), Some("1"));
        args.json = false;
        let (result, text) = output(LayoutCommand::Check(args), &Configured::default());
        assert_eq!(result.unwrap(), Exit::Success);
        assert!(
            text.contains("safe          yes: first id from now"),
            "{text}"
        );
    }

    #[test]
    fn check_falls_back_to_the_configuration() {
        let configured = Configured {
            layout: Some(BitLayout::parse_bits("7+30/13/13", TimeUnit::Seconds, now()).unwrap()),
            min_id_floor: Some(9_090_949_948_782_127_403),
        };
        let (result, _) = output(
            LayoutCommand::Check(check_args(LayoutFlags::default(), None)),
            &configured,
        );
        assert_eq!(result.unwrap(), Exit::Success);
        let message = bad_input(
            output(
                LayoutCommand::Check(check_args(LayoutFlags::default(), Some("1"))),
                &Configured::default(),
            )
            .0,
        );
        assert!(message.starts_with("no layout given"), "{message}");
        let message = bad_input(
            output(
                LayoutCommand::Check(check_args(flags("28/22/13", UID_EPOCH), None)),
                &Configured::default(),
            )
            .0,
        );
        assert!(message.starts_with("no floor given"), "{message}");
    }
}
