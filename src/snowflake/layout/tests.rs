//! Tests of [`BitLayout`]: uid-generator's reference vectors, the DESIGN.md facts, validation,
//! and property tests of compose/decompose and the tick arithmetic.

use super::*;
use proptest::prelude::*;
use serde_json::Value;

#[test]
fn js_safe_ids_fit_in_53_bits_for_68_years() {
    let l = BitLayout::js_safe();
    assert_eq!(l.bits_string(), "10+31/8/14");
    assert_eq!(
        l,
        BitLayout::parse_bits("10+31/8/14", TimeUnit::Seconds, l.epoch_ms())
            .unwrap()
            .with_prefix_value(0)
            .unwrap()
    );
    assert_eq!(l.largest_id(), (1 << 53) - 1);
    assert_eq!(l.id_bits(), JS_SAFE_ID_BITS);
    assert_eq!(
        format_unix_ms(l.exhausted_at_unix_ms()),
        "2093-01-19T03:14:08Z"
    );
    assert_eq!((l.max_worker_id(), l.max_sequence()), (255, 16_383));
    assert_eq!(BitLayout::twitter().id_bits(), 63);
    assert_eq!(
        l.with_prefix_value(1).unwrap().id_bits(),
        54,
        "a non-zero prefix lifts the ids past 2^53"
    );
}

const UID_EPOCH_MS: i64 = 1_463_673_600_000;

/// The reference vectors: `LEAFID_VECTORS`, else `../shared/reference/...` beside the
/// crate, else the absolute path on the build machine.
fn vectors_path() -> std::path::PathBuf {
    if let Some(path) = std::env::var_os("LEAFID_VECTORS") {
        return path.into();
    }
    let beside = std::path::PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/uid-generator-vectors.json"
    ));
    if beside.exists() {
        return beside;
    }
    "/work/shared/reference/uid-generator-vectors.json".into()
}

fn load_vectors() -> Value {
    let path = vectors_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).expect("vectors file is JSON")
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// "2024-11-20 13:24:15" as written in the vectors file, in our RFC 3339 form.
fn vector_utc(text: &str) -> String {
    format!("{}Z", text.replace(' ', "T"))
}

fn uid() -> BitLayout {
    BitLayout::uid_generator()
}

fn layout(text: &str) -> BitLayout {
    BitLayout::parse_bits(text, TimeUnit::Seconds, UID_EPOCH_MS).unwrap()
}

