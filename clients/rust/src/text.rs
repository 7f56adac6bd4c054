//! [`FormattedId`], a formatted tag's id as text (inline up to 31 bytes: no heap allocation,
//! nothing to free), and `TextList`, the texts of one received batch in one buffer.
//!
//! # Why inline, and why 32 bytes
//!
//! A formatted supply used to hand out an owned `String` per id, moved out of the batch's
//! `Vec<String>`: the caller's free of it (about 8 ns) alone was several times a numeric id
//! (2 to 3 ns; issue 47, docs/clients.md). Then a `FormattedId` was 128 bytes inline, and the
//! id itself became the cost: the compiler moves a 128-byte value through the stack several
//! times per call (an `Option` built, unwrapped, passed on), each move 8 loads and 8 stores,
//! some of them waiting for a narrower store before them (store forwarding): 0.22x of the
//! numeric path even with a lock-free claim. A `FormattedId` is now 32 bytes, two 16-byte
//! registers: texts of up to [`INLINE_FORMATTED_LEN`] (31) bytes, every format without a
//! long prefix or suffix (`ORD-2026112700000123` is 20), are held inline, made by two 16-byte
//! moves out of the batch's buffer; a longer text, up to [`MAX_FORMATTED_LEN`], is held in a
//! `Box<str>` (one allocation when it is made, one free when it is dropped).
//!
//! # The bound
//!
//! The longest text of a leafid format (`docs/shapes.md`, "The format") is a prefix and a
//! suffix of at most 32 characters each, a sequence of at most 19, one check character, and the
//! date part: `yyyy`, `MM` and `dd` at most once each (8 characters) and separators, which the
//! server does not count. That is 92 characters and the separators, so
//! [`MAX_FORMATTED_LEN`] = 127 leaves room for 35 of them (`yyyy-MM-dd` has 2). A received
//! text longer than that is refused at receipt, the whole answer that server's failure
//! (`Fault::BadResponse`): no text is ever cut short or handed out in part.
//!
//! # Invariant
//!
//! Byte 0 of a `FormattedId` is its *mark*, initialised in both forms:
//! - a length `len` in `1..=31`: the id is **inline**, all 32 bytes are initialised, and bytes
//!   `1..=len` are the UTF-8 of one `&str`;
//! - [`HEAP`]: the id holds a `Box<str>` of 32 to 127 bytes (`Tail::heap`).
//!
//! The only ways to make one are [`FormattedId::new`] (from a `&str`), `TextList::id` (a copy
//! of an entry that `TextList::push` wrote as one length byte and one whole `&str`) and
//! `FormattedId::from_entry_window` (a window the lock-free path, `textcursor.rs`, copied
//! from an entry its `install` wrote the same way, after its seqlock check). So
//! [`FormattedId::as_str`] needs no validation (its `SAFETY` comments); the tests build ids
//! from texts with multi-byte characters at both capacities' edges and compare them with
//! `str`.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::mem::{ManuallyDrop, MaybeUninit};
use std::num::NonZeroU128;
use std::ops::Deref;

use crate::textcursor::{Head, Piece};

/// The longest text a [`FormattedId`] holds, in bytes: longer than any text leafid's formats
/// produce (the module's comment); a server answering a longer one is at fault.
pub const MAX_FORMATTED_LEN: usize = 127;

/// The longest text a [`FormattedId`] holds inline (no heap), in bytes.
pub const INLINE_FORMATTED_LEN: usize = 31;

/// The bytes of a [`FormattedId`]: inline, its length, then its text.
pub(crate) const INLINE: usize = INLINE_FORMATTED_LEN + 1;

/// The bytes a window of the lock-free path covers: the longest entry (a length byte and
/// [`MAX_FORMATTED_LEN`] bytes).
pub(crate) const ENTRY_MAX: usize = MAX_FORMATTED_LEN + 1;

