// The snowflake bounds helper (clients/conformance/PROTOCOL.md "Snowflake bounds"): the smallest
// and largest id any worker can issue in a time range `[from, to)`, from
// `GET /api/v1/snowflake/bounds?from=..&to=..&stringify_ids=true`, for
// `WHERE id BETWEEN minId AND maxId`.
//
// The request goes through the client's server list exactly like a batch request: the preferred
// server first, a server that fails (timeout, refused or reset connection, 5xx, a 4xx of its own
// such as `engine_disabled`, a 200 whose body is not a valid answer) is marked down and the next
// one is asked at once; rounds in which no server answered are retried with the probe backoff
// until the wait timeout, then `UnavailableError`. A 4xx `invalid_time_range` (an empty range,
// one before the layout's epoch or past its end) or `invalid_request` is the client's
// `RejectedError`: every server would answer the same, so no failover.

import { setTimeout as sleep } from 'node:timers/promises';

import { ClosedError, UnavailableError } from './errors.js';
import { backoff, MAX_ID } from './servers.js';

/**
 * A canonical decimal of at most 19 digits. `0` is allowed: it is no id a server issues, but it
 * is the true lower bound of a range that starts in the layout's first tick (a plain layout's
 * epoch: tick 0, worker 0, sequence 0), which every server answers the same.
 */
const BOUND = /^(0|[1-9][0-9]{0,18})$/;

/**
 * An instant as the route takes it: RFC 3339 UTC with milliseconds and `Z`
 * (`2026-11-27T00:00:00.000Z`). Throws `TypeError` for anything but a valid `Date`.
 * @param {string} name `from` or `to`, for the message
 * @param {unknown} d
 * @returns {string}
 */
export function rfc3339(name, d) {
  if (!(d instanceof Date) || !Number.isFinite(d.getTime())) {
    throw new TypeError(`snowflakeBounds: ${name} must be a valid Date (got ${d instanceof Date ? 'an invalid Date' : typeof d})`);
  }
  // Years 0..9999 give exactly YYYY-MM-DDTHH:mm:ss.sssZ; any other year (±YYYYYY) is not RFC
  // 3339, and the server refuses it as invalid_time_range, as it lies outside every layout.
  return d.toISOString();
}

/**
 * Reads a 200 body of the bounds route: `min_id` and `max_id` decimal strings within
 * `0..=2^63 - 1` (0 only as the bound of the layout's first tick, see `BOUND`) and
 * `min_id <= max_id`. Returns them as bigints, or throws a string (that server's failure).
 * Negative, fractional, numeric (not a string) or out-of-range values are refused.
 * @param {unknown} body
 * @returns {{minId: bigint, maxId: bigint}}
 */
export function readBounds(body) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw 'the body is not a JSON object';
  }
  const b = /** @type {{min_id?: unknown, max_id?: unknown}} */ (body);
  /** @param {string} name @param {unknown} v */
  const id = (name, v) => {
    if (typeof v !== 'string' || !BOUND.test(v)) throw `${name} ${JSON.stringify(v)} is not a decimal string within 0..=2^63 - 1`;
    const n = BigInt(v);
    if (n > MAX_ID) throw `${name} ${v} is above 2^63 - 1`;
    return n;
  };
  const minId = id('min_id', b.min_id);
  const maxId = id('max_id', b.max_id);
  if (minId > maxId) throw `min_id ${minId} is above max_id ${maxId}`;
  return { minId, maxId };
}

/**
 * The bounds of `[from, to)` from the servers (see the file's comment).
 * @param {import('./servers.js').Servers} servers
 * @param {Date} from
 * @param {Date} to
 * @param {{waitTimeoutMs: number, timing: {backoffMinMs: number, backoffMaxMs: number}, stop: AbortSignal, track: (p: Promise<void>) => void}} client
 *   the client's wait timeout, backoff, close signal, and its tracker of running requests
 * @param {{signal?: AbortSignal, timeoutMs?: number}} [options]
 * @returns {Promise<{minId: bigint, maxId: bigint}>}
 */
export async function snowflakeBounds(servers, from, to, client, options) {
  const query = new URLSearchParams({ from: rfc3339('from', from), to: rfc3339('to', to), stringify_ids: 'true' });
  /** @type {import('./servers.js').Request<{minId: bigint, maxId: bigint}>} */
  const request = { path: '/api/v1/snowflake/bounds', tag: null, target: `/api/v1/snowflake/bounds?${query}`, read: readBounds };
  const signal = options?.signal;
  const waitMs = options?.timeoutMs ?? client.waitTimeoutMs;
  const started = performance.now();
  const deadline = started + waitMs;
  /** @type {import('./errors.js').ServerFault | null} */
  let last = null;
  for (let failures = 1; ; failures++) {
    if (signal?.aborted) throw signal.reason;
    if (client.stop.aborted) throw new ClosedError();
    const round = servers.fetch(request, 0);
    client.track(round.then(() => {}));
    const got = await within(round, deadline - performance.now(), signal);
    if (client.stop.aborted) throw new ClosedError();
    if (got === undefined) throw new UnavailableError(waitMs, performance.now() - started, last, true);
    if ('rejected' in got) throw got.rejected;
    if (!('fault' in got)) return { minId: got.minId, maxId: got.maxId };
    last = got.fault ?? last;
    const wait = backoff(client.timing, failures);
    if (performance.now() + wait >= deadline) throw new UnavailableError(waitMs, performance.now() - started, last, false);
    // The backoff, cut short by the caller's signal or by close() (no AbortSignal.any: Node 20.0).
    const pause = new AbortController();
    const cut = () => pause.abort();
    signal?.addEventListener('abort', cut, { once: true });
    client.stop.addEventListener('abort', cut, { once: true });
    try {
      await sleep(wait, undefined, { signal: pause.signal });
    } catch {
      if (signal?.aborted) throw signal.reason;
      throw new ClosedError();
    } finally {
      signal?.removeEventListener('abort', cut);
      client.stop.removeEventListener('abort', cut);
    }
  }
}

/**
 * `p`'s value, or `undefined` once `ms` passed first; rejects with `signal`'s reason on abort.
 * Leaves no timer or listener behind.
 * @template T
 * @param {Promise<T>} p
 * @param {number} ms
 * @param {AbortSignal | undefined} signal
 * @returns {Promise<T | undefined>}
 */
function within(p, ms, signal) {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const onAbort = () => {
      cleanup();
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      cleanup();
      resolve(undefined);
    }, Math.max(ms, 0));
    signal?.addEventListener('abort', onAbort, { once: true });
    p.then(
      (v) => {
        cleanup();
        resolve(v);
      },
      (e) => {
        cleanup();
        reject(e);
      },
    );
  });
}
