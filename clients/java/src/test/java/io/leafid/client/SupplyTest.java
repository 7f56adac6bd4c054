package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

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
    void the_catch_up_asks_past_the_floor_in_one_request_within_the_server_limit() {
        // Answer ended at 500, floor 1000, batch 100: 500 ids to reach the floor, then a batch.
        assertEquals(600, IdSupply.catchUpCount(1000, 500, 100));
        // Ended at the floor itself: one batch.
        assertEquals(100, IdSupply.catchUpCount(1000, 1000, 100));
        // Five million behind: the server's limit, asked again per 100000.
        assertEquals(LeafidClient.MAX_BATCH, IdSupply.catchUpCount(6_000_000, 1_000_000, 100));
        // Snowflake-sized gaps, no overflow.
        assertEquals(LeafidClient.MAX_BATCH, IdSupply.catchUpCount(Long.MAX_VALUE, 1, 100));
        // Never below the batch size.
        assertEquals(LeafidClient.MAX_BATCH, IdSupply.catchUpCount(10, 5, LeafidClient.MAX_BATCH));
    }
}
