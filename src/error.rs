//! [`Error`]: every refusal and failure a caller can get, without a transport. Each carries its
//! stable `code` (the `code` of the HTTP error body, the `reason` of a gRPC error), its
//! [`ErrorClass`] (what a caller may do about it: fix the request, retry later, give up) and its
//! context (the tag, the setting, the instant) in its message. The engines' own errors become
//! one here ([`From`] impls below), so the id service and every transport share one mapping:
//! HTTP maps a class to a status in `crate::http::error`, and nowhere else decides a code.

use std::error::Error as StdError;
use std::fmt::{Display, Write as _};

use tracing::error;

use crate::layout_plan::PlanError;
use crate::segment::tag_rules::{
    MAX_DESCRIPTION_CHARS, MAX_MAX_ID, MAX_STEP, MIN_MAX_ID, MIN_STEP, TagRuleError,
};
use crate::segment::{BizTagError, SegmentError, StoreError};
use crate::snowflake::error::SnowflakeError;
use crate::snowflake::layout::BoundsError;
use crate::telemetry::LogLimiter;

/// What a caller may do about an [`Error`]: the one input each transport maps to its status
/// (HTTP: `crate::http::error`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// The request is wrong: asking again unchanged gets the same answer (HTTP 400).
    Invalid,
    /// The request is well formed but asks for what cannot be (HTTP 422).
    Unprocessable,
    /// The request body is over the size limit (HTTP 413).
    TooLarge,
    /// The request body did not arrive in time (HTTP 408).
    Timeout,
    /// No such tag, route or engine (HTTP 404).
    NotFound,
    /// The request conflicts with what exists (a tag exists, a range is used up for good)
    /// (HTTP 409).
    Conflict,
    /// No credential, or a wrong one (HTTP 401).
    Unauthenticated,
    /// A valid credential that does not cover the action (HTTP 403).
    Denied,
    /// The caller's quota is spent for now: retry after the time given (HTTP 429 with
    /// `Retry-After`), here, not elsewhere: every server shares it.
    Throttled,
    /// A quota or a period's sequence is used up until a known time: retry after it (HTTP 503
    /// with `Retry-After`).
    Exhausted,
    /// This server cannot serve now (its database, its clock, its key, its readiness): retry,
    /// here later or on another server (HTTP 503, with `Retry-After` where known).
    Unavailable,
    /// A fault of this server, logged with its details (HTTP 500).
    Internal,
}

