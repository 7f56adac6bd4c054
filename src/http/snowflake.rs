//! Snowflake routes: Leaf's plain-text route and decoder, and the v1 batch, decode and bounds
//! routes.
//!
//! The v1 routes answer ids as JSON numbers, or as decimal strings with `stringify_ids=true`
//! (see [`super::ids::IdEncoding`]): a Twitter-layout id is far above 2^53, so JavaScript's
//! `JSON.parse` rounds it.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::admin::RequestCredentials;
use super::decode::{DecodeBody, TimeUnitBody, decode_body, parse_id};
use super::error::{Error, ErrorBody};
use super::ids::{
    BatchQuery, IdEncoding, JsonId, JsonIds, JsonRuns, StringifyQuery, id_schema, ids_schema,
    plain_id, runs_schema,
};
use super::middleware::{labeled_get, labeled_get_prefix};
use super::request::path_tail;
use crate::segment::{IdRuns, IdSink};
use crate::snowflake::engine::{GeneratorKind, SnowflakeStatus};
use crate::snowflake::layout::{format_unix_ms, parse_timestamp};

/// Registers Leaf's id route: a static prefix, matched without a regex; any rest of the path is
/// the key (empty, or with slashes: it is only logged). Registered before every route with a
/// path parameter (see [`super::configure`]).
pub fn leaf_route(cfg: &mut web::ServiceConfig) {
    cfg.service(labeled_get_prefix(LEAF_PREFIX, LEAF_ROUTE, get_leaf));
}

/// Registers the other routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.service(labeled_get(BATCH_ROUTE, BATCH_ROUTE, get_batch))
        .service(labeled_get(RANGES_ROUTE, RANGES_ROUTE, get_ranges))
        .route("/api/v1/snowflake/decode/{id}", web::get().to(get_decode))
        .route("/api/v1/snowflake/bounds", web::get().to(get_bounds))
        .route("/decodeSnowflakeId", web::get().to(get_leaf_decode));
}

/// Static prefix of Leaf's route: the key is the rest of the path.
pub const LEAF_PREFIX: &str = "/api/snowflake/get";

/// Metrics label of Leaf's route (its pattern when it was one).
pub const LEAF_ROUTE: &str = "/api/snowflake/get/{key:.*}";

/// Pattern and metrics label of the batch route.
pub const BATCH_ROUTE: &str = "/api/v1/snowflake/ids";

/// Pattern and metrics label of the range route.
pub const RANGES_ROUTE: &str = "/api/v1/snowflake/ranges";

/// `GET /api/snowflake/get/{key}`: the next id as plain text (Leaf-compatible; `key` is only
/// logged, as in Leaf).
#[utoipa::path(
    get,
    path = "/api/snowflake/get/{key}",
    tag = "snowflake",
    security((), ("caller_token" = [])),
    params(("key" = String, Path, description = "Any text; only logged (as in Leaf)")),
    responses(
        (status = 200, description = "The next id, in decimal", content_type = "text/plain", body = String),
        (status = 401, description = "`unauthorized`: no caller token where one is required (`Authorization: Bearer <token>`, or `?access_token=<token>` on this Leaf route), or one unknown or revoked", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller token is not scoped to snowflake ids", body = ErrorBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`clock_moved_backwards`, `time_bits_exhausted`, `snowflake_not_ready`, `lossy_database`, `not_ready` (caller tokens not loaded yet)", body = ErrorBody),
    )
)]
pub async fn get_leaf(
    req: HttpRequest,
    state: std::rc::Rc<web::Data<AppState>>,
) -> Result<HttpResponse, Error> {
    let key = path_tail(&req)?;
    let state: &AppState = &state;
    tracing::debug!(key = %crate::telemetry::ClientText(&key), "snowflake id requested");
    // Boxed: the prefix route does not box the handler's future, so it must stay small
    // (`labeled_get_prefix`).
    let id = Box::pin(state.ids.next_snowflake_id(&RequestCredentials::leaf(&req))).await?;
    Ok(plain_id(id))
}

