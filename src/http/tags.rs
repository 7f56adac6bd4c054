//! Tag administration for DBAs: list, show, create, change step or description, delete.
//!
//! Writes need [`AdminAuth`]. Numbers arrive as raw JSON values so that every wrong type gets
//! the specific code (`invalid_step`, `invalid_max_id`) rather than a generic parse error. The
//! rules are the engine's ([`crate::segment::tag_rules`]); reads and writes go through the id
//! service (`crate::service::tags`: bounded, mirrored across lanes), whose engine keeps its
//! cache in step with them.

use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::admin::{AdminAuth, MonitorAuth};
use super::error::{Error, ErrorBody};
use super::ids::{IdEncoding, JsonId, StringifyQuery, id_schema};
use super::monitor::BufferBody;
use crate::segment::{BizTag, NewTag, PeriodRow, Step, TagRow, TagUpdate};
use crate::shapes::TagFormat;

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/tags", web::get().to(list))
        .route("/api/v1/tags", web::post().to(create))
        .route("/api/v1/tags/{biz_tag:.*}", web::get().to(show))
        .route("/api/v1/tags/{biz_tag:.*}", web::patch().to(update))
        .route("/api/v1/tags/{biz_tag:.*}", web::delete().to(delete));
}

/// One `leaf_alloc` row as the engine and the admin API see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
#[schema(as = TagRow)]
pub struct TagRowBody {
    /// The business tag (primary key).
    pub biz_tag: String,
    /// The first id not yet leased to any server: the next lease starts here (a decimal string
    /// with `stringify_ids=true`).
    #[schema(schema_with = id_schema)]
    pub max_id: JsonId<i64>,
    /// The DBA's step: the floor of the adaptive step and the size of a first lease.
    pub step: i64,
    /// Free text for humans.
    pub description: Option<String>,
    /// When the row last changed (a lease or an admin write).
    pub update_time: Option<DateTime<Utc>>,
}

impl From<TagRow> for TagRowBody {
    /// `max_id` as a JSON number.
    fn from(row: TagRow) -> Self {
        Self::new(row, IdEncoding::Number)
    }
}

impl TagRowBody {
    /// The body of `row`, its `max_id` as `format` says.
    pub fn new(row: TagRow, format: IdEncoding) -> Self {
        Self {
            biz_tag: row.biz_tag,
            max_id: JsonId {
                id: row.max_id,
                format,
            },
            step: row.step,
            description: row.description,
            update_time: row.update_time,
        }
    }
}

/// A row with the live state of its buffer (absent until the tag served a request).
#[derive(Debug, Serialize, ToSchema)]
pub struct TagView {
    /// The row.
    #[serde(flatten)]
    pub row: TagRowBody,
    /// The buffer, if cached: a formatted tag's is its current period's (the row
    /// `tag@period`). `null` for a permuted tag unless the caller has the admin credential.
    pub buffer: Option<BufferBody>,
    /// The tag's format, for a formatted tag (its ids are text, see `docs/shapes.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub format: Option<TagFormat>,
    /// A formatted tag's current period key, by this server's clock (`""` for a format that
    /// never restarts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period: Option<String>,
    /// A formatted tag's share of its current period's width leased, 0 to 1; absent for a
    /// permuted tag unless the caller has the admin credential.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used: Option<f64>,
    /// `true` when the tag's counts (`buffer`, `used`) were left out: a permuted tag, read
    /// without the admin credential (`docs/shapes.md`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub volume_hidden: bool,
    /// How the tag's ids are ordered across servers: `per_server` (Leaf's trend) or `strict`
    /// (increasing across every server in real-time order, `docs/guarantees.md`).
    #[schema(value_type = String, example = "per_server")]
    pub order: &'static str,
    /// A strict tag's owner as this server knows it (once it was asked for the tag): whether it
    /// is this server, the epoch, and where the owner is reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict_owner: Option<crate::service::strict::StrictStatus>,
}