/// An error answered to a caller, whatever the transport. Each variant documents its stable
/// `code`, its [`ErrorClass`] (which each transport maps to its status in one place) and, in
/// brackets, the HTTP status that class is answered with today.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 400 `invalid_biz_tag`: empty, over 128 bytes, or characters outside `[A-Za-z0-9._:-]`.
    #[error("{0}")]
    InvalidBizTag(#[from] BizTagError),
    /// 404 `unknown_biz_tag`: no `leaf_alloc` row for the tag (named in the message; see
    /// [`Error::unknown_tag`]).
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
    /// 408 `request_timeout`: the body did not arrive within `server.body_timeout_ms`.
    #[error("request body not received within {0} ms")]
    RequestTimeout(u64),
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
    /// 503 `lossy_database` with `Retry-After: 5`: the database runs with a setting that can
    /// lose a committed lease in a crash and `database.allow_lossy_commits` is off, so no id
    /// that needs a lease is handed out. The message names each setting, its value, the fix
    /// and the override (`crate::store::durability`).
    #[error("{0}")]
    LossyDatabase(String),
    /// 503 `lane_mismatch` with `Retry-After: 5`: this server's own lane database records
    /// another slot than configured (or a slot while this server has no lanes), or another
    /// reachable lane database records the own slot (`crate::segment::lanes::claims`): it hands
    /// out no segment id until an operator fixes the configuration, since two databases
    /// serving one slot hand out one id twice. Another server or region may serve.
    #[error("{0}")]
    LaneMismatch(String),
    /// 400 `invalid_id`: an id to decode that is not one: a snowflake id that is not an integer
    /// within 0..=9223372036854775807, or a text that is not an id of the formatted tag's format
    /// (a wrong length, alphabet, literal, date or check character).
    #[error("{0}")]
    InvalidId(String),
    /// 400 `invalid_time_range`: a time range for id bounds that is missing, does not parse
    /// (RFC 3339 with an explicit offset, or unix milliseconds), is empty (`from >= to`), starts
    /// before the layout's epoch or ends after its time field runs out (the message names the
    /// instant; see [`BoundsError`]).
    #[error("{0}")]
    InvalidTimeRange(String),
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
    /// 403 `forbidden`: a valid caller token whose scope does not cover the tag (or snowflake
    /// ids). Names the token's name and the target, never the token.
    #[error(
        "caller token \"{token}\" is not scoped to {target}: an admin widens its tags or issues another token"
    )]
    Forbidden {
        /// The token's name.
        token: String,
        /// The tag (quoted) or `snowflake ids`.
        target: String,
    },
    /// 409 `token_exists`: a caller token of this name exists, or existed and was revoked (a
    /// name is never reused silently).
    #[error("{0}")]
    TokenExists(String),
    /// 429 `quota_exhausted` with `Retry-After`: the caller token's quota for this tag is spent
    /// for now (its rate) or for the period (its share of a formatted tag's period;
    /// `crate::service::quota`). Names the token's name, the tag and the limit.
    #[error("{message}")]
    QuotaExhausted {
        /// What is spent and until when.
        message: String,
        /// Seconds until the quota allows an id again.
        retry_after_secs: u64,
    },
    /// 404 `unknown_token`: no caller token of this name.
    #[error("no caller token named {0:?}")]
    UnknownToken(String),
    /// 404 `not_found`: no such route.
    #[error("no route for {0}")]
    NotFound(String),
    /// 404 `engine_disabled`.
    #[error("the {0} engine is disabled in this server's configuration")]
    EngineDisabled(&'static str),
    /// 503 `not_ready` with `Retry-After: 1`: `/health/ready`'s refusal, with the reason.
    #[error("{0}")]
    NotReady(String),
    /// 400 `formatted_tag`: a route that answers numbers (the range route) asked for a
    /// formatted tag, whose ids are text.
    #[error("{0}")]
    FormattedTag(String),
    /// 503 `sequence_exhausted` with `Retry-After` until the next period: the current period of
    /// a formatted tag used up the sequence's width (it never widens nor wraps).
    #[error("{message}")]
    SequenceExhausted {
        /// Names the period and when the next one starts.
        message: String,
        /// Seconds until the next period.
        retry_after_secs: u64,
    },
    /// 503 `key_unavailable`: a permuted tag whose key this server does not hold (another
    /// server of the deployment may: a client fails over).
    #[error("{0}")]
    KeyUnavailable(String),
    /// 500 `internal`: details only in the log.
    #[error("internal error")]
    Internal,
}

