//! The store contract: every scenario of the segment store's roles ([`LeaseStore`],
//! [`TagAdminStore`], [`SpecStore`], [`LaneRegistry`]) and of [`WorkerStore`] runs against the
//! in-memory fakes (`leafid::testing`), SQLite, MariaDB and PostgreSQL (directly and through
//! PgBouncer), calling the traits directly. The fakes are only trustworthy because they pass
//! the same scenarios as the real stores.
//!
//! `on_every_store!(scenario)` makes one test per store: `scenario::memory`, `scenario::sqlite`,
//! `scenario::mysql`, `scenario::postgres`, `scenario::pgbouncer`.
//! `on_every_store!(scenario, through_lanes)` adds the same five under
//! `scenario::through_lanes::`, where the segment store is seen through a [`LaneStore`] in lane
//! mode (own lane, slot [`LANE_SLOT`]), as every server with lanes sees it: leases come back
//! mapped into the lane's blocks, and the scenario compares them in that space
//! ([`Stores::ids`]); rows, tombstones and formats are the database's own and read the same.
//! The last three are ignored by a plain `cargo test` (they need a database server) and run by
//! `scripts/test.sh`.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use leafid::segment::lanes::{LaneMode, LaneStore, map};
use leafid::segment::{
    BizTag, FormattedCreate, LeaseStore, NewTag, SegmentStore, Step, StoreError,
};
use leafid::snowflake::worker::{NodeInfo, WorkerStore, WorkerStoreError};
use leafid::store::{Database, DbOptions};
use leafid::testing::{MemoryStore, MemoryWorkerStore};

use crate::support::{Db, fresh_db};

/// Which implementation a scenario runs on.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// `leafid::testing`'s in-memory stores.
    Memory,
    /// A store over a real database.
    Sql(Db),
}

/// The lane slot of the `through_lanes` runs: the last one, whose last block ends at
/// `i64::MAX` itself, and not 0, whose first block maps each id to itself.
const LANE_SLOT: u8 = 7;

/// A store, and whether the segment store is seen through a lane.
#[derive(Clone, Copy, Debug)]
struct On {
    kind: Kind,
    /// Through a [`LaneStore`] in lane mode (own lane, [`LANE_SLOT`]).
    lanes: bool,
}

impl On {
    /// The store itself.
    fn direct(kind: Kind) -> Self {
        Self { kind, lanes: false }
    }

    /// The store through its lane.
    fn lanes(kind: Kind) -> Self {
        Self { kind, lanes: true }
    }
}

impl From<Kind> for On {
    fn from(kind: Kind) -> Self {
        Self::direct(kind)
    }
}

/// Defines one test per store from an `async fn(Kind)`, or, with `through_lanes`, from an
/// `async fn(On)`: one test per store directly, and one per store through its lane.
macro_rules! on_every_store {
    ($name:ident) => {
        mod $name {
            on_every_store!(@each $name, Kind::from);
        }
    };
    ($name:ident, through_lanes) => {
        mod $name {
            on_every_store!(@each $name, On::direct);
            mod through_lanes {
                on_every_store!(@each $name, On::lanes);
            }
        }
    };
    (@each $name:ident, $($wrap:ident)::+) => {
        #[tokio::test]
        async fn memory() {
            use $crate::store_contract as c;
            c::$name(c::$($wrap)::+(c::Kind::Memory)).await
        }
        #[tokio::test]
        async fn sqlite() {
            use $crate::store_contract as c;
            c::$name(c::$($wrap)::+(c::Kind::Sql($crate::support::Db::Sqlite))).await
        }
        #[tokio::test]
        #[ignore = "needs MariaDB: scripts/test.sh runs it"]
        async fn mysql() {
            use $crate::store_contract as c;
            c::$name(c::$($wrap)::+(c::Kind::Sql($crate::support::Db::MySql))).await
        }
        #[tokio::test]
        #[ignore = "needs PostgreSQL: scripts/test.sh runs it"]
        async fn postgres() {
            use $crate::store_contract as c;
            c::$name(c::$($wrap)::+(c::Kind::Sql($crate::support::Db::Postgres))).await
        }
        #[tokio::test]
        #[ignore = "needs PgBouncer and PostgreSQL: scripts/test.sh runs it"]
        async fn pgbouncer() {
            use $crate::store_contract as c;
            c::$name(c::$($wrap)::+(c::Kind::Sql($crate::support::Db::PgBouncer))).await
        }
    };
}

/// Both store traits over one fresh, empty (but for the migrations' seed) backend.
struct Stores {
    /// The segment store the scenario calls: the database's, or its lane's.
    segments: Arc<dyn SegmentStore>,
    /// The database's own segment store, beneath the lane when there is one.
    database_store: Arc<dyn SegmentStore>,
    /// The lane's slot, when `segments` is seen through one.
    lane: Option<u8>,
    workers: Arc<dyn WorkerStore>,
    /// The connected database, closed by [`Stores::close`]; `None` for the in-memory stores.
    database: Option<Database>,
    /// The SQLite file's directory, removed when the stores are dropped.
    _dir: Option<tempfile::TempDir>,
}

impl Stores {
    /// Fresh stores; on MySQL with or without the single-statement lease (the other stores
    /// have one lease path and ignore the flag).
    async fn open(on: impl Into<On>, single_statement: bool) -> Self {
        let on = on.into();
        let (segments, workers, database, dir): (
            Arc<dyn SegmentStore>,
            Arc<dyn WorkerStore>,
            _,
            _,
        ) = match on.kind {
            Kind::Memory => (
                Arc::new(MemoryStore::default()),
                Arc::new(MemoryWorkerStore::default()),
                None,
                None,
            ),
            Kind::Sql(db) => {
                let (url, dir) = fresh_db(db).await;
                let opts = DbOptions {
                    pgbouncer: crate::support::postgres::is_pgbouncer(&url),
                    url,
                    max_connections: 4,
                    acquire_timeout: Duration::from_secs(5),
                    mysql_single_statement_lease: single_statement,
                };
                let database = Database::connect(&opts).await.unwrap();
                (
                    database.segment_store(),
                    database.worker_store(),
                    Some(database),
                    dir,
                )
            }
        };
        let lane = on.lanes.then_some(LANE_SLOT);
        Self {
            segments: match lane {
                Some(slot) => Arc::new(own_lane(&segments, slot)),
                None => segments.clone(),
            },
            database_store: segments,
            lane,
            workers,
            database,
            _dir: dir,
        }
    }

