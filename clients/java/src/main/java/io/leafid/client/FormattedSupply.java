package io.leafid.client;

import java.lang.invoke.MethodHandles;
import java.lang.ref.WeakReference;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.LongSupplier;

/**
 * The local id stream of one <em>formatted</em> tag of one client: ids that are text, such as
 * order numbers {@code 20261127000123} that restart daily (see the server's
 * {@code docs/shapes.md}). Get it from {@link LeafidClient#formatted(String)}; every call for
 * the same tag returns the same supply.
 *
 * <p>Fed by {@code GET /api/v1/segment/{tag}/ids?count=N} (at most 100,000 per request) through
 * the client's servers, with the same failover, health probes, statistics and demand-following
 * batch size as {@link IdSupply}. It holds two batches, each with its period's end
 * ({@code period_end}); the next is fetched in the background once 10% of the current one is
 * handed out (single flight).
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li><b>Never yesterday's number today.</b> Before handing out an id, the supply compares its
 *       batch's {@code period_end} with the client's wall clock: a batch whose period has ended
 *       is dropped whole, and its ids count in {@link Stats#discardedIds()}. An answer whose
 *       period has already ended when it arrives is dropped the same way and asked again after
 *       the backoff. (A server never answers ids of a period that ended by its own clock; this
 *       covers the time a batch spends in the client, and a client clock ahead of the
 *       server's.) The clock is the builder's {@link LeafidClient.Builder#clock}.
 *       <p>With the default (system) clock no clock is read per id (issue 47: a clock read is a
 *       system call where the VM's vDSO falls back to it, about 110 ns on the bench machine,
 *       many times the rest of the local path). At receipt the batch's deadline is
 *       {@code period_end - System.currentTimeMillis()} on the monotonic clock of the client's
 *       timer thread, which then sets the batch's volatile {@code ended} flag; the local path
 *       reads the flag. <b>Bound</b>: the flag is set at most the scheduler's latency (a millisecond or so
 *       under load) after {@code period_end} by the wall clock as it ran at receipt, and a
 *       volatile read sees it from then on. A wall clock stepped forward by D after receipt is
 *       not seen by the timer: ids may be handed out up to D after {@code period_end} by the
 *       stepped clock, until the next batch switch (which reads the wall clock) or the next
 *       answer (each answer's deadline is computed from the wall clock at its receipt). A clock
 *       stepped back only makes the flag fire early (ids dropped, never late). An injected
 *       clock is read per id, as before (tests move a period's end with it).
 *   <li><b>No id twice, only received ids.</b> An index of a batch is taken by exactly one
 *       caller; a batch is built only from a 200 body that passed validation.
 *   <li><b>Increasing</b> (every formatted tag but a permuted one). Texts of one format sort
 *       as byte strings in issue order, so the
 *       <em>floor</em> is the largest text accepted: ids of a later answer at or below it are
 *       cut (counted in {@link Stats#discardedIds()}). If one {@code nextId} call returns before
 *       another starts, the second text is larger, by the argument of
 *       {@link IdSupply#nextId(Duration)} (batches served in increasing order, {@code current}
 *       only moving forward, one atomic counter per batch).
 *   <li><b>Permuted tags: no order.</b> A permuted tag's answers (codes such as
 *       {@code T-9F3K2Q}, a keyed permutation of the sequence) say {@code "ordered": false}: their
 *       order is hidden on purpose. Such a batch is taken whole, without the byte-order check
 *       and without the floor (it neither is cut by it nor moves it), and its texts are handed
 *       out in the order received; ids come in no order, and their uniqueness is the server's,
 *       as for every id. The period rule holds as above, and {@link Stats#discardedIds()} counts
 *       only texts of an ended period. The local path is the same (the flag is read once per
 *       answer, in the refill).
 * </ul>
 */
