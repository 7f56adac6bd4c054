package io.leafid.client;

/**
 * Base of every error the client raises. Unchecked: a caller that cannot get an id usually has
 * nothing better to do than fail its own request. Catch a subclass to tell the cases apart:
 * {@link RejectedException}, {@link UnavailableException}, {@link InvalidTagException},
 * {@link ConfigException}, {@link ClosedException}.
 */
public class LeafidException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    LeafidException(String message) {
        super(message);
    }

    LeafidException(String message, Throwable cause) {
        super(message, cause);
    }
}
