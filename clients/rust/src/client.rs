//! `Client` (its builder) and the two handles it gives: `SegmentSupply` and `SnowflakeSupply`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::bounds::{self, IdBounds};
use crate::error::{Error, ServerFault};
use crate::formatted::{Clock, Formatted, MAX_FORMATTED_BATCH, WallClock};
use crate::servers::{FetchError, Request, Servers, Timing, backoff};
use crate::sizing::Sizing;
use crate::supply::{Supply, SupplyStats};
use crate::text::FormattedId;

/// Most ids one segment request may ask for (the range route's limit), and the default
/// `max_batch`.
pub const MAX_BATCH: usize = 1_000_000;

/// Most ids one snowflake request asks for (its route's limit): a snowflake supply's size
/// never goes above it, whatever `max_batch`.
pub const MAX_SNOWFLAKE_BATCH: usize = 100_000;

/// Builds a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    servers: Vec<String>,
    batch: usize,
    max_batch: usize,
    target_lifetime: Duration,
    wait_timeout: Duration,
    timing: Timing,
    connect_timeout: Duration,
    clock: Clock,
    token: Option<Token>,
}

/// A caller token: its `Debug` never shows it (a builder or client printed to a log must not
/// leak the credential).
#[derive(Clone)]
struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            batch: 1000,
            max_batch: MAX_BATCH,
            target_lifetime: Duration::from_secs(1),
            wait_timeout: Duration::from_secs(5),
            timing: Timing {
                request_timeout: Duration::from_secs(2),
                probe_timeout: Duration::from_secs(1),
                backoff_min: Duration::from_millis(50),
                backoff_max: Duration::from_secs(5),
            },
            connect_timeout: Duration::from_millis(500),
            clock: Clock(None),
            token: None,
        }
    }
}

