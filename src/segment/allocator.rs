//! `SegmentAllocator`: the tags of this server, their loads, and waiting for segments.
//!
//! Loads run as tasks on the async runtime: at most one per tag (the buffer's single-flight
//! flag), at most `max_concurrent_loads` at once (a semaphore), each bounded by `load_timeout`.
//! A failed load sets a backoff on the buffer; the next request after it starts another.
//! Requests that find no ids wait on the buffer's notification (never spin) until `wait_timeout`,
//! except while the tag's lease is known to be failing: then only the request that starts the
//! attempt due waits for it, and every other one answers `segments_not_ready` at once with
//! `Retry-After` set to the backoff left (fail fast: a caller with a 1 s timeout sees a clean
//! 503, not a timeout, and no thread of it is parked for the whole wait).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use crossbeam_utils::CachePadded;
use tokio::sync::Semaphore;
// tokio's clock, as the timeouts that race these deadlines (a paused test clock drives both).
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use super::biz_tag::BizTag;
use super::buffer::{BufferSnapshot, LeaseCap, SegmentBuffer, Take};
use super::error::SegmentError;
use super::high_water::RetiredMarks;
use super::runs::{IdRuns, IdSink};
use super::spec::{PeriodRow, SpecCache};
use super::step::StepPolicy;
use super::store::{SegmentStore, StoreError, TagRow};
use super::tag_map::TagMap;
use super::tag_rules::{NewTag, Step, TagUpdate};
use crate::lease_gate::LeaseGate;

mod give_back;
mod handle;
mod load;
/// The per-thread view of the tags: the by-name fast path.
mod thread_tags;
mod wait;

pub use give_back::GiveBack;
pub use handle::TagHandle;

/// Tunables of the engine.
#[derive(Debug, Clone)]
pub struct SegmentConfig {
    /// Leaf's adaptive step rule.
    pub policy: StepPolicy,
    /// How long a request waits for a segment before `segments_not_ready`.
    pub wait_timeout: Duration,
    /// Upper bound of one lease call.
    pub load_timeout: Duration,
    /// Loads in flight across all tags.
    pub max_concurrent_loads: usize,
    /// How often the tag list is re-read.
    pub refresh_interval: Duration,
    /// Whether a lease may be taken now ([`LeaseGate`]): while it refuses, only ids already
    /// leased are handed out, and a request that needs a lease is
    /// [`SegmentError::LossyDatabase`] at once instead of after the wait.
    pub lease_gate: LeaseGate,
    /// The keys of permuted tags (`[shapes.keys]`).
    pub keys: Arc<crate::shapes::keys::KeyRing>,
}

impl Default for SegmentConfig {
    fn default() -> Self {
        Self {
            policy: StepPolicy::default(),
            wait_timeout: Duration::from_millis(1500),
            load_timeout: Duration::from_secs(5),
            max_concurrent_loads: 16,
            refresh_interval: Duration::from_secs(60),
            lease_gate: LeaseGate::open(),
            keys: Default::default(),
        }
    }
}

static NEXT_ENGINE_ID: AtomicU64 = AtomicU64::new(0);

/// The key of a thread's cached view of an engine's tags (`thread_tags::ThreadTags`).
struct CacheKey {
    /// Distinguishes engines in the thread-local cache (never reused, unlike an address).
    engine: u64,
    /// Bumped (Release) after every replacement of `tags`, so a thread can keep using its own
    /// clone of the map (see `thread_tags::TAG_CACHE`) until it changes: one Acquire load instead of an
    /// `ArcSwap::load` per request.
    generation: AtomicU64,
}

/// The segment engine: cheap to clone, shared by all request handlers.
#[derive(Clone)]
pub struct SegmentAllocator {
    inner: Arc<Inner>,
}

