//! Unit tests of the per-tag views (`super`): on the in-memory store and the real engine, the
//! formatted tag served across many days by a clock driven by hand
//! ([`SegmentAllocator::next_texts_at`]), and the metrics rendered from the views.

use std::sync::Arc;

use jiff::{SignedDuration, Timestamp};

use crate::metrics::Metrics;
use crate::segment::{BizTag, SegmentAllocator, SegmentConfig, SpecStore, TagSpec};
use crate::shapes::keys::KeyRing;
use crate::testing::MemoryStore;

const DAILY: &str = r#"{"date":"yyyyMMdd","width":6,"reset":"daily","time_zone":"UTC"}"#;
const PERMUTED: &str = r#"{"prefix":"V-","date":"yyyyMMdd","radix":"crockford32","width":6,"reset":"daily","time_zone":"UTC","permute":{"key_id":"k1"}}"#;

/// An engine over a store holding the formatted tags `(tag, format)` (start 1, step 10) and
/// the plain tag `plain`, with the key `k1`.
async fn engine(formatted: &[(&str, &str)]) -> SegmentAllocator {
    let store = Arc::new(MemoryStore::default());
    store.insert("plain", 1, 10);
    for (tag, json) in formatted {
        store.insert(tag, 1, 10);
        assert!(store.put_format(tag, json).await.unwrap());
    }
    let config = SegmentConfig {
        keys: Arc::new(KeyRing::from_keys([("k1".to_owned(), [7; 32])])),
        ..SegmentConfig::default()
    };
    SegmentAllocator::new(store, config)
}

async fn spec(engine: &SegmentAllocator, tag: &str) -> Arc<TagSpec> {
    engine
        .spec_of(&BizTag::parse(tag).unwrap())
        .await
        .unwrap()
        .expect("a formatted tag")
}

/// Serves one id of `tag` on each of the `days` days before today, then one today.
async fn serve_days(engine: &SegmentAllocator, tag: &str, days: i64) {
    let s = spec(engine, tag).await;
    let now = Timestamp::now();
    for back in (0..=days).rev() {
        let at = now - SignedDuration::from_hours(24 * back);
        engine.next_texts_at(&s, 1, &|| at).await.unwrap();
    }
    engine.next_id("plain").await.unwrap();
}

/// The series of a metrics text: every line that is not a comment.
fn series(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.starts_with('#')).collect()
}

/// Issue 42, item 7: `/metrics` is the same size after 1,000 ended days as after one. One
/// engine serves a daily tag yesterday and today, the other on each of the 1,000 days before
/// today and today; both render the same series, the issued total summed over every period.
#[tokio::test]
async fn metrics_have_as_many_series_after_a_thousand_ended_days_as_after_one() {
    let one = engine(&[("daily", DAILY)]).await;
    serve_days(&one, "daily", 1).await;
    let many = engine(&[("daily", DAILY)]).await;
    serve_days(&many, "daily", 1000).await;
    // The engine holds a buffer per period served (1,001 rows): the views fold them.
    assert!(many.snapshots().len() > 1000, "{}", many.snapshots().len());

    let one_text = Metrics::new(Some(one.clone()), None)
        .unwrap()
        .render()
        .unwrap();
    let many_text = Metrics::new(Some(many.clone()), None)
        .unwrap()
        .render()
        .unwrap();
    let (a, b) = (series(&one_text), series(&many_text));
    assert_eq!(
        a.len(),
        b.len(),
        "1 ended day:\n{one_text}\n1000 ended days:\n{many_text}"
    );
    assert!(
        !many_text.contains("daily@"),
        "a period row leaked:\n{many_text}"
    );
    let today = spec(&many, "daily")
        .await
        .period_at(Timestamp::now())
        .unwrap()
        .key;
    let fill = format!(r#"leafid_period_used_ratio{{biz_tag="daily",period="{today}"}}"#);
    assert_eq!(
        b.iter()
            .filter(|l| l.starts_with("leafid_period_used_ratio"))
            .count(),
        1,
        "one fill series per tag:\n{many_text}"
    );
    assert!(many_text.contains(&fill), "{many_text}");
    // Counters are summed over the periods: 1,001 ids, one per day.
    assert!(
        many_text.contains(r#"leafid_ids_issued_total{biz_tag="daily",engine="segment"} 1001"#),
        "{many_text}"
    );
    assert!(
        one_text.contains(r#"leafid_ids_issued_total{biz_tag="daily",engine="segment"} 2"#),
        "{one_text}"
    );
    // The gauges are today's period's: its buffer holds the 9 ids left of its first lease.
    assert!(
        many_text.contains(r#"leafid_segment_remaining_ids{biz_tag="daily",segment="current"} 9"#),
        "{many_text}"
    );
    // The views list the current period's buffer only.
    let current: Vec<String> = many
        .current_snapshots()
        .into_iter()
        .map(|s| s.biz_tag)
        .collect();
    assert_eq!(current, [format!("daily@{today}"), "plain".to_owned()]);
}

/// A permuted tag's and its period rows' counts are secret; a plain or unpermuted formatted
/// tag's are not; a period row of a tag this server does not know is secret (fails closed).
#[tokio::test]
async fn only_a_permuted_tags_counts_are_secret() {
    let engine = engine(&[("daily", DAILY), ("vault", PERMUTED)]).await;
    spec(&engine, "daily").await;
    spec(&engine, "vault").await;
    assert!(engine.hides_volume("vault"));
    assert!(engine.hides_volume("vault@20261128"));
    assert!(!engine.hides_volume("daily"));
    assert!(!engine.hides_volume("daily@20261128"));
    assert!(!engine.hides_volume("plain"));
    assert!(!engine.hides_volume("unknown"));
    assert!(engine.hides_volume("unknown@20261128"));
}

/// A scrape without the admin credential has none of a permuted tag's volume series, and the
/// numbers they carry appear nowhere; an admin's scrape has them. The other tags' stay.
#[tokio::test]
async fn an_anonymous_scrape_shows_no_permuted_volume() {
    let engine = engine(&[("vault", PERMUTED)]).await;
    let s = spec(&engine, "vault").await;
    for _ in 0..4321 {
        engine.next_texts(&s, 1).await.unwrap();
    }
    engine.next_id("plain").await.unwrap();
    let metrics = Metrics::new(Some(engine.clone()), None).unwrap();
    let admin = metrics.render_for(true).unwrap();
    assert!(
        admin.contains(r#"leafid_ids_issued_total{biz_tag="vault",engine="segment"} 4321"#),
        "{admin}"
    );
    let anonymous = metrics.render_for(false).unwrap();
    assert!(!anonymous.contains("4321"), "{anonymous}");
    for family in crate::metrics::VOLUME_FAMILIES {
        let leaked = series(&anonymous)
            .into_iter()
            .find(|l| l.starts_with(family) && l.contains(r#"biz_tag="vault""#));
        assert!(leaked.is_none(), "{leaked:?}");
    }
    // Health stays, and the plain tag's counts too.
    assert!(
        anonymous.contains(r#"leafid_segment_load_failures_total{biz_tag="vault"} 0"#),
        "{anonymous}"
    );
    assert!(
        anonymous.contains(r#"leafid_ids_issued_total{biz_tag="plain",engine="segment"} 1"#),
        "{anonymous}"
    );
}
