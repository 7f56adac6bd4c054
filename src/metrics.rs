//! The Prometheus registry and every family the server exports (served by `GET /metrics`,
//! [`crate::http::metrics`]).
//!
//! Engine state is read at scrape time, never counted per id: ids issued come from each
//! segment buffer's ticket counter and retired segments, and from the snowflake ring's cursor
//! (or one relaxed add per request for the direct generator); loads, failures and the lease
//! latency histogram come from the buffers' load state, which the loader updates anyway. Only
//! HTTP requests are counted as they happen, once per request, by [`crate::http::middleware`].
//!
//! Every `biz_tag` is a tag, never a period row: a formatted tag's periods are folded into it
//! ([`crate::segment::views`]: counters summed, gauges of the current period), so the series
//! follow the tags, not the days. A scrape without the admin credential gets no
//! [`VOLUME_FAMILIES`] series of a permuted tag ([`Metrics::render_for`]).
//!
//! | family | type | labels | meaning |
//! | --- | --- | --- | --- |
//! | `leafid_ids_issued_total` | counter | `engine`, `biz_tag` | ids handed out (`biz_tag` empty for snowflake) |
//! | `leafid_segment_loads_total` | counter | `biz_tag` | successful segment leases |
//! | `leafid_segment_load_failures_total` | counter | `biz_tag` | failed or timed-out leases |
//! | `leafid_segment_regressions_total` | counter | `biz_tag` | leases at or below this server's high-water mark, refused or trimmed (the database lost committed leases) |
//! | `leafid_segment_load_duration_seconds` | histogram | `biz_tag` | latency of successful leases |
//! | `leafid_segment_step` | gauge | `biz_tag` | adaptive step of the last lease |
//! | `leafid_segment_db_step` | gauge | `biz_tag` | the DBA's step (floor of the adaptive step) |
//! | `leafid_segment_remaining_ids` | gauge | `biz_tag`, `segment` | ids left in the `current` and `next` segment |
//! | `leafid_segment_next_ready` | gauge | `biz_tag` | 1 when the next segment is loaded |
//! | `leafid_segment_tags` | gauge | | tags held (a formatted tag once) |
//! | `leafid_period_used_ratio` | gauge | `biz_tag`, `period` | share of a formatted tag's current period's sequence width leased (alert at 0.8) |
//! | `leafid_snowflake_worker_id` | gauge | | this server's worker id |
//! | `leafid_snowflake_time_left_seconds` | gauge | | seconds until the layout's time field runs out |
//! | `leafid_snowflake_suspended` | gauge | | 1 while issuing is suspended (lease not renewed) |
//! | `leafid_snowflake_ring_capacity` | gauge | | ring slots (cached generator) |
//! | `leafid_snowflake_ring_available` | gauge | | ids ready in the ring (cached generator) |
//! | `leafid_http_requests_total` | counter | `method`, `route`, `status` | requests by matched route pattern |
//! | `leafid_http_request_duration_seconds` | histogram | `method`, `route` | time to answer |
//! | `leafid_database_lossy_setting` | gauge | `setting`, `value` | 1 per database setting that can lose a committed lease in a crash (none when commits are durable; [`crate::store::durability`]) |
//! | `leafid_lane_refused` | gauge | | 1 while this server's own lane is refused: `lane_mismatch` (a slot mismatch, or two lane databases recording one slot; [`crate::segment::lanes::claims`]) |
//! | `leafid_caller_requests_total` | counter | `token` | id requests admitted by a caller token, by name (at most 1,000 names, the rest `~other`; [`crate::access::callers`]) |
//! | `leafid_caller_refused_total` | counter | `reason` | id requests refused: `unauthenticated` or `forbidden` |
//! | `leafid_log_lines_dropped_total` | counter | | log lines lost: stderr full, closed or blocked ([`crate::telemetry::sink`]) |

use std::sync::Arc;

