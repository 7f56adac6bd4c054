//! Caller tokens over HTTP (`/api/v1/tokens`), every route behind [`AdminAuth`] (the list
//! too: names and scopes tell an attacker which token to look for). The logic is
//! `crate::service::tokens`'s; this parses and writes.

use actix_web::{HttpResponse, web};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::admin::AdminAuth;
use super::error::{Error, ErrorBody};
use crate::service::tokens::{self, NewToken, TokenView};

/// Registers the routes.
pub fn routes(cfg: &mut web::ServiceConfig) {
    cfg.route("/api/v1/tokens", web::get().to(list))
        .route("/api/v1/tokens", web::post().to(create))
        .route("/api/v1/tokens/{name:.*}", web::delete().to(revoke));
}

/// The most tokens one page of `GET /api/v1/tokens` lists, and its default size.
pub const MAX_PAGE: usize = 1000;

/// Body of `POST /api/v1/tokens`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// The token's name: 1 to 64 of `[A-Za-z0-9._-]`, never reused (a revoked name included).
    #[schema(pattern = "^[A-Za-z0-9._-]{1,64}$")]
    pub name: String,
    /// Scope entries (1 to 64): tag names, a tag's start followed by `*` (`orders*`), `*`
    /// (every tag), `snowflake` (snowflake ids).
    pub tags: Vec<String>,
    /// Ids per second.
    #[serde(default)]
    pub rate_per_sec: Option<i64>,
    /// Burst of the rate.
    #[serde(default)]
    pub burst: Option<i64>,
    /// Share of each period of a formatted tag, above 0 and at most 1, over every server.
    #[serde(default)]
    pub period_share: Option<f64>,
}

/// A caller token as listed: never the secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenBody {
    /// The name.
    pub name: String,
    /// The scope entries.
    pub tags: Vec<String>,
    /// Ids per second, if set.
    pub rate_per_sec: Option<i64>,
    /// Burst, if set.
    pub burst: Option<i64>,
    /// Share of a formatted tag's period, if set.
    pub period_share: Option<f64>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When it was revoked; `null` while it admits.
    pub revoked_at: Option<DateTime<Utc>>,
}

impl From<TokenView> for TokenBody {
    fn from(v: TokenView) -> Self {
        Self {
            name: v.name,
            tags: v.tags,
            rate_per_sec: v.rate_per_sec,
            burst: v.burst,
            period_share: v.period_share,
            created_at: v.created_at,
            revoked_at: v.revoked_at,
        }
    }
}

/// The answer to a create: the token, shown this once, and its row.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedToken {
    /// The secret: `lid_` and 43 characters of base64url. Stored nowhere (the database holds
    /// its SHA-256); lost, it is revoked and another created.
    pub token: String,
    /// The row.
    #[serde(flatten)]
    pub row: TokenBody,
}

/// One page of tokens.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenList {
    /// Tokens ordered by name (bytewise), revoked ones included.
    pub tokens: Vec<TokenBody>,
}

/// The query of `GET /api/v1/tokens`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Tokens per page, 1 to 1000 (default 1000; larger is read as 1000).
    pub limit: Option<String>,
    /// The tokens after this name (the last of the previous page, as its `Link` header gives).
    pub after: Option<String>,
}

