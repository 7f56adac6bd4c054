//! The worker lease as the id path sees it: a scripted worker store (renewals that succeed,
//! hang, answer after the process was paused, or find the lease taken over), a manual clock,
//! and tokio's paused time for the heartbeat's cadence.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use super::*;
use crate::snowflake::worker::WorkerLease;
use crate::testing::ManualClock;

/// 2025-01-01T00:00:00Z.
const T0: i64 = 1_735_689_600_000;
const LEASE_MS: u64 = 6_000;
const HEARTBEAT_MS: u64 = 2_000;
/// Lease minus the margin of a direct millisecond generator (1 tick + heartbeat + 1 s).
const FIRST_DEADLINE: i64 = LEASE_MS as i64 - (1 + HEARTBEAT_MS as i64 + 1_000);

/// How the scripted store answers the next renewals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Renewal {
    /// Renewed at once.
    Ok = 0,
    /// Never answers (a query whose answer a partition swallowed).
    Hang = 1,
    /// Renewed, but the process was stopped for 4 s before the answer was read.
    PausedThenOk = 2,
    /// Another server holds the id now.
    TakenOver = 3,
}

struct ScriptedStore {
    clock: Arc<ManualClock>,
    renewal: AtomicU8,
    heartbeats: AtomicU64,
    /// Calls in order: "heartbeat" / "release".
    calls: Mutex<Vec<&'static str>>,
}

impl ScriptedStore {
    fn new(clock: Arc<ManualClock>) -> Arc<Self> {
        Arc::new(Self {
            clock,
            renewal: AtomicU8::new(Renewal::Ok as u8),
            heartbeats: AtomicU64::new(0),
            calls: Mutex::new(vec![]),
        })
    }

    fn answer(&self, r: Renewal) {
        self.renewal.store(r as u8, Ordering::SeqCst);
    }

    fn calls(&self) -> Vec<&'static str> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl WorkerStore for ScriptedStore {
    async fn assign_disposable(&self, _: &NodeInfo, _: u64) -> Result<u64, WorkerStoreError> {
        unreachable!("lease strategy only")
    }

    async fn acquire_lease(
        &self,
        _: &NodeInfo,
        _: i64,
        _: u64,
        _: i64,
    ) -> Result<WorkerLease, WorkerStoreError> {
        Ok(WorkerLease {
            worker_id: 0,
            last_timestamp_ms: 0,
            previous_lease_until_ms: 0,
        })
    }

