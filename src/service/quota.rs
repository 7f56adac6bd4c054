//! Caller quotas (issue 44): how many ids one caller token may take of one tag.
//!
//! Two limits, each per token and tag, both set on the token:
//!
//! - **a rate**: ids per second with a burst, a token bucket kept by each server
//!   ([`Quotas::take_rate`]). A request for more ids than the bucket holds gets what it holds
//!   (a shorter batch, which every client takes); a bucket holding less than one id answers
//!   `429 quota_exhausted` with `Retry-After`. **Bound across servers:** each server keeps its
//!   own bucket, so `n` servers let a token take up to `n` times the rate (and `n` bursts): set
//!   the rate to the whole allowance divided by the servers behind the load balancer.
//! - **a share of each period** of a formatted tag (`period_share`, a fraction of the period's
//!   capacity, [`Quotas::take_period`]). This one holds across every server on the database:
//!   a server is granted ids of the share in chunks by a compare-and-set on
//!   `leafid_quota_use.used` that never passes the limit ([`QuotaStore::grant`]), and hands out
//!   at most what it was granted. **Bound:** the token's ids of a period, over all servers,
//!   never exceed the limit; a server that stops (or a period that ends) with part of a chunk
//!   unspent only lowers what the token gets, by at most one chunk per server
//!   ([`chunk_of`]: a twentieth of the limit).
//!
//! Ids a request was granted but not handed out (the engine failed, or gave fewer) are given
//! back to the local bucket or chunk, never to the database: giving back can only lower what is
//! taken.
//!
//! Memory is bounded by what the database holds: buckets are keyed by token names and tags
//! that exist (a request is charged only after its tag is found), at most [`MAX_KEYS`] of them,
//! and a full bucket (one that would answer like a new one) is dropped first; period chunks are
//! kept for the current period only.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use crate::segment::StoreError;
use crate::shapes::format::Share;

/// The most (token, tag) buckets or chunks a server keeps; past it, full buckets are dropped.
pub const MAX_KEYS: usize = 100_000;

/// What a token, a tag and a period name in the quota table.
#[derive(Debug, Clone, Copy)]
pub struct QuotaKey<'a> {
    /// The caller token's name.
    pub token: &'a str,
    /// The formatted tag.
    pub tag: &'a str,
    /// The period's key (`20261128`, `202611`, `2026`; empty for a tag that never resets).
    pub period: &'a str,
}

/// The table of ids granted per token, tag and period (`leafid_quota_use`), shared by every
/// server on the database.
#[async_trait]
pub trait QuotaStore: Send + Sync + 'static {
    /// Grants up to `want` ids of `key`'s period, never letting the total granted to the key
    /// (by every server) pass `limit`: the number granted, 0 when the limit is reached.
    async fn grant(&self, key: &QuotaKey<'_>, want: u64, limit: u64) -> Result<u64, StoreError>;
}

/// A caller admitted by a token that has limits: its name and its limits (a token without
/// limits admits with no `Caller`, and its requests cost nothing here).
#[derive(Debug, Clone, PartialEq)]
pub struct Caller {
    /// The token's name.
    pub name: Arc<str>,
    /// Its limits.
    pub limits: Limits,
}

impl Caller {
    /// The caller of a token named `name` with these limits, `None` when it has none.
    pub fn limited(name: Arc<str>, limits: Limits) -> Option<Arc<Self>> {
        let any = limits.rate_per_sec.is_some_and(|r| r > 0) || limits.period_share.is_some();
        any.then(|| Arc::new(Self { name, limits }))
    }
}

/// A token's limits (`None`: no such limit).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    /// Ids per second, per tag, per server.
    pub rate_per_sec: Option<u64>,
    /// The bucket's size (default: one second of the rate).
    pub burst: Option<u64>,
    /// The share of each period of a formatted tag (the ids of a period are
    /// `share.of(capacity)`, the rule of a format's `request_share`).
    pub period_share: Option<Share>,
}

/// A spent quota: how long until it allows an id again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuotaError {
    /// The rate's bucket holds less than one id.
    #[error(
        "caller token {token:?} has used its rate for biz_tag {tag:?} ({rate} ids/s, burst {burst}); retry in {retry_after_secs} s"
    )]
    Rate {
        /// The token's name.
        token: String,
        /// The tag.
        tag: String,
        /// Ids per second.
        rate: u64,
        /// The bucket's size.
        burst: u64,
        /// Seconds until the bucket holds an id.
        retry_after_secs: u64,
    },
    /// The token's share of the current period is spent.
    #[error(
        "caller token {token:?} has used its share of biz_tag {tag:?}'s period {period} ({limit} ids); the next period starts in {retry_after_secs} s"
    )]
    Period {
        /// The token's name.
        token: String,
        /// The tag.
        tag: String,
        /// The period's key.
        period: String,
        /// The token's ids per period.
        limit: u64,
        /// Seconds until the next period.
        retry_after_secs: u64,
    },
    /// The database did not grant a chunk in time.
    #[error("the quota database did not answer: {0}")]
    Store(String),
}

