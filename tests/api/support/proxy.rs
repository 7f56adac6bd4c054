//! Servers whose database traffic goes through a [`FaultProxy`] to the test MariaDB or the test
//! PostgreSQL.

use std::net::{SocketAddr, ToSocketAddrs};

use leafid::config::Settings;
pub use leafid::testing::FaultProxy;

use super::{Db, TestApp, mysql, postgres, spawn_on};

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
    proxied_database_on(Db::MySql).await
}

/// [`proxied_database`] on the server of `db`: MariaDB or PostgreSQL (the proxy is in front of
/// the server itself, never of PgBouncer).
pub async fn proxied_database_on(db: Db) -> (FaultProxy, String, String) {
    let direct = match db {
        Db::MySql => mysql::create_database().await,
        Db::Postgres => postgres::create_database().await,
        other => panic!("no fault proxy in front of {other:?}"),
    };
    let proxy = FaultProxy::start(socket_of(&direct)).await.unwrap();
    let url = through(&proxy, &direct);
    (proxy, url, direct)
}

/// A server on a fresh MariaDB database reached through a fault proxy.
pub async fn spawn_behind_proxy(tweak: impl FnOnce(&mut Settings)) -> (TestApp, FaultProxy) {
    spawn_behind_proxy_on(Db::MySql, tweak).await
}

/// [`spawn_behind_proxy`] on the server of `db` (MariaDB or PostgreSQL).
pub async fn spawn_behind_proxy_on(
    db: Db,
    tweak: impl FnOnce(&mut Settings),
) -> (TestApp, FaultProxy) {
    let (proxy, url, _direct) = proxied_database_on(db).await;
    let app = spawn_on(&url, tweak).await;
    (app, proxy)
}

/// What marks a client chunk as a statement execution on `db`'s wire protocol (for
/// [`FaultProxy::stall_after`]).
pub fn statement_matcher(db: Db) -> fn(&[u8]) -> bool {
    match db {
        Db::Postgres | Db::PgBouncer => runs_a_pg_statement,
        _ => runs_a_statement,
    }
}

/// Whether a chunk a PostgreSQL client sends holds a statement execution: an `Execute` (`E`,
/// the extended protocol's, sent with its `Bind`) or a simple `Query` (`Q`). `Parse`,
/// `Describe` and `Sync` alone are not, nor the startup packet (no type byte: its first byte
/// is the high byte of its length, 0).
pub fn runs_a_pg_statement(chunk: &[u8]) -> bool {
    // Messages: a type byte, then a 4-byte big-endian length that counts itself.
    let mut rest = chunk;
    while rest.len() >= 5 {
        if rest[0] == 0 {
            return false;
        }
        if matches!(rest[0], b'E' | b'Q') {
            return true;
        }
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        rest = rest.get(1 + len..).unwrap_or_default();
    }
    false
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
