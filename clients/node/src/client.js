// `Client`: its options, the supplies it makes (one per tag, one for snowflake), stats, close.

import { snowflakeBounds } from './bounds.js';
import { ClosedError, ConfigError, InvalidTagError } from './errors.js';
import { FormattedSupply } from './formatted.js';
import { MAX_BATCH, MAX_FORMATTED_BATCH, MAX_SEGMENT_BATCH, MAX_SNOWFLAKE_BATCH, Servers } from './servers.js';
import { IdSupply } from './supply.js';

export { MAX_BATCH, MAX_FORMATTED_BATCH, MAX_SEGMENT_BATCH, MAX_SNOWFLAKE_BATCH };

/** The server's tag rule: 1 to 128 of `A-Z a-z 0-9 . _ : -`. */
const TAG = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Whether `tag` follows the server's rule (1 to 128 of `A-Z a-z 0-9 . _ : -`).
 * @param {unknown} tag
 */
export function isValidTag(tag) {
  return typeof tag === 'string' && TAG.test(tag);
}

const DEFAULTS = Object.freeze({
  batch: 1000,
  maxBatch: MAX_SEGMENT_BATCH,
  targetLifetimeMs: 1000,
  waitTimeoutMs: 5000,
  requestTimeoutMs: 2000,
  probeTimeoutMs: 1000,
  backoffMinMs: 50,
  backoffMaxMs: 5000,
  ids: 'bigint',
  clock: Date.now,
});

/**
 * A leafid client: per tag (and for snowflake) a local double-buffered id supply, fed by the
 * batch routes of several servers with failover.
 *
 * ```js
 * const client = new Client({ servers: ['http://10.0.0.1:8080', 'http://10.0.0.2:8080'] });
 * const id = await client.nextId('orders'); // a bigint
 * await client.close();
 * ```
 */
