//! `Client` (its builder) and the two handles it gives: `SegmentSupply` and `SnowflakeSupply`
//! (with `SnowflakeSupply::bounds`, the id range of a time range).

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::servers::{BoundsBody, FetchError, Request, Servers, Timing};
use crate::supply::{Supply, SupplyStats};

/// Most ids one batch request may ask for (the server's limit).
pub const MAX_BATCH: usize = 100_000;

/// Builds a [`Client`].
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    servers: Vec<String>,
    batch: usize,
    wait_timeout: Duration,
    timing: Timing,
    connect_timeout: Duration,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            batch: 1000,
            wait_timeout: Duration::from_secs(5),
            timing: Timing {
                request_timeout: Duration::from_secs(2),
                probe_timeout: Duration::from_secs(1),
                backoff_min: Duration::from_millis(50),
                backoff_max: Duration::from_secs(5),
            },
            connect_timeout: Duration::from_millis(500),
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

    /// Ids per batch request, 1..=100000 (default 1000). Each tag holds up to two batches;
    /// ids left when the client goes away are never used (a gap).
    pub fn batch(mut self, n: usize) -> Self {
        self.batch = n;
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

    /// The client. Must run inside a tokio runtime: refills and health probes are tasks of
    /// that runtime.
    pub fn build(self) -> Result<Client, Error> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| Error::Config("build() must run inside a tokio runtime".into()))?;
        if self.servers.is_empty() {
            return Err(Error::Config("no server given".into()));
        }
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(Error::Config(format!(
                "batch must be within 1..={MAX_BATCH} (got {})",
                self.batch
            )));
        }
        if self.timing.backoff_min.is_zero() || self.timing.backoff_max < self.timing.backoff_min {
            return Err(Error::Config("backoff needs 0 < min <= max".into()));
        }
        let mut bases = Vec::with_capacity(self.servers.len());
        for url in &self.servers {
            let base = url.trim_end_matches('/');
            if reqwest::Url::parse(base).map_or(true, |u| u.scheme() != "http") {
                // reqwest is built without TLS here: only plain http.
                return Err(Error::Config(format!("not an http:// URL: {url:?}")));
            }
            bases.push(base.to_owned());
        }
        let http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .build()
            .map_err(|e| Error::Config(format!("HTTP client: {e}")))?;
        let servers = Arc::new(Servers::new(bases, http, self.timing));
        let stop = CancellationToken::new();
        runtime.spawn(servers.clone().run_health_checks(stop.clone()));
        Ok(Client {
            shared: Arc::new(Shared {
                servers,
                batch: self.batch,
                wait_timeout: self.wait_timeout,
                timing: self.timing,
                runtime,
                segments: Mutex::new(HashMap::new()),
                snowflake: Mutex::new(None),
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
    /// Ids per request.
    batch: usize,
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
                Arc::new(self.supply(Request {
                    path: format!(
                        "/api/v1/segment/{tag}/ids?count={}&stringify_ids=true",
                        s.batch
                    ),
                    count: s.batch,
                    tag: Some(tag.to_owned()),
                }))
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
                Arc::new(self.supply(Request {
                    path: format!("/api/v1/snowflake/ids?count={}&stringify_ids=true", s.batch),
                    count: s.batch,
                    tag: None,
                }))
            })
            .clone();
        SnowflakeSupply {
            supply,
            servers: s.servers.clone(),
            _owner: s.owner.clone(),
        }
    }

    /// The counters of every supply made so far (each tag's and snowflake's), summed.
    pub fn stats(&self) -> SupplyStats {
        let s = &self.shared;
        let mut total = SupplyStats::default();
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

    fn supply(&self, request: Request) -> Supply {
        let s = &self.shared;
        Supply::remote(
            s.servers.clone(),
            request,
            s.timing,
            s.runtime.clone(),
            s.wait_timeout,
            s.owner.stop.clone(),
        )
    }
}

/// The server's tag rule: 1 to 128 of `A-Z a-z 0-9 . _ : -`.
fn valid_tag(tag: &str) -> bool {
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
    /// The next id of the tag. Fast path: one `fetch_add` on the local batch. When the local
    /// batches are spent it waits for the refill, at most the wait timeout.
    ///
    /// The refill is a task of the client's runtime: a caller that loops on ids without ever
    /// awaiting something that yields can keep it from running on a busy runtime, and then
    /// waits for the batch when its current one runs out instead of finding it preloaded.
    pub async fn next_id(&self) -> Result<i64, Error> {
        self.supply.next_id().await
    }

    /// The next id if the current local batch has one; never waits, never fails (the refill
    /// still starts at the preload mark). `None`: call `next_id`.
    pub fn try_next_id(&self) -> Option<i64> {
        self.supply.try_next_id()
    }

    /// The supply's counters.
    pub fn stats(&self) -> SupplyStats {
        self.supply.stats()
    }

    /// A supply of exactly `ids` (strictly increasing) that never contacts a server: for
    /// benches and tests of code that takes ids. Once they are spent, `next_id` fails.
    #[doc(hidden)]
    pub fn prefilled(ids: Vec<i64>) -> Self {
        Self {
            supply: Arc::new(Supply::fixed(ids)),
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
    /// The servers, for [`SnowflakeSupply::bounds`].
    servers: Arc<Servers>,
    /// Keeps the background tasks running while this handle lives.
    _owner: Arc<Owner>,
}

/// The snowflake ids of a time range: every id any worker can issue in it lies within
/// `min_id..=max_id` ([`SnowflakeSupply::bounds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnowflakeBounds {
    /// The smallest id of the range: its first tick, worker field 0, sequence 0.
    pub min_id: u64,
    /// The largest id of the range: its last tick, every worker field and sequence bit set.
    pub max_id: u64,
}

impl SnowflakeBounds {
    /// Whether `id` lies within the range (`min_id <= id <= max_id`).
    pub fn contains(&self, id: u64) -> bool {
        (self.min_id..=self.max_id).contains(&id)
    }
}

/// Unix milliseconds of `t`, rounded down (so before 1970 too); saturating at the ends of `i64`.
fn unix_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => {
            let ms = before.duration().as_nanos().div_ceil(1_000_000);
            i64::try_from(ms).map_or(i64::MIN, |ms| -ms)
        }
    }
}

