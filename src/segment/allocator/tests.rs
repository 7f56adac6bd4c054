//! Unit tests of [`super::SegmentAllocator`]: loads, the tag map and its thread caches, admin
//! writes, failures.

use std::sync::atomic::Ordering;

use super::*;
use crate::segment::{LaneRegistry, Lease, LeaseStore, SpecStore, TagAdminStore, TagRow};
use crate::testing::MemoryStore;

/// Four tasks each take `rounds` times from tag `t` (every ninth a batch of `batch`); asserts
/// each task's ids increase and no id repeats across tasks. Every id, sorted.
pub(super) async fn hammer(e: &SegmentAllocator, rounds: usize, batch: usize) -> Vec<i64> {
    let tasks: Vec<_> = (0..4)
        .map(|i| {
            let e = e.clone();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for n in 0..rounds {
                    if (n + i) % 9 == 0 {
                        mine.extend(e.next_ids("t", batch).await.unwrap());
                    } else {
                        mine.push(e.next_id("t").await.unwrap());
                    }
                }
                assert!(mine.windows(2).all(|w| w[0] < w[1]), "per-task order");
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "{} duplicates", n - all.len());
    all
}

fn engine(store: &Arc<MemoryStore>, wait_ms: u64) -> SegmentAllocator {
    let config = SegmentConfig {
        wait_timeout: Duration::from_millis(wait_ms),
        ..Default::default()
    };
    SegmentAllocator::new(store.clone(), config)
}

#[tokio::test]
async fn hands_out_consecutive_ids_and_preloads_before_the_segment_runs_out() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
    let e = engine(&store, 1000);
    for expected in 1..=15 {
        assert_eq!(e.next_id("t").await.unwrap(), expected);
    }
    // 10% used: the next segment loads in the background, before anyone waits for it.
    for _ in 0..100 {
        if store.leases.load(Ordering::Relaxed) == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(store.leases.load(Ordering::Relaxed), 2);
    let snap = &e.snapshots()[0];
    assert!(snap.next_ready, "{snap:?}");
    assert_eq!(snap.step, 200, "loads 15 min apart double the step");
    let ids = e.next_ids("t", 200).await.unwrap();
    assert_eq!(ids, (16..=215).collect::<Vec<_>>());
}

#[tokio::test]
async fn unknown_and_invalid_tags_are_refused() {
    let store = Arc::new(MemoryStore::default());
    let e = engine(&store, 100);
    assert!(matches!(
        e.next_id("nope").await,
        Err(SegmentError::UnknownTag(t)) if t.as_str() == "nope"
    ));
    assert!(matches!(
        e.next_id("a b").await,
        Err(SegmentError::InvalidTag(_))
    ));
}

#[tokio::test]
async fn a_tag_created_after_start_serves_at_once() {
    let store = Arc::new(MemoryStore::default());
    let e = engine(&store, 500);
    e.refresh_tags().await.unwrap();
    store.insert("late", 1, 10);
    assert_eq!(e.next_id("late").await.unwrap(), 1);
}

#[tokio::test]
async fn a_stalled_store_fails_requests_at_the_deadline_not_later() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
    let e = engine(&store, 150);
    e.refresh_tags().await.unwrap();
    store.delay_ms.store(5_000, Ordering::Relaxed);
    let started = Instant::now();
    let err = e.next_id("t").await.unwrap_err();
    assert!(matches!(err, SegmentError::NotReady { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_first_request_whose_tag_lookup_hangs_fails_at_the_deadline() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
    let e = engine(&store, 150);
    store.delay_ms.store(60_000, Ordering::Relaxed);
    let started = Instant::now();
    let err = e.next_id("t").await.unwrap_err();
    assert!(matches!(err, SegmentError::NotReady { .. }), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn a_failing_store_serves_buffered_ids_then_errors_then_recovers_by_itself() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
    let e = engine(&store, 200);
    assert_eq!(e.next_id("t").await.unwrap(), 1);
    assert_eq!(e.next_id("t").await.unwrap(), 2); // 10% used: the preload of 11..=30 starts
    tokio::time::sleep(Duration::from_millis(50)).await;
    store.failing.store(true, Ordering::Relaxed);
    let mut got = vec![];
    loop {
        match e.next_id("t").await {
            Ok(id) => got.push(id),
            Err(SegmentError::NotReady { .. }) => break,
            Err(other) => panic!("{other:?}"),
        }
    }
    assert_eq!(
        got,
        (3..=30).collect::<Vec<_>>(),
        "buffered ids keep flowing"
    );
    store.failing.store(false, Ordering::Relaxed);
    // The lease is known to be failing: requests answer at once until the backoff ends, and the
    // retry armed for its end leases without waiting for a request.
    let started = Instant::now();
    let id = loop {
        match e.next_id("t").await {
            Ok(id) => break id,
            Err(SegmentError::NotReady { .. }) => {
                assert!(started.elapsed() < Duration::from_secs(2), "no recovery");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(other) => panic!("{other:?}"),
        }
    };
    assert!(id > 30, "recovered with a fresh segment, got {id}");
}

#[tokio::test]
async fn while_the_lease_fails_requests_answer_at_once_and_the_retry_needs_no_request() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
    // A long wait: without the fail-fast rule every request below would take 1.5 s.
    let e = engine(&store, 1_500);
    e.refresh_tags().await.unwrap();
    store.failing.store(true, Ordering::Relaxed);
    // The first request starts the lease due and waits for it: it fails, the backoff begins.
    let err = e.next_id("t").await.unwrap_err();
    let SegmentError::NotReady { retry_after_secs } = err else {
        panic!("{err:?}")
    };
    assert_eq!(
        retry_after_secs, 1,
        "the first backoff is 100 ms, rounded up"
    );
    // Known outage: each later request answers at once.
    for _ in 0..20 {
        let started = Instant::now();
        let err = e.next_id("t").await.unwrap_err();
        assert!(matches!(err, SegmentError::NotReady { .. }), "{err:?}");
        assert!(
            started.elapsed() < Duration::from_millis(50),
            "{:?}",
            started.elapsed()
        );
    }
    // The database returns; no request comes. The retry armed by the answers above leases at
    // the end of the backoff, so the next request is served from memory at once.
    store.failing.store(false, Ordering::Relaxed);
    assert_eq!(store.leases.load(Ordering::Relaxed), 0);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        store.leases.load(Ordering::Relaxed),
        1,
        "the armed retry leased"
    );
    let started = Instant::now();
    assert_eq!(e.next_id("t").await.unwrap(), 1);
    assert!(started.elapsed() < Duration::from_millis(50));
}

#[tokio::test]
async fn ids_stop_at_i64_max_with_exhausted() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", i64::MAX - 5, 3)]));
    let e = engine(&store, 200);
    let mut got = vec![];
    let err = loop {
        match e.next_id("t").await {
            Ok(id) => got.push(id),
            Err(err) => break err,
        }
    };
    assert_eq!(got, (i64::MAX - 5..i64::MAX).collect::<Vec<_>>());
    assert!(matches!(err, SegmentError::Exhausted), "{err:?}");
}

/// A store whose listing is read at once but answered late, as a large `SELECT` on a
/// slow link is: rows created meanwhile are missing from it.
struct ListsEarly(Arc<MemoryStore>);

#[async_trait::async_trait]
impl LeaseStore for ListsEarly {
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        self.0.lease(biz_tag, step).await
    }
    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError> {
        self.0.return_unused(biz_tag, from, to).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.0.ping().await
    }
}

#[async_trait::async_trait]
impl TagAdminStore for ListsEarly {
    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError> {
        self.0.get_tag(biz_tag).await
    }
    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        let rows = self.0.list_tags().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        rows
    }
    /// Late too: the refresh lists names.
    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError> {
        let rows = self.list_tags().await?;
        Ok(rows.into_iter().map(|r| r.biz_tag).collect())
    }
    async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        self.0.create_tag(tag).await
    }
    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        self.0.update_tag(biz_tag, step, description).await
    }
    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        self.0.delete_tag(biz_tag).await
    }
    async fn tombstone(&self, biz_tag: &str) -> Result<Option<i64>, StoreError> {
        self.0.tombstone(biz_tag).await
    }

    async fn list_tombstones(&self) -> Result<Vec<String>, StoreError> {
        self.0.list_tombstones().await
    }

    async fn create_formatted_tag(
        &self,
        tag: &NewTag,
        format: &str,
    ) -> Result<crate::segment::FormattedCreate, StoreError> {
        self.0.create_formatted_tag(tag, format).await
    }
}

