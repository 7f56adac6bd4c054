//! Golden vectors of permuted codes (issue 41): codes issued by the code of `main` before the
//! tag spec existed (commit 5b6a5c2), committed as literal text in
//! `tests/data/permuted-vectors.json`. The FF1 tweak of a permuted tag is frozen
//! ([`TagSpec::tweak`]: the bytes of `tag@period`, the period's row name as it was spelt
//! then), so every code below must decode to its period and sequence, and the engine must
//! issue every (period, sequence) as that very code, for good.

use std::sync::Arc;

use jiff::Timestamp;

use crate::segment::{BizTag, SegmentAllocator, SegmentConfig, SpecStore, TagSpec};
use crate::shapes::keys::{KeyRing, parse_hex_key};
use crate::shapes::permute::Permutation;
use crate::testing::MemoryStore;

#[derive(serde::Deserialize)]
struct Vectors {
    key_id: String,
    key_hex: String,
    tags: Vec<TagVectors>,
}

#[derive(serde::Deserialize)]
struct TagVectors {
    biz_tag: String,
    format: serde_json::Value,
    periods: Vec<PeriodVectors>,
}

#[derive(serde::Deserialize)]
struct PeriodVectors {
    /// An instant within the period.
    at: String,
    /// The period's key.
    period: String,
    /// (sequence, code) pairs.
    codes: Vec<(u64, String)>,
}

fn vectors() -> Vectors {
    let text = include_str!("../../tests/data/permuted-vectors.json");
    serde_json::from_str(text).unwrap()
}

/// Each code decodes to its (period, sequence) through the spec, and FF1 under the spec's
/// tweak sends the sequence to the code's digits.
#[test]
fn permuted_codes_issued_before_the_tag_spec_decode_and_render_the_same() {
    let v = vectors();
    let key = parse_hex_key(&v.key_hex).unwrap();
    let ring = KeyRing::from_keys([(v.key_id.clone(), key)]);
    let mut checked = 0;
    for t in &v.tags {
        let json = t.format.to_string();
        let spec = TagSpec::from_stored(BizTag::parse(&t.biz_tag).unwrap(), &json, &ring).unwrap();
        let format = spec.format().unwrap();
        let p = Permutation::new(&key, format.radix, format.width).unwrap();
        for pv in &t.periods {
            let at: Timestamp = pv.at.parse().unwrap();
            let period = spec.period_at(at).unwrap();
            assert_eq!(period.key, pv.period, "{}", t.biz_tag);
            assert_eq!(
                spec.tweak(&period.key),
                format!("{}@{}", t.biz_tag, pv.period).into_bytes(),
                "the frozen tweak"
            );
            for (seq, code) in &pv.codes {
                let d = spec.decode(code).unwrap();
                assert_eq!(
                    (d.period.as_str(), d.sequence),
                    (pv.period.as_str(), *seq),
                    "{code}"
                );
                let value = p.encrypt(&spec.tweak(&period.key), *seq).unwrap();
                let head = format.head(&period).unwrap();
                assert_eq!(&format.render_after(&head, value).unwrap(), code);
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "{checked}");
}

/// The engine issues the same codes: for each one, a tag whose start value is the code's
/// sequence hands it out first, at an instant of its period.
#[tokio::test]
async fn the_engine_issues_the_same_permuted_codes() {
    let v = vectors();
    let key = parse_hex_key(&v.key_hex).unwrap();
    let config = SegmentConfig {
        keys: Arc::new(KeyRing::from_keys([(v.key_id.clone(), key)])),
        ..SegmentConfig::default()
    };
    for t in &v.tags {
        let json = t.format.to_string();
        for pv in &t.periods {
            let at: Timestamp = pv.at.parse().unwrap();
            for (seq, code) in &pv.codes {
                let store = Arc::new(MemoryStore::default());
                store.insert(&t.biz_tag, *seq as i64, 10);
                assert!(store.put_format(&t.biz_tag, &json).await.unwrap());
                let engine = SegmentAllocator::new(store, config.clone());
                let tag = BizTag::parse(&t.biz_tag).unwrap();
                let spec = engine.spec_of(&tag).await.unwrap().unwrap();
                let ids = engine.next_texts_at(&spec, 1, &|| at).await.unwrap();
                assert_eq!(ids.period, pv.period);
                assert_eq!(
                    ids.first().as_deref(),
                    Some(code.as_str()),
                    "{} {seq}",
                    t.biz_tag
                );
            }
        }
    }
}
