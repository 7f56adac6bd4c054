//! Formatted tags (issue 34): ids as text, a daily sequence in a named zone, each period its own
//! `leaf_alloc` row. What could go wrong, tried here: an id twice among concurrent callers of
//! Leaf's route and the batch route on two servers; a restart that starts the period again; a
//! width that runs out widening or wrapping; a formatted tag served as numbers (the range route,
//! another server's refresh); a format changed under a name; malformed ids decoded into others.

use std::collections::HashSet;
use std::sync::Arc;

use crate::on_both_databases;
use crate::support::{Db, TestApp, fresh_db, spawn_on};

const ZONE: &str = "Asia/Shanghai";

/// Today's key in `ZONE`, as the date part of a `yyyyMMdd` format writes it.
fn today() -> String {
    jiff::Timestamp::now()
        .to_zoned(jiff::tz::TimeZone::get(ZONE).unwrap())
        .strftime("%Y%m%d")
        .to_string()
}

async fn create(app: &TestApp, tag: &str, format: &str) -> crate::support::Reply {
    app.post(
        "/api/v1/tags",
        &format!(r#"{{"biz_tag":"{tag}","step":50,"format":{format}}}"#),
    )
    .await
}

const DAILY: &str = r#"{"date":"yyyyMMdd","width":6,"reset":"daily","time_zone":"Asia/Shanghai"}"#;

/// `count` ids from the batch route (asserting 200 and the period fields).
async fn batch(app: &TestApp, tag: &str, count: usize) -> Vec<String> {
    let r = app
        .get(&format!("/api/v1/segment/{tag}/ids?count={count}"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let body = r.json();
    assert!(body["period_end"].is_string(), "{body}");
    serde_json::from_value(body["ids"].clone()).unwrap()
}

async fn leaf(app: &TestApp, tag: &str) -> String {
    let r = app.get(&format!("/api/segment/get/{tag}")).await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.text
}

/// Sequence numbers of `ids`, checking each is today's order number.
fn sequences(ids: &[String]) -> Vec<u64> {
    let day = today();
    ids.iter()
        .map(|id| {
            assert_eq!(id.len(), 14, "{id}");
            assert!(id.starts_with(&day), "{id} is not of {day}");
            id[8..].parse().unwrap()
        })
        .collect()
}

async fn daily_order_numbers_from_two_servers_never_repeat(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let a = Arc::new(spawn_on(&url, |_| {}).await);
    let b = Arc::new(spawn_on(&url, |_| {}).await);
    let r = create(&a, "orders", DAILY).await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(r.json()["format"]["reset"], "daily", "{}", r.text);
    // The first order number of the day is 1.
    let first = leaf(&b, "orders").await;
    assert_eq!(first, format!("{}000001", today()));
    let mut tasks = Vec::new();
    for caller in 0..6usize {
        let app = if caller % 2 == 0 {
            a.clone()
        } else {
            b.clone()
        };
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            for round in 0..15 {
                if (caller + round) % 2 == 0 {
                    mine.extend(batch(&app, "orders", 1 + round * 7).await);
                } else {
                    mine.push(leaf(&app, "orders").await);
                }
            }
            // One caller's answers come one after another from one server: increasing.
            let seqs = sequences(&mine);
            assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
            mine
        }));
    }
    let mut all = vec![first];
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "an order number twice");
    for id in all.iter().take(20) {
        let d = a
            .get(&format!("/api/v1/segment/orders/decode?id={id}"))
            .await;
        assert_eq!(d.status, 200, "{}", d.text);
        assert_eq!(d.json()["period"], today());
        assert_eq!(
            d.json()["sequence"].as_u64(),
            Some(id[8..].parse().unwrap())
        );
    }
    // A restart (both servers gone, a new one on the same database) continues the day above
    // everything issued: the period's row keeps its max_id.
    let max = *sequences(&all).iter().max().unwrap();
    a.stop().await;
    b.stop().await;
    let c = spawn_on(&url, |_| {}).await;
    let next = sequences(&[leaf(&c, "orders").await])[0];
    assert!(next > max, "after a restart {next}, before {max}");
}
on_both_databases!(daily_order_numbers_from_two_servers_never_repeat);

