//! Several server processes on one database, and servers killed with SIGKILL.

use std::sync::Arc;

use crate::support::mysql::{create_database, exec_in};
use crate::support::process::ServerProcess;
use crate::support::{Db, assert_increasing, assert_unique_positive, fresh_db};

async fn get_id(client: &reqwest::Client, base: &str, tag: &str) -> i64 {
    let r = client
        .get(format!("{base}/api/segment/get/{tag}"))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    text.parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn three_servers_sharing_mariadb_never_repeat_an_id() {
    let url = create_database().await;
    let servers: Vec<ServerProcess> = (0..3).map(|_| ServerProcess::start(&url, &[])).collect();
    // A tiny step forces a lease every few ids, so the servers race on the row constantly.
    exec_in(
        &url,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('shared', 1, 5)",
    )
    .await;
    hammer_three(&servers).await;
}

/// The same on PostgreSQL whose database defaults to `serializable`: the servers' leases on
/// the one row conflict all the time (SQLSTATE 40001) and are retried; no id repeats.
async fn three_servers_on_serializable_postgres_never_repeat_an_id(db: Db) {
    use crate::support::postgres::{exec_in, server_url, with_database};
    let (url, _dir) = fresh_db(db).await;
    let name = url.rsplit('/').next().unwrap();
    exec_in(
        &with_database(server_url(), name),
        &format!("ALTER DATABASE {name} SET default_transaction_isolation = 'serializable'"),
    )
    .await;
    let servers: Vec<ServerProcess> = (0..3).map(|_| ServerProcess::start(&url, &[])).collect();
    exec_in(
        &url,
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('shared', 1, 5)",
    )
    .await;
    hammer_three(&servers).await;
}

mod three_servers_on_serializable_postgres_never_repeat_an_id {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PostgreSQL: scripts/test.sh runs it"]
    async fn postgres() {
        super::three_servers_on_serializable_postgres_never_repeat_an_id(
            crate::support::Db::Postgres,
        )
        .await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PgBouncer and PostgreSQL: scripts/test.sh runs it"]
    async fn pgbouncer() {
        super::three_servers_on_serializable_postgres_never_repeat_an_id(
            crate::support::Db::PgBouncer,
        )
        .await;
    }
}

/// Nine clients, three per server, take 200 ids each from tag `shared`: each client's ids
/// increase, and no id repeats across all 1,800.
async fn hammer_three(servers: &[ServerProcess]) {
    let client = reqwest::Client::new();
    let addresses: Arc<Vec<String>> = Arc::new(servers.iter().map(|s| s.address.clone()).collect());
    let clients: Vec<_> = (0..9)
        .map(|c| {
            let (client, addresses) = (client.clone(), addresses.clone());
            tokio::spawn(async move {
                let base = &addresses[c % 3];
                let mut mine = Vec::new();
                for _ in 0..200 {
                    mine.push(get_id(&client, base, "shared").await);
                }
                assert_increasing(&mine);
                mine
            })
        })
        .collect();
    let mut all = Vec::new();
    for c in clients {
        all.extend(c.await.unwrap());
    }
    assert_eq!(all.len(), 1800);
    assert_unique_positive(&all);
}

async fn a_server_killed_with_sigkill_never_reissues_an_id(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let client = reqwest::Client::new();
    let mut seen = Vec::new();
    for round in 0..3 {
        let server = ServerProcess::start(&url, &[]);
        if round == 0 && db != Db::Sqlite {
            crate::support::exec_sql(db, &url, "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES ('leaf-segment-test', 1, 2000)").await;
        }
        let mut ids = Vec::new();
        for _ in 0..300 {
            ids.push(get_id(&client, &server.address, "leaf-segment-test").await);
        }
        assert_increasing(&ids);
        if let Some(&prev) = seen.last() {
            assert!(ids[0] > prev, "round {round}: {} after {prev}", ids[0]);
        }
        seen.extend(ids);
        server.kill9();
    }
    assert_unique_positive(&seen);
}
crate::on_both_databases!(a_server_killed_with_sigkill_never_reissues_an_id);

#[tokio::test]
async fn sigterm_stops_the_server_cleanly() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let server = ServerProcess::start(&url, &[]);
    let client = reqwest::Client::new();
    get_id(&client, &server.address, "leaf-segment-test").await;
    let status = server.terminate();
    assert!(status.success(), "exit status {status:?}");
}
