//! The store traits called directly, on SQLite and MariaDB (and the in-memory store where the
//! contract applies to it): concurrent leases, the step a lease takes, what a
//! released worker lease still allows, and what a deleted tag leaves behind.

use std::time::Duration;

use leafid::segment::{BizTag, NewTag, Step, StoreError};
use leafid::snowflake::worker::NodeInfo;
use leafid::store::{Database, DbOptions};

use crate::on_both_databases;
use crate::support::{Db, fresh_db};

/// A fresh, migrated database; MySQL with or without the single-statement lease.
async fn database(db: Db, single_statement: bool) -> (Database, Option<tempfile::TempDir>) {
    let (url, dir) = fresh_db(db).await;
    let opts = DbOptions {
        url,
        max_connections: 4,
        acquire_timeout: Duration::from_secs(5),
        mysql_single_statement_lease: single_statement,
    };
    (Database::connect(&opts).await.unwrap(), dir)
}

fn new_tag(tag: &str, step: i64, max_id: i64) -> NewTag {
    let tag = BizTag::parse(tag).unwrap();
    NewTag::new(tag, Step::try_from(step).unwrap(), Some(max_id), None).unwrap()
}

/// A DBA raised the row's step above the engine's adapted step: the lease takes the row's step
/// (the DBA's step is a floor), on the single-statement path's fallback as on the transaction.
async fn a_rows_step_above_the_adapted_step_is_the_floor_of_a_lease(db: Db) {
    for single_statement in [true, false] {
        let (database, _dir) = database(db, single_statement).await;
        let store = database.segment_store();
        store.create_tag(&new_tag("floor", 1000, 1)).await.unwrap();

        let lease = store.lease("floor", Some(10)).await.unwrap();
        assert_eq!(
            (lease.max_id, lease.leased),
            (1001, 1000),
            "single_statement={single_statement}: {lease:?}"
        );
        assert_eq!(store.get_tag("floor").await.unwrap().unwrap().max_id, 1001);

        // Below the adapted step, the adapted step wins.
        store.update_tag("floor", Some(5), None).await.unwrap();
        let lease = store.lease("floor", Some(10)).await.unwrap();
        assert_eq!((lease.max_id, lease.leased), (1011, 10), "{lease:?}");
        database.close().await;
    }
}
on_both_databases!(a_rows_step_above_the_adapted_step_is_the_floor_of_a_lease);

fn node(owner: &str) -> NodeInfo {
    NodeInfo {
        host: "test-host".into(),
        port: "1".into(),
        owner: owner.into(),
    }
}

/// After a release, a late heartbeat of the process that released cannot renew the lease.
async fn a_released_worker_lease_cannot_be_renewed_by_its_old_owner(db: Db) {
    let (database, _dir) = database(db, true).await;
    let store = database.worker_store();
    let now = 1_700_000_000_000i64;
    let lease = store
        .acquire_lease(&node("old"), 10_000, 3, now)
        .await
        .unwrap();
    assert!(
        store
            .heartbeat(lease.worker_id, "old", now + 10_000, now + 5)
            .await
            .unwrap()
    );
    store
        .release(lease.worker_id, "old", now + 6)
        .await
        .unwrap();
    let renewed = store
        .heartbeat(lease.worker_id, "old", now + 20_000, now + 7)
        .await
        .unwrap();
    assert!(!renewed, "a heartbeat after release renewed the lease");

    // The id is free at once, with the last timestamp the release stored.
    let next = store
        .acquire_lease(&node("new"), 10_000, 3, now + 8)
        .await
        .unwrap();
    assert_eq!(next.worker_id, lease.worker_id);
    assert_eq!(next.last_timestamp_ms, now + 6);
    assert!(
        !store
            .heartbeat(lease.worker_id, "old", now + 20_000, now + 9)
            .await
            .unwrap()
    );
    database.close().await;
}
on_both_databases!(a_released_worker_lease_cannot_be_renewed_by_its_old_owner);