/// The mark (byte 0) of an id whose text is on the heap: no inline length is 255.
pub(crate) const HEAP: u8 = 0xFF;

/// Bytes 16..32 of a [`FormattedId`] in its two forms (the mark says which one is there):
/// inline, text bytes 16..32 (of the window: the text's bytes 15..31); on the heap, the
/// `Box<str>` of a text of 32 to 127 bytes (bytes 1..16 are then zero, so the first 16-byte
/// piece, which `FormattedId::mark` reads, holds no pointer's bytes).
#[repr(C)]
union Tail {
    /// Never read by name (an inline id is read through its 32 bytes): the variant that makes
    /// any 16 bytes valid here, which a `Box<str>` alone would not (its pointer non-null).
    inline: [u8; 16],
    heap: ManuallyDrop<Box<str>>,
}

/// One id of a formatted tag (`ORD-2026112700000123`): 32 bytes, the text held inline when it
/// has at most [`INLINE_FORMATTED_LEN`] bytes (no allocation, nothing to free), on the heap
/// when longer (up to [`MAX_FORMATTED_LEN`]); never empty. It reads as a `&str` ([`Deref`],
/// [`AsRef<str>`], [`Borrow<str>`]) and compares, orders and hashes exactly as that `str`
/// does (so a `HashSet<FormattedId>` can be asked with a `&str`); [`into_string`] (or
/// `String::from`) makes an owned `String` when one is needed.
///
/// [`into_string`]: FormattedId::into_string
///
/// `Option<FormattedId>` is 32 bytes too: the mark is never 0, and `None` is a 0 there.
// 16: the id is two aligned 16-byte pieces. The first is a `NonZeroU128` for `Option`'s
// sake: an `Option` with a word of its own was two more stores and a load per id (issue 47).
#[repr(C, align(16))]
pub struct FormattedId {
    /// Bytes 0..16: byte 0 the mark, an inline length (1 to 31) or [`HEAP`] (so never all
    /// zero); then inline, the text's bytes 0..15, on the heap, zero. One 16-byte field, not
    /// a byte and 15 more: the compiler moves an id with a byte field apart as a byte and
    /// misaligned 16-byte pieces, whose loads wait for the stores before them (measured: a
    /// loop of `clone` 12.4 ns per id against 3.3 ns).
    head: NonZeroU128,
    /// Bytes 16..32.
    tail: Tail,
}

const _: () = assert!(std::mem::size_of::<FormattedId>() == INLINE);
const _: () = assert!(std::mem::size_of::<Option<FormattedId>>() == INLINE);

impl FormattedId {
    /// The id of `text`; `None` if it is empty or longer than [`MAX_FORMATTED_LEN`] bytes.
    pub fn new(text: &str) -> Option<Self> {
        if text.is_empty() || text.len() > MAX_FORMATTED_LEN {
            return None;
        }
        if text.len() > INLINE_FORMATTED_LEN {
            return Some(Self::on_heap(text));
        }
        let mut inline = [0; INLINE];
        inline[0] = u8::try_from(text.len()).ok()?;
        inline[1..=text.len()].copy_from_slice(text.as_bytes());
        // SAFETY: byte 0 a length of 1 to 31, bytes 1..=len a `&str`'s (the invariant).
        Some(unsafe { Self::from_inline_bytes(inline) })
    }

    /// The inline id whose 32 bytes are `bytes`.
    ///
    /// # Safety
    ///
    /// `bytes[0]` is a length `len` in 1..=31 and `bytes[1..=len]` the UTF-8 of one `&str`
    /// (the module's invariant).
    #[inline(always)]
    unsafe fn from_inline_bytes(bytes: [u8; INLINE]) -> Self {
        debug_assert!((1..=INLINE_FORMATTED_LEN).contains(&usize::from(bytes[0])));
        // SAFETY: 32 initialised bytes, byte 0 not 0 (the caller's promise): a valid inline
        // `FormattedId` (no heap form, nothing owned).
        unsafe { std::mem::transmute::<[u8; INLINE], Self>(bytes) }
    }

