package io.leafid.client;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small strict JSON reader (RFC 8259) for the few bodies the client reads: objects become
 * {@code Map<String, Object>}, arrays {@code List<Object>}, strings {@code String}, numbers
 * {@link Num} (the literal text, so a 64-bit id keeps every digit), {@code true}/{@code false}
 * {@code Boolean} and {@code null} {@link #NULL}. Also writes strings (for the adapter).
 */
final class Json {
    /** JSON {@code null} (a Java null would be confused with a missing key). */
    static final Object NULL = new Null();

    /** The type of {@link #NULL}. */
    private static final class Null {
        @Override
        public String toString() {
            return "null";
        }
    }

    /** A number, kept as its literal text. */
    static final class Num {
        /** The literal, e.g. {@code 9223372036854775807} or {@code 1.5e3}. */
        final String text;

        /**
         * A number.
         *
         * @param text its literal
         */
        Num(String text) {
            this.text = text;
        }

        @Override
        public String toString() {
            return text;
        }
    }

    /** Malformed JSON. */
    static final class ParseException extends Exception {
        /** Serialization version. */
        private static final long serialVersionUID = 1L;

        /**
         * Malformed JSON at an offset.
         *
         * @param message what is wrong
         * @param at the offset in the text
         */
        ParseException(String message, int at) {
            super(message + " at offset " + at);
        }
    }

    /** The text being read. */
    private final String s;
    /** The offset of the next character to read. */
    private int i;
    /** Arrays and objects open around the offset. */
    private int depth;

    /**
     * A reader at the start of a text.
     *
     * @param s the text
     */
    private Json(String s) {
        this.s = s;
    }

    /**
     * Parses one JSON value that must fill the whole text (whitespace aside).
     *
     * @param text the JSON text
     * @return the value ({@code Map}, {@code List}, {@code String}, {@link Num}, {@code Boolean}
     *     or {@link #NULL})
     * @throws ParseException the text is not one JSON value
     */
    static Object parse(String text) throws ParseException {
        Json p = new Json(text);
        p.ws();
        Object v = p.value();
        p.ws();
        if (p.i != text.length()) {
            throw new ParseException("trailing characters", p.i);
        }
        return v;
    }

    /**
     * Reads one value at the offset.
     *
     * @return the value
     * @throws ParseException no valid value there
     */
    private Object value() throws ParseException {
        if (i >= s.length()) {
            throw new ParseException("unexpected end", i);
        }
        char c = s.charAt(i);
        switch (c) {
            case '{':
                return object();
            case '[':
                return array();
            case '"':
                return string();
            case 't':
                return literal("true", Boolean.TRUE);
            case 'f':
                return literal("false", Boolean.FALSE);
            case 'n':
                return literal("null", NULL);
            default:
                if (c == '-' || (c >= '0' && c <= '9')) {
                    return number();
                }
                throw new ParseException("unexpected character '" + c + "'", i);
        }
    }

    /**
     * Reads {@code word} at the offset.
     *
     * @param word {@code true}, {@code false} or {@code null}
     * @param v its value
     * @return {@code v}
     * @throws ParseException another word there
     */
    private Object literal(String word, Object v) throws ParseException {
        if (!s.startsWith(word, i)) {
            throw new ParseException("expected " + word, i);
        }
        i += word.length();
        return v;
    }

    /**
     * Enters an array or object.
     *
     * @throws ParseException nested more than 64 deep
     */
    private void nest() throws ParseException {
        if (++depth > 64) {
            throw new ParseException("nested too deep", i);
        }
    }

    /**
     * Reads an object at the offset.
     *
     * @return its members, in order
     * @throws ParseException not a valid object
     */
    private Map<String, Object> object() throws ParseException {
        nest();
        i++; // {
        Map<String, Object> m = new LinkedHashMap<>();
        ws();
        if (peek() == '}') {
            i++;
            depth--;
            return m;
        }
        while (true) {
            ws();
            if (peek() != '"') {
                throw new ParseException("expected a key", i);
            }
            String k = string();
            ws();
            expect(':');
            ws();
            m.put(k, value());
            ws();
            char c = peek();
            i++;
            if (c == '}') {
                depth--;
                return m;
            }
            if (c != ',') {
                throw new ParseException("expected , or }", i - 1);
            }
        }
    }

    /**
     * Reads an array at the offset.
     *
     * @return its elements
     * @throws ParseException not a valid array
     */
    private List<Object> array() throws ParseException {
        nest();
        i++; // [
        List<Object> l = new ArrayList<>();
        ws();
        if (peek() == ']') {
            i++;
            depth--;
            return l;
        }
        while (true) {
            ws();
            l.add(value());
            ws();
            char c = peek();
            i++;
            if (c == ']') {
                depth--;
                return l;
            }
            if (c != ',') {
                throw new ParseException("expected , or ]", i - 1);
            }
        }
    }

    /**
     * Reads a string at the offset.
     *
     * @return the string, unescaped
     * @throws ParseException not a valid string
     */
    private String string() throws ParseException {
        i++; // "
        StringBuilder b = new StringBuilder();
        while (true) {
            if (i >= s.length()) {
                throw new ParseException("unterminated string", i);
            }
            char c = s.charAt(i++);
            if (c == '"') {
                return b.toString();
            }
            if (c < 0x20) {
                throw new ParseException("control character in string", i - 1);
            }
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (i >= s.length()) {
                throw new ParseException("unterminated escape", i);
            }
            char e = s.charAt(i++);
            switch (e) {
                case '"':
                case '\\':
                case '/':
                    b.append(e);
                    break;
                case 'b':
                    b.append('\b');
                    break;
                case 'f':
                    b.append('\f');
                    break;
                case 'n':
                    b.append('\n');
                    break;
                case 'r':
                    b.append('\r');
                    break;
                case 't':
                    b.append('\t');
                    break;
                case 'u':
                    if (i + 4 > s.length()) {
                        throw new ParseException("short \\u escape", i);
                    }
                    try {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                    } catch (NumberFormatException ex) {
                        throw new ParseException("bad \\u escape", i);
                    }
                    i += 4;
                    break;
                default:
                    throw new ParseException("bad escape \\" + e, i - 1);
            }
        }
    }

    /**
     * Reads a number at the offset.
     *
     * @return the number, as its literal
     * @throws ParseException not a valid number
     */
    private Num number() throws ParseException {
        int start = i;
        if (peek() == '-') {
            i++;
        }
        if (peek() == '0') {
            i++;
        } else if (isDigit(peek())) {
            digits();
        } else {
            throw new ParseException("bad number", start);
        }
        if (peek() == '.') {
            i++;
            if (!isDigit(peek())) {
                throw new ParseException("bad fraction", i);
            }
            digits();
        }
        if (peek() == 'e' || peek() == 'E') {
            i++;
            if (peek() == '+' || peek() == '-') {
                i++;
            }
            if (!isDigit(peek())) {
                throw new ParseException("bad exponent", i);
            }
            digits();
        }
        return new Num(s.substring(start, i));
    }

    /** Skips digits. */
    private void digits() {
        while (isDigit(peek())) {
            i++;
        }
    }

    /**
     * Whether a character is an ASCII digit.
     *
     * @param c the character
     * @return whether it is 0 to 9
     */
    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    /**
     * The character at the offset.
     *
     * @return it, or {@code \0} at the end
     */
    private char peek() {
        return i < s.length() ? s.charAt(i) : '\0';
    }

    /**
     * Reads one expected character.
     *
     * @param c the character
     * @throws ParseException another character there
     */
    private void expect(char c) throws ParseException {
        if (peek() != c) {
            throw new ParseException("expected '" + c + "'", i);
        }
        i++;
    }

    /** Skips whitespace. */
    private void ws() {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            i++;
        }
    }

    /**
     * {@code v} as a JSON string literal.
     *
     * @param v the string
     * @return the literal, quotes included
     */
    static String quote(String v) {
        StringBuilder b = new StringBuilder(v.length() + 2).append('"');
        for (int k = 0; k < v.length(); k++) {
            char c = v.charAt(k);
            switch (c) {
                case '"':
                    b.append("\\\"");
                    break;
                case '\\':
                    b.append("\\\\");
                    break;
                case '\n':
                    b.append("\\n");
                    break;
                case '\r':
                    b.append("\\r");
                    break;
                case '\t':
                    b.append("\\t");
                    break;
                default:
                    if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
            }
        }
        return b.append('"').toString();
    }
}
