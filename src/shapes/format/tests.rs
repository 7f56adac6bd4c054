use jiff::Timestamp;
use proptest::prelude::*;

use super::*;
use crate::shapes::period::zone;

fn fmt(json: &str) -> TagFormat {
    let f: TagFormat = serde_json::from_str(json).unwrap();
    f.validate().unwrap();
    f
}

fn period(f: &TagFormat, at: &str) -> Period {
    let tz = zone(&f.time_zone).unwrap();
    f.reset.period_at(at.parse().unwrap(), &tz).unwrap()
}

#[test]
fn the_three_shapes_of_the_docs() {
    let order = fmt(r#"{"date":"yyyyMMdd","width":6,"reset":"daily","time_zone":"Asia/Shanghai"}"#);
    // 16:30 UTC is already the next day in Shanghai.
    let p = period(&order, "2026-11-26T16:30:00Z");
    let id = order.render(&p, 123).unwrap();
    assert_eq!(id, "20261127000123");
    assert_eq!(
        order.decode(&id).unwrap(),
        Decoded {
            period: "20261127".into(),
            sequence: 123
        }
    );

    let invoice = fmt(r#"{"prefix":"INV-","date":"yyyy-","width":6,"reset":"yearly"}"#);
    let p = period(&invoice, "2026-05-01T00:00:00Z");
    assert_eq!(invoice.render(&p, 123).unwrap(), "INV-2026-000123");

    let code = fmt(r#"{"prefix":"T-","radix":"crockford32","width":6,"check":true}"#);
    let p = period(&code, "2026-05-01T00:00:00Z");
    let id = code.render(&p, 1_000_000).unwrap();
    assert_eq!(id.len(), 9);
    assert_eq!(code.decode(&id).unwrap().sequence, 1_000_000);
    assert_eq!(
        code.decode(&id.to_lowercase().replace("t-", "T-"))
            .unwrap()
            .sequence,
        1_000_000
    );
}

#[test]
fn formats_that_would_repeat_an_id_are_refused() {
    for (json, why) in [
        (r#"{"date":"MMdd","width":6,"reset":"daily"}"#, "Year"),
        (r#"{"date":"yyyyMM","width":6,"reset":"daily"}"#, "Day"),
        (r#"{"width":6,"reset":"daily"}"#, "Year"),
        (
            r#"{"date":"yyMMdd","width":6,"reset":"daily"}"#,
            "two-digit",
        ),
        (r#"{"date":"yyyyMMdd","width":6}"#, "needs a reset"),
        (
            r#"{"date":"yyyyMMdd","width":6,"reset":"monthly"}"#,
            "finer",
        ),
        (r#"{"width":0}"#, "width"),
        (r#"{"width":20}"#, "width"),
        (r#"{"prefix":"a b","width":6}"#, "prefix"),
        (r#"{"width":6,"time_zone":"Mars/Base"}"#, "time zone"),
        (
            r#"{"date":"yyyy-----------------------------MM-dd","width":6,"reset":"daily"}"#,
            "at most 32",
        ),
    ] {
        let f: TagFormat = serde_json::from_str(json).unwrap();
        let e = f.validate().unwrap_err().to_string();
        assert!(e.contains(why), "{json}: {e}");
    }
    assert!(serde_json::from_str::<TagFormat>(r#"{"width":6,"widht":7}"#).is_err());
    // 32 characters of date pattern are fine.
    fmt(r#"{"date":"yyyy-----------------------MM-dd","width":6,"reset":"daily"}"#);
}

#[test]
fn a_full_width_is_exhausted_never_widened() {
    let f = fmt(r#"{"date":"yyyyMMdd","width":2,"reset":"daily"}"#);
    let p = period(&f, "2026-11-27T10:00:00Z");
    assert_eq!(f.render(&p, 99).unwrap(), "2026112799");
    assert!(matches!(
        f.render(&p, 100),
        Err(FormatError::Exhausted { .. })
    ));
}

#[test]
fn malformed_texts_are_refused() {
    let f = fmt(r#"{"prefix":"INV-","date":"yyyy-MM-","width":6,"check":true,"reset":"monthly"}"#);
    let p = period(&f, "2026-11-27T10:00:00Z");
    let id = f.render(&p, 42).unwrap();
    assert!(f.decode(&id).is_ok(), "{id}");
    for bad in [
        String::new(),
        id[1..].to_owned(),
        format!("{id}0"),
        id.replace("INV-", "INX-"),
        id.replace("2026-11-", "2026-13-"),
        id.replace("2026-11-", "2026/11-"),
        id.replace("00004", "0000A"),
        format!("{}é", &id[..id.len() - 1]),
    ] {
        assert!(
            matches!(f.decode(&bad), Err(FormatError::Malformed(_))),
            "{bad:?}"
        );
    }
    // Sequence 0 is never issued (sequences start at 1): its text is not an id.
    let zero = f.render(&p, 0).unwrap();
    assert!(f.decode(&zero).is_err());
}

fn any_format() -> impl Strategy<Value = TagFormat> {
    (
        0usize..4,
        1u8..=12,
        any::<bool>(),
        0usize..4,
        "[A-Z0-9-]{0,4}",
        "[a-z]{0,2}",
        0usize..3,
    )
        .prop_map(|(radix, width, check, reset, prefix, suffix, z)| {
            let radix = [
                Radix::Decimal,
                Radix::Base36,
                Radix::Base62,
                Radix::Crockford32,
            ][radix];
            let (reset, date) = [
                (Reset::Never, None),
                (Reset::Yearly, Some("yyyy")),
                (Reset::Monthly, Some("yyyy-MM_")),
                (Reset::Daily, Some("yyyyMMdd")),
            ][reset];
            TagFormat {
                prefix,
                date: date.map(str::to_owned),
                radix,
                width,
                check,
                suffix,
                reset,
                time_zone: ["UTC", "Europe/Berlin", "America/Santiago"][z].to_owned(),
                permute: None,
                gaps: None,
                request_share: None,
            }
        })
}

proptest! {
    #[test]
    fn decode_of_render_is_the_period_and_sequence(
        f in any_format(), seq: u64, secs in 0i64..4_000_000_000,
    ) {
        f.validate().unwrap();
        let seq = 1 + seq % f.max_sequence();
        let tz = zone(&f.time_zone).unwrap();
        let p = f.reset.period_at(Timestamp::from_second(secs).unwrap(), &tz).unwrap();
        let id = f.render(&p, seq).unwrap();
        prop_assert_eq!(id.len(), f.len());
        let d = f.decode(&id).unwrap();
        prop_assert_eq!(d.sequence, seq);
        prop_assert_eq!(d.period, p.key);
    }

    /// String order is (period, sequence) order.
    #[test]
    fn ids_sort_as_strings_in_issue_order(
        f in any_format(), a: u64, b: u64, s1 in 0i64..4_000_000_000, s2 in 0i64..4_000_000_000,
    ) {
        let (a, b) = (1 + a % f.max_sequence(), 1 + b % f.max_sequence());
        let tz = zone(&f.time_zone).unwrap();
        let p1 = f.reset.period_at(Timestamp::from_second(s1).unwrap(), &tz).unwrap();
        let p2 = f.reset.period_at(Timestamp::from_second(s2).unwrap(), &tz).unwrap();
        let (x, y) = (f.render(&p1, a).unwrap(), f.render(&p2, b).unwrap());
        let issue_order = (p1.start, a).cmp(&(p2.start, b));
        prop_assert_eq!(issue_order, x.as_bytes().cmp(y.as_bytes()));
    }

    /// With a decimal check digit (Damm), every single changed digit of the sequence is refused.
    #[test]
    fn a_changed_decimal_digit_is_refused(seq in 1u64..999_999, at in 0usize..6, to in 0u8..10) {
        let f = fmt(r#"{"width":6,"check":true}"#);
        let p = period(&f, "2026-11-27T10:00:00Z");
        let id = f.render(&p, seq).unwrap();
        let mut bytes = id.into_bytes();
        prop_assume!(bytes[at] != b'0' + to);
        bytes[at] = b'0' + to;
        let bad = String::from_utf8(bytes).unwrap();
        prop_assert!(f.decode(&bad).is_err(), "{}", bad);
    }
}

#[test]
fn permuted_and_gapped_formats_are_checked() {
    let ok = fmt(r#"{"prefix":"T-","radix":"crockford32","width":6,"permute":{"key_id":"k_1"}}"#);
    ok.validate().unwrap();
    for (json, why) in [
        (r#"{"width":4,"permute":{"key_id":"k"}}"#, "1000000"),
        (r#"{"width":19,"permute":{"key_id":"k"}}"#, "2^63"),
        (r#"{"width":8,"permute":{"key_id":"K-1"}}"#, "key_id"),
        (
            r#"{"width":8,"permute":{"key_id":"k"},"gaps":{"mean":4}}"#,
            "together",
        ),
        (r#"{"width":8,"gaps":{"mean":1}}"#, "gaps.mean"),
        (r#"{"width":8,"gaps":{"mean":1001}}"#, "gaps.mean"),
    ] {
        let f: TagFormat = serde_json::from_str(json).unwrap();
        let e = f.validate().unwrap_err().to_string();
        assert!(e.contains(why), "{json}: {e}");
    }
    fmt(r#"{"width":8,"gaps":{"mean":16}}"#).validate().unwrap();
    // A permuted id's digits may be all zeros (the permuted value 0): decode reads them, and
    // the caller inverts them; a plain format refuses sequence 0.
    assert_eq!(ok.decode("T-000000").unwrap().sequence, 0);
    assert!(fmt(r#"{"width":6}"#).decode("000000").is_err());
    // Old formats serialize as before: no permute or gaps keys.
    let plain = fmt(r#"{"width":6}"#);
    let json = serde_json::to_string(&plain).unwrap();
    assert!(
        !json.contains("permute") && !json.contains("gaps"),
        "{json}"
    );
}
