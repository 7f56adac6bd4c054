//! Tickets and windows: the lock-free id path of one tag.
//!
//! Every request first takes a *ticket* with one `fetch_add` on `issued`. Each leased segment
//! (an id range from the database) is published into one of two [`Slot`]s together with the
//! window of tickets it serves, `[ticket_start, ticket_end)`; ticket `t` in that window becomes
//! the id `id_start + (t - ticket_start)`. There is no explicit "switch": when tickets run past
//! the current window they fall into the next one, which the loader published ahead of time.
//!
//! Why this cannot repeat an id: a ticket is held by exactly one request; windows of successive
//! segments never overlap (each starts at or after the previous end); and each segment maps its
//! window one-to-one onto its own leased id range, which no other segment or server shares.
//! A request whose ticket is found in no window *below* a published one (its segment was
//! overwritten while it was descheduled, or it waited across a reload) simply takes a new ticket:
//! that costs an unused id (a gap), never a duplicate.
//!
//! Slots are rewritten only by the single loader of the tag ([`Tickets::publish`]), and only a
//! slot whose every ticket is already handed out. Atomics come from [`crate::sync`] and nothing
//! here is async, so the loom crate (`loom/`) model-checks this file unchanged (`loom_tests`).

use crossbeam_utils::CachePadded;

use super::runs::IdSink;
use super::slot::{Slot, SlotView};
use crate::sync::{AtomicU64, AtomicUsize, Ordering, prefetch_for_read, prefetch_for_write};

/// The outcome of mapping tickets onto the published segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    /// The id, and whether this request should make sure the next segment is loading.
    Id {
        /// The id handed out.
        id: i64,
        /// The ticket passed its segment's preload mark and no successor is published.
        preload: bool,
    },
    /// No published segment holds the ticket yet: wait for the loader.
    Beyond,
}

/// The ticket counter and the two segment slots of one tag.
#[derive(Debug, Default)]
pub(crate) struct Tickets {
    /// Tickets handed out so far, alone on its line: two threads on one tag fight over it, so
    /// nothing a take reads lives there (the hint did: two threads on one handle took 28 ns per
    /// id against 17 for a bare `fetch_add`, 18 without it). Relaxed is enough for every
    /// access: a ticket needs only to be unique (guaranteed by the RMW), and which segment
    /// serves it is decided by the seqlocked slots, not by this counter.
    issued: CachePadded<AtomicU64>,
    /// The two segments. The newer one has the larger `ticket_end`; a slot is overwritten only
    /// once `issued` has passed its `ticket_end` (every ticket of it handed out). A segment
    /// with a successor has `preload_at == u64::MAX` (see [`Tickets::publish`]), so a take
    /// decides whether to preload from its own slot alone.
    slots: [CachePadded<SlotLine>; 2],
}

/// One slot on its line, with the hint in slot 0's line (read-mostly, like the slots): a take
/// among many tags (each cold in the cache) misses the counter's line and slot 0's, and slot
/// 1's when that one is current.
#[derive(Debug, Default)]
struct SlotLine {
    /// The slot.
    slot: Slot,
    /// In slot 0's line only: index of the slot that served the latest ticket, read first, a
    /// hint only.
    hint: AtomicUsize,
}

/// Where one ticket landed.
enum Resolved {
    /// In a published window: its id, and whether to preload.
    Id(i64, bool),
    /// Past every published window.
    Beyond,
    /// Below the newest window but in none: its segment is gone; take another ticket.
    Orphan,
}

/// Where a run of tickets landed.
enum Run {
    /// Tickets up to `next` became ids.
    Ids { next: u64, preload: bool },
    /// Tickets up to `next` are lost (a gap in ids).
    Skip { next: u64 },
}

impl Tickets {
    /// No segment published: every ticket is [`Take::Beyond`].
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Takes one id if a published segment has it. Lock-free: one `fetch_add` and a few loads.
    ///
    /// The current slot (by the hint) is read *before* the ticket is taken: a locked RMW keeps
    /// later loads waiting, so reading first lets a tag that is cold in the cache (one of many)
    /// fetch the slot's line and the counter's line at the same time instead of one after the
    /// other. The read may be stale by the time the ticket is known, and that is safe: windows
    /// of successive segments never overlap, so *any* consistent view of any slot that contains
    /// ticket `t` maps it to the one id its segment gives it, whenever that view was read. A
    /// view that does not contain `t` (the segment moved on meanwhile) costs only the full
    /// resolve the ticket would have had anyway.
    #[inline]
    pub(crate) fn try_next(&self) -> Take {
        // The counter's line is asked for first, with write intent, and slot 1's line too: the
        // hint sits in slot 0's line, so a tag whose current segment is in slot 1 would
        // otherwise find out which line it needs only after the first miss. All the misses
        // then overlap.
        prefetch_for_write(&*self.issued);
        prefetch_for_read(&self.slots[1]);
        let early = self.slots[self.slots[0].hint.load(Ordering::Relaxed)]
            .slot
            .read();
        let t = self.issued.fetch_add(1, Ordering::Relaxed);
        if early.contains(t) {
            return Take::Id {
                id: early.id_of(t),
                preload: self.needs_preload(&early, t),
            };
        }
        self.resolve_loop(t)
    }

