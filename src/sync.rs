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

/// Asks the CPU to start fetching the cache line of `value` for writing (x86-64: `prefetchw`),
/// so a later atomic read-modify-write of it need not begin with a miss. A hint only: it has no
/// effect on memory or on the program's meaning (a no-op elsewhere and under loom).
#[inline(always)]
pub fn prefetch_for_write<T>(value: &T) {
    // SAFETY: `_mm_prefetch` needs SSE, which every x86-64 CPU has (it is in the target's
    // baseline); a prefetch never faults and changes no memory, and the address is a live
    // reference besides.
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_ET0 }>(
            (value as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = value;
}

/// Asks the CPU to start fetching the cache line of `value` for reading (x86-64: `prefetcht0`).
/// A hint only, as [`prefetch_for_write`].
#[inline(always)]
pub fn prefetch_for_read<T>(value: &T) {
    // SAFETY: as in `prefetch_for_write`.
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (value as *const T).cast::<i8>(),
        );
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = value;
}
