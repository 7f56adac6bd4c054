//! `leafid tags {list, show, create, set-step}` as a DBA runs them: the built binary against a
//! temporary SQLite file and a fresh MariaDB database, its stdout, stderr and exit code
//! (0 ok, 1 unknown tag, tag exists or database unreachable, 2 bad input).

use std::process::{Command, Output};

use serde_json::Value;
use sqlx::Connection;

fn leafid(db_url: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_leafid"))
        .args(args)
        .env("LEAFID__DATABASE__URL", db_url)
        .env("LEAFID__DATABASE__ACQUIRE_TIMEOUT_MS", "2000")
        .output()
        .expect("the leafid binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[track_caller]
fn assert_exit(out: &Output, code: i32, needle: &str) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let shown = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(shown.contains(needle), "{needle:?} in {shown}");
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

/// The DBA's round: create, list, show, set-step, and every refusal with its exit code.
fn dba_round(url: &str) {
    let created = leafid(
        url,
        &[
            "tags", "create", "orders", "--step", "500", "--max-id", "1000",
        ],
    );
    assert_exit(&created, 0, "orders");
    let again = leafid(url, &["tags", "create", "orders", "--step", "5"]);
    assert_exit(&again, 1, "exists");

    let listed = leafid(url, &["tags", "list", "--json"]);
    assert_exit(&listed, 0, "orders");
    let rows = json(&listed);
    let orders = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["biz_tag"] == "orders")
        .expect("orders is listed");
    assert_eq!(orders["step"], 500);
    assert_eq!(orders["max_id"], 1000);
    assert_exit(&leafid(url, &["tags", "list"]), 0, "orders");

    assert_exit(
        &leafid(url, &["tags", "set-step", "orders", "2000"]),
        0,
        "2000",
    );
    let shown = leafid(url, &["tags", "show", "orders", "--json"]);
    assert_exit(&shown, 0, "orders");
    assert_eq!(json(&shown)["step"], 2000);

    assert_exit(
        &leafid(url, &["tags", "show", "nope"]),
        1,
        "unknown biz_tag",
    );
    assert_exit(
        &leafid(url, &["tags", "set-step", "nope", "5"]),
        1,
        "unknown biz_tag",
    );
    assert_exit(
        &leafid(url, &["tags", "set-step", "orders", "0"]),
        2,
        "invalid step",
    );
    assert_exit(
        &leafid(url, &["tags", "set-step", "orders", "1000000001"]),
        2,
        "invalid step",
    );
    assert_exit(&leafid(url, &["tags", "show", "a b"]), 2, "invalid biz_tag");
    assert_exit(
        &leafid(url, &["tags", "create", "x/y", "--step", "5"]),
        2,
        "invalid biz_tag",
    );
}

#[test]
fn tags_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("leafid.db").display());
    dba_round(&url);
}

#[tokio::test]
#[ignore = "needs MariaDB: scripts/test.sh runs it"]
async fn tags_on_mariadb() {
    let server = match std::env::var("LEAFID_TEST_MYSQL_URL") {
        Ok(url) => url.trim_end_matches('/').to_owned(),
        Err(_) => {
            let out = Command::new("bash")
                .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/mariadb.sh"))
                .arg("start")
                .output()
                .expect("scripts/mariadb.sh runs");
            assert!(out.status.success(), "{}", text(&out.stderr));
            text(&out.stdout).trim().to_owned()
        }
    };
    let name = format!("leafid_cli_{}", std::process::id());
    let mut conn = sqlx::mysql::MySqlConnection::connect(&server)
        .await
        .expect("connect to the test MariaDB");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE IF EXISTS {name}; CREATE DATABASE {name}"
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    let url = format!("{server}/{name}");
    tokio::task::spawn_blocking(move || dba_round(&url))
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP DATABASE {name}")))
        .execute(&mut conn)
        .await
        .unwrap();
}

