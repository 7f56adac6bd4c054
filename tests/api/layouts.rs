//! The layout planner and decoder over HTTP: pure computations, so one database (SQLite) is
//! enough.

use serde_json::{Value, json};

use crate::support::{Db, Reply, spawn_app};

/// DESIGN.md section 6: the highest id a 28/22/13 generator issued, observed.
const DESIGN_MAX: u64 = 9_090_949_948_782_127_403;
const PLAN: &str = "/api/v1/layouts/plan";

fn legacy() -> Value {
    json!({"time_bits": 28, "worker_bits": 22, "seq_bits": 13, "unit": "seconds",
           "epoch": "2016-05-20T00:00:00+08:00"})
}

fn request(worker_bits: u64, years: u64) -> Value {
    json!({"legacy": legacy(), "max_legacy_id": DESIGN_MAX, "worker_bits": worker_bits,
           "seq_bits": 13, "years": years})
}

fn expect_error(r: &Reply, status: u16, code: &str, what: &str) -> String {
    assert_eq!(r.status, status, "{what}: {}", r.text);
    assert_eq!(r.code(), code, "{what}: {}", r.text);
    let message = r.json()["message"].as_str().unwrap().to_owned();
    assert!(!message.is_empty(), "{what}");
    message
}

#[tokio::test]
async fn a_plan_lifts_every_new_id_above_the_legacy_maximum() {
    let app = spawn_app(Db::Sqlite).await;

    let r = app.post(PLAN, &request(13, 10).to_string()).await;

    assert_eq!(r.status, 200, "{}", r.text);
    let plan = r.json();
    let mut keys: Vec<&str> = plan
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "capacity",
            "checks",
            "epoch",
            "exhausted_at",
            "first_id",
            "last_id",
            "layout"
        ]
    );
    assert!(plan["first_id"].as_u64().unwrap() > DESIGN_MAX, "{plan}");
    assert!(
        plan["last_id"].as_u64().unwrap() <= i64::MAX as u64,
        "{plan}"
    );
    assert!(plan["layout"].get("epoch").is_none(), "{plan}");
    assert_eq!(plan["layout"]["worker_bits"], 13);
    assert_eq!(plan["layout"]["seq_bits"], 13);
    let checks = plan["checks"].as_array().unwrap();
    assert!(checks.len() >= 3, "{plan}");
    assert!(checks.iter().all(|c| c["ok"] == true), "{plan}");

    let mut by_cutover = request(10, 10);
    by_cutover.as_object_mut().unwrap().remove("max_legacy_id");
    by_cutover["cutover"] = json!("2024-10-01T00:00:00+08:00");
    by_cutover["margin_seconds"] = json!(86_400);
    let r = app.post(PLAN, &by_cutover.to_string()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["layout"]["worker_bits"], 10);
}

