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
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Unordered formatted answers ({@code "ordered": false}, a permuted tag's): taken without the
 * byte-order check and without the floor, handed out in the order received, the period rule
 * still applied. A real permuted tag on two real servers (one killed while callers take); and
 * the supply logic with answers a real server cannot be made to give on demand (texts
 * decreasing across batches, a period ending at a chosen instant) from a tiny local HTTP
 * server, as the malformed-body tests do.
 */
class PermutedTest {
    /** The period end of the answers of {@link #unordered}, far ahead. */
    private static final Instant END = Instant.parse("2100-01-01T00:00:00Z");

    private final List<AutoCloseable> cleanup = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int k = cleanup.size() - 1; k >= 0; k--) {
            cleanup.get(k).close();
        }
    }

    /**
     * A local HTTP server answering the list route of tag {@code t} with {@code "ordered": false}
     * and texts that decrease within each answer and from one answer to the next (an ordered
     * supply would reject the first and cut every later one whole), as many as asked; every
     * text sent is appended to {@code sent}, in order.
     */
    private HttpServer unordered(List<String> sent) throws IOException {
        HttpServer h = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
        Pattern count = Pattern.compile("count=(\\d+)");
        h.createContext("/api/v1/segment/t/ids", ex -> {
            Matcher m = count.matcher(String.valueOf(ex.getRequestURI().getRawQuery()));
            int n = m.find() ? Integer.parseInt(m.group(1)) : 1;
            StringBuilder b = new StringBuilder("{\"biz_tag\":\"t\",\"ids\":[");
            synchronized (sent) {
                for (int k = 0; k < n; k++) {
                    String id = String.format("T-%06d", 999_999 - sent.size());
                    sent.add(id);
                    b.append(k == 0 ? "\"" : ",\"").append(id).append('"');
                }
            }
            b.append("],\"period\":\"\",\"period_end\":\"").append(END).append("\",\"ordered\":false}");
            byte[] body = b.toString().getBytes(StandardCharsets.UTF_8);
            ex.getResponseHeaders().add("Content-Type", "application/json");
            ex.sendResponseHeaders(200, body.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(body);
            }
        });
        h.createContext("/health/ready", ex -> {
            ex.sendResponseHeaders(200, -1);
            ex.close();
        });
        h.start();
        cleanup.add(() -> h.stop(0));
        return h;
    }

    private LeafidClient client(HttpServer h, SettableClock clock) {
        LeafidClient c = LeafidClient.builder().servers("http://127.0.0.1:" + h.getAddress().getPort())
                .batchSize(5).maxBatch(5).waitTimeout(Duration.ofMillis(800))
                .backoff(Duration.ofMillis(20), Duration.ofMillis(200)).clock(clock).build();
        cleanup.add(c);
        return c;
    }

    /** The conformance scenario's permuted format: FF1 over 6 Crockford base-32 digits. */
    private static final String CODES = "{\"prefix\":\"T-\",\"radix\":\"crockford32\",\"width\":6,"
            + "\"permute\":{\"key_id\":\"conformance\"}}";
    private static final Pattern CODE = Pattern.compile("^T-[0-9A-HJKMNP-TV-Z]{6}$");

    /** A fresh 32-byte key file (64 hex characters, mode 0600) for the key id {@code conformance}. */
    private static Map<String, String> keyEnv() throws IOException {
        Path dir = Files.createTempDirectory("leafid-java-key");
        Path key = dir.resolve("conformance.key");
        byte[] raw = new byte[32];
        new SecureRandom().nextBytes(raw);
        StringBuilder hex = new StringBuilder();
        for (byte b : raw) {
            hex.append(String.format("%02x", b));
        }
        Files.writeString(key, hex + "\n");
        Files.setPosixFilePermissions(key, PosixFilePermissions.fromString("rw-------"));
        return Map.of("LEAFID__SHAPES__KEYS__CONFORMANCE", key.toString());
    }

    private LeafidServer server(Path db, Map<String, String> env) throws IOException {
        LeafidServer s = LeafidServer.start(db, 0, env);
        cleanup.add(s);
        return s;
    }

    @Test
    void a_real_permuted_tag_hands_out_unique_unsorted_codes_across_a_kill_9() throws Exception {
        Map<String, String> env = keyEnv();
        Path db = LeafidServer.newDatabase();
        LeafidServer a = server(db, env);
        a.createFormattedTag("codes", 200, CODES);
        LeafidServer b = server(db, env); // started after the tag exists: it knows the format
        String raw = a.get("/api/v1/segment/codes/ids?count=3").body();
        assertTrue(raw.contains("\"ordered\":false"), "the server marks the answer unordered: " + raw);
        // maxBatch(50): a grown batch could hold the rest before the kill, so no request would
        // fail over and the test would not test a failover.
        LeafidClient c = LeafidClient.builder().servers(a.url(), b.url()).batchSize(50).maxBatch(50)
                .requestTimeout(Duration.ofMillis(1000)).waitTimeout(Duration.ofSeconds(5))
                .backoff(Duration.ofMillis(20), Duration.ofMillis(200)).build();
        cleanup.add(c);
        FormattedSupply s = c.formatted("codes");
        int threads = 4;
        int each = 500;
        List<List<String>> got = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            List<String> mine = new ArrayList<>();
            got.add(mine);
            Thread th = new Thread(() -> {
                try {
                    for (int k = 0; k < each; k++) {
                        mine.add(s.nextId());
                        Thread.sleep(1);
                    }
                } catch (Throwable e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
            });
            ts.add(th);
            th.start();
        }
        Thread.sleep(300);
        a.kill();
        for (Thread th : ts) {
            th.join();
        }
        assertTrue(errors.isEmpty(), "no error reaches a caller while a server is up: " + errors);
        Set<String> all = new HashSet<>();
        for (List<String> mine : got) {
            assertEquals(each, mine.size());
            for (String id : mine) {
                assertTrue(CODE.matcher(id).matches(), id);
                assertTrue(all.add(id), "twice: " + id);
            }
            List<String> sorted = new ArrayList<>(mine);
            sorted.sort(Texts::compare);
            assertNotEquals(sorted, mine, "a caller's permuted codes come in no order");
        }
        Stats st = c.stats();
        assertEquals(threads * each, st.idsServed(), st.toString());
        assertTrue(st.failovers() >= 1, st.toString());
        assertEquals(0, st.discardedIds(), "no floor, no period end: nothing discarded; " + st);
        assertEquals(b.url(), c.preferredServer());
    }

    @Test
    void unordered_answers_are_handed_out_in_the_order_received_without_a_floor() throws Exception {
        List<String> sent = new ArrayList<>();
        LeafidClient c = client(unordered(sent), new SettableClock(END.toEpochMilli() - 60_000));
        FormattedSupply s = c.formatted("t");
        List<String> got = new ArrayList<>();
        for (int k = 0; k < 40; k++) {
            got.add(s.nextId());
        }
        synchronized (sent) {
            assertEquals(sent.subList(0, 40), got, "in the order received, every answer taken whole");
        }
        for (int k = 1; k < got.size(); k++) {
            assertTrue(Texts.compare(got.get(k - 1), got.get(k)) > 0, "the fake's texts decrease: " + got);
        }
        Stats st = c.stats();
        assertEquals(40, st.idsServed(), st.toString());
        assertEquals(0, st.discardedIds(), "no floor: nothing cut; " + st);
        assertEquals(0, st.failovers(), st.toString());
        assertEquals(List.of(), c.downServers(), "no answer was taken for a server behind");
    }

    @Test
    void the_period_rule_still_applies_and_only_ended_texts_are_discarded() throws Exception {
        List<String> sent = new ArrayList<>();
        SettableClock clock = new SettableClock(END.toEpochMilli() - 60_000);
        LeafidClient c = client(unordered(sent), clock);
        FormattedSupply s = c.formatted("t");
        List<String> got = new ArrayList<>();
        for (int k = 0; k < 3; k++) {
            got.add(s.nextId());
        }
        // The batch fetched ahead at 10% arrives: two batches of 5, 3 texts handed out.
        long deadline = System.nanoTime() + 5_000_000_000L;
        while (c.stats().batches() < 2 && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
        assertEquals(2, c.stats().batches(), c.stats().toString());
        assertEquals(0, c.stats().discardedIds(), c.stats().toString());
        clock.set(END.toEpochMilli() - 1);
        got.add(s.nextId());
        // From the period's end on nothing of it is handed out: the 1 + 5 texts held are dropped,
        // and every later answer on arrival, all counted.
        clock.set(END.toEpochMilli());
        assertThrows(UnavailableException.class, s::nextId);
        assertFalse(s.tryNextId().isPresent());
        Stats st = c.stats();
        assertEquals(4, st.idsServed(), st.toString());
        assertEquals(2, st.batches(), st.toString());
        assertTrue(st.discardedIds() >= 6 + 5, st.toString());
        assertEquals(1, st.discardedIds() % 5, st.toString());
        synchronized (sent) {
            assertEquals(sent.subList(0, 4), got);
        }
    }
}
