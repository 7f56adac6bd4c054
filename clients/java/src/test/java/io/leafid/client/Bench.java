package io.leafid.client;

import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java client's benchmark (JMH is not packaged in Debian, so a hand-made harness):
 *
 * <ol>
 *   <li><b>Local path</b>: {@code IdSupply.nextId()} on a supply of 10,000,000 local ids
 *       against {@code AtomicLong.incrementAndGet()}, one thread, interleaved rounds of 10M
 *       calls each after 3 warm-up rounds of each; every result is folded into a sink so the
 *       JIT keeps the calls, and the counter is a static field so escape analysis cannot turn
 *       it into a plain local; the median ns/call of 7 rounds.
 *   <li><b>Sustained from a server</b>: one caller calling {@code nextId()} in a loop for 5 s
 *       against a real leafid server (target/release/leafid if built, else target/debug/leafid,
 *       or $LEAFID_BIN) on SQLite, at batch sizes 1000 and 100000, after 1 s of warm-up.
 * </ol>
 *
 * Run (after test.sh built the classes):
 * {@code java -cp target/classes:target/test-classes io.leafid.client.Bench}
 */
public final class Bench {
    private static volatile long sink;
    /** A field, so the JIT cannot scalar-replace it and drop the atomic (escape analysis). */
    private static final AtomicLong COUNTER = new AtomicLong();

    private Bench() {}

    /** Runs both parts and prints a table. */
    public static void main(String[] args) throws Exception {
        System.out.println("java " + System.getProperty("java.version") + ", "
                + Runtime.getRuntime().availableProcessors() + " cores");
        local();
        remote();
    }

    private static void local() {
        final int n = 10_000_000;
        long[] ids = new long[n];
        for (int k = 0; k < n; k++) {
            ids[k] = k + 1L;
        }
        for (int w = 0; w < 3; w++) {
            roundCounter(n);
            roundSupply(ids);
        }
        int rounds = 7;
        double[] counter = new double[rounds];
        double[] supply = new double[rounds];
        for (int r = 0; r < rounds; r++) {
            counter[r] = roundCounter(n);
            supply[r] = roundSupply(ids);
        }
        double c = median(counter);
        double s = median(supply);
        System.out.printf("local: AtomicLong.incrementAndGet %.2f ns/call (%.0f M/s), IdSupply.nextId %.2f ns/call"
                + " (%.0f M/s), nextId/counter time %.2fx%n", c, 1e3 / c, s, 1e3 / s, s / c);
        System.out.println("  rounds counter ns: " + Arrays.toString(counter));
        System.out.println("  rounds nextId  ns: " + Arrays.toString(supply));
    }

    private static double roundCounter(int n) {
        AtomicLong counter = COUNTER;
        counter.set(0);
        long acc = 0;
        long t0 = System.nanoTime();
        for (int k = 0; k < n; k++) {
            acc ^= counter.incrementAndGet();
        }
        long t = System.nanoTime() - t0;
        sink = acc;
        return (double) t / n;
    }

    private static double roundSupply(long[] ids) {
        IdSupply s = IdSupply.fixed(ids, Duration.ofSeconds(1));
        int n = ids.length;
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

    private static void remote() throws Exception {
        Path release = Paths.get(System.getProperty("user.dir")).toAbsolutePath().resolve("../../target/release/leafid")
                .normalize();
        String env = System.getenv("LEAFID_BIN");
        String which;
        if (env != null && !env.isEmpty()) {
            which = env;
        } else if (release.toFile().canExecute()) {
            which = release.toString();
        } else {
            which = LeafidServer.binary().toString() + " (DEBUG build: no target/release/leafid)";
        }
        Map<String, String> serverEnv = Map.of();
        Path bin = env != null && !env.isEmpty() ? Paths.get(env)
                : release.toFile().canExecute() ? release : LeafidServer.binary();
        try (LeafidServer server = LeafidServer.startWith(bin, LeafidServer.newDatabase(), serverEnv)) {
            server.createTag("bench", 100_000, null);
            System.out.println("server: " + which);
            for (int batch : new int[] {1000, 100_000}) {
                try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(batch).build()) {
                    IdSupply s = c.segment("bench");
                    run(s, 1_000_000_000L);
                    long t0 = System.nanoTime();
                    long n = run(s, 5_000_000_000L);
                    double secs = (System.nanoTime() - t0) / 1e9;
                    Stats st = c.stats();
                    System.out.printf("sustained, one caller, batch %d: %.0f ids/s (%d ids in %.1f s, %d batches)%n",
                            batch, n / secs, n, secs, st.batches());
                }
            }
        }
    }

    /** Calls nextId for {@code nanos}, checking the clock every 1024 calls; the calls made. */
    private static long run(IdSupply s, long nanos) {
        long end = System.nanoTime() + nanos;
        long n = 0;
        long acc = 0;
        while (true) {
            for (int k = 0; k < 1024; k++) {
                acc ^= s.nextId();
            }
            n += 1024;
            if (System.nanoTime() >= end) {
                sink = acc;
                return n;
            }
        }
    }
}
