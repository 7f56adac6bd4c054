package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The demand rule for the size of a batch request (PROTOCOL.md), as a pure function. */
class BatchSizeTest {
    private static final long MS = 1_000_000L;
    private static final long TARGET = 1000 * MS;

    /** The next size after a batch of {@code ids} with {@code used} of them taken in {@code ms}. */
    private static int next(int size, long ids, long used, long ms, boolean starved, int min, int max) {
        return BatchSize.next(size, ids, used, ms * MS, starved, min, max, TARGET);
    }

    @Test
    void a_batch_that_would_not_last_half_the_target_doubles_the_size() {
        // 100 of 1000 ids in 10 ms: the batch lasts 100 ms.
        assertEquals(2000, next(1000, 1000, 100, 10, false, 1000, 1_000_000));
        // Just below half the target: 499.9 ms.
        assertEquals(2000, next(1000, 1000, 1000, 499, false, 1000, 1_000_000));
    }

    @Test
    void a_batch_that_lasts_about_the_target_keeps_the_size() {
        assertEquals(4000, next(4000, 4000, 4000, 500, false, 1000, 1_000_000));
        assertEquals(4000, next(4000, 4000, 400, 100, false, 1000, 1_000_000));
        assertEquals(4000, next(4000, 4000, 2000, 1000, false, 1000, 1_000_000));
    }

    @Test
    void a_batch_that_would_last_over_twice_the_target_halves_the_size() {
        // 10 of 8000 ids in 10 ms: the batch lasts 8 s.
        assertEquals(4000, next(8000, 8000, 10, 10, false, 1000, 1_000_000));
        // Nothing used at all (counted as 1 id) for a second: a very long lifetime.
        assertEquals(4000, next(8000, 8000, 0, 1000, false, 1000, 1_000_000));
    }

    @Test
    void the_size_stays_within_the_batch_size_and_the_maximum() {
        assertEquals(1000, next(1000, 1000, 1, 1000, false, 1000, 1_000_000), "never below batch");
        assertEquals(1000, next(1500, 1500, 1, 1000, false, 1000, 1_000_000), "halving stops at batch");
        assertEquals(1_000_000, next(1_000_000, 1_000_000, 1_000_000, 1, false, 1000, 1_000_000));
        assertEquals(100_000, next(80_000, 80_000, 80_000, 1, false, 10, 100_000), "doubling stops at max");
        assertEquals(100_000, next(80_000, 80_000, 8000, 1, true, 10, 100_000));
        assertEquals(7, next(7, 7, 7, 1, true, 7, 7), "a fixed size");
    }

    @Test
    void a_starved_supply_doubles_even_when_its_batch_seemed_long_lived() {
        assertEquals(2000, next(1000, 1000, 1, 10_000, true, 1000, 1_000_000));
        assertEquals(2000, next(1000, 0, 0, 0, true, 1000, 1_000_000));
    }

    @Test
    void without_a_batch_in_use_the_size_stays() {
        assertEquals(1000, next(1000, 0, 0, 0, false, 1000, 1_000_000));
    }

    @Test
    void a_batch_current_for_under_a_millisecond_counts_one() {
        // 10 ids of 10 in 0 ms count as 1 ms: lifetime 1 ms, doubles.
        assertEquals(20, next(10, 10, 10, 0, false, 10, 100_000));
        // 1 id of 10000 in 0 ms: lifetime 10 s at 1 ms, halves.
        assertEquals(5000, BatchSize.next(10_000, 10_000, 1, 0, false, 1000, 1_000_000, TARGET));
    }
}