    /// The id of `text` (32 to 127 bytes) on the heap.
    #[cold]
    fn on_heap(text: &str) -> Self {
        let mut head = [0; 16];
        head[0] = HEAP;
        Self {
            head: NonZeroU128::new(u128::from_ne_bytes(head)).unwrap_or(NonZeroU128::MAX),
            tail: Tail {
                heap: ManuallyDrop::new(Box::from(text)),
            },
        }
    }

    /// Byte 0: an inline length (1 to 31) or [`HEAP`]. Read as part of the first 16-byte
    /// piece (a register on x86-64), never as a byte of memory, so the compiler keeps an id
    /// whole on its way through the caller instead of splitting it into bytes (measured: an
    /// id split so cost more than the rest of the local path).
    #[inline(always)]
    fn mark(&self) -> u8 {
        // SAFETY: bytes 0..16 are `head`, initialised plain bytes in both forms (the module's
        // invariant), and any bytes are a valid `Piece`.
        let first = unsafe { *std::ptr::from_ref(self).cast::<Piece>() };
        Head([first, first]).len()
    }

    /// The text.
    #[inline]
    pub fn as_str(&self) -> &str {
        let mark = self.mark();
        if mark == HEAP {
            // SAFETY: the mark says the heap form is there (the module's invariant).
            return unsafe { &self.tail.heap };
        }
        // SAFETY: an inline id has all 32 bytes initialised (the module's invariant).
        let inline = unsafe { &*std::ptr::from_ref(self).cast::<[u8; INLINE]>() };
        // The mark is at most 31 (the invariant), so this is never empty by a miss.
        let text = inline.get(1..=usize::from(mark)).unwrap_or_default();
        debug_assert!(std::str::from_utf8(text).is_ok());
        // SAFETY: `inline[1..=mark]` is always the UTF-8 of one `&str` (the module's
        // invariant: `new` copies a `&str`'s bytes after its length, `TextList::id` an entry
        // that `TextList::push` wrote as the length and one whole `&str`, `from_entry_window`
        // a whole entry the lock-free path wrote the same way; no other code writes them).
        unsafe { std::str::from_utf8_unchecked(text) }
    }

    /// The id of a window that `textcursor.rs` copied from one of its entries into `window`:
    /// byte 0 a length `len` in 1..=127, bytes `1..=len` the bytes of the `&str` it installed
    /// (its `install` writes each entry as the length byte and one whole `&str`, and its
    /// `take` answers `Text` only after its seqlock check passed: never a torn window).
    ///
    /// # Safety
    ///
    /// The window's head was put, and its rest too if [`IdWindow::wants_rest`] said so, and
    /// they are such a window: the module's invariant ([`as_str`](Self::as_str) relies on it).
    #[inline(always)]
    pub(crate) unsafe fn from_entry_window(window: IdWindow) -> Self {
        // SAFETY: the caller's promise: the head (32 bytes) was written.
        let head = unsafe { window.head.assume_init() };
        if usize::from(head.0[0]) <= INLINE_FORMATTED_LEN {
            debug_assert!(head.0[0] >= 1);
            debug_assert!(std::str::from_utf8(&head.0[1..=usize::from(head.0[0])]).is_ok());
            // SAFETY: as checked above, and the caller's promise.
            return unsafe { Self::from_inline_bytes(head.0) };
        }
        // SAFETY: the caller's promise: the rest was written too (the head's length is above
        // 31, so `wants_rest` said so).
        unsafe { Self::from_long_window(head.0, &window) }
    }

