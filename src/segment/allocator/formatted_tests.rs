//! Unit tests of formatted tags (`super`) on the in-memory store and the real engine, with a
//! clock driven by hand ([`SegmentAllocator::next_texts_at`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use jiff::Timestamp;

use crate::segment::spec::DecodeError;
use crate::segment::{
    BizTag, SegmentAllocator, SegmentConfig, SegmentError, SpecStore, TagAdminStore, TagSpec,
};
use crate::shapes::FormatError;
use crate::shapes::keys::KeyRing;
use crate::testing::MemoryStore;

const KEY: [u8; 32] = [9; 32];

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

/// An engine over a store holding `tag` (start value `start`, step 10) with the format `json`,
/// holding the key `k1`.
async fn setup(tag: &str, start: i64, json: &str) -> (Arc<MemoryStore>, SegmentAllocator) {
    let store = Arc::new(MemoryStore::default());
    store.insert(tag, start, 10);
    assert!(store.put_format(tag, json).await.unwrap());
    let config = SegmentConfig {
        keys: Arc::new(KeyRing::from_keys([("k1".to_owned(), KEY)])),
        ..SegmentConfig::default()
    };
    let engine = SegmentAllocator::new(store.clone(), config);
    (store, engine)
}

async fn spec(engine: &SegmentAllocator, tag: &str) -> Arc<TagSpec> {
    engine
        .spec_of(&BizTag::parse(tag).unwrap())
        .await
        .unwrap()
        .expect("a formatted tag")
}

fn texts(ids: &super::FormattedIds) -> Vec<String> {
    let mut out = Vec::new();
    ids.for_each(|s| {
        out.push(s.to_owned());
        Ok::<_, ()>(())
    })
    .unwrap();
    out
}

const DAILY: &str = r#"{"date":"yyyyMMdd","width":6,"reset":"daily","time_zone":"UTC"}"#;

#[tokio::test]
async fn a_period_row_is_made_on_first_use_at_the_tags_start_value() {
    let (store, engine) = setup("orders", 500, DAILY).await;
    let s = spec(&engine, "orders").await;
    assert!(store.get_tag("orders@20261127").await.unwrap().is_none());
    let at = ts("2026-11-27T10:00:00Z");
    let ids = engine.next_texts_at(&s, 3, &|| at).await.unwrap();
    assert_eq!(
        texts(&ids),
        ["20261127000500", "20261127000501", "20261127000502"]
    );
    assert_eq!(ids.period, "20261127");
    assert_eq!(ids.period_end, ts("2026-11-28T00:00:00Z"));
    let row = store.get_tag("orders@20261127").await.unwrap().unwrap();
    assert_eq!(
        row.step, 1,
        "a period row floors no lease: its leases are the engine's, capped"
    );
    // The parent row never leases: it keeps the start value.
    assert_eq!(store.get_tag("orders").await.unwrap().unwrap().max_id, 500);
    // The next day starts at the start value again, in a row of its own.
    let next = ts("2026-11-28T00:00:00Z");
    let ids = engine.next_texts_at(&s, 1, &|| next).await.unwrap();
    assert_eq!(texts(&ids), ["20261128000500"]);
    assert!(store.get_tag("orders@20261128").await.unwrap().is_some());
}

#[tokio::test]
async fn a_request_straddling_a_period_end_gets_ids_of_one_period_only() {
    let (_store, engine) = setup("orders", 1, DAILY).await;
    let s = spec(&engine, "orders").await;
    // The first reading is before midnight, every later one after it: the ids taken for the
    // old day are dropped and the request is served from the new day.
    let reads = AtomicUsize::new(0);
    let clock = || {
        if reads.fetch_add(1, Ordering::Relaxed) == 0 {
            ts("2026-11-27T23:59:59.999Z")
        } else {
            ts("2026-11-28T00:00:00.001Z")
        }
    };
    let ids = engine.next_texts_at(&s, 4, &clock).await.unwrap();
    assert_eq!(ids.period, "20261128");
    assert_eq!(
        texts(&ids),
        [
            "20261128000001",
            "20261128000002",
            "20261128000003",
            "20261128000004"
        ]
    );
    // The old day's ids were leased and dropped (a gap), never handed out.
    let back = ts("2026-11-27T23:59:59.999Z");
    let late = engine.next_texts_at(&s, 1, &|| back).await.unwrap();
    let seq = s.decode(&late.first().unwrap()).unwrap().sequence;
    assert!(
        seq > 10,
        "{seq}: above the dropped lease (1 to 10, step 10)"
    );
}

