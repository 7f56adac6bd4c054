// Benchmarks of the Node client, run by bench.sh (see there for the environment). Prints one
// `BENCH {...}` line per case on stdout, everything else on stderr.
//
// - local: `supply.tryNextId()` on a supply holding one huge range (no server, no fetch), against
//   a plain bigint counter (`n += 1n`: the type of the ids the client returns), in the same
//   warmed loop shape, same ids per round, baseline and subject alternated; median of the rounds.
// - local_await: the same with `await supply.nextId()` (one promise per id), against the same
//   plain bigint counter.
// - formatted_local: a formatted supply's `tryNextId()` (one index step, one read of the wall
//   clock against the batch's period end, one array read) from a local batch of 1,000,000 texts
//   (a fresh supply per round over the same list), against the numeric local path (`local`'s
//   `tryNextId()`) in the same rounds.
// - sustained_1: one task taking ids on a fresh client (default settings: batch 1000, the demand
//   rule on) for LEAFID_BENCH_SECS against the server, every fetch included, the way Node code
//   takes ids fastest: `tryNextId() ?? await nextId()` (synchronous while the local ranges last,
//   awaiting only for a fetch); baseline: the bigint counter counting for 1 s in the same run.
// - sustained_1_await: the same with `await nextId()` for every id.
// Node runs one client on one thread: no sustained_4.

import { Client, FormattedSupply, IdSupply } from '../src/index.js';
import { MAX_SEGMENT_BATCH } from '../src/servers.js';

const url = process.env.LEAFID_BENCH_URL;
const tag = process.env.LEAFID_BENCH_TAG;
const secs = Number(process.env.LEAFID_BENCH_SECS ?? 10);
if (!url || !tag || !(secs > 0)) {
  console.error('bench.js: set LEAFID_BENCH_URL, LEAFID_BENCH_TAG and (optionally) LEAFID_BENCH_SECS > 0');
  process.exit(2);
}

const N = 2_000_000;
const ROUNDS = 9;

/** Keeps results alive, so no loop is optimized away. */
let sink = 0n;

/** A supply holding one run of 2^62 ids that never contacts a server. */
function prefilled() {
  return new IdSupply({
    servers: null,
    request: { path: '', tag: 'bench' },
    sizing: { batch: 1000, maxBatch: MAX_SEGMENT_BATCH, targetLifetimeMs: 1000 },
    catchUpMax: MAX_SEGMENT_BATCH,
    timing: { backoffMinMs: 1, backoffMaxMs: 1 },
    waitTimeoutMs: 1,
    asString: false,
    stop: new AbortController().signal,
    runs: [{ first: 1n, last: 1n << 62n }],
  });
}

/** `N` steps of a plain bigint counter; milliseconds. */
function counter() {
  let n = 0n;
  let last = 0n;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    n += 1n;
    last = n;
  }
  const ms = performance.now() - t0;
  sink += last;
  return ms;
}

/** `N` ids of `tryNextId()`; milliseconds. @param {IdSupply} s */
function tryNext(s) {
  let last = 0n;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    last = /** @type {bigint} */ (s.tryNextId());
  }
  const ms = performance.now() - t0;
  sink += last;
  return ms;
}

/** `N` ids of `await nextId()`; milliseconds. @param {IdSupply} s */
async function awaitNext(s) {
  let last = 0n;
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    last = /** @type {bigint} */ (await s.nextId());
  }
  const ms = performance.now() - t0;
  sink += last;
  return ms;
}

/** The texts of the formatted rounds: order numbers as a daily tag writes them. */
const TEXTS = Array.from({ length: 1_000_000 }, (_, i) => `ORD-20261127${String(i + 1).padStart(8, '0')}`);

/** A formatted supply holding `TEXTS` (its period ends in a day), no server. */
function prefilledTexts() {
  return new FormattedSupply({
    tag: 'bench',
    clock: Date.now,
    servers: null,
    sizing: { batch: 1000, maxBatch: 100_000, targetLifetimeMs: 1000 },
    timing: { backoffMinMs: 1, backoffMaxMs: 1 },
    waitTimeoutMs: 1,
    stop: new AbortController().signal,
    first: { ids: TEXTS, periodEnd: Date.now() + 86_400_000 },
  });
}

/** Every text of a fresh formatted supply by `tryNextId()`; nanoseconds per id. */
function tryNextText() {
  const s = prefilledTexts();
  const n = TEXTS.length;
  let last = '';
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    last = /** @type {string} */ (s.tryNextId());
  }
  const ms = performance.now() - t0;
  if (last !== TEXTS[n - 1]) throw new Error(`formatted bench: ended at ${last}`);
  return (ms * 1e6) / n;
}