impl Error {
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
            Self::RequestTimeout(_) => "request_timeout",
            Self::BizTagExists(_) => "biz_tag_exists",
            Self::BizTagExhausted => "biz_tag_exhausted",
            Self::MaxIdBelowDeleted { .. } => "max_id_below_deleted",
            Self::SegmentsNotReady { .. } => "segments_not_ready",
            Self::DatabaseUnavailable => "database_unavailable",
            Self::LossyDatabase(_) => "lossy_database",
            Self::LaneMismatch(_) => "lane_mismatch",
            Self::InvalidId(_) => "invalid_id",
            Self::InvalidTimeRange(_) => "invalid_time_range",
            Self::ClockMovedBackwards { .. } => "clock_moved_backwards",
            Self::TimeBitsExhausted => "time_bits_exhausted",
            Self::SnowflakeNotReady(_) => "snowflake_not_ready",
            Self::Unauthorized(_) => "unauthorized",
            Self::Forbidden { .. } => "forbidden",
            Self::QuotaExhausted { .. } => "quota_exhausted",
            Self::TokenExists(_) => "token_exists",
            Self::UnknownToken(_) => "unknown_token",
            Self::NotFound(_) => "not_found",
            Self::EngineDisabled(_) => "engine_disabled",
            Self::NotReady(_) => "not_ready",
            Self::FormattedTag(_) => "formatted_tag",
            Self::SequenceExhausted { .. } => "sequence_exhausted",
            Self::KeyUnavailable(_) => "key_unavailable",
            Self::Internal => "internal",
        }
    }

    /// What a caller may do about it: the one input of each transport's status.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::InvalidBizTag(_)
            | Self::InvalidCount(_)
            | Self::InvalidStep(_)
            | Self::InvalidMaxId(_)
            | Self::InvalidRequest(_)
            | Self::InvalidPlan(_)
            | Self::InvalidLayout(_)
            | Self::InvalidId(_)
            | Self::InvalidTimeRange(_)
            | Self::FormattedTag(_) => ErrorClass::Invalid,
            Self::PlanImpossible { .. } => ErrorClass::Unprocessable,
            Self::UnknownBizTag(_) | Self::NotFound(_) | Self::EngineDisabled(_) => {
                ErrorClass::NotFound
            }
            Self::PayloadTooLarge(_) => ErrorClass::TooLarge,
            Self::RequestTimeout(_) => ErrorClass::Timeout,
            Self::BizTagExists(_) | Self::BizTagExhausted | Self::MaxIdBelowDeleted { .. } => {
                ErrorClass::Conflict
            }
            Self::SequenceExhausted { .. } => ErrorClass::Exhausted,
            Self::SegmentsNotReady { .. }
            | Self::DatabaseUnavailable
            | Self::LossyDatabase(_)
            | Self::LaneMismatch(_)
            | Self::ClockMovedBackwards { .. }
            | Self::TimeBitsExhausted
            | Self::SnowflakeNotReady(_)
            | Self::NotReady(_)
            | Self::KeyUnavailable(_) => ErrorClass::Unavailable,
            Self::Unauthorized(_) => ErrorClass::Unauthenticated,
            Self::Forbidden { .. } => ErrorClass::Denied,
            Self::QuotaExhausted { .. } => ErrorClass::Throttled,
            Self::TokenExists(_) => ErrorClass::Conflict,
            Self::UnknownToken(_) => ErrorClass::NotFound,
            Self::Internal => ErrorClass::Internal,
        }
    }

    /// 404 `unknown_biz_tag` naming `tag`.
    pub fn unknown_tag(tag: impl Display) -> Self {
        Self::UnknownBizTag(tag.to_string())
    }

    /// A store error of a call about `tag`: the 404 and 409 bodies name it. Errors about no
    /// one tag go through `From<StoreError>`.
    pub fn from_store(e: StoreError, tag: &str) -> Self {
        match e {
            StoreError::NotFound => Self::unknown_tag(tag),
            StoreError::AlreadyExists => Self::BizTagExists(tag.to_owned()),
            StoreError::BelowDeletedMaxId { high_water } => Self::MaxIdBelowDeleted {
                biz_tag: tag.to_owned(),
                high_water,
            },
            other => other.into(),
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

    /// Seconds a caller should wait before asking again (HTTP `Retry-After`, gRPC
    /// `RetryInfo`), for the errors that pass.
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            Self::SegmentsNotReady { retry_after_secs }
            | Self::SequenceExhausted {
                retry_after_secs, ..
            }
            | Self::QuotaExhausted {
                retry_after_secs, ..
            } => Some(*retry_after_secs),
            Self::DatabaseUnavailable | Self::SnowflakeNotReady(_) | Self::NotReady(_) => Some(1),
            Self::ClockMovedBackwards { by_ms } => Some(by_ms.div_ceil(1000).max(1)),
            // A setting changes when a DBA changes it, not within a second.
            Self::LossyDatabase(_) => Some(5),
            // A configuration changes when an operator changes it.
            Self::LaneMismatch(_) => Some(5),
            _ => None,
        }
    }
}

