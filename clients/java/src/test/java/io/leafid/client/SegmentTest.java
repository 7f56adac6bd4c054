package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.math.BigInteger;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** One real leafid server (SQLite): ids, exact values, refusals, concurrency, async. */
class SegmentTest {
    private static LeafidServer server;

    @BeforeAll
    static void start() throws Exception {
        server = LeafidServer.start(LeafidServer.newDatabase());
    }

    @AfterAll
    static void stop() throws Exception {
        server.close();
    }

    private static LeafidClient client(int batch) {
        return LeafidClient.builder().servers(server.url()).batchSize(batch)
                .waitTimeout(Duration.ofSeconds(5)).build();
    }

    @Test
    void ids_of_a_tag_increase_across_batches_and_only_batches_fetched_are_counted() throws Exception {
        server.createTag("seq", 1000, null);
        try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(100).maxBatch(100)
                .waitTimeout(Duration.ofSeconds(5)).build()) {
            IdSupply s = c.segment("seq");
            assertEquals(s, c.segment("seq"), "one supply per tag");
            List<Long> ids = new ArrayList<>();
            for (int k = 0; k < 2500; k++) {
                ids.add(s.nextId());
            }
            Checks.strictlyIncreasing(ids);
            // One server, one client: the server's segments are contiguous, so are the ids.
            assertEquals(1L, ids.get(0));
            assertEquals(2500L, ids.get(ids.size() - 1));
            Stats st = c.stats();
            assertEquals(2500, st.idsServed());
            assertTrue(st.batches() >= 25 && st.batches() <= 27, st.toString());
            assertEquals(0, st.failovers());
            assertEquals(0, st.discardedIds());
        }
    }

    @Test
    void ids_near_two_to_the_63_are_exact_until_the_tag_is_exhausted() throws Exception {
        String start = "9223372036854770000";
        server.createTag("near-max", 1000, start);
        try (LeafidClient c = client(1000)) {
            IdSupply s = c.segment("near-max");
            List<Long> ids = new ArrayList<>();
            RejectedException end = null;
            while (ids.size() < 10_000) {
                try {
                    ids.add(s.nextId());
                } catch (RejectedException e) {
                    end = e;
                    break;
                }
            }
            assertTrue(end != null, "no biz_tag_exhausted after " + ids.size() + " ids");
            assertEquals("biz_tag_exhausted", end.code());
            assertEquals(server.url(), end.server());
            assertTrue(end.status() >= 400 && end.status() < 500);
            assertEquals(new BigInteger(start), BigInteger.valueOf(ids.get(0)));
            for (int k = 1; k < ids.size(); k++) {
                assertEquals(ids.get(k - 1) + 1, (long) ids.get(k), "contiguous at " + k);
            }
            long last = ids.get(ids.size() - 1);
            assertTrue(last > Long.MAX_VALUE - 1000 && last < Long.MAX_VALUE, Long.toString(last));
            // And again: the refusal is final, not a failover, and repeats.
            RejectedException again = assertThrows(RejectedException.class, s::nextId);
            assertEquals("biz_tag_exhausted", again.code());
            assertEquals(0, c.stats().failovers());
        }
    }

    @Test
    void an_unknown_tag_is_a_rejection_not_a_failover() {
        try (LeafidClient c = LeafidClient.builder().servers(server.url(), server.url())
                .waitTimeout(Duration.ofSeconds(3)).build()) {
            long t0 = System.nanoTime();
            RejectedException e = assertThrows(RejectedException.class, () -> c.nextId("no-such-tag"));
            assertEquals("unknown_biz_tag", e.code());
            assertEquals(404, e.status());
            assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(2), "answered at once");
            assertEquals(0, c.stats().failovers());
            assertEquals(List.of(), c.downServers());
            CompletableFuture<Long> f = c.segment("no-such-tag").nextIdAsync();
            ExecutionException ee = assertThrows(ExecutionException.class, () -> f.get(5, TimeUnit.SECONDS));
            assertInstanceOf(RejectedException.class, ee.getCause());
        }
    }

    @Test
    void concurrent_callers_get_distinct_ids_increasing_in_real_time_order() throws Exception {
        server.createTag("many", 1000, null);
        int callers = 8;
        int each = 10_000;
        try (LeafidClient c = client(200)) {
            IdSupply s = c.segment("many");
            List<List<Checks.Call>> per = new ArrayList<>();
            List<Thread> threads = new ArrayList<>();
            List<Throwable> errors = new ArrayList<>();
            for (int t = 0; t < callers; t++) {
                List<Checks.Call> mine = new ArrayList<>(each);
                per.add(mine);
                Thread th = new Thread(() -> {
                    try {
                        for (int k = 0; k < each; k++) {
                            long a = System.nanoTime();
                            long id = s.nextId();
                            mine.add(new Checks.Call(a, System.nanoTime(), id));
                        }
                    } catch (Throwable e) {
                        synchronized (errors) {
                            errors.add(e);
                        }
                    }
                });
                threads.add(th);
                th.start();
            }
            for (Thread th : threads) {
                th.join();
            }
            assertEquals(List.of(), errors);
            List<Checks.Call> all = new ArrayList<>();
            List<Long> ids = new ArrayList<>();
            for (List<Checks.Call> mine : per) {
                List<Long> mineIds = new ArrayList<>();
                for (Checks.Call call : mine) {
                    mineIds.add(call.id);
                }
                Checks.strictlyIncreasing(mineIds);
                ids.addAll(mineIds);
                all.addAll(mine);
            }
            assertEquals(callers * each, ids.size());
            Checks.noDuplicates(ids);
            Checks.linearizable(all);
            assertEquals(callers * each, c.stats().idsServed());
        }
    }

    @Test
    void a_zero_wait_on_a_cold_tag_is_a_timeout_not_a_server_failure() throws Exception {
        server.createTag("cold", 1000, null);
        try (LeafidClient c = client(10)) {
            UnavailableException e = assertThrows(UnavailableException.class,
                    () -> c.segment("cold").nextId(Duration.ZERO));
            assertTrue(e.getMessage().contains("within the 0 ms wait: timed out"), e.getMessage());
            assertTrue(e.lastFault().isEmpty(), e.getMessage());
            assertEquals(List.of(), c.downServers());
            // The refill it started still delivers.
            assertTrue(c.segment("cold").nextId() > 0);
        }
    }

    @Test
    void https_base_urls_are_accepted() {
        try (LeafidClient c = LeafidClient.builder().servers("https://127.0.0.1:1/").build()) {
            assertEquals(List.of("https://127.0.0.1:1"), c.servers());
        }
    }

    @Test
    void the_batch_size_follows_one_fast_caller_up_to_the_maximum() throws Exception {
        server.createTag("demand", 1000, null);
        try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(10).maxBatch(100_000)
                .build()) {
            IdSupply s = c.segment("demand");
            long last = 0;
            for (int k = 0; k < 200_000; k++) {
                long id = s.nextId();
                assertTrue(id > last);
                last = id;
            }
            Stats st = s.stats();
            assertTrue(st.batchSize() >= 1000 && st.batchSize() <= 100_000, st.toString());
            assertTrue(st.batches() <= 2000, st.toString());
            assertEquals(st.batchSize(), c.stats().batchSize());
        }
    }

    @Test
    void snowflake_ids_come_in_batches_and_increase() {
        try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(500).maxBatch(500).build()) {
            List<Long> ids = new ArrayList<>();
            for (int k = 0; k < 1200; k++) {
                ids.add(c.nextSnowflakeId());
            }
            Checks.strictlyIncreasing(ids);
            assertTrue(ids.get(0) > 1L << 40, "a snowflake id: " + ids.get(0));
            Stats st = c.snowflake().stats();
            assertEquals(1200, st.idsServed());
            assertTrue(st.batches() >= 3, st.toString());
            assertEquals(st.idsServed(), c.stats().idsServed());
        }
    }

    @Test
    void async_and_try_give_ids_of_the_same_stream() throws Exception {
        server.createTag("async", 1000, null);
        try (LeafidClient c = client(10)) {
            IdSupply s = c.segment("async");
            assertEquals(OptionalLong.empty(), s.tryNextId(), "nothing local yet; starts the refill");
            List<Long> ids = new ArrayList<>();
            for (int k = 0; k < 50; k++) {
                ids.add(s.nextIdAsync().get(5, TimeUnit.SECONDS));
                OptionalLong t = s.tryNextId();
                if (t.isPresent()) {
                    ids.add(t.getAsLong());
                }
                ids.add(s.nextId());
            }
            Checks.strictlyIncreasing(ids);
            assertEquals(ids.size(), c.stats().idsServed());
        }
    }

    @Test
    void a_client_that_is_closed_refuses_calls_and_wakes_its_waiters() throws Exception {
        LeafidClient c = LeafidClient.builder().servers("http://127.0.0.1:" + LeafidServer.closedPort())
                .waitTimeout(Duration.ofSeconds(30)).build();
        IdSupply s = c.segment("leaf-segment-test");
        CompletableFuture<Long> pending = s.nextIdAsync();
        CompletableFuture<Throwable> blocked = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                s.nextId();
                blocked.complete(null);
            } catch (Throwable e) {
                blocked.complete(e);
            }
        });
        t.start();
        Thread.sleep(200);
        c.close();
        assertInstanceOf(ClosedException.class, blocked.get(5, TimeUnit.SECONDS));
        ExecutionException e = assertThrows(ExecutionException.class, () -> pending.get(5, TimeUnit.SECONDS));
        assertInstanceOf(ClosedException.class, e.getCause());
        assertThrows(ClosedException.class, s::nextId);
        assertThrows(ClosedException.class, () -> c.segment("x"));
        c.close(); // idempotent
        for (Thread th : Thread.getAllStackTraces().keySet()) {
            if (th.getName().startsWith("leafid-") && !th.getName().startsWith("leafid-test") && th.isAlive()) {
                // Threads of other, still open clients of this test class would be named too:
                // none is open here.
                fail("thread left running: " + th.getName());
            }
        }
    }
}
