//! A formatted tag's creation and deletion across two real server processes sharing one
//! database (issue 42, items 2, 3 and 9). What could go wrong, tried here:
//!
//! - a plain and a formatted create of one fresh name racing on two servers: the plain one
//!   answered 201 while the format stayed (both servers then served text), or a loser got
//!   `503 database_unavailable` instead of 409;
//! - a deleted formatted tag went on serving: on the deleting server, on another server after
//!   its refresh, after a `kill -9` and restart; a plain create then brought the old format
//!   back; a re-created tag repeated texts served before;
//! - the 409 for another format showed the stored format as escaped JSON.
//!
//! Each runs on SQLite (a file both processes open) and, ignored by a plain `cargo test`, on
//! MariaDB, PostgreSQL and PgBouncer (`scripts/test.sh`, or `LEAFID_TEST_MYSQL_URL` with
//! `--include-ignored`).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::on_both_databases;
use crate::support::process::ServerProcess;
use crate::support::{Db, fresh_db};

/// The refresh interval of the servers here: the longest a server that did not delete a tag
/// may serve it on.
const REFRESH_SECS: u64 = 1;

/// A server process on `url` refreshing every [`REFRESH_SECS`].
async fn server(url: &str) -> ServerProcess {
    let url = url.to_owned();
    tokio::task::spawn_blocking(move || {
        ServerProcess::start(
            &url,
            &[(
                "LEAFID__SEGMENT__REFRESH_INTERVAL_SECS",
                &REFRESH_SECS.to_string(),
            )],
        )
    })
    .await
    .unwrap()
}