impl SnowflakeSupply {
    /// The next snowflake id (see [`SegmentSupply::next_id`]).
    pub async fn next_id(&self) -> Result<u64, Error> {
        // Validated positive when the batch was received.
        self.supply.next_id().await.map(|id| id as u64)
    }

    /// The next id if the current local batch has one (see [`SegmentSupply::try_next_id`]).
    pub fn try_next_id(&self) -> Option<u64> {
        self.supply.try_next_id().map(|id| id as u64)
    }

    /// The smallest and largest id any worker can issue in `[from, to)` under the servers'
    /// snowflake layout, for `WHERE id BETWEEN min_id AND max_id`: one request to
    /// `GET /api/v1/snowflake/bounds` (the server holds the rule and the layout), with the
    /// failover of the batch requests; nothing is buffered. See
    /// [`SnowflakeSupply::bounds_unix_ms`].
    ///
    /// ```no_run
    /// # async fn demo(client: leafid_client::Client) -> Result<(), leafid_client::Error> {
    /// use std::time::{Duration, SystemTime};
    /// let to = SystemTime::now();
    /// let day = client.snowflake().bounds(to - Duration::from_secs(86_400), to).await?;
    /// let sql = format!("SELECT * FROM orders WHERE id BETWEEN {} AND {}", day.min_id, day.max_id);
    /// # let _ = sql; Ok(()) }
    /// ```
    pub async fn bounds(&self, from: SystemTime, to: SystemTime) -> Result<SnowflakeBounds, Error> {
        self.bounds_unix_ms(unix_ms(from), unix_ms(to)).await
    }

    /// [`SnowflakeSupply::bounds`] of `[from_ms, to_ms)` in unix milliseconds. A range the
    /// server refuses (empty, before the layout's epoch, after its time field runs out: no
    /// clamping) is [`Error::Rejected`] with code `invalid_time_range`, its message naming the
    /// instant; no server answering is [`Error::Unavailable`].
    pub async fn bounds_unix_ms(&self, from_ms: i64, to_ms: i64) -> Result<SnowflakeBounds, Error> {
        let started = tokio::time::Instant::now();
        let path = format!("/api/v1/snowflake/bounds?from={from_ms}&to={to_ms}&stringify_ids=true");
        // Counted nowhere: the supply's `failovers` are its batches'.
        let failovers = AtomicU64::new(0);
        match self.servers.get(&path, &failovers, BoundsBody::range).await {
            Ok((min_id, max_id)) => Ok(SnowflakeBounds { min_id, max_id }),
            Err(FetchError::Rejected(e)) => Err(e),
            Err(FetchError::Unavailable(last)) => Err(Error::Unavailable {
                waited: started.elapsed(),
                last,
            }),
        }
    }

    /// The supply's counters.
    pub fn stats(&self) -> SupplyStats {
        self.supply.stats()
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
            .batch(100_001)));
        assert!(bad(Client::builder().servers(["https://a:1"])));
        assert!(bad(Client::builder().servers(["a:1"])));
        let c = Client::builder().servers(["http://a:1/"]).build().unwrap();
        assert!(matches!(c.segment("a/b"), Err(Error::InvalidTag(_))));
    }

    #[test]
    fn times_are_unix_ms_rounded_down() {
        let at = |ms: i64| {
            if ms >= 0 {
                UNIX_EPOCH + Duration::from_millis(ms as u64)
            } else {
                UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs())
            }
        };
        for ms in [0, 1, 1_735_689_600_123, -1, -1_000] {
            assert_eq!(unix_ms(at(ms)), ms);
        }
        assert_eq!(unix_ms(at(5) + Duration::from_micros(999)), 5);
        assert_eq!(unix_ms(at(-5) + Duration::from_micros(1)), -5);
        let b = SnowflakeBounds {
            min_id: 10,
            max_id: 20,
        };
        assert!(b.contains(10) && b.contains(20) && !b.contains(9) && !b.contains(21));
    }

    #[test]
    fn build_needs_a_runtime() {
        let r = Client::builder().servers(["http://a:1"]).build();
        assert!(matches!(r, Err(Error::Config(_))));
    }
}