impl From<crate::service::quota::QuotaError> for Error {
    fn from(e: crate::service::quota::QuotaError) -> Self {
        use crate::service::quota::QuotaError;
        match e {
            // The quota table did not answer: the database's failure, not the caller's.
            QuotaError::Store(_) => Self::DatabaseUnavailable,
            e => Self::QuotaExhausted {
                retry_after_secs: e.retry_after_secs(),
                message: e.to_string(),
            },
        }
    }
}

impl From<SnowflakeError> for Error {
    fn from(e: SnowflakeError) -> Self {
        match e {
            SnowflakeError::ClockMovedBackwards { by_ms } => Self::ClockMovedBackwards { by_ms },
            SnowflakeError::TimeBitsExhausted => Self::TimeBitsExhausted,
            SnowflakeError::Exhausted
            | SnowflakeError::WorkerLeaseExpired
            | SnowflakeError::ShutDown => Self::SnowflakeNotReady(e.to_string()),
            SnowflakeError::LossyDatabase(why) => Self::LossyDatabase(why),
            other => {
                log_server_error(LogLimiter::global(), "snowflake generator failed", &other);
                Self::Internal
            }
        }
    }
}

/// An engine error; [`SegmentError::UnknownTag`] names its tag in the 404 body.
impl From<SegmentError> for Error {
    fn from(e: SegmentError) -> Self {
        match e {
            SegmentError::InvalidTag(e) => Self::InvalidBizTag(e),
            SegmentError::UnknownTag(tag) => Self::unknown_tag(tag),
            SegmentError::Exhausted => Self::BizTagExhausted,
            SegmentError::NotReady { retry_after_secs } => {
                Self::SegmentsNotReady { retry_after_secs }
            }
            SegmentError::LossyDatabase(why) => Self::LossyDatabase(why),
            SegmentError::LaneMismatch(why) => Self::LaneMismatch(why),
            SegmentError::Formatted(tag) => Self::FormattedTag(format!(
                "biz_tag \"{tag}\" is formatted: its ids are text; ask \
                 /api/v1/segment/{tag}/ids or /api/segment/get/{tag}"
            )),
            e @ SegmentError::SequenceExhausted {
                retry_after_secs, ..
            } => Self::SequenceExhausted {
                message: e.to_string(),
                retry_after_secs,
            },
            e @ SegmentError::BadFormat { .. } => {
                log_server_error(LogLimiter::global(), "formatted tag unusable", &e);
                Self::Internal
            }
            e @ SegmentError::KeyUnavailable { .. } => {
                log_server_error(LogLimiter::global(), "permuted tag without its key", &e);
                Self::KeyUnavailable(e.to_string())
            }
            // Not a code of its own: clients share the code list, and to them it is the same
            // (this server cannot serve the tag; another may).
            e @ SegmentError::KeyMismatch { .. } => {
                log_server_error(LogLimiter::global(), "permuted tag with another key", &e);
                Self::KeyUnavailable(e.to_string())
            }
            SegmentError::Store(e) => e.into(),
        }
    }
}

/// A store error of a call about no one tag (a list, a ping, a lookup the engine has already
/// mapped): `database_unavailable` (logged with its whole cause), `biz_tag_exhausted`, or
/// `internal`. The errors that need a tag for their message come through
/// [`Error::from_store`]; one arriving here breaks the store contract and is `internal`.
impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Exhausted => Self::BizTagExhausted,
            StoreError::LaneMismatch { .. } | StoreError::SlotClash { .. } => {
                Self::LaneMismatch(e.to_string())
            }
            StoreError::Unavailable(_) => {
                log_server_error(LogLimiter::global(), "database call failed", &e);
                Self::DatabaseUnavailable
            }
            StoreError::LossyDatabase(why) => Self::LossyDatabase(why),
            StoreError::BadRow(ref why) => {
                error!(%why, "leaf_alloc row is invalid");
                Self::Internal
            }
            StoreError::NotFound
            | StoreError::AlreadyExists
            | StoreError::BelowDeletedMaxId { .. } => {
                error!(error = %e, "store error about a tag reached a call about none");
                Self::Internal
            }
        }
    }
}

