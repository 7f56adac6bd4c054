//! Compiles `src/sync.rs` and `src/snowflake/ring.rs` of leafid unchanged, so their loom models
//! (in `ring.rs`, under `cfg(all(test, loom))`) run without tokio or actix in the build.

#[path = "../../src/sync.rs"]
pub mod sync;

pub mod snowflake;
