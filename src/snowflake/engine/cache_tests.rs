//! The worker lease cache file at the engine: a restart during a database outage resumes the
//! cached worker id only within its lease and only after every tick the previous run issued;
//! past the lease it starts without an id and claims once the database answers. A store whose
//! reachability the test switches, a manual clock, tokio's paused time.

use std::sync::atomic::AtomicBool;

use super::*;
use crate::snowflake::worker::WorkerLease;
use crate::testing::ManualClock;

/// 2025-01-01T00:00:00Z.
const T0: i64 = 1_735_689_600_000;
const LEASE_MS: u64 = 6_000;
const HEARTBEAT_MS: u64 = 2_000;
/// The margin of a direct millisecond generator: 1 tick + heartbeat + 1 s.
const MARGIN_MS: i64 = 1 + HEARTBEAT_MS as i64 + 1_000;

/// A worker store the test takes down and brings back.
struct SwitchedStore {
    down: AtomicBool,
    worker_id: u64,
    calls: std::sync::Mutex<Vec<&'static str>>,
}

impl SwitchedStore {
    fn new(worker_id: u64) -> Arc<Self> {
        Arc::new(Self {
            down: AtomicBool::new(false),
            worker_id,
            calls: std::sync::Mutex::new(vec![]),
        })
    }

    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    fn count(&self, call: &str) -> usize {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|c| **c == call)
            .count()
    }

    fn check(&self, call: &'static str) -> Result<(), WorkerStoreError> {
        self.calls.lock().unwrap().push(call);
        if self.down.load(Ordering::SeqCst) {
            return Err(WorkerStoreError::Unavailable(Box::new(
                std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
            )));
        }
        Ok(())
    }
}

#[async_trait::async_trait]
impl WorkerStore for SwitchedStore {
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
        self.check("claim")?;
        Ok(WorkerLease {
            worker_id: self.worker_id,
            last_timestamp_ms: 0,
            previous_lease_until_ms: 0,
        })
    }

    async fn heartbeat(&self, _: u64, _: &str, _: i64, _: i64) -> Result<bool, WorkerStoreError> {
        self.check("heartbeat")?;
        Ok(true)
    }

    async fn record_clock_back(&self, _: u64, _: &str, _: u64) -> Result<bool, WorkerStoreError> {
        self.check("record_clock_back").map(|()| true)
    }

    async fn release(&self, _: u64, _: &str, _: i64) -> Result<(), WorkerStoreError> {
        self.check("release")
    }
}

fn config(generator: GeneratorKind) -> SnowflakeConfig {
    SnowflakeConfig {
        layout: BitLayout::twitter(),
        generator,
        strategy: WorkerStrategy::Lease,
        lease: Duration::from_millis(LEASE_MS),
        heartbeat: Duration::from_millis(HEARTBEAT_MS),
        max_backward_ms: 5,
        cached: CachedConfig::default(),
        min_id_floor: 0,
        region: Default::default(),
    }
}

/// One run of a server: its engine over `store`, with the cache file at `path`.
struct Run {
    engine: Arc<SnowflakeEngine>,
    background: Background,
}

impl Run {
    async fn start(
        clock: &Arc<ManualClock>,
        store: &Arc<SwitchedStore>,
        path: &std::path::Path,
        owner: &str,
        generator: GeneratorKind,
    ) -> Result<Self, StartError> {
        let layout = BitLayout::twitter();
        let cache = Arc::new(WorkerCache::open(path, &layout, "test-db").unwrap());
        let background = Background::new();
        let node = NodeInfo {
            host: "test".into(),
            port: "0".into(),
            owner: owner.into(),
        };
        let store: Arc<dyn WorkerStore> = store.clone();
        let engine = SnowflakeEngine::start_with(
            config(generator),
            Some(store),
            clock.clone(),
            node,
            &background,
            StartOptions {
                cache: Some(cache),
                wait_for_database: true,
                ..Default::default()
            },
        )
        .await?;
        Ok(Self { engine, background })
    }

    /// `kill -9`: the tasks stop, nothing is released, the cache file stays (and its lock goes
    /// with the engine).
    async fn crash(self) {
        // The last cache write may still be on a blocking thread, holding the file's lock.
        let cache = self.engine.cache.clone().unwrap();
        settle_until(|| Arc::strong_count(&cache) == 2).await;
        drop(cache);
        self.background.token().cancel();
        self.background.shutdown(Duration::from_secs(1)).await;
        let weak = Arc::downgrade(&self.engine);
        drop(self.engine);
        assert!(
            weak.upgrade().is_none(),
            "the engine (and its cache lock) is gone"
        );
    }
}