#[test]
fn every_reference_vector_is_reproduced() {
    let vectors = load_vectors();
    let (mut composed, mut refused, mut parsed) = (0, 0, 0);
    for section in vectors["layouts"].as_array().unwrap() {
        let bits = &section["bits"];
        let (t, w, s) = (
            u(bits, "timestamp"),
            u(bits, "workerId"),
            u(bits, "sequence"),
        );
        let epoch_ms = section["epochSeconds"].as_i64().unwrap() * 1000;
        let l =
            BitLayout::new(0, 0, t as u8, w as u8, s as u8, TimeUnit::Seconds, epoch_ms).unwrap();
        let derived = &section["derived"];
        assert_eq!(l.max_time_delta(), u(derived, "maxDeltaSeconds"));
        assert_eq!(l.max_worker_id(), u(derived, "maxWorkerId"));
        assert_eq!(l.max_sequence(), u(derived, "maxSequence"));
        assert_eq!(l.compose(1, 0, 0), Ok(1 << u(derived, "timestampShift")));
        assert_eq!(l.compose(0, 1, 0), Ok(1 << u(derived, "workerIdShift")));
        assert_eq!(
            format_unix_ms(l.exhausted_at_unix_ms() - 1000),
            vector_utc(derived["lastValidSecondUtc"].as_str().unwrap())
        );

        for v in section["allocate"].as_array().unwrap() {
            let input = &v["inputs"];
            let (delta, worker, seq) = (
                u(input, "deltaSeconds"),
                u(input, "workerId"),
                u(input, "sequence"),
            );
            let java_id = v["expectedId"].as_i64().unwrap() as u64;
            let round = &v["roundTrip"];
            // Java's parse reads the delta with `>>>`, so it keeps the sign bit: that is our
            // prefix (the bits above the time field) shifted back on top of the delta.
            let d = l.decompose(java_id);
            assert_eq!(
                (d.prefix << t) | d.time_delta,
                u(round, "deltaSeconds"),
                "{v}"
            );
            assert_eq!(d.worker_id, u(round, "workerId"), "{v}");
            assert_eq!(d.sequence, u(round, "sequence"), "{v}");

            let ours = l.compose(delta, worker, seq);
            if delta > l.max_time_delta() {
                // Java shifted the delta into the sign bit (negative id) or out of the word
                // (an id of an earlier second): we refuse instead.
                assert_eq!(ours, Err(ComposeError::TimeBitsExhausted), "{v}");
                refused += 1;
            } else if worker > l.max_worker_id() {
                // Java let the worker id bleed into the time field (a duplicate id).
                assert_eq!(ours, Err(ComposeError::WorkerIdTooLarge), "{v}");
                refused += 1;
            } else if seq > l.max_sequence() {
                // Java let the sequence bleed into the worker field (a duplicate id).
                assert_eq!(ours, Err(ComposeError::SequenceTooLarge), "{v}");
                refused += 1;
            } else {
                assert_eq!(ours, Ok(java_id), "{v}");
                assert_eq!(
                    (d.prefix, d.time_delta, d.worker_id, d.sequence),
                    (0, delta, worker, seq)
                );
                composed += 1;
            }
        }

        for v in section["parse"].as_array().unwrap() {
            let id = v["id"].as_i64().unwrap() as u64;
            let want = &v["expected"];
            let d = l.decompose(id);
            let java_delta = (d.prefix << t) | d.time_delta;
            assert_eq!(java_delta, u(want, "deltaSeconds"), "{v}");
            assert_eq!(d.worker_id, u(want, "workerId"), "{v}");
            assert_eq!(d.sequence, u(want, "sequence"), "{v}");
            let at = l.tick_start_unix_ms(java_delta);
            assert_eq!(at, want["unixSeconds"].as_i64().unwrap() * 1000, "{v}");
            assert_eq!(
                format_unix_ms(at),
                vector_utc(want["timestampUtc"].as_str().unwrap())
            );
            // A negative Java id was never a valid id of the layout.
            assert_eq!(l.owns(id), (id as i64) >= 0, "{v}");
            parsed += 1;
        }
    }
    // Guards against a vectors file that silently lost its sections.
    assert_eq!((composed, refused, parsed), (30, 7, 19));
}

#[test]
fn design_section_6_facts_hold() {
    let old = uid();
    let d = old.decompose(9_090_949_948_782_127_403);
    assert_eq!(
        (d.prefix, d.time_delta, d.worker_id, d.sequence),
        (0, 264_581_466, 29, 2347)
    );

    // 2025-04-16 00:00:00 +08:00 is delta 281059200 under the uid-generator epoch.
    let at = parse_epoch("2025-04-16T00:00:00+08:00").unwrap();
    assert_eq!(old.delta_at(at), Ok(281_059_200));
    assert_eq!(
        old.compose(281_059_200, 29, 1024),
        Err(ComposeError::TimeBitsExhausted),
        "Java gave -8789623495789927424"
    );
    let plain = layout("30/20/13");
    assert_eq!(
        plain.compose(281_059_200, 29, 1024),
        Ok(2_414_280_144_480_084_992)
    );
    // ... which collides with the legacy id of the same worker on 2018-08-11.
    let d = old.decompose(2_414_280_144_480_084_992);
    assert_eq!(
        (d.time_delta, d.worker_id, d.sequence),
        (70_264_800, 29, 1024)
    );
    assert_eq!(
        format_unix_ms(old.tick_start_unix_ms(d.time_delta)),
        "2018-08-10T22:00:00Z"
    );

    let mask = layout("7+30/13/13");
    assert_eq!(mask.prefix_value(), 127);
    assert_eq!(
        mask.compose(281_059_200, 29, 1024),
        Ok(9_170_176_006_445_835_264)
    );
    assert_eq!(mask.smallest_id(), 127 << 56);

    assert_eq!(
        format_unix_ms(old.exhausted_at_unix_ms()),
        "2024-11-20T13:24:16Z"
    );
    let last = old.delta_at(parse_epoch("2024-11-20T21:24:15+08:00").unwrap());
    assert_eq!(last, Ok(old.max_time_delta()));

    // 28/22/13 ids pass 127 << 56 from 2024-10-27 06:51:44 UTC on.
    let crossing = parse_epoch("2024-10-27T06:51:44Z").unwrap();
    let delta = old.delta_at(crossing).unwrap();
    assert_eq!(old.compose(delta, 0, 0), Ok(127 << 56));
    assert!(
        old.compose(delta - 1, old.max_worker_id(), old.max_sequence())
            .unwrap()
            < 127 << 56
    );
}

