//! The one place that wires configuration, database, engines and HTTP together.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use actix_web::dev::{Server, ServerHandle};
use actix_web::{App, HttpServer, web};
use anyhow::Context;
use tracing::{info, warn};

use crate::access::AccessPolicy;
use crate::access::callers::{CallerMode, Callers};
use crate::background::Background;
use crate::config::Settings;
use crate::http::{self, AppState};
use crate::lease_gate::LeaseGate;
use crate::metrics::Metrics;
use crate::segment::SegmentAllocator;
use crate::segment::lanes::{Lane, LaneClaims, LaneMode, LaneStore, Lanes};
use crate::service::{IdService, SegmentRoute};
use crate::snowflake::clock::SystemClock;
use crate::snowflake::engine::{SnowflakeConfig, SnowflakeEngine, StartOptions, WorkerCache};
use crate::snowflake::worker::{NodeInfo, WorkerStrategy};
use crate::store::durability::DurabilityGate;
use crate::store::{Database, redact};

/// A built server: bound to its port, engines started, not yet serving.
pub struct Application {
    port: u16,
    /// The gRPC door's bound port, when `grpc.enabled`.
    grpc_port: Option<u16>,
    server: Server,
    state: AppState,
    /// The tag refresh and the lease heartbeat: stopped and awaited before the lease release.
    background: Background,
    /// `server.drain_secs`: readiness fails this long before the listener closes.
    drain: Duration,
}

impl Application {
    /// Connects and migrates the database, starts the engines and binds the listener.
    /// Port 0 picks a free port; [`Self::port`] tells which.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let opts = settings.db_options();
        let url = redact(&settings.database.url);
        // A MySQL database that cannot be reached at start does not keep the server down: the
        // segment engine serves what it can (tags answer 503 until the database returns) and
        // the snowflake engine resumes its cached worker lease or waits for one. A database
        // that answers with a refusal (credentials, unknown schema) still stops the start.
        let (db, deferred) = match Database::connect(&opts).await {
            Ok(db) => (db, None),
            Err(e) if is_unreachable(&e) => match Database::connect_deferred(&opts) {
                Some((db, migration)) => {
                    warn!(
                        error = format!("{e:#}"), url = %url,
                        "database unreachable at start: starting without it, connecting and \
                         migrating in the background; requests that need it answer 503 until then"
                    );
                    (db, Some(migration))
                }
                None => return Err(e.context(format!("database.url = {url}"))),
            },
            Err(e) => return Err(e.context(format!("database.url = {url}"))),
        };
        if deferred.is_none() {
            info!(database = db.kind(), url = %url, "database ready");
        }
        // Every lease and worker claim goes through the durability gate: checked now, before
        // the first lease after a failed call, and in the background (store::durability).
        let durability = DurabilityGate::new(db.clone(), settings.database.allow_lossy_commits);
        if deferred.is_none()
            && let Err(e) = durability.check_now().await
        {
            warn!(error = %e, "could not read the database's durability settings yet: leases check first");
        }

        let listener = TcpListener::bind((settings.server.host.as_str(), settings.server.port))
            .with_context(|| {
                format!(
                    "binding server.host:server.port = {}:{}",
                    settings.server.host, settings.server.port
                )
            })?;
        let port = listener.local_addr()?.port();
        let background = Background::new();
        let database_deferred = deferred.is_some();
        if let Some(migration) = deferred {
            background.spawn(migration.run_until_done(Duration::from_secs(1), background.token()));
        }
        background.spawn(durability.clone().watch(background.token()));

