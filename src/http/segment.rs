//! Segment routes: Leaf's plain-text route, the v1 batch, range and decode routes. Which
//! engine, lane or format serves is the id service's (`crate::service`); how the ids are
//! written (plain text, JSON numbers or strings) is [`super::ids`]'s.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::admin::RequestCredentials;
use super::error::{Error, ErrorBody};
use super::ids::{
    BatchQuery, JsonIds, JsonRuns, RangeQuery, ids_schema, plain_id, plain_text, runs_schema,
};
use super::middleware::{labeled_get, labeled_get_prefix};
use super::request::tag_tail;
use crate::segment::{BizTag, FormattedIds, IdSink};
use crate::service::Ids;

/// Registers Leaf's id route: a static prefix, matched without a regex (actix-router's regexes
/// are the costliest step of a request); the handler takes the rest of the path as the tag, so
/// empty tags and tags with slashes still reach validation (400 `invalid_biz_tag`). Registered
/// before every route with a path parameter (see [`super::configure`]).
pub fn leaf_route(cfg: &mut web::ServiceConfig) {
    cfg.service(labeled_get_prefix(LEAF_PREFIX, LEAF_ROUTE, get_leaf));
}

/// Registers the batch route: the common shape first, a plain segment; then the same handler
/// under `.*` for empty tags and slashes. Every resource keeps the route's pattern as its label.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(labeled_get(
        "/api/v1/segment/{biz_tag}/ids",
        BATCH_ROUTE,
        get_batch,
    ))
    .service(labeled_get(BATCH_ROUTE, BATCH_ROUTE, get_batch))
    .service(labeled_get(
        "/api/v1/segment/{biz_tag}/ranges",
        RANGES_ROUTE,
        get_ranges,
    ))
    .service(labeled_get(RANGES_ROUTE, RANGES_ROUTE, get_ranges))
    .route(
        "/api/v1/segment/{biz_tag}/decode",
        web::get().to(get_decode),
    );
}

/// Pattern and metrics label of the range route; also its fallback for empty tags and slashes.
pub const RANGES_ROUTE: &str = "/api/v1/segment/{biz_tag:.*}/ranges";

/// Static prefix of Leaf's route: the tag is the rest of the path.
pub const LEAF_PREFIX: &str = "/api/segment/get";

/// Metrics label of Leaf's route (its pattern when it was one).
pub const LEAF_ROUTE: &str = "/api/segment/get/{biz_tag:.*}";

/// Pattern and metrics label of the batch route; also the fallback for empty tags and slashes.
pub const BATCH_ROUTE: &str = "/api/v1/segment/{biz_tag:.*}/ids";

/// `GET /api/segment/get/{biz_tag}`: the next id as plain text (Leaf-compatible).
#[utoipa::path(
    get,
    path = "/api/segment/get/{biz_tag}",
    tag = "segment",
    security((), ("caller_token" = [])),
    params(("biz_tag" = String, Path, description = "The business tag (a `leaf_alloc` row)", pattern = "^[A-Za-z0-9._:-]{1,128}$")),
    responses(
        (status = 200, description = "The next id, in decimal", content_type = "text/plain", body = String),
        (status = 400, description = "`invalid_biz_tag`", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no caller token where one is required (`Authorization: Bearer <token>`, or `?access_token=<token>` on this Leaf route), or one unknown or revoked", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller token is not scoped to the tag", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 409, description = "`biz_tag_exhausted`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`segments_not_ready`, `database_unavailable`, `lossy_database` (with `Retry-After`), `not_ready` (caller tokens not loaded yet)", body = ErrorBody),
    )
)]
pub async fn get_leaf(
    req: HttpRequest,
    state: std::rc::Rc<web::Data<AppState>>,
) -> Result<HttpResponse, Error> {
    // Borrowed from the request: no `Data` clone, no `String` for a tag that needs no decoding.
    let state: &AppState = &state;
    let tag = tag_tail(&req)?;
    // The caller once (Leaf's route also takes `?access_token=`), then numbers first: a plain
    // tag with ids in memory never looks at formats.
    let who = RequestCredentials::leaf(&req);
    let admitted = state.ids.admit_ids(&who, &tag)?;
    if let Some(id) = state.ids.try_next_id(&admitted) {
        return Ok(plain_id(id));
    }
    // The slow path's future boxed on its own: the fast path above keeps the handler's future
    // small (it is allocated and moved per request; perf: about 450 instructions a request).
    match Box::pin(state.ids.next_ids_admitted(&who, admitted, 1)).await? {
        Ids::Numbers(ids) | Ids::Strict(ids) => Ok(plain_id(*ids.first().ok_or(Error::Internal)?)),
        Ids::Texts(f) => Ok(plain_text(f.first().ok_or(Error::Internal)?)),
    }
}

