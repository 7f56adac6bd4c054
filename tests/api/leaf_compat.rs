//! An existing Leaf deployment: its table, its rows, its clients.

use crate::support::mysql::{create_database, exec_in, row};
use crate::support::{assert_increasing, spawn_on};

/// Leaf's DDL from its README, verbatim in every column.
const LEAF_DDL: &str = "CREATE TABLE `leaf_alloc` (
  `biz_tag` varchar(128)  NOT NULL DEFAULT '',
  `max_id` bigint(20) NOT NULL DEFAULT '1',
  `step` int(11) NOT NULL,
  `description` varchar(256)  DEFAULT NULL,
  `update_time` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (`biz_tag`)
) ENGINE=InnoDB";

#[tokio::test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn a_database_leaf_created_is_adopted_with_its_rows_and_max_ids() {
    let url = create_database().await;
    exec_in(&url, LEAF_DDL).await;
    // Rows as a Leaf that has been running for a while leaves them.
    exec_in(
        &url,
        "INSERT INTO leaf_alloc(biz_tag, max_id, step, description) VALUES \
         ('leaf-segment-test', 1, 2000, 'Test leaf Segment Mode Get Id'), \
         ('order_id', 734000, 1000, 'orders, already served by Leaf up to 733999')",
    )
    .await;

    let app = spawn_on(&url, |_| {}).await;
    assert_eq!(app.leaf_id("leaf-segment-test").await, 1);
    let ids: Vec<i64> = futures_ids(&app, "order_id", 50).await;
    assert_eq!(ids[0], 734000, "continues where Leaf stopped");
    assert_increasing(&ids);
    let (max_id, step) = row(&url, "order_id").await.unwrap();
    assert!(max_id >= 735000, "leases advanced Leaf's row: {max_id}");
    assert_eq!(step, 1000, "the DBA's step is untouched");

    // Leaf itself could keep running on the same table: its UPDATE still works beside ours.
    exec_in(
        &url,
        "UPDATE leaf_alloc SET max_id = max_id + step WHERE biz_tag = 'order_id'",
    )
    .await;
    let more = futures_ids(&app, "order_id", 2000).await;
    assert_increasing(&more);
    assert!(more[0] > *ids.last().unwrap());
}

async fn futures_ids(app: &crate::support::TestApp, tag: &str, n: usize) -> Vec<i64> {
    let mut v = Vec::with_capacity(n);
    for _ in 0..n {
        v.push(app.leaf_id(tag).await);
    }
    v
}
