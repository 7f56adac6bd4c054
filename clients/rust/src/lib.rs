//! `leafid-client`: ids from leafid servers, served in-process.
//!
//! Per tag, a [`SegmentSupply`] keeps two local batches of ids fetched through the server's
//! batch route (`GET /api/v1/segment/{tag}/ids?count=N`) and fetches the next one in the
//! background once 10% of the current one is used, as the server's own double buffer does; so
//! [`SegmentSupply::next_id`] is one local `fetch_add` on the fast path. [`SnowflakeSupply`]
//! buffers batches of `GET /api/v1/snowflake/ids` the same way, and
//! [`SnowflakeSupply::bounds`] asks `GET /api/v1/snowflake/bounds` for the id range of a time
//! range (for `WHERE id BETWEEN`).
//!
//! Guarantees, per supply (see `supply` for why they hold):
//! - no id is handed out twice, and only ids received in a 200 response body;
//! - ids increase: a call that starts after another returned gets a larger id, across
//!   failovers too (ids of a lagging server that are not above the last batch are discarded
//!   and counted in [`SupplyStats::discarded_ids`]);
//! - while any server answers, a caller sees no error: a failing server is marked down and the
//!   next one asked at once; a health probe of `/health/ready`, on an exponential backoff,
//!   brings it back.
//!
//! # Layout
//!
//! - `client.rs`: [`Client`], [`ClientBuilder`] and the handles.
//! - `supply.rs`: the double buffer, the single-flight refill, the floor (monotonicity).
//! - `servers.rs`: failover, backoff, health probes, response validation.
//! - `error.rs`: [`Error`] and the per-server [`Fault`].

mod client;
mod error;
mod servers;
mod supply;

pub use client::{
    Client, ClientBuilder, MAX_BATCH, SegmentSupply, SnowflakeBounds, SnowflakeSupply,
};
pub use error::{Error, Fault, ServerFault};
pub use supply::SupplyStats;
