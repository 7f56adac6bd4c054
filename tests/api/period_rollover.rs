//! Formatted tags across midnight on the real binary (issue 34): two `leafid` processes on one
//! database, their wall clocks set by libfaketime to a few seconds before midnight in
//! Europe/Berlin, the second 2 s behind the first, both serving a daily order-number tag while
//! midnight passes. Two midnights: into 2027-10-31 (the 25-hour day when Berlin leaves summer
//! time) and out of it. What must hold: no order number twice; each day's sequence starts at
//! 1; once a server has served the new day it never serves the old one again, while the server
//! behind still serves the old day up to its own midnight.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::support::process::ServerProcess;
use crate::support::{Db, fresh_db};

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// A `leafid` whose wall clock starts at `start_utc` (`YYYY-MM-DD hh:mm:ss`, UTC) and runs.
fn faked(url: &str, start_utc: &str) -> ServerProcess {
    let faketime = format!("@{start_utc}");
    ServerProcess::start(
        url,
        &[
            ("LD_PRELOAD", LIBFAKETIME),
            ("FAKETIME", faketime.as_str()),
            ("TZ", "UTC"),
            ("DONT_FAKE_MONOTONIC", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ("LEAFID__ADMIN__TRUST_LOOPBACK", "true"),
        ],
    )
}

/// `(day, sequence)` of each id of a batch answer, in answer order.
async fn take(client: &reqwest::Client, base: &str) -> Vec<(String, u64)> {
    let r = client
        .get(format!("{base}/api/v1/segment/orders/ids?count=7"))
        .send()
        .await
        .expect("leafid answers");
    assert_eq!(r.status(), 200);
    let body: serde_json::Value = r.json().await.unwrap();
    body["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let id = v.as_str().unwrap();
            assert_eq!(id.len(), 14, "{id}");
            (id[..8].to_owned(), id[8..].parse().unwrap())
        })
        .collect()
}

