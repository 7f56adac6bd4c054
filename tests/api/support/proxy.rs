//! Servers whose database traffic goes through a [`FaultProxy`] to the test MariaDB.

use std::net::{SocketAddr, ToSocketAddrs};

use leafid::config::Settings;
pub use leafid::testing::FaultProxy;

use super::{TestApp, mysql, spawn_on};

/// `host:port` of a `mysql://user:pw@host:port[/db]` URL, resolved.
pub fn socket_of(url: &str) -> SocketAddr {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, r)| r);
    let host_port = rest.split('/').next().unwrap();
    host_port
        .to_socket_addrs()
        .unwrap_or_else(|e| panic!("{host_port}: {e}"))
        .next()
        .unwrap()
}

/// `url` with its `host:port` replaced by the proxy's address.
pub fn through(proxy: &FaultProxy, url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (creds, rest) = rest.rsplit_once('@').unwrap();
    let path = rest.split_once('/').map_or("", |(_, p)| p);
    format!("{scheme}://{creds}@{}/{path}", proxy.addr())
}

/// A fresh MariaDB database, a proxy in front of the test MariaDB, and the database's URL
/// through the proxy (the direct URL is the second value).
pub async fn proxied_database() -> (FaultProxy, String, String) {
    let direct = mysql::create_database().await;
    let proxy = FaultProxy::start(socket_of(&direct)).await.unwrap();
    let url = through(&proxy, &direct);
    (proxy, url, direct)
}

/// A server on a fresh MariaDB database reached through a fault proxy.
pub async fn spawn_behind_proxy(tweak: impl FnOnce(&mut Settings)) -> (TestApp, FaultProxy) {
    let (proxy, url, _direct) = proxied_database().await;
    let app = spawn_on(&url, tweak).await;
    (app, proxy)
}

/// Whether a chunk a MySQL client sends holds a statement execution: a `COM_STMT_EXECUTE` (how
/// sqlx runs a query with arguments: its text was prepared earlier) or a `COM_QUERY`. Pings
/// (`COM_PING`, sent when a pooled connection is taken) and prepares are not. For
/// [`FaultProxy::stall_after`]: the answer held is then the statement's, after it ran.
pub fn runs_a_statement(chunk: &[u8]) -> bool {
    const COM_QUERY: u8 = 0x03;
    const COM_STMT_EXECUTE: u8 = 0x17;
    // Packets: a 3-byte little-endian payload length, a sequence byte, then the payload, whose
    // first byte is the command.
    let mut rest = chunk;
    while rest.len() > 4 {
        let len = usize::from(rest[0]) | usize::from(rest[1]) << 8 | usize::from(rest[2]) << 16;
        if matches!(rest[4], COM_QUERY | COM_STMT_EXECUTE) {
            return true;
        }
        rest = rest.get(4 + len..).unwrap_or_default();
    }
    false
}
