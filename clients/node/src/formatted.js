// `FormattedSupply`: the local supply of a formatted tag (docs/shapes.md: ids that are text, such
// as a daily order number `20261127000123`), clients/conformance/PROTOCOL.md "Formatted tags".
//
// It is an `IdSupply` whose batches are lists of texts: the same refill (single flight, started
// by the taker of the id at 10% of the batch), the same waiting `nextId`, the same server list,
// failover, sizing (`nextBatchSize`, within `batch` and 100,000, the list route's limit) and
// stats. Only the batch differs: a batch is the answer of `GET /api/v1/segment/{tag}/ids?count=N`
// (`readFormatted`), its texts and its period's end.
//
// The local path: `tryNextId` is one compare of an index with the end of the list (or the
// preload mark), the period check, and one array read: no lock (JavaScript runs one call at a
// time between awaits, and neither `tryNextId` nor `_switch` awaits), no allocation (the text
// handed out is the one received). The period check, with the default clock (`Date.now`), reads
// no clock: it loads the batch's ended bit, which a worker thread sets at the batch's deadline
// (`period_end - Date.now()` at receipt, on the worker's monotonic clock: src/deadlines.js);
// with an injected `clock` option it is that clock compared with `period_end`, as before (tests
// move a period's end with it).
//
// Rules, and why they hold:
// - Never yesterday's number today: every id is handed out only after the period check passed
//   in the same synchronous step; a batch found past its period's end is dropped whole
//   (its ids not yet handed out count in `discardedIds`), the next batch is checked the same way.
//   An answer already past its end when it arrives is dropped the same way and asked again after
//   the backoff (the server's clock is behind ours: it serves the next period within a moment).
//   Bound with the default clock: the ended bit is set at most the worker's timer latency (about
//   a millisecond; it does nothing else) after `period_end` by the wall clock as it ran at
//   receipt, and it is shared memory, so even a synchronous loop sees it at its next id. A wall
//   clock stepped forward by D after receipt is not seen by the deadline: ids may be handed out
//   up to D after `period_end` by the stepped clock, until the next batch is promoted (`_promote`
//   reads the wall clock) or the next answer (each answer's deadline is computed from the wall
//   clock at its receipt). A clock stepped back only sets the bit early (ids dropped, never
//   late). The server never issues ids of an ended period; this is the client's second guard.
// - No id twice and strictly increasing (byte order): texts of one format sort as byte strings in
//   issue order; every answer is cut to the texts above the floor (the last text accepted), so
//   each batch lies wholly above the one before, and ids are taken in list order, batch after
//   batch, each at one moment between the call's start and return.
// - Permuted tags (`"ordered": false` in the answer, docs/shapes.md: a keyed permutation of the
//   sequence, whose order is hidden on purpose): no byte-order check and no floor, the texts are
//   handed out in the order received, batch after batch; the period rule above still holds.
//   No id twice is then the server's guarantee (each text is the permutation of a sequence
//   number leased once, as for every id); the client hands out each received text once (the
//   index only moves forward, a batch is promoted once), and `discardedIds` counts only texts of
//   an ended period. The decision is made once per answer, in `_accept`: the local path is the
//   same for both kinds of batch.
// - Only received ids: the texts handed out are exactly the strings of a 200 body that passed
//   `readFormatted`.

import { InvalidTagError, ServerFault } from './errors.js';
import { MAX_FORMATTED_BATCH, Refusal } from './servers.js';
import { arm, end, ended, flag, release } from './deadlines.js';
import { IdSupply } from './supply.js';

/** The subset of RFC 3339 the server writes: upper-case `T` and `Z`, offsets `+HH:MM`. */
const RFC3339 = /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?(?:Z|([+-])([0-9]{2}):([0-9]{2}))$/;

/**
 * An RFC 3339 instant in milliseconds since the epoch (the fraction cut), or `NaN`: a real
 * calendar date of years 0000 to 9999, hours 00-23, minutes and seconds 00-59 (no leap second),
 * offsets within 23:59 (`clients/conformance/vectors/rfc3339.json`).
 * @param {unknown} text
 * @returns {number}
 */
export function parseRfc3339(text) {
  const m = typeof text === 'string' ? RFC3339.exec(text) : null;
  if (m === null) return NaN;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
  const oh = m[8] ? Number(m[9]) : 0;
  const om = m[8] ? Number(m[10]) : 0;
  if (mo < 1 || mo > 12 || h > 23 || mi > 59 || s > 59 || oh > 23 || om > 59) return NaN;
  const t = new Date(0);
  t.setUTCFullYear(y, mo - 1, d);
  if (t.getUTCDate() !== d) return NaN; // no 30 February
  t.setUTCHours(h, mi, s, Number(((m[7] ?? '') + '000').slice(0, 3)));
  const offset = (oh * 60 + om) * 60_000;
  return t.getTime() + (m[8] === '-' ? offset : -offset);
}

