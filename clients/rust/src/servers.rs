//! The server list: which server a batch is asked from, failover, backoff and health probes.
//!
//! Batches go to the *preferred* server (the last one that answered). A server that fails
//! (no answer, a 5xx, a 4xx other than a refusal of the request itself, a body that is not a
//! valid batch) is marked down and the next one is asked at once (a *failover*). A down server is not asked again until the health task (see
//! [`Servers::run_health_checks`]) gets a 200 from its `/health/ready`; it probes after an
//! exponential backoff (`backoff_min` doubling up to `backoff_max`) counted from each failure.
//! Only when every server is down does a fetch try the down ones too (last resort), so a client
//! never stalls behind a probe schedule while a server could answer.
//!
//! The only ids that leave this module come from the body of a 200 that parsed and passed
//! [`validate`] (runs of the range routes); a failed or partial answer contributes nothing.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::error::{Error, Fault, ServerFault};

/// Timing of requests, failover and probes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// Upper bound of one batch request (connect to last byte).
    pub request_timeout: Duration,
    /// Upper bound of one health probe.
    pub probe_timeout: Duration,
    /// First backoff after a failure; also the health task's tick.
    pub backoff_min: Duration,
    /// Largest backoff between two probes of a down server.
    pub backoff_max: Duration,
}

/// The servers of one client.
#[derive(Debug)]
pub(crate) struct Servers {
    /// The servers, in the order given to the builder.
    list: Box<[Server]>,
    /// Index of the server that answered last: asked first. Relaxed: a hint only; any index is
    /// a correct place to start, a stale one costs at most one failed request.
    preferred: AtomicUsize,
    /// One connection pool for every server.
    http: reqwest::Client,
    /// Timeouts and backoff.
    timing: Timing,
    /// `Authorization: Bearer <token>` sent on every batch and bounds request (never on the
    /// health probe), marked sensitive so that reqwest never shows it. `None`: no token.
    auth: Option<reqwest::header::HeaderValue>,
    /// The longest a fetch waits out `429 quota_exhausted` answers (the client's wait
    /// timeout): a `Retry-After` that would end past it is the caller's [`Error::Throttled`].
    wait: Duration,
}

/// One server.
#[derive(Debug)]
struct Server {
    /// Base URL without a trailing `/`.
    base: String,
    /// Up or down. A std Mutex: held for a few instructions, never across an await.
    health: Mutex<Health>,
}

/// Health of one server.
#[derive(Debug, Clone, Copy)]
struct Health {
    /// Set by a failed request or probe; cleared only by a 200 (a probe's, or a last-resort
    /// request's) to a request sent after the last failure.
    down: bool,
    /// Times it was marked down: a 200 to a request sent before the latest failure (an answer
    /// in flight when the server was killed) is older news than that failure and does not mark
    /// it up.
    downs: u64,
    /// Failures in a row (requests and probes): the backoff doubles with each.
    failures: u32,
    /// A down server is probed at or after this instant.
    next_probe: Instant,
}

/// What one server did with one request.
pub(crate) enum Outcome {
    /// It failed: mark it down, ask the next.
    Fault(Fault),
    /// It refused (a 4xx that holds on every server): final, the servers share one database.
    Rejected(Error),
    /// `429 quota_exhausted`: the caller token's quota is spent on every server (they share
    /// it): wait `retry_after` and ask the same server again; never a failover.
    Throttled {
        /// The server's `Retry-After` (1 s when absent or unreadable).
        retry_after: Duration,
        /// The error the caller gets when the wait would pass the wait timeout.
        error: Error,
    },
}

/// What the client does with an error answer (`clients/conformance/vectors/errors.json`'s
/// `action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Final: the same on every server; reaches the caller, no other server asked.
    Reject,
    /// That server's failure: mark it down, ask the next.
    Failover,
    /// `429 quota_exhausted`: wait `Retry-After`, ask the same server again.
    Wait,
}

/// Why a fetch brought no batch.
#[derive(Debug)]
pub(crate) enum FetchError {
    /// A server refused (a 4xx that holds on every server): final, no other server was asked.
    Rejected(Error),
    /// Every server failed; the last failure, if any server was asked.
    Unavailable(Option<ServerFault>),
}

/// A run of consecutive ids of a 200 body, both ends included: `0 < first <= last`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// Its first id.
    pub first: i64,
    /// Its last id.
    pub last: i64,
}

impl Run {
    /// Ids in the run.
    pub fn len(&self) -> u64 {
        // first <= last, both positive: no overflow.
        (self.last - self.first) as u64 + 1
    }
}

