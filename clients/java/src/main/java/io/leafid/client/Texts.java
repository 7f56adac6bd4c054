package io.leafid.client;

import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeParseException;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/**
 * The ids of one valid 200 answer of the list route of a formatted tag
 * ({@code GET /api/v1/segment/{tag}/ids?count=N}): texts, strictly increasing as byte strings
 * (or, for a permuted tag's answer, {@code "ordered": false}, in the order received), and the
 * end of the period they belong to. Immutable.
 */
final class Texts {
    /** The ids, none empty; strictly increasing in byte order if {@link #ordered}. */
    final String[] ids;
    /**
     * The answer's {@code ordered} (absent: true). False for a permuted tag: its texts come in
     * no order, on purpose; they are handed out as received, with no floor.
     */
    final boolean ordered;
    /** The period the ids name, as the server wrote it ({@code ""} if absent). */
    final String period;
    /** The first instant after the period, in epoch milliseconds (rounded down). */
    final long periodEndMillis;

    /**
     * A batch (not checked here: {@link #parse} validates a body).
     *
     * @param ids the ids
     * @param period the period
     * @param periodEndMillis the period's end, epoch milliseconds
     * @param ordered whether the ids increase in byte order
     */
    Texts(String[] ids, String period, long periodEndMillis, boolean ordered) {
        this.ids = ids;
        this.ordered = ordered;
        this.period = period;
        this.periodEndMillis = periodEndMillis;
    }

    /**
     * A 200 body with numeric ids and no {@code period_end}: the tag is plain, not formatted.
     * Every server would answer the same (they share one database).
     */
    static final class NotFormatted extends Exception {
        /** Serialization version. */
        private static final long serialVersionUID = 1L;

        /**
         * A plain tag's answer.
         *
         * @param message what the server answered
         */
        NotFormatted(String message) {
            super(message);
        }
    }

    /**
     * The texts of a 200 body, exactly: {@code {"biz_tag": tag, "ids": ["..."], "period": "...",
     * "period_end": "<RFC 3339>", "ordered": true}} where {@code ids} is a non-empty list of
     * non-empty strings, no longer than asked, strictly increasing as byte strings, the body
     * names the tag asked for and {@code period_end} parses as an RFC 3339 instant. With
     * {@code "ordered": false} (a permuted tag) the ids are not checked for order; without the
     * field the answer is ordered; any other value of it is invalid. Anything else is the
     * server's fault and none of its ids is used, except a body with numeric ids and no
     * {@code period_end} (the tag is plain).
     *
     * @param body the 200 body
     * @param req the request it answers
     * @return its texts
     * @throws Servers.BadBatch the body is not a valid batch
     * @throws NotFormatted the body is a plain tag's numbers
     */
    static Texts parse(String body, Servers.Request req) throws Servers.BadBatch, NotFormatted {
        Object v;
        try {
            v = Json.parse(body);
        } catch (Json.ParseException e) {
            throw new Servers.BadBatch("not JSON: " + e.getMessage());
        }
        if (!(v instanceof Map)) {
            throw new Servers.BadBatch("not a JSON object");
        }
        Map<?, ?> m = (Map<?, ?>) v;
        if (req.tag != null && !req.tag.equals(m.get("biz_tag"))) {
            throw new Servers.BadBatch("asked for tag " + req.tag + ", got " + m.get("biz_tag"));
        }
        if (!(m.get("ids") instanceof List)) {
            throw new Servers.BadBatch("no ids array");
        }
        List<?> raw = (List<?>) m.get("ids");
        if (raw.isEmpty() || raw.size() > req.count) {
            throw new Servers.BadBatch(raw.size() + " ids for " + req.count + " asked");
        }
        if (!m.containsKey("period_end")) {
            boolean numbers = true;
            for (Object o : raw) {
                numbers &= o instanceof Json.Num;
            }
            if (numbers) {
                throw new NotFormatted("tag " + req.tag + " is not formatted: its ids are numbers");
            }
            throw new Servers.BadBatch("no period_end");
        }
        if (!(m.get("period_end") instanceof String)) {
            throw new Servers.BadBatch("period_end is not a string");
        }
        long end;
        try {
            end = parseRfc3339Millis((String) m.get("period_end"));
        } catch (IllegalArgumentException e) {
            throw new Servers.BadBatch("period_end \"" + m.get("period_end") + "\" is not an RFC 3339 instant");
        }
        Object flag = m.containsKey("ordered") ? m.get("ordered") : Boolean.TRUE;
        if (!(flag instanceof Boolean)) {
            throw new Servers.BadBatch("ordered is not true or false");
        }
        boolean ordered = (Boolean) flag;
        String[] ids = new String[raw.size()];
        for (int k = 0; k < ids.length; k++) {
            Object o = raw.get(k);
            if (!(o instanceof String) || ((String) o).isEmpty()) {
                throw new Servers.BadBatch("id " + k + " is not a non-empty string");
            }
            ids[k] = (String) o;
            if (ordered && k > 0 && compare(ids[k - 1], ids[k]) >= 0) {
                throw new Servers.BadBatch("ids do not increase: \"" + ids[k - 1] + "\" then \"" + ids[k] + "\"");
            }
        }
        // Unordered texts have no order to check: a text twice is caught here instead.
        if (!ordered && new HashSet<>(Arrays.asList(ids)).size() != ids.length) {
            throw new Servers.BadBatch("a text twice in one answer");
        }
        Object period = m.get("period");
        return new Texts(ids, period instanceof String ? (String) period : "", end, ordered);
    }

