//! The HTTP face of [`Error`]: one JSON body shape `{"code", "message"}`, the status of each
//! [`ErrorClass`] (decided here and nowhere else), `Retry-After` and `WWW-Authenticate`, and
//! actix's extractor errors in the same shape. Which code and class an error has is
//! `crate::error`'s.

use actix_web::http::StatusCode;
use actix_web::http::header::{self, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, ResponseError, error as aerror};
use serde::Serialize;

pub use crate::error::{Error, ErrorClass, error_chain};

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

/// The HTTP status of each class.
pub fn status_of(class: ErrorClass) -> StatusCode {
    match class {
        ErrorClass::Invalid => StatusCode::BAD_REQUEST,
        ErrorClass::Unprocessable => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorClass::TooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorClass::Timeout => StatusCode::REQUEST_TIMEOUT,
        ErrorClass::NotFound => StatusCode::NOT_FOUND,
        ErrorClass::Conflict => StatusCode::CONFLICT,
        ErrorClass::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorClass::Denied => StatusCode::FORBIDDEN,
        ErrorClass::Throttled => StatusCode::TOO_MANY_REQUESTS,
        ErrorClass::Exhausted | ErrorClass::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorClass::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl ResponseError for Error {
    fn status_code(&self) -> StatusCode {
        status_of(self.class())
    }

    fn error_response(&self) -> HttpResponse {
        let mut res = HttpResponse::build(self.status_code());
        if let Some(secs) = self.retry_after() {
            res.insert_header((header::RETRY_AFTER, HeaderValue::from(secs)));
        }
        if self.class() == ErrorClass::Unauthenticated {
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
        | aerror::JsonPayloadError::Overflow { limit } => Error::PayloadTooLarge(*limit),
        aerror::JsonPayloadError::Payload(aerror::PayloadError::Io(e))
            if e.kind() == std::io::ErrorKind::TimedOut =>
        {
            Error::RequestTimeout(super::body_deadline::timeout_ms(e))
        }
        aerror::JsonPayloadError::ContentType => Error::InvalidRequest(
            "request body must be JSON (Content-Type: application/json)".into(),
        ),
        other => Error::InvalidRequest(format!("invalid JSON body: {other}")),
    };
    api.into()
}

/// Turns actix's query-string errors into `invalid_request`.
pub fn query_error(err: aerror::QueryPayloadError, _req: &HttpRequest) -> actix_web::Error {
    Error::InvalidRequest(format!("invalid query string: {err}")).into()
}

/// Turns actix's path errors into `invalid_request`.
pub fn path_error(err: aerror::PathError, _req: &HttpRequest) -> actix_web::Error {
    Error::InvalidRequest(format!("invalid path: {err}")).into()
}

/// The fallback for unknown routes: `not_found` in the JSON shape.
pub async fn not_found(req: HttpRequest) -> Result<HttpResponse, Error> {
    Err(Error::NotFound(format!("{} {}", req.method(), req.path())))
}

#[cfg(test)]
mod tests {
    use std::io;

    use actix_web::body::to_bytes;

    use super::*;
    use crate::segment::{BizTag, SegmentError, StoreError};

    /// Status, `code`, message and `Retry-After` of the response an error answers.
    async fn answer(e: Error) -> (u16, String, String, Option<String>) {
        let res = e.error_response();
        let status = res.status().as_u16();
        let retry = res
            .headers()
            .get(header::RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        let body: serde_json::Value =
            serde_json::from_slice(&to_bytes(res.into_body()).await.unwrap()).unwrap();
        let text = |k: &str| body[k].as_str().unwrap().to_owned();
        (status, text("code"), text("message"), retry)
    }

    /// A driver-like error with a cause of its own, which its text does not print.
    #[derive(Debug, thiserror::Error)]
    #[error("error communicating with database")]
    struct Driver(#[source] io::Error);

    fn unavailable() -> StoreError {
        StoreError::Unavailable(Box::new(Driver(io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "connection refused by 10.0.0.7:3306",
        ))))
    }

    #[tokio::test]
    async fn an_unknown_tag_from_the_engine_names_the_tag() {
        let tag = BizTag::parse("orders").unwrap();
        let e = SegmentError::from_store(StoreError::NotFound, &tag);
        assert_eq!(
            answer(e.into()).await,
            (
                404,
                "unknown_biz_tag".into(),
                "unknown biz_tag \"orders\"".into(),
                None
            )
        );
    }

    #[tokio::test]
    async fn store_errors_about_a_tag_name_it() {
        let (status, code, message, _) =
            answer(Error::from_store(StoreError::NotFound, "pay")).await;
        assert_eq!(
            (status, code.as_str(), message.as_str()),
            (404, "unknown_biz_tag", "unknown biz_tag \"pay\"")
        );
        let (status, code, message, _) =
            answer(Error::from_store(StoreError::AlreadyExists, "pay")).await;
        assert_eq!(
            (status, code.as_str(), message.as_str()),
            (409, "biz_tag_exists", "biz_tag \"pay\" exists already")
        );
        let below = StoreError::BelowDeletedMaxId { high_water: 42 };
        let (status, code, message, _) = answer(Error::from_store(below, "pay")).await;
        assert_eq!((status, code.as_str()), (409, "max_id_below_deleted"));
        assert!(
            message.starts_with("biz_tag \"pay\" was deleted") && message.contains("42"),
            "{message}"
        );
        let (status, code, _, retry) = answer(Error::from_store(unavailable(), "pay")).await;
        assert_eq!(
            (status, code.as_str(), retry.as_deref()),
            (503, "database_unavailable", Some("1"))
        );
    }

    #[tokio::test]
    async fn a_refused_lease_on_a_lossy_database_is_a_503_naming_the_setting() {
        let refused = StoreError::LossyDatabase("innodb_flush_log_at_trx_commit = 0".into());
        let (status, code, message, retry) = answer(SegmentError::Store(refused).into()).await;
        assert_eq!(
            (status, code.as_str(), message.as_str(), retry.as_deref()),
            (
                503,
                "lossy_database",
                "innodb_flush_log_at_trx_commit = 0",
                Some("5")
            )
        );
    }

    #[tokio::test]
    async fn not_ready_is_a_503_with_retry_after() {
        assert_eq!(
            answer(Error::NotReady("draining".into())).await,
            (503, "not_ready".into(), "draining".into(), Some("1".into()))
        );
    }
}
