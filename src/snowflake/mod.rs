//! The snowflake engine.

pub mod layout;
