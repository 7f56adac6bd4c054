//! One segment slot: a window of tickets and the ids it maps to, published under a seqlock.
//!
//! The slot's only writer is the loader of its tag (one at a time, by the buffer's single-flight
//! flag); any number of readers copy it out without blocking and retry only while a write is in
//! progress. Readers never see a *torn* view (fields from two different writes): the version
//! `seq` is odd during a write and bumped twice per write, and a read is kept only if it saw the
//! same even version before and after loading the fields.
//!
//! Atomics come from [`crate::sync`] and nothing here is async, so the loom crate (`loom/`)
//! compiles this file unchanged and model-checks it (`loom_tests` below).

use crate::sync::{AtomicI64, AtomicU64, Ordering, fence, hint};

/// A consistent copy of one slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SlotView {
    /// First ticket served by this segment.
    pub ticket_start: u64,
    /// One past the last ticket served; equal to `ticket_start` for an empty slot.
    pub ticket_end: u64,
    /// The id that `ticket_start` becomes.
    pub id_start: i64,
    /// Once a ticket reaches this, the next segment should be loaded (10% consumed);
    /// `u64::MAX` once the next segment is published.
    pub preload_at: u64,
}

impl SlotView {
    /// Whether ticket `t` falls in this segment's window.
    #[inline]
    pub(crate) fn contains(&self, t: u64) -> bool {
        self.ticket_start <= t && t < self.ticket_end
    }

    /// The id of ticket `t`, which must lie in the window.
    #[inline]
    pub(crate) fn id_of(&self, t: u64) -> i64 {
        debug_assert!(self.contains(t));
        // Cannot overflow: the window length equals the leased id range, which ends <= i64::MAX.
        self.id_start + (t - self.ticket_start) as i64
    }
}

/// One segment slot, guarded by a seqlock whose only writer is the tag's loader.
#[derive(Debug, Default)]
pub(crate) struct Slot {
    /// Seqlock version: odd while the loader rewrites the fields below; each write adds 2, so
    /// an unchanged even version read before and after the fields proves no write overlapped.
    seq: AtomicU64,
    /// [`SlotView::ticket_start`]; meaningful only between two equal even reads of `seq`.
    ticket_start: AtomicU64,
    /// [`SlotView::ticket_end`]; same rule.
    ticket_end: AtomicU64,
    /// [`SlotView::id_start`]; same rule.
    id_start: AtomicI64,
    /// [`SlotView::preload_at`]; same rule.
    preload_at: AtomicU64,
}

impl Slot {
    /// Reads a consistent view without blocking (retries only while a write is in progress).
    #[inline]
    pub(crate) fn read(&self) -> SlotView {
        loop {
            if let Some(view) = self.try_read() {
                return view;
            }
            hint::spin_loop();
        }
    }

