//! A key is bound to what it has written (issue 42): two real `leafid` processes on one
//! database, each with its own key file under the key id `codes` (made as the docs say, 32
//! random bytes). The first serves; the second refuses the tag (`key_unavailable`, ids and
//! decode), says so in its log at start, and no code is served twice. The first restarted with
//! a regenerated key file is refused too; `leafid keys check` exits 1 on the mismatch.

use std::collections::HashSet;
use std::path::Path;
use std::process::Command;

use crate::on_both_databases;
use crate::support::process::ServerProcess;
use crate::support::{Db, fresh_db};

const CODES: &str = r#"{"prefix":"C-","width":10,"permute":{"key_id":"codes"}}"#;

/// A fresh random key file at `path`, mode 600 (the docs' recipe, `/dev/urandom`).
fn write_key(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let key: [u8; 32] = rand::random();
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(path, format!("{hex}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Up to `rounds` batches of 100 codes from `server`; the status and body of the first refusal.
async fn take(
    client: &reqwest::Client,
    server: &ServerProcess,
    rounds: usize,
) -> (Vec<String>, Option<(u16, serde_json::Value)>) {
    let mut got = Vec::new();
    for _ in 0..rounds {
        let r = client
            .get(format!(
                "{}/api/v1/segment/codes/ids?count=100",
                server.address
            ))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: serde_json::Value = r.json().await.unwrap();
        if status != 200 {
            return (got, Some((status, body)));
        }
        got.extend(serde_json::from_value::<Vec<String>>(body["ids"].clone()).unwrap());
    }
    (got, None)
}

#[track_caller]
fn assert_key_refusal(refusal: Option<(u16, serde_json::Value)>) {
    let (status, body) = refusal.expect("refused");
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "key_unavailable", "{body}");
    let message = body["message"].as_str().unwrap_or_default();
    assert!(message.contains("does not match"), "{body}");
    assert!(message.contains("very same key file"), "{body}");
}

/// The start's line about the key id `codes` (logged just after "listening"), waited for.
async fn mismatch_logged(server: &ServerProcess) -> String {
    let prefix = "the key file of key id \"codes\" does not match";
    for _ in 0..100 {
        if let [line] = server.log_lines(prefix).as_slice() {
            return line.clone();
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("no single {prefix:?} line in {:?}", server.all_logs())
}

/// `leafid keys check` on `url` with the key file `key`.
fn keys_check(url: &str, key: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_leafid"))
        .args(["keys", "check"])
        .env("LEAFID__DATABASE__URL", url)
        .env("LEAFID__DATABASE__ACQUIRE_TIMEOUT_MS", "5000")
        .env(
            "LEAFID__DATABASE__PGBOUNCER",
            crate::support::postgres::is_pgbouncer(url).to_string(),
        )
        .env("LEAFID__SHAPES__KEYS__CODES", key)
        .output()
        .unwrap()
}

async fn a_second_key_under_one_key_id_is_refused_and_no_code_repeats(db: Db) {
    let (url, _dir) = fresh_db(db).await;
    let keys = tempfile::tempdir().unwrap();
    let (key_a, key_b) = (keys.path().join("a.key"), keys.path().join("b.key"));
    write_key(&key_a);
    write_key(&key_b);
    let env_a = [
        ("LEAFID__SHAPES__KEYS__CODES", key_a.to_str().unwrap()),
        ("LEAFID__SNOWFLAKE__ENABLED", "false"),
    ];
    let env_b = [
        ("LEAFID__SHAPES__KEYS__CODES", key_b.to_str().unwrap()),
        ("LEAFID__SNOWFLAKE__ENABLED", "false"),
    ];
    let client = reqwest::Client::new();

    // Not bound before any server used the key id: the check passes and binds nothing.
    let out = keys_check(&url, &key_b);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{shown}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.contains("not bound yet"), "{shown}");

    let a = ServerProcess::start(&url, &env_a);
    let r = client
        .post(format!("{}/api/v1/tags", a.address))
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"biz_tag":"codes","step":200,"format":{CODES}}}"#
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
    let (mut all, refused) = take(&client, &a, 10).await;
    assert!(refused.is_none(), "{refused:?}");

    let b = ServerProcess::start(&url, &env_b);
    // Said at start, naming the key id and its file.
    let said = mismatch_logged(&b).await;
    assert!(said.contains("\"level\":\"ERROR\""), "{said}");
    assert!(said.contains(key_b.to_str().unwrap()), "{said}");
    // Ids and decode refused, the decode of a code the first server issued included.
    let (from_b, refused) = take(&client, &b, 3).await;
    assert!(from_b.is_empty(), "{from_b:?}");
    assert_key_refusal(refused);
    let r = client
        .get(format!(
            "{}/api/v1/segment/codes/decode?id={}",
            b.address, all[0]
        ))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    assert_key_refusal(Some((status, r.json().await.unwrap())));
    // A new tag under the key id on the second server: refused as the caller's error.
    let r = client
        .post(format!("{}/api/v1/tags", b.address))
        .header("content-type", "application/json")
        .body(format!(
            r#"{{"biz_tag":"codes2","step":200,"format":{CODES}}}"#
        ))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["code"], "invalid_request", "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("does not match"),
        "{body}"
    );
    // The first server serves on; nothing repeats.
    let (more, refused) = take(&client, &a, 10).await;
    assert!(refused.is_none(), "{refused:?}");
    all.extend(more);
    let unique: HashSet<&String> = all.iter().collect();
    assert_eq!(unique.len(), all.len(), "a code twice");
    assert_eq!(all.len(), 2_000);
    // The checks: the first key matches, the second does not (exit 1).
    let out = keys_check(&url, &key_a);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("match"));
    let out = keys_check(&url, &key_b);
    let shown = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(1), "{shown}");
    assert!(shown.contains("mismatch"), "{shown}");
    drop(b);

    // The first server restarted with its key file regenerated in place: refused.
    a.terminate();
    write_key(&key_a);
    let a2 = ServerProcess::start(&url, &env_a);
    let (again, refused) = take(&client, &a2, 1).await;
    assert!(again.is_empty());
    assert_key_refusal(refused);
    mismatch_logged(&a2).await;
}
on_both_databases!(a_second_key_under_one_key_id_is_refused_and_no_code_repeats);

/// A key file that is a FIFO stops the start at once with a message naming it (it used to
/// hang: nothing logged, nothing listening); so does a key of 64 zeros.
#[tokio::test]
async fn a_fifo_or_a_weak_key_stops_the_start_at_once() {
    let keys = tempfile::tempdir().unwrap();
    let fifo = keys.path().join("codes.key");
    assert!(
        Command::new("mkfifo")
            .arg("-m")
            .arg("600")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let zeros = keys.path().join("zeros.key");
    std::fs::write(&zeros, "0".repeat(64)).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&zeros, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let db = keys.path().join("leafid.db");
    for (path, needle) in [(&fifo, "not a regular file (a FIFO)"), (&zeros, "weak key")] {
        let started = std::time::Instant::now();
        let out = Command::new(env!("CARGO_BIN_EXE_leafid"))
            .env(
                "LEAFID__DATABASE__URL",
                format!("sqlite://{}", db.display()),
            )
            .env("LEAFID__SERVER__PORT", "0")
            .env("LEAFID__SHAPES__KEYS__CODES", path)
            .output()
            .unwrap();
        // A hang is forever: a generous bound for a loaded machine.
        assert!(started.elapsed() < std::time::Duration::from_secs(60));
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{err}");
        assert!(err.contains(path.to_str().unwrap()), "{err}");
    }
}
