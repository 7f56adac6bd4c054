//! The Leaf-segment engine: ids leased from the database in segments, handed out from memory.
//!
//! - [`biz_tag`]: the validated tag type.
//! - [`store`]: the [`SegmentStore`] trait that `crate::store` implements per database.
//! - [`buffer`]: the per-tag double buffer: loads, backoff, waiting, snapshots.
//! - `tickets`: the lock-free id path (a ticket counter mapped onto two segment windows).
//! - `slot`: one segment slot under a seqlock. `tickets` and `slot` use atomics only through
//!   `crate::sync` and nothing async, so `loom/` model-checks them.
//! - [`step`]: Leaf's adaptive step.
//! - [`tag_rules`]: the rules of a row's step, starting `max_id` and description ([`Step`],
//!   [`NewTag`], [`TagUpdate`]), for every adapter that writes rows.
//! - [`allocator`]: tags, loads (single-flight, bounded, with backoff), waiting, refresh.
//! - [`spec`]: one spec per tag ([`TagSpec`]): its shape, its period rows ([`PeriodRow`]), its
//!   frozen permutation tweak and its ordering mode, cached in one place.
//! - [`load_stats`]: the per-tag lease latency histogram behind the metrics.
//! - [`views`]: one view per tag for the monitor routes and metrics (a formatted tag's periods
//!   folded into it), and whose counts are secret (a permuted tag's).
//! - [`lanes`]: several independent databases (regions), each a lane mapped into its own
//!   blocks of the id space, and the router that asks them in turn.
//! - [`strict`]: strict tags, increasing across every server in real-time order (one owner
//!   at a time, the others forward).
//! - `high_water`: the regression guard: no id at or below the highest this server leased for
//!   a tag, whatever the database says after a failover.
//!
//! This module knows nothing of HTTP or SQL.

pub mod allocator;
pub mod biz_tag;
pub mod buffer;
pub mod error;
mod high_water;
pub mod lanes;
pub mod load_stats;
pub mod runs;
mod slot;
pub mod spec;
pub mod step;
pub mod store;
pub mod strict;
mod tag_map;
pub mod tag_rules;
mod tickets;
pub mod views;

pub use allocator::{
    FormatConflict, FormattedIds, KeyReport, PeriodFill, SegmentAllocator, SegmentConfig, TagHandle,
};
pub use biz_tag::{BizTag, BizTagError};
pub use buffer::{BufferSnapshot, SegmentBuffer};
pub use error::SegmentError;
pub use runs::{IdRun, IdRuns, IdSink};
pub use spec::{
    DecodeError, KeyVerdict, OrderMode, PeriodRow, STRICT_SPEC, Shape, SpecError, TagSpec,
    TextShape, is_strict_spec, same_format,
};
pub use step::StepPolicy;
pub use store::{
    FormattedCreate, LaneRecord, LaneRegistry, Lease, LeaseStore, SegmentStore, SpecStore,
    StoreError, TagAdminStore, TagRow,
};
pub use tag_rules::{NewTag, Step, TagRuleError, TagUpdate};
pub use views::TagActivity;

#[cfg(test)]
mod ff1_vectors_tests;
