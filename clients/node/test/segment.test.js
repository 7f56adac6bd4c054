// One real server: ids, exact values near 2^63, concurrency, refusals, waits and cancellation.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client, RejectedError, UnavailableError } from '../src/index.js';
import { assertIncreasing, assertUnique, runCallers } from './support/ids.js';
import { closedPort, createTag, LeafidServer, tempDatabase } from './support/server.js';

/** Every client made here: closed at the end, so callers still looping after a failed test end at once. */
const clients = [];

/** @template C @param {C} c @returns {C} */
function track(c) {
  clients.push(c);
  return c;
}

/** Waits until `cond()` holds, at most `ms`. */
async function until(cond, ms, what) {
  const end = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > end) assert.fail(`not within ${ms} ms: ${what}`);
    await sleep(10);
  }
}

/** Each test's bound: a failure must end the run, not hang it. */
const T = { timeout: 30000 };

let db;
/** @type {LeafidServer} */
let server;

before(async () => {
  db = tempDatabase();
  server = await LeafidServer.start(db.url);
});

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await server.kill9();
  db.remove();
});

test('segment ids are exact bigints, increasing across many batches, with stats', T, async () => {
  await createTag(server.address, 'plain', 1000);
  const c = track(new Client({ servers: [server.address], batch: 50, maxBatch: 50 }));
  const ids = [];
  for (let i = 0; i < 1000; i++) ids.push(await c.nextId('plain'));
  assert.equal(typeof ids[0], 'bigint');
  assert.equal(ids[0], 1n, 'a new tag starts at 1');
  assertIncreasing(ids, 'plain');
  assertUnique([ids]);
  const st = c.stats();
  assert.equal(st.idsServed, 1000);
  assert.ok(st.batches >= 20 && st.batches <= 22, `batches ${st.batches}: 20 used, at most 2 ahead`);
  assert.equal(st.discardedIds, 0);
  assert.equal(st.failovers, 0);
  assert.equal(st.batchSize, 50, 'a fixed size: batch = maxBatch');
  assert.equal(c.segment('plain'), c.segment('plain'), 'one supply per tag');
  await c.close();
});

test('string mode hands out decimal strings, snowflake too', T, async () => {
  const c = track(new Client({ servers: [server.address], batch: 10, ids: 'string' }));
  const a = await c.nextId('leaf-segment-test');
  const b = await c.nextId('leaf-segment-test');
  assert.equal(typeof a, 'string');
  assert.ok(BigInt(a) < BigInt(b));
  const s1 = await c.nextSnowflakeId();
  const s2 = await c.snowflake().nextId();
  assert.match(s1, /^[1-9][0-9]*$/);
  assert.ok(BigInt(s1) < BigInt(s2));
  assert.ok(BigInt(s1) > 2n ** 53n, 'a twitter-layout snowflake id is beyond a double');
  await c.close();
});

test('ids near 2^63 are exact, then the tag is exhausted (rejected, not unavailable)', T, async () => {
  // 9223372036854770000 is not a double (the nearest is ...769984 or ...771008).
  await createTag(server.address, 'near-max', 1000, '9223372036854770000');
  const c = track(new Client({ servers: [server.address], batch: 1000 }));
  const ids = [];
  let err;
  for (;;) {
    try {
      ids.push(await c.nextId('near-max'));
    } catch (e) {
      err = e;
      break;
    }
  }
  assert.ok(err instanceof RejectedError, String(err));
  assert.equal(err.code, 'biz_tag_exhausted');
  assert.equal(ids[0], 9223372036854770000n);
  assertIncreasing(ids, 'near-max');
  assert.ok(ids.at(-1) <= 2n ** 63n - 1n);
  // Every id from the first to the last the server leased, nothing skipped or rounded: the
  // server stops when its next segment would pass 2^63 - 1 (with step 1000: at ...774999).
  assert.equal(BigInt(ids.length), ids.at(-1) - ids[0] + 1n);
  assert.ok(ids.at(-1) > 2n ** 63n - 1n - 100_000n, `last ${ids.at(-1)}`);
  assert.equal(c.stats().failovers, 0);
  // And it stays refused.
  await assert.rejects(c.nextId('near-max'), (e) => e.code === 'biz_tag_exhausted');
  await c.close();
});

test('an unknown tag is rejected with its code, and no other server is asked', T, async () => {
  const c = track(new Client({ servers: [server.address, `http://127.0.0.1:${await closedPort()}`] }));
  await assert.rejects(c.nextId('no-such-tag'), (e) => {
    assert.ok(e instanceof RejectedError);
    assert.equal(e.kind, 'rejected');
    assert.equal(e.code, 'unknown_biz_tag');
    assert.equal(e.status, 404);
    assert.equal(e.server, server.address);
    return true;
  });
  assert.equal(c.stats().failovers, 0);
  assert.ok(c.servers().every((s) => s.up), 'a refusal marks no server down');
  await c.close();
});