    /// One attempt at a consistent view: `None` if a write was in progress or overlapped it.
    #[inline]
    pub(crate) fn try_read(&self) -> Option<SlotView> {
        // Acquire: pairs with the Release of the write that made `seq` even, so the fields read
        // below are at least that write's.
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            return None;
        }
        let view = SlotView {
            ticket_start: self.ticket_start.load(Ordering::Relaxed),
            ticket_end: self.ticket_end.load(Ordering::Relaxed),
            id_start: self.id_start.load(Ordering::Relaxed),
            preload_at: self.preload_at.load(Ordering::Relaxed),
        };
        // Acquire fence: the field loads above complete before the second version load, and if
        // one of them saw a later write's value, that write's odd version is visible here.
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == s1).then_some(view)
    }

    /// Publishes `v`. Only the loader (the holder of the buffer's single-flight flag) calls
    /// this: two concurrent writers would break the version protocol.
    pub(crate) fn write(&self, v: SlotView) {
        let s = self.seq.load(Ordering::Relaxed);
        debug_assert!(s & 1 == 0, "two writers on one slot");
        self.seq.store(s + 1, Ordering::Relaxed);
        // Release fence: a reader that sees any new field value also sees the odd version.
        fence(Ordering::Release);
        self.ticket_start.store(v.ticket_start, Ordering::Relaxed);
        self.ticket_end.store(v.ticket_end, Ordering::Relaxed);
        self.id_start.store(v.id_start, Ordering::Relaxed);
        self.preload_at.store(v.preload_at, Ordering::Relaxed);
        // Release: readers that see the even version also see every field written above.
        self.seq.store(s + 2, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_read_returns_the_last_write() {
        let slot = Slot::default();
        assert_eq!(slot.read(), SlotView::default());
        let v = SlotView {
            ticket_start: 5,
            ticket_end: 15,
            id_start: 101,
            preload_at: 6,
        };
        slot.write(v);
        assert_eq!(slot.read(), v);
        assert!(v.contains(5) && v.contains(14) && !v.contains(15) && !v.contains(4));
        assert_eq!(v.id_of(14), 110);
    }

    /// A writer publishes views whose fields all derive from one number; readers on other
    /// threads must only ever see such views (never a mix of two writes).
    #[test]
    fn readers_never_see_a_torn_view_under_a_busy_writer() {
        let slot = Slot::default();
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    let mut reads = 0u64;
                    while !done.load(std::sync::atomic::Ordering::Relaxed) || reads < 1000 {
                        let v = slot.read();
                        assert_eq!(v, view_of(v.ticket_start), "torn read");
                        reads += 1;
                    }
                });
            }
            for k in 1..=200_000 {
                slot.write(view_of(k));
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }

    fn view_of(k: u64) -> SlotView {
        if k == 0 {
            return SlotView::default();
        }
        SlotView {
            ticket_start: k,
            ticket_end: k * 3,
            id_start: -(k as i64),
            preload_at: k * 7,
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! Run through the `loom/` crate. The models call [`Slot::try_read`], one attempt of
    //! [`Slot::read`]'s loop: a reader spinning on an odd version makes loom's exploration
    //! explode, and `read` adds nothing but that retry. Preemption bound 2 (under a second
    //! each; it finds a dropped Acquire, either fence, or the version re-check; bound 3 passes
    //! too, in about 8 s each: `LOOM_MAX_PREEMPTIONS=3`).

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

    /// Every field of the `k`-th write derives from `k`, so a mix of two writes is detectable.
    fn view_of(k: u64) -> SlotView {
        if k == 0 {
            return SlotView::default();
        }
        SlotView {
            ticket_start: k,
            ticket_end: k + 10,
            id_start: 100 * k as i64,
            preload_at: k + 1,
        }
    }

    fn assert_whole(v: Option<SlotView>) {
        if let Some(v) = v {
            assert_eq!(v, view_of(v.ticket_start), "torn view: {v:?}");
        }
    }

    /// One writer publishes two successive views while a reader makes two attempts: each
    /// attempt that succeeds is one whole write, and the second never goes back in time.
    #[test]
    fn seqlock_readers_never_see_a_torn_view() {
        bounded(2).check(|| {
            let slot = Arc::new(Slot::default());
            let writer = {
                let slot = slot.clone();
                thread::spawn(move || {
                    slot.write(view_of(1));
                    slot.write(view_of(2));
                })
            };
            let first = slot.try_read();
            let second = slot.try_read();
            assert_whole(first);
            assert_whole(second);
            if let (Some(a), Some(b)) = (first, second) {
                assert!(a.ticket_start <= b.ticket_start, "went back: {a:?} {b:?}");
            }
            writer.join().unwrap();
            assert_eq!(
                slot.try_read(),
                Some(view_of(2)),
                "the last write is visible"
            );
        });
    }

    /// Two readers against one writer: never torn.
    #[test]
    fn seqlock_two_readers_one_write() {
        bounded(2).check(|| {
            let slot = Arc::new(Slot::default());
            let reader = {
                let slot = slot.clone();
                thread::spawn(move || slot.try_read())
            };
            let writer = {
                let slot = slot.clone();
                thread::spawn(move || slot.write(view_of(1)))
            };
            let mine = slot.try_read();
            let theirs = reader.join().unwrap();
            writer.join().unwrap();
            assert_whole(mine);
            assert_whole(theirs);
        });
    }
}