#[tokio::test]
async fn impossible_and_invalid_plans_get_their_codes() {
    let app = spawn_app(Db::Sqlite).await;

    let r = app.post(PLAN, &request(13, 100).to_string()).await;
    let message = expect_error(&r, 422, "plan_impossible", "100 years");
    assert!(message.starts_with("years 100 needs"), "{message}");
    let mut full = request(13, 10);
    full["max_legacy_id"] = json!(i64::MAX);
    let message = expect_error(
        &app.post(PLAN, &full.to_string()).await,
        422,
        "plan_impossible",
        "exhausted legacy",
    );
    assert!(message.contains("max_legacy_id"), "{message}");

    for (body, what) in [
        (request(0, 10), "no worker bits"),
        (
            request(50, 10),
            "worker and sequence bits leave no time bits",
        ),
        (
            json!({"legacy": {"time_bits": 28, "worker_bits": 22, "seq_bits": 12,
                              "unit": "seconds", "epoch": "2016-05-20T00:00:00+08:00"},
                   "max_legacy_id": 1, "worker_bits": 10, "seq_bits": 13, "years": 1}),
            "legacy bits do not sum to 63",
        ),
        (
            json!({"legacy": legacy(), "max_legacy_id": 1, "cutover": "2024-10-01T00:00:00Z",
                   "worker_bits": 10, "seq_bits": 13, "years": 1}),
            "both max_legacy_id and cutover",
        ),
        (
            json!({"legacy": legacy(), "max_legacy_id": -1, "worker_bits": 10, "seq_bits": 13,
                   "years": 1}),
            "negative maximum",
        ),
    ] {
        expect_error(
            &app.post(PLAN, &body.to_string()).await,
            400,
            "invalid_plan_request",
            what,
        );
    }

    for (body, what) in [
        ("{", "malformed JSON"),
        (r#"{"legacy": 1}"#, "wrong types"),
        (&*request(300, 10).to_string(), "worker_bits over 255"),
        (
            &*json!({"legacy": legacy(), "max_legacy_id": 1, "worker_bits": 10,
                     "seq_bits": 13, "years": 1, "colour": "red"})
            .to_string(),
            "unknown field",
        ),
    ] {
        expect_error(&app.post(PLAN, body).await, 400, "invalid_request", what);
    }
}

#[tokio::test]
async fn decode_shows_an_ids_fields_under_any_layout() {
    let app = spawn_app(Db::Sqlite).await;
    let query = "layout=28/22/13&epoch=2016-05-20T00:00:00%2B08:00&unit=seconds";

    let r = app
        .get(&format!("/api/v1/layouts/decode/{DESIGN_MAX}?{query}"))
        .await;

    assert_eq!(r.status, 200, "{}", r.text);
    let fields = r.json();
    assert_eq!(fields["id"], DESIGN_MAX);
    assert_eq!(fields["id_str"], DESIGN_MAX.to_string());
    assert_eq!(fields["layout"], "28/22/13");
    assert_eq!(fields["time_delta"], 264_581_466);
    assert_eq!(fields["worker_id"], 29);
    assert_eq!(fields["sequence"], 2347);
    assert_eq!(fields["timestamp"], "2024-10-06T22:51:06Z");

    for (path, status, code) in [
        (
            format!("/api/v1/layouts/decode/abc?{query}"),
            400,
            "invalid_id",
        ),
        (
            format!("/api/v1/layouts/decode/-1?{query}"),
            400,
            "invalid_id",
        ),
        ("/api/v1/layouts/decode/1".to_owned(), 400, "invalid_layout"),
        (
            "/api/v1/layouts/decode/1?layout=28/22/12&epoch=0".to_owned(),
            400,
            "invalid_layout",
        ),
        (
            "/api/v1/layouts/decode/1?layout=28/22/13&epoch=0&unit=hours".to_owned(),
            400,
            "invalid_layout",
        ),
    ] {
        expect_error(&app.get(&path).await, status, code, &path);
    }
}

/// A request in users' terms: peak workers and ids per second instead of bits.
fn capacity_request(workers: u64, ids_per_second: u64, years: u64) -> Value {
    json!({"legacy": legacy(), "max_legacy_id": DESIGN_MAX, "workers": workers,
           "ids_per_second": ids_per_second, "years": years})
}

#[tokio::test]
async fn a_plan_in_workers_and_ids_per_second_states_its_capacity() {
    let app = spawn_app(Db::Sqlite).await;

    let r = app
        .post(PLAN, &capacity_request(300, 5_000, 10).to_string())
        .await;

    assert_eq!(r.status, 200, "{}", r.text);
    let plan = r.json();
    assert_eq!(plan["layout"]["worker_bits"], 9);
    assert_eq!(plan["layout"]["seq_bits"], 13);
    assert_eq!(
        plan["capacity"],
        json!({"workers": 300, "ids_per_second": 5_000, "max_workers": 512,
               "max_ids_per_second_per_worker": 8_192, "max_ids_per_second_cluster": 4_194_304,
               "max_id_bits": 63})
    );
    let checks = plan["checks"].as_array().unwrap();
    for name in ["holds_workers", "holds_ids_per_second"] {
        assert!(
            checks.iter().any(|c| c["name"] == name && c["ok"] == true),
            "{name}: {plan}"
        );
    }

    let mut cluster = capacity_request(300, 1_000_000, 10);
    cluster["ids_per_second_scope"] = json!("cluster");
    let r = app.post(PLAN, &cluster.to_string()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.json()["layout"]["seq_bits"], 12);
    assert_eq!(r.json()["capacity"]["ids_per_second"], 3_334);
}

#[tokio::test]
async fn capacity_that_cannot_be_met_is_refused_with_the_shortfall() {
    let app = spawn_app(Db::Sqlite).await;

    let r = app
        .post(PLAN, &capacity_request(8_000, 50_000, 20).to_string())
        .await;

    let message = expect_error(&r, 422, "plan_impossible", "8,000 workers at 50,000 ids/s");
    assert!(message.starts_with("years 20 needs"), "{message}");
    assert!(
        message.contains("13 worker bits (8,000 workers) + 16 sequence bits (50,000 ids/s per worker) = 29 bits, "),
        "{message}"
    );
    assert!(message.contains(" bits short: at most "), "{message}");
    assert!(
        message.contains("workers at 50,000 ids/s each, or 8,000 workers at "),
        "{message}"
    );

    // JavaScript-safe ids cannot lift above a maximum beyond 2^53.
    let mut js = capacity_request(300, 5_000, 10);
    js["max_id_bits"] = json!(53);
    let message = expect_error(
        &app.post(PLAN, &js.to_string()).await,
        422,
        "plan_impossible",
        "max_id_bits 53",
    );
    assert!(
        message.contains(
            "is not below 2^53 - 1 = 9007199254740991, the largest id max_id_bits 53 allows"
        ),
        "{message}"
    );
    js["max_legacy_id"] = json!(1_000_000_000_000_000u64);
    let r = app.post(PLAN, &js.to_string()).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.json()["last_id"].as_u64().unwrap() < 1 << 53,
        "{}",
        r.text
    );
}