/// The success body of both range routes (`biz_tag` only on the segment one).
#[derive(Deserialize)]
struct RangesBody {
    #[serde(default)]
    biz_tag: Option<String>,
    count: u64,
    ranges: Vec<RangeBody>,
    /// `"strict": true` on a strict tag's answers (issue 45), absent for other tags. Only a
    /// JSON true counts (as in the other clients); any other value reads as not strict.
    #[serde(default)]
    strict: serde_json::Value,
}

/// One run of a body: decimal strings (the client asks with `stringify_ids=true`).
#[derive(Deserialize)]
struct RangeBody {
    first: AnyId,
    last: AnyId,
}

/// One id of a batch body: a JSON string `[1-9][0-9]{0,18}` within `1..=i64::MAX`. A JSON
/// number, a sign, a leading zero or spaces are not the answer asked for
/// (`clients/conformance/vectors/responses.json`).
struct AnyId(i64);

/// `v` as a canonical decimal within `0..=i64::MAX` (`"0"` only when `zero`).
pub(crate) fn canonical_decimal(v: &str, zero: bool) -> Option<i64> {
    let b = v.as_bytes();
    let ok = match b {
        [b'0'] => zero,
        [b'1'..=b'9', rest @ ..] => rest.len() <= 18 && rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if ok { v.parse().ok() } else { None }
}

impl<'de> Deserialize<'de> for AnyId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        canonical_decimal(&v, false).map(AnyId).ok_or_else(|| {
            serde::de::Error::custom(format!("id {v:?} is not a decimal within 1..=2^63-1"))
        })
    }
}

/// The error body of the server (`{"code", "message"}`), read leniently.
#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// What a batch request expects back.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The route without its query, e.g. `/api/v1/segment/orders/ranges`.
    pub route: String,
    /// Path and query, e.g. `/api/v1/segment/orders/ranges?count=1000&stringify_ids=true`.
    pub path: String,
    /// The ids asked for: a body with more is invalid.
    pub count: usize,
    /// The route's limit per request (1,000,000 segment, 100,000 snowflake).
    pub limit: usize,
    /// The tag the body must name (segment route), `None` for snowflake.
    pub tag: Option<String>,
    /// Whether the query asks `stringify_ids=true` (the range routes; not the list route of
    /// formatted tags, whose ids are text anyway and where a plain tag must answer numbers).
    pub stringify: bool,
}

/// A 200 body a supply takes: parsed and validated against its request, or refused.
pub(crate) trait Answer: Sized {
    /// The batch in `bytes`, or `Outcome::Fault` (that server's failure: the next is asked),
    /// or `Outcome::Rejected` (a refusal that holds on every server).
    fn parse(bytes: &[u8], req: &Request, server: &str) -> Result<Self, Outcome>;
}

/// The runs of one valid range answer, and whether it marked the tag strict.
#[derive(Debug)]
pub(crate) struct Ranges {
    /// Increasing, disjoint, at least one id.
    pub runs: Vec<Run>,
    /// The answer said `"strict": true` (issue 45): the tag is strict, its supply turns to
    /// pass-through (`supply.rs`).
    pub strict: bool,
}

impl Answer for Ranges {
    fn parse(bytes: &[u8], req: &Request, _server: &str) -> Result<Self, Outcome> {
        let body: RangesBody = serde_json::from_slice(bytes)
            .map_err(|e| Outcome::Fault(Fault::BadResponse(e.to_string())))?;
        let strict = body.strict == serde_json::Value::Bool(true);
        let runs = validate(body, req).map_err(|e| Outcome::Fault(Fault::BadResponse(e)))?;
        Ok(Self { runs, strict })
    }
}

impl Request {
    /// A request for `count` ids (decimal strings) on `route`, whose limit is `limit`.
    pub fn new(route: String, count: usize, limit: usize, tag: Option<String>) -> Self {
        Self {
            path: format!("{route}?count={count}&stringify_ids=true"),
            route,
            count,
            limit,
            tag,
            stringify: true,
        }
    }

    /// A request for `count` ids on the list route of a formatted tag (`?count=N` only).
    pub fn list(route: String, count: usize, limit: usize, tag: String) -> Self {
        Self {
            path: format!("{route}?count={count}"),
            route,
            count,
            limit,
            tag: Some(tag),
            stringify: false,
        }
    }

    /// The same request for `count` ids.
    pub fn with_count(&self, count: usize) -> Self {
        if self.stringify {
            Self::new(self.route.clone(), count, self.limit, self.tag.clone())
        } else {
            Self::list(
                self.route.clone(),
                count,
                self.limit,
                self.tag.clone().unwrap_or_default(),
            )
        }
    }
}

