//! Atomics shim: `std` normally, loom's model-checked types under `cfg(loom)`.
//!
//! The lock-free code imports its atomics (and, in models, `Arc` and `thread`) from here so a
//! loom model runs the very same algorithm without `cfg` noise in it.

#[cfg(not(loom))]
pub use std::sync::atomic::*;

#[cfg(not(loom))]
pub use std::sync::Arc;

#[cfg(not(loom))]
pub use std::thread;

/// `spin_loop`: under loom it yields, so a model's spin-wait lets the awaited thread run.
#[cfg(not(loom))]
pub use std::hint;

#[cfg(loom)]
pub use loom::sync::atomic::*;

#[cfg(loom)]
pub use loom::sync::Arc;

#[cfg(loom)]
pub use loom::thread;

#[cfg(loom)]
pub use loom::hint;