/**
 * Compares two strings in the byte order of their UTF-8 encodings (the order formatted ids sort
 * in): negative, 0 or positive. JavaScript's `<` compares UTF-16 code units, which agrees with
 * UTF-8 byte order except between a surrogate (a character above U+FFFF) and U+E000..U+FFFF; the
 * loop corrects that case. Formats are ASCII, so in practice this is `<`.
 * @param {string} a
 * @param {string} b
 */
export function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      // Surrogates (U+D800..DFFF, the 4-byte sequences) sort above U+E000..U+FFFF in UTF-8.
      x = x < 0xe000 ? x + 0x2000 : x - 0x800;
      y = y < 0xe000 ? y + 0x2000 : y - 0x800;
    }
    return x - y;
  }
  return a.length - b.length;
}

/**
 * Reads a 200 body of the list route for a formatted supply: `ids` a non-empty list of non-empty
 * strings, at most `count`, increasing as byte strings unless the body says `"ordered": false`
 * (a permuted tag: no order to check), `ordered` absent or a boolean (absent: true),
 * `period_end` an RFC 3339 instant, and `biz_tag` the tag asked. A body with numeric ids and no
 * `period_end` is a plain tag's answer: a `Refusal` `not_formatted` (every server would answer
 * the same). Anything else throws (that server's failure).
 * @param {unknown} body
 * @param {{count: number, tag: string | null}} asked
 * @returns {{ids: string[], count: number, periodEnd: number, period: string, ordered: boolean} | Refusal}
 */
export function readFormatted(body, asked) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw 'the body is not a JSON object';
  }
  const b = /** @type {{biz_tag?: unknown, ids?: unknown, period?: unknown, period_end?: unknown, ordered?: unknown}} */ (body);
  if (b.biz_tag !== asked.tag) {
    throw `asked for tag ${JSON.stringify(asked.tag)}, got ${JSON.stringify(b.biz_tag)}`;
  }
  const ids = b.ids;
  if (!Array.isArray(ids) || ids.length === 0) throw 'no "ids" list of at least one id';
  if (b.period_end === undefined && ids.every((x) => typeof x === 'number')) {
    return new Refusal('not_formatted', `tag ${JSON.stringify(asked.tag)} is not formatted: its ids are numbers (use segment(tag))`);
  }
  if (ids.length > asked.count) throw `${ids.length} ids for ${asked.count} asked`;
  if (b.ordered !== undefined && typeof b.ordered !== 'boolean') throw `ordered ${JSON.stringify(b.ordered)} is not a boolean`;
  const ordered = b.ordered !== false;
  let prev = '';
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (typeof id !== 'string' || id.length === 0) throw `id ${i} is not a non-empty string: ${JSON.stringify(id)}`;
    if (ordered && i > 0 && compareBytes(id, prev) <= 0) throw `id ${i} ${JSON.stringify(id)} is not above the one before (${JSON.stringify(prev)})`;
    prev = id;
  }
  // Unordered texts have no order to check: a text twice is caught here instead.
  if (!ordered && new Set(ids).size !== ids.length) throw 'a text twice in one answer';
  const pe = b.period_end;
  const periodEnd = parseRfc3339(pe);
  if (!Number.isFinite(periodEnd)) throw `period_end ${JSON.stringify(pe)} is not an RFC 3339 instant`;
  return { ids: /** @type {string[]} */ (ids), count: ids.length, periodEnd, period: typeof b.period === 'string' ? b.period : '', ordered };
}

/** The texts of one accepted answer, all above every text accepted before, and their period's end. */
class TextBatch {
  /**
   * @param {string[]} ids
   * @param {number} periodEnd milliseconds since the epoch
   */
  constructor(ids, periodEnd) {
    this.ids = ids;
    this.periodEnd = periodEnd;
    this.size = ids.length;
    /** The batch's deadline slot in `FLAGS` (src/deadlines.js), -1: none (the clock is read). */
    this.slot = -1;
  }
}

/**
 * The ids of a formatted tag, as text: increasing (byte order), never repeated, never of a period
 * that ended by the client's clock; a permuted tag's texts (answers with `"ordered": false`) in
 * the order received instead. Made by `Client.formatted(tag)`; every call for the same tag
 * returns the same supply.
 */
