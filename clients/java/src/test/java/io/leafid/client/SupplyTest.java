package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The local path on a fixed supply (no server): each id once, in order, then unavailable. */
class SupplyTest {
    @Test
    void a_fixed_supply_hands_out_its_ids_once_then_is_unavailable() {
        IdSupply s = IdSupply.fixed(new long[] {3, 4, 9}, Duration.ofMillis(50));
        assertEquals(OptionalLong.of(3), s.tryNextId());
        assertEquals(4, s.nextId());
        assertEquals(9, s.nextId());
        UnavailableException e = assertThrows(UnavailableException.class, s::nextId);
        assertFalse(e.lastFault().isPresent());
        assertEquals(OptionalLong.empty(), s.tryNextId());
        CompletableFuture<Long> f = s.nextIdAsync();
        ExecutionException ee = assertThrows(ExecutionException.class, () -> f.get(1, TimeUnit.SECONDS));
        assertInstanceOf(UnavailableException.class, ee.getCause());
        assertEquals(3, s.stats().idsServed());
    }

    @Test
    void concurrent_takers_split_a_batch_without_overlap() throws Exception {
        int n = 400_000;
        long[] ids = new long[n];
        for (int k = 0; k < n; k++) {
            ids[k] = k + 1;
        }
        IdSupply s = IdSupply.fixed(ids, Duration.ofMillis(10));
        List<Long> all = Collections.synchronizedList(new ArrayList<>());
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 4; t++) {
            Thread th = new Thread(() -> {
                List<Long> mine = new ArrayList<>();
                for (OptionalLong id = s.tryNextId(); id.isPresent(); id = s.tryNextId()) {
                    mine.add(id.getAsLong());
                }
                Checks.strictlyIncreasing(mine);
                all.addAll(mine);
            });
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join();
        }
        List<Long> sorted = new ArrayList<>(all);
        Collections.sort(sorted);
        assertEquals(n, sorted.size());
        for (int k = 0; k < n; k++) {
            assertEquals(k + 1, (long) sorted.get(k));
        }
        assertEquals(n, s.stats().idsServed());
    }

    @Test
    void the_catch_up_asks_past_the_floor_in_one_request_within_the_route_limit() {
        int segment = LeafidClient.MAX_BATCH;
        // Answer ended at 500, floor 1000, batch 100: 500 ids to reach the floor, then a batch.
        assertEquals(600, IdSupply.catchUpCount(1000, 500, 100, segment));
        // Ended at the floor itself: one batch.
        assertEquals(100, IdSupply.catchUpCount(1000, 1000, 100, segment));
        // Five million behind: the route's limit, asked again per 1000000.
        assertEquals(segment, IdSupply.catchUpCount(6_000_000, 1_000_000, 100, segment));
        assertEquals(999_100, IdSupply.catchUpCount(2_000_000, 1_001_000, 100, segment));
        // Snowflake-sized gaps, no overflow; the snowflake route's own limit.
        assertEquals(segment, IdSupply.catchUpCount(Long.MAX_VALUE, 1, 100, segment));
        assertEquals(LeafidClient.MAX_SNOWFLAKE_BATCH,
                IdSupply.catchUpCount(Long.MAX_VALUE, 1, 100, LeafidClient.MAX_SNOWFLAKE_BATCH));
        // Never below the batch size.
        assertEquals(segment, IdSupply.catchUpCount(10, 5, segment, segment));
    }

    @Test
    void a_supply_of_one_range_ending_at_the_largest_id_never_wraps() {
        IdSupply s = IdSupply.fixed(Ranges.of(Long.MAX_VALUE - 2, Long.MAX_VALUE), Duration.ofMillis(10));
        assertEquals(Long.MAX_VALUE - 2, s.nextId());
        assertEquals(Long.MAX_VALUE - 1, s.nextId());
        assertEquals(Long.MAX_VALUE, s.nextId());
        for (int k = 0; k < 3; k++) {
            assertThrows(UnavailableException.class, s::nextId);
        }
        assertEquals(3, s.stats().idsServed());
    }

    @Test
    void a_zero_wait_on_a_spent_supply_says_it_timed_out() {
        IdSupply s = IdSupply.fixed(new long[] {1}, Duration.ofMillis(10));
        assertEquals(1, s.nextId(Duration.ZERO));
        UnavailableException e = assertThrows(UnavailableException.class, () -> s.nextId(Duration.ZERO));
        assertTrue(e.getMessage().contains("within the 0 ms wait"), e.getMessage());
        assertTrue(e.getMessage().contains("timed out"), e.getMessage());
    }
}
