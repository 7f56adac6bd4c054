//! The dashboard (issue 7): one page at `/` and `/dashboard` for operators and DBAs.
//!
//! The page, its script and its style sheet are compiled into the binary with `include_str!`,
//! so the server needs no files beside it and the page loads nothing from elsewhere (no CDN, no
//! fonts). It is static: the script polls the JSON routes every two seconds (`/api/v1/tags`,
//! `/api/v1/cache`, `/health/ready`, `/api/v1/snowflake/status`) and builds the view with
//! `textContent` only, one card per tag (a formatted tag's card is the tag's, with its current
//! period; never one per period row). A permuted tag's fill is shown only when the admin token
//! is typed into the page, which the polls then carry. Its forms call the same admin and
//! planner routes as any client
//! (`PATCH /api/v1/tags/{biz_tag}`, `POST /api/v1/layouts/plan`), so the page holds no privilege
//! of its own: a step change needs the admin token exactly as with `curl`.
//!
//! Responses carry a strict `Content-Security-Policy` (only this origin; no inline script or
//! style), which both enforces "nothing from elsewhere" and blunts any injected markup.

use actix_web::http::header::{CacheControl, CacheDirective};
use actix_web::{HttpResponse, web};

use super::AppState;
use super::error::Error;
use super::snowflake::StatusBody;

/// The page (`/`, `/dashboard`).
const INDEX_HTML: &str = include_str!("dashboard/index.html");
/// The script that polls the API and renders the page.
const APP_JS: &str = include_str!("dashboard/app.js");
/// The style sheet.
const STYLE_CSS: &str = include_str!("dashboard/style.css");

/// Same origin only; `data:` images for the empty favicon; no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

/// Registers the page, its two assets and `GET /api/v1/snowflake/status`.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/", web::get().to(root))
        .route("/dashboard", web::get().to(index))
        .route("/dashboard/app.js", web::get().to(app_js))
        .route("/dashboard/style.css", web::get().to(style_css))
        .route("/api/v1/snowflake/status", web::get().to(snowflake_status));
}

/// An embedded asset with the headers every dashboard response carries. `no-cache` (revalidate,
/// not "never store"): the assets are tiny and must change with the binary.
fn asset(content_type: &'static str, body: &'static str) -> HttpResponse {
    super::headers::html_response(CSP)
        .content_type(content_type)
        .insert_header(CacheControl(vec![CacheDirective::NoCache]))
        .body(body)
}

/// `GET /` and `GET /dashboard`: the dashboard page.
#[utoipa::path(
    get,
    path = "/dashboard",
    tag = "operations",
    responses((status = 200, description = "The dashboard page (also served at `/`)", content_type = "text/html", body = String))
)]
pub async fn index() -> HttpResponse {
    asset("text/html; charset=utf-8", INDEX_HTML)
}

/// `GET /`: the dashboard page.
#[utoipa::path(
    get,
    path = "/",
    tag = "operations",
    responses((status = 200, description = "The dashboard page", content_type = "text/html", body = String))
)]
pub async fn root() -> HttpResponse {
    index().await
}

/// The dashboard's script.
#[utoipa::path(
    get,
    path = "/dashboard/app.js",
    tag = "operations",
    responses((status = 200, description = "The dashboard's script", content_type = "text/javascript", body = String))
)]
pub async fn app_js() -> HttpResponse {
    asset("text/javascript; charset=utf-8", APP_JS)
}

/// The dashboard's style sheet.
#[utoipa::path(
    get,
    path = "/dashboard/style.css",
    tag = "operations",
    responses((status = 200, description = "The dashboard's style sheet", content_type = "text/css", body = String))
)]
pub async fn style_css() -> HttpResponse {
    asset("text/css; charset=utf-8", STYLE_CSS)
}

/// `GET /api/v1/snowflake/status`: layout, epoch, worker id and strategy, time left before the
/// time field runs out, ring fill; 404 `engine_disabled` when the engine is off.
#[utoipa::path(
    get,
    path = "/api/v1/snowflake/status",
    tag = "snowflake",
    responses(
        (status = 200, description = "The snowflake engine's state", body = StatusBody),
        (status = 404, description = "`engine_disabled`", body = super::error::ErrorBody),
    )
)]
pub async fn snowflake_status(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    Ok(HttpResponse::Ok().json(StatusBody::from(&state.ids.snowflake()?.status())))
}
