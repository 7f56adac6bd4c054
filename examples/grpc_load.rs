//! A small gRPC load client for `scripts/bench-grpc.sh` and `scripts/bench-instructions.sh`
//! (Debian's `h2load` sends fixed frames, so it cannot check the ids it gets). Traffic goes to
//! 127.0.0.1 only. Every answer is checked: a failed call, an empty answer, or ids not
//! increasing for one caller end the run with exit code 1.
//!
//! ```text
//! grpc_load unary  PORT TAG SECS CALLERS CONNECTIONS  # Segment.NextIds count=1: calls/s
//! grpc_load calls  PORT TAG N                          # N NextIds calls, one after another
//!                                                      # on one connection (for callgrind)
//! grpc_load stream PORT TAG SECS COUNT CHUNK           # StreamRanges of COUNT ids again and
//!                                                      # again on one connection: ids/s
//! grpc_load http-ranges PORT TAG SECS COUNT            # GET /api/v1/segment/TAG/ranges?count=
//!                                                      # COUNT on one keep-alive HTTP/1.1
//!                                                      # connection: ids/s
//! ```
//!
//! Prints one line, `<figure> <unit>`, on stdout.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use leafid::grpc::pb;
use pb::segment_client::SegmentClient;
use tonic::transport::Channel;

type Failure = Box<dyn std::error::Error + Send + Sync>;

fn arg<T: std::str::FromStr>(args: &[String], i: usize, name: &str) -> Result<T, Failure> {
    args.get(i)
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| format!("argument {i} ({name}) missing or not a number").into())
}

async fn connect(port: u16) -> Result<SegmentClient<Channel>, Failure> {
    let channel = Channel::from_shared(format!("http://127.0.0.1:{port}"))?
        .connect()
        .await?;
    Ok(SegmentClient::new(channel))
}

/// One NextIds call of one id, checked: the id above the caller's last.
async fn one(
    client: &mut SegmentClient<Channel>,
    tag: &str,
    last: &mut i64,
) -> Result<(), Failure> {
    let reply = client
        .next_ids(pb::NextIdsRequest {
            biz_tag: tag.to_owned(),
            count: 1,
        })
        .await?
        .into_inner();
    match reply.ids.as_slice() {
        [id] if *id > *last => {
            *last = *id;
            Ok(())
        }
        // The hello baseline answers one constant id: increasing is not its promise.
        [id] if reply.biz_tag == "hello" => {
            *last = *id - 1;
            Ok(())
        }
        other => Err(format!("answer {other:?} after {last}").into()),
    }
}

async fn unary(
    port: u16,
    tag: String,
    secs: f64,
    callers: usize,
    conns: usize,
) -> Result<f64, Failure> {
    let mut clients = Vec::new();
    for _ in 0..conns.max(1) {
        clients.push(connect(port).await?);
    }
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut tasks = Vec::new();
    for i in 0..callers.max(1) {
        let mut client = clients[i % clients.len()].clone();
        let tag = tag.clone();
        tasks.push(tokio::spawn(async move {
            let (mut calls, mut last) = (0u64, 0i64);
            while Instant::now() < end {
                one(&mut client, &tag, &mut last).await?;
                calls += 1;
            }
            Ok::<u64, Failure>(calls)
        }));
    }
    let start = Instant::now();
    let mut calls = 0;
    for t in tasks {
        calls += t.await??;
    }
    Ok(calls as f64 / start.elapsed().as_secs_f64())
}

async fn calls(port: u16, tag: String, n: u64) -> Result<f64, Failure> {
    let mut client = connect(port).await?;
    let mut last = 0;
    for _ in 0..n {
        one(&mut client, &tag, &mut last).await?;
    }
    Ok(n as f64)
}

