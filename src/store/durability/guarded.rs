//! The engines' stores behind the gate: [`DurabilityGate::segment_store`] and
//! [`DurabilityGate::worker_store`] wrap a store so that every lease, worker-id claim and
//! renewal passes the gate first, and every failed call marks the report stale.

use std::sync::Arc;

use async_trait::async_trait;

use super::gate::DurabilityGate;
use crate::segment::{
    LaneRegistry, Lease, LeaseStore, NewTag, SegmentStore, SpecStore, StoreError, TagAdminStore,
    TagRow,
};
use crate::snowflake::worker::{NodeInfo, WorkerLease, WorkerStore, WorkerStoreError};

impl DurabilityGate {
    /// `inner` with every lease gated.
    pub fn segment_store(&self, inner: Arc<dyn SegmentStore>) -> Arc<dyn SegmentStore> {
        Arc::new(GuardedSegmentStore {
            inner,
            gate: self.clone(),
        })
    }

    /// `inner` with every worker-id claim and renewal gated.
    pub fn worker_store(&self, inner: Arc<dyn WorkerStore>) -> Arc<dyn WorkerStore> {
        Arc::new(GuardedWorkerStore {
            inner,
            gate: self.clone(),
        })
    }
}

/// A segment store whose leases pass [`DurabilityGate::admit`] first.
struct GuardedSegmentStore {
    inner: Arc<dyn SegmentStore>,
    gate: DurabilityGate,
}

/// Every lease passes the gate first; the give-back lowers `max_id` and hands nothing out, so
/// it passes whatever the settings.
#[async_trait]
impl LeaseStore for GuardedSegmentStore {
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        self.gate.admit().await?;
        self.gate
            .watch_result(self.inner.lease(biz_tag, step).await)
    }

    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError> {
        self.gate
            .watch_result(self.inner.return_unused(biz_tag, from, to).await)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.gate.watch_result(self.inner.ping().await)
    }
}

/// Ungated (no id is handed out); a failure marks the report stale.
#[async_trait]
impl TagAdminStore for GuardedSegmentStore {
    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError> {
        self.gate.watch_result(self.inner.get_tag(biz_tag).await)
    }

    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        self.gate.watch_result(self.inner.list_tags().await)
    }

    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError> {
        self.gate.watch_result(self.inner.list_tag_names().await)
    }

    async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        self.gate.watch_result(self.inner.create_tag(tag).await)
    }

    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        self.gate
            .watch_result(self.inner.update_tag(biz_tag, step, description).await)
    }

    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        self.gate.watch_result(self.inner.delete_tag(biz_tag).await)
    }

    async fn tombstone(&self, biz_tag: &str) -> Result<Option<i64>, StoreError> {
        self.gate.watch_result(self.inner.tombstone(biz_tag).await)
    }

    async fn list_tombstones(&self) -> Result<Vec<String>, StoreError> {
        self.gate.watch_result(self.inner.list_tombstones().await)
    }

    async fn create_formatted_tag(
        &self,
        tag: &NewTag,
        format: &str,
    ) -> Result<crate::segment::FormattedCreate, StoreError> {
        self.gate
            .watch_result(self.inner.create_formatted_tag(tag, format).await)
    }
}

/// Ungated; a failure marks the report stale.
#[async_trait]
impl SpecStore for GuardedSegmentStore {
    async fn get_format(&self, biz_tag: &str) -> Result<Option<String>, StoreError> {
        self.gate.watch_result(self.inner.get_format(biz_tag).await)
    }

    async fn list_formats(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.gate.watch_result(self.inner.list_formats().await)
    }

    async fn put_format(&self, biz_tag: &str, format: &str) -> Result<bool, StoreError> {
        self.gate
            .watch_result(self.inner.put_format(biz_tag, format).await)
    }

    async fn key_check(&self, key_id: &str) -> Result<Option<String>, StoreError> {
        self.gate.watch_result(self.inner.key_check(key_id).await)
    }

    async fn bind_key(&self, key_id: &str, check: &str) -> Result<String, StoreError> {
        self.gate
            .watch_result(self.inner.bind_key(key_id, check).await)
    }
}

/// Ungated; a failure marks the report stale.
#[async_trait]
impl LaneRegistry for GuardedSegmentStore {
    async fn lane_slot(&self) -> Result<Option<u8>, StoreError> {
        self.gate.watch_result(self.inner.lane_slot().await)
    }

    async fn claim_lane_slot(&self, slot: u8) -> Result<u8, StoreError> {
        self.gate
            .watch_result(self.inner.claim_lane_slot(slot).await)
    }

    async fn lane_record(&self) -> Result<Option<crate::segment::LaneRecord>, StoreError> {
        self.gate.watch_result(self.inner.lane_record().await)
    }
}

/// A worker store whose claims and renewals pass [`DurabilityGate::admit`] first: a lost
/// claim or renewal lets another server take the same worker id while this one still issues.
struct GuardedWorkerStore {
    inner: Arc<dyn WorkerStore>,
    gate: DurabilityGate,
}

#[async_trait]
impl WorkerStore for GuardedWorkerStore {
    async fn assign_disposable(
        &self,
        node: &NodeInfo,
        max_worker_id: u64,
    ) -> Result<u64, WorkerStoreError> {
        self.gate.admit().await?;
        self.gate
            .watch_worker(self.inner.assign_disposable(node, max_worker_id).await)
    }

    async fn acquire_lease(
        &self,
        node: &NodeInfo,
        lease_ms: i64,
        max_worker_id: u64,
        now_ms: i64,
    ) -> Result<WorkerLease, WorkerStoreError> {
        self.gate.admit().await?;
        self.gate.watch_worker(
            self.inner
                .acquire_lease(node, lease_ms, max_worker_id, now_ms)
                .await,
        )
    }

    async fn heartbeat(
        &self,
        worker_id: u64,
        owner: &str,
        lease_until_ms: i64,
        last_timestamp_ms: i64,
    ) -> Result<bool, WorkerStoreError> {
        self.gate.admit().await?;
        self.gate.watch_worker(
            self.inner
                .heartbeat(worker_id, owner, lease_until_ms, last_timestamp_ms)
                .await,
        )
    }

    async fn record_clock_back(
        &self,
        worker_id: u64,
        owner: &str,
        clock_back: u64,
    ) -> Result<bool, WorkerStoreError> {
        // For operators only: nothing is leased by it.
        self.gate.watch_worker(
            self.inner
                .record_clock_back(worker_id, owner, clock_back)
                .await,
        )
    }

    async fn release(
        &self,
        worker_id: u64,
        owner: &str,
        last_timestamp_ms: i64,
    ) -> Result<(), WorkerStoreError> {
        // Gives the id up: a lost release only keeps it taken until the lease expires.
        self.gate.watch_worker(
            self.inner
                .release(worker_id, owner, last_timestamp_ms)
                .await,
        )
    }
}
