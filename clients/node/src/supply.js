// `IdSupply`: one local id stream (a segment tag, or snowflake), double-buffered like the
// server's segment buffer, holding *ranges*.
//
// A batch is the answer of one range request: a short list of runs of consecutive ids. A supply
// holds the *current* batch and at most one *next* batch. The taker of the batch's preload mark
// (its id at 10% of the batch, as the server preloads) starts the single-flight refill, which
// fetches the next batch in the background; when the current batch runs out, the first call to
// find it spent promotes the next one, and `nextId` calls that find no next batch wait for the
// refill (bounded by the wait timeout). The size of each request follows demand (`sizing.js`).
//
// The local path (PROTOCOL.md "The local path"). The run in use is seen through a *window*:
// `_base` (a bigint, an id of the run) and `_off`, the offset of the next id from it, a plain
// `number`; `_endOff` is the last offset that may be taken without a decision: the run's last id,
// or the id just before the preload mark while that mark lies ahead in this run. `tryNextId` is
//
//     const off = this._off; if (off <= this._endOff) { this._off = off + 1; return this._base + BigInt(off); }
//
// one increment of a small integer and one compare, no lock (none exists: JavaScript runs one
// call at a time between awaits), no promise. The counter is a `number`, not a bigint: a bigint
// field would be a new heap object stored into the (old) supply on every id, a write barrier
// that doubled the cost; a small integer field costs nothing, and the one bigint made per id is
// the one the caller receives (as a plain `n += 1n` counter makes one). Offsets stay exact: a
// window spans at most 2^52 ids (a longer run is walked window after window). Everything else
// (starting the refill at the preload mark, entering the batch's next run, promoting the next
// batch, counting the ids served) happens in `_switch`, only when the compare fails: once per
// run, once per batch, and once at the preload mark.
//
// Invariants, and why they hold without locks or atomics: the event loop runs one function at a
// time; `tryNextId` and `_switch` contain no await, so the read of `_off` and its increment are
// one indivisible step for every other caller (task, callback, timer) of the process.
// - No id twice: an id is handed out only by the step that moves `_off` past it; a window only
//   moves forward within its run (rebased at the id it stopped at); runs of a batch are
//   increasing and disjoint (`validateRanges`), and every batch holds only ids above every id
//   accepted before (the floor, below), so no run is entered twice and no two runs overlap.
// - Strictly increasing across all callers: ids are taken in increasing order (within a run by
//   the increment, then run after run, then batch after batch, a batch promoted only once the
//   current one is spent); each call takes its id at one moment between its start and its
//   return, so a call that starts after another returned takes its id later, hence a larger one.
//   A waiting `nextId` takes its id only when it wakes, at that moment too.
// - Only received ids: runs come only from a 200 body that passed `validateRanges`, trimmed to
//   the ids above the floor; nothing is extrapolated (`_endOff` never lies past the run's last
//   id, and the compare comes before the step is kept).
//
// The floor, and failover: the servers of one database lease disjoint id ranges, but ranges
// leased by different servers are not ordered relative to what this client already received:
// after a failover the new server may still serve a segment below the old one's (or, for
// snowflake, ids of older ticks). Such ids are unique, yet handing them out would break
// "increasing". So every fetched batch is cut to the ids above the floor (the largest id
// accepted so far): runs at or below it are dropped, a run across it trimmed; the ids cut are
// counted in `discardedIds` and never handed out. A batch cut to nothing starts the catch-up
// (`catchUpCount`): the next request follows at once and asks for enough ids to pass the floor.
//
// Strict tags (issue 45): pass-through. A strict tag's ids are in real-time order across servers:
// every id is greater than every id whose answer was complete before its request was sent. A
// local buffer would break that between two client processes (P1 holds 100..150 and hands out
// 100; P2 gets 200; P1 then hands out 101 to a call that began after P2's answer). So the first
// answer with `"strict": true` switches the supply to pass-through for good (`_goStrict`): the
// ids it holds and that answer's (they may have been fetched before some waiting call began) are
// dropped and counted in `discardedIds`; no refill or preload starts again (`_startRefill`); each
// later `nextId` sends its own request for one id (`_passThrough`). Safe: the id a call returns
// was issued after the call began, so the server's order covers it; dropping ids never breaks a
// rule. As a second line, a call refuses (discards, and asks again) an id at or below the floor
// it read before sending: every id accepted before was complete before its request was sent, so
// a correct server never answers one, and one that did (an older server) never reaches a caller.