struct Inner {
    /// Where segments are leased.
    store: Arc<dyn SegmentStore>,
    /// Tunables.
    config: SegmentConfig,
    /// Tag -> buffer, replaced copy-on-write: readers never lock; tags change rarely.
    tags: ArcSwap<TagMap>,
    /// What a thread's cached view of `tags` is keyed by, read on every request by name: on a
    /// line of its own, as the rest of this struct shares lines with whatever the allocator
    /// put next to it (two threads on one tag took 38 ns per id instead of 28 without it).
    key: CachePadded<CacheKey>,
    /// Serialises the copy-on-write updates of `tags` (a std Mutex: never held across an await).
    tags_write: Mutex<()>,
    /// Bounds the loads in flight.
    loads: Semaphore,
    /// The high-water marks of deleted tags, for their next generation (`super::high_water`).
    retired: RetiredMarks,
    /// Where load tasks are spawned (captured at construction, so callers need no runtime).
    runtime: tokio::runtime::Handle,
    /// Set (under `tags_write`) when the give-back begins: no tag gets a new buffer after it.
    closing: AtomicBool,
    /// `segment.return_unused_on_shutdown`: whether [`SegmentAllocator::shutdown`] gives
    /// unused ids back.
    give_back: AtomicBool,
    /// The specs of the tags known so far (today: formatted tags, whose own rows never serve).
    specs: SpecCache,
    /// The counters of ended periods whose buffers were dropped, by formatted tag, so a tag's
    /// counters never go down when its periods' buffers go (`super::views`).
    ended: super::views::EndedPeriods,
}

