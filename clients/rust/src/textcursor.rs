//! `TextCursor`: the formatted supply's local path with the default clock (issue 47). One
//! `fetch_add` claims a text of the installed batch, then its window (its length byte, its
//! text and whatever follows, `BYTES` bytes) is copied out of a buffer of atomic words: no
//! lock, no thread-local look-up, no allocation, and no buffer freed that a reader may still
//! copy from. The design is `local.rs`'s (the numeric supply's cursor) with a ticket mapped to
//! an index of the batch's texts instead of to an id.
//!
//! # Layout
//!
//! `state` packs `(generation << 40) | ticket`. Installing a batch of `n` texts publishes the
//! next generation `g` with `state = (g << 40) | (LIMIT - n)`: its tickets are `LIMIT - n ..
//! LIMIT`, ticket `t` is text `t - (LIMIT - n)`, and whether a ticket is valid is decided by the
//! state word alone (`t < LIMIT`). The texts are in slot `g % SLOTS`, tagged with `g`: a buffer
//! of `AtomicU64` words, `words[0]` its own length in words (written once, before the buffer is
//! first published), then the texts' offsets (word indexes, two `u32` to a word), then the
//! texts, each as an *entry*: its length byte (1 to `BYTES - 1`) and its bytes, starting on a
//! word boundary (so a window is `WINDOW` whole words: no byte shifting), and `WINDOW` words of
//! padding at the end, so the window of the last text never runs off the buffer. When every
//! text of the batch has at most 31 bytes (every format without a long prefix or suffix), each
//! entry takes `HEAD_WORDS` (4) words whatever its length; otherwise, when every entry has the
//! same number of words, the entries are that far apart; either way the slot's `layout` says
//! so and text `i` is at `entries_at + i * stride`, without reading its offset; otherwise the
//! offset is read. One batch is one generation: its preload point (10% used, as `supply.rs`'s
//! split pieces) is the state value stored in the slot as `preload`; the one take that gets it
//! also starts the refill (`Take::Preload`), everyone else compares and moves on.
//!
//! Beside `state`, in its cache line (`Line`), are the fields the fast take needs of the
//! batch in use (its generation as the line's own tag, its number, its preload, its buffer,
//! where ticket 0's entry would be and where its last entry is), written by `install` under
//! the line's own seqlock: the fast take loads them together with `state`, none of those
//! loads waiting for another.
//!
//! # A take
//!
//! The claim is `s = state.fetch_add(1, Acquire)`; a ticket at or above `LIMIT` is `Spent` (the
//! supply switches under its lock). The text is read from the slot of `s`'s generation as a
//! seqlock: tag (Acquire), the slot's fields and the window (Relaxed loads, every index checked
//! against the buffer's own length: a torn read may index anywhere, never outside the buffer),
//! `fence(Acquire)`, tag again (Relaxed). Both tags equal to the generation: every load read
//! that generation's write (below), so the window is the whole entry `install` wrote from one
//! `&str`. The hot path ([`TextCursor::take`]) does the tag, fields and window loads *before*
//! the claim, for the value a plain load of `state` just saw (what the claim returns unless
//! another take comes first), and the fence and second tag load after it; if the claim
//! returns another value the read is done again for it. A seqlock read is valid whenever it is
//! made (it does not depend on the claim); the claim only says which ticket is this take's.
//! (`state` returns to a value it had only after 2^24 installs.) Otherwise the slot was reused (the reader stalled across `SLOTS` installs): `Stale`,
//! and **nothing of the copy is used** (the supply recovers the text from its own copy of the
//! batch under its lock, or counts the ticket as discarded: a gap). Only a window that passed
//! the check becomes a [`FormattedId`](crate::FormattedId) (its invariant: `raw[0]` in 1..=127
//! and `raw[1..=raw[0]]` the UTF-8 of one `&str`).
//!
//! The supply's hot path is [`TextCursor::take_head`]: the same claim, predicted the same way,
//! but the seqlock read is of the line's fields and of the entry's head only (its first 32
//! bytes, two 16-byte loads: the whole entry of a text of up to 31 bytes), checked twice
//! against the line's tag (`TextCursor::head_at`), and everything else (a batch with a longer
//! text, a ticket past the batch, an ended batch, a failed check, a mispredicted claim) is
//! left to [`TextCursor::read`] for the same claim.
//!
//! # Why no text is handed out twice
//!
//! Every `fetch_add` on `state` returns a distinct value (one modification order of one
//! atomic), so no two takes own the same `(generation, ticket)`. A generation's slot is
//! written once, before the generation is published, and overwritten only for generation `g +
//! SLOTS`, under another tag; the seqlock makes a reader that raced with the overwrite see a
//! tag mismatch instead of a torn window. Each generation is one batch's texts, installed once
//! (the supply moves each batch from `next` to `current` once, under its lock), and its valid
//! tickets map one to one onto its texts, so distinct valid tickets are distinct texts.
//!
//! # Why a call that starts after another returned gets a larger text
//!
//! A take's text is decided by its `fetch_add` (its linearization point): if call A returned
//! before call B started, A's `fetch_add` happens-before B's, so B's comes later in `state`'s
//! modification order. Same generation: B's ticket is larger, so its index is, and a batch's
//! texts are installed in received order (increasing, for an ordered tag). Later generation:
//! B's batch was installed after A's, and the supply installs batches in the order it accepted
//! them, each above the floor of when it was accepted. A stale take gets its own ticket's text
//! from the supply (the same answer, decided by the same `fetch_add`) or counts the ticket as
//! lost and takes a later one: either way ordered after every call that returned before it
//! started.
//!
//! # Orderings
//!
//! - `install`: line tag and slot tag := `WRITING` (Relaxed), `fence(Release)`, the buffer (a new
//!   one is published with a Release store of its pointer, so its length word and zeroed words are
//!   seen by whoever loads the pointer with Acquire), the words and the slot's fields (Relaxed),
//!   slot tag := `g` (Release), the line's fields (Relaxed, its pointer Release), line tag := `g`
//!   (Release), then `state.swap(.., AcqRel)`. The fence keeps every later store of the write after
//!   the `WRITING` mark for a reader that reads one of them and then fences (fence-fence
//!   synchronisation): its second tag load sees `WRITING` or a later tag. The Release on `state`
//!   publishes the slot with the generation; readers' `fetch_add`s continue its release sequence.
//! - `take`: as above. On x86 the Acquire parts cost nothing beyond the `lock xadd` itself;
//!   the rest is plain loads from one line of the slot and two or three of the buffer. The
//!   fast take (`head_at`): line tag (Acquire), the line's fields (Relaxed, the pointer
//!   Acquire), `fence(Acquire)`, line tag again (Relaxed), and only if both are the claimed
//!   generation, the head (Relaxed), `fence(Acquire)`, line tag a third time: a head load that
//!   read a later install's write makes that load see `WRITING` or a later tag (fence-fence
//!   synchronisation with the install's first fence). The
//!   window is read by a [`WindowSink`], two words at a time: the supply's (`IdWindow`,
//!   `text.rs`) reads each pair with one 16-byte load on x86-64 (inline assembly: Rust has no
//!   16-byte atomic load, and pairing two 8-byte loads in a register cost more than the rest of
//!   the path), elsewhere and in the models with two Relaxed loads.
//!
//! # Memory, and why nothing is freed under a reader
//!
//! A buffer, once published in a slot, is never freed while the cursor lives: a slot's buffer
//! is overwritten in place when its slot is reused, and when a batch needs more words than the
//! slot's buffer holds, the slot gets a new one of at least twice the words and the old one is
//! *retired* (kept in `buffers`, freed only by `Drop`). So a reader holding a stale pointer
//! reads live memory (atomics, never a data race) and its tag check fails. **Bound**: a slot's
//! live buffer is at most twice the largest batch installed in it (in words, i.e. its entries
//! rounded up to 8 bytes, or 32 bytes each when every text has at most 31, 4 bytes of offset
//! per text, 128 bytes of padding), and its retired buffers, each at most half the next, sum
//! to less than the live one: in all below `SLOTS x 4 x` the largest batch's bytes so laid out
//! (`SLOTS` = 2: with 100,000 texts of 20 to 31 bytes, about 29 MB at the very worst, 3.6 MB
//! per slot for such a batch once grown). The empty buffers `new` gives each slot are 19
//! words.
//!
//! # The period rule
//!
//! Each batch has a number (1, 2, ..., in acceptance order); its slot carries it. A batch's
//! timer ends it with [`Ender::end`]: `ended.fetch_max(number, Release)` on one word; a take,
//! after its claim and check, loads that word (Acquire) and a value `>= number` makes it
//! `Ended` (the supply counts the ticket as discarded and drops the batch). A timer of batch
//! `b` only ever raises the word to `b`, so it never ends a later batch `b' > b`, in a reused
//! slot or not; it ends every earlier one, which is long gone or, if the tag's format changed
//! to a shorter period in between (a later batch whose period ends first), ended early: ending
//! early is always safe (texts discarded, none handed out twice). Bound: no text is handed out
//! by a take whose check comes after the timer's store is visible, i.e. at most the timer's
//! latency after `period_end` (`formatted.rs`), as with the lock.
//!
//! Tickets of failed takes keep counting past `LIMIT`; 2^39 of them within one generation
//! cannot happen before its switch. Generations wrap at 2^24: a reader would have to sleep
//! across 16 million installs to be confused.
//!
//! Atomics come from `crate::sync` and nothing here is async, so the loom crate (`loom/`)
//! compiles this file unchanged (with a window of 2 words, `WINDOW`) and model-checks it
//! (`loom_tests` below).

