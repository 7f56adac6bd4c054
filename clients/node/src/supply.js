// `IdSupply`: one local id stream (a segment tag, or snowflake), double-buffered like the
// server's segment buffer.
//
// A supply holds the *current* batch (ids of one 200 answer) and at most one *next* batch.
// `tryNextId` takes the current batch's next index: that is the whole fast path, synchronous.
// The call that takes the batch's preload mark (10% of it, as the server preloads) starts the
// single-flight refill, which fetches the next batch in the background; when the current batch
// runs out, the first call to find it spent promotes the next one (still synchronous), and
// `nextId` calls that find no next batch wait for the refill (bounded by the wait timeout).
//
// Invariants (JavaScript runs one call at a time between awaits, so each holds without locks):
// - No id twice: an index is taken once, and the batches of a supply are disjoint, because each
//   accepted batch holds only ids above every id accepted before (the floor, below).
// - Only received ids: a batch is built only from the ids of a 200 body that passed
//   `validateBatch`; nothing is computed or extrapolated.
// - Increasing per supply, across all callers: ids within a batch increase with the index, a
//   batch is promoted only once the current one is spent, and every id of a later batch is
//   above every id of an earlier one.
//
// The floor, and failover: the servers of one database lease disjoint id ranges, but ranges
// leased by different servers are not ordered relative to what this client already received:
// after a failover the new server may still serve a segment below the old one's (or, for
// snowflake, hold ids of older ticks). Such ids are unique, yet handing them out would break
// "increasing". So every fetched batch is cut to the ids above the floor (the largest id
// accepted so far); the ids cut are counted in `discardedIds` and never handed out (a gap, as a
// server restart makes). A batch cut to nothing starts the catch-up (`catchUpCount`): the next
// request follows at once and asks for enough ids to pass the floor, up to 100000 per request.

import { setTimeout as sleep } from 'node:timers/promises';

import { ClosedError, ServerFault, UnavailableError } from './errors.js';
import { backoff, MAX_BATCH } from './servers.js';

/** Ids of one answer, handed out in order by index. */
class Batch {
  /**
   * @param {bigint[]} ids strictly increasing, all above the ids of every earlier batch
   * @param {string[] | null} strs the same ids as decimal strings (string mode), else null
   */
  constructor(ids, strs) {
    this.ids = ids;
    this.strs = strs;
    /** Indexes taken so far: the caller that takes `i` owns `ids[i]`. */
    this.taken = 0;
    /** The index whose taker starts the refill: 10% of the batch, as the server preloads. */
    this.preloadAt = Math.floor(ids.length / 10);
  }
}

const EMPTY = new Batch([], []);

/** @returns {number} milliseconds on a monotonic clock */
const now = () => performance.now();

/**
 * One id stream: the ids of one tag (or the client's snowflake ids), increasing, never repeated.
 * Made by `Client.segment(tag)` / `Client.snowflake()`; every call for the same tag returns the
 * same supply.
 */
export class IdSupply {
  /**
   * @param {object} o
   * @param {import('./servers.js').Servers | null} o.servers where batches come from (null: only `o.ids`)
   * @param {{path: string, count: number, tag: string | null}} o.request the route (no query),
   *   the batch size, the tag
   * @param {{backoffMinMs: number, backoffMaxMs: number}} o.timing backoff between failed rounds
   * @param {number} o.waitTimeoutMs how long `nextId` waits for a batch
   * @param {boolean} o.asString hand out decimal strings instead of bigints
   * @param {AbortSignal} o.stop aborted when the client closes
   * @param {(p: Promise<void>) => void} [o.track] told about each refill, so close() can await it
   * @param {bigint[]} [o.ids] a first batch (tests and benches)
   */
  constructor(o) {
    /** The tag, or null for snowflake. */
    this.tag = o.request.tag;
    this._servers = o.servers;
    this._request = o.request;
    this._timing = o.timing;
    this._waitTimeoutMs = o.waitTimeoutMs;
    this._asString = o.asString;
    this._stop = o.stop;
    this._track = o.track ?? (() => {});
    /** The batch being served; replaced only by a promotion, once spent. */
    this._current = EMPTY;
    if (o.ids && o.ids.length > 0) {
      this._current = new Batch(o.ids, o.asString ? o.ids.map(String) : null);
    }
    /** The batch to serve after the current one, once fetched. @type {Batch | null} */
    this._next = null;
    /** The largest id accepted into a batch so far (0 before the first: ids are positive). */
    this._floor = this._current.ids.length ? this._current.ids[this._current.ids.length - 1] : 0n;
    /** True while one refill runs (single flight). */
    this._refilling = false;
    /** Set when the last refill was refused (4xx); waiting callers get it. Cleared by a new refill. @type {Error | null} */
    this._refused = null;
    /** The last server failure of the refills, for `UnavailableError`; cleared by a success. */
    this._lastFault = null;
    /** Callers waiting for a refill to end. @type {Set<() => void>} */
    this._waiters = new Set();
    /** Counters (statistics only). */
    this._stats = { idsServed: 0, batches: 0, idsReceived: 0, discardedIds: 0, failedRounds: 0 };
  }

