//! Atomics shim for the lock-free file the loom crate compiles (`textcursor.rs`): `std` here.
//! The loom crate (`loom/`) compiles that file with leafid's own `src/sync.rs` as its
//! `crate::sync` instead, which gives loom's model-checked types under `--cfg loom`.

pub(crate) use std::sync::Arc;
pub(crate) use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering, fence};
