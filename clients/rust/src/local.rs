//! `Cursor`: the local path. One range of consecutive ids is served by one `fetch_add` on a
//! packed state word plus one compare; switching to the next range happens off that path,
//! under the supply's lock.
//!
//! # Layout
//!
//! `state` packs `(generation << 40) | ticket`. A range of `len` ids installed by a switch gets
//! the next generation `g`, and `state` becomes `(g << 40) | (LIMIT - len)`: the range's
//! tickets are `LIMIT - len .. LIMIT`, so whether a ticket is valid is decided by the state word
//! alone (`ticket < LIMIT`), without the range. The range itself is in slot `g % SLOTS`, as
//! `base = first - (LIMIT - len)`, tagged with `g`; ticket `t` is the id `base + t`. A take is
//! `s = state.fetch_add(1)`; if its ticket is below `LIMIT` it reads its generation's slot
//! through a seqlock (the tag before and after `base`) and returns `base + ticket`.
//!
//! # Why no id is handed out twice
//!
//! Every `fetch_add` on `state` returns a distinct value (one modification order of one atomic),
//! so no two takes own the same `(generation, ticket)`. A generation's slot is written once
//! before the generation is published (`switch`) and only overwritten for generation `g +
//! SLOTS`, by then under another tag; the seqlock makes a reader that raced with that overwrite
//! see a tag mismatch instead of a torn value. Each generation's range is a run of ids handed to
//! the cursor once (the supply keeps its runs disjoint and above every earlier one), and its
//! valid tickets map one to one onto it, so distinct valid tickets are distinct ids.
//!
//! # Why a call that starts after another returned gets a larger id
//!
//! A take's id is decided by its `fetch_add` (its linearization point): if call A returned
//! before call B started, A's `fetch_add` happens-before B's, so B's comes later in `state`'s
//! modification order. Same generation: B's ticket is larger, so its id is. Later generation:
//! B's range was installed after A's, and the supply installs ranges in increasing order of
//! ids, so every id of B's range is above every id of A's. A caller that took a valid ticket
//! but found the slot reused (it was descheduled across `SLOTS` switches) gets the same id from
//! the supply's history under the lock, or, past that history, counts the ticket as lost (a
//! gap, like the server's orphan tickets) and takes another, later one; either way its answer
//! is still ordered after every call that returned before it started.
//!
//! # Orderings
//!
//! - `switch`: slot tag := `WRITING` (Relaxed), `fence(Release)`, `base` (Relaxed), tag := `g`
//!   (Release), then `state.swap(..., Release)`. The fence keeps the `base` write after the
//!   `WRITING` mark for any reader that sees it; the Release on the tag publishes `base` with
//!   it; the Release on `state` publishes the slot with the generation.
//! - `take`: `state.fetch_add(1, Acquire)` (an RMW reads the latest value, and RMWs continue
//!   the release sequence of the switch's swap, so the caller sees its generation's slot
//!   written); tag (Acquire), `base` (Relaxed), `fence(Acquire)`, tag again (Relaxed): equal
//!   tags mean `base` was read from that generation's write. On x86 the Acquire/Release parts
//!   cost nothing beyond the `lock xadd` itself; the hot path is that RMW, a compare with a
//!   constant, three loads from one line and an add.
//!
//! Tickets of failed takes keep counting past `LIMIT` (one per caller that finds the range
//! spent); 2^39 of them within one generation cannot happen before its switch. Generations wrap
//! at 2^24: a reader would have to sleep across 16 million switches to be confused.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering, fence};

use crossbeam_utils::CachePadded;

/// Slots of recent ranges: a reader descheduled across this many switches finds its slot
/// reused and asks the supply's history instead.
const SLOTS: usize = 8;
const TICKET_BITS: u32 = 40;
const TICKET_MASK: u64 = (1 << TICKET_BITS) - 1;
/// Tickets below it are valid: a range of `len` ids starts at `LIMIT - len`.
pub(crate) const LIMIT: u64 = 1 << (TICKET_BITS - 1);
const GEN_MASK: u64 = (1 << (64 - TICKET_BITS)) - 1;
/// The tag of a slot being written (no generation has it: generations are below 2^24).
const WRITING: u64 = u64::MAX;

/// One installed range.
#[derive(Debug)]
struct Slot {
    /// The generation whose range `base` is, or `WRITING`.
    tag: AtomicU64,
    /// `first - (LIMIT - len)`: ticket `t` of the range is the id `base + t`.
    base: AtomicI64,
}

/// What one take got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// An id of the range in use.
    Id(i64),
    /// The range of this generation is spent (or none is installed yet).
    Spent,
    /// Valid ticket `ticket` of generation `generation` was taken, but its slot was reused:
    /// the supply's history answers (see the module doc).
    Stale {
        /// The generation the take belongs to.
        generation: u64,
        /// The ticket it owns (below `LIMIT`).
        ticket: u64,
    },
}

/// The range in use and the few before it.
#[derive(Debug)]
pub(crate) struct Cursor {
    /// `(generation << 40) | ticket`.
    state: CachePadded<AtomicU64>,
    slots: [Slot; SLOTS],
}

/// `base` of a range: ticket `t` in `LIMIT - len .. LIMIT` is the id `base + t`.
pub(crate) fn base_of(first: i64, len: u64) -> i64 {
    // first >= 1 and LIMIT < 2^40: no overflow either way.
    first - (LIMIT - len) as i64
}

