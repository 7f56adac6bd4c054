//! `GET /metrics` and the middleware that counts HTTP requests by matched route pattern.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};
use tracing::Instrument;

use super::AppState;
use super::error::ApiError;
use crate::telemetry::LogLimiter;

/// Content type of the Prometheus text exposition format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Route label of requests that matched no route (so raw paths never become labels).
pub const UNMATCHED: &str = "unmatched";

/// Registers the route.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(get_metrics));
}

/// `GET /metrics`: every family in the Prometheus text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses(
        (status = 200, description = "Prometheus text format (version 0.0.4)",
            content_type = "text/plain", body = String),
        (status = 500, description = "`internal`", body = super::error::ErrorBody),
    )
)]
pub async fn get_metrics(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let text = state.metrics.render().map_err(|e| {
        tracing::error!(error = %e, "rendering metrics failed");
        ApiError::Internal
    })?;
    Ok(HttpResponse::Ok().content_type(TEXT_FORMAT).body(text))
}

/// Header carrying the request id on every response.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Whether `path` is one of the id routes, where every microsecond shows in throughput.
fn is_id_route(path: &str) -> bool {
    path.starts_with("/api/segment/get/")
        || path.starts_with("/api/snowflake/get/")
        || path.starts_with("/api/v1/segment/")
        || path == "/api/v1/snowflake/ids"
}

/// This process's request ids: a start-time prefix and a counter, cheap to make and unique
/// across restarts (a UUID per request costs more than serving an id).
fn next_request_id() -> String {
    static PREFIX: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let prefix = PREFIX.get_or_init(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u32 ^ std::process::id().rotate_left(16))
            .unwrap_or_default()
    });
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix:08x}-{n:x}")
}

/// Middleware: a request id (the `x-request-id` response header and the `request` span every
/// log line of the request carries), and one counter increment and one histogram observation
/// per request, labelled by method, the matched route pattern and status.
///
/// The span is at INFO for every route but the id routes, where it is at DEBUG: recording a
/// span's fields costs about as much as serving an id, so at the default `info` level the hot
/// routes carry only the header. Server errors are logged at ERROR with the id either way.
pub async fn telemetry(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let request_id = next_request_id();
    let span = if is_id_route(req.path()) {
        tracing::debug_span!("request", request_id = %request_id, method = %req.method(), path = %req.path())
    } else {
        tracing::info_span!("request", request_id = %request_id, method = %req.method(), path = %req.path())
    };
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let method = req.method().clone();
    let mut result = next.call(req).instrument(span.clone()).await;
    let secs = started.elapsed().as_secs_f64();
    let (route, status) = match &result {
        Ok(res) => (res.request().match_pattern(), res.status()),
        Err(e) => (None, e.as_response_error().status_code()),
    };
    if status.is_server_error() {
        let code = match &result {
            Ok(res) => res
                .response()
                .error()
                .and_then(|e| e.as_error::<ApiError>())
                .map_or("other", ApiError::code),
            Err(e) => e.as_error::<ApiError>().map_or("other", ApiError::code),
        };
        if let Some(state) = &state {
            state.metrics.count_server_error(code);
        }
        // One line per cause per interval: an outage answers every request with a 503.
        if let Some(held) = LogLimiter::global().allow(code) {
            let _entered = span.enter();
            tracing::error!(
                request_id = %request_id, status = status.as_u16(), code,
                route = route.as_deref().unwrap_or(UNMATCHED), held_back = held,
                "request failed (this cause is logged once per 10 s; leafid_http_server_errors_total counts every one)"
            );
        }
    }
    if let Some(state) = state {
        state.metrics.observe_http(
            method.as_str(),
            route.as_deref().unwrap_or(UNMATCHED),
            status.as_u16(),
            secs,
        );
    }
    if let (Ok(res), Ok(value)) = (&mut result, HeaderValue::from_str(&request_id)) {
        res.headers_mut()
            .insert(HeaderName::from_static(REQUEST_ID_HEADER), value);
    }
    result
}
