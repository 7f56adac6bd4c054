//! The hello-world baseline of `examples/hello.rs` with the shape of leafid's answer on Leaf's
//! route, for `scripts/bench-instructions.sh` to tell the framework's share of the difference
//! from leafid's own: the handler answers the benchmark's path
//! (`/api/segment/get/leaf-segment-test`, a static resource, no regex) with the same 19-digit
//! body and, with `HELLO_HEADERS=1`, the four headers every leafid answer carries
//! (`x-request-id` from a counter, `Cache-Control: no-store`, `Expires: 0`,
//! `X-Content-Type-Options: nosniff`).
//!
//! `HELLO_PORT` (default 18080), `HELLO_WORKERS` (default: one per core), `HELLO_HEADERS`.

use std::sync::atomic::{AtomicU64, Ordering};

use actix_web::http::header::{self, HeaderName, HeaderValue};
use actix_web::{App, HttpResponse, HttpServer, web};

static NEXT: AtomicU64 = AtomicU64::new(0);

async fn hello() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("1234567890123456789")
}

async fn hello_headers() -> HttpResponse {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .insert_header((
            HeaderName::from_static("x-request-id"),
            HeaderValue::from(id),
        ))
        .insert_header((header::CACHE_CONTROL, HeaderValue::from_static("no-store")))
        .insert_header((header::EXPIRES, HeaderValue::from_static("0")))
        .insert_header((
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .body("1234567890123456789")
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let env = |name: &str| std::env::var(name).ok();
    let port: u16 = env("HELLO_PORT")
        .and_then(|p| p.parse().ok())
        .unwrap_or(18080);
    let headers = env("HELLO_HEADERS").is_some_and(|v| v == "1");
    let mut server = HttpServer::new(move || {
        let path = "/api/segment/get/leaf-segment-test";
        if headers {
            App::new().route(path, web::get().to(hello_headers))
        } else {
            App::new().route(path, web::get().to(hello))
        }
    });
    if let Some(w) = env("HELLO_WORKERS").and_then(|w| w.parse().ok()) {
        server = server.workers(w);
    }
    server.bind(("127.0.0.1", port))?.run().await
}