    /// The ids a lease of the database's positions `[start, end)` (within one block) answers
    /// through this store: `(first id, max_id)`, mapped into the lane's blocks through a lane.
    fn ids(&self, start: i64, end: i64) -> (i64, i64) {
        match self.lane {
            None => (start, end),
            Some(slot) => {
                let first = map::global(start, slot).unwrap();
                (first, first + (end - start))
            }
        }
    }

    async fn close(self) {
        if let Some(database) = &self.database {
            database.close().await;
        }
    }
}

/// `store` as a server's own lane of `slot` sees it.
fn own_lane(store: &Arc<dyn SegmentStore>, slot: u8) -> LaneStore {
    LaneStore::new(store.clone(), LaneMode::Lane { slot, own: true })
}

/// A lease's range as `(first id, max_id)`.
fn range(lease: leafid::segment::Lease) -> (i64, i64) {
    (lease.max_id - lease.leased, lease.max_id)
}

fn new_tag(tag: &str, step: i64, max_id: i64) -> NewTag {
    let tag = BizTag::parse(tag).unwrap();
    NewTag::new(tag, Step::try_from(step).unwrap(), Some(max_id), None).unwrap()
}

fn described_tag(tag: &str, step: i64, max_id: i64, description: &str) -> NewTag {
    let tag = BizTag::parse(tag).unwrap();
    let description = Some(description.to_owned());
    NewTag::new(
        tag,
        Step::try_from(step).unwrap(),
        Some(max_id),
        description,
    )
    .unwrap()
}

fn node(owner: &str) -> NodeInfo {
    NodeInfo {
        host: "test-host".into(),
        port: "1".into(),
        owner: owner.into(),
    }
}

// ---------------------------------------------------------------------------------------------
// SegmentStore: rows
// ---------------------------------------------------------------------------------------------

/// A created tag reads back as written, with an update time; a second create of the same tag
/// is refused; an unknown tag reads as absent.
async fn a_created_tag_reads_back_as_written(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
    let created = store
        .create_tag(&described_tag("crud-orders", 500, 42, "orders"))
        .await
        .unwrap();
    assert_eq!(
        (created.biz_tag.as_str(), created.max_id, created.step),
        ("crud-orders", 42, 500)
    );
    assert_eq!(created.description.as_deref(), Some("orders"));

    let row = store.get_tag("crud-orders").await.unwrap().unwrap();
    assert_eq!(
        (row.biz_tag.as_str(), row.max_id, row.step),
        ("crud-orders", 42, 500)
    );
    assert_eq!(row.description.as_deref(), Some("orders"));
    assert!(row.update_time.is_some(), "{row:?}");

    let again = store
        .create_tag(&new_tag("crud-orders", 10, 1))
        .await
        .unwrap_err();
    assert!(matches!(again, StoreError::AlreadyExists), "{again:?}");
    assert_eq!(
        store.get_tag("crud-orders").await.unwrap().unwrap().step,
        500
    );
    assert!(store.get_tag("crud-unknown").await.unwrap().is_none());
    store.ping().await.unwrap();
    stores.close().await;
}
on_every_store!(a_created_tag_reads_back_as_written, through_lanes);

/// `list_tags` returns every row ordered by tag; `list_tag_names` the same names.
async fn tags_are_listed_in_tag_order(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
    for (tag, step) in [("crud-b", 20), ("crud-c", 30), ("crud-a", 10)] {
        store.create_tag(&new_tag(tag, step, 1)).await.unwrap();
    }
    // The SQLite migration seeds `leaf-segment-test`: only this scenario's rows are compared.
    let rows: Vec<(String, i64)> = store
        .list_tags()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.biz_tag.starts_with("crud-"))
        .map(|r| (r.biz_tag, r.step))
        .collect();
    assert_eq!(
        rows,
        [
            ("crud-a".to_owned(), 10),
            ("crud-b".to_owned(), 20),
            ("crud-c".to_owned(), 30)
        ]
    );
    let mut names = store.list_tag_names().await.unwrap();
    names.retain(|n| n.starts_with("crud-"));
    names.sort();
    assert_eq!(names, ["crud-a", "crud-b", "crud-c"]);
    // Every name, the seed's too, and only those of rows.
    let all: BTreeSet<String> = store.list_tag_names().await.unwrap().into_iter().collect();
    let rows: BTreeSet<String> = store
        .list_tags()
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.biz_tag)
        .collect();
    assert_eq!(all, rows);
    stores.close().await;
}
on_every_store!(tags_are_listed_in_tag_order, through_lanes);

/// An update changes the step and/or the description it names and nothing else (`max_id`
/// stays); an update of an unknown tag is `None` and creates nothing.
async fn an_update_changes_only_what_it_names(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
    store
        .create_tag(&described_tag("crud-upd", 100, 7, "before"))
        .await
        .unwrap();

    let row = store
        .update_tag("crud-upd", Some(250), None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.max_id, row.step), (7, 250));
    assert_eq!(row.description.as_deref(), Some("before"));

    let row = store
        .update_tag("crud-upd", None, Some("after"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((row.max_id, row.step), (7, 250));
    assert_eq!(row.description.as_deref(), Some("after"));
    assert_eq!(store.get_tag("crud-upd").await.unwrap().unwrap(), row);

    assert!(
        store
            .update_tag("crud-missing", Some(5), Some("x"))
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.get_tag("crud-missing").await.unwrap().is_none());
    stores.close().await;
}
on_every_store!(an_update_changes_only_what_it_names, through_lanes);

/// A deleted tag is gone for every call: read, list, lease, update, delete again.
async fn a_deleted_tag_is_gone(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
    store.create_tag(&new_tag("crud-del", 10, 1)).await.unwrap();
    store
        .create_tag(&new_tag("crud-keep", 10, 1))
        .await
        .unwrap();
    assert!(store.delete_tag("crud-del").await.unwrap());

    assert!(store.get_tag("crud-del").await.unwrap().is_none());
    let names = store.list_tag_names().await.unwrap();
    assert!(!names.iter().any(|n| n == "crud-del"), "{names:?}");
    assert!(names.iter().any(|n| n == "crud-keep"), "{names:?}");
    let err = store.lease("crud-del", None).await.unwrap_err();
    assert!(matches!(err, StoreError::NotFound), "{err:?}");
    assert!(
        store
            .update_tag("crud-del", Some(5), None)
            .await
            .unwrap()
            .is_none()
    );
    assert!(!store.delete_tag("crud-del").await.unwrap());
    assert!(!store.delete_tag("crud-never").await.unwrap());
    stores.close().await;
}
on_every_store!(a_deleted_tag_is_gone, through_lanes);

/// A deleted tag keeps its high-water mark: creating it again below is refused, at or above
/// it succeeds, and a second delete keeps the higher mark.
async fn a_deleted_tag_leaves_its_high_water_mark(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
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
    // Rows and tombstones hold the database's positions; a lane's leases are mapped.
    let lease = store.lease("gone", None).await.unwrap();
    assert_eq!(range(lease), stores.ids(201, 301));
    assert!(store.delete_tag("gone").await.unwrap());
    let err = store
        .create_tag(&new_tag("gone", 100, 250))
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::BelowDeletedMaxId { high_water: 301 }),
        "{err:?}"
    );
    stores.close().await;
}
on_every_store!(a_deleted_tag_leaves_its_high_water_mark, through_lanes);

