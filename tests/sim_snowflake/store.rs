//! The simulated `leafid_worker_lease` table, shared by every simulated server, and one
//! [`WorkerStore`] per server process over it, with the statement semantics of
//! `src/store/sql/workers.rs` and faults drawn per call from the machine's seeded schedule.
//!
//! Each statement runs under the table's lock, so it is atomic as in the database; between
//! the statements of a claim the call may be parked (latency), so claims of two servers can
//! interleave and lose the compare-and-set, as they can against MariaDB.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use leafid::snowflake::worker::{NodeInfo, WorkerLease, WorkerStore, WorkerStoreError};
use leafid::testing::ManualClock;

/// How often a claim may lose a race before giving up (`CLAIM_ATTEMPTS` in
/// `src/store/sql/workers.rs`).
const CLAIM_ATTEMPTS: u32 = 32;

/// One row of `leafid_worker_lease` (host and port are only for operators: left out).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    /// The token of the process holding the lease; `''` once released.
    pub owner: String,
    /// Wall-clock ms (the holder's clock) until which the lease holds; 0 once released.
    pub lease_until_ms: i64,
    /// The latest tick end (unix ms) a holder reported it may have issued from; only rises.
    pub last_timestamp_ms: i64,
}

/// The durable table every simulated server shares; survives every crash.
pub type Table = Arc<Mutex<BTreeMap<u64, Row>>>;

/// Locks a std mutex, ignoring poison: a failed case panics out of the whole world anyway.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What happens to one store call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Applied and answered at once.
    Ok,
    /// Refused before anything was applied (`Unavailable`).
    FailBefore,
    /// Applied, then reported as failed (the connection broke before the answer).
    ApplyThenFail,
    /// Applied, and the answer never comes (the engine's timeouts must cope).
    ApplyThenHang,
    /// Lost before it reached the database: never applied, never answered.
    Lost,
    /// Applied; the process is stopped for this many ms before it reads the answer.
    PausedThenOk(u64),
    /// Applied and answered, this many ms late (half before the statements, half after).
    Slow(u64),
}

impl Fault {
    /// Index into [`FAULT_NAMES`] and the per-kind counters.
    pub fn index(self) -> usize {
        match self {
            Fault::Ok => 0,
            Fault::FailBefore => 1,
            Fault::ApplyThenFail => 2,
            Fault::ApplyThenHang => 3,
            Fault::Lost => 4,
            Fault::PausedThenOk(_) => 5,
            Fault::Slow(_) => 6,
        }
    }
}

/// Names of the fault kinds, in [`Fault::index`] order, for the summary.
pub const FAULT_NAMES: [&str; 7] = [
    "ok",
    "fail_before",
    "apply_then_fail",
    "apply_then_hang",
    "lost",
    "paused_then_ok",
    "slow",
];

/// Calls drawn per fault kind over the whole run (the summary line).
pub static FAULTS: [AtomicU64; 7] = [const { AtomicU64::new(0) }; 7];

/// How a machine's store calls behave until the schedule changes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultMode {
    /// Every call succeeds at once.
    Healthy,
    /// Each call draws any fault, mostly `Ok`.
    Flaky,
    /// Every call is refused before applying (the database is down).
    Down,
    /// Every call is lost (a partition swallows requests).
    Partitioned,
    /// Every call applies and its answer never comes.
    Zombie,
    /// Every call applies and reports failure.
    FailAfter,
    /// Every call applies and the process is stopped before it reads the answer.
    Stalling,
    /// Every call answers late, sometimes past the engine's timeout.
    Slow,
    /// Every call applies and the process is stopped for this many ms (fixed scenarios).
    StallingFor(u64),
}

impl FaultMode {
    fn draw(self, rng: &mut Rng) -> Fault {
        let pause = |rng: &mut Rng| 100 + rng.below(6_000);
        let slow = |rng: &mut Rng| 1 + rng.below(900);
        match self {
            FaultMode::Healthy => Fault::Ok,
            FaultMode::Down => Fault::FailBefore,
            FaultMode::Partitioned => Fault::Lost,
            FaultMode::Zombie => Fault::ApplyThenHang,
            FaultMode::FailAfter => Fault::ApplyThenFail,
            FaultMode::Stalling => Fault::PausedThenOk(pause(rng)),
            FaultMode::Slow => Fault::Slow(slow(rng)),
            FaultMode::StallingFor(ms) => Fault::PausedThenOk(ms),
            FaultMode::Flaky => match rng.below(100) {
                0..50 => Fault::Ok,
                50..60 => Fault::FailBefore,
                60..70 => Fault::ApplyThenFail,
                70..77 => Fault::ApplyThenHang,
                77..84 => Fault::Lost,
                84..90 => Fault::PausedThenOk(pause(rng)),
                _ => Fault::Slow(slow(rng)),
            },
        }
    }
}

