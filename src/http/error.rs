//! `ApiError`: every error of every route, as one JSON body shape `{"code", "message"}`.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, ResponseError, error as aerror};
use serde::Serialize;
use tracing::error;

use crate::layout_plan::PlanError;
use crate::segment::tag_rules::{
    MAX_DESCRIPTION_CHARS, MAX_MAX_ID, MAX_STEP, MIN_MAX_ID, MIN_STEP, TagRuleError,
};
use crate::segment::{BizTagError, SegmentError, StoreError};
use crate::snowflake::error::SnowflakeError;
use crate::telemetry::LogLimiter;

/// An error answered to a client. Each variant documents its status and stable `code`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400 `invalid_biz_tag`: empty, over 128 bytes, or characters outside `[A-Za-z0-9._:-]`.
    #[error("{0}")]
    InvalidBizTag(#[from] BizTagError),
    /// 404 `unknown_biz_tag`: no `leaf_alloc` row for the tag.
    #[error("unknown biz_tag {0:?}")]
    UnknownBizTag(String),
    /// 400 `invalid_count`: `count` must be an integer within 1..=100000.
    #[error("{0}")]
    InvalidCount(String),
    /// 400 `invalid_step`: `step` must be an integer within
    /// [`MIN_STEP`]`..=`[`MAX_STEP`] (1..=1000000000).
    #[error("{0}")]
    InvalidStep(String),
    /// 400 `invalid_max_id`: `max_id` must be an integer within
    /// [`MIN_MAX_ID`]`..=`[`MAX_MAX_ID`] (1..=9223372036854775806).
    #[error("{0}")]
    InvalidMaxId(String),
    /// 400 `invalid_request`: malformed body, wrong types, bad query.
    #[error("{0}")]
    InvalidRequest(String),
    /// 400 `invalid_plan_request`: a plan request that parses as JSON but asks for something
    /// invalid (bad legacy layout, widths out of range, epoch in the future...).
    #[error("{0}")]
    InvalidPlan(String),
    /// 400 `invalid_layout`: a layout, epoch, unit or prefix value that does not parse or fit.
    #[error("{0}")]
    InvalidLayout(String),
    /// 422 `plan_impossible`: a valid plan request whose needs no layout meets; the message
    /// names the need (`max_legacy_id`, `years` or `epoch`).
    #[error("{message}")]
    PlanImpossible {
        /// The need that cannot be met.
        need: String,
        /// The planner's explanation, with the numbers that rule the need out.
        message: String,
    },
    /// 413 `payload_too_large`: body over `server.max_body_bytes`.
    #[error("request body is larger than {0} bytes")]
    PayloadTooLarge(usize),
    /// 409 `biz_tag_exists`.
    #[error("biz_tag {0:?} exists already")]
    BizTagExists(String),
    /// 409 `max_id_below_deleted`: the tag was deleted after issuing ids up to `high_water - 1`;
    /// starting it again below `high_water` would issue them twice. The message says how to
    /// resume (`"max_id": high_water` or higher).
    #[error(
        "biz_tag {biz_tag:?} was deleted after issuing ids below {high_water}; starting it again \
         at a lower max_id would issue them twice. To resume it, create it with \
         \"max_id\": {high_water} or higher"
    )]
    MaxIdBelowDeleted {
        /// The tag being created.
        biz_tag: String,
        /// The deleted tag's high-water mark.
        high_water: i64,
    },
    /// 409 `biz_tag_exhausted`: the next segment would pass `i64::MAX`.
    #[error("biz_tag is exhausted: its next segment would pass 9223372036854775807")]
    BizTagExhausted,
    /// 503 `segments_not_ready` with `Retry-After`.
    #[error("no segment is ready for this biz_tag; the database is unreachable or slow")]
    SegmentsNotReady {
        /// Seconds for `Retry-After`.
        retry_after_secs: u64,
    },
    /// 503 `database_unavailable` with `Retry-After: 1`.
    #[error("the database is unavailable")]
    DatabaseUnavailable,
    /// 400 `invalid_id`: an id to decode that is not an integer within 0..=9223372036854775807.
    #[error("{0}")]
    InvalidId(String),
    /// 503 `clock_moved_backwards` with `Retry-After`: the clock is behind the last tick used.
    #[error("the clock moved backwards by {by_ms} ms; refusing to issue ids from a past tick")]
    ClockMovedBackwards {
        /// How far behind the clock is.
        by_ms: u64,
    },
    /// 503 `time_bits_exhausted`: the layout's time field has run out.
    #[error(
        "the snowflake layout's time field is exhausted: migrate to a new layout (leafid layout plan)"
    )]
    TimeBitsExhausted,
    /// 503 `snowflake_not_ready` with `Retry-After`: no id could be issued in time (ring empty,
    /// worker lease not renewed).
    #[error("{0}")]
    SnowflakeNotReady(String),
    /// 401 `unauthorized`.
    #[error("{0}")]
    Unauthorized(&'static str),
    /// 404 `not_found`: no such route.
    #[error("no route for {0}")]
    NotFound(String),
    /// 404 `engine_disabled`.
    #[error("the {0} engine is disabled in this server's configuration")]
    EngineDisabled(&'static str),
    /// 500 `internal`: details only in the log.
    #[error("internal error")]
    Internal,
}

/// The body of every error response.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"code": "unknown_biz_tag", "message": "unknown biz_tag \"orders\""}))]
pub struct ErrorBody {
    /// Stable snake_case code.
    #[schema(value_type = String)]
    pub code: &'static str,
    /// Human-readable explanation.
    pub message: String,
}

impl ApiError {
    /// The stable `code`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidBizTag(_) => "invalid_biz_tag",
            Self::UnknownBizTag(_) => "unknown_biz_tag",
            Self::InvalidCount(_) => "invalid_count",
            Self::InvalidStep(_) => "invalid_step",
            Self::InvalidMaxId(_) => "invalid_max_id",
            Self::InvalidRequest(_) => "invalid_request",
            Self::InvalidPlan(_) => "invalid_plan_request",
            Self::InvalidLayout(_) => "invalid_layout",
            Self::PlanImpossible { .. } => "plan_impossible",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::BizTagExists(_) => "biz_tag_exists",
            Self::BizTagExhausted => "biz_tag_exhausted",
            Self::MaxIdBelowDeleted { .. } => "max_id_below_deleted",
            Self::SegmentsNotReady { .. } => "segments_not_ready",
            Self::DatabaseUnavailable => "database_unavailable",
            Self::InvalidId(_) => "invalid_id",
            Self::ClockMovedBackwards { .. } => "clock_moved_backwards",
            Self::TimeBitsExhausted => "time_bits_exhausted",
            Self::SnowflakeNotReady(_) => "snowflake_not_ready",
            Self::Unauthorized(_) => "unauthorized",
            Self::NotFound(_) => "not_found",
            Self::EngineDisabled(_) => "engine_disabled",
            Self::Internal => "internal",
        }
    }

    /// Maps an engine error, naming the tag where the message needs it.
    pub fn from_segment(e: SegmentError, tag: &str) -> Self {
        match e {
            SegmentError::InvalidTag(e) => Self::InvalidBizTag(e),
            SegmentError::UnknownTag => Self::UnknownBizTag(tag.to_owned()),
            SegmentError::Exhausted => Self::BizTagExhausted,
            SegmentError::NotReady { retry_after_secs } => {
                Self::SegmentsNotReady { retry_after_secs }
            }
            SegmentError::Store(e) => e.into(),
        }
    }

    /// 400 `invalid_step` naming the value given (as the client wrote it).
    pub fn invalid_step(got: impl std::fmt::Display) -> Self {
        Self::InvalidStep(format!(
            "step must be an integer within {MIN_STEP}..={MAX_STEP} (got {got})"
        ))
    }

    /// 400 `invalid_max_id` naming the value given (as the client wrote it).
    pub fn invalid_max_id(got: impl std::fmt::Display) -> Self {
        Self::InvalidMaxId(format!(
            "max_id must be an integer within {MIN_MAX_ID}..={MAX_MAX_ID} (got {got})"
        ))
    }

    fn retry_after(&self) -> Option<u64> {
        match self {
            Self::SegmentsNotReady { retry_after_secs } => Some(*retry_after_secs),
            Self::DatabaseUnavailable | Self::SnowflakeNotReady(_) => Some(1),
            Self::ClockMovedBackwards { by_ms } => Some(by_ms.div_ceil(1000).max(1)),
            _ => None,
        }
    }
}

