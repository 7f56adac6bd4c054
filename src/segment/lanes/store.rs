//! [`LaneStore`]: a segment store seen through its lane ([`super::map`]). Every server's store
//! is wrapped in one: with lanes it maps each lease into the lane's blocks after checking the
//! database's recorded slot; without lanes it checks that the database records none.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::claims::{LaneClaims, PEER_WAIT, Refusal, SCAN_WAIT};
use super::map;
use crate::segment::{
    LaneRecord, LaneRegistry, Lease, LeaseStore, NewTag, SegmentStore, SpecStore, StoreError,
    TagAdminStore, TagRow,
};

/// How a server uses a database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LaneMode {
    /// No lanes: ids as leased. The database must record no slot.
    Plain,
    /// A lane with this slot. `own`: this server's own region's database, which records the slot
    /// at the first lease if none is recorded; another region's lane must have recorded it.
    Lane {
        /// The slot.
        slot: u8,
        /// Whether this is the server's own lane.
        own: bool,
    },
}

/// How often a server without lanes checks again that its database records no slot.
const PLAIN_RECHECK: Duration = Duration::from_secs(60);

/// A [`SegmentStore`] through a lane.
pub struct LaneStore {
    inner: Arc<dyn SegmentStore>,
    mode: LaneMode,
    /// Set once the database's slot was found right (a recorded slot never changes).
    verified: AtomicBool,
    /// Plain mode: when the last check passed, in ms since `born` (`-1`: never).
    plain_checked_ms: AtomicI64,
    born: Instant,
    /// The lane databases this server reaches, when it joined them ([`LaneStore::joined`]).
    claims: Option<Arc<LaneClaims>>,
}

impl LaneStore {
    /// `inner` used as `mode` says.
    pub fn new(inner: Arc<dyn SegmentStore>, mode: LaneMode) -> Self {
        Self {
            inner,
            mode,
            verified: AtomicBool::new(false),
            plain_checked_ms: AtomicI64::new(-1),
            born: Instant::now(),
            claims: None,
        }
    }

    /// `inner` used as `mode` says, one of the databases in `claims`: its own lane's slot is
    /// recorded only if no other reachable database records it, and a clash or a mismatch of
    /// the own lane refuses it for good ([`LaneClaims`]).
    pub fn joined(inner: Arc<dyn SegmentStore>, mode: LaneMode, claims: &Arc<LaneClaims>) -> Self {
        let (configured, own) = match mode {
            LaneMode::Plain => (None, true),
            LaneMode::Lane { slot, own } => (Some(slot), own),
        };
        claims.join(configured, own, inner.clone());
        Self {
            claims: Some(claims.clone()),
            ..Self::new(inner, mode)
        }
    }

    /// Whether this is the server's own database (a server without lanes has only that one).
    fn is_own(&self) -> bool {
        matches!(
            self.mode,
            LaneMode::Plain | LaneMode::Lane { own: true, .. }
        )
    }

    /// A mismatch of the own lane refuses it for good (the recorded slot never changes); of
    /// another lane, it is that lane's error only.
    fn mismatch(&self, recorded: Option<u8>, configured: Option<u8>) -> StoreError {
        match &self.claims {
            Some(c) if self.is_own() => c.refuse(Refusal::Mismatch {
                recorded,
                configured,
            }),
            _ => StoreError::LaneMismatch {
                recorded,
                configured,
            },
        }
    }

    /// The mode.
    pub fn mode(&self) -> LaneMode {
        self.mode
    }

