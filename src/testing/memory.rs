//! `MemoryStore`: an in-process [`SegmentStore`](crate::segment::SegmentStore) (every role) for engine unit tests and benchmarks, with
//! knobs to make it slow or failing. The store contract (`tests/api/store_contract.rs`) runs it
//! beside SQLite and MariaDB, so it keeps their semantics; black-box tests use real databases.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, SubsecRound, Utc};

use crate::segment::{
    FormattedCreate, LaneRecord, LaneRegistry, Lease, LeaseStore, NewTag, SpecStore, StoreError,
    TagAdminStore, TagRow, same_format,
};

/// An in-memory `leaf_alloc` table.
#[derive(Debug, Default)]
pub struct MemoryStore {
    rows: Mutex<BTreeMap<String, TagRow>>,
    /// High-water marks of deleted tags, as `leafid_tag_tombstone` holds them. A std Mutex taken
    /// only after `rows` (never the other way), so delete and create see both tables at once.
    tombstones: Mutex<BTreeMap<String, i64>>,
    /// Formats of formatted tags, as `leafid_tag_format` holds them.
    formats: Mutex<BTreeMap<String, String>>,
    /// The lane slot and its claim id, as `leafid_lane` holds them.
    lane: Mutex<Option<(u8, String)>>,
    /// Check values of permutation keys by key id, as `leafid_shape_key` holds them.
    key_checks: Mutex<BTreeMap<String, String>>,
    /// When set, every call fails as if the database were down.
    pub failing: AtomicBool,
    /// Added latency of every call, in milliseconds.
    pub delay_ms: AtomicU64,
    /// Leases granted so far.
    pub leases: AtomicU64,
}

impl MemoryStore {
    /// Records `slot` under `claim_id` as `leafid_lane` would, replacing any record: a
    /// database claimed at another time (`claim_id` starts with the claim's ms, see
    /// [`LaneRecord::new_claim_id`]).
    pub fn record_lane(&self, slot: u8, claim_id: &str) {
        *self.lane.lock().unwrap() = Some((slot, claim_id.to_owned()));
    }

    /// A store holding `(biz_tag, max_id, step)` rows.
    pub fn with_rows(rows: &[(&str, i64, i64)]) -> Self {
        let s = Self::default();
        for &(tag, max_id, step) in rows {
            s.insert(tag, max_id, step);
        }
        s
    }

    /// Inserts or replaces a row.
    pub fn insert(&self, tag: &str, max_id: i64, step: i64) {
        let row = TagRow {
            biz_tag: tag.into(),
            max_id,
            step,
            description: None,
            update_time: Some(now()),
        };
        self.rows.lock().unwrap().insert(tag.into(), row);
    }

    /// Removes a row (as a DBA's `DELETE` would: no tombstone).
    pub fn remove(&self, tag: &str) {
        self.rows.lock().unwrap().remove(tag);
    }

    async fn enter(&self) -> Result<(), StoreError> {
        let delay = self.delay_ms.load(Ordering::Relaxed);
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        if self.failing.load(Ordering::Relaxed) {
            return Err(StoreError::Unavailable("memory store set to fail".into()));
        }
        Ok(())
    }
}

/// What `update_time` records: the time of the write, to the second like the SQL columns.
fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(0)
}