        let mut key_reports = Vec::new();
        let segment = if settings.segment.enabled {
            let mut config = settings.segment_config();
            config.lease_gate = lease_gate(&durability);
            let claims = LaneClaims::new();
            let engine = own_engine(
                &settings,
                durability.segment_store(db.segment_store()),
                config,
                &claims,
            );
            engine.set_return_unused_on_shutdown(settings.segment.return_unused_on_shutdown);
            match engine.refresh_tags().await {
                Ok(tags) => info!(tags, "segment engine started"),
                // Each tag is looked up on its first request, and the refresh runs again.
                Err(e) if database_deferred => {
                    warn!(error = %e, "segment engine started without the tag list: database unreachable");
                }
                Err(e) => return Err(anyhow::Error::new(e).context("reading leaf_alloc")),
            }
            engine.spawn_refresh(&background);
            let route = segment_route(&settings, engine, &claims, &background).await?;
            // Every configured key against the database before serving (the verdicts are kept,
            // so the first requests ask nothing more); logged once the server listens, below.
            if database_deferred {
                info!("permutation keys are checked against the database at their first use");
            } else {
                key_reports = route.home().verify_keys().await;
            }
            if let Some(lanes) = route.lane_set() {
                info!(
                    own = lanes.own().slot,
                    lanes = lanes.others().len() + 1,
                    "segment lanes"
                );
                spawn_repair(
                    lanes.clone(),
                    &background,
                    settings.segment_config().refresh_interval,
                );
            }
            Some(route)
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
            let store = Some(durability.worker_store(db.worker_store()));
            let cache = worker_cache(&settings, &config, &url);
            let options = StartOptions {
                cache,
                wait_for_database: true,
                lease_gate: lease_gate(&durability),
            };
            let engine = SnowflakeEngine::start_with(
                config,
                store,
                Arc::new(SystemClock),
                node,
                &background,
                options,
            )
            .await
            .context("starting the snowflake engine")?;
            Some(engine)
        } else {
            None
        };

        let metrics = Metrics::new(segment.as_ref().map(|r| r.own().clone()), snowflake.clone())
            .context("registering the metrics")?;
        metrics
            .register(durability.collector())
            .context("registering the durability metric")?;
        if let Some(claims) = segment.as_ref().and_then(|r| r.claims()) {
            metrics
                .register(claims.collector())
                .context("registering the lane metric")?;
        }
        let callers = start_callers(&settings, &db, &background).await;
        for c in callers.collectors() {
            metrics
                .register(c)
                .context("registering the caller metrics")?;
        }
        let access = AccessPolicy {
            token: settings.admin.token.clone(),
            trust_loopback: settings.admin.trust_loopback,
            protect_reads: settings.admin.protect_reads,
            callers: Some(callers),
        };
        // Caller quotas: each grant of a period share bounded like a lease.
        let quotas = Arc::new(crate::service::quota::Quotas::new(
            db.quota_store(),
            settings.segment_config().load_timeout,
        ));
        metrics
            .register(quotas.collector())
            .context("registering the quota metric")?;
        // Strict tags: their owner rows on the database, this server's address for the hops.
        let strict = crate::service::strict::StrictService::new(
            db.owner_store(),
            crate::segment::strict::StrictTiming::new(Duration::from_millis(
                settings.segment.strict_lease_ms,
            )),
            advertised(&settings, port),
        );
        strict.spawn_tending(&background);
        metrics
            .register(strict.collector())
            .context("registering the strict-tag metric")?;
        let state = AppState {
            ids: IdService::new(segment, snowflake, access)
                .with_quotas(quotas)
                .with_strict(strict),
            db,
            metrics: Arc::new(metrics),
            durability,
            draining: Arc::default(),
        };
        if settings.admin.trust_loopback && settings.admin.token.is_none() {
            warn!(
                "admin.trust_loopback is on: admin writes are accepted without a token from any \
                 loopback peer, including a reverse proxy or sidecar on this host; set \
                 admin.token instead wherever anything forwards to this server"
            );
        }
        let data = web::Data::new(state.clone());
        let data_for_grpc = data.clone();
        let telemetry = http::middleware::Telemetry::new(
            state.metrics.clone(),
            Duration::from_millis(settings.server.body_timeout_ms),
        );
        let max_body = settings.server.max_body_bytes;
        let keep_alive = Duration::from_secs(settings.server.keep_alive_secs);
        let sweep_metrics = state.metrics.clone();
        let mut server = HttpServer::new(move || {
            App::new()
                .wrap(telemetry.clone())
                .app_data(data.clone())
                .configure(|cfg| http::configure(cfg, max_body))
        })
        // Idle connections are closed by one sweep per worker (`http::idle`), not by a timer
        // armed and disarmed per request.
        .keep_alive(actix_web::http::KeepAlive::Os)
        .on_connect(move |io, data| http::idle::on_connect(io, data, keep_alive, &sweep_metrics))
        .listen(listener)?
        .shutdown_timeout(settings.server.shutdown_timeout_secs)
        // SIGTERM/SIGINT/SIGQUIT are handled by `run_until_stopped` (drain first).
        .disable_signals();
        if settings.server.workers > 0 {
            server = server.workers(settings.server.workers);
        }
        info!(host = %settings.server.host, port, "listening");
        let grpc_port = if settings.grpc.enabled {
            Some(start_grpc(&settings, data_for_grpc, &background)?)
        } else {
            None
        };
        // After "listening": a key the database does not record refuses its tags, not the start
        // (an `error!` before "listening" reads as a start that failed).
        log_key_reports(&settings, &key_reports);
        Ok(Self {
            port,
            grpc_port,
            server: server.run(),
            state,
            background,
            drain: Duration::from_secs(settings.server.drain_secs),
        })
    }

    /// The bound port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The gRPC door's bound port, when `grpc.enabled` (`crate::grpc`).
    pub fn grpc_port(&self) -> Option<u16> {
        self.grpc_port
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
    /// On SIGTERM/SIGINT, `/health/ready` fails for `server.drain_secs` while requests are still
    /// served, then the listener closes (SIGQUIT: at once, without grace). Then the background
    /// tasks stop (awaited), the segment engine gives its unused ids back
    /// (`segment.return_unused_on_shutdown`), the worker lease is released, the pool closes.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let signals = tokio::spawn(stop_on_signal(
            self.server.handle(),
            self.state.draining.clone(),
            self.drain,
        ));
        let result = self.server.await;
        signals.abort();
        self.background.shutdown(Duration::from_secs(5)).await;
        // Requests are over: each tag closes and gives its unused ids back (if configured).
        // Strict tags owned here stop being served, then are released: another server takes
        // them over at once rather than after the lease.
        if let Some(strict) = self.state.ids.strict() {
            strict.release_all().await;
        }
        if let Some(engine) = self.state.ids.segment_engine() {
            engine.shutdown().await;
        }
        if let Some(engine) = self.state.ids.snowflake_engine() {
            engine.shutdown().await;
        }
        self.state.db.close().await;
        result
    }
}