impl QuotaError {
    /// Seconds for `Retry-After` (at least 1).
    pub fn retry_after_secs(&self) -> u64 {
        match self {
            Self::Rate {
                retry_after_secs, ..
            }
            | Self::Period {
                retry_after_secs, ..
            } => (*retry_after_secs).max(1),
            Self::Store(_) => 1,
        }
    }
}

/// The ids of one period a server may still hand out under a share (granted by the database,
/// not yet spent).
#[derive(Debug)]
struct Chunk {
    period: String,
    left: u64,
    /// The database granted less than asked: the limit is reached over all servers, and no
    /// grant of this period will give more (ids granted are never given back to it), so a
    /// refusal is answered here without asking again.
    spent: bool,
}

/// A token's name and a tag: what a bucket or a chunk is kept for.
type TokenTag = (Arc<str>, Arc<str>);

/// A token bucket: `level` ids at `at`.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    level: f64,
    at: Instant,
}

/// The per-server ledger of every token's quotas.
pub struct Quotas {
    /// `leafid_quota_refused_total{kind}`: requests refused by a spent rate or share.
    refused: prometheus::IntCounterVec,
    buckets: Mutex<HashMap<TokenTag, Bucket>>,
    /// (token, tag) -> the current period's chunk. An async lock: it is held across the
    /// database's grant, so one server asks for one chunk at a time (no stampede at a chunk's
    /// end); bounded by the store's own timeout.
    chunks: tokio::sync::Mutex<HashMap<TokenTag, Chunk>>,
    store: Arc<dyn QuotaStore>,
    /// How long a grant may take.
    within: Duration,
}

impl std::fmt::Debug for Quotas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Quotas").finish_non_exhaustive()
    }
}

/// The chunk a server asks the database for at once under a limit: a twentieth of it (at least
/// one id), so a period's share takes about 20 grants over all servers and a stopped server
/// leaves at most a twentieth unspent.
pub fn chunk_of(limit: u64) -> u64 {
    (limit / 20).max(1)
}

impl Quotas {
    /// A ledger whose period shares are granted by `store`, each grant within `within`.
    pub fn new(store: Arc<dyn QuotaStore>, within: Duration) -> Self {
        let refused = prometheus::IntCounterVec::new(
            prometheus::Opts::new(
                "leafid_quota_refused_total",
                "Id requests refused 429 quota_exhausted: kind rate (a token's bucket empty) or                  period (its share of a formatted tag's period spent)",
            ),
            &["kind"],
        )
        .expect("valid metric");
        Self {
            refused,
            buckets: Mutex::default(),
            chunks: tokio::sync::Mutex::default(),
            store,
            within,
        }
    }

    /// `leafid_quota_refused_total`, for the server's registry.
    pub fn collector(&self) -> Box<dyn prometheus::core::Collector> {
        Box::new(self.refused.clone())
    }

    /// Counts a refusal and logs it once per cause per interval (never per request).
    fn refused(&self, e: QuotaError) -> QuotaError {
        let (kind, cause) = match &e {
            QuotaError::Rate { .. } => ("rate", "caller refused: rate quota spent"),
            QuotaError::Period { .. } => ("period", "caller refused: period share spent"),
            QuotaError::Store(_) => return e,
        };
        self.refused.with_label_values(&[kind]).inc();
        if let Some(held_back) = crate::telemetry::LogLimiter::global().allow(cause) {
            tracing::warn!(held_back, "{cause}: {e}");
        }
        e
    }

    /// How many of `want` ids `token` may take of `tag` now under its rate (`want` when the
    /// token has none): at least 1, else [`QuotaError::Rate`].
    pub fn take_rate(
        &self,
        token: &Arc<str>,
        tag: &str,
        limits: &Limits,
        want: u64,
    ) -> Result<u64, QuotaError> {
        self.take_rate_at(token, tag, limits, want, Instant::now())
            .map_err(|e| self.refused(e))
    }

