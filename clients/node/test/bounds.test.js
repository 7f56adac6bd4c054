// The snowflake bounds helper (PROTOCOL.md "Snowflake bounds"): against real servers (the route's
// own answer, the ids taken in the window, refusals, failover over a closed port, a server
// without the snowflake engine, 5xx and malformed 200s from a tiny local server, every server
// down), and the body reader without a server.

import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';

import { Client, ClosedError, RejectedError, UnavailableError } from '../src/index.js';
import { readBounds, rfc3339 } from '../src/bounds.js';
import { closedPort, getJson, LeafidServer, tempDatabase } from './support/server.js';

/** Each test's bound: a failure must end the run, not hang it. */
const T = { timeout: 60000 };

/** @type {Client[]} */
const clients = [];
/** @param {Client} c */
function track(c) {
  clients.push(c);
  return c;
}

let db;
/** @type {LeafidServer} */
let a;
/** @type {LeafidServer} */
let b;
/** A server of the same database without the snowflake engine (404 engine_disabled). @type {LeafidServer} */
let disabled;

before(async () => {
  db = tempDatabase();
  a = await LeafidServer.start(db.url);
  [b, disabled] = await Promise.all([
    LeafidServer.start(db.url),
    LeafidServer.start(db.url, { env: { LEAFID__SNOWFLAKE__ENABLED: 'false' } }),
  ]);
});

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all([a.kill9(), b.kill9(), disabled.kill9()]);
  db.remove();
});

/**
 * The route's answer for `[from, to)`, asked directly (not through the client).
 * @param {string} server
 * @param {Date} from
 * @param {Date} to
 */
async function route(server, from, to) {
  const q = new URLSearchParams({ from: from.toISOString(), to: to.toISOString(), stringify_ids: 'true' });
  return getJson(`${server}/api/v1/snowflake/bounds?${q}`);
}

/**
 * A local HTTP server that answers every request with `status` and `body`; `hits` counts them.
 * @param {number} status
 * @param {string} body
 */
