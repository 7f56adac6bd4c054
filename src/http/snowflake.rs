//! Snowflake routes: Leaf's plain-text route and decoder, and the v1 batch and decode routes.

use std::sync::Arc;

use actix_web::{HttpResponse, web};
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::ApiError;
use super::segment::CountQuery;
use crate::layout_plan;
use crate::snowflake::engine::SnowflakeEngine;
use crate::snowflake::layout::BitLayout;

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/snowflake/get/{key:.*}", web::get().to(get_leaf))
        .route("/api/v1/snowflake/ids", web::get().to(get_batch))
        .route("/api/v1/snowflake/decode/{id}", web::get().to(get_decode))
        .route("/decodeSnowflakeId", web::get().to(get_leaf_decode));
}

/// Parses an id to decode: an integer within `0..=i64::MAX`, else `invalid_id`.
pub fn parse_id(text: &str) -> Result<u64, ApiError> {
    text.trim()
        .parse::<i64>()
        .ok()
        .and_then(|id| u64::try_from(id).ok())
        .ok_or_else(|| {
            ApiError::InvalidId(format!(
                "id {text:?} is not an integer within 0..={}",
                i64::MAX
            ))
        })
}

/// The decode body shared by the decode routes: the fields plus `id_str` and `layout`.
pub fn decode_body(layout: &BitLayout, id: u64) -> Value {
    let mut body = layout_plan::decode_json(layout, id);
    body["id_str"] = id.to_string().into();
    body["layout"] = layout.bits_string().into();
    body
}

async fn next_id(engine: &Arc<SnowflakeEngine>) -> Result<u64, ApiError> {
    if let Some(id) = engine.try_next_id() {
        return Ok(id?);
    }
    let engine = engine.clone();
    Ok(web::block(move || engine.next_id_blocking())
        .await
        .map_err(|_| ApiError::Internal)??)
}

/// `GET /api/snowflake/get/{key}`: the next id as plain text (Leaf-compatible; `key` is only
/// logged, as in Leaf).
async fn get_leaf(
    state: web::Data<AppState>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let engine = state.snowflake()?;
    tracing::debug!(key = %key, "snowflake id requested");
    let id = next_id(engine).await?;
    Ok(HttpResponse::Ok()
        .content_type("text/plain; charset=utf-8")
        .body(id.to_string()))
}

/// `GET /api/v1/snowflake/ids?count=N`: `{"ids": [..]}`, increasing.
async fn get_batch(
    state: web::Data<AppState>,
    query: web::Query<CountQuery>,
) -> Result<HttpResponse, ApiError> {
    let count = query.parse()?;
    let engine = state.snowflake()?.clone();
    let ids = if count == 1 {
        vec![next_id(&engine).await?]
    } else {
        web::block(move || engine.next_ids_blocking(count))
            .await
            .map_err(|_| ApiError::Internal)??
    };
    Ok(HttpResponse::Ok().json(json!({ "ids": ids })))
}

/// `GET /api/v1/snowflake/decode/{id}`: the id's fields under this server's layout.
async fn get_decode(
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let engine = state.snowflake()?;
    let id = parse_id(&id)?;
    Ok(HttpResponse::Ok().json(decode_body(engine.layout(), id)))
}

/// Query of Leaf's decoder.
#[derive(Debug, Deserialize)]
struct LeafDecodeQuery {
    #[serde(rename = "snowflakeId")]
    snowflake_id: Option<String>,
}

/// `GET /decodeSnowflakeId?snowflakeId=N`: Leaf's answer shape, every value a string:
/// `{"timestamp": "<ms>(<local time>)", "workerId", "sequenceId"}`, under this server's layout.
async fn get_leaf_decode(
    state: web::Data<AppState>,
    q: web::Query<LeafDecodeQuery>,
) -> Result<HttpResponse, ApiError> {
    let engine = state.snowflake()?;
    let raw = q
        .snowflake_id
        .as_deref()
        .ok_or_else(|| ApiError::InvalidId("snowflakeId is required".into()))?;
    let id = parse_id(raw)?;
    let layout = engine.layout();
    let fields = layout.decompose(id);
    let ms = layout.tick_start_unix_ms(fields.time_delta);
    let when = chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
        .unwrap_or_default();
    Ok(HttpResponse::Ok().json(json!({
        "timestamp": format!("{ms}({when})"),
        "workerId": fields.worker_id.to_string(),
        "sequenceId": fields.sequence.to_string(),
    })))
}
