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
use super::buffer::{BufferSnapshot, Publish, SegmentBuffer, Take, Unused};
use super::error::SegmentError;
use super::high_water::{self, RetiredMarks};
use super::step::StepPolicy;
use super::store::{SegmentStore, StoreError, TagRow};
use super::tag_map::TagMap;
use super::tag_rules::{NewTag, Step, TagUpdate};
use crate::telemetry::LogLimiter;

/// The per-thread view of the tags: the by-name fast path.
mod thread_tags;

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
}

impl Default for SegmentConfig {
    fn default() -> Self {
        Self {
            policy: StepPolicy::default(),
            wait_timeout: Duration::from_millis(1500),
            load_timeout: Duration::from_secs(5),
            max_concurrent_loads: 16,
            refresh_interval: Duration::from_secs(60),
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
}

/// What [`SegmentAllocator::give_back_unused`] did, tag by tag, summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GiveBack {
    /// Tags whose `max_id` went back.
    pub returned_tags: usize,
    /// Ids given back (the sum of the ranges).
    pub returned_ids: u64,
    /// Tags with nothing to give back (every leased id handed out, or nothing leased).
    pub nothing: usize,
    /// Tags whose row had moved past this server's last lease (another server leased): left
    /// alone.
    pub moved: usize,
    /// Tags skipped because a lease was still in flight.
    pub in_flight: usize,
    /// Tags whose compare-and-set failed or did not answer in time (their ids are wasted).
    pub failed: usize,
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
    pub async fn refresh_tags(&self) -> Result<usize, StoreError> {
        let listed_over = self.inner.tags.load_full();
        let names = self.inner.store.list_tag_names().await?;
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
            let Ok(tag) = BizTag::parse(&name) else {
                warn!(biz_tag = %name, "skipping a leaf_alloc row whose tag leafid cannot serve");
                continue;
            };
            let buf = old
                .get(tag.as_str())
                .cloned()
                .unwrap_or_else(|| self.inner.new_buffer(&tag));
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

    /// The next id of `tag`: from memory when possible, else after waiting for a load.
    pub async fn next_id(&self, tag: &str) -> Result<i64, SegmentError> {
        if let Some(id) = self.try_next_id(tag) {
            return Ok(id);
        }
        let mut out = Vec::with_capacity(1);
        self.fill(tag, 1, &mut out).await?;
        Ok(out[0])
    }

    /// Up to `count` increasing ids of `tag`: fewer only when the ids taken so far are all
    /// there is (the tag ran out below `i64::MAX`, or its next segment did not come within the
    /// wait). Ids already taken count as handed out, so failing the batch would lose them: they
    /// are answered, and the next call gets the error.
    pub async fn next_ids(&self, tag: &str, count: usize) -> Result<Vec<i64>, SegmentError> {
        let mut out = Vec::with_capacity(count);
        match self.fill(tag, count, &mut out).await {
            Ok(()) => Ok(out),
            Err(SegmentError::Exhausted | SegmentError::NotReady { .. }) if !out.is_empty() => {
                Ok(out)
            }
            Err(e) => Err(e),
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
        let buf = self.inner.new_buffer(&tag);
        let mut next = TagMap::clone(&current);
        next.insert(tag.as_str().into(), buf.clone());
        self.inner.publish_tags(next);
        info!(biz_tag = %tag, "tag found in the database on first request");
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
    pub async fn delete_tag(&self, tag: &BizTag) -> Result<bool, StoreError> {
        let store = &self.inner.store;
        let stored = store.get_tag(tag.as_str()).await?.map(|r| r.biz_tag);
        if !store.delete_tag(tag.as_str()).await? {
            return Ok(false);
        }
        self.forget(tag.as_str());
        if let Some(stored) = stored.filter(|s| s != tag.as_str()) {
            self.forget(&stored);
        }
        Ok(true)
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

    /// Sets `segment.return_unused_on_shutdown`: whether [`Self::shutdown`] gives the unused
    /// ids back (off until set).
    pub fn set_return_unused_on_shutdown(&self, on: bool) {
        self.inner.give_back.store(on, Ordering::Relaxed);
    }

    /// Stops the engine when the server stops: with `segment.return_unused_on_shutdown`, gives
    /// the unused ids back ([`Self::give_back_unused`], bounded by twice `load_timeout`).
    pub async fn shutdown(&self) {
        if !self.inner.give_back.load(Ordering::Relaxed) {
            return;
        }
        let bound = self.inner.config.load_timeout * 2;
        let began = Instant::now();
        let r = self.give_back_unused(bound).await;
        info!(
            returned_tags = r.returned_tags,
            returned_ids = r.returned_ids,
            nothing = r.nothing,
            moved = r.moved,
            in_flight = r.in_flight,
            failed = r.failed,
            took_ms = began.elapsed().as_secs_f64() * 1e3,
            "unused segment ids given back"
        );
    }

    /// Closes every tag and gives its unused ids back: for each tag whose row still ends at
    /// this server's last lease, `max_id` goes back to the first id never handed out, with a
    /// compare-and-set ([`SegmentStore::return_unused`]) that leaves a row another server
    /// leased meanwhile alone. From the call on, this engine hands out no id and starts no
    /// lease (requests get [`SegmentError::NotReady`]): it is for a stopping server, after the
    /// drain. Loads in flight are awaited up to `bound`; a tag whose load is still running then
    /// gives nothing back. The compare-and-sets run at most `max_concurrent_loads` at once, the
    /// whole within `bound`; a tag not reached keeps its ids unused (wasted, as without this).
    pub async fn give_back_unused(&self, bound: Duration) -> GiveBack {
        let deadline = Instant::now() + bound;
        let tags = {
            let _w = self.inner.write_lock();
            self.inner.closing.store(true, Ordering::Relaxed);
            self.inner.tags.load_full()
        };
        let buffers: Vec<Arc<SegmentBuffer>> = tags.values().cloned().collect();
        for buf in &buffers {
            buf.stop_loading();
        }
        // Loads in flight finish (each bounded by load_timeout) so their segments are given
        // back too; they wake the buffer's waiters when they end.
        for buf in &buffers {
            while buf.is_loading() && Instant::now() < deadline {
                let notified = buf.notify().notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if !buf.is_loading() {
                    break;
                }
                let _ = tokio::time::timeout_at(deadline, notified).await;
            }
        }
        let mut report = GiveBack::default();
        let mut ranges = Vec::new();
        for buf in &buffers {
            match buf.close() {
                Unused::Nothing => report.nothing += 1,
                Unused::LoadInFlight => {
                    warn!(biz_tag = %buf.tag(), "lease in flight at shutdown: nothing given back");
                    report.in_flight += 1;
                }
                Unused::Range { from, to } => ranges.push((buf.tag().clone(), from, to)),
            }
        }
        let store = &self.inner.store;
        let width = self.inner.config.max_concurrent_loads.max(1);
        let mut pending = ranges.into_iter();
        let mut running = tokio::task::JoinSet::new();
        loop {
            while running.len() < width {
                let Some((tag, from, to)) = pending.next() else {
                    break;
                };
                let store = store.clone();
                running.spawn(async move {
                    let r = tokio::time::timeout_at(
                        deadline,
                        store.return_unused(tag.as_str(), from, to),
                    )
                    .await;
                    (tag, from, to, r)
                });
            }
            let Some(done) = running.join_next().await else {
                break;
            };
            let Ok((tag, from, to, r)) = done else {
                report.failed += 1;
                continue;
            };
            match r {
                Ok(Ok(true)) => {
                    debug!(biz_tag = %tag, from, to, "unused ids given back");
                    report.returned_tags += 1;
                    report.returned_ids += (to - from) as u64;
                }
                Ok(Ok(false)) => {
                    debug!(biz_tag = %tag, from, to, "row moved past this server's lease: left alone");
                    report.moved += 1;
                }
                Ok(Err(e)) => {
                    warn!(biz_tag = %tag, error = %e, "giving unused ids back failed");
                    report.failed += 1;
                }
                Err(_) => {
                    warn!(biz_tag = %tag, "giving unused ids back timed out");
                    report.failed += 1;
                }
            }
        }
        report
    }

    /// Fills `out` to `count` ids, waiting for loads as needed, bounded by `wait_timeout`
    /// from the last progress.
    async fn fill(&self, tag: &str, count: usize, out: &mut Vec<i64>) -> Result<(), SegmentError> {
        let buf = self.buffer(tag).await?;
        self.fill_buffer(&buf, count, out).await
    }

    /// [`Self::fill`] on a resolved buffer.
    async fn fill_buffer(
        &self,
        buf: &Arc<SegmentBuffer>,
        count: usize,
        out: &mut Vec<i64>,
    ) -> Result<(), SegmentError> {
        let wait = self.inner.config.wait_timeout;
        let mut deadline = Instant::now() + wait;
        // Whether this request started the load in flight: while the lease is failing, only
        // the request that started the attempt waits for it.
        let mut probing = false;
        loop {
            // Register for the wake-up before checking, so a load finishing in between is seen.
            let notified = buf.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if buf.is_removed() {
                return Err(SegmentError::UnknownTag(buf.tag().clone()));
            }
            if buf.is_closed() {
                // The server is stopping and gave the tag's unused ids back.
                return Err(SegmentError::NotReady {
                    retry_after_secs: 1,
                });
            }
            let before = out.len();
            let preload = buf.take_many(count - out.len(), out);
            if out.len() == count {
                if preload {
                    self.start_load(buf);
                }
                return Ok(());
            }
            if buf.is_exhausted() {
                return Err(SegmentError::Exhausted);
            }
            probing |= self.start_load(buf);
            if buf.is_failing() && !probing {
                // Fail fast: the tag's last lease failed and this request did not start the
                // attempt now due (the backoff holds, or another request's attempt runs). It
                // answers at once instead of holding the caller for `wait_timeout`; a retry is
                // armed for the end of the backoff so the first lease after a recovery comes
                // no later than if this request had waited for it.
                self.arm_retry(buf);
                return Err(SegmentError::NotReady {
                    retry_after_secs: retry_after(buf.backoff_left()),
                });
            }
            let now = Instant::now();
            if out.len() > before {
                deadline = now + wait;
            }
            if now >= deadline {
                return Err(SegmentError::NotReady {
                    retry_after_secs: retry_after(buf.backoff_left()),
                });
            }
            let mut left = deadline - now;
            if !buf.is_loading() {
                // A backoff is on: wake when it ends to start the next attempt ourselves.
                left = left.min(buf.backoff_left().max(Duration::from_millis(1)));
            }
            let _ = tokio::time::timeout(left, notified).await;
            if !buf.is_loading() {
                // Our attempt (if any) ended: a later one is not ours to wait for.
                probing = false;
            }
        }
    }

    /// Schedules one load for the end of the tag's backoff, unless one is scheduled already.
    fn arm_retry(&self, buf: &Arc<SegmentBuffer>) {
        if !buf.arm_retry() {
            return;
        }
        let this = self.clone();
        let buf = buf.clone();
        let wait = buf.backoff_left();
        self.inner.runtime.spawn(async move {
            tokio::time::sleep(wait).await;
            buf.disarm_retry();
            if buf.is_failing() {
                this.start_load(&buf);
            }
        });
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

/// `Retry-After` for a backoff of `left`: whole seconds, rounded up, at least 1.
fn retry_after(left: Duration) -> u64 {
    left.as_millis().div_ceil(1000).max(1) as u64
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

    /// A buffer for `tag`, starting above the mark of its previous generation, if any.
    fn new_buffer(&self, tag: &BizTag) -> Arc<SegmentBuffer> {
        let above = self.retired.of(tag.as_str());
        Arc::new(SegmentBuffer::above(tag.clone(), above))
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

    /// One load: lease a segment and publish it, or record why not. A lease at or below the
    /// buffer's high-water mark is refused and leased again at once with a step that jumps past
    /// the mark (`super::high_water`), at most [`high_water::MAX_JUMPS`] times, all within one
    /// `load_timeout`.
    async fn load(self: Arc<Self>, buf: Arc<SegmentBuffer>) {
        let guard = LoadGuard(Some(buf.clone()));
        let _permit = self.loads.acquire().await;
        let Some(plan) = buf.plan_load(&self.config.policy) else {
            guard.disarm().finish_load();
            return;
        };
        let started = Instant::now();
        let deadline = started + self.config.load_timeout;
        let mut ask = plan.step;
        let mut jumps = 0;
        let failure = loop {
            let leased =
                tokio::time::timeout_at(deadline, self.store.lease(buf.tag().as_str(), ask)).await;
            let lease = match leased {
                Ok(Ok(lease)) => lease,
                Ok(Err(e)) => break LoadFailure::Store(e),
                Err(_) => break LoadFailure::TimedOut,
            };
            match buf.publish_lease(lease, plan.step, started.elapsed(), jumps > 0) {
                Publish::Loaded { len, regression } => {
                    if let Some(r) = regression {
                        high_water::report(buf.tag(), &r, "trimmed to the ids above the mark");
                    }
                    info!(
                        max_id = lease.max_id,
                        size = len,
                        step = plan.step.unwrap_or(lease.leased),
                        db_step = ?lease.db_step,
                        latency_ms = started.elapsed().as_secs_f64() * 1e3,
                        "segment loaded"
                    );
                    guard.disarm();
                    return;
                }
                Publish::Closed => {
                    info!(
                        max_id = lease.max_id,
                        leased = lease.leased,
                        "segment leased after the tag closed for the give-back: wasted"
                    );
                    guard.disarm();
                    return;
                }
                Publish::Refused(r) => {
                    high_water::report(buf.tag(), &r, "refused, leasing past the mark");
                    jumps += 1;
                    if jumps > high_water::MAX_JUMPS {
                        break LoadFailure::BelowMark(r.leased_to - 1);
                    }
                    let step = plan.step.or(lease.db_step).unwrap_or(lease.leased);
                    ask = Some(high_water::jump_step(r.end, r.leased_to, step));
                }
            }
        };
        let latency = started.elapsed();
        let buf = guard.disarm();
        match failure {
            LoadFailure::Store(StoreError::NotFound) => {
                warn!("tag vanished from the database");
                buf.mark_removed();
                buf.finish_load();
                self.remove_tag(buf.tag().as_str(), Some(&buf));
            }
            LoadFailure::Store(StoreError::Exhausted) => {
                warn!("biz_tag exhausted: max_id is at i64::MAX");
                buf.mark_exhausted();
            }
            // A database that is down (or refused as lossy) fails every tag's load on each
            // backoff: one line per interval for all tags, the rest counted in
            // `leafid_segment_load_failures_total`.
            LoadFailure::Store(e) => {
                if let Some(held_back) = LogLimiter::global().allow("segment load failed") {
                    warn!(
                        error = %e, latency_ms = latency.as_secs_f64() * 1e3, held_back,
                        "segment load failed"
                    );
                }
                buf.fail_load(e.to_string());
            }
            LoadFailure::TimedOut => {
                if let Some(held_back) = LogLimiter::global().allow("segment load timed out") {
                    warn!(
                        timeout_ms = self.config.load_timeout.as_millis() as u64,
                        held_back, "segment load timed out"
                    );
                }
                buf.fail_load("lease timed out".into());
            }
            LoadFailure::BelowMark(mark) => {
                warn!(
                    high_water = mark,
                    jumps, "leases still at or below the high-water mark; backing off"
                );
                buf.fail_load(format!(
                    "leases stay at or below this server's high-water mark {mark}"
                ));
            }
        }
    }
}

/// Why a load ended without a segment.
enum LoadFailure {
    /// The store answered an error.
    Store(StoreError),
    /// No answer within `load_timeout`.
    TimedOut,
    /// Every lease, jumps included, ended at or below this high-water mark.
    BelowMark(i64),
}

/// One tag of a [`SegmentAllocator`], resolved once.
#[derive(Clone)]
pub struct TagHandle {
    engine: SegmentAllocator,
    buffer: Arc<SegmentBuffer>,
}

impl TagHandle {
    /// The fast path: one `fetch_add` and a few loads; `None` when the segment is spent (use
    /// [`Self::next_id`]) or the tag was deleted.
    #[inline]
    pub fn try_next_id(&self) -> Option<i64> {
        match self.buffer.try_next() {
            Take::Id { id, preload } => {
                if preload {
                    self.engine.start_load(&self.buffer);
                }
                Some(id)
            }
            Take::Beyond => None,
        }
    }

    /// The next id, waiting for a load if the segments are spent.
    pub async fn next_id(&self) -> Result<i64, SegmentError> {
        if let Some(id) = self.try_next_id() {
            return Ok(id);
        }
        let mut out = Vec::with_capacity(1);
        self.engine.fill_buffer(&self.buffer, 1, &mut out).await?;
        Ok(out[0])
    }

    /// The tag's buffer.
    pub fn buffer(&self) -> &Arc<SegmentBuffer> {
        &self.buffer
    }
}

/// Releases the single-flight flag if a load task is dropped mid-way (runtime shutdown).
struct LoadGuard(Option<Arc<SegmentBuffer>>);

impl LoadGuard {
    fn disarm(mut self) -> Arc<SegmentBuffer> {
        self.0.take().expect("armed")
    }
}

impl Drop for LoadGuard {
    fn drop(&mut self) {
        if let Some(buf) = self.0.take() {
            buf.fail_load("load task cancelled".into());
        }
    }
}

#[cfg(test)]
mod give_back_tests;
#[cfg(test)]
mod regression_tests;
#[cfg(test)]
mod tests;
