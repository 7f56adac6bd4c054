package io.leafid.client;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A real leafid server process for tests: {@code target/debug/leafid} of the repository (or
 * {@code $LEAFID_BIN}) on SQLite, on a port it picks itself (read from its JSON "listening" log
 * line) or a given one. Several servers may share one database file, as servers of one cluster
 * share one database. Each runs in a temporary working directory of its own.
 */
final class LeafidServer implements AutoCloseable {
    private static final Pattern LISTENING =
            Pattern.compile("\"message\":\"listening\".*\"port\":(\\d+)");
    private static final HttpClient ADMIN = HttpClient.newBuilder()
            .version(HttpClient.Version.HTTP_1_1).connectTimeout(Duration.ofSeconds(2)).build();

    /** The admin token every test server is started with (admin writes send it). */
    private static final String ADMIN_TOKEN = "java-client-test-token";

    private final Process process;
    private final int port;
    private final Path db;

    private LeafidServer(Process process, int port, Path db) {
        this.process = process;
        this.port = port;
        this.db = db;
    }

    /** The server binary: {@code $LEAFID_BIN}, else the repository's debug build. */
    static Path binary() {
        String env = System.getenv("LEAFID_BIN");
        if (env != null && !env.isEmpty()) {
            return Paths.get(env);
        }
        Path dir = Paths.get(System.getProperty("user.dir")).toAbsolutePath();
        for (Path p = dir; p != null; p = p.getParent()) {
            Path candidate = p.resolve("target/debug/leafid");
            if (Files.exists(p.resolve("Cargo.toml")) && Files.isExecutable(candidate)) {
                return candidate;
            }
        }
        throw new IllegalStateException("no leafid binary: build it (cargo build --bin leafid) or set LEAFID_BIN");
    }

    /** A fresh SQLite database file path in a new temporary directory. */
    static Path newDatabase() throws IOException {
        return Files.createTempDirectory("leafid-java-test").resolve("leafid.db");
    }

    /** A server on {@code db}, on a port it picks. */
    static LeafidServer start(Path db) throws IOException {
        return start(db, 0, Map.of());
    }

    /** A server on {@code db} with extra environment, on {@code port} (0: it picks). */
    static LeafidServer start(Path db, int port, Map<String, String> env) throws IOException {
        return start(binary(), db, port, env);
    }

    /** A server from the binary {@code bin} on {@code db}, on a port it picks. */
    static LeafidServer startWith(Path bin, Path db, Map<String, String> env) throws IOException {
        return start(bin, db, 0, env);
    }