impl ClientBuilder {
    /// Base URLs of the servers (`http://host:port`), asked in this order. Required.
    pub fn servers<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.servers = urls.into_iter().map(Into::into).collect();
        self
    }

    /// Ids of the first batch request of each supply, and the smallest size its requests
    /// take (default 1000, at most `max_batch`). The size then follows demand: see
    /// [`target_lifetime`](Self::target_lifetime). Each supply holds up to two batches; ids
    /// left when the client goes away are never used (a gap).
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = n;
        self
    }

    /// The largest batch a supply asks for, `batch..=1_000_000` (default 1,000,000, the
    /// segment route's limit; a snowflake supply never asks more than 100,000).
    pub fn max_batch(mut self, n: usize) -> Self {
        self.max_batch = n;
        self
    }

    /// How long a batch should last at the callers' rate (default 1 s): a supply doubles its
    /// next request when its batch would last less than half of it (or a caller had to wait
    /// for ids), halves it when it would last more than twice, within `batch..=max_batch`.
    /// A restart wastes at most the two batches a supply holds: about twice this at a steady
    /// rate.
    pub fn target_lifetime(mut self, d: Duration) -> Self {
        self.target_lifetime = d;
        self
    }

    /// How long `next_id` waits for a batch when the local ones are spent (default 5 s);
    /// then [`Error::Unavailable`].
    pub fn wait_timeout(mut self, d: Duration) -> Self {
        self.wait_timeout = d;
        self
    }

    /// Upper bound of one batch request (default 2 s); a server that takes longer is marked
    /// down and the next one asked.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.timing.request_timeout = d;
        self
    }

    /// Backoff of a down server's health probes: `min` doubling up to `max` (default 50 ms to
    /// 5 s).
    pub fn backoff(mut self, min: Duration, max: Duration) -> Self {
        self.timing.backoff_min = min;
        self.timing.backoff_max = max;
        self
    }

    /// The wall clock of the formatted supplies' period rule (default: [`SystemTime::now`]).
    /// Before a text is handed out, its batch's `period_end` is compared with this clock: a
    /// batch whose period has ended by it is dropped whole, never handed out (counted in
    /// [`SupplyStats::discarded_ids`]), and an answer already ended by it when it arrives is
    /// dropped and asked again after the backoff.
    ///
    /// It is read once per formatted text, under the supply's lock: it must be cheap and must
    /// not block. Uses: a clock kept in step with servers whose clocks are offset (the
    /// conformance suite's `rollover` runs a server under libfaketime and gives the client the
    /// same offset), and tests that step past a real server's `period_end`. Numeric supplies
    /// never read it.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::{Duration, SystemTime};
    ///
    /// // The system clock, 8 s ahead.
    /// let builder = leafid_client::Client::builder()
    ///     .servers(["http://127.0.0.1:8080"])
    ///     .clock(Arc::new(|| SystemTime::now() + Duration::from_secs(8)));
    /// # let _ = builder;
    /// ```
    pub fn clock(mut self, now: WallClock) -> Self {
        self.clock = Clock(Some(now));
        self
    }

    /// The caller token (`lid_...`, made by an admin with `POST /api/v1/tokens`), sent as
    /// `Authorization: Bearer <token>` on every batch and bounds request (not on the health
    /// probe, which needs none). Never shown: `Debug` of the builder and the client print
    /// `<redacted>`. Without it the client sends no credentials (a server in open mode).
    ///
    /// leafid's `401 unauthorized` (missing, unknown or revoked token) and `403 forbidden`
    /// (not scoped to the tag) are [`Error::Rejected`] with that code, never a failover (every
    /// server reads the same tokens); a `429 quota_exhausted` is waited out for its
    /// `Retry-After` on the same server, or is [`Error::Throttled`] when that wait would pass
    /// the wait timeout.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(Token(token.into()));
        self
    }

    /// The client. Must run inside a tokio runtime: refills and health probes are tasks of
    /// that runtime.
    pub fn build(self) -> Result<Client, Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Config("build() must run inside a tokio runtime".into()))?;
        if self.servers.is_empty() {
            return Err(Error::Config("no server given".into()));
        }
        if !(1..=MAX_BATCH).contains(&self.max_batch) {
            return Err(Error::Config(format!(
                "max_batch must be within 1..={MAX_BATCH} (got {})",
                self.max_batch
            )));
        }
        if !(1..=self.max_batch).contains(&self.batch) {
            return Err(Error::Config(format!(
                "batch must be within 1..=max_batch ({}) (got {})",
                self.max_batch, self.batch
            )));
        }
        if self.target_lifetime.is_zero() {
            return Err(Error::Config("target_lifetime must be above 0".into()));
        }
        if self.timing.backoff_min.is_zero() || self.timing.backoff_max < self.timing.backoff_min {
            return Err(Error::Config("backoff needs 0 < min <= max".into()));
        }
        let mut bases = Vec::with_capacity(self.servers.len());
        for url in &self.servers {
            let base = url.trim_end_matches('/');
            match reqwest::Url::parse(base) {
                // https:// through rustls, certificates checked against the Mozilla roots.
                Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {}
                _ => {
                    return Err(Error::Config(format!(
                        "not an http:// or https:// URL: {url:?}"
                    )));
                }
            }
            bases.push(base.to_owned());
        }
        let http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        let servers = Arc::new(Servers::new(
            bases,
            http,
            self.timing,
            self.token.as_ref().map(|t| t.0.as_str()),
            self.wait_timeout,
        )?);
        let stop = CancellationToken::new();
        runtime.spawn(servers.clone().run_health_checks(stop.clone()));
        Ok(Client {
            shared: Arc::new(Shared {
                servers,
                sizing: Sizing {
                    min: self.batch,
                    max: self.max_batch,
                    target: self.target_lifetime,
                },
                wait_timeout: self.wait_timeout,
                timing: self.timing,
                runtime,
                segments: Mutex::new(HashMap::new()),
                snowflake: Mutex::new(None),
                formatted: Mutex::new(HashMap::new()),
                clock: self.clock,
                bounds_failovers: AtomicU64::new(0),
                owner: Arc::new(Owner { stop }),
            }),
        })
    }
}

/// Cancels the background tasks (health probes, refills) when the client and every handle
/// from it are gone: the client and each handle hold one `Arc` of it.
#[derive(Debug)]
struct Owner {
    stop: CancellationToken,
}