use prometheus::core::{Collector, Desc};
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::{
    Encoder, Histogram as HistogramMetric, HistogramOpts, HistogramVec, IntCounter, IntCounterVec,
    Opts, Registry,
};

use crate::segment::SegmentAllocator;
use crate::segment::buffer::SegmentState;
use crate::snowflake::engine::SnowflakeEngine;

/// Why the metrics could not be set up or rendered.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The registry refused a family (a duplicate name: a programming error).
    #[error("metrics registry: {0}")]
    Registry(#[from] prometheus::Error),
    /// The text encoder produced invalid UTF-8 (cannot happen with valid label values).
    #[error("metrics text is not UTF-8")]
    Encoding(#[from] std::string::FromUtf8Error),
}

/// The server's metrics: its own registry (not the global one, so several servers can run in
/// one process, as the tests do) and the HTTP families the middleware updates.
pub struct Metrics {
    /// Distinguishes servers in the per-thread cache of label children.
    id: u64,
    /// Every family of this server.
    registry: Registry,
    /// `leafid_http_requests_total`.
    http_requests: IntCounterVec,
    /// `leafid_http_request_duration_seconds`.
    http_duration: HistogramVec,
    /// `leafid_http_server_errors_total`: 5xx answers by error code (bounded: the codes are
    /// the `Error` variants' static strings).
    server_errors: IntCounterVec,
    /// `leafid_http_idle_connections_total`: keep-alive connections the idle sweep closed, and
    /// connections it could not watch (`crate::http::idle`).
    idle: IntCounterVec,
    /// The segment engine, asked which tags' counts are secret at a scrape without the admin
    /// credential ([`Self::render_for`]).
    segment: Option<SegmentAllocator>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Registers the HTTP families and a collector reading the engines at scrape time.
    pub fn new(
        segment: Option<SegmentAllocator>,
        snowflake: Option<Arc<SnowflakeEngine>>,
    ) -> Result<Self, MetricsError> {
        let registry = Registry::new();
        let http_requests = IntCounterVec::new(
            Opts::new(
                "leafid_http_requests_total",
                "HTTP requests by method, matched route pattern and status",
            ),
            &["method", "route", "status"],
        )?;
        let http_duration = HistogramVec::new(
            HistogramOpts::new(
                "leafid_http_request_duration_seconds",
                "Time to answer an HTTP request, by method and matched route pattern",
            )
            .buckets(vec![
                0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.25, 1.0, 2.5,
            ]),
            &["method", "route"],
        )?;
        let server_errors = IntCounterVec::new(
            Opts::new(
                "leafid_http_server_errors_total",
                "5xx answers by error code (logged once per cause per 10 s, counted here)",
            ),
            &["code"],
        )?;
        let idle = IntCounterVec::new(
            Opts::new(
                "leafid_http_idle_connections_total",
                "Keep-alive connections closed idle by the sweep (outcome=closed), and connections \
                 it could not watch (outcome=unswept)",
            ),
            &["outcome"],
        )?;
        registry.register(Box::new(idle.clone()))?;
        registry.register(Box::new(server_errors.clone()))?;
        registry.register(Box::new(http_requests.clone()))?;
        registry.register(Box::new(http_duration.clone()))?;
        registry.register(Box::new(EngineCollector::new(segment.clone(), snowflake)?))?;
        registry.register(Box::new(LogCollector::new()?))?;
        static NEXT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Ok(Self {
            id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            registry,
            http_requests,
            http_duration,
            server_errors,
            idle,
            segment,
        })
    }

    /// Registers one more family, read at scrape time (e.g. the durability gauge).
    pub fn register(
        &self,
        collector: Box<dyn prometheus::core::Collector>,
    ) -> Result<(), MetricsError> {
        Ok(self.registry.register(collector)?)
    }

    /// Counts one answered request. `route` must be the matched pattern (bounded cardinality);
    /// `method` is whatever the client sent and is folded by [`method_label`] into one of ten
    /// values, so no client can add series.
    ///
    /// The labelled children are resolved once per thread and kept in a thread-local map:
    /// `with_label_values` takes the family's lock and hashes every label on each call.
    pub fn observe_http(&self, method: &str, route: &str, status: u16, secs: f64) {
        type Children = std::collections::HashMap<
            String,
            (IntCounter, HistogramMetric),
            foldhash::fast::RandomState,
        >;
        thread_local! {
            /// (server, status, method) -> route -> children; looked up by borrowed route, so
            /// nothing is allocated once a route has been seen.
            static CHILDREN: std::cell::RefCell<
                std::collections::HashMap<(u64, u16, u8), Children, foldhash::fast::RandomState>,
            > = std::cell::RefCell::new(Default::default());
        }
        let (method_key, method) = method_label(method);
        CHILDREN.with(|children| {
            let mut children = children.borrow_mut();
            let routes = children.entry((self.id, status, method_key)).or_default();
            if !routes.contains_key(route) {
                let made = (
                    self.http_requests
                        .with_label_values(&[method, route, &status.to_string()]),
                    self.http_duration.with_label_values(&[method, route]),
                );
                routes.insert(route.to_owned(), made);
            }
            let (count, duration) = &routes[route];
            count.inc();
            duration.observe(secs);
        });
    }

    /// Counts one answered request of a route whose label is a `&'static str` (the id routes'
    /// [`crate::http::middleware::RouteLabel`]), through `children`, one worker's cache: the
    /// same series as [`Self::observe_http`] with the same labels, found without hashing the
    /// route's text or touching a thread-local.
    pub fn observe_http_static(
        &self,
        children: &StaticChildren,
        method: &str,
        route: &'static str,
        status: u16,
        secs: f64,
    ) {
        let (method_key, method) = method_label(method);
        // The address and length of a `&'static str` name its bytes for the life of the
        // process (static memory is never freed or reused). Two keys with equal text (two
        // copies of one literal) are two entries holding the same series: `with_label_values`
        // answers the same child for the same labels, so nothing is counted apart.
        let key = (route.as_ptr() as usize, route.len(), status, method_key);
        let mut map = children.0.borrow_mut();
        let (count, duration) = map.entry(key).or_insert_with(|| {
            (
                self.http_requests
                    .with_label_values(&[method, route, &status.to_string()]),
                self.http_duration.with_label_values(&[method, route]),
            )
        });
        count.inc();
        duration.observe(secs);
    }

    /// Counts one 5xx answer with its error code.
    pub fn count_server_error(&self, code: &'static str) {
        self.server_errors.with_label_values(&[code]).inc();
    }

    /// One connection the keep-alive sweep closed (`closed`) or could not watch (`unswept`).
    pub fn count_idle(&self, outcome: &'static str) {
        self.idle.with_label_values(&[outcome]).inc();
    }

    /// Every family in the Prometheus text format, every series included (an admin's scrape).
    pub fn render(&self) -> Result<String, MetricsError> {
        self.render_for(true)
    }

    /// Every family in the Prometheus text format; without `reads_volume` (a scrape without
    /// the admin credential, `crate::access::Action::ReadVolume`) the series of
    /// [`VOLUME_FAMILIES`] are left out for every tag whose counts are secret (a permuted tag:
    /// [`SegmentAllocator::hides_volume`]).
    pub fn render_for(&self, reads_volume: bool) -> Result<String, MetricsError> {
        let mut families = self.registry.gather();
        if !reads_volume && let Some(engine) = &self.segment {
            hide_volume(&mut families, engine);
        }
        let mut out = Vec::with_capacity(8 * 1024);
        prometheus::TextEncoder::new().encode(&families, &mut out)?;
        Ok(String::from_utf8(out)?)
    }
}

/// One HTTP worker's cache of the labelled children of the HTTP families for routes labelled
/// by a `&'static str` ([`Metrics::observe_http_static`]), keyed by the label's address and
/// length, the status and the method's index in [`METHOD_LABELS`]. Bounded like the series
/// themselves: the labels are the routes' static strings, the statuses and methods fixed sets.
/// Not `Sync`: each worker thread holds its own (`crate::http::middleware`).
#[derive(Default)]
pub struct StaticChildren(std::cell::RefCell<StaticChildMap>);

/// (label address, label length, status, method index) -> the request counter and the
/// latency histogram of those labels.
type StaticChildMap = std::collections::HashMap<
    (usize, usize, u16, u8),
    (IntCounter, HistogramMetric),
    foldhash::fast::RandomState,
>;

/// The families whose series tell a tag's volume: ids issued, leases (each one a step of ids),
/// their latency histogram (whose count is the leases), the adaptive step (it grows with the
/// rate), the ids in memory and the period's fill. A permuted tag's series of these are shown
/// to admin scrapes only; its other series (failures, regressions, DB step, next ready) are
/// health, not volume, and stay.
pub const VOLUME_FAMILIES: [&str; 6] = [
    "leafid_ids_issued_total",
    "leafid_segment_loads_total",
    "leafid_segment_load_duration_seconds",
    "leafid_segment_step",
    "leafid_segment_remaining_ids",
    "leafid_period_used_ratio",
];

/// Drops the volume series of every secret tag; a family left with no series is dropped (the
/// text encoder refuses an empty one). The secret tags are read after the families were
/// gathered: a tag's spec is only ever learnt, so a tag secret when its series were made is
/// secret here too.
fn hide_volume(families: &mut Vec<MetricFamily>, engine: &SegmentAllocator) {
    let secret: std::collections::HashSet<String> = engine
        .activity()
        .into_iter()
        .filter(|a| a.volume_secret)
        .map(|a| a.biz_tag)
        .collect();
    for family in families.iter_mut() {
        if !VOLUME_FAMILIES.contains(&family.name()) {
            continue;
        }
        family.mut_metric().retain(|m| {
            !m.get_label().iter().any(|l| {
                l.name() == "biz_tag"
                    && (secret.contains(l.value()) || engine.hides_volume(l.value()))
            })
        });
    }
    families.retain(|f| !f.get_metric().is_empty());
}

/// Reads the engines when the registry is gathered.
struct EngineCollector {
    segment: Option<SegmentAllocator>,
    snowflake: Option<Arc<SnowflakeEngine>>,
    descs: Vec<Desc>,
}

/// The HTTP methods that get a label of their own: RFC 9110's eight and `PATCH`. Anything
/// else a client sends (`Z0000001`, a scanner's made-up verbs) is counted as `other`: the
/// method is the one request label a client chooses freely, so it is folded to a fixed set.
pub const METHOD_LABELS: [&str; 10] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "other",
];

