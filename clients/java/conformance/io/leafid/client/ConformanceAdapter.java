package io.leafid.client;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The conformance adapter (clients/conformance/PROTOCOL.md): reads one JSON command a line on
 * stdin, calls the client's public API, writes one JSON answer a line on stdout. It talks no
 * HTTP and implements no guarantee itself. In the client's package only to reuse its small
 * JSON reader; built by test.sh, not part of the jar.
 */
public final class ConformanceAdapter {
    private LeafidClient client;
    private final PrintStream out;

    private ConformanceAdapter(PrintStream out) {
        this.out = out;
    }

    /** Runs the adapter until {@code close} or the end of stdin. */
    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        ConformanceAdapter a = new ConformanceAdapter(out);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            String answer;
            boolean exit = false;
            try {
                Object v = Json.parse(line);
                if (!(v instanceof Map)) {
                    throw new IllegalArgumentException("a command is a JSON object");
                }
                Map<?, ?> cmd = (Map<?, ?>) v;
                String op = String.valueOf(cmd.get("op"));
                switch (op) {
                    case "open":
                        answer = a.open(cmd);
                        break;
                    case "take":
                        answer = a.take(cmd);
                        break;
                    case "bounds":
                        answer = a.bounds(cmd);
                        break;
                    case "stats":
                        answer = a.stats();
                        break;
                    case "close":
                        if (a.client != null) {
                            a.client.close();
                        }
                        answer = "{\"ok\":true}";
                        exit = true;
                        break;
                    default:
                        answer = error("internal", "", "unknown op " + op);
                }
            } catch (LeafidException e) {
                answer = error(kind(e), code(e), e.getMessage());
            } catch (Exception e) {
                answer = error("internal", "", String.valueOf(e));
            }
            out.print(answer);
            out.print('\n');
            out.flush();
            if (exit) {
                System.exit(0);
            }
        }
        if (a.client != null) {
            a.client.close();
        }
    }

    private String open(Map<?, ?> cmd) {
        if (client != null) {
            client.close();
            client = null;
        }
        List<String> servers = new ArrayList<>();
        if (cmd.get("servers") instanceof List) {
            for (Object s : (List<?>) cmd.get("servers")) {
                servers.add(String.valueOf(s));
            }
        }
        LeafidClient.Builder b = LeafidClient.builder().servers(servers);
        if (cmd.containsKey("batch")) {
            b.batchSize((int) num(cmd, "batch"));
        }
        if (cmd.containsKey("max_batch")) {
            b.maxBatch((int) num(cmd, "max_batch"));
        }
        if (cmd.containsKey("target_lifetime_ms")) {
            b.targetLifetime(Duration.ofMillis(num(cmd, "target_lifetime_ms")));
        }
        if (cmd.containsKey("request_timeout_ms")) {
            b.requestTimeout(Duration.ofMillis(num(cmd, "request_timeout_ms")));
        }
        if (cmd.containsKey("wait_timeout_ms")) {
            b.waitTimeout(Duration.ofMillis(num(cmd, "wait_timeout_ms")));
        }
        if (cmd.containsKey("backoff_min_ms") || cmd.containsKey("backoff_max_ms")) {
            b.backoff(Duration.ofMillis(num(cmd, "backoff_min_ms")), Duration.ofMillis(num(cmd, "backoff_max_ms")));
        }
        if (cmd.get("token") instanceof String) {
            b.token((String) cmd.get("token"));
        }
        if (cmd.containsKey("clock_offset_ms")) {
            // The period rule's wall clock: the system clock plus the offset, through the public hook.
            b.clock(Clock.offset(Clock.systemUTC(), Duration.ofMillis(num(cmd, "clock_offset_ms"))));
        }
        client = b.build();
        System.err.println("java adapter: client open on " + servers);
        return "{\"ok\":true}";
    }

    private String take(Map<?, ?> cmd) throws InterruptedException {
        if (client == null) {
            return error("internal", "", "take before open");
        }
        boolean snowflake = "snowflake".equals(cmd.get("engine"));
        boolean formatted = "formatted".equals(cmd.get("engine"));
        String tag = snowflake ? null : String.valueOf(cmd.get("tag"));
        int callers = (int) num(cmd, "callers");
        int perCaller = (int) num(cmd, "per_caller");
        long pause = cmd.containsKey("pause_ms") ? num(cmd, "pause_ms") : 0;
        // Ids as the answer writes them: decimal strings, or a formatted tag's texts as received.
        List<List<String>> ids = new ArrayList<>();
        Map<String, Integer> errors = new LinkedHashMap<>();
        List<Thread> threads = new ArrayList<>();
        // The longest single nextId call of any caller, in nanoseconds (max_call_ms).
        AtomicLong slowest = new AtomicLong();
        for (int t = 0; t < callers; t++) {
            List<String> mine = new ArrayList<>(perCaller);
            ids.add(mine);
            Thread th = new Thread(() -> {
                for (int k = 0; k < perCaller; k++) {
                    long started = System.nanoTime();
                    try {
                        mine.add(formatted ? client.formatted(tag).nextId()
                                : Long.toString(snowflake ? client.snowflake().nextId() : client.segment(tag).nextId()));
                    } catch (LeafidException e) {
                        if (count(errors, kind(e), code(e)) <= 3) {
                            System.err.println("java adapter: caller error: " + e.getMessage() + "; " + client.stats());
                            if (e instanceof UnavailableException) {
                                dumpClientThreads();
                            }
                        }
                    } catch (RuntimeException e) {
                        System.err.println("java adapter: " + e);
                        count(errors, "internal", "");
                    }
                    long took = System.nanoTime() - started;
                    slowest.accumulateAndGet(took, Math::max);
                    if (pause > 0) {
                        try {
                            Thread.sleep(pause);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }
            }, "adapter-caller-" + t);
            threads.add(th);
            th.start();
        }
        for (Thread th : threads) {
            th.join();
        }
        StringBuilder b = new StringBuilder("{\"ok\":true,\"ids\":[");
        for (int t = 0; t < ids.size(); t++) {
            b.append(t == 0 ? "[" : ",[");
            List<String> mine = ids.get(t);
            for (int k = 0; k < mine.size(); k++) {
                if (k > 0) {
                    b.append(',');
                }
                b.append(Json.quote(mine.get(k)));
            }
            b.append(']');
        }
        b.append("],\"errors\":[");
        boolean first = true;
        synchronized (errors) {
            for (Map.Entry<String, Integer> e : errors.entrySet()) {
                String[] kc = e.getKey().split("\u0000", 2);
                b.append(first ? "" : ",").append("{\"kind\":").append(Json.quote(kc[0]))
                        .append(",\"code\":").append(Json.quote(kc[1]))
                        .append(",\"count\":").append(e.getValue()).append('}');
                first = false;
            }
        }
        return b.append("],\"max_call_ms\":").append(slowest.get() / 1e6).append('}').toString();
    }

    private String bounds(Map<?, ?> cmd) {
        if (client == null) {
            return error("internal", "", "bounds before open");
        }
        Instant from = Instant.parse(String.valueOf(cmd.get("from")));
        Instant to = Instant.parse(String.valueOf(cmd.get("to")));
        IdBounds b = client.snowflakeBounds(from, to);
        return "{\"ok\":true,\"min_id\":\"" + b.minId() + "\",\"max_id\":\"" + b.maxId() + "\"}";
    }

    private String stats() {
        if (client == null) {
            return error("internal", "", "stats before open");
        }
        Stats s = client.stats();
        return "{\"ok\":true,\"ids_served\":" + s.idsServed() + ",\"batches\":" + s.batches()
                + ",\"failovers\":" + s.failovers() + ",\"discarded_ids\":" + s.discardedIds()
                + ",\"batch_size\":" + s.batchSize() + "}";
    }

    private static boolean dumped;

    /** Stacks of the client's threads, to stderr, once (why a caller waited in vain). */
    private static synchronized void dumpClientThreads() {
        if (dumped) {
            return;
        }
        dumped = true;
        for (Map.Entry<Thread, StackTraceElement[]> t : Thread.getAllStackTraces().entrySet()) {
            if (t.getKey().getName().startsWith("leafid-")) {
                System.err.println("  thread " + t.getKey().getName() + " " + t.getKey().getState());
                for (StackTraceElement f : t.getValue()) {
                    System.err.println("    at " + f);
                }
            }
        }
    }

    /** Counts one error; the count of its kind and code so far. */
    private static int count(Map<String, Integer> errors, String kind, String code) {
        synchronized (errors) {
            return errors.merge(kind + "\u0000" + code, 1, Integer::sum);
        }
    }

    private static long num(Map<?, ?> cmd, String key) {
        Object v = cmd.get(key);
        if (!(v instanceof Json.Num)) {
            throw new IllegalArgumentException(key + " must be a number");
        }
        return Long.parseLong(((Json.Num) v).text);
    }

    /** The protocol's error kind of a client error. */
    static String kind(LeafidException e) {
        if (e instanceof RejectedException) {
            return "rejected";
        }
        if (e instanceof ThrottledException) {
            return "throttled";
        }
        if (e instanceof UnavailableException) {
            return "unavailable";
        }
        if (e instanceof InvalidTagException) {
            return "invalid_tag";
        }
        if (e instanceof ConfigException) {
            return "config";
        }
        return "internal";
    }

    static String code(LeafidException e) {
        if (e instanceof ThrottledException) {
            return ((ThrottledException) e).code();
        }
        return e instanceof RejectedException ? ((RejectedException) e).code() : "";
    }

    private static String error(String kind, String code, String message) {
        return "{\"ok\":false,\"error\":{\"kind\":" + Json.quote(kind) + ",\"code\":" + Json.quote(code)
                + ",\"message\":" + Json.quote(String.valueOf(message)) + "}}";
    }
}
