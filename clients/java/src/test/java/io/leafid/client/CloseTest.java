package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** close() leaves no thread of the client running. */
class CloseTest {
    /** Live threads this client library (or the JDK HttpClient it uses) may have started. */
    private static Set<String> clientThreads() {
        Set<String> names = new TreeSet<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            String n = t.getName();
            if (t.isAlive() && ((n.startsWith("leafid-") && !n.startsWith("leafid-test"))
                    || n.startsWith("HttpClient-"))) {
                names.add(n + "#" + t.getId());
            }
        }
        return names;
    }

    @Test
    void close_stops_every_thread_the_client_started() throws Exception {
        try (LeafidServer server = LeafidServer.start(LeafidServer.newDatabase())) {
            // After the server's start: its test helper has an HttpClient of its own.
            Set<String> before = clientThreads();
            LeafidClient c = LeafidClient.builder()
                    .servers("http://127.0.0.1:" + LeafidServer.closedPort(), server.url())
                    .batchSize(10).backoff(Duration.ofMillis(10), Duration.ofMillis(50)).build();
            for (int k = 0; k < 200; k++) {
                c.nextId("leaf-segment-test");
                c.nextSnowflakeId();
            }
            c.segment("leaf-segment-test").nextIdAsync().get(5, TimeUnit.SECONDS);
            Set<String> running = clientThreads();
            running.removeAll(before);
            assertTrue(running.stream().anyMatch(n -> n.startsWith("leafid-")),
                    "the client's own threads run while it is open: " + running);
            assertTrue(running.stream().anyMatch(n -> n.startsWith("HttpClient-")),
                    "and the HttpClient's selector: " + running);
            c.close();
            Set<String> left = clientThreads();
            left.removeAll(before);
            left.removeIf(n -> n.startsWith("HttpClient-"));
            assertEquals(Set.of(), left, "the client's own threads end within close()");
            c = null; // the JDK's HttpClient selector thread ends once the client is collected
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            Set<String> http;
            do {
                System.gc();
                Thread.sleep(100);
                http = clientThreads();
                http.removeAll(before);
            } while (!http.isEmpty() && System.nanoTime() < deadline);
            assertEquals(Set.of(), http, "no thread of the client left");
        }
    }
}
