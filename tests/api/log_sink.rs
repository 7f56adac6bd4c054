//! The real binary whose log cannot be written: output on `/dev/full`, and stderr a pipe whose
//! reader stopped reading. Logging must never take the server down nor slow an id: lines are
//! dropped and counted (`leafid_log_lines_dropped_total`), every route answers as it does with
//! a working log, and SIGTERM still stops the server.
//!
//! The full disk holding both the database and the log is in `store_faults`.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::routes::sample;
use crate::support::process::ServerProcess;

/// `leafid_log_lines_dropped_total` as the server's `/metrics` reports it.
pub(crate) async fn dropped_lines(base: &str) -> u64 {
    crate::support::metric_value(base, "leafid_log_lines_dropped_total")
        .await
        .expect("leafid_log_lines_dropped_total in /metrics") as u64
}

/// Every documented method on every documented path (parameters sampled as `routes` does),
/// in one fixed order: `(method, path, status)`.
async fn statuses(client: &reqwest::Client, base: &str, doc: &serde_json::Value) -> Vec<String> {
    let mut out = Vec::new();
    for (template, item) in doc["paths"].as_object().expect("paths") {
        let path = sample(template);
        for method in ["get", "post", "patch", "delete"] {
            if item.get(method).is_none() {
                continue;
            }
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let mut req = client.request(m, format!("{base}{path}"));
            if method == "post" || method == "patch" {
                req = req.header("content-type", "application/json").body("{}");
            }
            let status = req.send().await.unwrap().status().as_u16();
            out.push(format!("{method} {path} {status}"));
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_its_output_on_dev_full_the_server_answers_every_route_as_usual_and_stops_on_sigterm()
{
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("LEAFID__SERVER__DRAIN_SECS", "1"),
        // Debug lines on every snowflake request: plenty of writes that fail.
        ("RUST_LOG", "debug"),
    ];
    let full = |name: &str| {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap_or_else(|e| panic!("open /dev/full for {name}: {e}"));
        Stdio::from(f)
    };
    let url = |name: &str| format!("sqlite://{}", dir.path().join(name).display());
    let mut silent =
        ServerProcess::start_with_output(&url("full.db"), &env, full("stdout"), full("stderr"));
    let reference = ServerProcess::start(&url("reference.db"), &env);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();

    let doc: serde_json::Value = client
        .get(format!("{}/openapi.json", reference.address))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let expected = statuses(&client, &reference.address, &doc).await;
    let got = statuses(&client, &silent.address, &doc).await;
    assert!(expected.len() >= 20, "only {} routes tried", expected.len());
    assert_eq!(
        got, expected,
        "every route answers as on a server whose log works"
    );
    for route in ["/api/segment/get/leaf-segment-test", "/api/snowflake/get/x"] {
        for _ in 0..50 {
            let res = client
                .get(format!("{}{route}", silent.address))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{route}");
            assert!(res.text().await.unwrap().parse::<i64>().unwrap() > 0);
        }
    }
    let dropped = dropped_lines(&silent.address).await;
    assert!(dropped > 0, "no log line counted as dropped on /dev/full");

    let before_signal = Instant::now();
    silent.send_term();
    let status = tokio::task::spawn_blocking(move || {
        let status = silent.wait_exit(Duration::from_secs(20));
        (status, silent)
    })
    .await
    .unwrap();
    let exited = status
        .0
        .expect("SIGTERM stops the server whose log is /dev/full");
    assert!(exited.success(), "{exited:?}");
    eprintln!(
        "/dev/full: {} routes answered as usual, {dropped} log lines dropped, stopped {:?} after \
         SIGTERM (drain 1 s)",
        got.len(),
        before_signal.elapsed()
    );
    drop(reference);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_pipe_nobody_reads_never_holds_up_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    let server = ServerProcess::start_with_output(
        &format!("sqlite://{}", dir.path().join("pipe.db").display()),
        // A debug line per snowflake request fills the 64 KiB pipe within a few hundred
        // requests, then the sink's queue of 8,192 lines.
        &[("RUST_LOG", "debug")],
        Stdio::null(),
        Stdio::from(writer),
    );
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let base = server.address.clone();
    let mut latencies = Vec::new();
    let mut dropped = 0;
    // Rounds of requests on 8 connections until lines are being dropped (the pipe and the
    // queue are full), then one more round measured with the log blocked.
    for round in 0..40 {
        let mut tasks = Vec::new();
        for worker in 0..8 {
            let (client, base) = (client.clone(), base.clone());
            tasks.push(tokio::spawn(async move {
                let mut times = Vec::with_capacity(250);
                for i in 0..250 {
                    let route = if (worker + i) % 4 == 0 {
                        "/api/segment/get/leaf-segment-test"
                    } else {
                        "/api/snowflake/get/x"
                    };
                    let started = Instant::now();
                    let res = client.get(format!("{base}{route}")).send().await;
                    let res = res.unwrap_or_else(|e| panic!("{route}: no answer: {e}"));
                    assert_eq!(res.status(), 200, "{route}");
                    let id: i64 = res.text().await.unwrap().parse().unwrap();
                    assert!(id > 0);
                    times.push(started.elapsed());
                }
                times
            }));
        }
        let mut times = Vec::new();
        for t in tasks {
            times.extend(t.await.unwrap());
        }
        latencies.push((round, times));
        if dropped > 0 {
            break;
        }
        dropped = dropped_lines(&base).await;
    }
    assert!(dropped > 0, "the log never blocked: no line was dropped");
    let pct = |times: &mut Vec<Duration>, p: f64| {
        times.sort_unstable();
        times[((times.len() - 1) as f64 * p) as usize]
    };
    let (_, mut first) = latencies.first().cloned().unwrap();
    let (rounds, mut last) = latencies.last().cloned().unwrap();
    eprintln!(
        "full log pipe: {dropped} lines dropped after {rounds} rounds of 2,000 requests; \
         first round p50 {:?} p99 {:?}, last round (log blocked) p50 {:?} p99 {:?}",
        pct(&mut first, 0.5),
        pct(&mut first, 0.99),
        pct(&mut last, 0.5),
        pct(&mut last, 0.99),
    );
    drop(server);
    drop(reader);
}
