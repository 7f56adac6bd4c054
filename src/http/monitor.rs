//! Leaf's monitor pages (`/cache`, `/db`) and their JSON form (`/api/v1/cache`).

use std::fmt::Write;

use actix_web::{HttpResponse, web};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ErrorBody};
use crate::segment::BufferSnapshot;

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/cache", web::get().to(cache_page))
        .route("/db", web::get().to(db_page))
        .route("/api/v1/cache", web::get().to(cache_json));
}

/// Body of `GET /api/v1/cache`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CacheBody {
    /// Every cached tag's buffer, ordered by tag.
    pub tags: Vec<BufferSnapshot>,
}

/// `GET /api/v1/cache`: the buffers of every cached tag (the JSON form of `/cache`).
#[utoipa::path(
    get,
    path = "/api/v1/cache",
    tag = "monitor",
    responses(
        (status = 200, description = "Every cached tag's buffer", body = CacheBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
    )
)]
pub async fn cache_json(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let tags = state.segment()?.snapshots();
    Ok(HttpResponse::Ok().json(CacheBody { tags }))
}

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn page(title: &str, body: &str) -> HttpResponse {
    HttpResponse::Ok().content_type("text/html; charset=utf-8").body(format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}th{{background:#eee}}</style>\
         </head><body><h1>{title}</h1>{body}</body></html>"
    ))
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// `GET /cache`: Leaf's monitor page of the buffers.
#[utoipa::path(
    get,
    path = "/cache",
    tag = "monitor",
    responses(
        (status = 200, description = "HTML table of every cached tag's segments", content_type = "text/html", body = String),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
    )
)]
pub async fn cache_page(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let mut html = String::from(
        "<table><tr><th>biz_tag</th><th>segment</th><th>state</th><th>min id</th><th>max id</th>\
         <th>next id</th><th>used / size</th><th>next ready</th><th>loading</th><th>step (db step)</th>\
         <th>loads</th><th>last load</th><th>load ms</th><th>error</th></tr>",
    );
    for s in state.segment()?.snapshots() {
        for seg in &s.segments {
            let _ = write!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{:?}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {}</td>\
                 <td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&s.biz_tag),
                seg.slot,
                seg.state,
                opt(seg.min_id),
                opt(seg.max_id),
                opt(seg.next_id),
                seg.used,
                seg.size,
                s.next_ready,
                s.loading,
                s.step,
                s.db_step,
                s.loads,
                opt(s
                    .last_load_unix_ms
                    .and_then(chrono::DateTime::from_timestamp_millis)),
                opt(s.last_load_latency_ms.map(|v| format!("{v:.2}"))),
                esc(s.last_error.as_deref().unwrap_or("")),
            );
        }
    }
    html.push_str("</table>");
    Ok(page("leafid segment cache", &html))
}

/// `GET /db`: Leaf's monitor page of the `leaf_alloc` rows.
#[utoipa::path(
    get,
    path = "/db",
    tag = "monitor",
    responses(
        (status = 200, description = "HTML table of the rows", content_type = "text/html", body = String),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn db_page(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let rows = state.segment()?.list_tags().await?;
    let mut html = String::from(
        "<table><tr><th>biz_tag</th><th>max_id</th><th>step</th><th>description</th><th>update_time</th></tr>",
    );
    for r in rows {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.biz_tag),
            r.max_id,
            r.step,
            esc(r.description.as_deref().unwrap_or("")),
            opt(r.update_time),
        );
    }
    html.push_str("</table>");
    Ok(page("leafid leaf_alloc", &html))
}