impl Cursor {
    /// A cursor with no range: every take is `Spent` until the first `switch`.
    pub(crate) fn new() -> Self {
        Self {
            state: CachePadded::new(AtomicU64::new(LIMIT)),
            slots: std::array::from_fn(|_| Slot {
                tag: AtomicU64::new(WRITING),
                base: AtomicI64::new(0),
            }),
        }
    }

    /// The hot path: one `fetch_add`, one compare, a seqlock read of one slot.
    #[inline]
    pub(crate) fn take(&self) -> Take {
        let s = self.state.fetch_add(1, Ordering::Acquire);
        let ticket = s & TICKET_MASK;
        if ticket >= LIMIT {
            return Take::Spent;
        }
        let generation = s >> TICKET_BITS;
        let slot = &self.slots[generation as usize % SLOTS];
        let tag = slot.tag.load(Ordering::Acquire);
        let base = slot.base.load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        let again = slot.tag.load(Ordering::Relaxed);
        if tag == generation && again == generation {
            // A valid ticket of this range: base + ticket lies within first..=last.
            Take::Id(base + ticket as i64)
        } else {
            Take::Stale { generation, ticket }
        }
    }

    /// Tickets of the range in use taken so far (at most `len`, its length).
    pub(crate) fn taken(&self, len: u64) -> u64 {
        let ticket = self.state.load(Ordering::Acquire) & TICKET_MASK;
        ticket.min(LIMIT).saturating_sub(LIMIT - len)
    }

    /// Ends the range in use (of `len` ids): the next generation, with no valid ticket and no
    /// slot, is published, so every later take is `Spent` until a `switch` (a strict supply
    /// never makes one). Returns the tickets of the ended range that were taken (at most
    /// `len`), exactly: the swap is the last change of that generation's counter. A take that
    /// got a valid ticket before still reads its slot, which is left as it was. Only under the
    /// supply's lock.
    pub(crate) fn retire(&self, len: u64) -> u64 {
        let current = self.state.load(Ordering::Relaxed) >> TICKET_BITS;
        let generation = (current + 1) & GEN_MASK;
        let old = self
            .state
            .swap((generation << TICKET_BITS) | LIMIT, Ordering::AcqRel);
        (old & TICKET_MASK).min(LIMIT).saturating_sub(LIMIT - len)
    }

    /// Installs the range `first ..= first + len - 1` as the next generation; returns it.
    /// Only under the supply's lock (one writer), and only once the range in use is spent.
    pub(crate) fn switch(&self, first: i64, len: u64) -> u64 {
        debug_assert!((1..=LIMIT).contains(&len));
        let current = self.state.load(Ordering::Relaxed) >> TICKET_BITS;
        let generation = (current + 1) & GEN_MASK;
        let slot = &self.slots[generation as usize % SLOTS];
        slot.tag.store(WRITING, Ordering::Relaxed);
        fence(Ordering::Release);
        slot.base.store(base_of(first, len), Ordering::Relaxed);
        slot.tag.store(generation, Ordering::Release);
        self.state.swap(
            (generation << TICKET_BITS) | (LIMIT - len),
            Ordering::Release,
        );
        generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_served_in_order_then_spent() {
        let c = Cursor::new();
        assert_eq!(c.take(), Take::Spent);
        assert_eq!(c.taken(0), 0);
        let g = c.switch(10, 3);
        assert_eq!(g, 1);
        assert_eq!(c.take(), Take::Id(10));
        assert_eq!(c.taken(3), 1);
        assert_eq!(
            [c.take(), c.take(), c.take()],
            [Take::Id(11), Take::Id(12), Take::Spent]
        );
        assert_eq!(c.taken(3), 3);
        c.switch(i64::MAX, 1);
        assert_eq!(c.take(), Take::Id(i64::MAX));
        assert_eq!(c.take(), Take::Spent);
    }

    #[test]
    fn a_retired_range_is_spent_and_its_taken_tickets_counted() {
        let c = Cursor::new();
        c.switch(10, 5);
        assert_eq!([c.take(), c.take()], [Take::Id(10), Take::Id(11)]);
        assert_eq!(c.retire(5), 2);
        assert_eq!([c.take(), c.take()], [Take::Spent, Take::Spent]);
        assert_eq!(c.taken(0), 0);
        assert_eq!(c.retire(0), 0);
        // A later switch still works (a new generation).
        c.switch(100, 1);
        assert_eq!(c.take(), Take::Id(100));
    }

    #[test]
    fn a_valid_ticket_whose_slot_was_reused_is_reported_stale() {
        let c = Cursor::new();
        c.switch(1, 2);
        // A take of generation 1 that reads its slot only after SLOTS more switches.
        let s = c.state.fetch_add(1, Ordering::Acquire);
        for k in 0..SLOTS as i64 {
            c.switch(100 + 10 * k, 1);
        }
        let generation = s >> TICKET_BITS;
        let slot = &c.slots[generation as usize % SLOTS];
        assert_ne!(slot.tag.load(Ordering::Acquire), generation);
        assert_eq!(base_of(1, 2) + (s & TICKET_MASK) as i64, 1, "its id was 1");
    }
}