    /// The id of the head of an entry that `textcursor.rs` read whole (`take_head`): byte 0 a
    /// length `len` in 1..=31, bytes `1..=len` the bytes of the `&str` it installed.
    ///
    /// # Safety
    ///
    /// `head` is such an entry, read after its seqlock check passed (the module's invariant).
    #[inline(always)]
    pub(crate) unsafe fn from_inline_entry(head: Head) -> Self {
        // SAFETY: 32 initialised bytes, byte 0 a length of 1 to 31 (the caller's promise).
        let id = unsafe { std::mem::transmute::<[Piece; 2], Self>(head.0) };
        debug_assert!((1..=INLINE_FORMATTED_LEN).contains(&usize::from(id.mark())));
        debug_assert!(std::str::from_utf8(id.as_str().as_bytes()).is_ok());
        id
    }

    /// [`from_entry_window`](Self::from_entry_window) for a text of 32 to 127 bytes.
    ///
    /// # Safety
    ///
    /// As `from_entry_window`, with the rest of the window put.
    #[cold]
    unsafe fn from_long_window(head: [u8; INLINE], window: &IdWindow) -> Self {
        // SAFETY: the caller's promise.
        let rest = unsafe { window.rest.assume_init_ref() };
        let mut entry = [0u8; ENTRY_MAX];
        entry[..INLINE].copy_from_slice(&head);
        entry[INLINE..].copy_from_slice(rest);
        let text = entry.get(1..=usize::from(entry[0])).unwrap_or_default();
        debug_assert!(std::str::from_utf8(text).is_ok());
        // SAFETY: a whole entry, as `from_entry_window` says: the UTF-8 of one `&str`.
        Self::on_heap(unsafe { std::str::from_utf8_unchecked(text) })
    }

    /// The text as an owned `String` (one allocation, none for a text already on the heap).
    pub fn into_string(self) -> String {
        if self.mark() == HEAP {
            let mut me = ManuallyDrop::new(self);
            // SAFETY: the heap form is there, and `me` is never dropped, so its box is moved
            // out once.
            let heap = unsafe { ManuallyDrop::take(&mut me.tail.heap) };
            return heap.into_string();
        }
        self.as_str().to_owned()
    }
}

impl Drop for FormattedId {
    #[inline]
    fn drop(&mut self) {
        if self.mark() == HEAP {
            self.drop_heap();
        }
    }
}

impl FormattedId {
    /// Frees the heap form's text. Out of line, so the inline path never touches the heap
    /// form's fields (which would make the compiler split an id at their bounds).
    #[cold]
    #[inline(never)]
    fn drop_heap(&mut self) {
        // SAFETY: called only when the mark says the heap form is there; dropped once, from
        // `drop`.
        unsafe { ManuallyDrop::drop(&mut self.tail.heap) };
    }
}

impl Clone for FormattedId {
    #[inline]
    fn clone(&self) -> Self {
        if self.mark() == HEAP {
            return Self::on_heap(self.as_str());
        }
        // SAFETY: an inline id has all 32 bytes initialised and owns nothing: a copy of its
        // bytes is an equal id.
        unsafe { std::ptr::read(self) }
    }
}

/// The window of an entry, as the lock-free path (`textcursor.rs`) copies it word pair by
/// word pair: its head (two pairs, 32 bytes: the whole of an entry of up to 31 bytes of text)
/// right where an inline [`FormattedId`] is made from it, and, only for a longer entry, its
/// rest. Each pair is stored at once as one 16-byte piece (on x86-64; two 8-byte stores
/// elsewhere), so the id's later moves (16-byte loads) read whole stores. It is an id only
/// once the pieces were put and the seqlock check passed ([`FormattedId::from_entry_window`]).
#[repr(C, align(16))]
pub(crate) struct IdWindow {
    head: MaybeUninit<WindowHead>,
    rest: MaybeUninit<[u8; ENTRY_MAX - INLINE]>,
}

/// An id's 32 bytes, 16-byte aligned.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct WindowHead([u8; INLINE]);

impl IdWindow {
    /// Nothing put yet.
    #[inline(always)]
    pub(crate) fn new() -> Self {
        Self {
            head: MaybeUninit::uninit(),
            rest: MaybeUninit::uninit(),
        }
    }