    /// [`Self::try_next`] after the early view missed: the full resolve, with fresh tickets
    /// for orphans.
    fn resolve_loop(&self, first: u64) -> Take {
        let mut t = first;
        loop {
            match self.resolve(t) {
                Resolved::Id(id, preload) => return Take::Id { id, preload },
                Resolved::Beyond => return Take::Beyond,
                Resolved::Orphan => t = self.issued.fetch_add(1, Ordering::Relaxed),
            }
        }
    }

    /// Appends up to `want` ids to `out`, taking only tickets that published segments cover.
    /// Returns whether a preload should be started; stops early (fewer ids) when it must wait.
    pub(crate) fn take_many<S: IdSink>(&self, want: u64, out: &mut S) -> bool {
        let mut preload = false;
        let mut remaining = want;
        while remaining > 0 {
            let (a, b) = (self.slots[0].slot.read(), self.slots[1].slot.read());
            let horizon = a.ticket_end.max(b.ticket_end);
            let avail = horizon.saturating_sub(self.issued.load(Ordering::Relaxed));
            if avail == 0 {
                break;
            }
            let k = remaining.min(avail);
            let first = self.issued.fetch_add(k, Ordering::Relaxed);
            let mut t = first;
            while t < first + k {
                match self.resolve_run(t, first + k, out) {
                    Run::Ids { next, preload: p } => {
                        remaining -= next - t;
                        preload |= p;
                        t = next;
                    }
                    // Tickets lost to a race (overwritten or not yet published): a gap, retried
                    // with fresh tickets.
                    Run::Skip { next } => t = next,
                }
            }
        }
        preload
    }

    /// Maps ticket `t` through the slots.
    #[inline]
    fn resolve(&self, t: u64) -> Resolved {
        let h = self.slots[0].hint.load(Ordering::Relaxed);
        let v = self.slots[h].slot.read();
        if v.contains(t) {
            return Resolved::Id(v.id_of(t), self.needs_preload(&v, t));
        }
        let o = self.slots[h ^ 1].slot.read();
        if o.contains(t) {
            self.slots[0].hint.store(h ^ 1, Ordering::Relaxed);
            return Resolved::Id(o.id_of(t), self.needs_preload(&o, t));
        }
        if t >= v.ticket_end.max(o.ticket_end) {
            Resolved::Beyond
        } else {
            Resolved::Orphan
        }
    }

    /// Whether ticket `t` of segment `v` passed its preload mark while `v` has no successor
    /// (a segment with one has its mark at `u64::MAX`).
    #[inline]
    fn needs_preload(&self, v: &SlotView, t: u64) -> bool {
        t >= v.preload_at
    }

    /// Emits the ids of the tickets `[t, end)` that the segment holding `t` covers.
    fn resolve_run<S: IdSink>(&self, t: u64, end: u64, out: &mut S) -> Run {
        for i in 0..2 {
            let v = self.slots[i].slot.read();
            if v.contains(t) {
                let stop = end.min(v.ticket_end);
                // Tickets `t..stop` of one window are consecutive ids of its segment.
                out.push_run(v.id_of(t), stop - t);
                let preload = self.needs_preload(&v, stop - 1);
                return Run::Ids {
                    next: stop,
                    preload,
                };
            }
        }
        // Skip to the next ticket some published segment serves, or give up the rest.
        let (a, b) = (self.slots[0].slot.read(), self.slots[1].slot.read());
        let next = [a.ticket_start, b.ticket_start]
            .into_iter()
            .filter(|&s| s > t)
            .min()
            .unwrap_or(end);
        Run::Skip {
            next: next.min(end),
        }
    }

    /// Whether the loader should lease another segment: nothing is published yet, or tickets
    /// reached the newest segment's preload mark (so the older slot is spent and may be reused).
    pub(crate) fn wants_next(&self) -> bool {
        let newest = self.newest().1;
        newest.ticket_end == 0 || self.issued.load(Ordering::Relaxed) >= newest.preload_at
    }

