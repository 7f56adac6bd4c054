//! Unit tests of the planner, the floor check and the JSON decode, with DESIGN.md section 6's
//! worked example.

use super::*;
use crate::snowflake::layout::{BitLayout, TimeUnit, parse_epoch};

/// The id DESIGN.md decodes: 28/22/13, 2024-10-06T22:51:06Z, worker 29, sequence 2347.
const DESIGN_MAX: i64 = 9_090_949_948_782_127_403;

fn ms(text: &str) -> i64 {
    parse_epoch(text).unwrap()
}

fn old() -> BitLayout {
    BitLayout::uid_generator()
}

/// 2025-04-16T00:00:00+08:00, DESIGN.md's cut-over.
fn cutover() -> i64 {
    ms("2025-04-16T00:00:00+08:00")
}

fn request(max_legacy_id: i64, worker_bits: u8, years: u32) -> PlanRequest {
    PlanRequest {
        legacy: old().to_spec(true),
        max_legacy_id: Some(max_legacy_id),
        cutover: None,
        margin_seconds: DEFAULT_MARGIN_SECONDS,
        worker_bits: Some(worker_bits),
        seq_bits: Some(13),
        workers: None,
        ids_per_second: None,
        ids_per_second_scope: None,
        max_id_bits: None,
        years,
        unit: None,
        epoch: None,
        clock_back_bits: None,
        regions: None,
    }
}

/// The largest 28/22/13 id of the second that starts at `at`.
fn legacy_max_at(at: &str) -> i64 {
    let l = old();
    let delta = l.delta_at(ms(at)).unwrap();
    l.compose(delta, l.max_worker_id(), l.max_sequence())
        .unwrap() as i64
}

fn impossible_need(result: Result<Plan, PlanError>) -> (String, String) {
    match result {
        Err(PlanError::Impossible { need, message }) => (need, message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn invalid_message(result: Result<Plan, PlanError>) -> String {
    match result {
        Err(PlanError::InvalidInput(message)) => message,
        other => panic!("expected invalid input, got {other:?}"),
    }
}

#[test]
fn seven_bit_mask_lifts_only_maxima_observed_before_2024_10_27_06_51_44() {
    let mask = BitLayout::parse_bits("7+30/13/13", TimeUnit::Seconds, cutover()).unwrap();
    let before = legacy_max_at("2024-10-27T06:51:43Z") as u64;
    assert!(check(&mask, before, cutover()).ok);
    let crossing = old().delta_at(ms("2024-10-27T06:51:44Z")).unwrap();
    let first_after = old().compose(crossing, 0, 0).unwrap();
    assert_eq!(first_after, 127 << 56);
    let report = check(&mask, first_after, cutover());
    assert!(!report.ok);
    assert_eq!(report.first_id, Some(127 << 56));
    assert_eq!(
        report.detail,
        "first id from now 9151314442816847872 is not above the floor 9151314442816847872"
    );
}

#[test]
fn fixed_fresh_epoch_picks_the_7_bit_mask_exactly_between_its_boundaries() {
    let plan_for = |max: i64| {
        let mut req = request(max, 13, 10);
        req.epoch = Some("2025-04-16T00:00:00+08:00".to_owned());
        plan(&req, cutover())
    };
    let shape = |p: &Plan| {
        (
            p.layout.prefix_bits,
            p.layout.prefix_value,
            p.layout.time_bits,
        )
    };

    // 6 bits of mask (63 << 57 = 126 << 56) suffice until 2024-10-03T00:19:12Z ...
    assert_eq!(
        old().compose(old().delta_at(ms("2024-10-03T00:19:12Z")).unwrap(), 0, 0),
        Ok(126 << 56)
    );
    let p = plan_for(legacy_max_at("2024-10-03T00:19:11Z")).unwrap();
    assert_eq!(shape(&p), (6, Some(63), 31));
    // ... then the 7-bit mask of DESIGN.md until 2024-10-27T06:51:44Z ...
    for at in [
        "2024-10-03T00:19:12Z",
        "2024-10-06T22:51:06Z",
        "2024-10-27T06:51:43Z",
    ] {
        let p = plan_for(legacy_max_at(at)).unwrap();
        assert_eq!(shape(&p), (7, Some(127), 30), "{at}");
        assert_eq!(p.first_id, 127 << 56);
        assert_eq!(p.epoch, "2025-04-15T16:00:00Z");
        assert_eq!(p.exhausted_at, "2059-04-25T05:37:04Z");
    }
    let p = plan_for(DESIGN_MAX).unwrap();
    let mask = p.bit_layout().unwrap();
    assert_eq!(mask.compose(0, 29, 1024), Ok(9151314442817086464));
    // ... and an 8-bit one for maxima observed from then on.
    let p = plan_for(127 << 56).unwrap();
    assert_eq!(shape(&p), (8, Some(255), 29));
    assert_eq!(p.first_id, 255 << 55);
}

#[test]
fn free_epoch_reaches_the_bound_for_the_design_maximum() {
    let p = plan(&request(DESIGN_MAX, 13, 10), cutover()).unwrap();
    let layout = p.bit_layout().unwrap();
    assert_eq!(layout.bits_string(), "6+31/13/13");
    assert_eq!(layout.prefix_value(), 63);
    // The first 2^26-id block above the maximum, and every block after it up to i64::MAX.
    let first_block = (DESIGN_MAX as u64 >> 26) + 1;
    assert_eq!(p.first_id, first_block << 26);
    let blocks_left = (1u64 << 37) - first_block;
    let epoch = cutover() - 1000 * i64::try_from(first_block - (63 << 31)).unwrap();
    assert_eq!(layout.epoch_ms(), epoch);
    assert_eq!(
        layout.exhausted_at_unix_ms(),
        cutover() + 1000 * blocks_left as i64
    );
    assert_eq!(p.epoch, "2019-10-07T23:47:11Z");
    assert_eq!(p.exhausted_at, "2087-10-26T03:01:19Z");
    // 7+30/13/13 with a fresh epoch would end 2059: the time lift buys 28 more years.
    assert!(p.checks.iter().all(|c| c.ok));
}

#[test]
fn plan_json_has_the_contract_shape() {
    let p = plan(&request(DESIGN_MAX, 13, 10), cutover()).unwrap();
    let json = serde_json::to_value(&p).unwrap();
    let mut keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "capacity",
            "checks",
            "epoch",
            "exhausted_at",
            "first_id",
            "last_id",
            "layout"
        ]
    );
    assert!(json["layout"].get("epoch").is_none());
    assert_eq!(json["layout"]["unit"], "seconds");
    assert_eq!(json["last_id"], i64::MAX);
    let names: Vec<_> = p.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "first_id_above_max_legacy_id",
            "last_id_within_i64",
            "years_of_life",
            "epoch_not_in_future"
        ]
    );
    assert_eq!(serde_json::from_value::<Plan>(json).unwrap(), p);
}

