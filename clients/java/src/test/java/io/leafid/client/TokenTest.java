package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Caller tokens and quotas (issue 44) against scripted local HTTP servers: the header sent, the
 * token never shown, leafid's 401/403 final, a proxy's 401 a failover, a {@code 429
 * quota_exhausted} waited out on the same server, one past the wait timeout a
 * {@link ThrottledException}. (The conformance suite's {@code tokens} scenario runs the same
 * rules against real servers.)
 */
class TokenTest {
    private static final String SECRET = "lid_0123456789abcdefSECRET";

    private final List<AutoCloseable> cleanup = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (int k = cleanup.size() - 1; k >= 0; k--) {
            cleanup.get(k).close();
        }
    }

    /** One scripted answer. */
    private static final class Reply {
        final int status;
        final String retryAfter;
        final String body;

        Reply(int status, String retryAfter, String body) {
            this.status = status;
            this.retryAfter = retryAfter;
            this.body = body;
        }
    }

    private static Reply ids(long first, long last) {
        return new Reply(200, null, "{\"biz_tag\":\"orders\",\"count\":" + (last - first + 1)
                + ",\"ranges\":[{\"first\":\"" + first + "\",\"last\":\"" + last + "\"}]}");
    }

    private static Reply refusal(int status, String retryAfter, String code) {
        return new Reply(status, retryAfter, "{\"code\":\"" + code + "\",\"message\":\"" + code + " here\"}");
    }

    /** A local server answering its replies in order (the last again), recording Authorization. */
    private static final class Fake {
        final String base;
        final List<String> auth = new CopyOnWriteArrayList<>();

        Fake(List<AutoCloseable> cleanup, Reply... replies) throws IOException {
            HttpServer h = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            h.createContext("/", ex -> {
                Reply r;
                if (ex.getRequestURI().getPath().startsWith("/health")) {
                    r = new Reply(200, null, "{}");
                } else {
                    String a = ex.getRequestHeaders().getFirst("Authorization");
                    auth.add(a == null ? "" : a);
                    r = replies[Math.min(auth.size(), replies.length) - 1];
                }
                byte[] b = r.body.getBytes(StandardCharsets.UTF_8);
                ex.getResponseHeaders().add("Content-Type", "application/json");
                if (r.retryAfter != null) {
                    ex.getResponseHeaders().add("Retry-After", r.retryAfter);
                }
                ex.sendResponseHeaders(r.status, b.length);
                try (OutputStream o = ex.getResponseBody()) {
                    o.write(b);
                }
            });
            h.start();
            cleanup.add(() -> h.stop(0));
            base = "http://127.0.0.1:" + h.getAddress().getPort();
        }
    }

    private LeafidClient client(Duration wait, Fake... servers) {
        List<String> bases = new ArrayList<>();
        for (Fake f : servers) {
            bases.add(f.base);
        }
        LeafidClient c = LeafidClient.builder().servers(bases).batchSize(10).maxBatch(10).waitTimeout(wait)
                .backoff(Duration.ofMillis(20), Duration.ofMillis(100)).token(SECRET).build();
        cleanup.add(c);
        return c;
    }

    @Test
    void every_request_carries_the_token_which_is_never_shown() throws Exception {
        Fake a = new Fake(cleanup, ids(1, 10));
        LeafidClient.Builder b = LeafidClient.builder().servers(List.of(a.base)).token(SECRET);
        assertFalse(b.toString().contains(SECRET), b.toString());
        assertTrue(b.toString().contains("<redacted>"), b.toString());
        LeafidClient c = client(Duration.ofSeconds(2), a);
        assertFalse(c.toString().contains(SECRET));
        assertEquals(1, c.segment("orders").nextId());
        assertFalse(a.auth.isEmpty());
        for (String h : a.auth) {
            assertEquals("Bearer " + SECRET, h);
        }
        assertThrows(ConfigException.class, () -> LeafidClient.builder().token("two words"));
        // Without a token no header is sent.
        Fake p = new Fake(cleanup, ids(1, 10));
        LeafidClient plain = LeafidClient.builder().servers(List.of(p.base)).build();
        cleanup.add(plain);
        plain.segment("orders").nextId();
        assertEquals(List.of(""), p.auth);
    }

    @Test
    void leafid_401_and_403_are_final_and_no_failover() throws Exception {
        for (Object[] k : new Object[][] {{401, "unauthorized"}, {403, "forbidden"}}) {
            int status = (int) k[0];
            String code = (String) k[1];
            Fake a = new Fake(cleanup, refusal(status, null, code));
            Fake b = new Fake(cleanup, ids(1, 10));
            LeafidClient c = client(Duration.ofSeconds(2), a, b);
            RejectedException e = assertThrows(RejectedException.class, () -> c.segment("orders").nextId());
            assertEquals(code, e.code());
            assertEquals(status, e.status());
            assertTrue(b.auth.isEmpty(), code + ": the next server was asked");
            assertEquals(0, c.stats().failovers(), code);
            assertThrows(RejectedException.class, () -> c.snowflake().nextId());
        }
    }

    @Test
    void a_proxys_401_without_leafids_body_is_a_failover() throws Exception {
        Fake a = new Fake(cleanup, new Reply(401, null, "<html>login</html>"));
        Fake b = new Fake(cleanup, ids(1, 10));
        LeafidClient c = client(Duration.ofSeconds(2), a, b);
        assertEquals(1, c.segment("orders").nextId());
        assertEquals(1, c.stats().failovers());
    }

    @Test
    void quota_exhausted_waits_retry_after_on_the_same_server() throws Exception {
        Fake a = new Fake(cleanup, refusal(429, "1", "quota_exhausted"), ids(1, 10));
        Fake b = new Fake(cleanup, ids(1000, 1009));
        LeafidClient c = client(Duration.ofSeconds(5), a, b);
        long t0 = System.nanoTime();
        assertEquals(1, c.segment("orders").nextId());
        long tookMs = (System.nanoTime() - t0) / 1_000_000;
        assertTrue(tookMs >= 950, tookMs + " ms: Retry-After not honoured");
        assertTrue(tookMs < 4000, tookMs + " ms");
        assertEquals(2, a.auth.size(), "the same server asked again");
        assertTrue(b.auth.isEmpty(), "never another server");
        assertEquals(0, c.stats().failovers());
    }

    @Test
    void quota_exhausted_past_the_wait_timeout_is_throttled() throws Exception {
        Fake a = new Fake(cleanup, refusal(429, "3600", "quota_exhausted"));
        Fake b = new Fake(cleanup, ids(1, 10));
        LeafidClient c = client(Duration.ofSeconds(2), a, b);
        long t0 = System.nanoTime();
        ThrottledException e = assertThrows(ThrottledException.class, () -> c.segment("orders").nextId());
        assertTrue(System.nanoTime() - t0 < 1_000_000_000L, "it did not wait in vain");
        assertEquals("quota_exhausted", e.code());
        assertEquals(Duration.ofSeconds(3600), e.retryAfter());
        assertTrue(b.auth.isEmpty());
        assertEquals(0, c.stats().failovers());
        // A proxy's 429 (not leafid's code) stays a failover.
        Fake p = new Fake(cleanup, refusal(429, "1", "rate_limited"));
        LeafidClient c2 = client(Duration.ofSeconds(2), p, b);
        c2.segment("orders").nextId();
        assertEquals(1, c2.stats().failovers());
    }
}