/// Binds `server.host:grpc.port` and serves the gRPC door (`crate::grpc`) on a runtime of
/// its own (`server.workers` threads, else one per core, for the connections and the id
/// service's calls, `crate::grpc::door`) in its own thread: the actix system runtime is one
/// thread, and tonic's connections should not share it with the engines' background tasks. It
/// stops when the background tasks do (their token), in-flight calls
/// first, and [`Background::shutdown`] waits for it. Logs `grpc listening` with the port.
fn start_grpc(
    settings: &Settings,
    data: web::Data<AppState>,
    background: &Background,
) -> anyhow::Result<u16> {
    let host = settings.server.host.as_str();
    let listener = TcpListener::bind((host, settings.grpc.port)).with_context(|| {
        format!(
            "binding server.host:grpc.port = {host}:{}",
            settings.grpc.port
        )
    })?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    let max_message = settings.server.max_body_bytes;
    let threads = match settings.server.workers {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .thread_name("grpc")
        .build()
        .context("starting the gRPC runtime")?;
    let stop = background.token();
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("grpc".into())
        .spawn(move || {
            runtime.block_on(async move {
                let served = match tokio::net::TcpListener::from_std(listener) {
                    Ok(listener) => crate::grpc::serve(listener, data, max_message, stop)
                        .await
                        .map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                if let Err(e) = served {
                    tracing::error!(error = %e, "the gRPC door stopped");
                }
            });
            drop(done);
        })
        .context("starting the gRPC thread")?;
    background.spawn(async move {
        // Returns when the gRPC thread is done (its sender dropped).
        let _ = finished.await;
    });
    info!(host = %host, port, "grpc listening");
    Ok(port)
}

/// Where peers reach this server: `server.advertise_url`, else `http://host:port` when the
/// host is one address (not `0.0.0.0` or `::`), else none (the server forwards strict tags but
/// never owns one).
fn advertised(settings: &Settings, port: u16) -> Option<String> {
    let url = settings.server.advertise_url.trim();
    if !url.is_empty() {
        return Some(url.trim_end_matches('/').to_owned());
    }
    let host = settings.server.host.as_str();
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) if ip.is_unspecified() => {
            info!(
                "server.advertise_url is empty and server.host is every address: this server forwards strict tags and never owns one"
            );
            None
        }
        Ok(std::net::IpAddr::V6(ip)) => Some(format!("http://[{ip}]:{port}")),
        _ => Some(format!("http://{host}:{port}")),
    }
}