/// A tag deleted (through the admin API's store call) cannot be created again below the ids
/// it issued: one line, exit 1, naming the `--max-id` that resumes it.
#[tokio::test]
async fn create_refuses_a_deleted_tag_below_its_high_water_mark() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("leafid.db").display());
    let create = |args: &'static [&'static str]| {
        let url = url.clone();
        tokio::task::spawn_blocking(move || leafid(&url, args))
    };
    let made = create(&[
        "tags", "create", "orders", "--step", "500", "--max-id", "1000",
    ]);
    assert_exit(&made.await.unwrap(), 0, "orders");
    let db = leafid::store::Database::connect(&leafid::store::DbOptions {
        url: url.clone(),
        max_connections: 1,
        acquire_timeout: std::time::Duration::from_secs(5),
        mysql_single_statement_lease: true,
        pgbouncer: false,
    })
    .await
    .unwrap();
    let store = db.segment_store();
    store.lease("orders", None).await.unwrap();
    assert!(store.delete_tag("orders").await.unwrap());
    db.close().await;

    let refused = create(&["tags", "create", "orders", "--step", "500"])
        .await
        .unwrap();
    assert_exit(&refused, 1, "--max-id 1500 or higher");
    assert_eq!(text(&refused.stderr).trim().lines().count(), 1, "one line");
    let resumed = create(&[
        "tags", "create", "orders", "--step", "500", "--max-id", "1500",
    ]);
    assert_exit(&resumed.await.unwrap(), 0, "1500");
}

#[test]
fn an_unreachable_database_is_exit_1_and_bad_input_still_exit_2() {
    // Port 1 on loopback: nothing listens, so the connection is refused at once.
    let url = "mysql://leafid:leafid@127.0.0.1:1/leafid";
    assert_exit(&leafid(url, &["tags", "list"]), 1, "unreachable");
    assert_exit(
        &leafid(url, &["tags", "set-step", "orders", "-1"]),
        2,
        "invalid step",
    );
}

#[test]
fn healthcheck_fails_when_nothing_listens() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_leafid"))
        .args(["healthcheck", "--port", &port.to_string()])
        .output()
        .unwrap();
    assert_exit(&out, 1, "not live");
}

#[test]
fn healthcheck_passes_against_a_running_server() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let mut server = Command::new(env!("CARGO_BIN_EXE_leafid"))
        .arg("serve")
        .env("LEAFID__SERVER__PORT", &port)
        .env(
            "LEAFID__DATABASE__URL",
            format!("sqlite://{}", dir.path().join("leafid.db").display()),
        )
        .env("LEAFID__SNOWFLAKE__WORKER__STRATEGY", "static")
        .env("LEAFID__SNOWFLAKE__WORKER__ID", "1")
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let live = loop {
        // The port comes from the configuration, as in the container's HEALTHCHECK.
        let out = Command::new(env!("CARGO_BIN_EXE_leafid"))
            .arg("healthcheck")
            .env("LEAFID__SERVER__PORT", &port)
            .output()
            .unwrap();
        if out.status.success() || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    server.kill().unwrap();
    server.wait().unwrap();
    assert_eq!(live.status.code(), Some(0), "{}", text(&live.stderr));
}