async fn a_period_that_runs_out_of_width_is_refused_until_the_next(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let app = spawn_on(&url, |_| {}).await;
    let tiny = r#"{"prefix":"T-","date":"yyyyMMdd","width":2,"reset":"daily","time_zone":"Asia/Shanghai"}"#;
    assert_eq!(create(&app, "tiny", tiny).await.status, 201);
    let ids = batch(&app, "tiny", 1000).await;
    // A short answer: the 99 ids the width holds, then nothing.
    assert_eq!(ids.len(), 99, "{ids:?}");
    assert_eq!(ids[98], format!("T-{}99", today()));
    let r = app.get("/api/segment/get/tiny").await;
    assert_eq!(r.status, 503, "{}", r.text);
    assert_eq!(r.code(), "sequence_exhausted");
    assert!(r.text.contains(&today()), "names the period: {}", r.text);
    let retry: u64 = r.retry_after.as_deref().unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&retry), "Retry-After {retry}");
    // The period's fill, for the 80% alert (deploy/prometheus/leafid-rules.yml).
    let series = format!(
        r#"leafid_period_used_ratio{{biz_tag="tiny",period="{}"}}"#,
        today()
    );
    let used = crate::support::metric_value(&app.address, &series).await;
    assert_eq!(used, Some(1.0), "{series}");
    // The monitor routes show the tag, its format, its period and that fill.
    let cache = app.get("/api/v1/cache").await.json();
    let entry = &cache["formatted"][0];
    assert_eq!(entry["biz_tag"], "tiny", "{cache}");
    assert_eq!(entry["period"], today().as_str());
    assert_eq!(entry["used"], 1.0);
    assert_eq!(entry["format"]["prefix"], "T-");
    for route in ["/cache", "/db"] {
        let page = app.get(route).await.text;
        assert!(
            page.contains("formatted tags") && page.contains("100.0%"),
            "{route}: {page}"
        );
    }
    // An ended period's row stays in the database and leaves the pages: `/db` grows with the
    // tags, not with the days (issue 42). (The row is written by SQL on the database servers.)
    if matches!(db, Db::Sqlite) {
        return;
    }
    crate::support::exec_sql(
        db,
        &url,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step, description) \
         VALUES ('tiny@20200101', 50, 1, 'period of tiny')",
    )
    .await;
    let page = app.get("/db").await.text;
    assert!(!page.contains("tiny@20200101"), "{page}");
    assert!(page.contains(&format!("tiny@{}", today())), "{page}");
}
on_both_databases!(a_period_that_runs_out_of_width_is_refused_until_the_next);