impl SegmentAllocator {
    /// A new engine with no tags cached. Must be called inside a tokio runtime.
    pub fn new(store: Arc<dyn SegmentStore>, config: SegmentConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                loads: Semaphore::new(config.max_concurrent_loads.max(1)),
                store,
                config,
                tags: ArcSwap::from_pointee(TagMap::default()),
                key: CachePadded::new(CacheKey {
                    engine: NEXT_ENGINE_ID.fetch_add(1, Ordering::Relaxed),
                    generation: AtomicU64::new(0),
                }),
                tags_write: Mutex::new(()),
                retired: RetiredMarks::default(),
                runtime: tokio::runtime::Handle::current(),
                closing: AtomicBool::new(false),
                give_back: AtomicBool::new(false),
                specs: SpecCache::default(),
                ended: Default::default(),
            }),
        }
    }

    /// The engine's tunables.
    pub fn config(&self) -> &SegmentConfig {
        &self.inner.config
    }

    /// Re-reads the tag list: new rows get a buffer, deleted rows lose theirs.
    ///
    /// A tag cached while the list was being read (a first request looked it up in the
    /// database) may be missing from that list without having been deleted: it is kept, and the
    /// next refresh decides.
    ///
    /// A formatted tag whose row is gone (deleted, here or by another server) is forgotten: its
    /// spec, and its period buffers with it, so it serves nothing within one refresh interval
    /// (its format stays stored for good, and is used again only once its row exists again,
    /// see [`Self::spec_of`]).
    pub async fn refresh_tags(&self) -> Result<usize, StoreError> {
        let listed_over = self.inner.tags.load_full();
        let specs_over = self.inner.specs.all();
        let mut names = self.inner.store.list_tag_names().await?;
        // Read after the names: a formatted tag's format is written with its row (one
        // transaction), so every formatted row listed above has its format in this list.
        let formats = self.inner.store.list_formats().await?;
        // Each stored format, and whether its tag's row is listed (the parent row exists).
        let mut formatted: std::collections::HashMap<&str, bool> =
            formats.iter().map(|(t, _)| (t.as_str(), false)).collect();
        for n in &names {
            if let Some(row_listed) = formatted.get_mut(n.as_str()) {
                *row_listed = true;
            }
        }
        let live = |tag: &str| formatted.get(tag).copied().unwrap_or(false);
        // A formatted tag's own row never serves; a period row serves once a request made its
        // buffer (`formatted`), and is kept while it has one and its parent row exists.
        names.retain(|n| {
            !formatted.contains_key(n.as_str())
                && (!PeriodRow::is_period_row(n)
                    || (listed_over.contains_key(n.as_str())
                        && PeriodRow::parent_of(n).is_some_and(live)))
        });
        // Specs known before the listing whose row is not listed: deleted. (A spec remembered
        // meanwhile, by a request that found its row, is not in `specs_over` and is kept.)
        let stale: Vec<Arc<super::spec::TagSpec>> = specs_over
            .iter()
            .filter(|(tag, _)| !live(tag))
            .map(|(_, spec)| spec.clone())
            .collect();
        self.inner.specs.forget_stale(&stale);
        let remembered: Vec<(String, String)> =
            formats.iter().filter(|(t, _)| live(t)).cloned().collect();
        drop(formatted);
        self.remember_specs(remembered);
        // Unchanged (the usual case): one lookup per name, no allocation, no lock.
        if names.len() == listed_over.len()
            && names.iter().all(|n| listed_over.contains_key(n.as_str()))
        {
            return Ok(names.len());
        }
        let _w = self.inner.write_lock();
        if self.inner.closing.load(Ordering::Relaxed) {
            // The give-back began: the tags stay as they are (closed).
            return Ok(names.len());
        }
        let old = self.inner.tags.load_full();
        let mut next = TagMap::with_capacity(names.len());
        for name in names {
            if PeriodRow::is_period_row(&name) {
                if let Some(buf) = old.get(name.as_str()) {
                    next.insert(name.as_str().into(), buf.clone());
                }
                continue;
            }
            let Ok(tag) = BizTag::parse(&name) else {
                warn!(biz_tag = %name, "skipping a leaf_alloc row whose tag leafid cannot serve");
                continue;
            };
            let buf = old
                .get(tag.as_str())
                .cloned()
                .unwrap_or_else(|| self.inner.new_buffer(&tag, None));
            next.insert(tag.as_str().into(), buf);
        }
        for (tag, buf) in old.iter() {
            if next.contains_key(tag) {
                continue;
            }
            let listed = listed_over.get(tag).is_some_and(|b| Arc::ptr_eq(b, buf));
            if listed {
                info!(biz_tag = %tag, "tag removed from the database");
                self.inner.retire(buf);
            } else {
                next.insert(tag.clone(), buf.clone());
            }
        }
        let n = next.len();
        // Unchanged (the usual case): keep the map, so no thread has to reload its copy.
        let same = next.len() == old.len()
            && next
                .iter()
                .all(|(t, b)| old.get(t).is_some_and(|o| Arc::ptr_eq(o, b)));
        if !same {
            self.inner.publish_tags(next);
        }
        Ok(n)
    }

    /// Runs [`Self::refresh_tags`] every `refresh_interval` until `background` shuts down.
    /// Each refresh is bounded by `load_timeout`: a listing whose answer never comes is
    /// abandoned and retried at the next tick instead of holding the task forever.
    pub fn spawn_refresh(&self, background: &crate::background::Background) {
        let this = self.clone();
        let stop = background.token();
        let task = async move {
            let mut tick = tokio::time::interval(this.inner.config.refresh_interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tokio::select! {
                    () = stop.cancelled() => return,
                    _ = tick.tick() => {}
                }
                let bound = this.inner.config.load_timeout;
                let began = Instant::now();
                let refreshed = tokio::select! {
                    () = stop.cancelled() => return,
                    r = tokio::time::timeout(bound, this.refresh_tags()) => r,
                };
                match refreshed {
                    Ok(Ok(n)) => debug!(
                        tags = n,
                        took_ms = began.elapsed().as_secs_f64() * 1e3,
                        "tag list refreshed"
                    ),
                    Ok(Err(e)) => warn!(error = %e, "tag list refresh failed"),
                    Err(_) => warn!(
                        timeout_ms = bound.as_millis() as u64,
                        "tag list refresh timed out"
                    ),
                }
            }
        };
        background.spawn_on(task, &self.inner.runtime);
    }

    /// The cached buffer of a tag, if any (no database access).
    pub fn cached(&self, tag: &str) -> Option<Arc<SegmentBuffer>> {
        self.inner.tags.load().get(tag).cloned()
    }

    /// The counters of ended periods whose buffers were dropped (`super::views`).
    pub(super) fn ended_periods(&self) -> &super::views::EndedPeriods {
        &self.inner.ended
    }

    /// Number of tags cached.
    pub fn tag_count(&self) -> usize {
        self.inner.tags.load().len()
    }

    /// A handle on one tag: its fast path without the per-call tag lookup (for callers that
    /// issue many ids of one tag). Looks the tag up in the database if it is not cached.
    pub async fn handle(&self, tag: &str) -> Result<TagHandle, SegmentError> {
        Ok(TagHandle {
            engine: self.clone(),
            buffer: self.buffer(tag).await?,
        })
    }

    /// The fast path alone: an id if the tag is cached and its segment has one. Never waits.
    pub fn try_next_id(&self, tag: &str) -> Option<i64> {
        self.inner
            .with_buffer(tag, |buf| self.try_next_in(buf))
            .flatten()
    }

    #[inline]
    fn try_next_in(&self, buf: &Arc<SegmentBuffer>) -> Option<i64> {
        match buf.try_next() {
            Take::Id { id, preload } => {
                if preload {
                    self.start_load(buf);
                }
                Some(id)
            }
            Take::Beyond => None,
        }
    }

    /// The next id of `tag`: from memory when possible, else after waiting for a load. While
    /// the lease gate refuses, only ids already leased are handed out: a request that needs a
    /// lease is [`SegmentError::LossyDatabase`] at once, not after the segment wait.
    pub async fn next_id(&self, tag: &str) -> Result<i64, SegmentError> {
        if let Some(id) = self.try_next_id(tag) {
            return Ok(id);
        }
        if let Some(why) = self.inner.config.lease_gate.refusal() {
            return Err(SegmentError::LossyDatabase(why));
        }
        let mut out = Vec::with_capacity(1);
        self.fill(tag, 1, &mut out)
            .await
            .map_err(|e| self.refusal_or(e))?;
        Ok(out[0])
    }

    /// Up to `count` increasing ids of `tag`: fewer only when the ids taken so far are all
    /// there is (the tag ran out below `i64::MAX`, or its next segment did not come within the
    /// wait, or the lease gate refuses and the ids already leased ran out). Ids already taken
    /// count as handed out, so failing the batch would lose them: they are answered, and the
    /// next call gets the error.
    pub async fn next_ids(&self, tag: &str, count: usize) -> Result<Vec<i64>, SegmentError> {
        self.take_into(tag, count as u64, Vec::with_capacity(count))
            .await
    }

    /// Up to `count` increasing ids of `tag` as runs of consecutive ids: the same ids, and the
    /// same rules, as [`Self::next_ids`], without spelling each id out (a batch of a million
    /// ids is a few runs: one per segment it crosses, fewer where segments meet).
    pub async fn next_runs(&self, tag: &str, count: u64) -> Result<IdRuns, SegmentError> {
        self.take_into(tag, count, IdRuns::new()).await
    }

    /// [`Self::next_ids`] into any sink.
    async fn take_into<S: IdSink>(
        &self,
        tag: &str,
        count: u64,
        mut out: S,
    ) -> Result<S, SegmentError> {
        if let Some(why) = self.inner.config.lease_gate.refusal() {
            while out.taken() < count {
                match self.try_next_id(tag) {
                    Some(id) => out.push_run(id, 1),
                    None => break,
                }
            }
            return if out.taken() == 0 {
                Err(SegmentError::LossyDatabase(why))
            } else {
                Ok(out)
            };
        }
        match self.fill(tag, count, &mut out).await {
            Ok(()) => Ok(out),
            Err(SegmentError::Exhausted | SegmentError::NotReady { .. }) if out.taken() > 0 => {
                Ok(out)
            }
            Err(e) => Err(self.refusal_or(e)),
        }
    }

    /// A segment wait that ran out because the leases were refused (the gate began refusing
    /// while the request waited) is that refusal, not `NotReady`.
    fn refusal_or(&self, e: SegmentError) -> SegmentError {
        match (&e, self.inner.config.lease_gate.refusal()) {
            (SegmentError::NotReady { .. }, Some(why)) => SegmentError::LossyDatabase(why),
            _ => e,
        }
    }

    /// The buffer of a tag, looking the tag up in the database if it is not cached yet (a tag
    /// created by another server or by SQL serves at once, not after the next refresh).
    pub async fn buffer(&self, tag: &str) -> Result<Arc<SegmentBuffer>, SegmentError> {
        if let Some(buf) = self.cached(tag) {
            return Ok(buf);
        }
        let tag = BizTag::parse(tag)?;
        // Bounded like a request's wait for a segment: a lookup whose answer never comes must
        // not hold the request (or the connection) forever.
        let wait = self.inner.config.wait_timeout;
        let found = tokio::time::timeout(wait, self.inner.store.get_tag(tag.as_str()))
            .await
            .map_err(|_| SegmentError::NotReady {
                retry_after_secs: 1,
            })?
            .map_err(|e| SegmentError::from_store(e, &tag))?;
        match found {
            None => return Err(SegmentError::UnknownTag(tag)),
            // MySQL's default collation matches `Orders` to the row `orders`: serving it would
            // give one row two buffers (and the refresh would drop one). Only the stored
            // spelling serves.
            Some(row) if row.biz_tag != tag.as_str() => {
                debug!(biz_tag = %tag, stored = %row.biz_tag, "tag differs from the stored spelling");
                return Err(SegmentError::UnknownTag(tag));
            }
            Some(_) => {}
        }
        // A formatted tag's own row never serves numbers (its format is written with the row,
        // in one transaction, so a row seen here has its format visible too).
        if self.cached_spec(tag.as_str()).is_some() {
            return Err(SegmentError::Formatted(tag));
        }
        let format = tokio::time::timeout(wait, self.inner.store.get_format(tag.as_str()))
            .await
            .map_err(|_| SegmentError::NotReady {
                retry_after_secs: 1,
            })?
            .map_err(|e| SegmentError::from_store(e, &tag))?;
        if let Some(json) = format {
            self.remember_specs([(tag.as_str().to_owned(), json)]);
            return Err(SegmentError::Formatted(tag));
        }
        let buf = self.cache_row(&tag, None)?;
        info!(biz_tag = %tag, "tag found in the database on first request");
        Ok(buf)
    }

    /// The cached buffer of `tag`, made now if there is none: for a row known to exist.
    /// `cap` bounds every lease of a new buffer (a period row's, [`LeaseCap`]); a buffer
    /// cached already keeps its own.
    fn cache_row(
        &self,
        tag: &BizTag,
        cap: Option<LeaseCap>,
    ) -> Result<Arc<SegmentBuffer>, SegmentError> {
        let _w = self.inner.write_lock();
        let current = self.inner.tags.load_full();
        if let Some(buf) = current.get(tag.as_str()) {
            return Ok(buf.clone());
        }
        if self.inner.closing.load(Ordering::Relaxed) {
            // Stopping: a new buffer would lease after the give-back.
            return Err(SegmentError::NotReady {
                retry_after_secs: 1,
            });
        }
        let buf = self.inner.new_buffer(tag, cap);
        let mut next = TagMap::clone(&current);
        next.insert(tag.as_str().into(), buf.clone());
        self.inner.publish_tags(next);
        Ok(buf)
    }

    /// Drops a tag from the cache (after a delete); in-flight requests finish normally.
    fn forget(&self, tag: &str) {
        self.inner.remove_tag(tag, None);
    }

    /// One row, read from the database (not the cache).
    pub async fn get_tag(&self, tag: &BizTag) -> Result<Option<TagRow>, StoreError> {
        self.inner.store.get_tag(tag.as_str()).await
    }

    /// Every row, ordered by tag, read from the database (the cache is left as it is).
    pub async fn list_tags(&self) -> Result<Vec<TagRow>, StoreError> {
        self.inner.store.list_tags().await
    }

    /// Creates a row. The tag serves at its first request, on this server as on the others.
    pub async fn create_tag(&self, tag: &NewTag) -> Result<TagRow, StoreError> {
        self.inner.store.create_tag(tag).await
    }

    /// Changes a row's step and/or description; `Ok(None)` if there is no row. A cached buffer
    /// is kept: the new step applies from its next segment load, which re-reads the row.
    pub async fn update_tag(
        &self,
        tag: &BizTag,
        change: &TagUpdate,
    ) -> Result<Option<TagRow>, StoreError> {
        self.inner
            .store
            .update_tag(
                tag.as_str(),
                change.step().map(Step::get),
                change.description(),
            )
            .await
    }

    /// Deletes a row (its `max_id` stays as the tag's high-water mark) and drops its buffer;
    /// `false` if there was no row. On MySQL `Orders` deletes the row `orders`: the buffer is
    /// dropped under the stored spelling too. In-flight requests on it finish normally.
    ///
    /// A formatted tag stops at once on this server: its spec and its period buffers are
    /// dropped (the other servers drop theirs at their next refresh, [`Self::refresh_tags`]).
    /// Its stored format stays, and so do its period rows (`tag@20261128`): they are never
    /// deleted, because they are what keeps a re-created tag from repeating texts (a period
    /// served again leases above its row's `max_id`).
    pub async fn delete_tag(&self, tag: &BizTag) -> Result<bool, StoreError> {
        let store = &self.inner.store;
        let stored = store.get_tag(tag.as_str()).await?.map(|r| r.biz_tag);
        if !store.delete_tag(tag.as_str()).await? {
            return Ok(false);
        }
        self.forget_deleted(tag.as_str());
        if let Some(stored) = stored.filter(|s| s != tag.as_str()) {
            self.forget_deleted(&stored);
        }
        Ok(true)
    }

    /// Drops everything this server holds of a deleted tag: its buffer, its spec (a formatted
    /// tag's) and the buffers of its period rows. In-flight requests finish normally.
    fn forget_deleted(&self, tag: &str) {
        self.forget(tag);
        self.inner.specs.forget(tag);
        self.inner
            .remove_tags_where(|name| PeriodRow::parent_of(name) == Some(tag));
    }

    /// The store this engine leases from (the lanes' repair reads and writes rows through it).
    pub fn store(&self) -> &Arc<dyn SegmentStore> {
        &self.inner.store
    }

    /// A cheap round trip to the database, for readiness.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.inner.store.ping().await
    }

    /// Snapshots of every cached tag, ordered by tag.
    pub fn snapshots(&self) -> Vec<BufferSnapshot> {
        let tags = self.inner.tags.load();
        let mut v: Vec<_> = tags.values().map(|b| b.snapshot()).collect();
        v.sort_by(|a, b| a.biz_tag.cmp(&b.biz_tag));
        v
    }

    /// Starts a load of the tag's next segment unless one runs or the backoff holds it;
    /// whether this call started it.
    fn start_load(&self, buf: &Arc<SegmentBuffer>) -> bool {
        if !buf.try_begin_load() {
            return false;
        }
        let inner = self.inner.clone();
        let buf = buf.clone();
        let span = info_span!(parent: None, "segment_load", biz_tag = %buf.tag());
        self.inner
            .runtime
            .spawn(async move { inner.load(buf).await }.instrument(span));
        true
    }
}

