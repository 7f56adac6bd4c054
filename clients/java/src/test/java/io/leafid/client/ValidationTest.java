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

    @Test
    void a_valid_batch_keeps_every_digit_of_64_bit_ids() throws Exception {
        long[] ids = Servers.parseBatch(
                "{\"biz_tag\":\"t\",\"ids\":[\"9223372036854775805\",\"9223372036854775806\",\"9223372036854775807\"]}", SEG);
        assertArrayEquals(new long[] {Long.MAX_VALUE - 2, Long.MAX_VALUE - 1, Long.MAX_VALUE}, ids);
        assertArrayEquals(new long[] {1, 2, 5}, Servers.parseBatch("{\"ids\":[\"1\",\"2\",\"5\"]}", SNOW));
        // Numbers instead of strings are read exactly too (no double in between).
        assertArrayEquals(new long[] {9007199254740993L},
                Servers.parseBatch("{\"ids\":[9007199254740993]}", SNOW));
    }

    @Test
    void an_answer_wholly_behind_the_floor_is_read_from_its_tail_only() {
        Servers.Behind b = Servers.behindTail("{\"biz_tag\":\"t\",\"ids\":[\"7\",\"8\",\"9\"]}\n", SEG, 9);
        assertEquals(3, b.ids);
        assertEquals(9, b.last);
        assertEquals(1, Servers.behindTail("{\"ids\":[\"5\"]}", SNOW, 100).ids);
        // Above the floor (some ids to keep), no floor yet, or another shape: parsed whole.
        assertEquals(null, Servers.behindTail("{\"biz_tag\":\"t\",\"ids\":[\"9\",\"10\"]}", SEG, 9));
        assertEquals(null, Servers.behindTail("{\"ids\":[\"5\"]}", SNOW, 0));
        assertEquals(null, Servers.behindTail("{\"ids\":[5]}", SNOW, 100));
        assertEquals(null, Servers.behindTail("{\"ids\":[\"5\"],\"x\":1}", SNOW, 100));
        assertEquals(null, Servers.behindTail("{\"ids\":[\"99999999999999999999\"]}", SNOW, Long.MAX_VALUE));
        assertEquals(null, Servers.behindTail("{\"ids\":[\"0\"]}", SNOW, 100));
        // More ids than asked: parsed whole (and refused there).
        assertEquals(null, Servers.behindTail("{\"ids\":[\"1\",\"2\",\"3\",\"4\"]}", SNOW, 100));
    }

    @Test
    void anything_but_a_valid_batch_is_refused_whole() {
        String[] bad = {
            "", "not json", "[]", "{}", "{\"biz_tag\":\"t\"}", "{\"biz_tag\":\"t\",\"ids\":[]}",
            "{\"biz_tag\":\"t\",\"ids\":[\"1\",\"2\",\"3\",\"4\"]}", // more than asked
            "{\"biz_tag\":\"t\",\"ids\":[\"0\"]}", "{\"biz_tag\":\"t\",\"ids\":[\"-1\"]}",
            "{\"biz_tag\":\"t\",\"ids\":[\"2\",\"2\"]}", "{\"biz_tag\":\"t\",\"ids\":[\"3\",\"2\"]}",
            "{\"biz_tag\":\"u\",\"ids\":[\"1\"]}", "{\"ids\":[\"1\"]}", // other tag, no tag
            "{\"biz_tag\":\"t\",\"ids\":[\"9223372036854775808\"]}", // above 2^63-1
            "{\"biz_tag\":\"t\",\"ids\":[\"1e3\"]}", "{\"biz_tag\":\"t\",\"ids\":[1.5]}",
            "{\"biz_tag\":\"t\",\"ids\":[\" 1\"]}", "{\"biz_tag\":\"t\",\"ids\":[null]}",
            "{\"biz_tag\":\"t\",\"ids\":[\"1\"]} x", "{\"biz_tag\":\"t\",\"ids\":[\"1\",]}",
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
                "invalid_count", "invalid_request"}) {
            assertTrue(Servers.refusalHoldsOnEveryServer(code), code);
        }
        for (String code : new String[] {"engine_disabled", "not_found", "unauthorized", "", "rate_limited"}) {
            assertFalse(Servers.refusalHoldsOnEveryServer(code), code);
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
                () -> LeafidClient.builder().servers("http://a:1").batchSize(100_001).build());
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
            assertEquals(List.of("http://127.0.0.1:1"), c.servers());
            assertEquals(0, c.stats().batches());
        }
    }
}