#[test]
fn presets_are_the_documented_layouts() {
    let u = uid();
    assert_eq!(u, layout("28/22/13"));
    assert_eq!(
        u,
        BitLayout::parse_bits(
            "0+28/22/13",
            TimeUnit::Seconds,
            parse_epoch("2016-05-20T00:00:00+08:00").unwrap()
        )
        .unwrap()
    );
    assert_eq!(u.epoch_ms(), 1_463_673_600_000);
    assert_eq!(
        (u.max_time_delta(), u.max_worker_id(), u.max_sequence()),
        (268_435_455, 4_194_303, 8191)
    );
    let t = BitLayout::twitter();
    assert_eq!(t.bits_string(), "41/10/12");
    assert_eq!(
        (t.unit(), t.epoch_ms()),
        (TimeUnit::Millis, 1_288_834_974_657)
    );
    assert_eq!(
        BitLayout::new(0, 0, 41, 10, 12, TimeUnit::Millis, 1_288_834_974_657),
        Ok(t)
    );
    // Twitter's epoch plus 2^41 ms.
    assert_eq!(
        format_unix_ms(t.exhausted_at_unix_ms()),
        "2080-07-10T17:30:30.209Z"
    );
}

#[test]
fn parse_bits_reads_both_forms_and_names_bad_text() {
    let l = layout("7+30/13/13");
    assert_eq!(
        (
            l.prefix_bits(),
            l.prefix_value(),
            l.time_bits(),
            l.worker_bits(),
            l.seq_bits()
        ),
        (7, 127, 30, 13, 13)
    );
    assert_eq!(l.bits_string(), "7+30/13/13");
    assert_eq!(layout(" 28 / 22 / 13 ").bits_string(), "28/22/13");
    for bad in [
        "",
        "28/22",
        "28/22/13/1",
        "a/b/c",
        "7+",
        "+28/22/13",
        "300/22/13",
        "1+2+28/22/13",
    ] {
        let err = BitLayout::parse_bits(bad, TimeUnit::Seconds, 0).unwrap_err();
        assert!(
            matches!(
                err,
                LayoutError::InvalidBits { .. } | LayoutError::BitsDoNotSum { .. }
            ),
            "{bad:?}: {err}"
        );
    }
    let err = BitLayout::parse_bits("28/22/12", TimeUnit::Seconds, 0).unwrap_err();
    assert_eq!(
        err.to_string(),
        "layout 0+28/22/12 has 62 bits; prefix + time + worker + sequence must be 63 (the sign bit makes 64)"
    );
}

