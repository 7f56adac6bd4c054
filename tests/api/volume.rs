//! Issue 42 (items 5, 7, 9): a permuted tag's volume stays hidden, and the views are bounded
//! by tags, not by days. What could go wrong, tried here on real servers: an anonymous reader
//! (or one with a wrong token) finding a permuted tag's issued count, next id, leased `max_id`
//! or fill in any monitor view or in `/metrics`; a period row listed as a tag; a page of the
//! tag list skipping or repeating a tag, or a database collation reordering them.

use std::collections::HashSet;
use std::sync::Arc;

use leafid::shapes::keys::KeyRing;

use crate::on_both_databases;
use crate::support::{Db, Reply, TestApp, exec_sql, fresh_db, spawn_on};

const TOKEN: &str = "t0ken";
/// A daily permuted tag: its periods are rows `vault@yyyyMMdd`.
const VAULT: &str = r#"{"prefix":"V-","date":"yyyyMMdd","width":8,"reset":"daily","time_zone":"UTC","permute":{"key_id":"vault"}}"#;
/// The count of the issue's report.
const ISSUED: usize = 4321;

/// Every monitor view of the server.
const VIEWS: [&str; 6] = [
    "/metrics",
    "/api/v1/cache",
    "/cache",
    "/db",
    "/api/v1/tags",
    "/api/v1/tags/vault",
];

async fn get(app: &TestApp, path: &str, token: Option<&str>) -> Reply {
    let r = app.send(reqwest::Method::GET, path, None, token).await;
    assert_eq!(r.status, 200, "{path}: {}", r.text);
    r
}

/// Whether `text` holds the integer `n` as a number of its own (not as digits of a longer
/// number, nor the fraction digits of a float such as a request duration).
fn holds_number(text: &str, n: i64) -> bool {
    let needle = n.to_string();
    text.match_indices(&needle).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + needle.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit() || c == '.')
            && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

