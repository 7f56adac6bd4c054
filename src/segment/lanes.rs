//! Lanes (issue 36): ids on both sides of a partition, from databases that never coordinate.
//!
//! A deployment can name several independent databases, typically one per region. Each is a
//! **lane** with a **slot** (0 to [`map::SLOTS`] - 1) recorded in the database itself
//! (`leafid_lane`, written once by the first server of its region and never changed). A lane's
//! rows count in their own **local** space (Leaf's `max_id = max_id + step`, unchanged), and
//! every lease is mapped into the lane's blocks of the one global id space ([`map`]):
//!
//! ```text
//! global(p, slot) = (p >> 20) << 23  |  slot << 20  |  (p & (2^20 - 1))
//! ```
//!
//! **Why two lanes never hand out one id.** `global` is injective on (local, slot) pairs: the
//! low 20 bits keep the offset, the next 3 the slot, the rest the block of `p`. Two lanes have
//! two slots (each database records its own; a server refuses a lane whose recorded slot is not
//! the one configured, and configured slots are distinct; and no two databases it reaches may
//! record one slot, [`claims`]), so their ids differ in the slot bits;
//! within a lane, each local position is leased once by the database's own guarantee, as for
//! any tag. A lease that would cross a block boundary is cut at it ([`store::LaneStore`]): the
//! rest of the block is a gap, never issued, so every segment is one run of global ids.
//!
//! **Order.** `global` increases with `p` for a fixed slot, so the per-server increasing
//! guarantee, the durability check and the regression guard hold per lane: each lane is its own
//! engine ([`router::Lanes`]). Across lanes ids are trend-increasing only: two lanes' ids at
//! equal local positions lie within one block group (2^23) of each other, and drift apart by 8
//! times the difference of their local counters when their traffic differs (measured in
//! `docs/deploy.md`).
//!
//! **From a single database to lanes.** `global(p, slot) >= p`, so a database that served
//! without lanes (identity ids below its `max_id`) keeps every new id above the old ones once it
//! becomes a lane; a new lane's rows are created at the highest `max_id` of the others, so its
//! ids lie above them too. A server without lanes refuses to lease from a database that records
//! a slot (checked at its first lease and again every minute), so no identity id is issued
//! beside mapped ones.
//!
//! **Formatted tags** write their sequence into the text, with no room for a slot: they lease
//! only from slot 0's database (identity), reached over the network from the other regions.

pub mod claims;
pub mod map;
pub mod repair;
pub mod router;
pub mod store;
pub mod watch;

pub use claims::LaneClaims;
pub use router::{Lane, Lanes};
pub use store::{LaneMode, LaneStore};