/// The label of `method` and its index in [`METHOD_LABELS`] (exact, case-sensitive match, as
/// methods are: `get` is not `GET`).
pub fn method_label(method: &str) -> (u8, &'static str) {
    let i = METHOD_LABELS[..METHOD_LABELS.len() - 1]
        .iter()
        .position(|m| *m == method)
        .unwrap_or(METHOD_LABELS.len() - 1);
    (i as u8, METHOD_LABELS[i])
}

/// Name, help and labels of every family the collector produces.
const ENGINE_FAMILIES: &[(&str, &str, &[&str])] = &[
    (
        "leafid_ids_issued_total",
        "Ids handed out, by engine and tag (biz_tag is empty for snowflake)",
        &["engine", "biz_tag"],
    ),
    (
        "leafid_segment_loads_total",
        "Successful segment leases per tag",
        &["biz_tag"],
    ),
    (
        "leafid_segment_load_failures_total",
        "Failed or timed-out segment leases per tag",
        &["biz_tag"],
    ),
    (
        "leafid_segment_regressions_total",
        "Leases at or below this server's high-water mark of the tag, refused or trimmed (the database lost committed leases)",
        &["biz_tag"],
    ),
    (
        "leafid_segment_load_duration_seconds",
        "Latency of successful segment leases per tag",
        &["biz_tag"],
    ),
    (
        "leafid_segment_step",
        "Adaptive step of the tag's last lease",
        &["biz_tag"],
    ),
    (
        "leafid_segment_db_step",
        "The DBA's step of the tag (the floor of the adaptive step)",
        &["biz_tag"],
    ),
    (
        "leafid_segment_remaining_ids",
        "Ids left in the tag's current and next segment",
        &["biz_tag", "segment"],
    ),
    (
        "leafid_segment_next_ready",
        "1 when the tag's next segment is loaded and waiting",
        &["biz_tag"],
    ),
    (
        "leafid_segment_tags",
        "Tags held by the segment engine (a formatted tag counts once, whatever its periods)",
        &[],
    ),
    (
        "leafid_period_used_ratio",
        "Share of a formatted tag's current period's sequence width leased (0 to 1)",
        &["biz_tag", "period"],
    ),
    ("leafid_snowflake_worker_id", "This server's worker id", &[]),
    (
        "leafid_snowflake_time_left_seconds",
        "Seconds until the snowflake layout's time field runs out",
        &[],
    ),
    (
        "leafid_snowflake_suspended",
        "1 while snowflake issuing is suspended (worker lease not renewed)",
        &[],
    ),
    (
        "leafid_snowflake_ring_capacity",
        "Slots of the cached generator's ring",
        &[],
    ),
    (
        "leafid_snowflake_ring_available",
        "Ids ready in the cached generator's ring",
        &[],
    ),
];

