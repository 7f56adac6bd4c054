//! `/health/live` (the process answers) and `/health/ready` (it can hand out ids).
//!
//! Ready means: the database answers a ping within a second, or, when it does not, every tag
//! that has served ids still holds its next segment in memory (it keeps serving through the
//! outage for a while). Otherwise 503 with the reason. A database whose settings can lose a
//! committed lease is not ready unless `database.allow_lossy_commits` is on; with it on, the
//! settings are listed in the body's `durability` field (`crate::store::durability`).

use std::time::Duration;

use actix_web::{HttpResponse, web};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::error::{Error, ErrorBody};
use super::snowflake::StatusBody;

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/health/live", web::get().to(live))
        .route("/health/ready", web::get().to(ready));
}

/// Body of `GET /health/live`.
#[derive(Debug, Serialize, ToSchema)]
pub struct LiveBody {
    /// Always `ok`.
    #[schema(value_type = String, example = "ok")]
    pub status: &'static str,
}

/// `GET /health/live`: 200 whenever the process answers HTTP.
#[utoipa::path(
    get,
    path = "/health/live",
    tag = "operations",
    responses((status = 200, description = "The process answers", body = LiveBody))
)]
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().json(LiveBody { status: "ok" })
}

/// Body of `GET /health/ready` when the server can hand out ids.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadyBody {
    /// `ready`, or `degraded` (database unreachable, ids still flowing from memory).
    #[schema(value_type = String, example = "ready")]
    pub status: &'static str,
    /// `up`, `unreachable`, or `not used by enabled engines`.
    #[schema(value_type = String)]
    pub database: &'static str,
    /// Why the server is degraded.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    pub detail: Option<&'static str>,
    /// The snowflake engine's state, when it is enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snowflake: Option<StatusBody>,
    /// The database settings that can lose a committed lease in a crash, accepted by
    /// `database.allow_lossy_commits = true` (absent when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub durability: Vec<LossySettingBody>,
}

/// One database setting that can lose a committed lease.
#[derive(Debug, Serialize, ToSchema)]
pub struct LossySettingBody {
    /// The setting as the database names it.
    #[schema(value_type = String, example = "innodb_flush_log_at_trx_commit")]
    pub setting: &'static str,
    /// Its value.
    #[schema(example = "0")]
    pub value: String,
    /// What a crash does with it.
    #[schema(value_type = String)]
    pub why: &'static str,
    /// What to set instead.
    #[schema(value_type = String)]
    pub fix: &'static str,
}

/// The last durability report's lossy settings.
fn durability(state: &AppState) -> Vec<LossySettingBody> {
    state
        .durability
        .report()
        .map(|r| {
            r.lossy
                .iter()
                .map(|s| LossySettingBody {
                    setting: s.name,
                    value: s.value.clone(),
                    why: s.why,
                    fix: s.fix,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `GET /health/ready`: 200 when ids can be handed out, else 503 `not_ready` with the reason.
#[utoipa::path(
    get,
    path = "/health/ready",
    tag = "operations",
    responses(
        (status = 200, description = "Ready (or degraded: serving from buffered segments)", body = ReadyBody),
        (status = 503, description = "`not_ready`, with the reason and `Retry-After`", body = ErrorBody),
    )
)]
pub async fn ready(state: web::Data<AppState>) -> Result<HttpResponse, Error> {
    if state.draining.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(Error::NotReady(
            "draining: the server is shutting down; requests are still served".into(),
        ));
    }
    if let Some(why) = state.durability.refusal() {
        return Err(Error::NotReady(why));
    }
    // A refused own lane (lane mismatch or a clash of slots) hands out no segment id.
    if let Some(why) = state.ids.segment_route().ok().and_then(|r| r.refused()) {
        return Err(Error::NotReady(format!("lane_mismatch: {why}")));
    }
    if let Some(engine) = state.ids.snowflake_engine() {
        let status = engine.status();
        if let Some(reason) = status.pending {
            return Err(Error::NotReady(reason));
        }
        if status.suspended {
            return Err(Error::NotReady(
                "snowflake worker lease expired: issuing is suspended until it is renewed".into(),
            ));
        }
        if status.time_left_secs <= 0 {
            return Err(Error::NotReady(format!(
                "snowflake layout {} ran out of time at {}",
                status.layout, status.exhausted_at
            )));
        }
    }
    let snowflake = state
        .ids
        .snowflake_engine()
        .map(|e| StatusBody::from(&e.status()));
    let Some(segment) = state.ids.segment_engine() else {
        return Ok(HttpResponse::Ok().json(ReadyBody {
            status: "ready",
            database: "not used by enabled engines",
            detail: None,
            snowflake,
            durability: durability(&state),
        }));
    };
    let ping = tokio::time::timeout(Duration::from_secs(1), segment.ping()).await;
    if matches!(ping, Ok(Ok(()))) {
        return Ok(HttpResponse::Ok().json(ReadyBody {
            status: "ready",
            database: "up",
            detail: None,
            snowflake,
            durability: durability(&state),
        }));
    }
    let low: Vec<String> = segment
        .current_snapshots()
        .into_iter()
        .filter(|s| s.loads > 0 && !s.next_ready)
        .map(|s| s.biz_tag)
        .collect();
    if low.is_empty() {
        Ok(HttpResponse::Ok().json(ReadyBody {
            status: "degraded",
            database: "unreachable",
            detail: Some("serving from buffered segments"),
            snowflake,
            durability: durability(&state),
        }))
    } else {
        let shown: Vec<&str> = low.iter().take(10).map(String::as_str).collect();
        Err(Error::NotReady(format!(
            "database unreachable and buffers low for {} tag(s): {}",
            low.len(),
            shown.join(", ")
        )))
    }
}