/// Body of the snowflake batch route.
#[derive(Debug, Serialize, ToSchema)]
pub struct IdsBody {
    /// The ids, increasing: numbers, or decimal strings with `stringify_ids=true`.
    #[schema(schema_with = ids_schema)]
    pub ids: JsonIds<u64>,
}

/// `GET /api/v1/snowflake/ids?count=N[&stringify_ids=true]`: `{"ids": [..]}`, increasing, as
/// numbers or (with `stringify_ids=true`) decimal strings.
#[utoipa::path(
    get,
    path = "/api/v1/snowflake/ids",
    tag = "snowflake",
    security((), ("caller_token" = [])),
    params(BatchQuery),
    responses(
        (status = 200, description = "`count` increasing ids", body = IdsBody),
        (status = 400, description = "`invalid_count`, `invalid_request`", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no caller token where one is required (`Authorization: Bearer <token>`), or one unknown or revoked", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller token is not scoped to snowflake ids", body = ErrorBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`clock_moved_backwards`, `time_bits_exhausted`, `snowflake_not_ready`, `lossy_database`, `not_ready` (caller tokens not loaded yet)", body = ErrorBody),
    )
)]
pub async fn get_batch(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<BatchQuery>,
) -> Result<HttpResponse, Error> {
    let count = query.parse()?;
    let format = query.format()?;
    let ids = state
        .ids
        .next_snowflake_ids(&RequestCredentials(&req), count)
        .await?;
    Ok(HttpResponse::Ok().json(IdsBody {
        ids: JsonIds { ids, format },
    }))
}

/// Body of the snowflake range route.
#[derive(Debug, Serialize, ToSchema)]
pub struct SnowflakeRangesBody<'a> {
    /// Ids in the runs together (`count`).
    pub count: u64,
    /// The ids as runs of consecutive ids (one run of sequence numbers per tick at most).
    #[schema(schema_with = runs_schema)]
    pub ranges: JsonRuns<'a>,
}

/// `GET /api/v1/snowflake/ranges?count=N[&stringify_ids=true]`: the ids of the batch route as
/// runs `{"first", "last"}` of consecutive ids: within one tick the sequence numbers of one
/// worker are consecutive integers, so a batch is one run per tick it spans, at most.
#[utoipa::path(
    get,
    path = "/api/v1/snowflake/ranges",
    tag = "snowflake",
    security((), ("caller_token" = [])),
    params(BatchQuery),
    responses(
        (status = 200, description = "Runs holding `count` increasing ids", body = SnowflakeRangesBody),
        (status = 400, description = "`invalid_count`, `invalid_request`", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no caller token where one is required (`Authorization: Bearer <token>`), or one unknown or revoked", body = ErrorBody),
        (status = 403, description = "`forbidden`: the caller token is not scoped to snowflake ids", body = ErrorBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`clock_moved_backwards`, `time_bits_exhausted`, `snowflake_not_ready`, `lossy_database`, `not_ready` (caller tokens not loaded yet)", body = ErrorBody),
    )
)]
pub async fn get_ranges(
    req: HttpRequest,
    state: web::Data<AppState>,
    query: web::Query<BatchQuery>,
) -> Result<HttpResponse, Error> {
    let count = query.parse()?;
    let format = query.format()?;
    let ids = state
        .ids
        .next_snowflake_ids(&RequestCredentials(&req), count)
        .await?;
    // Every id of a layout is below 2^63 (its sign bit is 0): the conversion never fails.
    let ids = ids
        .into_iter()
        .map(|id| i64::try_from(id).map_err(|_| Error::Internal));
    let mut runs = IdRuns::new();
    for id in ids {
        runs.push_run(id?, 1);
    }
    Ok(HttpResponse::Ok().json(SnowflakeRangesBody {
        count: runs.taken(),
        ranges: JsonRuns {
            runs: runs.runs(),
            format,
        },
    }))
}