public final class FormattedSupply {
    /**
     * One accepted batch (or the empty start and closed markers) and its counter: the index the
     * next caller takes. Immutable but for the counter, which only grows.
     */
    static final class Batch {
        /** The texts; the batch is {@code ids[start .. start + size)}. */
        final String[] ids;
        /** Index in {@link #ids} of the batch's first id (those before lie at or below the floor). */
        final int start;
        /** Ids in the batch. */
        final int size;
        /** The period's end, epoch milliseconds: from then on the batch is dropped. */
        final long periodEnd;
        /** Taking this index starts the refill (10% of the batch). */
        final long preloadAt;
        /**
         * Set once the period has ended by the default clock (the deadline timer armed at
         * receipt, {@link FormattedSupply#arm}); never set with an injected clock.
         */
        volatile boolean ended;
        /** The deadline timer (null if none), cancelled when the batch is retired. */
        ScheduledFuture<?> deadline;
        /** Indexes taken; only through {@link #TAKEN}. */
        @SuppressWarnings("unused")
        private long taken;

        /**
         * A batch, none of it taken.
         *
         * @param ids the texts
         * @param start index of the first one used
         * @param size ids used
         * @param periodEnd the period's end, epoch milliseconds
         */
        Batch(String[] ids, int start, int size, long periodEnd) {
            this.ids = ids;
            this.start = start;
            this.size = size;
            this.periodEnd = periodEnd;
            this.preloadAt = size / 10;
        }

        /**
         * Ids handed out (or being handed out).
         *
         * @return the indexes taken, at most the size
         */
        long served() {
            return Math.min((long) TAKEN.getVolatile(this), size);
        }
    }

    /** Atomic access to {@link Batch#taken}. */
    private static final VarHandle TAKEN;

