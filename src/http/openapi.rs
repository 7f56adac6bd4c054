//! The OpenAPI 3 document of every route, generated from the handlers' `#[utoipa::path]`
//! annotations and the bodies' `ToSchema` derives, served at `GET /openapi.json`.
//!
//! `scripts/schemathesis.sh` checks the running server against it: no 5xx on valid input,
//! every status, content type and body as documented.

use actix_web::{HttpResponse, web};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{
    dashboard, error, health, layouts, metrics, monitor, segment, snowflake, tags, tokens,
};

/// The document: paths, schemas, tags and the admin bearer scheme.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "leafid",
        description = "Unique, positive, increasing 64-bit ids: Leaf-segment and snowflake engines. \
            Every error is a non-2xx status with the body `{\"code\", \"message\"}`; `code` is stable.",
        license(name = "Apache-2.0")
    ),
    paths(
        segment::get_leaf,
        segment::get_batch,
        segment::get_ranges,
        segment::get_decode,
        snowflake::get_leaf,
        snowflake::get_batch,
        snowflake::get_ranges,
        snowflake::get_decode,
        snowflake::get_bounds,
        snowflake::get_leaf_decode,
        tags::list,
        tags::create,
        tags::show,
        tags::update,
        tags::delete,
        tokens::create,
        tokens::list,
        tokens::revoke,
        monitor::cache_page,
        monitor::db_page,
        monitor::cache_json,
        monitor::lanes_json,
        health::live,
        health::ready,
        layouts::post_plan,
        layouts::get_decode,
        metrics::get_metrics,
        get_openapi,
        dashboard::root,
        dashboard::index,
        dashboard::app_js,
        dashboard::style_css,
        dashboard::snowflake_status,
    ),
    components(schemas(error::ErrorBody, segment::FormattedBatchBody)),
    modifiers(&AdminToken),
    tags(
        (name = "segment", description = "Leaf-segment ids: leased from leaf_alloc in segments"),
        (name = "snowflake", description = "Snowflake ids: time, worker id and sequence"),
        (name = "tokens", description = "Caller tokens scoped to tags, for admins: the id routes take them as Authorization: Bearer"),
        (name = "tags", description = "leaf_alloc rows for DBAs; writes need the admin token or a loopback client"),
        (name = "monitor", description = "Leaf's monitor pages and their JSON form"),
        (name = "layouts", description = "Bit-layout migration planner and decoder"),
        (name = "operations", description = "Health, metrics and this document"),
    )
)]
pub struct ApiDoc;

/// Adds the `admin_token` bearer scheme that the admin writes name, and the `caller_token`
/// scheme of the id routes.
struct AdminToken;

impl Modify for AdminToken {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
        components.add_security_scheme(
            "caller_token",
            SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
        );
    }
}

/// Registers the route.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/openapi.json", web::get().to(get_openapi));
}

