//! The `leafid` binary: `serve` (the default) runs the server; `layout {decode, bounds, plan,
//! check}` are the migration teams' tools ([`cli`]), which need neither the server nor a database;
//! `tags {list, show, create, set-step}` are the DBAs' tools on the configured database;
//! `keys check` checks the permutation keys against it; `tokens {create, list, revoke}` manages
//! caller tokens on it; `healthcheck` probes `/health/live` for
//! a container's HEALTHCHECK.

mod cli;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use leafid::access::AccessPolicy;
use leafid::config::{LogFormat, Settings};
use leafid::service::IdService;
use leafid::startup::Application;
use leafid::store::{Database, redact};

/// Unique, positive, increasing 64-bit ids (Leaf-segment and snowflake engines).
#[derive(Debug, Parser)]
#[command(name = "leafid", version, about)]
struct Cli {
    /// A TOML file layered over the built-in defaults (LEAFID__* variables still override it).
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

// Parsed once and dropped at exit: the size of the layout variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP server (the default).
    Serve,
    /// Bit-layout tools: decode ids, the ids of a time range, plan a migration, check a layout
    /// against a floor.
    ///
    /// Exit codes: 0 ok, 1 plan impossible or check failed, 2 bad input.
    Layout {
        #[command(subcommand)]
        command: cli::layout::LayoutCommand,
    },
    /// leaf_alloc rows on the configured database (database.url, --config, LEAFID__*).
    ///
    /// Exit codes: 0 ok, 1 unknown tag, tag exists or database unreachable, 2 bad input.
    Tags {
        #[command(subcommand)]
        command: cli::tags::TagsCommand,
    },
    /// Formatted ids: `leafid ids decode BIZ_TAG ID` reads one back into its period and
    /// sequence (the same as `leafid tags decode`), from the tag's format in the database.
    ///
    /// Exit codes: 0 ok, 1 unknown tag or database unreachable, 2 bad input (not an id of the
    /// format).
    Ids {
        #[command(subcommand)]
        command: IdsCommand,
    },
    /// Permutation keys (shapes.keys) against the configured database: `leafid keys check`
    /// prints each key id, its key's check value and the database's record.
    ///
    /// Exit codes: 0 every key matches or is not bound yet, 1 a mismatch or the database
    /// unreachable, 2 bad configuration (a key file that is missing, weak or not a file).
    Keys {
        #[command(subcommand)]
        command: cli::keys::KeysCommand,
    },
    /// Caller tokens on the configured database: `create NAME --tags 'orders*,pay'`, `list`,
    /// `revoke NAME`. A token is printed once, at creation.
    ///
    /// Exit codes: 0 ok, 1 a name taken or unknown, or the database unreachable, 2 bad input.
    Tokens {
        #[command(subcommand)]
        command: cli::tokens::TokensCommand,
    },
    /// GET /health/live on 127.0.0.1 (for a container HEALTHCHECK). Exit 0 live, 1 not.
    Healthcheck {
        /// The port; server.port of the configuration by default.
        #[arg(long)]
        port: Option<u16>,
    },
}

/// `leafid ids ...`.
#[derive(Debug, Subcommand)]
enum IdsCommand {
    /// Read a formatted tag's id back into its period and sequence.
    Decode {
        /// The formatted business tag.
        biz_tag: String,
        /// An id of it, as issued.
        id: String,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[actix_web::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.config.as_deref()).await,
        Command::Layout { command } => layout(&command, cli.config.as_deref()),
        Command::Tags { command } => tags(&command, cli.config.as_deref()).await,
        Command::Ids {
            command: IdsCommand::Decode { biz_tag, id, json },
        } => {
            let command = cli::tags::TagsCommand::Decode {
                biz_tag,
                id,
                output: cli::tags::OutputFlags { json },
            };
            tags(&command, cli.config.as_deref()).await
        }
        Command::Keys { command } => keys(&command, cli.config.as_deref()).await,
        Command::Tokens { command } => tokens(&command, cli.config.as_deref()).await,
        Command::Healthcheck { port } => healthcheck(port, cli.config.as_deref()),
    }
}

/// One error line on stderr and its exit code.
fn fail(e: &cli::CliError) -> ExitCode {
    eprintln!("leafid: {e}");
    ExitCode::from(e.code())
}

/// The configuration, its database and the segment route the server would run on it (lanes
/// included; no refresh is awaited: nothing is cached beyond the command; the background
/// tasks stop before the exit).
struct OnDatabase {
    settings: Settings,
    db: Database,
    background: leafid::background::Background,
    route: leafid::service::SegmentRoute,
}

impl OnDatabase {
    async fn connect(config: Option<&Path>) -> Result<Self, cli::CliError> {
        let settings =
            Settings::load(config).map_err(|e| cli::CliError::BadInput(format!("{e:#}")))?;
        let db = Database::connect(&settings.db_options())
            .await
            .map_err(|e| {
                cli::CliError::Database(format!(
                    "{} unreachable: {e:#}",
                    redact(&settings.database.url)
                ))
            })?;
        let background = leafid::background::Background::new();
        let claims = leafid::segment::lanes::LaneClaims::new();
        let own = leafid::startup::own_engine(
            &settings,
            db.segment_store(),
            settings.segment_config(),
            &claims,
        );
        let route = leafid::startup::segment_route(&settings, own, &claims, &background)
            .await
            .map_err(|e| cli::CliError::Database(format!("{e:#}")))?;
        Ok(Self {
            settings,
            db,
            background,
            route,
        })
    }