// ---------------------------------------------------------------------------------------------
// SegmentStore: leases
// ---------------------------------------------------------------------------------------------

/// A lease without an adapted step takes the row's step from `max_id` and moves `max_id` past
/// it; an unknown tag cannot be leased.
async fn a_lease_takes_the_rows_step_from_max_id(on: On) {
    for single_statement in [true, false] {
        let stores = Stores::open(on, single_statement).await;
        let store = &stores.segments;
        store
            .create_tag(&new_tag("crud-lease", 100, 5))
            .await
            .unwrap();

        let lease = store.lease("crud-lease", None).await.unwrap();
        assert_eq!(
            (range(lease), lease.leased, lease.db_step),
            (stores.ids(5, 105), 100, Some(100)),
            "single_statement={single_statement}"
        );
        let lease = store.lease("crud-lease", None).await.unwrap();
        assert_eq!((range(lease), lease.leased), (stores.ids(105, 205), 100));
        let row = store.get_tag("crud-lease").await.unwrap().unwrap();
        assert_eq!((row.max_id, row.step), (205, 100));

        let err = store.lease("crud-unknown", None).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
        let err = store.lease("crud-unknown", Some(10)).await.unwrap_err();
        assert!(matches!(err, StoreError::NotFound), "{err:?}");
        stores.close().await;
    }
}
on_every_store!(a_lease_takes_the_rows_step_from_max_id, through_lanes);

/// The give-back's compare-and-set: `max_id` goes back only from the value asked, and the next
/// lease starts at the returned id; a row that moved (another server leased), an unknown tag or
/// an empty range change nothing.
async fn unused_ids_go_back_only_from_the_last_lease_s_end(on: On) {
    for single_statement in [true, false] {
        let stores = Stores::open(on, single_statement).await;
        let store = &stores.segments;
        store.create_tag(&new_tag("gb", 100, 1)).await.unwrap();
        let mine = store.lease("gb", None).await.unwrap();
        assert_eq!(range(mine), stores.ids(1, 101));
        if stores.lane.is_some() {
            // A lane gives nothing back (its leases were mapped, the row holds positions):
            // neither the lease's global ids nor the row's positions move the row.
            for (from, to) in [(41, 101), (mine.max_id - 60, mine.max_id)] {
                assert!(!store.return_unused("gb", from, to).await.unwrap());
            }
            assert_eq!(store.get_tag("gb").await.unwrap().unwrap().max_id, 101);
            stores.close().await;
            continue;
        }
        // Nothing asked back, or a range the other way round.
        assert!(!store.return_unused("gb", 101, 101).await.unwrap());
        assert!(!store.return_unused("gb", 102, 101).await.unwrap());
        // Ids 1..=40 handed out: 41..=100 go back.
        assert!(store.return_unused("gb", 41, 101).await.unwrap());
        let row = store.get_tag("gb").await.unwrap().unwrap();
        assert_eq!(row.max_id, 41, "single_statement={single_statement}");
        assert!(row.update_time.is_some());
        // A second give-back of the same lease finds the row moved (it is at 41 now).
        assert!(!store.return_unused("gb", 41, 101).await.unwrap());
        let next = store.lease("gb", Some(100)).await.unwrap();
        assert_eq!((next.max_id - next.leased, next.max_id), (41, 141));
        // Another server leased after this one: the row is past its lease, nothing changes.
        let theirs = store.lease("gb", Some(100)).await.unwrap();
        assert_eq!(theirs.max_id, 241);
        assert!(!store.return_unused("gb", 100, 141).await.unwrap());
        assert_eq!(store.get_tag("gb").await.unwrap().unwrap().max_id, 241);
        assert!(!store.return_unused("gb-unknown", 1, 2).await.unwrap());
        stores.close().await;
    }
}
on_every_store!(
    unused_ids_go_back_only_from_the_last_lease_s_end,
    through_lanes
);

/// Near `i64::MAX` a lease is cut to the ids left, and then the tag is exhausted, whether the
/// lease asked for the row's step or an adapted one.
async fn a_lease_near_the_end_of_the_range_takes_the_tail_then_the_tag_is_exhausted(on: On) {
    for (single_statement, step) in [(true, None), (true, Some(20)), (false, Some(20))] {
        let stores = Stores::open(on, single_statement).await;
        let store = &stores.segments;
        if stores.lane.is_some() {
            // A lane ends where its positions stop mapping below 2^63 (`map::LOCAL_END`), and
            // the last slot's last id is `i64::MAX` itself, which a lease's exclusive end
            // cannot express: the tail stops one id short of it.
            store
                .create_tag(&new_tag("crud-end", 10, map::LOCAL_END - 5))
                .await
                .unwrap();
            let lease = store.lease("crud-end", step).await.unwrap();
            assert_eq!(
                (lease.max_id, lease.leased),
                (i64::MAX, 4),
                "single_statement={single_statement} step={step:?}"
            );
            let err = store.lease("crud-end", step).await.unwrap_err();
            assert!(matches!(err, StoreError::Exhausted), "{err:?}");
            stores.close().await;
            continue;
        }
        store
            .create_tag(&new_tag("crud-end", 10, i64::MAX - 5))
            .await
            .unwrap();

        let lease = store.lease("crud-end", step).await.unwrap();
        assert_eq!(
            (lease.max_id, lease.leased),
            (i64::MAX, 5),
            "single_statement={single_statement} step={step:?}"
        );
        let err = store.lease("crud-end", step).await.unwrap_err();
        assert!(matches!(err, StoreError::Exhausted), "{err:?}");
        assert_eq!(
            store.get_tag("crud-end").await.unwrap().unwrap().max_id,
            i64::MAX
        );
        stores.close().await;
    }
}
on_every_store!(
    a_lease_near_the_end_of_the_range_takes_the_tail_then_the_tag_is_exhausted,
    through_lanes
);