    /// Whether the entry is longer than the head (its length byte, put with pair 0, above
    /// 31): then the rest of the window is to be put too. Only after pair 0 was put.
    #[inline(always)]
    pub(crate) fn wants_rest(&self) -> bool {
        // SAFETY: byte 0 was written by `put(0, ..)` (the caller's order).
        let len = unsafe { *self.head.as_ptr().cast::<u8>() };
        usize::from(len) > INLINE_FORMATTED_LEN
    }

    /// Bytes `16k..16k + 16` of the window: the two words of `pair`, each a Relaxed atomic
    /// load (its native-endian bytes in memory order). `k` is below 8 (a window is at most 128
    /// bytes); a larger one is ignored.
    ///
    /// On x86-64 the two loads are one `movdqu` (inline assembly) straight into a 16-byte
    /// register, stored at once. Rust has no 16-byte atomic load, and two 8-byte loads paired
    /// in a register (`movq`, `movq`, `punpcklqdq`, all on one execution port) cost more than
    /// the rest of the path (measured apart: 0.29x of a bare `fetch_add` paired against 0.50x
    /// to 0.54x with `movdqu`, for 128 bytes). The assembly is opaque to the compiler, so the
    /// read is no data race in Rust's model; what it does in x86-64's memory model is read the
    /// two 8-byte-aligned words as a Relaxed load of each would (a torn read between them is
    /// possible and harmless: the seqlock check rejects any window a write overlapped).
    #[inline(always)]
    pub(crate) fn put(&mut self, k: usize, pair: &[std::sync::atomic::AtomicU64; 2]) {
        let dst = match k {
            0 | 1 => self.head.as_mut_ptr().cast::<u8>().wrapping_add(16 * k),
            2..8 => self
                .rest
                .as_mut_ptr()
                .cast::<u8>()
                .wrapping_add(16 * (k - 2)),
            _ => return,
        };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `pair` is two live, 8-byte aligned `AtomicU64` (16 bytes): the asm reads
        // exactly those (no write, no stack, flags kept); SSE2 is in x86-64's baseline; `dst`
        // is 16 bytes within the head (k < 2) or the rest (2 <= k < 8, 96 bytes).
        unsafe {
            use std::arch::x86_64::{__m128i, _mm_storeu_si128};
            let piece: __m128i;
            std::arch::asm!(
                "movdqu {v}, xmmword ptr [{p}]",
                p = in(reg) pair.as_ptr(),
                v = out(xmm_reg) piece,
                options(nostack, preserves_flags, readonly)
            );
            _mm_storeu_si128(dst.cast::<__m128i>(), piece);
        }
        #[cfg(not(target_arch = "x86_64"))]
        // SAFETY: as above: both 8-byte writes are within the head or the rest.
        unsafe {
            let (lo, hi) = (
                pair[0].load(std::sync::atomic::Ordering::Relaxed),
                pair[1].load(std::sync::atomic::Ordering::Relaxed),
            );
            dst.cast::<[u8; 8]>().write_unaligned(lo.to_ne_bytes());
            dst.add(8)
                .cast::<[u8; 8]>()
                .write_unaligned(hi.to_ne_bytes());
        }
    }
}

impl fmt::Debug for IdWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IdWindow")
    }
}

impl Deref for FormattedId {
    type Target = str;