use std::sync::Mutex;

use crate::sync::{Arc, AtomicPtr, AtomicU64, Ordering, fence};

/// Slots of recent batches: a reader descheduled across this many installs finds its slot
/// reused (`Stale`). Two keep the memory bound small; one install is one whole batch.
pub(crate) const SLOTS: usize = 2;
const TICKET_BITS: u32 = 40;
const TICKET_MASK: u64 = (1 << TICKET_BITS) - 1;
/// Tickets below it are valid: a batch of `n` texts starts at `LIMIT - n`.
pub(crate) const LIMIT: u64 = 1 << (TICKET_BITS - 1);
const GEN_MASK: u64 = (1 << (64 - TICKET_BITS)) - 1;
/// The tag of a slot being written (no generation has it: generations are below 2^24).
const WRITING: u64 = u64::MAX;
/// Set in the line's tag (`Line`) for a batch the fast take does not serve (a text longer
/// than 31 bytes): the tag is then never equal to a generation, which is all the fast take
/// compares.
const SLOW: u64 = 1 << 62;
/// The words of one window: 16 (128 bytes, one `FormattedId`); 2 under loom, so that a model
/// explores few loads.
pub(crate) const WINDOW: usize = if cfg!(loom) { 2 } else { 16 };
/// The bytes of one window: an entry is its length byte and at most `BYTES - 1` bytes.
pub(crate) const BYTES: usize = WINDOW * 8;
/// The `preload` of a batch that starts no refill.
const NO_PRELOAD: u64 = u64::MAX;

/// The words of one window, as a take copies them (in memory order: its bytes are the words'
/// native-endian bytes in turn, as `install` packed them).
pub(crate) type Window = [u64; WINDOW];

/// Where a take copies its window: the window's words in pairs, `put(k, pair)` with `pair`
/// the buffer's words `2k` and `2k + 1` of the window, for `k` in `0..WINDOW / 2`, in order.
/// A sink must only read `pair`, as Relaxed atomic loads of its two words (or an equivalent:
/// the supply's `IdWindow` loads both with one 16-byte load on x86-64, see `text.rs`); the
/// seqlock check after the copy says whether what it read may be used.
pub(crate) trait WindowSink {
    /// Reads words `2k` and `2k + 1` of the window from `pair`; called for `k` in
    /// `0..HEAD_PAIRS`, then, if [`wants_rest`](Self::wants_rest) says so, for every other `k`
    /// below `WINDOW / 2`, in order, before a take answers `Text` or `Preload`.
    fn put(&mut self, k: usize, pair: &[AtomicU64; 2]);

    /// After the head was put: whether the rest of the window is wanted too (the entry is
    /// longer than the head). A sink that answers `false` must not use the rest.
    fn wants_rest(&self) -> bool {
        true
    }
}

/// The pairs of a window read first, its *head*: 32 bytes, the whole of an entry of up to 31
/// bytes of text (an inline `FormattedId`, `text.rs`).
pub(crate) const HEAD_PAIRS: usize = 2;
/// The words of a head.
const HEAD_WORDS: usize = HEAD_PAIRS * 2;
/// The fewest words of a buffer: its length, an offset word, an entry and `WINDOW` words of
/// padding (`install`), or the empty buffer a slot holds before its first install; more than a
/// head's.
const MIN_WORDS: usize = 1 + 1 + 1 + WINDOW;
const _: () = assert!(MIN_WORDS > HEAD_WORDS);

impl WindowSink for Window {
    #[inline(always)]
    fn put(&mut self, k: usize, pair: &[AtomicU64; 2]) {
        if let Some(dst) = self.get_mut(2 * k..2 * k + 2) {
            dst[0] = pair[0].load(Ordering::Relaxed);
            dst[1] = pair[1].load(Ordering::Relaxed);
        }
    }
}

/// 16 bytes of a window, as one register where there is one: `__m128i` on x86-64, two words
/// elsewhere and under loom.
#[cfg(all(target_arch = "x86_64", not(loom)))]
pub(crate) type Piece = std::arch::x86_64::__m128i;
/// 16 bytes of a window, as one register where there is one: `__m128i` on x86-64, two words
/// elsewhere and under loom.
#[cfg(not(all(target_arch = "x86_64", not(loom))))]
pub(crate) type Piece = [u64; 2];

/// The head of an entry's window as [`TextCursor::take_head`] read it: 32 bytes in memory
/// order, byte 0 the entry's length (the rest whatever followed), kept as two 16-byte pieces
/// so that it is never split into bytes on its way to the caller.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub(crate) struct Head(pub(crate) [Piece; HEAD_PAIRS]);

impl Head {
    /// Byte 0: the entry's text length.
    #[inline(always)]
    pub(crate) fn len(&self) -> u8 {
        #[cfg(all(target_arch = "x86_64", not(loom)))]
        {
            // SAFETY: SSE2 is in x86-64's baseline.
            (unsafe { std::arch::x86_64::_mm_cvtsi128_si32(self.0[0]) }) as u8
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom))))]
        {
            self.0[0][0].to_ne_bytes()[0]
        }
    }
}

/// What [`TextCursor::take_head`] got.
#[derive(Clone, Copy)]
pub(crate) enum Fast {
    /// A text of up to 31 bytes of the installed batch: its whole entry.
    Text(Head),
    /// The same, and this take is the batch's preload point: start the refill.
    Preload(Head),
    /// Anything else: the take that claimed state value `s` is finished by
    /// [`TextCursor::read`].
    Other(u64),
}

/// The head's two pieces from the two word pairs at word `off` of the buffer at `words`, in
/// memory order: on x86-64 two 16-byte loads in one assembly block (Rust has no 16-byte
/// atomic load; the assembly is opaque to the compiler, so no data race in Rust's model, and
/// x86-64 reads each aligned word as a Relaxed load of it would; a torn read is possible and
/// harmless, the seqlock check rejects it), elsewhere and under loom Relaxed loads.
///
/// # Safety
///
/// Words `off .. off + HEAD_WORDS` are within the live buffer at `words`.
#[inline(always)]
unsafe fn load_head(words: *const AtomicU64, off: usize) -> Head {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    {
        let (a, b): (Piece, Piece);
        // SAFETY: the caller's promise: two live, 8-byte aligned pairs of `AtomicU64` (32
        // bytes) at word `off`: the asm reads exactly those (no write, no stack, flags kept);
        // SSE2 is in x86-64's baseline.
        unsafe {
            std::arch::asm!(
                "movdqu {a}, xmmword ptr [{p} + {i} * 8]",
                "movdqu {b}, xmmword ptr [{p} + {i} * 8 + 16]",
                p = in(reg) words,
                i = in(reg) off,
                a = out(xmm_reg) a,
                b = out(xmm_reg) b,
                options(nostack, preserves_flags, readonly)
            );
        }
        Head([a, b])
    }
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    {
        // SAFETY: the caller's promise.
        let src = unsafe { std::slice::from_raw_parts(words.add(off), HEAD_WORDS) };
        let word = |k: usize| src[k].load(Ordering::Relaxed);
        Head([[word(0), word(1)], [word(2), word(3)]])
    }
}