/// A DBA raised the row's step above the engine's adapted step: the lease takes the row's step
/// (the DBA's step is a floor), on the single-statement path's fallback as on the transaction.
async fn a_rows_step_above_the_adapted_step_is_the_floor_of_a_lease(on: On) {
    for single_statement in [true, false] {
        let stores = Stores::open(on, single_statement).await;
        let store = &stores.segments;
        store.create_tag(&new_tag("floor", 1000, 1)).await.unwrap();

        let lease = store.lease("floor", Some(10)).await.unwrap();
        assert_eq!(
            (range(lease), lease.leased),
            (stores.ids(1, 1001), 1000),
            "single_statement={single_statement}: {lease:?}"
        );
        assert_eq!(store.get_tag("floor").await.unwrap().unwrap().max_id, 1001);

        // Below the adapted step, the adapted step wins.
        store.update_tag("floor", Some(5), None).await.unwrap();
        let lease = store.lease("floor", Some(10)).await.unwrap();
        assert_eq!(
            (range(lease), lease.leased),
            (stores.ids(1001, 1011), 10),
            "{lease:?}"
        );
        stores.close().await;
    }
}
on_every_store!(
    a_rows_step_above_the_adapted_step_is_the_floor_of_a_lease,
    through_lanes
);

/// Leases of one tag from many tasks at once (as from many servers) never overlap and leave no
/// gap: each id of `1..max_id` belongs to exactly one lease. On MySQL this races the
/// compare-and-set lease (first leases, `step = None`) and the single-statement one.
async fn concurrent_leases_of_one_tag_are_disjoint_and_gapless(stores: &Stores) {
    let store = stores.segments.clone();
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
    // In one block: a lane's ranges are gapless too, from its first global id.
    let mut next = stores.ids(1, 1).0;
    for (start, end) in &ranges {
        assert_eq!(*start, next, "overlap or gap at {start}: {ranges:?}");
        assert!(end > start);
        next = *end;
    }
    let row = store.get_tag("race").await.unwrap().unwrap();
    assert_eq!(stores.ids(1, row.max_id).1, next);
}

async fn concurrent_leases_are_disjoint(on: On) {
    for single_statement in [true, false] {
        let stores = Stores::open(on, single_statement).await;
        concurrent_leases_of_one_tag_are_disjoint_and_gapless(&stores).await;
        stores.close().await;
    }
}
on_every_store!(concurrent_leases_are_disjoint, through_lanes);

// ---------------------------------------------------------------------------------------------
// TagAdminStore: tombstones and races
// ---------------------------------------------------------------------------------------------

/// A delete records the tag's high-water mark as its tombstone; a later delete at a higher
/// mark raises it; a tag never deleted (or never created) has none, and the name is compared
/// exactly. (A later delete can never be lower: a create below the mark is refused and a
/// give-back stops at the lease's start, so "the larger wins" is seen rising only.)
async fn a_delete_records_the_high_water_mark_as_the_tombstone(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
    assert_eq!(store.tombstone("ts-never").await.unwrap(), None);
    store.create_tag(&new_tag("ts-live", 10, 1)).await.unwrap();
    assert_eq!(store.tombstone("ts-live").await.unwrap(), None);

    store.create_tag(&new_tag("ts-gone", 100, 1)).await.unwrap();
    store.lease("ts-gone", None).await.unwrap();
    store.lease("ts-gone", None).await.unwrap();
    assert!(store.delete_tag("ts-gone").await.unwrap());
    assert_eq!(store.tombstone("ts-gone").await.unwrap(), Some(201));
    assert_eq!(store.tombstone("TS-GONE").await.unwrap(), None);
    assert_eq!(store.tombstone("ts-gon").await.unwrap(), None);
    assert_eq!(store.tombstone("ts-live").await.unwrap(), None);

    // Created again at the mark, deleted where it stands: the same mark.
    store
        .create_tag(&new_tag("ts-gone", 100, 201))
        .await
        .unwrap();
    assert!(store.delete_tag("ts-gone").await.unwrap());
    assert_eq!(store.tombstone("ts-gone").await.unwrap(), Some(201));
    // Created again above it and leased: the larger mark wins.
    store
        .create_tag(&new_tag("ts-gone", 100, 5000))
        .await
        .unwrap();
    store.lease("ts-gone", None).await.unwrap();
    assert!(store.delete_tag("ts-gone").await.unwrap());
    assert_eq!(store.tombstone("ts-gone").await.unwrap(), Some(5100));
    // A delete of nothing leaves the mark alone.
    assert!(!store.delete_tag("ts-gone").await.unwrap());
    assert_eq!(store.tombstone("ts-gone").await.unwrap(), Some(5100));
    stores.close().await;
}
on_every_store!(
    a_delete_records_the_high_water_mark_as_the_tombstone,
    through_lanes
);

/// Servers creating one tag at the same moment: exactly one succeeds, every other is told
/// `AlreadyExists`, never that the database is unavailable.
async fn concurrent_creates_of_one_tag_give_one_row_and_already_exists(on: On) {
    let stores = Stores::open(on, true).await;
    for round in 0..4 {
        let tag = format!("race-create-{round}");
        let tasks: Vec<_> = (0..4)
            .map(|t| {
                let store = stores.segments.clone();
                let new = new_tag(&tag, 10 + t, 1 + t);
                tokio::spawn(async move { store.create_tag(&new).await })
            })
            .collect();
        let mut created = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                Ok(row) => created.push(row),
                Err(StoreError::AlreadyExists) => {}
                Err(e) => panic!("{tag}: {e:?}"),
            }
        }
        assert_eq!(created.len(), 1, "{tag}: {created:?}");
        let row = stores.segments.get_tag(&tag).await.unwrap().unwrap();
        assert_eq!((row.max_id, row.step), (created[0].max_id, created[0].step));
    }
    stores.close().await;
}
on_every_store!(
    concurrent_creates_of_one_tag_give_one_row_and_already_exists,
    through_lanes
);

// ---------------------------------------------------------------------------------------------
// SpecStore
// ---------------------------------------------------------------------------------------------

/// The formats of the spec scenarios: the store keeps them as opaque text.
const FORMAT_A: &str = r#"{"prefix":"A","date":"yyyyMMdd","width":6}"#;
const FORMAT_B: &str = r#"{"prefix":"B","date":"yyMM","width":4}"#;

