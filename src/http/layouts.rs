//! Layout routes: the migration planner (DESIGN.md section 6) and an id decoder under any
//! layout, the HTTP form of `leafid layout plan` and `leafid layout decode`.
//!
//! Both are pure computations on the request: no database, no engine state. The planner reads
//! the clock through [`layout_plan::plan_now`] only.

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use utoipa::IntoParams;

use super::error::{ApiError, ErrorBody};
use super::segment::StringifyQuery;
use super::snowflake::DecodeBody;
use crate::layout_plan::{self, Plan, PlanRequest};
use crate::snowflake::layout::{BitLayout, LayoutArgs, TimeUnit, UnitPolicy};

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/layouts/plan", web::post().to(post_plan))
        .route("/api/v1/layouts/decode/{id}", web::get().to(get_decode));
}

/// The query of `POST /api/v1/layouts/plan`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PlanQuery {
    /// `true`: `first_id` and `last_id` are decimal strings, which JavaScript's `JSON.parse`
    /// reads exactly; `false` or absent: numbers. Anything else is `400 invalid_request`.
    #[param(value_type = Option<bool>)]
    pub stringify_ids: Option<String>,
}

impl PlanQuery {
    /// Whether ids are answered as strings; only `true` and `false` are accepted.
    fn stringify_ids(&self) -> Result<bool, ApiError> {
        match self.stringify_ids.as_deref() {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => Err(ApiError::InvalidRequest(format!(
                "stringify_ids {other:?} is neither true nor false"
            ))),
        }
    }
}

/// The id fields of a plan answer, turned into decimal strings by `stringify_ids=true`.
const PLAN_ID_FIELDS: [&str; 2] = ["first_id", "last_id"];

/// `POST /api/v1/layouts/plan`: 200 with the plan, 422 `plan_impossible` naming the need, 400
/// `invalid_plan_request` for a request that asks for something invalid (a body that is not the
/// request's JSON, or a bad `stringify_ids`, is `invalid_request`).
#[utoipa::path(
    post,
    path = "/api/v1/layouts/plan",
    tag = "layouts",
    params(PlanQuery),
    request_body = PlanRequest,
    responses(
        (status = 200, description = "The new layout, its id range, its capacity and its checks; with `stringify_ids=true`, `first_id` and `last_id` are decimal strings", body = Plan),
        (status = 400, description = "`invalid_request`, `invalid_plan_request`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 422, description = "`plan_impossible` (the message names the need and, when worker and sequence bits are too many, how many bits short and what fits instead)", body = ErrorBody),
    )
)]
pub async fn post_plan(
    query: web::Query<PlanQuery>,
    body: web::Json<PlanRequest>,
) -> Result<HttpResponse, ApiError> {
    let stringify = query.stringify_ids()?;
    let plan = layout_plan::plan_now(&body)?;
    if !stringify {
        return Ok(HttpResponse::Ok().json(plan));
    }
    let mut json = serde_json::to_value(&plan).map_err(|e| {
        tracing::error!(error = %e, "plan answer is not JSON");
        ApiError::Internal
    })?;
    for field in PLAN_ID_FIELDS {
        if let Some(id) = json.get_mut(field) {
            *id = serde_json::Value::String(id.to_string());
        }
    }
    Ok(HttpResponse::Ok().json(json))
}

/// The layout of `GET /api/v1/layouts/decode/{id}`, as text like on the command line.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DecodeQuery {
    /// `T/W/S` or `P+T/W/S`, e.g. `28/22/13`.
    pub layout: Option<String>,
    /// RFC 3339 with an explicit offset, or unix milliseconds.
    pub epoch: Option<String>,
    /// `seconds` (the default) or `millis`.
    pub unit: Option<String>,
    /// The prefix value; all ones of the prefix bits when absent.
    pub prefix_value: Option<u64>,
}

impl DecodeQuery {
    /// The validated layout, or `invalid_layout` naming what is wrong; the unit defaults to
    /// seconds ([`UnitPolicy::DefaultsToSeconds`]).
    pub fn layout(&self) -> Result<BitLayout, ApiError> {
        let invalid = |e: &dyn std::fmt::Display| ApiError::InvalidLayout(e.to_string());
        if self.layout.is_none() || self.epoch.is_none() {
            return Err(ApiError::InvalidLayout(
                "give layout (T/W/S or P+T/W/S) and epoch (RFC 3339 with an explicit offset) in the query"
                    .to_owned(),
            ));
        }
        let unit = self
            .unit
            .as_deref()
            .map(str::parse::<TimeUnit>)
            .transpose()
            .map_err(|e| invalid(&e))?;
        let args = LayoutArgs {
            bits: self.layout.as_deref(),
            epoch: self.epoch.as_deref(),
            unit,
            prefix_value: self.prefix_value,
            ..LayoutArgs::default()
        };
        args.resolve(UnitPolicy::DefaultsToSeconds)
            .map_err(|e| invalid(&e))
    }
}

/// `GET /api/v1/layouts/decode/{id}?layout=28/22/13&epoch=...&unit=seconds`: the id's fields,
/// `{"id", "id_str", "layout", "prefix", "time_delta", "timestamp", "worker_id", "sequence"}`;
/// `id` a decimal string with `stringify_ids=true`.
#[utoipa::path(
    get,
    path = "/api/v1/layouts/decode/{id}",
    tag = "layouts",
    params(("id" = String, Path, description = "An id, an integer within 0..=9223372036854775807", pattern = "^[0-9]{1,19}$"), DecodeQuery, StringifyQuery),
    responses(
        (status = 200, description = "The id's fields under the given layout", body = DecodeBody),
        (status = 400, description = "`invalid_id`, `invalid_layout`, `invalid_request`", body = ErrorBody),
        (status = 404, description = "`not_found` (an empty id is no route)", body = ErrorBody),
    )
)]
pub async fn get_decode(
    path: web::Path<String>,
    query: web::Query<DecodeQuery>,
    stringify: web::Query<StringifyQuery>,
) -> Result<HttpResponse, ApiError> {
    let id = super::snowflake::parse_id(&path.into_inner())?;
    let layout = query.layout()?;
    let format = stringify.format()?;
    let body = super::snowflake::decode_body(&layout, id, format);
    Ok(HttpResponse::Ok().json(body))
}