impl From<SnowflakeError> for ApiError {
    fn from(e: SnowflakeError) -> Self {
        match e {
            SnowflakeError::ClockMovedBackwards { by_ms } => Self::ClockMovedBackwards { by_ms },
            SnowflakeError::TimeBitsExhausted => Self::TimeBitsExhausted,
            SnowflakeError::Exhausted
            | SnowflakeError::WorkerLeaseExpired
            | SnowflakeError::ShutDown => Self::SnowflakeNotReady(e.to_string()),
            other => {
                if let Some(held_back) = LogLimiter::global().allow("snowflake generator failed") {
                    error!(error = %other, held_back, "snowflake generator failed");
                }
                Self::Internal
            }
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound => Self::UnknownBizTag(String::new()),
            StoreError::AlreadyExists => Self::BizTagExists(String::new()),
            StoreError::Exhausted => Self::BizTagExhausted,
            StoreError::BelowDeletedMaxId { high_water } => Self::MaxIdBelowDeleted {
                biz_tag: String::new(),
                high_water,
            },
            StoreError::Unavailable(cause) => {
                if let Some(held_back) = LogLimiter::global().allow("database call failed") {
                    error!(error = %cause, held_back, "database call failed");
                }
                Self::DatabaseUnavailable
            }
            StoreError::BadRow(why) => {
                error!(%why, "leaf_alloc row is invalid");
                Self::Internal
            }
        }
    }
}

