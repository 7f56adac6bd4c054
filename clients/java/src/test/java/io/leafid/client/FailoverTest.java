package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Failover against real leafid servers sharing one SQLite database: kill -9, SIGSTOP, a closed
 * port, a lagging server, engine_disabled, every server down; malformed 200s from a tiny local
 * HTTP server (the only stand-in, for answers a real server never gives).
 */
class FailoverTest {
    /** Debian's faketime library: a server preloaded with it runs its wall clock behind. */
    private static final String LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

    private final List<AutoCloseable> cleanup = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int k = cleanup.size() - 1; k >= 0; k--) {
            cleanup.get(k).close();
        }
    }

    private LeafidServer server(Path db) throws IOException {
        return server(db, 0, Map.of());
    }

    private LeafidServer server(Path db, int port, Map<String, String> env) throws IOException {
        LeafidServer s = LeafidServer.start(db, port, env);
        cleanup.add(s);
        return s;
    }

    private LeafidClient client(LeafidClient.Builder b) {
        LeafidClient c = b.build();
        cleanup.add(c);
        return c;
    }

    /**
     * Short waits and backoffs; a request timeout a healthy server meets on a loaded machine too
     * (400 ms did not always: a healthy server was then marked down as well).
     */
    private static LeafidClient.Builder fast(String... servers) {
        return LeafidClient.builder().servers(servers).requestTimeout(Duration.ofMillis(1000))
                .waitTimeout(Duration.ofSeconds(5)).backoff(Duration.ofMillis(20), Duration.ofMillis(200));
    }

    private static String closedUrl() throws IOException {
        return "http://127.0.0.1:" + LeafidServer.closedPort();
    }

    @Test
    void a_closed_port_first_is_skipped_in_the_same_call() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer a = server(db);
        String dead = closedUrl();
        LeafidClient c = client(fast(dead, a.url()).batchSize(50));
        long id = c.nextId("leaf-segment-test");
        assertTrue(id > 0);
        assertEquals(1, c.stats().failovers());
        assertEquals(List.of(dead), c.downServers());
        assertEquals(a.url(), c.preferredServer());
        for (int k = 0; k < 500; k++) {
            c.nextId("leaf-segment-test");
        }
        assertEquals(1, c.stats().failovers(), "a down server is not asked again");
    }

    @Test
    void kill_9_of_the_preferred_server_reaches_no_caller() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer a = server(db);
        LeafidServer b = server(db);
        LeafidClient c = client(fast(a.url(), b.url()).batchSize(50));
        IdSupply seg = c.segment("leaf-segment-test");
        IdSupply snow = c.snowflake();
        List<Long> segIds = new ArrayList<>();
        List<Long> snowIds = new ArrayList<>();
        for (int k = 0; k < 3000; k++) {
            if (k == 1000) {
                a.kill();
            }
            segIds.add(seg.nextId());
            snowIds.add(snow.nextId());
        }
        Checks.strictlyIncreasing(segIds);
        Checks.strictlyIncreasing(snowIds);
        assertTrue(c.stats().failovers() >= 1, c.stats().toString());
        assertEquals(b.url(), c.preferredServer());
        assertEquals(List.of(a.url()), c.downServers());
        assertEquals(6000, c.stats().idsServed());
    }

    @Test
    void a_stopped_server_times_out_is_skipped_and_is_used_again_after_its_probe() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer a = server(db);
        LeafidServer b = server(db);
        LeafidClient c = client(fast(a.url(), b.url()).batchSize(20));
        IdSupply seg = c.segment("leaf-segment-test");
        List<Long> ids = new ArrayList<>();
        for (int k = 0; k < 100; k++) {
            ids.add(seg.nextId());
        }
        // Let A's background lease of its next segment finish first: a server stopped inside its
        // SQLite write transaction holds the shared file's lock (busy_timeout 10 s), and B could
        // not lease either (seen once in 3 runs without this pause).
        Thread.sleep(300);
        a.pause();
        try {
            for (int k = 0; k < 300; k++) {
                ids.add(seg.nextId());
            }
            assertEquals(List.of(a.url()), c.downServers());
            assertEquals(b.url(), c.preferredServer());
            Thread.sleep(500); // probes of the stopped server time out too
            assertEquals(List.of(a.url()), c.downServers());
        } finally {
            a.resume();
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!c.downServers().isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(List.of(), c.downServers(), "the probe brought it back");
        for (int k = 0; k < 100; k++) {
            ids.add(seg.nextId());
        }
        Checks.strictlyIncreasing(ids);
        assertTrue(c.stats().failovers() >= 1);
    }

    @Test
    void a_lagging_server_ids_are_cut_below_the_floor_and_counted() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer a = server(db);
        LeafidServer b = server(db);
        a.createTag("lag", 1000, null);
        // B leases the tag's first segment now; A leases a later one for the client.
        assertEquals(200, b.get("/api/v1/segment/lag/ids?count=1").statusCode());
        LeafidClient c = client(fast(a.url(), b.url()).batchSize(100));
        IdSupply s = c.segment("lag");
        List<Long> ids = new ArrayList<>();
        for (int k = 0; k < 300; k++) {
            ids.add(s.nextId());
        }
        assertTrue(ids.get(0) > 1000, "from A's segment: " + ids.get(0));
        a.kill();
        for (int k = 0; k < 1000; k++) {
            ids.add(s.nextId());
        }
        Checks.strictlyIncreasing(ids);
        Stats st = c.stats();
        assertTrue(st.discardedIds() > 0, st.toString());
        assertEquals(1300, st.idsServed());
    }

    @Test
    void a_server_found_behind_is_asked_last_so_a_healthy_one_serves_again() throws Exception {
        // X's wall clock runs 10 s behind (libfaketime; both on the direct generator, whose ids
        // follow the clock): its ids lie below Y's for 10 s, longer than the wait timeout. The
        // client takes from Y, Y is stopped (so X is asked and found behind), and continued:
        // from then on Y must serve again at once rather than X being asked until it catches
        // up (which would outlast the wait timeout).
        assertTrue(Files.exists(Paths.get(LIBFAKETIME)), LIBFAKETIME + " is missing: apt-get install faketime");
        Path db = LeafidServer.newDatabase();
        LeafidServer y = server(db, 0, Map.of("LEAFID__SNOWFLAKE__GENERATOR", "direct"));
        LeafidServer x = server(db, 0, Map.of("LEAFID__SNOWFLAKE__GENERATOR", "direct",
                "LD_PRELOAD", LIBFAKETIME, "FAKETIME", "-10", "DONT_FAKE_MONOTONIC", "1"));
        LeafidClient c = client(fast(y.url(), x.url()).batchSize(50).requestTimeout(Duration.ofMillis(300)));
        IdSupply s = c.snowflake();
        List<Long> ids = new ArrayList<>();
        for (int k = 0; k < 200; k++) {
            ids.add(s.nextId());
        }
        y.pause();
        Thread resume = new Thread(() -> {
            try {
                Thread.sleep(1000);
                y.resume();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        resume.start();
        try {
            for (int k = 0; k < 600; k++) {
                ids.add(s.nextId());
            }
        } finally {
            resume.join();
        }
        Checks.strictlyIncreasing(ids);
        assertEquals(800, c.stats().idsServed(), c.stats().toString());
        assertTrue(c.stats().discardedIds() > 0, "X was asked and found behind: " + c.stats());
    }

    @Test
    void engine_disabled_is_that_server_s_failure() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer off = server(db, 0, Map.of("LEAFID__SNOWFLAKE__ENABLED", "false"));
        LeafidServer on = server(db);
        assertEquals(404 / 100, off.get("/api/v1/snowflake/ids?count=1").statusCode() / 100);
        LeafidClient c = client(fast(off.url(), on.url()).batchSize(100));
        List<Long> ids = new ArrayList<>();
        for (int k = 0; k < 300; k++) {
            ids.add(c.nextSnowflakeId());
        }
        Checks.strictlyIncreasing(ids);
        // Its /health/ready answers 200 (it is ready, only that engine is off), so its probe
        // marks it up again and a later refill may ask it again: one failover each time.
        assertTrue(c.stats().failovers() >= 1, c.stats().toString());
        assertEquals(on.url(), c.preferredServer());
    }

    @Test
    void every_server_down_is_unavailable_after_the_wait_naming_the_last_failure() throws Exception {
        String d1 = closedUrl();
        String d2 = closedUrl();
        LeafidClient c = client(fast(d1, d2).waitTimeout(Duration.ofMillis(800)));
        long t0 = System.nanoTime();
        UnavailableException e = assertThrows(UnavailableException.class, () -> c.nextId("leaf-segment-test"));
        long took = System.nanoTime() - t0;
        assertTrue(took >= TimeUnit.MILLISECONDS.toNanos(700) && took < TimeUnit.SECONDS.toNanos(3), took + " ns");
        assertTrue(e.lastFault().isPresent(), e.getMessage());
        assertTrue(List.of(d1, d2).contains(e.lastFault().get().server()));
        assertEquals(ServerFault.Kind.TRANSPORT, e.lastFault().get().kind());
        assertTrue(e.getMessage().contains("127.0.0.1"), e.getMessage());
        CompletableFuture<Long> f = c.snowflake().nextIdAsync(Duration.ofMillis(300));
        ExecutionException ee = assertThrows(ExecutionException.class, () -> f.get(5, TimeUnit.SECONDS));
        assertInstanceOf(UnavailableException.class, ee.getCause());
        // A cancelled wait ends at once and leaves the supply usable.
        CompletableFuture<Long> waiting = c.snowflake().nextIdAsync(Duration.ofSeconds(30));
        assertTrue(waiting.cancel(true));
        assertTrue(waiting.isCancelled());
        CompletableFuture<Long> again = c.snowflake().nextIdAsync(Duration.ofMillis(200));
        ExecutionException e2 = assertThrows(ExecutionException.class, () -> again.get(5, TimeUnit.SECONDS));
        assertInstanceOf(UnavailableException.class, e2.getCause());
    }

    @Test
    void a_server_that_comes_back_on_its_port_serves_again() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer a = server(db);
        int port = a.port();
        a.kill();
        LeafidClient c = client(fast(a.url()).waitTimeout(Duration.ofMillis(500)));
        assertThrows(UnavailableException.class, () -> c.nextId("leaf-segment-test"));
        server(db, port, Map.of());
        // The same client, without any rebuild: a refill asks the down server as a last resort,
        // and its probe marks it up.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        while (!c.downServers().isEmpty() && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(List.of(), c.downServers());
        assertTrue(c.nextId("leaf-segment-test") > 0);
    }

    /** A local HTTP server answering every request with one status and body. */
    private HttpServer fake(int status, String body, AtomicInteger hits) throws IOException {
        HttpServer h = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        h.createContext("/", ex -> {
            hits.incrementAndGet();
            byte[] b = body.getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().add("Content-Type", "application/json");
            ex.sendResponseHeaders(status, b.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(b);
            }
        });
        h.start();
        cleanup.add(() -> h.stop(0));
        return h;
    }

    /** A range route's body: {@code count} and runs given as first, last, first, last... */
    private static String ranges(String tag, int count, String... ends) {
        StringBuilder b = new StringBuilder("{\"biz_tag\":\"" + tag + "\",\"count\":" + count + ",\"ranges\":[");
        for (int k = 0; k < ends.length; k += 2) {
            b.append(k == 0 ? "" : ",").append("{\"first\":\"").append(ends[k]).append("\",\"last\":\"")
                    .append(ends[k + 1]).append("\"}");
        }
        return b.append("]}").toString();
    }

    @Test
    void malformed_answers_and_foreign_4xx_are_failovers_and_none_of_their_ids_is_used() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer real = server(db);
        String tag = "leaf-segment-test";
        String[][] cases = {
            {"200", "not json"},
            {"200", ranges(tag, 2, "900000", "900001", "900001", "900001")}, // overlapping
            {"200", ranges(tag, 2, "900002", "900002", "900000", "900000")}, // decreasing
            {"200", ranges("other", 1, "900000", "900000")},
            {"200", ranges(tag, 4, "900000", "900003")}, // more than the 3 asked
            {"200", ranges(tag, 3, "900000", "900001")}, // count says 3, runs hold 2
            {"200", ranges(tag, 1, "0", "0")},
            {"200", ranges(tag, 1, "900001", "900000")}, // empty run
            {"200", ranges(tag, 1, "9223372036854775808", "9223372036854775808")},
            {"200", "{\"biz_tag\":\"" + tag + "\",\"ids\":[\"900000\"]}"}, // the list route's shape
            {"404", "{\"code\":\"engine_disabled\",\"message\":\"off\"}"},
            {"404", "<html>not found</html>"},
            {"503", "{\"code\":\"segments_not_ready\",\"message\":\"x\"}"},
        };
        for (String[] k : cases) {
            AtomicInteger hits = new AtomicInteger();
            HttpServer f = fake(Integer.parseInt(k[0]), k[1], hits);
            String fakeUrl = "http://127.0.0.1:" + f.getAddress().getPort();
            try (LeafidClient c = fast(fakeUrl, real.url()).batchSize(3).maxBatch(3).build()) {
                List<Long> ids = new ArrayList<>();
                for (int n = 0; n < 20; n++) {
                    ids.add(c.nextId(tag));
                }
                Checks.strictlyIncreasing(ids);
                for (long id : ids) {
                    assertTrue(id < 900000 && id > 0, k[1] + ": id " + id);
                }
                assertTrue(hits.get() >= 1, "the fake was asked");
                assertTrue(c.stats().failovers() >= 1, k[1]);
                assertFalse(c.preferredServer().equals(fakeUrl), k[1]);
            }
        }
    }

    /** A daily order number in UTC, as in the conformance scenario. */
    private static final String ORDERS = "{\"prefix\":\"ORD-\",\"date\":\"yyyyMMdd\",\"width\":8,"
            + "\"reset\":\"daily\",\"time_zone\":\"UTC\"}";

    @Test
    void kill_9_under_a_formatted_supply_reaches_no_caller() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer a = server(db);
        a.createFormattedTag("orders", 100, ORDERS);
        LeafidServer b = server(db); // started after the tag exists: it knows the format
        LeafidClient c = client(fast(a.url(), b.url()).batchSize(50));
        FormattedSupply s = c.formatted("orders");
        List<String> ids = new ArrayList<>();
        for (int k = 0; k < 3000; k++) {
            if (k == 1000) {
                a.kill();
            }
            ids.add(s.nextId());
        }
        for (int k = 0; k < ids.size(); k++) {
            assertTrue(ids.get(k).matches("^ORD-[0-9]{8}[0-9]{8}$"), ids.get(k));
            if (k > 0) {
                assertTrue(Texts.compare(ids.get(k - 1), ids.get(k)) < 0, ids.get(k - 1) + " then " + ids.get(k));
            }
        }
        assertTrue(c.stats().failovers() >= 1, c.stats().toString());
        assertEquals(b.url(), c.preferredServer());
        assertEquals(3000, c.stats().idsServed());
    }

    @Test
    void malformed_formatted_answers_are_failovers_and_refusals_are_not() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer real = server(db);
        real.createFormattedTag("orders", 100, ORDERS);
        String end = ",\"period\":\"20991231\",\"period_end\":\"2100-01-01T00:00:00Z\"}";
        String[] bad = {
            "not json",
            "{\"biz_tag\":\"orders\",\"ids\":[\"ORD-2099123100000002\",\"ORD-2099123100000001\"]" + end,
            "{\"biz_tag\":\"other\",\"ids\":[\"ORD-2099123100000001\"]" + end,
            "{\"biz_tag\":\"orders\",\"ids\":[\"ORD-2099123100000001\"]}", // texts, no period_end
            "{\"biz_tag\":\"orders\",\"ids\":[\"ORD-2099123100000001\"],\"period_end\":\"soon\"}",
            "{\"biz_tag\":\"orders\",\"ids\":[\"\"]" + end,
            "{\"biz_tag\":\"orders\",\"count\":1,\"ranges\":[{\"first\":\"1\",\"last\":\"1\"}]}",
        };
        for (String body : bad) {
            AtomicInteger hits = new AtomicInteger();
            HttpServer f = fake(200, body, hits);
            String fakeUrl = "http://127.0.0.1:" + f.getAddress().getPort();
            try (LeafidClient c = fast(fakeUrl, real.url()).batchSize(3).maxBatch(3).build()) {
                FormattedSupply s = c.formatted("orders");
                for (int n = 0; n < 10; n++) {
                    String id = s.nextId();
                    assertFalse(id.startsWith("ORD-2099"), body + ": " + id);
                }
                assertTrue(hits.get() >= 1, "the fake was asked");
                assertTrue(c.stats().failovers() >= 1, body);
                assertFalse(c.preferredServer().equals(fakeUrl), body);
            }
        }
        String[][] refusals = {
            {"200", "{\"biz_tag\":\"orders\",\"ids\":[1,2,3]}", "not_formatted"},
            {"503", "{\"code\":\"sequence_exhausted\",\"message\":\"x\"}", "sequence_exhausted"},
            {"400", "{\"code\":\"formatted_tag\",\"message\":\"x\"}", "formatted_tag"},
        };
        for (String[] k : refusals) {
            AtomicInteger hits = new AtomicInteger();
            HttpServer f = fake(Integer.parseInt(k[0]), k[1], hits);
            String fakeUrl = "http://127.0.0.1:" + f.getAddress().getPort();
            try (LeafidClient c = fast(fakeUrl, real.url()).batchSize(3).build()) {
                RejectedException e = assertThrows(RejectedException.class, () -> c.formatted("orders").nextId());
                assertEquals(k[2], e.code());
                assertEquals(Integer.parseInt(k[0]), e.status());
                assertEquals(0, c.stats().failovers(), k[1]);
            }
        }
    }
}
