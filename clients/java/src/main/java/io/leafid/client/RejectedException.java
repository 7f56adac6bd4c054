package io.leafid.client;

/**
 * A server refused the request itself: a 4xx with code {@code unknown_biz_tag},
 * {@code invalid_biz_tag}, {@code biz_tag_exhausted}, {@code invalid_count} or
 * {@code invalid_request}. Every server shares one database and would answer the same, so no
 * other server was asked (not a failover).
 */
public final class RejectedException extends LeafidException {
    private static final long serialVersionUID = 1L;

    private final String server;
    private final int status;
    private final String code;
    private final String serverMessage;

    RejectedException(String server, int status, String code, String serverMessage) {
        super(server + " refused the request (" + status + " " + code + "): " + serverMessage);
        this.server = server;
        this.status = status;
        this.code = code;
        this.serverMessage = serverMessage;
    }

    /** A copy for one more caller (each caller gets its own stack trace). */
    RejectedException copy() {
        return new RejectedException(server, status, code, serverMessage);
    }

    /** Base URL of the server that answered. */
    public String server() {
        return server;
    }

    /** The HTTP status (4xx). */
    public int status() {
        return status;
    }

    /** The server's stable error code, e.g. {@code unknown_biz_tag}. */
    public String code() {
        return code;
    }

    /** The server's human-readable message. */
    public String serverMessage() {
        return serverMessage;
    }
}