impl EngineCollector {
    fn new(
        segment: Option<SegmentAllocator>,
        snowflake: Option<Arc<SnowflakeEngine>>,
    ) -> Result<Self, MetricsError> {
        let descs = ENGINE_FAMILIES
            .iter()
            .map(|(name, help, labels)| {
                Desc::new(
                    (*name).to_owned(),
                    (*help).to_owned(),
                    labels.iter().map(|l| (*l).to_owned()).collect(),
                    Default::default(),
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            segment,
            snowflake,
            descs,
        })
    }
}

/// A family being filled at scrape time.
struct Family(MetricFamily);

impl Family {
    fn new(name: &str, kind: MetricType) -> Self {
        let help = ENGINE_FAMILIES
            .iter()
            .find(|(n, _, _)| *n == name)
            .map_or("", |(_, h, _)| h);
        let mut f = MetricFamily::default();
        f.set_name(name.to_owned());
        f.set_help(help.to_owned());
        f.set_field_type(kind);
        Self(f)
    }

    fn metric(&mut self, labels: &[(&str, &str)]) -> &mut Metric {
        // Sorted by name, as the crate's own vectors print them.
        let mut labels = labels.to_vec();
        labels.sort_unstable();
        let pairs = labels
            .iter()
            .map(|(k, v)| {
                let mut p = LabelPair::default();
                p.set_name((*k).to_owned());
                p.set_value((*v).to_owned());
                p
            })
            .collect();
        self.0.mut_metric().push(Metric::from_label(pairs));
        self.0.mut_metric().last_mut().expect("just pushed")
    }

