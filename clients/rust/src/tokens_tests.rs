//! Caller tokens and quotas (issue 44) against scripted fake servers: the header sent, the
//! token never shown, leafid's 401/403 final, a proxy's 401 a failover, a `429
//! quota_exhausted` waited out on the same server, and one past the wait timeout `Throttled`.
//! (The conformance suite's `tokens` scenario runs the same rules against real servers.)

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::{Client, Error};

/// One scripted answer: status, extra header lines, body.
type Reply = (u16, &'static str, String);

/// A fake HTTP server on 127.0.0.1:0 that answers its replies in order (the last one again
/// when they run out) and records each request's head (lowercased), one connection each.
struct Fake {
    base: String,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Fake {
    fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = heads.clone();
        std::thread::spawn(move || {
            let mut n = 0;
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { return };
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut head = String::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                        break;
                    }
                    head.push_str(&line.to_ascii_lowercase());
                }
                if head.starts_with("get /health") {
                    let _ = conn.write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
                    );
                    continue;
                }
                seen.lock().unwrap().push(head);
                let (status, extra, body) = &replies[n.min(replies.len() - 1)];
                n += 1;
                let answer = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes());
            }
        });
        Self { base, heads }
    }

    fn requests(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn ids(first: i64, last: i64) -> Reply {
    (
        200,
        "",
        format!(
            r#"{{"biz_tag":"orders","count":{},"ranges":[{{"first":"{first}","last":"{last}"}}]}}"#,
            last - first + 1
        ),
    )
}

fn refusal(status: u16, extra: &'static str, code: &str) -> Reply {
    (
        status,
        extra,
        format!(r#"{{"code":"{code}","message":"{code} here"}}"#),
    )
}

const SECRET: &str = "lid_0123456789abcdefSECRET";

fn client(servers: &[&Fake], wait: Duration) -> Client {
    Client::builder()
        .servers(servers.iter().map(|f| f.base.clone()))
        .batch(10)
        .max_batch(10)
        .wait_timeout(wait)
        .request_timeout(Duration::from_secs(2))
        .backoff(Duration::from_millis(20), Duration::from_millis(100))
        .token(SECRET)
        .build()
        .unwrap()
}

#[tokio::test]
async fn every_request_carries_the_token_which_is_never_shown() {
    let a = Fake::start(vec![ids(1, 10)]);
    let builder = Client::builder().servers([a.base.clone()]).token(SECRET);
    assert!(!format!("{builder:?}").contains(SECRET), "{builder:?}");
    assert!(format!("{builder:?}").contains("redacted"));
    let c = client(&[&a], Duration::from_secs(2));
    assert!(!format!("{c:?}").contains(SECRET), "{c:?}");
    assert_eq!(c.segment("orders").unwrap().next_id().await.unwrap(), 1);
    let reqs = a.requests();
    assert!(!reqs.is_empty());
    for head in reqs {
        assert!(
            head.contains(&format!(
                "authorization: bearer {}\r\n",
                SECRET.to_ascii_lowercase()
            )),
            "{head}"
        );
    }
    // Without a token no header is sent.
    let b = Fake::start(vec![ids(1, 10)]);
    let plain = Client::builder().servers([b.base.clone()]).build().unwrap();
    plain.segment("orders").unwrap().next_id().await.unwrap();
    assert!(
        !b.requests()[0].contains("authorization"),
        "{:?}",
        b.requests()
    );
}

#[tokio::test]
async fn leafid_401_and_403_are_final_and_no_failover() {
    for (status, code) in [(401, "unauthorized"), (403, "forbidden")] {
        let a = Fake::start(vec![refusal(status, "", code)]);
        let b = Fake::start(vec![ids(1, 10)]);
        let c = client(&[&a, &b], Duration::from_secs(2));
        match c.segment("orders").unwrap().next_id().await {
            Err(Error::Rejected {
                status: s, code: k, ..
            }) => assert_eq!((s, k.as_str()), (status, code)),
            other => panic!("{code}: {other:?}"),
        }
        assert_eq!(b.requests().len(), 0, "{code}: the next server was asked");
        assert_eq!(c.stats().failovers, 0, "{code}");
        // The same on the snowflake route.
        assert!(matches!(
            c.snowflake().next_id().await,
            Err(Error::Rejected { .. })
        ));
    }
}

#[tokio::test]
async fn a_proxys_401_without_leafids_body_is_a_failover() {
    let a = Fake::start(vec![(401, "", "<html>login</html>".to_owned())]);
    let b = Fake::start(vec![ids(1, 10)]);
    let c = client(&[&a, &b], Duration::from_secs(2));
    assert_eq!(c.segment("orders").unwrap().next_id().await.unwrap(), 1);
    assert_eq!(c.stats().failovers, 1);
}

#[tokio::test]
async fn quota_exhausted_waits_retry_after_on_the_same_server() {
    let a = Fake::start(vec![
        refusal(429, "retry-after: 1\r\n", "quota_exhausted"),
        ids(1, 10),
    ]);
    let b = Fake::start(vec![ids(1_000, 1_009)]);
    let c = client(&[&a, &b], Duration::from_secs(5));
    let t = Instant::now();
    assert_eq!(c.segment("orders").unwrap().next_id().await.unwrap(), 1);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(950),
        "{took:?}: Retry-After not honoured"
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(a.requests().len(), 2, "asked the same server again");
    assert_eq!(b.requests().len(), 0, "never another server");
    assert_eq!(c.stats().failovers, 0);
}

#[tokio::test]
async fn quota_exhausted_past_the_wait_timeout_is_throttled() {
    let a = Fake::start(vec![refusal(
        429,
        "retry-after: 3600\r\n",
        "quota_exhausted",
    )]);
    let b = Fake::start(vec![ids(1, 10)]);
    let c = client(&[&a, &b], Duration::from_secs(2));
    let t = Instant::now();
    match c.segment("orders").unwrap().next_id().await {
        Err(Error::Throttled {
            code, retry_after, ..
        }) => {
            assert_eq!(code, "quota_exhausted");
            assert_eq!(retry_after, Duration::from_secs(3600));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        t.elapsed() < Duration::from_secs(1),
        "it did not wait in vain"
    );
    assert_eq!(b.requests().len(), 0);
    assert_eq!(c.stats().failovers, 0);
    // A proxy's 429 (not leafid's code) stays a failover.
    let p = Fake::start(vec![refusal(429, "retry-after: 1\r\n", "rate_limited")]);
    let c = client(&[&p, &b], Duration::from_secs(2));
    c.segment("orders").unwrap().next_id().await.unwrap();
    assert_eq!(c.stats().failovers, 1);
}
