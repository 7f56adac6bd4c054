//! `leafid_caller_token`: the caller tokens ([`CallerTokenStore`]), the same statements on
//! every database, and the role's implementation for every [`DialectStore`].

use async_trait::async_trait;

use super::dialect::Dialect;
use super::driver::TokenRow;
use super::session::{Session, Sessions, write_one};
use super::statement::Statement;
use super::store::DialectStore;
use crate::segment::StoreError;
use crate::store::errors::{insert_error, unavailable};
use crate::store::tokens::{CallerTokenRow, CallerTokenStore, Revoked};

/// A plain insert: the primary key (`name`) and the unique `token_hash` decide a race.
static INSERT: Statement = Statement::new(
    "INSERT INTO leafid_caller_token (name, token_hash, tags, rate_per_sec, burst, \
     period_share_ppm, created_at_ms, revoked_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
);

/// Every row; ordered in Rust (bytewise), whatever the collation.
static SELECT_ALL: Statement = Statement::new(
    "SELECT name, token_hash, tags, rate_per_sec, burst, period_share_ppm, created_at_ms, \
     revoked_at_ms FROM leafid_caller_token",
);

/// Revokes once: a revoked row keeps its first revocation time.
static REVOKE: Statement = Statement::new(
    "UPDATE leafid_caller_token SET revoked_at_ms = ? WHERE name = ? AND revoked_at_ms IS NULL",
);

/// Whether a row of this name exists (revoked or not).
static EXISTS: Statement = Statement::new("SELECT name FROM leafid_caller_token WHERE name = ?");

fn row_of(r: TokenRow) -> CallerTokenRow {
    let (name, token_hash, tags, rate_per_sec, burst, period_share_ppm, created, revoked) = r;
    CallerTokenRow {
        name,
        token_hash,
        tags,
        rate_per_sec,
        burst,
        period_share_ppm,
        created_at_ms: created,
        revoked_at_ms: revoked,
    }
}

async fn create<D: Dialect>(db: Sessions<'_, D>, row: &CallerTokenRow) -> Result<(), StoreError> {
    let insert = sqlx::query::<D::Driver>(INSERT.text::<D>())
        .persistent(db.persistent())
        .bind(row.name.as_str())
        .bind(row.token_hash.as_str())
        .bind(row.tags.as_str())
        .bind(row.rate_per_sec)
        .bind(row.burst)
        .bind(row.period_share_ppm)
        .bind(row.created_at_ms);
    write_one(db, insert).await.map_err(insert_error)?;
    Ok(())
}

async fn list<D: Dialect>(db: Sessions<'_, D>) -> Result<Vec<CallerTokenRow>, StoreError> {
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let rows = sqlx::query_as::<D::Driver, TokenRow>(SELECT_ALL.text::<D>())
        .persistent(db.persistent())
        .fetch_all(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    let mut rows: Vec<CallerTokenRow> = rows.into_iter().map(row_of).collect();
    rows.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(rows)
}

async fn revoke<D: Dialect>(
    db: Sessions<'_, D>,
    name: &str,
    at_ms: i64,
) -> Result<Revoked, StoreError> {
    let update = sqlx::query::<D::Driver>(REVOKE.text::<D>())
        .persistent(db.persistent())
        .bind(at_ms)
        .bind(name);
    let done = write_one(db, update).await.map_err(unavailable)?;
    if D::rows_affected(&done) == 1 {
        return Ok(Revoked::Now);
    }
    let mut s = Session::open(db).await.map_err(unavailable)?;
    let found = sqlx::query_as::<D::Driver, (String,)>(EXISTS.text::<D>())
        .persistent(db.persistent())
        .bind(name)
        .fetch_optional(s.conn())
        .await
        .map_err(unavailable)?;
    s.finish().await.map_err(unavailable)?;
    // Compared exactly: a case-insensitive collation must not revoke "Pay" for "pay".
    Ok(match found {
        Some((n,)) if n == name => Revoked::Already,
        _ => Revoked::Unknown,
    })
}

#[async_trait]
impl<S, D> CallerTokenStore for S
where
    S: DialectStore<Dialect = D>,
    D: Dialect,
{
    async fn create_token(&self, row: &CallerTokenRow) -> Result<(), StoreError> {
        create(self.sessions(), row).await
    }

    async fn list_tokens(&self) -> Result<Vec<CallerTokenRow>, StoreError> {
        list(self.sessions()).await
    }

    async fn revoke_token(&self, name: &str, at_ms: i64) -> Result<Revoked, StoreError> {
        revoke(self.sessions(), name, at_ms).await
    }
}
