//! The wall clock stepped under the real binary: libfaketime (Debian's `faketime`, installed by
//! `scripts/test.sh`) is preloaded into `leafid`, and the test moves the process's
//! `CLOCK_REALTIME` by rewriting the offset file while ids are being issued. Only the wall clock
//! moves (`DONT_FAKE_MONOTONIC=1`), as when NTP or an operator steps it: the generators, their
//! coarse tick and the cached ring's filler all read the stepped clock; leases and timeouts keep
//! their monotonic clocks.
//!
//! The in-process clock tests (`tests/engine/clock_back.rs`) step a clock object; these step the
//! clock the operating system gives the process.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::support::process::ServerProcess;
use crate::support::{Db, fresh_db};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// What one phase of requests got: ids in the order the server answered them, and the error
/// codes of the refusals.
#[derive(Default)]
struct Phase {
    ids: Vec<u64>,
    refusals: Vec<String>,
}

/// Asks for batches of 50 snowflake ids, one request after another, for `run_for`.
async fn take_for(client: &reqwest::Client, base: &str, run_for: Duration) -> Phase {
    take_until(client, base, run_for, run_for).await
}

/// [`take_for`] for at least `run_for`, then on until the first refusal, up to `at_most`.
async fn take_until(
    client: &reqwest::Client,
    base: &str,
    run_for: Duration,
    at_most: Duration,
) -> Phase {
    let mut phase = Phase::default();
    let started = Instant::now();
    while started.elapsed() < run_for || (phase.refusals.is_empty() && started.elapsed() < at_most)
    {
        let resp = client
            .get(format!(
                "{base}/api/v1/snowflake/ids?count=50&stringify_ids=true"
            ))
            .send()
            .await
            .expect("leafid answers");
        let status = resp.status().as_u16();
        let body: serde_json::Value = resp.json().await.expect("a JSON body");
        if status == 200 {
            phase.ids.extend(
                body["ids"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| v.as_str().unwrap().parse::<u64>().unwrap()),
            );
        } else {
            assert_eq!(status, 503, "{body}");
            phase
                .refusals
                .push(body["code"].as_str().unwrap().to_owned());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    phase
}

/// Steps the wall clock of `server` 5 s back in the middle of the load (far past the 5 ms a
/// direct generator waits out), then forward to the real time again.
async fn a_wall_clock_step_back_never_repeats_an_id(generator: &str) {
    assert!(
        std::path::Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: scripts/test.sh installs Debian's faketime"
    );
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let offset = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(offset.path(), "+0\n").unwrap();
    let offset_path = offset.path().to_str().unwrap().to_owned();
    let server = ServerProcess::start(
        &url,
        &[
            ("LD_PRELOAD", LIBFAKETIME),
            ("FAKETIME_TIMESTAMP_FILE", &offset_path),
            // Read the file on every clock call, so a rewrite takes effect at once.
            ("FAKETIME_NO_CACHE", "1"),
            ("DONT_FAKE_MONOTONIC", "1"),
            ("LEAFID__SNOWFLAKE__GENERATOR", generator),
            ("LEAFID__SNOWFLAKE__WORKER__STRATEGY", "static"),
            ("LEAFID__SNOWFLAKE__WORKER__ID", "1"),
        ],
    );
    let client = reqwest::Client::new();
    let base = server.address.clone();

    let before = take_for(&client, &base, Duration::from_millis(1500)).await;
    std::fs::write(offset.path(), "-5\n").unwrap();
    // The cached generator serves its ring first (about 23,000 ids here, some 450 requests):
    // how long that takes depends on the machine's load, so the phase goes on past 2.5 s until
    // the first refusal, up to 4.5 s, still inside the 5 s the clock is behind.
    let stepped = take_until(
        &client,
        &base,
        Duration::from_millis(2500),
        Duration::from_millis(4500),
    )
    .await;
    std::fs::write(offset.path(), "+0\n").unwrap();
    let after = take_for(&client, &base, Duration::from_millis(1500)).await;

    // The step was seen: ids stopped (refusals) while the clock was behind the last tick used.
    assert!(
        !stepped.refusals.is_empty(),
        "{generator}: no refusal while the clock was 5 s behind ({} ids served)",
        stepped.ids.len()
    );
    for code in before
        .refusals
        .iter()
        .chain(&stepped.refusals)
        .chain(&after.refusals)
    {
        assert!(
            code == "clock_moved_backwards" || code == "snowflake_not_ready",
            "{generator}: refused with {code}"
        );
    }
    assert!(!before.ids.is_empty(), "{generator}: no id before the step");
    assert!(
        !after.ids.is_empty(),
        "{generator}: no id after the clock came back"
    );

    // Every id once, and in the order they were served each is above the one before.
    let all: Vec<u64> = [&before.ids, &stepped.ids, &after.ids]
        .into_iter()
        .flatten()
        .copied()
        .collect();
    let unique: HashSet<u64> = all.iter().copied().collect();
    assert_eq!(
        unique.len(),
        all.len(),
        "{generator}: an id was issued twice"
    );
    assert!(
        all.windows(2).all(|w| w[0] < w[1]),
        "{generator}: ids went down across the step"
    );
    let ids_while_stepped = stepped.ids.len();
    eprintln!(
        "{generator}: {} ids before, {ids_while_stepped} while 5 s behind ({} refusals), {} after",
        before.ids.len(),
        stepped.refusals.len(),
        after.ids.len()
    );
}

#[tokio::test]
async fn a_wall_clock_step_back_never_repeats_a_direct_id() {
    a_wall_clock_step_back_never_repeats_an_id("direct").await;
}

#[tokio::test]
async fn a_wall_clock_step_back_never_repeats_a_cached_id() {
    a_wall_clock_step_back_never_repeats_an_id("cached").await;
}