    /// Publishes the leased ids `[id_start, id_start + len)` as the next segment, in the slot
    /// of the older one. Returns the number of tickets of the segment it replaced.
    ///
    /// Only the loader calls this (one at a time, by the buffer's single-flight flag), and only
    /// after [`Self::wants_next`] said so since the last publish: then the replaced segment's
    /// tickets are all handed out.
    pub(crate) fn publish(&self, id_start: i64, len: u64) -> u64 {
        debug_assert!(len > 0, "an empty segment is never published");
        let (newest_idx, newest) = self.newest();
        let issued = self.issued.load(Ordering::Relaxed);
        let start = newest.ticket_end.max(issued);
        let target = newest_idx ^ 1;
        let old = self.slots[target].slot.read();
        debug_assert!(
            old.ticket_end <= issued || newest.ticket_end == 0,
            "overwriting a segment that still has unissued ids"
        );
        self.slots[target].slot.write(SlotView {
            ticket_start: start,
            ticket_end: start + len,
            id_start,
            // Leaf's rule: start loading the next segment once 10% of this one is used, so the
            // load has the remaining 90% of the segment's lifetime to finish.
            preload_at: start + len / 10,
        });
        // The previous segment now has a successor: its takes stop asking for loads. Until this
        // write they may ask once more, which the loader then finds unnecessary (`wants_next`).
        if newest.ticket_end > 0 {
            self.slots[newest_idx].slot.write(SlotView {
                preload_at: u64::MAX,
                ..newest
            });
        }
        old.ticket_end - old.ticket_start
    }

    /// Stops the id path for good: raises the counter to the end of the newest published
    /// window, so every ticket taken from now on lies past every window ([`Take::Beyond`]) and
    /// a request holding an orphan ticket gets no other. Returns the first ticket never handed
    /// out: tickets below it are taken (their requests may still be mapping them to ids, which
    /// all lie below the id of this ticket), tickets from it on never become ids.
    ///
    /// Only while no segment can be published any more (the buffer's `closed` flag, under its
    /// load lock): a window published after this would serve the tickets taken after it.
    pub(crate) fn close(&self) -> u64 {
        let horizon = self.newest().1.ticket_end;
        // One RMW in the counter's modification order: every `fetch_add` before it is below
        // the returned value, every one after it starts at or above `horizon`.
        self.issued.fetch_max(horizon, Ordering::Relaxed)
    }

    /// Tickets handed out so far (including those lost to races or to requests that waited).
    pub(crate) fn issued(&self) -> u64 {
        self.issued.load(Ordering::Relaxed)
    }

    /// Consistent copies of both slots (each one consistent; the pair is not a snapshot).
    pub(crate) fn views(&self) -> [SlotView; 2] {
        [self.slots[0].slot.read(), self.slots[1].slot.read()]
    }

    /// The newest segment and its slot index (slot 0 when both are empty).
    fn newest(&self) -> (usize, SlotView) {
        let [a, b] = self.views();
        if b.ticket_end > a.ticket_end {
            (1, b)
        } else {
            (0, a)
        }
    }

