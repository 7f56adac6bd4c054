//! Snowflake ids: a 64-bit id packed from the time, a worker id and a sequence.
//!
//! ```text
//!  63   62 ..        .. t+w+s   t+w+s-1 ..  w+s   w+s-1 .. s   s-1 .. 0
//! +----+--------------------+-----------------+-------------+-----------+
//! | 0  | prefix (p bits)    | time delta (t)  | worker (w)  | seq (s)   |
//! +----+--------------------+-----------------+-------------+-----------+
//! ```
//!
//! - [`layout`]: field widths, compose/decompose (no field may overflow into its neighbour);
//!   presets and the one resolution of a layout from its settings, flags or query
//!   ([`layout::LayoutArgs::resolve`]); the one id parser and decoder ([`layout::parse_id`],
//!   [`layout::BitLayout::decode`]).
//! - [`clock`]: the [`clock::Clock`] trait and the system clock.
//! - [`direct`]: one CAS per id on a packed `tick|sequence` word.
//! - [`ring`]: the lock-free bounded ring the cached generator serves from.
//! - [`cached`]: ids made ahead of the clock by a filler thread ("borrowing future ticks").
//! - [`engine`]: the generator with its worker id as the server runs it (lease heartbeat, start-up checks).
//! - [`worker`]: where worker ids come from (the store trait the database layer implements).
//! - [`error`]: the small error enum of the generators.

pub mod cached;
pub mod clock;
pub mod direct;
pub mod engine;
pub mod error;
pub mod layout;
pub mod ring;
pub mod worker;
