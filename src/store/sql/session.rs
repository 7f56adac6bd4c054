//! Where the shared statements run: [`Sessions`] (the pool, and whether each statement must
//! keep its server connection) and [`Session`] (one statement's connection), and how one write
//! commits ([`write_one`], and [`write_once_racing`] for an insert that may lose a race).
//!
//! The shared statements run through a [`Session`]: a pooled connection, or, when the store
//! says each statement must keep its server connection (PostgreSQL behind PgBouncer in
//! transaction pooling mode, see [`postgres`](crate::store::postgres)), a transaction of its
//! own whose `COMMIT` is checked.

use sqlx::pool::PoolConnection;
use sqlx::query::Query;
use sqlx::{Database, Pool, Transaction};

use super::dialect::Dialect;

/// Where the shared statements run: the pool, and whether each one needs a transaction of its
/// own (see [`Session`]). A plain pool converts into one that does not.
pub(crate) struct Sessions<'a, D: Dialect> {
    /// The store's pool.
    pub pool: &'a Pool<D::Driver>,
    /// Every statement inside `BEGIN ... COMMIT`, so it keeps one server connection (PgBouncer).
    pub pinned: bool,
}

impl<D: Dialect> Sessions<'_, D> {
    /// Whether a statement may be prepared under a name and kept (sqlx's `persistent`). Not
    /// when pinned: sqlx 0.9 names every persistent statement and, with its cache off, never
    /// closes it, so behind PgBouncer another client's `sqlx_s_1` on the same server connection
    /// fails with `prepared statement "sqlx_s_1" already exists` (42P05). Unnamed statements
    /// live until the next one on that connection, inside the statement's own transaction.
    pub(crate) fn persistent(self) -> bool {
        !self.pinned
    }
}

impl<D: Dialect> Clone for Sessions<'_, D> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<D: Dialect> Copy for Sessions<'_, D> {}

impl<'a, D: Dialect> From<&'a Pool<D::Driver>> for Sessions<'a, D> {
    fn from(pool: &'a Pool<D::Driver>) -> Self {
        Self {
            pool,
            pinned: false,
        }
    }
}

/// One connection for one statement, or a transaction around it when the statement must keep
/// its server connection. [`Session::finish`] commits that transaction; a session dropped
/// without it rolls back.
pub(crate) enum Session<D: Dialect> {
    /// A pooled connection in autocommit mode.
    Plain(PoolConnection<D::Driver>),
    /// A transaction that pins the server connection (PgBouncer transaction pooling).
    Pinned(Transaction<'static, D::Driver>),
}

impl<D: Dialect> Session<D> {
    /// Takes a connection from `sessions`' pool, opening a transaction when it is pinned.
    pub(crate) async fn open(sessions: Sessions<'_, D>) -> Result<Self, sqlx::Error> {
        Ok(if sessions.pinned {
            Self::Pinned(sessions.pool.begin().await?)
        } else {
            Self::Plain(sessions.pool.acquire().await?)
        })
    }

    /// The connection to run the statement on.
    pub(crate) fn conn(&mut self) -> &mut <D::Driver as Database>::Connection {
        match self {
            Self::Plain(c) => c,
            Self::Pinned(tx) => tx,
        }
    }

    /// Commits the transaction, if any; its error is the statement's.
    pub(crate) async fn finish(self) -> Result<(), sqlx::Error> {
        match self {
            Self::Plain(_) => Ok(()),
            Self::Pinned(tx) => tx.commit().await,
        }
    }
}

/// Runs one write statement: inside `BEGIN ...; COMMIT` when [`Dialect::WRITE_BEGIN`] is `Some`
/// (SQLite, whose driver discards a failed autocommit commit, e.g. a full disk, so only an
/// explicit `COMMIT` reports it) or the sessions are pinned (PostgreSQL behind PgBouncer), else
/// as one autocommit statement (MySQL: its OK means committed, with no window in which a Galera
/// brute-force abort could roll the write back behind a `COMMIT` that still answers OK, as it
/// did to the segment lease's transaction, see `MySqlStore::lease_cas`; PostgreSQL: the commit
/// at the statement's `Sync` is answered before `ReadyForQuery`, which sqlx waits for). A failed
/// statement drops the transaction, which rolls it back.
pub(crate) async fn write_one<D: Dialect>(
    db: Sessions<'_, D>,
    query: Query<'_, D::Driver, <D::Driver as Database>::Arguments>,
) -> Result<<D::Driver as Database>::QueryResult, sqlx::Error> {
    match D::WRITE_BEGIN {
        Some(begin) => {
            let mut tx = db.pool.begin_with(begin).await?;
            let done = query.execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(done)
        }
        None => {
            let mut s = Session::open(db).await?;
            let done = query.execute(s.conn()).await?;
            s.finish().await?;
            Ok(done)
        }
    }
}

/// The pause before the `tries`-th run of a write that lost a race to another server: 1, 2,
/// 4 ... 64 ms, with up to as much again at random, so servers that met do not meet again.
pub(crate) async fn race_pause(tries: u32) {
    let base = std::time::Duration::from_millis(1 << tries.min(6));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let jitter = base.mul_f64(f64::from(nanos % 1000) / 1000.0);
    tokio::time::sleep(base + jitter).await;
}

/// How many times [`write_once_racing`] runs a write that lost a race.
const RACE_TRIES: u32 = 8;

/// Runs a write-once insert (`INSERT ... WHERE NOT EXISTS`) built by `insert`, again after it
/// lost a race with another server's insert of the same key
/// ([`lost_race`](crate::store::errors::lost_race)): run again, it finds the winner's row and
/// inserts nothing. Waits [`race_pause`] between tries; the last try's error is the answer.
pub(crate) async fn write_once_racing<'q, D: Dialect>(
    db: Sessions<'_, D>,
    insert: impl Fn() -> Query<'q, D::Driver, <D::Driver as Database>::Arguments>,
) -> Result<<D::Driver as Database>::QueryResult, sqlx::Error> {
    let mut tries = 0;
    loop {
        match write_one(db, insert()).await {
            Err(e) if crate::store::errors::lost_race(&e) && tries + 1 < RACE_TRIES => {
                tries += 1;
                tracing::debug!(tries, error = %e, "write-once insert lost a race, running it again");
                race_pause(tries).await;
            }
            done => return done,
        }
    }
}
