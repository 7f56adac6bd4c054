//! Segment routes: Leaf's plain-text route and the v1 batch route; and the `stringify_ids`
//! query parameter with the id serializers that every v1 JSON route returning ids shares.
//!
//! JavaScript parses JSON numbers into doubles, which hold integers exactly only up to
//! `2^53 - 1`: every Twitter-layout snowflake id and every segment id above that comes out of
//! `JSON.parse` rounded (three consecutive snowflake ids parse to one value). Like Twitter's
//! `stringify_ids=true`, `?stringify_ids=true` answers the ids as decimal strings instead.

use std::borrow::Cow;

use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize, Serializer};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    ArrayBuilder, KnownFormat, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, Type,
};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ErrorBody};
use super::metrics::{labeled_get, labeled_get_prefix};
use crate::segment::BizTag;

/// Most ids one batch request may ask for.
pub const MAX_COUNT: u64 = 100_000;

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
    .service(labeled_get(BATCH_ROUTE, BATCH_ROUTE, get_batch));
}

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
    params(("biz_tag" = String, Path, description = "The business tag (a `leaf_alloc` row)", pattern = "^[A-Za-z0-9._:-]{1,128}$")),
    responses(
        (status = 200, description = "The next id, in decimal", content_type = "text/plain", body = String),
        (status = 400, description = "`invalid_biz_tag`", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 409, description = "`biz_tag_exhausted`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`segments_not_ready`, `database_unavailable`, `lossy_database` (with `Retry-After`)", body = ErrorBody),
    )
)]
pub async fn get_leaf(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    // Borrowed from the request: no `Data` clone, no `String` for a tag that needs no decoding.
    let state = app_state(&req)?;
    let tag = path_tail(&req)?;
    BizTag::validate(&tag)?;
    let id = next_id(state, &tag).await?;
    Ok(plain_id(id))
}

/// The next id of `tag`. While the database's settings can lose a committed lease (and the
/// override is off), only ids already leased are served, from memory; an id that needs a lease
/// is `lossy_database` at once instead of after the segment wait.
async fn next_id(state: &AppState, tag: &str) -> Result<i64, ApiError> {
    let engine = state.segment()?;
    if let Some(id) = engine.try_next_id(tag) {
        return Ok(id);
    }
    if let Some(why) = state.durability.refusal() {
        return Err(ApiError::LossyDatabase(why));
    }
    engine.next_id(tag).await.map_err(|e| lossy_or(state, e))
}

/// [`next_id`] for `count` ids: fewer only as `SegmentAllocator::next_ids` answers fewer, or,
/// on a lossy database, when the ids already leased run out.
async fn next_ids(state: &AppState, tag: &str, count: usize) -> Result<Vec<i64>, ApiError> {
    let engine = state.segment()?;
    let Some(why) = state.durability.refusal() else {
        return engine
            .next_ids(tag, count)
            .await
            .map_err(|e| lossy_or(state, e));
    };
    let mut ids = Vec::new();
    while ids.len() < count {
        match engine.try_next_id(tag) {
            Some(id) => ids.push(id),
            None => break,
        }
    }
    if ids.is_empty() {
        return Err(ApiError::LossyDatabase(why));
    }
    Ok(ids)
}

/// A segment wait that ran out because the leases were refused (a lossy setting found while
/// the request waited) answers `lossy_database`, not `segments_not_ready`.
fn lossy_or(state: &AppState, e: crate::segment::SegmentError) -> ApiError {
    match (&e, state.durability.refusal()) {
        (crate::segment::SegmentError::NotReady { .. }, Some(why)) => ApiError::LossyDatabase(why),
        _ => e.into(),
    }
}

/// The app state, borrowed from the request.
pub fn app_state(req: &HttpRequest) -> Result<&AppState, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .map(|data| data.get_ref())
        .ok_or_else(|| {
            tracing::error!("AppState is not registered as app data");
            ApiError::Internal
        })
}

/// The rest of the path after a [`labeled_get_prefix`] scope's prefix and a `/`, percent-decoded
/// as `web::Path<String>` decodes a `{param:.*}`: borrowed when there is nothing to decode
/// (actix has already decoded all but `%2F`, `%25` and `%2B`, so only a `%` left needs the
/// full decode). The prefix alone (no `/`) is `not_found`, as it was with `{param:.*}`.
pub fn path_tail(req: &HttpRequest) -> Result<Cow<'_, str>, ApiError> {
    let Some(rest) = req.match_info().unprocessed().strip_prefix('/') else {
        return Err(ApiError::NotFound(format!(
            "{} {}",
            req.method(),
            req.path()
        )));
    };
    if !rest.contains('%') {
        return Ok(Cow::Borrowed(rest));
    }
    Ok(Cow::Owned(percent_decode_lossy(rest)))
}

