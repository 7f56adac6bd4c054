package io.leafid.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

/**
 * The Java client against {@link AtomicLong} (issue 33's table; JMH is not packaged in Debian,
 * so a warmed hand-made loop). Prints one {@code BENCH {...}} line per case on stdout, the rest
 * on stderr:
 *
 * <ul>
 *   <li>{@code local}: {@code IdSupply.nextId()} on a supply holding one huge range (no fetch)
 *       against {@code AtomicLong.incrementAndGet()} on a static field, one thread, the same
 *       number of calls per round, rounds alternated after warm-up; every result is folded into
 *       a sink so the JIT keeps the calls; the median of the rounds.
 *   <li>{@code formatted_local}: {@code FormattedSupply.nextId()} on supplies of one batch of
 *       100,000 order-number texts (the list route's limit; a fresh supply of the same array each
 *       100,000 calls, its period ending never, read through the real wall clock) against
 *       {@code IdSupply.nextId()} of the {@code local} case as the baseline, in the same
 *       alternated, warmed rounds; each text is checked non-null (its characters are not read).
 *   <li>{@code sustained_1}: one thread calling {@code nextId()} for {@code LEAFID_BENCH_SECS}
 *       on a fresh client with the default settings (batch 1000, the size following demand)
 *       against the server at {@code LEAFID_BENCH_URL}, tag {@code LEAFID_BENCH_TAG}, every
 *       fetch included; against the counter in one thread for 1 s.
 *   <li>{@code sustained_4}: four threads on one fresh client for {@code LEAFID_BENCH_SECS};
 *       against four threads incrementing one shared counter for 1 s.
 * </ul>
 *
 * Run by {@code clients/java/bench.sh}.
 */
public final class Bench {
    private static volatile long sink;
    /** A field, so the JIT cannot scalar-replace it and drop the atomic (escape analysis). */
    private static final AtomicLong COUNTER = new AtomicLong();
    /** Calls per local round. */
    private static final int LOCAL_CALLS = 20_000_000;

    private Bench() {}

    /**
     * Runs the three cases.
     *
     * @param args unused
     * @throws Exception a failed call or thread
     */
    public static void main(String[] args) throws Exception {
        String url = env("LEAFID_BENCH_URL", null);
        String tag = env("LEAFID_BENCH_TAG", null);
        double secs = Double.parseDouble(env("LEAFID_BENCH_SECS", "10"));
        System.err.println("java " + System.getProperty("java.version") + ", "
                + Runtime.getRuntime().availableProcessors() + " cores");
        local();
        formattedLocal();
        if (url == null || tag == null) {
            System.err.println("LEAFID_BENCH_URL and LEAFID_BENCH_TAG unset: no sustained cases");
            return;
        }
        sustained(url, tag, 1, secs);
        sustained(url, tag, 4, secs);
    }

