//! The one place that wires configuration, database, engines and HTTP together.

use std::net::TcpListener;

use actix_web::dev::{Server, ServerHandle};
use actix_web::{App, HttpServer, web};
use anyhow::Context;
use tracing::info;
use tracing_actix_web::TracingLogger;

use crate::config::Settings;
use crate::http::{self, AppState};
use crate::segment::SegmentAllocator;
use crate::store::{Database, redact};

/// A built server: bound to its port, engines started, not yet serving.
pub struct Application {
    port: u16,
    server: Server,
    state: AppState,
}

impl Application {
    /// Connects and migrates the database, starts the engines and binds the listener.
    /// Port 0 picks a free port; [`Self::port`] tells which.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let db = Database::connect(&settings.db_options())
            .await
            .with_context(|| format!("database.url = {}", redact(&settings.database.url)))?;
        info!(database = db.kind(), url = %redact(&settings.database.url), "database ready");

        let segment = if settings.segment.enabled {
            let engine = SegmentAllocator::new(db.segment_store(), settings.segment_config());
            let tags = engine.refresh_tags().await.context("reading leaf_alloc")?;
            engine.spawn_refresh();
            info!(tags, "segment engine started");
            Some(engine)
        } else {
            None
        };

        let listener = TcpListener::bind((settings.server.host.as_str(), settings.server.port))
            .with_context(|| {
                format!(
                    "binding server.host:server.port = {}:{}",
                    settings.server.host, settings.server.port
                )
            })?;
        let port = listener.local_addr()?.port();
        let state = AppState {
            segment,
            db,
            admin_token: settings.admin.token.clone(),
        };
        let data = web::Data::new(state.clone());
        let max_body = settings.server.max_body_bytes;
        let mut server = HttpServer::new(move || {
            App::new()
                .wrap(TracingLogger::default())
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
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let db = self.state.db.clone();
        let result = self.server.await;
        db.close().await;
        result
    }
}
