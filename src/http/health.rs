//! `/health/live` (the process answers) and `/health/ready` (it can hand out ids).
//!
//! Ready means: the database answers a ping within a second, or, when it does not, every tag
//! that has served ids still holds its next segment in memory (it keeps serving through the
//! outage for a while). Otherwise 503 with the reason.

use std::time::Duration;

use actix_web::{HttpResponse, web};
use serde_json::json;

use super::AppState;
use super::error::ErrorBody;

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/health/live", web::get().to(live))
        .route("/health/ready", web::get().to(ready));
}

async fn live() -> HttpResponse {
    HttpResponse::Ok().json(json!({ "status": "ok" }))
}

async fn ready(state: web::Data<AppState>) -> HttpResponse {
    if let Some(engine) = state.snowflake.as_ref() {
        let status = engine.status();
        if status.suspended {
            return not_ready(
                "snowflake worker lease expired: issuing is suspended until it is renewed".into(),
            );
        }
        if status.time_left_secs <= 0 {
            return not_ready(format!(
                "snowflake layout {} ran out of time at {}",
                status.layout, status.exhausted_at
            ));
        }
    }
    let Some(segment) = state.segment.as_ref() else {
        return HttpResponse::Ok()
            .json(json!({ "status": "ready", "database": "not used by enabled engines" }));
    };
    let ping = tokio::time::timeout(Duration::from_secs(1), segment.store().ping()).await;
    if matches!(ping, Ok(Ok(()))) {
        let snowflake = state.snowflake.as_ref().map(|e| e.status());
        return HttpResponse::Ok()
            .json(json!({ "status": "ready", "database": "up", "snowflake": snowflake }));
    }
    let low: Vec<String> = segment
        .snapshots()
        .into_iter()
        .filter(|s| s.loads > 0 && !s.next_ready)
        .map(|s| s.biz_tag)
        .collect();
    if low.is_empty() {
        HttpResponse::Ok().json(json!({
            "status": "degraded",
            "database": "unreachable",
            "detail": "serving from buffered segments",
        }))
    } else {
        let shown: Vec<&str> = low.iter().take(10).map(String::as_str).collect();
        not_ready(format!(
            "database unreachable and buffers low for {} tag(s): {}",
            low.len(),
            shown.join(", ")
        ))
    }
}

fn not_ready(message: String) -> HttpResponse {
    HttpResponse::ServiceUnavailable()
        .insert_header(("Retry-After", "1"))
        .json(ErrorBody {
            code: "not_ready",
            message,
        })
}
