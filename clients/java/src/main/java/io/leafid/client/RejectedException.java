package io.leafid.client;

/**
 * A server refused the request itself: a 4xx with code {@code unknown_biz_tag},
 * {@code invalid_biz_tag}, {@code biz_tag_exhausted}, {@code invalid_count},
 * {@code invalid_request} or {@code formatted_tag} (a numeric supply of a formatted tag); a 503
 * {@code sequence_exhausted} (a formatted tag's period ran out of its width, until the next
 * period); or, for a {@link FormattedSupply}, a 200 with numeric ids and no {@code period_end}
 * (status 200, code {@code not_formatted}: the tag is plain); or the caller token refused by
 * leafid: {@code 401 unauthorized} (missing, unknown or revoked) or {@code 403 forbidden} (not
 * scoped to the tag). Every server shares one database
 * and would answer the same, so no other server was asked (not a failover).
 */
public final class RejectedException extends LeafidException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /** Base URL of the server that answered. */
    private final String server;
    /** The HTTP status (4xx). */
    private final int status;
    /** The server's error code. */
    private final String code;
    /** The server's message. */
    private final String serverMessage;

    /**
     * A refusal.
     *
     * @param server base URL of the server that answered
     * @param status the HTTP status (4xx)
     * @param code the server's error code
     * @param serverMessage the server's message
     */
    RejectedException(String server, int status, String code, String serverMessage) {
        super(server + " refused the request (" + status + " " + code + "): " + serverMessage);
        this.server = server;
        this.status = status;
        this.code = code;
        this.serverMessage = serverMessage;
    }

    /**
     * A copy for one more caller (each caller gets its own stack trace).
     *
     * @return a new exception with the same fields
     */
    RejectedException copy() {
        return new RejectedException(server, status, code, serverMessage);
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
     * The HTTP status (4xx; 503 for {@code sequence_exhausted}; 200 for {@code not_formatted}).
     *
     * @return the status code
     */
    public int status() {
        return status;
    }

    /**
     * The server's stable error code, e.g. {@code unknown_biz_tag}.
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
}
