//! `Client::snowflake_bounds` against real servers (PROTOCOL.md, "Snowflake bounds"): the
//! client's answer equals the route's and holds the snowflake ids taken in the range; ranges
//! the servers refuse (empty, before the layout's epoch, past its end) are `Rejected` with
//! `invalid_time_range` and no failover; a dead server and one with snowflake switched off are
//! failed over like batch requests.
//!
//! Needs the server binary and MariaDB (see `support`).

mod support;

use std::time::{Duration, SystemTime};

use leafid_client::{Client, Error, Fault, IdBounds};
use support::{Server, create_database};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `t` as RFC 3339 UTC with milliseconds, for the test's own request to the route (written
/// independently of the client's formatter: through the `date` command).
fn iso_ms(t: SystemTime) -> String {
    let ms = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let out = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{}", ms / 1000), "+%Y-%m-%dT%H:%M:%S"])
        .output()
        .expect("run date");
    assert!(out.status.success());
    format!(
        "{}.{:03}Z",
        String::from_utf8(out.stdout).unwrap().trim(),
        ms % 1000
    )
}

/// The route's answer for `[from, to)`, asked directly (not through the client).
async fn route(server: &str, from: &str, to: &str) -> (u16, serde_json::Value) {
    let r = reqwest::Client::new()
        .get(format!("{server}/api/v1/snowflake/bounds"))
        .query(&[("from", from), ("to", to), ("stringify_ids", "true")])
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

fn client(servers: &[&str], rt: &tokio::runtime::Runtime) -> Client {
    let _g = rt.enter();
    Client::builder()
        .servers(servers.iter().copied())
        .batch(100)
        .request_timeout(Duration::from_millis(500))
        .wait_timeout(Duration::from_secs(2))
        .backoff(Duration::from_millis(50), Duration::from_millis(200))
        .build()
        .unwrap()
}

/// A base URL on which nothing listens (a port just released).
fn dead_server() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    format!("http://{}", l.local_addr().unwrap())
}