/// What one take got. The window itself goes to the caller's [`WindowSink`] (no copy of it
/// through this enum: a window moved through a byte array at an odd offset cost more than
/// the rest of the path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// The window of a text of the installed batch is in the caller's [`Window`]: byte `0` its
    /// length `len` (1 to `BYTES - 1`), bytes `1..=len` the bytes of the `&str` installed, the
    /// rest whatever followed.
    Text,
    /// The same, and this take is the batch's preload point: start the refill.
    Preload,
    /// No batch installed, or its texts are all taken.
    Spent,
    /// A valid ticket whose batch has ended (the period rule): nothing handed out.
    Ended,
    /// Valid ticket `ticket` of generation `generation`, but its slot was reused before it was
    /// read: nothing of the copy is used (the supply answers, see the module doc).
    Stale {
        /// The generation the take belongs to.
        generation: u64,
        /// The ticket it owns (below `LIMIT`).
        ticket: u64,
    },
}

/// The ended batch numbers, shared with the batches' deadline timers.
#[derive(Debug)]
pub(crate) struct EndedBatches {
    /// The highest batch number ended: every batch up to it is.
    word: AtomicU64,
}

impl EndedBatches {
    #[inline]
    fn has_ended(&self, batch: u64) -> bool {
        self.word.load(Ordering::Acquire) >= batch
    }
}

/// What a deadline timer holds to end one batch (no text, no slot).
#[derive(Debug, Clone)]
pub(crate) struct Ender {
    ended: Arc<EndedBatches>,
    batch: u64,
}

impl Ender {
    /// Ends the batch (and every earlier one): every take of them that checks after this is
    /// `Ended`. Never ends a later batch.
    pub(crate) fn end(&self) {
        self.ended.word.fetch_max(self.batch, Ordering::Release);
    }
}

/// One installed batch, under a seqlock (the whole read's: the fast take reads the state's
/// line, `Line`). 64-byte aligned: a take reads one line of it.
#[derive(Debug)]
#[repr(align(64))]
struct Slot {
    /// The generation whose batch this is, or `WRITING`.
    tag: AtomicU64,
    /// The batch's number (the period rule).
    batch: AtomicU64,
    /// The state value (generation and ticket) whose take starts the refill, or
    /// `NO_PRELOAD`.
    preload: AtomicU64,
    /// The buffer (the module doc's layout); before the first install an empty one
    /// (`TextCursor::new`), never null.
    words: AtomicPtr<AtomicU64>,
    /// `LIMIT - n`: ticket `t` is text `t - first`.
    first: AtomicU64,
    /// The word where the entries start (after the offsets), in the low 32 bits; above them,
    /// the words per entry if every entry of the batch has the same (`HEAD_WORDS` for a batch
    /// the fast take serves, else the usual case: one format's texts have one length), so
    /// text `i` is at `entries_at + i * stride` with no look-up of its offset, else 0 (the
    /// offsets are read).
    layout: AtomicU64,
}

/// A slot's fields as one take loaded them (meaningful only if the tag check passes).
#[derive(Clone, Copy)]
struct Fields {
    first: u64,
    batch: u64,
    preload: u64,
    ptr: *const AtomicU64,
    entries_at: u64,
    stride: u64,
}

impl Slot {
    /// The fields (the seqlock's data loads: Relaxed, the pointer with Acquire for its
    /// buffer's initialisation).
    #[inline(always)]
    fn fields(&self) -> Fields {
        let layout = self.layout.load(Ordering::Relaxed);
        Fields {
            first: self.first.load(Ordering::Relaxed),
            batch: self.batch.load(Ordering::Relaxed),
            preload: self.preload.load(Ordering::Relaxed),
            ptr: self.words.load(Ordering::Acquire).cast_const(),
            entries_at: layout & u64::from(u32::MAX),
            stride: layout >> 32,
        }
    }
}

/// The fields the fast take needs, as it loaded them (meaningful only if the tag check
/// passes).
#[derive(Clone, Copy)]
struct FastFields {
    batch: u64,
    preload: u64,
    bound: u64,
    ptr: *const AtomicU64,
    base: u64,
}

/// A buffer allocated by `install`, freed only by `Drop` (see the module doc).
struct Owned(*mut [AtomicU64]);

// SAFETY: the pointer is an owned `Box<[AtomicU64]>` (from `Box::into_raw`), only freed in
// `TextCursor::drop`; the words are atomics, shared between threads by design.
unsafe impl Send for Owned {}

/// The state word and, beside it in one line, the fast take's fields of the batch in use,
/// under a seqlock of their own (`tag`): the fast take loads them with the state, none of
/// them waiting for another (measured: fields chosen by the state's generation, a load that
/// waits for the state's, were 7% slower).
#[derive(Debug)]
#[repr(C, align(128))]
struct Line {
    /// `(generation << 40) | ticket`.
    state: AtomicU64,
    /// The generation these fields describe, with `SLOW` set if the fast take does not serve
    /// its batch, or `WRITING` (from the start of every install to its end).
    tag: AtomicU64,
    /// The batch's number (the period rule).
    batch: AtomicU64,
    /// The state value (generation and ticket) whose take starts the refill, or
    /// `NO_PRELOAD`.
    preload: AtomicU64,
    /// The batch's buffer (its slot's).
    words: AtomicPtr<AtomicU64>,
    /// `entries_at - (generation << 40 | first) * HEAD_WORDS` (wrapping): for a batch the
    /// fast take serves (every text at most 31 bytes, so every entry is laid out `HEAD_WORDS`
    /// words apart), the entry of the take that claimed state value `s` is at word `s *
    /// HEAD_WORDS + base`: one `lea`, no multiply and no stride to load.
    base: AtomicU64,
    /// The word of the batch's last entry: a head at a word up to it is within the buffer
    /// (the padding follows the last entry), and every ticket past the batch's last (`LIMIT`
    /// and above: spent) lies past it. The fast take's one compare.
    bound: AtomicU64,
}

impl Line {
    /// The fast take's fields (the seqlock's data loads: Relaxed, the pointer with Acquire
    /// for its buffer's initialisation).
    #[inline(always)]
    fn fast_fields(&self) -> FastFields {
        FastFields {
            batch: self.batch.load(Ordering::Relaxed),
            preload: self.preload.load(Ordering::Relaxed),
            ptr: self.words.load(Ordering::Acquire).cast_const(),
            base: self.base.load(Ordering::Relaxed),
            bound: self.bound.load(Ordering::Relaxed),
        }
    }
}

/// The batch in use and the one before it.
pub(crate) struct TextCursor {
    /// `(generation << 40) | ticket`.
    line: Line,
    slots: [Slot; SLOTS],
    ended: Arc<EndedBatches>,
    /// Every buffer ever published (live and retired): freed on drop only. Written only by
    /// `install` (one writer: the supply's lock).
    buffers: Mutex<Vec<Owned>>,
}

impl std::fmt::Debug for TextCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TextCursor")
            .field("state", &self.line.state)
            .finish_non_exhaustive()
    }
}

impl Drop for TextCursor {
    fn drop(&mut self) {
        let buffers = self.buffers.get_mut().unwrap_or_else(|e| e.into_inner());
        for b in buffers.drain(..) {
            // SAFETY: each pointer came from `Box::into_raw` once and is freed once, here, when
            // no reader can exist any more (`&mut self`).
            drop(unsafe { Box::from_raw(b.0) });
        }
    }
}

/// A zeroed buffer of `len` words (at least `MIN_WORDS`), its word 0 its length, kept in
/// `buffers` until the cursor is dropped.
fn allocate(len: usize, buffers: &mut Vec<Owned>) -> *mut AtomicU64 {
    debug_assert!(len >= MIN_WORDS);
    let fresh: Box<[AtomicU64]> = (0..len).map(|_| AtomicU64::new(0)).collect();
    fresh[0].store(len as u64, Ordering::Relaxed);
    let raw = Box::into_raw(fresh);
    buffers.push(Owned(raw));
    raw.cast::<AtomicU64>()
}

/// Words of an entry of `len` bytes (its length byte included).
fn entry_words(len: usize) -> usize {
    len.div_ceil(8)
}

