//! [`LaneClaims`]: a slot is claimed once, everywhere. Every database a server reaches as a lane
//! (its own and the others) joins one `LaneClaims`; it reads each one's [`LaneRecord`] (the
//! slot and the identity of the claim that recorded it) and refuses the server's **own** lane
//! when two databases record one slot:
//!
//! - **before the own database records its slot** (its first lease): if another reachable
//!   database records that slot already, nothing is recorded and the own lane is refused. So
//!   with region A's database recording slot 0, a region B configured `lanes.slot = 0` on a
//!   fresh database refuses, whichever of the two started first;
//! - **at every lane's first lease, at start and at each repair pass** ([`LaneClaims::scan`]):
//!   if another reachable database records the own slot under another claim id, the own lane
//!   is refused unless its claim is clearly the earlier one (by more than [`CLAIM_MARGIN_MS`]);
//!   the earlier claim keeps serving (the other database's own servers find the same clash and
//!   refuse). Two claims made at the same moment (both servers read before the other wrote)
//!   are not ordered: whoever sees the other refuses, and since each one reads the other's
//!   database after writing its own, at least one of them sees it.
//!
//! One database reached twice (under two URLs) has one claim id and is no clash.
//!
//! A refusal is sticky until restart: a recorded slot never changes, so the clash stays until an
//! operator resolves it. The router ([`super::Lanes`]) answers `lane_mismatch` for every request
//! while the own lane is refused, buffered ids included: they were leased under the clashing
//! slot.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::segment::{LaneRecord, SegmentStore, StoreError};
use crate::telemetry::LogLimiter;

/// Two claims of one slot closer in time than this (ms) are not ordered: the own lane refuses
/// whichever came first, since the clocks of two regions' databases may disagree.
pub const CLAIM_MARGIN_MS: u64 = 60_000;

/// How long a lease waits for another lane database's claim before taking it as unreachable
/// (they are read at once, not one after another). The own lane's first lease pays it only when
/// a lane does not answer; an unreachable database is read again at the next scan.
pub const PEER_WAIT: Duration = Duration::from_millis(300);

/// How long a scan at start or at a repair pass waits for each claim (off the request path).
pub const SCAN_WAIT: Duration = Duration::from_secs(5);

/// Why the own lane is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The own database records another slot, or records one while this server has no lanes.
    Mismatch {
        /// The slot recorded.
        recorded: Option<u8>,
        /// The slot configured.
        configured: Option<u8>,
    },
    /// Another reachable database records the own slot.
    Clash {
        /// The slot.
        slot: u8,
        /// Which claims.
        detail: String,
    },
}

impl Refusal {
    /// The store error a refused lease answers.
    pub fn to_error(&self) -> StoreError {
        match self {
            Self::Mismatch {
                recorded,
                configured,
            } => StoreError::LaneMismatch {
                recorded: *recorded,
                configured: *configured,
            },
            Self::Clash { slot, detail } => StoreError::SlotClash {
                slot: *slot,
                detail: detail.clone(),
            },
        }
    }
}

/// One database reached as a lane.
#[derive(Clone)]
struct Member {
    /// The slot configured for it (`None`: a server without lanes).
    configured: Option<u8>,
    /// Whether it is the server's own database.
    own: bool,
    /// The database (its [`crate::segment::LaneRegistry`] calls).
    db: Arc<dyn SegmentStore>,
}

/// The lane databases one server reaches, and whether its own lane is refused.
pub struct LaneClaims {
    members: Mutex<Vec<Member>>,
    refusal: Mutex<Option<Refusal>>,
    /// Whether `refusal` is set: read on every request, without the lock.
    refused: AtomicBool,
    log: LogLimiter,
    /// `leafid_lane_refused`: 1 while the own lane is refused.
    gauge: prometheus::IntGauge,
}

impl std::fmt::Debug for LaneClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaneClaims")
            .field("refusal", &self.refusal())
            .finish_non_exhaustive()
    }
}

impl Default for LaneClaims {
    fn default() -> Self {
        Self {
            members: Mutex::default(),
            refusal: Mutex::default(),
            refused: AtomicBool::new(false),
            log: LogLimiter::new(crate::telemetry::REPEAT_LOG_INTERVAL),
            gauge: prometheus::IntGauge::new(
                "leafid_lane_refused",
                "1 while this server's own lane is refused (lane_mismatch: a slot mismatch or \
                 two databases recording one slot)",
            )
            .expect("a valid metric name"),
        }
    }
}

