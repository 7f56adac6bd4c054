//! The `leafid` binary: `serve` (the default) runs the server; `layout {decode, plan, check}`
//! are the migration teams' tools ([`cli`]), which need neither the server nor a database.

mod cli;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use leafid::config::Settings;
use leafid::startup::Application;

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
    /// Bit-layout tools: decode ids, plan a migration, check a layout against a floor.
    ///
    /// Exit codes: 0 ok, 1 plan impossible or check failed, 2 bad input.
    Layout {
        #[command(subcommand)]
        command: cli::layout::LayoutCommand,
    },
}

#[actix_web::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(cli.config.as_deref()).await,
        Command::Layout { command } => layout(&command, cli.config.as_deref()),
    }
}

async fn serve(config: Option<&Path>) -> ExitCode {
    let settings = match Settings::load(config) {
        Ok(s) => s,
        Err(e) => {
            leafid::telemetry::init(false);
            tracing::error!("{e:#}");
            return ExitCode::FAILURE;
        }
    };
    leafid::telemetry::init(settings.log.format == "json");
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