/// Waits for SIGTERM, SIGINT or SIGQUIT and stops the server: gracefully after the drain
/// period for the first two, at once for SIGQUIT.
async fn stop_on_signal(handle: ServerHandle, draining: Arc<AtomicBool>, drain: Duration) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut quit)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::quit()),
    ) else {
        warn!("could not install signal handlers: stop the server with SIGKILL");
        return;
    };
    let graceful = tokio::select! {
        _ = term.recv() => true,
        _ = int.recv() => true,
        _ = quit.recv() => false,
    };
    if graceful && !drain.is_zero() {
        draining.store(true, Ordering::Relaxed);
        info!(
            drain_secs = drain.as_secs(),
            "stop requested: draining (readiness fails, requests still served)"
        );
        tokio::select! {
            () = tokio::time::sleep(drain) => {}
            _ = term.recv() => info!("second signal: stopping now"),
            _ = int.recv() => info!("second signal: stopping now"),
        }
    }
    info!(graceful, "stopping the server");
    handle.stop(graceful).await;
}

/// The own segment engine over `store` (the database's, behind its durability gate): through
/// its lane (`segment::lanes`), mapped into the lane's blocks with `lanes.slot`, checked to be
/// no lane without. The server and the CLI build it here, so both see one store.
///
/// The own database joins `claims` (as every other lane's does in [`segment_route`]): its slot
/// is recorded only if no other reachable lane database records it, and a mismatch or a clash
/// refuses it (`segment::lanes::claims`).
pub fn own_engine(
    settings: &Settings,
    store: Arc<dyn crate::segment::SegmentStore>,
    config: crate::segment::SegmentConfig,
    claims: &Arc<LaneClaims>,
) -> SegmentAllocator {
    let mode = match settings.lanes.slot {
        Some(slot) => LaneMode::Lane { slot, own: true },
        None => LaneMode::Plain,
    };
    SegmentAllocator::new(Arc::new(LaneStore::joined(store, mode, claims)), config)
}

/// The segment route over the own engine: alone, or with `lanes.slot` the own lane first and
/// every other lane of `lanes.others` after it (each reached in the background if it does not
/// answer now). The server and the CLI build their lanes here.
pub async fn segment_route(
    settings: &Settings,
    own: SegmentAllocator,
    claims: &Arc<LaneClaims>,
    background: &Background,
) -> anyhow::Result<SegmentRoute> {
    let Some(slot) = settings.lanes.slot else {
        return Ok(SegmentRoute::single(own).with_claims(claims.clone()));
    };
    let own = Lane::new(slot, redact(&settings.database.url), own);
    let mut others = Vec::new();
    for (other, url) in settings.lanes.other_lanes()? {
        others.push(other_lane(settings, other, &url, claims, background).await?);
    }
    // Every reachable lane database's claim read at start, not only at each lane's first
    // lease: a clash known now refuses the own lane before any request (in the background: a
    // lane unreachable now is read at the next repair pass).
    let at_start = claims.clone();
    background.spawn(async move {
        let _ = at_start
            .scan(crate::segment::lanes::claims::SCAN_WAIT)
            .await;
    });
    let lanes = Lanes::new(own, others).with_claims(claims.clone());
    Ok(SegmentRoute::lanes(Arc::new(lanes)))
}