/// Anonymous and wrong-token reads of every view show none of a permuted tag's counts after
/// 4,321 codes; the admin token shows them. A plain tag's counts stay open to everyone.
#[tokio::test]
async fn anonymous_views_show_no_permuted_counts() {
    let (url, _dir) = fresh_db(Db::Sqlite).await;
    let app = spawn_on(&url, |s| {
        s.shape_keys = Arc::new(KeyRing::from_keys([("vault".to_owned(), [0x42; 32])]));
        s.admin.trust_loopback = false;
        s.admin.token = Some(leafid::config::Secret::new(TOKEN));
    })
    .await;
    let body = format!(r#"{{"biz_tag":"vault","step":1000,"format":{VAULT}}}"#);
    let r = app
        .send(
            reqwest::Method::POST,
            "/api/v1/tags",
            Some(&body),
            Some(TOKEN),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let r = app
        .send(
            reqwest::Method::POST,
            "/api/v1/tags",
            Some(r#"{"biz_tag":"plain","step":100,"max_id":123457}"#),
            Some(TOKEN),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.text);
    let codes = app
        .get(&format!("/api/v1/segment/vault/ids?count={ISSUED}"))
        .await;
    assert_eq!(codes.status, 200, "{}", codes.text);
    assert_eq!(codes.json()["ids"].as_array().unwrap().len(), ISSUED);
    assert_eq!(app.leaf_id("plain").await, 123_457);

    // The secret numbers, as the admin sees them: the issued count, the buffer's positions,
    // the period row's max_id.
    let cache = get(&app, "/api/v1/cache", Some(TOKEN)).await.json();
    let buffer = cache["tags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["biz_tag"].as_str().unwrap().starts_with("vault@"))
        .unwrap_or_else(|| panic!("the admin sees the period's buffer: {cache}"))
        .clone();
    let row_name = buffer["biz_tag"].as_str().unwrap().to_owned();
    assert_eq!(buffer["ids_issued"], ISSUED as u64, "{buffer}");
    let next_id = buffer["segments"]
        .as_array()
        .unwrap()
        .iter()
        .find(|seg| seg["state"] == "current")
        .and_then(|seg| seg["next_id"].as_i64())
        .unwrap_or_else(|| panic!("a current segment: {buffer}"));
    assert_eq!(next_id, ISSUED as i64 + 1, "{buffer}");
    let mut secret: HashSet<i64> = HashSet::from([ISSUED as i64, next_id]);
    let db_admin = get(&app, "/db", Some(TOKEN)).await.text;
    let leased = db_admin
        .split(&format!("<tr><td>{row_name}</td><td>"))
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .and_then(|n| n.parse::<i64>().ok())
        .unwrap_or_else(|| panic!("the admin sees the period row's max_id: {db_admin}"));
    secret.insert(leased);
    assert!(leased > ISSUED as i64, "{db_admin}");

    for path in VIEWS {
        for token in [None, Some("wrong")] {
            let text = get(&app, path, token).await.text;
            for n in &secret {
                assert!(
                    !holds_number(&text, *n),
                    "{path} with {token:?} shows {n}:\n{text}"
                );
            }
            if path == "/db" {
                // Leaf's page of the rows lists the period rows, their counts hidden.
                assert!(text.contains("<td>hidden</td>"), "{text}");
            } else {
                assert!(!text.contains("vault@"), "{path}: a period row: {text}");
            }
            // A plain tag is shown as before.
            if path != "/api/v1/tags/vault" {
                assert!(text.contains("plain"), "{path}: {text}");
            }
        }
        // The admin token shows the counts (the metrics' issued total, the buffers' next id,
        // the period row's max_id, the fill).
        let text = get(&app, path, Some(TOKEN)).await.text;
        let expected = match path {
            "/metrics" => ISSUED as i64,
            "/db" => leased,
            "/api/v1/tags" | "/api/v1/tags/vault" => {
                assert!(text.contains(r#""used":"#), "{path}: {text}");
                ISSUED as i64 + 1
            }
            _ => ISSUED as i64 + 1,
        };
        assert!(
            holds_number(&text, expected),
            "{path} (admin) lacks {expected}: {text}"
        );
    }

    // The anonymous JSON says what it left out.
    let shown = get(&app, "/api/v1/tags/vault", None).await.json();
    assert_eq!(shown["volume_hidden"], true, "{shown}");
    assert!(
        shown["buffer"].is_null() && shown.get("used").is_none(),
        "{shown}"
    );
    assert_eq!(shown["format"]["permute"]["key_id"], "vault", "{shown}");
    assert_eq!(
        shown["period"],
        row_name.split('@').nth(1).unwrap(),
        "{shown}"
    );
    let cache = get(&app, "/api/v1/cache", None).await.json();
    assert!(cache["formatted"][0]["used"].is_null(), "{cache}");
    let plain = get(&app, "/api/v1/tags/plain", None).await.json();
    assert_eq!(plain["buffer"]["ids_issued"], 1, "{plain}");
    assert!(plain.get("volume_hidden").is_none(), "{plain}");
}

/// Runs `sql` on the database `url` of `db`: SQLite through a connection of its own.
async fn run_sql(db: Db, url: &str, sql: &str) {
    if db != Db::Sqlite {
        return exec_sql(db, url, sql).await;
    }
    use sqlx::Connection;
    let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&mut c)
        .await
        .unwrap();
}

/// The `rel="next"` target of a `Link` header.
fn next_of(link: Option<&str>) -> Option<String> {
    let link = link?;
    assert!(link.ends_with(r#">; rel="next""#), "{link}");
    Some(link.strip_prefix('<')?.split('>').next()?.to_owned())
}

/// 2,500 tags (mixed case, so a case-folding collation would order them otherwise) and period
/// rows among them, listed by pages of 1,000 following `Link: rel="next"`: every tag once, in
/// bytewise order, never a period row; a bad `limit` is `invalid_request`.
async fn the_tag_list_pages_through_every_tag_once(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let app = spawn_on(&url, |_| {}).await;
    // The rows a fresh database holds already (the migrations' seed).
    let seeded: Vec<String> = app.get("/api/v1/tags").await.json()["tags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["biz_tag"].as_str().unwrap().to_owned())
        .collect();
    let mut tags: Vec<String> = (0..2500)
        .map(|i| {
            if i % 2 == 0 {
                format!("k{i:05}")
            } else {
                format!("K{i:05}")
            }
        })
        .collect();
    // Tags whose cursor must be percent-encoded in the `Link` header (':' is).
    tags.extend(["ns:a.b-c".to_owned(), "ns:a.b-d".to_owned()]);
    let mut values: Vec<String> = tags.iter().map(|t| format!("('{t}', 1, 10)")).collect();
    for day in 1..=30 {
        values.push(format!("('k00000@202611{day:02}', 5, 10)"));
    }
    let sql = format!(
        "INSERT INTO leaf_alloc (biz_tag, max_id, step) VALUES {}",
        values.join(", ")
    );
    run_sql(db, &url, &sql).await;
    tags.extend(seeded);
    tags.sort();
    let total = tags.len();

    let mut seen: Vec<String> = Vec::new();
    let mut next = Some("/api/v1/tags?limit=1000".to_owned());
    let mut pages = 0;
    while let Some(path) = next.take() {
        let r = app
            .client
            .get(format!("{}{path}", app.address))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        next = next_of(r.headers().get("link").and_then(|v| v.to_str().ok()));
        let body: serde_json::Value = r.json().await.unwrap();
        let page = body["tags"].as_array().unwrap();
        assert!(page.len() <= 1000, "{}", page.len());
        seen.extend(
            page.iter()
                .map(|t| t["biz_tag"].as_str().unwrap().to_owned()),
        );
        pages += 1;
        assert!(pages <= 3, "more pages than 2,500 tags need");
    }
    assert_eq!(pages, total.div_ceil(1000));
    assert_eq!(seen.len(), total, "every tag once, no period row");
    let first_off = seen.iter().zip(&tags).position(|(a, b)| a != b);
    assert_eq!(first_off, None, "bytewise order");

    // Without a limit: the first 1,000, and the next page named.
    let r = app
        .client
        .get(format!("{}/api/v1/tags", app.address))
        .send()
        .await
        .unwrap();
    let link = r
        .headers()
        .get("link")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        link,
        format!(
            r#"</api/v1/tags?limit=1000&after={}>; rel="next""#,
            tags[999]
        )
    );
    // A larger limit is read as 1,000.
    let big = app.get("/api/v1/tags?limit=5000").await.json();
    assert_eq!(big["tags"].as_array().unwrap().len(), 1000);
    let last = app
        .get(&format!("/api/v1/tags?after={}", tags[total - 2]))
        .await
        .json();
    assert_eq!(last["tags"][0]["biz_tag"], tags[total - 1].as_str());
    assert_eq!(last["tags"].as_array().unwrap().len(), 1);
    // The cursor of a tag with ':' survives the round trip, and `stringify_ids` is kept.
    let r = app
        .client
        .get(format!(
            "{}/api/v1/tags?limit=1&after=nr&stringify_ids=true",
            app.address
        ))
        .send()
        .await
        .unwrap();
    let next = next_of(r.headers().get("link").and_then(|v| v.to_str().ok())).unwrap();
    assert_eq!(
        next,
        "/api/v1/tags?limit=1&after=ns%3Aa.b-c&stringify_ids=true"
    );
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["tags"][0]["max_id"], "1", "stringified: {body}");
    let after = app.get(&next).await.json();
    assert_eq!(after["tags"][0]["biz_tag"], "ns:a.b-d", "{after}");
    for bad in ["0", "-1", "x", "1.5", ""] {
        let r = app.get(&format!("/api/v1/tags?limit={bad}")).await;
        assert_eq!(r.status, 400, "limit={bad}: {}", r.text);
        assert_eq!(r.code(), "invalid_request");
    }
}
on_both_databases!(the_tag_list_pages_through_every_tag_once);