#[test]
fn new_rejects_each_invalid_part_with_a_clear_message() {
    let s = TimeUnit::Seconds;
    assert_eq!(
        BitLayout::new(0, 0, 0, 50, 13, s, 0)
            .unwrap_err()
            .to_string(),
        "the time field must be at least 1 bit wide"
    );
    assert_eq!(
        BitLayout::new(0, 0, 50, 0, 13, s, 0),
        Err(LayoutError::ZeroWidthField { field: "worker" })
    );
    assert_eq!(
        BitLayout::new(0, 0, 50, 13, 0, s, 0),
        Err(LayoutError::ZeroWidthField { field: "sequence" })
    );
    assert_eq!(
        BitLayout::new(7, 128, 30, 13, 13, s, 0)
            .unwrap_err()
            .to_string(),
        "prefix value 128 does not fit in 7 prefix bits (largest is 127)"
    );
    assert!(BitLayout::new(0, 1, 37, 13, 13, s, 0).is_err());
    assert_eq!(
        BitLayout::new(0, 0, 28, 22, 13, s, -1),
        Err(LayoutError::EpochOutOfRange { epoch_ms: -1 })
    );
    assert!(BitLayout::new(0, 0, 28, 22, 13, s, MAX_EPOCH_MS).is_ok());
    assert!(BitLayout::new(0, 0, 28, 22, 13, s, MAX_EPOCH_MS + 1).is_err());
    assert!(BitLayout::new(255, 0, 255, 255, 255, s, 0).is_err());
    let l = layout("7+30/13/13");
    assert_eq!(l.with_prefix_value(3).unwrap().prefix_value(), 3);
    assert!(l.with_prefix_value(128).is_err());
    assert!(uid().with_prefix_value(1).is_err());
}

#[test]
fn compose_names_the_field_that_does_not_fit() {
    let l = uid();
    assert_eq!(
        l.compose(1 << 28, 0, 0),
        Err(ComposeError::TimeBitsExhausted)
    );
    assert_eq!(
        l.compose(0, 1 << 22, 0),
        Err(ComposeError::WorkerIdTooLarge)
    );
    assert_eq!(
        l.compose(0, 0, 1 << 13),
        Err(ComposeError::SequenceTooLarge)
    );
    assert_eq!(
        l.compose(u64::MAX, u64::MAX, u64::MAX),
        Err(ComposeError::TimeBitsExhausted)
    );
    assert_eq!(l.largest_id(), i64::MAX as u64);
    assert_eq!(l.smallest_id(), 0);
    let m = layout("7+30/13/13");
    assert_eq!(m.largest_id(), i64::MAX as u64);
    assert_eq!(m.with_prefix_value(0).unwrap().largest_id(), (1 << 56) - 1);
    assert_eq!(m.compose(0, 0, 0), Ok(m.smallest_id()));
}

#[test]
fn time_conversions_floor_and_saturate() {
    let l = uid();
    assert_eq!(l.delta_at(UID_EPOCH_MS - 1), Err(ComposeError::BeforeEpoch));
    assert_eq!(l.delta_at(UID_EPOCH_MS), Ok(0));
    assert_eq!(l.delta_at(UID_EPOCH_MS + 999), Ok(0));
    assert_eq!(l.delta_at(UID_EPOCH_MS + 1000), Ok(1));
    assert_eq!(
        l.delta_at(i64::MAX),
        Ok((i64::MAX - UID_EPOCH_MS) as u64 / 1000)
    );
    assert_eq!(l.tick_start_unix_ms(1), UID_EPOCH_MS + 1000);
    assert_eq!(l.tick_start_unix_ms(u64::MAX), i64::MAX);
    let wide = BitLayout::new(0, 0, 55, 4, 4, TimeUnit::Seconds, 0).unwrap();
    assert_eq!(wide.exhausted_at_unix_ms(), i64::MAX);
    let ms = BitLayout::twitter();
    assert_eq!(ms.delta_at(ms.epoch_ms() + 1), Ok(1));
}

#[test]
fn display_shows_bits_unit_and_epoch() {
    assert_eq!(
        uid().to_string(),
        "28/22/13 seconds since 2016-05-19T16:00:00Z"
    );
    let l = layout("7+30/13/13").with_prefix_value(5).unwrap();
    assert_eq!(
        l.to_string(),
        "7+30/13/13 (prefix 5) seconds since 2016-05-19T16:00:00Z"
    );
}