    async fn close(self) {
        self.background
            .shutdown(std::time::Duration::from_secs(2))
            .await;
        self.db.close().await;
    }
}

/// Runs a tag command on the configured database; its answer on stdout, an error as one line
/// on stderr.
async fn tags(command: &cli::tags::TagsCommand, config: Option<&Path>) -> ExitCode {
    let checked = match command.check() {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let on = match OnDatabase::connect(config).await {
        Ok(on) => on,
        Err(e) => return fail(&e),
    };
    let ids = IdService::new(Some(on.route.clone()), None, AccessPolicy::default());
    let mut out = std::io::stdout().lock();
    let result = cli::tags::run(&checked, command.json(), &ids, &mut out)
        .await
        .and_then(|unreached| {
            out.flush()?;
            Ok(unreached)
        });
    if let Ok(unreached) = &result
        && !unreached.is_empty()
    {
        eprintln!(
            "leafid: lanes not reached yet: {unreached:?} (the servers' repair settles them when they answer)"
        );
    }
    drop(ids);
    on.close().await;
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Runs a key command on the configured database: its report on stdout, exit 1 on a mismatch.
async fn keys(command: &cli::keys::KeysCommand, config: Option<&Path>) -> ExitCode {
    let on = match OnDatabase::connect(config).await {
        Ok(on) => on,
        Err(e) => return fail(&e),
    };
    let mut out = std::io::stdout().lock();
    let result = cli::keys::run(
        &on.settings.shape_keys,
        on.route.home(),
        command.json(),
        &mut out,
    )
    .await
    .and_then(|exit| out.flush().map(|()| exit).map_err(cli::CliError::from));
    on.close().await;
    match result {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(e) => fail(&e),
    }
}

/// Runs a token command on the configured database (the own one: with lanes, each region's
/// database holds its own tokens).
async fn tokens(command: &cli::tokens::TokensCommand, config: Option<&Path>) -> ExitCode {
    let settings = match Settings::load(config) {
        Ok(s) => s,
        Err(e) => return fail(&cli::CliError::BadInput(format!("{e:#}"))),
    };
    let db = match Database::connect(&settings.db_options()).await {
        Ok(db) => db,
        Err(e) => {
            return fail(&cli::CliError::Database(format!(
                "{} unreachable: {e:#}",
                redact(&settings.database.url)
            )));
        }
    };
    let mut out = std::io::stdout().lock();
    let result = cli::tokens::run(command, &*db.token_store(), &mut out)
        .await
        .and_then(|()| out.flush().map_err(cli::CliError::from));
    db.close().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Probes the local server's liveness.
fn healthcheck(port: Option<u16>, config: Option<&Path>) -> ExitCode {
    let port = match port {
        Some(p) => p,
        None => match Settings::load(config) {
            Ok(s) => s.server.port,
            Err(e) => return fail(&cli::CliError::BadInput(format!("{e:#}"))),
        },
    };
    match cli::healthcheck::probe(port) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// Runs the server, then gives its last log lines up to 2 s to reach stderr (never longer: a
/// blocked or full stderr must not hold the exit up).
async fn serve(config: Option<&Path>) -> ExitCode {
    let code = run_server(config).await;
    leafid::telemetry::sink::flush(std::time::Duration::from_secs(2));
    code
}

async fn run_server(config: Option<&Path>) -> ExitCode {
    let settings = match Settings::load(config) {
        Ok(s) => s,
        Err(e) => {
            leafid::telemetry::init(LogFormat::Text);
            tracing::error!("{e:#}");
            return ExitCode::FAILURE;
        }
    };
    leafid::telemetry::init(settings.log.format);
    let app = match Application::build(settings).await {
        Ok(app) => app,
        Err(e) => {
            tracing::error!("start-up failed: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    match app.run_until_stopped().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("server failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs a layout command at the current time; its answer on stdout, an error as one line on
/// stderr.
fn layout(command: &cli::layout::LayoutCommand, config: Option<&Path>) -> ExitCode {
    // `layout check` without `--layout` checks the configured layout (defaults, `--config`,
    // LEAFID__* variables), against `--floor` or `snowflake.min_id_floor`.
    let configured = match Settings::load(config)
        .and_then(|s| Ok((s.snowflake_layout()?, s.snowflake.min_id_floor)))
    {
        Ok((layout, floor)) => cli::layout::Configured {
            layout: Some(layout),
            min_id_floor: Some(floor),
        },
        Err(e) if config.is_some() => {
            eprintln!("leafid: {e:#}");
            return ExitCode::from(2);
        }
        Err(_) => cli::layout::Configured::default(),
    };
    let now_ms = chrono::Utc::now().timestamp_millis();
    let mut out = std::io::stdout().lock();
    let result = cli::layout::run(command, &configured, now_ms, &mut out)
        .and_then(|exit| out.flush().map(|()| exit).map_err(cli::CliError::from));
    match result {
        Ok(exit) => ExitCode::from(exit.code()),
        Err(e) => {
            eprintln!("leafid: {e}");
            ExitCode::from(e.code())
        }
    }
}