  /**
   * The next id if a local batch has one (the current one, else the next one, which it then
   * promotes), else `undefined` (then call `nextId`). Never waits, never throws; the refill
   * still starts at the preload mark.
   * @returns {bigint | string | undefined}
   */
  tryNextId() {
    let b = this._current;
    if (b.taken >= b.ids.length) {
      // Promote only over a spent batch: every id of the next one is above all of this one's.
      if (this._next === null) return undefined;
      b = this._current = this._next;
      this._next = null;
    }
    const i = b.taken;
    b.taken = i + 1;
    if (i === b.preloadAt) this._startRefill();
    this._stats.idsServed++;
    return b.strs !== null && this._asString ? b.strs[i] : b.ids[i];
  }

  /**
   * The next id: from the local batch when it has one (no I/O), else once the refill brings a
   * batch, waiting at most the wait timeout.
   * @param {{signal?: AbortSignal, timeoutMs?: number}} [options] `signal` aborts the wait
   *   (the promise rejects with its reason); `timeoutMs` overrides the client's wait timeout
   * @returns {Promise<bigint | string>}
   */
  nextId(options) {
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this._stop.aborted) return Promise.reject(new ClosedError());
    const id = this.tryNextId();
    if (id !== undefined) return Promise.resolve(id);
    return this._nextIdSlow(signal, options?.timeoutMs ?? this._waitTimeoutMs);
  }

  /**
   * @param {AbortSignal | undefined} signal
   * @param {number} waitMs
   */
  async _nextIdSlow(signal, waitMs) {
    const started = now();
    const deadline = started + waitMs;
    // A refusal counts only from a refill this call waited for, not one from before.
    let waited = false;
    for (;;) {
      if (this._stop.aborted) throw new ClosedError();
      const id = this.tryNextId(); // promotes the next batch if there is one
      if (id !== undefined) return id;
      if (waited && this._refused !== null) throw this._refused;
      this._startRefill();
      waited = true;
      const left = deadline - now();
      if (left <= 0 || !(await this._waitForRefill(left, signal))) {
        throw new UnavailableError(now() - started, this._lastFault);
      }
    }
  }

  /**
   * Resolves true when a refill ends (or the client closes), false after `ms`; rejects with the
   * signal's reason on abort. Leaves no timer or listener behind.
   * @param {number} ms
   * @param {AbortSignal | undefined} signal
   * @returns {Promise<boolean>}
   */
  _waitForRefill(ms, signal) {
    return new Promise((resolve, reject) => {
      const cleanup = () => {
        clearTimeout(timer);
        this._waiters.delete(wake);
        signal?.removeEventListener('abort', onAbort);
      };
      const wake = () => {
        cleanup();
        resolve(true);
      };
      const onAbort = () => {
        cleanup();
        reject(signal?.reason);
      };
      const timer = setTimeout(() => {
        cleanup();
        resolve(false);
      }, ms);
      this._waiters.add(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Wakes every waiting caller. */
  _wakeWaiters() {
    const ws = [...this._waiters];
    this._waiters.clear();
    for (const w of ws) w();
  }

  /** Starts the refill unless one runs, the next batch is there, or there is no server. */
  _startRefill() {
    if (this._refilling || this._next !== null || this._servers === null || this._stop.aborted) return;
    this._refilling = true;
    this._refused = null;
    this._track(this._refill());
  }

  /**
   * Fetches one batch above the floor into `next`, retrying failed rounds with backoff for at
   * most the wait timeout (then the next caller that needs a batch starts another). Never
   * rejects.
   */
  async _refill() {
    const servers = /** @type {import('./servers.js').Servers} */ (this._servers);
    const deadline = now() + this._waitTimeoutMs;
    let failures = 0;
    // Ids asked for: the batch size, or more while catching up (`catchUpCount`).
    let count = this._request.count;
    try {
      while (!this._stop.aborted) {
        const got = await servers.fetch(this._request, count, this._floor);
        if (this._stop.aborted) break;
        let wait;
        if ('behind' in got) {
          // Its tail said it lies wholly at or below the floor: discarded unparsed.
          this._stats.idsReceived += got.behind.ids;
          this._stats.discardedIds += got.behind.ids;
          this._lastFault = new ServerFault(
            got.server,
            'behind',
            `${got.behind.ids} ids up to ${got.behind.last}, all at or below the last id accepted (${this._floor})`,
          );
          count = catchUpCount(this._floor, got.behind.last, this._request.count);
          wait = 0;
        } else if ('ids' in got) {
          const n = got.ids.length;
          this._stats.idsReceived += n;
          // Ids are strictly increasing: the ones at or below the floor are a prefix.
          const cut = firstAbove(got.ids, this._floor);
          this._stats.discardedIds += cut;
          if (cut < n) {
            const ids = cut > 0 ? got.ids.slice(cut) : got.ids;
            const strs = this._asString ? (cut > 0 ? got.strs.slice(cut) : got.strs) : null;
            this._floor = ids[ids.length - 1];
            this._next = new Batch(ids, strs);
            this._lastFault = null;
            this._stats.batches++;
            break;
          }
          // Nothing above the floor: that server is behind the one used before (the
          // catch-up, `catchUpCount`).
          this._lastFault = new ServerFault(
            got.server,
            'behind',
            `${n} ids, all at or below the last id accepted (${this._floor})`,
          );
          count = catchUpCount(this._floor, got.ids[n - 1], this._request.count);
          wait = 0;
        } else if ('rejected' in got) {
          this._refused = got.rejected;
          break;
        } else {
          this._stats.failedRounds++;
          this._lastFault = got.fault;
          failures++;
          wait = backoff(this._timing, failures);
        }
        if (now() + wait >= deadline) break;
        if (wait > 0) {
          try {
            await sleep(wait, undefined, { signal: this._stop });
          } catch {
            break; // closed
          }
        }
      }
    } catch (e) {
      // A bug, not a server's failure: keep it for the waiting callers' error.
      this._lastFault = new ServerFault('(client)', 'bad_response', `internal error: ${e}`);
    } finally {
      this._refilling = false;
      this._wakeWaiters();
    }
  }

  /** Drops the local batches and wakes every waiter (the client is closing). */
  _close() {
    this._current = EMPTY;
    this._next = null;
    this._wakeWaiters();
  }

  /**
   * The supply's counters: ids handed out, batches accepted, ids received (discarded ones
   * included), ids discarded below the floor, fetch rounds in which no server delivered.
   */
  stats() {
    return { ...this._stats };
  }
}

/**
 * The catch-up rule: after an answer lying wholly at or below the floor (its server is behind
 * the one used before: a lower segment of a lagging or restored database, or snowflake ids of
 * older ticks), the next request follows at once, without a pause, and asks for enough ids to
 * pass the floor: those from the answer's last id up to the floor, plus a batch, at most
 * MAX_BATCH (the server's limit). A segment server's next ids follow its last ones, so a gap
 * within one request is passed in one step; a larger one takes one MAX_BATCH request per 100000
 * ids, each discarded (counted in `discardedIds`) after reading only its tail (`behindTail`).
 * @param {bigint} floor the largest id accepted
 * @param {bigint} last the last id of the answer (at or below the floor)
 * @param {number} batch the batch size
 * @returns {number} ids to ask for, within batch..=MAX_BATCH
 */
export function catchUpCount(floor, last, batch) {
  const want = floor - last + BigInt(batch);
  return want >= BigInt(MAX_BATCH) ? MAX_BATCH : Math.max(batch, Number(want));
}

/**
 * Index of the first id above `floor` in a strictly increasing array (its length if none).
 * @param {bigint[]} ids
 * @param {bigint} floor
 */
function firstAbove(ids, floor) {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid] <= floor) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
