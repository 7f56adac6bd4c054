//! Snowflake ids through the [`IdService`]: one id (from the ring without waiting when it can),
//! a batch, and the id bounds of a time range.

use std::sync::Arc;

use crate::access::Credentials;
use crate::error::Error;
use crate::snowflake::engine::SnowflakeEngine;

use super::IdService;

/// The target snowflake ids are charged under in a caller's quotas (as its scope entry).
const SNOWFLAKE: &str = "snowflake";
use super::segment::{MAX_COUNT, check_count};

impl IdService {
    /// The next snowflake id: from memory at once when it can, else on the blocking pool (a
    /// generator that waits for the next tick or a ring refill never holds an async worker).
    pub async fn next_snowflake_id(&self, who: &impl Credentials) -> Result<u64, Error> {
        let caller = self.access.admit_ids(who, None)?;
        let engine = self.snowflake()?;
        // A caller with limits pays its id under the target `snowflake`.
        self.charge_rate(caller.as_ref(), SNOWFLAKE, 1)?;
        let id = match engine.try_next_id() {
            Some(id) => id.map_err(Error::from),
            None => blocking(engine, SnowflakeEngine::next_id_blocking).await,
        };
        if id.is_err() {
            self.refund_rate(caller.as_ref(), SNOWFLAKE, 1);
        }
        id
    }

    /// `count` increasing snowflake ids of this server's generator.
    pub async fn next_snowflake_ids(
        &self,
        who: &impl Credentials,
        count: usize,
    ) -> Result<Vec<u64>, Error> {
        check_count(count as u64, MAX_COUNT)?;
        if count == 1 {
            return Ok(vec![self.next_snowflake_id(who).await?]);
        }
        let caller = self.access.admit_ids(who, None)?;
        let engine = self.snowflake()?;
        let charged = self.charge_rate(caller.as_ref(), SNOWFLAKE, count as u64)?;
        let ids = blocking(engine, move |e| e.next_ids_blocking(charged as usize)).await;
        let served = ids.as_ref().map_or(0, |ids| ids.len() as u64);
        self.refund_rate(caller.as_ref(), SNOWFLAKE, charged - served);
        ids
    }

    /// The smallest and largest id any worker can issue in `[from_ms, to_ms)` under this
    /// server's layout (`invalid_time_range` for a range the layout cannot hold).
    pub fn snowflake_bounds(&self, from_ms: i64, to_ms: i64) -> Result<(u64, u64), Error> {
        Ok(self.snowflake()?.layout().id_bounds(from_ms, to_ms)?)
    }
}

/// Runs a generator call that may wait on the blocking pool; a call that panicked there is
/// `internal`, never an id.
async fn blocking<T, E>(
    engine: &Arc<SnowflakeEngine>,
    call: impl FnOnce(&SnowflakeEngine) -> Result<T, E> + Send + 'static,
) -> Result<T, Error>
where
    T: Send + 'static,
    E: Into<Error> + Send + 'static,
{
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || call(&engine))
        .await
        .map_err(|_| Error::Internal)?
        .map_err(Into::into)
}
