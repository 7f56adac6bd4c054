//! The SQL every database shares, written once and generic over a [`Dialect`]: the few things a
//! database spells its own way, on the sqlx driver it speaks through. Each database's folder
//! implements `Dialect` (its `dialect.rs`) and [`DialectStore`] (its writes that grant ids and
//! its admin writes); everything else comes from here.
//!
//! - `driver`: [`SqlDriver`](driver::SqlDriver), every sqlx bound the shared functions need of
//!   a driver, once.
//! - `dialect`: [`Dialect`] and [`OnDriver`], the spelling and the driver under it.
//! - `statement`: [`Statement`](statement::Statement), a shared statement written once with
//!   `?` placeholders and numbered for PostgreSQL.
//! - `session`: where a statement runs ([`Sessions`], [`Session`]) and how one write commits
//!   ([`write_one`](session::write_one)).
//! - `formats`: `leafid_tag_format`, the formats of formatted tags.
//! - `keys`: `leafid_shape_key`, the check value of each key id's key.
//! - `lanes`: `leafid_lane`, the lane slot of a database, and tombstone reads.
//! - `quota`: `leafid_quota_use`, the ids of a period granted to each caller token.
//! - `strict`: `leafid_strict_owner`, the owner of each strict tag.
//! - `tags`: the `leaf_alloc` reads, the give-back of unused ids, and the row types.
//! - `tokens`: `leafid_caller_token`, the caller tokens (`crate::store::tokens`).
//! - `workers`: the worker-id store.
//! - `store`: [`DialectStore`], and `SegmentStore`/`WorkerStore` for every one.

mod dialect;
mod driver;
mod formats;
mod keys;
mod lanes;
mod quota;
mod session;
mod statement;
mod store;
mod strict;
mod tags;
mod tokens;
mod workers;

pub(crate) use dialect::{Dialect, OnDriver};
pub(crate) use session::{Session, Sessions};
pub(crate) use store::DialectStore;
pub(crate) use tags::{MySqlTagRecord, SqliteTagRecord, get_tag};
