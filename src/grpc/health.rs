//! `grpc.health.v1.Health` (tonic-health) with `/health/ready`'s verdict: the overall status
//! (`""`) and each leafid service's follow the same function the HTTP route runs
//! (`crate::http::health::ready`, the one home of the rule), asked every [`EVERY`]. A service
//! whose engine is off is `NOT_SERVING` for good (its calls answer `engine_disabled`).

use std::time::Duration;

use actix_web::web;
use tokio_util::sync::CancellationToken;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

use crate::http::AppState;

/// How often the verdict is asked again: a Kubernetes probe's period is 10 s by default, so
/// the status it reads is at most this old.
pub const EVERY: Duration = Duration::from_secs(1);

/// The names of the services the health service reports, as clients ask for them.
pub const SEGMENT: &str = "leafid.v1.Segment";
/// The snowflake service's name.
pub const SNOWFLAKE: &str = "leafid.v1.Snowflake";
/// The tags service's name.
pub const TAGS: &str = "leafid.v1.Tags";

/// Sets every status from the readiness verdict now, then every [`EVERY`] until `stop`.
pub async fn follow_readiness(
    reporter: HealthReporter,
    state: web::Data<AppState>,
    stop: CancellationToken,
) {
    let mut last = None;
    loop {
        let ready = crate::http::health::ready(state.clone()).await.is_ok();
        if last != Some(ready) {
            tracing::info!(serving = ready, "grpc health status");
            last = Some(ready);
        }
        let status = |engine_on: bool| {
            if ready && engine_on {
                ServingStatus::Serving
            } else {
                ServingStatus::NotServing
            }
        };
        let segment = state.ids.segment_engine().is_some();
        let snowflake = state.ids.snowflake_engine().is_some();
        reporter.set_service_status("", status(true)).await;
        reporter.set_service_status(SEGMENT, status(segment)).await;
        reporter.set_service_status(TAGS, status(segment)).await;
        reporter
            .set_service_status(SNOWFLAKE, status(snowflake))
            .await;
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(EVERY) => {}
        }
    }
}
