//! `GET /metrics`: the server's Prometheus families in the text format. The families and their
//! registry are [`crate::metrics`]'s; requests are counted by [`super::middleware`].

use actix_web::{HttpResponse, web};

use super::AppState;
use super::admin::MonitorAuth;
use super::error::Error;

/// Content type of the Prometheus text exposition format.
pub const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Registers the route.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/metrics", web::get().to(get_metrics));
}

/// `GET /metrics`: every family in the Prometheus text format; a permuted tag's volume series
/// only for a scrape with the admin credential ([`crate::metrics::VOLUME_FAMILIES`]).
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
pub async fn get_metrics(
    auth: MonitorAuth,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let text = state.metrics.render_for(auth.reads_volume()).map_err(|e| {
        tracing::error!(error = %e, "rendering metrics failed");
        Error::Internal
    })?;
    Ok(HttpResponse::Ok().content_type(TEXT_FORMAT).body(text))
}
