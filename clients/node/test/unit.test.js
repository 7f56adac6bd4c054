// Local rules: tags, options, body validation, backoff, the supply's fast path. No server.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { Client, ConfigError, InvalidTagError, IdSupply, isValidTag } from '../src/index.js';
import { backoff, behindTail, MAX_BATCH, MAX_ID, validateBatch } from '../src/servers.js';
import { catchUpCount } from '../src/supply.js';

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
  bad({ servers: ['http://a:1'], batch: 100_001 });
  bad({ servers: ['http://a:1'], batch: 1.5 });
  bad({ servers: ['http://a:1'], waitTimeoutMs: 0 });
  bad({ servers: ['http://a:1'], requestTimeoutMs: -1 });
  bad({ servers: ['http://a:1'], backoffMinMs: 100, backoffMaxMs: 10 });
  bad({ servers: ['http://a:1'], ids: 'number' });
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

test('only positive, increasing batches of the tag, within the count, are valid', () => {
  const req = { count: 3, tag: 't' };
  const ok = validateBatch({ biz_tag: 't', ids: ['1', '2', '5'] }, req);
  assert.deepEqual(ok.ids, [1n, 2n, 5n]);
  assert.deepEqual(ok.strs, ['1', '2', '5']);
  const max = validateBatch({ biz_tag: 't', ids: ['9223372036854775806', '9223372036854775807'] }, req);
  assert.deepEqual(max.ids, [MAX_ID - 1n, MAX_ID], 'exact at 2^63 - 1');
  const bad = [
    { biz_tag: 't', ids: ['1', '2', '5', '6'] }, // more than asked
    { biz_tag: 't', ids: [] },
    { biz_tag: 't', ids: ['0', '1'] },
    { biz_tag: 't', ids: ['-1'] },
    { biz_tag: 't', ids: ['2', '2'] },
    { biz_tag: 't', ids: ['3', '2'] },
    { biz_tag: 't', ids: ['01'] },
    { biz_tag: 't', ids: ['1.0'] },
    { biz_tag: 't', ids: [1, 2] }, // numbers: precision already lost above 2^53
    { biz_tag: 't', ids: ['9223372036854775808'] }, // 2^63
    { biz_tag: 'u', ids: ['1'] },
    { ids: ['1'] }, // no tag on the segment route
    { biz_tag: 't' },
    ['1'],
    null,
  ];
  for (const b of bad) assert.throws(() => validateBatch(b, req), (e) => typeof e === 'string', JSON.stringify(b));
  assert.deepEqual(validateBatch({ ids: ['7'] }, { count: 1, tag: null }).ids, [7n], 'snowflake: no tag');
});

test('the probe backoff doubles up to the cap', () => {
  const t = { backoffMinMs: 50, backoffMaxMs: 5000 };
  assert.deepEqual([1, 2, 3, 8, 1000].map((f) => backoff(t, f)), [50, 100, 200, 5000, 5000]);
});

test('a supply hands out its batch once, in order, then waits and fails unavailable', async () => {
  const stop = new AbortController();
  const s = new IdSupply({
    servers: null,
    request: { path: '', count: 3, tag: 't' },
    timing: { backoffMinMs: 1, backoffMaxMs: 1 },
    waitTimeoutMs: 20,
    asString: false,
    stop: stop.signal,
    ids: [3n, 4n, 9n],
  });
  assert.equal(s.tryNextId(), 3n);
  assert.equal(await s.nextId(), 4n);
  assert.equal(await s.nextId(), 9n);
  assert.equal(s.tryNextId(), undefined);
  await assert.rejects(s.nextId(), (e) => e.kind === 'unavailable' && e.lastFault === null);
  assert.equal(s.stats().idsServed, 3);
  stop.abort();
  await assert.rejects(s.nextId(), (e) => e.kind === 'closed');
});

test('the catch-up asks past the floor in one request, within the server limit', () => {
  // Answer ended at 500, floor 1000, batch 100: 500 ids to reach the floor, then a batch.
  assert.equal(catchUpCount(1000n, 500n, 100), 600);
  assert.equal(catchUpCount(1000n, 1000n, 100), 100);
  assert.equal(catchUpCount(6_000_000n, 1_000_000n, 100), MAX_BATCH);
  assert.equal(catchUpCount(MAX_ID, 1n, 100), MAX_BATCH);
  assert.equal(catchUpCount(10n, 5n, MAX_BATCH), MAX_BATCH);
});

test('an answer wholly behind the floor is read from its tail only', () => {
  assert.deepEqual(behindTail('{"biz_tag":"t","ids":["7","8","9"]}\n', 3, 9n), { ids: 3, last: 9n });
  assert.deepEqual(behindTail('{"ids":["5"]}', 3, 100n), { ids: 1, last: 5n });
  // Above the floor, no floor yet, another shape, more ids than asked: parsed whole.
  assert.equal(behindTail('{"biz_tag":"t","ids":["9","10"]}', 3, 9n), null);
  assert.equal(behindTail('{"ids":["5"]}', 3, 0n), null);
  assert.equal(behindTail('{"ids":[5]}', 3, 100n), null);
  assert.equal(behindTail('{"ids":["5"],"x":1}', 3, 100n), null);
  assert.equal(behindTail('{"ids":["0"]}', 3, 100n), null);
  assert.equal(behindTail('{"ids":["1","2","3","4"]}', 3, 100n), null);
});
