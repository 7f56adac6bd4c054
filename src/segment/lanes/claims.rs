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

use crate::segment::{LaneRecord, SegmentStore, StoreError};
use crate::telemetry::LogLimiter;

/// Two claims of one slot closer in time than this (ms) are not ordered: the own lane refuses
/// whichever came first, since the clocks of two regions' databases may disagree.
pub const CLAIM_MARGIN_MS: u64 = 60_000;

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
    async fn others(&self) -> Vec<LaneRecord> {
        let mut out = Vec::new();
        for m in self.members().into_iter().filter(|m| !m.own) {
            if let Ok(Some(r)) = m.db.lane_record().await {
                out.push(r);
            }
        }
        out
    }

    /// Before the own database records `slot`: refused if another reachable database records
    /// it already (nothing is recorded then).
    pub(crate) async fn before_claim(&self, slot: u8) -> Result<(), StoreError> {
        if let Some(other) = self.others().await.into_iter().find(|r| r.slot == slot) {
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
    pub async fn scan(&self) -> Result<(), StoreError> {
        if let Some(r) = self.refusal() {
            return Err(r.to_error());
        }
        let Some(own) = self.members().into_iter().find(|m| m.own) else {
            return Ok(());
        };
        let Ok(Some(mine)) = own.db.lane_record().await else {
            return Ok(());
        };
        if own.configured.is_some_and(|c| c != mine.slot) {
            // The own lane's check refuses this as a mismatch at its lease.
            return Ok(());
        }
        for other in self.others().await {
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
