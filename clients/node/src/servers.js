// The server list: which server a batch is asked from, failover, backoff and health probes.
//
// Batches go to the *preferred* server (the last one that answered). A server that fails (no
// answer within the request timeout, a refused or reset connection, a 5xx, a 4xx that is only
// its own such as `engine_disabled`, a 200 whose body is not a valid batch) is marked down and
// the next one is asked at once, in the same call. A down server is not asked again until a
// probe of its `/health/ready` answers 200; probes run after an exponential backoff
// (`backoffMinMs` doubling up to `backoffMaxMs`) counted from each failure. Only when every
// server is down does a fetch try the down ones too (last resort), so a client never stalls
// behind a probe schedule while a server could answer.
//
// The only ids that leave this module come from the body of a 200 that parsed and passed
// `validateRanges`; a failed or partial answer contributes nothing.

import http from 'node:http';
import https from 'node:https';

import { RejectedError, ServerFault, ThrottledError } from './errors.js';

/** Most ids one segment range request may ask for (the route's limit). */
export const MAX_SEGMENT_BATCH = 1_000_000;

/** Most ids one snowflake range request may ask for (the route's limit). */
export const MAX_SNOWFLAKE_BATCH = 100_000;

/** Largest batch size a client accepts (the segment route's limit). */
export const MAX_BATCH = MAX_SEGMENT_BATCH;

/** Largest id a leafid server can issue: 2^63 - 1. */
export const MAX_ID = (1n << 63n) - 1n;

/**
 * Largest body read from a server (a range body is a few runs; an error page is small; a list of
 * 100,000 formatted ids of at most 32 + 10 + 19 + 1 + 32 characters each is about 10 MB).
 */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

/**
 * The 4xx codes that refuse the request itself. The servers share one database, so every server
 * would answer the same: final, no failover. Any other 4xx (`engine_disabled`, a proxy's page,
 * 408, 429, ...) is that server's failure.
 */
export const REFUSAL_CODES = new Set([
  'unknown_biz_tag',
  'invalid_biz_tag',
  'biz_tag_exhausted',
  'invalid_count',
  'invalid_request',
  'formatted_tag',
  // The bounds route's refusal of a time range (empty, before the epoch, past the layout's end).
  'invalid_time_range',
]);

/**
 * Whether an error answer holds on every server (it reaches the caller as a `RejectedError`) or
 * is only this server's (the next one is asked): a 4xx whose code is in `REFUSAL_CODES`, or a
 * 503 `sequence_exhausted` (a formatted tag's period ran out of its width: every server answers
 * it until the next period). `clients/conformance/vectors/errors.json`.
 * @param {number} status
 * @param {string} code the body's code (`''` if none)
 * @returns {boolean}
 */
export function refusalIsFinal(status, code) {
  // The caller token refused by leafid itself: every server reads the same tokens.
  if (status === 401) return code === 'unauthorized';
  if (status === 403) return code === 'forbidden';
  if (status >= 400 && status < 500) return REFUSAL_CODES.has(code);
  return status === 503 && code === 'sequence_exhausted';
}

/**
 * Whether an error answer is leafid's 429 `quota_exhausted`: the caller token's quota is spent
 * on every server (they share it), so the client waits `Retry-After` and asks the same server
 * again (never another, never a failover); a proxy's 429 is a failover (action `wait` in
 * `clients/conformance/vectors/errors.json`).
 * @param {number} status
 * @param {string} code the body's code (`''` if none)
 * @returns {boolean}
 */
export function isQuotaWait(status, code) {
  return status === 429 && code === 'quota_exhausted';
}

/**
 * A `Retry-After` of whole seconds (leafid sends an integer >= 1) in milliseconds: 1000 when
 * absent or unreadable, so that a quota wait is never zero (no busy loop).
 * @param {string | string[] | undefined} header
 * @returns {number}
 */
export function retryAfterMs(header) {
  const text = Array.isArray(header) ? header[0] : header;
  const n = /^\s*[0-9]{1,9}\s*$/.test(text ?? '') ? Number(text) : 1;
  return Math.max(1, n) * 1000;
}

/**
 * The caller token's `Authorization` value per `Servers`: kept out of the object, so that
 * `util.inspect`, `console.log` and `JSON.stringify` of a client never show it.
 * @type {WeakMap<object, string>}
 */