/// A format is written once and for good: the second write (another format) is refused and
/// leaves the first; it is read back by the tag's exact name only; the list holds every
/// formatted tag; deleting the tag's row keeps its format.
async fn a_format_is_written_once_and_for_good(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
    assert_eq!(store.get_format("fmt-a").await.unwrap(), None);
    assert!(store.put_format("fmt-a", FORMAT_A).await.unwrap());
    assert!(!store.put_format("fmt-a", FORMAT_B).await.unwrap());
    assert!(!store.put_format("fmt-a", FORMAT_A).await.unwrap());
    assert_eq!(
        store.get_format("fmt-a").await.unwrap().as_deref(),
        Some(FORMAT_A)
    );
    // Exact names only (MariaDB's default collation would match these).
    for other in ["FMT-A", "fmt-a ", "fmt-", "fmt-ab"] {
        assert_eq!(store.get_format(other).await.unwrap(), None, "{other:?}");
    }
    assert!(store.put_format("fmt-b", FORMAT_B).await.unwrap());
    let mut listed: Vec<(String, String)> = store
        .list_formats()
        .await
        .unwrap()
        .into_iter()
        .filter(|(t, _)| t.starts_with("fmt-"))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            ("fmt-a".to_owned(), FORMAT_A.to_owned()),
            ("fmt-b".to_owned(), FORMAT_B.to_owned())
        ]
    );
    // The format outlives the tag's row, as its tombstone does. (A plain create of the name
    // is refused: its format is stored; see `a_formatted_create_writes_format_and_row_at_once`.)
    assert!(matches!(
        store
            .create_formatted_tag(&new_tag("fmt-a", 10, 1), FORMAT_A)
            .await
            .unwrap(),
        FormattedCreate::Created(_)
    ));
    assert!(store.delete_tag("fmt-a").await.unwrap());
    assert_eq!(
        store.get_format("fmt-a").await.unwrap().as_deref(),
        Some(FORMAT_A)
    );
    assert!(!store.put_format("fmt-a", FORMAT_B).await.unwrap());
    stores.close().await;
}
on_every_store!(a_format_is_written_once_and_for_good, through_lanes);

