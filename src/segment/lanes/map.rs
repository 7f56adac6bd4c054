//! The map from a lane's local positions to global ids (see the module above for the proof).

/// Bits of a block: a lane's leases run in blocks of 2^20 ids.
pub const BLOCK_BITS: u32 = 20;
/// Bits of the slot: at most 8 lanes over a deployment's lifetime (a retired slot is never
/// given to another database).
pub const SLOT_BITS: u32 = 3;
/// How many slots.
pub const SLOTS: u8 = 1 << SLOT_BITS;
/// Ids in a block.
pub const BLOCK: i64 = 1 << BLOCK_BITS;
/// The first local position a lane cannot map: `global` stays below 2^63.
pub const LOCAL_END: i64 = 1 << (63 - SLOT_BITS);

/// The global id of local position `p` of lane `slot`, `None` past [`LOCAL_END`] or for a slot
/// out of range.
pub fn global(p: i64, slot: u8) -> Option<i64> {
    if !(0..LOCAL_END).contains(&p) || slot >= SLOTS {
        return None;
    }
    let block = p >> BLOCK_BITS;
    Some((block << (BLOCK_BITS + SLOT_BITS)) | (i64::from(slot) << BLOCK_BITS) | (p & (BLOCK - 1)))
}

/// The lane slot and local position of a global id (the inverse of [`global`]).
pub fn local(id: i64) -> Option<(u8, i64)> {
    if id < 0 {
        return None;
    }
    let slot = ((id >> BLOCK_BITS) & i64::from(SLOTS - 1)) as u8;
    let block = id >> (BLOCK_BITS + SLOT_BITS);
    Some((slot, (block << BLOCK_BITS) | (id & (BLOCK - 1))))
}

/// The part of the local range `[start, end)` that lies in `start`'s block: `end` cut at the
/// block's end. A lease is mapped through this so that it is one run of global ids.
pub fn cut_at_block(start: i64, end: i64) -> i64 {
    let block_end = ((start >> BLOCK_BITS) + 1) << BLOCK_BITS;
    end.min(block_end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_first_blocks_interleave_by_slot() {
        assert_eq!(global(0, 0), Some(0));
        assert_eq!(global(5, 1), Some(BLOCK + 5));
        assert_eq!(global(BLOCK, 0), Some(8 * BLOCK));
        assert_eq!(global(BLOCK + 7, 2), Some(8 * BLOCK + 2 * BLOCK + 7));
        assert_eq!(global(LOCAL_END - 1, 7), Some(i64::MAX));
        assert_eq!(global(LOCAL_END, 0), None);
        assert_eq!(global(-1, 0), None);
        assert_eq!(global(0, 8), None);
        assert_eq!(cut_at_block(BLOCK - 10, BLOCK + 10), BLOCK);
        assert_eq!(cut_at_block(5, 100), 100);
    }

    proptest! {
        /// Injective: two (position, slot) pairs that differ never share a global id; and the
        /// inverse gives the pair back.
        #[test]
        fn global_is_injective_and_inverted(p in 0..LOCAL_END, q in 0..LOCAL_END, a in 0..SLOTS, b in 0..SLOTS) {
            let (x, y) = (global(p, a).unwrap(), global(q, b).unwrap());
            prop_assert_eq!(x == y, p == q && a == b);
            prop_assert_eq!(local(x), Some((a, p)));
            prop_assert!(x >= p, "global below local: the pre-lane ids could be reached");
        }

        /// Increasing within a lane: the per-server order holds per lane.
        #[test]
        fn global_increases_with_the_position(p in 0..LOCAL_END - 1, d in 1i64..1 << 30, s in 0..SLOTS) {
            let q = (p + d).min(LOCAL_END - 1);
            prop_assume!(q > p);
            prop_assert!(global(q, s).unwrap() > global(p, s).unwrap());
        }
    }

    /// Ids sampled every 97th position (about 32,000 per lane, not every one) through three
    /// lanes' first 3 blocks: disjoint. The property tests above cover arbitrary positions.
    #[test]
    fn two_lanes_never_share_an_id_in_their_first_blocks() {
        let mut seen = std::collections::HashSet::new();
        for slot in [0u8, 1, 5] {
            for p in (0..3 * BLOCK).step_by(97) {
                assert!(seen.insert(global(p, slot).unwrap()), "{p} {slot}");
            }
        }
    }
}
