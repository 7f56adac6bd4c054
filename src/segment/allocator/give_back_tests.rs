//! Unit tests of the give-back on a stop ([`super::SegmentAllocator::give_back_unused`]) over
//! the in-memory store: what goes back, what is left alone, and that a closed engine hands out
//! nothing.

use std::collections::HashSet;

use super::*;
use crate::segment::TagAdminStore;
use crate::testing::MemoryStore;

fn engine(store: &Arc<MemoryStore>) -> SegmentAllocator {
    let config = SegmentConfig {
        wait_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    SegmentAllocator::new(store.clone(), config)
}

async fn max_id(store: &MemoryStore, tag: &str) -> i64 {
    store.get_tag(tag).await.unwrap().unwrap().max_id
}

const BOUND: Duration = Duration::from_secs(5);

#[tokio::test]
async fn the_row_goes_back_to_the_first_unused_id() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 100), ("idle", 1, 100)]));
    let e = engine(&store);
    assert_eq!(e.next_ids("t", 5).await.unwrap(), vec![1, 2, 3, 4, 5]);
    assert_eq!(max_id(&store, "t").await, 101);
    let r = e.give_back_unused(BOUND).await;
    assert_eq!(max_id(&store, "t").await, 6, "ids 6..=100 back");
    assert_eq!(r.returned_tags, 1);
    assert_eq!(r.returned_ids, 95);
    assert_eq!(
        max_id(&store, "idle").await,
        1,
        "a tag never leased is untouched"
    );
    // The next server starts where this one stopped.
    let next = engine(&store);
    assert_eq!(next.next_id("t").await.unwrap(), 6);
}

#[tokio::test]
async fn a_closed_engine_hands_out_nothing_and_leases_nothing() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10), ("u", 1, 10)]));
    let e = engine(&store);
    let handle = e.handle("t").await.unwrap();
    assert_eq!(handle.next_id().await.unwrap(), 1);
    e.give_back_unused(BOUND).await;
    assert_eq!(max_id(&store, "t").await, 2);
    let leases = store.leases.load(Ordering::Relaxed);
    assert!(e.try_next_id("t").is_none());
    assert!(handle.try_next_id().is_none(), "a handle resolved before");
    assert!(matches!(
        e.next_id("t").await,
        Err(SegmentError::NotReady { .. })
    ));
    assert!(matches!(
        handle.next_id().await,
        Err(SegmentError::NotReady { .. })
    ));
    assert!(
        matches!(e.next_id("u").await, Err(SegmentError::NotReady { .. })),
        "a tag not cached gets no buffer"
    );
    e.refresh_tags().await.unwrap();
    assert!(e.cached("u").is_none(), "nor through the refresh");
    assert_eq!(
        store.leases.load(Ordering::Relaxed),
        leases,
        "no lease after the close"
    );
    assert_eq!(max_id(&store, "t").await, 2);
}

#[tokio::test]
async fn a_lease_by_another_server_in_between_wins() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
    let a = engine(&store);
    let b = engine(&store);
    assert_eq!(a.next_id("t").await.unwrap(), 1);
    assert_eq!(b.next_id("t").await.unwrap(), 101);
    let r = a.give_back_unused(BOUND).await;
    assert_eq!(r.moved, 1, "{r:?}");
    assert_eq!(max_id(&store, "t").await, 201, "b's lease stands");
    let r = b.give_back_unused(BOUND).await;
    assert_eq!(r.returned_ids, 99);
    assert_eq!(max_id(&store, "t").await, 102);
}

#[tokio::test]
async fn the_next_segment_goes_back_with_the_current_one() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
    let e = engine(&store);
    // 20 ids pass the 10% mark: the next segment loads in the background, with the step
    // doubled (two loads in quick succession): [101, 301).
    e.next_ids("t", 20).await.unwrap();
    for _ in 0..200 {
        if max_id(&store, "t").await == 301 && !e.cached("t").unwrap().is_loading() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(max_id(&store, "t").await, 301);
    let r = e.give_back_unused(BOUND).await;
    assert_eq!(max_id(&store, "t").await, 21);
    assert_eq!(r.returned_ids, 280);
}

#[tokio::test]
async fn a_load_in_flight_is_awaited_and_given_back_too() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
    let e = engine(&store);
    e.next_ids("t", 5).await.unwrap();
    // The preload is slow: the give-back waits for it, then returns both segments.
    store.delay_ms.store(300, Ordering::Relaxed);
    e.next_ids("t", 10).await.unwrap();
    assert!(e.cached("t").unwrap().is_loading());
    let r = e.give_back_unused(BOUND).await;
    assert_eq!(r.in_flight, 0, "{r:?}");
    assert_eq!(r.returned_ids, 285, "[16, 301): the rest of both segments");
    assert_eq!(max_id(&store, "t").await, 16, "{r:?}");
}

#[tokio::test]
async fn a_load_that_outlives_the_bound_gives_nothing_back_and_is_wasted() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
    let e = engine(&store);
    e.next_ids("t", 5).await.unwrap();
    store.delay_ms.store(1_000, Ordering::Relaxed);
    e.next_ids("t", 10).await.unwrap();
    assert!(
        e.cached("t").unwrap().is_loading(),
        "the preload is in flight"
    );
    let r = e.give_back_unused(Duration::from_millis(100)).await;
    assert_eq!(r.in_flight, 1, "{r:?}");
    assert_eq!(r.returned_tags, 0, "{r:?}");
    // The lease lands after the close: never served, never given back.
    tokio::time::sleep(Duration::from_millis(1_300)).await;
    store.delay_ms.store(0, Ordering::Relaxed);
    // The late lease, [101, 301) (the step doubled), is wasted.
    assert_eq!(max_id(&store, "t").await, 301);
    assert!(e.try_next_id("t").is_none());
    assert!(!e.cached("t").unwrap().is_loading());
    assert_eq!(engine(&store).next_id("t").await.unwrap(), 301);
}

#[tokio::test]
async fn many_tasks_racing_the_give_back_never_share_an_id_with_the_next_server() {
    let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 50)]));
    let e = engine(&store);
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let e = e.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while let Ok(id) = e.next_id("t").await {
                got.push(id);
                tokio::task::yield_now().await;
            }
            got
        }));
    }
    tokio::time::sleep(Duration::from_millis(30)).await;
    e.give_back_unused(BOUND).await;
    let mut seen = HashSet::new();
    for t in tasks {
        for id in t.await.unwrap() {
            assert!(seen.insert(id), "{id} twice");
        }
    }
    let next = engine(&store);
    for id in next.next_ids("t", 500).await.unwrap() {
        assert!(!seen.contains(&id), "{id} handed out by both servers");
    }
}