/// Servers writing one tag's format at the same moment, each a different one: exactly one is
/// told it wrote, none fails, and every one then reads the winner's format.
async fn concurrent_format_writes_give_one_winner_that_all_read(on: On) {
    let stores = Stores::open(on, true).await;
    for round in 0..4 {
        let tag = format!("race-fmt-{round}");
        let tasks: Vec<_> = (0..4)
            .map(|t| {
                let store = stores.segments.clone();
                let tag = tag.clone();
                tokio::spawn(async move {
                    let format = format!(r#"{{"prefix":"P{t}"}}"#);
                    let wrote = store.put_format(&tag, &format).await;
                    let read = store.get_format(&tag).await;
                    (format, wrote, read)
                })
            })
            .collect();
        let mut winners = Vec::new();
        let mut reads = BTreeSet::new();
        for task in tasks {
            let (format, wrote, read) = task.await.unwrap();
            let wrote = wrote.unwrap_or_else(|e| panic!("{tag}: put_format failed: {e:?}"));
            if wrote {
                winners.push(format);
            }
            reads.insert(read.unwrap().unwrap());
        }
        assert_eq!(winners.len(), 1, "{tag}: {winners:?}");
        assert_eq!(reads.into_iter().collect::<Vec<_>>(), winners, "{tag}");
    }
    stores.close().await;
}
on_every_store!(
    concurrent_format_writes_give_one_winner_that_all_read,
    through_lanes
);

/// [`TagAdminStore::create_formatted_tag`]: the format and the row at once. A second create
/// of the name is `AlreadyExists` and leaves everything as it was; another format is
/// `OtherFormat` (nothing written, even for a fresh row's name); a plain create of a name whose
/// format is stored is refused, also after the tag's row was deleted, and the same format then
/// creates it again (above its tombstone); a JSON spelt otherwise but equal as a format counts
/// as the same; the tombstone rule holds as for a plain create.
async fn a_formatted_create_writes_format_and_row_at_once(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
    let created = store
        .create_formatted_tag(&new_tag("ff-a", 10, 5), FORMAT_A)
        .await
        .unwrap();
    let FormattedCreate::Created(row) = created else {
        panic!("{created:?}")
    };
    assert_eq!(
        (row.biz_tag.as_str(), row.max_id, row.step),
        ("ff-a", 5, 10)
    );
    assert_eq!(
        store.get_format("ff-a").await.unwrap().as_deref(),
        Some(FORMAT_A)
    );
    // Retried, the same format: the row is taken.
    assert!(matches!(
        store
            .create_formatted_tag(&new_tag("ff-a", 10, 5), FORMAT_A)
            .await,
        Err(StoreError::AlreadyExists)
    ));
    // Another format while the tag exists: the tag exists (nothing written).
    assert!(matches!(
        store
            .create_formatted_tag(&new_tag("ff-a", 10, 5), FORMAT_B)
            .await,
        Err(StoreError::AlreadyExists)
    ));
    assert_eq!(
        store.get_format("ff-a").await.unwrap().as_deref(),
        Some(FORMAT_A)
    );
    // A plain create of the formatted name: refused, row and format unchanged.
    assert!(matches!(
        store.create_tag(&new_tag("ff-a", 99, 77)).await,
        Err(StoreError::AlreadyExists)
    ));
    let row = store.get_tag("ff-a").await.unwrap().unwrap();
    assert_eq!((row.max_id, row.step), (5, 10));
    // Deleted: the format stays and keeps the name.
    assert!(store.delete_tag("ff-a").await.unwrap());
    assert_eq!(store.get_tag("ff-a").await.unwrap(), None);
    assert!(matches!(
        store.create_tag(&new_tag("ff-a", 10, 5)).await,
        Err(StoreError::AlreadyExists)
    ));
    assert_eq!(
        store.get_tag("ff-a").await.unwrap(),
        None,
        "a refused plain create wrote a row"
    );
    assert_eq!(
        store
            .create_formatted_tag(&new_tag("ff-a", 10, 5), FORMAT_B)
            .await
            .unwrap(),
        FormattedCreate::OtherFormat(FORMAT_A.to_owned())
    );
    assert_eq!(
        store.get_tag("ff-a").await.unwrap(),
        None,
        "another format wrote a row"
    );
    // The same format, spelt otherwise (field order, spacing): created again. Not below the
    // tombstone (the row was at 5 when deleted).
    let respelt = r#"{ "width": 6, "date": "yyyyMMdd", "prefix": "A" }"#;
    assert!(matches!(
        store
            .create_formatted_tag(&new_tag("ff-a", 10, 1), respelt)
            .await,
        Err(StoreError::BelowDeletedMaxId { high_water: 5 })
    ));
    assert_eq!(
        store.get_tag("ff-a").await.unwrap(),
        None,
        "below the tombstone wrote a row"
    );
    assert!(matches!(
        store
            .create_formatted_tag(&new_tag("ff-a", 10, 5), respelt)
            .await
            .unwrap(),
        FormattedCreate::Created(_)
    ));
    assert_eq!(
        store.get_format("ff-a").await.unwrap().as_deref(),
        Some(FORMAT_A)
    );
    // A fresh name with a plain row: another format's create is `AlreadyExists` and writes no
    // format beside the plain row (the transaction rolled back).
    store.create_tag(&new_tag("ff-plain", 10, 1)).await.unwrap();
    assert!(matches!(
        store
            .create_formatted_tag(&new_tag("ff-plain", 10, 1), FORMAT_B)
            .await,
        Err(StoreError::AlreadyExists)
    ));
    assert_eq!(
        store.get_format("ff-plain").await.unwrap(),
        None,
        "a lost formatted create left its format behind"
    );
    // Another format refused on a fresh name writes neither format nor row: ff-b is free.
    assert!(matches!(
        store
            .create_formatted_tag(&new_tag("ff-b", 10, 1), FORMAT_B)
            .await
            .unwrap(),
        FormattedCreate::Created(_)
    ));
    stores.close().await;
}
on_every_store!(
    a_formatted_create_writes_format_and_row_at_once,
    through_lanes
);

/// Many tasks race plain and formatted creates (two formats) of one fresh name: exactly one
/// wins, none fails as an outage, and the stored state is the winner's: a format exactly when a
/// formatted create won, and then the winner's format.
async fn racing_plain_and_formatted_creates_leave_the_winners_state(on: On) {
    let stores = Stores::open(on, true).await;
    for round in 0..6 {
        let tag = format!("race-pf-{round}");
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(6));
        let tasks: Vec<_> = (0..6)
            .map(|t| {
                let store = stores.segments.clone();
                let new = new_tag(&tag, 10 + t, 1);
                let start = start.clone();
                tokio::spawn(async move {
                    start.wait().await;
                    let format = match t % 3 {
                        0 => None,
                        1 => Some(FORMAT_A),
                        _ => Some(FORMAT_B),
                    };
                    let done = match format {
                        None => store.create_tag(&new).await.map(|r| (r, None)),
                        Some(f) => match store.create_formatted_tag(&new, f).await {
                            Ok(FormattedCreate::Created(r)) => Ok((r, Some(f))),
                            Ok(FormattedCreate::OtherFormat(_)) => Err(StoreError::AlreadyExists),
                            Err(e) => Err(e),
                        },
                    };
                    (t, done)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                (t, Ok((row, format))) => winners.push((t, row, format)),
                (_, Err(StoreError::AlreadyExists)) => {}
                (t, Err(e)) => panic!("{tag}: task {t}: {e:?}"),
            }
        }
        assert_eq!(winners.len(), 1, "{tag}: {winners:?}");
        let (t, won, format) = &winners[0];
        let row = stores.segments.get_tag(&tag).await.unwrap().unwrap();
        assert_eq!(row.step, 10 + t, "{tag}: the row is not the winner's");
        assert_eq!(row.step, won.step);
        assert_eq!(
            stores.segments.get_format(&tag).await.unwrap().as_deref(),
            *format,
            "{tag}: the stored format is not the winner's"
        );
    }
    stores.close().await;
}
on_every_store!(
    racing_plain_and_formatted_creates_leave_the_winners_state,
    through_lanes
);

// ---------------------------------------------------------------------------------------------
// LaneRegistry, and the lane's check of it
// ---------------------------------------------------------------------------------------------

/// A fresh database is no lane; the first claim records its slot for good and a later claim
/// of another slot answers the recorded one. Through a lane, the lane's first lease is that
/// first claim. A lane that finds another slot recorded, a server without lanes on a lane's
/// database, and another region's lane whose database records none refuse to lease with
/// [`StoreError::LaneMismatch`], not as an outage.
async fn a_lane_slot_is_recorded_once(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
    let database = &stores.database_store;
    assert_eq!(store.lane_slot().await.unwrap(), None);
    store.create_tag(&new_tag("lane-t", 10, 1)).await.unwrap();

    // Another region's lane, before its own region recorded the slot.
    let foreign = LaneStore::new(
        database.clone(),
        LaneMode::Lane {
            slot: 2,
            own: false,
        },
    );
    let e = foreign.lease("lane-t", None).await.unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::LaneMismatch {
                recorded: None,
                configured: Some(2)
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        database.lane_slot().await.unwrap(),
        None,
        "a foreign lane claimed"
    );

    let recorded = match stores.lane {
        // The own lane's first lease records its slot.
        Some(slot) => {
            let lease = store.lease("lane-t", None).await.unwrap();
            assert_eq!(range(lease), stores.ids(1, 11));
            slot
        }
        None => {
            assert_eq!(store.claim_lane_slot(3).await.unwrap(), 3);
            3
        }
    };
    assert_eq!(store.lane_slot().await.unwrap(), Some(recorded));
    assert_eq!(database.lane_slot().await.unwrap(), Some(recorded));
    let other = (recorded + 1) % map::SLOTS;
    assert_eq!(store.claim_lane_slot(other).await.unwrap(), recorded);
    assert_eq!(store.claim_lane_slot(recorded).await.unwrap(), recorded);
    assert_eq!(store.lane_slot().await.unwrap(), Some(recorded));
    // The claim's identity, recorded beside the slot once: every read gives the same one.
    let record = database.lane_record().await.unwrap().unwrap();
    assert_eq!(record.slot, recorded);
    assert!(record.claimed_ms().is_some(), "{record:?}");
    assert_eq!(store.lane_record().await.unwrap(), Some(record));

    // A lane configured with another slot, own or not, and a server without lanes.
    for own in [true, false] {
        let wrong = LaneStore::new(database.clone(), LaneMode::Lane { slot: other, own });
        let e = wrong.lease("lane-t", None).await.unwrap_err();
        assert!(
            matches!(e, StoreError::LaneMismatch { recorded: Some(r), configured: Some(c) }
                if r == recorded && c == other),
            "{e:?}"
        );
        assert!(e.to_string().contains("lane mismatch"), "{e}");
    }
    let plain = LaneStore::new(database.clone(), LaneMode::Plain);
    let e = plain.lease("lane-t", None).await.unwrap_err();
    assert!(
        matches!(e, StoreError::LaneMismatch { recorded: Some(r), configured: None } if r == recorded),
        "{e:?}"
    );
    // The right slot, from another region: served.
    let right = LaneStore::new(
        database.clone(),
        LaneMode::Lane {
            slot: recorded,
            own: false,
        },
    );
    right.lease("lane-t", None).await.unwrap();
    stores.close().await;
}
on_every_store!(a_lane_slot_is_recorded_once, through_lanes);

/// Servers claiming a fresh database's slot at the same moment, each another slot: none fails,
/// and every one reads back the one slot recorded. Through a lane: servers of one region
/// taking a new lane's first lease at the same moment all lease (issue 43).
async fn concurrent_slot_claims_all_read_the_one_recorded(on: On) {
    let stores = Stores::open(on, true).await;
    let database = &stores.database_store;
    if stores.lane.is_some() {
        stores
            .segments
            .create_tag(&new_tag("lane-race", 10, 1))
            .await
            .unwrap();
        let tasks: Vec<_> = (0..4)
            .map(|_| {
                // A server each: its own lane store, its slot unchecked yet.
                let lane = own_lane(database, LANE_SLOT);
                tokio::spawn(async move { lane.lease("lane-race", None).await.map(range) })
            })
            .collect();
        let mut ranges = Vec::new();
        for task in tasks {
            ranges.push(task.await.unwrap().unwrap());
        }
        ranges.sort_unstable();
        let mut next = stores.ids(1, 1).0;
        for (start, end) in &ranges {
            assert_eq!(*start, next, "{ranges:?}");
            next = *end;
        }
        assert_eq!(database.lane_slot().await.unwrap(), Some(LANE_SLOT));
        stores.close().await;
        return;
    }
    let tasks: Vec<_> = (0..4u8)
        .map(|slot| {
            let store = stores.segments.clone();
            tokio::spawn(async move {
                let claimed = store.claim_lane_slot(slot).await;
                let read = store.lane_slot().await;
                (claimed, read)
            })
        })
        .collect();
    let mut seen = BTreeSet::new();
    for task in tasks {
        let (claimed, read) = task.await.unwrap();
        let claimed = claimed.unwrap_or_else(|e| panic!("claim_lane_slot failed: {e:?}"));
        seen.insert(claimed);
        assert_eq!(read.unwrap(), Some(claimed));
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    stores.close().await;
}
on_every_store!(
    concurrent_slot_claims_all_read_the_one_recorded,
    through_lanes
);

// ---------------------------------------------------------------------------------------------
// WorkerStore
// ---------------------------------------------------------------------------------------------

/// 2023-11-14T22:13:20Z: the wall clock of the worker-lease scenarios.
const NOW: i64 = 1_700_000_000_000;

/// Free worker ids are claimed from 0 upwards, each by one owner, until the layout's largest
/// id is taken; then the claim is refused.
async fn worker_leases_are_claimed_from_zero_until_the_layout_runs_out(kind: Kind) {
    let stores = Stores::open(kind, true).await;
    let store = &stores.workers;
    let a = store
        .acquire_lease(&node("a"), 10_000, 1, NOW)
        .await
        .unwrap();
    let b = store
        .acquire_lease(&node("b"), 10_000, 1, NOW)
        .await
        .unwrap();
    assert_eq!((a.worker_id, a.last_timestamp_ms), (0, 0));
    assert_eq!((b.worker_id, b.last_timestamp_ms), (1, 0));
    let err = store
        .acquire_lease(&node("c"), 10_000, 1, NOW + 1)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WorkerStoreError::Exhausted(m) if m.contains("all 2 worker ids")),
        "{err:?}"
    );
    stores.close().await;
}
on_every_store!(worker_leases_are_claimed_from_zero_until_the_layout_runs_out);

/// Only the owner renews a lease; the stored last timestamp only rises (by heartbeat or
/// release), and the next holder starts from it.
async fn only_the_owner_renews_a_worker_lease_and_its_last_timestamp_only_rises(kind: Kind) {
    let stores = Stores::open(kind, true).await;
    let store = &stores.workers;
    let lease = store
        .acquire_lease(&node("me"), 10_000, 0, NOW)
        .await
        .unwrap();
    let id = lease.worker_id;
    assert!(
        !store
            .heartbeat(id, "someone-else", NOW + 50_000, NOW + 40_000)
            .await
            .unwrap(),
        "another owner renewed the lease"
    );
    assert!(
        store
            .heartbeat(id, "me", NOW + 12_000, NOW + 5_000)
            .await
            .unwrap()
    );
    assert!(
        store
            .heartbeat(id, "me", NOW + 13_000, NOW + 3_000)
            .await
            .unwrap()
    );
    store.release(id, "me", NOW + 1_000).await.unwrap();

    let next = store
        .acquire_lease(&node("next"), 10_000, 0, NOW + 6_000)
        .await
        .unwrap();
    assert_eq!((next.worker_id, next.last_timestamp_ms), (id, NOW + 5_000));
    stores.close().await;
}
on_every_store!(only_the_owner_renews_a_worker_lease_and_its_last_timestamp_only_rises);

/// A lease that expired is taken over (with the last timestamp its holder stored), one that
/// has not is not; the old holder can no longer renew it.
async fn an_expired_worker_lease_is_taken_over(kind: Kind) {
    let stores = Stores::open(kind, true).await;
    let store = &stores.workers;
    let old = store
        .acquire_lease(&node("old"), 10_000, 0, NOW)
        .await
        .unwrap();
    assert!(
        store
            .heartbeat(old.worker_id, "old", NOW + 10_000, NOW + 4_000)
            .await
            .unwrap()
    );

    let err = store
        .acquire_lease(&node("new"), 10_000, 0, NOW + 5_000)
        .await
        .unwrap_err();
    assert!(matches!(err, WorkerStoreError::Exhausted(_)), "{err:?}");

    let new = store
        .acquire_lease(&node("new"), 10_000, 0, NOW + 10_001)
        .await
        .unwrap();
    assert_eq!(
        (new.worker_id, new.last_timestamp_ms),
        (old.worker_id, NOW + 4_000)
    );
    assert!(
        !store
            .heartbeat(old.worker_id, "old", NOW + 20_000, NOW + 10_002)
            .await
            .unwrap(),
        "the old holder renewed a lease taken over"
    );
    assert!(
        store
            .heartbeat(new.worker_id, "new", NOW + 20_001, NOW + 10_002)
            .await
            .unwrap()
    );
    stores.close().await;
}
on_every_store!(an_expired_worker_lease_is_taken_over);

/// An expired lease whose stored time is ahead of the claimer's clock is refused (the error
/// says so) until the clock passes that time.
async fn an_expired_lease_ahead_of_the_clock_is_refused_until_the_clock_passes_it(kind: Kind) {
    let stores = Stores::open(kind, true).await;
    let store = &stores.workers;
    let old = store
        .acquire_lease(&node("old"), 10_000, 0, NOW)
        .await
        .unwrap();
    store
        .release(old.worker_id, "old", NOW + 60_000)
        .await
        .unwrap();

    let err = store
        .acquire_lease(&node("behind"), 10_000, 0, NOW + 20_000)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WorkerStoreError::Exhausted(m) if m.contains("ahead of this clock")),
        "{err:?}"
    );
    let later = store
        .acquire_lease(&node("later"), 10_000, 0, NOW + 60_000)
        .await
        .unwrap();
    assert_eq!(
        (later.worker_id, later.last_timestamp_ms),
        (old.worker_id, NOW + 60_000)
    );
    stores.close().await;
}
on_every_store!(an_expired_lease_ahead_of_the_clock_is_refused_until_the_clock_passes_it);

