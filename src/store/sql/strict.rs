//! `leafid_strict_owner`: the owner of each strict tag ([`OwnerStore`],
//! `crate::segment::strict`). The same statements on every database; every write is one
//! compare-and-set statement, so the database orders them.

use async_trait::async_trait;

use super::dialect::Dialect;
use super::driver::OwnerRecord;
use super::session::{Session, Sessions, write_once_racing, write_one};
use super::statement::Statement;
use super::store::DialectStore;
use crate::segment::StoreError;
use crate::segment::strict::{Claim, OwnerRow, OwnerStore};
use crate::store::errors::unavailable;

/// A deleted tag's row.
static REMOVE: Statement = Statement::new("DELETE FROM leafid_strict_owner WHERE biz_tag = ?");

/// A tag's row where it has none: no owner, epoch and version 0 (the derived one-row table
/// keeps the statement the same on MySQL, PostgreSQL and SQLite).
static INSERT_ROW: Statement = Statement::new(
    "INSERT INTO leafid_strict_owner (biz_tag, owner, address, peer_key, epoch, version) \
     SELECT ?, NULL, NULL, NULL, 0, 0 FROM (SELECT 1 AS one) AS o \
     WHERE NOT EXISTS (SELECT 1 FROM leafid_strict_owner WHERE biz_tag = ?)",
);

static SELECT_ROW: Statement = Statement::new(
    "SELECT COALESCE(owner, ''), COALESCE(address, ''), COALESCE(peer_key, ''), epoch, version, \
     lease_ms FROM leafid_strict_owner WHERE biz_tag = ?",
);

/// The takeover: only on the version the taker saw.
static TAKE_OVER: Statement = Statement::new(
    "UPDATE leafid_strict_owner SET owner = ?, address = ?, peer_key = ?, lease_ms = ?, \
     epoch = epoch + 1, version = version + 1 WHERE biz_tag = ? AND version = ?",
);

/// The renewal: only by the server that holds the epoch.
static RENEW: Statement = Statement::new(
    "UPDATE leafid_strict_owner SET version = version + 1 \
     WHERE biz_tag = ? AND epoch = ? AND owner = ?",
);

/// The release: only by the server that holds the epoch.
static RELEASE: Statement = Statement::new(
    "UPDATE leafid_strict_owner SET owner = NULL, address = NULL, peer_key = NULL, \
     version = version + 1 WHERE biz_tag = ? AND epoch = ? AND owner = ?",
);

async fn select<D: Dialect>(
    db: Sessions<'_, D>,
    biz_tag: &str,
) -> Result<Option<OwnerRow>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let row = sqlx::query_as::<D::Driver, OwnerRecord>(SELECT_ROW.text::<D>())
        .persistent(db.persistent())
        .bind(biz_tag)
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    let some = |s: String| (!s.is_empty()).then_some(s);
    Ok(row.map(
        |(owner, address, peer_key, epoch, version, lease_ms)| OwnerRow {
            owner: some(owner),
            address: some(address),
            peer_key: some(peer_key),
            epoch,
            version,
            lease_ms: lease_ms.max(0) as u64,
        },
    ))
}

#[async_trait]
impl<S, D> OwnerStore for S
where
    S: DialectStore<Dialect = D>,
    D: Dialect,
{
    async fn read_owner(&self, biz_tag: &str) -> Result<OwnerRow, StoreError> {
        let db = self.sessions();
        if let Some(row) = select(db, biz_tag).await? {
            return Ok(row);
        }
        let insert = || {
            sqlx::query::<D::Driver>(INSERT_ROW.text::<D>())
                .persistent(db.persistent())
                .bind(biz_tag)
                .bind(biz_tag)
        };
        write_once_racing(db, insert).await.map_err(unavailable)?;
        select(db, biz_tag).await?.ok_or_else(|| {
            StoreError::Unavailable("leafid_strict_owner has no row after the insert".into())
        })
    }

    async fn take_over(
        &self,
        biz_tag: &str,
        seen: &OwnerRow,
        claim: &Claim<'_>,
    ) -> Result<Option<i64>, StoreError> {
        let db = self.sessions();
        let q = sqlx::query::<D::Driver>(TAKE_OVER.text::<D>())
            .persistent(db.persistent())
            .bind(claim.owner)
            .bind(claim.address)
            .bind(claim.peer_key)
            .bind(i64::try_from(claim.lease_ms).unwrap_or(i64::MAX))
            .bind(biz_tag)
            .bind(seen.version);
        let done = write_one(db, q).await.map_err(unavailable)?;
        Ok((D::rows_affected(&done) == 1).then_some(seen.epoch + 1))
    }

    async fn renew(&self, biz_tag: &str, epoch: i64, owner: &str) -> Result<bool, StoreError> {
        let db = self.sessions();
        let q = sqlx::query::<D::Driver>(RENEW.text::<D>())
            .persistent(db.persistent())
            .bind(biz_tag)
            .bind(epoch)
            .bind(owner);
        let done = write_one(db, q).await.map_err(unavailable)?;
        Ok(D::rows_affected(&done) == 1)
    }

    async fn release(&self, biz_tag: &str, epoch: i64, owner: &str) -> Result<bool, StoreError> {
        let db = self.sessions();
        let q = sqlx::query::<D::Driver>(RELEASE.text::<D>())
            .persistent(db.persistent())
            .bind(biz_tag)
            .bind(epoch)
            .bind(owner);
        let done = write_one(db, q).await.map_err(unavailable)?;
        Ok(D::rows_affected(&done) == 1)
    }

    async fn remove(&self, biz_tag: &str) -> Result<(), StoreError> {
        let db = self.sessions();
        let q = sqlx::query::<D::Driver>(REMOVE.text::<D>())
            .persistent(db.persistent())
            .bind(biz_tag);
        write_one(db, q).await.map_err(unavailable)?;
        Ok(())
    }
}