/// The live state of the engine's tags, read once per request (a formatted tag's periods folded
/// into it: `crate::segment::views`).
type Live = std::collections::HashMap<String, crate::segment::TagActivity>;

/// The engine's tags' live state, by tag.
fn live(state: &AppState) -> Live {
    state
        .ids
        .segment_engine()
        .map(|s| {
            s.activity()
                .into_iter()
                .map(|a| (a.biz_tag.clone(), a))
                .collect()
        })
        .unwrap_or_default()
}

/// `row` with its buffer, ids as `format` says, for an admin write's answer (the writer holds
/// the admin credential, so nothing is hidden).
fn view(state: &AppState, row: TagRow, format: IdEncoding) -> TagView {
    view_for(state, &live(state), row, format, MonitorAuth::with_volume())
}

/// `row` with its live state from `live`, ids as `format` says; a permuted tag's counts only if
/// `auth` may read its volume.
fn view_for(
    state: &AppState,
    live: &Live,
    row: TagRow,
    format: IdEncoding,
    auth: MonitorAuth,
) -> TagView {
    let activity = live.get(&row.biz_tag);
    let shown = auth.shows_volume(state.ids.segment_engine(), &row.biz_tag)
        && (auth.reads_volume() || !activity.is_some_and(|a| a.volume_secret));
    let buffer = activity
        .and_then(|a| a.current.as_ref())
        .filter(|_| shown)
        .map(|b| BufferBody::new(b, format));
    let shape = state.ids.known_format(&row.biz_tag);
    let period = activity.and_then(|a| a.period.clone());
    let used = activity.and_then(|a| a.used).filter(|_| shown);
    let order = state.ids.known_order(&row.biz_tag).as_str();
    let row_tag = row.biz_tag.clone();
    TagView {
        row: TagRowBody::new(row, format),
        buffer,
        format: shape,
        period,
        used,
        volume_hidden: !shown,
        order,
        strict_owner: state.ids.strict().and_then(|s| s.status(&row_tag)),
    }
}

/// Body of `GET /api/v1/tags`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TagList {
    /// One page of tags, ordered by tag (bytewise); never a period row.
    pub tags: Vec<TagView>,
}

/// The most tags one page of `GET /api/v1/tags` lists, and its default size.
pub const MAX_PAGE: usize = 1000;

/// The query of `GET /api/v1/tags`, kept as text so a bad `limit` gets `invalid_request`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Tags per page, 1 to 1000 (default 1000; a larger value is read as 1000).
    #[param(value_type = Option<i64>, minimum = 1)]
    pub limit: Option<String>,
    /// List the tags after this one (bytewise): the last tag of the previous page, as the
    /// `Link: <...>; rel="next"` header of that page gives it.
    #[param(value_type = Option<String>)]
    pub after: Option<String>,
    /// `true`: ids as decimal strings, for JavaScript clients (whose numbers are exact only up
    /// to 2^53 - 1); `false` or absent: JSON numbers. Any other value is `invalid_request`.
    #[param(value_type = Option<bool>)]
    pub stringify_ids: Option<String>,
}

impl ListQuery {
    /// The page size asked for: 1 to [`MAX_PAGE`].
    fn limit(&self) -> Result<usize, Error> {
        let Some(raw) = self.limit.as_deref() else {
            return Ok(MAX_PAGE);
        };
        match raw.parse::<u64>() {
            Ok(0) | Err(_) => Err(Error::InvalidRequest(format!(
                "limit must be an integer from 1 to {MAX_PAGE}, not {raw:?}"
            ))),
            Ok(n) => Ok(usize::try_from(n).unwrap_or(MAX_PAGE).min(MAX_PAGE)),
        }
    }
}

/// One page of `rows`: the tags after `after`, bytewise, at most `limit`, never a period row;
/// and whether more follow. Sorted here, not by the database (whose collation may fold case),
/// so the order and the `after` cursor agree: every tag is on exactly one page.
fn page(mut rows: Vec<TagRow>, after: Option<&str>, limit: usize) -> (Vec<TagRow>, bool) {
    rows.retain(|r| {
        !PeriodRow::is_period_row(&r.biz_tag) && after.is_none_or(|a| r.biz_tag.as_str() > a)
    });
    rows.sort_unstable_by(|a, b| a.biz_tag.cmp(&b.biz_tag));
    let more = rows.len() > limit;
    rows.truncate(limit);
    (rows, more)
}

