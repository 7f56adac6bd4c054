package io.leafid.client;

/**
 * The smallest and largest snowflake id any worker can issue in a time range {@code [from, to)}
 * under the servers' layout, from {@link LeafidClient#snowflakeBounds}: for
 * {@code WHERE id BETWEEN minId AND maxId}. Both ends are included, {@code minId} at least 0 (a range in the layout's first tick), and
 * {@code minId <= maxId}. Immutable.
 */
public final class IdBounds {
    /** The smallest id of the range. */
    private final long minId;
    /** The largest id of the range. */
    private final long maxId;

    /**
     * Bounds, checked by the caller ({@code 0 <= minId <= maxId}).
     *
     * @param minId the smallest id
     * @param maxId the largest id
     */
    IdBounds(long minId, long maxId) {
        this.minId = minId;
        this.maxId = maxId;
    }

    /**
     * The smallest id any worker can issue in the range (included).
     *
     * @return the smallest id, positive
     */
    public long minId() {
        return minId;
    }

    /**
     * The largest id any worker can issue in the range (included).
     *
     * @return the largest id, at least {@link #minId()}
     */
    public long maxId() {
        return maxId;
    }

    /**
     * Whether {@code id} lies within the bounds, both ends included.
     *
     * @param id a snowflake id
     * @return whether {@code minId <= id <= maxId}
     */
    public boolean contains(long id) {
        return minId <= id && id <= maxId;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof IdBounds)) {
            return false;
        }
        IdBounds b = (IdBounds) o;
        return minId == b.minId && maxId == b.maxId;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(minId) * 31 + Long.hashCode(maxId);
    }

    @Override
    public String toString() {
        return "IdBounds[minId=" + minId + ", maxId=" + maxId + "]";
    }
}