/// splitmix64: a small seeded generator, so a schedule's faults replay exactly.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform-enough in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What the simulation controls about one machine besides its clock.
#[derive(Debug)]
pub struct Ctl {
    /// How store calls behave now.
    pub mode: FaultMode,
    /// Draws the per-call faults; seeded per machine from the schedule.
    pub rng: Rng,
    /// Global ms this machine's process stays stopped (0: running): while > 0 neither its
    /// clock nor its tokio runtime moves, so none of its tasks run.
    pub frozen_left_ms: u64,
    /// Global ms that passed while it was stopped: its clock catches up by this on waking.
    pub owed_ms: u64,
    /// On waking only the monotonic reading catches up (the wall clock stood still).
    pub wall_stands_still: bool,
}

/// One simulated machine: its clock (kept across process restarts, as a machine's is) and
/// the controls the store calls read.
#[derive(Debug)]
pub struct Machine {
    /// The clock every process on this machine reads.
    pub clock: Arc<ManualClock>,
    /// Fault mode and stop state; a std mutex: never held across an await.
    pub ctl: Mutex<Ctl>,
    /// Wakes a store call that stopped its process ([`Fault::PausedThenOk`]) once the
    /// simulation lets the process run again.
    pub wake: tokio::sync::Notify,
}

impl Machine {
    pub fn new(clock: Arc<ManualClock>, seed: u64) -> Self {
        Self {
            clock,
            ctl: Mutex::new(Ctl {
                mode: FaultMode::Healthy,
                rng: Rng::new(seed),
                frozen_left_ms: 0,
                owed_ms: 0,
                wall_stands_still: false,
            }),
            wake: tokio::sync::Notify::new(),
        }
    }

    /// Stops the process for `ms` of global time (extends a stop under way).
    pub fn freeze(&self, ms: u64, wall_stands_still: bool) {
        let mut ctl = lock(&self.ctl);
        ctl.frozen_left_ms = ctl.frozen_left_ms.max(ms);
        ctl.wall_stands_still |= wall_stands_still;
    }

    pub fn is_frozen(&self) -> bool {
        lock(&self.ctl).frozen_left_ms > 0
    }
}

/// The [`WorkerStore`] one simulated server process talks to.
pub struct SimStore {
    pub table: Table,
    pub machine: Arc<Machine>,
}

fn unavailable(what: &'static str) -> WorkerStoreError {
    WorkerStoreError::Unavailable(Box::new(std::io::Error::other(what)))
}

impl SimStore {
    fn draw(&self) -> Fault {
        let fault = {
            let mut ctl = lock(&self.machine.ctl);
            let mode = ctl.mode;
            mode.draw(&mut ctl.rng)
        };
        FAULTS[fault.index()].fetch_add(1, Ordering::Relaxed);
        fault
    }

