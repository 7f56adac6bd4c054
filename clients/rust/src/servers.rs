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
//! [`validate`] (a batch) or [`BoundsBody::range`] (the bounds of a time range); a failed or
//! partial answer contributes nothing. Both go through one request path, [`Servers::get`].

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
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

/// The success body of `GET /api/v1/snowflake/bounds` (its other fields are not read).
#[derive(Deserialize)]
pub(crate) struct BoundsBody {
    /// The smallest id of the range: a decimal string, or a JSON integer.
    min_id: AnyId,
    /// The largest id of the range.
    max_id: AnyId,
}

impl BoundsBody {
    /// `(min_id, max_id)`, if both are ids (not negative) and `min_id <= max_id`.
    pub(crate) fn range(self) -> Result<(u64, u64), String> {
        let (AnyId(min), AnyId(max)) = (self.min_id, self.max_id);
        if min < 0 || max < min {
            return Err(format!("min_id {min} and max_id {max} are not an id range"));
        }
        // Both within 0..=i64::MAX: lossless.
        Ok((min as u64, max as u64))
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
    /// Path and query, e.g. `/api/v1/segment/orders/ids?count=1000`.
    pub path: String,
    /// The ids asked for: a body with more is invalid.
    pub count: usize,
    /// The tag the body must name (segment route), `None` for snowflake.
    pub tag: Option<String>,
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
    /// failed adds one to `failovers`.
    pub async fn fetch(
        &self,
        req: &Request,
        failovers: &AtomicU64,
    ) -> Result<Vec<i64>, FetchError> {
        self.get(&req.path, failovers, |body: IdsBody| {
            validate(&body, req)?;
            Ok(body.ids)
        })
        .await
    }

    /// One `GET path` (path and query) with [`Servers::fetch`]'s failover: the answer of the
    /// first server whose 200 body parses as `B` and passes `accept`; a body that does not is
    /// that server's fault (`BadResponse`), and the next is asked.
    pub async fn get<B: DeserializeOwned, T>(
        &self,
        path: &str,
        failovers: &AtomicU64,
        accept: impl Fn(B) -> Result<T, String>,
    ) -> Result<T, FetchError> {
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
                match self.ask(i, path, &accept).await {
                    Ok(answer) => {
                        if self.list[i].mark_up_unless_down_since(seen) {
                            self.preferred.store(i, Ordering::Relaxed);
                        }
                        return Ok(answer);
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
    async fn ask<B: DeserializeOwned, T>(
        &self,
        i: usize,
        path: &str,
        accept: &impl Fn(B) -> Result<T, String>,
    ) -> Result<T, Outcome> {
        let server = &self.list[i];
        let url = format!("{}{path}", server.base);
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
        let body: B = resp
            .json()
            .await
            .map_err(|e| Outcome::Fault(Fault::BadResponse(e.to_string())))?;
        accept(body).map_err(|e| Outcome::Fault(Fault::BadResponse(e)))
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
/// The servers share one database (and one snowflake layout), so leafid's refusals of the
/// request itself hold everywhere: an unknown or invalid tag, an exhausted tag, a bad count, a
/// malformed request, a time range outside the layout. Every other
/// 4xx is this server's: an engine switched off on it (`engine_disabled`), a route it does not
/// have (`not_found`: a wrong base URL, another service at that address), `unauthorized`, a
/// rate limit, a timeout, or a 4xx without leafid's JSON `code` (a proxy's page).
fn refusal_holds_on_every_server(code: &str) -> bool {
    REQUEST_REFUSALS.contains(&code)
}

/// The `code`s of leafid's 4xx answers that refuse the request itself (see
/// [`refusal_holds_on_every_server`]).
const REQUEST_REFUSALS: [&str; 6] = [
    "unknown_biz_tag",
    "invalid_biz_tag",
    "biz_tag_exhausted",
    "invalid_count",
    "invalid_request",
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
        Request {
            path: String::new(),
            count,
            tag: Some("t".into()),
        }
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
            "invalid_time_range",
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
    fn a_bounds_body_is_an_id_range() {
        let range = |json: &str| {
            serde_json::from_str::<BoundsBody>(json)
                .map_err(|e| e.to_string())
                .and_then(BoundsBody::range)
        };
        assert_eq!(
            range(r#"{"min_id":"5","max_id":"9223372036854775807","layout":"41/10/12"}"#),
            Ok((5, i64::MAX as u64))
        );
        assert_eq!(range(r#"{"min_id":7,"max_id":7}"#), Ok((7, 7)));
        for bad in [
            r#"{"min_id":"9","max_id":"5"}"#,
            r#"{"min_id":"-1","max_id":"5"}"#,
            r#"{"min_id":"1.5","max_id":"5"}"#,
            r#"{"min_id":"1"}"#,
            r#"{"ids":["1"]}"#,
        ] {
            assert!(range(bad).is_err(), "{bad}");
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
