//! Layout routes: the migration planner (DESIGN.md section 6) and an id decoder under any
//! layout, the HTTP form of `leafid layout plan` and `leafid layout decode`.
//!
//! Both are pure computations on the request: no database, no engine state. The planner reads
//! the clock through [`layout_plan::plan_now`] only.

use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::error::{ApiError, ErrorBody};
use super::segment::{IdFormat, JsonId, StringifyQuery, id_schema};
use super::snowflake::DecodeBody;
use crate::layout_plan::{self, Plan, PlanRequest};
use crate::snowflake::layout::{BitLayout, LayoutArgs, LayoutSpec, TimeUnit, UnitPolicy};

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

/// The planner's answer, as JSON: `{"layout", "epoch", "first_id", "last_id", "exhausted_at",
/// "capacity", "checks"}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Plan)]
pub struct PlanBody {
    /// The new layout, without its epoch.
    pub layout: LayoutSpec,
    /// The new layout's epoch, RFC 3339 UTC.
    pub epoch: String,
    /// Smallest id the new layout can issue from now on (tick at now, worker 0, sequence 0).
    #[schema(schema_with = id_schema)]
    pub first_id: JsonId<u64>,
    /// Largest id the new layout can issue (last tick, largest worker id and sequence).
    #[schema(schema_with = id_schema)]
    pub last_id: JsonId<u64>,
    /// First instant the new layout cannot represent, RFC 3339 UTC.
    pub exhausted_at: String,
    /// What the new layout holds, beside what was asked for: the headroom.
    pub capacity: PlanCapacityBody,
    /// The guarantees, each verified by composing ids with the new layout.
    pub checks: Vec<PlanCheckBody>,
}

impl PlanBody {
    /// The answer for `plan`, its ids as `format` says.
    pub fn new(plan: &Plan, format: IdFormat) -> Self {
        let c = &plan.capacity;
        Self {
            layout: plan.layout.clone(),
            epoch: plan.epoch.clone(),
            first_id: JsonId {
                id: plan.first_id,
                format,
            },
            last_id: JsonId {
                id: plan.last_id,
                format,
            },
            exhausted_at: plan.exhausted_at.clone(),
            capacity: PlanCapacityBody {
                workers: c.workers,
                ids_per_second: c.ids_per_second,
                max_workers: c.max_workers,
                max_ids_per_second_per_worker: c.max_ids_per_second_per_worker,
                max_ids_per_second_cluster: c.max_ids_per_second_cluster,
                max_id_bits: c.max_id_bits,
            },
            checks: plan
                .checks
                .iter()
                .map(|check| PlanCheckBody {
                    name: check.name.clone(),
                    ok: check.ok,
                    detail: check.detail.clone(),
                })
                .collect(),
        }
    }
}

/// What a plan's layout holds, in users' terms.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = PlanCapacity)]
pub struct PlanCapacityBody {
    /// The requested peak worker count, when `workers` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<u64>,
    /// The requested peak ids per second of each worker (a cluster rate divided among the
    /// workers, rounded up), when `ids_per_second` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ids_per_second: Option<u64>,
    /// Worker ids the layout has: `2^worker_bits`.
    pub max_workers: u64,
    /// Ids per second each worker can issue: `2^seq_bits` per tick.
    pub max_ids_per_second_per_worker: u64,
    /// Ids per second of the cluster with every worker id in use (saturates at `u64::MAX`).
    pub max_ids_per_second_cluster: u64,
    /// Every id is at most `2^max_id_bits - 1`.
    pub max_id_bits: u8,
}

/// One verified guarantee of a plan.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = PlanCheck)]
pub struct PlanCheckBody {
    /// Stable snake_case name, e.g. `first_id_above_max_legacy_id`.
    pub name: String,
    /// Whether it holds (always true in a returned plan).
    pub ok: bool,
    /// The numbers behind it, for people.
    pub detail: String,
}

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
        (status = 200, description = "The new layout, its id range, its capacity and its checks; with `stringify_ids=true`, `first_id` and `last_id` are decimal strings", body = PlanBody),
        (status = 400, description = "`invalid_request`, `invalid_plan_request`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 422, description = "`plan_impossible` (the message names the need and, when worker and sequence bits are too many, how many bits short and what fits instead)", body = ErrorBody),
    )
)]
pub async fn post_plan(
    query: web::Query<PlanQuery>,
    body: web::Json<PlanRequest>,
) -> Result<HttpResponse, ApiError> {
    let format = if query.stringify_ids()? {
        IdFormat::String
    } else {
        IdFormat::Number
    };
    let plan = layout_plan::plan_now(&body)?;
    Ok(HttpResponse::Ok().json(PlanBody::new(&plan, format)))
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
