//! `leafid-client`: ids from leafid servers, served in-process.
//!
//! Per tag, a [`SegmentSupply`] keeps two local batches of ids fetched as ranges (runs of
//! consecutive ids) through the server's range route (`GET /api/v1/segment/{tag}/ranges`)
//! and fetches the next one in the background once 10% of the current one is used, as the
//! server's own double buffer does; [`SnowflakeSupply`] buffers `GET /api/v1/snowflake/ranges`
//! the same way. [`SegmentSupply::try_next_id`] (and the fast path of `next_id`) is one
//! `fetch_add` and one compare on the range in use; the size of each request follows demand
//! (see [`ClientBuilder::target_lifetime`]). A formatted tag's ids are text
//! ([`FormattedSupply`], `client.formatted(tag)?`), each a [`FormattedId`] held inline: the same double buffer and failover over
//! the list route, with the period rule (a batch whose period ended by the client's clock is
//! dropped whole; its wall clock is [`ClientBuilder::clock`]) and a floor in byte order, except
//! for a permuted tag's answers (`"ordered": false`), handed out as received.
//! [`Client::snowflake_bounds`] answers the snowflake ids of a time range ([`IdBounds`]).
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
//! - `local.rs`: the local path, a `fetch_add` on a packed (generation, offset) word and
//!   a seqlock-read slot per range; why it hands no id twice and keeps ids increasing.
//! - `supply.rs`: the double buffer of ranges, the single-flight refill, the floor.
//! - `text.rs`: [`FormattedId`] (a text inline, no heap) and the one buffer of a batch's texts.
//! - `textcursor.rs`: the formatted supply's lock-free local path (one `fetch_add` and one
//!   copy of a text's window from a seqlocked slot); why it hands no text twice, keeps texts
//!   increasing and frees nothing a reader may still copy from.
//! - `formatted.rs`: the formatted supply: texts with their `period_end`, the period rule
//!   (the wall clock: [`ClientBuilder::clock`]), permuted tags' unordered answers.
//! - `bounds.rs`: [`Client::snowflake_bounds`], the ids of a time range.
//! - `sizing.rs`: the batch size that follows demand.
//! - `servers.rs`: failover, backoff, health probes, response validation.
//! - `error.rs`: [`Error`] and the per-server [`Fault`].

mod bounds;
mod client;
mod error;
mod formatted;
mod local;
mod servers;
mod sizing;
#[cfg(test)]
mod strict_tests;
mod supply;
mod sync;
mod text;
mod textcursor;
#[cfg(test)]
mod tokens_tests;
#[cfg(test)]
mod vectors;

pub use bounds::IdBounds;
pub use client::{
    Client, ClientBuilder, FormattedSupply, MAX_BATCH, MAX_SNOWFLAKE_BATCH, SegmentSupply,
    SnowflakeSupply,
};
pub use error::{Error, Fault, ServerFault};
pub use formatted::{MAX_FORMATTED_BATCH, WallClock};
pub use supply::SupplyStats;
pub use text::{FormattedId, INLINE_FORMATTED_LEN, MAX_FORMATTED_LEN};