/// Status and body (JSON, or the text as a JSON string) of one request.
async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    body: Option<String>,
) -> (u16, Value) {
    let mut req = client.request(method, url).timeout(Duration::from_secs(20));
    if let Some(body) = body {
        req = req.header("content-type", "application/json").body(body);
    }
    let resp = req.send().await.expect("the server answers");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

/// `POST /api/v1/tags` of `tag`, with `format` (JSON) or plain.
async fn create(
    client: &reqwest::Client,
    base: &str,
    tag: &str,
    format: Option<&str>,
) -> (u16, Value) {
    let body = match format {
        Some(f) => format!(r#"{{"biz_tag":"{tag}","step":20,"format":{f}}}"#),
        None => format!(r#"{{"biz_tag":"{tag}","step":20}}"#),
    };
    call(
        client,
        reqwest::Method::POST,
        format!("{base}/api/v1/tags"),
        Some(body),
    )
    .await
}

/// What one id route served: a number, or text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Served {
    Number(i64),
    Text(String),
}

/// One id from Leaf's route: what it served, or the status and error code.
async fn leaf_id(client: &reqwest::Client, base: &str, tag: &str) -> Result<Served, (u16, String)> {
    let (status, body) = call(
        client,
        reqwest::Method::GET,
        format!("{base}/api/segment/get/{tag}"),
        None,
    )
    .await;
    match (status, body) {
        (200, Value::Number(n)) => Ok(Served::Number(n.as_i64().expect("an i64"))),
        (200, Value::String(s)) => Ok(s
            .parse()
            .map_or_else(|_| Served::Text(s.clone()), Served::Number)),
        (200, other) => panic!("unexpected id body {other}"),
        (status, body) => Err((status, code(&body))),
    }
}

/// `count` ids from the batch route, or the status and error code.
async fn batch(
    client: &reqwest::Client,
    base: &str,
    tag: &str,
    count: usize,
) -> Result<Vec<Served>, (u16, String)> {
    let (status, body) = call(
        client,
        reqwest::Method::GET,
        format!("{base}/api/v1/segment/{tag}/ids?count={count}"),
        None,
    )
    .await;
    if status != 200 {
        return Err((status, code(&body)));
    }
    Ok(body["ids"]
        .as_array()
        .unwrap_or_else(|| panic!("no ids in {body}"))
        .iter()
        .map(|v| match v {
            Value::Number(n) => Served::Number(n.as_i64().unwrap()),
            Value::String(s) => Served::Text(s.clone()),
            other => panic!("unexpected id {other}"),
        })
        .collect())
}

fn code(body: &Value) -> String {
    body["code"].as_str().unwrap_or("no code").to_owned()
}

/// Whether a 201 body carries a format.
fn has_format(body: &Value) -> bool {
    body.get("format").is_some_and(|f| !f.is_null())
}

/// A plain and a formatted create of each of 40 fresh names, fired at the same moment on two
/// servers (which server gets which alternates; 8 names at a time): exactly one 201, the other
/// 409 (never a 503);
/// the 201 body says what the tag then serves, on both servers (and on both id routes).
async fn racing_plain_and_formatted_creates_tell_the_truth(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    // One after the other: the first creates the store (a second starting at the same moment
    // could find a new SQLite file still empty, which is refused).
    let a = server(&url).await;
    let b = server(&url).await;
    let client = reqwest::Client::new();
    const FORMAT: &str = r#"{"prefix":"R-","width":6}"#;
    let mut formatted_won = 0;
    let mut served = BTreeSet::new();
    // 5 waves of 8 races at once (16 creates in flight): every create of a wave waits at one
    // barrier, so the plain and the formatted create of each name start together.
    let mut outcomes = Vec::new();
    for wave in 0..5 {
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(16));
        let mut set = tokio::task::JoinSet::new();
        for i in wave * 8..wave * 8 + 8 {
            let tag = format!("race{i}");
            let (plain_on, formatted_on) = if i % 2 == 0 {
                (a.address.clone(), b.address.clone())
            } else {
                (b.address.clone(), a.address.clone())
            };
            let (client, s1, s2) = (client.clone(), start.clone(), start.clone());
            set.spawn(async move {
                let (plain, formatted) = tokio::join!(
                    async {
                        s1.wait().await;
                        create(&client, &plain_on, &tag, None).await
                    },
                    async {
                        s2.wait().await;
                        create(&client, &formatted_on, &tag, Some(FORMAT)).await
                    }
                );
                (tag, plain, formatted)
            });
        }
        while let Some(done) = set.join_next().await {
            outcomes.push(done.unwrap());
        }
    }
    assert_eq!(outcomes.len(), 40);
    for (tag, (plain_status, plain_body), (fmt_status, fmt_body)) in outcomes {
        let mut statuses = [plain_status, fmt_status];
        statuses.sort_unstable();
        assert_eq!(
            statuses,
            [201, 409],
            "{tag}: plain {plain_status} {plain_body}, formatted {fmt_status} {fmt_body}"
        );
        let loser = if plain_status == 409 {
            &plain_body
        } else {
            &fmt_body
        };
        assert_eq!(code(loser), "biz_tag_exists", "{tag}: {loser}");
        let formatted = fmt_status == 201;
        if formatted {
            formatted_won += 1;
            assert!(
                has_format(&fmt_body),
                "{tag}: a formatted 201 without its format: {fmt_body}"
            );
            assert_eq!(fmt_body["format"]["prefix"], "R-", "{tag}: {fmt_body}");
        } else {
            assert!(
                !has_format(&plain_body),
                "{tag}: a plain 201 with a format: {plain_body}"
            );
        }
        for server in [&a, &b] {
            let one = leaf_id(&client, &server.address, &tag)
                .await
                .unwrap_or_else(|e| panic!("{tag} on {}: {e:?}", server.address));
            let more = batch(&client, &server.address, &tag, 2)
                .await
                .unwrap_or_else(|e| panic!("{tag} on {}: {e:?}", server.address));
            for id in std::iter::once(one).chain(more) {
                match (&id, formatted) {
                    (Served::Text(t), true) => assert!(t.starts_with("R-"), "{tag}: {t}"),
                    (Served::Number(_), false) => {}
                    _ => panic!("{tag}: the 201 said formatted={formatted}, then served {id:?}"),
                }
                assert!(
                    served.insert((tag.clone(), id.clone())),
                    "{tag}: {id:?} served twice"
                );
            }
        }
    }
    eprintln!("formatted creates won {formatted_won} of 40 races");
    drop((a, b));
}
on_both_databases!(racing_plain_and_formatted_creates_tell_the_truth);

/// Both id routes of `tag` on `base` answer `404 unknown_biz_tag`, and so does its decode.
async fn assert_unknown(client: &reqwest::Client, base: &str, tag: &str, when: &str) {
    assert_eq!(
        leaf_id(client, base, tag).await,
        Err((404, "unknown_biz_tag".to_owned())),
        "{when}: Leaf's route"
    );
    assert_eq!(
        batch(client, base, tag, 2).await,
        Err((404, "unknown_biz_tag".to_owned())),
        "{when}: the batch route"
    );
    let (status, body) = call(
        client,
        reqwest::Method::GET,
        format!("{base}/api/v1/segment/{tag}/decode?id=INV-2026-000001"),
        None,
    )
    .await;
    assert_eq!(
        (status, code(&body).as_str()),
        (404, "unknown_biz_tag"),
        "{when}: decode {body}"
    );
}

/// Texts from both id routes of `tag` on `base`, each new to `seen`.
async fn serve_texts(client: &reqwest::Client, base: &str, tag: &str, seen: &mut BTreeSet<String>) {
    let one = leaf_id(client, base, tag).await.unwrap();
    let more = batch(client, base, tag, 3).await.unwrap();
    for id in std::iter::once(one).chain(more) {
        let Served::Text(t) = id else {
            panic!("a formatted tag served {id:?}")
        };
        assert!(t.starts_with("INV-"), "{t}");
        assert!(seen.insert(t.clone()), "{t} served twice");
    }
}

/// Delete means stopped: served on A and B, deleted on A; A answers 404 at once on both id
/// routes and decode, B within its refresh interval, A again after `kill -9` and a restart.
/// A plain create of the name is then 409 naming the kept format (readably, issue item 9),
/// another format 409, the same format 201 (its body showing the format), and the re-created
/// tag serves no text served before, on either server.
async fn a_deleted_formatted_tag_stops_everywhere(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    // One after the other: the first creates the store (a second starting at the same moment
    // could find a new SQLite file still empty, which is refused).
    let a = server(&url).await;
    let b = server(&url).await;
    let client = reqwest::Client::new();
    const FORMAT: &str = r#"{"prefix":"INV-","date":"yyyy-","width":6,"reset":"yearly"}"#;
    let (status, body) = create(&client, &a.address, "inv", Some(FORMAT)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["format"]["prefix"], "INV-", "{body}");
    let mut seen = BTreeSet::new();
    serve_texts(&client, &a.address, "inv", &mut seen).await;
    serve_texts(&client, &b.address, "inv", &mut seen).await;

    let (status, body) = call(
        &client,
        reqwest::Method::DELETE,
        format!("{}/api/v1/tags/inv", a.address),
        None,
    )
    .await;
    assert_eq!(status, 204, "{body}");
    assert_unknown(&client, &a.address, "inv", "the deleting server, at once").await;

    // B: within its refresh interval (and a generous margin for a loaded machine; the
    // reference is taken after the delete answered, later than the delete itself).
    let deadline = Instant::now() + Duration::from_secs(REFRESH_SECS) + Duration::from_secs(15);
    loop {
        match leaf_id(&client, &b.address, "inv").await {
            Err((404, c)) if c == "unknown_biz_tag" => break,
            Ok(Served::Text(t)) => {
                assert!(seen.insert(t.clone()), "{t} served twice");
                assert!(
                    Instant::now() < deadline,
                    "B still serves the deleted tag after its refresh"
                );
            }
            other => panic!("B: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_unknown(
        &client,
        &b.address,
        "inv",
        "the other server, after its refresh",
    )
    .await;

    // A killed and restarted: the stored format alone is no tag.
    a.kill9();
    let a = server(&url).await;
    assert_unknown(&client, &a.address, "inv", "after kill -9 and restart").await;

    // A plain create: refused, naming the kept format as a pattern, not JSON.
    let (status, body) = create(&client, &a.address, "inv", None).await;
    assert_eq!(
        (status, code(&body).as_str()),
        (409, "biz_tag_exists"),
        "{body}"
    );
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("INV-yyyy-######"), "{message}");
    assert!(
        message.contains("create it again with that format"),
        "{message}"
    );
    assert!(
        !message.contains('{') && !message.contains('\\'),
        "{message}"
    );
    assert_unknown(&client, &a.address, "inv", "after a refused plain create").await;
    // Another format: refused the same readable way.
    let (status, body) = create(&client, &b.address, "inv", Some(r#"{"width":3}"#)).await;
    assert_eq!(
        (status, code(&body).as_str()),
        (409, "biz_tag_exists"),
        "{body}"
    );
    let message = body["message"].as_str().unwrap();
    assert!(message.contains("INV-yyyy-######"), "{message}");
    assert!(
        !message.contains('{') && !message.contains('\\'),
        "{message}"
    );

    // The same format: created again; serving continues above everything served before.
    let (status, body) = create(&client, &b.address, "inv", Some(FORMAT)).await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["format"]["prefix"], "INV-", "{body}");
    serve_texts(&client, &b.address, "inv", &mut seen).await;
    serve_texts(&client, &a.address, "inv", &mut seen).await;
    serve_texts(&client, &b.address, "inv", &mut seen).await;
    drop((a, b));
}
on_both_databases!(a_deleted_formatted_tag_stops_everywhere);