/// Body of the segment batch route.
#[derive(Serialize, ToSchema)]
pub struct BatchBody<'a> {
    /// The tag the ids belong to.
    #[schema(value_type = String)]
    pub biz_tag: &'a str,
    /// The ids, increasing: numbers, or decimal strings with `stringify_ids=true`.
    #[schema(schema_with = ids_schema)]
    pub ids: JsonIds<i64>,
    /// `true` for a strict tag (increasing across every server in real-time order): hand these
    /// ids to the one call that asked, never buffer them. Absent for other tags.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `GET /api/v1/segment/{biz_tag}/ids?count=N[&stringify_ids=true]`: `{"biz_tag", "ids": [..]}`,
/// ids increasing, as numbers or (with `stringify_ids=true`) decimal strings. Fewer than `count`
/// only when they are all there is: the tag ran out, or its next segment did not come within the
/// wait (the next call then answers the error; no id already taken is lost).
#[utoipa::path(
    get,
    path = "/api/v1/segment/{biz_tag}/ids",
    tag = "segment",
    security((), ("caller_token" = [])),
    params(("biz_tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9._:-]{1,128}$"), BatchQuery),
    responses(
        (status = 200, description = "`count` increasing ids; fewer only when the tag runs out (`i64::MAX`) or its next segment does not come within the wait, and then the next call answers the error", body = BatchBody),
        (status = 400, description = "`invalid_biz_tag`, `invalid_count`, `invalid_request`", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no caller token where one is required (`Authorization: Bearer <token>`), or one unknown or revoked", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller token is not scoped to the tag", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 409, description = "`biz_tag_exhausted`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`segments_not_ready`, `database_unavailable`, `lossy_database` (with `Retry-After`), `not_ready` (caller tokens not loaded yet)", body = ErrorBody),
    )
)]
pub async fn get_batch(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<BatchQuery>,
) -> Result<HttpResponse, Error> {
    let tag = path.into_inner();
    BizTag::validate(&tag)?;
    let count = query.parse()?;
    let format = query.format()?;
    match state
        .ids
        .next_ids(&RequestCredentials(&req), &tag, count)
        .await?
    {
        Ids::Numbers(ids) => Ok(HttpResponse::Ok().json(BatchBody {
            biz_tag: &tag,
            ids: JsonIds { ids, format },
            strict: None,
        })),
        Ids::Strict(ids) => Ok(HttpResponse::Ok().json(BatchBody {
            biz_tag: &tag,
            ids: JsonIds { ids, format },
            strict: Some(true),
        })),
        Ids::Texts(f) => Ok(HttpResponse::Ok().json(FormattedBatchBody {
            biz_tag: &tag,
            ids: TextIds(&f),
            period: f.period.clone(),
            period_end: f.period_end.to_string(),
            ordered: f.ordered(),
        })),
    }
}

/// Body of the batch route for a formatted tag (`crate::shapes`).
#[derive(Serialize, ToSchema)]
pub struct FormattedBatchBody<'a> {
    /// The tag the ids belong to.
    #[schema(value_type = String)]
    pub biz_tag: &'a str,
    /// The ids as text, in issue order, all of one period.
    #[schema(value_type = Vec<String>)]
    pub ids: TextIds<'a>,
    /// The period's key (`yyyy`, `yyyyMM`, `yyyyMMdd`; empty when the sequence never restarts).
    pub period: String,
    /// When the period ends (RFC 3339, UTC): a client drops what it holds of these ids then.
    pub period_end: String,
    /// `false` for a permuted tag, whose ids come in no visible order on purpose (a client
    /// hands them out as received, with no floor); `true` otherwise: increasing as byte strings.
    pub ordered: bool,
}

/// Body of the segment range route.
#[derive(Serialize, ToSchema)]
pub struct SegmentRangesBody<'a> {
    /// The tag the ids belong to.
    #[schema(value_type = String)]
    pub biz_tag: &'a str,
    /// Ids in the runs together: `count`, or fewer when they are all there is (as the list).
    pub count: u64,
    /// The ids as runs of consecutive ids, increasing.
    #[schema(schema_with = runs_schema)]
    pub ranges: JsonRuns<'a>,
    /// `true` for a strict tag: hand these ids to the one call that asked, never buffer them
    /// (at most 100000 ids an answer). Absent for other tags.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// `GET /api/v1/segment/{biz_tag}/ranges?count=N[&stringify_ids=true]`: the same ids as the
