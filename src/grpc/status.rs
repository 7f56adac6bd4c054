//! The gRPC face of [`Error`], decided here and nowhere else: each [`ErrorClass`]'s
//! [`Code`], the stable `code` string (the HTTP error body's) as `google.rpc.ErrorInfo.reason`
//! in the domain [`DOMAIN`], and `google.rpc.RetryInfo` wherever HTTP sends `Retry-After`.

use std::collections::HashMap;
use std::time::Duration;

use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

use crate::error::{Error, ErrorClass};

/// The `google.rpc.ErrorInfo.domain` of every error this server answers.
pub const DOMAIN: &str = "leafid.io";

/// `ErrorInfo.reason` of a call whose caller deadline (`grpc-timeout`) passed before its
/// answer: gRPC's own failure, with no HTTP counterpart (an HTTP caller simply hangs up).
pub const DEADLINE_REASON: &str = "deadline_exceeded";

/// The gRPC code of each class. `Conflict` is `ALREADY_EXISTS` for a name taken and
/// `FAILED_PRECONDITION` otherwise (a tag used up, a `max_id` below a deleted tag's): asking
/// again unchanged fails the same way.
pub fn code_of(class: ErrorClass, code: &str) -> Code {
    match class {
        ErrorClass::Invalid | ErrorClass::Unprocessable | ErrorClass::TooLarge => {
            Code::InvalidArgument
        }
        ErrorClass::Timeout => Code::DeadlineExceeded,
        ErrorClass::NotFound => Code::NotFound,
        ErrorClass::Conflict if code == "biz_tag_exists" => Code::AlreadyExists,
        ErrorClass::Conflict => Code::FailedPrecondition,
        ErrorClass::Unauthenticated => Code::Unauthenticated,
        ErrorClass::Denied => Code::PermissionDenied,
        ErrorClass::Throttled | ErrorClass::Exhausted => Code::ResourceExhausted,
        ErrorClass::Unavailable => Code::Unavailable,
        ErrorClass::Internal => Code::Internal,
    }
}

/// The status an error answers: its class's code, its message, and the details.
pub fn status_of(e: &Error) -> Status {
    let code = e.code();
    let mut details = ErrorDetails::new();
    details.set_error_info(code, DOMAIN, HashMap::new());
    if let Some(secs) = e.retry_after() {
        details.set_retry_info(Some(Duration::from_secs(secs)));
    }
    if e.class() == ErrorClass::Internal {
        // Logged with its chain here; the caller gets the bare message (as over HTTP).
        tracing::error!(error = %crate::error::error_chain(e), "grpc call failed");
    }
    Status::with_error_details(code_of(e.class(), code), e.to_string(), details)
}

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        status_of(&e)
    }
}

/// The status of a call whose caller deadline passed: `DEADLINE_EXCEEDED`, reason
/// [`DEADLINE_REASON`].
pub fn deadline_exceeded(after: Duration) -> Status {
    let mut details = ErrorDetails::new();
    details.set_error_info(DEADLINE_REASON, DOMAIN, HashMap::new());
    Status::with_error_details(
        Code::DeadlineExceeded,
        format!("the caller's deadline ({} ms) passed", after.as_millis()),
        details,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every error of every variant maps to a code that is not OK, and carries its code string
    /// as the reason; the retryable ones carry RetryInfo.
    #[test]
    fn every_error_has_its_reason_and_a_failing_code() {
        for e in Error::one_of_each() {
            let s = status_of(&e);
            assert_ne!(s.code(), Code::Ok, "{e:?}");
            let info = s.get_details_error_info().expect("error info");
            assert_eq!(info.reason, e.code());
            assert_eq!(info.domain, DOMAIN);
            let retry = s.get_details_retry_info().and_then(|r| r.retry_delay);
            assert_eq!(retry.map(|d| d.as_secs()), e.retry_after(), "{e:?}");
        }
    }

    #[test]
    fn the_classes_callers_branch_on_have_their_codes() {
        let unauth = status_of(&Error::Unauthorized("no token"));
        assert_eq!(unauth.code(), Code::Unauthenticated);
        let exists = status_of(&Error::BizTagExists("a".into()));
        assert_eq!(exists.code(), Code::AlreadyExists);
        let gone = status_of(&Error::BizTagExhausted);
        assert_eq!(gone.code(), Code::FailedPrecondition);
        assert_eq!(
            status_of(&Error::DatabaseUnavailable).code(),
            Code::Unavailable
        );
    }
}