async fn stream(port: u16, tag: String, secs: f64, count: u64, chunk: u64) -> Result<f64, Failure> {
    let mut client = connect(port).await?;
    let start = Instant::now();
    let (mut ids, mut last) = (0u64, 0i64);
    while start.elapsed().as_secs_f64() < secs {
        let mut s = client
            .stream_ranges(pb::StreamRangesRequest {
                biz_tag: tag.clone(),
                count,
                chunk,
            })
            .await?
            .into_inner();
        let mut got = 0;
        while let Some(m) = s.message().await? {
            for r in &m.ranges {
                if r.first <= last || r.last < r.first {
                    return Err(format!("run {r:?} after {last}").into());
                }
                got += (r.last - r.first + 1) as u64;
                last = r.last;
            }
        }
        if got != count {
            return Err(format!("a stream of {count} gave {got}").into());
        }
        ids += got;
    }
    Ok(ids as f64 / start.elapsed().as_secs_f64())
}

/// The HTTP range route on one keep-alive connection, the answer's runs summed and checked.
fn http_ranges(port: u16, tag: &str, secs: f64, count: u64) -> Result<f64, Failure> {
    let conn = TcpStream::connect(("127.0.0.1", port))?;
    conn.set_nodelay(true)?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut writer = conn;
    let request = format!(
        "GET /api/v1/segment/{tag}/ranges?count={count} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    );
    let start = Instant::now();
    let (mut ids, mut last) = (0u64, 0i64);
    while start.elapsed().as_secs_f64() < secs {
        writer.write_all(request.as_bytes())?;
        let (mut line, mut length) = (String::new(), None);
        reader.read_line(&mut line)?;
        if !line.starts_with("HTTP/1.1 200") {
            return Err(format!("answer {line:?}").into());
        }
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = Some(value.trim().parse::<usize>()?);
            }
        }
        let mut body = vec![0; length.ok_or("an answer without content-length")?];
        reader.read_exact(&mut body)?;
        let answer: serde_json::Value = serde_json::from_slice(&body)?;
        let mut got = 0;
        for r in answer["ranges"].as_array().ok_or("no ranges")? {
            let (first, end) = (r["first"].as_i64(), r["last"].as_i64());
            let (Some(first), Some(end)) = (first, end) else {
                return Err(format!("run {r}").into());
            };
            if first <= last || end < first {
                return Err(format!("run {r} after {last}").into());
            }
            got += (end - first + 1) as u64;
            last = end;
        }
        if got != count {
            return Err(format!("a range answer of {count} gave {got}").into());
        }
        ids += got;
    }
    Ok(ids as f64 / start.elapsed().as_secs_f64())
}

fn run(args: &[String]) -> Result<(f64, &'static str), Failure> {
    let mode = args.get(1).map(String::as_str).unwrap_or("");
    let port: u16 = arg(args, 2, "PORT")?;
    let tag = args.get(3).cloned().ok_or("argument 3 (TAG) missing")?;
    if mode == "http-ranges" {
        return Ok((
            http_ranges(port, &tag, arg(args, 4, "SECS")?, arg(args, 5, "COUNT")?)?,
            "ids/s",
        ));
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        match mode {
            "unary" => Ok((
                unary(
                    port,
                    tag,
                    arg(args, 4, "SECS")?,
                    arg(args, 5, "CALLERS")?,
                    arg(args, 6, "CONNECTIONS")?,
                )
                .await?,
                "calls/s",
            )),
            "calls" => Ok((calls(port, tag, arg(args, 4, "N")?).await?, "calls")),
            "stream" => Ok((
                stream(
                    port,
                    tag,
                    arg(args, 4, "SECS")?,
                    arg(args, 5, "COUNT")?,
                    arg(args, 6, "CHUNK")?,
                )
                .await?,
                "ids/s",
            )),
            _ => Err(format!("unknown mode {mode:?}: unary, calls, stream or http-ranges").into()),
        }
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match run(&args) {
        Ok((figure, unit)) => println!("{figure:.0} {unit}"),
        Err(e) => {
            eprintln!("grpc_load: {e}");
            std::process::exit(1);
        }
    }
}
