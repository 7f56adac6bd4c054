//! The server list: which server a batch is asked from, failover, backoff and health probes.
//!
//! Batches go to the *preferred* server (the last one that answered). A server that fails
//! (no answer, a 5xx, a body that is not a valid batch) is marked down and the next one is
//! asked at once. A down server is not asked again until the health task (see
//! [`Servers::run_health_checks`]) gets a 200 from its `/health/ready`; it probes after an
//! exponential backoff (`backoff_min` doubling up to `backoff_max`) counted from each failure.
//! Only when every server is down does a fetch try the down ones too (last resort), so a client
//! never stalls behind a probe schedule while a server could answer.
//!
//! The only ids that leave this module come from the body of a 200 that parsed and passed
//! [`validate`]; a failed or partial answer contributes nothing.

use std::sync::atomic::{AtomicUsize, Ordering};
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
    /// request's).
    down: bool,
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
    ids: Vec<i64>,
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
    /// `Unavailable` when all failed.
    pub async fn fetch(&self, req: &Request) -> Result<Vec<i64>, FetchError> {
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
                match self.ask(i, req).await {
                    Ok(ids) => {
                        self.list[i].mark_up();
                        self.preferred.store(i, Ordering::Relaxed);
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
    async fn ask(&self, i: usize, req: &Request) -> Result<Vec<i64>, Outcome> {
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
            if !refusal_holds_on_every_server(status.as_u16(), &body.code) {
                return Err(Outcome::Fault(Fault::Status(status.as_u16())));
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
        let body: IdsBody = resp
            .json()
            .await
            .map_err(|e| Outcome::Fault(Fault::BadResponse(e.to_string())))?;
        validate(&body, req).map_err(|e| Outcome::Fault(Fault::BadResponse(e)))?;
        Ok(body.ids)
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
                    probes.spawn(async move {
                        let ok = this.probe(i).await;
                        if ok {
                            this.list[i].mark_up();
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

    fn mark_up(&self) {
        let mut h = self.health.lock().unwrap_or_else(|e| e.into_inner());
        h.down = false;
        h.failures = 0;
    }

    /// Down, next probe after `backoff_min * 2^(failures-1)`, at most `backoff_max`.
    fn mark_down(&self, timing: &Timing) {
        let mut h = self.health.lock().unwrap_or_else(|e| e.into_inner());
        h.down = true;
        h.failures = h.failures.saturating_add(1);
        h.next_probe = Instant::now() + backoff(timing, h.failures);
    }
}

/// Whether a 4xx answer is the same on every server (final) or only this one's (ask the next).
///
/// The servers share one database, so leafid's refusals of the request itself (an unknown or
/// invalid tag, a bad count, an exhausted tag) hold everywhere. An engine switched off on this
/// server (`engine_disabled`), a rate limit (429), a timeout (408) and a 4xx without leafid's
/// JSON `code` (a proxy's or another service's page at that address) are this server's.
fn refusal_holds_on_every_server(status: u16, code: &str) -> bool {
    !(code.is_empty() || code == "engine_disabled" || status == 408 || status == 429)
}

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
    fn only_refusals_of_the_request_itself_are_final() {
        for code in [
            "unknown_biz_tag",
            "invalid_biz_tag",
            "invalid_count",
            "biz_tag_exhausted",
        ] {
            assert!(refusal_holds_on_every_server(404, code), "{code}");
        }
        assert!(!refusal_holds_on_every_server(404, "engine_disabled"));
        assert!(
            !refusal_holds_on_every_server(404, ""),
            "a page without leafid's body"
        );
        assert!(!refusal_holds_on_every_server(429, "rate_limited"));
        assert!(!refusal_holds_on_every_server(408, "timeout"));
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
