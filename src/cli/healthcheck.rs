//! `leafid healthcheck`: GETs `/health/live` of the server on this host, for a container's
//! `HEALTHCHECK` (no curl in the image). Exit 0 on 200, 1 otherwise.
//!
//! The port comes from the configuration (`server.port`, `LEAFID__SERVER__PORT`) unless
//! `--port` is given; the address is always loopback, whatever `server.host` binds.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use super::CliError;

/// How long the probe waits for connecting, and then for the answer.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// GETs `http://127.0.0.1:{port}/health/live`; `Ok` on status 200.
pub fn probe(port: u16) -> Result<(), CliError> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let not_live = |what: &str, e: std::io::Error| CliError::NotLive(format!("{what} {addr}: {e}"));
    let mut stream =
        TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| not_live("connecting to", e))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| not_live("configuring", e))?;
    write!(
        stream,
        "GET /health/live HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| not_live("writing to", e))?;
    let mut head = [0u8; 64];
    let n = stream
        .read(&mut head)
        .map_err(|e| not_live("reading from", e))?;
    let line = String::from_utf8_lossy(&head[..n]);
    let status = line.split_whitespace().nth(1).unwrap_or("");
    if status == "200" {
        Ok(())
    } else {
        Err(CliError::NotLive(format!(
            "{addr}/health/live answered {:?}",
            line.lines().next().unwrap_or("")
        )))
    }
}
