//! A bounded lock-free ring of `u64` ids (Vyukov's bounded MPMC queue, safe Rust).
//!
//! Every slot carries a *stamp* next to its value. Positions are never-wrapping `u64`
//! counters; position `pos` lives in slot `pos & mask`, and its stamp tells whose turn it is:
//!
//! - `stamp == pos`: free, waiting for the producer of `pos`;
//! - `stamp == pos + 1`: holds the id of `pos`, waiting for the consumer of `pos`;
//! - the consumer of `pos` then sets `stamp = pos + capacity`, freeing it for the next lap.
//!
//! A producer (consumer) first checks the stamp, then claims the position with a CAS on
//! `tail` (`cursor`), so a slot is never read before it is written nor overwritten before it
//! is read, and exactly `capacity` ids fit. (uid-generator's Java `RingBuffer` claimed the
//! cursor before checking the slot's flag, which let two consumers read the same slot, and
//! its full check left one slot unusable.)

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU64, Ordering};

/// The ring had no free slot; carries back the id that was not put.
#[derive(thiserror::Error, Debug, Clone, Copy, PartialEq, Eq)]
#[error("ring buffer is full")]
pub struct Full(pub u64);

/// One cell of the ring.
#[derive(Debug)]
struct Slot {
    /// Turn marker (see the module docs): `pos` free for the producer of `pos`, `pos + 1`
    /// written and waiting for the consumer of `pos`.
    stamp: AtomicU64,
    /// The id; only meaningful while `stamp == pos + 1`.
    value: AtomicU64,
}

/// A bounded multi-producer multi-consumer ring of ids; capacity a power of two.
pub struct RingBuffer {
    /// Next position a producer claims. Never decreases; `cursor <= tail <= cursor + capacity`
    /// once the claims in flight have completed.
    tail: CachePadded<AtomicU64>,
    /// Next position a consumer claims. Never decreases. On its own cache line so consumers
    /// and the producer do not invalidate each other's counters.
    cursor: CachePadded<AtomicU64>,
    /// `capacity` slots; slot `i` starts with stamp `i` (free for the first lap).
    slots: Box<[Slot]>,
    /// `capacity - 1`, to map a position to its slot.
    mask: u64,
}

impl std::fmt::Debug for RingBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingBuffer")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .finish_non_exhaustive()
    }
}

impl RingBuffer {
    /// An empty ring of `capacity` slots.
    ///
    /// # Panics
    ///
    /// If `capacity` is not a power of two of at least 2. (With one slot, "written for lap
    /// `n`" and "free for lap `n + 1`" would be the same stamp.)
    pub fn new(capacity: usize) -> Self {
        assert!(
            capacity.is_power_of_two() && capacity >= 2,
            "ring capacity must be a power of two >= 2, got {capacity}"
        );
        let slots = (0..capacity as u64)
            .map(|i| Slot {
                stamp: AtomicU64::new(i),
                value: AtomicU64::new(0),
            })
            .collect();
        Self {
            tail: CachePadded::new(AtomicU64::new(0)),
            cursor: CachePadded::new(AtomicU64::new(0)),
            slots,
            mask: capacity as u64 - 1,
        }
    }

