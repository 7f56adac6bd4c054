//! The one place that wires configuration, database, engines and HTTP together.

use std::net::TcpListener;
use std::sync::Arc;

use actix_web::dev::{Server, ServerHandle};
use actix_web::{App, HttpServer, middleware, web};
use anyhow::Context;
use tracing::info;

use crate::background::Background;
use crate::config::Settings;
use crate::http::{self, AppState};
use crate::metrics::Metrics;
use crate::segment::SegmentAllocator;
use crate::snowflake::clock::SystemClock;
use crate::snowflake::engine::SnowflakeEngine;
use crate::snowflake::worker::NodeInfo;
use crate::store::{Database, redact};

/// A built server: bound to its port, engines started, not yet serving.
pub struct Application {
    port: u16,
    server: Server,
    state: AppState,
    /// The tag refresh and the lease heartbeat: stopped and awaited before the lease release.
    background: Background,
}

impl Application {
    /// Connects and migrates the database, starts the engines and binds the listener.
    /// Port 0 picks a free port; [`Self::port`] tells which.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let db = Database::connect(&settings.db_options())
            .await
            .with_context(|| format!("database.url = {}", redact(&settings.database.url)))?;
        info!(database = db.kind(), url = %redact(&settings.database.url), "database ready");

        let listener = TcpListener::bind((settings.server.host.as_str(), settings.server.port))
            .with_context(|| {
                format!(
                    "binding server.host:server.port = {}:{}",
                    settings.server.host, settings.server.port
                )
            })?;
        let port = listener.local_addr()?.port();
        let background = Background::new();

        let segment = if settings.segment.enabled {
            let engine = SegmentAllocator::new(db.segment_store(), settings.segment_config());
            let tags = engine.refresh_tags().await.context("reading leaf_alloc")?;
            engine.spawn_refresh(&background);
            info!(tags, "segment engine started");
            Some(engine)
        } else {
            None
        };

        let snowflake = if settings.snowflake.enabled {
            let config = settings.snowflake_config()?;
            let node = NodeInfo {
                host: host_name(),
                port: port.to_string(),
                owner: owner_token(port),
            };
            let store = Some(db.worker_store());
            let engine =
                SnowflakeEngine::start(config, store, Arc::new(SystemClock), node, &background)
                    .await
                    .context("starting the snowflake engine")?;
            Some(engine)
        } else {
            None
        };

        let metrics =
            Metrics::new(segment.clone(), snowflake.clone()).context("registering the metrics")?;
        let state = AppState {
            segment,
            snowflake,
            db,
            admin_token: settings.admin.token.clone(),
            metrics: Arc::new(metrics),
        };
        let data = web::Data::new(state.clone());
        let max_body = settings.server.max_body_bytes;
        let mut server = HttpServer::new(move || {
            App::new()
                .wrap(middleware::from_fn(http::metrics::telemetry))
                .app_data(data.clone())
                .configure(|cfg| http::configure(cfg, max_body))
        })
        .listen(listener)?
        .shutdown_timeout(settings.server.shutdown_timeout_secs);
        if settings.server.workers > 0 {
            server = server.workers(settings.server.workers);
        }
        info!(host = %settings.server.host, port, "listening");
        Ok(Self {
            port,
            server: server.run(),
            state,
            background,
        })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A handle to stop the server (graceful by default).
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Shared state (engines and database), e.g. for tests.
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until SIGINT/SIGTERM or [`ServerHandle::stop`]; in-flight requests finish first.
    /// Then the background tasks stop (awaited), the worker lease is released, the pool closes.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let result = self.server.await;
        self.background
            .shutdown(std::time::Duration::from_secs(5))
            .await;
        if let Some(engine) = &self.state.snowflake {
            engine.shutdown().await;
        }
        self.state.db.close().await;
        result
    }
}

/// This machine's host name (stored with worker ids), at most 64 characters.
fn host_name() -> String {
    let name = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .unwrap_or_else(|| "unknown".into());
    name.trim().chars().take(64).collect()
}

/// A token naming this process in the worker lease table: pid, port and start time.
fn owner_token(port: u16) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}-{port}-{nanos:x}", std::process::id())
}
