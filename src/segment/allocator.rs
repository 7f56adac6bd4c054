//! `SegmentAllocator`: the tags of this server, their loads, and waiting for segments.
//!
//! Loads run as tasks on the async runtime: at most one per tag (the buffer's single-flight
//! flag), at most `max_concurrent_loads` at once (a semaphore), each bounded by `load_timeout`.
//! A failed load sets a backoff on the buffer; the next request after it starts another.
//! Requests that find no ids wait on the buffer's notification (never spin) until `wait_timeout`.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use crossbeam_utils::CachePadded;
use tokio::sync::Semaphore;
// tokio's clock, as the timeouts that race these deadlines (a paused test clock drives both).
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use super::biz_tag::BizTag;
use super::buffer::{BufferSnapshot, SegmentBuffer, Take};
use super::error::SegmentError;
use super::step::StepPolicy;
use super::store::{SegmentStore, StoreError, TagRow};
use super::tag_map::{TagMap, same_bytes};
use super::tag_rules::{NewTag, Step, TagUpdate};

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

/// Longest tag kept as a thread's last tag (longer ones always go through the map).
const LAST_TAG_MAX: usize = 32;

thread_local! {
    /// Per thread: one engine's tag map and the buffer of the tag asked for last. A thread
    /// holds on to one map at a time, so an idle thread keeps at most one outdated map (and
    /// buffer) alive until its next request.
    static TAG_CACHE: RefCell<ThreadTags> = const { RefCell::new(ThreadTags::EMPTY) };
}

/// A thread's view of one engine's tags (see [`TAG_CACHE`]). Every entry belongs to engine
/// `engine` at tag-map generation `generation`: a newer generation (a tag added, deleted, or
/// dropped by a refresh) clears them all before any is used, so a deleted tag never serves
/// from here.
struct ThreadTags {
    /// [`CacheKey::engine`] of the engine the entries are of (meaningful only with a `map`).
    engine: u64,
    /// The engine's [`CacheKey::generation`] when `map` was loaded.
    generation: u64,
    /// The engine's tag map at `generation`.
    map: Option<Arc<TagMap>>,
    /// The buffer of the last tag asked for, once it was asked for twice in a row: a thread
    /// asking for it again compares the name with `last_tag` and skips the hash and the probe. Kept only on a repeat because taking an `Arc` costs an atomic increment (and a
    /// cache miss among many tags) that a thread whose tags vary from call to call never pays.
    last: Option<Arc<SegmentBuffer>>,
    /// The name of `last`, here rather than read from the buffer: the check then touches
    /// nothing shared but what the id path needs anyway.
    last_tag: [u8; LAST_TAG_MAX],
    /// Length of `last_tag`.
    last_len: usize,
    /// Address of the buffer the previous lookup found (identity only, never dereferenced):
    /// the same one found again is a repeat and goes to `last`.
    seen: usize,
}

impl ThreadTags {
    const EMPTY: Self = Self {
        engine: 0,
        generation: 0,
        map: None,
        last: None,
        last_tag: [0; LAST_TAG_MAX],
        last_len: 0,
        seen: 0,
    };
}