/// Copies the window of text `index` in the buffer at `ptr` into `out`; `None` where a torn
/// read points outside the buffer (only a torn read can: the caller's tag check then fails
/// anyway).
#[inline(always)]
fn read_window<S: WindowSink>(f: &Fields, index: u64, out: &mut S) -> Option<()> {
    let ptr = f.ptr;
    // SAFETY: a slot's pointer is never null: a buffer `install` or `new` allocated, published with
    // Release after its length word was written (loaded here after an Acquire load of the
    // pointer), and never freed while the cursor lives (`buffers`, freed only by `Drop`);
    // `words[0]` is that buffer's length in words, never written again.
    let len = unsafe { (*ptr).load(Ordering::Relaxed) } as usize;
    // SAFETY: as above: `ptr` is the start of a live allocation of `len` `AtomicU64`s.
    let words = unsafe { std::slice::from_raw_parts(ptr, len) };
    let off = if f.stride != 0 {
        usize::try_from(index.checked_mul(f.stride)?.checked_add(f.entries_at)?).ok()?
    } else {
        let at = usize::try_from(index >> 1).ok()?.checked_add(1)?;
        let pair = words.get(at)?.load(Ordering::Relaxed);
        (pair >> ((index & 1) * 32)) as u32 as usize
    };
    let src = words.get(off..off.checked_add(WINDOW)?)?;
    // WINDOW is even: exactly WINDOW / 2 pairs. The head first; the rest only for an entry
    // longer than it (the sink says, from the length byte it just read).
    let pairs = src.as_chunks::<2>().0;
    let (head, rest) = pairs.split_at(HEAD_PAIRS.min(pairs.len()));
    for (k, pair) in head.iter().enumerate() {
        out.put(k, pair);
    }
    if out.wants_rest() {
        for (k, pair) in rest.iter().enumerate() {
            out.put(HEAD_PAIRS + k, pair);
        }
    }
    Some(())
}

impl TextCursor {
    /// A cursor with no batch: every take is `Spent` until the first `install`.
    pub(crate) fn new() -> Self {
        let mut buffers = Vec::with_capacity(SLOTS);
        Self {
            line: Line {
                state: AtomicU64::new(LIMIT),
                tag: AtomicU64::new(WRITING),
                batch: AtomicU64::new(0),
                preload: AtomicU64::new(NO_PRELOAD),
                words: AtomicPtr::new(std::ptr::null_mut()),
                base: AtomicU64::new(0),
                bound: AtomicU64::new(0),
            },
            // Each slot its own empty buffer (a slot's buffer is written in place by its
            // installs: two slots never share one).
            slots: std::array::from_fn(|_| Slot {
                tag: AtomicU64::new(WRITING),
                batch: AtomicU64::new(0),
                preload: AtomicU64::new(NO_PRELOAD),
                words: AtomicPtr::new(allocate(MIN_WORDS, &mut buffers)),
                first: AtomicU64::new(0),
                layout: AtomicU64::new(0),
            }),
            ended: Arc::new(EndedBatches {
                word: AtomicU64::new(0),
            }),
            buffers: Mutex::new(buffers),
        }
    }

    /// The hot path: one `fetch_add`, one compare, a seqlock read of one slot and one window
    /// (into `out`; meaningful only for `Text` and `Preload`).
    #[inline]
    pub(crate) fn take<S: WindowSink>(&self, out: &mut S) -> Take {
        self.take_traced(out).0
    }

    /// [`take`](Self::take), and the state value its `fetch_add` returned (the models check
    /// the text against its generation).
    ///
    /// The claim is predicted: a plain load of `state` says which ticket the `fetch_add` will
    /// return unless another take comes first, and that ticket's slot fields and window are
    /// read *before* the claim, so the loads no longer wait for the locked instruction and
    /// the window's address for its result (measured: 0.22x of the numeric path with the
    /// reads after the claim). The seqlock is unchanged: tag (Acquire), fields, window,
    /// (the claim), fence, tag again; a read that passes it is generation `tag`'s write, whenever
    /// it was made. The claim decides: if it returned another value than the one seen (another
    /// take came first), the slot is read again for the ticket it did return ([`read`]).
    ///
    /// [`read`]: Self::read
    #[inline(always)]
    pub(crate) fn take_traced<S: WindowSink>(&self, out: &mut S) -> (Take, u64) {
        let seen = self.line.state.load(Ordering::Relaxed);
        let slot = &self.slots[(seen >> TICKET_BITS) as usize % SLOTS];
        let tag = slot.tag.load(Ordering::Acquire);
        let fields = slot.fields();
        let ticket = seen & TICKET_MASK;
        let copied = ticket < LIMIT
            && read_window(&fields, ticket.wrapping_sub(fields.first), out).is_some();
        let s = self.line.state.fetch_add(1, Ordering::Acquire);
        if s != seen {
            return (self.read(s, out), s);
        }
        (self.check(s, slot, tag, &fields, copied.then_some(())), s)
    }

    /// The hot path of the supply (`formatted.rs`): one `fetch_add` and a seqlock read of the
    /// claimed text's *head* only (two word pairs, 32 bytes, kept in registers), which is the
    /// whole entry of a text of up to 31 bytes. Anything else (no valid ticket, a torn or
    /// stale read, an ended batch, a batch with a longer text) is `Other(s)`, and the caller
    /// finishes the take with [`read`](Self::read)`(s, ..)`: a seqlock read is valid
    /// whenever it is made (the claim `s` alone says which ticket is this take's), so reading
    /// again for the same `s` answers as a take that read once, later.
    #[inline(always)]
    pub(crate) fn take_head(&self) -> Fast {
        self.take_head_traced().0
    }

    /// [`take_head`](Self::take_head), and the state value its `fetch_add` returned (the
    /// models check the text against its generation).
    ///
    /// The claim is predicted, as in [`take_traced`](Self::take_traced): the whole seqlock
    /// read (tag, fields, head, fence, tag again: [`head_at`](Self::head_at)) is made for the
    /// ticket a plain load of `state` saw, *before* the `fetch_add`, so none of its loads
    /// waits for the locked instruction. A read that passes the seqlock is generation `tag`'s
    /// write whenever it was made, and the claim says whose it is: if the `fetch_add` returns
    /// the value seen, the head read is this take's; if it returns another (another take came
    /// first), or the prediction got no head, the claim is finished out of line for the value
    /// it did return. After the claim only the period rule's load and the preload compare.
    #[inline(always)]
    pub(crate) fn take_head_traced(&self) -> (Fast, u64) {
        let seen = self.line.state.load(Ordering::Relaxed);
        let Some((head, f)) = self.head_at(seen) else {
            // No head for the ticket seen (none valid, a batch the fast take does not serve, a
            // slot being written): the claim and whatever it got, out of line.
            let s = self.line.state.fetch_add(1, Ordering::Acquire);
            return (self.head_of_claimed(s), s);
        };
        // The ended word's address too, so that after the claim the ended check is one load.
        let ended: &EndedBatches = &self.ended;
        let s = self.line.state.fetch_add(1, Ordering::Acquire);
        if s != seen {
            return (self.head_of_claimed(s), s);
        }
        (Self::hand_out(s, head, &f, ended), s)
    }

    /// [`head_of`](Self::head_of) out of line: the read after a mispredicted claim (another
    /// take came first) or a claim whose prediction read no head, kept off the hot path's
    /// code.
    #[cold]
    #[inline(never)]
    fn head_of_claimed(&self, s: u64) -> Fast {
        self.head_of(s)
    }

    /// The fast read for the take that claimed `s`, made after the claim.
    #[inline(always)]
    fn head_of(&self, s: u64) -> Fast {
        match self.head_at(s) {
            Some((head, f)) => Self::hand_out(s, head, &f, &self.ended),
            None => Fast::Other(s),
        }
    }

