//! An outage answers every request with a 503: the log gets one line per cause per interval,
//! and the metrics count every one (on MariaDB and PostgreSQL behind the fault proxy).

use std::time::{Duration, Instant};

use crate::on_proxied_databases;
use crate::support::process::ServerProcess;
use crate::support::proxy::proxied_database_on;
use crate::support::{Db, exec_sql, metric_family_sum};

async fn an_outage_logs_each_cause_once_per_interval_and_counts_every_failure(db: Db) {
    let (proxy, url, direct) = proxied_database_on(db).await;
    let server = ServerProcess::start(
        &url,
        &[
            ("LEAFID__SEGMENT__WAIT_TIMEOUT_MS", "20"),
            ("LEAFID__SEGMENT__LOAD_TIMEOUT_MS", "200"),
            ("LEAFID__DATABASE__ACQUIRE_TIMEOUT_MS", "200"),
            ("LEAFID__SNOWFLAKE__ENABLED", "false"),
        ],
    );
    exec_sql(
        db,
        &direct,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('down', 1, 5), ('down2', 1, 5), ('down3', 1, 5)",
    )
    .await;
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        async move { client.get(path).send().await.unwrap() }
    };
    // Served once before the outage (retried: the short timeouts may fire on a busy machine).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let res = get(format!("{}/api/segment/get/down", server.address)).await;
        if res.status() == 200 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the tag never served before the outage: {}",
            res.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    proxy.go_down();
    let mut failures: u32 = 0;
    // Three tags (two never loaded): each one's loads fail on every backoff (50 ms doubling).
    for i in 0..200 {
        let tag = ["down", "down2", "down3"][i % 3];
        let res = get(format!(
            "{}/api/v1/segment/{tag}/ids?count=20",
            server.address
        ))
        .await;
        if res.status() == 503 {
            let body: serde_json::Value = res.json().await.unwrap();
            assert!(body["code"].is_string(), "{body}");
            failures += 1;
        }
        // Paced over about two seconds: while a lease is failing requests answer at once (fail
        // fast), so it is time, not requests, that lets several backoffs run out and several
        // loads fail.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        failures >= 150,
        "the outage was visible: {failures} of 200 failed"
    );
    // The log reaches the test through a pipe and a reader thread: wait for it (bounded).
    let deadline = Instant::now() + Duration::from_secs(10);
    let lines = loop {
        let lines = server.log_lines("request failed");
        if !lines.is_empty() || Instant::now() >= deadline {
            break lines;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(
        !lines.is_empty(),
        "{failures} failures, no \"request failed\" line"
    );
    assert_once_per_interval(&lines, "code", failures);
    // The segment loads the outage failed, every tag's on every backoff: the same rule, one
    // line per message per interval for all tags.
    let load_lines: Vec<String> = ["segment load failed", "segment load timed out"]
        .iter()
        .flat_map(|m| server.log_lines(m))
        .collect();
    assert_once_per_interval(&load_lines, "message", failures);
    let metrics = get(format!("{}/metrics", server.address))
        .await
        .text()
        .await
        .unwrap();
    let counted = metric_family_sum(&metrics, "leafid_http_server_errors_total");
    assert!(
        counted >= f64::from(failures),
        "{failures} failures, {counted} counted:\n{metrics}"
    );
    let load_failures = metric_family_sum(&metrics, "leafid_segment_load_failures_total");
    assert!(
        load_failures > load_lines.len() as f64,
        "{load_failures} load failures counted, {} logged",
        load_lines.len()
    );
    proxy.heal();
}
on_proxied_databases!(an_outage_logs_each_cause_once_per_interval_and_counts_every_failure);

/// Asserts no two of `lines` (JSON log lines) with the same `key` value lie within one 10 s
/// interval. Counted by the lines' own times, not as "at most three": a loaded machine can
/// stretch the requests over more than one interval.
fn assert_once_per_interval(lines: &[String], key: &str, failures: u32) {
    let mut last_by_cause = std::collections::HashMap::new();
    for line in lines {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let at = chrono::DateTime::parse_from_rfc3339(v["timestamp"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("timestamp of {line}: {e}"));
        let cause = v[key]
            .as_str()
            .unwrap_or_else(|| panic!("no {key}: {line}"));
        if let Some(before) = last_by_cause.insert(cause.to_owned(), at) {
            // 10 s, less what scheduling may put between the limiter's decision and the
            // timestamp of the line before.
            assert!(
                at - before >= chrono::Duration::seconds(9),
                "{cause} logged twice within {} ms ({failures} failures):\n{}",
                (at - before).num_milliseconds(),
                lines.join("\n")
            );
        }
    }
}