impl Servers {
    /// Servers from base URLs (already checked by the builder).
    pub fn new(
        bases: Vec<String>,
        http: reqwest::Client,
        timing: Timing,
        token: Option<&str>,
        wait: Duration,
    ) -> Result<Self, Error> {
        let auth = match token {
            None => None,
            Some(t) => {
                let mut v = reqwest::header::HeaderValue::from_str(&format!("Bearer {t}"))
                    .map_err(|_| Error::Config("the token is not a valid header value".into()))?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        let now = Instant::now();
        let list = bases
            .into_iter()
            .map(|base| Server {
                base,
                health: Mutex::new(Health {
                    down: false,
                    downs: 0,
                    failures: 0,
                    next_probe: now,
                }),
            })
            .collect();
        Ok(Self {
            list,
            preferred: AtomicUsize::new(0),
            http,
            timing,
            auth,
            wait,
        })
    }

    /// Base URL of the server asked first, and whether it is up.
    pub fn preferred(&self) -> (String, bool) {
        let s = &self.list[self.preferred.load(Ordering::Relaxed) % self.list.len()];
        (s.base.clone(), !s.health().down)
    }

    /// Base URLs of the servers marked down.
    pub fn down(&self) -> Vec<String> {
        self.list
            .iter()
            .filter(|s| s.health().down)
            .map(|s| s.base.clone())
            .collect()
    }

    /// One batch: the preferred server first, then the other up servers in order, then (last
    /// resort) the down ones. `Rejected` at the first refusal that holds on every server (a
    /// server-specific 4xx such as `engine_disabled` is a fault: the next is asked);
    /// `Unavailable` when all failed. Each request sent because the server asked before it
    /// failed adds one to `failovers`. The runs of a valid 200 body come back as they are
    /// (the supply cuts what lies at or below its floor), with the server that sent them; a
    /// formatted supply's texts the same way (`T` is the body it takes).
    pub async fn fetch<T: Answer>(
        &self,
        req: &Request,
        failovers: &AtomicU64,
    ) -> Result<(T, &str), FetchError> {
        let n = self.list.len();
        let start = self.preferred.load(Ordering::Relaxed) % n;
        let mut tried = vec![false; n];
        let mut last = None;
        // A quota wait (429 quota_exhausted) ends by this instant or not at all.
        let deadline = Instant::now() + self.wait;
        for last_resort in [false, true] {
            for k in 0..n {
                let i = (start + k) % n;
                if tried[i] || (!last_resort && self.list[i].health().down) {
                    continue;
                }
                tried[i] = true;
                if last.is_some() {
                    failovers.fetch_add(1, Ordering::Relaxed);
                }
                let seen = self.list[i].health().downs;
                // Asked again after each quota wait: the same server, never another (they
                // share the quota) and no failover counted. Bounded: every round sleeps at
                // least 1 s and the deadline ends the loop.
                let answer = loop {
                    match self.ask::<T>(i, req).await {
                        Err(Outcome::Throttled { retry_after, error }) => {
                            // The server answered: it is up, and asked first next time.
                            self.preferred.store(i, Ordering::Relaxed);
                            let wake = Instant::now() + retry_after;
                            if wake > deadline {
                                return Err(FetchError::Rejected(error));
                            }
                            tokio::time::sleep_until(wake).await;
                        }
                        other => break other,
                    }
                };
                match answer {
                    Ok(runs) => {
                        if self.list[i].mark_up_unless_down_since(seen) {
                            self.preferred.store(i, Ordering::Relaxed);
                        }
                        return Ok((runs, &self.list[i].base));
                    }
                    Err(Outcome::Rejected(e)) => return Err(FetchError::Rejected(e)),
                    Err(Outcome::Throttled { error, .. }) => {
                        return Err(FetchError::Rejected(error));
                    }
                    Err(Outcome::Fault(fault)) => {
                        self.list[i].mark_down(&self.timing);
                        last = Some(ServerFault {
                            server: self.list[i].base.clone(),
                            fault,
                        });
                    }
                }
            }
        }
        Err(FetchError::Unavailable(last))
    }

    /// One request to server `i`.
    async fn ask<T: Answer>(&self, i: usize, req: &Request) -> Result<T, Outcome> {
        let server = &self.list[i];
        let url = format!("{}{}", server.base, req.path);
        let mut get = self.http.get(&url).timeout(self.timing.request_timeout);
        if let Some(auth) = &self.auth {
            get = get.header(reqwest::header::AUTHORIZATION, auth.clone());
        }
        let resp = get
            .send()
            .await
            .map_err(|e| Outcome::Fault(Fault::Transport(transport_cause(&e))))?;
        let status = resp.status();
        if status != reqwest::StatusCode::OK {
            let retry_after = retry_after(resp.headers());
            let body: ErrorBody = resp.json().await.unwrap_or_default();
            match action(status.as_u16(), &body.code) {
                Action::Reject => {
                    return Err(Outcome::Rejected(Error::Rejected {
                        server: server.base.clone(),
                        status: status.as_u16(),
                        code: body.code,
                        message: body.message,
                    }));
                }
                Action::Wait => {
                    return Err(Outcome::Throttled {
                        retry_after,
                        error: Error::Throttled {
                            server: server.base.clone(),
                            code: body.code,
                            message: body.message,
                            retry_after,
                        },
                    });
                }
                Action::Failover => {}
            }
            if status.is_client_error() {
                return Err(Outcome::Fault(Fault::Refused {
                    status: status.as_u16(),
                    code: body.code,
                }));
            }
            return Err(Outcome::Fault(Fault::Status(status.as_u16())));
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| Outcome::Fault(Fault::Transport(transport_cause(&e))))?;
        T::parse(&bytes, req, &server.base)
    }

    /// Probes every down server whose backoff has passed, on each tick, until `stop`.
    pub async fn run_health_checks(self: Arc<Self>, stop: CancellationToken) {
        let mut tick = tokio::time::interval(self.timing.backoff_min);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = tick.tick() => {}
            }
            let now = Instant::now();
            let mut probes = JoinSet::new();
            for i in 0..self.list.len() {
                let h = self.list[i].health();
                if h.down && h.next_probe <= now {
                    let this = self.clone();
                    let seen = h.downs;
                    probes.spawn(async move {
                        let ok = this.probe(i).await;
                        if ok {
                            this.list[i].mark_up_unless_down_since(seen);
                        } else {
                            this.list[i].mark_down(&this.timing);
                        }
                    });
                }
            }
            // Dropping the set on cancellation aborts the probes still running.
            tokio::select! {
                () = stop.cancelled() => return,
                () = async { while probes.join_next().await.is_some() {} } => {}
            }
        }
    }

