//! SIGTERM with `server.drain_secs`: readiness fails first while ids are still served, so a
//! load balancer takes the server out of rotation before its port closes.

use std::time::{Duration, Instant};

use crate::support::process::ServerProcess;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_fails_readiness_for_the_drain_period_while_ids_are_still_served() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("drain.db").display());
    let mut server = ServerProcess::start(&url, &[("LEAFID__SERVER__DRAIN_SECS", "2")]);
    let client = reqwest::Client::new();
    let ready = client
        .get(format!("{}/health/ready", server.address))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);

    server.send_term();
    let signalled = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let ready = client
        .get(format!("{}/health/ready", server.address))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503, "readiness fails while draining");
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["code"], "not_ready");
    assert!(
        body["message"].as_str().unwrap().contains("draining"),
        "{body}"
    );
    let mut served = 0;
    while signalled.elapsed() < Duration::from_millis(1_500) {
        for route in ["/api/segment/get/leaf-segment-test", "/api/snowflake/get/x"] {
            let res = client
                .get(format!("{}{route}", server.address))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{route} is still served while draining");
            served += 1;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served >= 10);
    let status = tokio::task::spawn_blocking(move || server.wait_exit(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the server exits after the drain period");
    assert!(status.success(), "{status:?}");
    assert!(
        signalled.elapsed() >= Duration::from_secs(2),
        "not before the drain period ended"
    );
}
