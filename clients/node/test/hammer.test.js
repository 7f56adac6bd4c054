// The local path under concurrency: many tasks on one client, batches so small that runs and
// batches switch all the time; no id twice, each caller's ids increasing, and linearizable (a
// call that starts after another returned gets a larger id). Also: the size follows demand.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setImmediate as yieldToIo } from 'node:timers/promises';

import { Client } from '../src/index.js';
import { assertIncreasing, assertUnique } from './support/ids.js';
import { createTag, LeafidServer, tempDatabase } from './support/server.js';

const T = { timeout: 60000 };

let db;
/** @type {LeafidServer} */
let server;

before(async () => {
  db = tempDatabase();
  server = await LeafidServer.start(db.url);
  // Segments of 7 ids: a batch of up to 20 crosses segments, so its runs are several.
  await createTag(server.address, 'hammer', 7);
  await createTag(server.address, 'demand', 1000);
});

after(async () => {
  await server.kill9();
  db.remove();
});

/**
 * `tasks` concurrent callers, `perTask` calls each, mixing `await nextId()`, the synchronous
 * `tryNextId()` (falling back to `nextId()` when it has nothing) and yields to I/O; each call
 * recorded with its start and end on the monotonic clock.
 * @param {import('../src/index.js').IdSupply} supply
 */
async function hammer(supply, tasks, perTask) {
  /** @type {{start: bigint, end: bigint, id: bigint}[]} */
  const calls = [];
  const lists = await Promise.all(
    Array.from({ length: tasks }, async (_, t) => {
      /** @type {bigint[]} */
      const mine = [];
      for (let i = 0; i < perTask; i++) {
        const start = process.hrtime.bigint();
        let id;
        if ((i + t) % 3 === 0) {
          id = supply.tryNextId() ?? (await supply.nextId());
        } else {
          id = await supply.nextId();
        }
        const end = process.hrtime.bigint();
        const v = /** @type {bigint} */ (id);
        calls.push({ start, end, id: v });
        mine.push(v);
        if ((i * 7 + t) % 5 === 0) await yieldToIo();
      }
      return mine;
    }),
  );
  return { lists, calls };
}

/**
 * Linearizability: if call A ended before call B started, A's id is below B's.
 * @param {{start: bigint, end: bigint, id: bigint}[]} calls
 */
function assertLinearizable(calls) {
  const byEnd = [...calls].sort((x, y) => (x.end < y.end ? -1 : x.end > y.end ? 1 : 0));
  // prefixMax[k]: the largest id of the k+1 calls that ended first.
  const prefixMax = [];
  let m = 0n;
  for (const c of byEnd) {
    if (c.id > m) m = c.id;
    prefixMax.push(m);
  }
  for (const b of calls) {
    // Calls that ended strictly before b started: byEnd[0..lo).
    let lo = 0;
    let hi = byEnd.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (byEnd[mid].end < b.start) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0 && prefixMax[lo - 1] >= b.id) {
      assert.fail(`call returning ${b.id} started after a call that returned ${prefixMax[lo - 1]} had ended`);
    }
  }
}

for (const engine of ['segment', 'snowflake']) {
  test(`${engine}: 8 tasks hammer one client with batches of 5..20: unique, increasing, linearizable`, T, async () => {
    const c = new Client({ servers: [server.address], batch: 5, maxBatch: 20, targetLifetimeMs: 1 });
    const supply = engine === 'segment' ? c.segment('hammer') : c.snowflake();
    const { lists, calls } = await hammer(supply, 8, 1500);
    const n = assertUnique(lists);
    assert.equal(n, 8 * 1500);
    lists.forEach((l, i) => assertIncreasing(l, `${engine} task ${i}`));
    assertLinearizable(calls);
    const st = c.stats();
    assert.equal(st.idsServed, n);
    assert.ok(st.batches >= n / 20, `batches ${st.batches}: the ranges switched often`);
    await c.close();
  });
}

test('the size follows demand: one fast caller grows it from 10 towards maxBatch in few requests', T, async () => {
  const c = new Client({ servers: [server.address], batch: 10, maxBatch: 100_000 });
  const s = c.segment('demand');
  for (let i = 0; i < 200_000; i++) await s.nextId();
  const st = c.stats();
  assert.equal(st.idsServed, 200_000);
  assert.ok(st.batchSize >= 1000 && st.batchSize <= 100_000, `batchSize ${st.batchSize}`);
  assert.ok(st.batches <= 30, `batches ${st.batches}: doubling reaches 100000 in 14 requests`);
  await c.close();
});
