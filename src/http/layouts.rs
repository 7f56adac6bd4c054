//! Layout routes: the migration planner (DESIGN.md section 6) and an id decoder under any
//! layout, the HTTP form of `leafid layout plan` and `leafid layout decode`.
//!
//! Both are pure computations on the request: no database, no engine state. The planner reads
//! the clock through [`layout_plan::plan_now`] only.

use actix_web::{HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::decode::{DecodeBody, TimeUnitBody, decode_body, parse_id};
use super::error::{Error, ErrorBody};
use super::ids::{IdEncoding, JsonId, StringifyQuery, id_schema};
use crate::layout_plan::{self, Plan, PlanRequest, RateScope};
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
    fn stringify_ids(&self) -> Result<bool, Error> {
        match self.stringify_ids.as_deref() {
            None | Some("false") => Ok(false),
            Some("true") => Ok(true),
            Some(other) => Err(Error::InvalidRequest(format!(
                "stringify_ids {other:?} is neither true nor false"
            ))),
        }
    }
}

/// What a migration needs, as JSON:
/// `{"legacy": <layout with epoch>, "max_legacy_id": N, "worker_bits": W, "seq_bits": S,
/// "years": Y}`, with `"cutover": "<RFC 3339>"` instead of `max_legacy_id` if wished.
///
/// Each dimension is given in bits, in capacity, or both: `workers` (peak worker count) for
/// `worker_bits`, `ids_per_second` (with `ids_per_second_scope`) for `seq_bits`. From capacity
/// the planner takes the fewest bits that hold it; given both, the bits are kept and must hold
/// the capacity (else `invalid_plan_request`).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = PlanRequest)]
pub struct PlanRequestBody {
    /// The layout being replaced, with its epoch.
    pub legacy: LayoutSpecBody,
    /// The highest id the legacy layout issued (observed). Exactly one of this and `cutover`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    pub max_legacy_id: Option<i64>,
    /// When the legacy generators stop: the legacy maximum is then the largest id the legacy
    /// layout could have issued by `cutover + margin_seconds` (clamped at its largest id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutover: Option<String>,
    /// Seconds added to `cutover` for ids handed out ahead of time; only used with `cutover`.
    #[serde(default = "default_margin")]
    pub margin_seconds: u64,
    /// Worker bits of the new layout, kept as requested. Give this, `workers`, or both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 61)]
    pub worker_bits: Option<u8>,
    /// Sequence bits of the new layout, kept as requested. Give this, `ids_per_second`, or both.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 61)]
    pub seq_bits: Option<u8>,
    /// Peak number of workers (generator instances) at once: worker bits
    /// `ceil(log2(workers))`, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub workers: Option<u64>,
    /// Peak ids per second, of each worker or of the cluster (`ids_per_second_scope`): sequence
    /// bits `ceil(log2(ids per tick))`, at least 1, with `ceil(ids_per_second / 1000)` ids per
    /// tick in `millis`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub ids_per_second: Option<u64>,
    /// `worker` (the default): `ids_per_second` is each worker's peak; `cluster`: it is the
    /// cluster's, divided among `workers` (rounded up), which must then be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids_per_second_scope: Option<RateScopeBody>,
    /// Every id of the plan is at most `2^max_id_bits - 1` (53 for ids JavaScript numbers hold
    /// exactly); the bits above are a prefix of zeros. Default 63.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 3, maximum = 63)]
    pub max_id_bits: Option<u8>,
    /// Calendar years from now through which the new layout must still issue ids.
    #[schema(maximum = 1000)]
    pub years: u32,
    /// Time unit of the new layout; the legacy unit when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<TimeUnitBody>,
    /// Epoch of the new layout (not in the future); the planner chooses it when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
    /// Clock-back bits of the new layout (at most 3), added to the worker field above the
    /// worker bits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 3)]
    pub clock_back_bits: Option<u8>,
    /// Regions (lanes, 1 to 8): `ceil(log2(regions))` region bits are added to the worker
    /// field, whose worker bits then count each region's workers
    /// (`snowflake.worker.region_bits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 8)]
    pub regions: Option<u64>,
}