test('concurrent callers share one increasing stream: no duplicate, increasing in return order', T, async () => {
  await createTag(server.address, 'busy', 1000);
  const c = track(new Client({ servers: [server.address], batch: 100 }));
  const { lists, order, errors } = await runCallers(8, 1000, () => c.nextId('busy'));
  assert.deepEqual(errors, []);
  for (const [i, l] of lists.entries()) assertIncreasing(l, `caller ${i}`);
  assertIncreasing(order, 'return order across callers');
  assert.equal(assertUnique(lists), 8000);
  assert.equal(c.stats().idsServed, 8000);
  await c.close();
});

test('with every server down, nextId waits the wait timeout and names the last failure', T, async () => {
  const port = await closedPort();
  const c = track(new Client({ servers: [`http://127.0.0.1:${port}`], waitTimeoutMs: 300, backoffMinMs: 20, backoffMaxMs: 40 }));
  const t0 = performance.now();
  const e = await c.nextId('leaf-segment-test').catch((x) => x);
  const waited = performance.now() - t0;
  assert.ok(e instanceof UnavailableError, String(e));
  assert.ok(waited >= 290 && waited < 2000, `waited ${waited} ms`);
  assert.equal(e.lastFault.server, `http://127.0.0.1:${port}`);
  assert.equal(e.lastFault.type, 'transport');
  assert.match(e.message, /ECONNREFUSED/);
  assert.ok(c.stats().failedRounds >= 2);
  assert.equal(c.servers()[0].up, false);
  await c.close();
});

test('an AbortSignal ends the wait at once; close() rejects waiting calls', T, async () => {
  const c = track(new Client({ servers: [`http://127.0.0.1:${await closedPort()}`], waitTimeoutMs: 10_000 }));
  const t0 = performance.now();
  await assert.rejects(c.nextId('t', { signal: AbortSignal.timeout(100) }), (e) => e.name === 'TimeoutError');
  assert.ok(performance.now() - t0 < 1000);
  const ac = new AbortController();
  ac.abort(new Error('mine'));
  await assert.rejects(c.nextId('t', { signal: ac.signal }), /mine/);
  const waiting = c.nextId('t');
  setTimeout(() => c.close(), 50);
  await assert.rejects(waiting, (e) => e.kind === 'closed');
  await assert.rejects(c.nextId('t'), (e) => e.kind === 'closed');
});

test('the next batch is fetched in the background at 10% of the current one, one fetch at a time', T, async () => {
  await createTag(server.address, 'preload', 1000);
  const c = track(new Client({ servers: [server.address], batch: 100 }));
  const s = c.segment('preload');
  await s.nextId(); // first batch
  for (let i = 0; i < 9; i++) s.tryNextId(); // ids 0..9 of the batch: before the mark
  await sleep(100);
  assert.equal(s.stats().batches, 1, 'nothing fetched before 10% is used');
  s.tryNextId(); // index 10: the preload mark
  for (let i = 0; i < 50; i++) s.tryNextId(); // past the mark while the fetch runs: no second one
  await until(() => s.stats().batches === 2, 2000, 'the next batch arrives');
  await sleep(100);
  assert.equal(s.stats().batches, 2, 'single flight: one fetch for the next batch, no more');
  for (let i = 0; i < 39; i++) assert.notEqual(s.tryNextId(), undefined); // the rest of batch 1
  assert.notEqual(s.tryNextId(), undefined, 'the next batch is already local');
  await sleep(100);
  assert.equal(s.stats().batches, 2, 'batch 2 is below its own mark');
  assert.equal(s.stats().idsServed, 101);
});

test('a down server is probed with exponential backoff', T, async () => {
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const c = track(new Client({ servers: [dead, server.address], batch: 10, backoffMinMs: 100, backoffMaxMs: 400 }));
  await c.nextId('leaf-segment-test');
  assert.equal(c.servers()[0].failures, 1);
  await sleep(1200);
  // Probes (each a refused connection) at about 100, 300, 700, 1100 ms: 4 more failures. A fixed
  // 100 ms period would make 12; timers never fire early, so more than 6 is impossible.
  const f = c.servers()[0].failures;
  assert.ok(f >= 3 && f <= 6, `failures after 1.2 s: ${f}`);
  assert.equal(c.servers()[0].up, false);
});