    /// The seqlock read of the head of state value `at`'s entry, from the fields in the state's
    /// line (`Line`): the head and the fields if `at` is a valid ticket of the batch they
    /// describe, a batch the fast take serves; else `None`. It reads, it claims nothing.
    ///
    /// Two checks of the line's tag. The first (tag, fields, fence, tag again, both exactly
    /// `at`'s generation: no `SLOW`, not `WRITING`) says the fields are the ones `install`
    /// wrote for that generation, so the pointer is its live buffer and `bound` within it:
    /// only then is the head loaded (a torn pointer is never followed). The second (fence,
    /// tag a third time) says no later install had begun when the head was loaded: every
    /// install marks the line `WRITING` (and fences) before it writes any buffer, and the
    /// buffer of generation `g` is written again only by the install of `g + SLOTS`, so the
    /// head is the entry `install` wrote for `at`, a whole one (every entry of such a batch
    /// is at most a head, a text of at most 31 bytes: no length check).
    #[inline(always)]
    fn head_at(&self, at: u64) -> Option<(Head, FastFields)> {
        let line = &self.line;
        let generation = at >> TICKET_BITS;
        let tag = line.tag.load(Ordering::Acquire);
        let f = line.fast_fields();
        fence(Ordering::Acquire);
        let again = line.tag.load(Ordering::Relaxed);
        if tag != generation || again != generation {
            return None;
        }
        // Wrapping: a valid claim's ticket is below 2^40 (the module doc), so this does not
        // wrap for one; the entries of tickets `LIMIT..` lie past the last entry, `bound`.
        let off = at.wrapping_mul(HEAD_WORDS as u64).wrapping_add(f.base);
        if off > f.bound {
            return None;
        }
        // The safety condition below, checked where it can be (tests and models): a torn
        // pointer and bound would fail it.
        #[cfg(any(debug_assertions, loom))]
        // SAFETY: a line's pointer is a live buffer once its tag is a generation.
        assert!(off as usize + HEAD_WORDS <= unsafe { (*f.ptr).load(Ordering::Relaxed) } as usize);
        // SAFETY: the fields are generation `tag`'s (the check above): `ptr` its live buffer
        // (never freed while the cursor lives), and a head at a word up to `bound` is within
        // it.
        let head = unsafe { load_head(f.ptr, off as usize) };
        fence(Ordering::Acquire);
        if line.tag.load(Ordering::Relaxed) != generation {
            return None;
        }
        debug_assert!(usize::from(head.len()) < HEAD_WORDS * 8);
        Some((head, f))
    }

    /// The end of a fast take that claimed `s`, whose seqlock read (`head_at(s)`) got `head`
    /// and the fields `f`: the period rule, after the claim (Acquire: a timer's end is seen),
    /// and the preload.
    #[inline(always)]
    fn hand_out(s: u64, head: Head, f: &FastFields, ended: &EndedBatches) -> Fast {
        if ended.has_ended(f.batch) {
            Fast::Other(s)
        } else if s == f.preload {
            Fast::Preload(head)
        } else {
            Fast::Text(head)
        }
    }

    /// A take's claim alone (tests: a reader that stalls before its read).
    #[cfg(any(test, loom))]
    pub(crate) fn claim(&self) -> u64 {
        self.line.state.fetch_add(1, Ordering::Acquire)
    }

    /// The take that claimed state value `s` (its `fetch_add`'s result): the seqlock read.
    #[inline(always)]
    pub(crate) fn read<S: WindowSink>(&self, s: u64, out: &mut S) -> Take {
        if s & TICKET_MASK >= LIMIT {
            return Take::Spent;
        }
        let slot = &self.slots[(s >> TICKET_BITS) as usize % SLOTS];
        let tag = slot.tag.load(Ordering::Acquire);
        let fields = slot.fields();
        self.finish(s, slot, tag, &fields, out)
    }

    /// The rest of a take that claimed `s`, its slot's `tag` and `f` loaded: the window, the
    /// fence, the tag again, the ended check.
    #[inline(always)]
    fn finish<S: WindowSink>(
        &self,
        s: u64,
        slot: &Slot,
        tag: u64,
        f: &Fields,
        out: &mut S,
    ) -> Take {
        let ticket = s & TICKET_MASK;
        if ticket >= LIMIT {
            return Take::Spent;
        }
        let copied = read_window(f, ticket.wrapping_sub(f.first), out);
        self.check(s, slot, tag, f, copied)
    }

    /// The end of a take that claimed `s` and copied its window (`copied`: `Some` if it was
    /// within the buffer) after loading its slot's `tag` and fields `f`: the fence, the tag
    /// again, the ended check.
    #[inline(always)]
    fn check(&self, s: u64, slot: &Slot, tag: u64, f: &Fields, copied: Option<()>) -> Take {
        let ticket = s & TICKET_MASK;
        if ticket >= LIMIT {
            return Take::Spent;
        }
        let generation = s >> TICKET_BITS;
        fence(Ordering::Acquire);
        let again = slot.tag.load(Ordering::Relaxed);
        match copied {
            // Both tags are this generation's: the fields and the window are the entry
            // `install` wrote for it.
            Some(()) if tag == generation && again == generation => {
                // The period rule, after the claim (Acquire: a timer's end is seen).
                if self.ended.has_ended(f.batch) {
                    Take::Ended
                } else if s == f.preload {
                    Take::Preload
                } else {
                    Take::Text
                }
            }
            _ => Take::Stale { generation, ticket },
        }
    }

    /// Tickets of the batch in use taken so far (at most `n`, its length).
    pub(crate) fn taken(&self, n: u64) -> u64 {
        let ticket = self.line.state.load(Ordering::Acquire) & TICKET_MASK;
        ticket.min(LIMIT).saturating_sub(LIMIT - n)
    }

    /// Whether batch `batch` has been ended (by its [`Ender`], or one of a later batch sharing
    /// its word: early, never late).
    pub(crate) fn has_ended(&self, batch: u64) -> bool {
        self.ended.has_ended(batch)
    }

    /// The handle that ends batch `batch` (for its deadline timer).
    pub(crate) fn ender(&self, batch: u64) -> Ender {
        Ender {
            ended: self.ended.clone(),
            batch,
        }
    }

    /// Ends the batch in use (of `n` texts): the next generation, with no valid ticket, is
    /// published, so every later take is `Spent` until an `install`. Returns the tickets of the
    /// ended batch that were taken (at most `n`), exactly: the swap is the last change of that
    /// generation's counter. Only under the supply's lock.
    pub(crate) fn retire(&self, n: u64) -> u64 {
        let current = self.line.state.load(Ordering::Relaxed) >> TICKET_BITS;
        let generation = (current + 1) & GEN_MASK;
        let old = self
            .line
            .state
            .swap((generation << TICKET_BITS) | LIMIT, Ordering::AcqRel);
        (old & TICKET_MASK).min(LIMIT).saturating_sub(LIMIT - n)
    }