    /// The part of a fault that happens before the statements run.
    async fn before(&self, fault: Fault) -> Result<(), WorkerStoreError> {
        match fault {
            Fault::FailBefore => Err(unavailable("refused before applying")),
            Fault::Lost => std::future::pending().await,
            Fault::Slow(ms) => {
                tokio::time::sleep(Duration::from_millis(ms / 2)).await;
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// The part of a fault that happens after the statements were applied.
    async fn after<T>(
        &self,
        fault: Fault,
        out: Result<T, WorkerStoreError>,
    ) -> Result<T, WorkerStoreError> {
        match fault {
            Fault::ApplyThenFail => Err(unavailable("applied, then the connection broke")),
            Fault::ApplyThenHang => std::future::pending().await,
            Fault::PausedThenOk(ms) => {
                // Registered before the stop is requested: the wake cannot be missed.
                let woken = self.machine.wake.notified();
                self.machine.freeze(ms, false);
                woken.await;
                out
            }
            Fault::Slow(ms) => {
                tokio::time::sleep(Duration::from_millis(ms - ms / 2)).await;
                out
            }
            _ => out,
        }
    }

    /// Lets other processes run between two statements of one call when the call is slow.
    async fn between_statements(&self, fault: Fault) {
        if let Fault::Slow(ms) = fault {
            tokio::time::sleep(Duration::from_millis(ms / 4)).await;
        }
        tokio::task::yield_now().await;
    }

    /// `acquire_lease` of `src/store/sql/workers.rs`: SELECT_EXPIRED then a CAS CLAIM, else
    /// NEXT_ID and INSERT_LEASE on the primary key, retried when a race is lost.
    async fn claim(
        &self,
        node: &NodeInfo,
        lease_ms: i64,
        max_worker_id: u64,
        now_ms: i64,
        fault: Fault,
    ) -> Result<WorkerLease, WorkerStoreError> {
        let until = now_ms.saturating_add(lease_ms);
        for _ in 0..CLAIM_ATTEMPTS {
            // SELECT_EXPIRED: worker_id <= max AND lease_until_ms < now AND
            // last_timestamp_ms <= now ORDER BY lease_until_ms LIMIT 1.
            let expired = lock(&self.table)
                .iter()
                .filter(|(id, r)| {
                    **id <= max_worker_id
                        && r.lease_until_ms < now_ms
                        && r.last_timestamp_ms <= now_ms
                })
                .min_by_key(|(id, r)| (r.lease_until_ms, **id))
                .map(|(id, r)| (*id, r.clone()));
            self.between_statements(fault).await;
            if let Some((worker_id, seen)) = expired {
                // CLAIM: ... WHERE worker_id = ? AND lease_until_ms = <seen> AND owner = <seen>.
                let mut table = lock(&self.table);
                let row = table.get_mut(&worker_id).expect("rows are never deleted");
                if row.lease_until_ms == seen.lease_until_ms && row.owner == seen.owner {
                    row.owner = node.owner.clone();
                    row.lease_until_ms = until;
                    return Ok(WorkerLease {
                        worker_id,
                        last_timestamp_ms: seen.last_timestamp_ms,
                        previous_lease_until_ms: seen.lease_until_ms,
                    });
                }
                continue; // another server claimed it first
            }
            // NEXT_ID: COALESCE(MAX(worker_id) + 1, 0).
            let next = lock(&self.table).keys().next_back().map_or(0, |m| m + 1);
            if next > max_worker_id {
                return Err(WorkerStoreError::Exhausted(format!(
                    "all {} worker ids are leased",
                    max_worker_id + 1
                )));
            }
            self.between_statements(fault).await;
            // INSERT_LEASE: a primary-key insert; a duplicate key means a race was lost.
            let mut table = lock(&self.table);
            if table.contains_key(&next) {
                continue;
            }
            table.insert(
                next,
                Row {
                    owner: node.owner.clone(),
                    lease_until_ms: until,
                    last_timestamp_ms: 0,
                },
            );
            return Ok(WorkerLease {
                worker_id: next,
                last_timestamp_ms: 0,
                previous_lease_until_ms: 0,
            });
        }
        Err(WorkerStoreError::Exhausted(format!(
            "lost {CLAIM_ATTEMPTS} races for a worker id"
        )))
    }
}

#[async_trait::async_trait]
impl WorkerStore for SimStore {
    async fn assign_disposable(&self, _: &NodeInfo, _: u64) -> Result<u64, WorkerStoreError> {
        unreachable!("the simulation runs the lease strategy")
    }

    async fn acquire_lease(
        &self,
        node: &NodeInfo,
        lease_ms: i64,
        max_worker_id: u64,
        now_ms: i64,
    ) -> Result<WorkerLease, WorkerStoreError> {
        let fault = self.draw();
        self.before(fault).await?;
        let out = self
            .claim(node, lease_ms, max_worker_id, now_ms, fault)
            .await;
        self.after(fault, out).await
    }

    async fn heartbeat(
        &self,
        worker_id: u64,
        owner: &str,
        lease_until_ms: i64,
        last_timestamp_ms: i64,
    ) -> Result<bool, WorkerStoreError> {
        let fault = self.draw();
        self.before(fault).await?;
        // HEARTBEAT: SET lease_until_ms = ?, last_timestamp_ms = max(last, ?)
        // WHERE worker_id = ? AND owner = ?; renewed iff one row matched.
        let renewed = match lock(&self.table).get_mut(&worker_id) {
            Some(row) if row.owner == owner => {
                row.lease_until_ms = lease_until_ms;
                row.last_timestamp_ms = row.last_timestamp_ms.max(last_timestamp_ms);
                true
            }
            _ => false,
        };
        self.after(fault, Ok(renewed)).await
    }

    async fn record_clock_back(
        &self,
        worker_id: u64,
        owner: &str,
        _clock_back: u64,
    ) -> Result<bool, WorkerStoreError> {
        let fault = self.draw();
        self.before(fault).await?;
        // SET_CLOCK_BACK: WHERE worker_id = ? AND owner = ? (the value is not kept: nothing in
        // the simulation reads it; the faults still apply).
        let matched = lock(&self.table)
            .get(&worker_id)
            .is_some_and(|row| row.owner == owner);
        self.after(fault, Ok(matched)).await
    }

    async fn release(
        &self,
        worker_id: u64,
        owner: &str,
        last_timestamp_ms: i64,
    ) -> Result<(), WorkerStoreError> {
        let fault = self.draw();
        self.before(fault).await?;
        // RELEASE (as changed on the release branch): SET owner = '', lease_until_ms = 0,
        // last_timestamp_ms = max(last, ?) WHERE worker_id = ? AND owner = ?.
        if let Some(row) = lock(&self.table).get_mut(&worker_id)
            && row.owner == owner
        {
            row.owner.clear();
            row.lease_until_ms = 0;
            row.last_timestamp_ms = row.last_timestamp_ms.max(last_timestamp_ms);
        }
        self.after(fault, Ok(())).await
    }
}
