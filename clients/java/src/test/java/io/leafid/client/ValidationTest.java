package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The rules that need no server: body validation, refusal codes, backoff, tags, settings. */
class ValidationTest {
    private static final Servers.Request SEG = new Servers.Request("", 3, "t");
    private static final Servers.Request SNOW = new Servers.Request("", 3, null);

    /** A body of {@code count} ids in runs given as first, last, first, last... */
    private static String body(String tag, long count, String... ends) {
        StringBuilder b = new StringBuilder("{");
        if (tag != null) {
            b.append("\"biz_tag\":\"").append(tag).append("\",");
        }
        b.append("\"count\":").append(count).append(",\"ranges\":[");
        for (int k = 0; k < ends.length; k += 2) {
            b.append(k == 0 ? "" : ",").append("{\"first\":\"").append(ends[k]).append("\",\"last\":\"")
                    .append(ends[k + 1]).append("\"}");
        }
        return b.append("]}").toString();
    }

    @Test
    void a_valid_batch_keeps_every_digit_of_64_bit_ids() throws Exception {
        Ranges r = Servers.parseBatch(body("t", 3, "9223372036854775805", "9223372036854775807"), SEG);
        assertArrayEquals(new long[] {Long.MAX_VALUE - 2}, r.firsts);
        assertArrayEquals(new long[] {Long.MAX_VALUE}, r.lasts);
        assertEquals(3, r.count);
        r = Servers.parseBatch(body(null, 3, "1", "2", "5", "5"), SNOW);
        assertArrayEquals(new long[] {1, 5}, r.firsts);
        assertArrayEquals(new long[] {2, 5}, r.lasts);
        // Fewer than asked is fine; numbers instead of strings are not what was asked
        // (vectors/responses.json).
        r = Servers.parseBatch("{\"count\":1,\"ranges\":[{\"first\":\"9007199254740993\",\"last\":\"9007199254740993\"}]}",
                SNOW);
        assertArrayEquals(new long[] {9007199254740993L}, r.firsts);
        assertThrows(Servers.BadBatch.class, () -> Servers.parseBatch(
                "{\"count\":1,\"ranges\":[{\"first\":9007199254740993,\"last\":9007199254740993}]}", SNOW));
    }

    @Test
    void ranges_are_cut_to_the_ids_above_the_floor() {
        Ranges r = new Ranges(new long[] {5, 20}, new long[] {9, 29}, 15);
        assertEquals(r, r.above(4));
        Ranges a = r.above(7);
        assertArrayEquals(new long[] {8, 20}, a.firsts);
        assertArrayEquals(new long[] {9, 29}, a.lasts);
        assertEquals(12, a.count);
        a = r.above(15);
        assertArrayEquals(new long[] {20}, a.firsts);
        assertEquals(10, a.count);
        a = r.above(28);
        assertArrayEquals(new long[] {29}, a.firsts);
        assertEquals(1, a.count);
        assertEquals(null, r.above(29));
        assertEquals(null, r.above(Long.MAX_VALUE));
        assertEquals(1, Ranges.of(Long.MAX_VALUE, Long.MAX_VALUE).above(Long.MAX_VALUE - 1).count);
    }

    @Test
    void anything_but_a_valid_batch_is_refused_whole() {
        String[] bad = {
            "", "not json", "[]", "{}", "{\"biz_tag\":\"t\"}", "{\"biz_tag\":\"t\",\"count\":1}",
            "{\"biz_tag\":\"t\",\"ids\":[\"1\"]}", // the list route's shape
            body("t", 0), body("t", 1), // no runs
            body("t", 4, "1", "4"), // more than asked
            body("t", 3, "1", "2"), body("t", 2, "1", "3"), // count and runs disagree
            body("t", 1, "0", "0"), body("t", 1, "-1", "-1"), body("t", 2, "0", "1"),
            body("t", 1, "2", "1"), // empty run
            body("t", 2, "1", "1", "1", "1"), body("t", 2, "3", "3", "2", "2"), // overlap, decrease
            body("t", 3, "1", "2", "2", "3"), // overlapping ends
            body("u", 1, "1", "1"), body(null, 1, "1", "1"), // other tag, no tag
            body("t", 1, "9223372036854775808", "9223372036854775808"), // above 2^63-1
            body("t", 3, "1", "9223372036854775807"), // a huge run, no overflow
            body("t", 1, "1e3", "1e3"), body("t", 1, " 1", " 1"),
            "{\"biz_tag\":\"t\",\"count\":1,\"ranges\":[{\"first\":1.5,\"last\":1.5}]}",
            "{\"biz_tag\":\"t\",\"count\":1,\"ranges\":[{\"first\":null,\"last\":\"1\"}]}",
            "{\"biz_tag\":\"t\",\"count\":1,\"ranges\":[{\"last\":\"1\"}]}",
            "{\"biz_tag\":\"t\",\"count\":1,\"ranges\":[[\"1\",\"1\"]]}",
            "{\"biz_tag\":\"t\",\"count\":\"1\",\"ranges\":[{\"first\":\"1\",\"last\":\"1\"}]}",
            "{\"biz_tag\":\"t\",\"count\":1.0,\"ranges\":[{\"first\":\"1\",\"last\":\"1\"}]}",
            body("t", 1, "1", "1") + " x",
        };
        for (String body : bad) {
            assertThrows(Servers.BadBatch.class, () -> Servers.parseBatch(body, SEG), body);
        }
    }