#[tokio::test]
async fn invalid_capacity_is_an_invalid_plan_request() {
    let app = spawn_app(Db::Sqlite).await;
    let with = |key: &str, value: Value| {
        let mut body = capacity_request(300, 5_000, 10);
        body[key] = value;
        body.to_string()
    };
    for (body, what) in [
        (with("workers", json!(0)), "no workers"),
        (with("ids_per_second", json!(0)), "no ids"),
        (
            with("worker_bits", json!(8)),
            "worker bits too few for the workers",
        ),
        (with("max_id_bits", json!(64)), "max_id_bits over 63"),
        (
            json!({"legacy": legacy(), "max_legacy_id": 1, "worker_bits": 10,
                   "ids_per_second": 1000, "ids_per_second_scope": "cluster", "years": 1})
            .to_string(),
            "cluster rate without workers",
        ),
        (
            json!({"legacy": legacy(), "max_legacy_id": 1, "seq_bits": 10, "years": 1}).to_string(),
            "neither worker_bits nor workers",
        ),
    ] {
        expect_error(
            &app.post(PLAN, &body).await,
            400,
            "invalid_plan_request",
            what,
        );
    }
    expect_error(
        &app.post(PLAN, &with("ids_per_second_scope", json!("galaxy")))
            .await,
        400,
        "invalid_request",
        "unknown scope",
    );
}

#[tokio::test]
async fn stringify_ids_answers_the_ids_as_decimal_strings() {
    let app = spawn_app(Db::Sqlite).await;
    let body = request(13, 10).to_string();

    let numbers = app.post(PLAN, &body).await;
    let strings = app.post(&format!("{PLAN}?stringify_ids=true"), &body).await;

    assert_eq!(numbers.status, 200, "{}", numbers.text);
    assert_eq!(strings.status, 200, "{}", strings.text);
    let (numbers, strings) = (numbers.json(), strings.json());
    for field in ["first_id", "last_id"] {
        let id = numbers[field].as_u64().unwrap();
        assert_eq!(strings[field], id.to_string(), "{field}: {strings}");
    }
    // Everything else is the same answer (the clock may move the epoch by a tick in between).
    assert_eq!(strings["layout"], numbers["layout"]);
    assert_eq!(strings["capacity"], numbers["capacity"]);

    let r = app
        .post(&format!("{PLAN}?stringify_ids=false"), &body)
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(r.json()["first_id"].is_u64(), "{}", r.text);

    for bad in ["1", "TRUE", "yes", ""] {
        let message = expect_error(
            &app.post(&format!("{PLAN}?stringify_ids={bad}"), &body)
                .await,
            400,
            "invalid_request",
            bad,
        );
        assert!(message.contains("stringify_ids"), "{message}");
    }
    // A refusal is the same error whatever the query.
    let r = app
        .post(
            &format!("{PLAN}?stringify_ids=true"),
            &request(13, 100).to_string(),
        )
        .await;
    expect_error(&r, 422, "plan_impossible", "impossible plan with strings");
}

#[tokio::test]
async fn the_openapi_document_lists_stringify_ids_on_the_planner() {
    let app = spawn_app(Db::Sqlite).await;

    let doc = app.get("/openapi.json").await.json();

    let params = doc["paths"][PLAN]["post"]["parameters"].as_array().unwrap();
    let param = params
        .iter()
        .find(|p| p["name"] == "stringify_ids")
        .expect("stringify_ids is documented");
    assert_eq!(param["in"], "query");
    assert!(doc["components"]["schemas"]["PlanCapacity"].is_object());
}
