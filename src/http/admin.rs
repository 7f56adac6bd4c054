//! The guards of the admin surface: [`AdminAuth`] on admin writes (`POST`/`PATCH`/`DELETE`
//! under `/api/v1/tags`), [`MonitorAuth`] on the pages that list tags and state (`/db`,
//! `/cache`, `/api/v1/cache`, `GET /api/v1/tags[/{biz_tag}]`, `/metrics`).
//!
//! Closed by default, whatever sits in front: a write needs `Authorization: Bearer
//! <admin.token>`. The peer address is not a credential: behind a same-host reverse proxy or a
//! service mesh sidecar every request arrives from 127.0.0.1, so "loopback may write" would open
//! the admin API to whoever reaches the proxy. `admin.trust_loopback = true` restores that rule
//! for a box with no proxy on it (start-up then logs a warning). The monitor pages are open by
//! default (Leaf's `/cache` and `/db` are), and need the same credential as writes with
//! `admin.protect_reads = true`.

use std::future::{Ready, ready};

use actix_web::{FromRequest, HttpRequest, dev::Payload, http::header, web};

use super::AppState;
use super::error::ApiError;
use crate::config::Secret;

/// Who may use the admin surface: `[admin]` of the configuration.
#[derive(Debug, Clone, Default)]
pub struct AdminPolicy {
    /// `admin.token`: the bearer token that admin requests carry.
    pub token: Option<Secret>,
    /// `admin.trust_loopback`: without a token, a loopback peer may use the admin surface.
    pub trust_loopback: bool,
    /// `admin.protect_reads`: the monitor pages need the same credential as writes.
    pub protect_reads: bool,
}

/// What [`AdminPolicy::admit`] guards, for the refusal's message.
#[derive(Debug, Clone, Copy)]
enum Surface {
    Write,
    Monitor,
}

impl AdminPolicy {
    /// Whether the request may use the admin writes' credential (for a route that is open
    /// except for some resources: a permuted tag's decode).
    pub fn admit_write(&self, req: &HttpRequest) -> Result<(), ApiError> {
        self.admit(req, Surface::Write)
    }

    /// Whether the request may use `surface`.
    fn admit(&self, req: &HttpRequest, surface: Surface) -> Result<(), ApiError> {
        if matches!(surface, Surface::Monitor) && !self.protect_reads {
            return Ok(());
        }
        if let Some(token) = &self.token {
            let given = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(bearer_credentials)
                .unwrap_or("");
            if constant_time_eq(given.as_bytes(), token.expose().as_bytes()) {
                return Ok(());
            }
            return Err(ApiError::Unauthorized(match surface {
                Surface::Write => "admin writes need Authorization: Bearer <admin.token>",
                Surface::Monitor => {
                    "this page needs Authorization: Bearer <admin.token> (admin.protect_reads)"
                }
            }));
        }
        if self.trust_loopback && req.peer_addr().is_some_and(|a| a.ip().is_loopback()) {
            return Ok(());
        }
        Err(ApiError::Unauthorized(
            "admin requests need admin.token (sent as Authorization: Bearer <token>); none is \
             configured. `leafid tags` manages tags on the database directly",
        ))
    }
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
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(guard(req, Surface::Write).map(|()| AdminAuth))
    }
}

/// Proof that the request may read the monitor pages.
#[derive(Debug, Clone, Copy)]
pub struct MonitorAuth;

impl FromRequest for MonitorAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(guard(req, Surface::Monitor).map(|()| MonitorAuth))
    }
}

fn guard(req: &HttpRequest, surface: Surface) -> Result<(), ApiError> {
    match req.app_data::<web::Data<AppState>>() {
        Some(state) => state.admin.admit(req, surface),
        // No state: a programming error; refuse rather than open.
        None => Err(ApiError::Internal),
    }
}

/// Compares without an early exit, so the time taken does not reveal the matching prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::{bearer_credentials, constant_time_eq};

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for v in ["Bearer t0k", "bearer t0k", "BEARER t0k", "bEaReR   t0k"] {
            assert_eq!(bearer_credentials(v), Some("t0k"), "{v:?}");
        }
        for v in ["Basic t0k", "Bearer", "Bearer ", "Bearert0k", "t0k", ""] {
            assert_eq!(bearer_credentials(v), None, "{v:?}");
        }
    }

    #[test]
    fn compares_whole_strings() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
