//! The gRPC baseline of `scripts/bench-grpc.sh` and `scripts/bench-instructions.sh`: a tonic
//! hello-world server for leafid's own proto. `Segment.NextIds` answers one constant id (the
//! size of a real one) and does nothing else, so a leafid call's cost against it is leafid's own
//! work: the id service, its checks, metrics, logs, the thread hop. Every other method is
//! `unimplemented`. A plain `tonic::transport::Server` with no layers, on a multi-thread tokio
//! runtime with as many workers as leafid's gRPC runtime gets.
//!
//! `HELLO_PORT` (default 19090), `HELLO_WORKERS` (default: one per core).

use std::pin::Pin;

use leafid::grpc::pb;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};

/// The constant answer's id: 19 digits, as a real id's varint.
const ID: i64 = 1_234_567_890_123_456_789;

struct Hello;

type Replies = Pin<Box<dyn Stream<Item = Result<pb::RangesReply, Status>> + Send>>;

#[tonic::async_trait]
impl pb::segment_server::Segment for Hello {
    async fn next_ids(
        &self,
        req: Request<pb::NextIdsRequest>,
    ) -> Result<Response<pb::IdsReply>, Status> {
        Ok(Response::new(pb::IdsReply {
            biz_tag: req.into_inner().biz_tag,
            ids: vec![ID],
            strict: false,
        }))
    }

    async fn next_ranges(
        &self,
        _: Request<pb::NextRangesRequest>,
    ) -> Result<Response<pb::RangesReply>, Status> {
        Err(Status::unimplemented("hello answers NextIds only"))
    }

    async fn next_formatted_ids(
        &self,
        _: Request<pb::NextIdsRequest>,
    ) -> Result<Response<pb::FormattedIdsReply>, Status> {
        Err(Status::unimplemented("hello answers NextIds only"))
    }

    async fn decode(
        &self,
        _: Request<pb::DecodeRequest>,
    ) -> Result<Response<pb::DecodeReply>, Status> {
        Err(Status::unimplemented("hello answers NextIds only"))
    }

    type StreamRangesStream = Replies;

    async fn stream_ranges(
        &self,
        _: Request<pb::StreamRangesRequest>,
    ) -> Result<Response<Replies>, Status> {
        Err(Status::unimplemented("hello answers NextIds only"))
    }

    type PullRangesStream = Replies;

    async fn pull_ranges(
        &self,
        _: Request<Streaming<pb::PullRequest>>,
    ) -> Result<Response<Replies>, Status> {
        Err(Status::unimplemented("hello answers NextIds only"))
    }
}

fn env_number(name: &str) -> Option<usize> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = env_number("HELLO_PORT").unwrap_or(19090);
    let workers = env_number("HELLO_WORKERS")
        .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
        .unwrap_or(1);
    // No subscriber, and none of tracing's fallback to the `log` crate either (tonic's and h2's
    // spans would otherwise go through `Span::log` on every call: 8% of this server's
    // instructions): the baseline does no logging work at all.
    tracing::subscriber::set_global_default(tracing::subscriber::NoSubscriber::default())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers.max(1))
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], u16::try_from(port)?));
        tonic::transport::Server::builder()
            .add_service(pb::segment_server::SegmentServer::new(Hello))
            .serve_with_shutdown(addr, async {
                // Stopped by SIGINT or SIGTERM, so callgrind writes its totals.
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                        .expect("a SIGTERM handler");
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            })
            .await?;
        Ok(())
    })
}
