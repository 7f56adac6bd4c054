//! Where worker ids come from: the trait the database layer implements, and the strategy.
//!
//! - `disposable` (uid-generator's `WORKER_NODE` table): a new id on every start.
//! - `lease`: reuse an id whose lease expired; a heartbeat renews it and stores the last
//!   issued timestamp; a claim only takes an id whose stored time is not ahead of the local
//!   clock (the store's query says so), and the engine resumes after that time, so no tick is
//!   issued twice by two holders of the same id.
//! - `static`: from configuration.
//!
//! Worker ids never exceed the layout's `max_worker_id`: running out is a start-up error of
//! the store, never a wrap.

use std::fmt;
use std::str::FromStr;

/// A worker id held under a lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerLease {
    /// The leased worker id, `<= max_worker_id` of the request.
    pub worker_id: u64,
    /// The last timestamp (unix ms) its previous holder stored; 0 if it was never used.
    pub last_timestamp_ms: i64,
    /// The lease end (unix ms) the row held before this claim; 0 for a new row. Every tick the
    /// previous holder issued lies before it or before `last_timestamp_ms` (a holder issues no
    /// tick past the lease the database confirmed), so a clock-back value may be spent on a
    /// step back to any tick after both.
    pub previous_lease_until_ms: i64,
}

/// Who asks for a worker id: stored with it, so operators can see which process holds which id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// Host name (at most 64 characters are stored).
    pub host: String,
    /// Listening port, as text.
    pub port: String,
    /// A random token naming this process: renewals and releases must present it.
    pub owner: String,
}

/// Why a worker id could not be assigned or kept.
#[derive(thiserror::Error, Debug)]
pub enum WorkerStoreError {
    /// Every worker id the layout allows is taken (or refused because of the clock).
    #[error("no free worker id: {0}")]
    Exhausted(String),
    /// The database failed or could not be reached.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Persistence of worker ids, implemented by the database layer.
#[async_trait::async_trait]
pub trait WorkerStore: Send + Sync + 'static {
    /// Inserts a uid-generator `WORKER_NODE` row for this process and returns its new id
    /// (the row's `ID`), refusing ids above `max_worker_id` instead of wrapping.
    async fn assign_disposable(
        &self,
        node: &NodeInfo,
        max_worker_id: u64,
    ) -> Result<u64, WorkerStoreError>;

    /// Takes an unused worker id, or one whose lease expired before `now_ms` and whose stored
    /// last timestamp is not ahead of `now_ms`, for `lease_ms`.
    async fn acquire_lease(
        &self,
        node: &NodeInfo,
        lease_ms: i64,
        max_worker_id: u64,
        now_ms: i64,
    ) -> Result<WorkerLease, WorkerStoreError>;

    /// Renews the lease until `lease_until_ms` and raises the stored last timestamp to
    /// `last_timestamp_ms`. `Ok(false)`: the lease is no longer ours.
    async fn heartbeat(
        &self,
        worker_id: u64,
        owner: &str,
        lease_until_ms: i64,
        last_timestamp_ms: i64,
    ) -> Result<bool, WorkerStoreError>;

    /// Stores the clock-back value the holder issues under (for operators; see
    /// `snowflake.clock_back_bits`). `Ok(false)`: the lease is no longer ours.
    async fn record_clock_back(
        &self,
        worker_id: u64,
        owner: &str,
        clock_back: u64,
    ) -> Result<bool, WorkerStoreError>;

    /// Gives the lease up (on shutdown), keeping the last timestamp for the next holder.
    async fn release(
        &self,
        worker_id: u64,
        owner: &str,
        last_timestamp_ms: i64,
    ) -> Result<(), WorkerStoreError>;
}

/// How this server gets its worker id (`snowflake.worker.strategy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkerStrategy {
    /// A new id from the database on every start (uid-generator).
    Disposable,
    /// A leased id, reused after expiry, renewed by heartbeat.
    Lease,
    /// A fixed id from configuration.
    Static(u64),
}

/// A strategy string that is not one of the known ones.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
pub enum ParseWorkerStrategyError {
    /// Not `disposable`, `lease`, `static` or `static:N`.
    #[error("unknown worker strategy {0:?}: expected disposable, lease or static")]
    Unknown(String),
    /// `static` without an id (give `static:N`, or the id in its own setting).
    #[error("static worker strategy needs an id (static:N)")]
    MissingStaticId,
    /// `static:N` where N is not a non-negative integer.
    #[error("invalid static worker id {0:?}")]
    BadStaticId(String),
}

impl WorkerStrategy {
    /// Builds the strategy from the strategy string and a separately configured static id
    /// (used when the string is plain `static`).
    pub fn from_config(
        strategy: &str,
        static_id: Option<u64>,
    ) -> Result<Self, ParseWorkerStrategyError> {
        match strategy.parse() {
            Err(ParseWorkerStrategyError::MissingStaticId) => static_id
                .map(Self::Static)
                .ok_or(ParseWorkerStrategyError::MissingStaticId),
            other => other,
        }
    }
}

impl FromStr for WorkerStrategy {
    type Err = ParseWorkerStrategyError;

    /// `disposable`, `lease`, or `static:N` (case-insensitive); plain `static` is
    /// [`ParseWorkerStrategyError::MissingStaticId`] (see [`WorkerStrategy::from_config`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let lower = s.to_ascii_lowercase();
        match lower.as_str() {
            "disposable" => Ok(Self::Disposable),
            "lease" => Ok(Self::Lease),
            "static" => Err(ParseWorkerStrategyError::MissingStaticId),
            _ => match lower.strip_prefix("static:") {
                Some(id) => id
                    .trim()
                    .parse()
                    .map(Self::Static)
                    .map_err(|_| ParseWorkerStrategyError::BadStaticId(id.to_owned())),
                None => Err(ParseWorkerStrategyError::Unknown(s.to_owned())),
            },
        }
    }
}

impl fmt::Display for WorkerStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disposable => f.write_str("disposable"),
            Self::Lease => f.write_str("lease"),
            Self::Static(id) => write!(f, "static:{id}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_parse_and_display_round_trip() {
        assert_eq!("disposable".parse(), Ok(WorkerStrategy::Disposable));
        assert_eq!(" Lease ".parse(), Ok(WorkerStrategy::Lease));
        assert_eq!("static:42".parse(), Ok(WorkerStrategy::Static(42)));
        for s in [
            WorkerStrategy::Disposable,
            WorkerStrategy::Lease,
            WorkerStrategy::Static(7),
        ] {
            assert_eq!(s.to_string().parse(), Ok(s));
        }
    }

    #[test]
    fn bad_strategies_are_refused_clearly() {
        assert_eq!(
            "static".parse::<WorkerStrategy>(),
            Err(ParseWorkerStrategyError::MissingStaticId)
        );
        assert!(matches!(
            "static:-1".parse::<WorkerStrategy>(),
            Err(ParseWorkerStrategyError::BadStaticId(_))
        ));
        assert!(matches!(
            "random".parse::<WorkerStrategy>(),
            Err(ParseWorkerStrategyError::Unknown(_))
        ));
        assert_eq!(
            WorkerStrategy::from_config("static", Some(3)),
            Ok(WorkerStrategy::Static(3))
        );
        assert_eq!(
            WorkerStrategy::from_config("static:5", Some(3)),
            Ok(WorkerStrategy::Static(5))
        );
        assert_eq!(
            WorkerStrategy::from_config("lease", Some(3)),
            Ok(WorkerStrategy::Lease)
        );
    }
}
