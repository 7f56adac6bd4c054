// Local rules: tags, options, body validation, backoff, the supply's fast path. No server.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Client, ConfigError, InvalidTagError, IdSupply, isValidTag } from '../src/index.js';
import { backoff, MAX_ID, MAX_SEGMENT_BATCH, MAX_SNOWFLAKE_BATCH, validateRanges } from '../src/servers.js';
import { nextBatchSize } from '../src/sizing.js';
import { aboveFloor, catchUpCount } from '../src/supply.js';
import { arm, flag, FLAG_READ, FLAGS, release } from '../src/deadlines.js';

test('tags follow the server rule', () => {
  assert.ok(isValidTag('orders.v2:eu-1_x'));
  assert.ok(isValidTag('a'.repeat(128)));
  for (const bad of ['', 'a/b', 'a b', 'é', 'a'.repeat(129), 'a?count=1', 5, null]) {
    assert.ok(!isValidTag(bad), String(bad));
  }
});

test('the constructor refuses bad options with ConfigError', () => {
  const bad = (o) => assert.throws(() => new Client(o), (e) => e instanceof ConfigError && e.kind === 'config');
  bad(undefined);
  bad({ servers: [] });
  bad({ servers: ['127.0.0.1:8080'] });
  bad({ servers: ['ftp://a:1'] });
  bad({ servers: ['http://a:1/?x=1'] });
  bad({ servers: ['http://a:1'], batch: 0 });
  bad({ servers: ['http://a:1'], batch: 1_000_001 });
  bad({ servers: ['http://a:1'], batch: 100, maxBatch: 99 });
  bad({ servers: ['http://a:1'], maxBatch: 1_000_001 });
  bad({ servers: ['http://a:1'], targetLifetimeMs: 0 });
  bad({ servers: ['http://a:1'], batch: 1.5 });
  bad({ servers: ['http://a:1'], waitTimeoutMs: 0 });
  bad({ servers: ['http://a:1'], requestTimeoutMs: -1 });
  bad({ servers: ['http://a:1'], backoffMinMs: 100, backoffMaxMs: 10 });
  bad({ servers: ['http://a:1'], ids: 'number' });
  bad({ servers: ['http://a:1'], clock: 1_795_824_000_000 });
});

test('an invalid tag is refused locally, before any request', async () => {
  const c = new Client({ servers: ['http://127.0.0.1:1/'] });
  assert.throws(() => c.segment('a/b'), InvalidTagError);
  await assert.rejects(c.nextId('a b'), (e) => e.kind === 'invalid_tag');
  assert.equal(c.stats().failovers, 0);
  assert.deepEqual(
    c.servers().map((s) => [s.url, s.up, s.failures]),
    [['http://127.0.0.1:1', true, 0]],
  );
  await c.close();
});

test('a range body is valid only with positive, increasing, disjoint runs adding up to count', () => {
  const run = (first, last) => ({ first, last });
  const req = { count: 5, tag: 't' };
  const ok = validateRanges({ biz_tag: 't', count: 5, ranges: [run('1', '2'), run('5', '7')] }, req);
  assert.deepEqual(ok, { runs: [{ first: 1n, last: 2n }, { first: 5n, last: 7n }], count: 5 });
  const max = validateRanges({ biz_tag: 't', count: 2, ranges: [run('9223372036854775806', '9223372036854775807')] }, req);
  assert.deepEqual(max.runs, [{ first: MAX_ID - 1n, last: MAX_ID }], 'exact at 2^63 - 1');
  assert.equal(validateRanges({ biz_tag: 't', count: 1, ranges: [run('4', '4')] }, req).count, 1, 'fewer than asked');
  const bad = [
    { biz_tag: 't', count: 6, ranges: [run('1', '6')] }, // more than asked
    { biz_tag: 't', count: 0, ranges: [] },
    { biz_tag: 't', count: 1, ranges: [] },
    { biz_tag: 't', count: 1 },
    { biz_tag: 't', count: 1, ranges: [run('0', '0')] },
    { biz_tag: 't', count: 2, ranges: [run('-1', '1')] },
    { biz_tag: 't', count: 2, ranges: [run('2', '1')] }, // first above last
    { biz_tag: 't', count: 4, ranges: [run('1', '2'), run('2', '3')] }, // overlap
    { biz_tag: 't', count: 4, ranges: [run('5', '6'), run('1', '2')] }, // decreasing
    { biz_tag: 't', count: 3, ranges: [run('1', '2')] }, // count not the total
    { biz_tag: 't', count: '2', ranges: [run('1', '2')] },
    { biz_tag: 't', count: 1.5, ranges: [run('1', '2')] },
    { biz_tag: 't', count: 1, ranges: [run('01', '01')] },
    { biz_tag: 't', count: 1, ranges: [{ first: 1, last: 1 }] }, // numbers: precision lost above 2^53
    { biz_tag: 't', count: 1, ranges: [{ first: '1' }] },
    { biz_tag: 't', count: 1, ranges: [null] },
    { biz_tag: 't', count: 2, ranges: [run('9223372036854775807', '9223372036854775808')] }, // 2^63
    { biz_tag: 'u', count: 1, ranges: [run('1', '1')] },
    { count: 1, ranges: [run('1', '1')] }, // no tag on the segment route
    { biz_tag: 't', ids: ['1'] }, // the list route's body
    ['1'],
    null,
  ];
  for (const b of bad) assert.throws(() => validateRanges(b, req), (e) => typeof e === 'string', JSON.stringify(b));
  assert.deepEqual(validateRanges({ count: 1, ranges: [run('7', '7')] }, { count: 1, tag: null }).runs, [{ first: 7n, last: 7n }], 'snowflake: no tag');
});