    /// Checks the database's recorded slot against the mode before a lease. Relaxed atomics
    /// suffice: each flag only caches the outcome of a database read that any thread may repeat;
    /// no other memory is published through them.
    async fn check(&self) -> Result<(), StoreError> {
        // Refused own lane: no lease at all, whatever this database says now.
        if let Some(r) = self.claims.as_ref().and_then(|c| c.refusal())
            && self.is_own()
        {
            return Err(r.to_error());
        }
        match self.mode {
            LaneMode::Plain => {
                let now = self.born.elapsed().as_millis() as i64;
                let last = self.plain_checked_ms.load(Ordering::Relaxed);
                if last >= 0 && now - last < PLAIN_RECHECK.as_millis() as i64 {
                    return Ok(());
                }
                match self.inner.lane_slot().await? {
                    None => {
                        self.plain_checked_ms.store(now, Ordering::Relaxed);
                        Ok(())
                    }
                    Some(slot) => Err(self.mismatch(Some(slot), None)),
                }
            }
            LaneMode::Lane { slot, own } => {
                if self.verified.load(Ordering::Relaxed) {
                    return Ok(());
                }
                // Whether this lease records the own slot: once in the database's life.
                let mut claiming = false;
                let recorded = match self.inner.lane_slot().await? {
                    Some(s) => s,
                    None if own => {
                        // Never record a slot another reachable database records already. A
                        // slot is recorded once in a database's life, so this first claim waits
                        // for a slow peer's answer up to the scan's wait, not a lease's: a peer
                        // that answers in a second is reached, not passed over (a partition,
                        // where no answer comes, is the case docs/deploy.md 12 describes).
                        if let Some(c) = &self.claims {
                            c.before_claim(slot, SCAN_WAIT).await?;
                        }
                        claiming = true;
                        self.inner.claim_lane_slot(slot).await?
                    }
                    None => {
                        return Err(StoreError::LaneMismatch {
                            recorded: None,
                            configured: Some(slot),
                        });
                    }
                };
                // Every lane's first lease reads every reachable database's claim: a clash found
                // here (another database records the own slot) refuses the own lane. The own
                // lane waits for it before its first lease, having recorded its own slot
                // first, so of two servers claiming one slot at once at least one sees the
                // other; another lane's first lease (a request passed on, perhaps because the
                // own database does not answer) reads them in the background.
                if let Some(c) = &self.claims {
                    if own {
                        c.scan(if claiming { SCAN_WAIT } else { PEER_WAIT }).await?;
                    } else {
                        let c = c.clone();
                        tokio::spawn(async move { c.scan(SCAN_WAIT).await });
                    }
                }
                if recorded != slot {
                    return Err(self.mismatch(Some(recorded), Some(slot)));
                }
                self.verified.store(true, Ordering::Relaxed);
                Ok(())
            }
        }
    }
}

/// A lease asked of the wrong lane: formatted tags' period rows lease only from slot 0, and the
/// router sends them there, so this is a routing fault, not a lane mismatch.
fn refused(why: String) -> StoreError {
    StoreError::Unavailable(why.into())
}

/// Leases mapped into the lane's blocks after the slot check; the rest as the database.
#[async_trait]
impl LeaseStore for LaneStore {
    async fn lease(&self, biz_tag: &str, step: Option<i64>) -> Result<Lease, StoreError> {
        self.check().await?;
        let LaneMode::Lane { slot, .. } = self.mode else {
            return self.inner.lease(biz_tag, step).await;
        };
        // A formatted tag's period row: its sequence is written into the text, with no room for
        // a slot. Leased only from slot 0, as is (module docs).
        if crate::segment::PeriodRow::is_period_row(biz_tag) {
            if slot == 0 {
                return self.inner.lease(biz_tag, step).await;
            }
            return Err(refused(format!(
                "formatted tags lease only from lane slot 0; this is slot {slot}"
            )));
        }
        let lease = self.inner.lease(biz_tag, step).await?;
        let start = lease.max_id - lease.leased;
        let end = map::cut_at_block(start, lease.max_id);
        let first = map::global(start, slot).ok_or(StoreError::Exhausted)?;
        // The last block of the last slot ends at `i64::MAX` itself, which a lease's exclusive
        // end cannot express: that one id is never issued.
        let leased = (end - start).min(i64::MAX - first);
        if leased == 0 {
            return Err(StoreError::Exhausted);
        }
        Ok(Lease {
            max_id: first + leased,
            leased,
            db_step: lease.db_step,
        })
    }

    /// A lane gives nothing back: its leases were mapped (and perhaps cut at a block's end), so
    /// the row's `max_id` is not the lease's end in global ids. Without lanes, as the database.
    async fn return_unused(&self, biz_tag: &str, from: i64, to: i64) -> Result<bool, StoreError> {
        match self.mode {
            LaneMode::Plain => self.inner.return_unused(biz_tag, from, to).await,
            LaneMode::Lane { .. } => Ok(false),
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
}

/// As the database: rows and tombstones are the lane's own, in its local positions.
#[async_trait]
impl TagAdminStore for LaneStore {
    async fn get_tag(&self, biz_tag: &str) -> Result<Option<TagRow>, StoreError> {
        self.inner.get_tag(biz_tag).await
    }

    async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        self.inner.list_tags().await
    }

    async fn list_tag_names(&self) -> Result<Vec<String>, StoreError> {
        self.inner.list_tag_names().await
    }

    async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        self.inner.create_tag(tag).await
    }

    async fn update_tag(
        &self,
        biz_tag: &str,
        step: Option<i64>,
        description: Option<&str>,
    ) -> Result<Option<TagRow>, StoreError> {
        self.inner.update_tag(biz_tag, step, description).await
    }

    async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
        self.inner.delete_tag(biz_tag).await
    }

    async fn tombstone(&self, biz_tag: &str) -> Result<Option<i64>, StoreError> {
        self.inner.tombstone(biz_tag).await
    }

    async fn list_tombstones(&self) -> Result<Vec<String>, StoreError> {
        self.inner.list_tombstones().await
    }

    async fn create_formatted_tag(
        &self,
        tag: &NewTag,
        format: &str,
    ) -> Result<crate::segment::FormattedCreate, StoreError> {
        self.inner.create_formatted_tag(tag, format).await
    }
}

