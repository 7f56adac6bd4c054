//! Sustained ids/s of one caller task against running servers.
//!
//! `cargo run --release -p leafid-client --example throughput -- URL[,URL...] TAG [SECS] [BATCH]`
//!
//! Creates TAG through the first server if it is unknown (works from loopback without an
//! admin token), then one task calls `next_id` in a loop for SECS seconds (default 10) with
//! batches of BATCH ids (default 100000, the server's maximum). The runtime has two worker
//! threads: the caller's, and one for the background refills and health probes.

use std::time::{Duration, Instant};

use leafid_client::{Client, Error};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(urls), Some(tag)) = (args.first(), args.get(1)) else {
        eprintln!("usage: throughput URL[,URL...] TAG [SECS] [BATCH]");
        std::process::exit(2);
    };
    let secs: u64 = args.get(2).map_or(10, |s| s.parse().expect("SECS"));
    let batch: usize = args.get(3).map_or(100_000, |s| s.parse().expect("BATCH"));
    let urls: Vec<&str> = urls.split(',').collect();

    // Best effort: 201 created, 409 already there.
    let _ = reqwest::Client::new()
        .post(format!("{}/api/v1/tags", urls[0].trim_end_matches('/')))
        .header("content-type", "application/json")
        .body(format!(r#"{{"biz_tag":"{tag}","step":1000000}}"#))
        .send()
        .await;

    let client = Client::builder().servers(urls).batch(batch).build()?;
    let supply = client.segment(tag)?;
    supply.next_id().await?; // the first batch, outside the measurement

    let run = Duration::from_secs(secs);
    let started = Instant::now();
    let (mut n, mut last, mut slow) = (0u64, 0i64, 0u64);
    while started.elapsed() < run {
        // The clock is read once per 4096 ids, not per id.
        for _ in 0..4096 {
            let id = match supply.try_next_id() {
                Some(id) => id,
                None => {
                    slow += 1;
                    supply.next_id().await?
                }
            };
            assert!(id > last, "ids must increase");
            last = id;
        }
        n += 4096;
        // Lets the refill task run: spawned from this worker, it may wait in this worker's
        // queue (tokio's LIFO slot is not stolen by the other worker).
        tokio::task::yield_now().await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "{n} ids in {elapsed:.2} s: {:.0} ids/s from one task (batch {batch}); \
         {slow} calls waited for a batch; {:?}",
        n as f64 / elapsed,
        supply.stats()
    );
    Ok(())
}
