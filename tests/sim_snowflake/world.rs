//! The simulated cluster: machines with manual clocks, one server process per machine at a
//! time (an engine on its own paused-time tokio runtime), the shared lease table, the
//! operations a schedule is made of, and the invariants checked after every step.
//!
//! A process's runtime is driven only when the simulation lets time pass for it, so a stopped
//! process (`SIGSTOP`) really runs nothing: its heartbeat timer fires late, once, when it wakes.
//! Dropping the runtime is a crash: every task of the process, hung store calls included, dies.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use leafid::background::Background;
use leafid::snowflake::cached::CachedConfig;
use leafid::snowflake::clock::Clock;
use leafid::snowflake::engine::{GeneratorKind, SnowflakeConfig, SnowflakeEngine, StartError};
use leafid::snowflake::error::SnowflakeError;
use leafid::snowflake::layout::{BitLayout, TimeUnit};
use leafid::snowflake::worker::{NodeInfo, WorkerStoreError, WorkerStrategy};
use leafid::testing::ManualClock;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

use crate::store::{FaultMode, Machine, SimStore, Table, lock};

/// 2025-01-01T00:00:00Z: the layout's epoch.
const EPOCH_MS: i64 = 1_735_689_600_000;
/// 2026-01-01T00:00:00Z: true time when a schedule begins.
const T0_MS: i64 = 1_767_225_600_000;
pub const LEASE_MS: u64 = 4_000;
pub const HEARTBEAT_MS: u64 = 1_000;
/// Time passes in steps of this many ms, for every machine and its runtime together.
pub const QUANTUM_MS: u64 = 50;
/// Each machine's wall clock starts within this of true time: pairwise skew <= 2x this.
pub const MAX_OFFSET_MS: i64 = 250;
/// Forward wall steps one machine may take over a schedule (see the crate docs).
pub const FORWARD_BUDGET_MS: i64 = 20_000;
/// Machines (server slots); the layout has 4 worker ids, so one is always left out.
pub const MACHINES: usize = 5;

/// `56/c2+2/3`: 56 time bits of ms, a 4-bit worker field holding 2 clock-back bits (a server
/// outlives 3 backward steps beyond `max_backward_ms`) and 2 worker bits (4 ids for 5 servers),
/// 3 sequence bits (8 ids per ms): worker ids change hands and sequences wrap all the time.
pub fn layout() -> BitLayout {
    BitLayout::new(0, 0, 56, 4, 3, TimeUnit::Millis, EPOCH_MS)
        .and_then(|l| l.with_clock_back_bits(2))
        .expect("a valid layout")
}

fn config() -> SnowflakeConfig {
    SnowflakeConfig {
        layout: layout(),
        generator: GeneratorKind::Direct,
        strategy: WorkerStrategy::Lease,
        lease: Duration::from_millis(LEASE_MS),
        heartbeat: Duration::from_millis(HEARTBEAT_MS),
        max_backward_ms: 5,
        cached: CachedConfig::default(),
        min_id_floor: 0,
        region: Default::default(),
    }
}

/// How a request asks for ids.
#[derive(Clone, Copy, Debug)]
pub enum Ask {
    /// `next_id_blocking`.
    One,
    /// `next_ids_blocking(n)`.
    Many(usize),
    /// `try_next_id`.
    Try,
}

/// One step of a schedule.
#[derive(Clone, Debug)]
pub enum Op {
    /// Ask machine `m`'s server for ids.
    Request { m: usize, ask: Ask },
    /// Let `ms` pass everywhere (in [`QUANTUM_MS`] steps; heartbeats run on time).
    Pass { ms: u64 },
    /// Change how machine `m`'s store calls behave.
    Faults { m: usize, mode: FaultMode },
    /// Stop machine `m`'s process for `ms` (`SIGSTOP`, a frozen VM); with
    /// `wall_stands_still` only its monotonic clock catches up on waking (a wall step back).
    Pause {
        m: usize,
        ms: u64,
        wall_stands_still: bool,
    },
    /// Step machine `m`'s wall clock by `ms` (forward steps are capped by the budget).
    StepWall { m: usize, ms: i64 },
    /// Kill machine `m`'s process: no release, its lease stays until it expires.
    Crash { m: usize },
    /// Start a server process on machine `m` (new owner token, claims a worker id).
    Start { m: usize },
    /// Graceful shutdown: `Background::shutdown`, then `engine.shutdown()` (the release).
    Shutdown { m: usize },
}

