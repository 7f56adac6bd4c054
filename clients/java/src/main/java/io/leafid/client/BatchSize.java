package io.leafid.client;

/**
 * The batch a supply asks for, following demand (PROTOCOL.md, "The batch a client asks for"):
 * a pure function, decided each time a request is about to be sent.
 */
final class BatchSize {
    /** A batch current for less than this counts this long (1 ms). */
    static final long MIN_ELAPSED_NANOS = 1_000_000L;

    /** Not instantiable. */
    private BatchSize() {}

    /**
     * The size of the next request.
     *
     * <ul>
     *   <li>{@code starved} (a caller waited because both local batches were spent): double;
     *   <li>else, with a batch in use ({@code batchIds > 0}), its projected lifetime
     *       {@code elapsed * batchIds / max(used, 1)} (elapsed at least 1 ms): below half of
     *       {@code target} double, above twice {@code target} halve;
     *   <li>always within {@code min..=max}.
     * </ul>
     *
     * @param size the size asked for last
     * @param batchIds ids of the batch in use (0: none yet, the size stays)
     * @param used ids of it handed out so far
     * @param elapsedNanos since it became current
     * @param starved whether a caller found both batches spent since the last decision
     * @param min the builder's batch size
     * @param max the largest size this supply may ask for
     * @param targetNanos how long a batch should last
     * @return the ids the next request asks for
     */
    static int next(int size, long batchIds, long used, long elapsedNanos, boolean starved, int min, int max,
            long targetNanos) {
        long s = size;
        if (starved) {
            s = s * 2;
        } else if (batchIds > 0) {
            double elapsed = Math.max(elapsedNanos, MIN_ELAPSED_NANOS);
            double lifetime = elapsed * batchIds / Math.max(used, 1);
            if (lifetime < targetNanos / 2.0) {
                s = s * 2;
            } else if (lifetime > targetNanos * 2.0) {
                s = s / 2;
            }
        }
        return (int) Math.max(min, Math.min(s, max));
    }
}
