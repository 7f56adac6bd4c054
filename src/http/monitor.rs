//! Leaf's monitor pages (`/cache`, `/db`) and their JSON form (`/api/v1/cache`).
//!
//! A permuted tag's counts (its buffers' positions, its period rows' `max_id`, its fill) are
//! shown only to a caller that may read its volume ([`MonitorAuth::shows_volume`]); anyone
//! else sees the page without them. Ended periods of a formatted tag are not listed.

use std::fmt::Write;

use actix_web::{HttpResponse, web};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::admin::MonitorAuth;
use super::error::{Error, ErrorBody};
use super::ids::{IdEncoding, JsonId, StringifyQuery, optional_id_schema};
use crate::segment::BufferSnapshot;
use crate::segment::buffer::{SegmentSnapshot, SegmentState};
use crate::service::IdService;

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/cache", web::get().to(cache_page))
        .route("/db", web::get().to(db_page))
        .route("/api/v1/cache", web::get().to(cache_json))
        .route("/api/v1/lanes", web::get().to(lanes_json));
}

/// Body of `GET /api/v1/cache`.
#[derive(Debug, Serialize, ToSchema)]
pub struct CacheBody {
    /// Every cached plain tag's buffer and each formatted tag's current period's (the row
    /// `tag@period`), ordered by row name; ended periods are not listed. A permuted tag's
    /// buffer is listed for callers with the admin credential only (its positions are its
    /// volume).
    pub tags: Vec<BufferBody>,
    /// Every formatted tag this server knows, ordered by tag: its format, its current period
    /// and how much of the period's width is leased.
    pub formatted: Vec<FormattedBody>,
}

/// A formatted tag in `GET /api/v1/cache`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FormattedBody {
    /// The tag.
    pub biz_tag: String,
    /// Its format (`docs/shapes.md`).
    #[schema(value_type = Object)]
    pub format: crate::shapes::TagFormat,
    /// The current period's key, by this server's clock.
    pub period: String,
    /// Share of the period's width leased, 0 to 1 (`leafid_period_used_ratio`); `null` for a
    /// permuted tag unless the caller has the admin credential (the fill is its volume).
    pub used: Option<f64>,
}

/// The formatted tags this server knows, with their formats; a permuted tag's fill only for a
/// caller that may read its volume.
fn formatted_bodies(ids: &IdService, auth: MonitorAuth) -> Vec<FormattedBody> {
    let Some(segment) = ids.segment_engine() else {
        return Vec::new();
    };
    segment
        .period_fills()
        .into_iter()
        .filter_map(|fill| {
            let format = ids.known_format(&fill.biz_tag)?;
            let shown = auth.shows_volume(Some(segment), &fill.biz_tag);
            Some(FormattedBody {
                biz_tag: fill.biz_tag,
                format,
                period: fill.period,
                used: shown.then_some(fill.used),
            })
        })
        .collect()
}

/// The buffers a caller of `/cache` and `/api/v1/cache` sees: each plain tag's and each
/// formatted tag's current period's, less those whose volume it may not read.
fn visible_buffers(
    segment: &crate::segment::SegmentAllocator,
    auth: MonitorAuth,
) -> Vec<BufferSnapshot> {
    segment
        .current_snapshots()
        .into_iter()
        .filter(|b| auth.shows_volume(Some(segment), &b.biz_tag))
        .collect()
}

/// The live state of one tag's buffer, for `/cache` and metrics.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = BufferSnapshot)]
pub struct BufferBody {
    /// The tag.
    pub biz_tag: String,
    /// Both slots.
    pub segments: Vec<SegmentBody>,
    /// Whether the next segment is loaded and waiting.
    pub next_ready: bool,
    /// Whether a load is in flight.
    pub loading: bool,
    /// The adaptive step of the last lease.
    pub step: i64,
    /// The DBA's step as last read.
    pub db_step: i64,
    /// Successful loads since start.
    pub loads: u64,
    /// Failed loads in a row.
    pub consecutive_failures: u32,
    /// The last load error, if the last load failed.
    pub last_error: Option<String>,
    /// When the last load finished (unix ms).
    pub last_load_unix_ms: Option<i64>,
    /// How long the last lease took.
    pub last_load_latency_ms: Option<f64>,
    /// Ids left in memory.
    pub remaining: u64,
    /// Ids taken from this tag's segments since the buffer was created (an id lost to a race or
    /// to a request that gave up counts too: it is never issued again).
    pub ids_issued: u64,
    /// Failed loads since start.
    pub load_failures_total: u64,
}