/// After a release, a late heartbeat of the process that released cannot renew the lease.
async fn a_released_worker_lease_cannot_be_renewed_by_its_old_owner(kind: Kind) {
    let stores = Stores::open(kind, true).await;
    let store = &stores.workers;
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
    stores.close().await;
}
on_every_store!(a_released_worker_lease_cannot_be_renewed_by_its_old_owner);

/// Disposable ids (`WORKER_NODE`) are new on every call, increasing, and refused (not
/// wrapped) once above the layout's largest worker id.
async fn disposable_worker_ids_increase_and_stop_at_the_layouts_max(kind: Kind) {
    let stores = Stores::open(kind, true).await;
    let store = &stores.workers;
    let first = store.assign_disposable(&node("a"), 1_000).await.unwrap();
    let second = store.assign_disposable(&node("b"), 1_000).await.unwrap();
    assert!(first >= 1, "{first}");
    assert!(second > first, "{first} then {second}");
    let err = store
        .assign_disposable(&node("c"), second)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, WorkerStoreError::Exhausted(m) if m.contains("above the layout's largest worker id")),
        "{err:?}"
    );
    stores.close().await;
}
on_every_store!(disposable_worker_ids_increase_and_stop_at_the_layouts_max);

// ---------------------------------------------------------------------------------------------
// MariaDB only
// ---------------------------------------------------------------------------------------------