    /// Ids left in the published segments (current remainder plus a ready next segment).
    pub(crate) fn remaining(&self) -> u64 {
        let issued = self.issued();
        self.views()
            .iter()
            .map(|v| v.ticket_end.saturating_sub(issued.max(v.ticket_start)))
            .sum()
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Run through the `loom/` crate (`scripts/test.sh`). Each model bounds preemptions (see
    //! `bounded`) so it explores in seconds; the bound is noted on each.

    use std::collections::HashSet;

    use super::*;
    use crate::sync::{Arc, thread};

    /// loom's model builder with at most `n` preemptions per execution, unless
    /// `LOOM_MAX_PREEMPTIONS` says otherwise.
    fn bounded(n: usize) -> loom::model::Builder {
        let mut b = loom::model::Builder::new();
        if std::env::var_os("LOOM_MAX_PREEMPTIONS").is_none() {
            b.preemption_bound = Some(n);
        }
        b
    }

    /// Checks a run: every id unique and inside one of the `leased` ranges `[start, end)`,
    /// each thread's ids strictly increasing.
    fn check(per_thread: &[Vec<i64>], leased: &[(i64, i64)]) {
        let mut seen = HashSet::new();
        for ids in per_thread {
            assert!(
                ids.windows(2).all(|w| w[0] < w[1]),
                "not increasing: {ids:?}"
            );
            for &id in ids {
                assert!(seen.insert(id), "id {id} twice: {per_thread:?}");
                assert!(
                    leased.iter().any(|&(s, e)| s <= id && id < e),
                    "id {id} outside the leases {leased:?}"
                );
            }
        }
    }

    fn take(tickets: &Tickets) -> Option<i64> {
        match tickets.try_next() {
            Take::Id { id, .. } => Some(id),
            Take::Beyond => None,
        }
    }

    /// Two takers take one id each while the loader publishes the next segment into the
    /// empty slot: the one id of segment 1 goes to one of them, the other gets an id of
    /// segment 2 or is told to wait. Preemption bound 2.
    #[test]
    fn takers_and_a_loader_publishing_the_next_segment() {
        bounded(2).check(|| {
            let leased = [(1, 2), (11, 13)];
            let tickets = Arc::new(Tickets::new());
            tickets.publish(1, 1);
            let loader = {
                let tickets = tickets.clone();
                thread::spawn(move || tickets.publish(11, 2))
            };
            let other = {
                let tickets = tickets.clone();
                thread::spawn(move || take(&tickets).into_iter().collect::<Vec<i64>>())
            };
            let mine: Vec<i64> = take(&tickets).into_iter().collect();
            let theirs = other.join().unwrap();
            loader.join().unwrap();
            assert!(
                mine.contains(&1) || theirs.contains(&1),
                "segment 1 was skipped"
            );
            check(&[mine, theirs], &leased);
        });
    }

    /// A batch of three crosses from segment 1 into segment 2 while the loader publishes
    /// segment 2: the batch stops at the horizon it saw or runs on into segment 2, never
    /// repeating or inventing an id. Preemption bound 4.
    #[test]
    fn a_batch_across_the_boundary_while_the_loader_publishes() {
        bounded(4).check(|| {
            let leased = [(1, 3), (11, 13)];
            let tickets = Arc::new(Tickets::new());
            tickets.publish(1, 2);
            let loader = {
                let tickets = tickets.clone();
                thread::spawn(move || tickets.publish(11, 2))
            };
            let mut ids = Vec::new();
            tickets.take_many(3, &mut ids);
            loader.join().unwrap();
            assert_eq!(&ids[..2], &[1, 2], "segment 1 first, whole");
            check(&[ids], &leased);
        });
    }

    /// Two takers take ids (one by `try_next`, one by `take_many`) while the tag closes: every
    /// id they got maps a ticket below the one `close` returned, so the ids from that ticket's
    /// on (what the give-back returns) were never handed out; after the close nothing is.
    /// Preemption bound 3.
    #[test]
    fn takers_racing_the_close_get_only_ids_below_the_first_free_ticket() {
        bounded(3).check(|| {
            let leased = [(1, 3), (11, 13)];
            let tickets = Arc::new(Tickets::new());
            tickets.publish(1, 2);
            tickets.publish(11, 2);
            let one = {
                let tickets = tickets.clone();
                thread::spawn(move || take(&tickets).into_iter().collect::<Vec<i64>>())
            };
            let batch = {
                let tickets = tickets.clone();
                thread::spawn(move || {
                    let mut ids = Vec::new();
                    tickets.take_many(2, &mut ids);
                    ids
                })
            };
            let first_free = tickets.close();
            let (one, batch) = (one.join().unwrap(), batch.join().unwrap());
            check(&[one.clone(), batch.clone()], &leased);
            // Id 1 + t for ticket t in the first window, 11 + (t - 2) in the second.
            let ticket_of = |id: i64| (if id < 11 { id - 1 } else { id - 11 + 2 }) as u64;
            let got: Vec<i64> = one.iter().chain(&batch).copied().collect();
            for &id in &got {
                assert!(
                    ticket_of(id) < first_free,
                    "id {id} at or past the first free ticket {first_free}"
                );
            }
            assert_eq!(
                got.len() as u64,
                first_free.min(4),
                "every ticket below the first free one became an id"
            );
            assert_eq!(take(&tickets), None, "nothing after the close");
        });
    }

    /// Two segments of one id each are published; two takers take one id each while the
    /// loader, once tickets reached the newest segment's preload mark (the real loader's check,
    /// `plan_load`), publishes a third segment over the first one's slot. A taker descheduled
    /// between its ticket and its slot read must never map that ticket through the new
    /// segment. Preemption bound 3.
    #[test]
    fn takers_and_a_loader_overwriting_a_spent_slot() {
        bounded(3).check(|| {
            let leased = [(1, 2), (11, 12), (21, 22)];
            let tickets = Arc::new(Tickets::new());
            tickets.publish(1, 1);
            tickets.publish(11, 1);
            let loader = {
                let tickets = tickets.clone();
                thread::spawn(move || {
                    if tickets.wants_next() {
                        tickets.publish(21, 1);
                    }
                })
            };
            let other = {
                let tickets = tickets.clone();
                thread::spawn(move || take(&tickets).into_iter().collect::<Vec<i64>>())
            };
            let mine: Vec<i64> = take(&tickets).into_iter().collect();
            let theirs = other.join().unwrap();
            loader.join().unwrap();
            check(&[mine, theirs], &leased);
        });
    }
}