impl BufferBody {
    /// The body of `b`, its ids as `format` says.
    pub fn new(b: &BufferSnapshot, format: IdEncoding) -> Self {
        Self {
            biz_tag: b.biz_tag.clone(),
            segments: b
                .segments
                .iter()
                .map(|s| SegmentBody::new(s, format))
                .collect(),
            next_ready: b.next_ready,
            loading: b.loading,
            step: b.step,
            db_step: b.db_step,
            loads: b.loads,
            consecutive_failures: b.consecutive_failures,
            last_error: b.last_error.clone(),
            last_load_unix_ms: b.last_load_unix_ms,
            last_load_latency_ms: b.last_load_latency_ms,
            remaining: b.remaining,
            ids_issued: b.ids_issued,
            load_failures_total: b.load_failures_total,
        }
    }
}

/// One slot of a [`BufferSnapshot`].
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = SegmentSnapshot)]
pub struct SegmentBody {
    /// Slot index (0 or 1).
    pub slot: usize,
    /// Current, ready, spent or empty.
    pub state: SegmentStateBody,
    /// First id of the segment (a decimal string with `stringify_ids=true`).
    #[schema(schema_with = optional_id_schema)]
    pub min_id: Option<JsonId<i64>>,
    /// Last id of the segment (a decimal string with `stringify_ids=true`).
    #[schema(schema_with = optional_id_schema)]
    pub max_id: Option<JsonId<i64>>,
    /// Next id it will hand out (a decimal string with `stringify_ids=true`).
    #[schema(schema_with = optional_id_schema)]
    pub next_id: Option<JsonId<i64>>,
    /// Ids in the segment.
    pub size: u64,
    /// Ids handed out (or lost to races) so far.
    pub used: u64,
    /// Ids left.
    pub remaining: u64,
}

impl SegmentBody {
    /// The body of `s`, its ids as `format` says.
    pub fn new(s: &SegmentSnapshot, format: IdEncoding) -> Self {
        let id = |id: Option<i64>| id.map(|id| JsonId { id, format });
        Self {
            slot: s.slot,
            state: s.state.into(),
            min_id: id(s.min_id),
            max_id: id(s.max_id),
            next_id: id(s.next_id),
            size: s.size,
            used: s.used,
            remaining: s.remaining,
        }
    }
}

/// Where a segment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = SegmentState)]
pub enum SegmentStateBody {
    /// Nothing loaded in this slot yet.
    Empty,
    /// Ids are being handed out from it.
    Current,
    /// Loaded ahead and waiting to become current.
    Ready,
    /// Every id handed out.
    Spent,
}

impl From<SegmentState> for SegmentStateBody {
    fn from(state: SegmentState) -> Self {
        match state {
            SegmentState::Empty => Self::Empty,
            SegmentState::Current => Self::Current,
            SegmentState::Ready => Self::Ready,
            SegmentState::Spent => Self::Spent,
        }
    }
}

/// `GET /api/v1/cache[?stringify_ids=true]`: the buffers of every cached tag (the JSON form of
/// `/cache`); their ids as decimal strings with `stringify_ids=true`. A permuted tag's buffer
/// and fill need the admin credential.
#[utoipa::path(
    get,
    path = "/api/v1/cache",
    tag = "monitor",
    params(StringifyQuery),
    responses(
        (status = 200, description = "Every cached tag's buffer", body = CacheBody),
        (status = 400, description = "`invalid_request` (a `stringify_ids` other than true or false)", body = ErrorBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
    )
)]
pub async fn cache_json(
    auth: MonitorAuth,
    state: web::Data<AppState>,
    query: web::Query<StringifyQuery>,
) -> Result<HttpResponse, Error> {
    let format = query.format()?;
    let segment = state.ids.segment()?;
    let tags = visible_buffers(segment, auth)
        .iter()
        .map(|b| BufferBody::new(b, format))
        .collect();
    Ok(HttpResponse::Ok().json(CacheBody {
        tags,
        formatted: formatted_bodies(&state.ids, auth),
    }))
}

