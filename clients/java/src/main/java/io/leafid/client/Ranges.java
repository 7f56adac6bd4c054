package io.leafid.client;

/**
 * The ids of one valid 200 answer of a range route: runs of consecutive ids, both ends
 * included, strictly increasing and not overlapping. Immutable.
 */
final class Ranges {
    /** First id of each run (positive). */
    final long[] firsts;
    /** Last id of each run: {@code firsts[k] <= lasts[k] < firsts[k + 1]}. */
    final long[] lasts;
    /** Ids in all runs together (at least 1). */
    final long count;
    /**
     * The answer said {@code "strict": true} (issue 45): the tag is strict, and its supply turns
     * to pass-through (see {@link IdSupply}).
     */
    final boolean strict;

    /**
     * Runs as given (not checked here: {@link Servers#parseBatch} validates a body), not strict.
     *
     * @param firsts the first id of each run
     * @param lasts the last id of each run
     * @param count the ids in all runs
     */
    Ranges(long[] firsts, long[] lasts, long count) {
        this(firsts, lasts, count, false);
    }

    /**
     * Runs as given, of an answer marked strict or not.
     *
     * @param firsts the first id of each run
     * @param lasts the last id of each run
     * @param count the ids in all runs
     * @param strict whether the answer said {@code "strict": true}
     */
    Ranges(long[] firsts, long[] lasts, long count, boolean strict) {
        this.firsts = firsts;
        this.lasts = lasts;
        this.count = count;
        this.strict = strict;
    }

    /**
     * One run {@code first..=last}.
     *
     * @param first the first id (positive)
     * @param last the last id, at least {@code first}
     * @return the run
     */
    static Ranges of(long first, long last) {
        return new Ranges(new long[] {first}, new long[] {last}, last - first + 1);
    }

    /**
     * The largest id.
     *
     * @return the last id of the last run
     */
    long last() {
        return lasts[lasts.length - 1];
    }

    /**
     * The ids above {@code floor}, or null if none is (the runs at or below it dropped, the run
     * that holds it trimmed). {@code count - result.count} ids are cut.
     *
     * @param floor the largest id already accepted
     * @return the ids above it, or null
     */
    Ranges above(long floor) {
        if (firsts[0] > floor) {
            return this;
        }
        if (last() <= floor) {
            return null;
        }
        int k = 0;
        while (lasts[k] <= floor) {
            k++;
        }
        int n = lasts.length - k;
        long[] f = new long[n];
        long[] l = new long[n];
        System.arraycopy(firsts, k, f, 0, n);
        System.arraycopy(lasts, k, l, 0, n);
        if (f[0] <= floor) {
            f[0] = floor + 1; // floor < lasts[k] <= 2^63-1: no overflow
        }
        long c = 0;
        for (int j = 0; j < n; j++) {
            c += l[j] - f[j] + 1;
        }
        return new Ranges(f, l, c);
    }
}