    /// Number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Puts `id` unless the ring is full (or the slot is still being read by a consumer).
    pub fn try_put(&self, id: u64) -> Result<(), Full> {
        // Relaxed: the tail only arbitrates which producer owns a position; the slot's stamp
        // carries all the synchronization.
        let mut pos = self.tail.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[(pos & self.mask) as usize];
            // Acquire: pairs with the Release of the consumer that freed the slot, so its read
            // of the old value happens before our overwrite.
            let stamp = slot.stamp.load(Ordering::Acquire);
            let diff = stamp.wrapping_sub(pos) as i64;
            if diff == 0 {
                match self.tail.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // Relaxed: published by the Release store of the stamp just below.
                        slot.value.store(id, Ordering::Relaxed);
                        // Release: the consumer that sees `pos + 1` also sees the value.
                        slot.stamp.store(pos + 1, Ordering::Release);
                        return Ok(());
                    }
                    Err(current) => pos = current,
                }
            } else if diff < 0 {
                // The slot is still in the previous lap (its id unread, or its producer or
                // consumer mid-way): every slot is taken, so the ring is full.
                return Err(Full(id));
            } else {
                // Another producer took `pos` meanwhile; catch up.
                pos = self.tail.load(Ordering::Relaxed);
            }
        }
    }

    /// Takes the oldest id, or `None` if the ring is empty (or its oldest slot is still being
    /// written by a producer).
    pub fn try_take(&self) -> Option<u64> {
        self.try_take_at().map(|(id, _)| id)
    }

    /// Like [`Self::try_take`], also returning the ring position the id was taken from (it
    /// increases by one per take across all consumers).
    pub fn try_take_at(&self) -> Option<(u64, u64)> {
        // Relaxed: as in `try_put`, the cursor only arbitrates ownership.
        let mut pos = self.cursor.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[(pos & self.mask) as usize];
            // Acquire: pairs with the producer's Release, so the value it wrote is visible.
            let stamp = slot.stamp.load(Ordering::Acquire);
            let diff = stamp.wrapping_sub(pos + 1) as i64;
            if diff == 0 {
                match self.cursor.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => {
                        // Relaxed: made visible by the Acquire load of the stamp above; no one
                        // else may touch the slot until we free it.
                        let id = slot.value.load(Ordering::Relaxed);
                        // Release: our read of the value happens before the next producer's write.
                        slot.stamp.store(pos + self.mask + 1, Ordering::Release);
                        return Some((id, pos));
                    }
                    Err(current) => pos = current,
                }
            } else if diff < 0 {
                // Not written yet for this lap (or the previous lap's consumer is mid-way):
                // nothing is ready at the head, so the ring is empty.
                return None;
            } else {
                // Another consumer took `pos` meanwhile; catch up.
                pos = self.cursor.load(Ordering::Relaxed);
            }
        }
    }

    /// Ids ready to take (a snapshot; exact when no put or take is in flight).
    pub fn len(&self) -> usize {
        // Relaxed: an estimate. Reading the cursor first keeps `tail >= cursor`, both only grow.
        let cursor = self.cursor.load(Ordering::Relaxed);
        let tail = self.tail.load(Ordering::Relaxed);
        (tail.saturating_sub(cursor) as usize).min(self.capacity())
    }

    /// Ids taken since the ring was made (a snapshot): the consumers' cursor, read for metrics
    /// so that nothing is counted per id.
    pub fn taken(&self) -> u64 {
        // Relaxed: a monitoring read; it orders nothing.
        self.cursor.load(Ordering::Relaxed)
    }

    /// Whether no id is ready to take (a snapshot).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Slots free for producers (a snapshot).
    pub fn free_slots(&self) -> usize {
        self.capacity() - self.len()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn exactly_capacity_ids_fit() {
        for cap in [2usize, 8, 64] {
            let r = RingBuffer::new(cap);
            for i in 0..cap as u64 {
                assert_eq!(r.try_put(i), Ok(()));
            }
            assert_eq!(r.len(), cap);
            assert_eq!(r.try_put(99), Err(Full(99)));
            for i in 0..cap as u64 {
                assert_eq!(r.try_take(), Some(i));
            }
            assert_eq!(r.try_take(), None);
            assert!(r.is_empty());
            assert_eq!(r.free_slots(), cap);
        }
    }

    #[test]
    fn wraps_around_many_laps_in_order() {
        let r = RingBuffer::new(4);
        let mut next_out = 0;
        for i in 0..1_000u64 {
            r.try_put(i).unwrap();
            if i % 3 == 2 {
                while let Some(v) = r.try_take() {
                    assert_eq!(v, next_out);
                    next_out += 1;
                }
            }
            if r.len() == 4 {
                assert!(r.try_put(u64::MAX).is_err());
                assert_eq!(r.try_take(), Some(next_out));
                next_out += 1;
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn behaves_like_a_bounded_fifo(
            cap_pow in 1u32..5,
            ops in proptest::collection::vec(proptest::bool::ANY, 1..300)
        ) {
            let cap = 1usize << cap_pow;
            let ring = RingBuffer::new(cap);
            let mut model = std::collections::VecDeque::new();
            for (i, put) in ops.into_iter().enumerate() {
                if put {
                    let expected = if model.len() < cap { Ok(()) } else { Err(Full(i as u64)) };
                    proptest::prop_assert_eq!(ring.try_put(i as u64), expected);
                    if model.len() < cap {
                        model.push_back(i as u64);
                    }
                } else {
                    proptest::prop_assert_eq!(ring.try_take(), model.pop_front());
                }
                proptest::prop_assert_eq!(ring.len(), model.len());
            }
        }
    }

    #[test]
    #[should_panic(expected = "power of two")]
    fn capacity_must_be_a_power_of_two() {
        RingBuffer::new(12);
    }

    #[test]
    #[should_panic(expected = "power of two >= 2")]
    fn capacity_one_is_refused() {
        RingBuffer::new(1);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use super::*;
    use crate::sync::{Arc, thread};

    #[test]
    fn spsc_through_a_full_ring_keeps_order() {
        loom::model(|| {
            let ring = Arc::new(RingBuffer::new(2));
            let producer = {
                let ring = ring.clone();
                thread::spawn(move || {
                    for v in 1..=3 {
                        while ring.try_put(v).is_err() {
                            thread::yield_now();
                        }
                    }
                })
            };
            let mut got = Vec::new();
            while got.len() < 3 {
                match ring.try_take() {
                    Some(v) => got.push(v),
                    None => thread::yield_now(),
                }
            }
            producer.join().unwrap();
            assert_eq!(got, vec![1, 2, 3]);
            assert!(ring.try_take().is_none());
        });
    }

    #[test]
    fn two_consumers_never_take_the_same_id() {
        loom::model(|| {
            let ring = Arc::new(RingBuffer::new(2));
            ring.try_put(1).unwrap();
            let consumer = {
                let ring = ring.clone();
                thread::spawn(move || [ring.try_take(), ring.try_take()])
            };
            let producer = {
                let ring = ring.clone();
                thread::spawn(move || ring.try_put(2).is_ok())
            };
            let mine = ring.try_take();
            let theirs = consumer.join().unwrap();
            let put2 = producer.join().unwrap();
            let mut all: Vec<u64> = theirs.into_iter().chain([mine]).flatten().collect();
            while let Some(v) = ring.try_take() {
                all.push(v);
            }
            all.sort_unstable();
            let expected: Vec<u64> = if put2 { vec![1, 2] } else { vec![1] };
            assert_eq!(all, expected);
        });
    }

    #[test]
    fn two_producers_fill_exactly_the_capacity() {
        loom::model(|| {
            let ring = Arc::new(RingBuffer::new(2));
            ring.try_put(1).unwrap();
            let other = {
                let ring = ring.clone();
                thread::spawn(move || ring.try_put(2).is_ok())
            };
            let mine = ring.try_put(3).is_ok();
            let theirs = other.join().unwrap();
            // One slot was left: exactly one of the two puts wins.
            assert!(mine ^ theirs);
            assert_eq!(ring.len(), 2);
            let a = ring.try_take().unwrap();
            let b = ring.try_take().unwrap();
            assert_eq!(a, 1);
            assert_eq!(b, if mine { 3 } else { 2 });
            assert!(ring.try_take().is_none());
        });
    }
}
