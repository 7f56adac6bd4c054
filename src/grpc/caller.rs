//! What a gRPC call carries besides its message: the caller's credentials (the
//! `authorization: Bearer <token>` metadata and the peer address, checked by the same
//! [`crate::access`] policy as HTTP) and its deadline (`grpc-timeout`).

use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use tonic::codegen::http::header::{AUTHORIZATION, HeaderName};
use tonic::{Request, Status};

use super::status::deadline_exceeded;
use crate::access::Credentials;
use crate::http::admin::bearer_credentials;

/// The deadline's metadata key, parsed once at compile time (a `&str` key is parsed on every
/// lookup: some 1,200 instructions a call for the two keys read here).
const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// A call's credentials, read off its metadata once.
#[derive(Debug, Clone, Default)]
pub struct CallCredentials {
    bearer: Option<String>,
    peer: Option<IpAddr>,
}

impl CallCredentials {
    /// The bearer token of the `authorization` metadata (the same parse as HTTP's header) and
    /// the peer's address. Metadata that is not text is no token (the policy then refuses
    /// where one is needed): never a panic.
    pub fn of<T>(req: &Request<T>) -> Self {
        let bearer = req
            .metadata()
            .as_ref()
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer_credentials)
            .map(str::to_owned);
        Self {
            bearer,
            peer: req.remote_addr().map(|a| a.ip()),
        }
    }
}

impl Credentials for CallCredentials {
    fn bearer(&self) -> Option<&str> {
        self.bearer.as_deref()
    }

    fn peer(&self) -> Option<IpAddr> {
        self.peer
    }
}

/// Largest `grpc-timeout` value (8 digits, as the spec allows) read; a longer one is no bound.
const MAX_DIGITS: usize = 8;

/// The caller's deadline from the `grpc-timeout` metadata (`<digits><unit>`, unit one of
/// `H M S m u n`), `None` when absent or malformed (tonic's own layer answers the malformed
/// ones). Checked arithmetic: an hour of 99,999,999 is no overflow, just no bound.
pub fn deadline<T>(req: &Request<T>) -> Option<Duration> {
    let text = req.metadata().as_ref().get(&GRPC_TIMEOUT)?.to_str().ok()?;
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > MAX_DIGITS {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.checked_mul(3600)?),
        "M" => Duration::from_secs(n.checked_mul(60)?),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// Runs `call` within the caller's deadline: an answer past it is `DEADLINE_EXCEEDED`
/// ([`deadline_exceeded`]). The bound is a little shorter than the deadline (by a twentieth,
/// at least a millisecond), so this answer, with its reason, comes before tonic's own timer
/// cancels the call. Why no id is lost twice: a call dropped here drops the engine's wait, and
/// an id the engine had already taken for it is a gap, never handed out again (the engines
/// hand out only ids they leased; a dropped future hands out nothing).
pub async fn within<T>(
    deadline: Option<Duration>,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    let Some(d) = deadline else {
        return call.await;
    };
    let margin = (d / 20).max(Duration::from_millis(1));
    let bound = d.saturating_sub(margin);
    tokio::time::timeout(bound, call)
        .await
        .unwrap_or_else(|_| Err(deadline_exceeded(d)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_timeout(v: &str) -> Request<()> {
        let mut r = Request::new(());
        r.metadata_mut().insert("grpc-timeout", v.parse().unwrap());
        r
    }

    #[test]
    fn deadlines_parse_every_unit_and_refuse_the_rest() {
        assert_eq!(deadline(&with_timeout("5S")), Some(Duration::from_secs(5)));
        assert_eq!(
            deadline(&with_timeout("250m")),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            deadline(&with_timeout("2H")),
            Some(Duration::from_secs(7200))
        );
        assert_eq!(
            deadline(&with_timeout("7u")),
            Some(Duration::from_micros(7))
        );
        for bad in ["", "S", "5", "5X", "123456789S", "-5S", "5 S", "\u{e9}S"] {
            let mut r = Request::new(());
            if let Ok(v) = bad.parse() {
                r.metadata_mut().insert("grpc-timeout", v);
            }
            assert_eq!(deadline(&r), None, "{bad:?}");
        }
        assert_eq!(deadline(&Request::new(())), None);
    }

    #[test]
    fn the_bearer_token_comes_from_the_authorization_metadata() {
        let mut r = Request::new(());
        r.metadata_mut()
            .insert("authorization", "Bearer lid_abc".parse().unwrap());
        assert_eq!(CallCredentials::of(&r).bearer(), Some("lid_abc"));
        let mut r = Request::new(());
        r.metadata_mut()
            .insert("authorization", "Basic xyz".parse().unwrap());
        assert_eq!(CallCredentials::of(&r).bearer(), None);
        assert_eq!(CallCredentials::of(&Request::new(())).bearer(), None);
    }

    #[tokio::test]
    async fn a_call_past_its_deadline_is_deadline_exceeded() {
        let slow = async {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok::<_, Status>(())
        };
        let s = within(Some(Duration::from_millis(20)), slow)
            .await
            .unwrap_err();
        assert_eq!(s.code(), tonic::Code::DeadlineExceeded);
        let quick = within(Some(Duration::from_secs(5)), async { Ok::<_, Status>(7) });
        assert_eq!(quick.await.unwrap(), 7);
    }
}
