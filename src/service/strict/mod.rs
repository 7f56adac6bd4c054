//! Strict tags through the [`IdService`](super::IdService): served by the tag's owner, forwarded
//! to it by every other server (`crate::segment::strict` holds the rules and the proof).
//!
//! **Why a hop, not a redirect.** A non-owner passes the request to the owner itself and
//! answers the caller with the owner's ids: Leaf-era callers (`curl` without `-L`, HTTP
//! libraries that do not follow a 307 on every method, load balancers) keep working with any
//! server's address, the owner's address need not be reachable by callers (only by peers), and
//! the caller's token and quotas are checked once, where the request arrives. The hop is
//! bounded by the request's segment wait (`segment.wait_timeout_ms`), like a wait for a lease.
//!
//! **Who may use the hop.** The owner serves a forwarded request only with the key it wrote
//! into its owner row at its takeover (`leafid-peer-key`): a caller without the database cannot
//! know it, so the hop never bypasses the entry server's checks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::RngCore;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::error::Error;
use crate::segment::strict::clock::boot_now;
use crate::segment::strict::{
    Claim, LeaseTicket, OwnerRow, OwnerStore, Ownership, Refused, StrictTag, StrictTiming, Take,
};
use crate::segment::{BizTag, SegmentAllocator, SegmentError};
use crate::telemetry::LogLimiter;

mod coalesce;
mod hop;

use crate::access::constant_time_eq;
use hop::Forward;
pub use hop::{FORWARD_ROUTE, PEER_KEY_HEADER};

/// How long a server waits between two looks at an owner that does not answer.
const RETRY_PAUSE: Duration = Duration::from_millis(25);

/// Strict tags on this server: the tags it serves or forwards, its identity in the owner rows,
/// and the client of its hops.
pub struct StrictService {
    /// The strict tags this server was asked for: only tags whose stored spec is strict get an
    /// entry, so a caller cannot grow it beyond the database's strict tags.
    tags: Mutex<HashMap<String, Arc<StrictTag>>>,
    /// The queues of hops, one per tag of `tags` that was forwarded (`coalesce`).
    hops: Mutex<HashMap<String, Arc<coalesce::HopQueue>>>,
    owners: Arc<dyn OwnerStore>,
    timing: StrictTiming,
    /// This process's instance id in the owner rows (new at every start).
    me: String,
    /// Where peers reach this server; `None`: it never owns a tag (it forwards).
    address: Option<String>,
    http: reqwest::Client,
    /// The runtime the hops and the leases ahead run on (the server's main one, which outlives
    /// every HTTP worker).
    runtime: tokio::runtime::Handle,
    /// `leafid_strict_events_total{event}`: takeovers, losses, releases, hops and their
    /// failures (a fixed set of labels).
    events: prometheus::IntCounterVec,
}

/// The events counted in `leafid_strict_events_total` (the only label values).
#[derive(Debug, Clone, Copy)]
enum Event {
    /// This server took a tag over.
    TakeOver,
    /// This server lost a tag (another holds it, or it was deleted).
    Lost,
    /// A request passed to the owner and answered by it.
    Hop,
    /// A hop that gave no ids (owner gone, slow, or no longer the owner).
    HopFailed,
    /// An HTTP hop sent to an owner, for one or more requests (`coalesce`).
    HopSent,
    /// A renewal that did not reach the database.
    RenewFailed,
    /// Another server holds the tag under this server's own address (two servers given one
    /// `server.advertise_url`, or a load balancer's): no hop is sent, the request answers
    /// `segments_not_ready`.
    AddressClash,
}

impl Event {
    fn label(self) -> &'static str {
        match self {
            Self::TakeOver => "takeover",
            Self::Lost => "lost",
            Self::Hop => "hop",
            Self::HopFailed => "hop_failed",
            Self::HopSent => "hop_sent",
            Self::RenewFailed => "renew_failed",
            Self::AddressClash => "address_clash",
        }
    }
}

