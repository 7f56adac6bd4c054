//! The HTTP adapter: thin handlers over the id service (`crate::service`), one file per
//! resource. A handler parses its request, asks the service, and writes the answer; which
//! engine, lane or format serves is the service's business.
//!
//! - [`ids`]: the wire form of ids (plain text, JSON numbers or strings, batch parsing): the
//!   one home for how an id leaves the server, where new id shapes plug in.
//! - [`request`]: the state and the rest of a prefix route's path, read off a request.
//! - [`segment`]: Leaf's `/api/segment/get/{biz_tag}` and the v1 batch route.
//! - [`snowflake`]: Leaf's `/api/snowflake/get/{key}` and decoder, the v1 batch and decode routes.
//! - [`tags`]: tag administration for DBAs (`/api/v1/tags`), guarded by [`admin::AdminAuth`].
//! - [`tokens`]: caller tokens for admins (`/api/v1/tokens`), guarded by [`admin::AdminAuth`].
//! - [`admin`]: a request's credentials for `crate::access`, and the guards of the admin surface.
//! - [`monitor`]: Leaf's `/cache` and `/db` pages and `/api/v1/cache`.
//! - [`health`]: liveness and readiness.
//! - [`decode`]: what both decode routes share (the id's fields, the time unit's wire name).
//! - [`layouts`]: the bit-layout planner (`/api/v1/layouts/plan`) and decoder.
//! - [`dashboard`]: the dashboard page (`/`, `/dashboard`) and `/api/v1/snowflake/status`.
//! - [`metrics`]: `GET /metrics` (Prometheus).
//! - [`middleware`]: [`middleware::Telemetry`], which every request passes (request id, default
//!   headers, body deadline, the request's count and latency by matched route).
//! - [`openapi`]: the OpenAPI 3 document of every route, `/openapi.json`.
//! - [`error`]: the one error body shape, and the status of each error class.
//! - [`body_deadline`]: request bodies must arrive within `server.body_timeout_ms`.
//! - [`headers`]: the headers of every answer (nothing cacheable unless a route says so) and of
//!   the HTML pages.
//!
//! Request and response bodies are types of this module (`TagRowBody`, `BufferBody`,
//! `StatusBody`, `PlanRequestBody`, `PlanBody`, ...), built with `From` from the engines' types,
//! which derive no OpenAPI schema: renaming an engine field cannot change the API silently. Their
//! OpenAPI names are the engines' (`#[schema(as = ...)]`).

pub mod admin;
pub mod body_deadline;
pub mod dashboard;
pub mod decode;
pub mod error;
pub mod headers;
pub mod health;
pub mod idle;
pub mod ids;
pub mod layouts;
pub mod metrics;
pub mod middleware;
pub mod monitor;
pub mod openapi;
pub mod request;
pub mod segment;
pub mod snowflake;
pub mod strict;
pub mod tags;
pub mod tokens;

use actix_web::web;

use std::sync::Arc;

use crate::metrics::Metrics;
use crate::service::IdService;
use crate::store::Database;
use crate::store::durability::DurabilityGate;

/// Shared state of all handlers.
#[derive(Clone)]
pub struct AppState {
    /// The id service: every engine, and who may ask (`crate::service`). Handlers parse the
    /// request, ask it, and write its answer.
    pub ids: IdService,
    /// The database.
    pub db: Database,
    /// The server's metrics registry, read by `/metrics` and updated by the HTTP middleware.
    pub metrics: Arc<Metrics>,
    /// The database's commit durability (`crate::store::durability`): the report readiness
    /// shows, and the refusal the id routes answer without waiting for a lease.
    pub durability: DurabilityGate,
    /// Set on SIGTERM/SIGINT while the drain period runs: readiness answers 503, requests are
    /// still served. Relaxed: a flag read by health checks; nothing is published with it.
    pub draining: Arc<std::sync::atomic::AtomicBool>,
}

/// Registers every route and the JSON error handlers of the extractors.
pub fn configure(cfg: &mut web::ServiceConfig, max_body_bytes: usize) {
    cfg.app_data(
        web::JsonConfig::default()
            .limit(max_body_bytes)
            .error_handler(error::json_error),
    )
    .app_data(web::QueryConfig::default().error_handler(error::query_error))
    .app_data(web::PathConfig::default().error_handler(error::path_error))
    // The id routes first: actix tries resources in registration order, and every resource
    // with a path parameter tried before a match costs a regex run (perf: 4.5% of the
    // snowflake route's CPU when it came after the segment batch route). Leaf's two routes are
    // static prefixes, so both go before anything with a parameter.
    .configure(segment::leaf_route)
    .configure(snowflake::leaf_route)
    .configure(segment::routes)
    .configure(snowflake::routes)
    .configure(tags::routes)
    .configure(strict::routes)
    .configure(tokens::routes)
    .configure(monitor::routes)
    .configure(health::routes)
    .configure(layouts::routes)
    .configure(dashboard::routes)
    .configure(metrics::routes)
    .configure(openapi::routes)
    .default_service(web::to(error::not_found));
}
