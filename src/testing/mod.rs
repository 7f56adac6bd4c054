//! Test scaffolding: every fake the tests, benches and the soak example use, and none of it in
//! the server. Compiled for the crate's own unit tests (`cfg(test)`) and with the `testing`
//! feature, which the crate's dev-dependency on itself turns on for `tests/`, `benches/` and
//! `examples/` (see `Cargo.toml`); a release build of the library or the binary has no
//! `leafid::testing`.
//!
//! - [`memory`]: [`MemoryStore`], an in-memory `leaf_alloc` ([`SegmentStore`]) that can be made
//!   slow or failing.
//! - [`memory_workers`]: [`MemoryWorkerStore`], an in-memory `leafid_worker_lease` and
//!   `WORKER_NODE` ([`WorkerStore`]).
//! - [`clock`]: clocks a test moves by hand: [`ManualClock`], [`FrozenClock`], [`SteppedClock`].
//! - [`fault_proxy`]: a TCP proxy on 127.0.0.1 that can refuse, cut, slow down and stall the
//!   traffic between a server and its database.
//!
//! The in-memory stores pass the same contract suite as SQLite and MariaDB
//! (`tests/api/store_contract.rs`): where they disagree, the fake is wrong.
//!
//! [`SegmentStore`]: crate::segment::SegmentStore
//! [`WorkerStore`]: crate::snowflake::worker::WorkerStore

pub mod clock;
pub mod fault_proxy;
pub mod memory;
pub mod memory_workers;

pub use clock::{FrozenClock, ManualClock, SteppedClock};
pub use fault_proxy::FaultProxy;
pub use memory::MemoryStore;
pub use memory_workers::MemoryWorkerStore;
