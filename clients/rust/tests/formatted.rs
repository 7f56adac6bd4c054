//! The formatted supply against a real server (PROTOCOL.md, "Formatted tags"): texts unique
//! and increasing from several threads; the period rule with an injected clock set past the
//! real `period_end` of the server's answers; a plain tag on the formatted supply and a
//! numeric supply on a formatted tag refused; a period out of width refused; a permuted tag's
//! unordered texts handed out as received, with no floor, across a failover.
//!
//! Needs the server binary and MariaDB (see `support`).

mod support;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use leafid_client::{Client, Error, Fault, FormattedId};
use support::{Server, create_database, create_formatted_tag, create_formatted_tag_at, create_tag};

const ORDERS: &str =
    r#"{"prefix":"ORD-","date":"yyyyMMdd","width":8,"reset":"daily","time_zone":"UTC"}"#;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// `ORD-` + 8 digits of date + 8 digits of sequence.
fn is_order_number(t: &str) -> bool {
    t.len() == 20 && t.starts_with("ORD-") && t[4..].bytes().all(|b| b.is_ascii_digit())
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn threads_on_a_formatted_tag_get_unique_increasing_texts() {
    let rt = runtime();
    let server = Server::start(&create_database());
    rt.block_on(create_formatted_tag(&server.address, "orders", 100, ORDERS));
    let client = {
        let _g = rt.enter();
        Client::builder()
            .servers([server.address.as_str()])
            .batch(20) // small batches: many refills and switches
            .max_batch(200)
            .build()
            .unwrap()
    };
    let supply = client.formatted("orders").unwrap();
    // Each call: (start, end, text), on the monotonic clock.
    let calls: Vec<Vec<(Instant, Instant, FormattedId)>> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                let (supply, rt) = (&supply, &rt);
                scope.spawn(move || {
                    (0..2000)
                        .map(|i| {
                            let start = Instant::now();
                            let id = if (i + t) % 2 == 0 {
                                supply.try_next_id()
                            } else {
                                None
                            };
                            let id = id.unwrap_or_else(|| rt.block_on(supply.next_id()).unwrap());
                            (start, Instant::now(), id)
                        })
                        .collect()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut seen = HashSet::new();
    for caller in &calls {
        assert!(
            caller
                .windows(2)
                .all(|w| w[0].2.as_bytes() < w[1].2.as_bytes()),
            "a caller's texts do not increase"
        );
        for (_, _, id) in caller {
            assert!(is_order_number(id), "{id}");
            assert!(seen.insert(id.clone()), "{id} handed out twice");
        }
    }
    // A call that started after another returned got a larger text.
    let mut all: Vec<_> = calls.iter().flatten().collect();
    all.sort_by_key(|c| c.0);
    let mut by_end: Vec<_> = calls.iter().flatten().collect();
    by_end.sort_by_key(|c| c.1);
    let (mut j, mut max_returned): (usize, Option<&str>) = (0, None);
    for c in &all {
        while j < by_end.len() && by_end[j].1 < c.0 {
            let t = by_end[j].2.as_str();
            max_returned = Some(max_returned.map_or(t, |m| m.max(t)));
            j += 1;
        }
        if let Some(m) = max_returned {
            assert!(c.2.as_str() > m, "{} started after {m} returned", c.2);
        }
    }
    let stats = client.stats();
    assert_eq!(stats.ids_served, 8000);
    assert!(stats.batches >= 8000 / 200, "{stats:?}");
    assert_eq!(stats.failovers, 0);
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn a_batch_whose_period_ended_by_the_clock_is_never_handed_out() {
    let rt = runtime();
    let server = Server::start(&create_database());
    rt.block_on(create_formatted_tag(&server.address, "daily", 1000, ORDERS));
    // The client's wall clock: the real one plus `skew` seconds.
    let skew = Arc::new(AtomicI64::new(0));
    let client = {
        let _g = rt.enter();
        let skew = skew.clone();
        Client::builder()
            .servers([server.address.as_str()])
            .batch(100)
            .max_batch(100)
            .wait_timeout(Duration::from_millis(600))
            .backoff(Duration::from_millis(50), Duration::from_millis(100))
            .clock(Arc::new(move || {
                let s = skew.load(Ordering::Relaxed);
                SystemTime::now() + Duration::from_secs(s.max(0) as u64)
            }))
            .build()
            .unwrap()
    };
    let supply = client.formatted("daily").unwrap();
    let first = rt.block_on(supply.next_id()).unwrap();
    assert!(is_order_number(&first), "{first}");
    // The server's own answer says when this period ends.
    let body: serde_json::Value = rt
        .block_on(async {
            reqwest::get(format!(
                "{}/api/v1/segment/daily/ids?count=1",
                server.address
            ))
            .await?
            .json()
            .await
        })
        .unwrap();
    assert_eq!(body["period"].as_str(), Some(&first[4..12]));
    let end = body["period_end"].as_str().unwrap().to_owned();
    // Tomorrow 00:00 UTC, as seconds from now (the format's zone is UTC).
    let secs_left = {
        let day = 86_400;
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        (now / day + 1) * day - now
    };
    assert!(end.ends_with("T00:00:00Z"), "{end}");
    let before = supply.stats();
    assert_eq!(before.ids_served, 1);
    // A few more from the same batch while the period runs.
    for _ in 0..5 {
        assert!(supply.try_next_id().is_some());
    }
    // The client's clock passes the period's end: the batch in use (and the one fetched
    // ahead) go whole, none of their texts is handed out, and they are counted.
    skew.store(secs_left as i64 + 1, Ordering::Relaxed);
    assert_eq!(supply.try_next_id(), None);
    let after = supply.stats();
    assert_eq!(after.ids_served, 6);
    assert!(
        after.discarded_ids >= 100 - 6,
        "the rest of the batch is counted: {after:?}"
    );
    // The server (its clock still in the period) keeps answering texts of that period: each
    // answer is dropped too, and the caller gets no id at all, only Unavailable naming why.
    match rt.block_on(supply.next_id()) {
        Err(Error::Unavailable { last: Some(f), .. }) => {
            assert!(matches!(f.fault, Fault::PeriodEnded { .. }), "{f}")
        }
        other => panic!("an ended period's text or another error: {other:?}"),
    }
    let late = supply.stats();
    assert_eq!(
        late.ids_served, 6,
        "nothing handed out after the period ended"
    );
    assert!(late.discarded_ids > after.discarded_ids, "{late:?}");
    assert_eq!(late.ids_received, late.ids_served + late.discarded_ids);
    // Back to the real clock: texts again, above everything handed out before.
    skew.store(0, Ordering::Relaxed);
    let again = rt.block_on(supply.next_id()).unwrap();
    assert!(again.as_str() > first.as_str(), "{again} after {first}");
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn plain_and_formatted_tags_refuse_the_other_supply_without_failover() {
    let rt = runtime();
    let db = create_database();
    let a = Server::start(&db);
    let b = Server::start(&db);
    rt.block_on(create_tag(&a.address, "plain", 100));
    rt.block_on(create_formatted_tag(&a.address, "orders", 100, ORDERS));
    // Width 1: nine texts a day, then the period is out of width on every server.
    rt.block_on(create_formatted_tag(
        &a.address,
        "tiny",
        10,
        r#"{"date":"yyyyMMdd","width":1,"reset":"daily","time_zone":"UTC"}"#,
    ));
    let client = {
        let _g = rt.enter();
        Client::builder()
            .servers([a.address.as_str(), b.address.as_str()])
            .batch(5)
            .build()
            .unwrap()
    };
    fn code<T: std::fmt::Debug>(r: Result<T, Error>) -> String {
        match r {
            Err(Error::Rejected { code, .. }) => code,
            other => panic!("not a rejection: {other:?}"),
        }
    }
    let plain = client.formatted("plain").unwrap();
    for _ in 0..3 {
        assert_eq!(code(rt.block_on(plain.next_id())), "not_formatted");
    }
    let numeric = client.segment("orders").unwrap();
    for _ in 0..2 {
        assert_eq!(code(rt.block_on(numeric.next_id())), "formatted_tag");
    }
    let tiny = client.formatted("tiny").unwrap();
    let mut texts = Vec::new();
    let refused = loop {
        match rt.block_on(tiny.next_id()) {
            Ok(t) => texts.push(t),
            Err(e) => break e,
        }
    };
    assert_eq!(texts.len(), 9, "{texts:?}");
    assert!(texts.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(code::<()>(Err(refused)), "sequence_exhausted");
    assert_eq!(client.stats().failovers, 0, "a refusal is not a failover");
    assert!(client.down_servers().is_empty());
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn a_server_behind_in_text_is_cut_at_the_floor_and_caught_up() {
    let rt = runtime();
    // Two databases: A's sequence starts at 1001, B's at 1, so B's first 1000-odd texts of the
    // day lie below everything A served.
    let a = Server::start(&create_database());
    let b = Server::start(&create_database());
    rt.block_on(create_formatted_tag_at(
        &a.address, "orders", 100, 1001, ORDERS,
    ));
    rt.block_on(create_formatted_tag_at(
        &b.address, "orders", 100, 1, ORDERS,
    ));
    let client = {
        let _g = rt.enter();
        Client::builder()
            .servers([a.address.as_str(), b.address.as_str()])
            .batch(50)
            .max_batch(50)
            .request_timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let supply = client.formatted("orders").unwrap();
    let take = |n: usize| -> Vec<String> {
        (0..n)
            .map(|_| rt.block_on(supply.next_id()).unwrap().into_string())
            .collect()
    };
    let before = take(200);
    assert!(before[0].ends_with("00001001"), "{}", before[0]);
    a.kill9();
    let after = take(300);
    let all: Vec<&String> = before.iter().chain(&after).collect();
    assert!(
        all.windows(2).all(|w| w[0].as_bytes() < w[1].as_bytes()),
        "texts do not increase across the failover"
    );
    let stats = client.stats();
    assert!(stats.failovers >= 1, "{stats:?}");
    assert!(
        stats.discarded_ids >= 1000,
        "B's texts below the floor are discarded: {stats:?}"
    );
    assert_eq!(stats.ids_served, 500);
}

const PERMUTED: &str =
    r#"{"prefix":"T-","radix":"crockford32","width":6,"permute":{"key_id":"conformance"}}"#;

/// `T-` + 6 Crockford base-32 digits (no I, L, O, U).
fn is_code(t: &str) -> bool {
    t.len() == 8
        && t.starts_with("T-")
        && t[2..]
            .bytes()
            .all(|b| b.is_ascii_digit() || (b.is_ascii_uppercase() && !b"ILOU".contains(&b)))
}

#[test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
fn a_permuted_tag_is_handed_out_as_received_with_no_floor_across_a_failover() {
    let rt = runtime();
    // The servers' permutation key (LEAFID__SHAPES__KEYS__CONFORMANCE): 32 bytes in hex, 0600.
    let key =
        std::env::temp_dir().join(format!("leafid-client-permute-{}.key", std::process::id()));
    {
        use std::hash::BuildHasher;
        use std::os::unix::fs::OpenOptionsExt;
        let mut seed = std::collections::hash_map::RandomState::new().hash_one(0u8);
        let hex: String = (0..32)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                format!("{:02x}", (seed >> 56) as u8)
            })
            .collect();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&key)
            .unwrap();
        std::io::Write::write_all(&mut f, hex.as_bytes()).unwrap();
    }
    let key_path = key.to_str().unwrap();
    let env = [("LEAFID__SHAPES__KEYS__CONFORMANCE", key_path)];
    let db = create_database();
    let a = Server::start_with(&db, &env);
    let b = Server::start_with(&db, &env);
    rt.block_on(create_formatted_tag(&a.address, "codes", 200, PERMUTED));
    // The route's own answer says it is unordered.
    let body: serde_json::Value = rt
        .block_on(async {
            reqwest::get(format!("{}/api/v1/segment/codes/ids?count=3", a.address))
                .await?
                .json()
                .await
        })
        .unwrap();
    assert_eq!(body["ordered"], serde_json::json!(false), "{body}");
    let direct: Vec<String> = body["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let client = {
        let _g = rt.enter();
        Client::builder()
            .servers([a.address.as_str(), b.address.as_str()])
            .batch(50)
            .max_batch(50)
            .request_timeout(Duration::from_millis(500))
            .build()
            .unwrap()
    };
    let supply = client.formatted("codes").unwrap();
    let take = |threads: usize, n: usize| -> Vec<Vec<String>> {
        std::thread::scope(|scope| {
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    let (supply, rt) = (&supply, &rt);
                    scope.spawn(move || {
                        (0..n)
                            .map(|_| rt.block_on(supply.next_id()).unwrap().into_string())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        })
    };
    // One caller first: one supply, one server, so it gets the answers' texts in the order
    // the server sent them; a floor would have cut most of every answer after the first.
    let first = take(1, 200).remove(0);
    let sorted = {
        let mut s = first.clone();
        s.sort();
        s
    };
    assert_ne!(first, sorted, "a permuted tag's texts came sorted");
    assert_ne!(
        &first[..50],
        &sorted_copy(&first[..50])[..],
        "one answer's texts came sorted"
    );
    let before = client.stats();
    assert_eq!(
        (before.ids_served, before.discarded_ids),
        (200, 0),
        "no floor: {before:?}"
    );
    a.kill9();
    let mut all: Vec<String> = first;
    for caller in take(4, 300) {
        all.extend(caller);
    }
    let mut seen = HashSet::new();
    for t in &all {
        assert!(is_code(t), "{t}");
        assert!(seen.insert(t.as_str()), "{t} handed out twice");
    }
    for t in &direct {
        assert!(
            !seen.contains(t.as_str()),
            "{t}: the route's answer handed out again"
        );
    }
    let stats = client.stats();
    assert_eq!(stats.ids_served, 1400);
    assert_eq!(
        stats.discarded_ids, 0,
        "no floor, no ended period: {stats:?}"
    );
    assert!(stats.failovers >= 1, "{stats:?}");
    let _ = std::fs::remove_file(&key);
}

fn sorted_copy(texts: &[String]) -> Vec<String> {
    let mut v = texts.to_vec();
    v.sort();
    v
}
