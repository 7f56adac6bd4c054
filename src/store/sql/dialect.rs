//! [`Dialect`]: what the databases spell differently in the statements they share, on the sqlx
//! driver a database speaks through ([`OnDriver`]). A dialect is a type of its own, not the
//! driver, so a server that speaks another's wire protocol (TiDB over the MySQL driver,
//! CockroachDB over PostgreSQL's) can have its own SQL: one more unit type implementing both
//! traits, with `Driver = MySql` or `Driver = Postgres`.

use sqlx::{Database, FromRow};

use super::driver::SqlDriver;
use crate::segment::TagRow;

/// The sqlx driver a [`Dialect`] runs on. A trait of its own so that `Dialect` can bound the
/// driver as a supertrait (`OnDriver<Driver: SqlDriver>`): Rust carries that to every
/// `D: Dialect`, and would not carry a bound on an associated type declared in `Dialect`.
pub(crate) trait OnDriver {
    /// `MySql`, `Postgres` or `Sqlite`. Unbounded here: [`Dialect`] bounds it, once (a second
    /// bound here would give the compiler two ways to prove the driver a `Database`, and it
    /// overflows weighing them).
    type Driver;
}

/// The driver `D` runs on.
pub(crate) type DriverOf<D> = <D as OnDriver>::Driver;

/// What differs between the databases in the statements they share: one unit type per
/// database (`MySqlDialect`, `PgDialect`, `SqliteDialect`, each in its folder's `dialect.rs`).
pub(crate) trait Dialect: OnDriver<Driver: SqlDriver> + Send + Sync + 'static {
    /// Placeholders are `$1, $2, ...` (PostgreSQL), not `?` (see
    /// [`Statement`](super::statement::Statement)).
    const NUMBERED_PLACEHOLDERS: bool;
    /// One `leaf_alloc` row by tag, in this database's placeholder style.
    const SELECT_TAG: &'static str;
    /// A `leaf_alloc` row as this driver decodes it.
    type TagRecord: for<'r> FromRow<'r, <DriverOf<Self> as Database>::Row>
        + Into<TagRow>
        + Send
        + Unpin;
    /// The statement that opens a write's transaction, or `None` for one autocommit statement
    /// (see [`write_one`](super::session::write_one)).
    const WRITE_BEGIN: Option<&'static str>;
    /// The uid-generator `WORKER_NODE` insert (binds host and port).
    const INSERT_NODE: &'static str;
    /// The insert answers its row's id as a row (`RETURNING ID`, PostgreSQL) rather than in its
    /// result ([`Dialect::inserted_id`]).
    const INSERT_NODE_RETURNS_ID: bool;
    /// The id the `WORKER_NODE` insert gave its row, from its result; `None` where the result
    /// does not carry it (the insert returns it as a row instead).
    fn inserted_id(done: &<DriverOf<Self> as Database>::QueryResult) -> Option<u64>;
    /// How many rows a write changed.
    fn rows_affected(done: &<DriverOf<Self> as Database>::QueryResult) -> u64;
}