/// Decodes every `%XX`; invalid escapes stay as they are, invalid UTF-8 becomes U+FFFD (as
/// actix-router's full decode does for path parameters).
fn percent_decode_lossy(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A plain-text id body: formatted with `itoa`, under a static content type (no header parsing).
pub fn plain_id<I: itoa::Integer>(id: I) -> HttpResponse {
    HttpResponse::Ok()
        .insert_header((
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        ))
        .body(itoa::Buffer::new().format(id).to_owned())
}

/// How a JSON body writes its ids, from `stringify_ids`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdFormat {
    /// JSON numbers (`stringify_ids` absent or `false`): exact in JavaScript only up to 2^53 - 1.
    #[default]
    Number,
    /// Decimal strings (`stringify_ids=true`): exact in every JSON parser.
    String,
}

impl IdFormat {
    /// Parses `stringify_ids`: `true` or `false` exactly; anything else (`yes`, `1`, empty) is
    /// `invalid_request`, so a client's typo never silently yields lossy numbers.
    pub fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        match raw {
            None | Some("false") => Ok(Self::Number),
            Some("true") => Ok(Self::String),
            Some(other) => Err(ApiError::InvalidRequest(format!(
                "stringify_ids must be \"true\" (ids as decimal strings) or \"false\" (ids as \
                 numbers), got {other:?}"
            ))),
        }
    }
}

/// One id in a JSON body: a number, or its decimal string under [`IdFormat::String`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonId<T> {
    /// The id.
    pub id: T,
    /// Number or string.
    pub format: IdFormat,
}

impl<T: itoa::Integer + Serialize> Serialize for JsonId<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.format {
            IdFormat::Number => self.id.serialize(serializer),
            // itoa formats into a stack buffer: no allocation per id on the batch routes.
            IdFormat::String => serializer.serialize_str(itoa::Buffer::new().format(self.id)),
        }
    }
}

/// The ids of a batch body, all numbers or all decimal strings.
#[derive(Debug)]
pub struct JsonIds<T> {
    /// The ids, increasing.
    pub ids: Vec<T>,
    /// Numbers or strings.
    pub format: IdFormat,
}

impl<T: itoa::Integer + Serialize> Serialize for JsonIds<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.format {
            IdFormat::Number => self.ids.serialize(serializer),
            IdFormat::String => serializer.collect_seq(self.ids.iter().map(|&id| JsonId {
                id,
                format: IdFormat::String,
            })),
        }
    }
}

/// Schema of one id: an integer, or its decimal string under `stringify_ids=true`.
pub fn id_schema() -> Schema {
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .minimum(Some(0))
                .description(Some("The id as a number (`stringify_ids` absent or false)")),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[0-9]{1,19}$"))
                .description(Some("The id in decimal (`stringify_ids=true`)")),
        )
        .description(Some(
            "An id: a JSON number, or a decimal string when the request has `stringify_ids=true` \
             (JavaScript numbers are exact only up to 2^53 - 1)",
        ))
        .into()
}

/// Schema of an id that may be absent: [`id_schema`]'s number or string, or `null`.
pub fn optional_id_schema() -> Schema {
    let Schema::OneOf(mut one_of) = id_schema() else {
        unreachable!("id_schema is a oneOf")
    };
    one_of.items.push(RefOr::T(
        ObjectBuilder::new().schema_type(Type::Null).into(),
    ));
    Schema::OneOf(one_of)
}

/// Schema of a list of ids, increasing: all numbers, or all strings under `stringify_ids=true`.
pub fn ids_schema() -> Schema {
    ArrayBuilder::new()
        .items(RefOr::T(id_schema()))
        .description(Some(
            "The ids, increasing: numbers, or decimal strings with `stringify_ids=true`",
        ))
        .into()
}

/// The `stringify_ids` query parameter of the routes whose bodies carry ids but take no other
/// query: the decode routes, the tag rows (`max_id`) and the buffers (`min_id`, `max_id`,
/// `next_id`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StringifyQuery {
    /// `true`: the id as a decimal string, for JavaScript clients (whose numbers are exact only
    /// up to 2^53 - 1); `false` or absent: a JSON number. Any other value is `invalid_request`.
    #[param(value_type = Option<bool>)]
    pub stringify_ids: Option<String>,
}

impl StringifyQuery {
    /// The validated format.
    pub fn format(&self) -> Result<IdFormat, ApiError> {
        IdFormat::parse(self.stringify_ids.as_deref())
    }
}

/// The query of the batch routes, kept as text so every bad `count` gets `invalid_count` and
/// every bad `stringify_ids` gets `invalid_request`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BatchQuery {
    /// Ids wanted (1..=100000, default 1).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100000)]
    pub count: Option<String>,
    /// `true`: the ids as decimal strings, for JavaScript clients (whose numbers are exact only
    /// up to 2^53 - 1); `false` or absent: JSON numbers. Any other value is `invalid_request`.
    #[param(value_type = Option<bool>)]
    pub stringify_ids: Option<String>,
}

impl BatchQuery {
    /// The validated format of the ids.
    pub fn format(&self) -> Result<IdFormat, ApiError> {
        IdFormat::parse(self.stringify_ids.as_deref())
    }

