//! `leafid layout {decode, plan, check}` as a migration team runs them: the built binary, its
//! stdout, stderr and exit code (0 ok, 1 plan impossible or check failed, 2 bad input).

use std::process::{Command, Output};

use serde_json::Value;

/// DESIGN.md section 6: the highest id a 28/22/13 generator issued, observed.
const DESIGN_MAX: &str = "9090949948782127403";
const UID_EPOCH: &str = "2016-05-20T00:00:00+08:00";
/// A fixed planning instant, so the answers do not depend on the clock.
const NOW: &str = "2025-04-16T00:00:00+08:00";

fn leafid(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leafid"))
        .args(args)
        .output()
        .expect("the leafid binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

fn json(out: &Output) -> Value {
    serde_json::from_str(&stdout(out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

fn plan_args<'a>(max: &'a str, worker_bits: &'a str, years: &'a str) -> Vec<&'a str> {
    vec![
        "layout",
        "plan",
        "--legacy",
        "28/22/13",
        "--legacy-epoch",
        UID_EPOCH,
        "--max-legacy-id",
        max,
        "--worker-bits",
        worker_bits,
        "--seq-bits",
        "13",
        "--years",
        years,
        "--now",
        NOW,
    ]
}

#[test]
fn decode_reads_the_design_id_as_text_and_json() {
    let base = ["layout", "decode", DESIGN_MAX, "--layout", "28/22/13"];
    let text = leafid(&[&base[..], &["--epoch", UID_EPOCH]].concat());
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    let shown = stdout(&text);
    for line in [
        "time_delta  264581466 seconds",
        "timestamp   2024-10-06T22:51:06Z",
        "worker_id   29",
        "sequence    2347",
    ] {
        assert!(shown.contains(line), "{line:?} in\n{shown}");
    }

    let out = leafid(&[&base[..], &["--epoch", UID_EPOCH, "--json"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let fields = json(&out);
    assert_eq!(fields.as_object().unwrap().len(), 6, "{fields}");
    assert_eq!(fields["id"], 9_090_949_948_782_127_403_u64);
    assert_eq!(fields["prefix"], 0);
    assert_eq!(fields["time_delta"], 264_581_466);
    assert_eq!(fields["timestamp"], "2024-10-06T22:51:06Z");
    assert_eq!(fields["worker_id"], 29);
    assert_eq!(fields["sequence"], 2347);

    let preset = leafid(&[
        "layout",
        "decode",
        DESIGN_MAX,
        "--preset",
        "uid-generator",
        "--json",
    ]);
    assert_eq!(json(&preset), fields);
}

#[test]
fn junk_input_exits_2_with_one_line_on_stderr() {
    let decode = |id: &str, layout: &str, epoch: &str| {
        leafid(&["layout", "decode", id, "--layout", layout, "--epoch", epoch])
    };
    for (out, expected) in [
        (
            decode("junk", "28/22/13", UID_EPOCH),
            "not a decimal integer",
        ),
        (decode("-1", "28/22/13", UID_EPOCH), "negative"),
        (
            decode("9223372036854775808", "28/22/13", UID_EPOCH),
            "larger than i64::MAX",
        ),
        (decode("1", "28/22/12", UID_EPOCH), "must be 63"),
        (decode("1", "28/22/13", "2016-05-20"), "invalid epoch"),
        (
            leafid(&plan_args(DESIGN_MAX, "0", "10")),
            "worker_bits 0 and seq_bits 13",
        ),
    ] {
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(expected), "{expected:?} in {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(stdout(&out).is_empty());
    }
    let usage = leafid(&["layout", "decode", "1", "--layout", "28/22/13"]);
    assert_eq!(usage.status.code(), Some(2), "{}", stderr(&usage));
}

#[test]
fn a_plan_for_an_observed_maximum_passes_its_checks_and_its_check() {
    let out = leafid(&[&plan_args(DESIGN_MAX, "13", "10")[..], &["--json"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan = json(&out);
    assert!(plan["first_id"].as_u64().unwrap() > 9_090_949_948_782_127_403);
    let checks = plan["checks"].as_array().unwrap();
    assert!(checks.iter().all(|c| c["ok"] == true), "{plan}");

    // The planned layout, configured, passes `check` against the same floor at the same time.
    let layout = &plan["layout"];
    let bits = format!(
        "{}+{}/{}/{}",
        layout["prefix_bits"], layout["time_bits"], layout["worker_bits"], layout["seq_bits"]
    );
    let epoch = plan["epoch"].as_str().unwrap();
    let prefix_value = layout["prefix_value"].to_string();
    let check = |floor: &str| {
        leafid(&[
            "layout",
            "check",
            "--layout",
            &bits,
            "--epoch",
            epoch,
            "--prefix-value",
            &prefix_value,
            "--floor",
            floor,
            "--now",
            NOW,
        ])
    };
    let ok = check(DESIGN_MAX);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    assert!(stdout(&ok).contains("safe          yes"), "{}", stdout(&ok));
    let first_id = plan["first_id"].to_string();
    let at_floor = check(&first_id);
    assert_eq!(at_floor.status.code(), Some(1), "{}", stdout(&at_floor));
    assert!(stdout(&at_floor).contains("safe          NO"));
}

#[test]
fn a_plan_by_cutover_prints_the_server_configuration() {
    let out = leafid(&[
        "layout",
        "plan",
        "--legacy",
        "28/22/13",
        "--legacy-epoch",
        UID_EPOCH,
        "--cutover",
        "2024-10-01T00:00:00+08:00",
        "--margin-seconds",
        "86400",
        "--worker-bits",
        "10",
        "--seq-bits",
        "13",
        "--years",
        "10",
        "--now",
        NOW,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "largest legacy id possible by cutover 2024-09-30T16:00:00Z + 86400 s",
        "[snowflake]\nlayout = \"",
        "epoch = \"",
        "unit = \"seconds\"",
        "min_id_floor = ",
    ] {
        assert!(text.contains(needle), "{needle:?} in\n{text}");
    }
    assert!(!text.contains("FAILED"), "{text}");
}

#[test]
fn an_impossible_plan_exits_1_naming_the_need() {
    let out = leafid(&plan_args(DESIGN_MAX, "13", "100"));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("leafid: plan impossible (years): "),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(stdout(&out).is_empty());

    let full = leafid(&plan_args("9223372036854775807", "13", "10"));
    assert_eq!(full.status.code(), Some(1));
    assert!(
        stderr(&full).contains("plan impossible (max_legacy_id)"),
        "{}",
        stderr(&full)
    );
}

#[test]
fn check_refuses_the_exhausted_legacy_layout() {
    let out = leafid(&[
        "layout",
        "check",
        "--preset",
        "uid-generator",
        "--floor",
        "0",
        "--now",
        NOW,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let report = json(&out);
    assert_eq!(report["ok"], false);
    assert_eq!(report["first_id"], Value::Null);
    assert_eq!(report["exhausted_at"], "2024-11-20T13:24:16Z");
}

/// `plan` in users' terms: a worker count and a rate instead of bits.
fn capacity_args<'a>(workers: &'a str, rate: &'a str, years: &'a str) -> Vec<&'a str> {
    vec![
        "layout",
        "plan",
        "--legacy-preset",
        "uid-generator",
        "--max-legacy-id",
        DESIGN_MAX,
        "--workers",
        workers,
        "--ids-per-second",
        rate,
        "--years",
        years,
        "--now",
        NOW,
    ]
}

#[test]
fn a_plan_in_workers_and_ids_per_second_shows_its_bits_and_headroom() {
    let out = leafid(&capacity_args("300", "5000", "10"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    for needle in [
        "needs          9 worker bits (for 300 workers), 13 sequence bits (for 5000 ids/s per worker), 10 years from 2025-04-15T16:00:00Z\n",
        "capacity       512 workers x 8192 ids/s each = 4194304 ids/s\n",
        "ok     holds_workers: 9 worker bits: 512 worker ids >= 300 workers\n",
    ] {
        assert!(text.contains(needle), "{needle:?} in\n{text}");
    }

    let out = leafid(
        &[
            &capacity_args("300", "1000000", "10")[..],
            &["--per", "cluster", "--json"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan = json(&out);
    assert_eq!(plan["layout"]["worker_bits"], 9);
    assert_eq!(
        plan["layout"]["seq_bits"], 12,
        "1,000,000 / 300 = 3,334 ids/s each"
    );
    assert_eq!(plan["capacity"]["ids_per_second"], 3334);
    assert_eq!(plan["capacity"]["max_ids_per_second_per_worker"], 4096);
    assert_eq!(plan["capacity"]["max_ids_per_second_cluster"], 2_097_152);
}

#[test]
fn a_capacity_refusal_says_how_many_bits_short_and_what_fits() {
    let out = leafid(&capacity_args("8000", "50000", "20"));
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with("leafid: plan impossible (years): years 20 needs"),
        "{err}"
    );
    assert!(
        err.trim_end().ends_with("13 worker bits (8,000 workers) + 16 sequence bits (50,000 ids/s per worker) = 29 bits, 2 bits short: at most 27 leave 20 years; with 20 years, at most 2,048 workers at 50,000 ids/s each, or 8,000 workers at 16,384 ids/s each"),
        "{err}"
    );
    // Both alternatives plan.
    for (workers, rate) in [("2048", "50000"), ("8000", "16384")] {
        let out = leafid(&capacity_args(workers, rate, "20"));
        assert_eq!(
            out.status.code(),
            Some(0),
            "{workers} x {rate}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn max_id_bits_53_plans_below_2_to_the_53_or_says_why_not() {
    let out = leafid(
        &[
            &capacity_args("300", "5000", "10")[..],
            &["--max-id-bits", "53"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        "leafid: plan impossible (max_id_bits): max_legacy_id 9090949948782127403 (observed) is not below 2^53 - 1 = 9007199254740991, the largest id max_id_bits 53 allows: no id within 53 bits is above it; ids above it need max_id_bits 63 or more\n"
    );

    let out = leafid(&[
        "layout",
        "plan",
        "--legacy",
        "41/10/12",
        "--legacy-epoch",
        "1288834974657",
        "--legacy-unit",
        "millis",
        "--max-legacy-id",
        "1000000000000000",
        "--workers",
        "300",
        "--ids-per-second",
        "5000",
        "--unit",
        "seconds",
        "--years",
        "20",
        "--max-id-bits",
        "53",
        "--now",
        NOW,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let plan = json(&out);
    assert!(plan["last_id"].as_u64().unwrap() < 1 << 53, "{plan}");
    assert!(
        plan["first_id"].as_u64().unwrap() > 1_000_000_000_000_000,
        "{plan}"
    );
    assert_eq!(plan["layout"]["prefix_value"], 0);
    assert_eq!(plan["capacity"]["max_id_bits"], 53);
}

#[test]
fn capacity_flags_that_cannot_be_read_exit_2() {
    for (extra, needle) in [
        (&["--per", "galaxy"][..], "--per: rate scope \"galaxy\""),
        (
            &["--worker-bits", "8"][..],
            "worker_bits 8 holds 256, fewer than workers 300",
        ),
        (
            &["--max-id-bits", "64"][..],
            "max_id_bits 64 is not within 3..=63",
        ),
    ] {
        let out = leafid(&[&capacity_args("300", "5000", "10")[..], extra].concat());
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(
            stderr(&out).contains(needle),
            "{needle:?} in {}",
            stderr(&out)
        );
    }
    let mut no_workers = capacity_args("300", "5000", "10");
    no_workers.drain(6..8);
    let out = leafid(&no_workers);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("give worker_bits or workers"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_js_safe_preset_decodes_its_largest_id_as_the_largest_javascript_integer() {
    let out = leafid(&[
        "layout",
        "decode",
        "--preset",
        "js-safe",
        "9007199254740991",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("10+31/8/14 (prefix 0)"), "{text}");
    assert!(text.contains("2093-01-19T03:14:07Z"), "{text}");
}

#[test]
fn bounds_gives_the_ids_of_a_range_and_decode_reads_their_ticks_back() {
    // A masked millisecond layout with a clock-back bit: 6 prefix bits (all ones), 41 bits of
    // milliseconds, a 7-bit worker field (1 clock-back bit over a 6-bit worker id), 9 bits of
    // sequence.
    let layout = [
        "--layout",
        "6+41/c1+6/9",
        "--epoch",
        "2020-01-01T00:00:00Z",
        "--unit",
        "millis",
    ];
    let range = [
        "--from",
        "2025-03-01T08:00:00+08:00",
        "--to",
        "1740787200010",
    ];
    let out = leafid(&[&["layout", "bounds"][..], &layout, &range, &["--json"]].concat());
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let b = json(&out);
    assert_eq!(b["layout"], "6+41/c1+6/9");
    assert_eq!(b["from"], "2025-03-01T00:00:00Z");
    assert_eq!(b["to"], "2025-03-01T00:00:00.010Z");
    assert_eq!(b["first_tick"], "2025-03-01T00:00:00Z");
    assert_eq!(b["last_tick"], "2025-03-01T00:00:00.009Z");
    let (min, max) = (b["min_id"].as_u64().unwrap(), b["max_id"].as_u64().unwrap());
    // The prefix, 63, in the top 6 bits of both; the low 16 bits (worker field and sequence)
    // all zeros and all ones.
    assert_eq!((min >> 57, max >> 57), (63, 63));
    assert_eq!((min & 0xffff, max & 0xffff), (0, 0xffff));

    // Decoded, the lower bound is the first tick with worker 0 and sequence 0; the upper the
    // last tick with every field at its maximum.
    for (id, timestamp, worker, sequence) in [
        (min, "2025-03-01T00:00:00Z", 0, 0),
        (max, "2025-03-01T00:00:00.009Z", 63, 511),
    ] {
        let id = id.to_string();
        let d = leafid(&[&["layout", "decode", &id][..], &layout, &["--json"]].concat());
        assert_eq!(d.status.code(), Some(0), "{}", stderr(&d));
        let d = json(&d);
        assert_eq!(d["timestamp"], timestamp, "{d}");
        assert_eq!(
            (d["worker_id"].as_u64(), d["sequence"].as_u64()),
            (Some(worker), Some(sequence))
        );
    }

    let text = leafid(&[&["layout", "bounds", "--preset", "twitter"][..], &range].concat());
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    assert!(
        stdout(&text).contains("sql         WHERE id BETWEEN "),
        "{}",
        stdout(&text)
    );
}

#[test]
fn bounds_outside_the_layout_or_garbage_exits_2_with_one_line() {
    let bounds = |from: &str, to: &str| {
        leafid(&[
            "layout", "bounds", "--preset", "twitter", "--from", from, "--to", to,
        ])
    };
    for (out, expected) in [
        (bounds("junk", "1"), "--from \"junk\" is neither RFC 3339"),
        (
            bounds("2025-01-02T00:00:00Z", "2025-01-01T00:00:00Z"),
            "empty time range",
        ),
        (
            bounds("2010-01-01T00:00:00Z", "2025-01-01T00:00:00Z"),
            "before the layout's epoch 2010-11-04T01:42:54.657Z",
        ),
        (
            bounds("2025-01-01T00:00:00Z", "2100-01-01T00:00:00Z"),
            "after 2080-07-10T17:30:30.209Z (unix ms 3487858230209), when the layout's time field runs out",
        ),
    ] {
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(expected), "{expected:?} in {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(stdout(&out).is_empty());
    }
    let usage = leafid(&["layout", "bounds", "--preset", "twitter", "--from", "1"]);
    assert_eq!(usage.status.code(), Some(2), "{}", stderr(&usage));
}
