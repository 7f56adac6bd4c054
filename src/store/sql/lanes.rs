//! `leafid_lane`: which lane slot a database is (`crate::segment::lanes`), written once; and the
//! tombstone of a tag, which the lanes' repair reads. The same statements on every database.

use super::dialect::Dialect;
use super::session::{Session, Sessions, write_once_racing, write_one};
use super::statement::Statement;
use crate::segment::{LaneRecord, StoreError};
use crate::store::errors::unavailable;

/// Records the slot and its claim id only where none is recorded (one row, `id = 1`).
static INSERT_SLOT: Statement = Statement::new(
    "INSERT INTO leafid_lane (id, slot, claim_id) SELECT 1, ?, ? FROM (SELECT 1 AS one) AS o \
     WHERE NOT EXISTS (SELECT 1 FROM leafid_lane WHERE id = 1)",
);

/// Gives a slot recorded before migration 0007 its claim id, once: a second writer's update
/// matches no row and it reads the first one's id.
static SET_CLAIM_ID: Statement =
    Statement::new("UPDATE leafid_lane SET claim_id = ? WHERE id = 1 AND claim_id IS NULL");

static SELECT_TOMBSTONE_TAG: Statement =
    Statement::new("SELECT biz_tag FROM leafid_tag_tombstone WHERE biz_tag = ?");

static SELECT_TOMBSTONE_MAX: Statement =
    Statement::new("SELECT max_id FROM leafid_tag_tombstone WHERE biz_tag = ?");

/// [`LaneRegistry::lane_slot`](crate::segment::LaneRegistry::lane_slot).
pub(crate) async fn lane_slot<D: Dialect>(db: Sessions<'_, D>) -> Result<Option<u8>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let row = sqlx::query_as::<D::Driver, (i64,)>("SELECT slot FROM leafid_lane WHERE id = 1")
        .persistent(db.persistent())
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    row.map(|(slot,)| {
        u8::try_from(slot)
            .map_err(|_| StoreError::Unavailable(format!("leafid_lane.slot {slot}").into()))
    })
    .transpose()
}

/// [`LaneRegistry::claim_lane_slot`](crate::segment::LaneRegistry::claim_lane_slot).
pub(crate) async fn claim_lane_slot<D: Dialect>(
    db: Sessions<'_, D>,
    slot: u8,
) -> Result<u8, StoreError> {
    // Servers of one region racing for a new lane's first lease: the loser's insert fails
    // (a duplicate key on PostgreSQL, a deadlock on MariaDB) and, run again, finds the slot.
    let claim_id = LaneRecord::new_claim_id();
    let insert = || {
        sqlx::query::<D::Driver>(INSERT_SLOT.text::<D>())
            .persistent(db.persistent())
            .bind(i64::from(slot))
            .bind(claim_id.as_str())
    };
    write_once_racing(db, insert).await.map_err(unavailable)?;
    lane_slot(db)
        .await?
        .ok_or_else(|| StoreError::Unavailable("leafid_lane has no slot after the insert".into()))
}

/// [`LaneRegistry::lane_record`](crate::segment::LaneRegistry::lane_record).
pub(crate) async fn lane_record<D: Dialect>(
    db: Sessions<'_, D>,
) -> Result<Option<LaneRecord>, StoreError> {
    // The slot and the claim id never change once written: read one after the other.
    let Some(slot) = lane_slot(db).await? else {
        return Ok(None);
    };
    for _ in 0..2 {
        let mut s = Session::open(db).await.map_err(unavailable)?;
        let row = sqlx::query_as::<D::Driver, (String,)>(
            "SELECT COALESCE(claim_id, '') FROM leafid_lane WHERE id = 1",
        )
        .persistent(db.persistent())
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
        s.finish().await.map_err(unavailable)?;
        match row {
            Some((claim_id,)) if !claim_id.is_empty() => {
                return Ok(Some(LaneRecord { slot, claim_id }));
            }
            Some(_) => {}
            None => return Ok(None),
        }
        let claim_id = LaneRecord::new_claim_id();
        let set = sqlx::query::<D::Driver>(SET_CLAIM_ID.text::<D>())
            .persistent(db.persistent())
            .bind(claim_id.as_str());
        write_one(db, set).await.map_err(unavailable)?;
    }
    Err(StoreError::Unavailable(
        "leafid_lane has no claim id after the update".into(),
    ))
}

/// [`TagAdminStore::list_tombstones`](crate::segment::TagAdminStore::list_tombstones).
pub(crate) async fn list_tombstones<D: Dialect>(
    db: Sessions<'_, D>,
) -> Result<Vec<String>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let rows = sqlx::query_as::<D::Driver, (String,)>("SELECT biz_tag FROM leafid_tag_tombstone")
        .persistent(db.persistent())
        .fetch_all(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(rows.into_iter().map(|(t,)| t).collect())
}

/// [`TagAdminStore::tombstone`](crate::segment::TagAdminStore::tombstone).
pub(crate) async fn tombstone<D: Dialect>(
    db: Sessions<'_, D>,
    biz_tag: &str,
) -> Result<Option<i64>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    // The stored spelling first, compared exactly (MySQL's default collation would match
    // `Orders` to `orders`), then its high-water mark.
    let tag = sqlx::query_as::<D::Driver, (String,)>(SELECT_TOMBSTONE_TAG.text::<D>())
        .persistent(db.persistent())
        .bind(biz_tag)
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    let mut max = None;
    if tag.is_some_and(|(t,)| t == biz_tag) {
        max = sqlx::query_as::<D::Driver, (i64,)>(SELECT_TOMBSTONE_MAX.text::<D>())
            .persistent(db.persistent())
            .bind(biz_tag)
            .fetch_optional(s.conn())
            .await
            .map_err(unavailable)?
            .map(|(m,)| m);
    }
    s.finish().await.map_err(unavailable)?;
    Ok(max)
}