const AUTHORIZATION = new WeakMap();

/**
 * Waits `ms`, or less if `stop` aborts first. Leaves no timer.
 * @param {number} ms
 * @param {AbortSignal} stop
 * @returns {Promise<void>}
 */
function pause(ms, stop) {
  return new Promise((resolve) => {
    if (stop.aborted) {
      resolve();
      return;
    }
    const done = () => {
      clearTimeout(timer);
      stop.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    stop.addEventListener('abort', done, { once: true });
  });
}

/** Most ids one request of the list route (a formatted supply's) may ask for. */
export const MAX_FORMATTED_BATCH = 100_000;

/** A canonical positive decimal of at most 19 digits (no sign, no leading zero). */
const DECIMAL = /^[1-9][0-9]{0,18}$/;

/**
 * The wait after `failures` failures in a row (at least 1): `min * 2^(failures-1)`, at most `max`.
 * @param {{backoffMinMs: number, backoffMaxMs: number}} timing
 * @param {number} failures
 */
export function backoff(timing, failures) {
  const doublings = Math.min(Math.max(failures - 1, 0), 30);
  return Math.min(timing.backoffMinMs * 2 ** doublings, timing.backoffMaxMs);
}

/**
 * One run of consecutive ids, both ends included (`first <= last`).
 * @typedef {{first: bigint, last: bigint}} Run
 */

/**
 * What a supply asks for: the route (no query), the tag (null: snowflake), and optionally the
 * rest of the query after `count=N` (default `&stringify_ids=true`) and the reader of a 200 body
 * (default `validateRanges`): it returns the batch, or a `Refusal` (a 200 that every server
 * would answer the same, e.g. a plain tag asked for text), or throws a string (that server's
 * failure). A request that is not for a count of ids (the bounds route) gives `target`, its
 * path and whole query, instead of `path` and `query`.
 * @template B
 * @typedef {{path: string, tag: string | null, query?: string, target?: string, read?: (body: unknown, asked: {count: number, tag: string | null}) => B | Refusal}} Request
 */

/** A 200 body that refuses the request itself (`RejectedError` with this code, no failover). */
export class Refusal {
  /**
   * @param {string} code
   * @param {string} message
   */
  constructor(code, message) {
    this.code = code;
    this.message = message;
  }
}

/**
 * Checks a parsed 200 body of a range route against the request: `ranges` is a non-empty array
 * of runs `{"first": "a", "last": "b"}` (decimal strings) with `0 < first <= last <= 2^63 - 1`,
 * increasing and not overlapping, whose sizes add up to `count`, itself within 1..=the count
 * asked; on the segment route `biz_tag` names the tag asked. Returns the runs (exact bigints)
 * and their total, or throws a string saying what is wrong.
 * @param {unknown} body
 * @param {{count: number, tag: string | null}} request
 * @returns {{runs: Run[], count: number}}
 */
export function validateRanges(body, request) {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw 'the body is not a JSON object';
  }
  const b = /** @type {{biz_tag?: unknown, count?: unknown, ranges?: unknown}} */ (body);
  if (request.tag !== null && b.biz_tag !== request.tag) {
    throw `asked for tag ${JSON.stringify(request.tag)}, got ${JSON.stringify(b.biz_tag)}`;
  }
  const count = b.count;
  if (typeof count !== 'number' || !Number.isInteger(count) || count < 1 || count > request.count) {
    throw `count ${JSON.stringify(count)} for ${request.count} ids asked`;
  }
  const raw = b.ranges;
  if (!Array.isArray(raw) || raw.length === 0) throw 'no "ranges" array of at least one run';
  /** @type {Run[]} */
  const runs = new Array(raw.length);
  let prev = 0n;
  let total = 0n;
  for (let i = 0; i < raw.length; i++) {
    const r = raw[i];
    const f = r?.first;
    const l = r?.last;
    if (typeof f !== 'string' || !DECIMAL.test(f) || typeof l !== 'string' || !DECIMAL.test(l)) {
      throw `run ${i} is not {"first","last"} of positive decimal strings: ${JSON.stringify(r)}`;
    }
    const first = BigInt(f);
    const last = BigInt(l);
    if (last > MAX_ID) throw `run ${i} ends at ${l}, above 2^63 - 1`;
    if (first > last) throw `run ${i} is empty: first ${f} above last ${l}`;
    if (first <= prev) throw `run ${i} starts at ${f}, not above the previous run's last ${prev}`;
    total += last - first + 1n;
    runs[i] = { first, last };
    prev = last;
  }
  if (total !== BigInt(count)) throw `runs hold ${total} ids, count says ${count}`;
  // `"strict": true` (issue 45): the tag is strict, its supply turns to pass-through. Only a
  // JSON true counts (the field is absent for other tags).
  return /** @type {{strict?: unknown}} */ (b).strict === true ? { runs, count, strict: true } : { runs, count };
}

