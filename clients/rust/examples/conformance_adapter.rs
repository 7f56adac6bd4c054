//! The Rust client's conformance adapter: speaks `clients/conformance/PROTOCOL.md` on stdin and
//! stdout (one JSON object per line each way) and answers every command through the public API
//! of `leafid-client` only. Run by `clients/rust/conformance-adapter`, driven by
//! `clients/conformance/run.py`. An example, not part of the crate's published surface.
//!
//! Callers of `take` are OS threads, each driving `next_id` with the runtime handle's
//! `block_on` (a synchronous caller); the client's refills and health probes run on the
//! runtime's own workers.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use leafid_client::{Client, Error};
use serde_json::{Value, json};

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let mut client: Option<Client> = None;
    let stdin = std::io::stdin();
    let mut out = std::io::stdout().lock();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        let (answer, close) = match serde_json::from_str::<Value>(&line) {
            Ok(cmd) => handle(&cmd, &mut client, runtime.handle()),
            Err(e) => (failure("internal", "", &format!("not JSON: {e}")), false),
        };
        if close {
            // Every background task of the client ends with it (its last handle is gone);
            // the runtime's workers stop here.
            drop(client.take());
            runtime.shutdown_timeout(Duration::from_secs(2));
            writeln!(out, "{answer}").and_then(|()| out.flush()).ok();
            return;
        }
        if writeln!(out, "{answer}")
            .and_then(|()| out.flush())
            .is_err()
        {
            break;
        }
    }
}

/// One command's answer, and whether it was `close`.
fn handle(cmd: &Value, client: &mut Option<Client>, rt: &tokio::runtime::Handle) -> (Value, bool) {
    match cmd["op"].as_str().unwrap_or("") {
        "open" => (open(cmd, client, rt), false),
        "take" => match client {
            Some(c) => (take(cmd, c, rt), false),
            None => (failure("internal", "", "take before open"), false),
        },
        "bounds" => match client {
            Some(c) => (bounds(cmd, c, rt), false),
            None => (failure("internal", "", "bounds before open"), false),
        },
        "stats" => match client {
            Some(c) => {
                let s = c.stats();
                let answer = json!({
                    "ok": true,
                    "ids_served": s.ids_served,
                    "batches": s.batches,
                    "failovers": s.failovers,
                    "discarded_ids": s.discarded_ids,
                    "batch_size": s.batch_size,
                });
                (answer, false)
            }
            None => (failure("internal", "", "stats before open"), false),
        },
        "close" => (json!({"ok": true}), true),
        other => (
            failure("internal", "", &format!("unknown op {other:?}")),
            false,
        ),
    }
}

fn ms(cmd: &Value, key: &str) -> Option<Duration> {
    cmd[key].as_u64().map(Duration::from_millis)
}

