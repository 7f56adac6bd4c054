package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Clock;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Formatted tags (ids as text) against a real leafid server (SQLite): texts unique and
 * increasing from several threads, the period rule with an injected wall clock set past the
 * server's real {@code period_end}, the refusals, and the body validation.
 */
class FormattedTest {
    /** A daily order number in UTC, as in the conformance scenario. */
    private static final String ORDERS = "{\"prefix\":\"ORD-\",\"date\":\"yyyyMMdd\",\"width\":8,"
            + "\"reset\":\"daily\",\"time_zone\":\"UTC\"}";
    private static final Pattern ORDER = Pattern.compile("^ORD-[0-9]{8}[0-9]{8}$");

    private static LeafidServer server;

    @BeforeAll
    static void start() throws Exception {
        server = LeafidServer.start(LeafidServer.newDatabase());
    }

    @AfterAll
    static void stop() throws Exception {
        server.close();
    }

    @Test
    void texts_from_several_threads_are_unique_increasing_and_well_formed() throws Exception {
        server.createFormattedTag("orders", 100, ORDERS);
        int threads = 4;
        int each = 3000;
        try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(50).maxBatch(2000)
                .waitTimeout(Duration.ofSeconds(5)).build()) {
            FormattedSupply s = c.formatted("orders");
            assertSame(s, c.formatted("orders"), "one supply per tag");
            List<List<String>> got = new ArrayList<>();
            List<Thread> ts = new ArrayList<>();
            List<Throwable> errors = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                List<String> mine = new ArrayList<>();
                got.add(mine);
                Thread th = new Thread(() -> {
                    try {
                        for (int k = 0; k < each; k++) {
                            mine.add(s.nextId());
                        }
                    } catch (Throwable e) {
                        synchronized (errors) {
                            errors.add(e);
                        }
                    }
                });
                ts.add(th);
                th.start();
            }
            for (Thread th : ts) {
                th.join();
            }
            assertTrue(errors.isEmpty(), errors.toString());
            Set<String> all = new HashSet<>();
            for (List<String> mine : got) {
                assertEquals(each, mine.size());
                for (int k = 0; k < mine.size(); k++) {
                    assertTrue(ORDER.matcher(mine.get(k)).matches(), mine.get(k));
                    assertTrue(all.add(mine.get(k)), "twice: " + mine.get(k));
                    if (k > 0) {
                        assertTrue(Texts.compare(mine.get(k - 1), mine.get(k)) < 0,
                                mine.get(k - 1) + " then " + mine.get(k));
                    }
                }
            }
            // A call that starts after another returned gets a larger text.
            String last = s.nextId();
            String after = s.nextId();
            assertTrue(Texts.compare(last, after) < 0, last + " then " + after);
            Stats st = c.stats();
            assertEquals(threads * each + 2, st.idsServed(), st.toString());
            assertEquals(0, st.discardedIds(), st.toString());
            assertEquals(0, st.failovers(), st.toString());
            assertTrue(st.batchSize() > 50, "the size follows demand: " + st);
        }
    }

    @Test
    void a_batch_whose_period_ended_by_the_client_clock_is_dropped_whole_and_counted() throws Exception {
        server.createFormattedTag("daily", 100, ORDERS);
        // The server's real period end for today's ids.
        long periodEnd = periodEnd("daily");
        SettableClock clock = new SettableClock(System.currentTimeMillis());
        assertTrue(clock.get() < periodEnd, "period end " + periodEnd);
        try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(10).maxBatch(10)
                .waitTimeout(Duration.ofMillis(800)).clock(clock).build()) {
            FormattedSupply s = c.formatted("daily");
            List<String> before = new ArrayList<>();
            for (int k = 0; k < 3; k++) {
                before.add(s.nextId());
            }
            // The batch fetched ahead at 10% arrives: two batches of 10, 3 ids handed out.
            long deadline = System.nanoTime() + 5_000_000_000L;
            while (c.stats().batches() < 2 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertEquals(2, c.stats().batches(), c.stats().toString());
            // One millisecond before the end: still served.
            clock.set(periodEnd - 1);
            before.add(s.nextId());
            // At the end: nothing of the period is handed out, however many batches arrive.
            clock.set(periodEnd);
            assertThrows(UnavailableException.class, s::nextId);
            assertFalse(s.tryNextId().isPresent());
            Stats st = c.stats();
            assertEquals(4, st.idsServed(), st.toString());
            // Every id received and not handed out was dropped with its period, and counted: the
            // 6 + 10 left of the two held batches, and every later answer whole on arrival (its
            // period had ended by the client's clock: not taken into a buffer, asked again after
            // the backoff, so a few within the 800 ms wait).
            assertEquals(2, st.batches(), st.toString());
            assertTrue(st.discardedIds() >= 16 + 10, st.toString());
            assertEquals(6, st.discardedIds() % 10, st.toString());
            assertTrue(st.discardedIds() <= 16 + 10 * 8, st.toString());
            // The clock back in the period: ids again, above every one handed out before.
            clock.set(periodEnd - 1);
            String again = s.nextId(Duration.ofSeconds(5));
            assertTrue(Texts.compare(before.get(before.size() - 1), again) < 0, before + " then " + again);
            for (int k = 1; k < before.size(); k++) {
                assertTrue(Texts.compare(before.get(k - 1), before.get(k)) < 0, before.toString());
            }
        }
    }

    /** The server's real period end of a formatted tag's answers, epoch milliseconds. */
    private static long periodEnd(String tag) throws Exception {
        String body = server.get("/api/v1/segment/" + tag + "/ids?count=1").body();
        Matcher m = Pattern.compile("\"period_end\":\"([^\"]+)\"").matcher(body);
        assertTrue(m.find(), body);
        return OffsetDateTime.parse(m.group(1)).toInstant().toEpochMilli();
    }

    @Test
    void the_public_clock_hook_offsets_the_period_rule_and_the_system_clock_is_the_default() throws Exception {
        server.createFormattedTag("hooked", 100, ORDERS);
        long end = periodEnd("hooked");
        // The system clock moved past the server's period end (what clock_offset_ms does in the
        // adapter): every batch the server answers has ended by the client's clock on arrival,
        // so none of its ids is handed out, and each is counted.
        Clock ahead = Clock.offset(Clock.systemUTC(), Duration.ofMillis(end - System.currentTimeMillis() + 60_000));
        try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(10).maxBatch(10)
                .waitTimeout(Duration.ofMillis(600)).clock(ahead).build()) {
            FormattedSupply s = c.formatted("hooked");
            UnavailableException e = assertThrows(UnavailableException.class, s::nextId);
            assertEquals(ServerFault.Kind.PERIOD_ENDED, e.lastFault().orElseThrow().kind(), e.getMessage());
            Stats st = c.stats();
            assertEquals(0, st.idsServed(), st.toString());
            // No answer was taken into a buffer: each was dropped whole on arrival and counted,
            // and asked again after the backoff (50 ms doubling within the 600 ms wait: a few
            // requests, not a loop as fast as the server answers).
            assertEquals(0, st.batches(), st.toString());
            assertTrue(st.discardedIds() >= 10 && st.discardedIds() % 10 == 0, st.toString());
            assertTrue(st.discardedIds() <= 10 * 8, st.toString());
            assertFalse(s.tryNextId().isPresent());
        }
        // The same clock set behind the period end: served; and a JDK system clock (any zone)
        // or none at all serves too.
        Clock behind = Clock.offset(Clock.systemUTC(), Duration.ofMillis(-60_000));
        for (Clock k : new Clock[] {behind, Clock.systemDefaultZone(), null}) {
            LeafidClient.Builder b = LeafidClient.builder().servers(server.url()).batchSize(10);
            if (k != null) {
                b.clock(k);
            }
            try (LeafidClient c = b.build()) {
                assertTrue(ORDER.matcher(c.formatted("hooked").nextId()).matches());
                assertEquals(0, c.stats().discardedIds());
            }
        }
        assertThrows(NullPointerException.class, () -> LeafidClient.builder().clock(null));
    }

    @Test
    void a_plain_tag_on_the_formatted_supply_is_rejected_not_formatted() throws Exception {
        server.createTag("plainjava", 100, null);
        try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(10).build()) {
            for (int k = 0; k < 2; k++) {
                RejectedException e = assertThrows(RejectedException.class, () -> c.formatted("plainjava").nextId());
                assertEquals("not_formatted", e.code());
                assertEquals(200, e.status());
            }
            assertEquals(0, c.stats().failovers());
            assertEquals(0, c.stats().idsServed());
        }
    }

    @Test
    void a_numeric_supply_of_a_formatted_tag_is_rejected_formatted_tag() throws Exception {
        server.createFormattedTag("textonly", 100, ORDERS);
        try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(10).build()) {
            RejectedException e = assertThrows(RejectedException.class, () -> c.segment("textonly").nextId());
            assertEquals("formatted_tag", e.code());
            assertEquals(400, e.status());
            assertEquals(0, c.stats().failovers());
        }
    }

    @Test
    void an_unknown_tag_is_rejected_and_an_invalid_one_refused_locally() {
        try (LeafidClient c = LeafidClient.builder().servers(server.url()).batchSize(10).build()) {
            RejectedException e = assertThrows(RejectedException.class, () -> c.formatted("nosuchtag").nextId());
            assertEquals("unknown_biz_tag", e.code());
            assertThrows(InvalidTagException.class, () -> c.formatted("no such/tag"));
        }
    }

    private static Servers.Request req(int count) {
        return new Servers.Request("/api/v1/segment/t/ids", count, "t", true);
    }

    @Test
    void only_valid_bodies_are_taken() throws Exception {
        String end = ",\"period\":\"20261127\",\"period_end\":\"2026-11-28T00:00:00Z\"}";
        Texts ok = Texts.parse("{\"biz_tag\":\"t\",\"ids\":[\"A-1\",\"A-2\"]" + end, req(2));
        assertEquals(2, ok.ids.length);
        assertEquals(OffsetDateTime.parse("2026-11-28T00:00:00Z").toInstant().toEpochMilli(), ok.periodEndMillis);
        Texts off = Texts.parse("{\"biz_tag\":\"t\",\"ids\":[\"A\"],\"period_end\":\"2026-11-28T00:00:00+08:00\"}",
                req(1));
        assertEquals(OffsetDateTime.parse("2026-11-27T16:00:00Z").toInstant().toEpochMilli(), off.periodEndMillis);
        Map<String, String> bad = Map.of(
                "decreasing", "{\"biz_tag\":\"t\",\"ids\":[\"A-2\",\"A-1\"]" + end,
                "repeated", "{\"biz_tag\":\"t\",\"ids\":[\"A-1\",\"A-1\"]" + end,
                "empty text", "{\"biz_tag\":\"t\",\"ids\":[\"\"]" + end,
                "empty list", "{\"biz_tag\":\"t\",\"ids\":[]" + end,
                "too many", "{\"biz_tag\":\"t\",\"ids\":[\"A\",\"B\",\"C\"]" + end,
                "other tag", "{\"biz_tag\":\"u\",\"ids\":[\"A\"]" + end,
                "no end", "{\"biz_tag\":\"t\",\"ids\":[\"A\"]}",
                "bad end", "{\"biz_tag\":\"t\",\"ids\":[\"A\"],\"period_end\":\"tomorrow\"}",
                "number among texts", "{\"biz_tag\":\"t\",\"ids\":[\"A\",2]" + end);
        for (Map.Entry<String, String> e : bad.entrySet()) {
            assertThrows(Servers.BadBatch.class, () -> Texts.parse(e.getValue(), req(2)), e.getKey());
        }
        assertThrows(Texts.NotFormatted.class, () -> Texts.parse("{\"biz_tag\":\"t\",\"ids\":[1,2]}", req(2)));
        // "ordered": absent or true, the byte order is checked; false (a permuted tag), not.
        assertTrue(ok.ordered);
        assertTrue(Texts.parse("{\"biz_tag\":\"t\",\"ids\":[\"A-1\",\"A-2\"],\"ordered\":true" + end, req(2)).ordered);
        Texts perm = Texts.parse("{\"biz_tag\":\"t\",\"ids\":[\"T-Q\",\"T-3\",\"T-9\"],\"ordered\":false" + end, req(3));
        assertFalse(perm.ordered);
        assertEquals(List.of("T-Q", "T-3", "T-9"), List.of(perm.ids), "kept in the order received");
        Map<String, String> badToo = Map.of(
                "ordered true, decreasing", "{\"biz_tag\":\"t\",\"ids\":[\"A-2\",\"A-1\"],\"ordered\":true" + end,
                "ordered a string", "{\"biz_tag\":\"t\",\"ids\":[\"A-1\"],\"ordered\":\"false\"" + end,
                "ordered null", "{\"biz_tag\":\"t\",\"ids\":[\"A-1\"],\"ordered\":null" + end,
                "unordered, empty text", "{\"biz_tag\":\"t\",\"ids\":[\"T-Q\",\"\"],\"ordered\":false" + end,
                "unordered, too many", "{\"biz_tag\":\"t\",\"ids\":[\"T-Q\",\"T-3\",\"T-9\"],\"ordered\":false" + end,
                "unordered, no end", "{\"biz_tag\":\"t\",\"ids\":[\"T-Q\"],\"ordered\":false}");
        for (Map.Entry<String, String> e : badToo.entrySet()) {
            assertThrows(Servers.BadBatch.class, () -> Texts.parse(e.getValue(), req(2)), e.getKey());
        }
    }

    @Test
    void texts_compare_in_utf8_byte_order() {
        assertTrue(Texts.compare("ORD-2026112700000009", "ORD-2026112700000010") < 0);
        assertTrue(Texts.compare("ORD-2026112799999999", "ORD-2026112800000001") < 0);
        assertTrue(Texts.compare("A", "AB") < 0);
        assertTrue(Texts.compare("Z", "a") < 0);
        // U+FFFD is 0xEF.. in UTF-8, U+1F600 is 0xF0..: the surrogate pair sorts after.
        assertTrue(Texts.compare("\uFFFD", "\uD83D\uDE00") < 0);
        assertTrue("\uFFFD".compareTo("\uD83D\uDE00") > 0, "String.compareTo differs here");
        assertEquals(0, Texts.compare("x", "x"));
    }

    @Test
    void the_local_path_hands_out_a_fixed_batch_in_order_then_waits() {
        String[] ids = {"A-1", "A-2", "A-3"};
        FormattedSupply s = FormattedSupply.fixed(ids, Long.MAX_VALUE, Duration.ofMillis(10),
                LeafidClient.SYSTEM_CLOCK);
        assertEquals("A-1", s.nextId());
        assertEquals("A-2", s.nextId());
        assertEquals("A-3", s.nextId());
        assertThrows(UnavailableException.class, s::nextId);
        assertEquals(3, s.stats().idsServed());
    }

    /**
     * The default clock (issue 47): no clock read per id; the deadline timer armed at receipt
     * sets the batch's ended flag. The deadline passes between two ids: the first is handed out,
     * the second is not (the batch dropped whole, its two ids left counted as discarded), and
     * the next answer, accepted as a refill accepts it, is served.
     */
    @Test
    void the_deadline_passes_between_two_ids() throws InterruptedException {
        String[] ids = {"A-1", "A-2", "A-3"};
        long end = System.currentTimeMillis() + 400;
        ScheduledThreadPoolExecutor timer = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "leafid-test-deadlines");
            t.setDaemon(true);
            return t;
        });
        FormattedSupply s = FormattedSupply.fixed(ids, end, Duration.ofMillis(10), LeafidClient.SYSTEM_CLOCK, timer);
        try {
            deadlinePassesBetweenTwoIds(s, end);
        } finally {
            timer.shutdownNow();
        }
    }

    private static void deadlinePassesBetweenTwoIds(FormattedSupply s, long end) throws InterruptedException {
        assertEquals(Optional.of("A-1"), s.tryNextId());
        long giveUp = System.nanoTime() + 5_000_000_000L;
        while (!s.currentEnded()) {
            assertTrue(System.nanoTime() < giveUp, "the deadline never fired");
            Thread.sleep(5);
        }
        assertTrue(System.currentTimeMillis() >= end, "the flag was set before period_end");
        assertEquals(Optional.empty(), s.tryNextId());
        assertEquals(1, s.stats().idsServed());
        assertEquals(2, s.stats().discardedIds());
        long now = System.currentTimeMillis();
        Texts t = new Texts(new String[] {"A-4", "A-5"}, "p", now + 86_400_000L, true);
        assertEquals(FormattedSupply.Accepted.YES, s.accept(t, "test"));
        assertEquals(Optional.of("A-4"), s.tryNextId());
        assertEquals(Optional.of("A-5"), s.tryNextId());
    }
}