impl Inner {
    /// Serialises the copy-on-write updates of `tags`.
    fn write_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.tags_write.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks a cached tag removed and drops it from the map; with `only`, just if the cached
    /// buffer is that one (a load of a replaced buffer must not evict its successor).
    fn remove_tag(&self, tag: &str, only: Option<&Arc<SegmentBuffer>>) {
        let _w = self.write_lock();
        let current = self.tags.load_full();
        let Some(buf) = current.get(tag) else { return };
        if only.is_some_and(|o| !Arc::ptr_eq(o, buf)) {
            return;
        }
        self.retire(buf);
        let mut next = TagMap::clone(&current);
        next.remove(tag);
        self.publish_tags(next);
    }

    /// Marks removed and drops every cached tag whose name satisfies `doomed` (the period rows
    /// of a deleted formatted tag), in one copy of the map.
    fn remove_tags_where(&self, doomed: impl Fn(&str) -> bool) {
        let _w = self.write_lock();
        let current = self.tags.load_full();
        if !current.iter().any(|(t, _)| doomed(t)) {
            return;
        }
        let mut next = TagMap::clone(&current);
        for (tag, buf) in current.iter() {
            if doomed(tag) {
                self.retire(buf);
                next.remove(tag);
            }
        }
        self.publish_tags(next);
    }

