//! Tag administration for DBAs: list, show, create, change step or description, delete.
//!
//! Writes need [`AdminAuth`]. Numbers arrive as raw JSON values so that every wrong type gets
//! the specific code (`invalid_step`, `invalid_max_id`) rather than a generic parse error.

use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::AppState;
use super::admin::AdminAuth;
use super::error::{ApiError, ErrorBody};
use crate::segment::{
    BizTag, BufferSnapshot, NewTag, SegmentAllocator, SegmentStore, StoreError, TagRow,
};

/// Largest step a DBA may set.
pub const MAX_STEP: i64 = 1_000_000_000;
/// Longest description (the column is `varchar(256)`).
pub const MAX_DESCRIPTION: usize = 256;

/// Runs one store call of an admin route, bounded by `segment.load_timeout_ms`: a write whose
/// answer never comes is a `503 database_unavailable`, not a request held forever. (A write that
/// timed out may still have committed: the admin sees the row on the next read.)
async fn bounded<'a, T, F>(
    segment: &'a SegmentAllocator,
    call: impl FnOnce(&'a dyn SegmentStore) -> F,
) -> Result<T, StoreError>
where
    F: std::future::Future<Output = Result<T, StoreError>> + 'a,
{
    let within = segment.config().load_timeout;
    tokio::time::timeout(within, call(segment.store().as_ref()))
        .await
        .unwrap_or_else(|_| {
            Err(StoreError::Unavailable(Box::new(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no answer within {within:?}"),
            ))))
        })
}

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/tags", web::get().to(list))
        .route("/api/v1/tags", web::post().to(create))
        .route("/api/v1/tags/{biz_tag:.*}", web::get().to(show))
        .route("/api/v1/tags/{biz_tag:.*}", web::patch().to(update))
        .route("/api/v1/tags/{biz_tag:.*}", web::delete().to(delete));
}

/// A row with the live state of its buffer (absent until the tag served a request).
#[derive(Debug, Serialize, ToSchema)]
pub struct TagView {
    /// The row.
    #[serde(flatten)]
    pub row: TagRow,
    /// The buffer, if cached.
    pub buffer: Option<BufferSnapshot>,
}

fn view(state: &AppState, row: TagRow) -> TagView {
    let buffer = state
        .segment
        .as_ref()
        .and_then(|s| s.cached(&row.biz_tag))
        .map(|b| b.snapshot());
    TagView { row, buffer }
}

/// Body of `GET /api/v1/tags`.
#[derive(Debug, Serialize, ToSchema)]
pub struct TagList {
    /// Every row, ordered by tag.
    pub tags: Vec<TagView>,
}

