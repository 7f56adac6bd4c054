package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The shared client vectors ({@code ../conformance/vectors/*.json}) run against this client's
 * own rule functions: the same files every client's tests read. No server.
 */
class VectorsTest {
    /** The cases of one vector file, read with the client's own JSON reader (exact numbers). */
    private static List<Map<?, ?>> cases(String file) throws IOException, Json.ParseException {
        String text = Files.readString(Path.of("..", "conformance", "vectors", file), StandardCharsets.UTF_8);
        Map<?, ?> doc = (Map<?, ?>) Json.parse(text);
        assertTrue(doc.get("description") instanceof String && doc.get("version") instanceof Json.Num, file);
        List<Map<?, ?>> out = new ArrayList<>();
        for (Object c : (List<?>) doc.get("cases")) {
            out.add((Map<?, ?>) c);
        }
        assertTrue(!out.isEmpty(), file);
        return out;
    }

    private static String name(Map<?, ?> c) {
        return (String) c.get("name");
    }

    private static String text(Map<?, ?> c, String k) {
        Object v = c.get(k);
        return v instanceof String ? (String) v : null;
    }

    private static long num(Map<?, ?> c, String k) {
        return Long.parseLong(((Json.Num) c.get(k)).text);
    }

    private static boolean flag(Map<?, ?> c, String k) {
        return (Boolean) c.get(k);
    }

    @Test
    void errors() throws Exception {
        for (Map<?, ?> c : cases("errors.json")) {
            int status = (int) num(c, "status");
            if (status == 200) {
                continue; // not_formatted: made by Texts.parse, not by the refusal table
            }
            String code = text(c, "code");
            String got = Servers.refusalIsFinal(status, code) ? "reject"
                    : Servers.isQuotaWait(status, code) ? "wait" : "failover";
            assertEquals(text(c, "action"), got, name(c));
        }
    }

    @Test
    void tags() throws Exception {
        for (Map<?, ?> c : cases("tags.json")) {
            assertEquals(flag(c, "valid"), LeafidClient.isValidTag(text(c, "tag")), name(c));
        }
    }

    @Test
    void batch_sizing() throws Exception {
        for (Map<?, ?> c : cases("batch.json")) {
            long got;
            if (text(c, "rule").equals("demand")) {
                double elapsedMs = Double.parseDouble(((Json.Num) c.get("elapsed_ms")).text);
                got = BatchSize.next((int) num(c, "size"), num(c, "batch_ids"), num(c, "used"),
                        (long) (elapsedMs * 1e6), flag(c, "starved"), (int) num(c, "min"), (int) num(c, "max"),
                        num(c, "target_ms") * 1_000_000L);
            } else {
                assertEquals("catch_up", text(c, "rule"), name(c));
                got = IdSupply.catchUpCount(num(c, "floor"), num(c, "last"), (int) num(c, "size"),
                        (int) num(c, "limit"));
            }
            assertEquals(num(c, "want"), got, name(c));
        }
    }

    @Test
    void bounds_rounding() throws Exception {
        for (Map<?, ?> c : cases("bounds.json")) {
            Instant from = OffsetDateTime.parse(text(c, "from")).toInstant();
            Instant to = OffsetDateTime.parse(text(c, "to")).toInstant();
            assertArrayEquals(new String[] {text(c, "query_from"), text(c, "query_to")},
                    LeafidClient.boundsInstants(from, to), name(c));
        }
    }

    @Test
    void responses() throws Exception {
        for (Map<?, ?> c : cases("responses.json")) {
            String body = text(c, "body");
            boolean valid = flag(c, "valid");
            if (text(c, "kind").equals("ranges")) {
                Servers.Request req = new Servers.Request("/r", (int) num(c, "asked"), text(c, "tag"));
                if (!valid) {
                    assertThrows(Servers.BadBatch.class, () -> Servers.parseBatch(body, req), name(c));
                    continue;
                }
                Ranges got = Servers.parseBatch(body, req);
                assertEquals(Boolean.TRUE.equals(c.get("strict")), got.strict, name(c) + ": strict");
                List<?> want = (List<?>) c.get("runs");
                assertEquals(want.size(), got.firsts.length, name(c));
                for (int k = 0; k < want.size(); k++) {
                    List<?> run = (List<?>) want.get(k);
                    assertEquals(run.get(0), Long.toString(got.firsts[k]), name(c));
                    assertEquals(run.get(1), Long.toString(got.lasts[k]), name(c));
                }
            } else {
                assertEquals("bounds", text(c, "kind"), name(c));
                if (!valid) {
                    assertThrows(Servers.BadBatch.class, () -> Servers.parseBounds(body), name(c));
                    continue;
                }
                IdBounds b = Servers.parseBounds(body);
                assertEquals(text(c, "min_id"), Long.toString(b.minId()), name(c));
                assertEquals(text(c, "max_id"), Long.toString(b.maxId()), name(c));
            }
        }
    }

    @Test
    void rfc3339() throws Exception {
        for (Map<?, ?> c : cases("rfc3339.json")) {
            String t = text(c, "text");
            if (flag(c, "valid")) {
                assertEquals(num(c, "unix_ms"), Texts.parseRfc3339Millis(t), name(c));
            } else {
                assertThrows(IllegalArgumentException.class, () -> Texts.parseRfc3339Millis(t), name(c));
            }
        }
    }

    @Test
    void formats() throws Exception {
        for (Map<?, ?> c : cases("formats.json")) {
            Servers.Request req = new Servers.Request("/r", (int) num(c, "asked"), text(c, "tag"), true);
            String body = text(c, "body");
            switch (text(c, "result")) {
                case "fault":
                    assertThrows(Servers.BadBatch.class, () -> Texts.parse(body, req), name(c));
                    break;
                case "not_formatted":
                    assertThrows(Texts.NotFormatted.class, () -> Texts.parse(body, req), name(c));
                    break;
                default:
                    Texts got = Texts.parse(body, req);
                    assertEquals(c.get("ids"), List.of(got.ids), name(c));
                    assertEquals(flag(c, "ordered"), got.ordered, name(c));
                    assertEquals(num(c, "period_end_ms"), got.periodEndMillis, name(c));
            }
        }
    }
}
