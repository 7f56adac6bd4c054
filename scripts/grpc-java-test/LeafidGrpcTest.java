// leafid's gRPC door from Java's grpc-java (issue 46), run by scripts/grpc-java-test/run.sh
// (itself run by scripts/grpc-clients-test.sh java).
//
// Everything comes from Debian's packages: grpc-java 1.41 (libgrpc-java, Netty transport from
// libnetty-java), protobuf-java (libprotobuf-java), the stubs generated at test time by protoc
// and protoc-gen-grpc-java from proto/leafid/v1/leafid.proto unchanged, the health and
// reflection stubs from grpc-proto's health.proto and reflection.proto (Debian ships no
// grpc-services jar), google.rpc.Status from libgoogle-common-protos-java.
//
// Starts the server binary ($LEAFID_BIN) on a temporary SQLite file with the gRPC door on a free
// port, calls every RPC of every service in the proto, the streams included, and checks the ids
// by the conformance suite's rules: positive, unique, increasing per caller, exact 64-bit values
// (a tag that starts above 2^53, where a double would round); errors by their status code and
// their google.rpc.ErrorInfo reason (the HTTP error body's `code`); then the standard health
// service and a reflection listing. Each check is a named case; ends with "N passed, N failed"
// and exits non-zero on any failure. No timing asserts: every wait is a generous deadline, so a
// loaded machine makes the run slower, never red.
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import com.google.protobuf.Any;
import io.grpc.Context;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.reflection.v1.ServerReflectionGrpc;
import io.grpc.reflection.v1.ServerReflectionRequest;
import io.grpc.reflection.v1.ServerReflectionResponse;
import io.grpc.reflection.v1.ServiceResponse;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import io.leafid.test.rpc.ErrorInfo;
import io.leafid.v1.BoundsReply;
import io.leafid.v1.BoundsRequest;
import io.leafid.v1.CreateTagRequest;
import io.leafid.v1.DecodeReply;
import io.leafid.v1.DecodeRequest;
import io.leafid.v1.FormattedIdsReply;
import io.leafid.v1.GetTagRequest;
import io.leafid.v1.IdRun;
import io.leafid.v1.IdsReply;
import io.leafid.v1.ListTagsRequest;
import io.leafid.v1.NextIdsRequest;
import io.leafid.v1.NextRangesRequest;
import io.leafid.v1.PullRequest;
import io.leafid.v1.RangesReply;
import io.leafid.v1.SegmentGrpc;
import io.leafid.v1.SnowflakeDecodeReply;
import io.leafid.v1.SnowflakeDecodeRequest;
import io.leafid.v1.SnowflakeGrpc;
import io.leafid.v1.SnowflakeIdsRequest;
import io.leafid.v1.StreamRangesRequest;
import io.leafid.v1.Tag;
import io.leafid.v1.TagsGrpc;
import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

public final class LeafidGrpcTest {
  private static final String ADMIN = "grpc-java-admin";
  /** 2^53 + 1: the first integer a double cannot hold. */
  private static final long ABOVE_2_53 = 9007199254740993L;
  /** Every call's deadline: generous, so a loaded machine is slow, not red. */
  private static final long DEADLINE_S = 60;

  /** One named check. */
  private interface Case {
    void run() throws Exception;
  }

  /** A call expected to fail. */
  private interface Call {
    void run() throws Exception;
  }

  // ---- the server -------------------------------------------------------------------------

  /** The server binary with the gRPC door on, its ports read from its JSON log lines. */
  private static final class Server {
    final Process proc;
    final String http;
    final int grpcPort;
    final ArrayDeque<String> tail = new ArrayDeque<>();