/// Lets `ms` pass for the manual clock and tokio's timers, in small steps.
async fn pass(clock: &ManualClock, ms: u64) {
    for _ in 0..ms / 100 {
        clock.advance(100);
        tokio::time::advance(Duration::from_millis(100)).await;
        tokio::task::yield_now().await;
    }
}

/// Lets work on blocking threads (the cache file's writes) finish, in real time, until `done`
/// (at most 10 s: a loaded disk may take a while to fsync).
async fn settle_until(done: impl Fn() -> bool) {
    for _ in 0..2_000 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
        tokio::task::yield_now().await;
    }
    panic!("blocking work did not finish within 10 s");
}

fn ids(engine: &SnowflakeEngine, n: usize) -> Vec<u64> {
    engine.next_ids_blocking(n).unwrap()
}

async fn restart_within_the_lease_resumes_after_every_issued_tick(generator: GeneratorKind) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.json");
    let clock = Arc::new(ManualClock::new(T0));
    let store = SwitchedStore::new(9);
    let first = Run::start(&clock, &store, &path, "run-1", generator)
        .await
        .unwrap();
    let mut before = ids(&first.engine, 50);
    // A renewal writes the cache; then more ids, after the last write, before the crash.
    pass(&clock, HEARTBEAT_MS + 100).await;
    assert!(store.calls.lock().unwrap().contains(&"heartbeat"));
    settle_until(|| {
        first
            .engine
            .cache
            .as_ref()
            .unwrap()
            .load()
            .is_some_and(|l| l.lease_until_ms >= T0 + 2_000 + LEASE_MS as i64)
    })
    .await;
    for _ in 0..5 {
        clock.advance(3);
        before.extend(ids(&first.engine, 40));
    }
    let written = first.engine.cache.as_ref().unwrap().load().unwrap();
    assert_eq!(written.worker_id, 9);
    assert!(
        written.lease_until_ms >= T0 + 2_000 + LEASE_MS as i64,
        "the renewal's lease end is cached"
    );
    assert_eq!(written.owner, "run-1");
    first.crash().await;

    store.set_down(true);
    clock.advance(500);
    let second = Run::start(&clock, &store, &path, "run-2", generator)
        .await
        .unwrap();
    assert_eq!(second.engine.worker_id(), 9, "the cached worker id resumed");
    assert_eq!(second.engine.pending_reason(), None);
    let after = ids(&second.engine, 200);
    let newest_before = before.iter().max().unwrap();
    assert!(
        after.iter().all(|id| id > newest_before),
        "every id of the resumed run lies after every id of the previous run"
    );
    // The database stays down: issuing stops a margin before the cached lease end.
    let lease_left = written.lease_until_ms - clock.now_unix_ms();
    pass(&clock, (lease_left - MARGIN_MS - 200) as u64).await;
    second.engine.next_id_blocking().expect("within the lease");
    pass(&clock, 400).await;
    assert!(matches!(
        second.engine.next_id_blocking(),
        Err(SnowflakeError::WorkerLeaseExpired)
    ));
    assert!(second.engine.is_suspended());
    // The database returns: the renewal under the cached owner is confirmed, issuing resumes.
    store.set_down(false);
    pass(&clock, 3_000).await;
    second.engine.next_id_blocking().expect("renewed");
    second.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_restart_within_the_lease_resumes_the_cached_id_after_every_issued_tick_direct() {
    restart_within_the_lease_resumes_after_every_issued_tick(GeneratorKind::Direct).await;
}

#[tokio::test(start_paused = true)]
async fn a_restart_within_the_lease_resumes_the_cached_id_after_every_issued_tick_cached() {
    restart_within_the_lease_resumes_after_every_issued_tick(GeneratorKind::Cached).await;
}