/// Counters over the whole run, printed as the summary line.
#[derive(Debug, Default)]
pub struct Totals {
    pub schedules: AtomicU64,
    pub steps: AtomicU64,
    pub ids: AtomicU64,
    pub refused: AtomicU64,
    pub clock_back: AtomicU64,
    /// Ids issued under a clock-back value above 0 (after a backward step was outlived).
    pub clock_back_ids: AtomicU64,
    pub starts: AtomicU64,
    pub start_failures: AtomicU64,
    pub crashes: AtomicU64,
    pub shutdowns: AtomicU64,
    pub pauses: AtomicU64,
    pub wall_steps: AtomicU64,
    pub handovers: AtomicU64,
    pub authority_overlaps: AtomicU64,
    pub schedules_with_ids: AtomicU64,
    pub schedules_with_handover: AtomicU64,
}

pub static TOTALS: Totals = Totals {
    schedules: AtomicU64::new(0),
    steps: AtomicU64::new(0),
    ids: AtomicU64::new(0),
    refused: AtomicU64::new(0),
    clock_back: AtomicU64::new(0),
    clock_back_ids: AtomicU64::new(0),
    starts: AtomicU64::new(0),
    start_failures: AtomicU64::new(0),
    crashes: AtomicU64::new(0),
    shutdowns: AtomicU64::new(0),
    pauses: AtomicU64::new(0),
    wall_steps: AtomicU64::new(0),
    handovers: AtomicU64::new(0),
    authority_overlaps: AtomicU64::new(0),
    schedules_with_ids: AtomicU64::new(0),
    schedules_with_handover: AtomicU64::new(0),
};

