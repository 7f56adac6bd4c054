//! Unit tests of [`super::TagSpec`], [`super::PeriodRow`] and [`super::SpecCache`].

use super::*;
use crate::shapes::keys::KeyRing;

fn tag(s: &str) -> BizTag {
    BizTag::parse(s).unwrap()
}

fn ring() -> KeyRing {
    KeyRing::from_keys([("k1".to_owned(), [3; 32])])
}

#[test]
fn period_rows_are_named_recognised_and_traced_to_their_tag() {
    let row = PeriodRow::new(&tag("orders"), "20261127");
    assert_eq!(row.as_str(), "orders@20261127");
    assert_eq!(row.as_biz_tag().as_str(), "orders@20261127");
    assert!(PeriodRow::is_period_row(row.as_str()));
    assert!(PeriodRow::is_period_row("tickets@"));
    assert!(!PeriodRow::is_period_row("orders"));
    assert_eq!(PeriodRow::parent_of("orders@20261127"), Some("orders"));
    assert_eq!(PeriodRow::parent_of("tickets@"), Some("tickets"));
    assert_eq!(PeriodRow::parent_of("orders"), None);
    // No tag a user can name is a period row.
    assert!(BizTag::parse(row.as_str()).is_err());
    assert_eq!(PeriodRow::max_parent_len(Reset::Daily), 119);
    assert_eq!(PeriodRow::max_parent_len(Reset::Never), 127);
}

/// The tweak is frozen as the bytes of `tag@period`, whatever rows are named.
#[test]
fn the_tweak_is_the_frozen_tag_at_period_bytes() {
    let json = r#"{"radix":"base36","width":6,"permute":{"key_id":"k1"},"reset":"daily","date":"yyyyMMdd"}"#;
    let s = TagSpec::from_stored(tag("orders"), json, &ring()).unwrap();
    assert_eq!(s.tweak("20261127"), b"orders@20261127");
    assert_eq!(s.tweak(""), b"orders@");
    assert_eq!(s.ordering(), OrderMode::PerServer);
    assert!(!s.ordered());
}

/// A spec is stored as today's format JSON, byte for byte: what a database holds reads back
/// and writes out unchanged.
#[test]
fn the_stored_json_is_the_format_json_unchanged() {
    for stored in [
        r#"{"prefix":"","date":"yyyyMMdd","radix":"decimal","width":6,"check":false,"suffix":"","reset":"daily","time_zone":"Asia/Shanghai"}"#,
        r#"{"prefix":"T-","date":null,"radix":"crockford32","width":6,"check":true,"suffix":"","reset":"never","time_zone":"UTC","permute":{"key_id":"k1"}}"#,
        r#"{"prefix":"G","date":null,"radix":"decimal","width":9,"check":false,"suffix":"","reset":"never","time_zone":"UTC","gaps":{"mean":5}}"#,
    ] {
        let format = TagSpec::stored_format(stored).unwrap();
        assert_eq!(TagSpec::stored_json(&format).unwrap(), stored);
        let s = TagSpec::from_stored(tag("t"), stored, &ring()).unwrap();
        assert_eq!(s.format(), Some(&format));
    }
}

#[test]
fn shape_errors_are_typed() {
    let daily: TagFormat =
        serde_json::from_str(r#"{"date":"yyyyMMdd","width":6,"reset":"daily"}"#).unwrap();
    assert_eq!(TagSpec::check_new(&tag(&"x".repeat(119)), &daily), Ok(()));
    let e = TagSpec::check_new(&tag(&"x".repeat(120)), &daily).unwrap_err();
    assert_eq!(
        e,
        SpecError::RowNameTooLong {
            reset: Reset::Daily,
            max_tag_len: 119
        }
    );
    // The text users saw before the errors were typed.
    assert_eq!(
        e.to_string(),
        "a formatted biz_tag with a Daily reset is at most 119 bytes (its periods are rows named \
         biz_tag@period within leaf_alloc's 128)"
    );
    let no_day: TagFormat =
        serde_json::from_str(r#"{"date":"yyyyMM","width":6,"reset":"daily"}"#).unwrap();
    assert!(matches!(
        TagSpec::check_new(&tag("t"), &no_day),
        Err(SpecError::InvalidFormat(FormatError::Invalid(_)))
    ));
    assert!(matches!(
        TagSpec::from_stored(tag("t"), "{\"width\":", &ring()),
        Err(SpecError::Json { .. })
    ));
    assert!(matches!(
        TagSpec::from_stored(
            tag("t"),
            r#"{"width":6,"time_zone":"Mars/Olympus"}"#,
            &ring()
        ),
        Err(SpecError::InvalidFormat(_))
    ));
    // Made without its key (a server that lacks it), and serving nothing.
    let s = TagSpec::from_stored(
        tag("t"),
        r#"{"width":6,"permute":{"key_id":"gone"}}"#,
        &ring(),
    )
    .unwrap();
    assert!(matches!(
        s.permutation(),
        Err(SegmentError::KeyUnavailable { key_id, .. }) if key_id == "gone"
    ));
    assert_eq!(
        SpecError::KeyMissing {
            key_id: "gone".into()
        }
        .to_string(),
        "this server holds no key \"gone\": add shapes.keys.gone (a key file) to the \
         configuration of every server first"
    );
}

#[test]
fn the_cache_keeps_one_spec_per_tag_and_skips_unusable_ones() {
    let cache = SpecCache::default();
    let json = r#"{"width":6}"#;
    let a = cache.remember("t", json, &ring()).unwrap();
    let b = cache.remember("t", json, &ring()).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "the first one is kept");
    cache.remember_all(
        [
            ("u".to_owned(), json.to_owned()),
            ("bad".to_owned(), "{".to_owned()),
            ("not a tag".to_owned(), json.to_owned()),
        ],
        &ring(),
    );
    let mut known: Vec<String> = cache.all().keys().cloned().collect();
    known.sort();
    assert_eq!(known, ["t", "u"]);
    assert!(Arc::ptr_eq(&cache.get("t").unwrap(), &a));
}
