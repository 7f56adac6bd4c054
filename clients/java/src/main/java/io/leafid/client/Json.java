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
    static final Object NULL = new Object() {
        @Override
        public String toString() {
            return "null";
        }
    };

    /** A number, kept as its literal text. */
    static final class Num {
        /** The literal, e.g. {@code 9223372036854775807} or {@code 1.5e3}. */
        final String text;

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
        private static final long serialVersionUID = 1L;

        ParseException(String message, int at) {
            super(message + " at offset " + at);
        }
    }

    private final String s;
    private int i;
    private int depth;

    private Json(String s) {
        this.s = s;
    }

    /** Parses one JSON value that must fill the whole text (whitespace aside). */
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

    private Object literal(String word, Object v) throws ParseException {
        if (!s.startsWith(word, i)) {
            throw new ParseException("expected " + word, i);
        }
        i += word.length();
        return v;
    }

    private void nest() throws ParseException {
        if (++depth > 64) {
            throw new ParseException("nested too deep", i);
        }
    }

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

    private void digits() {
        while (isDigit(peek())) {
            i++;
        }
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    private char peek() {
        return i < s.length() ? s.charAt(i) : '\0';
    }

    private void expect(char c) throws ParseException {
        if (peek() != c) {
            throw new ParseException("expected '" + c + "'", i);
        }
        i++;
    }

    private void ws() {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                return;
            }
            i++;
        }
    }

    /** {@code v} as a JSON string literal. */
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
