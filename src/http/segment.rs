//! Segment routes: Leaf's plain-text route and the v1 batch route.

use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ErrorBody};
use crate::segment::BizTag;

/// Most ids one batch request may ask for.
pub const MAX_COUNT: u64 = 100_000;

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    // `.*` lets empty tags and tags with slashes reach validation (400) instead of a 404.
    cfg.route("/api/segment/get/{biz_tag:.*}", web::get().to(get_leaf))
        .route("/api/v1/segment/{biz_tag:.*}/ids", web::get().to(get_batch));
}

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
        (status = 503, description = "`segments_not_ready`, `database_unavailable` (with `Retry-After`)", body = ErrorBody),
    )
)]
pub async fn get_leaf(
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let tag = path.into_inner();
    BizTag::validate(&tag)?;
    let id = state
        .segment()?
        .next_id(&tag)
        .await
        .map_err(|e| ApiError::from_segment(e, &tag))?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body(id.to_string()))
}

/// The `count` query parameter, kept as text so every bad value gets `invalid_count`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CountQuery {
    /// Ids wanted (1..=100000, default 1).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100000)]
    pub count: Option<String>,
}

impl CountQuery {
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
    /// The ids, increasing.
    pub ids: Vec<i64>,
}

/// `GET /api/v1/segment/{biz_tag}/ids?count=N`: `{"biz_tag", "ids": [..]}`, ids increasing.
#[utoipa::path(
    get,
    path = "/api/v1/segment/{biz_tag}/ids",
    tag = "segment",
    params(("biz_tag" = String, Path, description = "The business tag", pattern = "^[A-Za-z0-9._:-]{1,128}$"), CountQuery),
    responses(
        (status = 200, description = "`count` increasing ids", body = BatchBody),
        (status = 400, description = "`invalid_biz_tag`, `invalid_count`, `invalid_request`", body = ErrorBody),
        (status = 404, description = "`unknown_biz_tag`, `engine_disabled`", body = ErrorBody),
        (status = 409, description = "`biz_tag_exhausted`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`segments_not_ready`, `database_unavailable` (with `Retry-After`)", body = ErrorBody),
    )
)]
pub async fn get_batch(
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<CountQuery>,
) -> Result<HttpResponse, ApiError> {
    let tag = path.into_inner();
    BizTag::validate(&tag)?;
    let count = query.parse()?;
    let ids = state
        .segment()?
        .next_ids(&tag, count)
        .await
        .map_err(|e| ApiError::from_segment(e, &tag))?;
    Ok(HttpResponse::Ok().json(BatchBody { biz_tag: &tag, ids }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: Option<&str>) -> Result<usize, ApiError> {
        CountQuery {
            count: s.map(str::to_owned),
        }
        .parse()
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
}
