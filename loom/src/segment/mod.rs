//! The segment engine's slot seqlock and ticket windows, at the same paths as in leafid so their
//! `super::` and `crate::` paths resolve. Their models live in the files themselves, under
//! `cfg(all(test, loom))`.

#[path = "../../../src/segment/slot.rs"]
pub mod slot;

#[path = "../../../src/segment/tickets.rs"]
pub mod tickets;

#[path = "../../../src/segment/runs.rs"]
pub mod runs;
