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