test('the probe backoff doubles up to the cap', () => {
  const t = { backoffMinMs: 50, backoffMaxMs: 5000 };
  assert.deepEqual([1, 2, 3, 8, 1000].map((f) => backoff(t, f)), [50, 100, 200, 5000, 5000]);
});

/** A supply with no server holding `runs` (bigint pairs). */
function local(runs, o = {}) {
  return new IdSupply({
    servers: null,
    request: { path: '', tag: 't' },
    sizing: { batch: 10, maxBatch: 100, targetLifetimeMs: 1000 },
    catchUpMax: MAX_SEGMENT_BATCH,
    timing: { backoffMinMs: 1, backoffMaxMs: 1 },
    waitTimeoutMs: 20,
    asString: false,
    stop: o.stop ?? new AbortController().signal,
    runs: runs.map(([first, last]) => ({ first, last })),
    ...o,
  });
}

test('a supply hands out its runs once, in order, then waits and fails unavailable', async () => {
  const stop = new AbortController();
  const s = local([[3n, 4n], [9n, 9n], [20n, 22n]], { stop: stop.signal });
  assert.equal(s.tryNextId(), 3n);
  assert.equal(await s.nextId(), 4n);
  assert.equal(await s.nextId(), 9n);
  assert.equal(s.tryNextId(), 20n);
  assert.deepEqual([await s.nextId(), s.tryNextId()], [21n, 22n]);
  assert.equal(s.tryNextId(), undefined);
  assert.equal(s.tryNextId(), undefined);
  await assert.rejects(s.nextId(), (e) => e.kind === 'unavailable' && e.lastFault === null);
  assert.equal(s.stats().idsServed, 6);
  stop.abort();
  await assert.rejects(s.nextId(), (e) => e.kind === 'closed');
});

test('string mode hands out the same ids as decimal strings, exact near 2^63', async () => {
  const s = local([[MAX_ID - 1n, MAX_ID]], { asString: true });
  assert.equal(s.tryNextId(), '9223372036854775806');
  assert.equal(await s.nextId(), '9223372036854775807');
  assert.equal(s.tryNextId(), undefined);
  assert.equal(s.stats().idsServed, 2);
});

test('a 0 ms wait on a cold supply says no ids came within the 0 ms wait', async () => {
  const c = new Client({ servers: ['http://127.0.0.1:1'] });
  await assert.rejects(c.nextId('cold', { timeoutMs: 0 }), (e) => {
    assert.equal(e.kind, 'unavailable');
    assert.match(e.message, /no ids came within the 0 ms wait/);
    assert.doesNotMatch(e.message, /no server answered/);
    return true;
  });
  await c.close();
});

test('a missing tag is named missing, not "null"', async () => {
  const c = new Client({ servers: ['http://127.0.0.1:1'] });
  for (const tag of [null, undefined]) {
    await assert.rejects(c.nextId(/** @type {any} */ (tag)), (e) => {
      assert.equal(e.kind, 'invalid_tag');
      assert.match(e.message, /biz tag missing/);
      assert.doesNotMatch(e.message, /"null"|"undefined"/);
      return true;
    });
  }
  assert.throws(() => c.segment(/** @type {any} */ (5)), /must be a string, got a number/);
  assert.throws(() => c.segment('a/b'), /invalid biz tag "a\/b"/);
  await c.close();
});

test('the catch-up asks past the floor in one request, within the route limit', () => {
  // Answer ended at 500, floor 1000, size 100: 500 ids to reach the floor, then a batch.
  assert.equal(catchUpCount(1000n, 500n, 100, MAX_SEGMENT_BATCH), 600);
  assert.equal(catchUpCount(1000n, 1000n, 100, MAX_SEGMENT_BATCH), 100);
  assert.equal(catchUpCount(6_000_000n, 1_000_000n, 100, MAX_SEGMENT_BATCH), MAX_SEGMENT_BATCH);
  assert.equal(catchUpCount(1_500_000n, 1_000_000n, 100, MAX_SEGMENT_BATCH), 500_100);
  assert.equal(catchUpCount(MAX_ID, 1n, 100, MAX_SNOWFLAKE_BATCH), MAX_SNOWFLAKE_BATCH);
  assert.equal(catchUpCount(10n, 5n, MAX_SEGMENT_BATCH, MAX_SEGMENT_BATCH), MAX_SEGMENT_BATCH);
});

