//! `leafid_tag_format`: the format of each formatted tag (`crate::shapes`), written once and
//! never changed, the same statements on every database; and the creation of a formatted tag,
//! its format and its `leaf_alloc` row in one transaction ([`create_formatted_tag`]).

use super::dialect::Dialect;
use super::session::{Session, Sessions, write_once_racing};
use super::statement::Statement;
use crate::segment::{FormattedCreate, NewTag, StoreError, same_format};
use crate::store::errors::unavailable;

/// A tag's format, with the tag's stored spelling (compared exactly by the caller: MySQL's
/// default collation would match `Orders` to `orders`).
static SELECT_FORMAT: Statement =
    Statement::new("SELECT biz_tag, format FROM leafid_tag_format WHERE biz_tag = ?");

/// Records a format only where the tag has none: a derived one-row table keeps the statement
/// the same on MySQL (which wants a `FROM` before `WHERE`), PostgreSQL and SQLite.
static INSERT_FORMAT: Statement = Statement::new(
    "INSERT INTO leafid_tag_format (biz_tag, format) SELECT ?, ? FROM (SELECT 1 AS one) AS o \
     WHERE NOT EXISTS (SELECT 1 FROM leafid_tag_format WHERE biz_tag = ?)",
);

/// [`SpecStore::get_format`](crate::segment::SpecStore::get_format).
pub(crate) async fn get_format<D: Dialect>(
    db: Sessions<'_, D>,
    biz_tag: &str,
) -> Result<Option<String>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let row = sqlx::query_as::<D::Driver, (String, String)>(SELECT_FORMAT.text::<D>())
        .persistent(db.persistent())
        .bind(biz_tag)
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(row
        .filter(|(tag, _)| tag == biz_tag)
        .map(|(_, format)| format))
}

/// [`SpecStore::list_formats`](crate::segment::SpecStore::list_formats).
pub(crate) async fn list_formats<D: Dialect>(
    db: Sessions<'_, D>,
) -> Result<Vec<(String, String)>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let rows = sqlx::query_as::<D::Driver, (String, String)>(
        "SELECT biz_tag, format FROM leafid_tag_format",
    )
    .persistent(db.persistent())
    .fetch_all(s.conn())
    .await
    .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    Ok(rows)
}

/// [`SpecStore::put_format`](crate::segment::SpecStore::put_format): `true` if written,
/// `false` if the tag had a format already (left as it was).
pub(crate) async fn put_format<D: Dialect>(
    db: Sessions<'_, D>,
    biz_tag: &str,
    format: &str,
) -> Result<bool, StoreError> {
    // Two servers writing one tag's format at once: the loser's insert fails (a duplicate key
    // on PostgreSQL, a deadlock on MariaDB) and, run again, finds the winner's row: `false`.
    let insert = || {
        sqlx::query::<D::Driver>(INSERT_FORMAT.text::<D>())
            .persistent(db.persistent())
            .bind(biz_tag)
            .bind(format)
            .bind(biz_tag)
    };
    let done = write_once_racing(db, insert).await.map_err(unavailable)?;
    Ok(D::rows_affected(&done) == 1)
}

/// The high-water mark a deleted tag left, read inside a create's transaction.
static SELECT_HIGH_WATER: Statement =
    Statement::new("SELECT max_id FROM leafid_tag_tombstone WHERE biz_tag = ?");

/// A formatted tag's row, inserted in the transaction that wrote (or found) its format.
static INSERT_ROW: Statement = Statement::new(
    "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) VALUES (?, ?, ?, ?)",
);

/// How many times [`create_formatted_tag`] runs a transaction that a deadlock, a lock wait
/// timeout or a serialization failure rolled back.
const CREATE_TRIES: u32 = 10;

/// One try of [`create_formatted_tag`]: its answer, or run it again.
enum Attempt {
    /// The answer.
    Done(Result<FormattedCreate, StoreError>),
    /// The format insert found a format it cannot read back in this transaction (a racing
    /// create's, not committed yet, or gone again): the transaction rolled back; run again.
    Again,
}

/// Whether a create's transaction was rolled back by a race it may simply run again after: a
/// duplicate key on the format (PostgreSQL: two inserts passed their `NOT EXISTS` before either
/// committed), a deadlock or serialization failure (MariaDB 1213 / SQLSTATE 40001, PostgreSQL
/// 40001 / 40P01) or a lock wait timeout (MariaDB 1205).
fn create_raced(e: &sqlx::Error) -> bool {
    crate::store::errors::lost_race(e) || crate::store::mysql::errors::is_retryable(e)
}