/// `GET /api/v1/snowflake/decode/{id}[?stringify_ids=true]`: the id's fields under this server's
/// layout; `id` a decimal string with `stringify_ids=true` (`id_str` always is).
#[utoipa::path(
    get,
    path = "/api/v1/snowflake/decode/{id}",
    tag = "snowflake",
    params(("id" = String, Path, description = "An id, an integer within 0..=9223372036854775807", pattern = "^[0-9]{1,19}$"), StringifyQuery),
    responses(
        (status = 200, description = "The id's fields", body = DecodeBody),
        (status = 400, description = "`invalid_id`, `invalid_request`", body = ErrorBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
    )
)]
pub async fn get_decode(
    state: web::Data<AppState>,
    id: web::Path<String>,
    query: web::Query<StringifyQuery>,
) -> Result<HttpResponse, Error> {
    let engine = state.ids.snowflake()?;
    let id = parse_id(&id)?;
    let format = query.format()?;
    Ok(HttpResponse::Ok().json(decode_body(engine.layout(), id, format)))
}

/// The query of the bounds route: a time range `[from, to)` and how to write the ids.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BoundsQuery {
    /// Start of the range, inclusive (required): RFC 3339 with an explicit offset (`Z`, or
    /// `+08:00` written `%2B08:00` in a query string), or unix milliseconds.
    #[param(value_type = String, required = true)]
    pub from: Option<String>,
    /// End of the range, exclusive (required): as `from`.
    #[param(value_type = String, required = true)]
    pub to: Option<String>,
    /// `true`: the ids as decimal strings, for JavaScript clients (whose numbers are exact only
    /// up to 2^53 - 1); `false` or absent: JSON numbers. Any other value is `invalid_request`.
    #[param(value_type = Option<bool>)]
    pub stringify_ids: Option<String>,
}

impl BoundsQuery {
    /// `from` and `to` in unix ms, or `invalid_time_range` naming the one that is missing or
    /// does not parse.
    pub fn range(&self) -> Result<(i64, i64), Error> {
        Ok((
            instant("from", self.from.as_deref())?,
            instant("to", self.to.as_deref())?,
        ))
    }
}

/// One end of a time range ([`parse_timestamp`]). A `+` left unencoded in a query string
/// arrives as a space (`...T00:00:00 08:00`): it is read as the `+` it was.
fn instant(name: &str, text: Option<&str>) -> Result<i64, Error> {
    let text = text.ok_or_else(|| {
        Error::InvalidTimeRange(format!(
            "{name} is required: RFC 3339 with an explicit offset (e.g. 2025-01-01T00:00:00Z) \
             or unix milliseconds"
        ))
    })?;
    let plus = |t: &str| {
        let (head, offset) = t.trim().rsplit_once(' ')?;
        let hh_mm = offset.len() == 5
            && offset.bytes().enumerate().all(|(i, b)| match i {
                2 => b == b':',
                _ => b.is_ascii_digit(),
            });
        hh_mm.then(|| format!("{head}+{offset}"))
    };
    parse_timestamp(text)
        .or_else(|| plus(text).and_then(|t| parse_timestamp(&t)))
        .ok_or_else(|| {
            Error::InvalidTimeRange(format!(
                "{name} {text:?} is neither RFC 3339 with an explicit offset (e.g. \
                 2025-01-01T00:00:00+08:00, its + written %2B in a query string) nor unix \
                 milliseconds"
            ))
        })
}

/// The ids a time range covers under this server's layout, for `WHERE id BETWEEN min_id AND
/// max_id`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BoundsBody {
    /// The smallest id any worker can issue in the range: the tick holding `from`, worker field
    /// 0, sequence 0.
    #[schema(schema_with = id_schema)]
    pub min_id: JsonId<u64>,
    /// The largest id any worker can issue in the range: the last tick that starts before `to`,
    /// every worker field bit (clock-back bits included) and sequence bit set.
    #[schema(schema_with = id_schema)]
    pub max_id: JsonId<u64>,
    /// The layout, `T/W/S` or `P+T/W/S`.
    pub layout: String,
    /// `from`, RFC 3339 UTC.
    pub from: String,
    /// `to`, RFC 3339 UTC (exclusive).
    pub to: String,
    /// Start of `min_id`'s tick, RFC 3339 UTC: `from`, or before it when `from` is inside a
    /// tick (seconds layouts).
    pub first_tick: String,
    /// Start of `max_id`'s tick, RFC 3339 UTC: the last tick that starts before `to`.
    pub last_tick: String,
}

