package io.leafid.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
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
 * <p>Double-buffered like the server's segment buffer: the supply holds the <em>current</em>
 * batch (the ids of one 200 answer) and at most one <em>next</em> batch. {@link #nextId()} takes
 * an index with one {@code getAndIncrement} on the current batch: that is the whole fast path.
 * The caller whose index is the batch's preload mark (10% of it) starts the refill, which
 * fetches the next batch on a client thread (single flight); when the current batch runs out,
 * the first caller to find it spent promotes the next one, and callers that find no next batch
 * wait for the refill, at most the wait timeout.
 *
 * <h2>Guarantees</h2>
 * <ul>
 *   <li><b>No id twice.</b> An index is taken by exactly one caller, and each accepted batch
 *       holds only ids above every id of the batches accepted before it (the <em>floor</em>).
 *   <li><b>Only received ids.</b> A batch is built only from the ids of a 200 body that passed
 *       validation; nothing is computed.
 *   <li><b>Increasing.</b> If one {@code nextId} call returns before another starts, the second
 *       id is larger, whichever threads make the calls. A batch is promoted only once the
 *       current one is spent, and after a failover the new server's ids at or below the floor
 *       are cut (counted in {@link Stats#discardedIds()}, never handed out); after an answer
 *       cut to nothing the next request follows at once and asks for enough ids to pass the
 *       last one accepted (at most 100000 per request: the catch-up).
 * </ul>
 */
public final class IdSupply {
    /** Ids of one answer, handed out in order by index. */
    private static final class Batch {
        /** Strictly increasing, all above the ids of every earlier batch of the supply. */
        final long[] ids;
        /**
         * Indexes taken so far; the caller that takes {@code i < ids.length} owns {@code ids[i]}.
         * Runs past the length once spent (each late caller adds one; a long cannot wrap).
         */
        final AtomicLong taken = new AtomicLong();
        /** The index whose taker starts the refill: 10% of the batch, as the server preloads. */
        final long preloadAt;

        Batch(long[] ids) {
            this.ids = ids;
            this.preloadAt = ids.length / 10;
        }

        boolean isSpent() {
            return taken.get() >= ids.length;
        }

        /** Ids handed out from this batch. */
        long served() {
            return Math.min(taken.get(), ids.length);
        }
    }

    private static final Batch EMPTY = new Batch(new long[0]);

    /** The client's servers, threads, settings and closed flag. */
    private final LeafidClient.Shared shared;
    /** The batch request (segment or snowflake route). */
    private final Servers.Request request;
    /** The tag, or null for snowflake. */
    private final String tag;

    /**
     * The batch being served. Written only under {@link #lock}, and only to replace a spent
     * batch (promotion); volatile so the fast path sees a promoted batch and its ids.
     */
    private volatile Batch current = EMPTY;

    /** Guards the fields below; never held across a request. */
    private final ReentrantLock lock = new ReentrantLock();
    /** Signalled when a refill ends (successful or not) and when the client closes. */
    private final Condition refillEnded = lock.newCondition();
    /** The batch to serve after the current one, once fetched. */
    private Batch next;
    /** The largest id accepted into a batch so far (0 before the first: ids are positive). */
    private long floor;
    /** True while one refill runs (single flight). */
    private boolean refilling;
    /** Set when the last refill was refused; cleared when a new refill starts. */
    private RejectedException refused;
    /** The last server failure of the refills, for {@link UnavailableException}; a success clears it. */
    private ServerFault lastFault;
    /** Async callers waiting for the refill to end: each retries once run. */
    private List<Runnable> waiters = new ArrayList<>();
    /** Ids of the batches promoted away (all handed out: a batch is promoted once spent). */
    private long retiredServed;

    /** Batches accepted. Statistics only. */
    private final AtomicLong batches = new AtomicLong();
    /** Ids cut below the floor. Statistics only. */
    private final AtomicLong discarded = new AtomicLong();
    /** Failovers of this supply's fetches. Statistics only. */
    private final AtomicLong failovers = new AtomicLong();

    IdSupply(LeafidClient.Shared shared, Servers.Request request, String tag) {
        this.shared = shared;
        this.request = request;
        this.tag = tag;
    }

    /**
     * A supply of exactly {@code ids} (strictly increasing, positive) that never contacts a
     * server: for benchmarks of the local path and tests. Once they are spent, {@code nextId}
     * waits {@code waitTimeout} and fails with {@link UnavailableException}.
     */
    static IdSupply fixed(long[] ids, Duration waitTimeout) {
        IdSupply s = new IdSupply(new LeafidClient.Shared(null, null, waitTimeout, null, null), null, "fixed");
        s.current = new Batch(ids);
        s.floor = ids.length == 0 ? 0 : ids[ids.length - 1];
        return s;
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
     * @throws UnavailableException no ids within the wait timeout: every server failed or is down
     * @throws ClosedException the client is closed, or the thread was interrupted while waiting
     *     (its interrupt flag is set again)
     */
    public long nextId() {
        return nextId(shared.waitTimeout);
    }

    /**
     * The next id, waiting at most {@code maxWait} when the local batches are spent (the fast
     * path never waits).
     *
     * @param maxWait the longest wait for a batch when both local batches are spent
     * @return the id (positive)
     * @throws RejectedException a server refused the request
     * @throws UnavailableException no ids within {@code maxWait}
     * @throws ClosedException the client is closed, or the thread was interrupted while waiting
     */
    public long nextId(Duration maxWait) {
        long id = fastPath();
        if (id > 0) {
            return id;
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
        long id = fastPath();
        if (id > 0) {
            return OptionalLong.of(id);
        }
        if (shared.closed) {
            return OptionalLong.empty();
        }
        lock.lock();
        try {
            id = takeLocked();
            if (id > 0) {
                return OptionalLong.of(id);
            }
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
        long id = fastPath();
        if (id > 0) {
            return CompletableFuture.completedFuture(id);
        }
        long started = System.nanoTime();
        long waitNanos = maxWait.toNanos();
        CompletableFuture<Long> result = new CompletableFuture<>();
        attemptAsync(result, started, waitNanos, false);
        if (!result.isDone()) {
            try {
                ScheduledFuture<?> timer = shared.timer.schedule(
                        () -> result.completeExceptionally(unavailable(started)),
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
        lock.lock();
        try {
            served = retiredServed + current.served();
        } finally {
            lock.unlock();
        }
        return new Stats(served, batches.get(), failovers.get(), discarded.get());
    }

    // ---- internals ----

    /** An id of the current batch, or 0 when it is spent (ids are positive). */
    private long fastPath() {
        if (shared.closed) {
            throw new ClosedException("client closed");
        }
        Batch b = current;
        long i = b.taken.getAndIncrement();
        if (i < b.ids.length) {
            if (i == b.preloadAt) {
                startRefill();
            }
            return b.ids[(int) i];
        }
        return 0;
    }

    /**
     * Under the lock: an id of the current batch, promoting the next one over a spent current;
     * 0 when there is no id locally.
     */
    private long takeLocked() {
        while (true) {
            Batch b = current;
            long i = b.taken.getAndIncrement();
            if (i < b.ids.length) {
                if (i == b.preloadAt) {
                    startRefillLocked();
                }
                return b.ids[(int) i];
            }
            if (next == null) {
                return 0;
            }
            // b is spent (its counter is past the end, and counters only grow): every call that
            // took one of its ids did so before this promotion.
            retiredServed += b.ids.length;
            current = next;
            next = null;
        }
    }

    private long nextIdSlow(long started, long waitNanos) {
        long deadline = started + waitNanos;
        boolean waited = false;
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
                // A refusal counts only from a refill this call waited for, not one from before.
                if (waited && refused != null) {
                    throw refused.copy();
                }
                startRefillLocked();
                waited = true;
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw unavailableLocked(started);
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
            if (waited && refused != null) {
                result.completeExceptionally(refused.copy());
                return;
            }
            startRefillLocked();
            if (shared.servers == null || System.nanoTime() - (started + waitNanos) >= 0) {
                result.completeExceptionally(unavailableLocked(started));
                return;
            }
            waiters.add(() -> attemptAsync(result, started, waitNanos, true));
        } finally {
            lock.unlock();
        }
    }

    private UnavailableException unavailable(long started) {
        lock.lock();
        try {
            return unavailableLocked(started);
        } finally {
            lock.unlock();
        }
    }

    private UnavailableException unavailableLocked(long started) {
        return new UnavailableException(Duration.ofNanos(System.nanoTime() - started), lastFault);
    }

    /** Starts the refill unless one runs or the next batch is already there. */
    private void startRefill() {
        lock.lock();
        try {
            startRefillLocked();
        } finally {
            lock.unlock();
        }
    }

    private void startRefillLocked() {
        if (refilling || next != null || shared.closed || shared.servers == null) {
            return;
        }
        refilling = true;
        refused = null;
        try {
            shared.workers.execute(this::refill);
        } catch (RejectedExecutionException e) {
            refilling = false; // closing
        }
    }

    /**
     * Fetches one batch above the floor into {@code next}, retrying failed rounds with backoff
     * for at most the wait timeout (then the next caller that needs a batch starts another).
     */
    private void refill() {
        long deadline = System.nanoTime() + shared.waitTimeout.toNanos();
        int failures = 0;
        // The batch size, or more while catching up (below).
        Servers.Request req = request;
        try {
            while (!shared.closed) {
                Servers.FetchResult r = shared.servers.fetch(req, floor());
                failovers.addAndGet(r.failovers);
                long wait;
                if (r.ids != null || r.behind != null) {
                    if (r.ids != null && accept(r.ids, r.server)) {
                        return;
                    }
                    long last = r.ids != null ? r.ids[r.ids.length - 1] : discardBehind(r.behind, r.server);
                    // Catch-up: nothing above the floor, so that server is behind the one used
                    // before (a lower segment: a lagging or restored database; snowflake ids of
                    // older ticks). Mark it down so a server that is up is asked first, and ask
                    // again at once, without a pause, for enough ids to pass the floor: what
                    // lies between this answer's last id and the floor, plus a batch, at most
                    // MAX_BATCH (the server's limit). A segment server's next ids follow its
                    // last ones, so a gap within one request is passed in one step; a larger one
                    // takes one MAX_BATCH request per 100000 ids, each answer discarded (counted
                    // in discardedIds) after reading only its tail (Servers.behindTail). The
                    // deadline below still bounds the loop.
                    shared.servers.markBehind(r.serverIndex);
                    req = request.withCount(catchUpCount(last, request.count));
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

    /** The largest id accepted so far (0 before the first batch). */
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
     * floor: enough to pass the floor by a batch, within {@code batch..=MAX_BATCH}.
     */
    private int catchUpCount(long last, int batch) {
        return catchUpCount(floor(), last, batch);
    }

    /**
     * Counts an answer that lay wholly at or below the floor (read from its tail) as discarded,
     * and names it as the last fault; returns its last id.
     */
    private long discardBehind(Servers.Behind b, String server) {
        lock.lock();
        try {
            discarded.addAndGet(b.ids);
            lastFault = new ServerFault(server, ServerFault.Kind.BEHIND, b.ids
                    + " ids up to " + b.last + ", all at or below the last id accepted, " + floor);
            return b.last;
        } finally {
            lock.unlock();
        }
    }

    /**
     * {@code floor - last + batch} (the ids from {@code last} to {@code floor}, plus a batch
     * above it), within {@code batch..=}{@link LeafidClient#MAX_BATCH}.
     */
    static int catchUpCount(long floor, long last, int batch) {
        long gap = floor - last; // >= 0: last is at or below the floor (both positive)
        long want = gap > LeafidClient.MAX_BATCH ? LeafidClient.MAX_BATCH : gap + batch;
        return (int) Math.max(batch, Math.min(want, LeafidClient.MAX_BATCH));
    }

    /**
     * Cuts {@code ids} to those above the floor; true if some were left and became {@code next}.
     * A batch cut to nothing becomes the last fault (named by {@link UnavailableException}).
     */
    private boolean accept(long[] ids, String server) {
        lock.lock();
        try {
            // Ids are strictly increasing: the ones at or below the floor are a prefix.
            int cut = 0;
            while (cut < ids.length && ids[cut] <= floor) {
                cut++;
            }
            if (cut > 0) {
                discarded.addAndGet(cut);
            }
            if (cut == ids.length) {
                lastFault = new ServerFault(server, ServerFault.Kind.BEHIND, ids.length
                        + " ids up to " + ids[ids.length - 1] + ", all at or below the last id accepted, " + floor);
                return false;
            }
            long[] kept = cut == 0 ? ids : Arrays.copyOfRange(ids, cut, ids.length);
            floor = kept[kept.length - 1];
            next = new Batch(kept);
            lastFault = null;
            batches.incrementAndGet();
            return true;
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

    /** Wakes every waiting caller: they see the client closed. */
    void close() {
        List<Runnable> run;
        lock.lock();
        try {
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
