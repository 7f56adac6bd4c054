//! leafid: unique, positive, increasing 64-bit ids for business services.
//!
//! Two engines behind one actix-web API: the Leaf-segment engine (ids leased from a database
//! row in segments and handed out from memory, two buffers per tag) and a uid-generator-style
//! snowflake engine.
//!
//! # Layout
//!
//! - [`access`]: who may ask for what ([`access::AccessPolicy`]), fed by credentials any
//!   transport builds.
//! - [`service`]: [`service::IdService`], the one id service every transport calls: which
//!   engine, lane or format serves a request is decided there.
//! - [`background`]: the owner of the long-running tasks, cancelled and awaited on shutdown.
//! - [`config`]: typed settings (embedded defaults, file, `LEAFID__*` environment).
//! - [`telemetry`]: tracing subscriber.
//! - [`startup`]: [`startup::Application`] wires everything; the only place that does.
//! - [`segment`]: the segment engine (no HTTP, no SQL).
//! - [`snowflake`]: the snowflake engine: bit layouts, generators, worker ids (no HTTP, no SQL).
//! - [`layout_plan`]: the bit-layout migration planner (pure functions).
//! - [`lease_gate`]: whether an engine may take a lease now (the durability refusal), asked by
//!   the engines, wired in by `startup`.
//! - [`sync`]: the atomics shim (loom under `cfg(loom)`).
//! - [`store`]: the engines' storage traits on MySQL/MariaDB, PostgreSQL and SQLite.
//! - [`error`]: [`error::Error`], every refusal and failure with its stable code and class,
//!   without a transport.
//! - [`http`]: the thin HTTP adapter: routes, the error body, the status of each error class.
//! - [`grpc`]: the gRPC door (tonic, its own port): `leafid.v1`'s services, health, reflection,
//!   the gRPC status of each error class.
//! - `testing` (unit tests, and feature `testing`): every fake (in-memory stores, hand-driven
//!   clocks, the fault proxy) for tests, benches and the soak example; not in a release build.
//! - [`metrics`]: the Prometheus families, read from the engines at scrape time.

pub mod access;
pub mod background;
pub mod config;
pub mod error;
pub mod grpc;
pub mod http;
pub mod layout_plan;
pub mod lease_gate;
pub mod metrics;
pub mod segment;
pub mod service;
pub mod shapes;
pub mod snowflake;
pub mod startup;
pub mod store;
pub mod sync;
pub mod telemetry;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