/// As the database.
#[async_trait]
impl SpecStore for LaneStore {
    async fn get_format(&self, biz_tag: &str) -> Result<Option<String>, StoreError> {
        self.inner.get_format(biz_tag).await
    }

    async fn list_formats(&self) -> Result<Vec<(String, String)>, StoreError> {
        self.inner.list_formats().await
    }

    async fn put_format(&self, biz_tag: &str, format: &str) -> Result<bool, StoreError> {
        self.inner.put_format(biz_tag, format).await
    }

    async fn key_check(&self, key_id: &str) -> Result<Option<String>, StoreError> {
        self.inner.key_check(key_id).await
    }

    async fn bind_key(&self, key_id: &str, check: &str) -> Result<String, StoreError> {
        self.inner.bind_key(key_id, check).await
    }
}

/// As the database: the lease checks the slot against the mode, these calls do not.
#[async_trait]
impl LaneRegistry for LaneStore {
    async fn lane_slot(&self) -> Result<Option<u8>, StoreError> {
        self.inner.lane_slot().await
    }

    async fn claim_lane_slot(&self, slot: u8) -> Result<u8, StoreError> {
        self.inner.claim_lane_slot(slot).await
    }

    async fn lane_record(&self) -> Result<Option<LaneRecord>, StoreError> {
        self.inner.lane_record().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemoryStore;

    #[tokio::test]
    async fn leases_map_into_the_lanes_blocks_and_never_meet() {
        let a = Arc::new(MemoryStore::with_rows(&[("t", 1, 1000)]));
        let b = Arc::new(MemoryStore::with_rows(&[("t", 1, 1000)]));
        let la = LaneStore::new(a.clone(), LaneMode::Lane { slot: 0, own: true });
        let lb = LaneStore::new(b.clone(), LaneMode::Lane { slot: 1, own: true });
        let mut seen = std::collections::HashSet::new();
        for _ in 0..3000 {
            for l in [&la, &lb] {
                let lease = l.lease("t", None).await.unwrap();
                for id in lease.max_id - lease.leased..lease.max_id {
                    assert!(seen.insert(id), "{id} twice");
                }
            }
        }
        assert_eq!(a.lane_slot().await.unwrap(), Some(0));
        // 3,000 leases of 1,000 cross two block boundaries: cut there, not spanning.
        assert!(
            seen.len() < 6_000_000 && seen.len() > 5_990_000,
            "{}",
            seen.len()
        );
    }

    #[tokio::test]
    async fn a_slot_mismatch_and_a_plain_server_on_a_lane_are_refused() {
        let db = Arc::new(MemoryStore::with_rows(&[
            ("t", 1, 10),
            ("t@20261127", 1, 10),
        ]));
        let own = LaneStore::new(db.clone(), LaneMode::Lane { slot: 2, own: true });
        own.lease("t", None).await.unwrap();
        let wrong = LaneStore::new(
            db.clone(),
            LaneMode::Lane {
                slot: 3,
                own: false,
            },
        );
        let e = wrong.lease("t", None).await.unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::LaneMismatch {
                    recorded: Some(2),
                    configured: Some(3)
                }
            ),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("lane slot 2, configured as slot 3"), "{e}");
        let plain = LaneStore::new(db.clone(), LaneMode::Plain);
        let e = plain.lease("t", None).await.unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::LaneMismatch {
                    recorded: Some(2),
                    configured: None
                }
            ),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("lane slot 2"), "{e}");
        // A formatted tag's period leases only from slot 0.
        let e = own.lease("t@20261127", None).await.unwrap_err().to_string();
        assert!(e.contains("slot 0"), "{e}");
        let fresh = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
        let other = LaneStore::new(
            fresh,
            LaneMode::Lane {
                slot: 1,
                own: false,
            },
        );
        let e = other.lease("t", None).await.unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::LaneMismatch {
                    recorded: None,
                    configured: Some(1)
                }
            ),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("records no slot"), "{e}");
    }

    /// The last id of the last slot is `i64::MAX`, which a lease's exclusive end cannot
    /// express: the lease stops one short of it, and the next is exhausted.
    #[tokio::test]
    async fn the_last_slot_s_last_lease_stops_below_i64_max() {
        let db = Arc::new(MemoryStore::with_rows(&[("t", map::LOCAL_END - 5, 10)]));
        let last = LaneStore::new(db, LaneMode::Lane { slot: 7, own: true });
        let lease = last.lease("t", None).await.unwrap();
        assert_eq!((lease.max_id, lease.leased), (i64::MAX, 4));
        let e = last.lease("t", None).await.unwrap_err();
        assert!(matches!(e, StoreError::Exhausted), "{e:?}");
    }
}
