//! What only PostgreSQL has: leases under `serializable` (serialization failures retried, no
//! range taken twice), servers migrating one database at once, and what PgBouncer's transaction
//! pooling does to a server without `database.pgbouncer`. Each runs directly and through
//! PgBouncer where that means something.

use std::time::Duration;

use leafid::segment::{BizTag, NewTag, Step};
use leafid::store::{Database, DbOptions};
use sqlx::Connection;
use sqlx::postgres::PgConnection;

use crate::support::postgres::{is_pgbouncer, server_url, with_database};
use crate::support::proxy::{FaultProxy, socket_of, through};
use crate::support::{Db, fresh_db};

fn options(url: &str, pgbouncer: bool) -> DbOptions {
    DbOptions {
        url: url.to_owned(),
        max_connections: 4,
        acquire_timeout: Duration::from_secs(10),
        mysql_single_statement_lease: true,
        pgbouncer,
    }
}

/// The database name of a `postgres://.../NAME` URL.
fn name_of(url: &str) -> &str {
    url.rsplit('/').next().unwrap()
}

/// The same database on the server itself (not through PgBouncer).
fn direct(url: &str) -> String {
    with_database(server_url(), name_of(url))
}

/// A one-off query on the server (simple protocol).
async fn scalar(url: &str, sql: &'static str) -> i64 {
    let mut conn = PgConnection::connect(&direct(url)).await.unwrap();
    sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
}

/// Three servers' stores, four tasks each, lease one tag with a tiny step (every lease a
/// conflict with another) while the database defaults to `serializable`: every range is
/// disjoint from every other, and together they cover exactly what `max_id` moved by.
async fn serializable_leases_from_three_stores_never_overlap(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    crate::support::postgres::exec_in(
        &direct(&url),
        &format!(
            "ALTER DATABASE {} SET default_transaction_isolation = 'serializable'",
            name_of(&url)
        ),
    )
    .await;
    let mut stores = Vec::new();
    for _ in 0..3 {
        stores.push(
            Database::connect(&options(&url, is_pgbouncer(&url)))
                .await
                .unwrap(),
        );
    }
    let tag = BizTag::parse("hot").unwrap();
    let new = NewTag::new(tag, Step::try_from(3).unwrap(), Some(1), None).unwrap();
    stores[0].segment_store().create_tag(&new).await.unwrap();
    let rollbacks_before = scalar(
        &url,
        "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()",
    )
    .await;
    let mut tasks = Vec::new();
    for (s, store) in stores.iter().enumerate() {
        for t in 0..4 {
            let segments = store.segment_store();
            tasks.push(tokio::spawn(async move {
                let mut ranges = Vec::new();
                for i in 0..40 {
                    // Adapted steps and the row's own step, mixed.
                    let step = ((s + t + i) % 3 != 0).then_some(2 + (i as i64 % 5));
                    let lease = segments.lease("hot", step).await.unwrap();
                    ranges.push((lease.max_id - lease.leased, lease.max_id));
                }
                ranges
            }));
        }
    }
    let mut ranges = Vec::new();
    for t in tasks {
        ranges.extend(t.await.unwrap());
    }
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "ranges {:?} and {:?} overlap", w[0], w[1]);
    }
    let leased: i64 = ranges.iter().map(|(from, to)| to - from).sum();
    let row = stores[0]
        .segment_store()
        .get_tag("hot")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        row.max_id,
        1 + leased,
        "max_id moved by more than the leases took"
    );
    // The retry path ran: serialization failures rolled statements back. A backend reports its
    // counts to pg_stat_database at most once a second while busy, and 10 s into an idle spell
    // (PostgreSQL 15; a PgBouncer keeps its server connections open): the pools are closed
    // first, then the counter is read until it shows them (about 10 s here, 30 s at most).
    for store in &stores {
        store.close().await;
    }
    let mut rollbacks = rollbacks_before;
    for _ in 0..150 {
        rollbacks = scalar(
            &url,
            "SELECT xact_rollback FROM pg_stat_database WHERE datname = current_database()",
        )
        .await;
        if rollbacks > rollbacks_before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(
        rollbacks > rollbacks_before,
        "no statement was rolled back: the test did not provoke a serialization failure"
    );
}

