//! `AdminAuth`: the guard of admin writes.
//!
//! With `admin.token` set, a request needs `Authorization: Bearer <token>`. Without one, only
//! loopback peers may write, so a fresh install is not an open admin API on a public address.

use std::future::{Ready, ready};

use actix_web::{FromRequest, HttpRequest, dev::Payload, http::header, web};

use super::AppState;
use super::error::ApiError;

/// Proof that the request may perform admin writes.
#[derive(Debug, Clone, Copy)]
pub struct AdminAuth;

impl FromRequest for AdminAuth {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(check(req))
    }
}

fn check(req: &HttpRequest) -> Result<AdminAuth, ApiError> {
    let token = req
        .app_data::<web::Data<AppState>>()
        .and_then(|s| s.admin_token.clone());
    match token {
        Some(token) => {
            let given = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .unwrap_or("");
            if constant_time_eq(given.as_bytes(), token.expose().as_bytes()) {
                Ok(AdminAuth)
            } else {
                Err(ApiError::Unauthorized(
                    "admin writes need Authorization: Bearer <admin.token>",
                ))
            }
        }
        None if req.peer_addr().is_some_and(|a| a.ip().is_loopback()) => Ok(AdminAuth),
        None => Err(ApiError::Unauthorized(
            "admin writes are accepted only from loopback clients unless admin.token is configured",
        )),
    }
}

/// Compares without an early exit, so the time taken does not reveal the matching prefix.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn compares_whole_strings() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
