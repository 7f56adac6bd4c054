package io.leafid.client;

import java.time.Duration;
import java.util.Optional;

/**
 * No ids arrived within the wait: every server failed or is down, or (with no failure seen) the
 * batch request was still in flight when the wait ended. Names the last server failure the
 * client saw, if any.
 */
public final class UnavailableException extends LeafidException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /** How long the call waited. */
    private final Duration waited;
    /** The last server failure seen, or null. */
    private final transient ServerFault lastFault;

    /**
     * No ids within a wait.
     *
     * @param waited how long the call waited
     * @param allowed the wait the call allowed
     * @param lastFault the last server failure seen, or null
     * @param requestInFlight whether a batch request was still running
     */
    UnavailableException(Duration waited, Duration allowed, ServerFault lastFault, boolean requestInFlight) {
        super(message(waited, allowed, lastFault, requestInFlight));
        this.waited = waited;
        this.lastFault = lastFault;
    }

    /**
     * The message: the failure if one was seen, else the timeout.
     *
     * @param waited how long the call waited
     * @param allowed the wait the call allowed
     * @param lastFault the last server failure seen, or null
     * @param inFlight whether a batch request was still running
     * @return the message
     */
    private static String message(Duration waited, Duration allowed, ServerFault lastFault, boolean inFlight) {
        if (lastFault != null) {
            return "no ids within " + waited.toMillis() + " ms: no server delivered (last: " + lastFault + ")";
        }
        return "no ids came within the " + allowed.toMillis() + " ms wait: timed out"
                + (inFlight ? " while the batch request was in flight (no server has failed)" : "");
    }

    /**
     * How long the call waited.
     *
     * @return the time waited
     */
    public Duration waited() {
        return waited;
    }

    /**
     * The last server failure seen while fetching, if a server was asked at all.
     *
     * @return the last failure, or empty when no server was asked
     */
    public Optional<ServerFault> lastFault() {
        return Optional.ofNullable(lastFault);
    }
}
