//! The gRPC door (issue 46): `proto/leafid/v1/leafid.proto`'s services over tonic, beside the
//! standard `grpc.health.v1.Health` and server reflection, on a port of its own (`[grpc]`).
//!
//! Its own port because actix-web and tonic are two separate HTTP/2 stacks: one listener
//! would need a byte-level router in front of both (and every HTTP request would pay for it),
//! while two ports cost one more line in a Service. Every call goes to the same
//! [`crate::service::IdService`] as HTTP, with the same access policy (caller and admin tokens
//! in the `authorization` metadata), so every id rule holds here as it does there.
//!
//! - [`status`]: the one mapping of `crate::error::Error` to a gRPC status.
//! - [`caller`]: credentials from metadata, the caller's deadline.
//! - [`door`]: the id service as every service holds it, and how a call runs it.
//! - [`segment`], [`snowflake`], [`tags`]: the services.
//! - [`health`]: the health statuses, from `/health/ready`'s verdict.
//! - [`metrics`]: calls by method and code, in the server's registry.

pub mod caller;
pub mod door;
pub mod health;
pub mod metrics;
pub mod segment;
pub mod snowflake;
pub mod status;
pub mod tags;

use actix_web::web;
use tokio_util::sync::CancellationToken;

use crate::http::AppState;

/// The messages and services compiled from `proto/leafid/v1/leafid.proto` by `build.rs`
/// (generated code: documented in the proto, not here).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("leafid.v1");
}

/// The proto's file descriptor set, served by reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/leafid_v1_descriptor.bin"));

/// Streams one connection may have open at once: hyper's own default, which tonic replaces
/// with no bound unless told. A client asking for more waits for one to end (HTTP/2's
/// `SETTINGS_MAX_CONCURRENT_STREAMS`); no caller can make a connection hold unbounded calls.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 200;

/// Serves every gRPC service on `listener` until `stop` is cancelled; in-flight calls finish
/// first (tonic's graceful shutdown). The id service's calls run on the runtime this runs on
/// ([`door`]). A request message longer than `max_message` bytes (HTTP's
/// `server.max_body_bytes`) is refused before it is decoded (`OUT_OF_RANGE`, tonic's answer).
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: web::Data<AppState>,
    max_message: usize,
    stop: CancellationToken,
) -> Result<(), tonic::transport::Error> {
    let door = door::Door::new(state.ids.clone());
    let metered = metrics::GrpcMetrics::new(&state.metrics);
    let (reporter, health) = tonic_health::server::health_reporter();
    // Every service known before the first call: NOT_SERVING until the first verdict (a
    // moment later), never NOT_FOUND.
    for name in ["", health::SEGMENT, health::SNOWFLAKE, health::TAGS] {
        reporter
            .set_service_status(name, tonic_health::ServingStatus::NotServing)
            .await;
    }
    tokio::spawn(health::follow_readiness(reporter, state, stop.clone()));
    // Reflection in both versions: v1, and v1alpha, which grpcurl falls back to and
    // grpcio-reflection's descriptor database speaks.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let (v1, v1alpha) = match (reflection().build_v1(), reflection().build_v1alpha()) {
        (Ok(v1), Ok(v1alpha)) => (Some(v1), Some(v1alpha)),
        (Err(e), _) | (_, Err(e)) => {
            // The descriptor sets are compiled in: a failure here is a build fault; the door
            // serves on without reflection rather than not at all.
            tracing::error!(error = %e, "grpc reflection: the compiled descriptors do not load");
            (None, None)
        }
    };
    let router = tonic::transport::Server::builder()
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .layer(metered)
        // Each call in a span with a request id of the same series as HTTP's
        // (`x-request-id`) and its method (bounded: the path of a served method, or of an
        // unknown one answered UNIMPLEMENTED at once).
        .trace_fn(|req| {
            let id = crate::http::middleware::RequestId::next();
            tracing::info_span!("grpc", request_id = %id, method = %req.uri().path())
        })
        .add_service(health.max_decoding_message_size(max_message))
        .add_service(
            pb::segment_server::SegmentServer::new(segment::Segment::new(door.clone()))
                .max_decoding_message_size(max_message),
        )
        .add_service(
            pb::snowflake_server::SnowflakeServer::new(snowflake::Snowflake::new(door.clone()))
                .max_decoding_message_size(max_message),
        )
        .add_service(
            pb::tags_server::TagsServer::new(tags::Tags::new(door))
                .max_decoding_message_size(max_message),
        )
        .add_optional_service(v1)
        .add_optional_service(v1alpha);
    router
        .serve_with_incoming_shutdown(incoming(listener), stop.cancelled_owned())
        .await
}

/// The connections accepted on `listener`, each with `TCP_NODELAY` set. Tonic sets it only on
/// listeners it binds itself; without it a stream's small messages wait for the reader's
/// delayed ACK (40 ms on Linux) between writes: measured 22 M ids/s on `StreamRanges` before,
/// against a thousand times that for one range answer over HTTP (docs/benchmarks.md).
fn incoming(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt;

    /// Every accepted connection has `TCP_NODELAY` on.
    #[tokio::test]
    async fn accepted_connections_send_without_delay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut accepted = super::incoming(listener);
        let _client = tokio::net::TcpStream::connect(addr).await.unwrap();
        let stream = accepted.next().await.expect("a connection").unwrap();
        assert!(stream.nodelay().unwrap());
    }
}
