//! The HTTP side of [`crate::access`]: a request's [`Credentials`] (the `Authorization: Bearer`
//! token and the peer address), and the extractors that guard the admin surface:
//! [`AdminAuth`] on admin writes (`POST`/`PATCH`/`DELETE` under `/api/v1/tags`), [`MonitorAuth`]
//! on the pages that list tags and state (`/db`, `/cache`, `/api/v1/cache`,
//! `GET /api/v1/tags[/{biz_tag}]`, `/metrics`), carrying whether the caller may read a permuted
//! tag's volume. Who may do what is the policy's
//! ([`crate::access::AccessPolicy`]), not this module's.

use std::future::{Ready, ready};
use std::net::IpAddr;

use actix_web::{FromRequest, HttpRequest, dev::Payload, http::header, web};

use super::AppState;
use super::error::Error;
use crate::access::{Action, Credentials};
use crate::segment::SegmentAllocator;

/// A request's credentials, read when the policy asks for them.
pub struct RequestCredentials<'a>(pub &'a HttpRequest);

impl Credentials for RequestCredentials<'_> {
    fn bearer(&self) -> Option<&str> {
        header_token(self.0)
    }

    fn peer(&self) -> Option<IpAddr> {
        self.0.peer_addr().map(|a| a.ip())
    }
}

impl<'a> RequestCredentials<'a> {
    /// The credentials of a request on one of Leaf's two routes, whose callers may not be able
    /// to set a header: the `Authorization` header, else the `access_token` query parameter
    /// (RFC 6750 §2.3). Never logged: the request span records the path without the query
    /// (`super::middleware`), the metrics the route's template.
    pub fn leaf(req: &'a HttpRequest) -> LeafCredentials<'a> {
        LeafCredentials(req)
    }
}

/// [`RequestCredentials`] that also read `?access_token=` ([`RequestCredentials::leaf`]).
pub struct LeafCredentials<'a>(&'a HttpRequest);

impl Credentials for LeafCredentials<'_> {
    fn bearer(&self) -> Option<&str> {
        header_token(self.0).or_else(|| query_token(self.0.query_string()))
    }

    fn peer(&self) -> Option<IpAddr> {
        self.0.peer_addr().map(|a| a.ip())
    }
}

/// The token of the request's `Authorization: Bearer` header.
fn header_token(req: &HttpRequest) -> Option<&str> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
}

/// The value of the first `access_token` parameter of a query string, taken as written: a
/// token is `lid_` and base64url, which needs no percent-encoding (an encoded one matches no
/// token, and is refused as unknown). `None` when absent or empty.
pub fn query_token(query: &str) -> Option<&str> {
    if query.is_empty() {
        return None;
    }
    query
        .split('&')
        .find_map(|pair| pair.strip_prefix("access_token="))
        .filter(|t| !t.is_empty())
}

/// The credentials of an `Authorization: Bearer <token>` value. The scheme is matched
/// case-insensitively (RFC 9110 §11.1: `bearer` and `BEARER` are `Bearer`); one or more spaces
/// separate it from the token. `None` for any other scheme or an empty token.
pub fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_start_matches(' ');
    (!token.is_empty()).then_some(token)
}

/// Proof that the request may perform admin writes.
#[derive(Debug, Clone, Copy)]
pub struct AdminAuth;

impl FromRequest for AdminAuth {
    type Error = Error;
    type Future = Ready<Result<Self, Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(guard(req, Action::AdminWrite).map(|()| AdminAuth))
    }
}

/// Proof that the request may read the monitor pages, and whether it may also read a permuted
/// tag's volume ([`Action::ReadVolume`]), both asked of the policy once per request.
#[derive(Debug, Clone, Copy)]
pub struct MonitorAuth {
    volume: bool,
}

impl MonitorAuth {
    /// Whether this caller may read a permuted tag's volume (next id, `max_id`, buffer
    /// positions, issued totals, fill): the admin credential, as the policy says.
    pub fn reads_volume(&self) -> bool {
        self.volume
    }

    /// A caller that may read everything: the answer to an admin write, whose caller holds the
    /// admin credential already.
    pub(crate) fn with_volume() -> Self {
        Self { volume: true }
    }

    /// Whether the volume of the row or tag `name` is shown to this caller: always for a
    /// plain or unpermuted formatted tag, for a permuted one (and its period rows) only with
    /// the admin credential. The one question every monitor view asks before writing a count.
    pub fn shows_volume(&self, segment: Option<&SegmentAllocator>, name: &str) -> bool {
        // Without the engine there is no buffer and no row to show.
        self.volume || !segment.is_some_and(|s| s.hides_volume(name))
    }
}

impl FromRequest for MonitorAuth {
    type Error = Error;
    type Future = Ready<Result<Self, Error>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(guard(req, Action::MonitorRead).map(|()| MonitorAuth {
            // Refused is not an error here: the page is served with the counts left out.
            volume: guard(req, Action::ReadVolume).is_ok(),
        }))
    }
}

fn guard(req: &HttpRequest, action: Action<'_>) -> Result<(), Error> {
    match req.app_data::<web::Data<AppState>>() {
        Some(state) => state.ids.access().admit(&RequestCredentials(req), action),
        // No state: a programming error; refuse rather than open.
        None => Err(Error::Internal),
    }
}

#[cfg(test)]
mod tests {
    use super::{bearer_credentials, query_token};

    #[test]
    fn the_access_token_parameter_is_read_exactly() {
        assert_eq!(query_token("access_token=lid_x"), Some("lid_x"));
        assert_eq!(query_token("a=1&access_token=lid_x&b=2"), Some("lid_x"));
        assert_eq!(query_token("xaccess_token=lid_x"), None);
        assert_eq!(query_token("access_token="), None);
        assert_eq!(query_token(""), None);
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for v in ["Bearer t0k", "bearer t0k", "BEARER t0k", "bEaReR   t0k"] {
            assert_eq!(bearer_credentials(v), Some("t0k"), "{v:?}");
        }
        for v in ["Basic t0k", "Bearer", "Bearer ", "Bearert0k", "t0k", ""] {
            assert_eq!(bearer_credentials(v), None, "{v:?}");
        }
    }
}