#[async_trait]
impl LeaseStore for MemoryStore {
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        self.enter().await?;
        let mut rows = self.rows.lock().unwrap();
        let row = rows.get_mut(biz_tag).ok_or(StoreError::NotFound)?;
        if row.step <= 0 {
            return Err(StoreError::BadRow("step <= 0".into()));
        }
        // The DBA's step is a floor under an adapted one.
        let want = step.map_or(row.step, |s| s.max(row.step));
        let leased = match row.max_id.checked_add(want) {
            Some(_) => want,
            None if row.max_id < i64::MAX => i64::MAX - row.max_id,
            None => return Err(StoreError::Exhausted),
        };
        row.max_id += leased;
        row.update_time = Some(now());
        self.leases.fetch_add(1, Ordering::Relaxed);
        Ok(Lease {
            max_id: row.max_id,
            leased,
            db_step: Some(row.step),
        })
    }

    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError> {
        self.enter().await?;
        if from >= to || from < 0 {
            return Ok(false);
        }
        let mut rows = self.rows.lock().unwrap();
        match rows.get_mut(biz_tag) {
            Some(row) if row.max_id == to => {
                row.max_id = from;
                row.update_time = Some(now());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.enter().await
    }
}

#[async_trait]
impl TagAdminStore for MemoryStore {
    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError> {
        self.enter().await?;
        Ok(self.rows.lock().unwrap().get(biz_tag).cloned())
    }

    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        self.enter().await?;
        Ok(self.rows.lock().unwrap().values().cloned().collect())
    }

    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError> {
        self.enter().await?;
        Ok(self.rows.lock().unwrap().keys().cloned().collect())
    }

    async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        self.enter().await?;
        let mut rows = self.rows.lock().unwrap();
        if rows.contains_key(&tag.biz_tag) {
            return Err(StoreError::AlreadyExists);
        }
        let high_water = self.tombstones.lock().unwrap().get(&tag.biz_tag).copied();
        if let Some(high_water) = high_water.filter(|&hw| tag.max_id < hw) {
            return Err(StoreError::BelowDeletedMaxId { high_water });
        }
        // A stored format keeps its name (checked under the `rows` lock, which a formatted
        // create holds while it writes its format and row).
        if self.formats.lock().unwrap().contains_key(&tag.biz_tag) {
            return Err(StoreError::AlreadyExists);
        }
        let row = TagRow {
            biz_tag: tag.biz_tag.clone(),
            max_id: tag.max_id,
            step: tag.step,
            description: tag.description.clone(),
            update_time: Some(now()),
        };
        rows.insert(tag.biz_tag.clone(), row.clone());
        Ok(row)
    }

    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        self.enter().await?;
        let mut rows = self.rows.lock().unwrap();
        Ok(rows.get_mut(biz_tag).map(|r| {
            if let Some(s) = step {
                r.step = s;
            }
            if let Some(d) = description {
                r.description = Some(d.into());
            }
            r.update_time = Some(now());
            r.clone()
        }))
    }

    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        self.enter().await?;
        let mut rows = self.rows.lock().unwrap();
        let Some(row) = rows.remove(biz_tag) else {
            return Ok(false);
        };
        let mut tombstones = self.tombstones.lock().unwrap();
        let high_water = tombstones.entry(row.biz_tag).or_insert(row.max_id);
        *high_water = (*high_water).max(row.max_id);
        Ok(true)
    }

    async fn tombstone(&self, biz_tag: &str) -> Result<Option<i64>, StoreError> {
        self.enter().await?;
        Ok(self.tombstones.lock().unwrap().get(biz_tag).copied())
    }

    async fn list_tombstones(&self) -> Result<Vec<String>, StoreError> {
        self.enter().await?;
        Ok(self.tombstones.lock().unwrap().keys().cloned().collect())
    }

    async fn create_formatted_tag(
        &self,
        tag: &NewTag,
        format: &str,
    ) -> Result<FormattedCreate, StoreError> {
        self.enter().await?;
        // One critical section under `rows` (then `tombstones`, then `formats`, the one lock
        // order): the format and the row are written together or not at all.
        let mut rows = self.rows.lock().unwrap();
        let high_water = self.tombstones.lock().unwrap().get(&tag.biz_tag).copied();
        let mut formats = self.formats.lock().unwrap();
        if rows.contains_key(&tag.biz_tag) {
            return Err(StoreError::AlreadyExists);
        }
        if let Some(stored) = formats.get(&tag.biz_tag)
            && !same_format(stored, format)
        {
            return Ok(FormattedCreate::OtherFormat(stored.clone()));
        }
        if let Some(high_water) = high_water.filter(|&hw| tag.max_id < hw) {
            return Err(StoreError::BelowDeletedMaxId { high_water });
        }
        let row = TagRow {
            biz_tag: tag.biz_tag.clone(),
            max_id: tag.max_id,
            step: tag.step,
            description: tag.description.clone(),
            update_time: Some(now()),
        };
        formats
            .entry(tag.biz_tag.clone())
            .or_insert_with(|| format.to_owned());
        rows.insert(tag.biz_tag.clone(), row.clone());
        Ok(FormattedCreate::Created(row))
    }
}