    fn counter(&mut self, labels: &[(&str, &str)], value: f64) {
        let mut c = Counter::default();
        c.set_value(value);
        self.metric(labels).set_counter(c);
    }

    fn gauge(&mut self, labels: &[(&str, &str)], value: f64) {
        let mut g = Gauge::default();
        g.set_value(value);
        self.metric(labels).set_gauge(g);
    }

    fn histogram(&mut self, labels: &[(&str, &str)], h: &crate::segment::load_stats::LoadLatency) {
        let mut p = Histogram::default();
        p.set_sample_count(h.count());
        p.set_sample_sum(h.sum_secs());
        p.set_bucket(
            h.cumulative()
                .map(|(le, n)| {
                    let mut b = Bucket::default();
                    b.set_upper_bound(le);
                    b.set_cumulative_count(n);
                    b
                })
                .collect(),
        );
        self.metric(labels).set_histogram(p);
    }

    fn done(self, out: &mut Vec<MetricFamily>) {
        // The text encoder skips empty families; a family with no series says nothing anyway.
        if !self.0.get_metric().is_empty() {
            out.push(self.0);
        }
    }
}

impl Collector for EngineCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.descs.iter().collect()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        use MetricType::{COUNTER, GAUGE, HISTOGRAM};
        let mut out = Vec::new();
        let mut issued = Family::new("leafid_ids_issued_total", COUNTER);
        if let Some(engine) = &self.segment {
            let mut loads = Family::new("leafid_segment_loads_total", COUNTER);
            let mut failures = Family::new("leafid_segment_load_failures_total", COUNTER);
            let mut regressions = Family::new("leafid_segment_regressions_total", COUNTER);
            let mut latency = Family::new("leafid_segment_load_duration_seconds", HISTOGRAM);
            let mut step = Family::new("leafid_segment_step", GAUGE);
            let mut db_step = Family::new("leafid_segment_db_step", GAUGE);
            let mut remaining = Family::new("leafid_segment_remaining_ids", GAUGE);
            let mut next_ready = Family::new("leafid_segment_next_ready", GAUGE);
            let mut tags = Family::new("leafid_segment_tags", GAUGE);
            let mut period = Family::new("leafid_period_used_ratio", GAUGE);
            // One view per tag: a formatted tag's periods are folded into it (counters summed
            // over its periods, gauges of the current period), so the series count follows
            // the tags, never the days served.
            let views = engine.activity();
            tags.gauge(&[], views.len() as f64);
            for a in &views {
                let tag = a.biz_tag.as_str();
                let by_tag = [("biz_tag", tag)];
                if let (Some(key), Some(used)) = (&a.period, a.used) {
                    period.gauge(&[("biz_tag", tag), ("period", key)], used);
                }
                issued.counter(
                    &[("engine", "segment"), ("biz_tag", tag)],
                    a.ids_issued as f64,
                );
                loads.counter(&by_tag, a.loads as f64);
                failures.counter(&by_tag, a.load_failures_total as f64);
                regressions.counter(&by_tag, a.regressions_total as f64);
                latency.histogram(&by_tag, &a.load_latency);
                let Some(s) = &a.current else { continue };
                step.gauge(&by_tag, s.step as f64);
                db_step.gauge(&by_tag, s.db_step as f64);
                let left = |state: SegmentState| -> u64 {
                    s.segments
                        .iter()
                        .filter(|seg| seg.state == state)
                        .map(|seg| seg.remaining)
                        .sum()
                };
                remaining.gauge(
                    &[("biz_tag", tag), ("segment", "current")],
                    left(SegmentState::Current) as f64,
                );
                remaining.gauge(
                    &[("biz_tag", tag), ("segment", "next")],
                    left(SegmentState::Ready) as f64,
                );
                next_ready.gauge(&by_tag, f64::from(u8::from(s.next_ready)));
            }
            for f in [
                loads,
                failures,
                regressions,
                latency,
                step,
                db_step,
                remaining,
                next_ready,
                tags,
                period,
            ] {
                f.done(&mut out);
            }
        }
        if let Some(engine) = &self.snowflake {
            let status = engine.status();
            issued.counter(
                &[("engine", "snowflake"), ("biz_tag", "")],
                status.ids_issued as f64,
            );
            let mut gauge = |name: &str, value: f64| {
                let mut f = Family::new(name, GAUGE);
                f.gauge(&[], value);
                f.done(&mut out);
            };
            gauge("leafid_snowflake_worker_id", status.worker_id as f64);
            gauge(
                "leafid_snowflake_time_left_seconds",
                status.time_left_secs as f64,
            );
            gauge(
                "leafid_snowflake_suspended",
                f64::from(u8::from(status.suspended)),
            );
            if let (Some(cap), Some(avail)) = (status.ring_capacity, status.ring_available) {
                gauge("leafid_snowflake_ring_capacity", cap as f64);
                gauge("leafid_snowflake_ring_available", avail as f64);
            }
        }
        issued.done(&mut out);
        out
    }
}