    /// Whether server `i` answers 200 on `/health/ready` within the probe timeout.
    async fn probe(&self, i: usize) -> bool {
        let url = format!("{}/health/ready", self.list[i].base);
        self.http
            .get(url)
            .timeout(self.timing.probe_timeout)
            .send()
            .await
            .is_ok_and(|r| r.status() == reqwest::StatusCode::OK)
    }
}

impl Server {
    fn health(&self) -> Health {
        *self.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Up after a 200 to a request sent when its `downs` was `seen`, unless it was marked down
    /// since; returns whether it is marked up.
    fn mark_up_unless_down_since(&self, seen: u64) -> bool {
        let mut h = self.health.lock().unwrap_or_else(|e| e.into_inner());
        if h.downs != seen {
            return false;
        }
        h.down = false;
        h.failures = 0;
        true
    }

    /// Down, next probe after `backoff_min * 2^(failures-1)`, at most `backoff_max`.
    fn mark_down(&self, timing: &Timing) {
        let mut h = self.health.lock().unwrap_or_else(|e| e.into_inner());
        h.down = true;
        h.downs += 1;
        h.failures = h.failures.saturating_add(1);
        h.next_probe = Instant::now() + backoff(timing, h.failures);
    }
}

/// What the client does with an error answer: final ([`refusal_is_final`]), a quota wait
/// (`429 quota_exhausted`, leafid's own code under its own status), or a failover (all else,
/// a proxy's 429 `rate_limited` included); `clients/conformance/vectors/errors.json`.
pub(crate) fn action(status: u16, code: &str) -> Action {
    if status == 429 && code == "quota_exhausted" {
        Action::Wait
    } else if refusal_is_final(status, code) {
        Action::Reject
    } else {
        Action::Failover
    }
}

/// The `Retry-After` of a `429 quota_exhausted` in whole seconds (leafid sends an integer
/// `>= 1`); 1 s when absent or unreadable, so that a wait is never zero (no busy loop).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Duration {
    let secs = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(1)
        .max(1);
    Duration::from_secs(secs)
}

