//! An outage answers every request with a 503: the log gets one line per cause per interval,
//! and the metrics count every one.

use std::time::Duration;

use crate::support::mysql;
use crate::support::process::ServerProcess;
use crate::support::proxy::proxied_database;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_logs_each_cause_once_per_interval_and_counts_every_failure() {
    let (proxy, url, direct) = proxied_database().await;
    let server = ServerProcess::start(
        &url,
        &[
            ("LEAFID__SEGMENT__WAIT_TIMEOUT_MS", "20"),
            ("LEAFID__SEGMENT__LOAD_TIMEOUT_MS", "200"),
            ("LEAFID__DATABASE__ACQUIRE_TIMEOUT_MS", "200"),
            ("LEAFID__SNOWFLAKE__ENABLED", "false"),
        ],
    );
    mysql::exec_in(
        &direct,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('down', 1, 5)",
    )
    .await;
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        async move { client.get(path).send().await.unwrap() }
    };
    // Served once before the outage (retried: the short timeouts may fire on a busy machine).
    let mut served = false;
    for _ in 0..50 {
        let res = get(format!("{}/api/segment/get/down", server.address)).await;
        if res.status() == 200 {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "the tag served before the outage");
    proxy.go_down();
    let mut failures = 0;
    for _ in 0..200 {
        let res = get(format!(
            "{}/api/v1/segment/down/ids?count=20",
            server.address
        ))
        .await;
        if res.status() == 503 {
            let body: serde_json::Value = res.json().await.unwrap();
            assert!(body["code"].is_string(), "{body}");
            failures += 1;
        }
    }
    assert!(
        failures >= 150,
        "the outage was visible: {failures} of 200 failed"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let lines = server.log_lines("request failed");
    assert!(
        (1..=3).contains(&lines.len()),
        "{failures} failures, {} log lines:\n{}",
        lines.len(),
        lines.join("\n")
    );
    let metrics = get(format!("{}/metrics", server.address))
        .await
        .text()
        .await
        .unwrap();
    let counted: f64 = metrics
        .lines()
        .filter(|l| l.starts_with("leafid_http_server_errors_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(
        counted >= f64::from(failures),
        "{failures} failures, {counted} counted:\n{metrics}"
    );
    proxy.heal();
}
