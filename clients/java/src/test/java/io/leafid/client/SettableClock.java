package io.leafid.client;

import java.time.Clock;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.concurrent.atomic.AtomicLong;

/** A wall clock a test sets (epoch milliseconds), for {@link LeafidClient.Builder#clock}. */
final class SettableClock extends Clock {
    private final AtomicLong millis;

    SettableClock(long millis) {
        this.millis = new AtomicLong(millis);
    }

    void set(long ms) {
        millis.set(ms);
    }

    long get() {
        return millis.get();
    }

    @Override
    public long millis() {
        return millis.get();
    }

    @Override
    public Instant instant() {
        return Instant.ofEpochMilli(millis.get());
    }

    @Override
    public ZoneId getZone() {
        return ZoneOffset.UTC;
    }

    @Override
    public Clock withZone(ZoneId zone) {
        throw new UnsupportedOperationException("a test clock has one zone");
    }
}