/// `POST /api/v1/tokens`: creates a caller token (admin); the token is in this answer only.
#[utoipa::path(
    post,
    path = "/api/v1/tokens",
    tag = "tokens",
    request_body = CreateToken,
    security((), ("admin_token" = [])),
    responses(
        (status = 201, description = "Created: the token, shown this once", body = CreatedToken),
        (status = 400, description = "`invalid_request` (a name, scope entry or quota outside its rule, a malformed body)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 409, description = "`token_exists`: the name is taken, or was revoked (never reused)", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn create(
    _auth: AdminAuth,
    state: web::Data<AppState>,
    body: web::Json<CreateToken>,
) -> Result<HttpResponse, Error> {
    let body = body.into_inner();
    let new = NewToken {
        name: body.name,
        tags: body.tags,
        rate_per_sec: body.rate_per_sec,
        burst: body.burst,
        period_share: body.period_share,
    };
    let store = state.db.token_store();
    let created = tokens::create(&*store, state.ids.access().callers.as_deref(), &new).await?;
    Ok(HttpResponse::Created().json(CreatedToken {
        token: created.token,
        row: created.view.into(),
    }))
}

/// `GET /api/v1/tokens[?limit=N&after=<name>]`: one page of caller tokens (admin), never a
/// secret; the next page in the `Link` header.
#[utoipa::path(
    get,
    path = "/api/v1/tokens",
    tag = "tokens",
    params(ListQuery),
    security((), ("admin_token" = [])),
    responses(
        (status = 200, description = "One page of tokens by name. When more follow, `Link: \
            </api/v1/tokens?limit=N&after=<last>>; rel=\"next\"` names the next page", body = TokenList,
            headers(("Link" = String, description = "The next page, when there is one"))),
        (status = 400, description = "`invalid_request` (a `limit` that is not a positive integer)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn list(
    _auth: AdminAuth,
    state: web::Data<AppState>,
    query: web::Query<ListQuery>,
) -> Result<HttpResponse, Error> {
    let limit = match query.limit.as_deref() {
        None => MAX_PAGE,
        Some(raw) => raw.parse::<u64>().ok().filter(|n| *n >= 1).map_or_else(
            || {
                Err(Error::InvalidRequest(format!(
                    "limit must be an integer from 1 to {MAX_PAGE}, not {:?}",
                    crate::telemetry::ClientText(raw).to_string()
                )))
            },
            |n| Ok(n.min(MAX_PAGE as u64) as usize),
        )?,
    };
    let store = state.db.token_store();
    let mut all = tokens::list(&*store).await?;
    if let Some(after) = query.after.as_deref() {
        all.retain(|t| t.name.as_bytes() > after.as_bytes());
    }
    let more = all.len() > limit;
    all.truncate(limit);
    let mut res = HttpResponse::Ok();
    if more && let Some(last) = all.last() {
        // Names are [A-Za-z0-9._-]: nothing to escape in a URL.
        res.insert_header((
            actix_web::http::header::LINK,
            format!(
                "</api/v1/tokens?limit={limit}&after={}>; rel=\"next\"",
                last.name
            ),
        ));
    }
    Ok(res.json(TokenList {
        tokens: all.into_iter().map(TokenBody::from).collect(),
    }))
}

/// `DELETE /api/v1/tokens/{name}`: revokes a caller token (admin): refused at once on this
/// server, on the others within `callers.refresh_secs`. The row stays (its name is never
/// reused); revoking it again changes nothing.
#[utoipa::path(
    delete,
    path = "/api/v1/tokens/{name}",
    tag = "tokens",
    params(("name" = String, Path, description = "The token's name", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    security((), ("admin_token" = [])),
    responses(
        (status = 200, description = "Revoked (now or before): the row, with `revoked_at`", body = TokenBody),
        (status = 400, description = "`invalid_request` (a path that does not decode)", body = ErrorBody),
        (status = 401, description = "`unauthorized`", body = ErrorBody),
        (status = 404, description = "`unknown_token`", body = ErrorBody),
        (status = 500, description = "`internal`", body = ErrorBody),
        (status = 503, description = "`database_unavailable`", body = ErrorBody),
    )
)]
pub async fn revoke(
    _auth: AdminAuth,
    state: web::Data<AppState>,
    path: web::Path<String>,
) -> Result<HttpResponse, Error> {
    let store = state.db.token_store();
    let view = tokens::revoke(
        &*store,
        state.ids.access().callers.as_deref(),
        &path.into_inner(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(TokenBody::from(view)))
}