/// `GET /api/v1/snowflake/bounds?from=..&to=..[&stringify_ids=true]`: the smallest and largest
/// id any worker can issue in `[from, to)` under this server's layout
/// ([`crate::snowflake::layout::BitLayout::id_bounds`]); a range that is empty, starts before
/// the epoch or ends after the time field runs out is `invalid_time_range`, not clamped.
#[utoipa::path(
    get,
    path = "/api/v1/snowflake/bounds",
    tag = "snowflake",
    params(BoundsQuery),
    responses(
        (status = 200, description = "The id range of the time range: every id issued in it lies within `min_id..=max_id`", body = BoundsBody),
        (status = 400, description = "`invalid_time_range` (missing or unparsable, `from >= to`, before the epoch, after the time field runs out: the message names the instant), `invalid_request`", body = ErrorBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
    )
)]
pub async fn get_bounds(
    state: web::Data<AppState>,
    query: web::Query<BoundsQuery>,
) -> Result<HttpResponse, Error> {
    let layout = state.ids.snowflake()?.layout();
    let (from, to) = query.range()?;
    let format = IdEncoding::parse(query.stringify_ids.as_deref())?;
    let (min_id, max_id) = state.ids.snowflake_bounds(from, to)?;
    Ok(HttpResponse::Ok().json(BoundsBody {
        min_id: JsonId { id: min_id, format },
        max_id: JsonId { id: max_id, format },
        layout: layout.bits_string(),
        from: format_unix_ms(from),
        to: format_unix_ms(to),
        first_tick: layout.decode(min_id).timestamp(),
        last_tick: layout.decode(max_id).timestamp(),
    }))
}

/// Query of Leaf's decoder.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct LeafDecodeQuery {
    /// The id to decode (required): an integer within 0..=9223372036854775807.
    #[serde(rename = "snowflakeId")]
    #[param(value_type = String, required = true, pattern = "^[0-9]{1,19}$")]
    pub snowflake_id: Option<String>,
}

/// Leaf's decoder answer: every value a string.
#[derive(Debug, Serialize, ToSchema)]
pub struct LeafDecodeBody {
    /// `<unix ms>(<UTC date and time>)`.
    pub timestamp: String,
    /// Worker id field.
    #[serde(rename = "workerId")]
    pub worker_id: String,
    /// Sequence field.
    #[serde(rename = "sequenceId")]
    pub sequence_id: String,
}

/// `GET /decodeSnowflakeId?snowflakeId=N`: Leaf's answer shape, every value a string:
/// `{"timestamp": "<ms>(<local time>)", "workerId", "sequenceId"}`, under this server's layout.
#[utoipa::path(
    get,
    path = "/decodeSnowflakeId",
    tag = "snowflake",
    params(LeafDecodeQuery),
    responses(
        (status = 200, description = "The id's fields, Leaf's shape", body = LeafDecodeBody),
        (status = 400, description = "`invalid_id`, `invalid_request`", body = ErrorBody),
        (status = 404, description = "`engine_disabled`", body = ErrorBody),
    )
)]
pub async fn get_leaf_decode(
    state: web::Data<AppState>,
    q: web::Query<LeafDecodeQuery>,
) -> Result<HttpResponse, Error> {
    let engine = state.ids.snowflake()?;
    let raw = q
        .snowflake_id
        .as_deref()
        .ok_or_else(|| Error::InvalidId("snowflakeId is required".into()))?;
    let id = parse_id(raw)?;
    let decoded = engine.layout().decode(id);
    let (fields, ms) = (decoded.fields, decoded.tick_start_unix_ms);
    let when = chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
        .unwrap_or_default();
    Ok(HttpResponse::Ok().json(LeafDecodeBody {
        timestamp: format!("{ms}({when})"),
        worker_id: fields.worker_id.to_string(),
        sequence_id: fields.sequence.to_string(),
    }))
}