impl Drop for Owner {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// A leafid client: per tag (and for snowflake) a local double-buffered id supply, fed by the
/// batch routes of several servers with failover. Cheap to clone.
///
/// ```no_run
/// # async fn demo() -> Result<(), leafid_client::Error> {
/// let client = leafid_client::Client::builder()
///     .servers(["http://10.0.0.1:8080", "http://10.0.0.2:8080"])
///     .batch(1000)
///     .build()?;
/// let orders = client.segment("orders")?;
/// let id: i64 = orders.next_id().await?;
/// # let _ = id; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The servers, their health and the HTTP pool: shared by every supply.
    servers: Arc<Servers>,
    /// The batch rule of segment supplies (snowflake: capped at its route's limit).
    sizing: Sizing,
    /// A caller's bound on waiting for a batch.
    wait_timeout: Duration,
    /// Request timeout and backoff.
    timing: Timing,
    /// The runtime `build` ran in: refills are spawned on it.
    runtime: tokio::runtime::Handle,
    /// One supply per tag, so every handle of a tag shares one increasing stream. A std Mutex:
    /// held only to look up or insert.
    segments: Mutex<HashMap<String, Arc<Supply>>>,
    /// The snowflake supply, made on first use.
    snowflake: Mutex<Option<Arc<Supply>>>,
    /// One formatted supply per tag.
    formatted: Mutex<HashMap<String, Arc<Formatted>>>,
    /// The wall clock of the formatted supplies' period rule.
    clock: Clock,
    /// Failovers of [`Client::snowflake_bounds`] requests (counted in [`Client::stats`]).
    bounds_failovers: AtomicU64,
    /// Stops the background tasks when the last client or handle is dropped.
    owner: Arc<Owner>,
}

impl Client {
    /// A builder with the defaults: batch 1000, wait 5 s, request timeout 2 s, backoff 50 ms
    /// to 5 s.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The supply of a tag (the same one on every call for that tag). No request is sent
    /// until the first `next_id`.
    pub fn segment(&self, tag: &str) -> Result<SegmentSupply, Error> {
        if !valid_tag(tag) {
            return Err(Error::InvalidTag(tag.to_owned()));
        }
        let s = &self.shared;
        let mut map = s.segments.lock().unwrap_or_else(|e| e.into_inner());
        let supply = map
            .entry(tag.to_owned())
            .or_insert_with(|| {
                Arc::new(self.supply(
                    Request::new(
                        format!("/api/v1/segment/{tag}/ranges"),
                        s.sizing.min,
                        MAX_BATCH,
                        Some(tag.to_owned()),
                    ),
                    s.sizing,
                ))
            })
            .clone();
        Ok(SegmentSupply {
            supply,
            _owner: s.owner.clone(),
        })
    }

    /// The snowflake supply (one per client).
    pub fn snowflake(&self) -> SnowflakeSupply {
        let s = &self.shared;
        let mut slot = s.snowflake.lock().unwrap_or_else(|e| e.into_inner());
        let supply = slot
            .get_or_insert_with(|| {
                let cap = |n: usize| n.min(MAX_SNOWFLAKE_BATCH);
                let sizing = Sizing {
                    min: cap(s.sizing.min),
                    max: cap(s.sizing.max),
                    target: s.sizing.target,
                };
                Arc::new(self.supply(
                    Request::new(
                        "/api/v1/snowflake/ranges".to_owned(),
                        sizing.min,
                        MAX_SNOWFLAKE_BATCH,
                        None,
                    ),
                    sizing,
                ))
            })
            .clone();
        SnowflakeSupply {
            supply,
            _owner: s.owner.clone(),
        }
    }