    Server(Path root, Path tmp) throws Exception {
      String bin = System.getenv("LEAFID_BIN");
      if (bin == null || bin.isEmpty()) {
        String target = System.getenv().getOrDefault("CARGO_TARGET_DIR", "target");
        bin = root.resolve(target).resolve("debug").resolve("leafid").toString();
      }
      Path work = tmp.resolve("work");
      Files.createDirectories(work);
      ProcessBuilder pb = new ProcessBuilder(bin).directory(work.toFile());
      Map<String, String> env = pb.environment();
      env.put("LEAFID__SERVER__PORT", "0");
      env.put("LEAFID__SERVER__WORKERS", "1");
      env.put("LEAFID__DATABASE__URL", "sqlite://" + tmp.resolve("leafid.db"));
      env.put("LEAFID__LOG__FORMAT", "json");
      env.put("LEAFID__ADMIN__TOKEN", ADMIN);
      env.put("LEAFID__GRPC__ENABLED", "true");
      env.put("LEAFID__GRPC__PORT", "0");
      env.put("RUST_LOG", "info");
      pb.redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
      pb.redirectOutput(ProcessBuilder.Redirect.DISCARD);
      proc = pb.start();
      Runtime.getRuntime().addShutdownHook(new Thread(proc::destroyForcibly));

      Map<String, Integer> ports = new ConcurrentHashMap<>();
      // Drains stderr for the server's whole life (a full pipe would block its logging).
      Thread drain = new Thread(() -> {
        try (BufferedReader r = new BufferedReader(
            new InputStreamReader(proc.getErrorStream(), StandardCharsets.UTF_8))) {
          for (String line; (line = r.readLine()) != null; ) {
            synchronized (tail) {
              tail.addLast(line);
              if (tail.size() > 30) tail.removeFirst();
            }
            String[] mp = messageAndPort(line);
            if (mp != null && (mp[0].equals("listening") || mp[0].equals("grpc listening"))) {
              ports.put(mp[0], Integer.parseInt(mp[1]));
            }
          }
        } catch (Exception e) {
          // The stream closes when the server stops.
        }
      });
      drain.setDaemon(true);
      drain.start();

      long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
      while (ports.size() < 2) {
        if (System.nanoTime() > until || !proc.isAlive()) {
          proc.destroyForcibly();
          throw new IllegalStateException("the server did not log both ports: " + tail());
        }
        Thread.sleep(50);
      }
      http = "http://127.0.0.1:" + ports.get("listening");
      grpcPort = ports.get("grpc listening");
      HttpClient client = HttpClient.newHttpClient();
      for (;;) {
        try {
          HttpResponse<Void> r = client.send(
              HttpRequest.newBuilder(URI.create(http + "/health/ready"))
                  .timeout(Duration.ofSeconds(5)).build(),
              HttpResponse.BodyHandlers.discarding());
          if (r.statusCode() == 200) break;
        } catch (java.io.IOException e) {
          // not yet
        }
        if (System.nanoTime() > until) {
          throw new IllegalStateException("the server was not ready: " + tail());
        }
        Thread.sleep(50);
      }
    }

    /** The `message` and `port` of a JSON log line (top level or under `fields`), or null. */
    private static String[] messageAndPort(String line) {
      JsonObject v;
      try {
        JsonElement e = JsonParser.parseString(line);
        if (!e.isJsonObject()) return null;
        v = e.getAsJsonObject();
      } catch (RuntimeException e) {
        return null;
      }
      JsonObject fields = v.has("fields") && v.get("fields").isJsonObject()
          ? v.getAsJsonObject("fields") : new JsonObject();
      JsonElement msg = v.has("message") ? v.get("message") : fields.get("message");
      JsonElement port = v.has("port") ? v.get("port") : fields.get("port");
      if (msg == null || port == null || !msg.isJsonPrimitive() || !port.isJsonPrimitive()) {
        return null;
      }
      return new String[] {msg.getAsString(), port.getAsString()};
    }

    String tail() {
      synchronized (tail) {
        return String.join(" | ", tail);
      }
    }

    void stop() throws InterruptedException {
      proc.destroy(); // SIGTERM: the server drains and stops
      if (!proc.waitFor(15, TimeUnit.SECONDS)) proc.destroyForcibly();
    }
  }

  // ---- helpers ----------------------------------------------------------------------------

  private static void check(boolean ok, String what) {
    if (!ok) throw new AssertionError(what);
  }