    private static LeafidServer start(Path bin, Path db, int port, Map<String, String> env) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(bin.toString());
        Map<String, String> e = pb.environment();
        e.put("LEAFID__SERVER__HOST", "127.0.0.1");
        e.put("LEAFID__SERVER__PORT", Integer.toString(port));
        e.put("LEAFID__LOG__FORMAT", "json");
        e.put("LEAFID__DATABASE__URL", "sqlite://" + db);
        e.put("LEAFID__ADMIN__TOKEN", ADMIN_TOKEN);
        e.putAll(env);
        // Its own working directory: the server writes its snowflake worker cache file there
        // (data/snowflake-worker.json), neither shared with another server nor left in the checkout.
        pb.directory(Files.createTempDirectory("leafid-java-server").toFile());
        pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
        Process p = pb.start();
        CompletableFuture<Integer> listening = new CompletableFuture<>();
        StringBuilder log = new StringBuilder();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(
                    new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    synchronized (log) {
                        if (log.length() < 20_000) {
                            log.append(line).append('\n');
                        }
                    }
                    Matcher m = LISTENING.matcher(line);
                    if (m.find()) {
                        listening.complete(Integer.parseInt(m.group(1)));
                    }
                }
            } catch (IOException ex) {
                // The process ended.
            }
            listening.completeExceptionally(new IOException("leafid exited before listening"));
        }, "leafid-test-server-log");
        reader.setDaemon(true);
        reader.start();
        try {
            int actual = listening.get(30, TimeUnit.SECONDS);
            LeafidServer s = new LeafidServer(p, actual, db);
            s.awaitReady();
            return s;
        } catch (Exception ex) {
            p.destroyForcibly();
            String text;
            synchronized (log) {
                text = log.toString();
            }
            throw new IOException("leafid did not start: " + ex + "\n" + text, ex);
        }
    }

    private void awaitReady() throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (true) {
            try {
                if (get("/health/ready").statusCode() == 200) {
                    return;
                }
            } catch (IOException e) {
                // Not yet.
            }
            if (System.nanoTime() > deadline) {
                throw new IOException("not ready within 20 s");
            }
            Thread.sleep(20);
        }
    }

    /** Base URL. */
    String url() {
        return "http://127.0.0.1:" + port;
    }

    int port() {
        return port;
    }

    Path database() {
        return db;
    }

    long pid() {
        return process.pid();
    }

    /** GET on this server. */
    HttpResponse<String> get(String path) throws IOException, InterruptedException {
        return ADMIN.send(HttpRequest.newBuilder(URI.create(url() + path))
                .timeout(Duration.ofSeconds(5)).build(), HttpResponse.BodyHandlers.ofString());
    }

    /** Creates a tag (an admin write: with the server's admin token). */
    void createTag(String tag, int step, String maxId) throws IOException, InterruptedException {
        String body = "{\"biz_tag\":\"" + tag + "\",\"step\":" + step
                + (maxId == null ? "" : ",\"max_id\":" + maxId) + "}";
        HttpResponse<String> r = ADMIN.send(HttpRequest.newBuilder(URI.create(url() + "/api/v1/tags"))
                .timeout(Duration.ofSeconds(5))
                .header("Content-Type", "application/json")
                .header("Authorization", "Bearer " + ADMIN_TOKEN)
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 201) {
            throw new IOException("create tag " + tag + ": " + r.statusCode() + " " + r.body());
        }
    }

    /** Creates a formatted tag: {@code format} is the format's JSON object. */
    void createFormattedTag(String tag, int step, String format) throws IOException, InterruptedException {
        String body = "{\"biz_tag\":\"" + tag + "\",\"step\":" + step + ",\"format\":" + format + "}";
        HttpResponse<String> r = ADMIN.send(HttpRequest.newBuilder(URI.create(url() + "/api/v1/tags"))
                .timeout(Duration.ofSeconds(5))
                .header("Content-Type", "application/json")
                .header("Authorization", "Bearer " + ADMIN_TOKEN)
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() != 201) {
            throw new IOException("create formatted tag " + tag + ": " + r.statusCode() + " " + r.body());
        }
    }

    /** {@code kill -9}. */
    void kill() throws InterruptedException {
        process.destroyForcibly();
        process.waitFor(10, TimeUnit.SECONDS);
    }

    /** {@code kill -STOP}: the process keeps its socket but answers nothing. */
    void pause() throws IOException, InterruptedException {
        signal("STOP");
        // kill returns before the stop takes hold: on a busy machine a stopped server still
        // answered requests. Wait until every thread is stopped (state T in /proc).
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!allThreadsStopped(process.pid())) {
            if (System.nanoTime() > deadline) {
                throw new IOException("server " + process.pid() + " not stopped 10 s after SIGSTOP");
            }
            Thread.sleep(1);
        }
    }

    /** Whether every thread of {@code pid} is in state T in /proc (one that exits counts). */
    private static boolean allThreadsStopped(long pid) {
        java.io.File[] tasks = new java.io.File("/proc/" + pid + "/task").listFiles();
        if (tasks == null || tasks.length == 0) {
            return false;
        }
        for (java.io.File task : tasks) {
            String stat;
            try {
                stat = Files.readString(task.toPath().resolve("stat"), StandardCharsets.ISO_8859_1);
            } catch (IOException e) {
                continue;
            }
            if (!stat.substring(stat.lastIndexOf(')') + 1).stripLeading().startsWith("T")) {
                return false;
            }
        }
        return true;
    }

    /** {@code kill -CONT}. */
    void resume() throws IOException, InterruptedException {
        signal("CONT");
    }

    private void signal(String sig) throws IOException, InterruptedException {
        Process k = new ProcessBuilder("kill", "-" + sig, Long.toString(process.pid())).inheritIO().start();
        if (k.waitFor() != 0) {
            throw new IOException("kill -" + sig + " failed");
        }
    }

    boolean isAlive() {
        return process.isAlive();
    }

    @Override
    public void close() throws InterruptedException {
        if (process.isAlive()) {
            try {
                resume();
            } catch (IOException e) {
                // Gone already.
            }
            kill();
        }
    }

    /** A loopback port nothing listens on (bound, then released). */
    static int closedPort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }
}
