//! The owner's door for forwarded strict-tag requests (`crate::service::strict`):
//! `POST /internal/v1/strict/{biz_tag}/ids?count=N` with the owner row's key in
//! `leafid-peer-key`. Not part of the public API (not in the OpenAPI document): only servers
//! that read the owner row know the key; any other caller gets `401 unauthorized`, or `503`
//! from a server that does not own the tag.

use actix_web::{HttpRequest, HttpResponse, web};
use serde::Serialize;

use super::AppState;
use crate::error::Error;
use crate::segment::BizTag;
use crate::service::strict::{FORWARD_ROUTE, PEER_KEY_HEADER};

/// Registers the forwarded-request route.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route(FORWARD_ROUTE, web::post().to(forwarded));
}

/// The query of a forwarded request.
#[derive(Debug, serde::Deserialize)]
pub struct ForwardQuery {
    /// Ids asked for.
    pub count: u64,
}

/// The answer to a forwarded request.
#[derive(Serialize)]
struct ForwardBody {
    ids: Vec<i64>,
}

async fn forwarded(
    req: HttpRequest,
    state: web::Data<AppState>,
    path: web::Path<String>,
    query: web::Query<ForwardQuery>,
) -> Result<HttpResponse, Error> {
    let tag = BizTag::parse(&path.into_inner())?;
    let key = req
        .headers()
        .get(PEER_KEY_HEADER)
        .and_then(|v| v.to_str().ok())
        .ok_or(Error::Unauthorized(
            "a forwarded request without its peer key",
        ))?;
    let ids = state.ids.strict_forwarded(&tag, query.count, key).await?;
    Ok(HttpResponse::Ok().json(ForwardBody { ids }))
}