/// `GET /api/v1/tags`: every `leaf_alloc` row with its live buffer.
#[utoipa::path(
    get,
    path = "/api/v1/tags",
    tag = "tags",
    responses(
        (status = 200, description = "Every row, ordered by tag", body = TagList),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn list(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let rows = bounded(state.segment()?, |s| s.list_tags()).await?;
    let tags: Vec<TagView> = rows.into_iter().map(|r| view(&state, r)).collect();
    Ok(HttpResponse::Ok().json(TagList { tags }))
}

/// `GET /api/v1/tags/{biz_tag}`: one row with its live buffer.
#[utoipa::path(
    get,
    path = "/api/v1/tags/{biz_tag}",
    tag = "tags",
    params(("biz_tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9._:-]{1,128}$")),
    responses(
        (status = 200, description = "The row", body = TagView),
        (status = 400, description = "`invalid_biz_tag`", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn show(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let tag = BizTag::parse(&path.into_inner())?;
    match bounded(state.segment()?, |s| s.get_tag(tag.as_str())).await? {
        Some(row) => Ok(HttpResponse::Ok().json(view(&state, row))),
        None => Err(ApiError::UnknownBizTag(tag.to_string())),
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
    #[schema(value_type = Option<i64>, minimum = 1)]
    pub max_id: Option<Value>,
    /// Free text, at most 256 characters.
    #[schema(max_length = 256)]
    pub description: Option<String>,
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

fn parse_step(v: &Value) -> Result<i64, ApiError> {
    match v.as_i64() {
        Some(n) if (1..=MAX_STEP).contains(&n) => Ok(n),
        _ => Err(ApiError::InvalidStep(format!(
            "step must be an integer within 1..={MAX_STEP} (got {v})"
        ))),
    }
}

fn parse_max_id(v: &Value) -> Result<i64, ApiError> {
    match v.as_i64() {
        Some(n) if (1..i64::MAX).contains(&n) => Ok(n),
        _ => Err(ApiError::InvalidMaxId(format!(
            "max_id must be an integer within 1..={} (got {v})",
            i64::MAX - 1
        ))),
    }
}

fn check_description(d: Option<&str>) -> Result<(), ApiError> {
    match d {
        Some(d) if d.chars().count() > MAX_DESCRIPTION => Err(ApiError::InvalidRequest(format!(
            "description must be at most {MAX_DESCRIPTION} characters"
        ))),
        _ => Ok(()),
    }
}

/// `POST /api/v1/tags`: creates a row (admin).
#[utoipa::path(
    post,
    path = "/api/v1/tags",
    tag = "tags",
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
    body: web::Json<CreateTag>,
) -> Result<HttpResponse, ApiError> {
    let body = body.into_inner();
    let raw_tag = body
        .biz_tag
        .as_str()
        .ok_or_else(|| ApiError::InvalidRequest("biz_tag must be a string".into()))?;
    let tag = BizTag::parse(raw_tag)?;
    let step = parse_step(body.step.as_ref().unwrap_or(&Value::Null))?;
    let max_id = body
        .max_id
        .as_ref()
        .map(parse_max_id)
        .transpose()?
        .unwrap_or(1);
    check_description(body.description.as_deref())?;
    let new = NewTag {
        biz_tag: tag.to_string(),
        step,
        max_id,
        description: body.description,
    };
    let segment = state.segment()?;
    match bounded(segment, |s| s.create_tag(&new)).await {
        Ok(row) => {
            tracing::info!(biz_tag = %tag, step, max_id, "tag created");
            Ok(HttpResponse::Created().json(view(&state, row)))
        }
        Err(StoreError::AlreadyExists) => Err(ApiError::BizTagExists(tag.to_string())),
        Err(StoreError::BelowDeletedMaxId { high_water }) => {
            tracing::info!(biz_tag = %tag, max_id, high_water, "tag create refused: below its deleted high-water mark");
            Err(ApiError::MaxIdBelowDeleted {
                biz_tag: tag.to_string(),
                high_water,
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// `PATCH /api/v1/tags/{biz_tag}`: changes step and/or description (admin).
#[utoipa::path(
    patch,
    path = "/api/v1/tags/{biz_tag}",
    tag = "tags",
    params(("biz_tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9._:-]{1,128}$")),
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
    body: web::Json<UpdateTag>,
) -> Result<HttpResponse, ApiError> {
    let tag = BizTag::parse(&path.into_inner())?;
    let body = body.into_inner();
    let step = body.step.as_ref().map(parse_step).transpose()?;
    check_description(body.description.as_deref())?;
    if step.is_none() && body.description.is_none() {
        return Err(ApiError::InvalidRequest(
            "nothing to change: give step and/or description".into(),
        ));
    }
    let segment = state.segment()?;
    match bounded(segment, |s| {
        s.update_tag(tag.as_str(), step, body.description.as_deref())
    })
    .await?
    {
        Some(row) => {
            tracing::info!(biz_tag = %tag, ?step, "tag updated; a new step applies from the next segment load");
            Ok(HttpResponse::Ok().json(view(&state, row)))
        }
        None => Err(ApiError::UnknownBizTag(tag.to_string())),
    }
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
) -> Result<HttpResponse, ApiError> {
    let tag = BizTag::parse(&path.into_inner())?;
    let segment = state.segment()?;
    // On MySQL `Orders` deletes the row `orders`: drop the buffer under the stored spelling.
    let stored = bounded(segment, |s| s.get_tag(tag.as_str()))
        .await?
        .map(|r| r.biz_tag);
    if bounded(segment, |s| s.delete_tag(tag.as_str())).await? {
        segment.forget(tag.as_str());
        if let Some(stored) = stored.filter(|s| s != tag.as_str()) {
            segment.forget(&stored);
        }
        tracing::info!(biz_tag = %tag, "tag deleted");
        Ok(HttpResponse::NoContent().finish())
    } else {
        Err(ApiError::UnknownBizTag(tag.to_string()))
    }
}
