//! Strict tags (issue 45): an answer with `"strict": true` turns a supply into pass-through
//! for good: the ids it holds and that answer's are discarded, no prefetch starts again, and
//! every later call is one request for one id. Against a scripted fake server that records the
//! count of every request. (The conformance suite's `strict` scenario runs the same rules
//! against real servers.)

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::Client;

/// The answer to request `n` (from 0) for `count` ids: one run from the first id, strict or not.
type Script = Box<dyn FnMut(u64, usize) -> (i64, bool) + Send>;

/// A fake HTTP server on 127.0.0.1:0 answering by a script, one connection at a time.
struct Fake {
    base: String,
    counts: Arc<Mutex<Vec<u64>>>,
}

impl Fake {
    fn start(mut script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let counts = Arc::new(Mutex::new(Vec::new()));
        let seen = counts.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line);
                }
                let body = if head.starts_with("GET /health") {
                    "{}".to_owned()
                } else {
                    let count: u64 = head
                        .split("count=")
                        .nth(1)
                        .and_then(|q| q.split(['&', ' ']).next())
                        .and_then(|n| n.parse().ok())
                        .unwrap_or(0);
                    let mut seen = seen.lock().unwrap();
                    let (first, strict) = script(count, seen.len());
                    seen.push(count);
                    format!(
                        r#"{{"biz_tag":"msgs","count":{count},"ranges":[{{"first":"{first}","last":"{}"}}]{}}}"#,
                        first + count as i64 - 1,
                        if strict { r#","strict":true"# } else { "" }
                    )
                };
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes());
            }
        });
        Self { base, counts }
    }

    fn seen(&self) -> Vec<u64> {
        self.counts.lock().unwrap().clone()
    }
}

/// Consecutive ids from 1; answers from request `strict_from` on are marked strict.
fn consecutive(strict_from: usize) -> Script {
    let mut next = 1;
    Box::new(move |count, n| {
        let first = next;
        next += count as i64;
        (first, n >= strict_from)
    })
}

fn client(f: &Fake, batch: usize) -> Client {
    Client::builder()
        .servers([f.base.clone()])
        .batch(batch)
        .wait_timeout(Duration::from_secs(3))
        .request_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

fn ones(first: Option<u64>, n: usize) -> Vec<u64> {
    first.into_iter().chain(std::iter::repeat_n(1, n)).collect()
}

#[tokio::test]
async fn a_strict_answer_turns_the_supply_into_pass_through() {
    let f = Fake::start(consecutive(0));
    let c = client(&f, 50);
    let s = c.segment("msgs").unwrap();
    for k in 0..21 {
        // The first answer (1..50) revealed the tag strict: dropped whole, never handed out.
        assert_eq!(s.next_id().await.unwrap(), 51 + k);
    }
    tokio::time::sleep(Duration::from_millis(50)).await; // a prefetch would show now
    assert_eq!(
        f.seen(),
        ones(Some(50), 21),
        "one request of one id per call"
    );
    assert_eq!(s.try_next_id(), None);
    assert_eq!(f.seen(), ones(Some(50), 21));
    let st = s.stats();
    assert_eq!(
        (st.ids_served, st.batches, st.discarded_ids),
        (21, 21, 50),
        "{st:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pass_through_from_many_tasks() {
    let f = Fake::start(consecutive(0));
    let c = client(&f, 100);
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let s = c.segment("msgs").unwrap();
            tokio::spawn(async move {
                let mut mine = Vec::new();
                for _ in 0..25 {
                    mine.push(s.next_id().await.unwrap());
                }
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        let mine = t.await.unwrap();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "{mine:?}");
        all.extend(mine);
    }
    all.sort_unstable();
    assert_eq!(all, (101..201).collect::<Vec<i64>>());
    let mut seen = f.seen();
    seen.sort_unstable();
    assert_eq!(
        seen,
        ones(None, 100).into_iter().chain([100]).collect::<Vec<_>>()
    );
    assert_eq!(c.segment("msgs").unwrap().stats().ids_served, 100);
}

#[tokio::test]
async fn a_supply_turning_strict_drops_what_it_holds() {
    // The first answer is plain (buffered); its preload's answer is strict.
    let f = Fake::start(consecutive(1));
    let c = client(&f, 10);
    let s = c.segment("msgs").unwrap();
    // The second id is the preload piece's: the refill starts.
    let mut ids = vec![s.next_id().await.unwrap(), s.next_id().await.unwrap()];
    // Until the strict answer is taken (its ids discarded): polled, not slept.
    for _ in 0..1000 {
        if s.stats().discarded_ids > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seen = f.seen();
    assert_eq!(seen.len(), 2, "the first request and its preload");
    let strict_last = 10 + seen[1] as i64;
    for _ in 0..5 {
        let id = s.next_id().await.unwrap();
        assert!(
            id > strict_last,
            "{id} after the strict answer up to {strict_last}"
        );
        ids.push(id);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    assert_eq!(f.seen()[2..], ones(None, 5));
    let st = s.stats();
    assert_eq!(st.ids_served, 7);
    assert_eq!(
        st.discarded_ids,
        8 + seen[1],
        "the 8 ids held and the strict answer"
    );
}

#[tokio::test]
async fn a_pass_through_id_at_or_below_the_floor_is_never_handed_out() {
    // Strict 1..20 first (discarded, floor 20); then 7 (behind: a strict server never answers
    // it); then 30, 31.
    let f = Fake::start(Box::new(|_, n| {
        (
            match n {
                0 => 1,
                1 => 7,
                _ => 28 + n as i64,
            },
            true,
        )
    }));
    let c = client(&f, 20);
    let s = c.segment("msgs").unwrap();
    assert_eq!(s.next_id().await.unwrap(), 30);
    assert_eq!(s.next_id().await.unwrap(), 31);
    assert_eq!(f.seen(), [20, 1, 1, 1]);
    let st = s.stats();
    assert_eq!((st.ids_served, st.discarded_ids), (2, 21));
}
