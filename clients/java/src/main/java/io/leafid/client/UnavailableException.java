package io.leafid.client;

import java.time.Duration;
import java.util.Optional;

/**
 * No ids arrived within the wait timeout: every server failed or is down. Names the last
 * server failure the client saw, if any.
 */
public final class UnavailableException extends LeafidException {
    private static final long serialVersionUID = 1L;

    /** How long the call waited. */
    private final Duration waited;
    private final transient ServerFault lastFault;

    UnavailableException(Duration waited, ServerFault lastFault) {
        super("no ids within " + waited.toMillis() + " ms: no server answered"
                + (lastFault == null ? "" : " (last: " + lastFault + ")"));
        this.waited = waited;
        this.lastFault = lastFault;
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
