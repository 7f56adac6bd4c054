//! `GET /api/v1/snowflake/bounds`: every id issued in a time window lies within the bounds of
//! that window, on the Twitter layout, a migrated uid-generator layout (masked, seconds) and a
//! masked millisecond layout with a clock-back bit; the bounds meet the decode route exactly;
//! and every range the engine refuses is a 400 `invalid_time_range` naming the instant.

use std::time::Duration;

use leafid::config::Settings;
use leafid::snowflake::engine::GeneratorKind;
use leafid::snowflake::layout::TimeUnit;

use crate::support::{Db, TestApp, spawn_app_with};

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Unix ms of an RFC 3339 instant (the decode route's `timestamp`).
fn unix_ms(rfc3339: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(rfc3339)
        .unwrap_or_else(|e| panic!("{rfc3339:?}: {e}"))
        .timestamp_millis()
}

/// An id of a JSON body, written as a number or (`stringify_ids=true`) a decimal string.
fn id(v: &serde_json::Value) -> u64 {
    match v {
        serde_json::Value::String(s) => s.parse().unwrap_or_else(|_| panic!("id {s:?}")),
        other => other.as_u64().unwrap_or_else(|| panic!("id {other}")),
    }
}

/// `min_id` and `max_id` of `[from, to)` (unix ms), asserting 200; the numbers and the strings
/// of `stringify_ids=true` agree.
async fn bounds(app: &TestApp, from: i64, to: i64) -> (u64, u64) {
    let path = format!("/api/v1/snowflake/bounds?from={from}&to={to}");
    let numbers = app.get(&path).await;
    assert_eq!(numbers.status, 200, "{path}: {}", numbers.text);
    let strings = app.get(&format!("{path}&stringify_ids=true")).await;
    assert_eq!(strings.status, 200, "{path}: {}", strings.text);
    let (n, s) = (numbers.json(), strings.json());
    assert!(s["min_id"].is_string() && s["max_id"].is_string(), "{s}");
    assert!(n["min_id"].is_u64() && n["max_id"].is_u64(), "{n}");
    let pair = (id(&n["min_id"]), id(&n["max_id"]));
    assert_eq!(pair, (id(&s["min_id"]), id(&s["max_id"])));
    pair
}

/// `count` ids from the batch route, as decimal strings (exact).
async fn take(app: &TestApp, count: usize) -> Vec<u64> {
    let r = app
        .get(&format!(
            "/api/v1/snowflake/ids?count={count}&stringify_ids=true"
        ))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["ids"].as_array().unwrap().iter().map(id).collect()
}

/// Spawns a server with `tweak`, takes `batches` batches of `count` ids (`pause` apart) and
/// checks that each lies within `bounds(before, after + 1 tick)`, `before` read before the
/// server started and `after` after the last batch; then, for some of the ids, that the decode
/// route and the bounds route meet exactly (see [`decode_meets_bounds`]). Returns the layout's
/// `T/W/S` as the bounds route names it.
///
/// `before` is read before the server starts because a generator reads the clock for its ids
/// from its start on: the cached one makes the ids of its ring at start, ahead of any request
/// (the first tick's worth of a fresh ring carries the tick the server started in: each cached
/// run below takes fewer ids than one tick holds; later ids of the ring may be ahead of the
/// clock by up to `max_ahead_ticks`: docs/migration.md, "Snowflake time bounds").
async fn ids_of_a_window_lie_within_its_bounds(
    tweak: impl FnOnce(&mut Settings),
    tick_ms: i64,
    batches: usize,
    count: usize,
    pause: Duration,
) -> String {
    let before = now_ms();
    let app = spawn_app_with(Db::Sqlite, tweak).await;
    let mut ids = Vec::new();
    for i in 0..batches {
        if i > 0 {
            tokio::time::sleep(pause).await;
        }
        ids.extend(take(&app, count).await);
    }
    let after = now_ms();
    let (min, max) = bounds(&app, before, after + tick_ms).await;
    for &id in &ids {
        assert!(
            (min..=max).contains(&id),
            "id {id} is outside {min}..={max}, the bounds of [{before}, {after} + {tick_ms})"
        );
    }
    // The ids span ticks (pauses of a tick or more): check a few of each tick.
    let step = (ids.len() / 16).max(1);
    for &id in ids.iter().step_by(step).chain(ids.last()) {
        decode_meets_bounds(&app, id, tick_ms).await;
    }
    let r = app
        .get(&format!(
            "/api/v1/snowflake/bounds?from={before}&to={}",
            after + tick_ms
        ))
        .await;
    r.json()["layout"].as_str().unwrap().to_owned()
}

/// The decode route and the bounds route meet exactly at `id`: with `t` its decoded tick start,
/// `bounds(t, t + 1 tick)` holds it and decodes to `t` with worker field 0 and sequence 0 below
/// and every field at its maximum above, and the bounds of the range that ends at `t` are all
/// below it.
async fn decode_meets_bounds(app: &TestApp, id: u64, tick_ms: i64) {
    let decode = |id: u64| async move {
        let r = app.get(&format!("/api/v1/snowflake/decode/{id}")).await;
        assert_eq!(r.status, 200, "{}", r.text);
        r.json()
    };
    let d = decode(id).await;
    let t = unix_ms(d["timestamp"].as_str().unwrap());
    let (min, max) = bounds(app, t, t + tick_ms).await;
    assert!((min..=max).contains(&id), "{id} not in {min}..={max}");
    let (lo, hi) = (decode(min).await, decode(max).await);
    for end in [&lo, &hi] {
        assert_eq!(end["timestamp"], d["timestamp"], "{end}");
        assert_eq!(end["prefix"], d["prefix"], "{end}");
    }
    assert_eq!(
        (lo["worker_id"].as_u64(), lo["sequence"].as_u64()),
        (Some(0), Some(0)),
        "{lo}"
    );
    // Every id of the tick: the next id up is the next tick's first (or past the layout).
    let next = decode(max + 1).await;
    assert_eq!(
        unix_ms(next["timestamp"].as_str().unwrap()),
        t + tick_ms,
        "{next}"
    );
    assert_eq!(
        (next["worker_id"].as_u64(), next["sequence"].as_u64()),
        (Some(0), Some(0))
    );
    if d.get("clock_back").is_some() {
        assert_eq!(lo["clock_back"], 0, "{lo}");
        assert!(hi["clock_back"].as_u64().unwrap() > 0, "{hi}");
    }
    let (_, earlier) = bounds(app, t - 60_000, t).await;
    assert!(earlier < id && earlier + 1 == min, "{earlier} {min} {id}");
}

#[tokio::test]
async fn the_ids_of_a_window_on_twitter_lie_within_its_bounds() {
    // The default: Twitter's 41/10/12 in milliseconds, cached generator. 4096 ids a tick.
    let layout = ids_of_a_window_lie_within_its_bounds(|_| {}, 1, 3, 1000, Duration::ZERO).await;
    assert_eq!(layout, "41/10/12");
}

#[tokio::test]
async fn the_ids_of_a_window_on_a_migrated_uid_generator_layout_lie_within_its_bounds() {
    // uid-generator's 28/22/13 ran out in 2024; its migration: 7 prefix bits (all ones) over
    // 30 bits of seconds since the same epoch, cached like uid-generator. 8192 ids a tick.
    let layout = ids_of_a_window_lie_within_its_bounds(
        |s| {
            s.snowflake.layout = Some("7+30/13/13".into());
            s.snowflake.epoch = Some("2016-05-20T00:00:00+08:00".into());
            s.snowflake.unit = Some(TimeUnit::Seconds);
            s.snowflake.min_id_floor = 9_090_949_948_782_127_403;
        },
        1000,
        3,
        2000,
        Duration::ZERO,
    )
    .await;
    assert_eq!(layout, "7+30/13/13");
}

#[tokio::test]
async fn the_ids_of_a_window_on_a_masked_layout_with_a_clock_back_bit_lie_within_its_bounds() {
    // 2 prefix bits (all ones), 41 bits of milliseconds, a 10-bit worker field whose top bit
    // is the clock-back value, the direct generator: ids over several ticks.
    let layout = ids_of_a_window_lie_within_its_bounds(
        |s| {
            s.snowflake.layout = Some("2+41/10/10".into());
            s.snowflake.epoch = Some("2024-01-01T00:00:00Z".into());
            s.snowflake.unit = Some(TimeUnit::Millis);
            s.snowflake.clock_back_bits = 1;
            s.snowflake.generator = GeneratorKind::Direct;
        },
        1,
        4,
        3000,
        Duration::from_millis(3),
    )
    .await;
    assert_eq!(layout, "2+41/c1+9/10");
}

#[tokio::test]
async fn refused_ranges_are_400_invalid_time_range_naming_the_instant() {
    let app = spawn_app_with(Db::Sqlite, |s| {
        s.snowflake.layout = Some("7+30/13/13".into());
        s.snowflake.epoch = Some("2016-05-20T00:00:00+08:00".into());
        s.snowflake.unit = Some(TimeUnit::Seconds);
    })
    .await;
    let day = "from=2025-01-01T00:00:00Z&to=2025-01-02T00:00:00Z";
    let bad_stringify = format!("{day}&stringify_ids=yes");
    for (query, code, says) in [
        (
            "from=2016-05-19T15:59:59Z&to=2016-05-21T00:00:00Z",
            "invalid_time_range",
            "before the layout's epoch 2016-05-19T16:00:00Z (unix ms 1463673600000)",
        ),
        (
            "from=2025-01-01T00:00:00Z&to=2051-01-01T00:00:00Z",
            "invalid_time_range",
            "after 2050-05-29T05:37:04Z (unix ms 2537415424000), when the layout's time field runs out",
        ),
        (
            "from=2025-01-02T00:00:00Z&to=2025-01-01T00:00:00Z",
            "invalid_time_range",
            "empty time range: from 2025-01-02T00:00:00Z is not before to 2025-01-01T00:00:00Z",
        ),
        (
            "from=1735689600000&to=1735689600000",
            "invalid_time_range",
            "empty time range",
        ),
        (
            "from=yesterday&to=1",
            "invalid_time_range",
            "from \"yesterday\" is neither",
        ),
        (
            "from=1&to=2025-01-01",
            "invalid_time_range",
            "to \"2025-01-01\" is neither",
        ),
        ("to=1", "invalid_time_range", "from is required"),
        ("from=1", "invalid_time_range", "to is required"),
        ("", "invalid_time_range", "from is required"),
        (bad_stringify.as_str(), "invalid_request", "stringify_ids"),
    ] {
        let r = app.get(&format!("/api/v1/snowflake/bounds?{query}")).await;
        assert_eq!(r.status, 400, "{query}: {}", r.text);
        assert!(r.content_type.starts_with("application/json"), "{query}");
        assert_eq!(r.code(), code, "{query}: {}", r.text);
        let message = r.json()["message"].as_str().unwrap().to_owned();
        assert!(message.contains(says), "{query}: {message}");
    }

    // Offsets, encoded (`%2B`) or not (a `+` a query string decodes to a space): one range.
    let utc = app
        .get(&format!("/api/v1/snowflake/bounds?{day}"))
        .await
        .json();
    for query in [
        "from=2025-01-01T08:00:00%2B08:00&to=2025-01-02T08:00:00%2B08:00",
        "from=2025-01-01T08:00:00+08:00&to=1735776000000",
    ] {
        let r = app.get(&format!("/api/v1/snowflake/bounds?{query}")).await;
        assert_eq!(r.status, 200, "{query}: {}", r.text);
        assert_eq!(r.json(), utc, "{query}");
    }
    assert_eq!(utc["from"], "2025-01-01T00:00:00Z");
    assert_eq!(utc["to"], "2025-01-02T00:00:00Z");
    assert_eq!(utc["first_tick"], "2025-01-01T00:00:00Z");
    assert_eq!(utc["last_tick"], "2025-01-01T23:59:59Z");
    assert_eq!(utc["layout"], "7+30/13/13");
    assert_eq!(id(&utc["min_id"]) >> 56, 127, "{utc}");
}

#[tokio::test]
async fn without_the_snowflake_engine_bounds_is_engine_disabled() {
    let app = spawn_app_with(Db::Sqlite, |s| s.snowflake.enabled = false).await;
    let r = app.get("/api/v1/snowflake/bounds?from=1&to=2").await;
    assert_eq!(
        (r.status, r.code().as_str()),
        (404, "engine_disabled"),
        "{}",
        r.text
    );
}