  private static Metadata bearer(String token) {
    Metadata md = new Metadata();
    md.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + token);
    return md;
  }

  /** Most ids one run may hold here: a bad run fails the case instead of exhausting memory. */
  private static final long MAX_RUN = 1_000_000;

  /** The ids of runs, each run checked (0 < first <= last, no larger than any call asks). */
  private static List<Long> runIds(List<IdRun> runs) {
    List<Long> out = new ArrayList<>();
    for (IdRun r : runs) {
      check(r.getFirst() > 0 && r.getFirst() <= r.getLast() && r.getLast() - r.getFirst() < MAX_RUN,
          "run " + r.getFirst() + ".." + r.getLast());
      for (long i = r.getFirst(); ; i++) {
        out.add(i);
        if (i == r.getLast()) break;
      }
    }
    return out;
  }

  /** The conformance rules for one caller's ids: positive, unique, increasing. */
  private static void checkIds(List<Long> ids) {
    Set<Long> seen = new HashSet<>();
    long last = 0;
    for (long id : ids) {
      check(id > 0, "a non-positive id: " + id);
      check(seen.add(id), "a duplicate id: " + id);
      check(id > last, "ids do not increase: " + last + " then " + id);
      last = id;
    }
  }

  /** The ErrorInfo reason of a failed call (the HTTP error body's `code`), domain checked. */
  private static String reason(StatusRuntimeException e) throws Exception {
    com.google.rpc.Status st = StatusProto.fromThrowable(e);
    check(st != null, "no grpc-status-details-bin in " + e);
    check(st.getCode() == e.getStatus().getCode().value(),
        "details' code " + st.getCode() + " is not the status' " + e.getStatus().getCode());
    for (Any any : st.getDetailsList()) {
      if (any.getTypeUrl().endsWith("/google.rpc.ErrorInfo")) {
        ErrorInfo info = ErrorInfo.parseFrom(any.getValue());
        check(info.getDomain().equals("leafid.io"), "ErrorInfo domain " + info.getDomain());
        return info.getReason();
      }
    }
    throw new AssertionError("no ErrorInfo in " + e + ": " + st.getDetailsList());
  }

  /** Runs `call`, which must fail with `code` and ErrorInfo reason `want`. */
  private static void expectError(String what, Status.Code code, String want, Call call)
      throws Exception {
    try {
      call.run();
    } catch (StatusRuntimeException e) {
      String got = reason(e);
      check(e.getStatus().getCode() == code && got.equals(want),
          what + ": wanted " + code + " " + want + ", got " + e.getStatus().getCode() + " "
              + got + " (" + e.getStatus().getDescription() + ")");
      return;
    }
    throw new AssertionError(what + ": no error, wanted " + code + " " + want);
  }

  // ---- the cases --------------------------------------------------------------------------

  public static void main(String[] args) throws Exception {
    // Arguments: the checkout's root, and a directory for the server's files (run.sh removes it).
    Path root = Path.of(args.length > 0 ? args[0] : ".").toAbsolutePath();
    Path tmp = args.length > 1 ? Path.of(args[1]) : Files.createTempDirectory("leafid-grpc-java-");
    Files.createDirectories(tmp);
    Server server = new Server(root, tmp);
    ManagedChannel ch = NettyChannelBuilder.forAddress("127.0.0.1", server.grpcPort)
        .usePlaintext().build();
    HttpClient http = HttpClient.newHttpClient();
    Metadata admin = bearer(ADMIN);

    // Fresh stubs per call: a deadline is absolute from the moment it is set.
    java.util.function.Supplier<SegmentGrpc.SegmentBlockingStub> seg =
        () -> SegmentGrpc.newBlockingStub(ch).withDeadlineAfter(DEADLINE_S, TimeUnit.SECONDS);
    java.util.function.Supplier<SnowflakeGrpc.SnowflakeBlockingStub> snow =
        () -> SnowflakeGrpc.newBlockingStub(ch).withDeadlineAfter(DEADLINE_S, TimeUnit.SECONDS);
    java.util.function.Supplier<TagsGrpc.TagsBlockingStub> tags =
        () -> TagsGrpc.newBlockingStub(ch).withDeadlineAfter(DEADLINE_S, TimeUnit.SECONDS);
    java.util.function.Supplier<TagsGrpc.TagsBlockingStub> adminTags =
        () -> tags.get().withInterceptors(MetadataUtils.newAttachHeadersInterceptor(admin));

    Map<String, Case> cases = new LinkedHashMap<>();

    cases.put("tagsCreateListGet", () -> {
      Tag a = adminTags.get().createTag(
          CreateTagRequest.newBuilder().setBizTag("java.a").setStep(10).build());
      check(a.getBizTag().equals("java.a") && a.getStep() == 10, "created " + a);
      Tag big = adminTags.get().createTag(CreateTagRequest.newBuilder().setBizTag("java.big")
          .setStep(100).setMaxId(ABOVE_2_53).build());
      check(big.getMaxId() == ABOVE_2_53, "created max_id " + big.getMaxId());
      List<String> names = new ArrayList<>();
      for (Tag t : tags.get().listTags(ListTagsRequest.getDefaultInstance()).getTagsList()) {
        names.add(t.getBizTag());
      }
      check(names.contains("java.a") && names.contains("java.big"), "listed " + names);
      List<String> sorted = new ArrayList<>(names);
      sorted.sort(null);
      check(names.equals(sorted), "not ordered by name: " + names);
      Tag row = tags.get().getTag(GetTagRequest.newBuilder().setBizTag("java.big").build());
      check(row.getMaxId() == ABOVE_2_53 && row.getStep() == 100, "got " + row);
      expectError("create java.a again", Status.Code.ALREADY_EXISTS, "biz_tag_exists",
          () -> adminTags.get().createTag(
              CreateTagRequest.newBuilder().setBizTag("java.a").setStep(10).build()));
      expectError("get an unknown tag", Status.Code.NOT_FOUND, "unknown_biz_tag",
          () -> tags.get().getTag(GetTagRequest.newBuilder().setBizTag("java.none").build()));
    });

    cases.put("createTagNeedsTheAdminToken", () -> {
      CreateTagRequest req = CreateTagRequest.newBuilder().setBizTag("java.x").setStep(10).build();
      expectError("create without a token", Status.Code.UNAUTHENTICATED, "unauthorized",
          () -> tags.get().createTag(req));
      expectError("create with a wrong token", Status.Code.UNAUTHENTICATED, "unauthorized",
          () -> tags.get().withInterceptors(
              MetadataUtils.newAttachHeadersInterceptor(bearer("not-the-admin"))).createTag(req));
      expectError("the refused tag does not exist", Status.Code.NOT_FOUND, "unknown_biz_tag",
          () -> tags.get().getTag(GetTagRequest.newBuilder().setBizTag("java.x").build()));
    });

    cases.put("segmentIdsRangesStreamOneCaller", () -> {
      IdsReply first = seg.get().nextIds(
          NextIdsRequest.newBuilder().setBizTag("java.a").setCount(25).build());
      check(first.getBizTag().equals("java.a") && !first.getStrict(), "reply " + first);
      List<Long> ids = new ArrayList<>(first.getIdsList());
      RangesReply r = seg.get().nextRanges(
          NextRangesRequest.newBuilder().setBizTag("java.a").setCount(40).build());
      check(r.getCount() == 40 && !r.getStrict() && r.getBizTag().equals("java.a"), "ranges " + r);
      ids.addAll(runIds(r.getRangesList()));
      long streamed = 0;
      Iterator<RangesReply> it = seg.get().streamRanges(StreamRangesRequest.newBuilder()
          .setBizTag("java.a").setCount(1000).setChunk(64).build());
      while (it.hasNext()) {
        RangesReply m = it.next();
        check(m.getCount() >= 1 && m.getCount() <= 64, "message count " + m.getCount());
        List<Long> got = runIds(m.getRangesList());
        check(got.size() == m.getCount(), "message runs hold " + got.size() + " not " + m.getCount());
        ids.addAll(got);
        streamed += m.getCount();
      }
      check(streamed == 1000, "streamed " + streamed);
      ids.addAll(seg.get().nextIds(
          NextIdsRequest.newBuilder().setBizTag("java.a").setCount(3).build()).getIdsList());
      check(ids.size() == 25 + 40 + 1000 + 3, "count " + ids.size());
      checkIds(ids);
    });

    cases.put("streamRangesHandsOutItsCountOnce", () -> {
      adminTags.get().createTag(
          CreateTagRequest.newBuilder().setBizTag("java.stream").setStep(5000).build());
      List<Long> ids = new ArrayList<>();
      Iterator<RangesReply> it = seg.get().streamRanges(StreamRangesRequest.newBuilder()
          .setBizTag("java.stream").setCount(200_000).setChunk(20_000).build());
      int messages = 0;
      while (it.hasNext()) {
        RangesReply m = it.next();
        check(m.getCount() <= 20_000, "message count " + m.getCount());
        ids.addAll(runIds(m.getRangesList()));
        messages++;
      }
      check(ids.size() == 200_000 && messages >= 10, ids.size() + " ids in " + messages);
      checkIds(ids);
      long next = seg.get().nextIds(NextIdsRequest.newBuilder().setBizTag("java.stream")
          .setCount(1).build()).getIds(0);
      check(next > ids.get(ids.size() - 1), "next id " + next + " after the stream's last");
    });

    cases.put("pullRangesTakesOnlyWhatWasAsked", () -> {
      adminTags.get().createTag(
          CreateTagRequest.newBuilder().setBizTag("java.pull").setStep(1000).build());
      BlockingQueue<Object> answers = new LinkedBlockingQueue<>();
      Object done = new Object();
      StreamObserver<PullRequest> asks = SegmentGrpc.newStub(ch)
          .withDeadlineAfter(DEADLINE_S, TimeUnit.SECONDS)
          .pullRanges(new StreamObserver<RangesReply>() {
            @Override public void onNext(RangesReply m) { answers.add(m); }
            @Override public void onError(Throwable t) { answers.add(t); }
            @Override public void onCompleted() { answers.add(done); }
          });
      List<Long> got = new ArrayList<>();
      for (int want : new int[] {100, 1, 250}) {
        asks.onNext(PullRequest.newBuilder().setBizTag("java.pull").setCount(want).build());
        Object a = answers.poll(DEADLINE_S, TimeUnit.SECONDS);
        if (a instanceof Throwable) throw new AssertionError("pull failed", (Throwable) a);
        check(a instanceof RangesReply, "answer " + a);
        RangesReply m = (RangesReply) a;
        check(m.getCount() == want && m.getBizTag().equals("java.pull"), "answer " + m);
        got.addAll(runIds(m.getRangesList()));
      }
      asks.onCompleted();
      Object end = answers.poll(DEADLINE_S, TimeUnit.SECONDS);
      check(end == done, "the call did not end cleanly: " + end);
      check(got.size() == 351, "pulled " + got.size());
      checkIds(got);
      Thread.sleep(300); // room for a server that (wrongly) took ahead to show it
      List<Long> next = seg.get().nextIds(
          NextIdsRequest.newBuilder().setBizTag("java.pull").setCount(1).build()).getIdsList();
      check(next.equals(List.of(got.get(got.size() - 1) + 1)),
          "next " + next + " after " + got.get(got.size() - 1));
    });

    cases.put("exact64BitValues", () -> {
      List<Long> ids = seg.get().nextIds(
          NextIdsRequest.newBuilder().setBizTag("java.big").setCount(3).build()).getIdsList();
      check(ids.equals(List.of(ABOVE_2_53, ABOVE_2_53 + 1, ABOVE_2_53 + 2)), "ids " + ids);
      RangesReply r = seg.get().nextRanges(
          NextRangesRequest.newBuilder().setBizTag("java.big").setCount(5).build());
      check(runIds(r.getRangesList()).equals(List.of(ABOVE_2_53 + 3, ABOVE_2_53 + 4,
          ABOVE_2_53 + 5, ABOVE_2_53 + 6, ABOVE_2_53 + 7)), "ranges " + r);
      // As a double would carry it, 2^53 + 1 becomes 2^53: the exact value is what was asked.
      check((long) (double) ABOVE_2_53 != ABOVE_2_53, "the value must be one a double rounds");
    });

    cases.put("formattedIdsAndDecode", () -> {
      HttpResponse<String> res = http.send(
          HttpRequest.newBuilder(URI.create(server.http + "/api/v1/tags"))
              .header("content-type", "application/json")
              .header("authorization", "Bearer " + ADMIN)
              .timeout(Duration.ofSeconds(DEADLINE_S))
              .POST(HttpRequest.BodyPublishers.ofString(
                  "{\"biz_tag\":\"java.fmt\",\"step\":20,\"format\":{\"prefix\":\"JV-\",\"width\":6}}"))
              .build(),
          HttpResponse.BodyHandlers.ofString());
      check(res.statusCode() == 201, "create " + res.statusCode() + " " + res.body());
      FormattedIdsReply f = seg.get().nextFormattedIds(
          NextIdsRequest.newBuilder().setBizTag("java.fmt").setCount(3).build());
      check(f.getIdsCount() == 3 && f.getOrdered() && f.getBizTag().equals("java.fmt"), "reply " + f);
      for (int k = 0; k < 3; k++) {
        check(f.getIds(k).startsWith("JV-"), "id " + f.getIds(k));
        if (k > 0) check(f.getIds(k - 1).compareTo(f.getIds(k)) < 0, "ids not increasing " + f);
      }
      List<Long> seqs = new ArrayList<>();
      for (String id : f.getIdsList()) {
        DecodeReply d = seg.get().decode(
            DecodeRequest.newBuilder().setBizTag("java.fmt").setId(id).build());
        check(d.getId().equals(id) && d.getBizTag().equals("java.fmt")
            && d.getPeriod().equals(f.getPeriod()), "decoded " + d);
        seqs.add(d.getSequence());
      }
      checkIds(seqs);
    });

    cases.put("snowflakeIdsRangesDecodeBounds", () -> {
      IdsReply one = snow.get().nextIds(SnowflakeIdsRequest.newBuilder().setCount(100).build());
      check(one.getIdsCount() == 100 && one.getBizTag().isEmpty(), "reply of " + one.getIdsCount());
      List<Long> ids = new ArrayList<>(one.getIdsList());
      RangesReply r = snow.get().nextRanges(SnowflakeIdsRequest.newBuilder().setCount(50).build());
      check(r.getCount() == 50, "ranges count " + r.getCount());
      ids.addAll(runIds(r.getRangesList()));
      checkIds(ids);
      SnowflakeDecodeReply d = snow.get().decode(
          SnowflakeDecodeRequest.newBuilder().setId(ids.get(0)).build());
      check(d.getId() == ids.get(0) && !d.getLayout().isEmpty() && !d.getTimestamp().isEmpty(),
          "decoded " + d);
      long now = System.currentTimeMillis();
      BoundsReply b = snow.get().bounds(BoundsRequest.newBuilder()
          .setFromUnixMs(now - 600_000).setToUnixMs(now + 600_000).build());
      check(b.getMinId() > 0 && b.getMinId() <= ids.get(0) && ids.get(ids.size() - 1) <= b.getMaxId(),
          "bounds " + b + " around " + ids.get(0));
    });

    cases.put("concurrentCallersGetDisjointIncreasingIds", () -> {
      adminTags.get().createTag(
          CreateTagRequest.newBuilder().setBizTag("java.many").setStep(50).build());
      ExecutorService pool = Executors.newFixedThreadPool(4);
      try {
        List<Future<List<Long>>> callers = new ArrayList<>();
        for (int c = 0; c < 4; c++) {
          boolean ranges = c % 2 == 1;
          callers.add(pool.submit(() -> {
            List<Long> mine = new ArrayList<>();
            for (int k = 0; k < 20; k++) {
              if (ranges) {
                mine.addAll(runIds(seg.get().nextRanges(NextRangesRequest.newBuilder()
                    .setBizTag("java.many").setCount(25).build()).getRangesList()));
              } else {
                mine.addAll(seg.get().nextIds(NextIdsRequest.newBuilder()
                    .setBizTag("java.many").setCount(25).build()).getIdsList());
              }
            }
            return mine;
          }));
        }
        Set<Long> all = new HashSet<>();
        for (Future<List<Long>> f : callers) {
          List<Long> mine = f.get(DEADLINE_S * 2, TimeUnit.SECONDS);
          check(mine.size() == 500, "a caller got " + mine.size());
          checkIds(mine); // increasing per caller
          for (long id : mine) check(all.add(id), "id " + id + " handed to two callers");
        }
        check(all.size() == 2000, "ids " + all.size());
      } finally {
        pool.shutdownNow();
      }
    });

    cases.put("errorsCarryTheHttpCode", () -> {
      expectError("unknown tag", Status.Code.NOT_FOUND, "unknown_biz_tag",
          () -> seg.get().nextIds(NextIdsRequest.newBuilder().setBizTag("nope").setCount(1).build()));
      expectError("count 0", Status.Code.INVALID_ARGUMENT, "invalid_count",
          () -> seg.get().nextIds(NextIdsRequest.newBuilder().setBizTag("java.a").setCount(0).build()));
      expectError("count 100001", Status.Code.INVALID_ARGUMENT, "invalid_count",
          () -> seg.get().nextIds(
              NextIdsRequest.newBuilder().setBizTag("java.a").setCount(100_001).build()));
      expectError("ranges count 0", Status.Code.INVALID_ARGUMENT, "invalid_count",
          () -> seg.get().nextRanges(
              NextRangesRequest.newBuilder().setBizTag("java.a").setCount(0).build()));
      expectError("bad tag", Status.Code.INVALID_ARGUMENT, "invalid_biz_tag",
          () -> seg.get().nextIds(
              NextIdsRequest.newBuilder().setBizTag("bad tag").setCount(1).build()));
      expectError("stream of an unknown tag", Status.Code.NOT_FOUND, "unknown_biz_tag",
          () -> seg.get().streamRanges(StreamRangesRequest.newBuilder()
              .setBizTag("nope").setCount(10).build()).hasNext());
      expectError("snowflake count 0", Status.Code.INVALID_ARGUMENT, "invalid_count",
          () -> snow.get().nextIds(SnowflakeIdsRequest.newBuilder().setCount(0).build()));
      expectError("snowflake decode -5", Status.Code.INVALID_ARGUMENT, "invalid_id",
          () -> snow.get().decode(SnowflakeDecodeRequest.newBuilder().setId(-5).build()));
    });

    cases.put("healthCheckAndWatch", () -> {
      HealthGrpc.HealthBlockingStub health = HealthGrpc.newBlockingStub(ch);
      for (String service : List.of("", "leafid.v1.Segment", "leafid.v1.Snowflake", "leafid.v1.Tags")) {
        // The first verdict comes within a second of the start: poll, never a timing assert.
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(DEADLINE_S);
        HealthCheckResponse.ServingStatus st;
        do {
          st = health.withDeadlineAfter(DEADLINE_S, TimeUnit.SECONDS)
              .check(HealthCheckRequest.newBuilder().setService(service).build()).getStatus();
          if (st != HealthCheckResponse.ServingStatus.SERVING) Thread.sleep(100);
        } while (st != HealthCheckResponse.ServingStatus.SERVING && System.nanoTime() < until);
        check(st == HealthCheckResponse.ServingStatus.SERVING, "'" + service + "' is " + st);
      }
      try {
        health.withDeadlineAfter(DEADLINE_S, TimeUnit.SECONDS)
            .check(HealthCheckRequest.newBuilder().setService("leafid.v1.Nope").build());
        throw new AssertionError("an unknown service answered");
      } catch (StatusRuntimeException e) {
        check(e.getStatus().getCode() == Status.Code.NOT_FOUND, "unknown service: " + e.getStatus());
      }
      Context.CancellableContext watching = Context.current().withCancellation();
      try {
        HealthCheckResponse first = watching.call(() -> health
            .withDeadlineAfter(DEADLINE_S, TimeUnit.SECONDS)
            .watch(HealthCheckRequest.newBuilder().setService("leafid.v1.Segment").build())
            .next());
        check(first.getStatus() == HealthCheckResponse.ServingStatus.SERVING, "watch " + first);
      } finally {
        watching.cancel(null);
      }
    });

    cases.put("reflectionListing", () -> {
      BlockingQueue<Object> answers = new LinkedBlockingQueue<>();
      StreamObserver<ServerReflectionRequest> req = ServerReflectionGrpc.newStub(ch)
          .withDeadlineAfter(DEADLINE_S, TimeUnit.SECONDS)
          .serverReflectionInfo(new StreamObserver<ServerReflectionResponse>() {
            @Override public void onNext(ServerReflectionResponse m) { answers.add(m); }
            @Override public void onError(Throwable t) { answers.add(t); }
            @Override public void onCompleted() { }
          });
      req.onNext(ServerReflectionRequest.newBuilder().setListServices("").build());
      Object a = answers.poll(DEADLINE_S, TimeUnit.SECONDS);
      req.onCompleted();
      if (a instanceof Throwable) throw new AssertionError("reflection failed", (Throwable) a);
      check(a instanceof ServerReflectionResponse, "answer " + a);
      Set<String> names = new HashSet<>();
      for (ServiceResponse s : ((ServerReflectionResponse) a).getListServicesResponse().getServiceList()) {
        names.add(s.getName());
      }
      for (String want : List.of("leafid.v1.Segment", "leafid.v1.Snowflake", "leafid.v1.Tags",
          "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection")) {
        check(names.contains(want), want + " not in " + names);
      }
    });

    int passed = 0;
    int failed = 0;
    try {
      for (Map.Entry<String, Case> c : cases.entrySet()) {
        try {
          c.getValue().run();
          passed++;
          System.out.println("ok " + c.getKey());
        } catch (Throwable t) { // every failure is reported and counted
          failed++;
          System.out.println("FAILED " + c.getKey());
          t.printStackTrace(System.out);
        }
      }
    } finally {
      ch.shutdownNow();
      ch.awaitTermination(10, TimeUnit.SECONDS);
      server.stop();
      if (failed > 0) System.out.println("server log tail: " + server.tail());
    }
    System.out.println(passed + " passed, " + failed + " failed");
    System.exit(failed > 0 ? 1 : 0);
  }
}
