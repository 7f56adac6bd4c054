//! Unit tests of the regression guard (`super::super::high_water`) through the engine: stores
//! that go back in time, as a promoted asynchronous replica does, must never make this server
//! hand out an id at or below one it leased before.

use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::segment::{LaneRegistry, Lease, LeaseStore, SpecStore, TagAdminStore, TagRow};
use crate::testing::MemoryStore;

fn engine(store: Arc<dyn SegmentStore>, max_step: i64) -> SegmentAllocator {
    let config = SegmentConfig {
        wait_timeout: Duration::from_secs(2),
        policy: StepPolicy {
            max_step,
            ..Default::default()
        },
        ..Default::default()
    };
    SegmentAllocator::new(store, config)
}

/// Sets the row's `max_id` (a failover to a replica that lacked the last leases).
async fn rewind(store: &MemoryStore, tag: &str, max_id: i64) {
    let row = store.get_tag(tag).await.unwrap().unwrap();
    assert!(
        max_id < row.max_id,
        "not a rewind: {max_id} >= {}",
        row.max_id
    );
    store.insert(tag, max_id, row.step);
}

async fn take(e: &SegmentAllocator, tag: &str, n: usize) -> Vec<i64> {
    let mut ids = Vec::with_capacity(n);
    for _ in 0..n {
        ids.push(e.next_id(tag).await.unwrap());
    }
    ids
}

/// [`take`], retrying a `segments_not_ready` as a client honouring `Retry-After` would (a load
/// that gave up backs off, and requests answer at once meanwhile), for at most 5 s in all.
async fn take_retrying(e: &SegmentAllocator, tag: &str, n: usize) -> Vec<i64> {
    let started = Instant::now();
    let mut ids = Vec::with_capacity(n);
    while ids.len() < n {
        match e.next_id(tag).await {
            Ok(id) => ids.push(id),
            Err(SegmentError::NotReady { .. }) if started.elapsed() < Duration::from_secs(5) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    ids
}

fn regressions(e: &SegmentAllocator, tag: &str) -> u64 {
    e.cached(tag).unwrap().snapshot().regressions_total
}

/// Waits until no load is in flight (a preload started by the last id), so the row is still.
async fn settle(e: &SegmentAllocator, tag: &str) {
    let buf = e.cached(tag).unwrap();
    for _ in 0..400 {
        if !buf.is_loading() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("a load of {tag} never finished");
}

#[tokio::test]
async fn a_row_rewound_to_its_start_is_refused_and_leased_past_in_one_extra_lease() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
    let e = engine(store.clone(), 40);
    let before = take(&e, "t", 100).await;
    settle(&e, "t").await;
    let leased_to = e.cached("t").unwrap().leased_to();
    assert!(leased_to > 100, "{leased_to}");
    rewind(&store, "t", 1).await;
    let leases = store.leases.load(Ordering::Relaxed);
    let after = take(&e, "t", 300).await;
    let last = *before.last().unwrap();
    assert!(after[0] > last, "{} after {last}", after[0]);
    // Buffered ids first, then the first id above the mark.
    assert!(
        after.contains(&leased_to),
        "first id above the mark, {leased_to}, missing"
    );
    let mut all = before.clone();
    all.extend(&after);
    assert!(all.windows(2).all(|w| w[0] < w[1]), "strictly increasing");
    assert_eq!(
        regressions(&e, "t"),
        1,
        "one refused lease, then a jump (its trim is not another)"
    );
    // The refused lease and the jump that followed it: one extra lease, not one per segment.
    let jumped_with = store.leases.load(Ordering::Relaxed) - leases;
    let segments_needed = 300 / 40 + 2;
    assert!(
        jumped_with <= segments_needed + 1,
        "{jumped_with} leases for about {segments_needed} segments"
    );
    // The row moved past the mark in the database too: other servers no longer get these ids.
    assert!(store.get_tag("t").await.unwrap().unwrap().max_id > leased_to);
}

#[tokio::test]
async fn a_lease_straddling_the_mark_is_trimmed_to_the_ids_above_it() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
    let e = engine(store.clone(), 10);
    let before = take(&e, "t", 25).await;
    settle(&e, "t").await;
    let leased_to = e.cached("t").unwrap().leased_to();
    // 5 ids below the mark: the next lease holds 5 of this server's ids and 5 new ones.
    rewind(&store, "t", leased_to - 5).await;
    let after = take(&e, "t", 40).await;
    let mut all = before.clone();
    all.extend(&after);
    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
    assert!(
        after.contains(&leased_to),
        "the ids above the mark are used: {after:?}"
    );
    assert_eq!(regressions(&e, "t"), 1);
}

#[tokio::test]
async fn a_rewind_beyond_several_step_maxima_backs_off_then_recovers() {
    let mark = 5 * crate::segment::tag_rules::MAX_STEP;
    let store = Arc::new(MemoryStore::with_rows(&[("t", mark, 10)]));
    let e = engine(store.clone(), 10);
    let before = take(&e, "t", 3).await;
    settle(&e, "t").await;
    rewind(&store, "t", 1).await;
    let after = take_retrying(&e, "t", 30).await;
    assert!(after[0] > before[2] && after.windows(2).all(|w| w[0] < w[1]));
    let snap = e.cached("t").unwrap().snapshot();
    assert!(
        snap.regressions_total > u64::from(crate::segment::high_water::MAX_JUMPS),
        "{snap:?}"
    );
    assert!(
        snap.load_failures_total >= 1,
        "a load gave up and backed off"
    );
}

#[tokio::test]
async fn a_tag_recreated_by_sql_below_the_ids_it_issued_still_serves_above_them() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
    let e = engine(store.clone(), 10);
    let tag = BizTag::parse("t").unwrap();
    let before = take(&e, "t", 15).await;
    settle(&e, "t").await;
    let leased_to = e.cached("t").unwrap().leased_to();
    assert!(e.delete_tag(&tag).await.unwrap());
    // A DBA's INSERT: no tombstone checked, the row starts over at 1.
    store.insert("t", 1, 10);
    let after = take(&e, "t", 20).await;
    assert!(after[0] >= leased_to, "{} below {leased_to}", after[0]);
    assert!(before.iter().all(|id| !after.contains(id)));
    assert_eq!(regressions(&e, "t"), 1, "the new generation kept the mark");

    // A re-creation through leafid starts at the tombstone: the guard never meets it.
    let store2 = Arc::new(MemoryStore::with_rows(&[("v", 1, 10)]));
    let e3 = engine(store2.clone(), 10);
    let v = BizTag::parse("v").unwrap();
    take(&e3, "v", 15).await;
    settle(&e3, "v").await;
    assert!(e3.delete_tag(&v).await.unwrap());
    let err = e3
        .create_tag(&NewTag::new(v.clone(), Step::try_from(10).unwrap(), Some(1), None).unwrap())
        .await
        .unwrap_err();
    let StoreError::BelowDeletedMaxId { high_water } = err else {
        panic!("{err:?}")
    };
    e3.create_tag(
        &NewTag::new(
            v.clone(),
            Step::try_from(10).unwrap(),
            Some(high_water),
            None,
        )
        .unwrap(),
    )
    .await
    .unwrap();
    assert_eq!(e3.next_id("v").await.unwrap(), high_water);
    assert_eq!(regressions(&e3, "v"), 0);
}

