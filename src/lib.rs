//! leafid: unique, positive, increasing 64-bit ids for business services.
//!
//! Two engines behind one actix-web API: the Leaf-segment engine (ids leased from a database
//! row in segments and handed out from memory, two buffers per tag) and a uid-generator-style
//! snowflake engine.
//!
//! # Layout
//!
//! - [`config`]: typed settings (embedded defaults, file, `LEAFID__*` environment).
//! - [`telemetry`]: tracing subscriber.
//! - [`startup`]: [`startup::Application`] wires everything; the only place that does.
//! - [`segment`]: the segment engine (no HTTP, no SQL).
//! - [`store`]: the engines' storage traits on MySQL/MariaDB and SQLite.
//! - [`http`]: the thin HTTP adapter and the error body.

pub mod config;
pub mod http;
pub mod segment;
pub mod startup;
pub mod store;
pub mod telemetry;
