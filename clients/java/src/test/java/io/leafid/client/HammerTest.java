package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.function.LongSupplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The local path under contention, against a real server: several threads on one supply with
 * small batches, so that runs switch all the time. Checks the two rules the lock-free path
 * keeps: no id twice, and a call that starts after another returned gets a larger id.
 */
class HammerTest {
    private static LeafidServer server;

    @BeforeAll
    static void start() throws Exception {
        server = LeafidServer.start(LeafidServer.newDatabase());
    }

    @AfterAll
    static void stop() throws Exception {
        server.close();
    }

    private static LeafidClient client() {
        // Batches of 7 to 40 ids, so a batch is cut into two runs every few ids.
        return LeafidClient.builder().servers(server.url()).batchSize(7).maxBatch(40)
                .waitTimeout(Duration.ofSeconds(10)).build();
    }

    @Test
    void segment_ids_under_four_threads_are_unique_and_linearizable() throws Exception {
        server.createTag("hammer", 1000, null);
        try (LeafidClient c = client()) {
            IdSupply s = c.segment("hammer");
            hammer(4, 5000, s::nextId);
            assertEquals(20_000, c.stats().idsServed());
            assertTrue(c.stats().batches() >= 20_000 / 40, c.stats().toString());
        }
    }

    @Test
    void snowflake_ids_under_four_threads_are_unique_and_linearizable() throws Exception {
        try (LeafidClient c = client()) {
            hammer(4, 3000, c.snowflake()::nextId);
            assertEquals(12_000, c.stats().idsServed());
        }
    }

    /** {@code threads} callers of {@code next}, {@code each} calls each, started together. */
    private static void hammer(int threads, int each, LongSupplier next) throws Exception {
        List<List<Checks.Call>> per = new ArrayList<>();
        List<Thread> all = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        CountDownLatch go = new CountDownLatch(1);
        for (int t = 0; t < threads; t++) {
            List<Checks.Call> mine = new ArrayList<>(each);
            per.add(mine);
            Thread th = new Thread(() -> {
                try {
                    go.await();
                    for (int k = 0; k < each; k++) {
                        long a = System.nanoTime();
                        long id = next.getAsLong();
                        mine.add(new Checks.Call(a, System.nanoTime(), id));
                    }
                } catch (Throwable e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
            });
            all.add(th);
            th.start();
        }
        go.countDown();
        for (Thread th : all) {
            th.join();
        }
        assertEquals(List.of(), errors);
        List<Checks.Call> calls = new ArrayList<>();
        List<Long> ids = new ArrayList<>();
        for (List<Checks.Call> mine : per) {
            List<Long> mineIds = new ArrayList<>();
            for (Checks.Call call : mine) {
                assertTrue(call.id > 0, "id " + call.id);
                mineIds.add(call.id);
            }
            Checks.strictlyIncreasing(mineIds);
            ids.addAll(mineIds);
            calls.addAll(mine);
        }
        assertEquals(threads * each, ids.size());
        Checks.noDuplicates(ids);
        Checks.linearizable(calls);
    }
}