/// The `Link` header value naming the page after `last`.
fn next_link(last: &str, limit: usize, stringify: Option<&str>) -> String {
    let mut url = format!("/api/v1/tags?limit={limit}&after={}", query_value(last));
    if let Some(s) = stringify {
        url.push_str("&stringify_ids=");
        url.push_str(&query_value(s));
    }
    format!("<{url}>; rel=\"next\"")
}

/// `s` percent-encoded for a query value (a tag's alphabet needs none; anything else is
/// encoded, so the header is always valid).
fn query_value(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// `GET /api/v1/tags[?limit=N&after=<tag>]`: one page of tags (every `leaf_alloc` row but the
/// period rows), with their live buffers; the next page in the `Link` header.
#[utoipa::path(
    get,
    path = "/api/v1/tags",
    tag = "tags",
    params(ListQuery),
    responses(
        (status = 200, description = "One page of tags, ordered by tag (bytewise); period rows \
            are never listed. When more follow, `Link: </api/v1/tags?limit=N&after=<last>>; \
            rel=\"next\"` names the next page", body = TagList,
            headers(("Link" = String, description = "The next page, `<url>; rel=\"next\"`, when there is one"))),
        (status = 400, description = "`invalid_request` (a `stringify_ids` other than true or false, a `limit` that is not a positive integer)", body = ErrorBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn list(
    auth: MonitorAuth,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, Error> {
    let format = IdEncoding::parse(query.stringify_ids.as_deref())?;
    let limit = query.limit()?;
    let rows = state.ids.list_tags().await?;
    let (rows, more) = page(rows, query.after.as_deref(), limit);
    let next = more
        .then(|| rows.last())
        .flatten()
        .map(|last| next_link(&last.biz_tag, limit, query.stringify_ids.as_deref()));
    let live = live(&state);
    let tags: Vec<TagView> = rows
        .into_iter()
        .map(|r| view_for(&state, &live, r, format, auth))
        .collect();
    let mut res = HttpResponse::Ok();
    if let Some(link) = next {
        res.insert_header((actix_web::http::header::LINK, link));
    }
    Ok(res.json(TagList { tags }))
}

/// `GET /api/v1/tags/{biz_tag}`: one row with its live buffer; a formatted tag's with its
/// format, current period and fill (a permuted tag's counts need the admin credential).
#[utoipa::path(
    get,
    path = "/api/v1/tags/{biz_tag}",
    tag = "tags",
    params(("biz_tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9._:-]{1,128}$"), StringifyQuery),
    responses(
        (status = 200, description = "The row", body = TagView),
        (status = 400, description = "`invalid_biz_tag`, `invalid_request`", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn show(
    auth: MonitorAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<StringifyQuery>,
) -> Result<HttpResponse, Error> {
    let tag = BizTag::parse(&path.into_inner())?;
    let format = query.format()?;
    match state.ids.get_tag(&tag).await? {
        Some(row) => {
            let live = live(&state);
            Ok(HttpResponse::Ok().json(view_for(&state, &live, row, format, auth)))
        }
        None => Err(Error::unknown_tag(&tag)),
    }
}

/// Body of `POST /api/v1/tags`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTag {
    /// The new tag: 1 to 128 bytes of `[A-Za-z0-9._:-]` and `_`.
    #[schema(value_type = String, example = "orders", pattern = "^[A-Za-z0-9._:-]{1,128}$")]
    pub biz_tag: Value,
    /// Its step.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = i64, minimum = 1, maximum = 1_000_000_000, example = 2000)]
    pub step: Option<Value>,
    /// Starting `max_id` (default 1). A tag that was deleted must start at or above the
    /// highest `max_id` it reached (else 409 `max_id_below_deleted`).
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 9_223_372_036_854_775_806_i64)]
    pub max_id: Option<Value>,
    /// Free text, at most 256 characters.
    #[schema(max_length = 256)]
    pub description: Option<String>,
    /// A format makes the tag's ids text (order numbers, invoice numbers, codes; see
    /// `docs/shapes.md`): `{"prefix", "date", "radix", "width", "check", "suffix", "reset",
    /// "time_zone", "permute", "gaps", "request_share"}`. Fixed for the tag's name for good. `max_id` is then where every period's
    /// sequence starts (default 1).
    #[schema(value_type = Option<Object>)]
    pub format: Option<TagFormat>,
    /// `"strict"`: ids increasing across every server in real-time order (one owner serves
    /// the tag, the others forward to it; `docs/guarantees.md`), numbers only, kept for the
    /// name for good. `"per_server"` (the default): Leaf's order.
    #[schema(value_type = Option<String>, example = "strict")]
    pub order: Option<OrderWord>,
}

/// The `order` of a new tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderWord {
    /// Leaf's order (the default).
    PerServer,
    /// Strictly increasing across every server.
    Strict,
}

/// Body of `PATCH /api/v1/tags/{biz_tag}`: at least one field.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTag {
    /// New step; applies from the next segment load.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i64>, minimum = 1, maximum = 1_000_000_000)]
    pub step: Option<Value>,
    /// New description, at most 256 characters.
    #[schema(max_length = 256)]
    pub description: Option<String>,
}

/// A field that is present, even as `null`, is `Some`: `"step": null` is a bad step, not "no step".
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A JSON step: an integer (else `invalid_step` naming the value as sent) that the engine takes.
fn parse_step(v: &Value) -> Result<Step, Error> {
    let n = v.as_i64().ok_or_else(|| Error::invalid_step(v))?;
    Ok(Step::try_from(n)?)
}

/// A JSON `max_id`: an integer (else `invalid_max_id` naming the value as sent); its range is
/// checked by [`NewTag::new`].
fn parse_max_id(v: &Value) -> Result<i64, Error> {
    v.as_i64().ok_or_else(|| Error::invalid_max_id(v))
}

/// `POST /api/v1/tags`: creates a row (admin).
#[utoipa::path(
    post,
    path = "/api/v1/tags",
    tag = "tags",
    params(StringifyQuery),
    request_body = CreateTag,
    security((), ("admin_token" = [])),
    responses(
        (status = 201, description = "Created", body = TagView),
        (status = 400, description = "`invalid_biz_tag`, `invalid_step`, `invalid_max_id`, `invalid_request`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
        (status = 409, description = "`biz_tag_exists`; `max_id_below_deleted`: the tag was deleted \
            at a higher max_id (its high-water mark) and `max_id` is below it; give `\"max_id\"` at or \
            above the mark named in the message to resume it", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn create(
    _: AdminAuth,
    state: web::Data<AppState>,
    query: web::Query<StringifyQuery>,
    body: web::Json<CreateTag>,
) -> Result<HttpResponse, Error> {
    let format = query.format()?;
    let body = body.into_inner();
    let raw_tag = body
        .biz_tag
        .as_str()
        .ok_or_else(|| Error::InvalidRequest("biz_tag must be a string".into()))?;
    let tag = BizTag::parse(raw_tag)?;
    let step = parse_step(body.step.as_ref().unwrap_or(&Value::Null))?;
    let max_id = body.max_id.as_ref().map(parse_max_id).transpose()?;
    let new = NewTag::new(tag.clone(), step, max_id, body.description)?;
    let done = match (body.order, &body.format) {
        (Some(OrderWord::Strict), Some(_)) => {
            return Err(Error::InvalidRequest(
                "a strict tag's ids are numbers: \"order\": \"strict\" takes no format".into(),
            ));
        }
        (Some(OrderWord::Strict), None) => state.ids.create_strict_tag(&new).await?,
        _ => state.ids.create_tag(&new, body.format.as_ref()).await?,
    };
    let mut res = HttpResponse::Created();
    unreached_header(&mut res, &done.unreached);
    let mut shown = view(&state, done.value, format);
    // The body says exactly what the tag serves: a formatted create stored this format (or
    // found the same one), and a plain create succeeds only where no format is stored (the
    // store refuses it otherwise), so neither depends on what this server has cached.
    shown.format = body.format;
    Ok(res.json(shown))
}

/// Names the lanes an admin write has not reached yet in `Leafid-Lanes-Unreached` (the repair
/// settles them when they answer).
fn unreached_header(res: &mut actix_web::HttpResponseBuilder, unreached: &[u8]) {
    if !unreached.is_empty() {
        let list: Vec<String> = unreached.iter().map(u8::to_string).collect();
        res.insert_header(("leafid-lanes-unreached", list.join(",")));
    }
}

/// `PATCH /api/v1/tags/{biz_tag}`: changes step and/or description (admin).
#[utoipa::path(
    patch,
    path = "/api/v1/tags/{biz_tag}",
    tag = "tags",
    params(("biz_tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9._:-]{1,128}$"), StringifyQuery),
    request_body = UpdateTag,
    security((), ("admin_token" = [])),
    responses(
        (status = 200, description = "The updated row", body = TagView),
        (status = 400, description = "`invalid_biz_tag`, `invalid_step`, `invalid_request`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn update(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<StringifyQuery>,
    body: web::Json<UpdateTag>,
) -> Result<HttpResponse, Error> {
    let tag = BizTag::parse(&path.into_inner())?;
    let format = query.format()?;
    let body = body.into_inner();
    let step = body.step.as_ref().map(parse_step).transpose()?;
    let change = TagUpdate::new(step, body.description)?;
    let done = state.ids.update_tag(&tag, &change).await?;
    let mut res = HttpResponse::Ok();
    unreached_header(&mut res, &done.unreached);
    Ok(res.json(view(&state, done.value, format)))
}

/// `DELETE /api/v1/tags/{biz_tag}`: deletes a row (admin); its buffer is dropped. Its `max_id`
/// is kept as the tag's high-water mark: creating it again must start there or above.
#[utoipa::path(
    delete,
    path = "/api/v1/tags/{biz_tag}",
    tag = "tags",
    params(("biz_tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9._:-]{1,128}$")),
    security((), ("admin_token" = [])),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "`invalid_biz_tag`", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn delete(
    _: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, Error> {
    let tag = BizTag::parse(&path.into_inner())?;
    let done = state.ids.delete_tag(&tag).await?;
    let mut res = HttpResponse::NoContent();
    unreached_header(&mut res, &done.unreached);
    Ok(res.finish())
}

#[cfg(test)]
mod tests {
    use utoipa::OpenApi;

    use crate::http::openapi::ApiDoc;
    use crate::segment::tag_rules::{
        MAX_DESCRIPTION_CHARS, MAX_MAX_ID, MAX_STEP, MIN_MAX_ID, MIN_STEP,
    };

    /// The schema attributes take literals only: they must match the engine's rules.
    #[test]
    fn the_documented_limits_are_the_engines() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let schemas = &doc["components"]["schemas"];
        for schema in ["CreateTag", "UpdateTag"] {
            let props = &schemas[schema]["properties"];
            let step = &props["step"];
            assert_eq!(step["minimum"].as_i64(), Some(MIN_STEP), "{schema}: {step}");
            assert_eq!(step["maximum"].as_i64(), Some(MAX_STEP), "{schema}: {step}");
            let description = &props["description"];
            assert_eq!(
                description["maxLength"].as_u64(),
                Some(MAX_DESCRIPTION_CHARS as u64),
                "{schema}: {description}"
            );
        }
        let max_id = &schemas["CreateTag"]["properties"]["max_id"];
        assert_eq!(max_id["minimum"].as_i64(), Some(MIN_MAX_ID), "{max_id}");
        assert_eq!(max_id["maximum"].as_i64(), Some(MAX_MAX_ID), "{max_id}");
    }
}