#[test]
fn cutover_takes_the_largest_legacy_id_by_cutover_plus_margin() {
    let mut req = request(0, 13, 10);
    req.max_legacy_id = None;
    req.cutover = Some("2024-10-01T00:00:00+08:00".to_owned());
    let needs = req.needs(cutover()).unwrap();
    assert_eq!(
        needs.max_legacy_id,
        legacy_max_at("2024-10-01T00:00:00+08:00") as u64 + (86_400 << 35)
    );
    req.margin_seconds = 0;
    let needs = req.needs(cutover()).unwrap();
    assert_eq!(
        needs.max_legacy_id,
        legacy_max_at("2024-10-01T00:00:00+08:00") as u64
    );
    assert!(plan(&req, cutover()).unwrap().first_id > needs.max_legacy_id);

    // A cut-over after the legacy ran out clamps at its largest id: nothing is above it.
    req.cutover = Some("2025-04-16T00:00:00+08:00".to_owned());
    assert_eq!(req.needs(cutover()).unwrap().max_legacy_id, i64::MAX as u64);
    assert_eq!(impossible_need(plan(&req, cutover())).0, "max_legacy_id");
}

#[test]
fn an_exhausted_legacy_leaves_no_room() {
    for w in [10, 13, 16] {
        let (need, message) = impossible_need(plan(&request(i64::MAX, w, 10), cutover()));
        assert_eq!(need, "max_legacy_id");
        assert_eq!(
            message,
            format!(
                "max_legacy_id 9223372036854775807 (observed) leaves no room above it for {w} worker bits and 13 sequence bits: every tick takes an aligned block of 2^{} ids and none fits between it and i64::MAX; {w} worker bits + 13 sequence bits = {} bits, and no plan exists with fewer either, down to 1 worker bit and 1 sequence bit",
                w + 13,
                w + 13
            )
        );
    }
}

