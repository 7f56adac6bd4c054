package io.leafid.client;

/**
 * The client was closed (before or during the call), or the waiting caller was interrupted;
 * no id was handed out by this call.
 */
public final class ClosedException extends LeafidException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * A closed client's error.
     *
     * @param message what was closed or interrupted
     */
    ClosedException(String message) {
        super(message);
    }
}
