//! `leafid tokens {create, list, revoke}`: caller tokens on the configured database, the same
//! logic as `/api/v1/tokens` (`leafid::service::tokens`). A running server reads a change
//! within `callers.refresh_secs`. `create` prints the token once: it is stored only as its
//! SHA-256.

use std::io::Write;

use clap::{Args, Subcommand};
use leafid::error::Error;
use leafid::service::tokens::{self, NewToken, TokenView};
use leafid::store::tokens::CallerTokenStore;

use super::CliError;
use super::tags::OutputFlags;

/// `leafid tokens ...`.
#[derive(Debug, Subcommand)]
pub enum TokensCommand {
    /// Create a caller token; prints it once (stored only as its SHA-256).
    Create(CreateArgs),
    /// List the caller tokens (never a secret), revoked ones included.
    List(OutputFlags),
    /// Revoke a caller token: refused at once by the servers' next refresh (callers.refresh_secs).
    Revoke {
        /// The token's name.
        name: String,
        #[command(flatten)]
        output: OutputFlags,
    },
}

/// `leafid tokens create`.
#[derive(Debug, Args)]
pub struct CreateArgs {
    /// The token's name: 1 to 64 of [A-Za-z0-9._-], never reused.
    pub name: String,
    /// Scope, comma-separated: tags, prefixes (`orders*`), `*` (every tag), `snowflake`.
    #[arg(long)]
    pub tags: String,
    /// Ids per second.
    #[arg(long)]
    pub rate: Option<i64>,
    /// Burst of the rate.
    #[arg(long)]
    pub burst: Option<i64>,
    /// Share of a formatted tag's period, above 0 and at most 1.
    #[arg(long)]
    pub period_share: Option<f64>,
    #[command(flatten)]
    pub output: OutputFlags,
}

impl TokensCommand {
    /// Whether the answer is JSON.
    pub fn json(&self) -> bool {
        match self {
            Self::Create(a) => a.output.json,
            Self::List(o) | Self::Revoke { output: o, .. } => o.json,
        }
    }
}

fn cli_error(e: Error) -> CliError {
    match e {
        Error::InvalidRequest(m) => CliError::BadInput(m),
        e @ (Error::TokenExists(_) | Error::UnknownToken(_)) => CliError::Refused(e.to_string()),
        e => CliError::Database(e.to_string()),
    }
}

fn json_of(v: &TokenView) -> serde_json::Value {
    serde_json::json!({
        "name": v.name,
        "tags": v.tags,
        "rate_per_sec": v.rate_per_sec,
        "burst": v.burst,
        "period_share": v.period_share,
        "created_at": v.created_at,
        "revoked_at": v.revoked_at,
    })
}

fn line(v: &TokenView) -> String {
    let quota = |o: Option<i64>| o.map_or_else(|| "-".to_owned(), |n| n.to_string());
    format!(
        "{:<24}  {:<8}  {:<8}  {:<8}  {:<20}  {:<20}  {}",
        v.name,
        quota(v.rate_per_sec),
        quota(v.burst),
        v.period_share
            .map_or_else(|| "-".to_owned(), |s| s.to_string()),
        v.created_at.format("%Y-%m-%dT%H:%M:%SZ"),
        v.revoked_at.map_or_else(
            || "-".to_owned(),
            |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
        ),
        v.tags.join(",")
    )
}

/// Runs `command` on `store`, writing the answer to `out`.
pub async fn run(
    command: &TokensCommand,
    store: &dyn CallerTokenStore,
    out: &mut impl Write,
) -> Result<(), CliError> {
    let json = command.json();
    match command {
        TokensCommand::Create(a) => {
            let new = NewToken {
                name: a.name.clone(),
                tags: a
                    .tags
                    .split(',')
                    .map(|t| t.trim().to_owned())
                    .filter(|t| !t.is_empty())
                    .collect(),
                rate_per_sec: a.rate,
                burst: a.burst,
                period_share: a.period_share,
            };
            let created = tokens::create(store, None, &new).await.map_err(cli_error)?;
            if json {
                let mut v = json_of(&created.view);
                v["token"] = serde_json::Value::String(created.token);
                writeln!(out, "{v}")?;
            } else {
                writeln!(out, "{}", created.token)?;
                writeln!(
                    out,
                    "# caller token {:?} for {}: shown this once, store it now (the database keeps only its hash)",
                    created.view.name,
                    created.view.tags.join(",")
                )?;
            }
        }
        TokensCommand::List(_) => {
            let all = tokens::list(store).await.map_err(cli_error)?;
            if json {
                let body: Vec<_> = all.iter().map(json_of).collect();
                writeln!(out, "{}", serde_json::Value::Array(body))?;
            } else if all.is_empty() {
                writeln!(out, "no caller tokens")?;
            } else {
                writeln!(
                    out,
                    "{:<24}  {:<8}  {:<8}  {:<8}  {:<20}  {:<20}  tags",
                    "name", "rate", "burst", "share", "created_at", "revoked_at"
                )?;
                for v in &all {
                    writeln!(out, "{}", line(v))?;
                }
            }
        }
        TokensCommand::Revoke { name, .. } => {
            let v = tokens::revoke(store, None, name).await.map_err(cli_error)?;
            if json {
                writeln!(out, "{}", json_of(&v))?;
            } else {
                writeln!(
                    out,
                    "revoked {:?}: servers refuse it within callers.refresh_secs",
                    v.name
                )?;
            }
        }
    }
    Ok(())
}