    fn take_rate_at(
        &self,
        token: &Arc<str>,
        tag: &str,
        limits: &Limits,
        want: u64,
        now: Instant,
    ) -> Result<u64, QuotaError> {
        let Some(rate) = limits.rate_per_sec.filter(|r| *r > 0) else {
            return Ok(want);
        };
        let burst = limits.burst.filter(|b| *b > 0).unwrap_or(rate);
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let key = (token.clone(), Arc::<str>::from(tag));
        if !buckets.contains_key(&key) && buckets.len() >= MAX_KEYS {
            // A full bucket answers as a new one would: dropping it changes nothing.
            buckets.retain(|_, b| refill(b, rate, burst, now) < burst as f64);
        }
        let bucket = buckets.entry(key).or_insert(Bucket {
            level: burst as f64,
            at: now,
        });
        let level = refill(bucket, rate, burst, now);
        bucket.level = level;
        bucket.at = now;
        if level < 1.0 {
            let retry = ((1.0 - level) / rate as f64).ceil() as u64;
            return Err(QuotaError::Rate {
                token: token.to_string(),
                tag: tag.to_owned(),
                rate,
                burst,
                retry_after_secs: retry.max(1),
            });
        }
        let granted = want.min(level.floor() as u64);
        bucket.level -= granted as f64;
        Ok(granted)
    }

    /// Gives back `n` ids taken by [`Quotas::take_rate`] and not handed out.
    pub fn give_back_rate(&self, token: &Arc<str>, tag: &str, limits: &Limits, n: u64) {
        let Some(rate) = limits.rate_per_sec.filter(|r| *r > 0) else {
            return;
        };
        let burst = limits.burst.filter(|b| *b > 0).unwrap_or(rate) as f64;
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = buckets.get_mut(&(token.clone(), Arc::<str>::from(tag))) {
            b.level = (b.level + n as f64).min(burst);
        }
    }

    /// How many of `want` ids of `tag`'s period `period` the token may take under a limit of
    /// `limit` ids per period (over all servers): at least 1, else [`QuotaError::Period`] with
    /// `retry_after_secs` (the time to the next period).
    pub async fn take_period(
        &self,
        token: &Arc<str>,
        tag: &str,
        period: &str,
        limit: u64,
        want: u64,
        retry_after_secs: u64,
    ) -> Result<u64, QuotaError> {
        let mut chunks = self.chunks.lock().await;
        let key = (token.clone(), Arc::<str>::from(tag));
        if !chunks.contains_key(&key) && chunks.len() >= MAX_KEYS {
            chunks.retain(|_, c| c.period == period && c.left > 0);
        }
        let chunk = chunks.entry(key).or_insert_with(|| Chunk {
            period: period.to_owned(),
            left: 0,
            spent: false,
        });
        if chunk.period != period {
            // A new period: what is left of the last one can never be handed out.
            *chunk = Chunk {
                period: period.to_owned(),
                left: 0,
                spent: false,
            };
        }
        if chunk.left < want && !chunk.spent {
            let ask = (want - chunk.left).max(chunk_of(limit)).min(limit);
            let qk = QuotaKey { token, tag, period };
            let granted = tokio::time::timeout(self.within, self.store.grant(&qk, ask, limit))
                .await
                .map_err(|_| QuotaError::Store(format!("no answer within {:?}", self.within)))?
                .map_err(|e| QuotaError::Store(e.to_string()));
            match granted {
                Ok(g) => {
                    chunk.left += g;
                    chunk.spent = g < ask;
                }
                // The database down: what is left locally is still spent, nothing more.
                Err(e) if chunk.left == 0 => return Err(e),
                Err(_) => {}
            }
        }
        if chunk.left == 0 {
            return Err(self.refused(QuotaError::Period {
                token: token.to_string(),
                tag: tag.to_owned(),
                period: period.to_owned(),
                limit,
                retry_after_secs,
            }));
        }
        let taken = want.min(chunk.left);
        chunk.left -= taken;
        Ok(taken)
    }

    /// Gives back `n` ids taken by [`Quotas::take_period`] for `period` and not handed out.
    pub async fn give_back_period(&self, token: &Arc<str>, tag: &str, period: &str, n: u64) {
        let mut chunks = self.chunks.lock().await;
        if let Some(c) = chunks.get_mut(&(token.clone(), Arc::<str>::from(tag)))
            && c.period == period
        {
            c.left += n;
        }
    }
}

