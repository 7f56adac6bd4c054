package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The snowflake bounds helper against real leafid servers: the client's answer equals the
 * route's and holds the ids taken in its range; the server's refusals are
 * {@code rejected}/{@code invalid_time_range} without failover; a failed server (stopped,
 * {@code engine_disabled}, and, from a tiny local HTTP server, answers a real server never
 * gives) is a failover; every server down is {@link UnavailableException}.
 */
class BoundsTest {
    private final List<AutoCloseable> cleanup = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int k = cleanup.size() - 1; k >= 0; k--) {
            cleanup.get(k).close();
        }
    }

    private LeafidServer server(Path db, Map<String, String> env) throws IOException {
        LeafidServer s = LeafidServer.start(db, 0, env);
        cleanup.add(s);
        return s;
    }

    private LeafidClient client(String... servers) {
        LeafidClient c = LeafidClient.builder().servers(servers).batchSize(100)
                .requestTimeout(Duration.ofMillis(1000)).waitTimeout(Duration.ofSeconds(3))
                .backoff(Duration.ofMillis(20), Duration.ofMillis(200)).build();
        cleanup.add(c);
        return c;
    }

    /** The route's own answer, {min_id, max_id}, for RFC 3339 instants as written. */
    private static long[] route(LeafidServer s, String from, String to) throws Exception {
        HttpResponse<String> r = s.get("/api/v1/snowflake/bounds?from=" + URLEncoder.encode(from, StandardCharsets.UTF_8)
                + "&to=" + URLEncoder.encode(to, StandardCharsets.UTF_8) + "&stringify_ids=true");
        assertEquals(200, r.statusCode(), r.body());
        Map<?, ?> m = (Map<?, ?>) Json.parse(r.body());
        return new long[] {Long.parseLong((String) m.get("min_id")), Long.parseLong((String) m.get("max_id"))};
    }

    @Test
    void bounds_equal_the_route_and_hold_the_ids_taken_in_their_range() throws Exception {
        LeafidServer a = server(LeafidServer.newDatabase(), Map.of());
        LeafidClient c = client(a.url());
        Instant from = Instant.ofEpochMilli(System.currentTimeMillis() - 60_000);
        List<Long> ids = new ArrayList<>();
        for (int k = 0; k < 500; k++) {
            ids.add(c.nextSnowflakeId());
        }
        Instant to = Instant.ofEpochMilli(System.currentTimeMillis() + 60_000);
        IdBounds b = c.snowflakeBounds(from, to);
        long[] want = route(a, from.toString(), to.toString());
        assertEquals(new IdBounds(want[0], want[1]), b);
        assertTrue(0 < b.minId() && b.minId() < b.maxId(), b.toString());
        for (long id : ids) {
            assertTrue(b.contains(id), id + " outside " + b);
        }
        // One millisecond of the default layout (41/10/12): 2^22 ids, the tick's first to last.
        Instant t = Instant.parse("2026-11-27T00:00:00Z");
        IdBounds ms = c.snowflakeBounds(t, t.plusMillis(1));
        assertEquals((1L << 22) - 1, ms.maxId() - ms.minId(), ms.toString());
        long[] tick = route(a, "2026-11-27T00:00:00.000Z", "2026-11-27T00:00:00.001Z");
        assertEquals(new IdBounds(tick[0], tick[1]), ms);
        // Adjacent ranges tile.
        IdBounds next = c.snowflakeBounds(t.plusMillis(1), t.plusMillis(2));
        assertEquals(ms.maxId() + 1, next.minId());
        // A sub-millisecond part widens the range to whole milliseconds (from down, to up), so
        // an id of the range is never left out: [t + 0.4 ms, t + 1.2 ms) is [t, t + 2 ms).
        IdBounds wide = c.snowflakeBounds(t.plusNanos(400_000), t.plusNanos(1_200_000));
        assertEquals(new IdBounds(ms.minId(), next.maxId()), wide);
        Stats st = c.stats();
        assertEquals(0, st.failovers(), st.toString());
    }

    @Test
    void an_empty_range_and_a_time_before_the_epoch_are_rejected_invalid_time_range() throws Exception {
        LeafidServer a = server(LeafidServer.newDatabase(), Map.of());
        LeafidServer b = server(a.database(), Map.of());
        LeafidClient c = client(a.url(), b.url());
        Instant t = Instant.parse("2026-11-27T00:00:00Z");
        Instant[][] refused = {
            {t, t}, // empty
            {t.plusSeconds(1), t}, // reversed
            {Instant.parse("2000-01-01T00:00:00Z"), Instant.parse("2000-01-02T00:00:00Z")}, // before 2010's epoch
            {t, Instant.parse("9999-12-31T23:59:59.999Z")}, // past the 41-bit time field (2080)
        };
        for (Instant[] r : refused) {
            RejectedException e = assertThrows(RejectedException.class, () -> c.snowflakeBounds(r[0], r[1]),
                    r[0] + ".." + r[1]);
            assertEquals("invalid_time_range", e.code(), e.getMessage());
            assertEquals(400, e.status());
            assertEquals(a.url(), e.server(), "the preferred server answered; no other was asked");
        }
        assertEquals(0, c.stats().failovers(), "a refusal is not a failover");
        assertEquals(List.of(), c.downServers());
        assertThrows(NullPointerException.class, () -> c.snowflakeBounds(null, t));
        assertThrows(NullPointerException.class, () -> c.snowflakeBounds(t, null));
    }

    @Test
    void a_failed_server_is_a_failover_and_every_server_down_is_unavailable() throws Exception {
        Path db = LeafidServer.newDatabase();
        LeafidServer off = server(db, Map.of("LEAFID__SNOWFLAKE__ENABLED", "false"));
        LeafidServer on = server(db, Map.of());
        String from = "2026-11-27T00:00:00.000Z";
        String to = "2026-11-27T01:00:00.000Z";
        long[] want = route(on, from, to);
        int dead = LeafidServer.closedPort();
        LeafidClient c = client("http://127.0.0.1:" + dead, off.url(), on.url());
        assertEquals(new IdBounds(want[0], want[1]), c.snowflakeBounds(Instant.parse(from), Instant.parse(to)));
        // A closed port and a server with the snowflake engine off (404 engine_disabled): both
        // marked down, the next one asked at once.
        assertEquals(2, c.stats().failovers(), c.stats().toString());
        assertEquals(on.url(), c.preferredServer());
        assertTrue(c.downServers().contains(off.url()), c.downServers().toString());

        // Every server stopped: no answer within the wait.
        on.pause();
        try (LeafidClient d = LeafidClient.builder().servers(on.url(), "http://127.0.0.1:" + dead)
                .requestTimeout(Duration.ofMillis(300)).waitTimeout(Duration.ofMillis(800))
                .backoff(Duration.ofMillis(20), Duration.ofMillis(100)).build()) {
            long t0 = System.nanoTime();
            UnavailableException e = assertThrows(UnavailableException.class,
                    () -> d.snowflakeBounds(Instant.parse(from), Instant.parse(to)));
            long took = (System.nanoTime() - t0) / 1_000_000;
            assertTrue(took >= 700 && took < 3000, took + " ms");
            assertTrue(e.lastFault().isPresent(), e.getMessage());
            assertTrue(d.stats().failovers() >= 1, d.stats().toString());
        } finally {
            on.resume();
        }
    }

    /** The query the client sends for 2026-11-27 (a day), exactly. */
    private static final String DAY_QUERY =
            "from=2026-11-27T00%3A00%3A00.000Z&to=2026-11-28T00%3A00%3A00.000Z&stringify_ids=true";

    /**
     * A local HTTP server answering every request with one status and body; {@code hits} counts
     * the requests of the bounds route, each checked to carry {@link #DAY_QUERY}.
     */
    private HttpServer fake(int status, String body, AtomicInteger hits) throws IOException {
        HttpServer h = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        h.createContext("/", ex -> {
            if (ex.getRequestURI().getPath().equals("/api/v1/snowflake/bounds")) {
                hits.addAndGet(DAY_QUERY.equals(ex.getRequestURI().getRawQuery()) ? 1 : 1000);
            }
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

    @Test
    void malformed_bounds_are_failovers_and_refusals_are_not() throws Exception {
        LeafidServer real = server(LeafidServer.newDatabase(), Map.of());
        Instant from = Instant.parse("2026-11-27T00:00:00Z");
        Instant to = Instant.parse("2026-11-28T00:00:00Z");
        long[] want = route(real, "2026-11-27T00:00:00.000Z", "2026-11-28T00:00:00.000Z");
        String[][] failures = {
            {"200", "not json"},
            {"200", "{\"min_id\":\"5\",\"max_id\":\"4\"}"}, // min above max
            {"200", "{\"min_id\":\"-1\",\"max_id\":\"4\"}"},
            {"200", "{\"min_id\":\"1\",\"max_id\":\"9223372036854775808\"}"}, // above 2^63-1
            {"200", "{\"min_id\":\"1\"}"},
            {"200", "{\"min_id\":\"1\",\"max_id\":\"x\"}"},
            {"404", "{\"code\":\"engine_disabled\",\"message\":\"off\"}"},
            {"404", "{\"code\":\"not_found\",\"message\":\"no such route\"}"},
            {"500", "{\"code\":\"internal\",\"message\":\"x\"}"},
            {"503", "{\"code\":\"clock_moved_backwards\",\"message\":\"x\"}"},
        };
        for (String[] k : failures) {
            AtomicInteger hits = new AtomicInteger();
            HttpServer f = fake(Integer.parseInt(k[0]), k[1], hits);
            String fakeUrl = "http://127.0.0.1:" + f.getAddress().getPort();
            LeafidClient c = client(fakeUrl, real.url());
            assertEquals(new IdBounds(want[0], want[1]), c.snowflakeBounds(from, to), k[1]);
            assertEquals(1, hits.get(), k[1]);
            assertEquals(1, c.stats().failovers(), k[1]);
            assertNotEquals(fakeUrl, c.preferredServer(), k[1]);
        }
        String[] refusals = {"invalid_time_range", "invalid_request"};
        for (String code : refusals) {
            AtomicInteger hits = new AtomicInteger();
            HttpServer f = fake(400, "{\"code\":\"" + code + "\",\"message\":\"no\"}", hits);
            LeafidClient c = client("http://127.0.0.1:" + f.getAddress().getPort(), real.url());
            RejectedException e = assertThrows(RejectedException.class, () -> c.snowflakeBounds(from, to));
            assertEquals(code, e.code());
            assertEquals(0, c.stats().failovers());
            assertFalse(c.downServers().contains(real.url()));
        }
    }
}