    /// The supply of a formatted tag (`docs/shapes.md`): its ids as text, from the list route
    /// `GET /api/v1/segment/{tag}/ids`, the same one on every call for that tag. No request is
    /// sent until the first `next_id`. A plain tag's answer makes every call
    /// [`Error::Rejected`] with `code` `not_formatted`.
    pub fn formatted(&self, tag: &str) -> Result<FormattedSupply, Error> {
        if !valid_tag(tag) {
            return Err(Error::InvalidTag(tag.to_owned()));
        }
        let s = &self.shared;
        let mut map = s.formatted.lock().unwrap_or_else(|e| e.into_inner());
        let supply = map
            .entry(tag.to_owned())
            .or_insert_with(|| {
                let cap = |n: usize| n.min(MAX_FORMATTED_BATCH);
                Arc::new(Formatted::remote(
                    s.servers.clone(),
                    tag,
                    Sizing {
                        min: cap(s.sizing.min),
                        max: cap(s.sizing.max),
                        target: s.sizing.target,
                    },
                    s.timing,
                    s.runtime.clone(),
                    s.wait_timeout,
                    s.owner.stop.clone(),
                    s.clock.clone(),
                ))
            })
            .clone();
        Ok(FormattedSupply {
            supply,
            _owner: s.owner.clone(),
        })
    }

    /// The smallest and largest id any worker can issue in `[from, to)` under the servers'
    /// snowflake layout, for `WHERE id BETWEEN min_id AND max_id`: one request to
    /// `GET /api/v1/snowflake/bounds` (the instants sent as RFC 3339 UTC with milliseconds,
    /// `from` rounded down and `to` up when `from < to`: every tick the range overlaps).
    ///
    /// Failover as for batches: a server that does not answer in the request timeout, answers
    /// a 5xx, a 4xx of its own (`engine_disabled`: snowflake switched off there) or a body that
    /// is not two ids `0 < min_id <= max_id <= 2^63 - 1` is marked down and the next one asked
    /// at once (counted in [`SupplyStats::failovers`] of [`stats`](Self::stats)); rounds in which
    /// every server failed are repeated after the backoff until the wait timeout, then
    /// [`Error::Unavailable`]. A range the servers refuse is [`Error::Rejected`] at once, with
    /// no failover: `code` `invalid_time_range` for an empty range (`from >= to`), one starting
    /// before the layout's epoch or ending after its time field runs out (an instant outside
    /// the years 0000 to 9999 is refused so without a request, `server` empty).
    ///
    /// ```no_run
    /// # async fn demo(client: leafid_client::Client) -> Result<(), leafid_client::Error> {
    /// use std::time::{Duration, SystemTime};
    ///
    /// let to = SystemTime::now();
    /// let b = client.snowflake_bounds(to - Duration::from_secs(3600), to).await?;
    /// let sql = format!("SELECT * FROM orders WHERE id BETWEEN {} AND {}", b.min_id, b.max_id);
    /// # let _ = sql; Ok(()) }
    /// ```
    pub async fn snowflake_bounds(
        &self,
        from: SystemTime,
        to: SystemTime,
    ) -> Result<IdBounds, Error> {
        let s = &self.shared;
        let req = bounds::request(from, to)?;
        let deadline = tokio::time::Instant::now() + s.wait_timeout;
        let mut last: Option<ServerFault> = None;
        let mut failures = 0;
        loop {
            let fetch = s.servers.fetch::<IdBounds>(&req, &s.bounds_failovers);
            let wake = match tokio::time::timeout_at(deadline, fetch).await {
                Ok(Ok((b, _server))) => return Ok(b),
                Ok(Err(FetchError::Rejected(e))) => return Err(e),
                Ok(Err(FetchError::Unavailable(fault))) => {
                    last = fault.or(last);
                    failures += 1;
                    // Never zero: the builder checks backoff_min > 0.
                    tokio::time::Instant::now() + backoff(&s.timing, failures)
                }
                // The wait timeout passed during a request: it is abandoned.
                Err(_elapsed) => deadline,
            };
            if wake >= deadline {
                return Err(Error::Unavailable {
                    waited: s.wait_timeout,
                    last,
                });
            }
            tokio::time::sleep_until(wake).await;
        }
    }