test('runs at or below the floor are dropped, a run across it trimmed', () => {
  const runs = [{ first: 1n, last: 5n }, { first: 10n, last: 20n }, { first: 30n, last: 31n }];
  assert.deepEqual(aboveFloor(runs, 0n), runs);
  assert.deepEqual(aboveFloor(runs, 5n), runs.slice(1));
  assert.deepEqual(aboveFloor(runs, 7n), runs.slice(1));
  assert.deepEqual(aboveFloor(runs, 14n), [{ first: 15n, last: 20n }, { first: 30n, last: 31n }]);
  assert.deepEqual(aboveFloor(runs, 30n), [{ first: 31n, last: 31n }]);
  assert.deepEqual(aboveFloor(runs, 31n), []);
});

test('the batch size follows demand: grows, shrinks, stays within its bounds', () => {
  const base = { size: 1000, min: 100, max: 100_000, used: 100, batchIds: 1000, targetMs: 1000, starved: false };
  const at = (elapsedMs, o = {}) => nextBatchSize({ ...base, elapsedMs, ...o });
  // 100 of 1000 ids in 40 ms: projected 400 ms, below half the target: doubles.
  assert.equal(at(40), 2000);
  // Projected 500..=2000 ms: stays.
  assert.equal(at(50), 1000);
  assert.equal(at(100), 1000);
  assert.equal(at(200), 1000);
  // Projected above twice the target: halves.
  assert.equal(at(201), 500);
  // Bounds: never above max, never below min.
  assert.equal(at(1, { size: 100_000 }), 100_000);
  assert.equal(at(1, { size: 80_000 }), 100_000);
  assert.equal(at(10_000, { size: 100 }), 100);
  assert.equal(at(10_000, { size: 150 }), 100);
  // A starved supply doubles, whatever the projection.
  assert.equal(at(10_000, { starved: true }), 2000);
  assert.equal(at(10_000, { starved: true, size: 100_000 }), 100_000);
  // Less than 1 ms counts 1 ms; nothing used counts one id (an idle batch shrinks the size);
  // no batch in use: the size stays (vectors/batch.json).
  assert.equal(at(0, { used: 1000 }), 2000);
  assert.equal(at(5000, { used: 0 }), 500);
  assert.equal(at(5000, { used: 0, batchIds: 0 }), 1000);
});

test('catch-up requests do not move the batch size', async () => {
  // A fake server: the first answer lies wholly below the floor, the second passes it.
  const answers = [
    { runs: [{ first: 1n, last: 10n }], count: 10, server: 'x' },
    { runs: [{ first: 500n, last: 600n }], count: 101, server: 'x' },
  ];
  const asked = [];
  const servers = /** @type {any} */ ({
    fetch: async (_req, count) => {
      asked.push(count);
      return answers.shift();
    },
  });
  const s = local([[100n, 109n]], { servers, sizing: { batch: 10, maxBatch: 1000, targetLifetimeMs: 60_000 } });
  const ids = [];
  for (let i = 0; i < 12; i++) ids.push(await s.nextId());
  assert.deepEqual(ids, [100n, 101n, 102n, 103n, 104n, 105n, 106n, 107n, 108n, 109n, 500n, 501n]);
  // The refill at the preload mark (id 101) asks the size, doubled (2 of 10 ids in under 1 ms:
  // a projected lifetime of 5 ms), then the catch-up asks past the floor: 109 - 10 + 20 ids;
  // the size stays 20.
  assert.deepEqual(asked, [20, 119]);
  assert.equal(s.stats().batchSize, 20);
  assert.equal(s.stats().discardedIds, 10);
});

test('the ended flag is read by the WebAssembly atomic load, and it reads what the worker writes', async () => {
  // Node 20 has shared WebAssembly memory: the fallback (Atomics.load, 7 to 15 ns) is not in use.
  assert.equal(FLAG_READ, 'wasm');
  const slot = arm(30);
  assert.ok(slot >= 0);
  try {
    const armed = flag(slot);
    assert.equal(armed & 1, 0, 'not ended yet');
    assert.equal(armed, Atomics.load(FLAGS, slot));
    // The worker thread sets the bit at the deadline; a synchronous read loop sees it.
    const until = Date.now() + 5000;
    let seen = false;
    while (Date.now() < until) {
      if ((flag(slot) & 1) === 1) {
        seen = true;
        break;
      }
    }
    assert.ok(seen, 'the deadline bit set by the worker was never read');
    assert.equal(flag(slot), Atomics.load(FLAGS, slot));
  } finally {
    release(slot);
  }
});
