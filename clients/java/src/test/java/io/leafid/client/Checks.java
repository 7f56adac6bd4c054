package io.leafid.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/** Assertions on what callers received. */
final class Checks {
    private Checks() {}

    /** One {@code nextId} call: when it started and returned, and its id. */
    static final class Call {
        final long start;
        final long end;
        final long id;

        Call(long start, long end, long id) {
            this.start = start;
            this.end = end;
            this.id = id;
        }
    }

    static void strictlyIncreasing(List<Long> ids) {
        for (int k = 1; k < ids.size(); k++) {
            if (ids.get(k) <= ids.get(k - 1)) {
                fail("not increasing at " + k + ": " + ids.get(k - 1) + " then " + ids.get(k));
            }
        }
    }

    static void noDuplicates(List<Long> ids) {
        Set<Long> seen = new HashSet<>();
        for (long id : ids) {
            assertTrue(seen.add(id), "id " + id + " handed out twice");
        }
    }

    /**
     * Every call that started after another one returned got a larger id (the client's
     * "increasing across callers" guarantee), checked over all pairs by one sweep.
     */
    static void linearizable(List<Call> calls) {
        Call[] byEnd = calls.toArray(new Call[0]);
        Arrays.sort(byEnd, Comparator.comparingLong(c -> c.end));
        List<Call> byStart = new ArrayList<>(calls);
        byStart.sort(Comparator.comparingLong(c -> c.start));
        long maxEnded = 0;
        int e = 0;
        for (Call c : byStart) {
            while (e < byEnd.length && byEnd[e].end < c.start) {
                maxEnded = Math.max(maxEnded, byEnd[e].id);
                e++;
            }
            if (c.id <= maxEnded) {
                fail("a call that started after one returning " + maxEnded + " got " + c.id);
            }
        }
        assertEquals(calls.size(), byStart.size());
    }
}
