package io.leafid.client;

/**
 * One server's failure to deliver a batch: the server is then marked down and the next one is
 * asked at once.
 */
public final class ServerFault {
    /** What went wrong with one server. */
    public enum Kind {
        /** No HTTP answer: connection refused or reset, timeout. */
        TRANSPORT,
        /**
         * A status that is this server's problem: a 5xx, or a 4xx that is not a refusal of the
         * request itself ({@code engine_disabled}, 408, 429, a 4xx without leafid's body).
         */
        STATUS,
        /** A 200 whose body is not a valid batch: none of its ids is handed out. */
        BAD_RESPONSE,
        /**
         * A valid batch whose ids all lie at or below the last id this client accepted: the
         * server is behind the one used before (cut, counted in {@link Stats#discardedIds()}).
         * It is marked down (asked again only as a last resort or after its probe) and the next
         * request asks for enough ids to pass the floor at once (the catch-up).
         */
        BEHIND,
        /**
         * A valid formatted batch whose period had already ended by the client's wall clock
         * when it arrived (the client's clock runs ahead of the server's, or the answer was
         * slow): dropped whole, counted in {@link Stats#discardedIds()}, and asked again after
         * the backoff. The server is not marked down (its clock is not known to be wrong).
         */
        PERIOD_ENDED,
    }

    /** Base URL of the server. */
    private final String server;
    /** What went wrong. */
    private final Kind kind;
    /** What happened, for humans. */
    private final String detail;

    /**
     * One failure.
     *
     * @param server base URL of the server
     * @param kind what went wrong
     * @param detail what happened, for humans
     */
    ServerFault(String server, Kind kind, String detail) {
        this.server = server;
        this.kind = kind;
        this.detail = detail;
    }

    /**
     * Base URL of the server.
     *
     * @return the server's base URL
     */
    public String server() {
        return server;
    }

    /**
     * The kind of failure.
     *
     * @return the kind
     */
    public Kind kind() {
        return kind;
    }

    /**
     * What happened, for humans.
     *
     * @return a description of the failure
     */
    public String detail() {
        return detail;
    }

    @Override
    public String toString() {
        switch (kind) {
            case STATUS:
                return server + ": HTTP " + detail;
            case BAD_RESPONSE:
                return server + ": bad response: " + detail;
            case BEHIND:
                return server + ": behind: " + detail;
            case PERIOD_ENDED:
                return server + ": period ended: " + detail;
            default:
                return server + ": " + detail;
        }
    }
}
