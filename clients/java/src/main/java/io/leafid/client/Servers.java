package io.leafid.client;

import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.HttpURLConnection;
import java.net.Proxy;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The server list of one client: which server a batch is asked from, failover, backoff and
 * health probes.
 *
 * <p>Batches go to the <em>preferred</em> server (the last one that answered). A server that
 * fails (no answer within the request timeout, a 5xx, a 4xx that is not a refusal of the request
 * itself, a 200 whose body is not a valid batch) is marked down and the next one is asked at
 * once, in the same call. A down server is not asked again until a health probe gets a 200 from
 * its {@code /health/ready}; probes run on the client's timer every {@code backoffMin}, and a
 * down server is probed once its backoff ({@code backoffMin} doubling per failure in a row, at
 * most {@code backoffMax}) has passed. Only when every server is down does a fetch ask the down
 * ones too (last resort), so the client never stalls behind a probe schedule while a server
 * could answer.
 *
 * <p>Batch requests run on the calling (refill) thread with {@link HttpURLConnection}, whose
 * keep-alive connections the JDK pools: no thread handoff per request. Measured here against a
 * local server, a request of 1,000,000 ids took 0.45 ms (median) that way and 1.8 to 2.7 ms
 * through {@code java.net.http.HttpClient} (its selector thread and executor hand each exchange
 * over twice), and at a high rate the callers wait for exactly that latency. Health probes stay
 * on the asynchronous {@code HttpClient}.
 *
 * <p>The only ids that leave this class come from the body of a 200 that parsed and passed
 * {@link #parseBatch}; a failed or partial answer contributes nothing.
 */
final class Servers {
    /** Timeouts and backoff, in nanoseconds. */
    static final class Timing {
        /** Upper bound of one batch request (connect to last byte). */
        final long requestTimeout;
        /** First backoff after a failure; also the probe timer's period. */
        final long backoffMin;
        /** Largest backoff between two probes of a down server. */
        final long backoffMax;

        /**
         * Timeouts and backoff from the builder.
         *
         * @param requestTimeout bound of one request
         * @param backoffMin first backoff
         * @param backoffMax largest backoff
         */
        Timing(Duration requestTimeout, Duration backoffMin, Duration backoffMax) {
            this.requestTimeout = requestTimeout.toNanos();
            this.backoffMin = backoffMin.toNanos();
            this.backoffMax = backoffMax.toNanos();
        }

        /**
         * The wait after {@code failures} failures in a row.
         *
         * @param failures failures in a row (at least 1)
         * @return the wait, in nanoseconds
         */
        long backoff(int failures) {
            int doublings = Math.min(Math.max(failures - 1, 0), 30);
            long b = backoffMin;
            for (int k = 0; k < doublings && b < backoffMax; k++) {
                b = b > Long.MAX_VALUE / 2 ? Long.MAX_VALUE : b * 2;
            }
            return Math.min(b, backoffMax);
        }
    }

    /** A request: where, and what a valid answer looks like. */
    static final class Request {
        /** What a valid 200 answer holds. */
        enum Shape {
            /** Runs of ids (a range route). */
            RANGES,
            /** Texts of a formatted tag (the list route). */
            TEXTS,
            /** Two ids, the snowflake bounds of a time range (the bounds route). */
            BOUNDS,
        }

        /** The route without its query, e.g. {@code /api/v1/segment/orders/ranges}. */
        final String route;
        /** Path and query, e.g. {@code /api/v1/segment/orders/ranges?count=1000&stringify_ids=true}. */
        final String path;
        /** The ids asked for: a body with more is invalid. */
        final int count;
        /** The tag the body must name (segment route), null for snowflake. */
        final String tag;
        /** What a valid answer holds. */
        final Shape shape;

        /**
         * A request of a range route.
         *
         * @param route the range route without its query
         * @param count the ids asked for
         * @param tag the tag (segment route), or null
         */
        Request(String route, int count, String tag) {
            this(route, count, tag, false);
        }

        /**
         * A request.
         *
         * @param route the route without its query (a range route, or the list route)
         * @param count the ids asked for
         * @param tag the tag (segment routes), or null
         * @param formatted whether it is the list route of a formatted supply
         */
        Request(String route, int count, String tag, boolean formatted) {
            this(route, formatted ? route + "?count=" + count : route + "?count=" + count + "&stringify_ids=true",
                    count, tag, formatted ? Shape.TEXTS : Shape.RANGES);
        }

        /**
         * A request, every field given.
         *
         * @param route the route without its query
         * @param path the route and its query
         * @param count the ids asked for (0 for the bounds route)
         * @param tag the tag (segment routes), or null
         * @param shape what a valid answer holds
         */
        private Request(String route, String path, int count, String tag, Shape shape) {
            this.route = route;
            this.path = path;
            this.count = count;
            this.tag = tag;
            this.shape = shape;
        }

        /**
         * A request of the snowflake bounds route.
         *
         * @param query the query string (without {@code ?}), its values URL-encoded
         * @return the request
         */
        static Request bounds(String query) {
            String route = "/api/v1/snowflake/bounds";
            return new Request(route, route + "?" + query, 0, null, Shape.BOUNDS);
        }

        /**
         * The same request for {@code n} ids.
         *
         * @param n the ids to ask for
         * @return this one if {@code n} is its count, else a new one
         */
        Request withCount(int n) {
            return n == count ? this : new Request(route, n, tag, shape == Shape.TEXTS);
        }
    }

    /** What a fetch brought: a valid batch, a refusal, or nothing (every server failed). */
    static final class FetchResult {
        /** The runs of a valid 200 body, or null. */
        final Ranges ranges;
        /** The texts of a valid 200 body of the list route, or null. */
        final Texts texts;
        /** The ids of a valid 200 body of the bounds route, or null. */
        final IdBounds bounds;
        /**
         * The refusal that holds on every server ({@link RejectedException}), or the caller
         * token's spent quota past the wait timeout ({@link ThrottledException}), or null.
         */
        final LeafidException rejected;
        /** With none: the last server failure (null if no server could be asked). */
        final ServerFault fault;
        /** Servers asked after the one before them failed, in this fetch. */
        final int failovers;
        /** With ids: index of the server that answered (for {@link #markBehind}), else -1. */
        final int serverIndex;
        /** With ids: base URL of the server that answered. */
        final String server;

        /**
         * The answer of a server.
         *
         * @param o what it answered
         * @param failovers servers asked after a failure
         * @param serverIndex the server's index, or -1
         * @param server its base URL, or null
         */
        FetchResult(Outcome o, int failovers, int serverIndex, String server) {
            this.ranges = o.ranges;
            this.texts = o.texts;
            this.bounds = o.bounds;
            this.rejected = o.rejected != null ? o.rejected : o.throttled;
            this.fault = o.fault;
            this.failovers = failovers;
            this.serverIndex = serverIndex;
            this.server = server;
        }

        /**
         * Every server failed.
         *
         * @param fault the last failure, or null
         * @param failovers servers asked after a failure
         */
        FetchResult(ServerFault fault, int failovers) {
            this(new Outcome(null, null, null, null, fault), failovers, -1, null);
        }
    }

    /** A 200 body that is not a valid batch. */
    static final class BadBatch extends Exception {
        /** Serialization version. */
        private static final long serialVersionUID = 1L;

        /**
         * An invalid body.
         *
         * @param message what is wrong with it
         */
        BadBatch(String message) {
            super(message);
        }
    }

    /** One server and its health. The health fields are guarded by the object's monitor. */
    private static final class Server {
        /** Base URL without a trailing {@code /}. */
        final String base;
        /**
         * Set by a failed request or probe; cleared only by a 200 (a probe's or a request's) to
         * a request sent after the last failure.
         */
        boolean down;
        /**
         * How many times it was marked down: a 200 to a request sent before the latest failure
         * (an answer still in flight when the server was killed) is older news than that failure
         * and does not mark it up.
         */
        long downs;
        /** Failures in a row (requests and probes): the backoff doubles with each. */
        int failures;
        /** A down server is probed at or after this {@link System#nanoTime()}. */
        long nextProbe;
        /** A probe is in flight (at most one per server). */
        boolean probing;

        /**
         * A server, up.
         *
         * @param base its base URL
         */
        Server(String base) {
            this.base = base;
        }

        /**
         * Whether it is marked down.
         *
         * @return whether it is down
         */
        synchronized boolean isDown() {
            return down;
        }

        /**
         * How many times it was marked down.
         *
         * @return the count
         */
        synchronized long downs() {
            return downs;
        }

        /**
         * Marks it up if it was not marked down since {@code seen} (its {@link #downs()} when
         * the request that answered 200 was sent).
         *
         * @param seen {@link #downs()} when the request was sent
         * @return whether it was marked up
         */
        synchronized boolean markUpUnlessDownSince(long seen) {
            if (downs != seen) {
                return false;
            }
            down = false;
            failures = 0;
            return true;
        }

        /**
         * Marks it down and schedules its next probe.
         *
         * @param t the backoff
         */
        synchronized void markDown(Timing t) {
            down = true;
            downs++;
            if (failures < Integer.MAX_VALUE) {
                failures++;
            }
            nextProbe = System.nanoTime() + t.backoff(failures);
        }
    }

    /** The servers in the order given: the first is preferred until it fails. */
    private final Server[] list;
    /** Index of the server that answered last: asked first. A hint only. */
    private final AtomicInteger preferred = new AtomicInteger();
    /** One connection pool for every server. */
    private final HttpClient http;
    /** Timeouts and backoff. */
    private final Timing timing;
    /** Probes in flight, cancelled by {@link #close}. */
    private final Set<CompletableFuture<?>> probes = ConcurrentHashMap.newKeySet();
    /** Batch requests in flight, disconnected by {@link #close} (a blocked read ignores interrupts). */
    private final Set<HttpURLConnection> inFlight = ConcurrentHashMap.newKeySet();
    /** Bound of opening a connection, in milliseconds (at least 1). */
    private final int connectTimeoutMillis;
    /** Set by {@link #close}: no request starts after it. */
    private volatile boolean closed;
    /**
     * {@code Bearer <token>} sent as {@code Authorization} on every batch and bounds request
     * (never on the health probe), or null without a token. Never logged nor shown.
     */
    private final String authorization;
    /** The longest a fetch waits out {@code 429 quota_exhausted} answers, in nanoseconds. */
    private final long waitNanos;

    /**
     * The servers, all up.
     *
     * @param bases base URLs, the first preferred
     * @param http the HTTP client
     * @param timing timeouts and backoff
     * @param connectTimeout bound of opening a connection
     */
    Servers(List<String> bases, HttpClient http, Timing timing, Duration connectTimeout) {
        this(bases, http, timing, connectTimeout, null, Duration.ZERO);
    }

    /**
     * The servers, all up, with a caller token.
     *
     * @param bases base URLs, the first preferred
     * @param http the HTTP client
     * @param timing timeouts and backoff
     * @param connectTimeout bound of opening a connection
     * @param token the caller token sent on every batch and bounds request, or null
     * @param wait the longest a fetch waits out {@code 429 quota_exhausted} answers
     */
    Servers(List<String> bases, HttpClient http, Timing timing, Duration connectTimeout, String token,
            Duration wait) {
        this.authorization = token == null ? null : "Bearer " + token;
        this.waitNanos = wait.toNanos();
        this.list = new Server[bases.size()];
        for (int k = 0; k < list.length; k++) {
            list[k] = new Server(bases.get(k));
        }
        this.http = http;
        this.timing = timing;
        this.connectTimeoutMillis = millis(connectTimeout.toNanos());
    }

    /**
     * A timeout for {@link HttpURLConnection}: whole milliseconds, at least 1 (0 means none).
     *
     * @param nanos the timeout in nanoseconds
     * @return it in milliseconds, within {@code 1..=Integer.MAX_VALUE}
     */
    private static int millis(long nanos) {
        return (int) Math.max(1, Math.min(Integer.MAX_VALUE, TimeUnit.NANOSECONDS.toMillis(nanos)));
    }

    /** A status and a body. */
    private static final class Reply {
        /** The HTTP status. */
        final int status;
        /** The body (the error body for a 4xx or 5xx), empty if none. */
        final String body;
        /** Its {@code Retry-After} in whole seconds (1 when absent or unreadable). */
        final long retryAfter;

        /**
         * A reply.
         *
         * @param status the HTTP status
         * @param body the body
         * @param retryAfter its Retry-After in seconds
         */
        Reply(int status, String body, long retryAfter) {
            this.status = status;
            this.body = body;
            this.retryAfter = retryAfter;
        }
    }

    /**
     * A {@code Retry-After} of whole seconds (leafid sends an integer of at least 1): 1 when
     * absent or unreadable, so that a quota wait is never zero (no busy loop).
     *
     * @param header the header's value, or null
     * @return the seconds, at least 1
     */
    static long retryAfterSeconds(String header) {
        if (header == null) {
            return 1;
        }
        try {
            return Math.max(1, Long.parseLong(header.trim()));
        } catch (NumberFormatException e) {
            return 1;
        }
    }

    /**
     * One {@code GET} on the calling thread, connect to last byte within {@code timeoutNanos}
     * (the connect and every read are bounded by it, and an answer that took longer in all is
     * a timeout too). The connection goes back to the JDK's keep-alive pool once its body is read.
     *
     * @param url the full URL
     * @param timeoutNanos the bound of the whole exchange
     * @return the status and body
     * @throws IOException no answer: refused, reset, timed out, or the client closed
     */
    private Reply get(String url, long timeoutNanos) throws IOException {
        long t0 = System.nanoTime();
        int ms = millis(timeoutNanos);
        HttpURLConnection c = (HttpURLConnection) URI.create(url).toURL().openConnection(Proxy.NO_PROXY);
        c.setConnectTimeout(Math.min(ms, connectTimeoutMillis));
        c.setReadTimeout(ms);
        c.setInstanceFollowRedirects(false);
        c.setUseCaches(false);
        c.setRequestProperty("Accept", "application/json");
        if (authorization != null && !url.endsWith("/health/ready")) {
            c.setRequestProperty("Authorization", authorization);
        }
        inFlight.add(c);
        try {
            if (closed) {
                throw new IOException("client closed");
            }
            int status = c.getResponseCode();
            long retryAfter = retryAfterSeconds(c.getHeaderField("Retry-After"));
            byte[] bytes;
            try (InputStream in = status >= 400 ? c.getErrorStream() : c.getInputStream()) {
                bytes = in == null ? new byte[0] : in.readAllBytes();
            }
            long took = System.nanoTime() - t0;
            if (took > timeoutNanos) {
                c.disconnect();
                throw new SocketTimeoutException("answered after " + TimeUnit.NANOSECONDS.toMillis(took)
                        + " ms, over the " + ms + " ms request timeout");
            }
            return new Reply(status, new String(bytes, StandardCharsets.UTF_8), retryAfter);
        } finally {
            inFlight.remove(c);
        }
    }

    /**
     * Base URLs in the order given.
     *
     * @return the base URLs
     */
    List<String> bases() {
        List<String> out = new ArrayList<>();
        for (Server s : list) {
            out.add(s.base);
        }
        return out;
    }

    /**
     * Base URL of the server asked first (the last that answered).
     *
     * @return its base URL
     */
    String preferred() {
        return list[preferred.get() % list.length].base;
    }

    /**
     * Base URLs of the servers marked down.
     *
     * @return the base URLs
     */
    List<String> down() {
        List<String> out = new ArrayList<>();
        for (Server s : list) {
            if (s.isDown()) {
                out.add(s.base);
            }
        }
        return out;
    }

    /**
     * One batch: the preferred server first, then the other up servers in order, then (last
     * resort) the down ones. Stops at the first refusal that holds on every server.
     *
     * @param req the request
     * @return the batch, the refusal, or the last failure
     * @throws InterruptedException the client is closing
     */
    FetchResult fetch(Request req) throws InterruptedException {
        int n = list.length;
        int start = preferred.get() % n;
        boolean[] tried = new boolean[n];
        ServerFault last = null;
        int failovers = 0;
        long deadline = System.nanoTime() + waitNanos;
        for (int pass = 0; pass < 2; pass++) {
            boolean lastResort = pass == 1;
            for (int k = 0; k < n; k++) {
                int i = (start + k) % n;
                if (tried[i] || (!lastResort && list[i].isDown())) {
                    continue;
                }
                tried[i] = true;
                if (last != null) {
                    failovers++;
                }
                long seen = list[i].downs();
                Outcome o = ask(list[i], req);
                // 429 quota_exhausted: the same server again after its Retry-After, never another
                // (every server shares the quota) and no failover counted; a wait that would end
                // past the wait timeout is the caller's ThrottledException. Bounded: each round
                // sleeps at least 1 s and the deadline ends the loop.
                while (o.throttled != null) {
                    preferred.set(i);
                    long sleep = TimeUnit.SECONDS.toNanos(o.throttled.retryAfter().getSeconds());
                    if (System.nanoTime() + sleep - deadline > 0) {
                        return new FetchResult(o, failovers, -1, null);
                    }
                    TimeUnit.NANOSECONDS.sleep(sleep);
                    o = ask(list[i], req);
                }
                if (o.ranges != null || o.texts != null || o.bounds != null) {
                    if (list[i].markUpUnlessDownSince(seen)) {
                        preferred.set(i);
                    }
                    return new FetchResult(o, failovers, i, list[i].base);
                }
                if (o.rejected != null) {
                    return new FetchResult(o, failovers, -1, null);
                }
                list[i].markDown(timing);
                last = o.fault;
            }
        }
        return new FetchResult(last, failovers);
    }

    /**
     * Server {@code i} answered a valid batch whose ids all lie at or below what the client
     * already accepted: it is behind the server used before (an earlier segment, or a snowflake
     * ring that still holds ids of older ticks). Marked down like a failed server, so the next
     * fetch asks the servers that are up first and this one only as a last resort; its probe
     * brings it back. Without this, a server far behind (a snowflake server whose clock runs
     * late, a lower segment of a large step) would stay preferred and be asked batch after batch
     * while another server could answer at once.
     *
     * @param i the server's index (out of range: nothing happens)
     */
    void markBehind(int i) {
        if (i >= 0 && i < list.length) {
            list[i].markDown(timing);
        }
    }

    /** What one server did with one request: exactly one field is set. */
    private static final class Outcome {
        /** A valid batch, or null. */
        final Ranges ranges;
        /** A valid batch of texts (list route), or null. */
        final Texts texts;
        /** Valid snowflake bounds (bounds route), or null. */
        final IdBounds bounds;
        /** A refusal that holds on every server, or null. */
        final RejectedException rejected;
        /** A {@code 429 quota_exhausted} (wait, then ask this server again), or null. */
        final ThrottledException throttled;
        /** This server's failure, or null. */
        final ServerFault fault;

        /**
         * An outcome (one argument non-null).
         *
         * @param ranges a valid batch
         * @param texts a valid batch of texts
         * @param bounds valid bounds
         * @param rejected a refusal
         * @param fault a failure
         */
        Outcome(Ranges ranges, Texts texts, IdBounds bounds, RejectedException rejected, ServerFault fault) {
            this(ranges, texts, bounds, rejected, null, fault);
        }

        /**
         * An outcome (one argument non-null).
         *
         * @param ranges a valid batch
         * @param texts a valid batch of texts
         * @param bounds valid bounds
         * @param rejected a refusal
         * @param throttled a spent quota
         * @param fault a failure
         */
        Outcome(Ranges ranges, Texts texts, IdBounds bounds, RejectedException rejected,
                ThrottledException throttled, ServerFault fault) {
            this.throttled = throttled;
            this.ranges = ranges;
            this.texts = texts;
            this.bounds = bounds;
            this.rejected = rejected;
            this.fault = fault;
        }
    }

    /**
     * One request to one server.
     *
     * @param s the server
     * @param req the request
     * @return what it answered
     * @throws InterruptedException the client is closing
     */
    private Outcome ask(Server s, Request req) throws InterruptedException {
        Reply resp;
        try {
            resp = get(s.base + req.path, timing.requestTimeout);
        } catch (IllegalArgumentException e) {
            return fault(s, ServerFault.Kind.TRANSPORT, "bad URL: " + e.getMessage());
        } catch (IOException e) {
            if (Thread.interrupted()) {
                throw new InterruptedException("client closing");
            }
            return fault(s, ServerFault.Kind.TRANSPORT, describe(e));
        }
        if (Thread.interrupted()) {
            throw new InterruptedException("client closing");
        }
        int status = resp.status;
        String body = resp.body;
        if (status >= 400 && status < 600) {
            String code = "";
            String message = "";
            try {
                Object v = Json.parse(body);
                if (v instanceof Map) {
                    Map<?, ?> m = (Map<?, ?>) v;
                    if (m.get("code") instanceof String) {
                        code = (String) m.get("code");
                    }
                    if (m.get("message") instanceof String) {
                        message = (String) m.get("message");
                    }
                }
            } catch (Json.ParseException e) {
                // Not leafid's body (a proxy's page): this server's fault, below.
            }
            // 503 sequence_exhausted: the period's sequence reached its width; every server
            // would answer the same until the next period.
            if (refusalIsFinal(status, code)) {
                return new Outcome(null, null, null, new RejectedException(s.base, status, code, message), null);
            }
            if (isQuotaWait(status, code)) {
                return new Outcome(null, null, null, null,
                        new ThrottledException(s.base, code, message, Duration.ofSeconds(resp.retryAfter)), null);
            }
            return fault(s, ServerFault.Kind.STATUS, status + (code.isEmpty() ? "" : " " + code));
        }
        if (status != 200) {
            return fault(s, ServerFault.Kind.STATUS, Integer.toString(status));
        }
        try {
            switch (req.shape) {
                case TEXTS:
                    return new Outcome(null, Texts.parse(body, req), null, null, null);
                case BOUNDS:
                    return new Outcome(null, null, parseBounds(body), null, null);
                default:
                    return new Outcome(parseBatch(body, req), null, null, null, null);
            }
        } catch (Texts.NotFormatted e) {
            return new Outcome(null, null, null,
                    new RejectedException(s.base, status, "not_formatted", e.getMessage()), null);
        } catch (BadBatch e) {
            return fault(s, ServerFault.Kind.BAD_RESPONSE, e.getMessage());
        }
    }

    /**
     * A failure of one server.
     *
     * @param s the server
     * @param kind what went wrong
     * @param detail what happened
     * @return the outcome
     */
    private static Outcome fault(Server s, ServerFault.Kind kind, String detail) {
        return new Outcome(null, null, null, null, new ServerFault(s.base, kind, detail));
    }

    /**
     * A transport failure, for humans.
     *
     * @param t the failure
     * @return its description
     */
    private String describe(Throwable t) {
        if (t instanceof HttpTimeoutException || t instanceof SocketTimeoutException) {
            String m = t.getMessage();
            return m != null && m.startsWith("answered after") ? m
                    : "timed out after " + TimeUnit.NANOSECONDS.toMillis(timing.requestTimeout) + " ms";
        }
        if (t instanceof ConnectException) {
            return "connection refused";
        }
        if (t instanceof IOException) {
            return t.getClass().getSimpleName() + (t.getMessage() == null ? "" : ": " + t.getMessage());
        }
        return String.valueOf(t);
    }

    /**
     * Whether a 4xx is the same on every server (final, reaches the caller) or only this one's
     * (ask the next). The servers share one database, so leafid's refusals of the request itself
     * hold everywhere ({@code invalid_time_range}: a bounds range that is empty or outside the
     * layout's time span, the same layout on every server); any other code
     * ({@code engine_disabled}, {@code not_found}, none at all...) is this server's.
     *
     * @param code the 4xx body's code ({@code ""} if none)
     * @return whether every server would refuse the same
     */
    /**
     * Whether an error answer holds on every server (a {@link RejectedException} for the caller)
     * or is only this server's (ask the next): a 4xx whose code
     * {@link #refusalHoldsOnEveryServer(String) holds on every server}, or a 503
     * {@code sequence_exhausted} (a formatted tag's period ran out of its width until the next
     * one). {@code clients/conformance/vectors/errors.json}.
     *
     * @param status the HTTP status
     * @param code the body's code ({@code ""} if none)
     * @return whether the answer reaches the caller
     */
    static boolean refusalIsFinal(int status, String code) {
        // The caller token refused by leafid itself: every server reads the same tokens.
        if (status == 401 || status == 403) {
            return code.equals(status == 401 ? "unauthorized" : "forbidden");
        }
        if (status >= 400 && status < 500) {
            return refusalHoldsOnEveryServer(code);
        }
        return status == 503 && code.equals("sequence_exhausted");
    }

    /**
     * Whether an error answer is leafid's {@code 429 quota_exhausted}: the caller token's quota is
     * spent on every server (they share it), so the client waits {@code Retry-After} and asks the
     * same server again; a proxy's 429 ({@code rate_limited}, no code) is a failover.
     *
     * @param status the HTTP status
     * @param code the body's code ({@code ""} if none)
     * @return whether the client waits instead of failing over
     */
    static boolean isQuotaWait(int status, String code) {
        return status == 429 && code.equals("quota_exhausted");
    }

    /**
     * A copy of a final error for one more caller (each caller gets its own stack trace).
     *
     * @param e a {@link RejectedException} or a {@link ThrottledException}
     * @return its copy (any other exception as it is)
     */
    static LeafidException copyOf(LeafidException e) {
        if (e instanceof RejectedException) {
            return ((RejectedException) e).copy();
        }
        if (e instanceof ThrottledException) {
            return ((ThrottledException) e).copy();
        }
        return e;
    }

    /**
     * Whether a 4xx code refuses the request itself (see {@link #refusalIsFinal(int, String)}).
     *
     * @param code the 4xx body's code ({@code ""} if none)
     * @return whether every server would refuse the same
     */
    static boolean refusalHoldsOnEveryServer(String code) {
        switch (code) {
            case "unknown_biz_tag":
            case "invalid_biz_tag":
            case "biz_tag_exhausted":
            case "invalid_count":
            case "invalid_request":
            case "formatted_tag":
            case "invalid_time_range":
                return true;
            default:
                return false;
        }
    }

    /**
     * The runs of a 200 body, exactly: {@code {"biz_tag": tag?, "count": n, "ranges":
     * [{"first": "a", "last": "b"}, ...]}} where every run has {@code 0 < first <= last <=
     * 2^63-1} (decimal strings, or JSON integers read exactly), the runs increase and do not
     * overlap, their sizes add up to {@code count}, at least 1 and at most the count asked, and
     * the body names the tag asked for (segment route). Anything else is the server's fault and
     * none of its ids is used.
     *
     * @param body the 200 body
     * @param req the request it answers
     * @return its runs
     * @throws BadBatch the body is not a valid batch
     */
    static Ranges parseBatch(String body, Request req) throws BadBatch {
        Object v;
        try {
            v = Json.parse(body);
        } catch (Json.ParseException e) {
            throw new BadBatch("not JSON: " + e.getMessage());
        }
        if (!(v instanceof Map)) {
            throw new BadBatch("not a JSON object");
        }
        Map<?, ?> m = (Map<?, ?>) v;
        if (req.tag != null) {
            Object tag = m.get("biz_tag");
            if (!req.tag.equals(tag)) {
                throw new BadBatch("asked for tag " + req.tag + ", got " + tag);
            }
        }
        if (!(m.get("count") instanceof Json.Num)) {
            throw new BadBatch("no count");
        }
        String countText = ((Json.Num) m.get("count")).text;
        long count;
        try {
            count = Long.parseLong(countText);
        } catch (NumberFormatException e) {
            throw new BadBatch("count " + countText + " is not an integer");
        }
        if (count < 1 || count > req.count) {
            throw new BadBatch("count " + count + " for " + req.count + " ids asked");
        }
        if (!(m.get("ranges") instanceof List)) {
            throw new BadBatch("no ranges array");
        }
        List<?> raw = (List<?>) m.get("ranges");
        if (raw.isEmpty() || raw.size() > count) {
            throw new BadBatch(raw.size() + " ranges for a count of " + count);
        }
        long[] firsts = new long[raw.size()];
        long[] lasts = new long[raw.size()];
        long sum = 0;
        for (int k = 0; k < firsts.length; k++) {
            if (!(raw.get(k) instanceof Map)) {
                throw new BadBatch("range " + k + " is not an object");
            }
            Map<?, ?> r = (Map<?, ?>) raw.get(k);
            long first = parseId(r.get("first"));
            long last = parseId(r.get("last"));
            if (first > last) {
                throw new BadBatch("range " + first + "..=" + last + " is empty");
            }
            if (k > 0 && first <= lasts[k - 1]) {
                throw new BadBatch("ranges overlap or decrease: ..=" + lasts[k - 1] + " then " + first + "..=");
            }
            firsts[k] = first;
            lasts[k] = last;
            long size = last - first + 1; // at most 2^63-1: 1 <= first <= last <= 2^63-1
            if (size > count - sum) {
                throw new BadBatch("ranges hold more than the count of " + count + " ids");
            }
            sum += size;
        }
        if (sum != count) {
            throw new BadBatch("ranges hold " + sum + " ids, count says " + count);
        }
        // Only a JSON true marks the tag strict (the field is absent for other tags).
        return new Ranges(firsts, lasts, count, Boolean.TRUE.equals(m.get("strict")));
    }

    /**
     * The ids of a 200 body of the bounds route, exactly: {@code {"min_id": "a", "max_id": "b",
     * ...}} where both are decimals that fit a signed 64-bit integer, {@code min_id} at least 0 and
     * {@code max_id} positive (strings, or JSON
     * integers read exactly) and {@code min_id <= max_id}; the other fields ({@code layout},
     * {@code from}, {@code to}, {@code first_tick}, {@code last_tick}) are not used. Anything else
     * is the server's fault.
     *
     * @param body the 200 body
     * @return the bounds
     * @throws BadBatch the body is not valid bounds
     */
    static IdBounds parseBounds(String body) throws BadBatch {
        Object v;
        try {
            v = Json.parse(body);
        } catch (Json.ParseException e) {
            throw new BadBatch("not JSON: " + e.getMessage());
        }
        if (!(v instanceof Map)) {
            throw new BadBatch("not a JSON object");
        }
        Map<?, ?> m = (Map<?, ?>) v;
        // A range that starts in the layout's first tick has min_id 0 (worker and sequence 0):
        // a bound, never an id handed out, so 0 is accepted here and nowhere else.
        Object lo = m.get("min_id");
        boolean zero = "0".equals(lo);
        long min = zero ? 0 : parseId(lo);
        long max = parseId(m.get("max_id"));
        if (min > max) {
            throw new BadBatch("min_id " + min + " above max_id " + max);
        }
        return new IdBounds(min, max);
    }

    /**
     * One id: a positive decimal that fits a signed 64-bit integer, parsed exactly.
     *
     * @param o a decimal string or a JSON integer
     * @return the id
     * @throws BadBatch anything else
     */
    private static long parseId(Object o) throws BadBatch {
        // Strings only (stringify_ids=true was asked), without a leading zero.
        if (!(o instanceof String)) {
            throw new BadBatch("id " + o + " is not a decimal string");
        }
        String text = (String) o;
        if (text.isEmpty() || text.length() > 19 || text.charAt(0) == '0') {
            throw new BadBatch("id \"" + text + "\" is not a positive 64-bit integer");
        }
        for (int k = 0; k < text.length(); k++) {
            char c = text.charAt(k);
            if (c < '0' || c > '9') {
                throw new BadBatch("id \"" + text + "\" is not a positive 64-bit integer");
            }
        }
        long id;
        try {
            id = Long.parseLong(text);
        } catch (NumberFormatException e) {
            throw new BadBatch("id \"" + text + "\" is above 2^63-1");
        }
        if (id <= 0) {
            throw new BadBatch("id " + id + " is not positive");
        }
        return id;
    }

    /**
     * One tick of the probe timer: probes each down server whose backoff has passed (one probe
     * per server at a time); a 200 from {@code /health/ready} marks it up.
     */
    void probeDue() {
        long now = System.nanoTime();
        for (Server s : list) {
            long seen;
            synchronized (s) {
                if (!s.down || s.probing || now - s.nextProbe < 0) {
                    continue;
                }
                s.probing = true;
                seen = s.downs;
            }
            CompletableFuture<HttpResponse<Void>> f;
            try {
                HttpRequest hr = HttpRequest.newBuilder(URI.create(s.base + "/health/ready"))
                        .timeout(Duration.ofNanos(timing.requestTimeout))
                        .GET()
                        .build();
                f = http.sendAsync(hr, HttpResponse.BodyHandlers.discarding());
            } catch (RuntimeException e) {
                synchronized (s) {
                    s.probing = false;
                }
                s.markDown(timing);
                continue;
            }
            probes.add(f);
            f.whenComplete((resp, err) -> {
                probes.remove(f);
                if (err == null && resp.statusCode() == 200) {
                    s.markUpUnlessDownSince(seen);
                } else {
                    s.markDown(timing);
                }
                synchronized (s) {
                    s.probing = false;
                }
            });
        }
    }

    /**
     * Warms the HTTP stack before the first batch request: one {@code GET /health/ready} to
     * every server at once on both transports (the batch requests' {@link HttpURLConnection} on
     * the client's threads, the probes' {@code HttpClient}), waiting until one batch-transport
     * answer arrives (any status) or all have failed, at most the request timeout. The answers
     * change nothing (health is untouched). Without it, the first request of a fresh JVM pays the
     * JDK's HTTP class loading and JIT (150 to 250 ms measured, more on a loaded machine) inside
     * its request timeout, and a healthy server could be marked down for the client's own
     * start-up.
     *
     * @param pool the threads the batch-transport requests run on
     */
    void warmUp(Executor pool) {
        List<CompletableFuture<?>> all = new ArrayList<>();
        List<CompletableFuture<?>> probing = new ArrayList<>();
        CompletableFuture<Void> anyAnswer = new CompletableFuture<>();
        for (Server s : list) {
            try {
                HttpRequest hr = HttpRequest.newBuilder(URI.create(s.base + "/health/ready"))
                        .timeout(Duration.ofNanos(timing.requestTimeout))
                        .GET()
                        .build();
                probing.add(http.sendAsync(hr, HttpResponse.BodyHandlers.discarding()));
            } catch (RuntimeException e) {
                // A bad URL fails its batch requests later, as a fault.
            }
            try {
                all.add(CompletableFuture.runAsync(() -> {
                    try {
                        get(s.base + "/health/ready", timing.requestTimeout);
                        anyAnswer.complete(null);
                    } catch (IOException | RuntimeException e) {
                        // Only a warm-up: health is untouched.
                    }
                }, pool));
            } catch (RejectedExecutionException e) {
                // Closing.
            }
        }
        CompletableFuture<Void> allDone = CompletableFuture.allOf(all.toArray(new CompletableFuture<?>[0]));
        try {
            CompletableFuture.anyOf(anyAnswer, allDone).get(timing.requestTimeout, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException e) {
            // Nothing to do: this was only a warm-up.
        }
        for (CompletableFuture<?> f : probing) {
            f.cancel(true);
        }
        try {
            parseBatch("{\"count\":1,\"ranges\":[{\"first\":\"1\",\"last\":\"1\"}]}", new Request("", 1, null));
        } catch (BadBatch e) {
            throw new AssertionError(e);
        }
    }

    /** Cancels the probes in flight and disconnects the batch requests in flight. */
    void close() {
        closed = true;
        for (HttpURLConnection c : inFlight) {
            c.disconnect();
        }
        for (CompletableFuture<?> f : probes) {
            f.cancel(true);
        }
        probes.clear();
    }
}