mod serializable_leases_from_three_stores_never_overlap {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PostgreSQL: scripts/test.sh runs it"]
    async fn postgres() {
        super::serializable_leases_from_three_stores_never_overlap(crate::support::Db::Postgres)
            .await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PgBouncer and PostgreSQL: scripts/test.sh runs it"]
    async fn pgbouncer() {
        super::serializable_leases_from_three_stores_never_overlap(crate::support::Db::PgBouncer)
            .await;
    }
}

/// Three servers starting on one empty database at once all come up, and the migrations are
/// applied once each.
async fn three_stores_migrating_at_once_all_start(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let opts = options(&url, is_pgbouncer(&url));
    let (a, b, c) = tokio::join!(
        Database::connect(&opts),
        Database::connect(&opts),
        Database::connect(&opts)
    );
    let stores = [a.unwrap(), b.unwrap(), c.unwrap()];
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/postgres"))
        .unwrap()
        .count() as i64;
    let applied = scalar(&url, "SELECT COUNT(*) FROM _sqlx_migrations WHERE success").await;
    assert_eq!(applied, files);
    for store in &stores {
        assert_eq!(store.kind(), "postgres");
        store.close().await;
    }
}

mod three_stores_migrating_at_once_all_start {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PostgreSQL: scripts/test.sh runs it"]
    async fn postgres() {
        super::three_stores_migrating_at_once_all_start(crate::support::Db::Postgres).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[ignore = "needs PgBouncer and PostgreSQL: scripts/test.sh runs it"]
    async fn pgbouncer() {
        super::three_stores_migrating_at_once_all_start(crate::support::Db::PgBouncer).await;
    }
}

/// Through PgBouncer without `database.pgbouncer`, sqlx's prepared statements meet server
/// connections that never saw them, or that hold another client's of the same name: a server
/// fails to start (its migrator's statements) or its reads fail with `prepared statement
/// "sqlx_s_N" already exists` (42P05) or `... does not exist` (26000). The same load with the
/// setting on passes (every `pgbouncer` test of the suite runs with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PgBouncer and PostgreSQL: scripts/test.sh runs it"]
async fn without_the_setting_pgbouncer_loses_prepared_statements() {
    let (url, _dir) = fresh_db(Db::PgBouncer).await;
    let mut errors = Vec::new();
    let mut stores = Vec::new();
    for _ in 0..3 {
        match Database::connect(&options(&url, false)).await {
            Ok(store) => stores.push(store),
            Err(e) => errors.push(format!("start-up: {e:#}")),
        }
    }
    let tag = BizTag::parse("t").unwrap();
    let new = NewTag::new(tag, Step::try_from(10).unwrap(), Some(1), None).unwrap();
    if let Some(store) = stores.first()
        && let Err(e) = store.segment_store().create_tag(&new).await
    {
        errors.push(format!("create: {e:#}"));
    }
    let mut tasks = Vec::new();
    for store in &stores {
        for _ in 0..4 {
            let segments = store.segment_store();
            tasks.push(tokio::spawn(async move {
                for _ in 0..200 {
                    if let Err(e) = segments.get_tag("t").await {
                        return Some(format!("read: {e:#}"));
                    }
                }
                None
            }));
        }
    }
    for t in tasks {
        errors.extend(t.await.unwrap());
    }
    assert!(
        errors.iter().any(|e| e.contains("prepared statement")),
        "no prepared-statement error through PgBouncer: {errors:?}"
    );
    eprintln!("without database.pgbouncer: {}", errors[0]);
    for store in &stores {
        store.close().await;
    }
}

/// What a lease costs in round trips, directly and through PgBouncer with the setting: the
/// same. Directly, the statement, plus sqlx's check of the connection (a `Sync`) when the pool
/// hands it out and when it goes back: three client writes per lease. Behind PgBouncer the
/// lease is one simple-protocol statement, so also three (wrapped in `BEGIN ... COMMIT` with a
/// separate prepare, as every other statement there, it was six). Counted by a fault proxy in
/// front of each: its client-to-upstream reads over 200 sequential leases (a read split in
/// two would only add; the last release's check may come after the count). The latency is printed with `--nocapture`. Consecutive leases follow
/// each other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PgBouncer and PostgreSQL: scripts/test.sh runs it"]
async fn a_lease_costs_the_same_round_trips_directly_and_through_pgbouncer() {
    const LEASES: u64 = 200;
    let mut report = Vec::new();
    let mut writes = Vec::new();
    for db in [Db::Postgres, Db::PgBouncer] {
        let (url, _dir) = fresh_db(db).await;
        let proxy = FaultProxy::start(socket_of(&url)).await.unwrap();
        let store = Database::connect(&options(&through(&proxy, &url), is_pgbouncer(&url)))
            .await
            .unwrap();
        let tag = BizTag::parse("lat").unwrap();
        let new = NewTag::new(tag, Step::try_from(10).unwrap(), Some(1), None).unwrap();
        let segments = store.segment_store();
        segments.create_tag(&new).await.unwrap();
        let mut last = segments.lease("lat", None).await.unwrap().max_id;
        let before = proxy.client_chunks();
        let mut took = Vec::new();
        for _ in 0..LEASES {
            let started = std::time::Instant::now();
            let lease = segments.lease("lat", None).await.unwrap();
            took.push(started.elapsed());
            assert_eq!(lease.max_id, last + 10, "leases follow each other");
            last = lease.max_id;
        }
        let sent = proxy.client_chunks() - before;
        took.sort();
        report.push(format!(
            "{db:?}: {sent} client writes, p50 {:.2} ms, p99 {:.2} ms",
            took[took.len() / 2].as_secs_f64() * 1e3,
            took[took.len() * 99 / 100].as_secs_f64() * 1e3
        ));
        writes.push(sent);
        store.close().await;
    }
    eprintln!(
        "lease cost, {LEASES} sequential leases: {}",
        report.join("; ")
    );
    let (direct, bouncer) = (writes[0], writes[1]);
    assert!(
        (3 * LEASES - 5..=3 * LEASES + LEASES / 10).contains(&direct),
        "directly: {direct} client writes for {LEASES} leases"
    );
    assert!(
        bouncer <= direct + LEASES / 10,
        "through PgBouncer: {bouncer} client writes for {LEASES} leases, directly {direct}"
    );
}

/// The one-statement lease behind PgBouncer (`inline_lease`) whose answer never comes: the
/// statement commits at PostgreSQL, but the fault proxy in front of PgBouncer holds its answer.
/// The store never returns that range (the caller gives up), and the next lease, once the
/// answer flows again, starts above it: a range whose commit was not confirmed is skipped,
/// never handed out, and no range is leased twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PgBouncer and PostgreSQL: scripts/test.sh runs it"]
async fn a_pgbouncer_lease_whose_answer_never_comes_is_never_handed_out() {
    let (url, _dir) = fresh_db(Db::PgBouncer).await;
    let proxy = FaultProxy::start(socket_of(&url)).await.unwrap();
    let store = Database::connect(&options(&through(&proxy, &url), true))
        .await
        .unwrap();
    let new = NewTag::new(
        BizTag::parse("held").unwrap(),
        Step::try_from(10).unwrap(),
        Some(1),
        None,
    )
    .unwrap();
    let segments = store.segment_store();
    segments.create_tag(&new).await.unwrap();
    let first = segments.lease("held", None).await.unwrap().max_id;
    proxy.stall_after(crate::support::proxy::runs_a_pg_statement);
    let held = tokio::time::timeout(Duration::from_secs(2), segments.lease("held", None)).await;
    assert!(
        held.is_err(),
        "a lease answered through a stalled proxy: {held:?}"
    );
    assert!(proxy.is_stalled(), "the lease never reached the database");
    proxy.heal();
    let next = segments.lease("held", None).await.unwrap().max_id;
    // The held lease committed `first + 10`; the next one is the range after it.
    assert_eq!(next, first + 20, "the held lease's range was leased again");
    store.close().await;
}