    #[inline]
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for FormattedId {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for FormattedId {
    fn as_ref(&self) -> &[u8] {
        self.as_str().as_bytes()
    }
}

impl Borrow<str> for FormattedId {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Display for FormattedId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl fmt::Debug for FormattedId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl PartialEq for FormattedId {
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for FormattedId {}

impl PartialOrd for FormattedId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FormattedId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl Hash for FormattedId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for FormattedId {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for FormattedId {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for FormattedId {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<FormattedId> for str {
    fn eq(&self, other: &FormattedId) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<FormattedId> for &str {
    fn eq(&self, other: &FormattedId) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<FormattedId> for String {
    fn eq(&self, other: &FormattedId) -> bool {
        self.as_str() == other.as_str()
    }
}

impl From<FormattedId> for String {
    fn from(id: FormattedId) -> Self {
        id.into_string()
    }
}

/// The texts of one batch, in the order received, in one `String`: each as an entry of its
/// length (one byte, 1 to 127: an ASCII character) and its text, the entries followed by
/// [`MAX_FORMATTED_LEN`] bytes of padding; `bounds[i]..bounds[i + 1]` is entry `i`. Two
/// allocations per batch whatever its size, so dropping a batch is two frees, not one per text.
/// Only [`TextList::push`] adds to it, one whole `&str` at a time.
#[derive(Debug, Clone, Default)]
pub(crate) struct TextList {
    text: String,
    /// `bounds[0] == 0`; one more entry per text. `u32`: a batch holds at most 100,000 texts of
    /// at most 128 bytes with their length.
    bounds: Vec<u32>,
    /// The padding was appended (no text may be pushed after it).
    sealed: bool,
}

impl TextList {
    /// An empty list with room for `texts` texts of about `bytes_each` bytes.
    pub(crate) fn with_capacity(texts: usize, bytes_each: usize) -> Self {
        let mut bounds = Vec::with_capacity(texts + 1);
        bounds.push(0);
        Self {
            text: String::with_capacity(texts * (bytes_each + 1) + MAX_FORMATTED_LEN),
            bounds,
            sealed: false,
        }
    }

    /// Appends `t`; `false` (nothing appended) if it is empty, longer than
    /// [`MAX_FORMATTED_LEN`], or the list is sealed.
    pub(crate) fn push(&mut self, t: &str) -> bool {
        let Ok(len) = u8::try_from(t.len()) else {
            return false;
        };
        if t.is_empty() || t.len() > MAX_FORMATTED_LEN || self.sealed {
            return false;
        }
        if self.bounds.is_empty() {
            self.bounds.push(0);
        }
        let at = self.text.len();
        // 1..=127: one ASCII character, so the buffer stays a `String`.
        self.text.push(char::from(len));
        self.text.push_str(t);
        // At most 100,000 entries of 128 bytes (validate's limit) fit in u32; a larger list is
        // refused rather than wrapped.
        match u32::try_from(self.text.len()) {
            Ok(end) => {
                self.bounds.push(end);
                true
            }
            Err(_) => {
                self.text.truncate(at);
                false
            }
        }
    }

    /// Appends the padding that lets [`id`](Self::id) copy a constant number of bytes from
    /// any entry's start. No text can be pushed after it.
    pub(crate) fn seal(&mut self) {
        if !self.sealed {
            self.text
                .extend(std::iter::repeat_n('\0', MAX_FORMATTED_LEN));
            self.sealed = true;
        }
    }

    /// The heap bytes it holds (its buffer and bounds).
    pub(crate) fn bytes(&self) -> usize {
        self.text.capacity() + self.bounds.capacity() * std::mem::size_of::<u32>()
    }

    /// The number of texts.
    pub(crate) fn len(&self) -> usize {
        self.bounds.len().saturating_sub(1)
    }

    /// Text `i`, if there is one.
    pub(crate) fn get(&self, i: usize) -> Option<&str> {
        let (a, b) = (*self.bounds.get(i)?, *self.bounds.get(i + 1)?);
        self.text.get(a as usize + 1..b as usize)
    }

    /// Text `i` as a [`FormattedId`]: up to 31 bytes, one copy of the 32 bytes from its
    /// entry's start (its length, its text, then whatever follows: the padding keeps it
    /// within the buffer); longer, on the heap. `None` past the end, or if the list is not
    /// sealed.
    #[inline]
    pub(crate) fn id(&self, i: usize) -> Option<FormattedId> {
        let a = *self.bounds.get(i)? as usize;
        if !self.sealed || i + 1 >= self.bounds.len() {
            return None;
        }
        let src = self.text.as_bytes().get(a..a + INLINE)?;
        if usize::from(src[0]) > INLINE_FORMATTED_LEN {
            return FormattedId::new(self.get(i)?);
        }
        let mut inline = [0; INLINE];
        inline.copy_from_slice(src);
        // inline[0] and inline[1..=inline[0]] are the entry `push` wrote: the module's
        // invariant holds.
        // SAFETY: as said.
        Some(unsafe { FormattedId::from_inline_bytes(inline) })
    }

    /// The first index whose text is above `floor` in byte order (the texts increasing).
    pub(crate) fn first_above(&self, floor: &str) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self
                .get(mid)
                .is_some_and(|t| t.as_bytes() <= floor.as_bytes())
            {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The texts from index `first` on, in order.
    pub(crate) fn iter_from(&self, first: usize) -> impl Iterator<Item = &str> + Clone + '_ {
        (first..self.len()).filter_map(|i| self.get(i))
    }

    /// The texts, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashSet};

    fn list(texts: &[&str]) -> TextList {
        let mut l = TextList::with_capacity(texts.len(), 8);
        for t in texts {
            assert!(l.push(t), "{t:?}");
        }
        l.seal();
        l
    }

    #[test]
    fn a_formatted_id_reads_compares_orders_and_hashes_as_its_str() {
        let a = FormattedId::new("ORD-2026112700000001").unwrap();
        let b = FormattedId::new("ORD-2026112700000002").unwrap();
        assert_eq!(&*a, "ORD-2026112700000001");
        assert_eq!(a.len(), 20);
        assert_eq!(a, "ORD-2026112700000001");
        assert_eq!(a, *"ORD-2026112700000001");
        assert_eq!(a, String::from("ORD-2026112700000001"));
        assert_eq!("ORD-2026112700000001", a);
        assert_eq!(String::from("ORD-2026112700000001"), a);
        assert_ne!(a, b);
        assert!(a < b);
        assert!(b > a);
        assert_eq!(a.cmp(&b), a.as_str().cmp(b.as_str()));
        // A prefix sorts first, as for str (the length is compared, not the padding).
        let short = FormattedId::new("ORD-20261127").unwrap();
        assert!(short < a);
        assert_eq!(a.to_string(), "ORD-2026112700000001");
        assert_eq!(format!("{a:?}"), "\"ORD-2026112700000001\"");
        assert_eq!(String::from(a.clone()), "ORD-2026112700000001");
        assert_eq!(a.clone().into_string(), "ORD-2026112700000001");
        let set: HashSet<FormattedId> = [a.clone(), b.clone(), a.clone()].into_iter().collect();
        assert_eq!(set.len(), 2);
        assert!(
            set.contains("ORD-2026112700000002"),
            "Borrow<str> agrees with Hash/Eq"
        );
        let sorted: BTreeSet<FormattedId> = [b.clone(), a.clone()].into_iter().collect();
        assert_eq!(
            sorted.iter().map(|t| t.as_str()).collect::<Vec<_>>(),
            [&*a, &*b]
        );
        let bytes: &[u8] = a.as_ref();
        assert_eq!(bytes, b"ORD-2026112700000001");
    }

    #[test]
    fn a_formatted_id_holds_one_to_the_maximum_bytes_and_refuses_the_rest() {
        assert!(FormattedId::new("").is_none());
        let max = "x".repeat(MAX_FORMATTED_LEN);
        assert_eq!(FormattedId::new(&max).unwrap(), max.as_str());
        assert!(FormattedId::new(&"x".repeat(MAX_FORMATTED_LEN + 1)).is_none());
        assert!(
            FormattedId::new(&"x".repeat(300)).is_none(),
            "no wrap at 256"
        );
        // Multi-byte characters up to the last byte.
        let wide = format!("{}é", "x".repeat(MAX_FORMATTED_LEN - 2));
        assert_eq!(FormattedId::new(&wide).unwrap(), wide.as_str());
        assert_eq!(std::mem::size_of::<FormattedId>(), 32);
    }

    #[test]
    fn an_id_is_inline_up_to_31_bytes_and_on_the_heap_beyond_and_both_read_the_same() {
        for len in [1, 2, 15, 16, 30, 31, 32, 33, 64, 126, MAX_FORMATTED_LEN] {
            let text = "k".repeat(len);
            let id = FormattedId::new(&text).unwrap();
            assert_eq!(id.mark() == HEAP, len > INLINE_FORMATTED_LEN, "{len}");
            assert_eq!(id, text.as_str(), "{len}");
            let copy = id.clone();
            assert_eq!(copy, id);
            assert_ne!(
                copy.as_str().as_ptr(),
                id.as_str().as_ptr(),
                "a clone is a copy"
            );
            drop(id);
            assert_eq!(copy.into_string(), text);
        }
        // A multi-byte character ending exactly at each edge.
        for (room, label) in [
            (INLINE_FORMATTED_LEN, "inline"),
            (MAX_FORMATTED_LEN, "heap"),
        ] {
            let text = format!("{}€", "x".repeat(room - 3));
            assert_eq!(text.len(), room);
            assert_eq!(FormattedId::new(&text).unwrap(), text.as_str(), "{label}");
        }
        // Hash and order agree across the two forms.
        let short = FormattedId::new("A-1").unwrap();
        let long = FormattedId::new(&format!("A-1{}", "0".repeat(40))).unwrap();
        assert!(short < long);
        let set: HashSet<FormattedId> = [short.clone(), long.clone()].into_iter().collect();
        assert!(set.contains("A-1") && set.contains(long.as_str()));
    }

    #[test]
    fn a_text_list_hands_out_each_text_whole_from_one_buffer() {
        let max = "z".repeat(MAX_FORMATTED_LEN);
        let wide = format!("{}ü", "y".repeat(MAX_FORMATTED_LEN - 2));
        let texts = ["A-1", "A-2", "ÄÖ-3", wide.as_str(), "B", max.as_str()];
        let l = list(&texts);
        assert_eq!(l.len(), texts.len());
        for (i, t) in texts.iter().enumerate() {
            assert_eq!(l.get(i), Some(*t));
            let id = l.id(i).unwrap();
            assert_eq!(id, *t, "text {i}");
            assert_eq!(id.len(), t.len());
        }
        assert_eq!((l.get(texts.len()), l.id(texts.len())), (None, None));
        assert_eq!(l.iter().collect::<Vec<_>>(), texts);
    }

    #[test]
    fn a_text_list_refuses_what_an_id_cannot_hold_and_ids_need_the_seal() {
        let mut l = TextList::with_capacity(2, 4);
        assert!(!l.push(""));
        assert!(!l.push(&"x".repeat(MAX_FORMATTED_LEN + 1)));
        assert!(l.push("a"));
        assert_eq!(l.id(0), None, "no id before the padding is there");
        l.seal();
        assert!(!l.push("b"), "nothing after the seal");
        assert_eq!(l.id(0).unwrap(), "a");
        assert_eq!(l.len(), 1);
        let empty = TextList::default();
        assert_eq!((empty.len(), empty.get(0), empty.id(0)), (0, None, None));
    }

    #[test]
    fn first_above_cuts_at_the_floor_in_byte_order() {
        let l = list(&["A-1", "A-3", "A-5", "A-7"]);
        assert_eq!(l.first_above("A-0"), 0);
        assert_eq!(l.first_above("A-1"), 1);
        assert_eq!(l.first_above("A-4"), 2);
        assert_eq!(l.first_above("A-7"), 4);
        assert_eq!(l.first_above("B"), 4);
        assert_eq!(TextList::default().first_above("A"), 0);
    }
}