/** @param {number[]} xs */
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/**
 * @param {string} name
 * @param {number} idsPerS
 * @param {number} baselinePerS
 * @param {string} method
 */
function report(name, idsPerS, baselinePerS, method) {
  const line = {
    client: 'node',
    case: name,
    ids_per_s: Math.round(idsPerS),
    baseline_per_s: Math.round(baselinePerS),
    ratio: Number((idsPerS / baselinePerS).toFixed(3)),
    method,
  };
  process.stdout.write(`BENCH ${JSON.stringify(line)}\n`);
}

// 1. Local: warm up every loop, then alternate baseline and subject.
{
  const s = prefilled();
  for (let w = 0; w < 3; w++) {
    counter();
    tryNext(s);
    await awaitNext(s);
  }
  const base = [];
  const sync = [];
  const asynch = [];
  for (let r = 0; r < ROUNDS; r++) {
    base.push(counter());
    sync.push(tryNext(s));
    base.push(counter());
    asynch.push(await awaitNext(s));
  }
  const perS = (/** @type {number} */ ms) => (N * 1000) / ms;
  const b = perS(median(base));
  report('local', perS(median(sync)), b,
    `warmed loop, node ${process.version}: tryNextId() from one local range vs a plain bigint counter (n += 1n), ${N} ids, median of ${ROUNDS} alternated rounds`);
  report('local_await', perS(median(asynch)), b,
    `warmed loop, node ${process.version}: await nextId() from one local range (one promise per id) vs a plain bigint counter (n += 1n), ${N} ids, median of ${ROUNDS} alternated rounds`);
}

// 1b. Formatted local: the formatted path against the numeric one, alternated.
{
  const s = prefilled();
  for (let w = 0; w < 3; w++) {
    tryNext(s);
    tryNextText();
  }
  const numeric = [];
  const texts = [];
  for (let r = 0; r < ROUNDS; r++) {
    numeric.push((tryNext(s) * 1e6) / N);
    texts.push(tryNextText());
  }
  report('formatted_local', 1e9 / median(texts), 1e9 / median(numeric),
    'formatted next_id vs numeric next_id');
  console.error(`formatted_local: node ${process.version}, warmed loop: tryNextId() of a formatted supply over ${TEXTS.length} local texts (the ended bit checked per id, no clock read) vs tryNextId() of a numeric supply over one local range (${N} ids), median of ${ROUNDS} alternated rounds`);
}

// 2. Sustained: the counter for 1 s, then a fresh client per case for `secs` against the server.
let baseline;
{
  let n = 0n;
  let count = 0;
  const t0 = performance.now();
  const end = t0 + 1000;
  while (performance.now() < end) {
    for (let i = 0; i < 1000; i++) n += 1n;
    count += 1000;
  }
  baseline = (count * 1000) / (performance.now() - t0);
  sink += n;
}

/**
 * Ids per second one task takes from a fresh client (default settings) in `secs`.
 * @param {string} name
 * @param {boolean} sync take with `tryNextId()` first, `await nextId()` only when it has none
 */
async function sustained(name, sync) {
  const c = new Client({ servers: [/** @type {string} */ (url)] });
  const s = c.segment(/** @type {string} */ (tag));
  let ids = 0;
  let last = 0n;
  const t0 = performance.now();
  const stop = t0 + secs * 1000;
  try {
    while (performance.now() < stop) {
      if (sync) {
        for (let i = 0; i < 1000; i++) last = /** @type {bigint} */ (s.tryNextId() ?? (await s.nextId()));
      } else {
        for (let i = 0; i < 1000; i++) last = /** @type {bigint} */ (await s.nextId());
      }
      ids += 1000;
    }
  } finally {
    await c.close();
  }
  const rate = (ids * 1000) / (performance.now() - t0);
  sink += last;
  const st = c.stats();
  console.error(`${name}: ${ids} ids, ${st.batches} batches, next size ${st.batchSize}`);
  return rate;
}

report('sustained_1', await sustained('sustained_1', true), baseline,
  `one task on a fresh client (defaults) for ${secs} s, fetches included: tryNextId() ?? await nextId(), vs a plain bigint counter (n += 1n) counting for 1 s`);
report('sustained_1_await', await sustained('sustained_1_await', false), baseline,
  `one task on a fresh client (defaults) for ${secs} s, fetches included: await nextId() for every id (one promise each), vs a plain bigint counter (n += 1n) counting for 1 s`);

if (sink === -1n) console.error('');
