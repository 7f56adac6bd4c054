//! Test scaffolding shared by the integration tests and the soak example (feature `testing`).
//!
//! - [`fault_proxy`]: a TCP proxy on 127.0.0.1 that can refuse, cut, slow down and stall the
//!   traffic between a server and its database.
//!
//! Nothing here is used by the server itself; it is compiled only with the `testing` feature
//! (enabled for tests, benches and examples through the crate's dev-dependency on itself).

pub mod fault_proxy;

pub use fault_proxy::FaultProxy;