/// A tag rule's refusal in the admin API's words: `invalid_step`, `invalid_max_id`, or
/// `invalid_request` for the description and an empty change.
impl From<TagRuleError> for Error {
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

/// A refused time range: `invalid_time_range` with the engine's message.
impl From<BoundsError> for Error {
    fn from(e: BoundsError) -> Self {
        Self::InvalidTimeRange(e.to_string())
    }
}

impl From<PlanError> for Error {
    fn from(e: PlanError) -> Self {
        match e {
            PlanError::InvalidInput(message) => Self::InvalidPlan(message),
            PlanError::Impossible { need, message } => Self::PlanImpossible { need, message },
        }
    }
}

#[cfg(any(test, feature = "testing"))]
impl Error {
    /// One error of every variant, in the order of [`Error::code`]'s arms: what the shared
    /// client vectors (`clients/conformance/vectors/errors.json`) are checked against.
    pub fn one_of_each() -> Vec<Error> {
        vec![
            Self::InvalidBizTag(crate::segment::BizTag::parse("").unwrap_err()),
            Self::unknown_tag("orders"),
            Self::InvalidCount("count".into()),
            Self::invalid_step(0),
            Self::invalid_max_id(0),
            Self::InvalidRequest("body".into()),
            Self::InvalidPlan("plan".into()),
            Self::InvalidLayout("layout".into()),
            Self::PlanImpossible {
                need: "years".into(),
                message: "no layout".into(),
            },
            Self::PayloadTooLarge(1),
            Self::RequestTimeout(1),
            Self::BizTagExists("orders".into()),
            Self::BizTagExhausted,
            Self::MaxIdBelowDeleted {
                biz_tag: "orders".into(),
                high_water: 2,
            },
            Self::SegmentsNotReady {
                retry_after_secs: 1,
            },
            Self::DatabaseUnavailable,
            Self::LossyDatabase("setting".into()),
            Self::InvalidId("id".into()),
            Self::InvalidTimeRange("range".into()),
            Self::ClockMovedBackwards { by_ms: 1 },
            Self::TimeBitsExhausted,
            Self::SnowflakeNotReady("ring".into()),
            Self::Unauthorized("token"),
            Self::NotFound("GET /".into()),
            Self::EngineDisabled("segment"),
            Self::NotReady("draining".into()),
            Self::FormattedTag("orders".into()),
            Self::SequenceExhausted {
                message: "period".into(),
                retry_after_secs: 1,
            },
            Self::KeyUnavailable("key".into()),
            Self::Internal,
            Self::LaneMismatch("slot".into()),
            Self::Forbidden {
                token: "pay".into(),
                target: "\"orders\"".into(),
            },
            Self::TokenExists("pay".into()),
            Self::UnknownToken("pay".into()),
            Self::QuotaExhausted {
                message: "quota".into(),
                retry_after_secs: 1,
            },
        ]
    }