/**
 * One GET: resolves with the status and the body text, rejects on a transport failure. The
 * timeout covers connect to last byte; `stop` aborts it (client closed). Leaves no timer.
 * @param {string} url
 * @param {http.Agent} agent
 * @param {number} timeoutMs
 * @param {AbortSignal} stop
 * @param {string} [authorization] the `Authorization` header, if any
 * @returns {Promise<{status: number, body: string, retryAfter: string | string[] | undefined}>}
 */
function get(url, agent, timeoutMs, stop, authorization) {
  return new Promise((resolve, reject) => {
    if (stop.aborted) {
      reject(new Error('client closed'));
      return;
    }
    let done = false;
    /** @type {NodeJS.Timeout | undefined} */
    let timer;
    /** @param {(() => void)} settle */
    const finish = (settle) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      stop.removeEventListener('abort', onStop);
      settle();
    };
    // Every way out settles the promise itself: a destroyed request may emit nothing more.
    /** @param {Error} e */
    const fail = (e) => {
      finish(() => reject(e));
      req.destroy(e);
    };
    const onStop = () => fail(new Error('client closed'));
    const mod = url.startsWith('https:') ? https : http;
    /** @type {Record<string, string>} */
    const headers = { accept: 'application/json' };
    if (authorization !== undefined) headers.authorization = authorization;
    const req = mod.get(url, { agent, headers }, (res) => {
      let body = '';
      let size = 0;
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        size += chunk.length;
        if (size > MAX_BODY_BYTES) fail(new Error(`body larger than ${MAX_BODY_BYTES} bytes`));
        else body += chunk;
      });
      res.on('end', () => finish(() => resolve({ status: res.statusCode ?? 0, body, retryAfter: res.headers['retry-after'] })));
      res.on('error', (e) => finish(() => reject(e)));
      res.on('close', () => finish(() => reject(new Error('connection closed before the body ended'))));
    });
    req.on('error', (e) => {
      // A pooled keep-alive socket the server closed just as it was reused: not the server's
      // failure (the caller may retry once on a new connection).
      if (req.reusedSocket) /** @type {any} */ (e).reusedSocket = true;
      finish(() => reject(e));
    });
    req.on('close', () => finish(() => reject(new Error('connection closed without an answer'))));
    timer = setTimeout(() => fail(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
    stop.addEventListener('abort', onStop, { once: true });
  });
}

/** One server and its health. */
class Server {
  /** @param {string} base base URL without a trailing `/` */
  constructor(base) {
    /** Base URL without a trailing `/`. */
    this.base = base;
    /**
     * Set by a failed request or probe; cleared only by a 200 (a probe's or a request's) to a
     * request sent after the last failure.
     */
    this.down = false;
    /**
     * Times it was marked down: a 200 to a request sent before the latest failure (an answer in
     * flight when the server was killed) is older news than that failure and does not mark it up.
     */
    this.downs = 0;
    /** Failures in a row (requests and probes): the probe backoff doubles with each. */
    this.failures = 0;
    /** The pending probe, while down and no probe runs. @type {NodeJS.Timeout | null} */
    this.probeTimer = null;
    /** True while a probe request runs: its outcome schedules the next one. */
    this.probing = false;
  }
}

/**
 * The servers of one client: failover and health. Every method keeps to one event-loop turn
 * between awaits, so no lock is needed.
 */
