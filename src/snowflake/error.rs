//! Errors of the snowflake generators: small, `Copy`, nothing allocated on the hot path.

use crate::snowflake::layout::ComposeError;

/// Why a snowflake id could not be issued (or a generator could not be built).
///
/// The HTTP layer maps [`ClockMovedBackwards`](Self::ClockMovedBackwards) to 503
/// `clock_moved_backwards` with `Retry-After` (see [`retry_after_ms`](Self::retry_after_ms)),
/// [`TimeBitsExhausted`](Self::TimeBitsExhausted) to 503 `time_bits_exhausted`.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
pub enum SnowflakeError {
    /// The clock is behind the last tick used by more than the tolerated step.
    #[error("clock moved backwards by {by_ms} ms")]
    ClockMovedBackwards {
        /// How long until the clock is back at the last tick used.
        by_ms: u64,
    },
    /// The time delta no longer fits the layout's time field.
    #[error("time bits of the layout are exhausted")]
    TimeBitsExhausted,
    /// The clock reads a time before the layout's epoch.
    #[error("clock is before the layout's epoch")]
    BeforeEpoch,
    /// The cached generator's ring stayed empty for the whole bounded wait.
    #[error("no id available: the ring stayed empty past the wait")]
    Exhausted,
    /// This server's worker-id lease could not be renewed in time (or was taken over): it stops
    /// issuing ids rather than risk sharing its worker id with another server.
    #[error("worker id lease expired; not issuing ids until it is renewed")]
    WorkerLeaseExpired,
    /// The cached generator was shut down and its ring is drained.
    #[error("generator is shut down")]
    ShutDown,
    /// The worker id does not fit the layout's worker field.
    #[error("worker id {worker_id} is larger than the layout allows ({max})")]
    WorkerIdTooLarge {
        /// The worker id that was given.
        worker_id: u64,
        /// The largest worker id of the layout.
        max: u64,
    },
    /// No worker lease may be taken or renewed: the database's settings can lose a committed
    /// lease in a crash (the lease gate, `crate::lease_gate`); names the setting and its fix.
    /// Answered instead of the not-ready reasons while the gate refuses.
    #[error("no worker lease from this database: {0}")]
    LossyDatabase(String),
    /// A generator setting is out of range; names the setting.
    #[error("invalid snowflake setting: {0}")]
    InvalidConfig(&'static str),
}

impl SnowflakeError {
    /// A hint for `Retry-After`, in ms, for the errors that go away by waiting.
    pub fn retry_after_ms(&self) -> Option<u64> {
        match self {
            SnowflakeError::ClockMovedBackwards { by_ms } => Some((*by_ms).max(1)),
            SnowflakeError::Exhausted | SnowflakeError::WorkerLeaseExpired => Some(1_000),
            _ => None,
        }
    }
}

impl From<ComposeError> for SnowflakeError {
    fn from(e: ComposeError) -> Self {
        match e {
            ComposeError::TimeBitsExhausted => SnowflakeError::TimeBitsExhausted,
            ComposeError::BeforeEpoch => SnowflakeError::BeforeEpoch,
            // The generators check worker and sequence up front; these cannot reach callers.
            ComposeError::WorkerIdTooLarge => SnowflakeError::InvalidConfig("worker id"),
            ComposeError::SequenceTooLarge => SnowflakeError::InvalidConfig("sequence"),
        }
    }
}