    /// The variant's place in [`Error::code`]'s arms. No wildcard: a new variant does not
    /// compile until it has a place here, and then `one_of_each_variant_once` fails until
    /// [`Error::one_of_each`] holds it.
    #[cfg(test)]
    fn variant_index(&self) -> usize {
        match self {
            Self::InvalidBizTag(_) => 0,
            Self::UnknownBizTag(_) => 1,
            Self::InvalidCount(_) => 2,
            Self::InvalidStep(_) => 3,
            Self::InvalidMaxId(_) => 4,
            Self::InvalidRequest(_) => 5,
            Self::InvalidPlan(_) => 6,
            Self::InvalidLayout(_) => 7,
            Self::PlanImpossible { .. } => 8,
            Self::PayloadTooLarge(_) => 9,
            Self::RequestTimeout(_) => 10,
            Self::BizTagExists(_) => 11,
            Self::BizTagExhausted => 12,
            Self::MaxIdBelowDeleted { .. } => 13,
            Self::SegmentsNotReady { .. } => 14,
            Self::DatabaseUnavailable => 15,
            Self::LossyDatabase(_) => 16,
            Self::InvalidId(_) => 17,
            Self::InvalidTimeRange(_) => 18,
            Self::ClockMovedBackwards { .. } => 19,
            Self::TimeBitsExhausted => 20,
            Self::SnowflakeNotReady(_) => 21,
            Self::Unauthorized(_) => 22,
            Self::NotFound(_) => 23,
            Self::EngineDisabled(_) => 24,
            Self::NotReady(_) => 25,
            Self::FormattedTag(_) => 26,
            Self::SequenceExhausted { .. } => 27,
            Self::KeyUnavailable(_) => 28,
            Self::Internal => 29,
            Self::LaneMismatch(_) => 30,
            Self::Forbidden { .. } => 31,
            Self::TokenExists(_) => 32,
            Self::UnknownToken(_) => 33,
            Self::QuotaExhausted { .. } => 34,
        }
    }

    /// How many variants there are.
    pub const VARIANTS: usize = 35;
}

/// `e` and every error beneath it (its `source()` chain) as one line: `e: source: ...`. A
/// source whose text the line already holds (an error that prints its cause) is not repeated.
pub fn error_chain(e: &(dyn StdError + 'static)) -> String {
    let mut line = e.to_string();
    let mut next = e.source();
    while let Some(source) = next {
        let text = source.to_string();
        if !line.contains(&text) {
            let _ = write!(line, ": {text}");
        }
        next = source.source();
    }
    line
}

/// Logs the error behind a server-side failure with its whole chain, once per `cause` per
/// interval.
pub(crate) fn log_server_error(
    limiter: &LogLimiter,
    cause: &'static str,
    e: &(dyn StdError + 'static),
) {
    if let Some(held_back) = limiter.allow(cause) {
        error!(error = %error_chain(e), held_back, "{cause}");
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;

    /// A driver-like error with a cause of its own, which its text does not print.
    #[derive(Debug, thiserror::Error)]
    #[error("error communicating with database")]
    struct Driver(#[source] io::Error);

    #[test]
    fn one_of_each_variant_once() {
        let all = Error::one_of_each();
        let places: Vec<usize> = all.iter().map(Error::variant_index).collect();
        assert_eq!(places, (0..Error::VARIANTS).collect::<Vec<_>>());
        let codes: std::collections::BTreeSet<&str> = all.iter().map(Error::code).collect();
        assert_eq!(codes.len(), Error::VARIANTS, "two variants share a code");
    }

    fn unavailable() -> StoreError {
        StoreError::Unavailable(Box::new(Driver(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "connection refused by 10.0.0.7:3306",
        ))))
    }

    #[test]
    fn the_chain_names_every_cause_once() {
        let chain = error_chain(&unavailable());
        assert_eq!(
            chain,
            "database unavailable: error communicating with database: connection refused by \
             10.0.0.7:3306"
        );
    }

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_server_error_log_line_holds_the_source_text() {
        let captured = Captured::default();
        let writer = captured.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish();
        let limiter = LogLimiter::new(Duration::from_secs(10));
        tracing::subscriber::with_default(subscriber, || {
            log_server_error(&limiter, "database call failed", &unavailable());
            log_server_error(&limiter, "database call failed", &unavailable());
        });
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(log.contains("database call failed"), "{log}");
        assert!(
            log.contains(
                "database unavailable: error communicating with database: connection refused by \
                 10.0.0.7:3306"
            ),
            "{log}"
        );
    }
}
