//! Admin writes behind a same-host reverse proxy: HAProxy on the server's machine forwards to
//! leafid on 127.0.0.1, and a client on another host (a network namespace joined by a veth
//! pair) reaches leafid only through it. Every request then arrives from loopback, so the
//! default must not trust loopback: an admin write through the proxy is refused unless it
//! carries the admin token, and the monitor pages follow `admin.protect_reads`.

use crate::support::haproxy::HaProxy;
use crate::support::netns::NetNs;
use crate::support::process::ServerProcess;

/// `curl` from the other host: `(status, body)`.
fn curl(
    host: &NetNs,
    method: &str,
    url: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, String) {
    let mut args = vec![
        "-s".to_owned(),
        "-m".to_owned(),
        "10".to_owned(),
        "-o".to_owned(),
        "-".to_owned(),
        "-w".to_owned(),
        "\n%{http_code}".to_owned(),
        "-X".to_owned(),
        method.to_owned(),
    ];
    if let Some(b) = body {
        args.extend(["-H".to_owned(), "content-type: application/json".to_owned()]);
        args.extend(["--data".to_owned(), b.to_owned()]);
    }
    if let Some(t) = token {
        args.extend(["-H".to_owned(), format!("Authorization: Bearer {t}")]);
    }
    args.push(url.to_owned());
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = host.run("curl", &refs);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    let code = code
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("curl {method} {url}: no status ({text:?}, {out:?})"));
    (code, body.to_owned())
}

/// leafid on 127.0.0.1 (the default host) behind HAProxy bound to the host's veth address, and
/// the other host.
fn deployment(env: &[(&str, &str)]) -> (NetNs, ServerProcess, HaProxy, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let other = NetNs::new("adm");
    let server = ServerProcess::start(
        &format!("sqlite://{}", dir.path().join("proxy.db").display()),
        env,
    );
    let lb = HaProxy::start_bound(&other.host_ip, &[&server.address], false);
    (other, server, lb, dir)
}

#[test]
#[ignore = "needs root (ip netns) and HAProxy: scripts/test.sh runs it"]
fn through_a_same_host_proxy_admin_writes_need_the_token_by_default() {
    // The shipped default (config/default.toml, pinned by a config test) is false; the process
    // harness trusts loopback for the other tests' convenience, so this test states it.
    let (other, server, lb, _dir) = deployment(&[("LEAFID__ADMIN__TRUST_LOOPBACK", "false")]);
    let base = &lb.address;

    // Ids and health are for everyone.
    let (status, id) = curl(
        &other,
        "GET",
        &format!("{base}/api/segment/get/leaf-segment-test"),
        None,
        None,
    );
    assert_eq!(status, 200, "{id}");
    // Without a token configured, no admin write passes, whoever asks.
    let create = r#"{"biz_tag":"through-proxy","step":10}"#;
    let (status, body) = curl(
        &other,
        "POST",
        &format!("{base}/api/v1/tags"),
        Some(create),
        None,
    );
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("\"unauthorized\""), "{body}");
    let (status, body) = curl(
        &other,
        "DELETE",
        &format!("{base}/api/v1/tags/leaf-segment-test"),
        None,
        None,
    );
    assert_eq!(status, 401, "{body}");
    let (status, body) = curl(
        &other,
        "PATCH",
        &format!("{base}/api/v1/tags/leaf-segment-test"),
        Some(r#"{"step":5}"#),
        None,
    );
    assert_eq!(status, 401, "{body}");
    // Nothing was written: the seeded tag is intact, the new one absent.
    let (status, _) = curl(
        &other,
        "GET",
        &format!("{base}/api/v1/tags/through-proxy"),
        None,
        None,
    );
    assert_eq!(status, 404);
    let (status, body) = curl(
        &other,
        "GET",
        &format!("{base}/api/v1/tags/leaf-segment-test"),
        None,
        None,
    );
    assert_eq!(status, 200);
    assert!(body.contains("\"step\":2000"), "{body}");
    drop(lb);
    drop(server);
}

#[test]
#[ignore = "needs root (ip netns) and HAProxy: scripts/test.sh runs it"]
fn through_a_same_host_proxy_the_token_opens_writes_and_protect_reads_closes_the_pages() {
    let token = "proxy-test-token";
    let (other, server, lb, _dir) = deployment(&[
        ("LEAFID__ADMIN__TOKEN", token),
        ("LEAFID__ADMIN__PROTECT_READS", "true"),
    ]);
    let base = &lb.address;
    let create = r#"{"biz_tag":"through-proxy","step":10}"#;
    for wrong in [None, Some("nope")] {
        let (status, body) = curl(
            &other,
            "POST",
            &format!("{base}/api/v1/tags"),
            Some(create),
            wrong,
        );
        assert_eq!(status, 401, "{wrong:?}: {body}");
    }
    let (status, body) = curl(
        &other,
        "POST",
        &format!("{base}/api/v1/tags"),
        Some(create),
        Some(token),
    );
    assert_eq!(status, 201, "{body}");
    for page in [
        "/db",
        "/cache",
        "/api/v1/cache",
        "/api/v1/tags",
        "/api/v1/tags/through-proxy",
        "/metrics",
    ] {
        let (status, body) = curl(&other, "GET", &format!("{base}{page}"), None, None);
        assert_eq!(status, 401, "{page} without the token: {body}");
        let (status, body) = curl(&other, "GET", &format!("{base}{page}"), None, Some(token));
        assert_eq!(status, 200, "{page} with the token: {body}");
    }
    // The ids, health and decode routes stay open.
    for route in [
        "/api/segment/get/through-proxy",
        "/api/snowflake/get/x",
        "/health/ready",
        "/health/live",
    ] {
        let (status, body) = curl(&other, "GET", &format!("{base}{route}"), None, None);
        assert_eq!(status, 200, "{route}: {body}");
    }
    drop(lb);
    drop(server);
}
