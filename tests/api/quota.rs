//! Caller quotas on the real stores (issue 44): the period share's grants
//! (`leafid_quota_use`, `QuotaStore::grant`) hold over several servers racing on one database.

use std::sync::Arc;
use std::time::Duration;

use leafid::service::quota::{QuotaError, QuotaKey, Quotas, chunk_of, share_of};
use leafid::store::{Database, DbOptions};

use crate::support::{Db, fresh_db};

async fn connect(url: &str) -> Database {
    let url = url.to_owned();
    let opts = DbOptions {
        pgbouncer: crate::support::postgres::is_pgbouncer(&url),
        url,
        max_connections: 4,
        acquire_timeout: Duration::from_secs(5),
        mysql_single_statement_lease: false,
    };
    Database::connect(&opts).await.unwrap()
}

/// Three servers (three ledgers on three connections to one database) racing for one token's
/// share of a width-6 daily tag's period (1% of 999,999: 9,999 ids): together they hand out at
/// most the limit, and at least the limit less one chunk per server; the database's `used` is
/// exactly what was granted; a direct grant past the limit gives nothing.
async fn a_period_share_holds_over_three_servers_on_one_database(db: Db) {
    let (url, dir) = fresh_db(db).await;
    let mut databases = Vec::new();
    for _ in 0..3 {
        databases.push(connect(&url).await);
    }
    let limit = share_of(999_999, 10_000);
    let mut tasks = Vec::new();
    for s in 0..3 {
        let store = databases[s].quota_store();
        tasks.push(tokio::spawn(async move {
            let q = Quotas::new(store, Duration::from_secs(10));
            let token: Arc<str> = "team-a".into();
            let mut taken = 0u64;
            for i in 0..400 {
                let want = 1 + ((i * 7 + s * 13) % 97) as u64;
                match q
                    .take_period(&token, "orders", "20261128", limit, want, 60)
                    .await
                {
                    Ok(n) => {
                        assert!(n >= 1 && n <= want);
                        taken += n;
                    }
                    Err(QuotaError::Period { .. }) => {}
                    Err(e) => panic!("server {s}: {e}"),
                }
            }
            taken
        }));
    }
    let mut taken = 0;
    for t in tasks {
        taken += t.await.unwrap();
    }
    assert!(taken <= limit, "{taken} ids handed out, limit {limit}");
    assert!(taken + 3 * chunk_of(limit) >= limit, "{taken} of {limit}");
    let store = databases[0].quota_store();
    let key = QuotaKey {
        token: "team-a",
        tag: "orders",
        period: "20261128",
    };
    assert_eq!(
        store.grant(&key, 1, limit).await.unwrap(),
        0,
        "granted past the limit"
    );
    // Another token, tag or period is counted apart.
    let other = QuotaKey {
        token: "team-b",
        ..key
    };
    assert_eq!(store.grant(&other, 5, limit).await.unwrap(), 5);
    // The compare-and-set itself, hammered: three servers granting 7 at a time against a limit
    // of 500 grant exactly 500 together (the last grant of each is cut to what is left).
    let race = QuotaKey {
        token: "team-c",
        ..key
    };
    let mut grants = Vec::new();
    for d in &databases {
        let store = d.quota_store();
        grants.push(tokio::spawn(async move {
            let key = QuotaKey {
                token: "team-c",
                tag: "orders",
                period: "20261128",
            };
            let mut got = 0;
            for _ in 0..40 {
                got += store.grant(&key, 7, 500).await.unwrap();
            }
            got
        }));
    }
    let mut granted = 0;
    for g in grants {
        granted += g.await.unwrap();
    }
    assert_eq!(granted, 500);
    assert_eq!(store.grant(&race, 1, 500).await.unwrap(), 0);
    for d in &databases {
        d.close().await;
    }
    drop(dir);
}
crate::on_both_databases!(a_period_share_holds_over_three_servers_on_one_database);
