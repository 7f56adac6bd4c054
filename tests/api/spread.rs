//! Snowflake ids from real `leafid` processes, asked for one at a time over HTTP at a quiet rate
//! (about 200 ids/s), spread over `id % 16` and `id % 2` with either generator (issue 43,
//! ShardingSphere #7750). The engine-level twin is `tests/engine/spread.rs`.

use std::time::{Duration, Instant};

use crate::support::process::ServerProcess;
use crate::support::{Db, fresh_db, record_figure};

/// The largest share (of `ids`) that one shard of `id % shards` holds.
fn max_share(ids: &[u64], shards: u64) -> f64 {
    let mut counts = vec![0usize; shards as usize];
    for &id in ids {
        counts[(id % shards) as usize] += 1;
    }
    *counts.iter().max().unwrap() as f64 / ids.len() as f64
}

/// One server per generator (`direct`, `cached`) on one SQLite file (different worker ids); 400
/// rounds, 5 ms apart, each asking every server for one id on the single-id route. On the old
/// direct generator every id had sequence 0: one shard of `id % 16` held all 400.
#[tokio::test]
async fn ids_asked_one_at_a_time_over_http_spread_over_id_mod_16() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let servers: Vec<(&str, ServerProcess)> = ["direct", "cached"]
        .into_iter()
        .map(|kind| {
            let env = [("LEAFID__SNOWFLAKE__GENERATOR", kind)];
            (kind, ServerProcess::start(&url, &env))
        })
        .collect();
    let client = reqwest::Client::new();
    let mut ids: Vec<Vec<u64>> = vec![Vec::new(); servers.len()];
    let started = Instant::now();
    for _ in 0..400 {
        for ((_, server), mine) in servers.iter().zip(&mut ids) {
            let text = client
                .get(format!("{}/api/snowflake/get/spread", server.address))
                .send()
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            mine.push(text.parse().unwrap_or_else(|_| panic!("not an id: {text}")));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let elapsed = started.elapsed();
    for ((kind, _), mine) in servers.iter().zip(&ids) {
        assert!(
            mine.windows(2).all(|w| w[0] < w[1]),
            "{kind}: ids do not increase"
        );
        let (m16, m2) = (max_share(mine, 16), max_share(mine, 2));
        record_figure(
            &format!("spread-{kind}"),
            &format!(
                "spread over HTTP, {kind}: {} ids one at a time in {elapsed:?}: largest shard of \
                 id % 16 holds {:.1}%, of id % 2 {:.1}%",
                mine.len(),
                m16 * 100.0,
                m2 * 100.0
            ),
        );
        assert!(
            m16 <= 0.25,
            "{kind}: one shard of id % 16 holds {:.1}%",
            m16 * 100.0
        );
        assert!(
            m2 <= 0.65,
            "{kind}: one shard of id % 2 holds {:.1}%",
            m2 * 100.0
        );
    }
    let mut all: Vec<u64> = ids.concat();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "an id was handed out twice");
}
