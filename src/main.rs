//! The `leafid` binary: `serve` (the default) runs the server.

use std::path::PathBuf;
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

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the HTTP server (the default).
    Serve,
}

#[actix_web::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            leafid::telemetry::init(false);
            tracing::error!("{e:#}");
            return ExitCode::FAILURE;
        }
    };
    leafid::telemetry::init(settings.log.format == "json");
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => serve(settings).await,
    }
}

async fn serve(settings: Settings) -> ExitCode {
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
