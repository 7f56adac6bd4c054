//! The middleware every request passes ([`Telemetry`]): a request id, the default answer
//! headers ([`super::headers`]), the body deadline ([`super::body_deadline`]), and one count and
//! one latency observation in the metrics, labelled by method, the matched route (never the raw
//! path) and status; and the route labels the id routes register ([`labeled_get`],
//! [`labeled_get_prefix`]) so that labelling allocates nothing.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use actix_web::body::BoxBody;
use actix_web::dev::{Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::Method;
use actix_web::http::header::{HeaderName, HeaderValue};
use actix_web::{HttpRequest, HttpResponse, web};

use super::body_deadline::Held;
use super::error::Error;
use crate::metrics::{Metrics, StaticChildren};
use crate::segment::strict::clock::boot_now;
use crate::telemetry::{ClientText, LogLimiter};

/// Header carrying the request id on every response.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// [`REQUEST_ID_HEADER`] as a header name, made at compile time (`HeaderName::from_static`
/// called per request looks the name up among the standard headers each time).
const REQUEST_ID_NAME: HeaderName = HeaderName::from_static(REQUEST_ID_HEADER);

/// Route label of requests that matched no route (so raw paths never become labels).
pub const UNMATCHED: &str = "unmatched";

/// The metrics label of a route, registered with the route as resource data (see
/// [`labeled_get`]): the middleware reads it by reference instead of building the matched
/// pattern as a `String` per request. Routes without one are labelled by
/// `HttpRequest::match_pattern`.
#[derive(Clone, Copy, Debug)]
pub struct RouteLabel(pub &'static str);

/// A `GET` resource at `path` whose requests are labelled `label` in the HTTP metrics.
///
/// The guard sits on the resource (as with `ServiceConfig::route`), so other methods fall
/// through to the next resource instead of getting a 405 here.
pub fn labeled_get<F, Args>(path: &str, label: &'static str, handler: F) -> actix_web::Resource
where
    F: actix_web::Handler<Args>,
    Args: actix_web::FromRequest + 'static,
    F::Output: actix_web::Responder + 'static,
{
    web::resource(path)
        .guard(actix_web::guard::Get())
        .app_data(RouteLabel(label))
        .route(web::get().to(handler))
}

/// A `GET` route at the static prefix `prefix` (matched without a regex) whose requests, for
/// `prefix` and anything under `prefix/`, all go to `handler`, labelled `label` in the HTTP
/// metrics. The handler reads the rest of the path (`req.match_info().unprocessed()`).
///
/// Registered as one service, not as a `Scope` with a default service: a scope answers
/// through three boxed futures (its own, its default service's, the route's) and an empty
/// router, this through the one box every app-level service has; and the handler is called
/// with the request directly, without the extractor machinery. Matching is the scope's: the
/// same root-prefix `ResourceDef`, the `GET` guard on the registration (other methods fall
/// through to the next service); the label reaches the middleware through `ANSWERED_BY`.
///
/// The handler gets the app's state `S` (its app data, looked up once per app instance, not per
/// request), and must set none of the default headers of [`super::headers::apply_defaults`]:
/// the middleware appends them to its answers without looking for the handler's own.
pub fn labeled_get_prefix<S, F, Fut, E>(
    prefix: &str,
    label: &'static str,
    handler: F,
) -> LabeledGetPrefix<S, F>
where
    S: 'static,
    F: Fn(HttpRequest, Rc<S>) -> Fut + Clone + 'static,
    Fut: Future<Output = Result<HttpResponse, E>> + 'static,
    E: Into<actix_web::Error> + 'static,
{
    LabeledGetPrefix {
        prefix: prefix.to_owned(),
        label,
        handler,
        state: std::marker::PhantomData,
    }
}

/// The service factory of [`labeled_get_prefix`].
pub struct LabeledGetPrefix<S, F> {
    prefix: String,
    label: &'static str,
    handler: F,
    state: std::marker::PhantomData<fn() -> S>,
}

impl<S, F, Fut, E> actix_web::dev::HttpServiceFactory for LabeledGetPrefix<S, F>
where
    S: Clone + 'static,
    F: Fn(HttpRequest, Rc<S>) -> Fut + Clone + 'static,
    Fut: Future<Output = Result<HttpResponse, E>> + 'static,
    E: Into<actix_web::Error> + 'static,
{
    fn register(self, config: &mut actix_web::dev::AppService) {
        let label = self.label;
        let handler = self.handler;
        // The app's state, found on the first request: this registration belongs to one app
        // instance (actix builds one per worker), whose app data never changes.
        let state: Rc<std::cell::OnceCell<Option<Rc<S>>>> = Rc::default();
        let service = actix_web::dev::fn_service(move |req: ServiceRequest| {
            // The label goes to the middleware through its thread (`ANSWERED_BY`), not as
            // route data: no container pushed per request, none searched by later look-ups.
            ANSWERED_BY.set(Some(label));
            // No extractor reads the body: the payload goes (a body's deadline and the
            // connection's close are the middleware's, which holds the payload itself).
            let (req, _payload) = req.into_parts();
            // Not boxed here: actix boxes the future returned below once, and a second box
            // cost a `malloc` and a `free` per request. So the handler's own future must stay
            // small, since it is moved several times before that box: Leaf's handlers box
            // their slow paths' awaits themselves (a large future moved inline copied
            // kilobytes per move: docs/benchmarks.md, "The segment route, step by step").
            let app = state.get_or_init(|| req.app_data::<S>().cloned().map(Rc::new));
            let answer = app.clone().map(|app| handler(req.clone(), app));
            async move {
                // As `Responder for Result` answers, without mapping the body: an error is
                // kept in the answer (`HttpResponse::from_error`), where the middleware reads
                // its code.
                let res = match answer {
                    Some(answer) => match answer.await {
                        Ok(res) => res,
                        Err(e) => HttpResponse::from_error(e.into()),
                    },
                    None => {
                        tracing::error!("the prefix route's app state is not registered");
                        HttpResponse::from_error(Error::Internal)
                    }
                };
                Ok::<_, actix_web::Error>(ServiceResponse::new(req, res))
            }
        });
        // A nested resource map with no resources, as a scope registers: without it the
        // prefix would be a leaf of the app's map, and `HttpRequest::match_pattern` would
        // answer the bare prefix for any request under it that no service took (a `POST`, a
        // made-up method), which must be labelled `unmatched`.
        let rdef = actix_web::dev::ResourceDef::root_prefix(&self.prefix);
        let nested = Rc::new(actix_web::dev::ResourceMap::new(rdef.clone()));
        config.register_service(
            rdef,
            Some(vec![Box::new(actix_web::guard::Get())]),
            service,
            Some(nested),
        );
    }
}

thread_local! {
    /// The label of the [`labeled_get_prefix`] route that took the request being dispatched on
    /// this thread. Sound because actix calls the matched service synchronously inside the
    /// middleware's `call` (the app's router picks it and calls it before returning), on the
    /// worker's one thread: [`TelemetryService::call`] clears it before calling the app and
    /// takes it right after, with no other request in between.
    static ANSWERED_BY: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// Whether `path` is one of the id routes, where every microsecond shows in throughput.
fn is_id_route(path: &str) -> bool {
    path.starts_with("/api/segment/get/")
        || path.starts_with("/api/snowflake/get/")
        || path.starts_with("/api/v1/segment/")
        || path == "/api/v1/snowflake/ids"
}

/// A request id: this process's start-time prefix and a counter, cheap to make and unique
/// across restarts (a UUID per request costs more than serving an id). Formatted only when
/// written: into the response header from a stack buffer, or into a log line or span.
#[derive(Clone, Copy, Debug)]
pub struct RequestId {
    /// The prefix's eight hex digits, formatted once per process.
    prefix: [u8; 8],
    n: u64,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl RequestId {
    /// The next id of this process.
    pub fn next() -> Self {
        static PREFIX: std::sync::OnceLock<[u8; 8]> = std::sync::OnceLock::new();
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let prefix = *PREFIX.get_or_init(|| {
            Self::hex_prefix(
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u32 ^ std::process::id().rotate_left(16))
                    .unwrap_or_default(),
            )
        });
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self { prefix, n }
    }

    /// The id of `prefix` and `n` (tests).
    #[cfg(test)]
    fn of(prefix: u32, n: u64) -> Self {
        Self {
            prefix: Self::hex_prefix(prefix),
            n,
        }
    }

    /// `prefix` as eight hex digits.
    fn hex_prefix(prefix: u32) -> [u8; 8] {
        let mut out = [0u8; 8];
        for (i, b) in out.iter_mut().enumerate() {
            *b = HEX[(prefix >> (28 - 4 * i) & 0xf) as usize];
        }
        out
    }

    /// `{prefix:08x}-{n:x}` into `buf`; the written bytes.
    fn write<'a>(&self, buf: &'a mut [u8; 25]) -> &'a [u8] {
        buf[..8].copy_from_slice(&self.prefix);
        buf[8] = b'-';
        let digits = (16 - self.n.leading_zeros() as usize / 4).max(1);
        for i in 0..digits {
            buf[9 + i] = HEX[(self.n >> (4 * (digits - 1 - i)) & 0xf) as usize];
        }
        &buf[..9 + digits]
    }

    /// The id as a header value (hex digits and a dash: always valid).
    ///
    /// Its own small allocation: cutting the values from a per-thread buffer instead (a
    /// reference count for a `malloc` and a `free`) measured 50 instructions more per request
    /// under callgrind (docs/benchmarks.md).
    pub fn header_value(&self) -> HeaderValue {
        let mut buf = [0u8; 25];
        let bytes = actix_web::web::Bytes::copy_from_slice(self.write(&mut buf));
        // SAFETY: `write` writes only hex digits and one dash, all visible ASCII, which a header
        // value may hold (RFC 9110 §5.5); the check `from_bytes` makes would only repeat that
        // (`request_ids_are_valid_header_values` tries every digit).
        unsafe { HeaderValue::from_maybe_shared_unchecked(bytes) }
    }
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut buf = [0u8; 25];
        // ASCII by construction.
        f.write_str(std::str::from_utf8(self.write(&mut buf)).map_err(|_| std::fmt::Error)?)
    }
}

/// Middleware: a request id (the `x-request-id` response header and the `request` span every
/// log line of the request carries), the default response headers of
/// [`super::headers::apply_defaults`] (nothing cacheable unless a route says so), and one
/// counter increment and one histogram observation
/// per request, labelled by method, the matched route pattern and status.
///
/// The span is at INFO for every route but the id routes, where it is at DEBUG: recording a
/// span's fields costs about as much as serving an id, so at the default `info` level the hot
/// routes carry only the header. Server errors are logged at ERROR with the id either way.
///
/// Per request it allocates nothing of its own but the header value: the id is formatted from
/// a stack buffer, the route label is a `&'static str` registered with the hot routes, and the
/// metrics registry is held by the middleware rather than cloned out of the app data.
#[derive(Clone)]
pub struct Telemetry {
    metrics: Arc<Metrics>,
    /// `server.body_timeout_ms` ([`super::body_deadline`]).
    body_timeout: std::time::Duration,
}

impl Telemetry {
    /// The middleware, counting into `metrics`; request bodies must arrive within
    /// `body_timeout`.
    pub fn new(metrics: Arc<Metrics>, body_timeout: std::time::Duration) -> Self {
        Self {
            metrics,
            body_timeout,
        }
    }
}

impl<S> Transform<S, ServiceRequest> for Telemetry
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>,
    S::Future: Unpin,
{
    type Response = ServiceResponse<BoxBody>;
    type Error = actix_web::Error;
    type Transform = TelemetryService<S>;
    type InitError = ();
    type Future = std::future::Ready<Result<Self::Transform, ()>>;

    fn new_transform(&self, service: S) -> Self::Future {
        std::future::ready(Ok(TelemetryService {
            service,
            worker: Rc::new(Worker {
                metrics: self.metrics.clone(),
                children: StaticChildren::default(),
                body_timeout: self.body_timeout,
            }),
        }))
    }
}

/// What a worker's [`TelemetryService`] shares with its requests' futures, behind an `Rc`:
/// cloning that per request is a plain increment, unlike an `Arc` (or `web::Data`) clone.
struct Worker {
    metrics: Arc<Metrics>,
    /// This worker's labelled HTTP series of the routes with a [`RouteLabel`].
    children: StaticChildren,
    body_timeout: std::time::Duration,
}

/// The service of [`Telemetry`].
pub struct TelemetryService<S> {
    service: S,
    worker: Rc<Worker>,
}

impl<S> Service<ServiceRequest> for TelemetryService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<BoxBody>, Error = actix_web::Error>,
    S::Future: Unpin,
{
    type Response = ServiceResponse<BoxBody>;
    type Error = actix_web::Error;
    type Future = TelemetryFuture<S::Future>;

    actix_web::dev::forward_ready!(service);

    fn call(&self, mut req: ServiceRequest) -> Self::Future {
        let started = boot_now();
        let held = super::body_deadline::apply(&mut req, self.worker.body_timeout);
        // The connection is not idle while this request is served (`super::idle`).
        let in_flight = req
            .conn_data::<super::idle::Registered>()
            .map(|r| r.conn().begin());
        let request_id = RequestId::next();
        // Disabled spans (the id routes at `info`) record nothing and format nothing.
        // Method and path are the client's: escaped and bounded (`ClientText`).
        let (method, path) = (ClientText(req.method().as_str()), ClientText(req.path()));
        let span = if is_id_route(req.path()) {
            tracing::debug_span!("request", request_id = %request_id, method = %method, path = %path)
        } else {
            tracing::info_span!("request", request_id = %request_id, method = %method, path = %path)
        };
        let method = req.method().clone();
        ANSWERED_BY.set(None);
        let inner = {
            let _entered = span.enter();
            self.service.call(req)
        };
        let label = ANSWERED_BY.take();
        TelemetryFuture {
            inner,
            started,
            request_id,
            span,
            method,
            worker: Rc::clone(&self.worker),
            held,
            label,
            _in_flight: in_flight,
        }
    }
}

/// The future of [`TelemetryService`]: the inner call in the request's span, then the
/// bookkeeping. No box: the app's routing future is already one.
pub struct TelemetryFuture<F> {
    inner: F,
    /// The boot clock when the request came in (`boot_now`: one vDSO read, no checked
    /// `Instant` arithmetic).
    started: std::time::Duration,
    request_id: RequestId,
    span: tracing::Span,
    method: Method,
    worker: Rc<Worker>,
    /// The request's payload, when it has a body: held by the answer's body
    /// ([`super::body_deadline::Held`]).
    held: Option<Rc<std::cell::RefCell<actix_web::dev::Payload>>>,
    /// The label of the prefix route that took the request, if one did (`ANSWERED_BY`).
    label: Option<&'static str>,
    /// The connection's in-flight mark (`super::idle`), until this future is dropped.
    _in_flight: Option<super::idle::InFlight>,
}

impl<F> Future for TelemetryFuture<F>
where
    F: Future<Output = Result<ServiceResponse<BoxBody>, actix_web::Error>> + Unpin,
{
    type Output = Result<ServiceResponse<BoxBody>, actix_web::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut result = {
            let _entered = this.span.enter();
            std::task::ready!(Pin::new(&mut this.inner).poll(cx))
        };
        let secs = boot_now().saturating_sub(this.started).as_secs_f64();
        let (route, status) = match &result {
            Ok(res) => (
                this.label
                    .map(Cow::Borrowed)
                    .or_else(|| route_label(res.request())),
                res.status(),
            ),
            Err(e) => (None, e.as_response_error().status_code()),
        };
        let route = route.unwrap_or(Cow::Borrowed(UNMATCHED));
        if status.is_server_error() {
            let code = match &result {
                Ok(res) => res
                    .response()
                    .error()
                    .and_then(|e| e.as_error::<Error>())
                    .map_or("other", Error::code),
                Err(e) => e.as_error::<Error>().map_or("other", Error::code),
            };
            this.worker.metrics.count_server_error(code);
            // One line per cause per interval: an outage answers every request with a 503.
            if let Some(held) = LogLimiter::global().allow(code) {
                let _entered = this.span.enter();
                tracing::error!(
                    request_id = %this.request_id, status = status.as_u16(), code,
                    route = &*route, held_back = held,
                    "request failed (this cause is logged once per 10 s; leafid_http_server_errors_total counts every one)"
                );
            }
        }
        let worker = &*this.worker;
        match route {
            Cow::Borrowed(route) => worker.metrics.observe_http_static(
                &worker.children,
                this.method.as_str(),
                route,
                status.as_u16(),
                secs,
            ),
            Cow::Owned(route) => {
                worker
                    .metrics
                    .observe_http(this.method.as_str(), &route, status.as_u16(), secs);
            }
        }
        if let Ok(res) = &mut result {
            let headers = res.headers_mut();
            // Appended: the request id is this middleware's alone (no handler sets it), so
            // there is nothing to replace (an insert would hand back an empty `Removed`).
            headers.append(REQUEST_ID_NAME, this.request_id.header_value());
            if this.label.is_some() {
                // A prefix route's handler sets none of the defaults (its contract).
                super::headers::append_defaults(headers);
            } else {
                super::headers::apply_defaults(headers);
            }
        }
        // A request with a body: its payload lives until the answer is written, so a body not
        // read to its end closes the connection (`body_deadline`); the hot path, no body, is
        // the app's answer as it is (no `EitherBody` to map into and to poll through).
        Poll::Ready(result.map(|res| match this.held.take() {
            None => res,
            Some(payload) => res.map_body(|_, body| BoxBody::new(Held::new(body, payload))),
        }))
    }
}