export class FormattedSupply extends IdSupply {
  /**
   * @param {object} o the `IdSupply` options (`request` is set here), and:
   * @param {string} o.tag the formatted tag
   * @param {() => number} o.clock the wall clock, milliseconds since the epoch (`Date.now`)
   * @param {import('./servers.js').Servers | null} o.servers
   * @param {{batch: number, maxBatch: number, targetLifetimeMs: number}} o.sizing
   * @param {{backoffMinMs: number, backoffMaxMs: number}} o.timing
   * @param {number} o.waitTimeoutMs
   * @param {AbortSignal} o.stop
   * @param {(p: Promise<void>) => void} [o.track]
   * @param {{ids: string[], periodEnd: number}} [o.first] a first batch (tests and benches)
   */
  constructor(o) {
    if (typeof o.tag !== 'string') throw new InvalidTagError(o.tag);
    super({
      servers: o.servers,
      request: { path: `/api/v1/segment/${o.tag}/ids`, tag: o.tag, query: '', read: readFormatted },
      sizing: o.sizing,
      catchUpMax: MAX_FORMATTED_BATCH,
      timing: o.timing,
      waitTimeoutMs: o.waitTimeoutMs,
      asString: false,
      stop: o.stop,
      track: o.track,
    });
    // The local path's state (the base's `_off`/`_endOff` stay at 0/-1: unused).
    /** The current batch's texts. @type {string[]} */
    this._ids = [];
    /** The index of the next text. */
    this._idx = 0;
    /** The last index + 1 that `tryNextId` may take without `_switch`: the list's end, or the preload mark while ahead. */
    this._end = 0;
    /** The current batch's period end (ms since the epoch): nothing is handed out at or after it. */
    this._periodEnd = 0;
    /** The index whose taker starts the refill (-1: none ahead). */
    this._preloadIdx = -1;
    /** The wall clock (replaceable by tests through the client's `clock` option). */
    this._clock = o.clock;
    /** The default clock: batches get deadlines (src/deadlines.js) and no clock is read per id. */
    this._deadlines = o.clock === Date.now;
    /** The current batch's deadline slot, -1: none (the clock is read per id). */
    this._slot = -1;
    /** The last text accepted (''  before the first: every id is above it). */
    this._textFloor = '';
    /** Answers dropped in a row because their period had already ended (their backoff). */
    this._endedInRow = 0;
    if (o.first && o.first.ids.length > 0) {
      this._textFloor = o.first.ids[o.first.ids.length - 1];
      this._promote(this._batch(o.first.ids, o.first.periodEnd, Date.now()));
    }
  }

  /**
   * The next text if a local batch has one whose period has not ended (the current one, else
   * the next one, which it then promotes), else `undefined` (then call `nextId`). Synchronous:
   * never waits, never throws. The refill still starts at the preload mark.
   * @returns {string | undefined}
   */
  tryNextId() {
    const i = this._idx;
    if (i < this._end && (this._slot >= 0 ? (flag(this._slot) & 1) === 0 : this._clock() < this._periodEnd)) {
      this._idx = i + 1;
      return this._ids[i];
    }
    return this._switch();
  }

  /**
   * The next text: from the local batch when it has one (no I/O), else once the refill brings a
   * batch, waiting at most the wait timeout. Rejects with `RejectedError` (`not_formatted`,
   * `sequence_exhausted`, `unknown_biz_tag`, ...), `UnavailableError` or `ClosedError`.
   * @param {{signal?: AbortSignal, timeoutMs?: number}} [options]
   * @returns {Promise<string>}
   */
  nextId(options) {
    if (options === undefined) {
      const i = this._idx;
      if (i < this._end && (this._slot >= 0 ? (flag(this._slot) & 1) === 0 : this._clock() < this._periodEnd)) {
        this._idx = i + 1;
        return Promise.resolve(this._ids[i]);
      }
    }
    return /** @type {Promise<string>} */ (super.nextId(options));
  }