fn open(cmd: &Value, client: &mut Option<Client>, rt: &tokio::runtime::Handle) -> Value {
    let servers: Vec<String> = cmd["servers"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut builder = Client::builder().servers(servers);
    if let Some(n) = cmd["batch"].as_u64() {
        builder = builder.batch(n as usize);
    }
    if let Some(m) = cmd["max_batch"].as_u64() {
        builder = builder.max_batch(m as usize);
    }
    if let Some(l) = ms(cmd, "target_lifetime_ms") {
        builder = builder.target_lifetime(l);
    }
    if let Some(t) = ms(cmd, "request_timeout_ms") {
        builder = builder.request_timeout(t);
    }
    if let Some(w) = ms(cmd, "wait_timeout_ms") {
        builder = builder.wait_timeout(w);
    }
    if let (Some(a), Some(b)) = (ms(cmd, "backoff_min_ms"), ms(cmd, "backoff_max_ms")) {
        builder = builder.backoff(a, b);
    }
    // The period rule's wall clock: the system clock plus the offset, through the public hook.
    if let Some(token) = cmd["token"].as_str() {
        builder = builder.token(token);
    }
    if let Some(offset) = cmd["clock_offset_ms"].as_i64() {
        let shift = Duration::from_millis(offset.unsigned_abs());
        builder = builder.clock(Arc::new(move || {
            if offset >= 0 {
                SystemTime::now() + shift
            } else {
                SystemTime::now() - shift
            }
        }));
    }
    // build() needs a runtime context: its background tasks are spawned there.
    let _guard = rt.enter();
    match builder.build() {
        Ok(c) => {
            *client = Some(c);
            json!({"ok": true})
        }
        Err(e) => error_answer(&e),
    }
}

/// What one caller got: its ids in order, its errors by (kind, code), and its longest call.
type CallerResult = (Vec<String>, BTreeMap<(String, String), u64>, Duration);

fn take(cmd: &Value, client: &Client, rt: &tokio::runtime::Handle) -> Value {
    let callers = cmd["callers"].as_u64().unwrap_or(1) as usize;
    let per_caller = cmd["per_caller"].as_u64().unwrap_or(0) as usize;
    let pause = ms(cmd, "pause_ms").unwrap_or_default();
    let engine = cmd["engine"].as_str().unwrap_or("segment").to_owned();
    let tag = cmd["tag"].as_str().unwrap_or("").to_owned();
    let results: Vec<CallerResult> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..callers)
            .map(|_| {
                let (engine, tag) = (&engine, &tag);
                scope.spawn(move || {
                    let mut ids = Vec::with_capacity(per_caller);
                    let mut errors = BTreeMap::new();
                    let mut slowest = Duration::ZERO;
                    let mut record = |r: Result<String, Error>| match r {
                        Ok(id) => ids.push(id),
                        Err(e) => {
                            let (kind, code) = kind_code(&e);
                            *errors.entry((kind.to_owned(), code)).or_insert(0) += 1;
                        }
                    };
                    // One next_id call, timed (max_call_ms).
                    let mut timed = |call: &mut dyn FnMut() -> Result<String, Error>| {
                        let started = Instant::now();
                        let r = call();
                        slowest = slowest.max(started.elapsed());
                        r
                    };
                    if engine == "snowflake" {
                        let supply = client.snowflake();
                        for _ in 0..per_caller {
                            record(timed(&mut || {
                                rt.block_on(supply.next_id()).map(|id| id.to_string())
                            }));
                            if !pause.is_zero() {
                                std::thread::sleep(pause);
                            }
                        }
                    } else if engine == "formatted" {
                        // The texts as received.
                        match client.formatted(tag) {
                            Ok(supply) => {
                                for _ in 0..per_caller {
                                    record(timed(&mut || {
                                        rt.block_on(supply.next_id()).map(String::from)
                                    }));
                                    if !pause.is_zero() {
                                        std::thread::sleep(pause);
                                    }
                                }
                            }
                            Err(e) => (0..per_caller).for_each(|_| record(Err(e.clone()))),
                        }
                    } else {
                        match client.segment(tag) {
                            Ok(supply) => {
                                for _ in 0..per_caller {
                                    record(timed(&mut || {
                                        rt.block_on(supply.next_id()).map(|id| id.to_string())
                                    }));
                                    if !pause.is_zero() {
                                        std::thread::sleep(pause);
                                    }
                                }
                            }
                            Err(e) => (0..per_caller).for_each(|_| record(Err(e.clone()))),
                        }
                    }
                    (ids, errors, slowest)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a caller thread panicked"))
            .collect()
    });
    let mut all_errors: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut lists = Vec::with_capacity(results.len());
    let mut slowest = Duration::ZERO;
    for (ids, errors, longest) in results {
        lists.push(ids);
        slowest = slowest.max(longest);
        for (k, n) in errors {
            *all_errors.entry(k).or_insert(0) += n;
        }
    }
    let errors: Vec<Value> = all_errors
        .into_iter()
        .map(|((kind, code), count)| json!({"kind": kind, "code": code, "count": count}))
        .collect();
    json!({"ok": true, "ids": lists, "errors": errors,
           "max_call_ms": slowest.as_secs_f64() * 1000.0})
}

/// `bounds`: the client's snowflake bounds helper for `[from, to)`.
fn bounds(cmd: &Value, client: &Client, rt: &tokio::runtime::Handle) -> Value {
    let instant = |key: &str| {
        cmd[key].as_str().and_then(parse_instant).ok_or_else(|| {
            failure(
                "internal",
                "",
                &format!("{key}: not an RFC 3339 UTC instant"),
            )
        })
    };
    let (from, to) = match (instant("from"), instant("to")) {
        (Ok(f), Ok(t)) => (f, t),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    match rt.block_on(client.snowflake_bounds(from, to)) {
        Ok(b) => {
            json!({"ok": true, "min_id": b.min_id.to_string(), "max_id": b.max_id.to_string()})
        }
        Err(e) => error_answer(&e),
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z`, the driver's instants, as a `SystemTime`.
fn parse_instant(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    if b[16] != b':' || b[b.len() - 1] != b'Z' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let nanos = match &s[19..s.len() - 1] {
        "" => 0,
        frac => {
            let digits = frac.strip_prefix('.')?;
            if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|c| c.is_ascii_digit())
            {
                return None;
            }
            digits.parse::<u64>().ok()? * 10u64.pow(9 - digits.len() as u32)
        }
    };
    // Days since 1970-01-01 (Howard Hinnant's days_from_civil).
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let doy = (153 * ((mo + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec;
    let t = if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    };
    Some(t + Duration::from_nanos(nanos))
}

/// The protocol's kind and code of a client error.
fn kind_code(e: &Error) -> (&'static str, String) {
    match e {
        Error::Rejected { code, .. } => ("rejected", code.clone()),
        Error::Throttled { code, .. } => ("throttled", code.clone()),
        Error::Unavailable { .. } => ("unavailable", String::new()),
        Error::InvalidTag(_) => ("invalid_tag", String::new()),
        Error::Config(_) => ("config", String::new()),
    }
}

fn error_answer(e: &Error) -> Value {
    let (kind, code) = kind_code(e);
    failure(kind, &code, &e.to_string())
}

fn failure(kind: &str, code: &str, message: &str) -> Value {
    json!({"ok": false, "error": {"kind": kind, "code": code, "message": message}})
}