fn default_margin() -> u64 {
    layout_plan::DEFAULT_MARGIN_SECONDS
}

impl From<PlanRequestBody> for PlanRequest {
    fn from(body: PlanRequestBody) -> Self {
        Self {
            legacy: body.legacy.into(),
            max_legacy_id: body.max_legacy_id,
            cutover: body.cutover,
            margin_seconds: body.margin_seconds,
            worker_bits: body.worker_bits,
            seq_bits: body.seq_bits,
            workers: body.workers,
            ids_per_second: body.ids_per_second,
            ids_per_second_scope: body.ids_per_second_scope.map(RateScope::from),
            max_id_bits: body.max_id_bits,
            years: body.years,
            unit: body.unit.map(TimeUnit::from),
            epoch: body.epoch,
            clock_back_bits: body.clock_back_bits,
            regions: body.regions,
        }
    }
}

/// Whose rate `ids_per_second` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = RateScope)]
pub enum RateScopeBody {
    /// Each worker's peak (the default).
    Worker,
    /// The whole cluster's peak, shared by `workers` workers (divided, rounded up).
    Cluster,
}

impl From<RateScopeBody> for RateScope {
    fn from(scope: RateScopeBody) -> Self {
        match scope {
            RateScopeBody::Worker => Self::Worker,
            RateScopeBody::Cluster => Self::Cluster,
        }
    }
}

/// A layout in JSON (DESIGN.md section 6):
/// `{"prefix_bits": 7, "prefix_value": 127, "time_bits": 30, "worker_bits": 13, "seq_bits": 13,
/// "unit": "seconds", "epoch": "2016-05-20T00:00:00+08:00"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = LayoutSpec)]
pub struct LayoutSpecBody {
    /// Width of the prefix; 0 when absent.
    #[serde(default)]
    #[schema(maximum = 60)]
    pub prefix_bits: u8,
    /// The prefix value; all ones of `prefix_bits` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_value: Option<u64>,
    /// Width of the time field.
    #[schema(minimum = 1, maximum = 61)]
    pub time_bits: u8,
    /// Width of the worker field (clock-back bits included).
    #[schema(minimum = 1, maximum = 61)]
    pub worker_bits: u8,
    /// The high bits of the worker field holding the clock-back value; 0 when absent.
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schema(maximum = 3)]
    pub clock_back_bits: u8,
    /// Width of the sequence field.
    #[schema(minimum = 1, maximum = 61)]
    pub seq_bits: u8,
    /// Length of one tick.
    pub unit: TimeUnitBody,
    /// RFC 3339 with an explicit offset, or unix milliseconds; absent in a plan answer (which
    /// gives the epoch beside the layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
}

fn is_zero(bits: &u8) -> bool {
    *bits == 0
}

impl From<LayoutSpecBody> for LayoutSpec {
    fn from(body: LayoutSpecBody) -> Self {
        Self {
            prefix_bits: body.prefix_bits,
            prefix_value: body.prefix_value,
            time_bits: body.time_bits,
            worker_bits: body.worker_bits,
            clock_back_bits: body.clock_back_bits,
            seq_bits: body.seq_bits,
            unit: body.unit.into(),
            epoch: body.epoch,
        }
    }
}

impl From<&LayoutSpec> for LayoutSpecBody {
    fn from(spec: &LayoutSpec) -> Self {
        Self {
            prefix_bits: spec.prefix_bits,
            prefix_value: spec.prefix_value,
            time_bits: spec.time_bits,
            worker_bits: spec.worker_bits,
            clock_back_bits: spec.clock_back_bits,
            seq_bits: spec.seq_bits,
            unit: spec.unit.into(),
            epoch: spec.epoch.clone(),
        }
    }
}