async function liar(status, body) {
  const hits = { n: 0 };
  const s = http.createServer((req, res) => {
    hits.n++;
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(body);
  });
  await new Promise((r) => s.listen(0, '127.0.0.1', () => r(undefined)));
  const url = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (s.address()).port}`;
  const close = async () => {
    s.closeAllConnections();
    await new Promise((r) => s.close(() => r(undefined)));
  };
  return { url, hits, close };
}

test('snowflakeBounds equals the route\'s answer and holds every id taken in the window', T, async () => {
  const c = track(new Client({ servers: [a.address], batch: 100 }));
  const from = new Date(Date.now() - 60_000);
  const ids = [];
  for (let i = 0; i < 600; i++) ids.push(await c.nextSnowflakeId());
  const to = new Date(Date.now() + 60_000);
  const got = await c.snowflakeBounds(from, to);
  assert.equal(typeof got.minId, 'bigint');
  assert.equal(typeof got.maxId, 'bigint');
  const want = await route(a.address, from, to);
  assert.equal(want.status, 200);
  assert.deepEqual(got, { minId: BigInt(want.body.min_id), maxId: BigInt(want.body.max_id) });
  assert.ok(got.minId < got.maxId);
  for (const id of ids) assert.ok(got.minId <= id && id <= got.maxId, `${id} outside [${got.minId}, ${got.maxId}]`);
  // A window that ended before the ids were taken holds none of them.
  const earlier = await c.snowflakeBounds(new Date(from.getTime() - 60_000), from);
  assert.ok(earlier.maxId < got.minId && ids.every((id) => id > earlier.maxId), 'an earlier window lies below');
  // String mode hands out strings, but bounds stay bigints.
  const s = track(new Client({ servers: [a.address], ids: 'string' }));
  assert.deepEqual(await s.snowflakeBounds(from, to), got);
  assert.equal(c.stats().failovers, 0);
});

test('a range from the layout\'s epoch: min_id 0 is the true bound, taken as the server says', T, async () => {
  const status = await getJson(`${a.address}/api/v1/snowflake/status`);
  assert.equal(status.status, 200);
  const epoch = new Date(status.body.epoch);
  const to = new Date(epoch.getTime() + 1000);
  const want = await route(a.address, epoch, to);
  assert.equal(want.status, 200);
  assert.equal(want.body.min_id, '0', 'tick 0, worker 0, sequence 0 on a layout without prefix');
  const c = track(new Client({ servers: [a.address, b.address] }));
  assert.deepEqual(await c.snowflakeBounds(epoch, to), { minId: 0n, maxId: BigInt(want.body.max_id) });
  assert.equal(c.stats().failovers, 0, 'a true bound is no server failure');
});

test('a range the servers refuse is rejected invalid_time_range, with no failover', T, async () => {
  const c = track(new Client({ servers: [a.address, b.address] }));
  const now = new Date();
  const refused = [
    ['empty', now, now],
    ['reversed', new Date(now.getTime() + 1000), now],
    ['before the epoch', new Date('2000-01-01T00:00:00Z'), now],
    ['past the layout\'s end', now, new Date('2100-01-01T00:00:00Z')],
  ];
  for (const [what, from, to] of refused) {
    await assert.rejects(
      c.snowflakeBounds(/** @type {Date} */ (from), /** @type {Date} */ (to)),
      (e) => e instanceof RejectedError && e.kind === 'rejected' && e.code === 'invalid_time_range' && e.status === 400,
      String(what),
    );
  }
  // The route agrees (asked directly), and nothing was marked down.
  const direct = await route(a.address, now, now);
  assert.deepEqual([direct.status, direct.body.code], [400, 'invalid_time_range']);
  assert.equal(c.stats().failovers, 0);
  assert.deepEqual(c.servers().map((s) => [s.up, s.preferred]), [[true, true], [true, false]]);
});

test('failover: a closed port, a server without the snowflake engine, a 5xx: the next server answers', T, async () => {
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const broken = await liar(503, '{"code":"unavailable","message":"db down"}');
  try {
    const c = track(new Client({ servers: [dead, disabled.address, broken.url, a.address] }));
    const from = new Date(Date.now() - 1000);
    const to = new Date(Date.now() + 1000);
    const want = await route(a.address, from, to);
    assert.deepEqual(await c.snowflakeBounds(from, to), { minId: BigInt(want.body.min_id), maxId: BigInt(want.body.max_id) });
    assert.equal(c.stats().failovers, 3, 'three servers failed in that call');
    assert.equal(broken.hits.n, 1);
    assert.deepEqual(c.servers().map((s) => [s.up, s.preferred]), [[false, false], [false, false], [false, false], [true, true]]);
    // The next call goes to the server that answered first.
    await c.snowflakeBounds(from, to);
    assert.equal(c.stats().failovers, 3);
    assert.equal(broken.hits.n, 1);
  } finally {
    await broken.close();
  }
});

test('a 200 whose body is not valid bounds is that server\'s failure, never the answer', T, async () => {
  const bodies = [
    'not json',
    '[]',
    '{"min_id":"5"}',
    '{"min_id":5,"max_id":9}', // numbers, not strings
    '{"min_id":"9","max_id":"5"}', // min above max
    '{"min_id":"-1","max_id":"5"}',
    '{"min_id":"1","max_id":"9223372036854775808"}', // above 2^63 - 1
    '{"min_id":"01","max_id":"5"}',
    '{"min_id":"1.5","max_id":"5"}',
  ];
  const from = new Date(Date.now() - 1000);
  const to = new Date(Date.now() + 1000);
  const want = await route(a.address, from, to);
  for (const body of bodies) {
    const l = await liar(200, body);
    try {
      const c = track(new Client({ servers: [l.url, a.address] }));
      assert.deepEqual(await c.snowflakeBounds(from, to), { minId: BigInt(want.body.min_id), maxId: BigInt(want.body.max_id) }, body);
      assert.equal(l.hits.n, 1, body);
      assert.equal(c.stats().failovers, 1, body);
      assert.equal(c.servers()[1].preferred, true, body);
      await c.close();
    } finally {
      await l.close();
    }
  }
});

test('every server down: UnavailableError after the wait, naming the last failure; closed: ClosedError; a bad Date: TypeError', T, async () => {
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const c = track(new Client({ servers: [dead], waitTimeoutMs: 300, backoffMinMs: 20, backoffMaxMs: 50 }));
  const t0 = performance.now();
  await assert.rejects(
    c.snowflakeBounds(new Date(Date.now() - 1000), new Date()),
    (e) => e instanceof UnavailableError && e.lastFault?.type === 'transport' && e.lastFault.server === dead,
  );
  const took = performance.now() - t0;
  assert.ok(took >= 250 && took < 3000, `gave up after ${took} ms, the wait being 300`);
  // An AbortSignal ends the wait at once with its reason.
  const ac = new AbortController();
  const pending = c.snowflakeBounds(new Date(Date.now() - 1000), new Date(), { signal: ac.signal, timeoutMs: 10_000 });
  setTimeout(() => ac.abort(new Error('enough')), 50);
  await assert.rejects(pending, /enough/);
  // Not a Date, or an invalid one: no request.
  const fresh = track(new Client({ servers: [a.address] }));
  await assert.rejects(fresh.snowflakeBounds(/** @type {any} */ ('2026-01-01T00:00:00Z'), new Date()), TypeError);
  await assert.rejects(fresh.snowflakeBounds(new Date(), new Date(NaN)), TypeError);
  assert.deepEqual(fresh.servers().map((s) => s.up), [true]);
  await fresh.close();
  await assert.rejects(fresh.snowflakeBounds(new Date(Date.now() - 1000), new Date()), ClosedError);
});

test('close() during a bounds call rejects it with ClosedError and leaves nothing running', T, async () => {
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const c = new Client({ servers: [dead], waitTimeoutMs: 10_000, backoffMinMs: 200, backoffMaxMs: 200 });
  const pending = c.snowflakeBounds(new Date(Date.now() - 1000), new Date());
  await new Promise((r) => setTimeout(r, 50));
  await c.close();
  await assert.rejects(pending, ClosedError);
});

test('readBounds takes only valid bodies; instants are sent as RFC 3339 UTC with milliseconds', () => {
  assert.deepEqual(readBounds({ min_id: '1', max_id: '9223372036854775807', layout: '41/10/12' }), { minId: 1n, maxId: (1n << 63n) - 1n });
  assert.deepEqual(readBounds({ min_id: '0', max_id: '4194303' }), { minId: 0n, maxId: 4194303n });
  assert.deepEqual(readBounds({ min_id: '7', max_id: '7' }), { minId: 7n, maxId: 7n });
  for (const bad of [null, 'x', [], {}, { min_id: '1' }, { min_id: 1, max_id: 2 }, { min_id: '2', max_id: '1' }, { min_id: '', max_id: '1' }, { min_id: '1', max_id: '99999999999999999999' }]) {
    assert.throws(() => readBounds(bad), (e) => typeof e === 'string', JSON.stringify(bad));
  }
  assert.equal(rfc3339('from', new Date(Date.UTC(2026, 10, 27))), '2026-11-27T00:00:00.000Z');
  assert.equal(rfc3339('to', new Date(Date.UTC(2026, 10, 27, 16, 5, 9, 7))), '2026-11-27T16:05:09.007Z');
  assert.throws(() => rfc3339('from', new Date(NaN)), TypeError);
  assert.throws(() => rfc3339('from', 1795824000000), TypeError);
});