/// [`TagAdminStore::create_formatted_tag`](crate::segment::TagAdminStore::create_formatted_tag):
/// the format and the row in one transaction (see the trait for the rules), run again a
/// bounded number of times after a race rolled it back, then the last error is
/// [`StoreError::Unavailable`].
///
/// Why no race lies: the row's primary key decides. A plain create inserting the same name
/// either commits its row first (this transaction's row insert then fails on the key, and its
/// format rolls back with it) or finds this transaction's row (its insert fails on the key:
/// `AlreadyExists`); a plain create never commits a row beside a committed format, since it
/// checks the format inside its own insert (`create_tag` of each database).
pub(crate) async fn create_formatted_tag<D: Dialect>(
    db: Sessions<'_, D>,
    tag: &NewTag,
    format: &str,
) -> Result<FormattedCreate, StoreError> {
    let mut tries = 0;
    loop {
        let again = match create_formatted_once(db, tag, format).await {
            Ok(Attempt::Done(done)) => return done,
            Ok(Attempt::Again) => None,
            Err(e) if create_raced(&e) => Some(e),
            Err(e) => return Err(unavailable(e)),
        };
        tries += 1;
        if tries >= CREATE_TRIES {
            return Err(match again {
                Some(e) => unavailable(e),
                None => StoreError::Unavailable(
                    "a racing create's format stayed unreadable; try again".into(),
                ),
            });
        }
        let base = std::time::Duration::from_millis(1 << tries.min(6));
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let jitter = base.mul_f64(f64::from(nanos % 1000) / 1000.0);
        tracing::debug!(biz_tag = %tag.biz_tag, tries, error = ?again, "formatted create lost a race, running it again");
        tokio::time::sleep(base + jitter).await;
    }
}

/// One transaction of [`create_formatted_tag`]. Every early answer rolls back first (a
/// transaction dropped unfinished rolls back too, e.g. after a driver error).
async fn create_formatted_once<D: Dialect>(
    db: Sessions<'_, D>,
    tag: &NewTag,
    format: &str,
) -> Result<Attempt, sqlx::Error> {
    let persistent = db.persistent();
    // SQLite: `BEGIN IMMEDIATE`, the writers one at a time; MySQL and PostgreSQL: the
    // server's default isolation (every read below is of a key this transaction locks or
    // inserts, and a serialization failure is retried). On Galera a certification conflict
    // fails the `COMMIT` (1213), and the transaction runs again. (Untested here on Galera: a
    // brute-force abort that went unreported mid-transaction, as `MySqlStore::lease_cas`
    // describes for leases, would let the row insert commit alone.)
    let mut tx = db
        .pool
        .begin_with(D::WRITE_BEGIN.unwrap_or("BEGIN"))
        .await?;
    let name = tag.biz_tag.as_str();
    let inserted = sqlx::query::<D::Driver>(INSERT_FORMAT.text::<D>())
        .persistent(persistent)
        .bind(name)
        .bind(format)
        .bind(name)
        .execute(&mut *tx)
        .await?;
    if D::rows_affected(&inserted) == 0 {
        let stored = sqlx::query_as::<D::Driver, (String, String)>(SELECT_FORMAT.text::<D>())
            .persistent(persistent)
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        match stored {
            // The same format: a retried create, or a deleted formatted tag created again.
            Some((t, f)) if t == name && same_format(&f, format) => {}
            // Another format (or, on MySQL's default collation, another spelling's): kept for
            // good, nothing is written. A tag that exists is `AlreadyExists` first, as for any
            // create of an existing tag.
            Some((_, f)) => {
                let row = sqlx::query_as::<D::Driver, D::TagRecord>(D::SELECT_TAG)
                    .persistent(persistent)
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
                tx.rollback().await?;
                return Ok(Attempt::Done(match row {
                    Some(_) => Err(StoreError::AlreadyExists),
                    None => Ok(FormattedCreate::OtherFormat(f)),
                }));
            }
            None => {
                tx.rollback().await?;
                return Ok(Attempt::Again);
            }
        }
    }
    let high_water = sqlx::query_as::<D::Driver, (i64,)>(SELECT_HIGH_WATER.text::<D>())
        .persistent(persistent)
        .bind(name)
        .fetch_optional(&mut *tx)
        .await?;
    if let Some((high_water,)) = high_water.filter(|&(hw,)| tag.max_id < hw) {
        tx.rollback().await?;
        return Ok(Attempt::Done(Err(StoreError::BelowDeletedMaxId {
            high_water,
        })));
    }
    let row = sqlx::query::<D::Driver>(INSERT_ROW.text::<D>())
        .persistent(persistent)
        .bind(name)
        .bind(tag.max_id)
        .bind(tag.step)
        .bind(tag.description.as_deref())
        .execute(&mut *tx)
        .await;
    match row {
        Ok(_) => {}
        // The row is taken (maybe by a create racing this one): this transaction, its format
        // too, rolls back. The winner's row decides what the name is.
        Err(e)
            if e.as_database_error()
                .is_some_and(|d| d.is_unique_violation()) =>
        {
            tx.rollback().await?;
            return Ok(Attempt::Done(Err(StoreError::AlreadyExists)));
        }
        Err(e) => return Err(e),
    }
    let row = sqlx::query_as::<D::Driver, D::TagRecord>(D::SELECT_TAG)
        .persistent(persistent)
        .bind(name)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Attempt::Done(Ok(FormattedCreate::Created(row.into()))))
}
