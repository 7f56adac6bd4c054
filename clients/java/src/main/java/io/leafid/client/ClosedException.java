package io.leafid.client;

/**
 * The client was closed (before or during the call), or the waiting caller was interrupted;
 * no id was handed out by this call.
 */
public final class ClosedException extends LeafidException {
    private static final long serialVersionUID = 1L;

    ClosedException(String message) {
        super(message);
    }
}