/// A point-in-time view for health, metrics and pages.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = SnowflakeStatus)]
pub struct StatusBody {
    /// `T/W/S` or `P+T/W/S`.
    pub layout: String,
    /// The layout's epoch, RFC 3339.
    pub epoch: String,
    /// `seconds` or `millis`.
    pub unit: TimeUnitBody,
    /// Cached or direct.
    pub generator: GeneratorBody,
    /// The worker id this server's ids carry (with regions: the region's base plus the
    /// database's worker id).
    pub worker_id: u64,
    /// The worker id as the database's `WORKER_NODE` row holds it (equal to `worker_id`
    /// without regions).
    pub database_worker_id: u64,
    /// How it was obtained.
    pub worker_strategy: String,
    /// When the time field runs out (RFC 3339).
    pub exhausted_at: String,
    /// Seconds until then.
    pub time_left_secs: i64,
    /// Whether issuing is suspended (lease not renewed in time, taken over, or shut down).
    pub suspended: bool,
    /// Milliseconds before issuing stops unless the worker lease is renewed (`lease` only).
    pub lease_left_ms: Option<i64>,
    /// Ring capacity (cached).
    pub ring_capacity: Option<usize>,
    /// Ids ready in the ring (cached).
    pub ring_available: Option<usize>,
    /// Ticks the ring is ahead of the clock (cached).
    pub ticks_ahead: Option<u64>,
    /// Ids issued since start.
    pub ids_issued: u64,
    /// The clock-back value ids are issued under now; absent without clock-back bits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_back: Option<u64>,
    /// The largest clock-back value: backward clock steps this run can outlive (0: none).
    pub max_clock_back: u64,
}

impl From<&SnowflakeStatus> for StatusBody {
    fn from(s: &SnowflakeStatus) -> Self {
        Self {
            layout: s.layout.clone(),
            epoch: s.epoch.clone(),
            unit: s.unit.into(),
            generator: s.generator.into(),
            worker_id: s.worker_id,
            database_worker_id: s.database_worker_id,
            worker_strategy: s.worker_strategy.clone(),
            exhausted_at: s.exhausted_at.clone(),
            time_left_secs: s.time_left_secs,
            suspended: s.suspended,
            lease_left_ms: s.lease_left_ms,
            ring_capacity: s.ring_capacity,
            ring_available: s.ring_available,
            ticks_ahead: s.ticks_ahead,
            ids_issued: s.ids_issued,
            clock_back: s.clock_back,
            max_clock_back: s.max_clock_back,
        }
    }
}

/// Which generator serves ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = GeneratorKind)]
pub enum GeneratorBody {
    /// Ring buffer filled ahead of the clock (uid-generator's CachedUidGenerator).
    Cached,
    /// One CAS per id on the clock (Agrona / Twitter style).
    Direct,
}

impl From<GeneratorKind> for GeneratorBody {
    fn from(kind: GeneratorKind) -> Self {
        match kind {
            GeneratorKind::Cached => Self::Cached,
            GeneratorKind::Direct => Self::Direct,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(from: Option<&str>, to: Option<&str>) -> BoundsQuery {
        BoundsQuery {
            from: from.map(str::to_owned),
            to: to.map(str::to_owned),
            stringify_ids: None,
        }
    }

    #[test]
    fn a_range_is_rfc3339_or_unix_ms_and_a_decoded_plus_is_a_plus() {
        let day = 1_735_689_600_000;
        for (from, want) in [
            ("2025-01-01T00:00:00Z", day),
            ("1735689600000", day),
            ("2025-01-01T08:00:00+08:00", day),
            // `+08:00` unencoded in a query string, as the query parser hands it over.
            ("2025-01-01T08:00:00 08:00", day),
            ("2025-01-01T00:00:00.5Z", day + 500),
        ] {
            assert_eq!(
                query(Some(from), Some("1")).range().unwrap(),
                (want, 1),
                "{from}"
            );
        }
        for (from, to) in [
            (None, Some("1")),
            (Some("1"), None),
            (Some("yesterday"), Some("1")),
            (Some("2025-01-01T00:00:00"), Some("1")),
            (Some("2025-01-01 08:00"), Some("1")),
            (Some("1"), Some("99999999999999999999")),
        ] {
            let e = query(from, to).range().unwrap_err();
            assert!(matches!(e, Error::InvalidTimeRange(_)), "{from:?} {to:?}");
            assert_eq!(e.code(), "invalid_time_range");
        }
    }
}
