package io.leafid.client;

import java.lang.reflect.Method;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.DateTimeException;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.SynchronousQueue;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;

/**
 * A leafid client: per tag (and for snowflake) a local double-buffered id supply, fed by the
 * range routes of several servers with failover. Thread-safe; make one per process and share
 * it. Close it when done: {@link #close()} stops every thread it started.
 *
 * <pre>{@code
 * try (LeafidClient client = LeafidClient.builder()
 *         .servers("http://10.0.0.1:8080", "http://10.0.0.2:8080")
 *         .batchSize(1000)
 *         .build()) {
 *     IdSupply orders = client.segment("orders");
 *     long id = orders.nextId();
 * }
 * }</pre>
 */
public final class LeafidClient implements AutoCloseable {
    /** Most ids one segment batch request may ask for (the range route's limit). */
    public static final int MAX_BATCH = 1_000_000;

    /** Most ids one snowflake batch request may ask for (the range route's limit). */
    public static final int MAX_SNOWFLAKE_BATCH = 100_000;

    /** Most ids one formatted batch request may ask for (the list route's limit). */
    public static final int MAX_FORMATTED_BATCH = 100_000;

    /** The system wall clock, epoch milliseconds: the default of every client. */
    static final LongSupplier SYSTEM_CLOCK = System::currentTimeMillis;

    /** The class of the JDK's system clocks ({@link Clock#systemUTC()} and its zoned kin). */
    private static final Class<?> SYSTEM_CLOCK_CLASS = Clock.systemUTC().getClass();

    /** Clients made in this JVM: numbers their threads. */
    private static final AtomicInteger CLIENTS = new AtomicInteger();

    /** What every supply of one client shares. */
    static final class Shared {
        /** The servers, their health and the HTTP pool. */
        final Servers servers;
        /** Timeouts and backoff. */
        final Servers.Timing timing;
        /** Default bound of a caller's wait for a batch; also a refill's retry bound. */
        final Duration waitTimeout;
        /** How long a batch should last at the callers' rate (the batch size follows). */
        final long targetLifetimeNanos;
        /** Runs refills and the HTTP client's work; daemon threads, stopped by close. */
        final ThreadPoolExecutor workers;
        /** Health-probe ticks and async wait timeouts; one daemon thread, stopped by close. */
        final ScheduledThreadPoolExecutor timer;
        /** The wall clock, epoch milliseconds: formatted supplies compare periods' ends with it. */
        final LongSupplier wallClock;
        /** Set once by close; checked on every call (a plain load on the fast path). */
        volatile boolean closed;

        /**
         * What the supplies share.
         *
         * @param servers the servers, or null for a fixed supply
         * @param timing timeouts and backoff
         * @param waitTimeout default bound of a caller's wait
         * @param targetLifetimeNanos how long a batch should last
         * @param workers refill and HTTP threads
         * @param timer probe and timeout thread
         * @param wallClock the wall clock, epoch milliseconds
         */
        Shared(Servers servers, Servers.Timing timing, Duration waitTimeout, long targetLifetimeNanos,
                ThreadPoolExecutor workers, ScheduledThreadPoolExecutor timer, LongSupplier wallClock) {
            this.wallClock = wallClock;
            this.servers = servers;
            this.timing = timing;
            this.waitTimeout = waitTimeout;
            this.targetLifetimeNanos = targetLifetimeNanos;
            this.workers = workers;
            this.timer = timer;
        }
    }

    /** What every supply shares. */
    private final Shared shared;
    /** The smallest batch size of a request (the first one's). */
    private final int batchSize;
    /** The largest batch size of a segment request. */
    private final int maxBatch;
    /** One supply per tag, so every caller of a tag shares one increasing stream. */
    private final Map<String, IdSupply> segments = new ConcurrentHashMap<>();
    /** One formatted supply per tag. */
    private final Map<String, FormattedSupply> formatted = new ConcurrentHashMap<>();
    /** The snowflake supply. */
    private final IdSupply snowflake;
    /** Failovers of {@link #snowflakeBounds} requests. Statistics only. */
    private final AtomicLong boundsFailovers = new AtomicLong();