/// A formatted tag from the CLI: created with `--format`, refused when the format would repeat
/// ids (exit 2, nothing written), and its ids decoded by `ids decode` and `tags decode`
/// (exit 2 for text that is not an id of the format, or a plain tag).
#[test]
fn formatted_tags_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("leafid.db").display());
    let daily = r#"{"prefix":"ORD-","date":"yyyyMMdd","width":6,"reset":"daily","time_zone":"Asia/Shanghai"}"#;
    let created = leafid(
        &url,
        &[
            "tags", "create", "orders", "--step", "100", "--format", daily,
        ],
    );
    assert_exit(&created, 0, "orders");
    // `tags show` names the format (issue 42, item 9), as text and as JSON.
    assert_exit(
        &leafid(&url, &["tags", "show", "orders"]),
        0,
        r#""prefix":"ORD-""#,
    );
    let shown = leafid(&url, &["tags", "show", "orders", "--json"]);
    assert_eq!(json(&shown)["format"]["reset"], "daily");
    let refused = leafid(
        &url,
        &[
            "tags",
            "create",
            "nodate",
            "--step",
            "100",
            "--format",
            r#"{"width":6,"reset":"daily"}"#,
        ],
    );
    assert_exit(&refused, 2, "same ids");
    let shown = leafid(&url, &["tags", "show", "nodate"]);
    assert_exit(&shown, 1, "unknown");
    let other = leafid(
        &url,
        &[
            "tags",
            "create",
            "orders",
            "--step",
            "1",
            "--format",
            r#"{"width":3}"#,
        ],
    );
    assert_exit(&other, 1, "exists");
    let decoded = leafid(
        &url,
        &["ids", "decode", "orders", "ORD-20261127000042", "--json"],
    );
    assert_exit(&decoded, 0, "20261127");
    let d = json(&decoded);
    assert_eq!(
        (d["period"].as_str(), d["sequence"].as_u64()),
        (Some("20261127"), Some(42))
    );
    let text_form = leafid(&url, &["tags", "decode", "orders", "ORD-20261127000042"]);
    assert_exit(&text_form, 0, "sequence 42");
    for bad in [
        "ORD-2026112700004",
        "ORD-20261327000042",
        "XRD-20261127000042",
        "ORD-2026112700004é",
    ] {
        let out = leafid(&url, &["ids", "decode", "orders", bad]);
        assert_exit(&out, 2, "not an id of this format");
    }
    let plain = leafid(&url, &["ids", "decode", "leaf-segment-test", "1"]);
    assert_exit(&plain, 2, "not formatted");
    let nobody = leafid(&url, &["ids", "decode", "nobody", "1"]);
    assert_exit(&nobody, 1, "unknown");
}

/// A permuted tag from the CLI: created only with its key in the configuration, its codes
/// decoded only with that key (the CLI's credential is the configuration it runs with).
#[test]
fn permuted_tags_from_the_cli_need_their_key() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("leafid.db").display());
    let key = dir.path().join("codes.key");
    // A fixed key, no weak one (`leafid::shapes::key_check::weakness` refuses "ab" * 32).
    std::fs::write(
        &key,
        "c4e19a07b35d82f6601bde9472a8f53c1e0b97d46a25f8c3d9147be056a2c18f",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let with_key = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_leafid"))
            .args(args)
            .env("LEAFID__DATABASE__URL", &url)
            .env("LEAFID__SHAPES__KEYS__CODES", &key)
            .output()
            .unwrap()
    };
    let format = r#"{"prefix":"C-","width":8,"permute":{"key_id":"codes"}}"#;
    let refused = leafid(
        &url,
        &[
            "tags", "create", "codes", "--step", "100", "--format", format,
        ],
    );
    assert_exit(&refused, 2, "shapes.keys.codes");
    let created = with_key(&[
        "tags", "create", "codes", "--step", "100", "--format", format,
    ]);
    assert_exit(&created, 0, "codes");
    // The code of sequence 1 is FF1 of 00000001 under the key: decode gives 1 back. Which code
    // that is, only the key knows; find it through the server's own rule by decoding each
    // candidate would take 10^8 tries, so ask the decode of a code and check it is in range.
    let decoded = with_key(&["ids", "decode", "codes", "C-12345678", "--json"]);
    assert_exit(&decoded, 0, "sequence");
    let seq = json(&decoded)["sequence"].as_u64().unwrap();
    assert!((1..100_000_000).contains(&seq), "{seq}");
    let without = leafid(&url, &["ids", "decode", "codes", "C-12345678"]);
    assert_exit(&without, 2, "shapes.keys.codes");
    // A world-readable key file stops the command, naming it.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let open = with_key(&["tags", "list"]);
    assert_exit(&open, 2, "readable by every user");
}

