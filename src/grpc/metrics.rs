//! The door's metrics, in the server's registry (`/metrics`), with bounded labels:
//!
//! | family | type | labels | meaning |
//! | --- | --- | --- | --- |
//! | `leafid_grpc_requests_total` | counter | `method`, `code` | calls by method and gRPC status code |
//! | `leafid_grpc_request_duration_seconds` | histogram | `method` | time to the answer's headers |
//!
//! `method` is the path of a method this server serves, else `other` (a client cannot grow
//! the label set); `code` is the status's number, `0` when the answer starts well (a stream
//! that fails later is counted at its start), `other` for a value outside gRPC's 17.

use std::task::{Context, Poll};
use std::time::Instant;

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use tonic::codegen::{BoxFuture, Service, http};

/// Every method served, as its path: the `method` label's values (and `other`).
pub const METHODS: &[&str] = &[
    "/leafid.v1.Segment/NextIds",
    "/leafid.v1.Segment/NextRanges",
    "/leafid.v1.Segment/NextFormattedIds",
    "/leafid.v1.Segment/Decode",
    "/leafid.v1.Segment/StreamRanges",
    "/leafid.v1.Segment/PullRanges",
    "/leafid.v1.Snowflake/NextIds",
    "/leafid.v1.Snowflake/NextRanges",
    "/leafid.v1.Snowflake/Decode",
    "/leafid.v1.Snowflake/Bounds",
    "/leafid.v1.Tags/ListTags",
    "/leafid.v1.Tags/GetTag",
    "/leafid.v1.Tags/CreateTag",
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
];

/// The status codes' labels, by number.
const CODES: [&str; 17] = [
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16",
];

/// The `method` label of a request path.
pub fn method_label(path: &str) -> &'static str {
    method_index(path).map_or("other", |i| METHODS[i])
}

/// The index of `path` in [`METHODS`] (`None`: `other`).
fn method_index(path: &str) -> Option<usize> {
    METHODS.iter().position(|m| *m == path)
}

/// The `code` label of a `grpc-status` value (absent: `0`).
pub fn code_label(status: Option<&[u8]>) -> &'static str {
    code_index(status).map_or("other", |i| CODES[i])
}

/// The index of a `grpc-status` value in [`CODES`] (absent: `0`; `None`: `other`).
fn code_index(status: Option<&[u8]>) -> Option<usize> {
    let Some(v) = status else { return Some(0) };
    CODES.iter().position(|c| c.as_bytes() == v)
}

/// The `grpc-status` header, parsed once at compile time (a `&str` key is parsed per lookup).
const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");

/// One method's series, each made on its first use and kept: a call then costs no label
/// hashing or registry lookup (`with_label_values`, some 400 instructions a call). Bounded as
/// the labels are: one cell per method of [`METHODS`] and `other`, per code of [`CODES`],
/// `other` and `transport`.
#[derive(Default)]
struct Cells {
    calls: [std::sync::OnceLock<prometheus::IntCounter>; CODES.len() + 2],
    duration: std::sync::OnceLock<prometheus::Histogram>,
}

struct Families {
    calls: IntCounterVec,
    duration: HistogramVec,
    /// By method index, `other` last.
    cells: Box<[Cells]>,
}

impl Families {
    /// Counts one answered call of the method at `method` (an index, `METHODS.len()`: other)
    /// with the code at `code` (an index of `CODES`, then `other`, then `transport`).
    fn count(&self, method: usize, code: usize, seconds: f64) {
        let label = METHODS.get(method).copied().unwrap_or("other");
        let cells = &self.cells[method];
        let code_label = CODES.get(code).copied().unwrap_or(if code == CODES.len() {
            "other"
        } else {
            "transport"
        });
        cells.calls[code]
            .get_or_init(|| self.calls.with_label_values(&[label, code_label]))
            .inc();
        cells
            .duration
            .get_or_init(|| self.duration.with_label_values(&[label]))
            .observe(seconds);
    }
}

/// The families (none when they could not be registered: the calls are then not counted,
/// never refused); a tower layer over the door's services ([`Metered`]).
#[derive(Clone)]
pub struct GrpcMetrics {
    families: Option<std::sync::Arc<Families>>,
}

impl GrpcMetrics {
    /// The families, registered in `metrics` (the server's registry). A refusal (a duplicate
    /// name: a programming error) is logged, and the door serves uncounted.
    pub fn new(metrics: &crate::metrics::Metrics) -> Self {
        let families = Families::new(metrics)
            .map(std::sync::Arc::new)
            .inspect_err(|e| tracing::error!(error = %e, "grpc metrics not registered"))
            .ok();
        Self { families }
    }
}

impl Families {
    fn new(metrics: &crate::metrics::Metrics) -> Result<Self, crate::metrics::MetricsError> {
        let calls = IntCounterVec::new(
            Opts::new(
                "leafid_grpc_requests_total",
                "gRPC calls by method and status code",
            ),
            &["method", "code"],
        )
        .map_err(crate::metrics::MetricsError::from)?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "leafid_grpc_request_duration_seconds",
                "Time from a gRPC call to its answer's headers",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                1.0, 2.5,
            ]),
            &["method"],
        )
        .map_err(crate::metrics::MetricsError::from)?;
        metrics.register(Box::new(calls.clone()))?;
        metrics.register(Box::new(duration.clone()))?;
        let cells = (0..=METHODS.len()).map(|_| Cells::default()).collect();
        Ok(Self {
            calls,
            duration,
            cells,
        })
    }
}

impl<S> tower_layer::Layer<S> for GrpcMetrics {
    type Service = Metered<S>;

    fn layer(&self, inner: S) -> Metered<S> {
        Metered {
            inner,
            metrics: self.clone(),
        }
    }
}

/// A service counted by [`GrpcMetrics`].
#[derive(Clone)]
pub struct Metered<S> {
    inner: S,
    metrics: GrpcMetrics,
}

impl<S, B, RB> Service<http::Request<B>> for Metered<S>
where
    S: Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    RB: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<S::Response, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let method = method_index(req.uri().path()).unwrap_or(METHODS.len());
        let metrics = self.metrics.clone();
        let start = Instant::now();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let res = answer.await;
            if let Some(f) = &metrics.families {
                let code = match &res {
                    Ok(r) => code_index(r.headers().get(&GRPC_STATUS).map(|v| v.as_bytes()))
                        .unwrap_or(CODES.len()),
                    Err(_) => CODES.len() + 1,
                };
                f.count(method, code, start.elapsed().as_secs_f64());
            }
            res
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_bounded() {
        assert_eq!(
            method_label("/leafid.v1.Segment/NextIds"),
            "/leafid.v1.Segment/NextIds"
        );
        assert_eq!(method_label("/x.Y/Z"), "other");
        assert_eq!(method_label(""), "other");
        assert_eq!(code_label(None), "0");
        assert_eq!(code_label(Some(b"5")), "5");
        assert_eq!(code_label(Some(b"16")), "16");
        assert_eq!(code_label(Some(b"17")), "other");
        assert_eq!(code_label(Some(b"\xff")), "other");
    }
}
