//! `MemoryWorkerStore`: an in-process [`WorkerStore`] with the statement semantics of
//! `crate::store::sql::workers` (the SQL every database runs), for tests that need worker ids
//! without a database. Every call runs under one lock, so a claim never races another: the
//! retries the SQL stores need after a lost compare-and-set have nothing to do here.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use crate::snowflake::worker::{NodeInfo, WorkerLease, WorkerStore, WorkerStoreError};

/// One `leafid_worker_lease` row (host and port are only for operators: left out).
#[derive(Clone, Debug, PartialEq, Eq)]
struct LeaseRow {
    /// The token of the process holding the lease; `""` once released.
    owner: String,
    /// Until when (the holder's wall clock, unix ms) the lease holds; 0 once released.
    lease_until_ms: i64,
    /// The latest timestamp a holder stored; only rises.
    last_timestamp_ms: i64,
}

/// The two tables, under one lock.
#[derive(Debug, Default)]
struct Tables {
    /// `leafid_worker_lease` by worker id.
    leases: BTreeMap<u64, LeaseRow>,
    /// The last `WORKER_NODE.ID` handed out (the auto-increment counter; the first id is 1).
    last_node_id: u64,
}

/// In-memory `leafid_worker_lease` and `WORKER_NODE` tables.
#[derive(Debug, Default)]
pub struct MemoryWorkerStore {
    /// A std Mutex: no call awaits while holding it.
    tables: Mutex<Tables>,
}

#[async_trait]
impl WorkerStore for MemoryWorkerStore {
    async fn assign_disposable(
        &self,
        _node: &NodeInfo,
        max_worker_id: u64,
    ) -> Result<u64, WorkerStoreError> {
        let mut tables = self.tables.lock().unwrap();
        // Like an auto-increment column, a refused id is used up all the same.
        tables.last_node_id += 1;
        let id = tables.last_node_id;
        if id > max_worker_id {
            return Err(WorkerStoreError::Exhausted(format!(
                "WORKER_NODE gave id {id}, above the layout's largest worker id {max_worker_id}; \
                 use the lease strategy (ids are reused) or more worker bits"
            )));
        }
        Ok(id)
    }

    async fn acquire_lease(
        &self,
        node: &NodeInfo,
        lease_ms: i64,
        max_worker_id: u64,
        now_ms: i64,
    ) -> Result<WorkerLease, WorkerStoreError> {
        let max = max_worker_id.min(i64::MAX as u64);
        let until = now_ms.saturating_add(lease_ms);
        let mut tables = self.tables.lock().unwrap();
        let leases = &mut tables.leases;
        // SELECT_EXPIRED: expired, in range, not ahead of our clock; the oldest lease first.
        let expired = leases
            .iter()
            .filter(|(id, r)| {
                **id <= max && r.lease_until_ms < now_ms && r.last_timestamp_ms <= now_ms
            })
            .min_by_key(|(id, r)| (r.lease_until_ms, **id))
            .map(|(id, _)| *id);
        if let Some(worker_id) = expired {
            // CLAIM: the compare-and-set always holds under the lock.
            let row = leases.get_mut(&worker_id).expect("just found");
            let previous_lease_until_ms = row.lease_until_ms;
            row.owner = node.owner.clone();
            row.lease_until_ms = until;
            return Ok(WorkerLease {
                worker_id,
                last_timestamp_ms: row.last_timestamp_ms,
                previous_lease_until_ms,
            });
        }
        // NEXT_ID: one past the largest id ever leased (rows are never deleted).
        let next = leases.keys().next_back().map_or(0, |m| m + 1);
        if next > max {
            let ahead = leases
                .iter()
                .filter(|(id, r)| {
                    **id <= max && r.lease_until_ms < now_ms && r.last_timestamp_ms > now_ms
                })
                .count();
            return Err(WorkerStoreError::Exhausted(format!(
                "all {} worker ids are leased{}",
                max_worker_id + 1,
                if ahead > 0 {
                    format!(
                        " ({ahead} expired ones refused: their last timestamp is ahead of this clock)"
                    )
                } else {
                    String::new()
                }
            )));
        }
        leases.insert(
            next,
            LeaseRow {
                owner: node.owner.clone(),
                lease_until_ms: until,
                last_timestamp_ms: 0,
            },
        );
        Ok(WorkerLease {
            worker_id: next,
            last_timestamp_ms: 0,
            previous_lease_until_ms: 0,
        })
    }

    async fn heartbeat(
        &self,
        worker_id: u64,
        owner: &str,
        lease_until_ms: i64,
        last_timestamp_ms: i64,
    ) -> Result<bool, WorkerStoreError> {
        let mut tables = self.tables.lock().unwrap();
        match tables.leases.get_mut(&worker_id) {
            Some(row) if row.owner == owner => {
                row.lease_until_ms = lease_until_ms;
                row.last_timestamp_ms = row.last_timestamp_ms.max(last_timestamp_ms);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn record_clock_back(
        &self,
        worker_id: u64,
        owner: &str,
        _clock_back: u64,
    ) -> Result<bool, WorkerStoreError> {
        // The value is not kept (nothing reads it back here); the owner check is the SQL's.
        let tables = self.tables.lock().unwrap();
        Ok(tables
            .leases
            .get(&worker_id)
            .is_some_and(|row| row.owner == owner))
    }

    async fn release(
        &self,
        worker_id: u64,
        owner: &str,
        last_timestamp_ms: i64,
    ) -> Result<(), WorkerStoreError> {
        let mut tables = self.tables.lock().unwrap();
        if let Some(row) = tables.leases.get_mut(&worker_id)
            && row.owner == owner
        {
            row.owner.clear();
            row.lease_until_ms = 0;
            row.last_timestamp_ms = row.last_timestamp_ms.max(last_timestamp_ms);
        }
        Ok(())
    }
}