    /// A buffer for `tag`, starting above the mark of its previous generation, if any.
    fn new_buffer(&self, tag: &BizTag, cap: Option<LeaseCap>) -> Arc<SegmentBuffer> {
        let above = self.retired.of(tag.as_str());
        let buf = SegmentBuffer::above(tag.clone(), above);
        Arc::new(match cap {
            Some(cap) => buf.capped(cap),
            None => buf,
        })
    }

    /// Marks a buffer removed, keeping its high-water mark for the tag's next generation.
    fn retire(&self, buf: &SegmentBuffer) {
        buf.mark_removed();
        self.retired.retire(buf.tag().as_str(), buf.leased_to());
    }

    /// Replaces the tag map and announces it to the thread-local caches.
    fn publish_tags(&self, next: TagMap) {
        self.tags.store(Arc::new(next));
        // Release: a thread that sees the new generation also sees the map stored above.
        self.key.generation.fetch_add(1, Ordering::Release);
    }
}

mod formatted;
/// The key bindings of permuted tags on the engine's database (`super::spec::binding`).
mod key_binding;

pub use formatted::{FormatConflict, FormattedIds, PeriodFill};
pub use key_binding::KeyReport;

#[cfg(test)]
mod formatted_tests;
#[cfg(test)]
mod give_back_tests;
#[cfg(test)]
mod regression_tests;
#[cfg(test)]
mod tests;