#[test]
fn too_many_years_names_the_years_and_the_best_layout() {
    let (need, message) = impossible_need(plan(&request(DESIGN_MAX, 13, 100), cutover()));
    assert_eq!(need, "years");
    assert!(message.starts_with("years 100 needs ids through 2125-04-15T16:00:00Z, 3155673601 seconds from now (32 time bits), but with 13 worker bits and 13 sequence bits only 1973242879 seconds remain above max_legacy_id 9090949948782127403 (observed): the best layout, 6+31/13/13 seconds since 2019-10-07T23:47:11Z, runs out at 2087-10-26T03:01:19Z"), "{message}");
    // One year less than the bound is fine.
    assert!(plan(&request(DESIGN_MAX, 13, 60), cutover()).is_ok());
}

#[test]
fn a_fixed_epoch_too_old_is_refused_as_the_epoch() {
    let mut req = request(0, 13, 0);
    req.worker_bits = Some(30);
    req.seq_bits = Some(30);
    req.epoch = Some("1970-01-01T00:00:00Z".to_owned());
    let (need, message) = impossible_need(plan(&req, cutover()));
    assert_eq!(need, "epoch");
    assert!(message.contains("leave out \"epoch\""), "{message}");
    req.epoch = None;
    assert!(plan(&req, cutover()).is_ok());
}

#[test]
fn invalid_inputs_are_named() {
    let now = cutover();
    let mut both = request(1, 13, 10);
    both.cutover = Some("2024-01-01T00:00:00Z".to_owned());
    assert!(invalid_message(plan(&both, now)).contains("not both"));
    let mut neither = request(1, 13, 10);
    neither.max_legacy_id = None;
    assert!(invalid_message(plan(&neither, now)).contains("give max_legacy_id"));
    assert!(invalid_message(plan(&request(-1, 13, 10), now)).contains("negative"));
    assert!(invalid_message(plan(&request(1, 50, 10), now)).contains("at most 62"));
    assert!(invalid_message(plan(&request(1, 0, 10), now)).contains("at least 1"));
    assert!(invalid_message(plan(&request(1, 13, 1001), now)).contains("more than 1000"));
    let mut future = request(1, 13, 10);
    future.epoch = Some("2030-01-01T00:00:00Z".to_owned());
    assert!(invalid_message(plan(&future, now)).contains("must not be in the future"));
    let mut bad_epoch = request(1, 13, 10);
    bad_epoch.epoch = Some("2020-01-01".to_owned());
    assert!(invalid_message(plan(&bad_epoch, now)).starts_with("epoch: invalid epoch"));
    let mut no_epoch = request(1, 13, 10);
    no_epoch.legacy.epoch = None;
    assert!(invalid_message(plan(&no_epoch, now)).starts_with("legacy: the layout has no epoch"));
    let mut early = request(1, 13, 10);
    early.max_legacy_id = None;
    early.cutover = Some("2010-01-01T00:00:00Z".to_owned());
    assert!(invalid_message(plan(&early, now)).contains("before the legacy epoch"));
    early.cutover = Some("soon".to_owned());
    assert!(invalid_message(plan(&early, now)).contains("not RFC 3339"));
    assert!(invalid_message(plan(&request(1, 13, 10), -1)).contains("between 1970 and 9999"));
}

#[test]
fn a_millisecond_layout_can_follow_a_second_one() {
    let max = legacy_max_at("2020-01-01T00:00:00Z");
    let mut req = request(max, 10, 20);
    req.seq_bits = Some(12);
    req.unit = Some(TimeUnit::Millis);
    let p = plan(&req, cutover()).unwrap();
    assert_eq!(p.layout.unit, TimeUnit::Millis);
    let layout = p.bit_layout().unwrap();
    assert!(layout.smallest_id_from(cutover()).unwrap() > max as u64);
    // Above the design maximum, 22 worker + sequence bits leave under a year of milliseconds.
    let mut late = req.clone();
    late.max_legacy_id = Some(DESIGN_MAX);
    assert_eq!(impossible_need(plan(&late, cutover())).0, "years");
    assert_eq!(layout.unit(), TimeUnit::Millis);
}

