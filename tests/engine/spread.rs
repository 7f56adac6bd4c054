//! Ids sharded by `id % 2^k` spread evenly at a quiet rate (issue 43, ShardingSphere #7750), for
//! both generators, through the engine with the real clock; and the direct generator's random
//! tick starts under threads never repeat an id.
//!
//! At about 200 ids/s (under one id per millisecond tick) the direct generator used to start
//! every tick at sequence 0, so every id fell in one shard of `id % 16`; each new tick now starts
//! at a random sequence below `2^8` (`leafid::snowflake::direct::spread_bits`). The cached
//! generator hands out consecutive positions, so it spread already.

use std::sync::Arc;
use std::time::{Duration, Instant};

use leafid::snowflake::cached::CachedConfig;
use leafid::snowflake::clock::SystemClock;
use leafid::snowflake::direct::{DEFAULT_MAX_BACKWARD_MS, DirectGenerator};
use leafid::snowflake::engine::{GeneratorKind, SnowflakeConfig, SnowflakeEngine};
use leafid::snowflake::layout::{BitLayout, TimeUnit};
use leafid::snowflake::worker::{NodeInfo, WorkerStrategy};

/// Ids asked for one at a time, this far apart: about 200 ids/s.
const PAUSE: Duration = Duration::from_millis(5);
/// How many ids each generator is asked for (about 2 s at `PAUSE`).
const IDS: usize = 400;

async fn engine(kind: GeneratorKind) -> Arc<SnowflakeEngine> {
    let config = SnowflakeConfig {
        layout: BitLayout::twitter(),
        generator: kind,
        strategy: WorkerStrategy::Static(8),
        lease: Duration::from_secs(60),
        heartbeat: Duration::from_secs(10),
        max_backward_ms: DEFAULT_MAX_BACKWARD_MS,
        cached: CachedConfig {
            max_wait: Duration::from_secs(5),
            ..CachedConfig::default()
        },
        min_id_floor: 0,
        region: Default::default(),
    };
    let node = NodeInfo {
        host: "test".into(),
        port: "0".into(),
        owner: "spread-test".into(),
    };
    SnowflakeEngine::start(
        config,
        None,
        Arc::new(SystemClock),
        node,
        &leafid::background::Background::new(),
    )
    .await
    .unwrap()
}

/// The largest share (of `ids`) that one shard of `id % shards` holds.
fn max_share(ids: &[u64], shards: u64) -> f64 {
    let mut counts = vec![0usize; shards as usize];
    for &id in ids {
        counts[(id % shards) as usize] += 1;
    }
    *counts.iter().max().unwrap() as f64 / ids.len() as f64
}

/// Asks `engine` for [`IDS`] ids one at a time, [`PAUSE`] apart (on a blocking thread: the
/// engine's blocking calls may wait), and checks the spread over `id % 16` and `id % 2`.
async fn quiet_rate_spreads(kind: GeneratorKind) {
    let engine = engine(kind).await;
    let taker = engine.clone();
    let (ids, elapsed) = tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        let mut ids = Vec::with_capacity(IDS);
        for _ in 0..IDS {
            ids.push(taker.next_id_blocking().unwrap());
            std::thread::sleep(PAUSE);
        }
        (ids, started.elapsed())
    })
    .await
    .unwrap();
    engine.shutdown().await;
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids do not increase");
    let layout = BitLayout::twitter();
    let ticks: std::collections::BTreeSet<u64> = ids
        .iter()
        .map(|&id| layout.decompose(id).time_delta)
        .collect();
    let (m16, m2) = (max_share(&ids, 16), max_share(&ids, 2));
    eprintln!(
        "spread {kind:?}: {IDS} ids one at a time in {elapsed:?} ({:.0} ids/s, {} ticks): \
         largest shard of id % 16 holds {:.1}%, of id % 2 {:.1}%",
        IDS as f64 / elapsed.as_secs_f64(),
        ticks.len(),
        m16 * 100.0,
        m2 * 100.0
    );
    // 25 ids of 400 per shard of 16 (sd ~4.8): 25% (100 ids) is far out of chance.
    assert!(
        m16 <= 0.25,
        "{kind:?}: one shard of id % 16 holds {:.1}%",
        m16 * 100.0
    );
    assert!(
        m2 <= 0.65,
        "{kind:?}: one shard of id % 2 holds {:.1}%",
        m2 * 100.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_ids_at_a_quiet_rate_spread_over_id_mod_16() {
    quiet_rate_spreads(GeneratorKind::Direct).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_ids_at_a_quiet_rate_spread_over_id_mod_16() {
    quiet_rate_spreads(GeneratorKind::Cached).await;
}

/// Threads race into new ticks at mixed paces (bursts that wrap a tick, single ids, short
/// pauses), so the random start, the wrap to sequence 0 and both paths (the cached tick and a
/// clock reading) all meet under contention: no id repeats, each thread's ids increase, each
/// tick's first id is below the spread bound, and a tick entered by a wrap starts at 0.
#[test]
fn threads_racing_into_new_ticks_never_repeat_an_id() {
    // 8 sequence bits (256 ids a tick): starts below 2^4; bursts of 300 wrap ticks, pauses of
    // 2 ms between bursts of 60 leave others fresh.
    let layout = BitLayout::new(0, 0, 41, 14, 8, TimeUnit::Millis, 1_600_000_000_000).unwrap();
    let g =
        DirectGenerator::new(layout, 5, Arc::new(SystemClock), DEFAULT_MAX_BACKWARD_MS).unwrap();
    let per_thread: Vec<Vec<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3usize)
            .map(|t| {
                let g = &g;
                s.spawn(move || {
                    let mut ids = Vec::new();
                    for round in 0..600usize {
                        match (round + t) % 4 {
                            0 => g
                                .next_ids(if round % 8 == 0 { 300 } else { 60 }, &mut ids)
                                .unwrap(),
                            1 => std::thread::sleep(Duration::from_millis(2)),
                            _ => ids.push(g.next_id().unwrap()),
                        }
                    }
                    ids
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for ids in &per_thread {
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "a thread's ids decrease"
        );
    }
    let mut all: Vec<u64> = per_thread.into_iter().flatten().collect();
    let total = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), total, "an id was handed out twice");
    // Each tick's first id: below 2^4, or 0 when the tick before it was used up (a wrap).
    let mut first_of_tick = std::collections::BTreeMap::new();
    for &id in &all {
        let d = layout.decompose(id);
        first_of_tick.entry(d.time_delta).or_insert(d.sequence);
    }
    let mut last_seq = std::collections::BTreeMap::new();
    for &id in &all {
        let d = layout.decompose(id);
        last_seq.insert(d.time_delta, d.sequence);
    }
    let (mut random_starts, mut wraps) = (0, 0);
    for (&tick, &start) in &first_of_tick {
        assert!(start < 16, "tick {tick} starts at {start}");
        if last_seq.get(&(tick - 1)) == Some(&255) {
            assert_eq!(start, 0, "tick {tick} entered by a wrap starts at {start}");
            wraps += 1;
        } else if start > 0 {
            random_starts += 1;
        }
    }
    assert!(random_starts > 0, "no tick started at random");
    eprintln!(
        "spread hammer: {total} ids over {} ticks: {random_starts} random starts above 0, \
         {wraps} ticks entered by a wrap",
        first_of_tick.len()
    );
}