/// Another region's lane: its database (reached in the background if it does not answer now:
/// the lane passes requests on until then), its own durability gate and its engine.
pub async fn other_lane(
    settings: &Settings,
    slot: u8,
    url: &str,
    claims: &Arc<LaneClaims>,
    background: &Background,
) -> anyhow::Result<Lane> {
    let mut opts = settings.db_options();
    opts.url = url.to_owned();
    opts.pgbouncer = false;
    let shown = redact(url);
    let db = match Database::connect(&opts).await {
        Ok(db) => db,
        Err(e) if is_unreachable(&e) => match Database::connect_deferred(&opts) {
            Some((db, migration)) => {
                warn!(slot, lane = %shown, error = format!("{e:#}"), "lane unreachable at start: connecting in the background");
                background
                    .spawn(migration.run_until_done(Duration::from_secs(1), background.token()));
                db
            }
            None => return Err(e.context(format!("lanes.others.{slot} = {shown}"))),
        },
        Err(e) => return Err(e.context(format!("lanes.others.{slot} = {shown}"))),
    };
    let gate = DurabilityGate::new(db.clone(), settings.database.allow_lossy_commits);
    background.spawn(gate.clone().watch(background.token()));
    let mut config = settings.segment_config();
    config.lease_gate = lease_gate(&gate);
    let store = LaneStore::joined(
        gate.segment_store(db.segment_store()),
        LaneMode::Lane { slot, own: false },
        claims,
    );
    let engine = SegmentAllocator::new(Arc::new(store), config);
    if let Err(e) = engine.refresh_tags().await {
        warn!(slot, lane = %shown, error = %e, "lane's tag list not read yet");
    }
    engine.spawn_refresh(background);
    Ok(Lane::new(slot, shown, engine))
}

/// The check of every configured key at start ([`SegmentAllocator::verify_keys`]), one line
/// each: an `error!` naming the key id and its file for a key the database does not record (its
/// tags answer `key_unavailable`; the rest of the server serves), a warning when the database
/// could not tell.
fn log_key_reports(settings: &Settings, reports: &[crate::segment::KeyReport]) {
    use crate::segment::{KeyVerdict, SpecError};
    for r in reports {
        let file = settings
            .shape_keys
            .path(&r.key_id)
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        match &r.verdict {
            Ok(KeyVerdict::Matches) => {
                info!(key_id = %r.key_id, check = %r.check, "permutation key matches the database");
            }
            Ok(KeyVerdict::Differs { recorded }) => {
                let why = SpecError::KeyMismatch {
                    key_id: r.key_id.clone(),
                    check: r.check.clone(),
                    recorded: recorded.clone(),
                };
                tracing::error!(
                    key_id = %r.key_id, file = %file, check = %r.check, recorded = %recorded,
                    "{why}; its tags answer key_unavailable on this server (shapes.keys.{} = {file})",
                    r.key_id
                );
            }
            Err(e) => warn!(
                key_id = %r.key_id, error = %e,
                "could not check the permutation keys against the database: checked at first use"
            ),
        }
    }
}

/// The lanes' repair pass (`segment::lanes::repair`), every `interval`.
fn spawn_repair(lanes: Arc<Lanes>, background: &Background, interval: Duration) {
    spawn_watch(lanes.clone(), background);
    let token = background.token();
    background.spawn(async move {
        loop {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(interval) => {}
            }
            // A clash that a partition hid (both databases recorded one slot while apart) is
            // found here at the latest, one interval after the heal (see docs/deploy.md 12).
            if let Some(claims) = lanes.claims() {
                let _ = claims.scan(crate::segment::lanes::claims::SCAN_WAIT).await;
            }
            let r = lanes.repair().await;
            if !r.created.is_empty() || !r.deleted.is_empty() {
                info!(created = r.created.len(), deleted = r.deleted.len(), unreached = ?r.unreached, "lanes repaired");
            }
        }
    });
}

