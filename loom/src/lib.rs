//! Compiles leafid's lock-free files unchanged, so their loom models (under
//! `cfg(all(test, loom))` in each file) run without tokio or actix in the build:
//! `src/sync.rs`, `src/snowflake/ring.rs`, `src/segment/slot.rs` and `src/segment/tickets.rs`,
//! and the Rust client's `clients/rust/src/textcursor.rs` (the formatted supply's lock-free
//! text slot; its `crate::sync` is leafid's `src/sync.rs` here).

#[path = "../../src/sync.rs"]
pub mod sync;

// The engine uses items the models do not.
#[allow(dead_code)]
pub mod segment;
pub mod snowflake;

// The client's supply uses items the models do not.
#[allow(dead_code)]
#[path = "../../clients/rust/src/textcursor.rs"]
pub mod textcursor;
