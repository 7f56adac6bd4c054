//! The OpenAPI document and the routes the server registers cannot drift apart: every path and
//! method `/openapi.json` documents is routed to a handler (never the fallback `404 not_found`,
//! never `405`), and a method the document does not list on a path is not served there.
//!
//! Registration stays explicit (Leaf's id routes are static-prefix scopes matched without a
//! regex, for speed), so this test is the one place that ties it to the document.

use crate::support::{Db, spawn_app};

/// A concrete path for a documented template: each `{param}` gets a sample value.
pub(crate) fn sample(path: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').expect("closed parameter") + open;
        out.push_str(match &rest[open + 1..close] {
            "id" => "1",
            _ => "routes-sample",
        });
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

#[tokio::test]
async fn every_documented_route_is_served_and_no_other_method_is() {
    let app = spawn_app(Db::Sqlite).await;
    let doc = app.get("/openapi.json").await.json();
    let paths = doc["paths"].as_object().expect("paths");
    assert!(paths.len() >= 20, "only {} paths documented", paths.len());
    let all = ["get", "post", "patch", "delete", "put"];
    let mut checked = 0;
    for (template, item) in paths {
        let path = sample(template);
        for method in all {
            let documented = item.get(method).is_some();
            let m = reqwest::Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            // An empty JSON object: enough to reach the handler (it may then refuse it: 4xx).
            let body = (method == "post" || method == "patch").then_some("{}");
            let r = app.send(m, &path, body, None).await;
            let fallback = r.status == 405
                || (r.status == 404
                    && r.json().get("code").and_then(|c| c.as_str()) == Some("not_found"));
            if documented {
                assert!(
                    !fallback,
                    "{method} {template} is documented but not routed: {} {}",
                    r.status, r.text
                );
                checked += 1;
            } else {
                assert!(
                    fallback,
                    "{method} {template} is served ({} {}) but not documented",
                    r.status, r.text
                );
            }
        }
    }
    assert!(
        checked >= 25,
        "only {checked} documented operations checked"
    );
}