/// The lanes' watch (`crate::segment::lanes::watch`): each second, a delete made on another
/// lane during a partition is carried here, and a slot clash a partition hid is found.
fn spawn_watch(lanes: Arc<Lanes>, background: &Background) {
    use crate::segment::lanes::watch::{Settled, WATCH_INTERVAL};
    let token = background.token();
    background.spawn(async move {
        let settled = Settled::default();
        let mut next = WATCH_INTERVAL;
        loop {
            tokio::select! {
                _ = token.cancelled() => return,
                _ = tokio::time::sleep(next) => {}
            }
            let (deleted, after) = lanes.watch_pass(&settled).await;
            next = after;
            if !deleted.is_empty() {
                info!(
                    ?deleted,
                    "lanes: deletes made on another lane carried here (tombstone wins)"
                );
            }
        }
    });
}

/// Whether `err` says the database could not be reached (refused, reset, timed out), as
/// opposed to a database that answered with a refusal.
fn is_unreachable(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<sqlx::Error>(),
            Some(sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Tls(_))
        )
    })
}

/// The worker lease cache file of the `lease` strategy (`snowflake.worker.cache_file`), or
/// `None` (another strategy, the key empty, or a file that cannot be opened or is locked by
/// another process: logged, and the server runs without it).
fn worker_cache(
    settings: &Settings,
    config: &SnowflakeConfig,
    database: &str,
) -> Option<Arc<WorkerCache>> {
    let path = &settings.snowflake.worker.cache_file;
    if config.strategy != WorkerStrategy::Lease || path.is_empty() {
        return None;
    }
    match WorkerCache::open(path, &config.layout, database) {
        Ok(cache) => Some(Arc::new(cache)),
        Err(e) => {
            warn!(error = %e, "no worker lease cache: a start during a database outage will wait for the database");
            None
        }
    }
}

/// The caller-token check (`crate::access::callers`): loaded from the own database now (a
/// database down at start leaves it unloaded: closed where tokens may be required), refreshed
/// every `callers.refresh_secs`, and one line at start when the server is bound beyond loopback
/// and refuses anonymous callers, or serves them by choice.
async fn start_callers(
    settings: &Settings,
    db: &Database,
    background: &Background,
) -> Arc<Callers> {
    let mode = settings.callers.mode;
    let beyond_loopback = !crate::config::is_loopback_host(&settings.server.host);
    let callers = Callers::new(mode, beyond_loopback);
    let store = db.token_store();
    match callers.reload(&*store).await {
        Ok(tokens) => info!(tokens, "caller tokens loaded"),
        Err(e) => warn!(
            error = %e,
            "caller tokens not loaded: id requests that may need one answer not_ready until the              database answers"
        ),
    }
    if mode == CallerMode::Auto && beyond_loopback {
        warn!(
            host = %settings.server.host,
            "server.host is beyond loopback and callers.mode is \"auto\": id requests without a \
             caller token are refused (401); create tokens (`leafid tokens create NAME --tags \
             TAGS`) for the callers, or set callers.mode = \"open\" to serve anonymous callers"
        );
    }
    callers.warn_if_open();
    background.spawn(callers.clone().refresh_every(
        store,
        Duration::from_secs(settings.callers.refresh_secs),
        background.token(),
    ));
    callers
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

/// The engines' [`LeaseGate`]: the durability gate's refusal (a database whose settings can
/// lose a committed lease, unless `database.allow_lossy_commits`).
fn lease_gate(durability: &DurabilityGate) -> LeaseGate {
    let durability = durability.clone();
    LeaseGate::new(move || durability.refusal())
}

/// A token naming this process in the worker lease table: pid, port and start time.
fn owner_token(port: u16) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{:x}-{port}-{nanos:x}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_database_that_cannot_be_reached_defers_the_start() {
        let refused = anyhow::Error::new(sqlx::Error::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )))
        .context("connecting to MySQL (database.url)");
        assert!(is_unreachable(&refused));
        let timed_out = anyhow::Error::new(sqlx::Error::PoolTimedOut).context("x");
        assert!(is_unreachable(&timed_out));
        let bad_url = anyhow::Error::new(sqlx::Error::Configuration("bad url".into()));
        assert!(!is_unreachable(&bad_url));
        let migration = anyhow::anyhow!("applying migrations");
        assert!(!is_unreachable(&migration));
    }
}