/// With lanes, a tag created or changed by the CLI on the own lane is mirrored on the other
/// lanes it reaches, and an unreachable lane is named on stderr.
#[test]
fn tag_writes_from_the_cli_reach_every_lane() {
    let dir = tempfile::tempdir().unwrap();
    let a = format!("sqlite://{}", dir.path().join("a.db").display());
    let b = format!("sqlite://{}", dir.path().join("b.db").display());
    // B's database exists (its tables made by a first command).
    assert_exit(&leafid(&b, &["tags", "list"]), 0, "");
    let on_a = |args: &[&str], other: &str| {
        Command::new(env!("CARGO_BIN_EXE_leafid"))
            .args(args)
            .env("LEAFID__DATABASE__URL", &a)
            .env("LEAFID__LANES__SLOT", "0")
            .env("LEAFID__LANES__OTHERS__1", other)
            .env("LEAFID__DATABASE__ACQUIRE_TIMEOUT_MS", "2000")
            .output()
            .unwrap()
    };
    let created = on_a(
        &[
            "tags", "create", "orders", "--step", "100", "--max-id", "5000",
        ],
        &b,
    );
    assert_exit(&created, 0, "orders");
    let shown = leafid(&b, &["tags", "show", "orders", "--json"]);
    assert_exit(&shown, 0, "orders");
    assert_eq!(json(&shown)["max_id"], 5000);
    let stepped = on_a(&["tags", "set-step", "orders", "300"], &b);
    assert_exit(&stepped, 0, "orders");
    assert_eq!(
        json(&leafid(&b, &["tags", "show", "orders", "--json"]))["step"],
        300
    );
    // A lane that does not answer is named, and the write on the own lane stands.
    let away = on_a(
        &["tags", "create", "invoices", "--step", "100"],
        "mysql://leafid:leafid@127.0.0.1:1/none",
    );
    assert_exit(&away, 0, "invoices");
    assert!(
        text(&away.stderr).contains("lanes not reached yet: [1]"),
        "{}",
        text(&away.stderr)
    );
}

/// `leafid keys check`: each key id with its check value and the database's record, read only;
/// exit 0 when every key matches or is not bound yet, 1 on a mismatch, 2 on a key file that
/// does not load (a weak key).
#[test]
fn keys_check_reports_each_key_and_exits_1_on_a_mismatch() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("leafid.db").display());
    let write = |name: &str, hex: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, hex).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        path
    };
    let first = write(
        "first.key",
        "3a7f0c92e15bd8462f9ac1e07b534d68a0c2f91e85d7364b1fe0a95c27d83b64",
    );
    let second = write(
        "second.key",
        "91d4e27a0c6fb3581ea72dc94b0f6e35d8a1c7f20b9e4365fa03d81c6e52b79a",
    );
    let weak = write("weak.key", &"0".repeat(64));
    let check = |key: &std::path::Path, args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_leafid"))
            .args(["keys", "check"])
            .args(args)
            .env("LEAFID__DATABASE__URL", &url)
            .env("LEAFID__SHAPES__KEYS__CODES", key)
            .output()
            .unwrap()
    };
    let out = check(&first, &["--json"]);
    assert_exit(&out, 0, "not bound yet");
    let report = json(&out);
    assert_eq!(report[0]["key_id"], "codes");
    assert!(report[0]["recorded"].is_null(), "{report}");
    let check_value = report[0]["check_value"].as_str().unwrap().to_owned();
    assert!(check_value.starts_with("kcv1:"), "{check_value}");
    // Looking bound nothing: the second key is not bound yet either.
    assert_exit(&check(&second, &[]), 0, "not bound yet");
    // A permuted tag created with the first key binds it.
    let created = Command::new(env!("CARGO_BIN_EXE_leafid"))
        .args([
            "tags",
            "create",
            "codes",
            "--step",
            "100",
            "--format",
            r#"{"prefix":"C-","width":8,"permute":{"key_id":"codes"}}"#,
        ])
        .env("LEAFID__DATABASE__URL", &url)
        .env("LEAFID__SHAPES__KEYS__CODES", &first)
        .output()
        .unwrap();
    assert_exit(&created, 0, "codes");
    let out = check(&first, &["--json"]);
    assert_exit(&out, 0, "\"match\"");
    assert_eq!(json(&out)[0]["recorded"], check_value.as_str());
    let out = check(&second, &[]);
    assert_exit(&out, 1, "mismatch");
    assert!(
        text(&out.stdout).contains(&check_value),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stdout).contains(second.to_str().unwrap()),
        "{}",
        text(&out.stdout)
    );
    assert_exit(&check(&weak, &[]), 2, "weak key");
}