#[tokio::test]
async fn formatted_tags_are_never_numbers_and_never_change_format() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let a = spawn_on(&url, |_| {}).await;
    // B learns the tag through its refresh, not a request: its own row must not get a buffer.
    let b = spawn_on(&url, |s| s.segment.refresh_interval_secs = 1).await;
    assert_eq!(
        create(
            &a,
            "inv",
            r#"{"prefix":"INV-","date":"yyyy-","width":6,"reset":"yearly"}"#
        )
        .await
        .status,
        201
    );
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let r = b.get("/api/v1/segment/inv/ranges?count=5").await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (400, "formatted_tag"),
        "{}",
        r.text
    );
    let id = leaf(&b, "inv").await;
    assert!(id.starts_with("INV-") && id.ends_with("000001"), "{id}");
    // The name keeps its format: another one is refused, even after the tag is deleted.
    let again = create(&a, "inv", r#"{"width":3}"#).await;
    assert_eq!(again.status, 409, "{}", again.text);
    assert_eq!(
        a.send(reqwest::Method::DELETE, "/api/v1/tags/inv", None, None)
            .await
            .status,
        204
    );
    let other = create(&a, "inv", r#"{"width":3}"#).await;
    assert_eq!(other.status, 409, "{}", other.text);
    assert!(other.text.contains("format"), "{}", other.text);
    // Formats that would repeat ids, or rows too long for leaf_alloc, are refused.
    for (tag, format) in [
        ("bad1", r#"{"date":"MMdd","width":6,"reset":"daily"}"#),
        ("bad2", r#"{"width":6,"radix":"base64"}"#),
        ("bad3", r#"{"width":6,"colour":"red"}"#),
        (
            &"x".repeat(121),
            r#"{"date":"yyyyMMdd","width":6,"reset":"daily"}"#,
        ),
    ] {
        let r = create(&a, tag, format).await;
        assert_eq!(r.status, 400, "{format}: {}", r.text);
    }
}

#[tokio::test]
async fn decode_refuses_whatever_is_not_an_id_of_the_format() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let app = spawn_on(&url, |_| {}).await;
    let code = r#"{"prefix":"T-","radix":"crockford32","width":6,"check":true}"#;
    assert_eq!(create(&app, "codes", code).await.status, 201);
    let id = leaf(&app, "codes").await;
    assert_eq!(id.len(), 9, "{id}");
    let ok = app
        .get(&format!("/api/v1/segment/codes/decode?id={id}"))
        .await;
    assert_eq!(ok.status, 200, "{}", ok.text);
    assert_eq!(ok.json()["sequence"], 1);
    let last = id.chars().last().unwrap();
    let wrong_check = format!("{}{}", &id[..8], if last == '0' { '1' } else { '0' });
    for bad in [
        &id[..8],
        "T-0000000",
        "X-000001A",
        "T-00000U1",
        wrong_check.as_str(),
    ] {
        let r = app
            .get(&format!("/api/v1/segment/codes/decode?id={bad}"))
            .await;
        assert_eq!(
            (r.status, r.code().as_str()),
            (400, "invalid_id"),
            "{bad}: {}",
            r.text
        );
    }
    let plain = app
        .get("/api/v1/segment/leaf-segment-test/decode?id=1")
        .await;
    assert_eq!(plain.status, 400, "{}", plain.text);
    let none = app.get("/api/v1/segment/nobody/decode?id=1").await;
    assert_eq!(none.status, 404, "{}", none.text);
}

/// The formatted path's own decisions against a real database behind the fault proxy: the
/// first request of a period (its row looked up and created) and later leases while every
/// answer of the database is held (`stall`: the statements run, their answers never come), then
/// after it heals. A request may be refused (503) but never held past the wait, and no order
/// number is handed out twice, whichever statements committed while their answers were held.
async fn a_formatted_tag_through_a_stalled_database_never_repeats_an_id(db: Db) {
    let (app, proxy) = crate::support::proxy::spawn_behind_proxy_on(db, |_| {}).await;
    let daily = r#"{"date":"yyyyMMdd","width":8,"reset":"daily","time_zone":"Asia/Shanghai"}"#;
    let r = app
        .post(
            "/api/v1/tags",
            &format!(r#"{{"biz_tag":"stalled","step":5,"format":{daily}}}"#),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let client = reqwest::Client::new();
    let ask = |path: &'static str| {
        let (client, base) = (client.clone(), app.address.clone());
        async move {
            // Taken before the request is sent: the bound covers the whole wait.
            let sent = std::time::Instant::now();
            let resp = client
                .get(format!("{base}{path}"))
                .timeout(std::time::Duration::from_secs(60))
                .send()
                .await
                .expect("an answer, not a request held past the client's timeout");
            let status = resp.status().as_u16();
            (status, resp.text().await.unwrap(), sent.elapsed())
        }
    };
    let mut ids = Vec::new();
    // 1. The period's first request while the database never answers: refused in bounded time.
    proxy.stall();
    let (status, body, took) = ask("/api/segment/get/stalled").await;
    assert_eq!(status, 503, "{body}");
    assert!(took < std::time::Duration::from_secs(20), "held {took:?}");
    proxy.heal();
    // 2. Ids, a stall in the middle of the leases, ids again.
    for round in 0..3 {
        for _ in 0..20 {
            let (status, body, _) = ask("/api/v1/segment/stalled/ids?count=7").await;
            assert_eq!(status, 200, "{body}");
            let v: serde_json::Value = serde_json::from_str(&body).unwrap();
            ids.extend(serde_json::from_value::<Vec<String>>(v["ids"].clone()).unwrap());
        }
        if round < 2 {
            proxy.stall();
            for _ in 0..3 {
                let (status, body, took) = ask("/api/v1/segment/stalled/ids?count=7").await;
                assert!(status == 200 || status == 503, "{status} {body}");
                assert!(took < std::time::Duration::from_secs(20), "held {took:?}");
                if status == 200 {
                    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
                    ids.extend(serde_json::from_value::<Vec<String>>(v["ids"].clone()).unwrap());
                }
            }
            proxy.heal();
        }
    }
    // One caller, one server: the texts increase in the order they were answered.
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "not increasing: {ids:?}"
    );
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "an order number twice");
    assert!(ids.len() >= 420, "{} ids", ids.len());
}
crate::on_proxied_databases!(a_formatted_tag_through_a_stalled_database_never_repeats_an_id);

/// Issue 42: one server's burst must not lease a day's numbers away from the others. A width-6
/// daily tag, 300,000 ids asked of A as fast as it answers; B must still serve, and what A holds
/// unused (lost by a `kill -9`) stays a small share of the day, even with a step wider than
/// the period. A start past the width, and a sequence that never resets running out, are
/// answered honestly.
async fn a_burst_on_one_server_leaves_the_period_to_the_others(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let a = spawn_on(&url, |_| {}).await;
    let b = spawn_on(&url, |_| {}).await;
    // A start past the width is refused at creation (every period would be spent at once).
    let late = a
        .post(
            "/api/v1/tags",
            &format!(r#"{{"biz_tag":"late","step":10,"max_id":1000000,"format":{DAILY}}}"#),
        )
        .await;
    assert_eq!(late.status, 400, "{}", late.text);
    assert!(late.text.contains("past the width"), "{}", late.text);
    // A step wider than the whole period is taken, and cut by the lease cap: it used to lease
    // the whole day on the first id.
    let r = a
        .post(
            "/api/v1/tags",
            &format!(r#"{{"biz_tag":"burst","step":1000000000,"format":{DAILY}}}"#),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let mut from_a = Vec::new();
    while from_a.len() < 300_000 {
        from_a.extend(sequences(&batch(&a, "burst", 100_000).await));
    }
    let from_b = sequences(&batch(&b, "burst", 1000).await);
    assert!(!from_b.is_empty());
    let seen: HashSet<u64> = from_a.iter().chain(&from_b).copied().collect();
    assert_eq!(seen.len(), from_a.len() + from_b.len(), "a number twice");
    // B's first lease starts above everything A leased: what A holds unused is the gap.
    let held = from_b.iter().min().unwrap() - from_a.iter().max().unwrap() - 1;
    let left = 999_999 - from_a.len() as u64;
    crate::support::record_figure(
        "burst",
        &format!(
            "A issued {}, held {held} unused of {left} left; B served",
            from_a.len()
        ),
    );
    assert!(
        (held as f64) < 0.07 * left as f64,
        "A holds {held} of the {left} numbers left"
    );
    // A sequence that never resets and runs out is spent for good: 409, like a plain tag.
    let once = r#"{"prefix":"C-","width":2}"#;
    let r = a
        .post(
            "/api/v1/tags",
            &format!(r#"{{"biz_tag":"coupons","step":10,"max_id":97,"format":{once}}}"#),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(batch(&a, "coupons", 10).await.len(), 3);
    let r = a.get("/api/segment/get/coupons").await;
    assert_eq!(r.status, 409, "{}", r.text);
    assert_eq!(r.code(), "biz_tag_exhausted");
    assert!(r.retry_after.is_none(), "{:?}", r.retry_after);
}
on_both_databases!(a_burst_on_one_server_leaves_the_period_to_the_others);

/// Issue 42, an operator's delete under traffic: callers hammer a formatted tag on two servers
/// while it is deleted on one and then created again with its format. Each answer is ids or
/// `404 unknown_biz_tag`, never anything else, and no text is served twice across the delete,
/// the refresh that stops the other server, and the re-creation (the period rows are kept).
async fn a_delete_under_traffic_then_a_recreate_never_repeats_a_text(db: Db) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (url, _dir) = fresh_db(db).await;
    let a = Arc::new(spawn_on(&url, |_| {}).await);
    let b = Arc::new(spawn_on(&url, |s| s.segment.refresh_interval_secs = 1).await);
    assert_eq!(create(&a, "busy", DAILY).await.status, 201);
    let stop = Arc::new(AtomicBool::new(false));
    let mut callers = Vec::new();
    for caller in 0..4usize {
        let app = if caller % 2 == 0 {
            a.clone()
        } else {
            b.clone()
        };
        let stop = stop.clone();
        callers.push(tokio::spawn(async move {
            let (mut texts, mut refused) = (Vec::new(), 0);
            while !stop.load(Ordering::Relaxed) {
                let r = app.get("/api/v1/segment/busy/ids?count=7").await;
                match r.status {
                    200 => texts.extend(
                        serde_json::from_value::<Vec<String>>(r.json()["ids"].clone()).unwrap(),
                    ),
                    404 => {
                        assert_eq!(r.code(), "unknown_biz_tag", "{}", r.text);
                        refused += 1;
                    }
                    s => panic!("{s}: {}", r.text),
                }
            }
            (texts, refused)
        }));
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let r = a
        .send(reqwest::Method::DELETE, "/api/v1/tags/busy", None, None)
        .await;
    assert_eq!(r.status, 204, "{}", r.text);
    // Past B's refresh (1 s) with a margin: both servers refuse for a while.
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    assert_eq!(a.get("/api/segment/get/busy").await.status, 404);
    assert_eq!(create(&a, "busy", DAILY).await.status, 201);
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut all, mut refused) = (Vec::new(), 0);
    for c in callers {
        let (texts, r) = c.await.unwrap();
        all.extend(texts);
        refused += r;
    }
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(
        unique.len(),
        all.len(),
        "a text served twice across the delete"
    );
    assert!(refused > 0, "the delete stopped no caller");
    // Served again after the re-creation, on both servers, by texts never served before
    // (across servers ids only trend upwards: uniqueness is the promise).
    for app in [&a, &b] {
        let next = leaf(app, "busy").await;
        assert!(!unique.contains(&next), "{next} served again");
    }
}
on_both_databases!(a_delete_under_traffic_then_a_recreate_never_repeats_a_text);

/// Issue 44, caps tied to the shape: a request on a formatted tag takes at most the format's
/// request share of a period (default 1%) unless it carries the admin credential; the share is
/// set per tag (`request_share` in the format), and a gapped tag's cap counts its gaps.
#[tokio::test]
async fn one_request_takes_at_most_the_tag_s_request_share_of_a_period() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let app = spawn_on(&url, |s| {
        s.admin.trust_loopback = false;
        s.admin.token = Some(leafid::config::Secret::new("adm1n"));
    })
    .await;
    let admin = |path: &str, body: Option<String>| {
        let method = if body.is_some() {
            reqwest::Method::POST
        } else {
            reqwest::Method::GET
        };
        let app = &app;
        let path = path.to_owned();
        async move {
            app.send(method, &path, body.as_deref(), Some("adm1n"))
                .await
        }
    };
    for (tag, extra) in [
        ("capped", ""),
        ("wider", r#","request_share":0.05"#),
        ("gapped", r#","gaps":{"mean":10}"#),
    ] {
        let body = format!(
            r#"{{"biz_tag":"{tag}","step":1000,"format":{{"date":"yyyyMMdd","width":6,"reset":"daily","time_zone":"UTC"{extra}}}}}"#
        );
        let r = admin("/api/v1/tags", Some(body)).await;
        assert_eq!(r.status, 201, "{}", r.text);
    }
    let count = |r: &crate::support::Reply| r.json()["ids"].as_array().map_or(0, Vec::len);
    for (tag, cap) in [("capped", 9_999), ("wider", 49_999), ("gapped", 999)] {
        let r = app
            .get(&format!("/api/v1/segment/{tag}/ids?count=100000"))
            .await;
        assert_eq!(r.status, 200, "{}", r.text);
        assert_eq!(count(&r), cap, "{tag}");
    }
    // The admin credential may exceed it.
    let r = admin("/api/v1/segment/wider/ids?count=60000", None).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(count(&r), 60_000);
    // The share is shown with the format, and a share out of range is refused.
    let row = admin("/api/v1/tags/wider", None).await;
    assert_eq!(row.json()["format"]["request_share"], 0.05, "{}", row.text);
    let bad = r#"{"biz_tag":"bad","step":10,"format":{"width":6,"request_share":1.5}}"#;
    let r = admin("/api/v1/tags", Some(bad.to_owned())).await;
    assert_eq!(r.status, 400, "{}", r.text);
    app.stop().await;
}

/// A width of 19 digits (every positive `i64`) serves: its lease cap's end saturates at
/// `i64::MAX` (it overflowed, and a debug server panicked at the first request), and its ids are
/// 19 digits, increasing, none twice, on Leaf's route and the batch route.
#[tokio::test]
async fn a_nineteen_digit_width_serves() {
    let (db, _dir) = fresh_db(Db::Sqlite).await;
    let app = spawn_on(&db, |_| {}).await;
    let r = create(&app, "wide", r#"{"width":19}"#).await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app.get("/api/v1/segment/wide/ids?count=5").await;
    assert_eq!(r.status, 200, "{}", r.text);
    let mut ids: Vec<String> = serde_json::from_value(r.json()["ids"].clone()).unwrap();
    ids.push(leaf(&app, "wide").await);
    assert!(ids.iter().all(|id| id.len() == 19), "{ids:?}");
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    app.stop().await;
}