    /// The counters of every supply made so far (each tag's and snowflake's), summed;
    /// `batch_size` is the largest size any supply asks for next. `failovers` counts those of
    /// [`snowflake_bounds`](Self::snowflake_bounds) too.
    pub fn stats(&self) -> SupplyStats {
        let s = &self.shared;
        let mut total = SupplyStats {
            failovers: s.bounds_failovers.load(Ordering::Relaxed),
            ..SupplyStats::default()
        };
        for supply in s
            .segments
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            total += supply.stats();
        }
        if let Some(supply) = &*s.snowflake.lock().unwrap_or_else(|e| e.into_inner()) {
            total += supply.stats();
        }
        for supply in s
            .formatted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
        {
            total += supply.stats();
        }
        total
    }

    /// The server asked first (the last that answered), and whether it is up.
    pub fn preferred_server(&self) -> (String, bool) {
        self.shared.servers.preferred()
    }

    /// The servers marked down.
    pub fn down_servers(&self) -> Vec<String> {
        self.shared.servers.down()
    }

    fn supply(&self, request: Request, sizing: Sizing) -> Supply {
        let s = &self.shared;
        Supply::remote(
            s.servers.clone(),
            request,
            sizing,
            s.timing,
            s.runtime.clone(),
            s.wait_timeout,
            s.owner.stop.clone(),
        )
    }
}