  /**
   * The slow branch: at the preload mark starts the refill; drops a batch whose period ended;
   * promotes the next batch once the current one is spent. Returns the text taken, or
   * `undefined` when no batch has one.
   * @returns {any}
   */
  _switch() {
    for (;;) {
      const i = this._idx;
      const ids = this._ids;
      if (i < ids.length) {
        if (this._slot >= 0 ? ended(this._slot) : this._clock() >= this._periodEnd) {
          // The period ended: drop the rest of the batch, never hand it out.
          const left = ids.length - i;
          this._stats.discardedIds += left;
          this._servedDone -= left; // `_served()` adds `_idx`, now at the end
          this._idx = ids.length;
          this._end = ids.length;
          if (this._preloadIdx >= 0) {
            this._preloadIdx = -1;
            this._startRefill();
          }
          continue;
        }
        if (i === this._preloadIdx) {
          this._preloadIdx = -1;
          this._end = ids.length;
          this._startRefill();
        }
        if (i < this._end) {
          this._idx = i + 1;
          return ids[i];
        }
        continue;
      }
      const next = /** @type {TextBatch | null} */ (/** @type {unknown} */ (this._next));
      if (next === null) return undefined;
      this._next = null;
      this._promote(next);
    }
  }

  /**
   * Makes `batch` the current one, its preload mark at index floor(size / 10).
   * @param {any} batch a `TextBatch`
   */
  _promote(batch) {
    release(this._slot);
    this._slot = batch.slot;
    // Off the local path, once per batch: the wall clock too, so a wall clock stepped forward
    // since receipt is caught here (the bound at the top).
    if (batch.slot >= 0 && Date.now() >= batch.periodEnd) end(batch.slot);
    this._servedDone += this._idx;
    this._servedBefore = this._servedDone;
    this._batchIds = batch.size;
    this._batchStart = performance.now();
    this._ids = batch.ids;
    this._periodEnd = batch.periodEnd;
    this._idx = 0;
    this._preloadIdx = Math.floor(batch.size / 10);
    this._end = this._preloadIdx;
  }

  /**
   * A batch received at wall time `now`, its deadline armed with the default clock.
   * @param {string[]} ids
   * @param {number} periodEnd
   * @param {number} now
   * @returns {TextBatch}
   */
  _batch(ids, periodEnd, now) {
    const b = new TextBatch(ids, periodEnd);
    if (this._deadlines) b.slot = arm(periodEnd - now);
    return b;
  }

  /** Ids handed out so far. */
  _served() {
    return this._servedDone + this._idx;
  }

  /**
   * Takes one answer: a period already ended by the client's clock is dropped whole (asked again
   * after the backoff); an unordered answer (a permuted tag) is kept whole as the next batch, in
   * the order received (returns null); an ordered one is cut to the texts above the floor and
   * kept as the next batch (returns null). An ordered answer wholly at or below the floor (a
   * lagging server) is followed at once by a request for twice as many (at most 100,000), until
   * it passes the floor.
   * @param {any} got `{ids, count, periodEnd, ordered, server}`
   * @param {number} count the count asked
   * @returns {{count: number, wait: number, fault: ServerFault} | null}
   */
  _accept(got, count) {
    /** @type {string[]} */
    const ids = got.ids;
    const now = this._clock();
    if (now >= got.periodEnd) {
      this._stats.discardedIds += ids.length;
      this._endedInRow++;
      const wait = Math.min(this._timing.backoffMinMs * 2 ** Math.min(this._endedInRow - 1, 30), this._timing.backoffMaxMs);
      return {
        count,
        wait,
        fault: new ServerFault(got.server, 'behind', `${ids.length} ids of a period that ended at ${new Date(got.periodEnd).toISOString()} by this client's clock`),
      };
    }
    this._endedInRow = 0;
    if (got.ordered === false) {
      // No floor: the order of a permuted tag's texts is hidden on purpose (see the top).
      this._next = /** @type {any} */ (this._batch(ids, got.periodEnd, now));
      return null;
    }
    const floor = this._textFloor;
    let k = 0;
    if (floor !== '') while (k < ids.length && compareBytes(ids[k], floor) <= 0) k++;
    this._stats.discardedIds += k;
    if (k === ids.length) {
      return {
        count: Math.min(Math.max(count, this._size) * 2, MAX_FORMATTED_BATCH),
        wait: 0,
        fault: new ServerFault(got.server, 'behind', `${ids.length} ids up to ${ids[ids.length - 1]}, all at or below the last id accepted (${floor})`),
      };
    }
    const kept = k > 0 ? ids.slice(k) : ids;
    this._textFloor = kept[kept.length - 1];
    this._next = /** @type {any} */ (this._batch(kept, got.periodEnd, now));
    return null;
  }

  /** Drops the local batches and wakes every waiter (the client is closing). */
  _close() {
    release(this._slot);
    this._slot = -1;
    if (this._next !== null) release(/** @type {any} */ (this._next).slot);
    this._servedDone += this._idx;
    this._ids = [];
    this._idx = 0;
    this._end = 0;
    this._preloadIdx = -1;
    this._next = null;
    super._close();
  }
}