#[test]
fn check_reports_first_id_and_time_left() {
    let report = check(&old(), 0, ms("2024-11-20T13:24:15Z"));
    assert!(report.ok);
    assert_eq!(report.seconds_left, 1);
    assert_eq!(report.exhausted_at, "2024-11-20T13:24:16Z");
    let report = check(&old(), 0, ms("2024-11-20T13:24:16Z"));
    assert!(!report.ok);
    assert_eq!(report.first_id, None);
    assert_eq!(report.seconds_left, 0);
    assert_eq!(report.detail, "time field ran out at 2024-11-20T13:24:16Z");
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["layout"]["epoch"], "2016-05-19T16:00:00Z");
    // Before the epoch the first id is that of tick 0.
    let report = check(&old(), 0, 0);
    assert_eq!(report.first_id, Some(0));
    assert!(!report.ok);
}

#[test]
fn decode_json_shows_every_field() {
    let json = decode_json(&old(), DESIGN_MAX as u64);
    assert_eq!(
        json,
        serde_json::json!({
            "id": 9_090_949_948_782_127_403u64,
            "prefix": 0,
            "time_delta": 264_581_466,
            "timestamp": "2024-10-06T22:51:06Z",
            "worker_id": 29,
            "sequence": 2347,
        })
    );
    let mask = BitLayout::parse_bits(
        "7+30/13/13",
        TimeUnit::Seconds,
        ms("2016-05-20T00:00:00+08:00"),
    )
    .unwrap();
    let json = decode_json(&mask, 9_170_176_006_445_835_264);
    assert_eq!(json["prefix"], 127);
    assert_eq!(json["time_delta"], 281_059_200);
    assert_eq!(json["timestamp"], "2025-04-15T16:00:00Z");
    assert_eq!(
        (json["worker_id"].as_u64(), json["sequence"].as_u64()),
        (Some(29), Some(1024))
    );
}

/// A request in users' terms against the DESIGN maximum.
fn capacity_request(workers: u64, ids_per_second: u64, years: u32) -> PlanRequest {
    PlanRequest {
        worker_bits: None,
        seq_bits: None,
        workers: Some(workers),
        ids_per_second: Some(ids_per_second),
        ..request(DESIGN_MAX, 13, years)
    }
}

#[test]
fn capacity_becomes_the_fewest_bits_that_hold_it() {
    for (n, bits) in [
        (1, 1),
        (2, 1),
        (3, 2),
        (300, 9),
        (512, 9),
        (513, 10),
        (50_000, 16),
        (65_536, 16),
        (65_537, 17),
        (u64::MAX, 64),
    ] {
        assert_eq!(bits_for(n), bits, "{n}");
    }
    let needs = capacity_request(300, 50_000, 10).needs(cutover()).unwrap();
    assert_eq!((needs.worker_bits, needs.seq_bits), (9, 16));
    assert_eq!(
        (needs.workers, needs.ids_per_second),
        (Some(300), Some(50_000))
    );

    // Milliseconds: 50,000 ids/s is 50 per ms, 6 bits.
    let mut millis = capacity_request(300, 50_000, 10);
    millis.unit = Some(TimeUnit::Millis);
    assert_eq!(millis.needs(cutover()).unwrap().seq_bits, 6);

    // A cluster's 1,000,000 ids/s over 300 workers: 3,334 each, 12 bits.
    let mut cluster = capacity_request(300, 1_000_000, 10);
    cluster.ids_per_second_scope = Some(RateScope::Cluster);
    let needs = cluster.needs(cutover()).unwrap();
    assert_eq!((needs.seq_bits, needs.ids_per_second), (12, Some(3_334)));

    // Bits and capacity together: the bits are kept when they hold the capacity.
    let mut both = capacity_request(300, 50_000, 10);
    both.worker_bits = Some(13);
    both.seq_bits = Some(16);
    let needs = both.needs(cutover()).unwrap();
    assert_eq!((needs.worker_bits, needs.seq_bits), (13, 16));
}

