//! Golden vectors of permuted codes (issue 41): codes issued by the code of `main` before the
//! tag spec existed (commit 5b6a5c2), committed as literal text in
//! `tests/data/permuted-vectors.json`. The FF1 tweak of a permuted tag is frozen (it is the
//! period's row name as it was spelt then, `tag@period`), so every code below must decode to
//! its period and sequence, and every (period, sequence) must render to its code, for good.

use jiff::Timestamp;

use crate::segment::BizTag;
use crate::segment::allocator::Formatted;
use crate::shapes::TagFormat;
use crate::shapes::keys::{KeyRing, parse_hex_key};
use crate::shapes::permute::Permutation;

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

#[test]
fn permuted_codes_issued_before_the_tag_spec_decode_and_render_the_same() {
    let v = vectors();
    let key = parse_hex_key(&v.key_hex).unwrap();
    let ring = KeyRing::from_keys([(v.key_id.clone(), key)]);
    let mut checked = 0;
    for t in &v.tags {
        let tag = BizTag::parse(&t.biz_tag).unwrap();
        let json = t.format.to_string();
        let f = Formatted::parse(&json, &ring).unwrap();
        let format: TagFormat = serde_json::from_str(&json).unwrap();
        let p = Permutation::new(&key, format.radix, format.width).unwrap();
        for pv in &t.periods {
            let at: Timestamp = pv.at.parse().unwrap();
            let period = f.period_at(at).unwrap();
            assert_eq!(period.key, pv.period, "{}", t.biz_tag);
            let tweak = BizTag::period_row(&tag, &period.key);
            for (seq, code) in &pv.codes {
                let d = f.decode(&tag, code).unwrap();
                assert_eq!(
                    (d.period.as_str(), d.sequence),
                    (pv.period.as_str(), *seq),
                    "{code}"
                );
                let value = p.encrypt(tweak.as_str().as_bytes(), *seq).unwrap();
                let head = format.head(&period).unwrap();
                assert_eq!(&format.render_after(&head, value).unwrap(), code);
                checked += 1;
            }
        }
    }
    assert!(checked >= 40, "{checked}");
}