/// Any valid layout: widths from a random split of 63 bits, any prefix value, any unit.
fn any_layout() -> impl Strategy<Value = BitLayout> {
    (
        0u8..=20,
        1u8..=41,
        1u8..=30,
        any::<bool>(),
        0i64..=MAX_EPOCH_MS,
        any::<u64>(),
    )
        .prop_filter_map("widths must sum to 63", |(p, t, w, millis, epoch, v)| {
            let s = 63u8.checked_sub(p + t + w).filter(|s| *s >= 1)?;
            let unit = if millis {
                TimeUnit::Millis
            } else {
                TimeUnit::Seconds
            };
            let value = if p == 0 { 0 } else { v >> (64 - p) };
            BitLayout::new(p, value, t, w, s, unit, epoch).ok()
        })
}

/// A layout with fields that fit it.
fn layout_and_fields() -> impl Strategy<Value = (BitLayout, u64, u64, u64)> {
    any_layout().prop_flat_map(|l| {
        (
            Just(l),
            0..=l.max_time_delta(),
            0..=l.max_worker_id(),
            0..=l.max_sequence(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn compose_then_decompose_round_trips((l, d, w, s) in layout_and_fields()) {
        let id = l.compose(d, w, s).unwrap();
        prop_assert!(id <= i64::MAX as u64);
        prop_assert!(l.owns(id));
        prop_assert!((l.smallest_id()..=l.largest_id()).contains(&id));
        let back = l.decompose(id);
        prop_assert_eq!(back, DecodedId { prefix: l.prefix_value(), time_delta: d, worker_id: w, clock_back: 0, sequence: s });
    }

    #[test]
    fn decompose_then_compose_round_trips_owned_ids(l in any_layout(), low in any::<u64>()) {
        let id = l.smallest_id() | (low & (l.largest_id() - l.smallest_id()));
        let d = l.decompose(id);
        prop_assert_eq!(l.compose(d.time_delta, d.worker_id, d.sequence), Ok(id));
    }

    #[test]
    fn compose_never_overflows_a_field(l in any_layout(), d in any::<u64>(), w in any::<u64>(), s in any::<u64>()) {
        match l.compose(d, w, s) {
            Ok(id) => {
                prop_assert!(id <= i64::MAX as u64, "never negative as i64");
                prop_assert!(d <= l.max_time_delta() && w <= l.max_worker_id() && s <= l.max_sequence());
                let back = l.decompose(id);
                prop_assert_eq!((back.time_delta, back.worker_id, back.sequence), (d, w, s));
            }
            Err(ComposeError::TimeBitsExhausted) => prop_assert!(d > l.max_time_delta()),
            Err(ComposeError::WorkerIdTooLarge) => prop_assert!(w > l.max_worker_id()),
            Err(ComposeError::SequenceTooLarge) => prop_assert!(s > l.max_sequence()),
            Err(ComposeError::BeforeEpoch) => prop_assert!(false, "compose has no clock"),
        }
    }

    #[test]
    fn ids_order_like_their_fields(
        (l, d1, w1, s1) in layout_and_fields(),
        (d2, w2, s2) in (any::<u64>(), any::<u64>(), any::<u64>()),
    ) {
        let (d2, w2, s2) = (d2 % (l.max_time_delta() + 1), w2 % (l.max_worker_id() + 1), s2 % (l.max_sequence() + 1));
        let (a, b) = (l.compose(d1, w1, s1).unwrap(), l.compose(d2, w2, s2).unwrap());
        prop_assert_eq!(a.cmp(&b), (d1, w1, s1).cmp(&(d2, w2, s2)));
    }

    #[test]
    fn ticks_and_instants_agree(l in any_layout(), offset in 0i64..=1 << 45) {
        let at = l.epoch_ms().saturating_add(offset);
        let d = l.delta_at(at).unwrap();
        prop_assert!(l.tick_start_unix_ms(d) <= at);
        prop_assert!(at < l.tick_start_unix_ms(d + 1));
        prop_assert_eq!(l.delta_at(l.tick_start_unix_ms(d)), Ok(d));
        let exhausted = l.exhausted_at_unix_ms();
        if exhausted < i64::MAX {
            prop_assert_eq!(l.delta_at(exhausted), Ok(l.max_time_delta() + 1));
            prop_assert_eq!(l.delta_at(exhausted - 1), Ok(l.max_time_delta()));
        }
    }

    #[test]
    fn bits_string_and_spec_round_trip(l in any_layout()) {
        let parsed = BitLayout::parse_bits(&l.bits_string(), l.unit(), l.epoch_ms()).unwrap();
        prop_assert_eq!(parsed.with_prefix_value(l.prefix_value()).unwrap(), l);
        let json = serde_json::to_string(&l.to_spec(true)).unwrap();
        let spec: LayoutSpec = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(BitLayout::try_from(spec), Ok(l));
    }
}

#[test]
fn clock_back_bits_take_the_top_of_the_worker_field_and_show_in_the_notation() {
    let l = BitLayout::twitter().with_clock_back_bits(2).unwrap();
    assert_eq!(l.bits_string(), "41/c2+8/12");
    assert_eq!(
        (l.worker_bits(), l.worker_id_bits(), l.clock_back_bits()),
        (10, 8, 2)
    );
    assert_eq!(
        (l.max_worker_id(), l.max_clock_back(), l.max_worker_field()),
        (255, 3, 1023)
    );
    // The notation parses back to the same layout, with a prefix too.
    let parsed = BitLayout::parse_bits("41/c2+8/12", TimeUnit::Millis, l.epoch_ms()).unwrap();
    assert_eq!(parsed, l);
    let p = BitLayout::parse_bits("6+31/c1+12/13", TimeUnit::Seconds, 0).unwrap();
    assert_eq!(p.bits_string(), "6+31/c1+12/13");
    assert_eq!(
        (p.prefix_bits(), p.worker_bits(), p.max_worker_id()),
        (6, 13, 4095)
    );
    // The spec round-trips the field.
    assert_eq!(BitLayout::try_from(l.to_spec(true)), Ok(l));
    // Compose and decompose: the value sits above the worker id, below the time.
    let field = l.worker_field(3, 200).unwrap();
    let id = l.compose(1000, field, 7).unwrap();
    let d = l.decompose(id);
    assert_eq!(
        (d.time_delta, d.clock_back, d.worker_id, d.sequence),
        (1000, 3, 200, 7)
    );
    assert_eq!(id, (1000 << 22) | (3 << 20) | (200 << 12) | 7);
    // The same id under the layout without the bits reads worker 3 * 256 + 200.
    assert_eq!(BitLayout::twitter().decompose(id).worker_id, 968);
    assert_eq!(l.worker_field(4, 0), None);
    assert_eq!(l.worker_field(0, 256), None);
}

#[test]
fn bad_clock_back_bits_are_refused_clearly() {
    for (text, bits) in [("41/c4+6/12", 4), ("49/c2+0/12", 2)] {
        let e = BitLayout::parse_bits(text, TimeUnit::Millis, 0).unwrap_err();
        assert!(
            matches!(e, LayoutError::BadClockBack { clock_back, .. } if clock_back == bits)
                || matches!(e, LayoutError::ZeroWidthField { .. }),
            "{text}: {e:?}"
        );
    }
    for text in ["41/c+8/12", "41/c2/12", "41/c2+x/12", "41/2+c8/12"] {
        assert!(
            matches!(
                BitLayout::parse_bits(text, TimeUnit::Millis, 0),
                Err(LayoutError::InvalidBits { .. })
            ),
            "{text}"
        );
    }
    assert!(matches!(
        BitLayout::twitter().with_clock_back_bits(10),
        Err(LayoutError::BadClockBack { .. })
    ));
    let e = BitLayout::new(0, 0, 62, 1, 0, TimeUnit::Millis, 0);
    assert!(e.is_err());
}
