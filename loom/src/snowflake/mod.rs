//! The ring buffer, at the same path as in leafid so its `crate::` paths resolve.

#[path = "../../../src/snowflake/ring.rs"]
pub mod ring;
