package io.leafid.client;

/**
 * Base of every error the client raises. Unchecked: a caller that cannot get an id usually has
 * nothing better to do than fail its own request. Catch a subclass to tell the cases apart:
 * {@link RejectedException}, {@link UnavailableException}, {@link InvalidTagException},
 * {@link ConfigException}, {@link ClosedException}, {@link ThrottledException}.
 */
public class LeafidException extends RuntimeException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * An error with a message.
     *
     * @param message the cause, for humans
     */
    LeafidException(String message) {
        super(message);
    }

    /**
     * An error with a message and a cause.
     *
     * @param message the cause, for humans
     * @param cause the underlying exception
     */
    LeafidException(String message, Throwable cause) {
        super(message, cause);
    }
}