/// A tag rule's refusal in the admin API's words: `invalid_step`, `invalid_max_id`, or
/// `invalid_request` for the description and an empty change.
impl From<TagRuleError> for ApiError {
    fn from(e: TagRuleError) -> Self {
        match e {
            TagRuleError::StepOutOfRange(n) => Self::invalid_step(n),
            TagRuleError::StepNotInteger(text) => Self::invalid_step(text),
            TagRuleError::MaxIdOutOfRange(n) => Self::invalid_max_id(n),
            TagRuleError::MaxIdNotInteger(text) => Self::invalid_max_id(text),
            TagRuleError::DescriptionTooLong(_) => Self::InvalidRequest(format!(
                "description must be at most {MAX_DESCRIPTION_CHARS} characters"
            )),
            TagRuleError::NothingToChange => {
                Self::InvalidRequest("nothing to change: give step and/or description".into())
            }
        }
    }
}

impl From<PlanError> for ApiError {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::InvalidInput(message) => Self::InvalidPlan(message),
            PlanError::Impossible { need, message } => Self::PlanImpossible { need, message },
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::InvalidBizTag(_)
            | Self::InvalidCount(_)
            | Self::InvalidStep(_)
            | Self::InvalidMaxId(_)
            | Self::InvalidRequest(_)
            | Self::InvalidPlan(_)
            | Self::InvalidLayout(_)
            | Self::InvalidId(_) => StatusCode::BAD_REQUEST,
            Self::PlanImpossible { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            Self::UnknownBizTag(_) | Self::NotFound(_) | Self::EngineDisabled(_) => {
                StatusCode::NOT_FOUND
            }
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BizTagExists(_) | Self::BizTagExhausted | Self::MaxIdBelowDeleted { .. } => {
                StatusCode::CONFLICT
            }
            Self::SegmentsNotReady { .. }
            | Self::DatabaseUnavailable
            | Self::ClockMovedBackwards { .. }
            | Self::TimeBitsExhausted
            | Self::SnowflakeNotReady(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = HttpResponse::build(self.status_code());
        if let Some(secs) = self.retry_after() {
            res.insert_header((header::RETRY_AFTER, HeaderValue::from(secs)));
        }
        if matches!(self, Self::Unauthorized(_)) {
            res.insert_header((header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer")));
        }
        res.json(ErrorBody {
            code: self.code(),
            message: self.to_string(),
        })
    }
}

/// Turns actix's JSON body errors into `invalid_request` / `payload_too_large`.
pub fn json_error(err: aerror::JsonPayloadError, _req: &HttpRequest) -> actix_web::Error {
    let api = match &err {
        aerror::JsonPayloadError::OverflowKnownLength { limit, .. }
        | aerror::JsonPayloadError::Overflow { limit } => ApiError::PayloadTooLarge(*limit),
        aerror::JsonPayloadError::ContentType => ApiError::InvalidRequest(
            "request body must be JSON (Content-Type: application/json)".into(),
        ),
        other => ApiError::InvalidRequest(format!("invalid JSON body: {other}")),
    };
    api.into()
}

/// Turns actix's query-string errors into `invalid_request`.
pub fn query_error(err: aerror::QueryPayloadError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::InvalidRequest(format!("invalid query string: {err}")).into()
}

/// Turns actix's path errors into `invalid_request`.
pub fn path_error(err: aerror::PathError, _req: &HttpRequest) -> actix_web::Error {
    ApiError::InvalidRequest(format!("invalid path: {err}")).into()
}

/// The fallback for unknown routes: `not_found` in the JSON shape.
pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, ApiError> {
    Err(ApiError::NotFound(format!(
        "{} {}",
        req.method(),
        req.path()
    )))
}
