//! [`SqlDriver`]: every sqlx bound the shared statements need of a driver, named once.
//!
//! A generic sqlx function needs its driver to run a query on a connection, to bind `&str` and
//! `i64`, and to decode the tuples the statements read. Written as `where` clauses, that block
//! stood over every generic function; folded into one trait it is `D: Dialect` (whose driver
//! is a `SqlDriver`) and nothing more.
//!
//! Rust carries a trait's supertraits, and bounds on their associated types, to every use of
//! the trait, but not its `where` clauses on other types (`&str: Encode<Self>`). So each such
//! bound is spelled as one on [`Same`]'s associated type, which is the type itself:
//! `Same<T, Is = T> + Same<T, Is: Bound>` says `T: Bound`, in a form the compiler carries.

use sqlx::database::HasStatementCache;
use sqlx::{Database, Encode, Executor, FromRow, IntoArguments, Type};

/// `T` itself, as an associated type, so that a supertrait can bound it (see the module docs).
pub(crate) trait Same<T: ?Sized> {
    /// Always `T`.
    type Is: ?Sized;
}

impl<T: ?Sized, U: ?Sized> Same<T> for U {
    type Is = T;
}

/// A worker-lease row as `SELECT worker_id, lease_until_ms, last_timestamp_ms, owner` reads it.
type LeaseRow = (i64, i64, i64, String);

/// A tag and its text, as `SELECT biz_tag, format` reads it.
type TextRow = (String, String);

/// A caller-token row as `crate::store::sql`'s `tokens` reads it.
pub(crate) type TokenRow = (
    String,
    String,
    String,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    i64,
    Option<i64>,
);

/// A strict tag's owner row as `crate::store::sql`'s `strict` reads it (owner, address and key
/// read as `''` where NULL).
pub(crate) type OwnerRecord = (String, String, String, i64, i64, i64);

/// A sqlx driver that runs the shared statements: it executes on a pooled connection, binds
/// `&str`, `Option<&str>` and `i64`, caches prepared statements, and decodes `(String,)`, `(i64,)`, `(String, String)`
/// and a worker-lease row. Every driver that can is one (the blanket impl below); the two lines per
/// bound are the form the compiler carries to each user (see the module docs).
pub(crate) trait SqlDriver:
    Database<Arguments: IntoArguments<Self>>
    + HasStatementCache
    + for<'c> Same<
        &'c mut <Self as Database>::Connection,
        Is = &'c mut <Self as Database>::Connection,
    > + for<'c> Same<&'c mut <Self as Database>::Connection, Is: Executor<'c, Database = Self>>
    + for<'a> Same<&'a str, Is = &'a str>
    + for<'a> Same<&'a str, Is: Encode<'a, Self> + Type<Self>>
    + for<'a> Same<Option<&'a str>, Is = Option<&'a str>>
    + for<'a> Same<Option<&'a str>, Is: Encode<'a, Self> + Type<Self>>
    + Same<i64, Is = i64>
    + for<'a> Same<i64, Is: Encode<'a, Self> + Type<Self>>
    + Same<Option<i64>, Is = Option<i64>>
    + for<'a> Same<Option<i64>, Is: Encode<'a, Self> + Type<Self>>
    + Same<(String,), Is = (String,)>
    + for<'r> Same<(String,), Is: FromRow<'r, <Self as Database>::Row>>
    + Same<(i64,), Is = (i64,)>
    + for<'r> Same<(i64,), Is: FromRow<'r, <Self as Database>::Row>>
    + Same<LeaseRow, Is = LeaseRow>
    + for<'r> Same<LeaseRow, Is: FromRow<'r, <Self as Database>::Row>>
    + Same<TextRow, Is = TextRow>
    + for<'r> Same<TextRow, Is: FromRow<'r, <Self as Database>::Row>>
    + Same<TokenRow, Is = TokenRow>
    + for<'r> Same<TokenRow, Is: FromRow<'r, <Self as Database>::Row>>
    + Same<OwnerRecord, Is = OwnerRecord>
    + for<'r> Same<OwnerRecord, Is: FromRow<'r, <Self as Database>::Row>>
{
}

impl<DB> SqlDriver for DB
where
    DB: Database<Arguments: IntoArguments<DB>> + HasStatementCache,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'a> &'a str: Encode<'a, DB> + Type<DB>,
    for<'a> Option<&'a str>: Encode<'a, DB> + Type<DB>,
    for<'a> i64: Encode<'a, DB> + Type<DB>,
    for<'a> Option<i64>: Encode<'a, DB> + Type<DB>,
    (String,): for<'r> FromRow<'r, DB::Row>,
    (i64,): for<'r> FromRow<'r, DB::Row>,
    LeaseRow: for<'r> FromRow<'r, DB::Row>,
    TextRow: for<'r> FromRow<'r, DB::Row>,
    TokenRow: for<'r> FromRow<'r, DB::Row>,
    OwnerRecord: for<'r> FromRow<'r, DB::Row>,
{
}