impl LaneClaims {
    /// An empty set: lanes join it as they are built ([`super::LaneStore::joined`]).
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    /// Adds a database: `configured` its slot (`None` without lanes), `own` whether it is the
    /// server's own.
    pub(crate) fn join(&self, configured: Option<u8>, own: bool, db: Arc<dyn SegmentStore>) {
        self.members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Member {
                configured,
                own,
                db,
            });
    }

    /// `leafid_lane_refused` for the server's registry.
    pub fn collector(&self) -> Box<dyn prometheus::core::Collector> {
        Box::new(self.gauge.clone())
    }

    /// Why the own lane is refused, `None` while it is not.
    pub fn refusal(&self) -> Option<Refusal> {
        if !self.is_refused() {
            return None;
        }
        self.refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Whether the own lane is refused (one relaxed load: set once, never cleared; the reason
    /// is read under its lock).
    pub fn is_refused(&self) -> bool {
        self.refused.load(Ordering::Relaxed)
    }

    /// The refusal as the text callers see, `None` while the own lane is not refused.
    pub fn refused_because(&self) -> Option<String> {
        self.refusal().map(|r| r.to_error().to_string())
    }

    /// Refuses the own lane for good (the first reason is kept), logged once per interval.
    pub(crate) fn refuse(&self, why: Refusal) -> StoreError {
        let mut held = self.refusal.lock().unwrap_or_else(|e| e.into_inner());
        let kept = held.get_or_insert(why).clone();
        drop(held);
        self.refused.store(true, Ordering::Relaxed);
        self.gauge.set(1);
        let e = kept.to_error();
        if let Some(held_back) = self.log.allow("own lane refused") {
            tracing::error!(error = %e, held_back, "own lane refused: this server hands out no segment ids");
        }
        e
    }

    fn members(&self) -> Vec<Member> {
        self.members
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The records of the other reachable databases that record a slot (an unreachable one is
    /// skipped: it is read again at the next scan).
    async fn others(&self, wait: Duration) -> Vec<LaneRecord> {
        let mut reads = tokio::task::JoinSet::new();
        for m in self.members().into_iter().filter(|m| !m.own) {
            reads.spawn(async move { tokio::time::timeout(wait, m.db.lane_record()).await });
        }
        let mut out = Vec::new();
        while let Some(read) = reads.join_next().await {
            if let Ok(Ok(Ok(Some(r)))) = read {
                out.push(r);
            }
        }
        out
    }

    /// Before the own database records `slot`: refused if another reachable database records
    /// it already (nothing is recorded then).
    pub(crate) async fn before_claim(&self, slot: u8, wait: Duration) -> Result<(), StoreError> {
        if let Some(other) = self.others(wait).await.into_iter().find(|r| r.slot == slot) {
            return Err(self.refuse(Refusal::Clash {
                slot,
                detail: format!(
                    "another reachable lane database records it under claim {}; this server's \
                     own database records no slot and was not claimed",
                    other.claim_id
                ),
            }));
        }
        Ok(())
    }

    /// Reads every reachable database's record and refuses the own lane if another database
    /// records the own slot under another claim id and the own claim is not clearly earlier.
    /// `Ok` when nothing is refused (an unreachable database is checked at the next scan).
    /// Each database's claim is awaited at most `wait` ([`PEER_WAIT`] on a lease,
    /// [`SCAN_WAIT`] off the request path).
    pub async fn scan(&self, wait: Duration) -> Result<(), StoreError> {
        if let Some(r) = self.refusal() {
            return Err(r.to_error());
        }
        let Some(own) = self.members().into_iter().find(|m| m.own) else {
            return Ok(());
        };
        let mine = match tokio::time::timeout(wait, own.db.lane_record()).await {
            Ok(Ok(Some(mine))) => mine,
            // Not recorded yet: refused now (not at the first lease only) if another reachable
            // database records the configured slot, so the server is not ready from the start.
            Ok(Ok(None)) => {
                return match own.configured {
                    Some(slot) => self.before_claim(slot, wait).await,
                    None => Ok(()),
                };
            }
            Ok(Err(_)) | Err(_) => return Ok(()),
        };
        if own.configured.is_some_and(|c| c != mine.slot) {
            // The own lane's check refuses this as a mismatch at its lease.
            return Ok(());
        }
        for other in self.others(wait).await {
            if other.slot != mine.slot || other.claim_id == mine.claim_id {
                continue;
            }
            let earlier = match (mine.claimed_ms(), other.claimed_ms()) {
                (Some(a), Some(b)) => a.saturating_add(CLAIM_MARGIN_MS) < b,
                _ => false,
            };
            if earlier {
                if let Some(held_back) = self.log.allow("a later claim of the own slot") {
                    tracing::error!(
                        slot = mine.slot, own_claim = %mine.claim_id, later_claim = %other.claim_id,
                        held_back,
                        "another lane database records this server's slot, claimed later: its \
                         servers refuse it; this lane keeps serving"
                    );
                }
                continue;
            }
            return Err(self.refuse(Refusal::Clash {
                slot: mine.slot,
                detail: format!(
                    "this server's own database under claim {}, another reachable one under \
                     claim {}, not clearly later",
                    mine.claim_id, other.claim_id
                ),
            }));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::segment::lanes::{Lane, LaneMode, LaneStore, Lanes};
    use crate::segment::{BizTag, LaneRegistry, SegmentAllocator, SegmentConfig, SegmentError};
    use crate::testing::MemoryStore;

    fn engine(db: &Arc<MemoryStore>, slot: u8, own: bool, claims: &Arc<LaneClaims>) -> Lane {
        let store = LaneStore::joined(db.clone(), LaneMode::Lane { slot, own }, claims);
        let config = SegmentConfig {
            wait_timeout: std::time::Duration::from_millis(200),
            ..Default::default()
        };
        Lane::new(
            slot,
            format!("db{slot}"),
            SegmentAllocator::new(Arc::new(store), config),
        )
    }

    /// A region: `own` as lane `slot`, `other` as lane `other_slot`, joined in one claims set.
    fn region(
        own: &Arc<MemoryStore>,
        slot: u8,
        other: &Arc<MemoryStore>,
        other_slot: u8,
    ) -> (Lanes, Arc<LaneClaims>) {
        let claims = LaneClaims::new();
        let lanes = Lanes::new(
            engine(own, slot, true, &claims),
            vec![engine(other, other_slot, false, &claims)],
        )
        .with_claims(claims.clone());
        (lanes, claims)
    }

    fn is_refused(e: &SegmentError) -> bool {
        matches!(e, SegmentError::LaneMismatch(why) if why.contains("slot 0"))
    }

    /// Two regions both configured `lanes.slot = 0` on two databases, each with the other as
    /// lane 1: whichever starts first serves, the second refuses with `lane_mismatch` without
    /// recording a slot, and no id is handed out twice, in either order of start.
    #[tokio::test]
    async fn the_second_of_two_databases_claiming_one_slot_refuses_in_either_order() {
        for a_first in [true, false] {
            let a = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
            let b = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
            let (region_a, claims_a) = region(&a, 0, &b, 1);
            let (region_b, claims_b) = region(&b, 0, &a, 1);
            let (first, second, second_claims, second_db) = if a_first {
                (&region_a, &region_b, &claims_b, &b)
            } else {
                (&region_b, &region_a, &claims_a, &a)
            };
            let mut seen = HashSet::new();
            for id in first.next_ids("t", 50).await.unwrap() {
                assert!(seen.insert(id));
            }
            for _ in 0..3 {
                let e = second.next_ids("t", 50).await.unwrap_err();
                assert!(is_refused(&e), "a_first {a_first}: {e:?}");
                for id in first.next_ids("t", 50).await.unwrap() {
                    assert!(seen.insert(id), "{id} twice");
                }
            }
            assert!(second_claims.is_refused());
            assert_eq!(
                second_db.lane_slot().await.unwrap(),
                None,
                "the second claimed"
            );
            assert_eq!(second.others()[0].served.load(Ordering::Relaxed), 0);
        }
    }

    /// A slow peer at the first claim (issue 43): the other database, which records slot 0,
    /// answers only after a second (past a lease's [`PEER_WAIT`]). A fresh database configured
    /// as slot 0 still waits for it before recording its slot, and refuses without recording.
    #[tokio::test]
    async fn a_slow_peer_is_waited_for_at_the_first_claim() {
        let a = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let b = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        a.record_lane(0, "0000000001000-aa");
        a.delay_ms.store(1_000, Ordering::Relaxed);
        let (region_b, claims_b) = region(&b, 0, &a, 1);
        // The caller waits the segment wait (200 ms here) while the lease waits for the peer:
        // `not_ready` until the refusal, never an id.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let e = region_b.next_ids("t", 5).await.unwrap_err();
            if is_refused(&e) {
                break;
            }
            assert!(matches!(e, SegmentError::NotReady { .. }), "{e:?}");
            assert!(std::time::Instant::now() < deadline, "never refused");
        }
        assert!(claims_b.is_refused());
        assert_eq!(
            b.lane_slot().await.unwrap(),
            None,
            "recorded past a slow peer"
        );
    }

    /// The clash found only after a partition heals: B recorded slot 0 while A's database,
    /// which records slot 0 from long before, was unreachable. At the next scan B (the later
    /// claim) refuses, buffered ids included; A keeps serving. Claims too close in time to
    /// order refuse on both sides.
    #[tokio::test]
    async fn a_clash_found_after_a_heal_stops_the_later_claim() {
        let a = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let b = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        a.record_lane(0, "0000000001000-aa");
        let (region_a, claims_a) = region(&a, 0, &b, 1);
        let (region_b, claims_b) = region(&b, 0, &a, 1);
        region_a.next_ids("t", 5).await.unwrap();
        a.failing.store(true, Ordering::Relaxed);
        region_b.next_ids("t", 5).await.unwrap();
        a.failing.store(false, Ordering::Relaxed);
        // Healed: B's buffers still hold ids, yet B hands out none.
        claims_b.scan(SCAN_WAIT).await.unwrap_err();
        let e = region_b.next_ids("t", 1).await.unwrap_err();
        assert!(is_refused(&e), "{e:?}");
        claims_a.scan(SCAN_WAIT).await.unwrap();
        region_a.next_ids("t", 5).await.unwrap();
        assert!(!claims_a.is_refused());

        // Two claims a second apart: neither is clearly first, both stop.
        let c = Arc::new(MemoryStore::default());
        let d = Arc::new(MemoryStore::default());
        c.record_lane(0, "1700000000000-cc");
        d.record_lane(0, "1700000001000-dd");
        let (_, claims_c) = region(&c, 0, &d, 1);
        let (_, claims_d) = region(&d, 0, &c, 1);
        claims_c.scan(SCAN_WAIT).await.unwrap_err();
        claims_d.scan(SCAN_WAIT).await.unwrap_err();
    }

    /// One database reached twice (under two names) has one claim id: no clash. The lane
    /// configured with the wrong slot is only skipped.
    #[tokio::test]
    async fn one_database_reached_twice_is_no_clash() {
        let a = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let (lanes, claims) = region(&a, 0, &a, 1);
        lanes.next_ids("t", 5).await.unwrap();
        claims.scan(SCAN_WAIT).await.unwrap();
        assert!(!claims.is_refused());
    }

    /// A mismatched own lane refuses and is never passed on to a lane that could serve; the
    /// typed mismatch reaches the caller through the engine's load (not `NotReady`). Another
    /// lane's mismatch only takes that lane out.
    #[tokio::test]
    async fn a_mismatched_own_lane_refuses_and_is_not_passed_on() {
        for joined in [true, false] {
            let a = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
            let b = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
            a.record_lane(2, "0000000001000-aa");
            b.record_lane(1, "0000000001000-bb");
            let claims = LaneClaims::new();
            let own = engine(&a, 0, true, &claims);
            let mut lanes = Lanes::new(own, vec![engine(&b, 1, false, &claims)]);
            if joined {
                lanes = lanes.with_claims(claims.clone());
            }
            for _ in 0..3 {
                let e = lanes.next_ids("t", 5).await.unwrap_err();
                assert!(
                    matches!(&e, SegmentError::LaneMismatch(why) if why.contains("lane slot 2")),
                    "{e:?}"
                );
            }
            assert_eq!(lanes.others()[0].served.load(Ordering::Relaxed), 0);
            assert!(claims.is_refused());
        }
        // Another lane mismatched (it records slot 3, configured 1): skipped, the own serves
        // while up, and with the own down nothing is served from the mismatched lane.
        let a = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let b = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        b.record_lane(3, "0000000001000-bb");
        let (lanes, claims) = region(&a, 0, &b, 1);
        lanes.next_ids("t", 5).await.unwrap();
        a.failing.store(true, Ordering::Relaxed);
        let mut refused = false;
        for _ in 0..50 {
            if lanes.next_ids("t", 50).await.is_err() {
                refused = true;
                break;
            }
        }
        assert!(refused);
        assert_eq!(lanes.others()[0].served.load(Ordering::Relaxed), 0);
        assert!(!claims.is_refused());
    }

    /// The tombstone wins at once: a tag deleted on B's own lane while A's was unreachable is
    /// not served through A's lane after the heal, before any repair.
    #[tokio::test]
    async fn a_tag_deleted_on_one_lane_is_not_served_through_another() {
        let a = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let b = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        // Region A's own servers recorded its slot.
        a.record_lane(0, "0000000001000-aa");
        let (region_b, _) = region(&b, 1, &a, 0);
        region_b.next_ids("t", 5).await.unwrap();
        a.failing.store(true, Ordering::Relaxed);
        let tag = BizTag::parse("t").unwrap();
        region_b.own().engine.delete_tag(&tag).await.unwrap();
        a.failing.store(false, Ordering::Relaxed);
        for _ in 0..3 {
            let e = region_b.next_ids("t", 5).await.unwrap_err();
            assert!(matches!(e, SegmentError::UnknownTag(_)), "{e:?}");
        }
        assert_eq!(region_b.others()[0].served.load(Ordering::Relaxed), 0);
        // A tag the own lane lacks with no tombstone (created elsewhere meanwhile) is passed on.
        a.insert("u", 1, 100);
        region_b.next_ids("u", 5).await.unwrap();
        assert_eq!(region_b.others()[0].served.load(Ordering::Relaxed), 1);
    }
}
