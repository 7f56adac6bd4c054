//! The text answers of `decode`, `bounds`, `plan` and `check` (their `--json` answers are the
//! library's serialized types, and `bounds`' the body of `GET /api/v1/snowflake/bounds`).

use std::io::Write;

use leafid::layout_plan::{self, CheckReport, Plan};
use leafid::snowflake::layout::{BitLayout, format_unix_ms};
use serde_json::{Value, json};

use super::parse::bad;
use crate::cli::CliError;

/// Milliseconds in a mean Gregorian year, only to print years.
const YEAR_MS: f64 = 365.2425 * 86_400_000.0;

/// The text answer of `decode`: one field a line, and a note when `layout` did not issue `id`.
pub(super) fn write_decode(
    out: &mut impl Write,
    layout: &BitLayout,
    id: u64,
) -> Result<(), CliError> {
    let decoded = layout.decode(id);
    let fields = decoded.fields;
    writeln!(out, "id          {id}")?;
    writeln!(out, "layout      {layout}")?;
    writeln!(out, "prefix      {}", fields.prefix)?;
    writeln!(out, "time_delta  {} {}", fields.time_delta, layout.unit())?;
    writeln!(out, "timestamp   {}", decoded.timestamp())?;
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
    Ok(())
}

/// The answer of `bounds` as JSON: the fields of `GET /api/v1/snowflake/bounds`' body, ids as
/// numbers.
pub(super) fn bounds_json(layout: &BitLayout, from_ms: i64, to_ms: i64, ids: (u64, u64)) -> Value {
    let (min_id, max_id) = ids;
    json!({
        "layout": layout.bits_string(),
        "from": format_unix_ms(from_ms),
        "to": format_unix_ms(to_ms),
        "min_id": min_id,
        "max_id": max_id,
        "first_tick": layout.decode(min_id).timestamp(),
        "last_tick": layout.decode(max_id).timestamp(),
    })
}

/// The text answer of `bounds`: the range, its ids, their ticks and the SQL to use them in.
pub(super) fn write_bounds(
    out: &mut impl Write,
    layout: &BitLayout,
    from_ms: i64,
    to_ms: i64,
    ids: (u64, u64),
) -> Result<(), CliError> {
    let (min_id, max_id) = ids;
    writeln!(out, "layout      {layout}")?;
    writeln!(out, "from        {}", format_unix_ms(from_ms))?;
    writeln!(out, "to          {} (exclusive)", format_unix_ms(to_ms))?;
    writeln!(out, "min_id      {min_id}")?;
    writeln!(out, "max_id      {max_id}")?;
    writeln!(out, "first_tick  {}", layout.decode(min_id).timestamp())?;
    writeln!(out, "last_tick   {}", layout.decode(max_id).timestamp())?;
    writeln!(out, "sql         WHERE id BETWEEN {min_id} AND {max_id}")?;
    Ok(())
}

/// Years from `now_ms` to `at_ms` (negative when `at_ms` is past).
fn years_from(now_ms: i64, at_ms: i64) -> f64 {
    (i128::from(at_ms) - i128::from(now_ms)) as f64 / YEAR_MS
}

/// The text answer of `plan`: the needs, the layout, its checks and the server configuration.
pub(super) fn write_plan(
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
    if capacity.region_bits > 0 {
        writeln!(
            out,
            "regions        {} region bits: {} regions x {} workers each \
             (snowflake.worker.region_bits = {}, lanes.slot = the region)",
            capacity.region_bits,
            1u64 << capacity.region_bits,
            capacity.max_workers >> capacity.region_bits,
            capacity.region_bits
        )?;
    }
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

/// The text answer of `check`: the report, and a warning when under a year is left.
pub(super) fn write_check(
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