export class Servers {
  /**
   * @param {string[]} bases base URLs, checked by the client
   * @param {{requestTimeoutMs: number, probeTimeoutMs: number, backoffMinMs: number, backoffMaxMs: number}} timing
   * @param {AbortSignal} stop aborted by `close()`: in-flight requests are destroyed
   * @param {{token?: string, waitTimeoutMs?: number}} [auth] the caller token sent on every
   *   batch and bounds request (never on the health probe), and the longest a fetch waits out
   *   429 `quota_exhausted` answers (the client's wait timeout)
   */
  constructor(bases, timing, stop, auth) {
    if (auth?.token !== undefined) AUTHORIZATION.set(this, `Bearer ${auth.token}`);
    /** The longest one fetch waits for 429 `quota_exhausted`, in milliseconds. */
    this.quotaWaitMs = auth?.waitTimeoutMs ?? 0;
    /** The servers, in the order given: the first is preferred at start. */
    this.list = bases.map((b) => new Server(b));
    /** Index of the server that answered last: asked first. */
    this.preferred = 0;
    /** Times a request went to another server because the one asked failed. */
    this.failovers = 0;
    this.timing = timing;
    this.stop = stop;
    /** Keep-alive pools, destroyed by `close()` so no socket outlives the client. */
    this.httpAgent = new http.Agent({ keepAlive: true });
    this.httpsAgent = new https.Agent({ keepAlive: true });
  }

  /** @param {string} url */
  agentFor(url) {
    return url.startsWith('https:') ? this.httpsAgent : this.httpAgent;
  }

  /**
   * One batch of at most `count` ids (or one answer of `request.target`): the preferred server
   * first, then the other up servers in order, then (last resort) the down ones.
   * @template [B={runs: Run[], count: number}]
   * @param {Request<B>} request the route (no query), the tag, and how its body is read
   * @param {number} count ids asked for
   * @returns {Promise<(B & {server: string}) | {rejected: RejectedError | ThrottledError} | {fault: ServerFault | null}>}
   */
  async fetch(request, count) {
    const n = this.list.length;
    // A wait for 429 quota_exhausted ends by this instant or not at all.
    const deadline = performance.now() + this.quotaWaitMs;
    const start = this.preferred % n;
    const tried = new Array(n).fill(false);
    /** @type {ServerFault | null} */
    let last = null;
    for (const lastResort of [false, true]) {
      for (let k = 0; k < n; k++) {
        const i = (start + k) % n;
        const server = this.list[i];
        if (tried[i] || (!lastResort && server.down)) continue;
        if (this.stop.aborted) return { fault: last };
        tried[i] = true;
        if (last !== null) this.failovers++;
        const seen = server.downs;
        let outcome = await this.ask(server, request, count);
        // 429 quota_exhausted: the same server again after its Retry-After, never another
        // (every server shares the quota) and no failover counted; a wait that would end past
        // the deadline is the caller's ThrottledError. Bounded: each round waits at least 1 s and
        // the deadline ends the loop.
        while ('throttled' in outcome) {
          this.preferred = i;
          const th = outcome.throttled;
          if (performance.now() + th.retryAfterMs > deadline) return { rejected: th };
          await pause(th.retryAfterMs, this.stop);
          if (this.stop.aborted) return { fault: last };
          outcome = await this.ask(server, request, count);
        }
        if ('rejected' in outcome) return outcome;
        if ('fault' in outcome) {
          if (!this.stop.aborted) this.markDown(server);
          last = outcome.fault;
          continue;
        }
        if (this.markUp(server, seen)) this.preferred = i;
        return outcome;
      }
    }
    return { fault: last };
  }

