//! `SnowflakeSupply::bounds` against a real server: the snowflake ids the client hands out lie
//! within the bounds of the window they were taken in, and a range the server refuses is
//! `Rejected` with `invalid_time_range`. The rule itself is the server's, tested there
//! (`tests/api/bounds.rs` and the engine's property tests); this checks the client's request.
//!
//! Needs `target/debug/leafid` and MariaDB (see `support`).

mod support;

use std::time::{Duration, SystemTime};

use leafid_client::{Client, Error};
use support::{Server, create_database};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn the_ids_of_a_window_lie_within_its_bounds() {
    // Before the server starts: its generator reads the clock for its ids from its start on.
    let before = SystemTime::now();
    let server = Server::start(&create_database());
    let client = Client::builder()
        .servers([server.address.clone()])
        .batch(1000)
        .build()
        .unwrap();
    let snowflake = client.snowflake();
    let mut ids = Vec::new();
    for _ in 0..1500 {
        ids.push(snowflake.next_id().await.unwrap());
    }
    let after = SystemTime::now();
    // Twitter's layout (the default): one tick is a millisecond.
    let window = snowflake
        .bounds(before, after + Duration::from_millis(1))
        .await
        .unwrap();
    for id in &ids {
        assert!(window.contains(*id), "{id} outside {window:?}");
    }
    let earlier = snowflake
        .bounds(before - Duration::from_secs(3600), before)
        .await
        .unwrap();
    assert!(earlier.max_id < window.min_id, "{earlier:?} {window:?}");

    let refused = snowflake.bounds(after, before).await;
    assert!(
        matches!(&refused, Err(Error::Rejected { status: 400, code, .. }) if code == "invalid_time_range"),
        "{refused:?}"
    );
    let before_epoch = snowflake.bounds_unix_ms(0, 1).await;
    assert!(
        matches!(&before_epoch, Err(Error::Rejected { message, .. }) if message.contains("epoch")),
        "{before_epoch:?}"
    );
}