    static {
        try {
            TAKEN = MethodHandles.lookup().findVarHandle(Batch.class, "taken", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** No ids: the start and closed marker. */
    private static final String[] NONE = new String[0];

    /** The client's servers, threads, settings, wall clock and closed flag. */
    private final LeafidClient.Shared shared;
    /** The client's wall clock, epoch milliseconds ({@link LeafidClient.Builder#clock}; default the system clock). */
    private final LongSupplier clock;
    /**
     * The clock is {@link LeafidClient#SYSTEM_CLOCK}: the local path calls
     * {@link System#currentTimeMillis()} directly (measured: about twice as fast as through the
     * supplier, whose call site sees the test clocks too).
     */
    private final boolean systemClock;
    /** The list route without its query. */
    private final String route;
    /** The tag. */
    private final String tag;
    /** Smallest size a request asks for. */
    private final int minBatch;
    /** Largest size a request asks for (within the route's limit). */
    private final int maxBatch;

    /**
     * The batch callers take from. Written only under {@link #lock}, only to replace a spent or
     * ended batch (or by close); volatile, as {@link IdSupply}'s current run.
     */
    private volatile Batch current = new Batch(NONE, 0, 0, Long.MAX_VALUE);

    /** Guards the fields below; never held across a request. */
    private final ReentrantLock lock = new ReentrantLock();
    /** Signalled when a refill ends and when the client closes. */
    private final Condition refillEnded = lock.newCondition();
    /** The batch to use after the current one, once fetched. */
    private Batch next;
    /** When the current batch became current ({@link System#nanoTime()}). */
    private long currentSince;
    /** The largest text accepted into a batch so far, null before the first. */
    private String floor;
    /** The size the next request asks for (follows demand). */
    private int size;
    /** A caller found both batches spent since the last size decision. */
    private boolean starved;
    /** True while one refill runs (single flight). */
    private boolean refilling;
    /** Set when the last refill was refused; cleared when a new refill starts. */
    private LeafidException refused;
    /** The last server failure of the refills; a success clears it. */
    private ServerFault lastFault;
    /** Ids of the batches left (handed out; the rest were discarded). */
    private long retiredServed;

    /** Batches accepted. Statistics only. */
    private final AtomicLong batches = new AtomicLong();
    /** Ids cut below the floor or dropped with an ended period. Statistics only. */
    private final AtomicLong discarded = new AtomicLong();
    /** Failovers of this supply's fetches. Statistics only. */
    private final AtomicLong failovers = new AtomicLong();

    /**
     * A supply with no batch yet.
     *
     * @param shared what the client's supplies share
     * @param tag the tag
     * @param minBatch the builder's batch size, within the route's limit
     * @param maxBatch the largest size a request asks for, within the route's limit
     */
    FormattedSupply(LeafidClient.Shared shared, String tag, int minBatch, int maxBatch) {
        this.shared = shared;
        this.clock = shared.wallClock;
        this.systemClock = shared.wallClock == LeafidClient.SYSTEM_CLOCK;
        this.route = "/api/v1/segment/" + tag + "/ids";
        this.tag = tag;
        this.minBatch = minBatch;
        this.maxBatch = maxBatch;
        this.size = minBatch;
    }

    /**
     * A supply of exactly {@code ids} (period ending at {@code periodEnd}) that never contacts a
     * server: for benchmarks of the local path and tests.
     *
     * @param ids the texts, strictly increasing
     * @param periodEnd the period's end, epoch milliseconds
     * @param waitTimeout the wait once they are spent
     * @param clock the wall clock
     * @return the supply
     */
    static FormattedSupply fixed(String[] ids, long periodEnd, Duration waitTimeout, LongSupplier clock) {
        return fixed(ids, periodEnd, waitTimeout, clock, null);
    }

    /**
     * A fixed supply whose deadlines (default clock) run on {@code timer}; without one, nothing
     * is armed and the period is taken as never ending (benches).
     *
     * @param ids the texts, increasing
     * @param periodEnd the period's end, epoch milliseconds
     * @param waitTimeout the wait once they are spent
     * @param clock the wall clock
     * @param timer the deadline scheduler, or null
     * @return the supply
     */
    static FormattedSupply fixed(String[] ids, long periodEnd, Duration waitTimeout, LongSupplier clock,
            ScheduledThreadPoolExecutor timer) {
        FormattedSupply s = new FormattedSupply(
                new LeafidClient.Shared(null, null, waitTimeout, 0, null, timer, clock), "fixed", 1, 1);
        s.lock.lock();
        try {
            s.floor = ids[ids.length - 1];
            s.current = new Batch(ids, 0, ids.length, periodEnd);
            s.arm(s.current, s.now());
            s.currentSince = System.nanoTime();
        } finally {
            s.lock.unlock();
        }
        return s;
    }

    /**
     * The tag of this supply.
     *
     * @return the tag
     */
    public String tag() {
        return tag;
    }

    /**
     * The next id, waiting at most the client's wait timeout when the local batches are spent
     * or their periods have ended.
     *
     * @return the id, as the server wrote it
     * @throws RejectedException a server refused the request ({@code unknown_biz_tag},
     *     {@code not_formatted} for a plain tag, {@code sequence_exhausted} until the next
     *     period...)
     * @throws ThrottledException the caller token\'s quota is spent past the wait timeout
     * @throws UnavailableException no ids within the wait timeout
     * @throws ClosedException the client is closed, or the thread was interrupted while waiting
     */
    public String nextId() {
        Batch b = current;
        if (live(b)) {
            long i = (long) TAKEN.getAndAdd(b, 1L);
            if (i < b.size) {
                if (i == b.preloadAt) {
                    startRefill();
                }
                return b.ids[b.start + (int) i];
            }
        }
        return nextIdSlow(System.nanoTime(), shared.waitTimeout.toNanos());
    }

    /**
     * The next id, waiting at most {@code maxWait} when the local batches are spent or ended.
     *
     * @param maxWait the longest wait for a batch
     * @return the id, as the server wrote it
     * @throws RejectedException a server refused the request
     * @throws ThrottledException the caller token\'s quota is spent past the wait timeout
     * @throws UnavailableException no ids within {@code maxWait}
     * @throws ClosedException the client is closed, or the thread was interrupted while waiting
     */
    public String nextId(Duration maxWait) {
        Batch b = current;
        if (live(b)) {
            long i = (long) TAKEN.getAndAdd(b, 1L);
            if (i < b.size) {
                if (i == b.preloadAt) {
                    startRefill();
                }
                return b.ids[b.start + (int) i];
            }
        }
        return nextIdSlow(System.nanoTime(), maxWait.toNanos());
    }

    /**
     * The next id if a local batch of a current period holds one, without waiting or failing
     * (a spent batch starts the refill).
     *
     * @return the id, or empty when no local batch holds one
     * @throws ClosedException the client is closed
     */
    public Optional<String> tryNextId() {
        Batch b = current;
        if (live(b)) {
            long i = (long) TAKEN.getAndAdd(b, 1L);
            if (i < b.size) {
                if (i == b.preloadAt) {
                    startRefill();
                }
                return Optional.of(b.ids[b.start + (int) i]);
            }
        }
        lock.lock();
        try {
            if (shared.closed) {
                throw new ClosedException("client closed");
            }
            String id = takeLocked();
            if (id != null) {
                return Optional.of(id);
            }
            noteStarvedLocked();
            startRefillLocked();
            return Optional.empty();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Counters of this supply.
     *
     * @return a snapshot of this supply's counters
     */
    public Stats stats() {
        lock.lock();
        try {
            return new Stats(retiredServed + current.served(), batches.get(), failovers.get(), discarded.get(), size);
        } finally {
            lock.unlock();
        }
    }

    // ---- internals ----

    /**
     * The wall clock.
     *
     * @return epoch milliseconds
     */
    private long now() {
        return systemClock ? System.currentTimeMillis() : clock.getAsLong();
    }

    /**
     * The local path's period check: with the default clock, the batch's {@code ended} flag (no
     * clock read); with an injected clock, that clock before {@code period_end}.
     *
     * @param b a batch
     * @return whether its period has not ended
     */
    private boolean live(Batch b) {
        return systemClock ? !b.ended : clock.getAsLong() < b.periodEnd;
    }

    /**
     * Whether the current batch's deadline has passed (tests).
     *
     * @return the current batch's {@code ended} flag
     */
    boolean currentEnded() {
        return current.ended;
    }

    /**
     * Arms {@code b}'s deadline with the default clock: its {@code ended} flag is set
     * {@code periodEnd - wallNow} ms from now (at once if that is not positive), on the client's
     * timer thread (shut down by close, which ends every deadline with it). The task holds the
     * batch weakly, so a batch is never kept alive by it; retiring the batch cancels it. With an
     * injected clock nothing is armed: that clock is read per id.
     *
     * @param b a batch just accepted
     * @param wallNow the wall clock at its receipt, epoch milliseconds
     */
    void arm(Batch b, long wallNow) {
        if (!systemClock || b.size == 0 || shared.timer == null) {
            return;
        }
        if (b.deadline != null) {
            b.deadline.cancel(false);
        }
        long left = b.periodEnd - wallNow;
        if (left <= 0) {
            b.ended = true;
            return;
        }
        WeakReference<Batch> ref = new WeakReference<>(b);
        try {
            b.deadline = shared.timer.schedule(() -> {
                Batch x = ref.get();
                if (x != null) {
                    x.ended = true;
                }
            }, left, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException e) {
            // The client is closed: nothing more is handed out, so no deadline is needed.
        }
    }

    /**
     * Under the lock: an id of the current batch, leaving a spent or ended batch for the next
     * one (an ended one's ids never handed out count as discarded).
     *
     * @return the id, or null when there is none locally
     */
    private String takeLocked() {
        while (true) {
            Batch b = current;
            if (live(b)) {
                long i = (long) TAKEN.getAndAdd(b, 1L);
                if (i < b.size) {
                    if (i == b.preloadAt) {
                        startRefillLocked();
                    }
                    return b.ids[b.start + (int) i];
                }
            }
            if (b.size > 0) {
                retireLocked(b);
                current = new Batch(NONE, 0, 0, Long.MAX_VALUE);
            }
            Batch n = next;
            if (n == null) {
                return null;
            }
            next = null;
            // Off the local path, once per batch: the wall clock too, so a wall clock stepped
            // forward since receipt is caught here (the class comment's bound).
            if (systemClock && System.currentTimeMillis() >= n.periodEnd) {
                n.ended = true;
            }
            current = n;
            currentSince = System.nanoTime();
        }
    }

    /**
     * Leaves {@code b} (the current batch): pushes its counter past its end, so no caller takes
     * an index of it any more, and counts what it served; what it did not serve (its period
     * ended) is discarded.
     *
     * @param b the current batch
     */
    private void retireLocked(Batch b) {
        if (b.deadline != null) {
            b.deadline.cancel(false);
        }
        long old = (long) TAKEN.getAndAdd(b, (long) b.size + 1);
        long served = Math.min(old, b.size);
        retiredServed += served;
        if (served < b.size) {
            discarded.addAndGet(b.size - served);
        }
    }

    /** Records that a caller found both batches spent (doubles the next request's size). */
    private void noteStarvedLocked() {
        if (batches.get() > 0) {
            starved = true;
        }
    }

    /**
     * The slow path: leaves spent or ended batches under the lock, starts the refill and waits.
     *
     * @param started when the call started ({@link System#nanoTime()})
     * @param waitNanos the longest wait
     * @return the id
     */
    private String nextIdSlow(long started, long waitNanos) {
        long deadline = started + waitNanos;
        boolean waited = false;
        lock.lock();
        try {
            while (true) {
                if (shared.closed) {
                    throw new ClosedException("client closed");
                }
                String id = takeLocked();
                if (id != null) {
                    return id;
                }
                if (waited && refused != null) {
                    throw Servers.copyOf(refused);
                }
                if (!waited) {
                    noteStarvedLocked();
                }
                startRefillLocked();
                waited = true;
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new UnavailableException(Duration.ofNanos(System.nanoTime() - started),
                            Duration.ofNanos(waitNanos), lastFault, refilling);
                }
                try {
                    refillEnded.awaitNanos(left);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new ClosedException("interrupted while waiting for ids");
                }
            }
        } finally {
            lock.unlock();
        }
    }

    /** {@link #startRefillLocked()} taking the lock. */
    private void startRefill() {
        lock.lock();
        try {
            startRefillLocked();
        } finally {
            lock.unlock();
        }
    }

    /**
     * Starts the refill unless one runs or the next batch is already there; decides the size of
     * its request from the batch in use (demand) first.
     */
    private void startRefillLocked() {
        if (refilling || next != null || shared.closed || shared.servers == null) {
            return;
        }
        Batch b = current;
        size = BatchSize.next(size, b.size, b.served(), System.nanoTime() - currentSince, starved, minBatch,
                maxBatch, shared.targetLifetimeNanos);
        starved = false;
        Servers.Request req = new Servers.Request(route, size, tag, true);
        refilling = true;
        refused = null;
        try {
            shared.workers.execute(() -> refill(req));
        } catch (RejectedExecutionException e) {
            refilling = false; // closing
        }
    }

    /**
     * Fetches one batch above the floor into {@code next}, retrying failed rounds with backoff
     * for at most the wait timeout. An answer wholly at or below the floor (a server behind)
     * marks that server down and is followed at once by another request (then with backoff).
     *
     * @param req the request, of the size decided when it started
     */
    private void refill(Servers.Request req) {
        long deadline = System.nanoTime() + shared.waitTimeout.toNanos();
        int failures = 0;
        try {
            while (!shared.closed) {
                Servers.FetchResult r = shared.servers.fetch(req);
                failovers.addAndGet(r.failovers);
                long wait;
                if (r.texts != null) {
                    Accepted a = accept(r.texts, r.server);
                    if (a == Accepted.YES) {
                        return;
                    }
                    if (a == Accepted.ENDED) {
                        // The client's clock is past the answer's period: asking again at once
                        // would only burn the servers' ids; the backoff paces it.
                        failures++;
                        wait = shared.timing.backoff(failures);
                    } else {
                        shared.servers.markBehind(r.serverIndex);
                        wait = failures++ == 0 ? 0 : shared.timing.backoff(failures);
                    }
                } else if (r.rejected != null) {
                    lock.lock();
                    try {
                        refused = r.rejected;
                    } finally {
                        lock.unlock();
                    }
                    return;
                } else {
                    lock.lock();
                    try {
                        if (r.fault != null) {
                            lastFault = r.fault;
                        }
                    } finally {
                        lock.unlock();
                    }
                    failures++;
                    wait = shared.timing.backoff(failures);
                }
                if (System.nanoTime() + wait - deadline >= 0) {
                    return;
                }
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait);
                }
            }
        } catch (InterruptedException e) {
            // The client is closing.
        } catch (RuntimeException e) {
            lock.lock();
            try {
                lastFault = new ServerFault("(client)", ServerFault.Kind.TRANSPORT, String.valueOf(e));
            } finally {
                lock.unlock();
            }
        } finally {
            endRefill();
        }
    }

    /** What {@link #accept} did with an answer. */
    enum Accepted {
        /** It became {@code next}. */
        YES,
        /** Wholly at or below the floor: dropped (a server behind). */
        BEHIND,
        /** Its period had ended by the client's clock: dropped whole. */
        ENDED,
    }

    /**
     * Cuts {@code t} to the texts above the floor; if some are left they become {@code next}.
     * An answer whose period has already ended by the client's clock is dropped whole (counted)
     * and does not move the floor. An unordered answer (a permuted tag) is taken whole, in the
     * order received, and does not move the floor either: its texts have no order to keep.
     *
     * @param t a valid answer
     * @param server the base URL of the server that sent it
     * @return what became of it
     */
    Accepted accept(Texts t, String server) {
        lock.lock();
        try {
            long wall = now();
            if (wall >= t.periodEndMillis) {
                discarded.addAndGet(t.ids.length);
                lastFault = new ServerFault(server, ServerFault.Kind.PERIOD_ENDED, t.ids.length
                        + " ids of period \"" + t.period + "\", which ended at " + Instant.ofEpochMilli(t.periodEndMillis)
                        + " by the client's clock (" + Instant.ofEpochMilli(now()) + ")");
                return Accepted.ENDED;
            }
            int k = t.ordered ? t.firstAbove(floor) : 0;
            if (k > 0) {
                discarded.addAndGet(k);
            }
            if (k == t.ids.length) {
                lastFault = new ServerFault(server, ServerFault.Kind.BEHIND, t.ids.length + " ids up to \""
                        + t.ids[t.ids.length - 1] + "\", all at or below the last id accepted, \"" + floor + "\"");
                return Accepted.BEHIND;
            }
            if (t.ordered) {
                floor = t.ids[t.ids.length - 1];
            }
            next = new Batch(t.ids, k, t.ids.length - k, t.periodEndMillis);
            arm(next, wall);
            lastFault = null;
            batches.incrementAndGet();
            return Accepted.YES;
        } finally {
            lock.unlock();
        }
    }

    /** Marks the refill over and wakes everyone waiting for it. */
    private void endRefill() {
        lock.lock();
        try {
            refilling = false;
            refillEnded.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** Wakes every waiting caller, and empties the current batch so later calls see the close. */
    void close() {
        lock.lock();
        try {
            retiredServed += current.served();
            for (Batch b : new Batch[] {current, next}) {
                if (b != null && b.deadline != null) {
                    b.deadline.cancel(false);
                }
            }
            current = new Batch(NONE, 0, 0, Long.MAX_VALUE);
            refillEnded.signalAll();
        } finally {
            lock.unlock();
        }
    }
}
