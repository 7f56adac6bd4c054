//! Tests of `leafid layout`: each command run on flags, with what it printed.

use serde_json::Value;

use super::args::{LayoutFlags, Preset};
use super::*;
use leafid::layout_plan::CheckReport;
use leafid::snowflake::layout::{TimeUnit, parse_epoch};

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
        region_bits: None,
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
        clock_back_bits: None,
        workers: None,
        ids_per_second: None,
        per: None,
        max_id_bits: None,
        years: 10,
        epoch: None,
        unit: None,
        now: None,
        json: false,
        regions: None,
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

fn bounds_args(from: &str, to: &str, layout: LayoutFlags, json: bool) -> BoundsArgs {
    BoundsArgs {
        from: from.to_owned(),
        to: to.to_owned(),
        layout,
        json,
    }
}

#[test]
fn bounds_prints_the_ids_of_a_day_and_their_ticks() {
    let twitter = LayoutFlags {
        preset: Some(Preset::Twitter),
        ..LayoutFlags::default()
    };
    let args = bounds_args(
        "2025-01-01T00:00:00Z",
        "2025-01-02T00:00:00Z",
        twitter,
        false,
    );
    let (result, text) = output(LayoutCommand::Bounds(args), &Configured::default());
    assert_eq!(result.unwrap(), Exit::Success);
    let (min, max) = BitLayout::twitter()
        .id_bounds(ms("2025-01-01T00:00:00Z"), ms("2025-01-02T00:00:00Z"))
        .unwrap();
    for line in [
        format!("min_id      {min}\n"),
        format!("max_id      {max}\n"),
        "first_tick  2025-01-01T00:00:00Z\n".to_owned(),
        "last_tick   2025-01-01T23:59:59.999Z\n".to_owned(),
        format!("sql         WHERE id BETWEEN {min} AND {max}\n"),
    ] {
        assert!(text.contains(&line), "{line:?} in\n{text}");
    }
}

#[test]
fn bounds_json_takes_the_configured_layout_when_no_flag_names_one() {
    let layout = BitLayout::parse_bits("7+30/13/13", TimeUnit::Seconds, ms(UID_EPOCH)).unwrap();
    let configured = Configured {
        layout: Some(layout),
        min_id_floor: None,
    };
    // Unix ms and an offset; `from` inside a second: that second is the first tick.
    let args = bounds_args(
        "1735689600500",
        "2025-01-01T08:00:02+08:00",
        LayoutFlags::default(),
        true,
    );
    let (result, text) = output(LayoutCommand::Bounds(args), &configured);
    assert_eq!(result.unwrap(), Exit::Success);
    let json: Value = serde_json::from_str(&text).unwrap();
    let (min, max) = layout
        .id_bounds(1_735_689_600_500, 1_735_689_602_000)
        .unwrap();
    assert_eq!(json["layout"], "7+30/13/13");
    assert_eq!(json["from"], "2025-01-01T00:00:00.500Z");
    assert_eq!(json["to"], "2025-01-01T00:00:02Z");
    assert_eq!(json["min_id"], min);
    assert_eq!(json["max_id"], max);
    assert_eq!(json["first_tick"], "2025-01-01T00:00:00Z");
    assert_eq!(json["last_tick"], "2025-01-01T00:00:01Z");
    assert_eq!(json.as_object().unwrap().len(), 7, "{json}");
}

#[test]
fn bounds_refuses_bad_times_and_ranges_outside_the_layout_in_one_line() {
    let uid = || flags("28/22/13", UID_EPOCH);
    for (from, to, expected) in [
        ("yesterday", "1", "--from \"yesterday\" is neither RFC 3339"),
        (
            "1",
            "2025-01-01T00:00:00",
            "--to \"2025-01-01T00:00:00\" is neither",
        ),
        ("5", "5", "empty time range"),
        (
            "2016-05-19T00:00:00Z",
            "2016-05-21T00:00:00Z",
            "is before the layout's epoch 2016-05-19T16:00:00Z",
        ),
        (
            "2024-11-20T00:00:00Z",
            "2024-11-21T00:00:00Z",
            "when the layout's time field runs out",
        ),
    ] {
        let args = bounds_args(from, to, uid(), false);
        let message = bad_input(output(LayoutCommand::Bounds(args), &Configured::default()).0);
        assert!(message.contains(expected), "{from} {to}: {message}");
        assert!(!message.contains('\n'), "{message}");
    }
}

/// `--region-bits`: the region and the worker within it, in text and JSON.
#[test]
fn decode_shows_the_region_with_region_bits() {
    let layout = LayoutFlags {
        preset: Some(Preset::Twitter),
        ..Default::default()
    };
    // 41/10/12: worker 3 << 8 | 5 (region 3 of 4, worker 5 of it), sequence 7.
    let id = (1u64 << 22) | ((3 << 8 | 5) << 12) | 7;
    let mut args = decode_args(&id.to_string(), layout, true);
    args.region_bits = Some(2);
    let mut out = Vec::new();
    decode(&args, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        (v["region"].as_u64(), v["region_worker_id"].as_u64()),
        (Some(3), Some(5))
    );
    args.json = false;
    let mut out = Vec::new();
    decode(&args, &mut out).unwrap();
    assert!(
        String::from_utf8(out)
            .unwrap()
            .contains("region      3 (worker 5 of the region)")
    );
    args.region_bits = Some(10);
    assert!(decode(&args, &mut Vec::new()).is_err());
}