/// batch route would give, as runs `{"first", "last"}` of consecutive ids (one per segment the
/// batch crosses, fewer where segments meet), so a client can lease up to a million ids in an
/// answer of a few bytes. Fewer than `count` only when they are all there is.
#[utoipa::path(
    get,
    path = "/api/v1/segment/{biz_tag}/ranges",
    tag = "segment",
    security((), ("caller_token" = [])),
    params(("biz_tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9._:-]{1,128}$"), RangeQuery),
    responses(
        (status = 200, description = "Runs holding `count` increasing ids; fewer only when the tag runs out (`i64::MAX`) or its next segment does not come within the wait, and then the next call answers the error", body = SegmentRangesBody),
        (status = 400, description = "`invalid_biz_tag`, `invalid_count`, `invalid_request`", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no caller token where one is required (`Authorization: Bearer <token>`), or one unknown or revoked", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller token is not scoped to the tag", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 409, description = "`biz_tag_exhausted`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`segments_not_ready`, `database_unavailable`, `lossy_database` (with `Retry-After`), `not_ready` (caller tokens not loaded yet)", body = ErrorBody),
    )
)]
pub async fn get_ranges(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<RangeQuery>,
) -> Result<HttpResponse, Error> {
    let tag = path.into_inner();
    BizTag::validate(&tag)?;
    let count = query.parse()?;
    let format = query.format()?;
    let runs = state
        .ids
        .next_runs(&RequestCredentials(&req), &tag, count)
        .await?;
    Ok(HttpResponse::Ok().json(SegmentRangesBody {
        biz_tag: &tag,
        count: runs.taken(),
        ranges: JsonRuns {
            runs: runs.runs(),
            format,
        },
        strict: runs.is_strict().then_some(true),
    }))
}

/// The query of the decode route.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DecodeQuery {
    /// A formatted id of the tag, as issued (in a query parameter, so `/` in a format needs no
    /// path escaping).
    pub id: String,
}

/// Body of the decode route.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecodedBody {
    /// The tag.
    pub biz_tag: String,
    /// The id read.
    pub id: String,
    /// Its period's key (`yyyy`, `yyyyMM`, `yyyyMMdd`; empty without a reset).
    pub period: String,
    /// Its sequence number within the period.
    pub sequence: u64,
}

/// `GET /api/v1/segment/{biz_tag}/decode?id=..`: a formatted id read back into its period and
/// sequence. A wrong length, a character outside a part's alphabet, a literal that differs, an
/// impossible date or a wrong check character is `400 invalid_id`, never another id. A permuted
/// tag's ids are decoded only with the admin token (its sequence is what the permutation
/// hides).
#[utoipa::path(
    get,
    path = "/api/v1/segment/{biz_tag}/decode",
    tag = "segment",
    security((), ("caller_token" = [])),
    params(("biz_tag" = String, Path, description = "A formatted tag", pattern = "^[A-Za-z0-9._:-]{1,128}$"), DecodeQuery),
    responses(
        (status = 200, description = "The id's period and sequence", body = DecodedBody),
        (status = 400, description = "`invalid_biz_tag`, `invalid_id` (not an id of the tag's format), `formatted_tag`... `invalid_request` (a plain tag: its ids are numbers)", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no caller token where one is required (`Authorization: Bearer <token>`), or one unknown or revoked; a permuted tag without `Authorization: Bearer <admin.token>`", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller token is not scoped to the tag", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag` (no formatted tag of that name), `engine_disabled`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`, `key_unavailable` (a permuted tag whose key this server lacks), `not_ready` (caller tokens not loaded yet)", body = ErrorBody),
    )
)]
pub async fn get_decode(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<DecodeQuery>,
) -> Result<HttpResponse, Error> {
    let tag = BizTag::parse(&path.into_inner())?;
    let id = query.into_inner().id;
    let d = state
        .ids
        .decode(&RequestCredentials(&req), &tag, &id)
        .await?;
    Ok(HttpResponse::Ok().json(DecodedBody {
        biz_tag: tag.as_str().to_owned(),
        id,
        period: d.period,
        sequence: d.sequence,
    }))
}

/// A formatted batch's ids in a JSON body: each written into one reused buffer and serialized
/// from there, so a batch of 1,000 allocates no string per id.
pub struct TextIds<'a>(&'a FormattedIds);

impl Serialize for TextIds<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = serializer.serialize_seq(Some(self.0.len()))?;
        self.0.for_each(|id| seq.serialize_element(id))?;
        seq.end()
    }
}
