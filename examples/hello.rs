//! The HTTP baseline of `scripts/bench-http.sh`: a hello-world actix-web handler returning a
//! 19-digit plain-text body (the size of an id), with the same worker count as leafid.
//!
//! `HELLO_PORT` (default 18080), `HELLO_WORKERS` (default: one per core).

use actix_web::{App, HttpResponse, HttpServer, web};

async fn hello() -> HttpResponse {
    HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body("1234567890123456789")
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("HELLO_PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(18080);
    let mut server = HttpServer::new(|| App::new().route("/", web::get().to(hello)));
    if let Some(w) = std::env::var("HELLO_WORKERS")
        .ok()
        .and_then(|w| w.parse().ok())
    {
        server = server.workers(w);
    }
    server.bind(("127.0.0.1", port))?.run().await
}