import { setTimeout as sleep } from 'node:timers/promises';

import { ClosedError, ServerFault, UnavailableError } from './errors.js';
import { backoff } from './servers.js';
import { nextBatchSize } from './sizing.js';

/** @typedef {import('./servers.js').Run} Run */

/** The runs of one accepted answer, all above every id accepted before. */
class Batch {
  /**
   * @param {Run[]} runs increasing, disjoint, non-empty
   * @param {number} size ids the runs hold
   */
  constructor(runs, size) {
    this.runs = runs;
    this.size = size;
  }
}

/** Most ids one window of a run spans, so offsets (`number`s) stay exact integers. */
const WINDOW = 2 ** 52;

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
   * @param {import('./servers.js').Servers | null} o.servers where batches come from (null: only `o.runs`)
   * @param {{path: string, tag: string | null}} o.request the range route (no query) and the tag
   * @param {{batch: number, maxBatch: number, targetLifetimeMs: number}} o.sizing the demand
   *   rule's bounds (already capped by the route's limit) and target
   * @param {number} o.catchUpMax most ids one request may ask for (the route's limit)
   * @param {{backoffMinMs: number, backoffMaxMs: number}} o.timing backoff between failed rounds
   * @param {number} o.waitTimeoutMs how long `nextId` waits for a batch
   * @param {boolean} o.asString hand out decimal strings instead of bigints
   * @param {AbortSignal} o.stop aborted when the client closes
   * @param {(p: Promise<void>) => void} [o.track] told about each refill, so close() can await it
   * @param {Run[]} [o.runs] a first batch (tests and benches): increasing, disjoint runs
   */
  constructor(o) {
    // The local path's state first, with their final types, so their shape never changes.
    /** The window on the run in use: the id at offset 0. */
    this._base = 1n;
    /** The offset of the next id from `_base` (a small integer). */
    this._off = 0;
    /** The last offset `tryNextId` may take without `_switch` (-1: none). */
    this._endOff = -1;
    /** The last id of the run in use (below `_base`: none in use). */
    this._runLast = 0n;
    /** The id whose taker starts the refill, while not yet taken (0n: none). */
    this._preload = 0n;
    /**
     * The current batch's runs.
     * @type {Run[]}
     */
    this._runs = [];
    /** The index of the run in use. */
    this._runIdx = 0;
    /** Ids the current batch holds, ids served before it, when it became current (demand rule). */
    this._batchIds = 0;
    this._servedBefore = 0;
    this._batchStart = 0;
    /** Ids served before the window in use (the window adds `_off`). */
    this._servedDone = 0;

    /** The tag, or null for snowflake. */
    this.tag = o.request.tag;
    this._servers = o.servers;
    this._request = o.request;
    this._minSize = o.sizing.batch;
    this._maxSize = o.sizing.maxBatch;
    this._targetMs = o.sizing.targetLifetimeMs;
    this._catchUpMax = o.catchUpMax;
    /** The size of the next request (the demand rule moves it within `_minSize..=_maxSize`). */
    this._size = o.sizing.batch;
    /** A caller waited because both batches were spent: the next request doubles. */
    this._starved = false;
    this._timing = o.timing;
    this._waitTimeoutMs = o.waitTimeoutMs;
    this._asString = o.asString;
    this._halt = o.stop;
    this._track = o.track ?? (() => {});
    if (o.asString) this.tryNextId = this._tryNextString;
    /** The batch to serve after the current one, once fetched. @type {Batch | null} */
    this._next = null;
    /** The largest id accepted into a batch so far (0 before the first: ids are positive). */
    this._floor = 0n;
    /** True while one refill runs (single flight). */
    this._refilling = false;
    /** Set when the last refill was refused (4xx); waiting callers get it. Cleared by a new refill. @type {Error | null} */
    this._refused = null;
    /** The last server failure of the refills, for `UnavailableError`; cleared by a success. */
    this._lastFault = null;
    /** Callers waiting for a refill to end. @type {Set<() => void>} */
    this._waiters = new Set();
    /** Pass-through (a strict tag, see above): no local batch, one request per id. For good. */
    this._strict = false;
    /** Counters (statistics only; ids served are counted per run, not per id). */
    this._stats = { batches: 0, idsReceived: 0, discardedIds: 0, failedRounds: 0 };
    if (o.runs && o.runs.length > 0) {
      let size = 0;
      for (const r of o.runs) size += Number(r.last - r.first + 1n);
      this._floor = o.runs[o.runs.length - 1].last;
      this._promote(new Batch(o.runs, size));
    }
  }

  /**
   * The next id if a local batch has one (the current one, else the next one, which it then
   * promotes), else `undefined` (then call `nextId`). Synchronous: no promise, never waits,
   * never throws; the fastest way to take an id. The refill still starts at the preload mark.
   * @returns {bigint | string | undefined}
   */
  tryNextId() {
    const off = this._off;
    if (off <= this._endOff) {
      this._off = off + 1;
      return this._base + BigInt(off);
    }
    return this._switch();
  }

  /**
   * `tryNextId` in string mode (installed on the instance by the constructor).
   * @returns {string | undefined}
   */
  _tryNextString() {
    const off = this._off;
    if (off <= this._endOff) {
      this._off = off + 1;
      return String(this._base + BigInt(off));
    }
    const got = this._switch();
    return got === undefined ? undefined : String(got);
  }

  /**
   * The local path's slow branch, taken when `_off` passed `_endOff`: at the preload mark,
   * starts the refill; at a window's end within the run, moves the window; past the run's end,
   * enters the next run, or promotes the next batch once the current one is spent. Returns the
   * id taken, or `undefined` when both batches are spent. Synchronous (see the invariants above).
   * @returns {bigint | undefined}
   */
  _switch() {
    for (;;) {
      const off = this._off;
      if (off <= this._endOff) {
        // A window just set (below): the plain step.
        this._off = off + 1;
        return this._base + BigInt(off);
      }
      // The next id of the run, or the one past its end.
      const id = this._base + BigInt(off);
      this._servedDone += off;
      this._base = id;
      this._off = 0;
      if (id <= this._runLast) {
        // Stopped at the preload mark (or at a window's 2^52 bound): a new window from `id`.
        if (id === this._preload) {
          this._preload = 0n;
          this._startRefill();
        }
        this._window();
        continue;
      }
      // The run in use is spent.
      this._endOff = -1;
      if (this._runIdx + 1 < this._runs.length) {
        this._enter(this._runs[++this._runIdx]);
        continue;
      }
      const next = this._next;
      if (next === null) return undefined;
      // Promote only over a spent batch: every id of the next one is above all of this one's.
      this._next = null;
      this._promote(next);
    }
  }

  /**
   * Makes `batch` the current one: its first run in use, its preload mark set.
   * @param {Batch} batch
   */
  _promote(batch) {
    this._runs = batch.runs;
    this._runIdx = 0;
    this._batchIds = batch.size;
    this._servedBefore = this._servedDone;
    this._batchStart = now();
    // The id at index floor(size / 10): its taker starts the refill.
    let k = BigInt(Math.floor(batch.size / 10));
    this._preload = 0n;
    for (const r of batch.runs) {
      const n = r.last - r.first + 1n;
      if (k < n) {
        this._preload = r.first + k;
        break;
      }
      k -= n;
    }
    this._enter(batch.runs[0]);
  }

  /**
   * Puts `run` in use, its window at its first id.
   * @param {Run} run
   */
  _enter(run) {
    this._base = run.first;
    this._off = 0;
    this._runLast = run.last;
    this._window();
  }

  /**
   * Sets `_endOff` for the window at `_base` (offset 0): up to the run's last id, at most 2^52
   * ids (offsets stay exact), and short of the preload mark while it lies ahead in this run.
   */
  _window() {
    const base = this._base;
    let end = Math.min(Number(this._runLast - base), WINDOW);
    const p = this._preload;
    if (p !== 0n && p >= base && p <= this._runLast) end = Math.min(end, Number(p - base) - 1);
    this._endOff = end;
  }

  /** Ids handed out so far. */
  _served() {
    return this._servedDone + this._off;
  }

  /**
   * The next id: from the local batch when it has one (no I/O), else once the refill brings a
   * batch, waiting at most the wait timeout.
   * @param {{signal?: AbortSignal, timeoutMs?: number}} [options] `signal` aborts the wait
   *   (the promise rejects with its reason); `timeoutMs` overrides the client's wait timeout
   * @returns {Promise<bigint | string>}
   */
  nextId(options) {
    if (options === undefined) {
      // The local path, inlined: one promise per call is what an async API costs.
      const off = this._off;
      if (off <= this._endOff) {
        this._off = off + 1;
        const id = this._base + BigInt(off);
        return Promise.resolve(this._asString ? String(id) : id);
      }
    }
    const signal = options?.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this._halt.aborted) return Promise.reject(new ClosedError());
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
      if (this._halt.aborted) throw new ClosedError();
      const id = this.tryNextId(); // promotes the next batch if there is one
      if (id !== undefined) return id;
      if (this._strict) return this._passThrough(signal, started, deadline, waitMs);
      if (waited && this._refused !== null) throw this._refused;
      // Both batches spent after the first one came: a starved supply (the demand rule doubles).
      if (!waited && this._stats.batches > 0) this._starved = true;
      this._startRefill();
      waited = true;
      const left = deadline - now();
      if (left <= 0 || !(await this._waitForRefill(left, signal))) {
        throw new UnavailableError(waitMs, now() - started, this._lastFault, this._refilling);
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

  /**
   * A strict supply's call: one request for one id, sent now (after the call began), through the
   * usual server order and failover; a refusal reaches the caller; failed rounds are retried with
   * backoff until `deadline`. The id is handed out only when above the floor read before the
   * request was sent (see "Strict tags" above).
   * @param {AbortSignal | undefined} signal
   * @param {number} started
   * @param {number} deadline
   * @param {number} waitMs
   * @returns {Promise<bigint | string>}
   */
  async _passThrough(signal, started, deadline, waitMs) {
    const servers = /** @type {import('./servers.js').Servers} */ (this._servers);
    const floor = this._floor;
    let failures = 0;
    for (;;) {
      if (this._halt.aborted) throw new ClosedError();
      if (signal?.aborted) throw signal.reason;
      const got = await servers.fetch(this._request, 1);
      if (this._halt.aborted) throw new ClosedError();
      let wait = 0;
      if ('rejected' in got) {
        throw got.rejected;
      } else if (!('fault' in got)) {
        this._stats.idsReceived += got.count;
        this._stats.batches++;
        const id = got.runs[0].first;
        if (id > floor) {
          // One call, one id: any further id of the answer (never more than asked) is dropped.
          this._stats.discardedIds += got.count - 1;
          if (id > this._floor) this._floor = id;
          this._servedDone++;
          this._lastFault = null;
          return this._asString ? String(id) : id;
        }
        this._stats.discardedIds += got.count;
        this._lastFault = new ServerFault(got.server, 'behind', `its id ${id} lies at or below an id handed out before (${floor})`);
      } else {
        this._stats.failedRounds++;
        this._lastFault = got.fault;
        failures++;
        wait = backoff(this._timing, failures);
      }
      if (now() + wait >= deadline) throw new UnavailableError(waitMs, now() - started, this._lastFault, false);
      if (wait > 0) {
        try {
          await sleep(wait, undefined, { signal: this._halt });
        } catch {
          throw new ClosedError();
        }
      }
    }
  }

  /**
   * Turns the supply to pass-through for good after an answer marked strict: that answer's ids
   * and every id held locally are dropped (counted in `discardedIds`; never handed out, never
   * reused by a server), the floor rises to the answer's last id. Synchronous, so no caller
   * takes an id between the count and the drop.
   * @param {{runs: Run[], count: number}} got
   */
  _goStrict(got) {
    let held = 0;
    const at = this._base + BigInt(this._off);
    if (at <= this._runLast) held += Number(this._runLast - at + 1n);
    for (let i = this._runIdx + 1; i < this._runs.length; i++) {
      held += Number(this._runs[i].last - this._runs[i].first + 1n);
    }
    if (this._next !== null) held += this._next.size;
    this._stats.discardedIds += got.count + held;
    const last = got.runs[got.runs.length - 1].last;
    if (last > this._floor) this._floor = last;
    this._strict = true;
    this._servedDone += this._off;
    this._base = 1n;
    this._off = 0;
    this._endOff = -1;
    this._runLast = 0n;
    this._preload = 0n;
    this._runs = [];
    this._runIdx = 0;
    this._next = null;
  }

  /** Starts the refill unless one runs, the next batch is there, or there is no server; never
   * for a strict supply (no id is fetched ahead of its call). */
  _startRefill() {
    if (this._strict || this._refilling || this._next !== null || this._servers === null || this._halt.aborted) return;
    this._refilling = true;
    this._refused = null;
    this._track(this._refill());
  }

  /**
   * The demand rule (`nextBatchSize`), applied as a request is about to be sent, from the batch
   * in use; consumes the starvation flag.
   */
  _decideSize() {
    this._size = nextBatchSize({
      size: this._size,
      min: this._minSize,
      max: this._maxSize,
      used: this._served() - this._servedBefore,
      batchIds: this._batchIds,
      elapsedMs: now() - this._batchStart,
      targetMs: this._targetMs,
      starved: this._starved,
    });
    this._starved = false;
    return this._size;
  }

  /**
   * Fetches one batch above the floor into `next`, retrying failed rounds with backoff for at
   * most the wait timeout (then the next caller that needs a batch starts another). The size is
   * decided once per refill (its retries and catch-up requests do not move it). Never rejects.
   */
  async _refill() {
    const servers = /** @type {import('./servers.js').Servers} */ (this._servers);
    const deadline = now() + this._waitTimeoutMs;
    let failures = 0;
    // Ids asked for: the demand rule's size, or more while catching up (`catchUpCount`).
    let count = this._decideSize();
    try {
      while (!this._halt.aborted) {
        const got = await servers.fetch(this._request, count);
        if (this._halt.aborted) break;
        let wait;
        if ('rejected' in got) {
          this._refused = got.rejected;
          break;
        } else if (!('fault' in got)) {
          this._stats.idsReceived += got.count;
          if (got.strict === true) {
            this._goStrict(got);
            break;
          }
          const again = this._accept(got, count);
          if (again === null) {
            this._lastFault = null;
            this._stats.batches++;
            break;
          }
          // Nothing to keep: ask again at once (or after `again.wait`), for `again.count` ids.
          this._lastFault = again.fault;
          count = again.count;
          wait = again.wait;
        } else {
          this._stats.failedRounds++;
          this._lastFault = got.fault;
          failures++;
          wait = backoff(this._timing, failures);
        }
        if (now() + wait >= deadline) break;
        if (wait > 0) {
          try {
            await sleep(wait, undefined, { signal: this._halt });
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

  /**
   * Takes one 200 answer: cut to the ids above the floor; kept ids become the next batch (then
   * returns null). An answer wholly at or below the floor starts the catch-up: returns the
   * count of the next request (sent at once) and the fault to report meanwhile.
   * @param {{runs: Run[], count: number, server: string}} got
   * @param {number} _count the count asked
   * @returns {{count: number, wait: number, fault: ServerFault} | null}
   */
  _accept(got, _count) {
    const kept = aboveFloor(got.runs, this._floor);
    const keptIds = kept.reduce((n, r) => n + Number(r.last - r.first + 1n), 0);
    this._stats.discardedIds += got.count - keptIds;
    if (keptIds > 0) {
      this._floor = kept[kept.length - 1].last;
      this._next = new Batch(kept, keptIds);
      return null;
    }
    // Nothing above the floor: that server is behind the one used before (the catch-up).
    const last = got.runs[got.runs.length - 1].last;
    return {
      count: catchUpCount(this._floor, last, this._size, this._catchUpMax),
      wait: 0,
      fault: new ServerFault(
        got.server,
        'behind',
        `${got.count} ids up to ${last}, all at or below the last id accepted (${this._floor})`,
      ),
    };
  }

  /** Drops the local batches and wakes every waiter (the client is closing). */
  _close() {
    this._servedDone += this._off;
    this._base = 1n;
    this._off = 0;
    this._endOff = -1;
    this._runLast = 0n;
    this._preload = 0n;
    this._runs = [];
    this._runIdx = 0;
    this._next = null;
    this._wakeWaiters();
  }

  /**
   * The supply's counters: ids handed out, batches accepted, ids received (discarded ones
   * included), ids discarded below the floor, fetch rounds in which no server delivered, and the
   * size of its next request.
   * @returns {{idsServed: number, batches: number, idsReceived: number, discardedIds: number, failedRounds: number, batchSize: number}}
   */
  stats() {
    return { idsServed: this._served(), ...this._stats, batchSize: this._size };
  }
}

/**
 * The catch-up rule: after an answer lying wholly at or below the floor (its server is behind
 * the one used before: a lower segment of a lagging or restored database, or snowflake ids of
 * older ticks), the next request follows at once, without a pause, and asks for enough ids to
 * pass the floor: those from the answer's last id up to the floor, plus the current batch size,
 * at most `max` (the route's limit). A segment server's next ids follow its last ones, so a gap
 * within one request is passed in one step; a larger one takes one request per `max` ids.
 * @param {bigint} floor the largest id accepted
 * @param {bigint} last the last id of the answer (at or below the floor)
 * @param {number} size the current batch size
 * @param {number} max the route's limit per request
 * @returns {number} ids to ask for, within min(size, max)..=max
 */
export function catchUpCount(floor, last, size, max) {
  const want = floor - last + BigInt(size);
  return want >= BigInt(max) ? max : Math.max(Math.min(size, max), Number(want));
}

/**
 * The runs' ids above `floor`: runs at or below it dropped, a run across it trimmed to start
 * just above it (runs are increasing, so the ids cut are a prefix).
 * @param {Run[]} runs
 * @param {bigint} floor
 * @returns {Run[]}
 */
export function aboveFloor(runs, floor) {
  let i = 0;
  while (i < runs.length && runs[i].last <= floor) i++;
  if (i === runs.length) return [];
  const kept = i > 0 ? runs.slice(i) : runs;
  if (kept[0].first <= floor) {
    return [{ first: floor + 1n, last: kept[0].last }, ...kept.slice(1)];
  }
  return kept;
}