    @Test
    void json_reader_reads_the_shapes_it_meets() throws Exception {
        Object v = Json.parse(" {\"a\":[1,-2.5e3,\"x\\\"\\u00e9\\n\",true,false,null,{}]} ");
        List<?> a = (List<?>) ((Map<?, ?>) v).get("a");
        assertEquals("1", a.get(0).toString());
        assertEquals("-2.5e3", a.get(1).toString());
        assertEquals("x\"\u00e9\n", a.get(2));
        assertEquals(Boolean.TRUE, a.get(3));
        assertEquals(Json.NULL, a.get(5));
        assertEquals("\"a\\\"b\\\\\\n\"", Json.quote("a\"b\\\n"));
        for (String bad : new String[] {"{", "[1,", "01", "\"abc", "{\"a\" 1}", "tru", "{\"a\":1,}"}) {
            assertThrows(Json.ParseException.class, () -> Json.parse(bad), bad);
        }
    }

    @Test
    void only_refusals_of_the_request_itself_are_final() {
        for (String code : new String[] {"unknown_biz_tag", "invalid_biz_tag", "biz_tag_exhausted",
                "invalid_count", "invalid_request", "formatted_tag", "invalid_time_range"}) {
            assertTrue(Servers.refusalHoldsOnEveryServer(code), code);
        }
        for (String code : new String[] {"engine_disabled", "not_found", "unauthorized", "", "rate_limited"}) {
            assertFalse(Servers.refusalHoldsOnEveryServer(code), code);
        }
    }

    @Test
    void bounds_bodies_keep_every_digit_and_anything_else_is_refused() throws Exception {
        assertEquals(new IdBounds(1, Long.MAX_VALUE),
                Servers.parseBounds("{\"min_id\":\"1\",\"max_id\":\"9223372036854775807\",\"layout\":\"41/10/12\"}"));
        // A range in the layout's first tick starts at 0.
        assertEquals(new IdBounds(0, 5), Servers.parseBounds("{\"min_id\":\"0\",\"max_id\":\"5\"}"));
        String[] bad = {
            "{\"min_id\":9007199254740993,\"max_id\":9007199254740993}",
            "", "[]", "{}", "{\"min_id\":\"2\",\"max_id\":\"1\"}", "{\"min_id\":\"-0\",\"max_id\":\"1\"}",
            "{\"min_id\":\"1\",\"max_id\":\"9223372036854775808\"}", "{\"min_id\":\"1.0\",\"max_id\":\"2\"}",
            "{\"min_id\":\"+1\",\"max_id\":\"2\"}", "{\"min_id\":null,\"max_id\":\"2\"}",
        };
        for (String body : bad) {
            assertThrows(Servers.BadBatch.class, () -> Servers.parseBounds(body), body);
        }
    }

    @Test
    void backoff_doubles_up_to_the_cap() {
        Servers.Timing t = new Servers.Timing(Duration.ofSeconds(1), Duration.ofMillis(50), Duration.ofSeconds(5));
        long ms = 1_000_000;
        assertEquals(50 * ms, t.backoff(1));
        assertEquals(100 * ms, t.backoff(2));
        assertEquals(200 * ms, t.backoff(3));
        assertEquals(5000 * ms, t.backoff(8));
        assertEquals(5000 * ms, t.backoff(Integer.MAX_VALUE));
    }

    @Test
    void tags_follow_the_server_rule() {
        assertTrue(LeafidClient.isValidTag("orders.v2:eu-1_x"));
        assertTrue(LeafidClient.isValidTag("a".repeat(128)));
        for (String bad : new String[] {"", "a/b", "a b", "\u00e9", "a".repeat(129), "a?b", null}) {
            assertFalse(LeafidClient.isValidTag(bad), String.valueOf(bad));
        }
    }

    @Test
    void the_builder_refuses_bad_settings() {
        assertThrows(ConfigException.class, () -> LeafidClient.builder().build());
        assertThrows(ConfigException.class, () -> LeafidClient.builder().servers("http://a:1").batchSize(0).build());
        assertThrows(ConfigException.class,
                () -> LeafidClient.builder().servers("http://a:1").batchSize(1_000_001).build());
        assertThrows(ConfigException.class,
                () -> LeafidClient.builder().servers("http://a:1").batchSize(10).maxBatch(9).build());
        assertThrows(ConfigException.class,
                () -> LeafidClient.builder().servers("http://a:1").maxBatch(1_000_001).build());
        assertThrows(ConfigException.class,
                () -> LeafidClient.builder().servers("http://a:1").targetLifetime(Duration.ZERO).build());
        assertThrows(ConfigException.class, () -> LeafidClient.builder().servers("a:1").build());
        assertThrows(ConfigException.class, () -> LeafidClient.builder().servers("ftp://a:1").build());
        assertThrows(ConfigException.class, () -> LeafidClient.builder().servers("http://a:1?x=1").build());
        assertThrows(ConfigException.class,
                () -> LeafidClient.builder().servers("http://a:1").waitTimeout(Duration.ZERO).build());
        assertThrows(ConfigException.class, () -> LeafidClient.builder().servers("http://a:1")
                .backoff(Duration.ofSeconds(2), Duration.ofSeconds(1)).build());
    }

    @Test
    void an_invalid_tag_is_refused_locally() {
        try (LeafidClient c = LeafidClient.builder().servers("http://127.0.0.1:1/").build()) {
            InvalidTagException e = assertThrows(InvalidTagException.class, () -> c.segment("a/b"));
            assertEquals("a/b", e.tag());
            assertThrows(InvalidTagException.class, () -> c.nextId(""));
            InvalidTagException none = assertThrows(InvalidTagException.class, () -> c.segment(null));
            assertEquals(null, none.tag());
            assertTrue(none.getMessage().contains("missing"), none.getMessage());
            assertFalse(none.getMessage().contains("\"null\""), none.getMessage());
            assertEquals(List.of("http://127.0.0.1:1"), c.servers());
            assertEquals(0, c.stats().batches());
        }
    }
}