#[test]
fn a_plan_states_its_capacity_and_checks_it() {
    let p = plan(&capacity_request(300, 5_000, 10), cutover()).unwrap();
    assert_eq!((p.layout.worker_bits, p.layout.seq_bits), (9, 13));
    assert_eq!(
        p.capacity,
        PlanCapacity {
            workers: Some(300),
            ids_per_second: Some(5_000),
            max_workers: 512,
            max_ids_per_second_per_worker: 8_192,
            max_ids_per_second_cluster: 4_194_304,
            max_id_bits: 63,
            region_bits: 0,
        }
    );
    let detail = |name: &str| {
        let c = p.checks.iter().find(|c| c.name == name).unwrap();
        assert!(c.ok);
        c.detail.clone()
    };
    assert_eq!(
        detail("holds_workers"),
        "9 worker bits: 512 worker ids >= 300 workers"
    );
    assert_eq!(
        detail("holds_ids_per_second"),
        "13 sequence bits: 8,192 ids/s per worker >= 5,000 ids/s per worker; 4,194,304 ids/s with all 512 worker ids"
    );
    // Requests in bits have no capacity checks and no requested figures.
    let bits = plan(&request(DESIGN_MAX, 13, 10), cutover()).unwrap();
    assert_eq!(
        (bits.capacity.workers, bits.capacity.ids_per_second),
        (None, None)
    );
    assert!(!bits.checks.iter().any(|c| c.name.starts_with("holds_")));
}

#[test]
fn a_refusal_says_how_many_bits_short_and_what_fits() {
    let (need, message) = impossible_need(plan(&capacity_request(8_000, 50_000, 20), cutover()));
    assert_eq!(need, "years");
    assert!(
        message.ends_with("; 13 worker bits (8,000 workers) + 16 sequence bits (50,000 ids/s per worker) = 29 bits, 2 bits short: at most 27 leave 20 years; with 20 years, at most 2,048 workers at 50,000 ids/s each, or 8,000 workers at 16,384 ids/s each"),
        "{message}"
    );
    // Both alternatives are plans, and either with one more worker bit or sequence bit is not.
    assert!(plan(&capacity_request(2_048, 50_000, 20), cutover()).is_ok());
    assert!(plan(&capacity_request(8_000, 16_384, 20), cutover()).is_ok());
    assert!(plan(&capacity_request(2_049, 50_000, 20), cutover()).is_err());
    assert!(plan(&capacity_request(8_000, 16_385, 20), cutover()).is_err());

    // In bits: the same figures without the capacity words.
    let mut bits = request(DESIGN_MAX, 13, 20);
    bits.seq_bits = Some(16);
    let (_, message) = impossible_need(plan(&bits, cutover()));
    assert!(
        message.ends_with("; 13 worker bits + 16 sequence bits = 29 bits, 2 bits short: at most 27 leave 20 years; with 20 years, at most 2,048 workers at 65,536 ids/s each, or 8,192 workers at 16,384 ids/s each"),
        "{message}"
    );
}

#[test]
fn max_id_bits_keeps_every_id_below_2_to_the_53() {
    // A Twitter-like legacy far below 2^53.
    let legacy = BitLayout::twitter();
    let max = legacy
        .compose(legacy.delta_at(cutover()).unwrap(), 0, 0)
        .unwrap()
        >> 10;
    // 300 workers at 5,000 ids/s: 22 bits, 2^31 seconds below 2^53.
    let mut req = capacity_request(300, 5_000, 20);
    req.legacy = legacy.to_spec(true);
    req.max_legacy_id = Some(max as i64);
    req.max_id_bits = Some(53);
    req.unit = Some(TimeUnit::Seconds);
    let p = plan(&req, cutover()).unwrap();
    assert!(p.last_id < 1 << 53, "{}", p.last_id);
    assert!(p.first_id > max);
    assert_eq!(p.layout.prefix_bits, 10);
    assert_eq!(p.layout.prefix_value, Some(0));
    assert_eq!(p.capacity.max_id_bits, 53);
    let c = p
        .checks
        .iter()
        .find(|c| c.name == "last_id_within_max_id_bits")
        .unwrap();
    assert!(
        c.ok && c.detail.ends_with("<= 2^53 - 1 = 9007199254740991"),
        "{}",
        c.detail
    );

    // Above 2^53 no id within 53 bits can lift: the refusal names max_id_bits.
    let mut req = capacity_request(300, 50_000, 20);
    req.max_id_bits = Some(53);
    let (need, message) = impossible_need(plan(&req, cutover()));
    assert_eq!(need, "max_id_bits");
    assert_eq!(
        message,
        "max_legacy_id 9090949948782127403 (observed) is not below 2^53 - 1 = 9007199254740991, the largest id max_id_bits 53 allows: no id within 53 bits is above it; ids above it need max_id_bits 63 or more"
    );
    req.max_legacy_id = Some((1 << 53) - 2);
    let (need, message) = impossible_need(plan(&req, cutover()));
    assert_eq!(need, "max_legacy_id");
    assert!(
        message.contains("none fits between it and 2^53 - 1 (max_id_bits 53)"),
        "{message}"
    );
}

