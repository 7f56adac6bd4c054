//! `leafid_quota_use`: the ids of a formatted tag's period granted to each caller token by every
//! server together ([`QuotaStore`]). The same statements on every database.

use async_trait::async_trait;

use super::dialect::Dialect;
use super::session::{Session, Sessions, race_pause, write_once_racing, write_one};
use super::statement::Statement;
use super::store::DialectStore;
use crate::segment::StoreError;
use crate::service::quota::{QuotaKey, QuotaStore};
use crate::store::errors::unavailable;

/// The row of a token, tag and period, where there is none (the derived one-row table keeps the
/// statement the same on MySQL, PostgreSQL and SQLite, as `leafid_shape_key`'s insert).
static INSERT_ROW: Statement = Statement::new(
    "INSERT INTO leafid_quota_use (token_name, biz_tag, period, used) SELECT ?, ?, ?, 0 \
     FROM (SELECT 1 AS one) AS o WHERE NOT EXISTS (SELECT 1 FROM leafid_quota_use \
     WHERE token_name = ? AND biz_tag = ? AND period = ?)",
);

static SELECT_USED: Statement = Statement::new(
    "SELECT used FROM leafid_quota_use WHERE token_name = ? AND biz_tag = ? AND period = ?",
);

/// The whole grant in one statement: `used` moves up by the wanted ids only where they fit
/// under the limit (`used <= limit - want`).
///
/// Safe: the condition is checked against the row the update writes over, never a stale read
/// (InnoDB's update reads the newest committed row under its row lock, PostgreSQL checks the
/// `WHERE` again on the row a concurrent update left, SQLite runs one writer at a time), so
/// `used` never passes the limit. It cannot lose a race: concurrent grants queue on the row.
static GRANT_WHOLE: Statement = Statement::new(
    "UPDATE leafid_quota_use SET used = used + ? \
     WHERE token_name = ? AND biz_tag = ? AND period = ? AND used <= ?",
);

/// The last, partial grant: a compare-and-set on `used`, so a grant read against a stale `used`
/// changes no row and is read again.
static GRANT_REST: Statement = Statement::new(
    "UPDATE leafid_quota_use SET used = ? \
     WHERE token_name = ? AND biz_tag = ? AND period = ? AND used = ?",
);

/// Compare-and-set tries of the last, partial grant before it answers `Unavailable` (other
/// servers won each one, though [`race_pause`] spread them).
const GRANT_TRIES: u32 = 16;

async fn used<D: Dialect>(db: Sessions<'_, D>, key: &QuotaKey<'_>) -> Result<i64, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let row = sqlx::query_as::<D::Driver, (i64,)>(SELECT_USED.text::<D>())
        .persistent(db.persistent())
        .bind(key.token)
        .bind(key.tag)
        .bind(key.period)
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    row.map(|(u,)| u).ok_or_else(|| {
        StoreError::Unavailable("leafid_quota_use has no row after the insert".into())
    })
}

/// [`QuotaStore::grant`] on any SQL database.
pub(crate) async fn grant<D: Dialect>(
    db: Sessions<'_, D>,
    key: &QuotaKey<'_>,
    want: u64,
    limit: u64,
) -> Result<u64, StoreError> {
    let insert = || {
        sqlx::query::<D::Driver>(INSERT_ROW.text::<D>())
            .persistent(db.persistent())
            .bind(key.token)
            .bind(key.tag)
            .bind(key.period)
            .bind(key.token)
            .bind(key.tag)
            .bind(key.period)
    };
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let want = i64::try_from(want).unwrap_or(i64::MAX);
    // Both are at least 0, so `limit - want` does not overflow; below 0 nothing fits whole.
    let whole = async || -> Result<bool, StoreError> {
        let q = sqlx::query::<D::Driver>(GRANT_WHOLE.text::<D>())
            .persistent(db.persistent())
            .bind(want)
            .bind(key.token)
            .bind(key.tag)
            .bind(key.period)
            .bind(limit - want);
        Ok(D::rows_affected(&write_one(db, q).await.map_err(unavailable)?) == 1)
    };
    // The usual grant is this one statement. No row changed: the key has no row yet (its
    // first grant: insert it, as every racing server may, and grant again), or fewer than
    // `want` ids are left (then the insert and the second try change nothing).
    if whole().await? {
        return Ok(want as u64);
    }
    write_once_racing(db, insert).await.map_err(unavailable)?;
    if whole().await? {
        return Ok(want as u64);
    }
    // Fewer than `want` ids are left: take what is, racing the other servers for it.
    for tries in 0..GRANT_TRIES {
        if tries > 0 {
            race_pause(tries).await;
        }
        let before = used(db, key).await?;
        let granted = want.min(limit.saturating_sub(before)).max(0);
        if granted == 0 {
            return Ok(0);
        }
        // Safe: the row moves from `before` to `before + granted <= limit` only if no other
        // server moved it since the read; every grant is such a committed move, so the grants
        // of all servers add up to at most `limit`.
        let set = sqlx::query::<D::Driver>(GRANT_REST.text::<D>())
            .persistent(db.persistent())
            .bind(before + granted)
            .bind(key.token)
            .bind(key.tag)
            .bind(key.period)
            .bind(before);
        let done = write_one(db, set).await.map_err(unavailable)?;
        if D::rows_affected(&done) == 1 {
            return Ok(granted as u64);
        }
    }
    Err(StoreError::Unavailable(
        "quota grant: every compare-and-set lost to another server".into(),
    ))
}

#[async_trait]
impl<S, D> QuotaStore for S
where
    S: DialectStore<Dialect = D>,
    D: Dialect,
{
    async fn grant(&self, key: &QuotaKey<'_>, want: u64, limit: u64) -> Result<u64, StoreError> {
        grant(self.sessions(), key, want, limit).await
    }
}
