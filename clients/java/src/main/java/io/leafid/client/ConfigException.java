package io.leafid.client;

/** The builder refused its settings (no server, a bad URL, a batch size out of range...). */
public final class ConfigException extends LeafidException {
    /** Serialization version. */
    private static final long serialVersionUID = 1L;

    /**
     * A refused setting.
     *
     * @param message the setting and why it is refused
     */
    ConfigException(String message) {
        super("invalid client configuration: " + message);
    }
}