/// The server's tag rule: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
pub(crate) fn valid_tag(tag: &str) -> bool {
    (1..=128).contains(&tag.len())
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

/// Ids of one tag: increasing, never repeated, served from local batches.
#[derive(Debug, Clone)]
pub struct SegmentSupply {
    supply: Arc<Supply>,
    /// Keeps the background tasks running while this handle lives.
    _owner: Arc<Owner>,
}

impl SegmentSupply {
    /// The next id of the tag. Fast path: one `fetch_add` and one compare on the local range
    /// (no lock, no allocation); the next range is installed under the supply's lock. When
    /// the local batches are spent it waits for the refill, at most the wait timeout.
    ///
    /// The refill is a task of the client's runtime: a caller that loops on ids without ever
    /// awaiting something that yields can keep it from running on a busy runtime, and then
    /// waits for the batch when its current one runs out instead of finding it preloaded.
    #[inline]
    pub async fn next_id(&self) -> Result<i64, Error> {
        self.supply.next_id().await
    }

    /// The next id if a local batch has one, without a future: the same local path as
    /// `next_id`. Never waits for the network, never fails; `None` when both local batches are
    /// spent (a refill is then under way): call `next_id` to wait for it.
    #[inline]
    pub fn try_next_id(&self) -> Option<i64> {
        self.supply.try_next_id()
    }

    /// The supply's counters.
    pub fn stats(&self) -> SupplyStats {
        self.supply.stats()
    }

    /// A supply of exactly the ids `first..=last` (`0 < first <= last`) that never contacts a
    /// server: for benches and tests of code that takes ids. Once they are spent, `next_id`
    /// fails.
    #[doc(hidden)]
    pub fn prefilled(ids: std::ops::RangeInclusive<i64>) -> Self {
        assert!(
            *ids.start() > 0 && ids.start() <= ids.end(),
            "a run of positive ids"
        );
        Self {
            supply: Arc::new(Supply::fixed(&[crate::servers::Run {
                first: *ids.start(),
                last: *ids.end(),
            }])),
            _owner: Arc::new(Owner {
                stop: CancellationToken::new(),
            }),
        }
    }
}

/// Snowflake ids from the servers' batch route, buffered like a tag's; increasing per client.
#[derive(Debug, Clone)]
pub struct SnowflakeSupply {
    supply: Arc<Supply>,
    /// Keeps the background tasks running while this handle lives.
    _owner: Arc<Owner>,
}

impl SnowflakeSupply {
    /// The next snowflake id (see [`SegmentSupply::next_id`]).
    #[inline]
    pub async fn next_id(&self) -> Result<u64, Error> {
        // Validated positive when the batch was received.
        self.supply.next_id().await.map(|id| id as u64)
    }

    /// The next id if the current local batch has one (see [`SegmentSupply::try_next_id`]).
    #[inline]
    pub fn try_next_id(&self) -> Option<u64> {
        self.supply.try_next_id().map(|id| id as u64)
    }

    /// The supply's counters.
    pub fn stats(&self) -> SupplyStats {
        self.supply.stats()
    }
}

/// Ids of a formatted tag, as text: increasing in byte order, never repeated, never of a
/// period that ended by the client's clock; served from two local batches. A permuted tag's
/// texts (`T-9F3K2Q`, answers with `"ordered": false`) come in no order: they are handed out
/// as received, with no floor; their uniqueness is the server's, as for every id.
#[derive(Debug, Clone)]
pub struct FormattedSupply {
    supply: Arc<Formatted>,
    /// Keeps the background tasks running while this handle lives.
    _owner: Arc<Owner>,
}

impl FormattedSupply {
    /// The next id of the tag (`ORD-2026112700000123`), as a [`FormattedId`]: the text
    /// inline, read as a `&str`, nothing on the heap. Local path: a step through the batch in
    /// use under the supply's lock, after checking that the batch's period has not ended (a
    /// batch whose period ended is dropped whole, counted in [`SupplyStats::discarded_ids`]).
    /// When both batches are spent it waits for the refill, at most the wait timeout.
    #[inline]
    pub async fn next_id(&self) -> Result<FormattedId, Error> {
        self.supply.next_id().await
    }

    /// The next id if a local batch has one, without a future (see
    /// [`SegmentSupply::try_next_id`]).
    #[inline]
    pub fn try_next_id(&self) -> Option<FormattedId> {
        self.supply.try_next_id()
    }

    /// The supply's counters.
    pub fn stats(&self) -> SupplyStats {
        self.supply.stats()
    }

    /// A supply of exactly `ids` (increasing in byte order, each 1 to [`MAX_FORMATTED_LEN`]
    /// bytes) of a period that never ends, that never contacts a server: for benches and tests
    /// of code that takes ids.
    ///
    /// [`MAX_FORMATTED_LEN`]: crate::MAX_FORMATTED_LEN
    #[doc(hidden)]
    pub fn prefilled(ids: Vec<String>) -> Self {
        assert!(
            ids.windows(2).all(|w| w[0].as_bytes() < w[1].as_bytes()),
            "increasing texts"
        );
        assert!(
            ids.iter()
                .all(|t| (1..=crate::MAX_FORMATTED_LEN).contains(&t.len())),
            "texts of 1 to MAX_FORMATTED_LEN bytes"
        );
        let supply = Formatted::fixed(
            &ids,
            SystemTime::UNIX_EPOCH + Duration::from_secs(253_402_300_799),
            Clock(None),
        );
        // Installed now, as the numeric `prefilled` installs its run: the first take is local.
        supply.warm_up();
        Self {
            supply: Arc::new(supply),
            _owner: Arc::new(Owner {
                stop: CancellationToken::new(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_the_server_rule() {
        assert!(valid_tag("orders.v2:eu-1_x"));
        assert!(valid_tag(&"a".repeat(128)));
        for bad in ["", "a/b", "a b", "é", &"a".repeat(129)] {
            assert!(!valid_tag(bad), "{bad:?}");
        }
    }

    #[tokio::test]
    async fn the_builder_refuses_bad_settings() {
        let bad = |b: ClientBuilder| matches!(b.build(), Err(Error::Config(_)));
        assert!(bad(Client::builder()));
        assert!(bad(Client::builder().servers(["http://a:1"]).batch(0)));
        assert!(bad(Client::builder()
            .servers(["http://a:1"])
            .batch(1_000_001)));
        assert!(bad(Client::builder()
            .servers(["http://a:1"])
            .max_batch(1_000_001)));
        assert!(bad(Client::builder()
            .servers(["http://a:1"])
            .batch(2000)
            .max_batch(1000)));
        assert!(bad(Client::builder()
            .servers(["http://a:1"])
            .target_lifetime(Duration::ZERO)));
        assert!(bad(Client::builder().servers(["ftp://a:1"])));
        assert!(
            Client::builder().servers(["https://a:1"]).build().is_ok(),
            "https:// is accepted"
        );
        assert!(bad(Client::builder().servers(["a:1"])));
        let c = Client::builder().servers(["http://a:1/"]).build().unwrap();
        assert!(matches!(c.segment("a/b"), Err(Error::InvalidTag(_))));
    }

    #[test]
    fn build_needs_a_runtime() {
        let r = Client::builder().servers(["http://a:1"]).build();
        assert!(matches!(r, Err(Error::Config(_))));
    }
}