#[test]
fn capacity_requests_that_cannot_be_read_are_named() {
    let now = cutover();
    let message = |req: PlanRequest| invalid_message(plan(&req, now));
    let mut r = capacity_request(0, 50_000, 10);
    assert_eq!(message(r.clone()), "workers must be at least 1");
    r.workers = Some(300);
    r.ids_per_second = Some(0);
    assert_eq!(message(r.clone()), "ids_per_second must be at least 1");
    r.ids_per_second = None;
    assert!(message(r.clone()).starts_with("give seq_bits or ids_per_second"));
    r.ids_per_second_scope = Some(RateScope::Cluster);
    assert_eq!(
        message(r.clone()),
        "ids_per_second_scope is given without ids_per_second"
    );
    r.ids_per_second = Some(1_000_000);
    r.workers = None;
    r.worker_bits = Some(9);
    assert!(message(r.clone()).contains("cluster-wide needs workers"));
    let mut r = capacity_request(300, 50_000, 10);
    r.workers = None;
    assert!(message(r).starts_with("give worker_bits or workers"));

    let mut small = capacity_request(300, 50_000, 10);
    small.worker_bits = Some(8);
    assert_eq!(
        message(small.clone()),
        "worker_bits 8 holds 256, fewer than workers 300: give at least 9 worker_bits, or leave worker_bits out to derive it"
    );
    small.worker_bits = None;
    small.seq_bits = Some(15);
    assert_eq!(
        message(small),
        "seq_bits 15 holds 32768, fewer than ids_per_second 50000 (50000 ids per second): give at least 16 seq_bits, or leave seq_bits out to derive it"
    );
    for bits in [2, 64] {
        let mut r = capacity_request(300, 50_000, 10);
        r.max_id_bits = Some(bits);
        assert!(message(r).starts_with(&format!("max_id_bits {bits} is not within 3..=63")));
    }
    assert_eq!("cluster".parse(), Ok(RateScope::Cluster));
    assert!("Cluster".parse::<RateScope>().is_err());
}

#[test]
fn clock_back_bits_take_their_place_in_the_worker_field_of_the_plan() {
    // 11 worker bits + 2 clock-back bits plan exactly like 13 worker bits: the same blocks,
    // epoch and end, with 2,048 workers instead of 8,192.
    let plain = plan(&request(DESIGN_MAX, 13, 10), cutover()).unwrap();
    let req = PlanRequest {
        clock_back_bits: Some(2),
        ..request(DESIGN_MAX, 11, 10)
    };
    let p = plan(&req, cutover()).unwrap();
    let layout = p.bit_layout().unwrap();
    assert_eq!(layout.bits_string(), "6+31/c2+11/13");
    assert_eq!(layout.max_worker_id(), 2047);
    assert_eq!(layout.max_clock_back(), 3);
    assert_eq!(
        (p.first_id, &p.epoch, &p.exhausted_at),
        (plain.first_id, &plain.epoch, &plain.exhausted_at)
    );
    assert!(p.checks.iter().all(|c| c.ok));
    let too_many = PlanRequest {
        clock_back_bits: Some(4),
        ..request(DESIGN_MAX, 11, 10)
    };
    assert!(invalid_message(plan(&too_many, cutover())).contains("clock_back_bits 4"));
}

/// Regions: `ceil(log2(regions))` region bits on top of each region's worker bits, shown in the
/// capacity; more than 8 regions (lanes 0 to 7) or none is refused.
#[test]
fn regions_add_their_bits_above_each_regions_workers() {
    let mut req = request(DESIGN_MAX, 8, 10);
    let plain = plan(&req, cutover()).unwrap();
    req.regions = Some(3);
    let p = plan(&req, cutover()).unwrap();
    assert_eq!(p.capacity.region_bits, 2);
    assert_eq!(p.layout.worker_bits, plain.layout.worker_bits + 2);
    assert_eq!(p.capacity.max_workers, 4 << 8);
    req.regions = Some(1);
    assert_eq!(plan(&req, cutover()).unwrap().capacity.region_bits, 0);
    for n in [0, 9] {
        req.regions = Some(n);
        assert!(
            invalid_message(plan(&req, cutover())).contains("1 to 8"),
            "{n}"
        );
    }
}