    /** RFC 3339 in UTC with milliseconds and {@code Z}, as the bounds route is sent its instants. */
    private static final DateTimeFormatter RFC3339_MILLIS =
            DateTimeFormatter.ofPattern("uuuu-MM-dd'T'HH:mm:ss.SSS'Z'").withZone(ZoneOffset.UTC);
    /** The latest instant whose next millisecond an {@link Instant} still holds. */
    private static final Instant LAST_WHOLE_MILLI = Instant.MAX.truncatedTo(ChronoUnit.MILLIS).minusMillis(1);
    /** The HTTP client, dropped by close (JDK 21+: shut down too). */
    private volatile HttpClient http;
    /**
     * The threads the executors made (the ones that ended are pruned as new ones are made):
     * close joins them, since an executor counts as terminated a moment before its last thread
     * has ended.
     */
    private final Set<Thread> threads = ConcurrentHashMap.newKeySet();

    /**
     * Starts a client.
     *
     * @param b the settings, checked
     * @param bases the servers' base URLs
     */
    private LeafidClient(Builder b, List<String> bases) {
        int n = CLIENTS.incrementAndGet();
        ThreadPoolExecutor workers = new ThreadPoolExecutor(0, Integer.MAX_VALUE, 30,
                TimeUnit.SECONDS, new SynchronousQueue<>(), daemon("leafid-" + n + "-worker-", threads));
        ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1,
                daemon("leafid-" + n + "-timer-", threads));
        timer.setRemoveOnCancelPolicy(true);
        timer.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
        this.http = HttpClient.newBuilder()
                .version(HttpClient.Version.HTTP_1_1)
                .followRedirects(HttpClient.Redirect.NEVER)
                .connectTimeout(b.connectTimeout)
                .executor(workers)
                .build();
        Servers.Timing timing = new Servers.Timing(b.requestTimeout, b.backoffMin, b.backoffMax);
        Servers servers = new Servers(bases, http, timing, b.connectTimeout, b.token, b.waitTimeout);
        this.shared = new Shared(servers, timing, b.waitTimeout, b.targetLifetime.toNanos(), workers, timer,
                b.wallClock);
        this.batchSize = b.batchSize;
        this.maxBatch = b.maxBatch;
        this.snowflake = new IdSupply(shared, "/api/v1/snowflake/ranges", null,
                Math.min(batchSize, MAX_SNOWFLAKE_BATCH), Math.min(maxBatch, MAX_SNOWFLAKE_BATCH),
                MAX_SNOWFLAKE_BATCH);
        long tick = b.backoffMin.toNanos();
        timer.scheduleWithFixedDelay(servers::probeDue, tick, tick, TimeUnit.NANOSECONDS);
        servers.warmUp(workers);
    }

    /**
     * Daemon threads named {@code prefix1, prefix2, ...}, each added to {@code made}.
     *
     * @param prefix the threads' name prefix
     * @param made where each new thread is recorded
     * @return the factory
     */
    private static ThreadFactory daemon(String prefix, Set<Thread> made) {
        AtomicInteger k = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, prefix + k.incrementAndGet());
            t.setDaemon(true);
            made.removeIf(old -> old.getState() == Thread.State.TERMINATED);
            made.add(t);
            return t;
        };
    }

    /**
     * A builder with the defaults: batch 1000 growing with demand up to 1000000 (snowflake:
     * 100000) for a target batch lifetime of 1 s, wait timeout 5 s, request timeout 2 s, connect
     * timeout 500 ms, probe backoff 50 ms to 5 s.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * The supply of a tag (the same object on every call for that tag). No request is sent
     * until its first {@code nextId}.
     *
     * @param tag the biz tag
     * @return the tag's supply
     * @throws InvalidTagException the tag is not 1 to 128 of {@code A-Z a-z 0-9 . _ : -}
     * @throws ClosedException the client is closed
     */
    public IdSupply segment(String tag) {
        if (!isValidTag(tag)) {
            throw new InvalidTagException(tag);
        }
        if (shared.closed) {
            throw new ClosedException("client closed");
        }
        return segments.computeIfAbsent(tag, t -> new IdSupply(shared, "/api/v1/segment/" + t + "/ranges", t,
                batchSize, maxBatch, MAX_BATCH));
    }

    /**
     * The supply of a formatted tag (the same object on every call for that tag): ids as text,
     * such as daily order numbers, from the list route. No request is sent until its first
     * {@code nextId}. A plain tag's supply fails every call with {@link RejectedException} code
     * {@code not_formatted}; {@link #segment(String)} of a formatted tag fails with code
     * {@code formatted_tag}.
     *
     * @param tag the biz tag
     * @return the tag's formatted supply
     * @throws InvalidTagException the tag is not 1 to 128 of {@code A-Z a-z 0-9 . _ : -}
     * @throws ClosedException the client is closed
     */
    public FormattedSupply formatted(String tag) {
        if (!isValidTag(tag)) {
            throw new InvalidTagException(tag);
        }
        if (shared.closed) {
            throw new ClosedException("client closed");
        }
        return formatted.computeIfAbsent(tag, t -> new FormattedSupply(shared, t,
                Math.min(batchSize, MAX_FORMATTED_BATCH), Math.min(maxBatch, MAX_FORMATTED_BATCH)));
    }

    /**
     * The snowflake supply (one per client).
     *
     * @return the snowflake supply
     */
    public IdSupply snowflake() {
        return snowflake;
    }

    /**
     * Shorthand for {@code segment(tag).nextId()}.
     *
     * @param tag the biz tag
     * @return the tag's next id (positive)
     * @see #segment(String)
     * @see IdSupply#nextId()
     */
    public long nextId(String tag) {
        return segment(tag).nextId();
    }

    /**
     * Shorthand for {@code snowflake().nextId()}.
     *
     * @return the next snowflake id (positive)
     * @see IdSupply#nextId()
     */
    public long nextSnowflakeId() {
        return snowflake.nextId();
    }

    /**
     * The smallest and largest snowflake id any worker can issue in {@code [from, to)} under the
     * servers' layout, for {@code WHERE id BETWEEN minId AND maxId}: every id whose time lies in
     * the range lies within the bounds (the server's {@code GET /api/v1/snowflake/bounds}).
     *
     * <pre>{@code
     * Instant from = Instant.parse("2026-11-27T00:00:00Z");
     * IdBounds day = client.snowflakeBounds(from, from.plus(Duration.ofDays(1)));
     * // SELECT ... WHERE id BETWEEN day.minId() AND day.maxId()
     * }</pre>
     *
     * <p>The instants are sent as RFC 3339 in UTC with milliseconds ({@code
     * 2026-11-27T00:00:00.000Z}); a sub-millisecond part widens the range to whole milliseconds
     * ({@code from} rounded down, {@code to} up), so no id of the range is left out. The
     * request goes to the servers as a batch request does: the preferred one first; a timeout,
     * a refused or reset connection, a 5xx, a 4xx that is not a refusal (such as 404
     * {@code engine_disabled}) or a 200 whose body is not valid bounds ({@code 0 < min_id <=
     * max_id <= 2^63-1}) marks that server down and the next one is asked at once (counted in
     * {@link Stats#failovers()}); rounds in which every server failed are retried with the
     * backoff for at most the wait timeout. Runs on the calling thread.
     *
     * @param from the start of the range, included
     * @param to the end of the range, excluded
     * @return the bounds
     * @throws RejectedException a server refused the range itself: code
     *     {@code invalid_time_range} (empty, before the layout's epoch, or past the end of its
     *     time field) or {@code invalid_request}; no other server is asked
     * @throws ThrottledException the caller token\'s quota is spent past the wait timeout
     * @throws UnavailableException no server answered within the wait timeout
     * @throws ClosedException the client is closed, or the thread was interrupted
     * @throws NullPointerException {@code from} or {@code to} is null
     * @throws IllegalArgumentException an instant lies outside the years -999999999..999999999
     *     (a range within the years 0000..9999 that no layout covers is the server's
     *     {@code invalid_time_range})
     */
    public IdBounds snowflakeBounds(Instant from, Instant to) {
        Objects.requireNonNull(from, "from");
        Objects.requireNonNull(to, "to");
        String[] q = boundsInstants(from, to);
        Servers.Request req = Servers.Request.bounds("from=" + URLEncoder.encode(q[0], StandardCharsets.UTF_8)
                + "&to=" + URLEncoder.encode(q[1], StandardCharsets.UTF_8) + "&stringify_ids=true");
        long started = System.nanoTime();
        long deadline = started + shared.waitTimeout.toNanos();
        ServerFault last = null;
        int failures = 0;
        try {
            while (true) {
                if (shared.closed) {
                    throw new ClosedException("client closed");
                }
                Servers.FetchResult r = shared.servers.fetch(req);
                boundsFailovers.addAndGet(r.failovers);
                if (r.bounds != null) {
                    return r.bounds;
                }
                if (r.rejected != null) {
                    throw r.rejected;
                }
                if (r.fault != null) {
                    last = r.fault;
                }
                failures++;
                long wait = shared.timing.backoff(failures);
                if (System.nanoTime() + wait - deadline >= 0) {
                    if (shared.closed) {
                        throw new ClosedException("client closed");
                    }
                    throw new UnavailableException(Duration.ofNanos(System.nanoTime() - started), shared.waitTimeout,
                            last, false);
                }
                TimeUnit.NANOSECONDS.sleep(wait);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ClosedException(shared.closed ? "client closed" : "interrupted while asking for snowflake bounds");
        }
    }

    /**
     * The {@code from} and {@code to} sent for {@code [from, to)}: {@code from} rounded down to
     * the millisecond, {@code to} rounded up when {@code from} is before it (down otherwise: an
     * empty range stays empty). A snowflake id carries only its tick, and every tick that
     * overlaps the range is kept, as the server keeps them
     * ({@code clients/conformance/vectors/bounds.json}).
     *
     * @param from the range's start
     * @param to the range's end (excluded)
     * @return the two instants as RFC 3339 UTC with milliseconds, not URL-encoded
     */
    static String[] boundsInstants(Instant from, Instant to) {
        Instant upper = to.truncatedTo(ChronoUnit.MILLIS);
        if (from.isBefore(to) && upper.isBefore(to) && !upper.isAfter(LAST_WHOLE_MILLI)) {
            upper = upper.plusMillis(1);
        }
        return new String[] {rfc3339(from.truncatedTo(ChronoUnit.MILLIS)), rfc3339(upper)};
    }

    /**
     * An instant as the bounds route is sent it: RFC 3339, UTC, milliseconds.
     *
     * @param t the instant (whole milliseconds)
     * @return the query value, not URL-encoded
     */
    private static String rfc3339(Instant t) {
        try {
            return RFC3339_MILLIS.format(t);
        } catch (DateTimeException e) {
            throw new IllegalArgumentException("instant " + t + " lies outside the years -999999999..999999999", e);
        }
    }

    /**
     * Counters summed over every supply of this client (and the bounds helper's failovers).
     *
     * @return a snapshot of the counters, summed over the supplies
     */
    public Stats stats() {
        Stats s = snowflake.stats().plus(new Stats(0, 0, boundsFailovers.get(), 0, 0));
        for (IdSupply sup : segments.values()) {
            s = s.plus(sup.stats());
        }
        for (FormattedSupply sup : formatted.values()) {
            s = s.plus(sup.stats());
        }
        return s;
    }

    /**
     * Base URLs of the servers, in the order given.
     *
     * @return the base URLs, without a trailing slash
     */
    public List<String> servers() {
        return shared.servers.bases();
    }

    /**
     * The server asked first: the last one that answered (the first given, at the start).
     *
     * @return the base URL of that server
     */
    public String preferredServer() {
        return shared.servers.preferred();
    }

    /**
     * Base URLs of the servers marked down (waiting for a 200 from their health probe).
     *
     * @return the base URLs of the servers marked down, empty when every one is up
     */
    public List<String> downServers() {
        return shared.servers.down();
    }

    /**
     * Stops the client: callers waiting for ids get a {@link ClosedException}, later calls too;
     * the refills, probes and timers stop, and every thread the client started has ended when
     * this returns (bounded by 5 s). Ids left in the local batches are never used (a gap).
     * Idempotent.
     *
     * <p>The JDK's HttpClient keeps one selector thread of its own: on JDK 21+ it is shut down
     * here; on JDK 11 to 20 it ends by itself once the dropped HttpClient is garbage collected
     * (the JDK offers no way to stop it).
     */
    @Override
    public void close() {
        if (shared.closed) {
            return;
        }
        shared.closed = true;
        shared.timer.shutdownNow();
        shared.servers.close();
        snowflake.close();
        for (IdSupply s : segments.values()) {
            s.close();
        }
        for (FormattedSupply s : formatted.values()) {
            s.close();
        }
        shared.workers.shutdownNow();
        HttpClient h = http;
        http = null;
        shutdownHttpClient(h);
        boolean interrupted = false;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        try {
            shared.timer.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            shared.workers.awaitTermination(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            for (Thread t : threads) {
                long left = deadline - System.nanoTime();
                if (t != Thread.currentThread() && left > 0) {
                    TimeUnit.NANOSECONDS.timedJoin(t, left);
                }
            }
        } catch (InterruptedException e) {
            interrupted = true;
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * JDK 21+: {@code HttpClient.shutdownNow()}, found reflectively (this builds for JDK 11).
     *
     * @param h the client to shut down, or null
     */
    private static void shutdownHttpClient(HttpClient h) {
        if (h == null) {
            return;
        }
        try {
            Method m = HttpClient.class.getMethod("shutdownNow");
            m.invoke(h);
        } catch (NoSuchMethodException e) {
            // JDK 11 to 20: the selector thread ends once h is garbage collected.
        } catch (ReflectiveOperationException | RuntimeException e) {
            // Best effort.
        }
    }

    /**
     * The server's tag rule: 1 to 128 of {@code A-Z a-z 0-9 . _ : -}.
     *
     * @param tag the tag to check ({@code null} is not valid)
     * @return whether a server would accept the tag
     */
    public static boolean isValidTag(String tag) {
        if (tag == null || tag.isEmpty() || tag.length() > 128) {
            return false;
        }
        for (int k = 0; k < tag.length(); k++) {
            char c = tag.charAt(k);
            boolean ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
                    || c == '.' || c == '_' || c == ':' || c == '-';
            if (!ok) {
                return false;
            }
        }
        return true;
    }

    /** Builds a {@link LeafidClient}. */
    public static final class Builder {
        /** Base URLs, in order. */
        private List<String> servers = new ArrayList<>();
        /** Ids of the first request, the fewest of any. */
        private int batchSize = 1000;
        /** The most ids of a request. */
        private int maxBatch = MAX_BATCH;
        /** How long a batch should last. */
        private Duration targetLifetime = Duration.ofSeconds(1);
        /** Bound of a caller's wait. */
        private Duration waitTimeout = Duration.ofSeconds(5);
        /** Bound of one request. */
        private Duration requestTimeout = Duration.ofSeconds(2);
        /** Bound of opening a connection. */
        private Duration connectTimeout = Duration.ofMillis(500);
        /** First probe backoff. */
        private Duration backoffMin = Duration.ofMillis(50);
        /** Largest probe backoff. */
        private Duration backoffMax = Duration.ofSeconds(5);
        /** The wall clock of the period rule, epoch milliseconds ({@link #clock(Clock)}). */
        private LongSupplier wallClock = SYSTEM_CLOCK;
        /** The caller token, or null: never shown ({@link #toString()}). */
        private String token;

        /** Use {@link LeafidClient#builder()}. */
        private Builder() {}

        /**
         * Base URLs of the servers ({@code http://host:port}), asked in this order. Required.
         *
         * @param urls the base URLs, {@code http://} or {@code https://}
         * @return this builder
         */
        public Builder servers(String... urls) {
            return servers(Arrays.asList(urls));
        }

        /**
         * Base URLs of the servers, asked in this order. Required.
         *
         * @param urls the base URLs, {@code http://} or {@code https://}
         * @return this builder
         */
        public Builder servers(List<String> urls) {
            this.servers = new ArrayList<>(urls);
            return this;
        }

        /**
         * Ids of the first batch request of each supply and the smallest any later one asks
         * for, 1 to 1000000 (default 1000; a snowflake supply asks for at most 100000). Each
         * supply holds up to two batches; ids left when the client closes are never used (a
         * gap).
         *
         * @param n ids per request at the start
         * @return this builder
         */
        public Builder batchSize(int n) {
            this.batchSize = n;
            return this;
        }

        /**
         * The largest batch a supply asks for as its size follows demand, from the batch size
         * up to 1000000 (default 1000000; a snowflake supply asks for at most 100000, the
         * route's limit). A restart wastes at most the ids of two batches; set it to the batch
         * size for a fixed size.
         *
         * @param n the largest ids per request
         * @return this builder
         */
        public Builder maxBatch(int n) {
            this.maxBatch = n;
            return this;
        }

        /**
         * How long one batch should last at the rate the callers take ids (default 1 s): a
         * batch projected to last less than half of it doubles the next request, more than
         * twice of it halves it.
         *
         * @param d the target lifetime of a batch, positive
         * @return this builder
         */
        public Builder targetLifetime(Duration d) {
            this.targetLifetime = d;
            return this;
        }

        /**
         * How long {@code nextId} waits for a batch when the local ones are spent (default 5
         * s); then {@link UnavailableException}. Also how long one refill keeps retrying.
         *
         * @param d the wait bound, positive
         * @return this builder
         */
        public Builder waitTimeout(Duration d) {
            this.waitTimeout = d;
            return this;
        }

        /**
         * The caller token ({@code lid_...}, made by an admin with {@code POST /api/v1/tokens}),
         * sent as {@code Authorization: Bearer <token>} on every batch and bounds request (not on
         * the health probe, which needs none). Never shown: {@link #toString()} prints
         * {@code <redacted>}. Without it the client sends no credentials (a server in open mode).
         * leafid's {@code 401 unauthorized} and {@code 403 forbidden} are a
         * {@link RejectedException} with that code, never a failover (every server reads the
         * same tokens); a {@code 429 quota_exhausted} is waited out for its {@code Retry-After}
         * on the same server, or is a {@link ThrottledException} when that wait would pass the
         * wait timeout.
         *
         * @param token the caller token, not null nor empty
         * @return this builder
         */
        public Builder token(String token) {
            if (token == null || token.isEmpty() || token.chars().anyMatch(ch -> ch <= ' ' || ch > '~')) {
                throw new ConfigException("token must be non-empty printable ASCII without spaces");
            }
            this.token = token;
            return this;
        }

        /**
         * The settings, for humans; the token shows as {@code <redacted>}.
         *
         * @return the settings
         */
        @Override
        public String toString() {
            return "LeafidClient.Builder{servers=" + servers + ", batchSize=" + batchSize + ", maxBatch="
                    + maxBatch + ", waitTimeout=" + waitTimeout + ", requestTimeout=" + requestTimeout
                    + ", token=" + (token == null ? "none" : "<redacted>") + "}";
        }

        /**
         * Upper bound of one batch request, connect to last byte (default 2 s); a server that
         * takes longer is marked down and the next one asked.
         *
         * @param d the request bound, positive
         * @return this builder
         */
        public Builder requestTimeout(Duration d) {
            this.requestTimeout = d;
            return this;
        }

        /**
         * Upper bound of opening a connection (default 500 ms, at most the request timeout).
         *
         * @param d the connect bound, positive
         * @return this builder
         */
        public Builder connectTimeout(Duration d) {
            this.connectTimeout = d;
            return this;
        }

        /**
         * Backoff of a down server's health probes: {@code min} doubling up to {@code max}.
         *
         * @param min the wait before the first probe, positive
         * @param max the longest wait between two probes, at least {@code min}
         * @return this builder
         */
        public Builder backoff(Duration min, Duration max) {
            this.backoffMin = min;
            this.backoffMax = max;
            return this;
        }

        /**
         * The wall clock of the period rule (default: the system clock): a
         * {@link FormattedSupply} compares each batch's {@code period_end} with
         * {@link Clock#millis()} of this clock before it hands out an id, and drops a batch
         * whose period has ended. Only the formatted supplies read it; the numeric supplies,
         * timeouts and backoff use {@link System#nanoTime()}, and the bounds helper takes its
         * instants from the caller.
         *
         * <p>For tests of the period rule and for a process whose clock is known to be off:
         * {@code Clock.offset(Clock.systemUTC(), Duration.ofSeconds(-2))} reads the system clock
         * 2 s behind. The clock must be thread-safe and cheap: it is read once per id handed out.
         * A JDK system clock ({@link Clock#systemUTC()}, {@link Clock#systemDefaultZone()}, any
         * zone) is read through {@link System#currentTimeMillis()} directly, as the default.
         *
         * @param clock the wall clock, not null
         * @return this builder
         */
        public Builder clock(Clock clock) {
            Objects.requireNonNull(clock, "clock");
            this.wallClock = clock.getClass() == SYSTEM_CLOCK_CLASS ? SYSTEM_CLOCK : clock::millis;
            return this;
        }

        /**
         * The client; starts its timer thread (health probes) and warms the HTTP stack with one
         * {@code GET /health/ready} to every server (its answers are not used), waiting until
         * one answers, at most the request timeout: so the JDK's first-request start-up cost is
         * not counted against a server.
         *
         * @return the client, started
         * @throws ConfigException a setting is unusable
         */
        public LeafidClient build() {
            if (servers.isEmpty()) {
                throw new ConfigException("no server given");
            }
            if (batchSize < 1 || batchSize > MAX_BATCH) {
                throw new ConfigException("batch size must be within 1..=" + MAX_BATCH + " (got " + batchSize + ")");
            }
            if (maxBatch < batchSize || maxBatch > MAX_BATCH) {
                throw new ConfigException("max batch must be within the batch size " + batchSize + "..=" + MAX_BATCH
                        + " (got " + maxBatch + ")");
            }
            for (Duration d : Arrays.asList(waitTimeout, requestTimeout, connectTimeout, backoffMin, backoffMax,
                    targetLifetime)) {
                if (d == null || d.isNegative() || d.isZero()) {
                    throw new ConfigException("timeouts, backoff and the target lifetime must be positive");
                }
            }
            if (backoffMax.compareTo(backoffMin) < 0) {
                throw new ConfigException("backoff needs min <= max");
            }
            List<String> bases = new ArrayList<>();
            for (String url : servers) {
                bases.add(base(url));
            }
            Duration connect = connectTimeout.compareTo(requestTimeout) > 0 ? requestTimeout : connectTimeout;
            Builder b = copy();
            b.connectTimeout = connect;
            return new LeafidClient(b, bases);
        }

        /**
         * A copy of the settings (the client keeps it).
         *
         * @return the copy
         */
        private Builder copy() {
            Builder b = new Builder();
            b.servers = servers;
            b.batchSize = batchSize;
            b.maxBatch = maxBatch;
            b.targetLifetime = targetLifetime;
            b.waitTimeout = waitTimeout;
            b.requestTimeout = requestTimeout;
            b.connectTimeout = connectTimeout;
            b.backoffMin = backoffMin;
            b.backoffMax = backoffMax;
            b.wallClock = wallClock;
            b.token = token;
            return b;
        }

        /**
         * A base URL without trailing slashes, checked.
         *
         * @param url a server URL
         * @return its base
         * @throws ConfigException not an http:// or https:// base URL
         */
        private static String base(String url) {
            Objects.requireNonNull(url, "server URL");
            String base = url;
            while (base.endsWith("/")) {
                base = base.substring(0, base.length() - 1);
            }
            URI u;
            try {
                u = new URI(base);
            } catch (URISyntaxException e) {
                throw new ConfigException("not a URL: \"" + url + "\"");
            }
            String scheme = u.getScheme();
            if (scheme == null || !(scheme.equals("http") || scheme.equals("https")) || u.getHost() == null
                    || u.getRawQuery() != null || u.getRawFragment() != null) {
                throw new ConfigException("not an http:// or https:// base URL: \"" + url + "\"");
            }
            return base;
        }
    }
}
