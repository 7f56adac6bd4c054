//! The Leaf-segment engine: ids leased from the database in segments, handed out from memory.
//!
//! - [`biz_tag`]: the validated tag type.
//! - [`store`]: the [`SegmentStore`] trait that `crate::store` implements per database.
//! - [`buffer`]: the per-tag double buffer with its lock-free fast path.
//! - [`step`]: Leaf's adaptive step.
//! - [`allocator`]: tags, loads (single-flight, bounded, with backoff), waiting, refresh.
//! - [`load_stats`]: the per-tag lease latency histogram behind the metrics.
//!
//! This module knows nothing of HTTP or SQL.

pub mod allocator;
pub mod biz_tag;
pub mod buffer;
pub mod error;
pub mod load_stats;
pub mod memory;
pub mod step;
pub mod store;

pub use allocator::{SegmentAllocator, SegmentConfig, TagHandle};
pub use biz_tag::{BizTag, BizTagError};
pub use buffer::{BufferSnapshot, SegmentBuffer};
pub use error::SegmentError;
pub use step::StepPolicy;
pub use store::{Lease, NewTag, SegmentStore, StoreError, TagRow};