/// A deleted tag keeps its high-water mark: creating it again below is refused, at or above
/// it succeeds, and a second delete keeps the higher mark.
async fn a_deleted_tag_leaves_its_high_water_mark(db: Db) {
    let (database, _dir) = database(db, true).await;
    let store = database.segment_store();
    store.create_tag(&new_tag("gone", 100, 1)).await.unwrap();
    store.lease("gone", None).await.unwrap();
    store.lease("gone", None).await.unwrap();
    assert!(store.delete_tag("gone").await.unwrap());
    assert!(!store.delete_tag("gone").await.unwrap());

    let err = store
        .create_tag(&new_tag("gone", 100, 1))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::BelowDeletedMaxId { high_water: 201 }),
        "{err:?}"
    );
    let err = store
        .create_tag(&new_tag("gone", 100, 200))
        .await
        .unwrap_err();
    assert!(matches!(
        err,
        StoreError::BelowDeletedMaxId { high_water: 201 }
    ));
    assert!(store.get_tag("gone").await.unwrap().is_none());

    let row = store.create_tag(&new_tag("gone", 100, 201)).await.unwrap();
    assert_eq!(row.max_id, 201);
    let lease = store.lease("gone", None).await.unwrap();
    assert_eq!(lease.max_id - lease.leased, 201);
    assert!(store.delete_tag("gone").await.unwrap());
    let err = store
        .create_tag(&new_tag("gone", 100, 250))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::BelowDeletedMaxId { high_water: 301 }),
        "{err:?}"
    );
    database.close().await;
}
on_both_databases!(a_deleted_tag_leaves_its_high_water_mark);

/// On a `leaf_alloc` that Leaf created with its own character set and collation, the tombstone
/// table's `biz_tag` compares exactly as `leaf_alloc.biz_tag` does.
#[tokio::test]
async fn the_tombstone_tag_column_copies_leaf_allocs_collation() {
    let url = crate::support::mysql::create_database().await;
    crate::support::mysql::exec_in(
        &url,
        "CREATE TABLE leaf_alloc (biz_tag VARCHAR(128) CHARACTER SET ascii COLLATE ascii_bin \
         NOT NULL DEFAULT '', max_id BIGINT NOT NULL DEFAULT 1, step INT NOT NULL, \
         description VARCHAR(256) DEFAULT NULL, update_time TIMESTAMP NOT NULL DEFAULT \
         CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, PRIMARY KEY (biz_tag)) ENGINE = InnoDB",
    )
    .await;
    let opts = DbOptions {
        url: url.clone(),
        max_connections: 2,
        acquire_timeout: Duration::from_secs(5),
        mysql_single_statement_lease: true,
    };
    let database = Database::connect(&opts).await.unwrap();
    let mut conn = <sqlx::mysql::MySqlConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    let mut collations: Vec<(String, String)> = sqlx::query_as(
        "SELECT TABLE_NAME, COLLATION_NAME FROM information_schema.COLUMNS \
         WHERE TABLE_SCHEMA = DATABASE() AND COLUMN_NAME = 'biz_tag'",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    collations.sort();
    assert_eq!(
        collations,
        [
            ("leaf_alloc".to_owned(), "ascii_bin".to_owned()),
            ("leafid_tag_tombstone".to_owned(), "ascii_bin".to_owned()),
        ]
    );
    database.close().await;
}

/// Leases of one tag from many tasks at once (as from many servers) never overlap and leave no
/// gap: each id of `1..max_id` belongs to exactly one lease. On MySQL this races the
/// compare-and-set lease (first leases, `step = None`) and the single-statement one.
async fn concurrent_leases_of_one_tag_are_disjoint_and_gapless(
    store: std::sync::Arc<dyn leafid::segment::SegmentStore>,
) {
    store.create_tag(&new_tag("race", 7, 1)).await.unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..25 {
                    // Half the tasks ask the row's step, half an adapted one.
                    let step = (t % 2 == 1).then_some(3 + i % 5);
                    let lease = store.lease("race", step).await.unwrap();
                    got.push((lease.max_id - lease.leased, lease.max_id));
                }
                got
            })
        })
        .collect();
    let mut ranges = Vec::new();
    for t in tasks {
        ranges.extend(t.await.unwrap());
    }
    ranges.sort_unstable();
    let mut next = 1;
    for (start, end) in &ranges {
        assert_eq!(*start, next, "overlap or gap at {start}: {ranges:?}");
        assert!(end > start);
        next = *end;
    }
    assert_eq!(store.get_tag("race").await.unwrap().unwrap().max_id, next);
}

async fn concurrent_leases_are_disjoint(db: Db) {
    for single_statement in [true, false] {
        let (database, _dir) = database(db, single_statement).await;
        concurrent_leases_of_one_tag_are_disjoint_and_gapless(database.segment_store()).await;
        database.close().await;
    }
}
on_both_databases!(concurrent_leases_are_disjoint);

/// The in-memory store the engine tests use keeps the same contract.
#[tokio::test]
async fn concurrent_leases_are_disjoint_on_the_memory_store() {
    let store = std::sync::Arc::new(leafid::testing::MemoryStore::default());
    concurrent_leases_of_one_tag_are_disjoint_and_gapless(store).await;
}