fn count(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

enum ProcState {
    Starting(JoinHandle<Result<Arc<SnowflakeEngine>, StartError>>),
    Running(Arc<SnowflakeEngine>),
    Stopping(Arc<SnowflakeEngine>, JoinHandle<()>),
    /// Only while [`World::settle`] moves a state out.
    Exited,
}

/// One server process: an engine (once started) on its own runtime.
struct Process {
    /// Current-thread, paused time; driven only while the process may run. Dropped: a crash.
    rt: Runtime,
    /// Owns the heartbeat task.
    background: Background,
    /// Index into [`World::instances`].
    instance: usize,
    state: ProcState,
    /// Tokio time the runtime was driven by, to check that it never auto-advanced.
    driven_ms: u64,
    tokio_start: tokio::time::Instant,
}

impl Process {
    fn engine(&self) -> Option<&Arc<SnowflakeEngine>> {
        match &self.state {
            ProcState::Running(e) | ProcState::Stopping(e, _) => Some(e),
            ProcState::Starting(_) | ProcState::Exited => None,
        }
    }

    /// Lets `ms` of tokio time pass for this process and runs its ready tasks.
    fn drive(&mut self, ms: u64) {
        let now = self.rt.block_on(async {
            tokio::time::advance(Duration::from_millis(ms)).await;
            for _ in 0..8 {
                tokio::task::yield_now().await;
            }
            tokio::time::Instant::now()
        });
        self.driven_ms += ms;
        assert_eq!(
            now - self.tokio_start,
            Duration::from_millis(self.driven_ms),
            "tokio time moved by itself: the simulation is not deterministic"
        );
    }
}

/// What the world knows of one engine instance (one process lifetime).
#[derive(Debug)]
struct Instance {
    machine: usize,
    worker_id: Option<u64>,
    /// The last id this instance issued under each clock-back value (ids increase within one).
    last_id: [u64; 4],
    issued: u64,
    /// The first and last tick it issued from.
    ticks: Option<(u64, u64)>,
}

struct Slot {
    machine: Arc<Machine>,
    proc: Option<Process>,
    /// The monotonic reading the clock would show without the generator's sleeps on it
    /// (the manual clock advances on `sleep_ms`: that lead is absorbed as time passes).
    true_mono_ms: i64,
    forward_left_ms: i64,
}

/// The whole simulated cluster for one schedule.
pub struct World {
    table: Table,
    slots: Vec<Slot>,
    instances: Vec<Instance>,
    /// Every id issued in this schedule, with the instance that issued it.
    ids: HashMap<u64, usize>,
    /// A wall step happened (or a wall stood still): authority may overlap in time from
    /// here on (ids stay unique, see the crate docs), so that check is off.
    stepped: bool,
    ids_in_schedule: u64,
    /// Applied operations so far (for messages).
    step: usize,
}

impl World {
    /// Machines with wall clocks at `T0 + offsets[m]`, fault draws seeded from `seed`.
    pub fn new(seed: u64, offsets: &[i64]) -> Self {
        let slots = offsets
            .iter()
            .enumerate()
            .map(|(m, offset)| Slot {
                machine: Arc::new(Machine::new(
                    Arc::new(ManualClock::new(T0_MS + offset)),
                    seed ^ (m as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D),
                )),
                proc: None,
                true_mono_ms: 0,
                forward_left_ms: FORWARD_BUDGET_MS,
            })
            .collect();
        count(&TOTALS.schedules, 1);
        Self {
            table: Table::default(),
            slots,
            instances: vec![],
            ids: HashMap::new(),
            stepped: false,
            ids_in_schedule: 0,
            step: 0,
        }
    }

    /// Applies one operation and checks every invariant.
    pub fn apply(&mut self, op: &Op) -> Result<(), String> {
        self.step += 1;
        count(&TOTALS.steps, 1);
        match *op {
            Op::Request { m, ask } => self.request(m, ask)?,
            Op::Pass { ms } => self.pass(ms)?,
            Op::Faults { m, mode } => lock(&self.slots[m].machine.ctl).mode = mode,
            Op::Pause {
                m,
                ms,
                wall_stands_still,
            } => {
                let slot = &self.slots[m];
                if slot.proc.is_some() && ms > 0 {
                    slot.machine
                        .freeze(ms.div_ceil(QUANTUM_MS) * QUANTUM_MS, wall_stands_still);
                    self.stepped |= wall_stands_still;
                    count(&TOTALS.pauses, 1);
                }
            }
            Op::StepWall { m, ms } => self.step_wall(m, ms),
            Op::Crash { m } => self.crash(m),
            Op::Start { m } => self.start(m)?,
            Op::Shutdown { m } => self.shutdown(m)?,
        }
        self.settle()?;
        self.check_authority()
    }

    /// Ends the schedule: counts progress for the summary.
    pub fn finish(self) {
        if self.ids_in_schedule > 0 {
            count(&TOTALS.schedules_with_ids, 1);
        }
        let mut holders: BTreeMap<u64, usize> = BTreeMap::new();
        for i in self.instances.iter().filter(|i| i.issued > 0) {
            if let Some(w) = i.worker_id {
                *holders.entry(w).or_default() += 1;
            }
        }
        let handovers: usize = holders.values().map(|n| n - 1).sum();
        count(&TOTALS.handovers, handovers as u64);
        if handovers > 0 {
            count(&TOTALS.schedules_with_handover, 1);
        }
    }

    /// Ids issued so far in this schedule.
    pub fn ids_issued(&self) -> u64 {
        self.ids_in_schedule
    }

    fn request(&mut self, m: usize, ask: Ask) -> Result<(), String> {
        let slot = &self.slots[m];
        if slot.machine.is_frozen() {
            return Ok(()); // a stopped process answers nothing
        }
        let Some(proc) = &slot.proc else {
            return Ok(());
        };
        let Some(engine) = proc.engine().cloned() else {
            return Ok(());
        };
        let instance = proc.instance;
        let got = match ask {
            Ask::One => engine.next_id_blocking().map(|id| vec![id]),
            Ask::Many(n) => engine.next_ids_blocking(n),
            Ask::Try => engine
                .try_next_id()
                .expect("direct millisecond generator always answers")
                .map(|id| vec![id]),
        };
        self.record(instance, &engine, got)
    }

    fn record(
        &mut self,
        instance: usize,
        engine: &SnowflakeEngine,
        got: Result<Vec<u64>, SnowflakeError>,
    ) -> Result<(), String> {
        let ids = match got {
            Ok(ids) => ids,
            Err(SnowflakeError::WorkerLeaseExpired) => {
                count(&TOTALS.refused, 1);
                return Ok(());
            }
            Err(SnowflakeError::ClockMovedBackwards { .. }) => {
                count(&TOTALS.clock_back, 1);
                return Ok(());
            }
            Err(e) => return Err(format!("step {}: unexpected error {e}", self.step)),
        };
        let layout = layout();
        for id in ids {
            let inst = &mut self.instances[instance];
            if id == 0 {
                return Err(format!(
                    "step {}: instance {instance} issued id 0",
                    self.step
                ));
            }
            let d = layout.decompose(id);
            let last = &mut inst.last_id[d.clock_back as usize];
            if id <= *last {
                return Err(format!(
                    "step {}: instance {instance} issued {id} after {} under clock-back value {}: \
                     not increasing",
                    self.step, *last, d.clock_back
                ));
            }
            *last = id;
            if d.clock_back > 0 {
                count(&TOTALS.clock_back_ids, 1);
            }
            if Some(d.worker_id) != inst.worker_id || d.worker_id != engine.worker_id() {
                return Err(format!(
                    "step {}: id {id} carries worker {} but instance {instance} holds {:?}",
                    self.step, d.worker_id, inst.worker_id
                ));
            }
            inst.issued += 1;
            let (lo, hi) = inst.ticks.get_or_insert((d.time_delta, d.time_delta));
            (*lo, *hi) = ((*lo).min(d.time_delta), (*hi).max(d.time_delta));
            let span = (*lo, *hi);
            // Each holder of a worker id issues from its own stretch of ticks: the next holder
            // starts after the lease the previous one stored, which is past all its ticks.
            if let Some((other, o)) = self.instances.iter().enumerate().find(|(j, o)| {
                *j != instance
                    && o.worker_id == Some(d.worker_id)
                    && o.ticks.is_some_and(|(a, b)| a <= span.1 && span.0 <= b)
            }) {
                return Err(format!(
                    "step {}: worker id {} used by two holders over the same ticks: instance \
                     {other} (machine {}) issued from ticks {:?}, instance {instance} (machine \
                     {}) from {span:?}, now id {id} (tick {}, seq {})",
                    self.step,
                    d.worker_id,
                    o.machine,
                    o.ticks,
                    self.instances[instance].machine,
                    d.time_delta,
                    d.sequence
                ));
            }
            if let Some(first) = self.ids.insert(id, instance) {
                let a = &self.instances[first];
                return Err(format!(
                    "step {}: id {id} (tick {}, worker {}, seq {}) issued twice: by instance \
                     {first} on machine {} and by instance {instance} on machine {}",
                    self.step,
                    d.time_delta,
                    d.worker_id,
                    d.sequence,
                    a.machine,
                    self.instances[instance].machine
                ));
            }
            self.ids_in_schedule += 1;
            count(&TOTALS.ids, 1);
        }
        Ok(())
    }

    fn pass(&mut self, ms: u64) -> Result<(), String> {
        for _ in 0..ms.div_ceil(QUANTUM_MS) {
            for m in 0..self.slots.len() {
                self.tick(m, QUANTUM_MS)?;
            }
            self.settle()?;
            self.check_authority()?;
        }
        Ok(())
    }

    /// `q` ms of global time for machine `m`: its clock and runtime move unless it is stopped.
    fn tick(&mut self, m: usize, q: u64) -> Result<(), String> {
        let woke = {
            let mut ctl = lock(&self.slots[m].machine.ctl);
            if ctl.frozen_left_ms == 0 {
                false
            } else {
                ctl.owed_ms += q;
                ctl.frozen_left_ms = ctl.frozen_left_ms.saturating_sub(q);
                if ctl.frozen_left_ms > 0 {
                    return Ok(());
                }
                true
            }
        };
        if woke {
            return self.wake(m);
        }
        let slot = &mut self.slots[m];
        let clock = &slot.machine.clock;
        let target = slot.true_mono_ms + q as i64;
        clock.advance((target - clock.monotonic_ms()).max(0) as u64);
        slot.true_mono_ms = target;
        if let Some(proc) = &mut slot.proc {
            proc.drive(q);
        }
        Ok(())
    }

    /// Ends a stop: the clock catches up, the first request the process serves comes before
    /// any of its tasks run, then its runtime catches up in one go (timers fire late, once).
    fn wake(&mut self, m: usize) -> Result<(), String> {
        let owed = self.catch_up(m);
        let slot = &self.slots[m];
        slot.machine.wake.notify_waiters();
        if let Some(proc) = &slot.proc
            && let Some(engine) = proc.engine().cloned()
        {
            let instance = proc.instance;
            let got = engine
                .try_next_id()
                .expect("direct millisecond generator always answers")
                .map(|id| vec![id]);
            self.record(instance, &engine, got)?;
        }
        if let Some(proc) = &mut self.slots[m].proc {
            proc.drive(owed);
        }
        Ok(())
    }

    /// Moves a stopped machine's clock by the time it missed; returns that time.
    fn catch_up(&mut self, m: usize) -> u64 {
        let slot = &mut self.slots[m];
        let (owed, stood_still) = {
            let mut ctl = lock(&slot.machine.ctl);
            ctl.frozen_left_ms = 0;
            let stood_still = std::mem::take(&mut ctl.wall_stands_still);
            (std::mem::take(&mut ctl.owed_ms), stood_still)
        };
        let clock = &slot.machine.clock;
        let target = slot.true_mono_ms + owed as i64;
        let by = (target - clock.monotonic_ms()).max(0) as u64;
        if stood_still {
            clock.advance_monotonic(by);
        } else {
            clock.advance(by);
        }
        slot.true_mono_ms = target;
        owed
    }

    fn step_wall(&mut self, m: usize, ms: i64) {
        let slot = &mut self.slots[m];
        let by = if ms >= 0 {
            ms.min(slot.forward_left_ms)
        } else {
            ms
        };
        if by == 0 {
            return;
        }
        if by > 0 {
            slot.forward_left_ms -= by;
        }
        let clock = &slot.machine.clock;
        clock.set(clock.now_unix_ms() + by);
        self.stepped = true;
        count(&TOTALS.wall_steps, 1);
    }

    fn crash(&mut self, m: usize) {
        if self.slots[m].proc.is_none() {
            return;
        }
        if self.slots[m].machine.is_frozen() {
            self.catch_up(m);
        }
        // Dropping the runtime kills every task: hung store calls, the heartbeat, a start.
        self.slots[m].proc = None;
        count(&TOTALS.crashes, 1);
    }

    fn start(&mut self, m: usize) -> Result<(), String> {
        let slot = &mut self.slots[m];
        if slot.proc.is_some() || slot.machine.is_frozen() {
            return Ok(());
        }
        let instance = self.instances.len();
        self.instances.push(Instance {
            machine: m,
            worker_id: None,
            last_id: [0; 4],
            issued: 0,
            ticks: None,
        });
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .map_err(|e| e.to_string())?;
        let background = Background::new();
        let store = Arc::new(SimStore {
            table: self.table.clone(),
            machine: slot.machine.clone(),
        });
        let node = NodeInfo {
            host: format!("machine-{m}"),
            port: "0".into(),
            owner: format!("m{m}-i{instance}"),
        };
        let clock: Arc<dyn Clock> = slot.machine.clock.clone();
        let bg = background.clone();
        let task = rt.spawn(async move {
            SnowflakeEngine::start(config(), Some(store), clock, node, &bg).await
        });
        let tokio_start = rt.block_on(async { tokio::time::Instant::now() });
        let mut proc = Process {
            rt,
            background,
            instance,
            state: ProcState::Starting(task),
            driven_ms: 0,
            tokio_start,
        };
        proc.drive(0);
        slot.proc = Some(proc);
        Ok(())
    }

    fn shutdown(&mut self, m: usize) -> Result<(), String> {
        let slot = &mut self.slots[m];
        if slot.machine.is_frozen() {
            return Ok(());
        }
        let Some(proc) = &mut slot.proc else {
            return Ok(());
        };
        if let ProcState::Running(engine) = &proc.state {
            let engine = engine.clone();
            let bg = proc.background.clone();
            let e = engine.clone();
            let task = proc.rt.spawn(async move {
                bg.shutdown(Duration::from_secs(1)).await;
                e.shutdown().await;
            });
            proc.state = ProcState::Stopping(engine, task);
            proc.drive(0);
            count(&TOTALS.shutdowns, 1);
        }
        Ok(())
    }

    /// Moves processes whose start or shutdown finished to their next state.
    fn settle(&mut self) -> Result<(), String> {
        for m in 0..self.slots.len() {
            let finished = match self.slots[m].proc.as_ref().map(|p| &p.state) {
                Some(ProcState::Starting(t)) => t.is_finished(),
                Some(ProcState::Stopping(_, t)) => t.is_finished(),
                _ => false,
            };
            if !finished {
                continue;
            }
            let mut proc = self.slots[m].proc.take().expect("checked above");
            let state = std::mem::replace(&mut proc.state, ProcState::Exited);
            match state {
                ProcState::Starting(task) => match proc.rt.block_on(task) {
                    Ok(Ok(engine)) => {
                        self.instances[proc.instance].worker_id = Some(engine.worker_id());
                        proc.state = ProcState::Running(engine);
                        self.slots[m].proc = Some(proc);
                        count(&TOTALS.starts, 1);
                    }
                    // The process exits (dropped here).
                    Ok(Err(
                        StartError::Worker(
                            WorkerStoreError::Unavailable(_) | WorkerStoreError::Exhausted(_),
                        )
                        | StartError::WorkerTimeout(_),
                    )) => count(&TOTALS.start_failures, 1),
                    Ok(Err(e)) => return Err(format!("step {}: start failed: {e}", self.step)),
                    Err(e) => return Err(format!("step {}: start panicked: {e}", self.step)),
                },
                // The process exits (dropped here).
                ProcState::Stopping(_, task) => proc
                    .rt
                    .block_on(task)
                    .map_err(|e| format!("step {}: shutdown panicked: {e}", self.step))?,
                ProcState::Running(_) | ProcState::Exited => unreachable!("not finished"),
            }
        }
        Ok(())
    }

    /// No two running engines may both be allowed to issue for one worker id, while every
    /// wall clock stays within the skew of true time (see the crate docs).
    fn check_authority(&mut self) -> Result<(), String> {
        static SKIP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *SKIP.get_or_init(|| std::env::var_os("LEAFID_SIM_SKIP_AUTHORITY").is_some()) {
            return Ok(()); // to see what the id checks alone catch (mutation runs)
        }
        let mut holders: BTreeMap<u64, usize> = BTreeMap::new();
        for slot in &self.slots {
            if slot.machine.is_frozen() {
                continue; // its clock is behind: it sees when it wakes
            }
            let Some(proc) = &slot.proc else { continue };
            let Some(engine) = proc.engine() else {
                continue;
            };
            if engine.is_suspended() {
                continue;
            }
            if let Some(other) = holders.insert(engine.worker_id(), proc.instance) {
                if self.stepped {
                    count(&TOTALS.authority_overlaps, 1);
                    continue;
                }
                return Err(format!(
                    "step {}: instances {other} and {} both hold worker id {} with no wall step",
                    self.step,
                    proc.instance,
                    engine.worker_id()
                ));
            }
        }
        Ok(())
    }

    /// The lease table, for messages.
    pub fn table_dump(&self) -> String {
        format!("{:?}", lock(&self.table))
    }
}