/// `leafid_log_lines_dropped_total`, read from the log sink at scrape time.
struct LogCollector {
    desc: Desc,
}

impl LogCollector {
    const NAME: &'static str = "leafid_log_lines_dropped_total";
    const HELP: &'static str =
        "Log lines dropped because stderr refused them (full disk, closed) or was too slow";

    fn new() -> Result<Self, MetricsError> {
        let desc = Desc::new(
            Self::NAME.to_owned(),
            Self::HELP.to_owned(),
            Vec::new(),
            Default::default(),
        )?;
        Ok(Self { desc })
    }
}

impl Collector for LogCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let mut family = MetricFamily::default();
        family.set_name(Self::NAME.to_owned());
        family.set_help(Self::HELP.to_owned());
        family.set_field_type(MetricType::COUNTER);
        let mut counter = Counter::default();
        counter.set_value(crate::telemetry::sink::dropped_lines() as f64);
        let mut metric = Metric::default();
        metric.set_counter(counter);
        family.mut_metric().push(metric);
        vec![family]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_fold_into_a_fixed_set_of_labels() {
        assert_eq!(method_label("GET"), (0, "GET"));
        assert_eq!(method_label("PATCH"), (8, "PATCH"));
        for odd in ["Z0000001", "get", "GETX", "PROPFIND", "", "GET\u{0}"] {
            assert_eq!(method_label(odd).1, "other", "{odd:?}");
        }
        // Methods sharing their first 8 bytes are not merged with a real one.
        assert_eq!(method_label("OPTIONSX").1, "other");
    }

    #[test]
    fn static_routes_count_into_the_same_series_as_by_text() {
        let m = Metrics::new(None, None).unwrap();
        let children = StaticChildren::default();
        // A copy of the label with another address: a second key, the same series.
        let copy: &'static str = String::from("/static/{x}").leak();
        m.observe_http("GET", "/static/{x}", 200, 0.001);
        for _ in 0..3 {
            m.observe_http_static(&children, "GET", "/static/{x}", 200, 0.001);
        }
        m.observe_http_static(&children, "GET", copy, 200, 0.001);
        m.observe_http_static(&children, "Z0000001", "/static/{x}", 200, 0.001);
        m.observe_http_static(&children, "GET", "/static/{x}", 503, 0.001);
        let text = m.render().unwrap();
        assert!(
            text.contains(
                r#"leafid_http_requests_total{method="GET",route="/static/{x}",status="200"} 5"#
            ),
            "{text}"
        );
        assert!(
            text.contains(r#"method="other",route="/static/{x}",status="200"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"method="GET",route="/static/{x}",status="503"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(
                r#"leafid_http_request_duration_seconds_count{method="GET",route="/static/{x}"} 6"#
            ),
            "{text}"
        );
    }

    #[test]
    fn ten_thousand_made_up_methods_add_no_series() {
        let m = Metrics::new(None, None).unwrap();
        m.observe_http("GET", "/x", 200, 0.001);
        let before = m.render().unwrap().len();
        for i in 0..10_000 {
            m.observe_http(&format!("Z{i:07}"), "/x", 200, 0.001);
        }
        let after = m.render().unwrap();
        // One `other` series per family, the rest counted in it.
        assert!(
            after.len() < before + 2_000,
            "{} -> {}",
            before,
            after.len()
        );
        assert!(
            after.contains(r#"method="other",route="/x",status="200"} 10000"#),
            "{after}"
        );
    }
}