/// A random lowercase hex string of `bytes` bytes.
fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl StrictService {
    /// A service whose owner rows live in `owners`, reached by peers at `address` (`None`: it
    /// only forwards). Must be called inside a tokio runtime (captured for the hops).
    pub fn new(
        owners: Arc<dyn OwnerStore>,
        timing: StrictTiming,
        address: Option<String>,
    ) -> Arc<Self> {
        let http = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        Arc::new(Self {
            tags: Mutex::default(),
            hops: Mutex::default(),
            owners,
            timing,
            me: random_hex(8),
            address,
            http,
            runtime: tokio::runtime::Handle::current(),
            events: prometheus::IntCounterVec::new(
                prometheus::Opts::new(
                    "leafid_strict_events_total",
                    "Strict tags on this server: takeover, lost, hop (a request answered by the \
                     owner), hop_failed, hop_sent (an HTTP hop, for one or more requests), \
                     renew_failed, address_clash (another server holds a \
                     tag under this server's advertised address)",
                ),
                &["event"],
            )
            .expect("a valid metric"),
        })
    }

    /// `leafid_strict_events_total`, for the server's registry.
    pub fn collector(&self) -> Box<dyn prometheus::core::Collector> {
        Box::new(self.events.clone())
    }

    fn count(&self, e: Event) {
        self.events.with_label_values(&[e.label()]).inc();
    }

    /// This server's instance id in the owner rows.
    pub fn instance(&self) -> &str {
        &self.me
    }

    /// The timing of the leases.
    pub fn timing(&self) -> StrictTiming {
        self.timing
    }

    /// The map of tags (a panic under it cannot leave it half-written: one insert or removal).
    fn lock_tags(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<StrictTag>>> {
        self.tags.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(&self, tag: &BizTag) -> Arc<StrictTag> {
        let mut tags = self.lock_tags();
        if let Some(entry) = tags.get(tag.as_str()) {
            return entry.clone();
        }
        tags.entry(tag.as_str().to_owned()).or_default().clone()
    }

    fn entries(&self) -> Vec<(String, Arc<StrictTag>)> {
        let tags = self.lock_tags();
        tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
    }

    /// What this server knows of `tag`'s owner, if it was asked for the tag: whether it owns
    /// it, and the owner row it last read (no database read).
    pub fn status(&self, tag: &str) -> Option<StrictStatus> {
        let entry = self.lock_tags().get(tag)?.clone();
        let here = entry.ownership().is_some_and(|o| boot_now() < o.deadline);
        let seen = entry.seen();
        Some(StrictStatus {
            here,
            epoch: seen.as_ref().map_or(0, |s| s.row.epoch),
            owner_address: seen.and_then(|s| s.row.address),
        })
    }

    /// Up to `count` ids of the strict `tag` (its spec checked by the caller): from this server
    /// if it owns the tag (or takes it over), else from the owner through one hop. Waits at
    /// most `wait` (the segment wait) for an owner, then `segments_not_ready`.
    pub async fn ids(
        self: &Arc<Self>,
        engine: &SegmentAllocator,
        tag: &BizTag,
        count: usize,
        wait: Duration,
    ) -> Result<Vec<i64>, Error> {
        let until = Instant::now() + wait;
        let entry = self.entry(tag);
        let mut forwarded_to: Option<OwnerRow> = None;
        loop {
            match self.serve_here(engine, tag, &entry, count, until).await? {
                Some(ids) => return Ok(ids),
                None => {
                    // Not owned here: the owner we know of (unless its row has not moved for
                    // the patience: then the row first, which may take the tag over), or the row.
                    if let Some(seen) = entry.seen()
                        && boot_now().saturating_sub(seen.since)
                            < self.timing.patience_for(seen.row.lease_ms)
                        && forwarded_to.as_ref() != Some(&seen.row)
                        && seen.row.owner.as_deref().is_some_and(|o| o != self.me)
                        && let (Some(address), Some(key)) = (&seen.row.address, &seen.row.peer_key)
                    {
                        if self.address.as_deref() == Some(address.as_str()) {
                            return Err(self.address_clash(tag, address));
                        }
                        forwarded_to = Some(seen.row.clone());
                        match self
                            .forward_coalesced(address, key, tag, count, until)
                            .await
                        {
                            Ok(ids) => {
                                self.count(Event::Hop);
                                return Ok(ids);
                            }
                            Err(Forward::Final(refusal)) => return Err(refusal.into_error(tag)),
                            Err(Forward::Retry) => self.count(Event::HopFailed),
                        }
                    }
                    if !self.look_at_row(tag, &entry).await {
                        // The row did not move: pause before asking again.
                        let left = until.saturating_duration_since(Instant::now());
                        tokio::time::sleep(RETRY_PAUSE.min(left)).await;
                    }
                }
            }
            if Instant::now() >= until {
                return Err(Error::SegmentsNotReady {
                    retry_after_secs: 1,
                });
            }
        }
    }

    /// Another server owns `tag` under this server's own advertised `address`: an operator's
    /// slip (one `server.advertise_url` for two servers, or a load balancer's address). A hop
    /// would reach this server or a random one, never reliably the owner; safety does not
    /// depend on it (a hop is served only by the owner holding its takeover's key), but the
    /// tag's requests through this server would wait out the segment wait for nothing. So:
    /// `segments_not_ready` at once, counted (`address_clash`) and logged once per interval
    /// naming the setting.
    fn address_clash(&self, tag: &BizTag, address: &str) -> Error {
        self.count(Event::AddressClash);
        if let Some(held) = crate::telemetry::LogLimiter::global().allow("strict_address_clash") {
            tracing::error!(
                biz_tag = %tag,
                address,
                held_back = held,
                "another server owns this strict tag under this server's own address: give each \
                 server its own server.advertise_url (never a load balancer's); this server \
                 forwards nothing until then"
            );
        }
        Error::SegmentsNotReady {
            retry_after_secs: 1,
        }
    }

    /// A forwarded request at the owner: served only if this server owns the tag and `key` is
    /// its takeover's key; never forwarded again (no loop between servers).
    pub async fn serve_forwarded(
        self: &Arc<Self>,
        engine: &SegmentAllocator,
        tag: &BizTag,
        count: usize,
        key: &str,
        wait: Duration,
    ) -> Result<Vec<i64>, Error> {
        let until = Instant::now() + wait;
        // Only a tag this server already holds an entry for: a hop names any tag it likes, and
        // must not grow the map (a caller without the key is refused before anything else).
        let entry = self.lock_tags().get(tag.as_str()).cloned();
        match entry.as_ref().and_then(|e| e.ownership()) {
            Some(own) if constant_time_eq(own.peer_key.as_bytes(), key.as_bytes()) => {}
            Some(_) => {
                return Err(Error::Unauthorized(
                    "wrong peer key for a forwarded request",
                ));
            }
            None => {
                return Err(Error::SegmentsNotReady {
                    retry_after_secs: 1,
                });
            }
        }
        let Some(entry) = entry else {
            return Err(Error::SegmentsNotReady {
                retry_after_secs: 1,
            });
        };
        self.serve_here(engine, tag, &entry, count, until)
            .await?
            .ok_or(Error::SegmentsNotReady {
                retry_after_secs: 1,
            })
    }

    /// Serves from this server while it owns the tag: `None` when it does not (or no longer).
    async fn serve_here(
        self: &Arc<Self>,
        engine: &SegmentAllocator,
        tag: &BizTag,
        entry: &Arc<StrictTag>,
        count: usize,
        until: Instant,
    ) -> Result<Option<Vec<i64>>, Error> {
        loop {
            match entry.take(count) {
                Take::Ids(ids, ahead) => {
                    if let Some(ticket) = ahead {
                        let (svc, engine, tag, entry) =
                            (self.clone(), engine.clone(), tag.clone(), entry.clone());
                        self.runtime.spawn(async move {
                            let _ = svc.lease(&engine, &tag, &entry, ticket).await;
                        });
                    }
                    return Ok(Some(ids));
                }
                Take::NotOwner => return Ok(None),
                Take::Lease(ticket) => match self.lease(engine, tag, entry, ticket).await {
                    Ok(()) => {}
                    Err(e @ (Error::BizTagExhausted | Error::LossyDatabase(_))) => return Err(e),
                    Err(e @ Error::UnknownBizTag(_)) => {
                        // The tag was deleted: nothing is owned or renewed for it here.
                        self.give_up(tag.as_str()).await;
                        return Err(e);
                    }
                    Err(_) => {
                        let left = until.saturating_duration_since(Instant::now());
                        tokio::time::sleep(RETRY_PAUSE.min(left)).await;
                    }
                },
                Take::WaitLease => {
                    entry
                        .lease_settled(until.saturating_duration_since(Instant::now()))
                        .await;
                }
                Take::Expired(epoch) => {
                    // One renewal, bounded by the request's time: if the hold is still over,
                    // this request is not served here (another server may take the tag over).
                    let left = until.saturating_duration_since(Instant::now());
                    let within = self.timing.renew_every().min(left);
                    self.renew_one(tag, entry, epoch, within).await;
                    if entry.ownership().is_none_or(|o| boot_now() >= o.deadline) {
                        return Ok(None);
                    }
                }
            }
            if Instant::now() >= until {
                return Err(Error::SegmentsNotReady {
                    retry_after_secs: 1,
                });
            }
        }
    }

    /// Leases the next range for `entry` with `ticket` and installs it. Honours the lease gate
    /// (no lease from a lossy database), bounded by the engine's load timeout.
    async fn lease(
        &self,
        engine: &SegmentAllocator,
        tag: &BizTag,
        entry: &StrictTag,
        ticket: LeaseTicket,
    ) -> Result<(), Error> {
        let config = engine.config();
        if let Some(why) = config.lease_gate.refusal() {
            entry.lease_failed(ticket);
            return Err(Error::LossyDatabase(why));
        }
        let leased = tokio::time::timeout(
            config.load_timeout,
            engine.store().lease(tag.as_str(), None),
        )
        .await;
        let lease = match leased {
            Ok(Ok(lease)) => lease,
            Ok(Err(e)) => {
                entry.lease_failed(ticket);
                return Err(SegmentError::from_store(e, tag).into());
            }
            Err(_) => {
                entry.lease_failed(ticket);
                return Err(Error::SegmentsNotReady {
                    retry_after_secs: 1,
                });
            }
        };
        // The lease's ids: `[max_id - leased, max_id)`, confirmed by the database's commit.
        let range = (lease.max_id - lease.leased).max(1)..lease.max_id;
        match entry.install(ticket, range) {
            Ok(()) => Ok(()),
            Err(Refused::Stale) => Ok(()),
            Err(Refused::Regressed { end, leased_to }) => {
                if LogLimiter::global()
                    .allow("strict lease below the last")
                    .is_some()
                {
                    warn!(biz_tag = %tag, max_id = end, leased_to, "strict tag: the database leased a range at or below one it leased before (a restored backup or a stale replica?); refused, nothing served from it");
                }
                Err(Error::SegmentsNotReady {
                    retry_after_secs: 1,
                })
            }
        }
    }

    /// Reads the owner row and acts on it: takes the tag over when it has no owner, or when
    /// this server has seen the same version for the patience (`L + m`). `true` if the row
    /// moved or this server now owns the tag (ask again at once).
    async fn look_at_row(&self, tag: &BizTag, entry: &StrictTag) -> bool {
        let before = entry.seen().map(|s| (s.row.epoch, s.row.version));
        let read = tokio::time::timeout(self.timing.lease, self.owners.read_owner(tag.as_str()));
        let row = match read.await {
            Ok(Ok(row)) => row,
            Ok(Err(e)) => {
                if LogLimiter::global()
                    .allow("strict owner row unreadable")
                    .is_some()
                {
                    warn!(biz_tag = %tag, error = %e, "strict tag: the owner row could not be read");
                }
                return false;
            }
            Err(_) => return false,
        };
        // Read after the read returned: the version's write committed before this instant.
        let seen = entry.observe(row, boot_now());
        let free = seen.row.owner.is_none();
        let stale =
            boot_now().saturating_sub(seen.since) >= self.timing.patience_for(seen.row.lease_ms);
        if (free || stale) && self.take_over(tag, entry, &seen.row).await {
            return true;
        }
        before != Some((seen.row.epoch, seen.row.version))
    }

    /// Takes the tag over on the version `seen` (a compare-and-set): `true` if this server now
    /// owns it.
    async fn take_over(&self, tag: &BizTag, entry: &StrictTag, seen: &OwnerRow) -> bool {
        let Some(address) = &self.address else {
            return false;
        };
        let key = random_hex(16);
        let claim = Claim {
            owner: &self.me,
            address,
            peer_key: &key,
            lease_ms: self.timing.lease.as_millis() as u64,
        };
        // Read before the write is sent: the hold is counted from here (`segment::strict`).
        let sent = boot_now();
        let write = self.owners.take_over(tag.as_str(), seen, &claim);
        match tokio::time::timeout(self.timing.lease, write).await {
            Ok(Ok(Some(epoch))) => {
                let row = OwnerRow {
                    owner: Some(self.me.clone()),
                    address: Some(address.clone()),
                    peer_key: Some(key.clone()),
                    epoch,
                    version: seen.version + 1,
                    lease_ms: self.timing.lease.as_millis() as u64,
                };
                entry.acquired(Ownership {
                    epoch,
                    deadline: sent.saturating_add(self.timing.hold()),
                    peer_key: key,
                });
                entry.observe(row, boot_now());
                self.count(Event::TakeOver);
                info!(biz_tag = %tag, epoch, previous = ?seen.owner, "strict tag taken over");
                true
            }
            Ok(Ok(None)) => false,
            Ok(Err(e)) => {
                if LogLimiter::global()
                    .allow("strict takeover failed")
                    .is_some()
                {
                    warn!(biz_tag = %tag, error = %e, "strict tag: takeover failed");
                }
                false
            }
            Err(_) => false,
        }
    }

    /// Renews `entry` (held at `epoch`) once: the deadline moves on success, the tag is lost
    /// if another server holds it now; an error leaves the deadline as it is.
    async fn renew_one(&self, tag: &BizTag, entry: &StrictTag, epoch: i64, within: Duration) {
        let sent = boot_now();
        let write = self.owners.renew(tag.as_str(), epoch, &self.me);
        match tokio::time::timeout(within, write).await {
            Ok(Ok(true)) => entry.renewed(epoch, sent, self.timing.hold()),
            Ok(Ok(false)) => {
                entry.lost(epoch);
                self.count(Event::Lost);
                info!(biz_tag = %tag, epoch, "strict tag lost: another server holds it");
            }
            Ok(Err(e)) => {
                self.count(Event::RenewFailed);
                if LogLimiter::global()
                    .allow("strict renewal failed")
                    .is_some()
                {
                    warn!(biz_tag = %tag, error = %e, "strict tag: renewal failed");
                }
            }
            Err(_) => self.count(Event::RenewFailed),
        }
    }

    /// Renews every tag this server owns, and reads the row of every tag it forwards (so a
    /// takeover after an owner's death waits from the owner's last write, not from the first
    /// failed hop). Every `L / 4`.
    ///
    /// The tags are tended concurrently: a slow write for one does not let another's hold end.
    pub async fn tend(self: &Arc<Self>) {
        let mut all = tokio::task::JoinSet::new();
        for (name, entry) in self.entries() {
            let Ok(tag) = BizTag::parse(&name) else {
                continue;
            };
            let svc = self.clone();
            all.spawn(async move {
                match entry.ownership() {
                    Some(own) => {
                        let within = svc.timing.hold();
                        svc.renew_one(&tag, &entry, own.epoch, within).await;
                    }
                    None if entry.seen().is_some() => {
                        let read = svc.owners.read_owner(tag.as_str());
                        if let Ok(Ok(row)) = tokio::time::timeout(svc.timing.lease, read).await {
                            entry.observe(row, boot_now());
                        }
                    }
                    None => {}
                }
            });
        }
        while all.join_next().await.is_some() {}
    }

    /// Runs [`Self::tend`] every `L / 4` until the background stops.
    pub fn spawn_tending(self: &Arc<Self>, background: &crate::background::Background) {
        let svc = self.clone();
        let token = background.token();
        background.spawn(async move {
            let mut tick = tokio::time::interval(svc.timing.renew_every());
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tick.tick() => svc.tend().await,
                }
            }
        });
    }

    /// The strict `tag` was deleted: its owner row goes (so the owner, here or elsewhere,
    /// fails its next renewal and stops serving within `L / 4`), and this server serves
    /// nothing of it from memory again.
    pub async fn forget(&self, tag: &str) {
        if let Some(own) = self.drop_entry(tag) {
            info!(biz_tag = %tag, epoch = own.epoch, "strict tag deleted: no longer served here");
        }
        match tokio::time::timeout(self.timing.lease, self.owners.remove(tag)).await {
            Ok(Ok(())) => {}
            _ => {
                warn!(biz_tag = %tag, "strict tag deleted, its owner row not removed: its owner serves what it holds until it runs out");
            }
        }
    }

    /// Removes `tag`'s entry; if this server owned the tag, it stops serving it first (the
    /// entry is lost, so a request still holding it serves nothing) and the ownership is
    /// returned.
    /// The queue of hops of `tag`, made on its first hop; `None` for a tag without an entry
    /// (so the queues never outnumber the entries).
    fn hop_queue(&self, tag: &BizTag) -> Option<Arc<coalesce::HopQueue>> {
        let tags = self.lock_tags();
        tags.get(tag.as_str())?;
        let mut hops = self.hops.lock().unwrap_or_else(|p| p.into_inner());
        Some(hops.entry(tag.as_str().to_owned()).or_default().clone())
    }

    fn drop_entry(&self, tag: &str) -> Option<Ownership> {
        self.hops
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(tag);
        let entry = self.lock_tags().remove(tag)?;
        let own = entry.ownership()?;
        entry.lost(own.epoch);
        Some(own)
    }

    /// Stops owning `tag` here (its entry goes) and releases its row.
    async fn give_up(&self, tag: &str) {
        let Some(own) = self.drop_entry(tag) else {
            return;
        };
        let release = self.owners.release(tag, own.epoch, &self.me);
        let _ = tokio::time::timeout(self.timing.lease, release).await;
    }

    /// A graceful stop: every tag owned here stops serving first, then its row is released, so
    /// another server takes it over at once instead of after the lease.
    pub async fn release_all(&self) {
        for (name, entry) in self.entries() {
            let Some(own) = entry.ownership() else {
                continue;
            };
            entry.lost(own.epoch);
            let release = self.owners.release(&name, own.epoch, &self.me);
            match tokio::time::timeout(self.timing.lease, release).await {
                Ok(Ok(_)) => info!(biz_tag = %name, epoch = own.epoch, "strict tag released"),
                _ => {
                    warn!(biz_tag = %name, "strict tag not released: another server takes it over after the lease");
                }
            }
        }
    }
}

/// What a server knows of a strict tag's owner ([`StrictService::status`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct StrictStatus {
    /// Whether this server owns the tag now (and its hold has not ended).
    pub here: bool,
    /// The owner row's epoch, as last read here.
    pub epoch: i64,
    /// Where the owner is reached, as last read here.
    pub owner_address: Option<String>,
}