/// Whether an error answer is the same on every server (final: it reaches the caller) or only
/// this one's (ask the next); `clients/conformance/vectors/errors.json`.
///
/// The servers share one database and one layout, so leafid's refusals of the request itself
/// hold everywhere: a 4xx whose code is one of [`REQUEST_REFUSALS`], a 503
/// `sequence_exhausted` (a formatted tag's period ran out of its width until the next one),
/// and the caller token's refusals, leafid's `401 unauthorized` and `403 forbidden` (every
/// server reads the same tokens: the credentials are wrong everywhere). Every other answer is
/// this server's: an engine switched off on it (`engine_disabled`), a route it does not have
/// (`not_found`), a proxy's 401/403/429 or any page without leafid's `code`, any other 5xx.
pub(crate) fn refusal_is_final(status: u16, code: &str) -> bool {
    match status {
        401 => code == "unauthorized",
        403 => code == "forbidden",
        400..=499 => REQUEST_REFUSALS.contains(&code),
        503 => code == "sequence_exhausted",
        _ => false,
    }
}

/// The `code`s of leafid's 4xx answers that refuse the request itself (see
/// [`refusal_is_final`]).
const REQUEST_REFUSALS: [&str; 7] = [
    "unknown_biz_tag",
    "invalid_biz_tag",
    "biz_tag_exhausted",
    "invalid_count",
    "invalid_request",
    // A numeric supply (the range route) asked for a formatted tag: its ids are text.
    "formatted_tag",
    // The bounds route: an empty range, or one outside the snowflake layout's time span.
    "invalid_time_range",
];

/// The wait after `failures` failures in a row (at least 1).
pub(crate) fn backoff(timing: &Timing, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(30);
    timing
        .backoff_min
        .saturating_mul(1 << doublings)
        .min(timing.backoff_max)
}

/// What a request failed with, named down to its cause: reqwest's own message (`error sending
/// request`) says nothing of why, its sources do (`connection refused`, a timeout, a reset).
pub(crate) fn transport_cause(e: &reqwest::Error) -> String {
    // Its own message, without the URL (the fault names the server already).
    let own = e.to_string();
    let mut out = own
        .split_once(" for url (")
        .map_or(own.as_str(), |(head, _)| head)
        .to_owned();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = cause.source();
    }
    out
}

/// A 200 body is a batch only if its runs have `0 < first <= last` each, increase without
/// overlapping, and add up to its `count`, which is 1..= the count asked; for the tag asked.
/// Anything else is the server's fault and none of its ids is used.
fn validate(body: RangesBody, req: &Request) -> Result<Vec<Run>, String> {
    if let Some(want) = &req.tag
        && body.biz_tag.as_ref() != Some(want)
    {
        return Err(format!("asked for tag {want:?}, got {:?}", body.biz_tag));
    }
    if body.count == 0 || body.count > req.count as u64 {
        return Err(format!(
            "count {} for a request of {}",
            body.count, req.count
        ));
    }
    let mut runs = Vec::with_capacity(body.ranges.len());
    let mut total: u64 = 0;
    let mut above = 0i64;
    for r in body.ranges {
        let (first, last) = (r.first.0, r.last.0);
        if first <= above || last < first {
            return Err(format!(
                "run {first}..={last} is not a run of positive ids above {above}"
            ));
        }
        let run = Run { first, last };
        total = total.saturating_add(run.len());
        above = last;
        runs.push(run);
    }
    if total != body.count {
        return Err(format!("runs of {total} ids for a count of {}", body.count));
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn transport_errors_name_their_cause() {
        let http = reqwest::Client::new();
        // Nothing listens on a port just released.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = http
            .get(format!("http://127.0.0.1:{port}/"))
            .send()
            .await
            .unwrap_err();
        let cause = transport_cause(&e).to_lowercase();
        assert!(cause.contains("connection refused"), "{cause}");
        assert!(
            !cause.contains("127.0.0.1"),
            "the URL is the fault's server: {cause}"
        );
        // A listener that never answers.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let e = http
            .get(format!("http://{}/", silent.local_addr().unwrap()))
            .timeout(Duration::from_millis(100))
            .send()
            .await
            .unwrap_err();
        let cause = transport_cause(&e);
        assert!(cause.contains("timed out"), "{cause}");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let t = Timing {
            request_timeout: Duration::from_secs(1),
            probe_timeout: Duration::from_secs(1),
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(5),
        };
        let ms = |f| backoff(&t, f).as_millis();
        assert_eq!([ms(1), ms(2), ms(3), ms(8)], [50, 100, 200, 5000]);
        assert_eq!(ms(u32::MAX), 5000);
    }
}
