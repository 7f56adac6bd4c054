package io.leafid.client;

/**
 * Counters of one supply or (summed) of a whole client: a snapshot, read without stopping
 * anything.
 */
public final class Stats {
    private final long idsServed;
    private final long batches;
    private final long failovers;
    private final long discardedIds;
    private final int batchSize;

    Stats(long idsServed, long batches, long failovers, long discardedIds, int batchSize) {
        this.idsServed = idsServed;
        this.batches = batches;
        this.failovers = failovers;
        this.discardedIds = discardedIds;
        this.batchSize = batchSize;
    }

    /**
     * Ids handed to callers.
     *
     * @return the number of ids handed to callers
     */
    public long idsServed() {
        return idsServed;
    }

    /**
     * 200 answers whose ids were taken into a local batch (at least one id above the floor).
     *
     * @return the number of batches taken
     */
    public long batches() {
        return batches;
    }

    /**
     * Times a request went to another server because the one asked failed.
     *
     * @return the number of failovers
     */
    public long failovers() {
        return failovers;
    }

    /**
     * Ids received in 200 answers but never handed out because they were not above the last id
     * accepted (a server behind the one used before, after a failover).
     *
     * @return the number of ids discarded
     */
    public long discardedIds() {
        return discardedIds;
    }

    /**
     * The ids the next batch request asks for (the size follows demand, between the builder's
     * batch size and its maximum); summed over supplies, the largest of them.
     *
     * @return the size of the next batch request
     */
    public int batchSize() {
        return batchSize;
    }

    Stats plus(Stats o) {
        return new Stats(idsServed + o.idsServed, batches + o.batches, failovers + o.failovers,
                discardedIds + o.discardedIds, Math.max(batchSize, o.batchSize));
    }

    @Override
    public String toString() {
        return "Stats{idsServed=" + idsServed + ", batches=" + batches + ", failovers=" + failovers
                + ", discardedIds=" + discardedIds + ", batchSize=" + batchSize + "}";
    }
}