    /// The validated count.
    pub fn parse(&self) -> Result<usize, ApiError> {
        let Some(raw) = self.count.as_deref() else {
            return Ok(1);
        };
        match raw.trim().parse::<i128>() {
            Ok(n) if (1..=MAX_COUNT as i128).contains(&n) => Ok(n as usize),
            Ok(n) => Err(ApiError::InvalidCount(format!(
                "count must be within 1..={MAX_COUNT} (got {n})"
            ))),
            Err(_) => Err(ApiError::InvalidCount(format!(
                "count must be an integer within 1..={MAX_COUNT}"
            ))),
        }
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
}

/// `GET /api/v1/segment/{biz_tag}/ids?count=N[&stringify_ids=true]`: `{"biz_tag", "ids": [..]}`,
/// ids increasing, as numbers or (with `stringify_ids=true`) decimal strings. Fewer than `count`
/// only when they are all there is: the tag ran out, or its next segment did not come within the
/// wait (the next call then answers the error; no id already taken is lost).
#[utoipa::path(
    get,
    path = "/api/v1/segment/{biz_tag}/ids",
    tag = "segment",
    params(("biz_tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9._:-]{1,128}$"), BatchQuery),
    responses(
        (status = 200, description = "`count` increasing ids; fewer only when the tag runs out (`i64::MAX`) or its next segment does not come within the wait, and then the next call answers the error", body = BatchBody),
        (status = 400, description = "`invalid_biz_tag`, `invalid_count`, `invalid_request`", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 409, description = "`biz_tag_exhausted`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`segments_not_ready`, `database_unavailable`, `lossy_database` (with `Retry-After`)", body = ErrorBody),
    )
)]
pub async fn get_batch(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<BatchQuery>,
) -> Result<HttpResponse, ApiError> {
    let tag = path.into_inner();
    BizTag::validate(&tag)?;
    let count = query.parse()?;
    let format = query.format()?;
    let ids = next_ids(&state, &tag, count).await?;
    Ok(HttpResponse::Ok().json(BatchBody {
        biz_tag: &tag,
        ids: JsonIds { ids, format },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: Option<&str>) -> Result<usize, ApiError> {
        BatchQuery {
            count: s.map(str::to_owned),
            stringify_ids: None,
        }
        .parse()
    }

    #[test]
    fn percent_decoding_is_full_and_lossy() {
        assert_eq!(percent_decode_lossy("a%2Fb%25%2b"), "a/b%+");
        assert_eq!(percent_decode_lossy("%C3%A9t%C3%A9"), "\u{e9}t\u{e9}");
        assert_eq!(percent_decode_lossy("%FF%FE"), "\u{fffd}\u{fffd}");
        assert_eq!(percent_decode_lossy("%zz%4"), "%zz%4");
    }

    #[test]
    fn count_bounds() {
        assert_eq!(q(None).unwrap(), 1);
        assert_eq!(q(Some("100000")).unwrap(), 100_000);
        for bad in [
            "0",
            "-1",
            "100001",
            "99999999999999999999999",
            "abc",
            "1.5",
            "",
        ] {
            assert!(
                matches!(q(Some(bad)), Err(ApiError::InvalidCount(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn stringify_ids_is_true_or_false_exactly() {
        assert_eq!(IdFormat::parse(None).unwrap(), IdFormat::Number);
        assert_eq!(IdFormat::parse(Some("false")).unwrap(), IdFormat::Number);
        assert_eq!(IdFormat::parse(Some("true")).unwrap(), IdFormat::String);
        for bad in ["yes", "1", "0", "", "TRUE", "True", " true"] {
            let e = IdFormat::parse(Some(bad)).unwrap_err();
            assert!(matches!(e, ApiError::InvalidRequest(_)), "{bad}");
            assert!(e.to_string().contains("stringify_ids"), "{e}");
        }
    }

    #[test]
    fn ids_serialize_as_numbers_or_exact_decimal_strings() {
        let ids = vec![1, (1i64 << 53) + 1, i64::MAX];
        let numbers = JsonIds {
            ids: ids.clone(),
            format: IdFormat::Number,
        };
        assert_eq!(
            serde_json::to_string(&numbers).unwrap(),
            "[1,9007199254740993,9223372036854775807]"
        );
        let strings = JsonIds {
            ids,
            format: IdFormat::String,
        };
        assert_eq!(
            serde_json::to_string(&strings).unwrap(),
            r#"["1","9007199254740993","9223372036854775807"]"#
        );
        let empty = JsonIds::<u64> {
            ids: vec![],
            format: IdFormat::String,
        };
        assert_eq!(serde_json::to_string(&empty).unwrap(), "[]");
        let one = JsonId {
            id: u64::MAX,
            format: IdFormat::String,
        };
        assert_eq!(
            serde_json::to_string(&one).unwrap(),
            r#""18446744073709551615""#
        );
    }
}