/// The metrics label of the route that answered: the [`RouteLabel`] registered with it (no
/// allocation), else the matched pattern; `None` when no route matched.
fn route_label(req: &HttpRequest) -> Option<Cow<'static, str>> {
    match req.app_data::<RouteLabel>() {
        Some(label) => Some(Cow::Borrowed(label.0)),
        None => req.match_pattern().map(Cow::Owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The prefix route against what could go wrong with it: the tail, the prefix alone, a
    /// longer word that only starts with the prefix, other methods (they must fall through,
    /// not be answered here), a handler's error (kept in the answer, where its code is read),
    /// and the label and headers the middleware puts on every answer.
    /// The request id and the three default headers, each exactly once (the prefix route's
    /// answers get them appended: `headers::append_defaults`).
    fn assert_one_of_each_default(headers: &actix_web::http::header::HeaderMap, path: &str) {
        for (name, value) in [
            ("cache-control", Some("no-store")),
            ("expires", Some("0")),
            ("x-content-type-options", Some("nosniff")),
            (REQUEST_ID_HEADER, None),
        ] {
            let values: Vec<_> = headers.get_all(name).collect();
            assert_eq!(values.len(), 1, "{name} on {path}: {values:?}");
            if let Some(v) = value {
                assert_eq!(values[0], v, "{name} on {path}");
            }
        }
    }

    #[actix_web::test]
    async fn the_prefix_route_matches_like_a_scope_and_keeps_errors_and_labels() {
        use actix_web::test::{TestRequest, call_service, init_service, read_body};

        async fn echo(req: HttpRequest, _state: Rc<web::Data<u8>>) -> Result<HttpResponse, Error> {
            match req.match_info().unprocessed() {
                "/fail" => Err(Error::Internal),
                tail => Ok(HttpResponse::Ok().body(format!("[{tail}]"))),
            }
        }
        let metrics = Arc::new(Metrics::new(None, None).unwrap());
        let app = init_service(
            actix_web::App::new()
                .wrap(Telemetry::new(
                    metrics.clone(),
                    std::time::Duration::from_secs(5),
                ))
                .app_data(web::Data::new(7u8))
                .service(labeled_get_prefix("/p", "/p/{rest:.*}", echo))
                .default_service(web::to(|| async { HttpResponse::NotFound().body("next") })),
        )
        .await;
        for (method, path, status, body) in [
            (Method::GET, "/p/a%2Fb/c", 200, "[/a%2Fb/c]"),
            (Method::GET, "/p", 200, "[]"),
            (Method::GET, "/p/", 200, "[/]"),
            (Method::GET, "/px", 404, "next"),
            (Method::POST, "/p/a", 404, "next"),
            (Method::HEAD, "/p/a", 404, "next"),
        ] {
            let req = TestRequest::default()
                .method(method.clone())
                .uri(path)
                .to_request();
            let res = call_service(&app, req).await;
            assert_eq!(res.status().as_u16(), status, "{method} {path}");
            assert_one_of_each_default(res.headers(), path);
            assert_eq!(read_body(res).await, body.as_bytes(), "{method} {path}");
        }
        let res = call_service(&app, TestRequest::get().uri("/p/fail").to_request()).await;
        assert_eq!(res.status().as_u16(), 500);
        assert_one_of_each_default(res.headers(), "/p/fail");
        assert!(
            res.response().error().is_some(),
            "the error stays in the answer"
        );
        let text = metrics.render().unwrap();
        for series in [
            r#"leafid_http_requests_total{method="GET",route="/p/{rest:.*}",status="200"} 3"#,
            r#"leafid_http_requests_total{method="GET",route="/p/{rest:.*}",status="500"} 1"#,
            r#"leafid_http_server_errors_total{code="internal"} 1"#,
            r#"leafid_http_requests_total{method="POST",route="unmatched",status="404"} 1"#,
        ] {
            assert!(text.contains(series), "{series} in\n{text}");
        }
    }

    #[test]
    fn request_ids_format_like_before() {
        for (prefix, n) in [
            (0, 0),
            (0xdead_beef, 1),
            (0x0123_4567, 0xabc),
            (u32::MAX, u64::MAX),
        ] {
            let id = RequestId::of(prefix, n);
            assert_eq!(id.to_string(), format!("{prefix:08x}-{n:x}"));
            assert_eq!(id.header_value().to_str().unwrap(), id.to_string());
        }
        let (a, b) = (RequestId::next(), RequestId::next());
        assert_ne!(a.to_string(), b.to_string());
    }

    /// The prefix route does not box its handler's future: Leaf's handlers keep theirs small
    /// (their slow paths' awaits boxed), or every request would copy it on each move.
    #[test]
    fn the_leaf_handlers_futures_stay_small() {
        // The size of a handler's future, from its type alone (nothing is called).
        fn future_size<A, B, F: Future>(_: impl Fn(A, B) -> F) -> usize {
            std::mem::size_of::<F>()
        }
        let segment = future_size(crate::http::segment::get_leaf);
        let snowflake = future_size(crate::http::snowflake::get_leaf);
        assert!(segment <= 512, "segment's get_leaf future: {segment} bytes");
        assert!(
            snowflake <= 512,
            "snowflake's get_leaf future: {snowflake} bytes"
        );
    }

    /// `header_value` skips the header check: every id it can make must pass it.
    #[test]
    fn request_ids_are_valid_header_values() {
        for prefix in [0, 0x0123_4567, 0x89ab_cdef, u32::MAX] {
            for shift in 0..64 {
                for n in [
                    1u64 << shift,
                    (1u64 << shift).wrapping_sub(1),
                    u64::MAX >> shift,
                ] {
                    let id = RequestId::of(prefix, n);
                    let v = id.header_value();
                    assert!(HeaderValue::from_bytes(v.as_bytes()).is_ok(), "{id}");
                    assert_eq!(v.to_str().unwrap(), id.to_string());
                }
            }
        }
    }
}