#[tokio::test]
async fn a_sequence_is_exhausted_at_the_width_and_never_wraps() {
    let json = r#"{"date":"yyyyMMdd","width":2,"reset":"daily","time_zone":"UTC"}"#;
    let (_store, engine) = setup("small", 97, json).await;
    let s = spec(&engine, "small").await;
    let at = ts("2026-11-27T10:00:00Z");
    let ids = engine.next_texts_at(&s, 5, &|| at).await.unwrap();
    assert_eq!(texts(&ids), ["2026112797", "2026112798", "2026112799"]);
    match engine.next_texts_at(&s, 1, &|| at).await {
        Err(SegmentError::SequenceExhausted {
            period,
            next_start,
            retry_after_secs,
        }) => {
            assert_eq!(period, "20261127");
            assert_eq!(next_start, "2026-11-28T00:00:00Z");
            assert_eq!(retry_after_secs, 14 * 3600);
        }
        other => panic!("{other:?}"),
    }
    // The next day serves again, from its start.
    let next = ts("2026-11-28T00:00:00Z");
    let ids = engine.next_texts_at(&s, 1, &|| next).await.unwrap();
    assert_eq!(texts(&ids), ["2026112897"]);
}

#[tokio::test]
async fn a_permuted_tag_without_its_key_serves_nothing() {
    let json = r#"{"prefix":"T-","radix":"crockford32","width":6,"permute":{"key_id":"other"}}"#;
    let (store, engine) = setup("tickets", 1, json).await;
    let s = spec(&engine, "tickets").await;
    let at = ts("2026-11-27T10:00:00Z");
    match engine.next_texts_at(&s, 3, &|| at).await {
        Err(SegmentError::KeyUnavailable { tag, key_id }) => {
            assert_eq!((tag.as_str(), key_id.as_str()), ("tickets", "other"));
        }
        other => panic!("{other:?}"),
    }
    // Nothing leased, no period row made.
    assert!(store.get_tag("tickets@").await.unwrap().is_none());
    assert!(matches!(
        s.decode("T-000001"),
        Err(DecodeError::Segment(SegmentError::KeyUnavailable { .. }))
    ));
}

#[tokio::test]
async fn a_permuted_tag_with_its_key_never_shows_its_sequence_and_decodes_back() {
    let json =
        r#"{"prefix":"T-","radix":"crockford32","width":6,"check":true,"permute":{"key_id":"k1"}}"#;
    let (_store, engine) = setup("tickets", 1, json).await;
    let s = spec(&engine, "tickets").await;
    let at = ts("2026-11-27T10:00:00Z");
    let ids = engine.next_texts_at(&s, 50, &|| at).await.unwrap();
    assert!(!ids.ordered());
    let all = texts(&ids);
    assert_eq!(all.len(), 50);
    let mut seen = std::collections::HashSet::new();
    for (i, id) in all.iter().enumerate() {
        assert!(seen.insert(id.clone()), "{id} twice");
        let d = s.decode(id).unwrap();
        assert_eq!((d.period.as_str(), d.sequence), ("", i as u64 + 1), "{id}");
    }
    assert!(
        all.windows(2).any(|w| w[0] > w[1]),
        "some pair out of order"
    );
}

#[tokio::test]
async fn gapped_ids_increase_and_are_unique() {
    let json = r#"{"prefix":"G","width":9,"gaps":{"mean":5}}"#;
    let (_store, engine) = setup("gapped", 1, json).await;
    let s = spec(&engine, "gapped").await;
    let at = ts("2026-11-27T10:00:00Z");
    let mut seqs = Vec::new();
    for _ in 0..5 {
        let ids = engine.next_texts_at(&s, 40, &|| at).await.unwrap();
        assert!(ids.ordered());
        for id in texts(&ids) {
            seqs.push(s.decode(&id).unwrap().sequence);
        }
    }
    assert!(seqs.len() > 100, "{}", seqs.len());
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "increasing and unique"
    );
    // Each gap lies within 1..=2*mean-1, across batches too (a batch takes exactly the sum of
    // its gaps, and the next starts after it).
    assert!(seqs.windows(2).all(|w| w[1] - w[0] <= 9), "{seqs:?}");
}

#[tokio::test]
async fn decode_reads_ids_back_and_refuses_what_is_not_one() {
    let json = r#"{"prefix":"INV-","date":"yyyy-","radix":"base36","width":6,"check":true,"reset":"yearly","time_zone":"Europe/Berlin"}"#;
    let (_store, engine) = setup("inv", 1, json).await;
    let s = spec(&engine, "inv").await;
    // 23:30 UTC on 31 December is already 2027 in Berlin.
    let at = ts("2026-12-31T23:30:00Z");
    let ids = engine.next_texts_at(&s, 20, &|| at).await.unwrap();
    assert_eq!(ids.period, "2027");
    for (i, id) in texts(&ids).iter().enumerate() {
        assert!(id.starts_with("INV-2027-"), "{id}");
        let d = s.decode(id).unwrap();
        assert_eq!((d.period.as_str(), d.sequence), ("2027", i as u64 + 1));
    }
    let id = ids.first().unwrap();
    // A wrong check character.
    let mut bad = id.clone().into_bytes();
    let last = bad.len() - 1;
    bad[last] = if bad[last] == b'0' { b'1' } else { b'0' };
    let bad = String::from_utf8(bad).unwrap();
    assert!(
        matches!(s.decode(&bad), Err(DecodeError::Format(FormatError::Malformed(m))) if m.contains("check")),
        "{bad}"
    );
    // A literal that differs.
    let other = id.replacen("INV-", "INX-", 1);
    assert!(matches!(
        s.decode(&other),
        Err(DecodeError::Format(FormatError::Malformed(_)))
    ));
    // Too short.
    assert!(s.decode(&id[..id.len() - 1]).is_err());
}

