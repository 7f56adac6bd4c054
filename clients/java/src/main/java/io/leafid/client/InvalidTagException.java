package io.leafid.client;

/**
 * The tag is not 1 to 128 characters of {@code A-Z a-z 0-9 . _ : -} (the server's rule); no
 * request was sent.
 */
public final class InvalidTagException extends LeafidException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /** The refused tag. */
    private final String tag;

    /**
     * A refused tag.
     *
     * @param tag the tag as the caller gave it, or null
     */
    InvalidTagException(String tag) {
        super(tag == null ? "biz tag is missing (null)"
                : "invalid biz tag \"" + tag + "\": 1 to 128 of A-Z a-z 0-9 . _ : -");
        this.tag = tag;
    }

    /**
     * The refused tag.
     *
     * @return the tag as the caller gave it ({@code null} if it was missing)
     */
    public String tag() {
        return tag;
    }
}