fn rejected_code(r: Result<IdBounds, Error>) -> (String, String) {
    match r {
        Err(Error::Rejected { code, server, .. }) => (code, server),
        other => panic!("not a rejection: {other:?}"),
    }
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn the_bounds_are_the_routes_and_hold_the_ids_taken_in_the_range() {
    let rt = runtime();
    let server = Server::start(&create_database());
    let client = client(&[server.address.as_str()], &rt);
    let from = SystemTime::now() - Duration::from_secs(60);
    let supply = client.snowflake();
    let ids: Vec<u64> = (0..500)
        .map(|_| rt.block_on(supply.next_id()).unwrap())
        .collect();
    let to = SystemTime::now() + Duration::from_secs(60);
    // Whole milliseconds, so that the test's own strings name the same instants.
    let whole_ms = |t: SystemTime| {
        let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        SystemTime::UNIX_EPOCH + Duration::from_millis(d.as_millis() as u64)
    };
    let (from, to) = (whole_ms(from), whole_ms(to));
    let got = rt.block_on(client.snowflake_bounds(from, to)).unwrap();
    let (status, want) = rt.block_on(route(&server.address, &iso_ms(from), &iso_ms(to)));
    assert_eq!(status, 200, "{want}");
    assert_eq!(
        (got.min_id.to_string(), got.max_id.to_string()),
        (
            want["min_id"].as_str().unwrap().to_owned(),
            want["max_id"].as_str().unwrap().to_owned()
        ),
        "the client's bounds are the route's: {want}"
    );
    assert!(got.min_id < got.max_id, "{got:?}");
    for id in &ids {
        assert!(
            (got.min_id..=got.max_id).contains(id),
            "{id} outside {got:?}"
        );
    }
    // Sub-millisecond instants keep every tick the range overlaps (`from` down, `to` up:
    // vectors/bounds.json): [t + 0.3 ms, t + 0.9 ms) is the tick of t.
    let t = to - Duration::from_secs(30);
    let narrow = rt
        .block_on(client.snowflake_bounds(t, t + Duration::from_millis(1)))
        .unwrap();
    let finer = rt
        .block_on(client.snowflake_bounds(
            t + Duration::from_micros(300),
            t + Duration::from_micros(900),
        ))
        .unwrap();
    assert_eq!(narrow, finer);
    assert!(narrow.min_id > got.min_id && narrow.max_id < got.max_id);
    // Ids before the range are below it.
    let earlier = rt
        .block_on(client.snowflake_bounds(from - Duration::from_secs(10), from))
        .unwrap();
    assert!(earlier.max_id < got.min_id, "{earlier:?} {got:?}");
    assert_eq!(client.stats().failovers, 0);
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn a_range_the_servers_refuse_is_rejected_with_invalid_time_range_and_no_failover() {
    let rt = runtime();
    let db = create_database();
    let a = Server::start(&db);
    let b = Server::start(&db);
    let client = client(&[a.address.as_str(), b.address.as_str()], &rt);
    let at = |s: u64| SystemTime::UNIX_EPOCH + Duration::from_secs(s);
    let now = SystemTime::now();
    // Empty: [to, to).
    let (code, server) = rejected_code(rt.block_on(client.snowflake_bounds(now, now)));
    assert_eq!(
        (code.as_str(), server.as_str()),
        ("invalid_time_range", a.address.as_str())
    );
    // Reversed.
    let (code, _) =
        rejected_code(rt.block_on(client.snowflake_bounds(now, now - Duration::from_secs(1))));
    assert_eq!(code, "invalid_time_range");
    // Before the layout's epoch: 2000-01-01 to 2000-01-02.
    let (code, server) =
        rejected_code(rt.block_on(client.snowflake_bounds(at(946_684_800), at(946_771_200))));
    assert_eq!(
        (code.as_str(), server.as_str()),
        ("invalid_time_range", a.address.as_str())
    );
    // Before 1970 too.
    let (code, _) = rejected_code(rt.block_on(client.snowflake_bounds(
        SystemTime::UNIX_EPOCH - Duration::from_secs(86_400 * 365),
        now,
    )));
    assert_eq!(code, "invalid_time_range");
    // Past the layout's end: 2200-01-01 (a 41-bit millisecond field lasts about 69 years).
    let (code, server) =
        rejected_code(rt.block_on(client.snowflake_bounds(now, at(7_258_118_400))));
    assert_eq!(
        (code.as_str(), server.as_str()),
        ("invalid_time_range", a.address.as_str())
    );
    // Year 10000: RFC 3339 cannot write it; refused by the client, no request.
    let (code, server) =
        rejected_code(rt.block_on(client.snowflake_bounds(now, at(253_402_300_800))));
    assert_eq!((code.as_str(), server.as_str()), ("invalid_time_range", ""));
    assert_eq!(client.stats().failovers, 0, "a refusal is not a failover");
    assert!(
        client.down_servers().is_empty(),
        "{:?}",
        client.down_servers()
    );
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn bounds_fail_over_a_dead_server_and_one_without_snowflake_like_batches() {
    let rt = runtime();
    let db = create_database();
    let off = Server::start_with(&db, &[("LEAFID__SNOWFLAKE__ENABLED", "false")]);
    let on = Server::start(&db);
    let dead = dead_server();
    let client = client(
        &[dead.as_str(), off.address.as_str(), on.address.as_str()],
        &rt,
    );
    let to = SystemTime::now();
    let from = to - Duration::from_secs(3600);
    let got = rt.block_on(client.snowflake_bounds(from, to)).unwrap();
    let want = {
        let _g = rt.enter();
        let only = client_of(&on.address);
        rt.block_on(only.snowflake_bounds(from, to)).unwrap()
    };
    assert_eq!(got, want);
    let stats = client.stats();
    assert_eq!(stats.failovers, 2, "{stats:?}");
    let mut down = client.down_servers();
    down.sort();
    let mut want_down = vec![dead.clone(), off.address.clone()];
    want_down.sort();
    assert_eq!(down, want_down);
    assert_eq!(client.preferred_server().0, on.address);
    // Every server failing: Unavailable within the wait timeout, naming the last failure.
    drop(on);
    let started = std::time::Instant::now();
    match rt.block_on(client.snowflake_bounds(from, to)) {
        Err(Error::Unavailable { last: Some(f), .. }) => match f.fault {
            Fault::Transport(_) | Fault::Refused { .. } => {}
            other => panic!("{other:?}"),
        },
        other => panic!("not Unavailable: {other:?}"),
    }
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_secs(4),
        "{took:?} for a 2 s wait timeout"
    );
}

/// A client of one server, with the test's settings.
fn client_of(server: &str) -> Client {
    Client::builder()
        .servers([server])
        .request_timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}
