// The conformance adapter (clients/conformance/PROTOCOL.md): reads one JSON command per line on
// stdin, answers one JSON line on stdout. It only translates commands into calls of the
// client's public API; everything it reports comes from the client.

import readline from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client, LeafidError } from '../src/index.js';

/** @type {Client | null} */
let client = null;

/** @param {object} v */
function answer(v) {
  process.stdout.write(JSON.stringify(v) + '\n');
}

/**
 * The protocol's error kind and code for an error of the client.
 * @param {unknown} e
 */
function classify(e) {
  if (e instanceof LeafidError && ['rejected', 'throttled', 'unavailable', 'invalid_tag', 'config'].includes(e.kind)) {
    const coded = e.kind === 'rejected' || e.kind === 'throttled';
    return { kind: e.kind, code: coded ? /** @type {any} */ (e).code : '' };
  }
  return { kind: 'internal', code: '' };
}

/** @param {unknown} e */
function failure(e) {
  const { kind, code } = classify(e);
  return { ok: false, error: { kind, code, message: e instanceof Error ? e.message : String(e) } };
}

/**
 * The system clock moved by `offsetMs` milliseconds (the `open` command's `clock_offset_ms`).
 * @param {number} offsetMs
 */
function offsetClock(offsetMs) {
  if (typeof offsetMs !== 'number' || !Number.isFinite(offsetMs)) {
    throw new Error(`clock_offset_ms must be a number, got ${JSON.stringify(offsetMs)}`);
  }
  return () => Date.now() + offsetMs;
}

/** @param {any} cmd */
async function open(cmd) {
  if (client !== null) await client.close();
  client = null;
  client = new Client({
    servers: cmd.servers,
    batch: cmd.batch,
    requestTimeoutMs: cmd.request_timeout_ms,
    waitTimeoutMs: cmd.wait_timeout_ms,
    backoffMinMs: cmd.backoff_min_ms,
    backoffMaxMs: cmd.backoff_max_ms,
    ...(cmd.max_batch !== undefined ? { maxBatch: cmd.max_batch } : {}),
    ...(cmd.target_lifetime_ms !== undefined ? { targetLifetimeMs: cmd.target_lifetime_ms } : {}),
    // The period rule's wall clock through the client's public hook: the system clock + O ms.
    ...(cmd.clock_offset_ms !== undefined ? { clock: offsetClock(cmd.clock_offset_ms) } : {}),
    ...(typeof cmd.token === 'string' ? { token: cmd.token } : {}),
    ids: 'string',
  });
  return { ok: true };
}

/** @param {any} cmd */
async function take(cmd) {
  const c = needClient();
  /** One call of the engine asked for: segment, snowflake, or formatted (texts as received). */
  let call;
  if (cmd.engine === 'snowflake') call = () => c.nextSnowflakeId();
  else if (cmd.engine === 'segment') call = () => c.nextId(cmd.tag);
  else if (cmd.engine === 'formatted') call = () => c.nextFormattedId(cmd.tag);
  else throw new Error(`unknown engine ${JSON.stringify(cmd.engine)}`);
  const pause = cmd.pause_ms ?? 0;
  /** @type {Map<string, {kind: string, code: string, count: number}>} */
  const errors = new Map();
  // The longest single nextId call of any caller, in milliseconds (max_call_ms).
  let slowest = 0;
  const ids = await Promise.all(
    Array.from({ length: cmd.callers }, async () => {
      /** @type {string[]} */
      const mine = [];
      for (let i = 0; i < cmd.per_caller; i++) {
        const began = performance.now();
        try {
          mine.push(String(await call()));
        } catch (e) {
          const { kind, code } = classify(e);
          const key = `${kind}\u0000${code}`;
          const g = errors.get(key) ?? { kind, code, count: 0 };
          g.count++;
          errors.set(key, g);
          if (g.count === 1) {
            const what = kind === 'internal' && e instanceof Error ? e.stack : String(e);
            process.stderr.write(`take: first ${kind} error: ${what}; servers: ${JSON.stringify(c.servers())}; stats: ${JSON.stringify(c.stats())}\n`);
          }
        }
        slowest = Math.max(slowest, performance.now() - began);
        if (pause > 0) await sleep(pause);
      }
      return mine;
    }),
  );
  return { ok: true, ids, errors: [...errors.values()], max_call_ms: slowest };
}

/**
 * `bounds`: the client's snowflake bounds helper for `[from, to)`, the instants as `Date`s.
 * @param {any} cmd
 */
async function bounds(cmd) {
  const b = await needClient().snowflakeBounds(new Date(cmd.from), new Date(cmd.to));
  return { ok: true, min_id: String(b.minId), max_id: String(b.maxId) };
}

function stats() {
  const s = needClient().stats();
  return {
    ok: true,
    ids_served: s.idsServed,
    batches: s.batches,
    failovers: s.failovers,
    discarded_ids: s.discardedIds,
    batch_size: s.batchSize,
  };
}

function needClient() {
  if (client === null) throw new Error('no client: send "open" first');
  return client;
}

const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of rl) {
  if (line.trim() === '') continue;
  let cmd;
  try {
    cmd = JSON.parse(line);
  } catch (e) {
    answer(failure(new Error(`not JSON: ${line}`)));
    continue;
  }
  if (cmd.op === 'close') {
    if (client !== null) await client.close();
    answer({ ok: true });
    rl.close();
    process.stdin.destroy();
    // Nothing of the client runs any more: the process ends by itself. If it does not, that is
    // a defect of close(): say what is left, and fail.
    setTimeout(() => {
      process.stderr.write(`still running 5 s after close: ${process.getActiveResourcesInfo()}\n`);
      process.exit(1);
    }, 5000).unref();
    break;
  }
  try {
    switch (cmd.op) {
      case 'open':
        answer(await open(cmd));
        break;
      case 'take':
        answer(await take(cmd));
        break;
      case 'bounds':
        answer(await bounds(cmd));
        break;
      case 'stats':
        answer(stats());
        break;
      default:
        answer(failure(new Error(`unknown op ${JSON.stringify(cmd.op)}`)));
    }
  } catch (e) {
    answer(failure(e));
  }
}