#[async_trait]
impl SpecStore for MemoryStore {
    async fn get_format(&self, biz_tag: &str) -> Result<Option<String>, StoreError> {
        self.enter().await?;
        Ok(self.formats.lock().unwrap().get(biz_tag).cloned())
    }

    async fn list_formats(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.enter().await?;
        let formats = self.formats.lock().unwrap();
        Ok(formats
            .iter()
            .map(|(t, f)| (t.clone(), f.clone()))
            .collect())
    }

    async fn put_format(&self, biz_tag: &str, format: &str) -> Result<bool, StoreError> {
        self.enter().await?;
        let mut formats = self.formats.lock().unwrap();
        if formats.contains_key(biz_tag) {
            return Ok(false);
        }
        formats.insert(biz_tag.to_owned(), format.to_owned());
        Ok(true)
    }

    async fn key_check(&self, key_id: &str) -> Result<Option<String>, StoreError> {
        self.enter().await?;
        Ok(self.key_checks.lock().unwrap().get(key_id).cloned())
    }

    async fn bind_key(&self, key_id: &str, check: &str) -> Result<String, StoreError> {
        self.enter().await?;
        let mut checks = self.key_checks.lock().unwrap();
        Ok(checks
            .entry(key_id.to_owned())
            .or_insert_with(|| check.to_owned())
            .clone())
    }
}

#[async_trait]
impl LaneRegistry for MemoryStore {
    async fn lane_slot(&self) -> Result<Option<u8>, StoreError> {
        self.enter().await?;
        Ok(self.lane.lock().unwrap().as_ref().map(|(s, _)| *s))
    }

    async fn claim_lane_slot(&self, slot: u8) -> Result<u8, StoreError> {
        self.enter().await?;
        let mut lane = self.lane.lock().unwrap();
        Ok(lane
            .get_or_insert_with(|| (slot, LaneRecord::new_claim_id()))
            .0)
    }

    async fn lane_record(&self) -> Result<Option<LaneRecord>, StoreError> {
        self.enter().await?;
        Ok(self
            .lane
            .lock()
            .unwrap()
            .as_ref()
            .map(|(slot, claim_id)| LaneRecord {
                slot: *slot,
                claim_id: claim_id.clone(),
            }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_tag(max_id: i64) -> NewTag {
        NewTag {
            biz_tag: "t".into(),
            step: 10,
            max_id,
            description: None,
        }
    }

    #[tokio::test]
    async fn the_rows_step_is_a_floor_under_an_adapted_step() {
        let store = MemoryStore::with_rows(&[("t", 1, 1000)]);
        let lease = store.lease("t", Some(10)).await.unwrap();
        assert_eq!((lease.max_id, lease.leased), (1001, 1000));
        let lease = store.lease("t", Some(5000)).await.unwrap();
        assert_eq!((lease.max_id, lease.leased), (6001, 5000));
    }

    #[tokio::test]
    async fn a_deleted_tag_cannot_start_again_below_its_high_water_mark() {
        let store = MemoryStore::with_rows(&[("t", 1, 100)]);
        store.lease("t", None).await.unwrap();
        assert!(store.delete_tag("t").await.unwrap());
        let err = store.create_tag(&new_tag(1)).await.unwrap_err();
        assert!(
            matches!(err, StoreError::BelowDeletedMaxId { high_water: 101 }),
            "{err:?}"
        );
        store.create_tag(&new_tag(101)).await.unwrap();
        // Deleted again: the mark stays.
        store.delete_tag("t").await.unwrap();
        let err = store.create_tag(&new_tag(100)).await.unwrap_err();
        assert!(matches!(
            err,
            StoreError::BelowDeletedMaxId { high_water: 101 }
        ));
    }
}