/// The planner's answer, as JSON: `{"layout", "epoch", "first_id", "last_id", "exhausted_at",
/// "capacity", "checks"}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Plan)]
pub struct PlanBody {
    /// The new layout, without its epoch.
    pub layout: LayoutSpecBody,
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
    pub fn new(plan: &Plan, format: IdEncoding) -> Self {
        let c = &plan.capacity;
        Self {
            layout: LayoutSpecBody::from(&plan.layout),
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
                region_bits: c.region_bits,
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
    /// Ids per second each worker can issue: `2^seq_bits` per tick, sustained. The direct
    /// generator starts a tick it enters from an older one at a random sequence below
    /// `2^min(8, seq_bits - 4)` (ids sharded by `id % 2^k` spread), so the first tick of a
    /// burst holds at least `2^seq_bits - 2^min(8, seq_bits - 4) + 1` ids (over 15/16 of it;
    /// `snowflake::direct::min_ids_in_a_tick`); later ticks of the burst hold all `2^seq_bits`.
    pub max_ids_per_second_per_worker: u64,
    /// Ids per second of the cluster with every worker id in use (saturates at `u64::MAX`).
    pub max_ids_per_second_cluster: u64,
    /// Every id is at most `2^max_id_bits - 1`.
    pub max_id_bits: u8,
    /// The top bits of the worker id that hold the region (`snowflake.worker.region_bits`),
    /// when `regions` was given.
    #[serde(skip_serializing_if = "is_zero")]
    pub region_bits: u8,
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
    request_body = PlanRequestBody,
    responses(
        (status = 200, description = "The new layout, its id range, its capacity and its checks; with `stringify_ids=true`, `first_id` and `last_id` are decimal strings", body = PlanBody),
        (status = 400, description = "`invalid_request`, `invalid_plan_request`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 422, description = "`plan_impossible` (the message names the need and, when worker and sequence bits are too many, how many bits short and what fits instead)", body = ErrorBody),
    )
)]
pub async fn post_plan(
    query: web::Query<PlanQuery>,
    body: web::Json<PlanRequestBody>,
) -> Result<HttpResponse, Error> {
    let format = if query.stringify_ids()? {
        IdEncoding::String
    } else {
        IdEncoding::Number
    };
    let plan = layout_plan::plan_now(&body.into_inner().into())?;
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
    pub fn layout(&self) -> Result<BitLayout, Error> {
        let invalid = |e: &dyn std::fmt::Display| Error::InvalidLayout(e.to_string());
        if self.layout.is_none() || self.epoch.is_none() {
            return Err(Error::InvalidLayout(
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
) -> Result<HttpResponse, Error> {
    let id = parse_id(&path.into_inner())?;
    let layout = query.layout()?;
    let format = stringify.format()?;
    let body = decode_body(&layout, id, format);
    Ok(HttpResponse::Ok().json(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snowflake::layout::parse_epoch;

    #[test]
    fn request_json_reads_the_contract_body() {
        let body = r#"{"legacy": {"time_bits": 28, "worker_bits": 22, "seq_bits": 13, "unit": "seconds",
        "epoch": "2016-05-20T00:00:00+08:00"}, "max_legacy_id": 9090949948782127403,
        "worker_bits": 13, "seq_bits": 13, "years": 10}"#;
        let req: PlanRequest = serde_json::from_str::<PlanRequestBody>(body)
            .unwrap()
            .into();
        // DESIGN.md section 6's request, as the planner's tests build it.
        let design = PlanRequest {
            legacy: BitLayout::uid_generator().to_spec(true),
            max_legacy_id: Some(9_090_949_948_782_127_403),
            cutover: None,
            margin_seconds: layout_plan::DEFAULT_MARGIN_SECONDS,
            worker_bits: Some(13),
            seq_bits: Some(13),
            workers: None,
            ids_per_second: None,
            ids_per_second_scope: None,
            max_id_bits: None,
            years: 10,
            unit: None,
            epoch: None,
            clock_back_bits: None,
            regions: None,
        };
        let cutover = parse_epoch("2025-04-16T00:00:00+08:00").unwrap();
        assert_eq!(req.needs(cutover), design.needs(cutover));
        let typo = body.replace("\"years\"", "\"yaers\"");
        assert!(serde_json::from_str::<PlanRequestBody>(&typo).is_err());
    }
}