/// `GET /openapi.json`: this document.
#[utoipa::path(
    get,
    path = "/openapi.json",
    tag = "operations",
    responses((status = 200, description = "The OpenAPI document", content_type = "application/json", body = Object))
)]
pub async fn get_openapi() -> HttpResponse {
    // The same for the life of the binary: the one answer a shared cache may keep.
    HttpResponse::Ok()
        .insert_header((
            actix_web::http::header::CACHE_CONTROL,
            super::headers::CACHEABLE_STATIC,
        ))
        .json(ApiDoc::openapi())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_route_is_documented_with_the_error_body() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        for path in [
            "/api/segment/get/{biz_tag}",
            "/api/v1/segment/{biz_tag}/ids",
            "/api/snowflake/get/{key}",
            "/api/v1/snowflake/ids",
            "/api/v1/snowflake/decode/{id}",
            "/api/v1/snowflake/bounds",
            "/decodeSnowflakeId",
            "/api/v1/tags",
            "/api/v1/tags/{biz_tag}",
            "/api/v1/tokens",
            "/api/v1/tokens/{name}",
            "/cache",
            "/db",
            "/api/v1/cache",
            "/health/live",
            "/health/ready",
            "/api/v1/layouts/plan",
            "/api/v1/layouts/decode/{id}",
            "/metrics",
            "/openapi.json",
        ] {
            assert!(paths.contains_key(path), "{path} is not documented");
        }
        let tag = &paths["/api/v1/tags/{biz_tag}"];
        for method in ["get", "patch", "delete"] {
            let body = &tag[method]["responses"]["404"]["content"]["application/json"]["schema"];
            assert_eq!(body["$ref"], "#/components/schemas/ErrorBody", "{method}");
        }
        let create = &doc["components"]["schemas"]["CreateTag"];
        assert_eq!(create["additionalProperties"], false, "{create}");
        assert!(doc["components"]["securitySchemes"]["admin_token"].is_object());
    }

    /// The admin and monitor bodies: a row's `max_id` and a buffer's ids are numbers or
    /// strings (the buffer's also null, for an empty slot), under a documented `stringify_ids`.
    #[test]
    fn the_tag_and_cache_routes_document_stringify_ids() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        for (path, method) in [
            ("/api/v1/tags", "get"),
            ("/api/v1/tags", "post"),
            ("/api/v1/tags/{biz_tag}", "get"),
            ("/api/v1/tags/{biz_tag}", "patch"),
            ("/api/v1/cache", "get"),
        ] {
            let op = &doc["paths"][path][method];
            let param = op["parameters"]
                .as_array()
                .unwrap_or_else(|| panic!("{method} {path}: {op}"))
                .iter()
                .find(|p| p["name"] == "stringify_ids")
                .unwrap_or_else(|| panic!("{method} {path} lacks stringify_ids"));
            assert_eq!(param["in"], "query", "{method} {path}");
            assert_eq!(param["schema"]["type"], "boolean", "{method} {path}");
        }
        let kinds = |schema: &serde_json::Value| -> Vec<String> {
            schema["oneOf"]
                .as_array()
                .unwrap_or_else(|| panic!("{schema}"))
                .iter()
                .map(|s| s["type"].as_str().unwrap().to_owned())
                .collect()
        };
        let schemas = &doc["components"]["schemas"];
        assert_eq!(
            kinds(&schemas["TagRow"]["properties"]["max_id"]),
            ["integer", "string"]
        );
        for field in ["min_id", "max_id", "next_id"] {
            assert_eq!(
                kinds(&schemas["SegmentSnapshot"]["properties"][field]),
                ["integer", "string", "null"],
                "{field}"
            );
        }
    }

    #[test]
    fn the_id_routes_document_stringify_ids_and_ids_as_number_or_string() {
        let doc = serde_json::to_value(ApiDoc::openapi()).unwrap();
        for path in [
            "/api/v1/segment/{biz_tag}/ids",
            "/api/v1/snowflake/ids",
            "/api/v1/snowflake/decode/{id}",
            "/api/v1/snowflake/bounds",
            "/api/v1/layouts/decode/{id}",
        ] {
            let get = &doc["paths"][path]["get"];
            let param = get["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == "stringify_ids")
                .unwrap_or_else(|| panic!("{path} lacks stringify_ids"));
            assert_eq!(param["in"], "query", "{path}");
            assert_eq!(param["schema"]["type"], "boolean", "{path}: {param}");

            let body = &get["responses"]["200"]["content"]["application/json"]["schema"];
            let name = body["$ref"].as_str().unwrap().rsplit('/').next().unwrap();
            let props = &doc["components"]["schemas"][name]["properties"];
            let ids = if path.contains("decode") {
                vec![&props["id"]]
            } else if path.contains("bounds") {
                vec![&props["min_id"], &props["max_id"]]
            } else {
                vec![&props["ids"]["items"]]
            };
            for id in ids {
                let kinds: Vec<&str> = id["oneOf"]
                    .as_array()
                    .unwrap_or_else(|| panic!("{path}: {id}"))
                    .iter()
                    .map(|s| s["type"].as_str().unwrap())
                    .collect();
                assert_eq!(kinds, ["integer", "string"], "{path}");
            }
        }
        let bounds = &doc["paths"]["/api/v1/snowflake/bounds"]["get"];
        let body = &bounds["responses"]["400"]["content"]["application/json"]["schema"];
        assert_eq!(body["$ref"], "#/components/schemas/ErrorBody");
        for name in ["from", "to"] {
            let param = bounds["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .unwrap_or_else(|| panic!("bounds lacks {name}"));
            assert_eq!(param["required"], true, "{name}");
        }
    }
}
