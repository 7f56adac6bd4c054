//! Compiles leafid's lock-free files unchanged, so their loom models (under
//! `cfg(all(test, loom))` in each file) run without tokio or actix in the build:
//! `src/sync.rs`, `src/snowflake/ring.rs`, `src/segment/slot.rs` and `src/segment/tickets.rs`.

#[path = "../../src/sync.rs"]
pub mod sync;

// The engine uses items the models do not.
#[allow(dead_code)]
pub mod segment;
pub mod snowflake;