    private static String env(String name, String fallback) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? fallback : v;
    }

    private static void local() {
        IdSupply s = IdSupply.fixed(Ranges.of(1, Long.MAX_VALUE / 2), Duration.ofSeconds(1));
        for (int w = 0; w < 5; w++) {
            roundCounter(LOCAL_CALLS);
            roundSupply(s, LOCAL_CALLS);
        }
        int rounds = 9;
        double[] counter = new double[rounds];
        double[] supply = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            if (r % 2 == 0) {
                counter[r] = roundCounter(LOCAL_CALLS);
                supply[r] = roundSupply(s, LOCAL_CALLS);
            } else {
                supply[r] = roundSupply(s, LOCAL_CALLS);
                counter[r] = roundCounter(LOCAL_CALLS);
            }
        }
        double c = median(counter);
        double n = median(supply);
        System.err.println("local rounds ns/call: counter " + Arrays.toString(counter) + ", nextId "
                + Arrays.toString(supply));
        line("local", 1e9 / n, 1e9 / c, "warmed loop, " + LOCAL_CALLS / 1_000_000 + "M calls, median of " + rounds
                + " alternated rounds; baseline AtomicLong.incrementAndGet");
    }

    /** Texts per formatted batch: the list route's limit. */
    private static final int FORMATTED_BATCH = 100_000;

    private static void formattedLocal() {
        String[] ids = new String[FORMATTED_BATCH];
        for (int k = 0; k < ids.length; k++) {
            ids[k] = String.format("ORD-20261127%08d", k + 1);
        }
        IdSupply s = IdSupply.fixed(Ranges.of(1, Long.MAX_VALUE / 2), Duration.ofSeconds(1));
        for (int w = 0; w < 5; w++) {
            roundSupply(s, LOCAL_CALLS);
            roundFormatted(ids, LOCAL_CALLS);
        }
        int rounds = 9;
        double[] numeric = new double[rounds];
        double[] formatted = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            if (r % 2 == 0) {
                numeric[r] = roundSupply(s, LOCAL_CALLS);
                formatted[r] = roundFormatted(ids, LOCAL_CALLS);
            } else {
                formatted[r] = roundFormatted(ids, LOCAL_CALLS);
                numeric[r] = roundSupply(s, LOCAL_CALLS);
            }
        }
        double n = median(numeric);
        double f = median(formatted);
        System.err.println("formatted_local rounds ns/call: numeric nextId " + Arrays.toString(numeric)
                + ", formatted nextId " + Arrays.toString(formatted));
        line("formatted_local", 1e9 / f, 1e9 / n, "formatted next_id vs numeric next_id");
    }

    private static double roundFormatted(String[] ids, int n) {
        long acc = 0;
        long t0 = System.nanoTime();
        for (int done = 0; done < n; done += ids.length) {
            FormattedSupply s = FormattedSupply.fixed(ids, Long.MAX_VALUE, Duration.ofSeconds(1),
                    LeafidClient.SYSTEM_CLOCK);
            for (int k = 0; k < ids.length; k++) {
                if (s.nextId() != null) {
                    acc++;
                }
            }
        }
        long t = System.nanoTime() - t0;
        sink = acc;
        return (double) t / n;
    }

    private static double roundCounter(int n) {
        AtomicLong counter = COUNTER;
        long acc = 0;
        long t0 = System.nanoTime();
        for (int k = 0; k < n; k++) {
            acc ^= counter.incrementAndGet();
        }
        long t = System.nanoTime() - t0;
        sink = acc;
        return (double) t / n;
    }

    private static double roundSupply(IdSupply s, int n) {
        long acc = 0;
        long t0 = System.nanoTime();
        for (int k = 0; k < n; k++) {
            acc ^= s.nextId();
        }
        long t = System.nanoTime() - t0;
        sink = acc;
        return (double) t / n;
    }

    private static double median(double[] v) {
        double[] c = v.clone();
        Arrays.sort(c);
        return c[c.length / 2];
    }

    /** {@code threads} callers on one fresh client for {@code secs}, then the counter baseline. */
    private static void sustained(String url, String tag, int threads, double secs) throws Exception {
        long nanos = (long) (secs * 1e9);
        double rate;
        Stats st;
        try (LeafidClient c = LeafidClient.builder().servers(url).build()) {
            IdSupply s = c.segment(tag);
            LongAdder total = new LongAdder();
            long took = together(threads, () -> total.add(callFor(s, nanos)));
            rate = total.sum() / (took / 1e9);
            st = c.stats();
        }
        AtomicLong shared = new AtomicLong();
        LongAdder counted = new LongAdder();
        long took = together(threads, () -> counted.add(countFor(shared, 1_000_000_000L)));
        double base = counted.sum() / (took / 1e9);
        System.err.println("sustained_" + threads + ": " + st);
        line("sustained_" + threads, rate, base, threads + " thread" + (threads == 1 ? "" : "s")
                + " on one fresh client (batch 1000, demand on) for " + secs + " s, fetches included; baseline "
                + threads + " thread" + (threads == 1 ? "" : "s") + " on one AtomicLong for 1 s");
    }

    /** A body of work that may throw. */
    private interface Work {
        void run() throws Exception;
    }

    /** Runs {@code work} on {@code threads} threads started together; the wall time in ns. */
    private static long together(int threads, Work work) throws Exception {
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> all = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    go.await();
                    work.run();
                } catch (Throwable e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                }
            });
            all.add(th);
            th.start();
        }
        long t0 = System.nanoTime();
        go.countDown();
        for (Thread th : all) {
            th.join();
        }
        long took = System.nanoTime() - t0;
        if (!errors.isEmpty()) {
            throw new IllegalStateException("a bench thread failed", errors.get(0));
        }
        return took;
    }

    /** Calls nextId for {@code nanos}, checking the clock every 1024 calls; the calls made. */
    private static long callFor(IdSupply s, long nanos) {
        long end = System.nanoTime() + nanos;
        long n = 0;
        long acc = 0;
        do {
            for (int k = 0; k < 1024; k++) {
                acc ^= s.nextId();
            }
            n += 1024;
        } while (System.nanoTime() - end < 0);
        sink = acc;
        return n;
    }

    /** Increments {@code c} for {@code nanos}, as {@link #callFor} calls; the increments made. */
    private static long countFor(AtomicLong c, long nanos) {
        long end = System.nanoTime() + nanos;
        long n = 0;
        long acc = 0;
        do {
            for (int k = 0; k < 1024; k++) {
                acc ^= c.incrementAndGet();
            }
            n += 1024;
        } while (System.nanoTime() - end < 0);
        sink = acc;
        return n;
    }

    private static void line(String kase, double rate, double base, String method) {
        System.out.printf("BENCH {\"client\":\"java\",\"case\":\"%s\",\"ids_per_s\":%.0f,\"baseline_per_s\":%.0f,"
                + "\"ratio\":%.3f,\"method\":%s}%n", kase, rate, base, rate / base, Json.quote(method));
        System.out.flush();
    }
}