/// The key of a thread's cached view of an engine's tags ([`ThreadTags`]).
struct CacheKey {
    /// Distinguishes engines in the thread-local cache (never reused, unlike an address).
    engine: u64,
    /// Bumped (Release) after every replacement of `tags`, so a thread can keep using its own
    /// clone of the map (see [`TAG_CACHE`]) until it changes: one Acquire load instead of an
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
    /// Where load tasks are spawned (captured at construction, so callers need no runtime).
    runtime: tokio::runtime::Handle,
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
                runtime: tokio::runtime::Handle::current(),
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
                .unwrap_or_else(|| Arc::new(SegmentBuffer::new(tag.clone())));
            next.insert(tag.as_str().into(), buf);
        }
        for (tag, buf) in old.iter() {
            if next.contains_key(tag) {
                continue;
            }
            let listed = listed_over.get(tag).is_some_and(|b| Arc::ptr_eq(b, buf));
            if listed {
                info!(biz_tag = %tag, "tag removed from the database");
                buf.mark_removed();
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

    /// `count` increasing ids of `tag`.
    pub async fn next_ids(&self, tag: &str, count: usize) -> Result<Vec<i64>, SegmentError> {
        let mut out = Vec::with_capacity(count);
        self.fill(tag, count, &mut out).await?;
        Ok(out)
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
        let buf = Arc::new(SegmentBuffer::new(tag.clone()));
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
        loop {
            // Register for the wake-up before checking, so a load finishing in between is seen.
            let notified = buf.notify().notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if buf.is_removed() {
                return Err(SegmentError::UnknownTag(buf.tag().clone()));
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
            self.start_load(buf);
            let now = Instant::now();
            if out.len() > before {
                deadline = now + wait;
            }
            if now >= deadline {
                return Err(SegmentError::NotReady {
                    retry_after_secs: buf.backoff_left().as_secs().max(1),
                });
            }
            let mut left = deadline - now;
            if !buf.is_loading() {
                // A backoff is on: wake when it ends to start the next attempt ourselves.
                left = left.min(buf.backoff_left().max(Duration::from_millis(1)));
            }
            let _ = tokio::time::timeout(left, notified).await;
        }
    }

    /// Starts a load of the tag's next segment unless one runs or the backoff holds it.
    fn start_load(&self, buf: &Arc<SegmentBuffer>) {
        if !buf.try_begin_load() {
            return;
        }
        let inner = self.inner.clone();
        let buf = buf.clone();
        let span = info_span!(parent: None, "segment_load", biz_tag = %buf.tag());
        self.inner
            .runtime
            .spawn(async move { inner.load(buf).await }.instrument(span));
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
        buf.mark_removed();
        let mut next = TagMap::clone(&current);
        next.remove(tag);
        self.publish_tags(next);
    }

    /// Replaces the tag map and announces it to the thread-local caches.
    fn publish_tags(&self, next: TagMap) {
        self.tags.store(Arc::new(next));
        // Release: a thread that sees the new generation also sees the map stored above.
        self.key.generation.fetch_add(1, Ordering::Release);
    }

    /// Runs `f` on the buffer of `tag` in this thread's copy of the tag map (refreshed when the
    /// map changed); `None` if the tag is not cached.
    ///
    /// Small enough to inline: a thread asking for the same tag again (the usual HTTP traffic)
    /// costs one Acquire load, the thread-local access and a compare of the name; the rest is
    /// in [`Self::look_up`].
    #[inline]
    fn with_buffer<R>(&self, tag: &str, f: impl FnOnce(&Arc<SegmentBuffer>) -> R) -> Option<R> {
        // Acquire: pairs with the Release in `publish_tags`, so the map loaded below is at
        // least the one this generation announced.
        let generation = self.key.generation.load(Ordering::Acquire);
        TAG_CACHE.with(|cache| {
            let mut cache = cache.borrow_mut();
            let hit = cache.engine == self.key.engine
                && cache.generation == generation
                && cache.last.is_some()
                && cache.last_len == tag.len()
                && same_bytes(&cache.last_tag[..cache.last_len], tag.as_bytes());
            // One call of `f` (the id path), so it inlines here.
            let buf = if hit {
                cache.last.as_ref()?
            } else {
                self.look_up(&mut cache, generation, tag)?
            };
            Some(f(buf))
        })
    }

    /// [`Self::with_buffer`] past its first check: reloads the thread's map if the engine or
    /// the generation changed, then finds `tag` in it (keeping its buffer in `last` on a repeat).
    #[inline(never)]
    fn look_up<'c>(
        &self,
        cache: &'c mut ThreadTags,
        generation: u64,
        tag: &str,
    ) -> Option<&'c Arc<SegmentBuffer>> {
        if cache.engine != self.key.engine || cache.generation != generation || cache.map.is_none()
        {
            // Dropping the old entries first: a thread keeps one map alive, not two.
            *cache = ThreadTags::EMPTY;
            *cache = ThreadTags {
                engine: self.key.engine,
                generation,
                map: Some(self.tags.load_full()),
                ..ThreadTags::EMPTY
            };
        }
        // `last` did not match: a thread whose tags vary does not keep one alive.
        cache.last = None;
        let buf = cache.map.as_ref()?.get(tag)?;
        let at = Arc::as_ptr(buf) as usize;
        if cache.seen == at && tag.len() <= LAST_TAG_MAX {
            cache.last_tag[..tag.len()].copy_from_slice(tag.as_bytes());
            cache.last_len = tag.len();
            return Some(cache.last.insert(buf.clone()));
        }
        cache.seen = at;
        Some(buf)
    }

    /// One load: lease a segment and publish it, or record why not.
    async fn load(self: Arc<Self>, buf: Arc<SegmentBuffer>) {
        let guard = LoadGuard(Some(buf.clone()));
        let _permit = self.loads.acquire().await;
        let Some(plan) = buf.plan_load(&self.config.policy) else {
            guard.disarm().finish_load();
            return;
        };
        let started = Instant::now();
        let result = tokio::time::timeout(
            self.config.load_timeout,
            self.store.lease(buf.tag().as_str(), plan.step),
        )
        .await;
        let latency = started.elapsed();
        let buf = guard.disarm();
        match result {
            Ok(Ok(lease)) => {
                let size = buf.publish(lease, plan.step, latency);
                info!(
                    max_id = lease.max_id,
                    size,
                    step = plan.step.unwrap_or(lease.leased),
                    db_step = ?lease.db_step,
                    latency_ms = latency.as_secs_f64() * 1e3,
                    "segment loaded"
                );
            }
            Ok(Err(StoreError::NotFound)) => {
                warn!("tag vanished from the database");
                buf.mark_removed();
                buf.finish_load();
                self.remove_tag(buf.tag().as_str(), Some(&buf));
            }
            Ok(Err(StoreError::Exhausted)) => {
                warn!("biz_tag exhausted: max_id is at i64::MAX");
                buf.mark_exhausted();
            }
            Ok(Err(e)) => {
                warn!(error = %e, latency_ms = latency.as_secs_f64() * 1e3, "segment load failed");
                buf.fail_load(e.to_string());
            }
            Err(_) => {
                warn!(
                    timeout_ms = self.config.load_timeout.as_millis() as u64,
                    "segment load timed out"
                );
                buf.fail_load("lease timed out".into());
            }
        }
    }
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
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;
    use crate::testing::MemoryStore;

    fn engine(store: &Arc<MemoryStore>, wait_ms: u64) -> SegmentAllocator {
        let config = SegmentConfig {
            wait_timeout: Duration::from_millis(wait_ms),
            ..Default::default()
        };
        SegmentAllocator::new(store.clone(), config)
    }

    #[tokio::test]
    async fn hands_out_consecutive_ids_and_preloads_before_the_segment_runs_out() {
        let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 100)]));
        let e = engine(&store, 1000);
        for expected in 1..=15 {
            assert_eq!(e.next_id("t").await.unwrap(), expected);
        }
        // 10% used: the next segment loads in the background, before anyone waits for it.
        for _ in 0..100 {
            if store.leases.load(Ordering::Relaxed) == 2 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(store.leases.load(Ordering::Relaxed), 2);
        let snap = &e.snapshots()[0];
        assert!(snap.next_ready, "{snap:?}");
        assert_eq!(snap.step, 200, "loads 15 min apart double the step");
        let ids = e.next_ids("t", 200).await.unwrap();
        assert_eq!(ids, (16..=215).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn unknown_and_invalid_tags_are_refused() {
        let store = Arc::new(MemoryStore::default());
        let e = engine(&store, 100);
        assert!(matches!(
            e.next_id("nope").await,
            Err(SegmentError::UnknownTag(t)) if t.as_str() == "nope"
        ));
        assert!(matches!(
            e.next_id("a b").await,
            Err(SegmentError::InvalidTag(_))
        ));
    }

    #[tokio::test]
    async fn a_tag_created_after_start_serves_at_once() {
        let store = Arc::new(MemoryStore::default());
        let e = engine(&store, 500);
        e.refresh_tags().await.unwrap();
        store.insert("late", 1, 10);
        assert_eq!(e.next_id("late").await.unwrap(), 1);
    }

    #[tokio::test]
    async fn a_stalled_store_fails_requests_at_the_deadline_not_later() {
        let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
        let e = engine(&store, 150);
        e.refresh_tags().await.unwrap();
        store.delay_ms.store(5_000, Ordering::Relaxed);
        let started = Instant::now();
        let err = e.next_id("t").await.unwrap_err();
        assert!(matches!(err, SegmentError::NotReady { .. }), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_first_request_whose_tag_lookup_hangs_fails_at_the_deadline() {
        let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
        let e = engine(&store, 150);
        store.delay_ms.store(60_000, Ordering::Relaxed);
        let started = Instant::now();
        let err = e.next_id("t").await.unwrap_err();
        assert!(matches!(err, SegmentError::NotReady { .. }), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    #[tokio::test]
    async fn a_failing_store_serves_buffered_ids_then_errors_then_recovers_by_itself() {
        let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
        let e = engine(&store, 200);
        assert_eq!(e.next_id("t").await.unwrap(), 1);
        assert_eq!(e.next_id("t").await.unwrap(), 2); // 10% used: the preload of 11..=30 starts
        tokio::time::sleep(Duration::from_millis(50)).await;
        store.failing.store(true, Ordering::Relaxed);
        let mut got = vec![];
        loop {
            match e.next_id("t").await {
                Ok(id) => got.push(id),
                Err(SegmentError::NotReady { .. }) => break,
                Err(other) => panic!("{other:?}"),
            }
        }
        assert_eq!(
            got,
            (3..=30).collect::<Vec<_>>(),
            "buffered ids keep flowing"
        );
        store.failing.store(false, Ordering::Relaxed);
        let id = e.next_id("t").await.unwrap();
        assert!(id > 30, "recovered with a fresh segment, got {id}");
    }

    #[tokio::test]
    async fn ids_stop_at_i64_max_with_exhausted() {
        let store = Arc::new(MemoryStore::with_rows(&[("t", i64::MAX - 5, 3)]));
        let e = engine(&store, 200);
        let mut got = vec![];
        let err = loop {
            match e.next_id("t").await {
                Ok(id) => got.push(id),
                Err(err) => break err,
            }
        };
        assert_eq!(got, (i64::MAX - 5..i64::MAX).collect::<Vec<_>>());
        assert!(matches!(err, SegmentError::Exhausted), "{err:?}");
    }

    /// A store whose listing is read at once but answered late, as a large `SELECT` on a
    /// slow link is: rows created meanwhile are missing from it.
    struct ListsEarly(Arc<MemoryStore>);

    #[async_trait::async_trait]
    impl SegmentStore for ListsEarly {
        async fn lease(
            &self,
            biz_tag: &str,
            step: Option<i64>,
        ) -> Result<crate::segment::Lease, StoreError> {
            self.0.lease(biz_tag, step).await
        }
        async fn get_tag(
            &self,
            biz_tag: &str,
        ) -> Result<Option<crate::segment::TagRow>, StoreError> {
            self.0.get_tag(biz_tag).await
        }
        async fn list_tags(&self) -> Result<Vec<crate::segment::TagRow>, StoreError> {
            let rows = self.0.list_tags().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            rows
        }
        async fn create_tag(
            &self,
            tag: &crate::segment::NewTag,
        ) -> Result<crate::segment::TagRow, StoreError> {
            self.0.create_tag(tag).await
        }
        async fn update_tag(
            &self,
            biz_tag: &str,
            step: Option<i64>,
            description: Option<&str>,
        ) -> Result<Option<crate::segment::TagRow>, StoreError> {
            self.0.update_tag(biz_tag, step, description).await
        }
        async fn delete_tag(&self, biz_tag: &str) -> Result<bool, StoreError> {
            self.0.delete_tag(biz_tag).await
        }
        async fn ping(&self) -> Result<(), StoreError> {
            self.0.ping().await
        }
    }

    #[tokio::test]
    async fn a_refresh_keeps_a_tag_first_requested_while_it_listed() {
        let rows = Arc::new(MemoryStore::default());
        let e = SegmentAllocator::new(Arc::new(ListsEarly(rows.clone())), SegmentConfig::default());
        let refresh = tokio::spawn({
            let e = e.clone();
            async move { e.refresh_tags().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        rows.insert("new", 1, 10);
        assert_eq!(e.next_id("new").await.unwrap(), 1);
        refresh.await.unwrap().unwrap();
        // Before the fix the refresh marked the buffer removed: requests in flight on it got
        // unknown_biz_tag, and the next one leased a fresh segment (id 11).
        assert_eq!(e.next_id("new").await.unwrap(), 2);
        assert_eq!(rows.leases.load(Ordering::Relaxed), 1);
        // A later refresh that does list the row keeps it, and a deletion still removes it.
        e.refresh_tags().await.unwrap();
        assert_eq!(e.next_id("new").await.unwrap(), 3);
        rows.remove("new");
        e.refresh_tags().await.unwrap();
        assert!(e.cached("new").is_none());
    }

    #[tokio::test]
    async fn a_tag_deleted_from_the_database_disappears_on_refresh() {
        let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 10)]));
        let e = engine(&store, 200);
        e.refresh_tags().await.unwrap();
        assert_eq!(e.next_id("t").await.unwrap(), 1);
        store.remove("t");
        e.refresh_tags().await.unwrap();
        assert!(e.cached("t").is_none());
        assert!(matches!(
            e.next_id("t").await,
            Err(SegmentError::UnknownTag(_))
        ));
    }

    #[tokio::test]
    async fn admin_writes_go_to_the_store_and_a_delete_drops_the_buffer() {
        let store = Arc::new(MemoryStore::default());
        let e = engine(&store, 200);
        let tag = BizTag::parse("t").unwrap();
        let step = Step::try_from(10).unwrap();
        let new = NewTag::new(tag.clone(), step, Some(100), None).unwrap();
        assert_eq!(e.create_tag(&new).await.unwrap().max_id, 100);
        assert!(matches!(
            e.create_tag(&new).await,
            Err(StoreError::AlreadyExists)
        ));
        assert_eq!(e.next_id("t").await.unwrap(), 100);
        let change = TagUpdate::new(Some(Step::try_from(20).unwrap()), Some("d".into())).unwrap();
        let row = e.update_tag(&tag, &change).await.unwrap().unwrap();
        assert_eq!((row.step, row.description.as_deref()), (20, Some("d")));
        assert!(e.cached("t").is_some(), "an update keeps the buffer");
        // (max_id may have moved since: a preload leases in the background.)
        let read = e.get_tag(&tag).await.unwrap().unwrap();
        assert_eq!((read.step, read.description), (20, Some("d".into())));
        assert_eq!(e.list_tags().await.unwrap().len(), 1);
        e.ping().await.unwrap();

        let buffer = e.cached("t").unwrap();
        assert!(e.delete_tag(&tag).await.unwrap());
        assert!(buffer.is_removed() && e.cached("t").is_none());
        assert!(matches!(
            e.next_id("t").await,
            Err(SegmentError::UnknownTag(_))
        ));
        assert!(!e.delete_tag(&tag).await.unwrap());
        let unknown = BizTag::parse("nope").unwrap();
        assert_eq!(e.update_tag(&unknown, &change).await.unwrap(), None);
    }

    /// The thread's last tag (kept after two requests in a row) never outlives its row: a delete
    /// or a refresh that drops the tag stops it at once, and two engines on one thread never
    /// serve each other's buffers.
    #[tokio::test]
    async fn a_tag_repeated_by_a_thread_still_disappears_on_delete_and_refresh() {
        let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 100), ("u", 1, 100)]));
        let e = engine(&store, 200);
        for expected in 1..=3 {
            assert_eq!(e.next_id("t").await.unwrap(), expected);
        }
        assert_eq!(
            e.try_next_id("t"),
            Some(4),
            "served from the thread's last tag"
        );
        e.delete_tag(&BizTag::parse("t").unwrap()).await.unwrap();
        assert_eq!(e.try_next_id("t"), None);
        assert!(matches!(
            e.next_id("t").await,
            Err(SegmentError::UnknownTag(_))
        ));

        for expected in 1..=3 {
            assert_eq!(e.next_id("u").await.unwrap(), expected);
        }
        store.remove("u");
        e.refresh_tags().await.unwrap();
        assert_eq!(e.try_next_id("u"), None);

        let (a, b) = (
            engine(&Arc::new(MemoryStore::with_rows(&[("v", 1, 100)])), 200),
            engine(&Arc::new(MemoryStore::with_rows(&[("v", 1_000, 100)])), 200),
        );
        for i in 0..4 {
            assert_eq!(a.next_id("v").await.unwrap(), 1 + 2 * i);
            assert_eq!(a.next_id("v").await.unwrap(), 2 + 2 * i);
            assert_eq!(b.next_id("v").await.unwrap(), 1_000 + i);
        }
    }

    /// Many tasks on a multi-threaded runtime, tiny segments so loads race with takes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_tasks_get_unique_increasing_ids_across_many_loads() {
        let store = Arc::new(MemoryStore::with_rows(&[("t", 1, 7)]));
        let config = SegmentConfig {
            wait_timeout: Duration::from_secs(5),
            policy: StepPolicy {
                max_step: 64,
                ..Default::default()
            },
            ..Default::default()
        };
        let e = SegmentAllocator::new(store.clone(), config);
        let tasks: Vec<_> = (0..4)
            .map(|i| {
                let e = e.clone();
                tokio::spawn(async move {
                    let mut mine = Vec::new();
                    for n in 0..5_000 {
                        if (n + i) % 9 == 0 {
                            mine.extend(e.next_ids("t", 13).await.unwrap());
                        } else {
                            mine.push(e.next_id("t").await.unwrap());
                        }
                    }
                    assert!(mine.windows(2).all(|w| w[0] < w[1]), "per-task order");
                    mine
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "duplicates");
        assert!(store.leases.load(Ordering::Relaxed) > 100);
    }
}
