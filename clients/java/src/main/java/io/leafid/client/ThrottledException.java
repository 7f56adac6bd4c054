package io.leafid.client;

import java.time.Duration;

/**
 * The caller token's quota is spent: leafid answered {@code 429 quota_exhausted} (the token's
 * rate for now, or a formatted tag's share of its period) with a {@code Retry-After} that ends
 * past the caller's wait timeout. A shorter {@code Retry-After} is waited out by the client,
 * which then asks the same server again: every server shares the quota, so the client never
 * fails over for it. {@link #code()} is {@code quota_exhausted}; {@link #retryAfter()} says when
 * asking again may succeed.
 */
public final class ThrottledException extends LeafidException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /** Base URL of the server that answered. */
    private final String server;
    /** The server's error code. */
    private final String code;
    /** The server's message. */
    private final String serverMessage;
    /** The server's Retry-After. */
    private final Duration retryAfter;

    /**
     * A throttled request.
     *
     * @param server base URL of the server that answered
     * @param code the server's error code
     * @param serverMessage the server's message
     * @param retryAfter the server's Retry-After
     */
    ThrottledException(String server, String code, String serverMessage, Duration retryAfter) {
        super(server + " throttled the request (429 " + code + ", retry after " + retryAfter.getSeconds()
                + " s): " + serverMessage);
        this.server = server;
        this.code = code;
        this.serverMessage = serverMessage;
        this.retryAfter = retryAfter;
    }

    /**
     * A copy for one more caller (each caller gets its own stack trace).
     *
     * @return a new exception with the same fields
     */
    ThrottledException copy() {
        return new ThrottledException(server, code, serverMessage, retryAfter);
    }

    /**
     * Base URL of the server that answered.
     *
     * @return the server's base URL
     */
    public String server() {
        return server;
    }

    /**
     * The server's stable error code: {@code quota_exhausted}.
     *
     * @return the error code
     */
    public String code() {
        return code;
    }

    /**
     * The server's human-readable message.
     *
     * @return the message, as the server wrote it
     */
    public String serverMessage() {
        return serverMessage;
    }

    /**
     * The server's {@code Retry-After}: when asking again may succeed.
     *
     * @return the wait the server asked for
     */
    public Duration retryAfter() {
        return retryAfter;
    }
}