/// On a `leaf_alloc` that Leaf created with its own character set and collation, the tombstone
/// and format tables' `biz_tag` compare exactly as `leaf_alloc.biz_tag` does.
#[tokio::test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
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
        pgbouncer: false,
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
            // Always ascii_bin: the quota table's keys are compared exactly, whatever
            // leaf_alloc's collation (a formatted tag's quota key is its stored spelling).
            ("leafid_quota_use".to_owned(), "ascii_bin".to_owned()),
            // Always ascii_bin too: a strict tag's owner row is keyed by its stored spelling.
            ("leafid_strict_owner".to_owned(), "ascii_bin".to_owned()),
            ("leafid_tag_format".to_owned(), "ascii_bin".to_owned()),
            ("leafid_tag_tombstone".to_owned(), "ascii_bin".to_owned()),
        ]
    );
    database.close().await;
}

/// A key id's check value is recorded once and for good: the first bind writes it, a later
/// bind of another value answers the recorded one and changes nothing, reads are exact on the
/// key id, and a read never binds.
async fn a_key_check_value_is_recorded_once(on: On) {
    let stores = Stores::open(on, true).await;
    let store = &stores.segments;
    assert_eq!(store.key_check("codes").await.unwrap(), None);
    // Looking does not bind.
    assert_eq!(store.key_check("codes").await.unwrap(), None);
    let first = "kcv1:0123456789abcdef";
    let other = "kcv1:fedcba9876543210";
    assert_eq!(store.bind_key("codes", first).await.unwrap(), first);
    assert_eq!(store.bind_key("codes", other).await.unwrap(), first);
    assert_eq!(store.bind_key("codes", first).await.unwrap(), first);
    assert_eq!(
        store.key_check("codes").await.unwrap().as_deref(),
        Some(first)
    );
    // Exact key ids only.
    for near in ["code", "codes2", "CODES", "codes "] {
        assert_eq!(store.key_check(near).await.unwrap(), None, "{near:?}");
    }
    // Another key id is its own.
    assert_eq!(store.bind_key("codes2", other).await.unwrap(), other);
    assert_eq!(
        store.key_check("codes").await.unwrap().as_deref(),
        Some(first)
    );
    stores.close().await;
}
on_every_store!(a_key_check_value_is_recorded_once, through_lanes);

/// Servers binding one key id at the same moment, each with another key: none fails, and
/// every one reads back the same recorded value, one of theirs.
async fn concurrent_key_binds_all_read_the_one_recorded(on: On) {
    let stores = Stores::open(on, true).await;
    for round in 0..4 {
        let key_id = format!("race_key_{round}");
        let tasks: Vec<_> = (0..4)
            .map(|t| {
                let store = stores.segments.clone();
                let key_id = key_id.clone();
                tokio::spawn(async move {
                    let check = format!("kcv1:{t:016x}");
                    let recorded = store.bind_key(&key_id, &check).await;
                    (check, recorded)
                })
            })
            .collect();
        let mut offered = BTreeSet::new();
        let mut recorded = BTreeSet::new();
        for task in tasks {
            let (check, got) = task.await.unwrap();
            offered.insert(check);
            recorded.insert(got.unwrap_or_else(|e| panic!("{key_id}: bind_key failed: {e:?}")));
        }
        assert_eq!(recorded.len(), 1, "{key_id}: {recorded:?}");
        assert!(offered.is_superset(&recorded), "{key_id}");
        assert_eq!(
            stores.segments.key_check(&key_id).await.unwrap().as_ref(),
            recorded.first()
        );
    }
    stores.close().await;
}
on_every_store!(
    concurrent_key_binds_all_read_the_one_recorded,
    through_lanes
);
