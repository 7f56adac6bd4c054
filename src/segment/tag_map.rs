//! The tag -> buffer map that every request by tag name reads.
//!
//! A `HashMap<Box<str>, _>` lookup compares the found key with `==` on bytes, which is a call to
//! libc's `memcmp` (perf: 22% of a by-name `next_id`, the hash and probe another third). Tags
//! are short (at most 128 bytes), so [`same_bytes`] compares them eight bytes at a time inline,
//! through hashbrown's `Equivalent` (no `unsafe`, no key type of our own). The hasher is foldhash,
//! seeded per map: tags come from `leaf_alloc`, so SipHash's flood resistance buys nothing.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use hashbrown::{Equivalent, HashMap};

use super::buffer::SegmentBuffer;

/// Tag -> buffer, cheap to clone relative to a refresh (the buffers are shared).
#[derive(Clone, Default)]
pub(crate) struct TagMap(HashMap<Box<str>, Arc<SegmentBuffer>, foldhash::fast::RandomState>);

/// A tag name as a lookup key: hashes exactly like the `Box<str>` keys, compares with
/// [`same_bytes`].
struct Name<'a>(&'a str);

impl Hash for Name<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl Equivalent<Box<str>> for Name<'_> {
    #[inline]
    fn equivalent(&self, key: &Box<str>) -> bool {
        same_bytes(self.0.as_bytes(), key.as_bytes())
    }
}

/// `a == b`, eight bytes at a time as `u64`s, inlined: slice `==` would call `memcmp` even for
/// 8-byte chunks.
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().expect("chunks of 8"));
    let mut a8 = a.chunks_exact(8);
    let mut b8 = b.chunks_exact(8);
    for (x, y) in (&mut a8).zip(&mut b8) {
        if word(x) != word(y) {
            return false;
        }
    }
    let (ra, rb) = (a8.remainder(), b8.remainder());
    let mut diff = 0u8;
    for i in 0..ra.len() {
        diff |= ra[i] ^ rb[i];
    }
    diff == 0
}

impl TagMap {
    /// An empty map with room for `n` tags.
    pub(crate) fn with_capacity(n: usize) -> Self {
        Self(HashMap::with_capacity_and_hasher(n, Default::default()))
    }

    /// The buffer of `tag`.
    #[inline]
    pub(crate) fn get(&self, tag: &str) -> Option<&Arc<SegmentBuffer>> {
        self.0.get(&Name(tag))
    }

    /// Whether `tag` is in the map.
    pub(crate) fn contains_key(&self, tag: &str) -> bool {
        self.0.contains_key(&Name(tag))
    }

    /// Adds or replaces `tag`'s buffer.
    pub(crate) fn insert(&mut self, tag: Box<str>, buf: Arc<SegmentBuffer>) {
        self.0.insert(tag, buf);
    }

    /// Removes `tag`.
    pub(crate) fn remove(&mut self, tag: &str) {
        self.0.remove(&Name(tag));
    }

    /// Every tag and its buffer.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Box<str>, &Arc<SegmentBuffer>)> {
        self.0.iter()
    }

    /// Every buffer.
    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<SegmentBuffer>> {
        self.0.values()
    }

    /// How many tags.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::BizTag;

    #[test]
    fn same_bytes_agrees_with_eq_on_every_length_and_position() {
        for len in 0..40usize {
            let a: Vec<u8> = (0..len as u8).collect();
            assert!(same_bytes(&a, &a.clone()));
            for i in 0..len {
                let mut b = a.clone();
                b[i] ^= 0x20;
                assert!(!same_bytes(&a, &b), "len {len}, differs at {i}");
            }
            let mut longer = a.clone();
            longer.push(0);
            assert!(!same_bytes(&a, &longer));
        }
    }

    #[test]
    fn lookups_by_str_find_what_was_inserted_and_nothing_else() {
        let mut m = TagMap::with_capacity(4);
        for t in ["a", "order-service-2026", "tag-00000", "tag-00001"] {
            let tag = BizTag::parse(t).unwrap();
            m.insert(t.into(), Arc::new(SegmentBuffer::new(tag)));
        }
        assert_eq!(m.len(), 4);
        assert!(m.contains_key("order-service-2026"));
        assert!(m.get("tag-00001").is_some());
        assert!(m.get("tag-0000").is_none());
        assert!(m.get("tag-000011").is_none());
        assert!(m.get("Tag-00001").is_none());
        m.remove("tag-00001");
        assert!(m.get("tag-00001").is_none());
        assert_eq!(m.iter().count(), 3);
    }
}