#[tokio::test]
async fn a_plain_tag_has_no_spec_and_an_unusable_stored_one_is_a_server_fault() {
    let (store, engine) = setup("orders", 1, DAILY).await;
    store.insert("plain", 1, 10);
    assert!(
        engine
            .spec_of(&BizTag::parse("plain").unwrap())
            .await
            .unwrap()
            .is_none()
    );
    store.insert("broken", 1, 10);
    assert!(
        store
            .put_format("broken", r#"{"width":6,"time_zone":"Mars/Olympus"}"#)
            .await
            .unwrap()
    );
    match engine.spec_of(&BizTag::parse("broken").unwrap()).await {
        Err(SegmentError::BadFormat { tag, why }) => {
            assert_eq!(tag.as_str(), "broken");
            assert!(
                matches!(why, crate::segment::SpecError::InvalidFormat(_)),
                "{why:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // The one cache holds the formatted tag, once.
    let b = spec(&engine, "orders").await;
    let a = engine.cached_spec("orders").unwrap();
    assert!(Arc::ptr_eq(&a, &b));
}

/// Ids of `s` from `engine` at `at`, as many as one call gives (at most `count`).
async fn take(engine: &SegmentAllocator, s: &Arc<TagSpec>, count: u64, at: Timestamp) -> usize {
    match engine.next_texts_at(s, count, &|| at).await {
        Ok(ids) => ids.len(),
        Err(e) => panic!("{e:?}"),
    }
}

#[tokio::test]
async fn one_servers_burst_leaves_the_period_to_the_others_and_a_crash_loses_little() {
    // Two servers (engines) over one store, a width-6 daily tag whose DBA step is huge.
    let (store, a) = setup("orders", 1, DAILY).await;
    store
        .update_tag("orders", Some(1_000_000_000), None)
        .await
        .unwrap();
    let b = SegmentAllocator::new(store.clone(), a.config().clone());
    let (sa, sb) = (spec(&a, "orders").await, spec(&b, "orders").await);
    let at = ts("2026-11-27T10:00:00Z");
    // The burst: 300,000 ids asked of A, as fast as it answers.
    let mut got = 0;
    while got < 300_000 {
        got += take(&a, &sa, 100_000, at).await;
    }
    // A's preload of its next segment runs on its own: let it land before reading the row.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let row = store.get_tag("orders@20261127").await.unwrap().unwrap();
    let leased = row.max_id - 1;
    // A holds (current and next segment) at most twice a share of what was left.
    let held = leased - got as i64;
    assert!(
        held <= 2 * (1_000_000 - 1 - got as i64) / 32 + 2 * 100,
        "A holds {held} unused numbers after issuing {got}"
    );
    // B still serves, and from what A did not take.
    let n = take(&b, &sb, 1000, at).await;
    assert!(n > 0);
    // A `kill -9` of A now loses only what it held: the period still has most of its
    // numbers for B.
    drop(a);
    let mut from_b = n;
    loop {
        match b.next_texts_at(&sb, 100_000, &|| at).await {
            Ok(ids) => from_b += ids.len(),
            Err(SegmentError::SequenceExhausted { .. }) => break,
            Err(e) => panic!("{e:?}"),
        }
    }
    eprintln!("burst figure: A issued {got}, held {held} unused, B served {from_b}");
    assert_eq!(
        got + from_b + held as usize,
        999_999,
        "every number served once or lost"
    );
    assert!(
        (held as f64) < 0.07 * (999_999 - got) as f64,
        "a crash after the burst loses {held} of the {} left",
        999_999 - got
    );
}

#[tokio::test]
async fn a_sequence_that_never_resets_is_spent_for_good_like_a_plain_tag() {
    let json = r#"{"prefix":"C-","width":2}"#;
    let (_store, engine) = setup("coupons", 95, json).await;
    let s = spec(&engine, "coupons").await;
    let at = ts("2026-11-27T10:00:00Z");
    assert_eq!(take(&engine, &s, 10, at).await, 5);
    match engine.next_texts_at(&s, 1, &|| at).await {
        Err(SegmentError::Exhausted) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_start_past_the_width_is_refused() {
    use crate::segment::SpecError;
    let format: crate::shapes::TagFormat = TagSpec::stored_format(DAILY).unwrap();
    assert!(TagSpec::check_start(&format, 999_999).is_ok());
    assert!(matches!(
        TagSpec::check_start(&format, 1_000_000),
        Err(SpecError::StartBeyondWidth { max: 999_999, .. })
    ));
}

#[tokio::test]
async fn ended_periods_leave_memory_and_a_clock_stepped_back_never_repeats() {
    let (_store, engine) = setup("orders", 1, DAILY).await;
    let s = spec(&engine, "orders").await;
    let day1 = ts("2026-11-27T10:00:00Z");
    let first = engine.next_texts_at(&s, 5, &|| day1).await.unwrap();
    let last_day1 = texts(&first).pop().unwrap();
    for d in 28..=30 {
        let at = ts(&format!("2026-11-{d}T10:00:00Z"));
        engine.next_texts_at(&s, 2, &|| at).await.unwrap();
    }
    // Only the current period's buffer is kept: memory is bounded by tags, not by days.
    assert!(engine.cached("orders@20261127").is_none());
    assert!(engine.cached("orders@20261129").is_none());
    assert!(engine.cached("orders@20261130").is_some());
    assert_eq!(engine.tag_count(), 1);
    // A clock stepped back into day 1 serves above what day 1 issued.
    let again = engine.next_texts_at(&s, 1, &|| day1).await.unwrap();
    let text = again.first().unwrap();
    assert!(text > last_day1, "{text} after {last_day1}");
}

/// Delete means stopped (issue 42, item 2): the deleting engine drops the spec and the period
/// buffers at once, another engine at its refresh, a restarted engine never takes the format
/// up without its row, and re-creating the name with the same format serves texts above
/// everything served before (the period rows are never deleted).
#[tokio::test]
async fn a_deleted_formatted_tag_stops_everywhere_and_comes_back_without_repeats() {
    use crate::segment::NewTag;
    let store = Arc::new(MemoryStore::default());
    let config = SegmentConfig::default();
    let a = SegmentAllocator::new(store.clone(), config.clone());
    let b = SegmentAllocator::new(store.clone(), config.clone());
    let tag = BizTag::parse("inv").unwrap();
    let new = NewTag {
        biz_tag: "inv".into(),
        step: 10,
        max_id: 1,
        description: None,
    };
    let format: crate::shapes::TagFormat = serde_json::from_str(DAILY).unwrap();
    a.create_formatted_tag(&new, &format).await.unwrap();
    let at = ts("2026-11-28T10:00:00Z");
    let mut seen = std::collections::BTreeSet::new();
    let mut take = async |engine: &SegmentAllocator, n: u64| {
        let s = engine
            .spec_of(&tag)
            .await
            .unwrap()
            .expect("served as formatted");
        for t in texts(&engine.next_texts_at(&s, n, &|| at).await.unwrap()) {
            assert!(seen.insert(t.clone()), "{t} served twice");
        }
    };
    take(&a, 3).await;
    take(&b, 3).await;
    assert!(b.cached("inv@20261128").is_some());
    assert!(a.delete_tag(&tag).await.unwrap());
    // The deleting engine: at once.
    assert!(a.cached_spec("inv").is_none());
    assert!(a.cached("inv@20261128").is_none());
    assert!(a.spec_of(&tag).await.unwrap().is_none());
    assert!(matches!(
        a.next_ids("inv", 1).await,
        Err(SegmentError::UnknownTag(_))
    ));
    // The other engine: still cached until its refresh, then gone.
    assert!(b.cached_spec("inv").is_some());
    b.refresh_tags().await.unwrap();
    assert!(b.cached_spec("inv").is_none());
    assert!(b.cached("inv@20261128").is_none());
    assert!(b.spec_of(&tag).await.unwrap().is_none());
    // A restarted engine: the stored format alone is no tag.
    let c = SegmentAllocator::new(store.clone(), config);
    c.refresh_tags().await.unwrap();
    assert!(c.cached_spec("inv").is_none());
    assert!(c.spec_of(&tag).await.unwrap().is_none());
    // The format and the period rows stayed.
    assert!(store.get_format("inv").await.unwrap().is_some());
    assert!(store.get_tag("inv@20261128").await.unwrap().is_some());
    // A plain create of the name is refused; the same format creates it again.
    assert!(matches!(
        a.create_tag(&new).await,
        Err(crate::segment::StoreError::AlreadyExists)
    ));
    c.create_formatted_tag(&new, &format).await.unwrap();
    take(&c, 3).await;
    take(&a, 3).await;
    take(&b, 3).await;
    assert_eq!(seen.len(), 15);
}
