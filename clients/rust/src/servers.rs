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
//! [`validate`]; a failed or partial answer contributes nothing.

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
enum Outcome {
    /// It failed: mark it down, ask the next.
    Fault(Fault),
    /// It refused (a 4xx that holds on every server): final, the servers share one database.
    Rejected(Error),
}

/// Why a fetch brought no batch.
#[derive(Debug)]
pub(crate) enum FetchError {
    /// A server refused (a 4xx that holds on every server): final, no other server was asked.
    Rejected(Error),
    /// Every server failed; the last failure, if any server was asked.
    Unavailable(Option<ServerFault>),
}

/// What a fetch brought from the server that answered 200.
#[derive(Debug)]
pub(crate) enum Fetched {
    /// The ids of a valid batch body.
    Ids(Vec<i64>),
    /// A body whose last id lay at or below the floor, read from its tail only
    /// ([`behind_tail`]): discarded whole.
    Behind(Behind),
}

/// A 200 answer lying wholly at or below the floor: its size and its last id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Behind {
    /// Ids in the answer (its commas, plus one).
    pub ids: u64,
    /// Its last id: at or below the floor.
    pub last: i64,
}

/// The size and last id of a 200 body that ends the way leafid writes a batch
/// (`..."ids":[...,"<last id>"]}`) when that last id lies at or below `floor`; else `None`, and
/// the body is parsed whole. Reads the tail and counts commas: a catch-up discards answer after
/// answer of 100,000 ids, and decoding each of them would cost more than the request; none of
/// them is handed out, so none needs validating.
pub(crate) fn behind_tail(body: &[u8], req: &Request, floor: i64) -> Option<Behind> {
    if floor <= 0 {
        return None;
    }
    let rest = body.trim_ascii_end().strip_suffix(b"\"]}")?;
    let digits = rest.iter().rev().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 {
        return None;
    }
    let (head, last) = rest.split_at(rest.len() - digits);
    let head = head.strip_suffix(b"\"")?;
    if last[0] == b'0' {
        return None;
    }
    let last: i64 = std::str::from_utf8(last).ok()?.parse().ok()?;
    if last > floor {
        return None;
    }
    // The array's opening, near the start (a tag cannot hold a quote).
    const OPEN: &[u8] = b"\"ids\":[";
    let open = head.windows(OPEN.len()).position(|w| w == OPEN)?;
    let ids = 1 + head[open..].iter().filter(|&&b| b == b',').count() as u64;
    (ids <= req.count as u64).then_some(Behind { ids, last })
}

/// The success body of both batch routes (`biz_tag` only on the segment one).
#[derive(Deserialize)]
struct IdsBody {
    #[serde(default)]
    biz_tag: Option<String>,
    /// Decimal strings (the client asks with `stringify_ids=true`); JSON integers are accepted
    /// too. Anything else (a fraction, a string that is not an `i64`) makes the body invalid.
    #[serde(deserialize_with = "ids_as_numbers_or_strings")]
    ids: Vec<i64>,
}

/// One id of a batch body: a JSON integer, or an `i64` in decimal as a JSON string.
struct AnyId(i64);

impl<'de> Deserialize<'de> for AnyId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = AnyId;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an id: an i64 or its decimal string")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<AnyId, E> {
                Ok(AnyId(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<AnyId, E> {
                i64::try_from(v)
                    .map(AnyId)
                    .map_err(|_| E::custom(format!("id {v} is above i64::MAX")))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<AnyId, E> {
                // Digits only (an optional `-`, refused later as not positive): no `+`, spaces.
                let digits = v.strip_prefix('-').unwrap_or(v);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(E::custom(format!("id {v:?} is not a decimal integer")));
                }
                v.parse()
                    .map(AnyId)
                    .map_err(|_| E::custom(format!("id {v:?} is not an i64")))
            }
        }
        d.deserialize_any(Visitor)
    }
}

fn ids_as_numbers_or_strings<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<i64>, D::Error> {
    let ids: Vec<AnyId> = Deserialize::deserialize(d)?;
    Ok(ids.into_iter().map(|AnyId(id)| id).collect())
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
    /// The route without its query, e.g. `/api/v1/segment/orders/ids`.
    pub route: String,
    /// Path and query, e.g. `/api/v1/segment/orders/ids?count=1000&stringify_ids=true`.
    pub path: String,
    /// The ids asked for: a body with more is invalid.
    pub count: usize,
    /// The tag the body must name (segment route), `None` for snowflake.
    pub tag: Option<String>,
}

