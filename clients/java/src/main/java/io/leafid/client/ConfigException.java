package io.leafid.client;

/** The builder refused its settings (no server, a bad URL, a batch size out of range...). */
public final class ConfigException extends LeafidException {
    private static final long serialVersionUID = 1L;

    ConfigException(String message) {
        super("invalid client configuration: " + message);
    }
}