    /// Installs `texts` (in the order they are to be handed out) as batch number `batch` (at
    /// least 1), the next generation; `preload`: the index whose take starts the refill.
    /// Returns the tickets taken of the batch it replaces (of `prev_n` texts), exactly (the
    /// swap is the last change of that generation's counter), or `None`, changing nothing, if
    /// there are no texts, more than `LIMIT`, or one is empty or longer than `BYTES - 1`
    /// bytes (a `TextList` never holds one). Only under the supply's lock (one writer).
    pub(crate) fn install<'a, I>(
        &self,
        texts: I,
        batch: u64,
        preload: Option<usize>,
        prev_n: u64,
    ) -> Option<u64>
    where
        I: Iterator<Item = &'a str> + Clone,
    {
        let (mut n, mut entries, mut longest) = (0usize, 0usize, 0usize);
        let mut stride = None;
        for t in texts.clone() {
            if t.is_empty() || t.len() >= BYTES {
                return None;
            }
            n += 1;
            let w = entry_words(t.len() + 1);
            entries += w;
            longest = longest.max(w);
            stride = match stride {
                None => Some(w),
                Some(s) if s == w => Some(w),
                Some(_) => Some(0),
            };
        }
        if n == 0 || n as u64 > LIMIT {
            return None;
        }
        // Every entry within a head (every text at most 31 bytes): the fast take's batch, its
        // entries `HEAD_WORDS` apart whatever their lengths.
        let fast = longest <= HEAD_WORDS;
        let stride = if fast {
            entries = n * HEAD_WORDS;
            HEAD_WORDS
        } else {
            stride.unwrap_or(0)
        };
        let offsets = n.div_ceil(2);
        let need = 1 + offsets + entries + WINDOW;
        // Word indexes are u32 (a batch of 100,000 texts is about 1.7 M words).
        if u32::try_from(need).is_err() {
            return None;
        }
        let current = self.line.state.load(Ordering::Relaxed) >> TICKET_BITS;
        let generation = (current + 1) & GEN_MASK;
        let slot = &self.slots[generation as usize % SLOTS];
        // The line first (the fast take's second check relies on it: `head_at`), then the
        // slot, each marked before anything of it is written.
        self.line.tag.store(WRITING, Ordering::Relaxed);
        slot.tag.store(WRITING, Ordering::Relaxed);
        fence(Ordering::Release);
        let mut ptr = slot.words.load(Ordering::Relaxed);
        // SAFETY: as in `read_window` (this thread wrote it, or published it before).
        let have = unsafe { (*ptr).load(Ordering::Relaxed) as usize };
        if have < need {
            let mut buffers = self.buffers.lock().unwrap_or_else(|e| e.into_inner());
            ptr = allocate(need.max(have * 2), &mut buffers);
            // Release: its length word and zeroed words are seen with the pointer.
            slot.words.store(ptr, Ordering::Release);
        }
        // SAFETY: `ptr` is this slot's buffer of at least `need` words (just checked or made),
        // never freed while `self` lives.
        let words = unsafe {
            std::slice::from_raw_parts(ptr.cast_const(), (*ptr).load(Ordering::Relaxed) as usize)
        };
        let mut at = 1 + offsets;
        let mut pair = 0u64;
        for (i, t) in texts.enumerate() {
            // at < need <= u32::MAX (checked above).
            pair |= (at as u64) << ((i & 1) * 32);
            if i & 1 == 1 {
                words[1 + i / 2].store(pair, Ordering::Relaxed);
                pair = 0;
            }
            // The entry: its length byte (1..BYTES: fits a u8, as BYTES <= 128), its bytes.
            let start = at;
            let mut chunk = [0u8; 8];
            chunk[0] = t.len() as u8;
            let mut fill = 1;
            for &b in t.as_bytes() {
                if fill == 8 {
                    words[at].store(u64::from_ne_bytes(chunk), Ordering::Relaxed);
                    at += 1;
                    chunk = [0; 8];
                    fill = 0;
                }
                chunk[fill] = b;
                fill += 1;
            }
            words[at].store(u64::from_ne_bytes(chunk), Ordering::Relaxed);
            at += 1;
            // The fast layout: each entry `HEAD_WORDS` words, the rest zero.
            while fast && at < start + HEAD_WORDS {
                words[at].store(0, Ordering::Relaxed);
                at += 1;
            }
        }
        if n & 1 == 1 {
            words[1 + n / 2].store(pair, Ordering::Relaxed);
        }
        // The padding: whatever an earlier batch left there is cleared.
        for w in &words[at..at + WINDOW] {
            w.store(0, Ordering::Relaxed);
        }
        let first = LIMIT - n as u64;
        let claims_from = (generation << TICKET_BITS) | first;
        slot.first.store(first, Ordering::Relaxed);
        let entries_at = 1 + offsets as u64;
        // entries_at < need <= u32::MAX (checked above); stride <= WINDOW.
        slot.layout
            .store(entries_at | ((stride as u64) << 32), Ordering::Relaxed);
        let preload = preload
            .filter(|&p| p < n)
            .map_or(NO_PRELOAD, |p| claims_from + p as u64);
        slot.batch.store(batch, Ordering::Relaxed);
        slot.preload.store(preload, Ordering::Relaxed);
        slot.tag.store(generation, Ordering::Release);
        // The line: the same batch for the fast take.
        let line = &self.line;
        line.batch.store(batch, Ordering::Relaxed);
        line.preload.store(preload, Ordering::Relaxed);
        // Release: the buffer's length word and zeroed words (a new one) are seen with it.
        line.words.store(ptr, Ordering::Release);
        line.base.store(
            entries_at.wrapping_sub(claims_from.wrapping_mul(HEAD_WORDS as u64)),
            Ordering::Relaxed,
        );
        // The last entry's word; its head is within the buffer (the padding, `WINDOW` words,
        // follows it). Never used for a batch the fast take does not serve (`SLOW`).
        let bound = if fast {
            entries_at + ((n - 1) * HEAD_WORDS) as u64
        } else {
            0
        };
        line.bound.store(bound, Ordering::Relaxed);
        let tag = if fast { generation } else { generation | SLOW };
        line.tag.store(tag, Ordering::Release);
        let old = self.line.state.swap(claims_from, Ordering::AcqRel);
        Some(
            (old & TICKET_MASK)
                .min(LIMIT)
                .saturating_sub(LIMIT - prev_n),
        )
    }

    /// The generation published now (the batch in use, or a retired one).
    pub(crate) fn generation(&self) -> u64 {
        self.line.state.load(Ordering::Acquire) >> TICKET_BITS
    }
}

/// The bytes of a window, in memory order. For tests and the models.
#[cfg(test)]
fn window_bytes(w: &Window) -> [u8; BYTES] {
    let mut raw = [0u8; BYTES];
    for (dst, w) in raw.chunks_exact_mut(8).zip(w) {
        dst.copy_from_slice(&w.to_ne_bytes());
    }
    raw
}