async fn midnight_in_berlin(a_start_utc: &str, b_start_utc: &str, old: &str, new: &str) {
    assert!(
        std::path::Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: scripts/test.sh installs Debian's faketime"
    );
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let a = faked(&url, a_start_utc);
    let b = faked(&url, b_start_utc);
    let client = reqwest::Client::new();
    let created = client
        .post(format!("{}/api/v1/tags", a.address))
        .json(&serde_json::json!({
            "biz_tag": "orders", "step": 20,
            "format": {"date": "yyyyMMdd", "width": 6, "reset": "daily", "time_zone": "Europe/Berlin"}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    // A is 8 s before its midnight, B 10 s: 14 s of requests see both cross.
    let mut served: HashMap<&str, Vec<(String, u64)>> = HashMap::new();
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(14) {
        for (name, server) in [("a", &a), ("b", &b)] {
            served
                .entry(name)
                .or_default()
                .extend(take(&client, &server.address).await);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut seen = HashSet::new();
    for (name, ids) in &served {
        for id in ids {
            assert!(seen.insert(id.clone()), "{id:?} twice ({name})");
        }
        // A server that served the new day never serves the old one after.
        let first_new = ids.iter().position(|(d, _)| d == new);
        let first_new = first_new.unwrap_or_else(|| panic!("{name} never reached {new}"));
        assert!(
            ids[first_new..].iter().all(|(d, _)| d == new),
            "{name} went back to {old}"
        );
        assert!(ids[..first_new].iter().all(|(d, _)| d == old), "{name}");
        assert!(first_new > 0, "{name} served nothing of {old}");
    }
    for day in [old, new] {
        let mut seqs: Vec<u64> = seen
            .iter()
            .filter(|(d, _)| d == day)
            .map(|(_, s)| *s)
            .collect();
        seqs.sort_unstable();
        assert_eq!(seqs.first(), Some(&1), "{day} starts at 1");
    }
    crate::support::record_figure(
        "period_rollover",
        &format!(
            "{old} -> {new} (Europe/Berlin), two servers 2 s apart: {} ids, none twice; {} of the \
             new day, starting at 1",
            seen.len(),
            seen.iter().filter(|(d, _)| d == new).count()
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs libfaketime: scripts/test.sh runs it"]
async fn order_numbers_restart_at_midnight_into_a_25_hour_day() {
    // Midnight in Berlin on 2027-10-31 (summer time, UTC+2) is 2027-10-30 22:00 UTC.
    midnight_in_berlin(
        "2027-10-30 21:59:52",
        "2027-10-30 21:59:50",
        "20271030",
        "20271031",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs libfaketime: scripts/test.sh runs it"]
async fn order_numbers_restart_at_midnight_after_a_25_hour_day() {
    // 2027-10-31 has 25 hours in Berlin: its end, in winter time (UTC+1), is 23:00 UTC.
    midnight_in_berlin(
        "2027-10-31 22:59:52",
        "2027-10-31 22:59:50",
        "20271031",
        "20271101",
    )
    .await;
}

/// The wall clock stepped back across midnight and forward again (libfaketime's offset file,
/// reread on every clock call): a server that served the new day, stepped back 10 s into the old
/// one, serves the old day again from that period's row, above every order number it issued
/// there, then the new day again above its own. No order number twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs libfaketime: scripts/test.sh runs it"]
async fn a_clock_stepped_back_across_midnight_never_repeats_an_order_number() {
    assert!(
        std::path::Path::new(LIBFAKETIME).exists(),
        "{LIBFAKETIME} is missing: scripts/test.sh installs Debian's faketime"
    );
    let berlin = jiff::tz::TimeZone::get("Europe/Berlin").unwrap();
    let now = jiff::Timestamp::now();
    let midnight = now
        .to_zoned(berlin.clone())
        .start_of_day()
        .unwrap()
        .checked_add(jiff::Span::new().days(1))
        .unwrap()
        .start_of_day()
        .unwrap()
        .timestamp();
    // 4 s before the next midnight in Berlin (at most a day ahead: fits the offset file).
    let ahead = midnight.as_second() - now.as_second() - 4;
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let offset = tempfile::NamedTempFile::new().unwrap();
    crate::wall_clock::set_offset(offset.path(), ahead);
    let offset_path = offset.path().to_str().unwrap().to_owned();
    let server = ServerProcess::start(
        &url,
        &[
            ("LD_PRELOAD", LIBFAKETIME),
            ("FAKETIME_TIMESTAMP_FILE", offset_path.as_str()),
            ("FAKETIME_NO_CACHE", "1"),
            ("DONT_FAKE_MONOTONIC", "1"),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ("LEAFID__ADMIN__TRUST_LOOPBACK", "true"),
        ],
    );
    let client = reqwest::Client::new();
    let created = client
        .post(format!("{}/api/v1/tags", server.address))
        .json(&serde_json::json!({
            "biz_tag": "orders", "step": 20,
            "format": {"date": "yyyyMMdd", "width": 6, "reset": "daily", "time_zone": "Europe/Berlin"}
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let mut phases: Vec<Vec<(String, u64)>> = Vec::new();
    // Across midnight for 8 s, then 10 s back (the old day), then forward again.
    for (run_for, step_after) in [(8, -10), (3, 10), (3, 0)] {
        let mut ids = Vec::new();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(run_for) {
            ids.extend(take(&client, &server.address).await);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        phases.push(ids);
        if step_after != 0 {
            let current = std::fs::read_to_string(offset.path()).unwrap();
            let current: i64 = current.trim().parse().unwrap();
            crate::wall_clock::set_offset(offset.path(), current + step_after);
        }
    }
    let days: HashSet<&str> = phases.iter().flatten().map(|(d, _)| d.as_str()).collect();
    assert_eq!(days.len(), 2, "two days served: {days:?}");
    assert!(
        phases[1].iter().any(|(d, _)| phases[0][0].0 == *d),
        "the step back served the old day again"
    );
    let mut seen = HashSet::new();
    for id in phases.iter().flatten() {
        assert!(seen.insert(id.clone()), "{id:?} twice");
    }
    // Per day, the order numbers of each phase lie above those of the phases before.
    let mut last: HashMap<String, u64> = HashMap::new();
    for phase in &phases {
        for (d, s) in phase {
            let prev = last.entry(d.clone()).or_insert(0);
            assert!(*s > *prev, "{d}: {s} after {prev}");
            *prev = *s;
        }
    }
    crate::support::record_figure(
        "period_clock_back",
        &format!(
            "clock stepped back 10 s across midnight (Europe/Berlin) and forward: {} order numbers, none twice, each day increasing",
            seen.len()
        ),
    );
}
