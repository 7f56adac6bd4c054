//! The by-name fast path: each thread keeps its own clone of an engine's tag map and, for a tag
//! it asks for twice in a row, that tag's buffer and name, so a repeat skips the hash and the
//! probe. Every entry is tied to the map generation it was loaded at; a newer generation (a tag
//! added, deleted, or dropped by a refresh) clears them all before any is used.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Inner;
use crate::segment::buffer::SegmentBuffer;
use crate::segment::tag_map::{TagMap, same_bytes};

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
    /// [`CacheKey::engine`](super::CacheKey::engine) of the engine the entries are of (meaningful only with a `map`).
    engine: u64,
    /// The engine's [`CacheKey::generation`](super::CacheKey::generation) when `map` was loaded.
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

impl Inner {
    /// Runs `f` on the buffer of `tag` in this thread's copy of the tag map (refreshed when the
    /// map changed); `None` if the tag is not cached.
    ///
    /// Small enough to inline: a thread asking for the same tag again (the usual HTTP traffic)
    /// costs one Acquire load, the thread-local access and a compare of the name; the rest is
    /// in [`Self::look_up`].
    #[inline]
    pub(super) fn with_buffer<R>(
        &self,
        tag: &str,
        f: impl FnOnce(&Arc<SegmentBuffer>) -> R,
    ) -> Option<R> {
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
}