/// The text of a window: its length byte's bytes after it. For tests and the models.
#[cfg(test)]
pub(crate) fn text_of(w: &Window) -> String {
    let raw = window_bytes(w);
    std::str::from_utf8(&raw[1..=usize::from(raw[0])])
        .expect("a whole entry")
        .to_owned()
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// One take: its text, or what it got instead.
    fn take(c: &TextCursor) -> Result<String, Take> {
        let mut w = [0; WINDOW];
        match c.take(&mut w) {
            Take::Text | Take::Preload => Ok(text_of(&w)),
            other => Err(other),
        }
    }

    fn text(t: Result<String, Take>) -> String {
        t.unwrap_or_else(|other| panic!("not a text: {other:?}"))
    }

    #[test]
    fn a_batch_is_served_in_order_then_spent() {
        let c = TextCursor::new();
        assert_eq!(take(&c), Err(Take::Spent));
        let long = "é".repeat(63); // 126 bytes: the longest entry but one
        let texts = ["A-1", "A-22", long.as_str(), "B"];
        assert_eq!(c.install(texts.iter().copied(), 1, None, 0), Some(0));
        assert_eq!(c.generation(), 1);
        let got: Vec<String> = (0..4).map(|_| text(take(&c))).collect();
        assert_eq!(got, texts);
        assert_eq!(take(&c), Err(Take::Spent));
        assert_eq!(c.taken(4), 4);
        // The next batch (shorter: the buffer is reused in place, the old bytes cleared).
        assert_eq!(c.install(["C-1"].into_iter(), 2, None, 4), Some(4));
        assert_eq!(text(take(&c)), "C-1");
        assert_eq!(take(&c), Err(Take::Spent));
    }

    #[test]
    fn the_preload_ticket_is_the_one_take_at_its_index() {
        let c = TextCursor::new();
        let texts: Vec<String> = (0..20).map(|k| format!("T-{k:02}")).collect();
        c.install(texts.iter().map(String::as_str), 1, Some(2), 0);
        let mut w = [0; WINDOW];
        let mut got = Vec::new();
        let mut preloads = Vec::new();
        for i in 0..20 {
            match c.take(&mut w) {
                Take::Text => {}
                Take::Preload => preloads.push(i),
                other => panic!("{other:?}"),
            }
            got.push(text_of(&w));
        }
        assert_eq!(preloads, [2]);
        assert_eq!(got, texts);
    }

    #[test]
    fn bad_batches_are_refused_whole_and_nothing_changes() {
        let c = TextCursor::new();
        let long = "x".repeat(BYTES);
        for bad in [vec![], vec!["a", ""], vec!["a", long.as_str()]] {
            assert_eq!(c.install(bad.into_iter(), 1, None, 0), None);
            assert_eq!((c.generation(), take(&c)), (0, Err(Take::Spent)));
        }
        let max = "y".repeat(BYTES - 1);
        assert!(c.install([max.as_str()].into_iter(), 1, None, 0).is_some());
        assert_eq!(text(take(&c)), max);
    }

    #[test]
    fn a_retired_batch_is_spent_and_its_taken_tickets_counted() {
        let c = TextCursor::new();
        c.install(["a", "b", "c"].into_iter(), 1, None, 0);
        assert_eq!(text(take(&c)), "a");
        assert_eq!(c.retire(3), 1);
        assert_eq!([take(&c), take(&c)], [Err(Take::Spent), Err(Take::Spent)]);
        assert_eq!(c.install(["d"].into_iter(), 2, None, 0), Some(0));
        assert_eq!(text(take(&c)), "d");
    }

    /// A take of generation 1 that reads its slot only after `SLOTS` more installs: its slot
    /// now holds another batch (another tag), so it is `Stale` and gets nothing from the copy.
    #[test]
    fn a_valid_ticket_whose_slot_was_reused_is_reported_stale() {
        let c = TextCursor::new();
        c.install(["A-1", "A-2"].into_iter(), 1, None, 0);
        // The claim, then a stall across SLOTS installs before the slot is read.
        let s = c.line.state.fetch_add(1, Ordering::Acquire);
        let mut prev = 2;
        for k in 0..SLOTS as u64 {
            let t = format!("B-{k}");
            c.install([t.as_str()].into_iter(), 2 + k, None, prev);
            prev = 1;
        }
        let generation = s >> TICKET_BITS;
        let slot = &c.slots[generation as usize % SLOTS];
        let tag = slot.tag.load(Ordering::Acquire);
        assert_ne!(tag, generation, "the slot was reused");
        // What the reader would copy now is another batch's (or nothing): refused whole.
        assert_eq!(
            c.read(s, &mut [0; WINDOW]),
            Take::Stale {
                generation,
                ticket: s & TICKET_MASK
            }
        );
        // And through `take` itself: a reader whose generation's slot holds another tag.
        let c = TextCursor::new();
        c.install(["A-1"].into_iter(), 1, None, 0);
        c.slots[1].tag.store(99, Ordering::Release);
        assert_eq!(
            take(&c),
            Err(Take::Stale {
                generation: 1,
                ticket: LIMIT - 1
            })
        );
    }

    /// The timer of batch 1 fires after batch 3 (same slot) and batch 5 are installed:
    /// neither is ended by it; a batch's own timer ends it, and the earlier ones.
    #[test]
    fn a_timer_of_an_old_batch_does_not_end_a_newer_batch() {
        let c = TextCursor::new();
        let old = c.ender(1);
        c.install(["a-1", "a-2"].into_iter(), 1, None, 0);
        assert_eq!(text(take(&c)), "a-1");
        c.install(["b-1"].into_iter(), 2, None, 2);
        c.install(["c-1", "c-2"].into_iter(), 3, None, 1);
        assert_eq!(
            c.generation() as usize % SLOTS,
            1,
            "batch 3 reuses batch 1's slot"
        );
        old.end();
        assert_eq!(
            text(take(&c)),
            "c-1",
            "batch 3 is not ended by batch 1's timer"
        );
        let later = 5;
        c.install(["e-1", "e-2"].into_iter(), later, None, 2);
        old.end();
        assert_eq!(
            text(take(&c)),
            "e-1",
            "nor is a later batch in another slot"
        );
        c.ender(later).end();
        assert_eq!(take(&c), Err(Take::Ended));
        // And an ended batch ends the older ones (early: safe), not the newer.
        assert!(c.ended.has_ended(3));
        assert!(!c.ended.has_ended(later + 1));
    }

    /// Buffers grow (the old one retired, not freed) and shrink in place; every batch reads
    /// back whole.
    #[test]
    fn slots_grow_and_are_reused_with_every_text_whole() {
        let c = TextCursor::new();
        let mut prev = 0;
        for (b, n) in [3usize, 1, 500, 2, 40, 1000, 7].into_iter().enumerate() {
            let texts: Vec<String> = (0..n)
                .map(|k| format!("{b}-{}", "z".repeat(k % 120)))
                .collect();
            c.install(texts.iter().map(String::as_str), b as u64 + 1, None, prev)
                .unwrap();
            prev = n as u64;
            for t in &texts {
                assert_eq!(text(take(&c)), *t);
            }
            assert_eq!(take(&c), Err(Take::Spent));
        }
        assert!(
            c.buffers.lock().unwrap().len() >= 3,
            "grown buffers are kept"
        );
    }

    /// A head's text (its length byte's bytes after it).
    fn head_text(h: &Head) -> String {
        // SAFETY: two pieces are 32 plain bytes.
        let raw = unsafe { std::mem::transmute::<[Piece; HEAD_PAIRS], [u8; 32]>(h.0) };
        String::from_utf8(raw[1..=usize::from(raw[0])].to_vec()).expect("a whole entry")
    }

    /// One fast take, finished by `read` when it is `Other`: its text, or what it got.
    fn take_fast(c: &TextCursor) -> Result<(String, bool), Take> {
        match c.take_head() {
            Fast::Text(h) => Ok((head_text(&h), true)),
            Fast::Preload(h) => Ok((head_text(&h), true)),
            Fast::Other(s) => {
                let mut w = [0; WINDOW];
                match c.read(s, &mut w) {
                    Take::Text | Take::Preload => Ok((text_of(&w), false)),
                    other => Err(other),
                }
            }
        }
    }

    #[test]
    fn the_fast_take_hands_out_short_texts_whole_and_leaves_longer_ones_to_the_read() {
        // (texts, whether each goes out fast): short texts of one length, of several lengths
        // up to the inline edge (31 bytes: all laid out a head apart), texts past it (32,
        // long), and a batch with one long text (all read whole).
        let edge = "E".repeat(31);
        let past = "P".repeat(32);
        let long = format!("LONG-{}", "9".repeat(40));
        let cases: [(Vec<&str>, bool); 5] = [
            (vec!["A-1", "A-2", "A-3"], true),
            (vec![edge.as_str(), edge.as_str()], true),
            (vec!["A-1", "AB-0000000000022", edge.as_str(), "é"], true),
            (vec![past.as_str(), long.as_str()], false),
            (vec!["A-1", long.as_str(), edge.as_str(), "A-4"], false),
        ];
        let c = TextCursor::new();
        for (batch, (texts, fast)) in cases.iter().enumerate() {
            let prev = texts.len() as u64;
            c.install(texts.iter().copied(), batch as u64 + 1, None, prev)
                .unwrap();
            for t in texts {
                assert_eq!(take_fast(&c), Ok(((*t).to_owned(), *fast)), "batch {batch}");
            }
            assert_eq!(take_fast(&c), Err(Take::Spent));
        }
    }

    #[test]
    fn the_fast_take_marks_the_preload_and_refuses_an_ended_batch() {
        let c = TextCursor::new();
        c.install(["A-1", "A-2", "A-3"].into_iter(), 1, Some(1), 0)
            .unwrap();
        assert!(matches!(c.take_head(), Fast::Text(_)));
        assert!(matches!(c.take_head(), Fast::Preload(h) if head_text(&h) == "A-2"));
        c.ender(1).end();
        let Fast::Other(s) = c.take_head() else {
            panic!("an ended batch's text went out fast");
        };
        assert_eq!(c.read(s, &mut [0; WINDOW]), Take::Ended);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Run through the `loom/` crate (`WINDOW` is 2 words there: texts of up to 15 bytes).
    //! A reader takes a ticket of batch 1 while the writer installs batches 2 and 3, the last
    //! reusing batch 1's slot (`SLOTS` = 2) in place: the reader gets batch 1's text whole, or
    //! `Stale`, never a torn window (a text of batch 3, or a mix). Preemption bound 2, as the
    //! server's seqlock models (`LOOM_MAX_PREEMPTIONS` overrides it).

    use super::*;
    use crate::sync::thread;

    fn bounded(n: usize) -> loom::model::Builder {
        let mut b = loom::model::Builder::new();
        if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
            b.preemption_bound = Some(n);
        }
        b
    }

    /// A cursor with batch 1 (`ONE`) installed, and a thread installing batches 2 (`["m"]`)
    /// and 3 (`THREE`, reusing batch 1's slot).
    fn batch_one_and_a_writer_of_two_and_three() -> (Arc<TextCursor>, thread::JoinHandle<()>) {
        let c = Arc::new(TextCursor::new());
        c.install(ONE.into_iter(), 1, None, 0).unwrap();
        let writer = {
            let c = c.clone();
            thread::spawn(move || {
                c.install(["m"].into_iter(), 2, None, 2).unwrap();
                c.install(THREE.into_iter(), 3, None, 1).unwrap();
            })
        };
        (c, writer)
    }

    /// Batch 1's texts and batch 3's are the same lengths and differ in every byte, so a window
    /// mixing the two writes is not a text of either.
    const ONE: [&str; 2] = ["aaaaaaaaaaaa", "bbbbbbbbbbbb"];
    const THREE: [&str; 2] = ["XXXXXXXXXXXX", "YYYYYYYYYYYY"];

    #[test]
    fn a_reader_across_a_slot_reuse_gets_its_text_or_stale_never_torn() {
        assert_eq!(SLOTS, 2);
        bounded(2).check(|| {
            let c = Arc::new(TextCursor::new());
            c.install(ONE.into_iter(), 1, None, 0).unwrap();
            // The claim: ticket LIMIT - 2 of generation 1 (batch 1's first text).
            let s = c.line.state.fetch_add(1, Ordering::Acquire);
            let writer = {
                let c = c.clone();
                thread::spawn(move || {
                    c.install(["m"].into_iter(), 2, None, 2).unwrap();
                    c.install(THREE.into_iter(), 3, None, 1).unwrap();
                })
            };
            let mut w = [0; WINDOW];
            let got = c.read(s, &mut w);
            writer.join().unwrap();
            match got {
                Take::Text => assert_eq!(text_of(&w), ONE[0], "torn: {w:?}"),
                Take::Stale { generation, ticket } => {
                    assert_eq!((generation, ticket), (1, LIMIT - 2));
                }
                other => panic!("{other:?}"),
            }
        });
    }

    /// The fast take (`take_head`, a claim and a 32-byte read) against a writer installing
    /// batches 2 and 3, the last reusing batch 1's slot: a text it hands out is the whole text
    /// of the generation and ticket it claimed; anything else is left to `read`.
    #[test]
    fn a_fast_take_across_a_slot_reuse_gets_its_claimed_text_or_nothing() {
        bounded(2).check(|| {
            let (c, writer) = batch_one_and_a_writer_of_two_and_three();
            let (got, s) = c.take_head_traced();
            writer.join().unwrap();
            let texts: &[&str] = match s >> TICKET_BITS {
                1 => &ONE,
                2 => &["m"],
                _ => &THREE,
            };
            let index = (s & TICKET_MASK).wrapping_sub(LIMIT - texts.len() as u64) as usize;
            match got {
                Fast::Text(h) | Fast::Preload(h) => {
                    // SAFETY: two pieces are 32 plain bytes.
                    let raw = unsafe { std::mem::transmute::<[Piece; HEAD_PAIRS], [u8; 32]>(h.0) };
                    let text = std::str::from_utf8(&raw[1..=usize::from(raw[0])]).expect("whole");
                    assert_eq!(
                        Some(&text),
                        texts.get(index),
                        "torn or another ticket's: {raw:?}"
                    );
                }
                Fast::Other(_) => {}
            }
        });
    }

    /// The fast read made after its claim (`head_of`, the path of a mispredicted take)
    /// against a writer installing batches 2 and 3, the last rewriting batch 1's buffer: the
    /// line's fields can pass their check before the writer starts and the head be loaded
    /// while batch 3 is written, which only the line's third tag check refuses (without it
    /// this model hands out a torn head).
    #[test]
    fn a_fast_read_after_its_claim_across_a_slot_reuse_gets_its_text_or_nothing() {
        bounded(2).check(|| {
            let c = Arc::new(TextCursor::new());
            c.install(ONE.into_iter(), 1, None, 0).unwrap();
            let s = c.claim();
            let writer = {
                let c = c.clone();
                thread::spawn(move || {
                    c.install(["m"].into_iter(), 2, None, 2).unwrap();
                    c.install(THREE.into_iter(), 3, None, 1).unwrap();
                })
            };
            let got = c.head_of(s);
            writer.join().unwrap();
            match got {
                Fast::Text(h) | Fast::Preload(h) => {
                    // SAFETY: two pieces are 32 plain bytes.
                    let raw = unsafe { std::mem::transmute::<[Piece; HEAD_PAIRS], [u8; 32]>(h.0) };
                    assert_eq!(
                        &raw[1..=usize::from(raw[0])],
                        ONE[0].as_bytes(),
                        "torn: {raw:?}"
                    );
                }
                Fast::Other(other) => assert_eq!(other, s),
            }
        });
    }

    /// The fast read after its claim of batch 1's last text (the entry furthest into its
    /// buffer) against a writer installing batch 2, of one text, in a smaller buffer: the
    /// line's fields read while the writer rewrites them may pair batch 2's pointer with
    /// batch 1's bound, a head outside batch 2's buffer, which only the line's second tag
    /// check refuses before the head is loaded (without it this model fails the bound's
    /// assertion in `head_at`).
    #[test]
    fn a_fast_read_never_follows_a_pointer_and_bound_of_two_installs() {
        bounded(2).check(|| {
            let c = Arc::new(TextCursor::new());
            c.install(["a", "b", "c"].into_iter(), 1, None, 0).unwrap();
            c.claim();
            c.claim();
            let s = c.claim();
            let writer = {
                let c = c.clone();
                thread::spawn(move || {
                    c.install(["m"].into_iter(), 2, None, 3).unwrap();
                })
            };
            let got = c.head_of(s);
            writer.join().unwrap();
            match got {
                Fast::Text(h) | Fast::Preload(h) => {
                    // SAFETY: two pieces are 32 plain bytes.
                    let raw = unsafe { std::mem::transmute::<[Piece; HEAD_PAIRS], [u8; 32]>(h.0) };
                    assert_eq!(&raw[1..=usize::from(raw[0])], b"c", "torn: {raw:?}");
                }
                Fast::Other(other) => assert_eq!(other, s),
            }
        });
    }

    /// The same reader against a writer whose install grows the slot's buffer (a new
    /// pointer, the old buffer retired): a stale pointer reads live memory and is refused.
    #[test]
    fn a_reader_across_a_growing_install_gets_its_text_or_stale() {
        bounded(2).check(|| {
            let c = Arc::new(TextCursor::new());
            c.install(["a"].into_iter(), 1, None, 0).unwrap();
            let s = c.line.state.fetch_add(1, Ordering::Acquire);
            let writer = {
                let c = c.clone();
                thread::spawn(move || {
                    c.install(["m"].into_iter(), 2, None, 1).unwrap();
                    c.install(["XXXXXXXXXXXXXX", "Y", "Z"].into_iter(), 3, None, 1)
                        .unwrap();
                })
            };
            let mut w = [0; WINDOW];
            let got = c.read(s, &mut w);
            writer.join().unwrap();
            match got {
                Take::Text => assert_eq!(text_of(&w), "a", "torn: {w:?}"),
                Take::Stale { generation, .. } => assert_eq!(generation, 1),
                other => panic!("{other:?}"),
            }
        });
    }

    /// The whole take (`take`, whose reads come before its claim, predicted from a
    /// plain load of `state`) against a writer installing batches 2 and 3 (3 reusing batch 1's
    /// slot): whatever generation its claim lands in, a text it gets is that generation's
    /// first text, whole; otherwise `Stale`.
    #[test]
    fn a_predicted_take_across_a_slot_reuse_gets_its_claims_text_or_stale() {
        bounded(2).check(|| {
            let (c, writer) = batch_one_and_a_writer_of_two_and_three();
            let mut w = [0; WINDOW];
            let (got, s) = c.take_traced(&mut w);
            writer.join().unwrap();
            let generation = s >> TICKET_BITS;
            let want = match generation {
                1 => ONE[0],
                2 => "m",
                3 => THREE[0],
                other => panic!("generation {other}"),
            };
            match got {
                Take::Text => assert_eq!(text_of(&w), want, "claim {s:#x}: {w:?}"),
                Take::Stale { generation: g, .. } => assert_eq!(g, generation),
                other => panic!("{other:?}"),
            }
        });
    }

    /// A timer ending batch 1 while a reader takes: the reader's text is batch 1's, or `Ended`.
    #[test]
    fn a_take_racing_the_timer_is_whole_or_ended() {
        bounded(3).check(|| {
            let c = Arc::new(TextCursor::new());
            c.install(ONE.into_iter(), 1, None, 0).unwrap();
            let ender = c.ender(1);
            let timer = thread::spawn(move || ender.end());
            let mut w = [0; WINDOW];
            let got = c.take(&mut w);
            timer.join().unwrap();
            match got {
                Take::Text => assert_eq!(text_of(&w), ONE[0]),
                Take::Ended => {}
                other => panic!("{other:?}"),
            }
            assert_eq!(
                c.take(&mut w),
                Take::Ended,
                "after the timer's end, no text"
            );
        });
    }
}
