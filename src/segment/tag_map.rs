//! The tag -> buffer map that every request by tag name reads.
//!
//! A `HashMap<Box<str>, _>` lookup compares the found key with `==` on bytes, which is a call to
//! libc's `memcmp` (perf: 22% of a by-name `next_id`, the hash and probe another third). Tags
//! are short (at most 128 bytes), so [`same_bytes`] compares them eight bytes at a time inline,
//! through hashbrown's `Equivalent` (no `unsafe`, no key type of our own). The hasher is foldhash,
//! seeded per map: tags come from `leaf_alloc`, so SipHash's flood resistance buys nothing.
//!
//! Keys up to 22 bytes (nearly every tag) are stored inline in the bucket ([`TagKey`]): a lookup
//! among many tags then compares the name without following a pointer to the heap, one cache
//! miss less per request.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use hashbrown::{Equivalent, HashMap};

use super::buffer::SegmentBuffer;

/// Tag -> buffer, cheap to clone relative to a refresh (the buffers are shared).
#[derive(Clone, Default)]
pub(crate) struct TagMap(HashMap<TagKey, Arc<SegmentBuffer>, foldhash::fast::RandomState>);

/// Longest tag stored inline in a [`TagKey`]: the key stays 24 bytes, as a `Box<str>` plus tag.
const INLINE: usize = 22;

/// A tag as a key of the map: inline when short, so the bucket holds the bytes compared.
#[derive(Clone)]
pub(crate) enum TagKey {
    /// The first `len` bytes of `bytes` (`len <= INLINE`); ASCII, as every valid tag.
    Inline { len: u8, bytes: [u8; INLINE] },
    /// A longer tag.
    Boxed(Box<str>),
}

impl TagKey {
    /// The tag's bytes.
    #[inline]
    fn as_bytes(&self) -> &[u8] {
        match self {
            Self::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Self::Boxed(s) => s.as_bytes(),
        }
    }
}

impl From<&str> for TagKey {
    fn from(tag: &str) -> Self {
        if tag.len() > INLINE {
            return Self::Boxed(tag.into());
        }
        let mut bytes = [0; INLINE];
        bytes[..tag.len()].copy_from_slice(tag.as_bytes());
        Self::Inline {
            len: tag.len() as u8,
            bytes,
        }
    }
}

impl Deref for TagKey {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            // Always valid: the bytes were copied whole from a `&str` (see `From`).
            Self::Inline { .. } => std::str::from_utf8(self.as_bytes()).expect("copied from a str"),
            Self::Boxed(s) => s,
        }
    }
}

impl fmt::Display for TagKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

impl PartialEq for TagKey {
    fn eq(&self, other: &Self) -> bool {
        same_bytes(self.as_bytes(), other.as_bytes())
    }
}

impl Eq for TagKey {}

impl Hash for TagKey {
    /// As `str` hashes (so as [`Name`] does): lookups by name find the key.
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

/// A tag name as a lookup key: hashes exactly like the [`TagKey`]s, compares with
/// [`same_bytes`].
struct Name<'a>(&'a str);

impl Hash for Name<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl Equivalent<TagKey> for Name<'_> {
    #[inline]
    fn equivalent(&self, key: &TagKey) -> bool {
        same_bytes(self.0.as_bytes(), key.as_bytes())
    }
}

/// `a == b`, eight bytes at a time as `u64`s, inlined: slice `==` would call `memcmp` even for
/// 8-byte chunks. The last word overlaps the one before it instead of a byte loop over the
/// rest (short tags: `tag-00042` is two loads a side).
#[inline]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    if n >= 8 {
        let word = |s: &[u8], i: usize| u64::from_ne_bytes(s[i..i + 8].try_into().expect("8"));
        let mut i = 0;
        while i + 8 < n {
            if word(a, i) != word(b, i) {
                return false;
            }
            i += 8;
        }
        return word(a, n - 8) == word(b, n - 8);
    }
    if n >= 4 {
        let half = |s: &[u8], i: usize| u32::from_ne_bytes(s[i..i + 4].try_into().expect("4"));
        return half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4);
    }
    let mut diff = 0u8;
    for i in 0..n {
        diff |= a[i] ^ b[i];
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
    pub(crate) fn insert(&mut self, tag: TagKey, buf: Arc<SegmentBuffer>) {
        self.0.insert(tag, buf);
    }

    /// Removes `tag`.
    pub(crate) fn remove(&mut self, tag: &str) {
        self.0.remove(&Name(tag));
    }

    /// Every tag and its buffer.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&TagKey, &Arc<SegmentBuffer>)> {
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
        let long = "a-tag-longer-than-22-bytes";
        for t in ["a", "order-service-2026", "tag-00000", "tag-00001", long] {
            let tag = BizTag::parse(t).unwrap();
            m.insert(t.into(), Arc::new(SegmentBuffer::new(tag)));
        }
        assert_eq!(m.len(), 5);
        assert!(m.contains_key("order-service-2026"));
        assert!(m.contains_key(long) && !m.contains_key(&long[1..]));
        assert!(m.iter().any(|(k, _)| &**k == long && k.to_string() == long));
        assert!(m.get("tag-00001").is_some());
        assert!(m.get("tag-0000").is_none());
        assert!(m.get("tag-000011").is_none());
        assert!(m.get("Tag-00001").is_none());
        m.remove("tag-00001");
        assert!(m.get("tag-00001").is_none());
        assert_eq!(m.iter().count(), 4);
    }
}