  /**
   * One request to one server.
   * @template B
   * @param {Server} server
   * @param {Request<B>} request
   * @param {number} count
   * @returns {Promise<(B & {server: string}) | {rejected: RejectedError} | {throttled: ThrottledError} | {fault: ServerFault}>}
   */
  async ask(server, request, count) {
    const url = server.base + (request.target ?? `${request.path}?count=${count}${request.query ?? '&stringify_ids=true'}`);
    let res;
    for (let attempt = 0; ; attempt++) {
      try {
        res = await get(url, this.agentFor(url), this.timing.requestTimeoutMs, this.stop, AUTHORIZATION.get(this));
        break;
      } catch (e) {
        // A reused keep-alive socket that turned out closed (the server's idle timeout raced
        // the request): once more on a fresh connection. A GET that the server did serve costs
        // at most a gap, never a duplicate: its ids were never received.
        if (attempt === 0 && staleSocket(e) && !this.stop.aborted) continue;
        return { fault: new ServerFault(server.base, 'transport', errorText(e)) };
      }
    }
    if (res.status !== 200) {
      const { code, message } = parseErrorBody(res.body);
      if (refusalIsFinal(res.status, code)) {
        return { rejected: new RejectedError(server.base, res.status, code, message) };
      }
      if (isQuotaWait(res.status, code)) {
        return { throttled: new ThrottledError(server.base, code, message, retryAfterMs(res.retryAfter)) };
      }
      return { fault: new ServerFault(server.base, 'status', `${res.status}${code ? ` ${code}` : ''}`) };
    }
    try {
      const read = request.read ?? validateRanges;
      const got = read(JSON.parse(res.body), { count, tag: request.tag });
      if (got instanceof Refusal) {
        return { rejected: new RejectedError(server.base, res.status, got.code, got.message) };
      }
      return { .../** @type {B} */ (got), server: server.base };
    } catch (e) {
      return { fault: new ServerFault(server.base, 'bad_response', errorText(e)) };
    }
  }

  /**
   * Up after a 200 to a request sent when `server.downs` was `seen`, unless it was marked down
   * since; returns whether it is marked up.
   * @param {Server} server
   * @param {number} seen
   * @returns {boolean}
   */
  markUp(server, seen) {
    if (server.downs !== seen) return false;
    server.down = false;
    server.failures = 0;
    if (server.probeTimer !== null) {
      clearTimeout(server.probeTimer);
      server.probeTimer = null;
    }
    return true;
  }

  /**
   * Down, next probe after `backoff(failures)`.
   * @param {Server} server
   */
  markDown(server) {
    server.down = true;
    server.downs++;
    server.failures++;
    if (server.probing || this.stop.aborted) return; // the running probe schedules the next
    if (server.probeTimer !== null) clearTimeout(server.probeTimer);
    server.probeTimer = setTimeout(() => {
      server.probeTimer = null;
      this.probe(server);
    }, backoff(this.timing, server.failures));
  }

  /**
   * Probes `/health/ready`: a 200 brings the server back, anything else backs off further.
   * @param {Server} server
   */
  async probe(server) {
    if (!server.down || this.stop.aborted) return;
    server.probing = true;
    const seen = server.downs;
    let ok = false;
    try {
      const url = `${server.base}/health/ready`;
      const res = await get(url, this.agentFor(url), this.timing.probeTimeoutMs, this.stop);
      ok = res.status === 200;
    } catch {
      ok = false;
    }
    server.probing = false;
    if (this.stop.aborted) return;
    if (ok) this.markUp(server, seen);
    else if (server.down) this.markDown(server);
  }

  /** Each server's URL and health. */
  status() {
    return this.list.map((s, i) => ({
      url: s.base,
      up: !s.down,
      failures: s.failures,
      preferred: i === this.preferred % this.list.length,
    }));
  }

  /** Clears every probe timer and closes every pooled socket (`stop` is already aborted). */
  close() {
    for (const s of this.list) {
      if (s.probeTimer !== null) clearTimeout(s.probeTimer);
      s.probeTimer = null;
    }
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

/**
 * The error body (`{"code", "message"}`), read leniently: a body that is not leafid's gives an
 * empty code (so a 4xx from a proxy is that server's failure, not a refusal).
 * @param {string} text
 */
function parseErrorBody(text) {
  try {
    const v = JSON.parse(text);
    if (v !== null && typeof v === 'object') {
      return {
        code: typeof v.code === 'string' ? v.code : '',
        message: typeof v.message === 'string' ? v.message : '',
      };
    }
  } catch {
    // not JSON
  }
  return { code: '', message: '' };
}

/**
 * Whether `e` is a pooled connection found closed when reused.
 * @param {unknown} e
 */
function staleSocket(e) {
  const x = /** @type {{reusedSocket?: boolean, code?: string}} */ (e);
  return x?.reusedSocket === true && (x.code === 'ECONNRESET' || x.code === 'EPIPE');
}

/** @param {unknown} e */
function errorText(e) {
  if (typeof e === 'string') return e;
  if (e instanceof Error) {
    const code = /** @type {{code?: string}} */ (e).code;
    return code && !e.message.includes(code) ? `${code}: ${e.message}` : e.message;
  }
  return String(e);
}