#[tokio::test(start_paused = true)]
async fn a_wall_clock_stepped_back_across_the_restart_brings_no_old_tick_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.json");
    let clock = Arc::new(ManualClock::new(T0));
    let store = SwitchedStore::new(3);
    let first = Run::start(&clock, &store, &path, "run-1", GeneratorKind::Direct)
        .await
        .unwrap();
    pass(&clock, HEARTBEAT_MS + 100).await;
    let mut before = vec![];
    for _ in 0..10 {
        clock.advance(50);
        before.extend(ids(&first.engine, 10));
    }
    first.crash().await;
    store.set_down(true);
    // The wall clock steps 900 ms back; the boot clock keeps counting.
    clock.rewind(900);
    let second = Run::start(&clock, &store, &path, "run-2", GeneratorKind::Direct)
        .await
        .unwrap();
    assert_eq!(second.engine.worker_id(), 3);
    // The direct generator refuses (clock behind its resume tick) or issues later ticks.
    let newest_before = *before.iter().max().unwrap();
    for _ in 0..20 {
        if let Ok(id) = second.engine.next_id_blocking() {
            assert!(id > newest_before, "an old tick came back");
        }
        clock.advance(100);
    }
}

#[tokio::test(start_paused = true)]
async fn past_the_cached_lease_start_waits_without_an_id_and_claims_when_the_database_returns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.json");
    let clock = Arc::new(ManualClock::new(T0));
    let store = SwitchedStore::new(4);
    let first = Run::start(&clock, &store, &path, "run-1", GeneratorKind::Direct)
        .await
        .unwrap();
    ids(&first.engine, 10);
    first.crash().await;
    store.set_down(true);
    // Past the lease end minus its margin: the cache proves nothing any more.
    clock.advance(LEASE_MS - MARGIN_MS as u64 + 1);
    let second = Run::start(&clock, &store, &path, "run-2", GeneratorKind::Direct)
        .await
        .unwrap();
    let reason = second.engine.pending_reason().expect("no worker id");
    assert!(reason.contains("safety margin"), "{reason}");
    assert!(second.engine.is_suspended());
    assert!(matches!(
        second.engine.next_id_blocking(),
        Err(SnowflakeError::WorkerLeaseExpired)
    ));
    assert!(matches!(
        second.engine.try_next_id(),
        Some(Err(SnowflakeError::WorkerLeaseExpired))
    ));
    assert!(second.engine.status().suspended);
    pass(&clock, 3_000).await;
    assert!(second.engine.pending_reason().is_some(), "still down");
    store.set_down(false);
    // Up to the next claim, then let its cache write (a blocking thread, real time) finish
    // before more virtual time passes.
    let claims = store.count("claim");
    let mut waited = 0;
    while store.count("claim") == claims {
        pass(&clock, 100).await;
        waited += 100;
        assert!(
            waited <= 6_000,
            "no claim within 6 s of the database's return"
        );
    }
    settle_until(|| second.engine.pending_reason().is_none()).await;
    second.engine.next_id_blocking().expect("claimed");
    assert_eq!(
        second.engine.cache.as_ref().unwrap().load().unwrap().owner,
        "run-2",
        "the new claim is cached"
    );
    second.engine.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn without_a_cache_file_start_waits_and_without_waiting_it_fails() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.json");
    let clock = Arc::new(ManualClock::new(T0));
    let store = SwitchedStore::new(4);
    store.set_down(true);
    let run = Run::start(&clock, &store, &path, "run-1", GeneratorKind::Direct)
        .await
        .unwrap();
    let reason = run.engine.pending_reason().unwrap();
    assert!(reason.contains("no usable cached worker lease"), "{reason}");
    run.crash().await;
    let background = Background::new();
    let failed = SnowflakeEngine::start(
        config(GeneratorKind::Direct),
        Some(store.clone()),
        clock.clone(),
        NodeInfo {
            host: "t".into(),
            port: "0".into(),
            owner: "o".into(),
        },
        &background,
    )
    .await;
    assert!(matches!(
        failed,
        Err(StartError::Worker(WorkerStoreError::Unavailable(_)))
    ));
}

#[tokio::test(start_paused = true)]
async fn shutdown_removes_the_cache_file_before_the_release() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("worker.json");
    let clock = Arc::new(ManualClock::new(T0));
    let store = SwitchedStore::new(2);
    let run = Run::start(&clock, &store, &path, "run-1", GeneratorKind::Direct)
        .await
        .unwrap();
    assert!(path.exists());
    run.engine.shutdown().await;
    assert!(!path.exists(), "a released lease is not resumable");
    assert_eq!(store.calls.lock().unwrap().last(), Some(&"release"));
    // A restart during an outage then has nothing to resume.
    drop(run);
    store.set_down(true);
    let again = Run::start(&clock, &store, &path, "run-2", GeneratorKind::Direct)
        .await
        .unwrap();
    assert!(again.engine.pending_reason().is_some());
}