#[async_trait::async_trait]
impl SpecStore for ListsEarly {
    async fn get_format(&self, biz_tag: &str) -> Result<Option<String>, StoreError> {
        self.0.get_format(biz_tag).await
    }
    async fn list_formats(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.0.list_formats().await
    }
    async fn put_format(&self, biz_tag: &str, format: &str) -> Result<bool, StoreError> {
        self.0.put_format(biz_tag, format).await
    }
    async fn key_check(&self, key_id: &str) -> Result<Option<String>, StoreError> {
        self.0.key_check(key_id).await
    }
    async fn bind_key(&self, key_id: &str, check: &str) -> Result<String, StoreError> {
        self.0.bind_key(key_id, check).await
    }
}

#[async_trait::async_trait]
impl LaneRegistry for ListsEarly {
    async fn lane_slot(&self) -> Result<Option<u8>, StoreError> {
        self.0.lane_slot().await
    }
    async fn claim_lane_slot(&self, slot: u8) -> Result<u8, StoreError> {
        self.0.claim_lane_slot(slot).await
    }
    async fn lane_record(&self) -> Result<Option<crate::segment::LaneRecord>, StoreError> {
        self.0.lane_record().await
    }
}

#[tokio::test]
async fn a_refresh_keeps_a_tag_first_requested_while_it_listed() {
    let rows = Arc::new(MemoryStore::default());
    let e = SegmentAllocator::new(Arc::new(ListsEarly(rows.clone())), SegmentConfig::default());
    let refresh = tokio::spawn({
        let e = e.clone();
        async move { e.refresh_tags().await }
    });
    tokio::time::sleep(Duration::from_millis(20)).await;
    rows.insert("new", 1, 10);
    assert_eq!(e.next_id("new").await.unwrap(), 1);
    refresh.await.unwrap().unwrap();
    // Before the fix the refresh marked the buffer removed: requests in flight on it got
    // unknown_biz_tag, and the next one leased a fresh segment (id 11).
    assert_eq!(e.next_id("new").await.unwrap(), 2);
    assert_eq!(rows.leases.load(Ordering::Relaxed), 1);
    // A later refresh that does list the row keeps it, and a deletion still removes it.
    e.refresh_tags().await.unwrap();
    assert_eq!(e.next_id("new").await.unwrap(), 3);
    rows.remove("new");
    e.refresh_tags().await.unwrap();
    assert!(e.cached("new").is_none());
}