/// The formatted tags' table of `/cache` and `/db` (nothing when there are none): each tag's
/// format, current period and the share of its width leased.
fn formatted_table(ids: &IdService, auth: MonitorAuth, html: &mut String) {
    let formatted = formatted_bodies(ids, auth);
    if formatted.is_empty() {
        return;
    }
    html.push_str(
        "<h2>formatted tags</h2><table><tr><th>biz_tag</th><th>format</th><th>period</th>\
         <th>width used</th></tr>",
    );
    for f in formatted {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&f.biz_tag),
            esc(&serde_json::to_string(&f.format).unwrap_or_default()),
            esc(&f.period),
            f.used
                .map_or_else(|| HIDDEN.to_owned(), |u| format!("{:.1}%", u * 100.0)),
        );
    }
    html.push_str("</table>");
}

/// What the HTML pages show in place of a permuted tag's count to a caller without the admin
/// credential.
const HIDDEN: &str = "hidden";

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

fn page(title: &str, body: &str) -> HttpResponse {
    super::headers::html_page(
        super::headers::MONITOR_CSP,
        format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}th{{background:#eee}}</style>\
         </head><body><h1>{title}</h1>{body}</body></html>"
        ),
    )
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
pub async fn cache_page(
    auth: MonitorAuth,
    state: web::Data<AppState>,
) -> Result<HttpResponse, Error> {
    let mut html = String::from(
        "<table><tr><th>biz_tag</th><th>segment</th><th>state</th><th>min id</th><th>max id</th>\
         <th>next id</th><th>used / size</th><th>next ready</th><th>loading</th><th>step (db step)</th>\
         <th>loads</th><th>last load</th><th>load ms</th><th>error</th></tr>",
    );
    for s in visible_buffers(state.ids.segment()?, auth) {
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
    formatted_table(&state.ids, auth, &mut html);
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
pub async fn db_page(auth: MonitorAuth, state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    let segment = state.ids.segment()?;
    let rows = segment.list_tags().await?;
    let mut html = String::from(
        "<table><tr><th>biz_tag</th><th>max_id</th><th>step</th><th>description</th><th>update_time</th></tr>",
    );
    // A formatted tag's period rows: only the current period's, so the page grows with the
    // tags, not with the days served.
    let now = jiff::Timestamp::now();
    let current_period = |name: &str| {
        let Some(parent) = crate::segment::PeriodRow::parent_of(name) else {
            return true;
        };
        segment
            .cached_spec(parent)
            .and_then(|spec| Some(spec.period_row(&spec.period_at(now).ok()?.key)))
            .is_some_and(|row| row.as_str() == name)
    };
    for r in rows.into_iter().filter(|r| current_period(&r.biz_tag)) {
        // A permuted tag's period row's `max_id` is how many ids the period leased, and its
        // `update_time` when it last leased (the rate).
        let shown = auth.shows_volume(Some(segment), &r.biz_tag);
        let secret = |v: String| if shown { v } else { HIDDEN.to_owned() };
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&r.biz_tag),
            secret(r.max_id.to_string()),
            r.step,
            esc(r.description.as_deref().unwrap_or("")),
            secret(opt(r.update_time)),
        );
    }
    html.push_str("</table>");
    formatted_table(&state.ids, auth, &mut html);
    Ok(page("leafid leaf_alloc", &html))
}

/// One lane in `GET /api/v1/lanes`.
#[derive(Debug, Serialize, ToSchema)]
pub struct LaneBody {
    /// Its slot (`docs/deploy.md#12-regions-lanes`).
    pub slot: u8,
    /// Its database, password hidden.
    pub database: String,
    /// Whether it is this server's own lane (asked first).
    pub own: bool,
    /// Requests it served since the start.
    pub served: u64,
    /// Requests it could not serve and passed to the next lane.
    pub passed: u64,
}

/// Body of `GET /api/v1/lanes`.
#[derive(Debug, Serialize, ToSchema)]
pub struct LanesBody {
    /// The lanes in the order they are asked; empty without lanes.
    pub lanes: Vec<LaneBody>,
}

/// `GET /api/v1/lanes`: the lanes of this server, own first, with what each served and passed on.
#[utoipa::path(
    get,
    path = "/api/v1/lanes",
    tag = "operations",
    responses((status = 200, description = "The lanes, own first (empty without lanes)", body = LanesBody))
)]
pub async fn lanes_json(_: MonitorAuth, state: web::Data<AppState>) -> HttpResponse {
    let lanes = state
        .ids
        .lane_reports()
        .into_iter()
        .enumerate()
        .map(|(i, lane)| LaneBody {
            slot: lane.slot,
            database: lane.name,
            own: i == 0,
            served: lane.served,
            passed: lane.passed,
        })
        .collect();
    HttpResponse::Ok().json(LanesBody { lanes })
}
