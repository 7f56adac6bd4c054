package io.leafid.client;

/**
 * Counters of one supply or (summed) of a whole client: a snapshot, read without stopping
 * anything.
 */
public final class Stats {
    /** Ids handed to callers. */
    private final long idsServed;
    /** 200 answers taken into a local batch. */
    private final long batches;
    /** Requests sent to another server because the one asked failed. */
    private final long failovers;
    /** Ids received but cut below the floor. */
    private final long discardedIds;
    /** The size of the next batch request. */
    private final int batchSize;

    /**
     * A snapshot.
     *
     * @param idsServed ids handed to callers
     * @param batches 200 answers taken into a local batch
     * @param failovers requests sent to another server because the one asked failed
     * @param discardedIds ids received but cut below the floor
     * @param batchSize the size of the next batch request
     */
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

    /**
     * These counters plus another supply's (the batch size: the larger).
     *
     * @param o the other counters
     * @return the sum
     */
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
