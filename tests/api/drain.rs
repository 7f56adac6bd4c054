//! SIGTERM with `server.drain_secs`: readiness fails first while ids are still served, so a
//! load balancer takes the server out of rotation before its port closes.

use std::time::{Duration, Instant};

use crate::support::process::ServerProcess;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_fails_readiness_for_the_drain_period_while_ids_are_still_served() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("drain.db").display());
    let mut server = ServerProcess::start(&url, &[("LEAFID__SERVER__DRAIN_SECS", "4")]);
    let client = reqwest::Client::new();
    let ready = client
        .get(format!("{}/health/ready", server.address))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);

    // Taken before the signal is sent: the server starts its drain when the signal arrives,
    // which is after this instant, so "lived at least the drain period" is measured from the
    // only side that bounds it (an instant taken after `kill` returns may be later than the
    // arrival on a loaded machine).
    let before_signal = Instant::now();
    server.send_term();
    // Readiness fails once the signal is handled; a loaded machine may take a while to run the
    // handler, so poll instead of sleeping a fixed time.
    let body: serde_json::Value = loop {
        let ready = client
            .get(format!("{}/health/ready", server.address))
            .send()
            .await
            .unwrap();
        if ready.status() == 503 {
            break ready.json().await.unwrap();
        }
        assert_eq!(ready.status(), 200);
        assert!(
            before_signal.elapsed() < Duration::from_millis(3_000),
            "readiness still 200 3 s after SIGTERM (the drain period is 4 s)"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(body["code"], "not_ready");
    assert!(
        body["message"].as_str().unwrap().contains("draining"),
        "{body}"
    );
    let mut served = 0;
    // Ids are served during the drain: at least one round, and rounds until 3 s after the
    // instant before the signal (so inside the drain however late the signal arrived).
    loop {
        for route in ["/api/segment/get/leaf-segment-test", "/api/snowflake/get/x"] {
            let res = client
                .get(format!("{}{route}", server.address))
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 200, "{route} is still served while draining");
            served += 1;
        }
        if before_signal.elapsed() >= Duration::from_millis(3_000) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(served >= 2, "{served} requests during the drain");
    let status = tokio::task::spawn_blocking(move || server.wait_exit(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("the server exits after the drain period");
    assert!(status.success(), "{status:?}");
    assert!(
        before_signal.elapsed() >= Duration::from_secs(4),
        "not before the drain period ended"
    );
}