/// A store that rewinds the row before every `every`-th lease, by up to `by` ids.
struct TimeMachine {
    rows: Arc<MemoryStore>,
    every: u64,
    by: i64,
    calls: AtomicU64,
    rewinds: AtomicU64,
}

#[async_trait::async_trait]
impl LeaseStore for TimeMachine {
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        let n = self.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if n.is_multiple_of(self.every)
            && let Some(row) = self.rows.get_tag(biz_tag).await?
        {
            let back = 1 + (n as i64 * 7919) % self.by;
            if row.max_id - back >= 1 {
                self.rows.insert(biz_tag, row.max_id - back, row.step);
                self.rewinds.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.rows.lease(biz_tag, step).await
    }
    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError> {
        self.rows.return_unused(biz_tag, from, to).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.rows.ping().await
    }
}

#[async_trait::async_trait]
impl TagAdminStore for TimeMachine {
    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError> {
        self.rows.get_tag(biz_tag).await
    }
    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        self.rows.list_tags().await
    }
    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError> {
        self.rows.list_tag_names().await
    }
    async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        self.rows.create_tag(tag).await
    }
    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        self.rows.update_tag(biz_tag, step, description).await
    }
    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        self.rows.delete_tag(biz_tag).await
    }
    async fn tombstone(&self, biz_tag: &str) -> Result<Option<i64>, StoreError> {
        self.rows.tombstone(biz_tag).await
    }

    async fn list_tombstones(&self) -> Result<Vec<String>, StoreError> {
        self.rows.list_tombstones().await
    }

    async fn create_formatted_tag(
        &self,
        tag: &NewTag,
        format: &str,
    ) -> Result<crate::segment::FormattedCreate, StoreError> {
        self.rows.create_formatted_tag(tag, format).await
    }
}

#[async_trait::async_trait]
impl SpecStore for TimeMachine {
    async fn get_format(&self, biz_tag: &str) -> Result<Option<String>, StoreError> {
        self.rows.get_format(biz_tag).await
    }
    async fn list_formats(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.rows.list_formats().await
    }
    async fn put_format(&self, biz_tag: &str, format: &str) -> Result<bool, StoreError> {
        self.rows.put_format(biz_tag, format).await
    }
    async fn key_check(&self, key_id: &str) -> Result<Option<String>, StoreError> {
        self.rows.key_check(key_id).await
    }
    async fn bind_key(&self, key_id: &str, check: &str) -> Result<String, StoreError> {
        self.rows.bind_key(key_id, check).await
    }
}

#[async_trait::async_trait]
impl LaneRegistry for TimeMachine {
    async fn lane_slot(&self) -> Result<Option<u8>, StoreError> {
        self.rows.lane_slot().await
    }
    async fn claim_lane_slot(&self, slot: u8) -> Result<u8, StoreError> {
        self.rows.claim_lane_slot(slot).await
    }
    async fn lane_record(&self) -> Result<Option<crate::segment::LaneRecord>, StoreError> {
        self.rows.lane_record().await
    }
}

/// Tasks on two threads, tiny segments, and a store that goes back by up to 60 ids every third
/// lease: ids stay unique and increasing per task, and every rewind was counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_tasks_over_a_store_that_keeps_going_back_never_repeat_an_id() {
    let rows = Arc::new(MemoryStore::with_rows(&[("t", 1, 7)]));
    let store = Arc::new(TimeMachine {
        rows: rows.clone(),
        every: 3,
        by: 60,
        calls: AtomicU64::new(0),
        rewinds: AtomicU64::new(0),
    });
    let e = engine(store.clone(), 32);
    let all = super::tests::hammer(&e, 3_000, 11).await;
    assert!(all[0] >= 1);
    // One server: every id below the row was its own, so every rewind is caught by the lease
    // right after it (none is lost to a timeout here). A jump follows a rewound call (a
    // multiple of 3) at once, in the same load, so no jump is ever rewound itself.
    let rewinds = store.rewinds.load(Ordering::Relaxed);
    assert!(rewinds > 50, "{rewinds} rewinds");
    assert_eq!(regressions(&e, "t"), rewinds, "every rewind caught once");
}