#[tokio::test]
async fn a_tag_deleted_from_the_database_disappears_on_refresh() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
    let e = engine(&store, 200);
    e.refresh_tags().await.unwrap();
    assert_eq!(e.next_id("t").await.unwrap(), 1);
    store.remove("t");
    e.refresh_tags().await.unwrap();
    assert!(e.cached("t").is_none());
    assert!(matches!(
        e.next_id("t").await,
        Err(SegmentError::UnknownTag(_))
    ));
}

#[tokio::test]
async fn admin_writes_go_to_the_store_and_a_delete_drops_the_buffer() {
    let store = Arc::new(MemoryStore::default());
    let e = engine(&store, 200);
    let tag = BizTag::parse("t").unwrap();
    let step = Step::try_from(10).unwrap();
    let new = NewTag::new(tag.clone(), step, Some(100), None).unwrap();
    assert_eq!(e.create_tag(&new).await.unwrap().max_id, 100);
    assert!(matches!(
        e.create_tag(&new).await,
        Err(StoreError::AlreadyExists)
    ));
    assert_eq!(e.next_id("t").await.unwrap(), 100);
    let change = TagUpdate::new(Some(Step::try_from(20).unwrap()), Some("d".into())).unwrap();
    let row = e.update_tag(&tag, &change).await.unwrap().unwrap();
    assert_eq!((row.step, row.description.as_deref()), (20, Some("d")));
    assert!(e.cached("t").is_some(), "an update keeps the buffer");
    // (max_id may have moved since: a preload leases in the background.)
    let read = e.get_tag(&tag).await.unwrap().unwrap();
    assert_eq!((read.step, read.description), (20, Some("d".into())));
    assert_eq!(e.list_tags().await.unwrap().len(), 1);
    e.ping().await.unwrap();

    let buffer = e.cached("t").unwrap();
    assert!(e.delete_tag(&tag).await.unwrap());
    assert!(buffer.is_removed() && e.cached("t").is_none());
    assert!(matches!(
        e.next_id("t").await,
        Err(SegmentError::UnknownTag(_))
    ));
    assert!(!e.delete_tag(&tag).await.unwrap());
    let unknown = BizTag::parse("nope").unwrap();
    assert_eq!(e.update_tag(&unknown, &change).await.unwrap(), None);
}

