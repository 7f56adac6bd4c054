package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Strict tags (issue 45): an answer with {@code "strict": true} turns a supply into
 * pass-through for good: the ids it holds and that answer's are discarded, no prefetch starts
 * again, and every later call is one request for one id. Against a scripted local HTTP server
 * that records every count asked. (The conformance suite's {@code strict} scenario runs the
 * same rules against real servers.)
 */
class StrictTest {
    private final List<AutoCloseable> cleanup = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int k = cleanup.size() - 1; k >= 0; k--) {
            cleanup.get(k).close();
        }
    }

    /** The answer to request {@code n} (from 0) for {@code count} ids: one run from {@code first}. */
    private interface Script {
        long[] answer(int count, int n); // {first, strict ? 1 : 0}
    }

    /** A local server answering by a script, recording every count asked. */
    private final class Fake {
        final List<Integer> counts = Collections.synchronizedList(new ArrayList<>());
        final String base;

        Fake(Script script) throws IOException {
            HttpServer h = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            h.setExecutor(java.util.concurrent.Executors.newFixedThreadPool(8));
            h.createContext("/", ex -> {
                String body;
                if (ex.getRequestURI().getPath().startsWith("/health")) {
                    body = "{}";
                } else {
                    String q = ex.getRequestURI().getQuery();
                    int count = Integer.parseInt(q.replaceAll(".*count=([0-9]+).*", "$1"));
                    long[] a;
                    synchronized (counts) {
                        a = script.answer(count, counts.size());
                        counts.add(count);
                    }
                    body = "{\"biz_tag\":\"msgs\",\"count\":" + count + ",\"ranges\":[{\"first\":\"" + a[0]
                            + "\",\"last\":\"" + (a[0] + count - 1) + "\"}]" + (a[1] == 1 ? ",\"strict\":true" : "")
                            + "}";
                }
                byte[] b = body.getBytes(StandardCharsets.UTF_8);
                ex.getResponseHeaders().add("Content-Type", "application/json");
                ex.sendResponseHeaders(200, b.length);
                try (OutputStream o = ex.getResponseBody()) {
                    o.write(b);
                }
            });
            h.start();
            cleanup.add(() -> h.stop(0));
            base = "http://127.0.0.1:" + h.getAddress().getPort();
        }

        List<Integer> seen() {
            synchronized (counts) {
                return new ArrayList<>(counts);
            }
        }
    }

    /** Consecutive ids from 1; answers from request {@code strictFrom} on are marked strict. */
    private static Script consecutive(int strictFrom) {
        long[] next = {1};
        return (count, n) -> {
            long first = next[0];
            next[0] += count;
            return new long[] {first, n >= strictFrom ? 1 : 0};
        };
    }

    private LeafidClient client(Fake f, int batch) {
        LeafidClient c = LeafidClient.builder().servers(List.of(f.base)).batchSize(batch)
                .waitTimeout(Duration.ofSeconds(3)).build();
        cleanup.add(c::close);
        return c;
    }

    private static List<Integer> ones(int first, int n) {
        List<Integer> out = new ArrayList<>();
        if (first > 0) {
            out.add(first);
        }
        for (int k = 0; k < n; k++) {
            out.add(1);
        }
        return out;
    }

    @Test
    void aStrictAnswerTurnsTheSupplyIntoPassThrough() throws Exception {
        Fake f = new Fake(consecutive(0));
        LeafidClient c = client(f, 50);
        for (int k = 0; k < 21; k++) {
            // The first answer (1..50) revealed the tag strict: dropped whole, never handed out.
            assertEquals(51 + k, c.nextId("msgs"));
        }
        Thread.sleep(50); // a prefetch, if one were started, would show now
        assertEquals(ones(50, 21), f.seen(), "one request of one id per call");
        assertFalse(c.segment("msgs").tryNextId().isPresent());
        assertEquals(ones(50, 21), f.seen());
        Stats s = c.stats();
        assertEquals(21, s.idsServed());
        assertEquals(21, s.batches());
        assertEquals(50, s.discardedIds());

        // The future form passes through too.
        CompletableFuture<Long> a = c.segment("msgs").nextIdAsync();
        assertEquals(72L, a.get());

        // Threads: each call its own request; ids distinct, per thread increasing.
        ConcurrentLinkedQueue<Long> all = new ConcurrentLinkedQueue<>();
        List<Thread> threads = new ArrayList<>();
        List<Throwable> failed = Collections.synchronizedList(new ArrayList<>());
        for (int t = 0; t < 4; t++) {
            Thread th = new Thread(() -> {
                long prev = 0;
                for (int k = 0; k < 25; k++) {
                    long id = c.nextId("msgs");
                    if (id <= prev) {
                        failed.add(new AssertionError(id + " after " + prev));
                    }
                    prev = id;
                    all.add(id);
                }
            });
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join();
        }
        assertTrue(failed.isEmpty(), String.valueOf(failed));
        List<Long> sorted = new ArrayList<>(all);
        Collections.sort(sorted);
        for (int k = 0; k < 100; k++) {
            assertEquals(73 + k, sorted.get(k));
        }
        assertEquals(1 + 22 + 100, f.seen().size());
    }

    @Test
    void aSupplyTurningStrictDropsWhatItHolds() throws Exception {
        // The first answer is plain (buffered); its preload's answer is strict.
        Fake f = new Fake(consecutive(1));
        LeafidClient c = client(f, 10);
        List<Long> ids = new ArrayList<>();
        ids.add(c.nextId("msgs"));
        ids.add(c.nextId("msgs")); // the run at 10% starts the refill
        for (int k = 0; k < 200 && f.seen().size() < 2; k++) {
            Thread.sleep(5);
        }
        // Until the strict answer is taken (its ids discarded): polled, not slept, for a slow machine.
        for (int k = 0; k < 1000 && c.stats().discardedIds() == 0; k++) {
            Thread.sleep(5);
        }
        List<Integer> seen = f.seen();
        assertEquals(2, seen.size(), "the first request and its preload");
        long strictLast = 10 + seen.get(1);
        for (int k = 0; k < 5; k++) {
            long id = c.nextId("msgs");
            assertTrue(id > strictLast, id + " handed out after the strict answer up to " + strictLast);
            ids.add(id);
        }
        for (int k = 1; k < ids.size(); k++) {
            assertTrue(ids.get(k) > ids.get(k - 1), String.valueOf(ids));
        }
        assertEquals(ones(0, 5), f.seen().subList(2, f.seen().size()));
        Stats s = c.stats();
        assertEquals(7, s.idsServed());
        assertEquals(8 + seen.get(1), s.discardedIds(), "the 8 ids held and the strict answer");
    }

    @Test
    void aPassThroughIdAtOrBelowTheFloorIsNeverHandedOut() throws Exception {
        // Strict 1..20 first (discarded, floor 20); then 7 (behind: a strict server never answers
        // it); then 30, 31.
        Fake f = new Fake((count, n) -> new long[] {n == 0 ? 1 : n == 1 ? 7 : 28 + n, 1});
        LeafidClient c = client(f, 20);
        assertEquals(30, c.nextId("msgs"));
        assertEquals(31, c.nextId("msgs"));
        assertEquals(List.of(20, 1, 1, 1), f.seen());
        Stats s = c.stats();
        assertEquals(2, s.idsServed());
        assertEquals(21, s.discardedIds());
    }
}
