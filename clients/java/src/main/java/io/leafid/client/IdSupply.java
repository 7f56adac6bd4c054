package io.leafid.client;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * One local id stream: the ids of one segment tag, or the snowflake ids, of one client. Get it
 * from {@link LeafidClient#segment(String)} or {@link LeafidClient#snowflake()}; every call for
 * the same tag returns the same supply, so all callers share one increasing stream.
 *
 * <p>Double-buffered like the server's segment buffer: the supply holds the batch <em>in
 * use</em> (the runs of consecutive ids of one 200 answer of a range route) and at most one
 * <em>next</em> batch. Callers take ids from the <em>current run</em>, a part of the batch in
 * use: {@link #nextId()} is one atomic increment of the run's counter and one compare with the
 * run's size, nothing else (no lock, no allocation). Only a caller whose increment passes the
 * end of the run takes the supply's lock and switches to the next run (of the batch in use, or
 * of the next batch once the batch in use is spent). The batch is cut into runs so that one run
 * starts at 10% of it: the switch into that run starts the refill, which fetches the next batch
 * on a client thread (single flight). Callers that find both batches spent wait for the refill,
 * at most the wait timeout.
 *
 * <p>The size of each request follows demand (see {@link LeafidClient.Builder#maxBatch(int)}):
 * it doubles while a batch would last less than half the target lifetime (or a caller had to
 * wait), halves while it would last more than twice the target, between the builder's batch size
 * and its maximum.
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li><b>No id twice.</b> An index of a run is taken by exactly one caller, and each accepted
 *       batch holds only ids above every id of the batches accepted before it (the
 *       <em>floor</em>); the runs of one batch do not overlap.
 *   <li><b>Only received ids.</b> A run is built only from the runs of a 200 body that passed
 *       validation, trimmed to the ids above the floor.
 *   <li><b>Increasing.</b> If one {@code nextId} call returns before another starts, the second
 *       id is larger, whichever threads make the calls (see {@link #nextId(Duration)} for why).
 *       After a failover the new server's ids at or below the floor are cut (counted in
 *       {@link Stats#discardedIds()}, never handed out); after an answer cut to nothing the next
 *       request follows at once and asks for enough ids to pass the floor (the catch-up).
 * </ul>
 *
 * <h2>Strict tags: pass-through</h2>
 * A strict tag's ids (issue 45) are in real-time order across servers: every id is greater than
 * every id whose answer was complete before its request was sent. A local buffer would break that
 * between two client processes (P1 holds 100..150 and hands out 100; P2 gets 200; P1 then hands
 * out 101 to a call that began after P2's answer). So the first answer with
 * {@code "strict": true} turns the supply to pass-through for good: the ids it holds and that
 * answer's (they may have been fetched before some waiting call began) are dropped and counted in
 * {@link Stats#discardedIds()}; no refill or preload starts again; each later call sends its own
 * request for one id ({@code count=1}, through the usual server order, failover and retries), and
 * {@link #tryNextId()} finds nothing. Safe: the id a call returns was issued after the call
 * began, so the server's order covers it; dropping ids never breaks a rule. As a second line, a
 * call refuses (discards, and asks again) an id at or below the floor it read before sending:
 * every id accepted before was complete before its request was sent, so a correct server never
 * answers one, and one that did (an older server) never reaches a caller.
 */
public final class IdSupply {
    /**
     * A run of consecutive ids {@code first ..= first + size - 1} and its counter: the index the
     * next caller takes. Immutable but for the counter, which only grows (each caller adds one,
     * also past the end: a long cannot wrap in practice). Indexes, not ids, are counted, so a
     * run ending at 2^63-1 cannot overflow into negative ids.
     */
    static final class Run {
        /** The first id of the run (positive). */
        final long first;
        /** Ids in the run (0 only for the supply's start and closed markers). */
        final long size;
        /** Switching into this run starts the refill (it begins at 10% of its batch). */
        final boolean startsRefill;
        /** Indexes taken; only through {@link #TAKEN}. */
        @SuppressWarnings("unused")
        private long taken;

        /**
         * A run, none of it taken.
         *
         * @param first the first id
         * @param size ids in the run
         * @param startsRefill whether switching into it starts the refill
         */
        Run(long first, long size, boolean startsRefill) {
            this.first = first;
            this.size = size;
            this.startsRefill = startsRefill;
        }

        /**
         * Ids handed out (or being handed out) from this run.
         *
         * @return the indexes taken, at most its size
         */
        long served() {
            return Math.min((long) TAKEN.getVolatile(this), size);
        }
    }

    /** Atomic access to {@link Run#taken}: {@code getAndAdd} is one {@code lock xadd} on x86. */
    private static final VarHandle TAKEN;

    static {
        try {
            TAKEN = MethodHandles.lookup().findVarHandle(Run.class, "taken", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** The client's servers, threads, settings and closed flag. */
    private final LeafidClient.Shared shared;
    /** The range route without its query. */
    private final String route;
    /** The tag, or null for snowflake. */
    private final String tag;
    /** Smallest size a request asks for: the builder's batch size. */
    private final int minBatch;
    /** Largest size a request asks for (the builder's, within the route's limit). */
    private final int maxBatch;
    /** The route's limit per request: bounds a catch-up request. */
    private final int routeLimit;

    /**
     * The run callers take from. Written only under {@link #lock}, only to replace a spent run
     * (or by close); volatile so that a caller sees a new run with its final fields, and never an
     * older run than one a call that returned before it started took from.
     */
    private volatile Run current;

    /** Guards the fields below; never held across a request. */
    private final ReentrantLock lock = new ReentrantLock();
    /** Signalled when a refill ends (successful or not) and when the client closes. */
    private final Condition refillEnded = lock.newCondition();
    /** The batch in use (the current run is cut from it), null before the first. */
    private Ranges using;
    /** Index of the run of {@link #using} the next {@link Run} is cut from. */
    private int usingRun;
    /** The first id of {@link #using} not yet cut into a {@link Run}. */
    private long usingCursor;
    /** Ids of {@link #using} cut into runs so far (the current run's included). */
    private long usingCut;
    /** The offset in {@link #using} where a run starts the refill (10% of it). */
    private long usingPreload;
    /** When {@link #using} became the batch in use ({@link System#nanoTime()}). */
    private long usingSince;
    /** The batch to use after the current one, once fetched. */
    private Ranges next;
    /** The largest id accepted into a batch so far (0 before the first: ids are positive). */
    private long floor;
    /** The size the next request asks for (follows demand). */
    private int size;
    /** A caller found both batches spent since the last size decision. */
    private boolean starved;
    /** True while one refill runs (single flight). */
    private boolean refilling;
    /** Set when the last refill was refused; cleared when a new refill starts. */
    private LeafidException refused;
    /** The last server failure of the refills, for {@link UnavailableException}; a success clears it. */
    private ServerFault lastFault;
    /** Async callers waiting for the refill to end: each retries once run. */
    private List<Runnable> waiters = new ArrayList<>();
    /** Ids of the runs switched away from (all handed out: a run is left once spent), and the
     * ids handed out by pass-through. */
    private long retiredServed;
    /** Pass-through (a strict tag, see above): no local batch, one request per id. For good. */
    private boolean strict;

    /** Batches accepted. Statistics only. */
    private final AtomicLong batches = new AtomicLong();
    /** Ids cut below the floor. Statistics only. */
    private final AtomicLong discarded = new AtomicLong();
    /** Failovers of this supply's fetches. Statistics only. */
    private final AtomicLong failovers = new AtomicLong();

    /**
     * A supply with no batch yet.
     *
     * @param shared what the client's supplies share
     * @param route the range route without its query
     * @param tag the tag, or null for snowflake
     * @param minBatch the builder's batch size
     * @param maxBatch the largest size a request asks for
     * @param routeLimit the route's limit per request
     */
    IdSupply(LeafidClient.Shared shared, String route, String tag, int minBatch, int maxBatch, int routeLimit) {
        this.shared = shared;
        this.route = route;
        this.tag = tag;
        this.minBatch = minBatch;
        this.maxBatch = maxBatch;
        this.routeLimit = routeLimit;
        this.size = minBatch;
        this.current = new Run(1, 0, false);
    }

    /**
     * A supply of exactly {@code ranges} that never contacts a server: for benchmarks of the
     * local path and tests. Once they are spent, {@code nextId} waits {@code waitTimeout} and
     * fails with {@link UnavailableException}.
     *
     * @param ranges the ids
     * @param waitTimeout the wait once they are spent
     * @return the supply
     */
    static IdSupply fixed(Ranges ranges, Duration waitTimeout) {
        IdSupply s = new IdSupply(new LeafidClient.Shared(null, null, waitTimeout, 0, null, null,
                LeafidClient.SYSTEM_CLOCK), null, "fixed",
                1, 1, 1);
        s.lock.lock();
        try {
            s.next = ranges;
            s.floor = ranges.last();
            s.promoteLocked();
            s.current = s.cutRunLocked(s.usingCursor);
        } finally {
            s.lock.unlock();
        }
        return s;
    }

    /**
     * {@link #fixed(Ranges, Duration)} of the ids given.
     *
     * @param ids the ids, strictly increasing, positive
     * @param waitTimeout the wait once they are spent
     * @return the supply
     */
    static IdSupply fixed(long[] ids, Duration waitTimeout) {
        List<long[]> runs = new ArrayList<>();
        for (long id : ids) {
            if (!runs.isEmpty() && runs.get(runs.size() - 1)[1] == id - 1) {
                runs.get(runs.size() - 1)[1] = id;
            } else {
                runs.add(new long[] {id, id});
            }
        }
        long[] f = new long[runs.size()];
        long[] l = new long[runs.size()];
        for (int k = 0; k < f.length; k++) {
            f[k] = runs.get(k)[0];
            l[k] = runs.get(k)[1];
        }
        return fixed(new Ranges(f, l, ids.length), waitTimeout);
    }

    /**
     * The tag of this supply, or {@code null} for the snowflake supply.
     *
     * @return the tag, or {@code null} for the snowflake supply
     */
    public String tag() {
        return tag;
    }

    /**
     * The next id, waiting at most the client's wait timeout when the local batches are spent.
     *
     * @return the id (positive)
     * @throws RejectedException a server refused the request (unknown tag, exhausted tag...)
     * @throws ThrottledException the caller token\'s quota is spent past the wait timeout
     * @throws UnavailableException no ids within the wait timeout: every server failed or is down
     * @throws ClosedException the client is closed, or the thread was interrupted while waiting
     *     (its interrupt flag is set again)
     */
    public long nextId() {
        Run r = current;
        long i = (long) TAKEN.getAndAdd(r, 1L);
        if (i < r.size) {
            return r.first + i;
        }
        return nextIdSlow(System.nanoTime(), shared.waitTimeout.toNanos());
    }

    /**
     * The next id, waiting at most {@code maxWait} when the local batches are spent (the local
     * path never waits).
     *
     * <p><b>Why the local path is enough.</b> It reads the current run (a volatile read), takes
     * an index with one atomic {@code getAndAdd} on the run's counter, and returns
     * {@code first + index} if the index is below the run's size. <em>No id twice:</em> the
     * atomic increment gives each index of a run to exactly one caller, runs of one batch do
     * not overlap and every batch lies above the ones before it. <em>Increasing across
     * callers:</em> let call A return id {@code a} from run R and call B start afterwards. The
     * runs a supply serves are in increasing order of ids and {@code current} only moves
     * forward (under the lock, and only away from a run whose counter passed its end). B reads
     * R or a later run (a volatile read sees the write that A's own switch made, if any). If
     * it is R, its increment comes after A's in the counter's single modification order (A's
     * finished before B's began), so it gets a larger index, or an index past the end, and then
     * the slow path gives B an id of a later run. If it is a later run, every id of it is above
     * {@code a}. A call still holding an index of R when R was left overlaps every call that saw
     * the switch, so the rule does not order them.
     *
     * @param maxWait the longest wait for a batch when both local batches are spent
     * @return the id (positive)
     * @throws RejectedException a server refused the request
     * @throws ThrottledException the caller token\'s quota is spent past the wait timeout
     * @throws UnavailableException no ids within {@code maxWait}
     * @throws ClosedException the client is closed, or the thread was interrupted while waiting
     */
    public long nextId(Duration maxWait) {
        Run r = current;
        long i = (long) TAKEN.getAndAdd(r, 1L);
        if (i < r.size) {
            return r.first + i;
        }
        return nextIdSlow(System.nanoTime(), maxWait.toNanos());
    }

    /**
     * The next id if a local batch holds one, without waiting or failing (a spent batch starts
     * the refill). Empty: call {@link #nextId()}, or try again later.
     *
     * @return the id, or empty when no local batch holds one
     * @throws ClosedException the client is closed
     */
    public OptionalLong tryNextId() {
        Run r = current;
        long i = (long) TAKEN.getAndAdd(r, 1L);
        if (i < r.size) {
            return OptionalLong.of(r.first + i);
        }
        lock.lock();
        try {
            if (shared.closed) {
                throw new ClosedException("client closed");
            }
            long id = takeLocked();
            if (id > 0) {
                return OptionalLong.of(id);
            }
            noteStarvedLocked();
            startRefillLocked();
            return OptionalLong.empty();
        } finally {
            lock.unlock();
        }
    }

    /**
     * The next id as a future: already complete when a local batch holds one; else completed
     * by the refill, or exceptionally with a {@link LeafidException} (an
     * {@link UnavailableException} after the client's wait timeout). Cancelling it stops the
     * wait. Dependent stages may run on the client's threads: give an executor
     * ({@code thenApplyAsync(fn, executor)}) for anything slow.
     *
     * @return a future of the next id
     */
    public CompletableFuture<Long> nextIdAsync() {
        return nextIdAsync(shared.waitTimeout);
    }

    /**
     * {@link #nextIdAsync()} with its own wait bound.
     *
     * @param maxWait the longest wait for a batch when both local batches are spent; then the
     *     future fails with an {@link UnavailableException}
     * @return a future of the next id
     */
    public CompletableFuture<Long> nextIdAsync(Duration maxWait) {
        Run r = current;
        long i = (long) TAKEN.getAndAdd(r, 1L);
        if (i < r.size) {
            return CompletableFuture.completedFuture(r.first + i);
        }
        long started = System.nanoTime();
        long waitNanos = maxWait.toNanos();
        CompletableFuture<Long> result = new CompletableFuture<>();
        attemptAsync(result, started, waitNanos, false);
        if (!result.isDone()) {
            try {
                ScheduledFuture<?> timer = shared.timer.schedule(
                        () -> result.completeExceptionally(unavailable(started, waitNanos)),
                        Math.max(0, started + waitNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
                result.whenComplete((v, e) -> timer.cancel(false));
            } catch (RejectedExecutionException e) {
                result.completeExceptionally(new ClosedException("client closed"));
            }
        }
        return result;
    }

    /**
     * Counters of this supply.
     *
     * @return a snapshot of this supply's counters
     */
    public Stats stats() {
        long served;
        int nextSize;
        lock.lock();
        try {
            served = retiredServed + current.served();
            nextSize = size;
        } finally {
            lock.unlock();
        }
        return new Stats(served, batches.get(), failovers.get(), discarded.get(), nextSize);
    }

    // ---- internals ----

    /**
     * Under the lock: an id of the current run, switching to the next run (of the batch in use,
     * then of the next batch) over a spent one.
     *
     * @return the id, or 0 when there is no id locally
     */
    private long takeLocked() {
        while (true) {
            Run r = current;
            long i = (long) TAKEN.getAndAdd(r, 1L);
            if (i < r.size) {
                return r.first + i;
            }
            // r is spent (its counter is past the end, and counters only grow): every call that
            // took one of its ids did so before this switch, so it can be left.
            if (using == null || usingRun >= using.firsts.length) {
                if (next == null) {
                    return 0;
                }
                promoteLocked();
            }
            Run n = cutRunLocked(usingCursor);
            retiredServed += r.size;
            current = n;
            if (n.startsRefill) {
                startRefillLocked();
            }
        }
    }

    /** Makes the next batch the batch in use (the one in use is spent). */
    private void promoteLocked() {
        using = next;
        next = null;
        usingRun = 0;
        usingCut = 0;
        usingPreload = using.count / 10;
        usingSince = System.nanoTime();
        usingCursor = using.firsts[0];
    }

    /**
     * Cuts the next run of the batch in use, from {@code first} (its cursor) to the end of its
     * range, or to just before the preload offset if that lies inside; advances the cursor.
     *
     * @param first the cursor
     * @return the run
     */
    private Run cutRunLocked(long first) {
        long rangeLast = using.lasts[usingRun];
        long last = rangeLast;
        if (usingCut < usingPreload && usingPreload - usingCut <= rangeLast - first) {
            last = first + (usingPreload - usingCut) - 1;
        }
        Run n = new Run(first, last - first + 1, usingCut == usingPreload);
        usingCut += n.size;
        if (last == rangeLast) {
            usingRun++;
            usingCursor = usingRun < using.firsts.length ? using.firsts[usingRun] : 0;
        } else {
            usingCursor = last + 1; // last < rangeLast <= 2^63-1
        }
        return n;
    }

    /** Records that a caller found both batches spent (doubles the next request's size). */
    private void noteStarvedLocked() {
        if (using != null) {
            starved = true;
        }
    }

    /**
     * The slow path: switches runs under the lock, starts the refill and waits for it.
     *
     * @param started when the call started ({@link System#nanoTime()})
     * @param waitNanos the longest wait
     * @return the id
     */
    private long nextIdSlow(long started, long waitNanos) {
        long deadline = started + waitNanos;
        boolean waited = false;
        long passFloor;
        lock.lock();
        try {
            while (true) {
                if (shared.closed) {
                    throw new ClosedException("client closed");
                }
                long id = takeLocked();
                if (id > 0) {
                    return id;
                }
                if (strict) {
                    // Pass-through: this call's own request, outside the lock.
                    passFloor = floor;
                    break;
                }
                // A refusal counts only from a refill this call waited for, not one from before.
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
                    throw unavailableLocked(started, waitNanos);
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
        return passThrough(started, waitNanos, passFloor);
    }

    /**
     * A strict supply's call: one request for one id, sent now (after the call began), through
     * the usual server order and failover; a refusal reaches the caller; failed rounds are
     * retried with backoff until the wait ends. The id is handed out only when above
     * {@code passFloor}, the floor read before the request was sent (see the class doc).
     *
     * @param started when the call started ({@link System#nanoTime()})
     * @param waitNanos the longest wait
     * @param passFloor the floor when the call decided to pass through
     * @return the id
     */
    private long passThrough(long started, long waitNanos, long passFloor) {
        long deadline = started + waitNanos;
        Servers.Request req = new Servers.Request(route, 1, tag);
        int failures = 0;
        try {
            while (true) {
                if (shared.closed) {
                    throw new ClosedException("client closed");
                }
                Servers.FetchResult r = shared.servers.fetch(req);
                failovers.addAndGet(r.failovers);
                long wait = 0;
                if (r.ranges != null) {
                    batches.incrementAndGet();
                    long id = r.ranges.firsts[0];
                    lock.lock();
                    try {
                        if (id > passFloor) {
                            // One call, one id: any further id of the answer (never more than
                            // asked) is dropped.
                            if (r.ranges.count > 1) {
                                discarded.addAndGet(r.ranges.count - 1);
                            }
                            floor = Math.max(floor, id);
                            retiredServed++;
                            lastFault = null;
                            return id;
                        }
                        discarded.addAndGet(r.ranges.count);
                        lastFault = new ServerFault(r.server, ServerFault.Kind.BEHIND, "its id " + id
                                + " lies at or below an id handed out before, " + passFloor);
                    } finally {
                        lock.unlock();
                    }
                } else if (r.rejected != null) {
                    throw r.rejected;
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
                    throw unavailable(started, waitNanos);
                }
                if (wait > 0) {
                    TimeUnit.NANOSECONDS.sleep(wait);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ClosedException("interrupted while waiting for ids");
        }
    }

    /**
     * Under the lock: turns the supply to pass-through for good after {@code ranges}, an answer
     * marked strict. Its ids and every id held locally are dropped (counted as discarded: never
     * handed out, never reused by a server); an empty run is put in place, so every later call
     * takes the slow path, which sees {@link #strict}; the floor rises to the answer's last id.
     *
     * @param ranges the answer marked strict
     */
    private void goStrictLocked(Ranges ranges) {
        Run r = current;
        long held = r.size - r.served();
        if (using != null) {
            held += using.count - usingCut;
        }
        if (next != null) {
            held += next.count;
        }
        discarded.addAndGet(ranges.count + held);
        retiredServed += r.served();
        current = new Run(1, 0, false);
        using = null;
        next = null;
        floor = Math.max(floor, ranges.last());
        strict = true;
    }

    /**
     * One attempt of {@link #nextIdAsync(Duration)}: an id, a failure, or a retry queued for the end
     * of the refill.
     *
     * @param result the caller's future
     * @param started when the call started
     * @param waitNanos the longest wait
     * @param waited whether a refill ended since the call started
     */
    private void attemptAsync(CompletableFuture<Long> result, long started, long waitNanos,
            boolean waited) {
        if (result.isDone()) {
            return;
        }
        lock.lock();
        try {
            if (shared.closed) {
                result.completeExceptionally(new ClosedException("client closed"));
                return;
            }
            long id = takeLocked();
            if (id > 0) {
                // If the future was cancelled or timed out meanwhile, this id is dropped (a gap).
                result.complete(id);
                return;
            }
            if (strict) {
                // Pass-through, on a client thread: this call's own request.
                long passFloor = floor;
                try {
                    shared.workers.execute(() -> {
                        try {
                            result.complete(passThrough(started, waitNanos, passFloor));
                        } catch (LeafidException e) {
                            result.completeExceptionally(e);
                        }
                    });
                } catch (RejectedExecutionException e) {
                    result.completeExceptionally(new ClosedException("client closed"));
                }
                return;
            }
            if (waited && refused != null) {
                result.completeExceptionally(Servers.copyOf(refused));
                return;
            }
            if (!waited) {
                noteStarvedLocked();
            }
            startRefillLocked();
            if (shared.servers == null || System.nanoTime() - (started + waitNanos) >= 0) {
                result.completeExceptionally(unavailableLocked(started, waitNanos));
                return;
            }
            waiters.add(() -> attemptAsync(result, started, waitNanos, true));
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@link #unavailableLocked} taking the lock.
     *
     * @param started when the call started
     * @param waitNanos the wait it allowed
     * @return the error
     */
    private UnavailableException unavailable(long started, long waitNanos) {
        lock.lock();
        try {
            return unavailableLocked(started, waitNanos);
        } finally {
            lock.unlock();
        }
    }

    /**
     * The error of a call that got no id in time.
     *
     * @param started when the call started
     * @param waitNanos the wait it allowed
     * @return the error
     */
    private UnavailableException unavailableLocked(long started, long waitNanos) {
        return new UnavailableException(Duration.ofNanos(System.nanoTime() - started), Duration.ofNanos(waitNanos),
                lastFault, refilling);
    }

    /**
     * Starts the refill unless one runs or the next batch is already there; decides the size of
     * its request from the batch in use (demand) first.
     */
    private void startRefillLocked() {
        // Never for a strict supply: no id is fetched ahead of its call.
        if (strict || refilling || next != null || shared.closed || shared.servers == null) {
            return;
        }
        long batchIds = 0;
        long used = 0;
        if (using != null) {
            batchIds = using.count;
            // The current run is the last cut from the batch in use.
            used = usingCut - current.size + current.served();
        }
        size = BatchSize.next(size, batchIds, used, System.nanoTime() - usingSince, starved, minBatch, maxBatch,
                shared.targetLifetimeNanos);
        starved = false;
        Servers.Request req = new Servers.Request(route, size, tag);
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
     * for at most the wait timeout (then the next caller that needs a batch starts another).
     *
     * @param sized the request, of the size decided when it started
     */
    private void refill(Servers.Request sized) {
        long deadline = System.nanoTime() + shared.waitTimeout.toNanos();
        int failures = 0;
        Servers.Request req = sized;
        try {
            while (!shared.closed) {
                Servers.FetchResult r = shared.servers.fetch(req);
                failovers.addAndGet(r.failovers);
                long wait;
                if (r.ranges != null && r.ranges.strict) {
                    lock.lock();
                    try {
                        goStrictLocked(r.ranges);
                    } finally {
                        lock.unlock();
                    }
                    return;
                }
                if (r.ranges != null) {
                    long behind = accept(r.ranges, r.server);
                    if (behind == 0) {
                        return;
                    }
                    // Catch-up: nothing above the floor, so that server is behind the one used
                    // before (a lower segment: a lagging or restored database; snowflake ids of
                    // older ticks). Mark it down so a server that is up is asked first, and ask
                    // again at once, without a pause, for enough ids to pass the floor: what
                    // lies between this answer's last id and the floor, plus the current size,
                    // at most the route's limit. A segment server's next ids follow its last
                    // ones, so a gap within one request is passed in one step; a larger one
                    // takes one request per limit. The size itself is not changed. The deadline
                    // below still bounds the loop.
                    shared.servers.markBehind(r.serverIndex);
                    req = sized.withCount(catchUpCount(floor(), behind, sized.count, routeLimit));
                    wait = 0;
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

    /**
     * The largest id accepted so far.
     *
     * @return the floor (0 before the first batch)
     */
    private long floor() {
        lock.lock();
        try {
            return floor;
        } finally {
            lock.unlock();
        }
    }

    /**
     * The ids to ask for after an answer whose last id, {@code last}, lies at or below the
     * floor: {@code floor - last + batch} (the ids from {@code last} to {@code floor}, plus a
     * batch above it), within {@code batch..=limit}.
     *
     * @param floor the largest id accepted
     * @param last the answer's last id, at or below the floor
     * @param batch the current batch size
     * @param limit the route's limit per request
     * @return the ids to ask for
     */
    static int catchUpCount(long floor, long last, int batch, int limit) {
        long gap = floor - last; // >= 0: last is at or below the floor (both positive)
        long want = gap > limit ? limit : gap + batch;
        return (int) Math.max(Math.min(batch, limit), Math.min(want, limit));
    }

    /**
     * Cuts {@code ranges} to the ids above the floor; if some are left they become
     * {@code next} and 0 is returned. Else (the answer lay wholly at or below the floor: that
     * server is behind) its last id is returned, and it becomes the last fault, naming the
     * server (named by {@link UnavailableException} if the catch-up does not finish in time).
     *
     * @param ranges a valid answer
     * @param server the base URL of the server that sent it
     * @return 0 if accepted, else the answer's last id
     */
    private long accept(Ranges ranges, String server) {
        lock.lock();
        try {
            Ranges kept = ranges.above(floor);
            long cut = ranges.count - (kept == null ? 0 : kept.count);
            if (cut > 0) {
                discarded.addAndGet(cut);
            }
            if (kept == null) {
                lastFault = new ServerFault(server, ServerFault.Kind.BEHIND, ranges.count + " ids up to "
                        + ranges.last() + ", all at or below the last id accepted, " + floor + " (catching up)");
                return ranges.last();
            }
            floor = kept.last();
            next = kept;
            lastFault = null;
            batches.incrementAndGet();
            return 0;
        } finally {
            lock.unlock();
        }
    }

    /** Marks the refill over and wakes everyone waiting for it. */
    private void endRefill() {
        List<Runnable> run;
        lock.lock();
        try {
            refilling = false;
            refillEnded.signalAll();
            run = waiters;
            waiters = new ArrayList<>();
        } finally {
            lock.unlock();
        }
        for (Runnable w : run) {
            w.run();
        }
    }

    /**
     * Wakes every waiting caller, and replaces the current run by an empty one, so that every
     * later call takes the slow path and sees the client closed.
     */
    void close() {
        List<Runnable> run;
        lock.lock();
        try {
            Run r = current;
            retiredServed += r.served();
            current = new Run(1, 0, false);
            refillEnded.signalAll();
            run = waiters;
            waiters = new ArrayList<>();
        } finally {
            lock.unlock();
        }
        for (Runnable w : run) {
            w.run();
        }
    }
}