    /**
     * Byte order of the UTF-8 encodings of {@code a} and {@code b}, which is code point order
     * ({@link String#compareTo} is UTF-16 order: a character above U+E000 would sort after a
     * surrogate pair there, before it in UTF-8). Texts of one format are ASCII, where all three
     * agree.
     *
     * @param a a text
     * @param b a text
     * @return negative, zero or positive as {@code a} sorts before, with or after {@code b}
     */
    static int compare(String a, String b) {
        int n = Math.min(a.length(), b.length());
        for (int k = 0; k < n; k++) {
            char x = a.charAt(k);
            char y = b.charAt(k);
            if (x != y) {
                boolean sx = Character.isSurrogate(x);
                boolean sy = Character.isSurrogate(y);
                if (sx == sy) {
                    return x - y;
                }
                return sx ? 1 : -1; // a surrogate starts a code point above U+FFFF
            }
        }
        return a.length() - b.length();
    }

    /**
     * Index of the first id above {@code floor} ({@code ids.length} if none is).
     *
     * @param floor the largest text accepted so far, or null (none yet)
     * @return the index
     */
    int firstAbove(String floor) {
        if (floor == null) {
            return 0;
        }
        int lo = 0;
        int hi = ids.length;
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (compare(ids[mid], floor) > 0) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        return lo;
    }

    /** The subset of RFC 3339 the server writes: upper-case T and Z, offsets +HH:MM. */
    private static final Pattern RFC3339 = Pattern.compile(
            "[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?"
                    + "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])");

    /**
     * An RFC 3339 instant in milliseconds since the epoch, the fraction cut: the subset the
     * server writes, a real calendar date, no leap second
     * ({@code clients/conformance/vectors/rfc3339.json}).
     *
     * @param text the instant
     * @return its epoch milliseconds
     * @throws IllegalArgumentException not such an instant
     */
    static long parseRfc3339Millis(String text) {
        if (text == null || !RFC3339.matcher(text).matches()) {
            throw new IllegalArgumentException("not an RFC 3339 instant: " + text);
        }
        try {
            return OffsetDateTime.parse(text, DateTimeFormatter.ISO_OFFSET_DATE_TIME).toInstant().toEpochMilli();
        } catch (DateTimeParseException | ArithmeticException e) {
            throw new IllegalArgumentException("not an RFC 3339 instant: " + text, e);
        }
    }
}