    async fn heartbeat(&self, _: u64, _: &str, _: i64, _: i64) -> Result<bool, WorkerStoreError> {
        self.heartbeats.fetch_add(1, Ordering::SeqCst);
        self.calls.lock().unwrap().push("heartbeat");
        match self.renewal.load(Ordering::SeqCst) {
            0 => Ok(true),
            1 => std::future::pending().await,
            2 => {
                self.clock.advance(4_000);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn record_clock_back(&self, _: u64, _: &str, _: u64) -> Result<bool, WorkerStoreError> {
        self.calls.lock().unwrap().push("record_clock_back");
        Ok(true)
    }

    async fn release(&self, _: u64, _: &str, _: i64) -> Result<(), WorkerStoreError> {
        self.calls.lock().unwrap().push("release");
        Ok(())
    }
}

struct Rig {
    clock: Arc<ManualClock>,
    store: Arc<ScriptedStore>,
    engine: Arc<SnowflakeEngine>,
    background: Background,
}

impl Rig {
    async fn start() -> Self {
        let clock = Arc::new(ManualClock::new(T0));
        let store = ScriptedStore::new(clock.clone());
        let background = Background::new();
        let config = SnowflakeConfig {
            layout: BitLayout::twitter(),
            generator: GeneratorKind::Direct,
            strategy: WorkerStrategy::Lease,
            lease: Duration::from_millis(LEASE_MS),
            heartbeat: Duration::from_millis(HEARTBEAT_MS),
            max_backward_ms: 5,
            cached: CachedConfig::default(),
            min_id_floor: 0,
            region: Default::default(),
        };
        let node = NodeInfo {
            host: "test".into(),
            port: "0".into(),
            owner: "me".into(),
        };
        let engine = SnowflakeEngine::start(
            config,
            Some(store.clone()),
            clock.clone(),
            node,
            &background,
        )
        .await
        .unwrap();
        Self {
            clock,
            store,
            engine,
            background,
        }
    }

    /// Lets `ms` pass for both the manual clock and tokio's timers, in small steps so the
    /// heartbeat task runs at the times it would.
    async fn pass(&self, ms: u64) {
        for _ in 0..ms / 100 {
            self.clock.advance(100);
            tokio::time::advance(Duration::from_millis(100)).await;
            tokio::task::yield_now().await;
        }
    }

    fn id(&self) -> Result<u64, SnowflakeError> {
        self.engine.next_id_blocking()
    }
}

#[tokio::test(start_paused = true)]
async fn renewals_keep_a_lease_going_for_many_lease_periods() {
    let rig = Rig::start().await;
    for _ in 0..50 {
        rig.pass(500).await;
        rig.id().unwrap();
    }
    assert!(rig.store.heartbeats.load(Ordering::SeqCst) >= 10);
    assert!(!rig.engine.is_suspended());
}

#[tokio::test(start_paused = true)]
async fn a_renewal_that_never_answers_stops_ids_at_the_deadline_on_the_id_path() {
    let rig = Rig::start().await;
    rig.store.answer(Renewal::Hang);
    rig.pass(FIRST_DEADLINE as u64 - 100).await;
    rig.id().expect("before the deadline the lease holds");
    assert!(
        rig.store.heartbeats.load(Ordering::SeqCst) >= 1,
        "a renewal hung"
    );
    rig.pass(200).await;
    assert!(matches!(rig.id(), Err(SnowflakeError::WorkerLeaseExpired)));
    assert!(matches!(
        rig.engine.next_ids_blocking(10),
        Err(SnowflakeError::WorkerLeaseExpired)
    ));
    assert!(matches!(
        rig.engine.try_next_id(),
        Some(Err(SnowflakeError::WorkerLeaseExpired))
    ));
    assert!(rig.engine.is_suspended());
    // The database answers again: the next renewal is confirmed in time and issuing resumes.
    rig.store.answer(Renewal::Ok);
    rig.pass(3_000).await;
    rig.id().expect("a confirmed renewal resumes issuing");
}

#[tokio::test(start_paused = true)]
async fn a_process_stopped_past_its_deadline_refuses_its_first_id_after_waking() {
    let rig = Rig::start().await;
    rig.id().unwrap();
    // SIGSTOP: no task ran, no timer fired; only the monotonic clock moved.
    rig.clock.advance(FIRST_DEADLINE as u64 + 1);
    assert!(matches!(rig.id(), Err(SnowflakeError::WorkerLeaseExpired)));
}

#[tokio::test(start_paused = true)]
async fn a_wall_clock_step_back_does_not_stretch_the_lease() {
    let rig = Rig::start().await;
    rig.store.answer(Renewal::Hang);
    // The wall clock is stepped back by as much as time passes: wall time stands still.
    rig.clock.advance_monotonic(FIRST_DEADLINE as u64 + 1);
    assert_eq!(rig.clock.now_unix_ms(), T0);
    assert!(matches!(rig.id(), Err(SnowflakeError::WorkerLeaseExpired)));
}

#[tokio::test(start_paused = true)]
async fn a_renewal_confirmed_after_its_deadline_does_not_resume_issuing() {
    let rig = Rig::start().await;
    rig.store.answer(Renewal::PausedThenOk);
    // The renewal is sent at 2 s; its answer is read 4 s later, after sent + lease - margin.
    rig.pass(2_100).await;
    assert!(rig.store.heartbeats.load(Ordering::SeqCst) >= 1);
    rig.store.answer(Renewal::Hang);
    assert!(
        matches!(rig.id(), Err(SnowflakeError::WorkerLeaseExpired)),
        "a late confirmation must not clear the suspension"
    );
    assert!(rig.engine.is_suspended());
}

#[tokio::test(start_paused = true)]
async fn a_lease_taken_over_stops_issuing_for_good() {
    let rig = Rig::start().await;
    rig.store.answer(Renewal::TakenOver);
    rig.pass(2_100).await;
    assert!(matches!(rig.id(), Err(SnowflakeError::WorkerLeaseExpired)));
    rig.store.answer(Renewal::Ok);
    rig.pass(10_000).await;
    assert!(matches!(rig.id(), Err(SnowflakeError::WorkerLeaseExpired)));
    assert_eq!(
        rig.store.heartbeats.load(Ordering::SeqCst),
        1,
        "no renewal after the take-over"
    );
    let status = rig.engine.status();
    assert!(status.suspended);
    assert_eq!(status.lease_left_ms, Some(0));
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_the_heartbeat_before_the_release_and_none_follows() {
    let rig = Rig::start().await;
    rig.pass(4_100).await;
    rig.background.shutdown(Duration::from_secs(1)).await;
    rig.engine.shutdown().await;
    rig.pass(10_000).await;
    let calls = rig.store.calls();
    assert_eq!(calls.last(), Some(&"release"), "{calls:?}");
    assert_eq!(calls.iter().filter(|c| **c == "release").count(), 1);
    assert!(calls.len() >= 3, "renewals happened before: {calls:?}");
    assert!(matches!(rig.id(), Err(SnowflakeError::WorkerLeaseExpired)));
}

#[test]
fn a_lease_shorter_than_its_margin_is_refused_naming_the_keys() {
    let layout = BitLayout::parse_bits("31/19/13", TimeUnit::Seconds, 1_704_067_200_000).unwrap();
    let mut config = SnowflakeConfig {
        layout,
        generator: GeneratorKind::Cached,
        strategy: WorkerStrategy::Lease,
        lease: Duration::from_secs(60),
        heartbeat: Duration::from_secs(10),
        max_backward_ms: 5,
        cached: CachedConfig {
            boost_power: 6,
            ..CachedConfig::default()
        },
        min_id_floor: 0,
        region: Default::default(),
    };
    let err = config.check_lease().unwrap_err();
    for key in [
        "snowflake.worker.lease_secs = 60",
        "boost_power = 6",
        "heartbeat_secs = 10",
        "at least 86",
    ] {
        assert!(err.contains(key), "{key:?} missing from: {err}");
    }
    assert!(!err.contains('\n'), "one line: {err}");
    config.cached.boost_power = 3;
    assert_eq!(
        config.check_lease(),
        Ok(()),
        "8 + 10 + 1 + 10 s fit in 60 s"
    );
    config.lease = Duration::from_secs(29);
    assert!(config.check_lease().is_err());
    config.lease = Duration::from_secs(30);
    assert_eq!(config.check_lease(), Ok(()));
}

#[tokio::test(start_paused = true)]
async fn a_wall_clock_stepped_forward_past_the_lease_end_issues_no_tick_beyond_it() {
    let rig = Rig::start().await;
    rig.store.answer(Renewal::Hang);
    rig.id().unwrap();
    // The lease in the database ends at T0 + 6 s; ticks must end a heartbeat and a second
    // before it. A forward step puts the clock past that while the monotonic deadline is
    // still ahead: the tick, not only the deadline, is refused.
    rig.clock.set(T0 + 3_500);
    assert!(
        rig.engine.lease_left_ms().unwrap() > 0,
        "the monotonic deadline is still ahead"
    );
    assert!(matches!(rig.id(), Err(SnowflakeError::WorkerLeaseExpired)));
    rig.clock.set(T0 + 2_000);
    assert!(
        matches!(
            rig.id(),
            Err(SnowflakeError::WorkerLeaseExpired)
                | Err(SnowflakeError::ClockMovedBackwards { .. })
        ),
        "never a tick past the bound, whatever the clock does next"
    );
}