export class Client {
  /**
   * @param {object} options
   * @param {string[]} options.servers base URLs (`http://host:port`), asked in this order
   * @param {number} [options.batch] ids of the first request, and the fewest any request asks
   *   for, 1..=1000000 (default 1000; a snowflake supply asks for at most 100000)
   * @param {number} [options.maxBatch] the most ids a request asks for as the size follows
   *   demand, batch..=1000000 (default 1000000; a snowflake supply: at most 100000)
   * @param {number} [options.targetLifetimeMs] how long a batch should last at the callers' rate:
   *   the size doubles below half of it, halves above twice it (default 1000)
   * @param {number} [options.waitTimeoutMs] longest a `nextId` call waits for ids (default 5000)
   * @param {number} [options.requestTimeoutMs] bound of one batch request (default 2000)
   * @param {number} [options.probeTimeoutMs] bound of one health probe (default 1000)
   * @param {number} [options.backoffMinMs] first probe backoff of a down server (default 50)
   * @param {number} [options.backoffMaxMs] largest probe backoff (default 5000)
   * @param {'bigint' | 'string'} [options.ids] how ids are handed out (default `bigint`)
   * @param {() => number} [options.clock] the wall clock of the period rule, a function
   *   returning milliseconds since the epoch (default `Date.now`): a formatted supply hands out
   *   no id of a period that ended by it. Set it when the process clock is not the one to trust
   *   (a known offset, a time source of your own) or in tests; it is read once per id handed
   *   out by a formatted supply, so it must be cheap and must not throw.
   * @param {string} [options.token] the caller token (`lid_...`), sent as
   *   `Authorization: Bearer <token>` on every batch and bounds request (not on the health
   *   probe); never shown. leafid's 401 `unauthorized` and 403 `forbidden` reject with
   *   `RejectedError` (no failover); a 429 `quota_exhausted` is waited out for its `Retry-After`
   *   on the same server, or rejects with `ThrottledError` past the wait timeout.
   */
  constructor(options) {
    const o = { ...DEFAULTS, ...(options ?? {}) };
    if (!Array.isArray(o.servers) || o.servers.length === 0) {
      throw new ConfigError('no server given (servers: an array of http:// URLs)');
    }
    const bases = o.servers.map(checkUrl);
    if (!Number.isInteger(o.batch) || o.batch < 1 || o.batch > MAX_BATCH) {
      throw new ConfigError(`batch must be an integer within 1..=${MAX_BATCH} (got ${o.batch})`);
    }
    if (!Number.isInteger(o.maxBatch) || o.maxBatch < o.batch || o.maxBatch > MAX_BATCH) {
      throw new ConfigError(`maxBatch must be an integer within batch..=${MAX_BATCH}, batch being ${o.batch} (got ${o.maxBatch})`);
    }
    for (const k of /** @type {const} */ (['waitTimeoutMs', 'requestTimeoutMs', 'probeTimeoutMs', 'backoffMinMs', 'backoffMaxMs', 'targetLifetimeMs'])) {
      const v = o[k];
      if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || v > 2 ** 31 - 1) {
        throw new ConfigError(`${k} must be a number of milliseconds within 1..=2147483647 (got ${v})`);
      }
    }
    if (o.backoffMaxMs < o.backoffMinMs) {
      throw new ConfigError('backoff needs backoffMinMs <= backoffMaxMs');
    }
    if (o.ids !== 'bigint' && o.ids !== 'string') {
      throw new ConfigError(`ids must be "bigint" or "string" (got ${JSON.stringify(o.ids)})`);
    }
    if (o.token !== undefined && (typeof o.token !== 'string' || !/^[\x21-\x7e]+$/.test(o.token))) {
      throw new ConfigError('token must be a non-empty string of printable ASCII without spaces');
    }
    if (typeof o.clock !== 'function') {
      throw new ConfigError(`clock must be a function returning milliseconds since the epoch (got ${typeof o.clock})`);
    }
    /** Aborted by `close()`: stops refills, probes and in-flight requests. */
    this._stopper = new AbortController();
    this._timing = {
      requestTimeoutMs: o.requestTimeoutMs,
      probeTimeoutMs: o.probeTimeoutMs,
      backoffMinMs: o.backoffMinMs,
      backoffMaxMs: o.backoffMaxMs,
    };
    // The token lives only inside Servers (out of sight of util.inspect and JSON.stringify).
    this._servers = new Servers(bases, this._timing, this._stopper.signal, {
      token: o.token,
      waitTimeoutMs: o.waitTimeoutMs,
    });
    this._batch = o.batch;
    this._maxBatch = o.maxBatch;
    this._targetLifetimeMs = o.targetLifetimeMs;
    this._waitTimeoutMs = o.waitTimeoutMs;
    this._asString = o.ids === 'string';
    /** One supply per tag, so every caller of a tag shares one increasing stream. @type {Map<string, IdSupply>} */
    this._segments = new Map();
    /** One formatted supply per tag. @type {Map<string, FormattedSupply>} */
    this._formatted = new Map();
    this._clock = o.clock;
    /** The snowflake supply, made on first use. @type {IdSupply | null} */
    this._snowflake = null;
    /** Refills running, so `close()` can wait for them. @type {Set<Promise<void>>} */
    this._refills = new Set();
    this._closed = null;
  }

  /**
   * The supply of a tag (the same one on every call for that tag). No request is sent until
   * the first `nextId`. Throws `InvalidTagError` for a tag the server would refuse.
   * @param {string} tag
   * @returns {IdSupply}
   */
  segment(tag) {
    let s = this._segments.get(tag);
    if (s !== undefined) return s;
    if (!isValidTag(tag)) throw new InvalidTagError(tag);
    s = this._supply({ path: `/api/v1/segment/${tag}/ranges`, tag }, MAX_SEGMENT_BATCH);
    this._segments.set(tag, s);
    return s;
  }

  /**
   * The formatted supply of a tag (the same one on every call for that tag): its ids are texts,
   * such as daily order numbers (`docs/shapes.md`). No request is sent until the first
   * `nextId`. Throws `InvalidTagError` for a tag the server would refuse.
   * @param {string} tag
   * @returns {FormattedSupply}
   */
  formatted(tag) {
    let s = this._formatted.get(tag);
    if (s !== undefined) return s;
    if (!isValidTag(tag)) throw new InvalidTagError(tag);
    const maxBatch = Math.min(this._maxBatch, MAX_FORMATTED_BATCH);
    s = new FormattedSupply({
      tag,
      clock: this._clock,
      servers: this._servers,
      sizing: { batch: Math.min(this._batch, maxBatch), maxBatch, targetLifetimeMs: this._targetLifetimeMs },
      timing: this._timing,
      waitTimeoutMs: this._waitTimeoutMs,
      stop: this._stopper.signal,
      track: this._tracker(),
    });
    this._formatted.set(tag, s);
    return s;
  }

  /**
   * The next text of the formatted tag `tag` (see `FormattedSupply.nextId`).
   * @param {string} tag
   * @param {{signal?: AbortSignal, timeoutMs?: number}} [options]
   * @returns {Promise<string>}
   */
  nextFormattedId(tag, options) {
    let s;
    try {
      s = this.formatted(tag);
    } catch (e) {
      return Promise.reject(e);
    }
    return s.nextId(options);
  }

  /**
   * The snowflake supply (one per client).
   * @returns {IdSupply}
   */
  snowflake() {
    if (this._snowflake === null) {
      this._snowflake = this._supply({ path: '/api/v1/snowflake/ranges', tag: null }, MAX_SNOWFLAKE_BATCH);
    }
    return this._snowflake;
  }

  /**
   * The next id of `tag` (see `IdSupply.nextId`). An invalid tag rejects with `InvalidTagError`.
   * @param {string} tag
   * @param {{signal?: AbortSignal, timeoutMs?: number}} [options]
   * @returns {Promise<bigint | string>}
   */
  nextId(tag, options) {
    let s;
    try {
      s = this.segment(tag);
    } catch (e) {
      return Promise.reject(e);
    }
    return s.nextId(options);
  }

  /**
   * The next snowflake id (see `IdSupply.nextId`).
   * @param {{signal?: AbortSignal, timeoutMs?: number}} [options]
   * @returns {Promise<bigint | string>}
   */
  nextSnowflakeId(options) {
    return this.snowflake().nextId(options);
  }

  /**
   * The snowflake bounds of the time range `[from, to)`: the smallest and largest id any worker
   * can issue in it under the servers' layout, for `WHERE id BETWEEN minId AND maxId`
   * (`GET /api/v1/snowflake/bounds`; the ids are `bigint`s whatever the `ids` option). Failover
   * as for batches (a timeout, a 5xx, a refused connection, `engine_disabled`: the next server,
   * rounds retried with backoff up to the wait timeout, then `UnavailableError`). A range the
   * servers refuse (empty, before the layout's epoch, past its end) rejects with
   * `RejectedError` code `invalid_time_range`, without failover. `from` or `to` not a valid
   * `Date`: `TypeError`, no request sent.
   * @param {Date} from the range's start (included)
   * @param {Date} to the range's end (excluded)
   * @param {{signal?: AbortSignal, timeoutMs?: number}} [options] as for `nextId`
   * @returns {Promise<{minId: bigint, maxId: bigint}>}
   */
  async snowflakeBounds(from, to, options) {
    if (this._closed !== null) throw new ClosedError();
    return snowflakeBounds(this._servers, from, to, {
      waitTimeoutMs: this._waitTimeoutMs,
      timing: this._timing,
      stop: this._stopper.signal,
      track: this._tracker(),
    }, options);
  }

  /**
   * Counters summed over every supply, the client's failovers, and `batchSize`: the largest size
   * any supply asks for in its next request (the starting `batch` before any supply exists).
   * @returns {{idsServed: number, batches: number, idsReceived: number, discardedIds: number, failedRounds: number, failovers: number, batchSize: number}}
   */
  stats() {
    const sum = { idsServed: 0, batches: 0, idsReceived: 0, discardedIds: 0, failedRounds: 0, failovers: 0, batchSize: 0 };
    /** @type {IdSupply[]} */
    const all = [...this._segments.values(), ...this._formatted.values()];
    if (this._snowflake !== null) all.push(this._snowflake);
    for (const s of all) {
      const t = s.stats();
      sum.idsServed += t.idsServed;
      sum.batches += t.batches;
      sum.idsReceived += t.idsReceived;
      sum.discardedIds += t.discardedIds;
      sum.failedRounds += t.failedRounds;
      sum.batchSize = Math.max(sum.batchSize, t.batchSize);
    }
    sum.failovers = this._servers.failovers;
    if (all.length === 0) sum.batchSize = this._batch;
    return sum;
  }

  /**
   * Each server's URL, whether it is up (not marked down), its failures in a row, and whether
   * it is the one asked first.
   * @returns {{url: string, up: boolean, failures: number, preferred: boolean}[]}
   */
  servers() {
    return this._servers.status();
  }

  /** Whether `close()` was called. */
  get closed() {
    return this._closed !== null;
  }

  /**
   * Stops everything: in-flight requests are aborted, probe and wait timers cleared, pooled
   * sockets closed; waiting `nextId` calls reject with `ClosedError`, later ones too. Resolves
   * once every background refill has ended. Idempotent.
   * @returns {Promise<void>}
   */
  close() {
    if (this._closed === null) {
      this._stopper.abort();
      this._servers.close();
      for (const s of this._segments.values()) s._close();
      for (const s of this._formatted.values()) s._close();
      this._snowflake?._close();
      this._closed = Promise.allSettled([...this._refills]).then(() => {
        this._servers.close(); // sockets a request opened while closing
      });
    }
    return this._closed;
  }

  /** `await using client = new Client(...)` closes it at the end of the scope. */
  [Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')]() {
    return this.close();
  }

  /**
   * @param {{path: string, tag: string | null}} request the range route and the tag
   * @param {number} routeMax the route's limit per request
   */
  _supply(request, routeMax) {
    const maxBatch = Math.min(this._maxBatch, routeMax);
    return new IdSupply({
      servers: this._servers,
      request,
      sizing: { batch: Math.min(this._batch, maxBatch), maxBatch, targetLifetimeMs: this._targetLifetimeMs },
      catchUpMax: routeMax,
      timing: this._timing,
      waitTimeoutMs: this._waitTimeoutMs,
      asString: this._asString,
      stop: this._stopper.signal,
      track: this._tracker(),
    });
  }

  /** Tells `close()` about each refill of a supply, so it can await them. */
  _tracker() {
    return (/** @type {Promise<void>} */ p) => {
      this._refills.add(p);
      p.finally(() => this._refills.delete(p));
    };
  }
}

/**
 * A server URL: `http://` or `https://`, host and optional port, no query or fragment; returned
 * without a trailing `/`.
 * @param {unknown} url
 */
function checkUrl(url) {
  if (typeof url !== 'string') throw new ConfigError(`not a URL: ${JSON.stringify(url)}`);
  let u;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`not a URL: ${JSON.stringify(url)}`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.search || u.hash || u.username) {
    throw new ConfigError(`not an http:// or https:// base URL: ${JSON.stringify(url)}`);
  }
  return url.replace(/\/+$/, '');
}