impl Request {
    /// A request for `count` ids (decimal strings) on `route`.
    pub fn new(route: String, count: usize, tag: Option<String>) -> Self {
        Self {
            path: format!("{route}?count={count}&stringify_ids=true"),
            route,
            count,
            tag,
        }
    }

    /// The same request for `count` ids.
    pub fn with_count(&self, count: usize) -> Self {
        Self::new(self.route.clone(), count, self.tag.clone())
    }
}

impl Servers {
    /// Servers from base URLs (already checked by the builder).
    pub fn new(bases: Vec<String>, http: reqwest::Client, timing: Timing) -> Self {
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
        Self {
            list,
            preferred: AtomicUsize::new(0),
            http,
            timing,
        }
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
    /// failed adds one to `failovers`. A 200 whose last id lies at or below `floor` (the
    /// supply's largest accepted id, 0 for none) comes back as [`Fetched::Behind`], unparsed.
    pub async fn fetch(
        &self,
        req: &Request,
        floor: i64,
        failovers: &AtomicU64,
    ) -> Result<Fetched, FetchError> {
        let n = self.list.len();
        let start = self.preferred.load(Ordering::Relaxed) % n;
        let mut tried = vec![false; n];
        let mut last = None;
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
                match self.ask(i, req, floor).await {
                    Ok(ids) => {
                        if self.list[i].mark_up_unless_down_since(seen) {
                            self.preferred.store(i, Ordering::Relaxed);
                        }
                        return Ok(ids);
                    }
                    Err(Outcome::Rejected(e)) => return Err(FetchError::Rejected(e)),
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
    async fn ask(&self, i: usize, req: &Request, floor: i64) -> Result<Fetched, Outcome> {
        let server = &self.list[i];
        let url = format!("{}{}", server.base, req.path);
        let resp = self
            .http
            .get(&url)
            .timeout(self.timing.request_timeout)
            .send()
            .await
            .map_err(|e| Outcome::Fault(Fault::Transport(e.to_string())))?;
        let status = resp.status();
        if status.is_client_error() {
            let body: ErrorBody = resp.json().await.unwrap_or_default();
            if !refusal_holds_on_every_server(&body.code) {
                return Err(Outcome::Fault(Fault::Refused {
                    status: status.as_u16(),
                    code: body.code,
                }));
            }
            return Err(Outcome::Rejected(Error::Rejected {
                server: server.base.clone(),
                status: status.as_u16(),
                code: body.code,
                message: body.message,
            }));
        }
        if status != reqwest::StatusCode::OK {
            return Err(Outcome::Fault(Fault::Status(status.as_u16())));
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| Outcome::Fault(Fault::Transport(e.to_string())))?;
        if let Some(behind) = behind_tail(&bytes, req, floor) {
            return Ok(Fetched::Behind(behind));
        }
        let body: IdsBody = serde_json::from_slice(&bytes)
            .map_err(|e| Outcome::Fault(Fault::BadResponse(e.to_string())))?;
        validate(&body, req).map_err(|e| Outcome::Fault(Fault::BadResponse(e)))?;
        Ok(Fetched::Ids(body.ids))
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

/// Whether a 4xx answer is the same on every server (final) or only this one's (ask the next).
///
/// The servers share one database, so leafid's refusals of the request itself hold everywhere:
/// an unknown or invalid tag, an exhausted tag, a bad count, a malformed request. Every other
/// 4xx is this server's: an engine switched off on it (`engine_disabled`), a route it does not
/// have (`not_found`: a wrong base URL, another service at that address), `unauthorized`, a
/// rate limit, a timeout, or a 4xx without leafid's JSON `code` (a proxy's page).
fn refusal_holds_on_every_server(code: &str) -> bool {
    REQUEST_REFUSALS.contains(&code)
}

/// The `code`s of leafid's 4xx answers that refuse the request itself (see
/// [`refusal_holds_on_every_server`]).
const REQUEST_REFUSALS: [&str; 5] = [
    "unknown_biz_tag",
    "invalid_biz_tag",
    "biz_tag_exhausted",
    "invalid_count",
    "invalid_request",
];

/// The wait after `failures` failures in a row (at least 1).
pub(crate) fn backoff(timing: &Timing, failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(30);
    timing
        .backoff_min
        .saturating_mul(1 << doublings)
        .min(timing.backoff_max)
}

/// A 200 body is a batch only if it has 1..=count ids, all positive and strictly increasing,
/// for the tag asked. Anything else is the server's fault and none of its ids is used.
fn validate(body: &IdsBody, req: &Request) -> Result<(), String> {
    if let (Some(want), Some(got)) = (&req.tag, &body.biz_tag)
        && want != got
    {
        return Err(format!("asked for tag {want:?}, got {got:?}"));
    }
    if body.ids.is_empty() || body.ids.len() > req.count {
        return Err(format!(
            "{} ids for a count of {}",
            body.ids.len(),
            req.count
        ));
    }
    if body.ids[0] <= 0 {
        return Err(format!("id {} is not positive", body.ids[0]));
    }
    if let Some(w) = body.ids.windows(2).find(|w| w[0] >= w[1]) {
        return Err(format!("ids not increasing: {} then {}", w[0], w[1]));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(count: usize) -> Request {
        Request::new(String::new(), count, Some("t".into()))
    }

    #[test]
    fn an_answer_wholly_behind_the_floor_is_read_from_its_tail_only() {
        let r = req(3);
        let b = |ids, last| Some(Behind { ids, last });
        assert_eq!(
            behind_tail(br#"{"biz_tag":"t","ids":["7","8","9"]}"#, &r, 9),
            b(3, 9)
        );
        assert_eq!(behind_tail(b"{\"ids\":[\"5\"]}\n", &r, 100), b(1, 5));
        // Above the floor, no floor yet, another shape, more ids than asked: parsed whole.
        assert_eq!(
            behind_tail(br#"{"biz_tag":"t","ids":["9","10"]}"#, &r, 9),
            None
        );
        assert_eq!(behind_tail(br#"{"ids":["5"]}"#, &r, 0), None);
        assert_eq!(behind_tail(br#"{"ids":[5]}"#, &r, 100), None);
        assert_eq!(behind_tail(br#"{"ids":["5"],"x":1}"#, &r, 100), None);
        assert_eq!(behind_tail(br#"{"ids":["0"]}"#, &r, 100), None);
        assert_eq!(
            behind_tail(br#"{"ids":["99999999999999999999"]}"#, &r, i64::MAX),
            None
        );
        assert_eq!(behind_tail(br#"{"ids":["1","2","3","4"]}"#, &r, 100), None);
        assert_eq!(behind_tail(b"", &r, 100), None);
    }

    fn body(tag: &str, ids: &[i64]) -> IdsBody {
        IdsBody {
            biz_tag: Some(tag.into()),
            ids: ids.to_vec(),
        }
    }

    #[test]
    fn only_positive_increasing_batches_of_the_tag_are_valid() {
        assert!(validate(&body("t", &[1, 2, 5]), &req(3)).is_ok());
        assert!(validate(&body("t", &[1, 2, 5, 6]), &req(3)).is_err());
        assert!(validate(&body("t", &[]), &req(3)).is_err());
        assert!(validate(&body("t", &[0, 1]), &req(3)).is_err());
        assert!(validate(&body("t", &[2, 2]), &req(3)).is_err());
        assert!(validate(&body("t", &[3, 2]), &req(3)).is_err());
        assert!(validate(&body("u", &[1]), &req(3)).is_err());
    }

    #[test]
    fn ids_parse_from_decimal_strings_or_integers_only() {
        let parse = |json: &str| serde_json::from_str::<IdsBody>(json).map(|b| b.ids);
        assert_eq!(
            parse(r#"{"ids":["1","9223372036854775807"]}"#).unwrap(),
            [1, i64::MAX]
        );
        assert_eq!(parse(r#"{"ids":[1,2]}"#).unwrap(), [1, 2]);
        for bad in [
            r#"{"ids":["9223372036854775808"]}"#,
            r#"{"ids":[9223372036854775808]}"#,
            r#"{"ids":["1.0"]}"#,
            r#"{"ids":[1.5]}"#,
            r#"{"ids":["+1"]}"#,
            r#"{"ids":[" 1"]}"#,
            r#"{"ids":[""]}"#,
            r#"{"ids":[null]}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn only_refusals_of_the_request_itself_are_final() {
        for code in [
            "unknown_biz_tag",
            "invalid_biz_tag",
            "invalid_count",
            "biz_tag_exhausted",
            "invalid_request",
        ] {
            assert!(refusal_holds_on_every_server(code), "{code}");
        }
        for code in [
            "engine_disabled",
            "not_found",
            "unauthorized",
            "rate_limited",
            "timeout",
            "payload_too_large",
            "",
        ] {
            assert!(!refusal_holds_on_every_server(code), "{code:?}");
        }
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
