//! `GET /metrics` and the middleware that counts HTTP requests by matched route pattern.

use std::time::Instant;

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::middleware::Next;
use actix_web::{HttpResponse, web};

use super::AppState;
use super::error::ApiError;

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

/// Middleware: one counter increment and one histogram observation per request, labelled by
/// method, the matched route pattern (e.g. `/api/segment/get/{biz_tag:.*}`) and status.
pub async fn track(
    req: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, actix_web::Error> {
    let started = Instant::now();
    let state = req.app_data::<web::Data<AppState>>().cloned();
    let method = req.method().clone();
    let result = next.call(req).await;
    if let Some(state) = state {
        let secs = started.elapsed().as_secs_f64();
        match &result {
            Ok(res) => {
                let route = res.request().match_pattern();
                state.metrics.observe_http(
                    method.as_str(),
                    route.as_deref().unwrap_or(UNMATCHED),
                    res.status().as_u16(),
                    secs,
                );
            }
            Err(e) => state.metrics.observe_http(
                method.as_str(),
                UNMATCHED,
                e.as_response_error().status_code().as_u16(),
                secs,
            ),
        }
    }
    result
}