/// The thread's last tag (kept after two requests in a row) never outlives its row: a delete
/// or a refresh that drops the tag stops it at once, and two engines on one thread never
/// serve each other's buffers.
#[tokio::test]
async fn a_tag_repeated_by_a_thread_still_disappears_on_delete_and_refresh() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 100), ("u", 1, 100)]));
    let e = engine(&store, 200);
    for expected in 1..=3 {
        assert_eq!(e.next_id("t").await.unwrap(), expected);
    }
    assert_eq!(
        e.try_next_id("t"),
        Some(4),
        "served from the thread's last tag"
    );
    e.delete_tag(&BizTag::parse("t").unwrap()).await.unwrap();
    assert_eq!(e.try_next_id("t"), None);
    assert!(matches!(
        e.next_id("t").await,
        Err(SegmentError::UnknownTag(_))
    ));

    for expected in 1..=3 {
        assert_eq!(e.next_id("u").await.unwrap(), expected);
    }
    store.remove("u");
    e.refresh_tags().await.unwrap();
    assert_eq!(e.try_next_id("u"), None);

    let (a, b) = (
        engine(&Arc::new(MemoryStore::with_rows(&[("v", 1, 100)])), 200),
        engine(&Arc::new(MemoryStore::with_rows(&[("v", 1_000, 100)])), 200),
    );
    for i in 0..4 {
        assert_eq!(a.next_id("v").await.unwrap(), 1 + 2 * i);
        assert_eq!(a.next_id("v").await.unwrap(), 2 + 2 * i);
        assert_eq!(b.next_id("v").await.unwrap(), 1_000 + i);
    }
}

/// Many tasks on a multi-threaded runtime, tiny segments so loads race with takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_get_unique_increasing_ids_across_many_loads() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 7)]));
    let config = SegmentConfig {
        wait_timeout: Duration::from_secs(5),
        policy: StepPolicy {
            max_step: 64,
            ..Default::default()
        },
        ..Default::default()
    };
    let e = SegmentAllocator::new(store.clone(), config);
    hammer(&e, 5_000, 13).await;
    assert!(store.leases.load(Ordering::Relaxed) > 100);
}
