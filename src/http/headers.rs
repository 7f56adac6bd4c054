//! The response headers every answer carries, and those of the HTML pages: one home for what a
//! cache, a browser or a proxy in front may do with an answer.
//!
//! **Nothing is cacheable unless its route says so.** An id handed out twice is the one failure
//! leafid can never take back, and a shared cache in front (a CDN, an API gateway, Varnish with
//! its default configuration, a corporate proxy) answering a repeated `GET` of an id route from
//! its store does exactly that. So every response without a `Cache-Control` of its own gets
//! `Cache-Control: no-store` (RFC 9111 §5.2.2.5: no cache may keep it) and `Expires: 0` (an
//! HTTP/1.0 cache, which knows no `Cache-Control`, reads an invalid date as already expired).
//! Routes whose answers may be shared set their own policy: `/openapi.json` (the same for the
//! life of the binary) is `public, max-age`; the dashboard's assets revalidate (`no-cache`).
//! Tested through a real Varnish in `tests/api/hostile.rs`.

use actix_web::HttpResponse;
use actix_web::http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// `Cache-Control` of every answer whose route sets none: no cache may store it.
pub const NO_STORE: &str = "no-store";

/// `Cache-Control` of answers that are the same for the life of the binary (the OpenAPI
/// document): shared caches may keep them for an hour.
pub const CACHEABLE_STATIC: &str = "public, max-age=3600";

/// Content-Security-Policy of the monitor pages (`/cache`, `/db`): no script at all, the
/// page's own inline style, nothing framed, no form posted anywhere.
pub const MONITOR_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; \
                               form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

/// Sets the headers every response carries unless its handler set them: `Cache-Control:
/// no-store` with `Expires: 0`, and `X-Content-Type-Options: nosniff` (a browser never
/// reinterprets an id or an error body as HTML or script).
///
/// One map operation per header on the common path (no policy of the handler's): the default
/// is inserted, and only when that displaced the handler's own values are they put back, in
/// their order (a look-up before each insert cost a second hash and probe per header).
pub fn apply_defaults(headers: &mut HeaderMap) {
    let own = headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(NO_STORE));
    if own.is_empty() {
        headers.insert(header::EXPIRES, HeaderValue::from_static("0"));
    } else {
        put_back(headers, header::CACHE_CONTROL, own);
    }
    let own = headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if !own.is_empty() {
        put_back(headers, header::X_CONTENT_TYPE_OPTIONS, own);
    }
}

/// [`apply_defaults`] for an answer whose handler is known to set none of those headers (the
/// prefix routes' handlers: `super::middleware::labeled_get_prefix`): each is appended, with
/// no look-up of a value to keep (about 110 instructions a request less on Leaf's routes).
/// The same three headers, each once (`middleware::tests`, the prefix route's answers).
pub fn append_defaults(headers: &mut HeaderMap) {
    headers.append(header::CACHE_CONTROL, HeaderValue::from_static(NO_STORE));
    headers.append(header::EXPIRES, HeaderValue::from_static("0"));
    headers.append(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
}

/// Replaces the values of `name` with `values` (at least one), in their order.
fn put_back(headers: &mut HeaderMap, name: HeaderName, values: impl Iterator<Item = HeaderValue>) {
    for (i, value) in values.enumerate() {
        if i == 0 {
            headers.insert(name.clone(), value);
        } else {
            headers.append(name.clone(), value);
        }
    }
}

/// An HTML page with the headers every HTML answer of the server carries: its
/// Content-Security-Policy `csp`, no referrer, no framing (the CSP's `frame-ancestors` and the
/// older `X-Frame-Options`), and the defaults above.
pub fn html_page(csp: &'static str, body: String) -> HttpResponse {
    html_response(csp).body(body)
}

/// The builder of an HTML answer (see [`html_page`]), for a static body.
pub fn html_response(csp: &'static str) -> actix_web::HttpResponseBuilder {
    let mut b = HttpResponse::Ok();
    b.content_type("text/html; charset=utf-8")
        .insert_header((header::CONTENT_SECURITY_POLICY, csp))
        .insert_header((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .insert_header((header::REFERRER_POLICY, "no-referrer"))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"));
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_without_a_policy_get_no_store_and_keep_their_own() {
        let mut h = HeaderMap::new();
        apply_defaults(&mut h);
        assert_eq!(h.get(header::CACHE_CONTROL).unwrap(), NO_STORE);
        assert_eq!(h.get(header::EXPIRES).unwrap(), "0");
        assert_eq!(h.get(header::X_CONTENT_TYPE_OPTIONS).unwrap(), "nosniff");
        let mut own = HeaderMap::new();
        own.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(CACHEABLE_STATIC),
        );
        apply_defaults(&mut own);
        assert_eq!(own.get(header::CACHE_CONTROL).unwrap(), CACHEABLE_STATIC);
        assert!(own.get(header::EXPIRES).is_none());
        assert_eq!(own.get(header::X_CONTENT_TYPE_OPTIONS).unwrap(), "nosniff");
    }

    #[test]
    fn a_handlers_own_values_are_kept_whole_and_in_order() {
        let mut own = HeaderMap::new();
        for v in ["private", "max-age=5"] {
            own.append(header::CACHE_CONTROL, HeaderValue::from_static(v));
        }
        for v in ["nosniff", "other"] {
            own.append(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static(v));
        }
        apply_defaults(&mut own);
        let values = |name| {
            own.get_all(name)
                .map(|v| v.to_str().unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(values(header::CACHE_CONTROL), ["private", "max-age=5"]);
        assert_eq!(values(header::X_CONTENT_TYPE_OPTIONS), ["nosniff", "other"]);
        assert!(own.get(header::EXPIRES).is_none());
        assert_eq!(own.len(), 4);
    }
}