/// The bucket's level at `now`: refilled at `rate` per second up to `burst`.
fn refill(b: &Bucket, rate: u64, burst: u64, now: Instant) -> f64 {
    let secs = now.saturating_duration_since(b.at).as_secs_f64();
    (b.level + secs * rate as f64).min(burst as f64)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// A quota table in memory, as `leafid_quota_use` holds it.
    #[derive(Default)]
    struct Table(Mutex<HashMap<(String, String, String), u64>>, AtomicU64);

    #[async_trait]
    impl QuotaStore for Table {
        async fn grant(&self, k: &QuotaKey<'_>, want: u64, limit: u64) -> Result<u64, StoreError> {
            self.1.fetch_add(1, Ordering::Relaxed);
            let mut t = self.0.lock().unwrap();
            let used = t
                .entry((k.token.into(), k.tag.into(), k.period.into()))
                .or_default();
            let g = want.min(limit.saturating_sub(*used));
            *used += g;
            Ok(g)
        }
    }

    fn quotas(table: &Arc<Table>) -> Quotas {
        Quotas::new(table.clone(), Duration::from_secs(1))
    }

    #[test]
    fn a_rate_shortens_then_refuses_then_refills() {
        let q = quotas(&Arc::default());
        let t: Arc<str> = "team".into();
        let limits = Limits {
            rate_per_sec: Some(100),
            burst: Some(50),
            ..Limits::default()
        };
        let start = Instant::now();
        assert_eq!(q.take_rate_at(&t, "orders", &limits, 30, start), Ok(30));
        // 20 left: a request for 1,000 gets 20.
        assert_eq!(q.take_rate_at(&t, "orders", &limits, 1_000, start), Ok(20));
        let e = q.take_rate_at(&t, "orders", &limits, 1, start).unwrap_err();
        assert_eq!(e.retry_after_secs(), 1);
        // Another tag has its own bucket.
        assert_eq!(q.take_rate_at(&t, "pay", &limits, 5, start), Ok(5));
        // 100 ms later: 10 ids.
        let later = start + Duration::from_millis(100);
        assert_eq!(q.take_rate_at(&t, "orders", &limits, 1_000, later), Ok(10));
        // Without a rate: anything.
        let none = Limits::default();
        assert_eq!(q.take_rate_at(&t, "orders", &none, 1_000, later), Ok(1_000));
    }

    /// Three servers on one table: the token's ids of a period never pass the limit, and each
    /// server leaves at most one chunk unspent.
    #[tokio::test]
    async fn a_period_share_holds_over_three_servers() {
        let table = Arc::new(Table::default());
        let servers = [quotas(&table), quotas(&table), quotas(&table)];
        let t: Arc<str> = "team".into();
        let limit = Share::from_ppm(10_000).unwrap().of(999_999);
        assert_eq!(limit, 9_999);
        let mut taken = 0u64;
        let mut refused = 0;
        for round in 0..2_000 {
            let server = &servers[round % 3];
            match server
                .take_period(&t, "orders", "20261128", limit, 37, 60)
                .await
            {
                Ok(n) => {
                    assert!((1..=37).contains(&n));
                    taken += n;
                }
                Err(QuotaError::Period { limit: l, .. }) => {
                    assert_eq!(l, limit);
                    refused += 1;
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert!(taken <= limit, "{taken} > {limit}");
        assert!(taken >= limit - 3 * chunk_of(limit), "{taken}");
        assert!(refused > 0);
        // About 20 grants per limit, not one per request.
        assert!(table.1.load(Ordering::Relaxed) < 100, "{:?}", table.1);
        // The next period starts afresh.
        let n = servers[0]
            .take_period(&t, "orders", "20261129", limit, 37, 60)
            .await
            .unwrap();
        assert_eq!(n, 37);
    }

    #[tokio::test]
    async fn ids_not_handed_out_are_given_back_locally() {
        let table = Arc::new(Table::default());
        let q = quotas(&table);
        let t: Arc<str> = "team".into();
        let n = q.take_period(&t, "codes", "2026", 10, 10, 5).await.unwrap();
        assert_eq!(n, 10);
        assert!(q.take_period(&t, "codes", "2026", 10, 1, 5).await.is_err());
        q.give_back_period(&t, "codes", "2026", 4).await;
        assert_eq!(q.take_period(&t, "codes", "2026", 10, 9, 5).await, Ok(4));
    }

    #[test]
    fn shares_round_down_but_never_to_zero() {
        let share = |ppm| Share::from_ppm(ppm).unwrap();
        assert_eq!(share(10_000).of(999_999), 9_999);
        assert_eq!(share(10_000).of(99), 1);
        assert!(Share::from_ppm(0).is_none());
        assert_eq!(share(1_000_000).of(u64::MAX), u64::MAX);
    }
}
