// Several real servers on one database: killed, stopped, without an engine, lagging, all down;
// and a local server that answers a malformed 200.

import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client, UnavailableError } from '../src/index.js';
import { assertIncreasing, assertUnique, runCallers } from './support/ids.js';
import { closedPort, createTag, freeFixedPort, getJson, LeafidServer, tempDatabase } from './support/server.js';

/** Every client made here: closed at the end, so callers still looping after a failed test end at once. */
const clients = [];

/** @template C @param {C} c @returns {C} */
function track(c) {
  clients.push(c);
  return c;
}

/** Each test's bound: a failure must end the run, not hang it. */
const T = { timeout: 60000 };

/** Temporary databases, removed at the end. */
const dbs = [];
/** Every server started here, killed at the end. @type {LeafidServer[]} */
const servers = [];

function database() {
  const db = tempDatabase();
  dbs.push(db);
  return db;
}

async function start(db, o) {
  const s = await LeafidServer.start(db.url, o);
  servers.push(s);
  return s;
}

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(servers.map((s) => s.kill9()));
  for (const db of dbs) db.remove();
});

/** Waits until `cond()` holds, at most `ms`. */
async function until(cond, ms, what) {
  const end = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > end) assert.fail(`not within ${ms} ms: ${what}`);
    await sleep(10);
  }
}

/** The server the client asks first. */
function preferredOf(client, list) {
  const url = client.servers().find((s) => s.preferred).url;
  return list.find((s) => s.address === url);
}

test('killing the preferred server under load costs callers nothing (segment and snowflake)', T, async () => {
  const db = database();
  const a = await start(db);
  const three = [a, await start(db), await start(db)];
  await createTag(a.address, 'kill9', 1000);
  const c = track(new Client({ servers: three.map((s) => s.address), batch: 100, requestTimeoutMs: 1000 }));
  const seg = runCallers(4, 600, () => c.nextId('kill9'), 1);
  const snow = runCallers(2, 600, () => c.nextSnowflakeId(), 1);
  await sleep(300);
  const victim = preferredOf(c, three);
  await victim.kill9();
  const [s, f] = await Promise.all([seg, snow]);
  assert.deepEqual(s.errors.map(String), []);
  assert.deepEqual(f.errors.map(String), []);
  for (const l of [...s.lists, ...f.lists]) assertIncreasing(l, 'a caller');
  assertIncreasing(s.order, 'segment, in return order');
  assertIncreasing(f.order, 'snowflake, in return order');
  assert.equal(assertUnique(s.lists), 2400);
  assert.equal(assertUnique(f.lists), 1200);
  const st = c.stats();
  assert.ok(st.failovers >= 1, `failovers ${st.failovers}`);
  assert.equal(st.idsServed, 3600);
  const down = c.servers().filter((x) => !x.up).map((x) => x.url);
  assert.deepEqual(down, [victim.address]);
  await c.close();
});

test('a closed port is skipped in the same call', T, async () => {
  const db = database();
  const s = await start(db);
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const c = track(new Client({ servers: [dead, s.address], batch: 10 }));
  const t0 = performance.now();
  assert.equal(typeof (await c.nextId('leaf-segment-test')), 'bigint');
  assert.ok(performance.now() - t0 < 1000);
  assert.equal(c.stats().failovers, 1);
  assert.deepEqual(
    c.servers().map((x) => [x.url, x.up, x.preferred]),
    [
      [dead, false, false],
      [s.address, true, true],
    ],
  );
  await c.close();
});

test('a stopped server is skipped after the request timeout, then a probe brings it back', T, async () => {
  const db = database();
  const a = await start(db);
  const b = await start(db);
  await createTag(a.address, 'stall', 1000);
  const c = track(new Client({
    servers: [a.address, b.address],
    batch: 20,
    // a's requests must time out, b's must not, even on a loaded machine.
    requestTimeoutMs: 1000,
    probeTimeoutMs: 500,
    backoffMinMs: 50,
    backoffMaxMs: 200,
  }));
  await c.nextId('stall');
  a.stop();
  try {
    const r = await runCallers(3, 100, () => c.nextId('stall'), 2);
    assert.deepEqual(r.errors.map(String), []);
    assertIncreasing(r.order, 'stall');
    assert.equal(c.servers()[0].up, false, 'the stopped server is down');
    assert.equal(c.servers()[1].preferred, true);
    assert.ok(c.stats().failovers >= 1);
  } finally {
    a.cont();
  }
  await until(() => c.servers()[0].up, 3000, 'the continued server is probed back up');
  await c.close();
});

test('a server without the snowflake engine is skipped, not a refusal', T, async () => {
  const db = database();
  const a = await start(db, { env: { LEAFID__SNOWFLAKE__ENABLED: 'false' } });
  const b = await start(db);
  const direct = await getJson(`${a.address}/api/v1/snowflake/ids?count=1&stringify_ids=true`);
  assert.equal(direct.status, 404);
  assert.equal(direct.body.code, 'engine_disabled');
  const c = track(new Client({ servers: [a.address, b.address], batch: 10 }));
  const r = await runCallers(2, 50, () => c.nextSnowflakeId());
  assert.deepEqual(r.errors.map(String), []);
  assertIncreasing(r.order, 'snowflake');
  assert.ok(c.stats().failovers >= 1);
  // The segment engine of the same server still serves.
  const c2 = track(new Client({ servers: [a.address], batch: 10 }));
  assert.equal(typeof (await c2.nextId('leaf-segment-test')), 'bigint');
  await Promise.all([c.close(), c2.close()]);
});

test('a 200 whose body is not a valid batch is that server\'s failure: none of its ids is used', T, async () => {
  const db = database();
  const real = await start(db);
  await createTag(real.address, 'bad-body', 1000);
  const R = (first, last) => `{"first":"${first}","last":"${last}"}`;
  const rangesBody = (count, ...runs) => `{"biz_tag":"bad-body","count":${count},"ranges":[${runs.join(',')}]}`;
  const bodies = [
    'not json',
    '{"biz_tag":"bad-body","ids":["9000000000000000001"]}', // the list route's shape
    rangesBody(2, R('9000000000000000002', '9000000000000000003')).replace('bad-body', 'other'),
    rangesBody(2, R('9000000000000000003', '9000000000000000002')), // first above last
    rangesBody(4, R('9000000000000000001', '9000000000000000002'), R('9000000000000000002', '9000000000000000003')), // overlap
    rangesBody(4, R('9000000000000000005', '9000000000000000006'), R('9000000000000000001', '9000000000000000002')), // decreasing
    rangesBody(3, R('9000000000000000001', '9000000000000000002')), // count is not the runs' total
    rangesBody(11, R('9000000000000000001', '9000000000000000011')), // more than asked
    rangesBody(0),
    rangesBody(1, '{"first":9000000000000000001,"last":9000000000000000001}'), // numbers, not strings
    rangesBody(1, R('0', '0')),
    rangesBody(2, R('9223372036854775807', '9223372036854775808')), // above 2^63 - 1
  ];
  for (const body of bodies) {
    const liar = http.createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(body);
    });
    await new Promise((r) => liar.listen(0, '127.0.0.1', r));
    const liarUrl = `http://127.0.0.1:${liar.address().port}`;
    const c = track(new Client({ servers: [liarUrl, real.address], batch: 10 }));
    try {
      const ids = [];
      for (let i = 0; i < 25; i++) ids.push(await c.nextId('bad-body'));
      assertIncreasing(ids, body);
      assert.ok(ids.every((id) => id < 9000000000000000000n), `${body}: a liar's id was handed out`);
      assert.ok(c.stats().failovers >= 1, body);
      assert.equal(c.servers()[1].preferred, true, body);
    } finally {
      await c.close();
      liar.closeAllConnections();
      await new Promise((r) => liar.close(r));
    }
  }
});

test('ids of a lagging server below what was handed out are discarded, counted, never served, and caught up in a few requests', T, async () => {
  const db = database();
  const a = await start(db);
  const b = await start(db);
  await createTag(a.address, 'lag', 100_000);
  // A leases the first segment (1..100000), B the next (100001..200000).
  assert.deepEqual((await getJson(`${a.address}/api/v1/segment/lag/ids?count=1&stringify_ids=true`)).body.ids, ['1']);
  assert.deepEqual((await getJson(`${b.address}/api/v1/segment/lag/ids?count=1&stringify_ids=true`)).body.ids, ['100001']);
  // Batches of 10 (a fixed size: `maxBatch` 10): draining A's 99,999 older ids 10 at a time
  // would take 10,000 requests; the catch-up asks past the floor at once. Counted at A (its request counter), not timed: the wait
  // is generous, as a loaded machine took over 3 s for those 14 requests.
  const c = track(new Client({ servers: [b.address, a.address], batch: 10, maxBatch: 10, waitTimeoutMs: 30_000 }));
  const ids = [];
  for (let i = 0; i < 30; i++) ids.push(await c.nextId('lag'));
  assert.equal(ids[0], 100002n);
  const askedBefore = await batchRequests(a.address);
  await b.kill9();
  for (let i = 0; i < 30; i++) ids.push(await c.nextId('lag'));
  const asked = (await batchRequests(a.address)) - askedBefore;
  assertIncreasing(ids, 'across the failover to the lagging server');
  assertUnique([ids]);
  const st = c.stats();
  // A still serves 2..100000: everything it sends until its next segment is below the floor.
  assert.ok(st.discardedIds >= 99_000, `discarded ${st.discardedIds}`);
  assert.ok(st.idsReceived - st.discardedIds >= st.idsServed);
  // After the kill: what B sent before it (a batch may wait locally), then A's next segment;
  // never A's older ids.
  const afterKill = ids.slice(30);
  assert.ok(afterKill.every((id) => id > 100_031n), `an id at or below the floor: ${afterKill}`);
  assert.ok(afterKill[afterKill.length - 1] > 200_000n, `not caught up with A: ${afterKill}`);
  assert.ok(asked <= 4, `caught up in ${asked} requests to the lagging server`);
  await c.close();
});

/** Segment batch requests `base` answered so far, from its `leafid_http_requests_total`. */
async function batchRequests(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('leafid_http_requests_total{') && l.includes('segment') && l.includes('/ranges'))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

test('with every server down: unavailable after the wait timeout, then ids again once one is back', T, async () => {
  const db = database();
  const port = await freeFixedPort();
  let s = await start(db, { port });
  const c = track(new Client({
    servers: [s.address],
    batch: 10,
    waitTimeoutMs: 400,
    requestTimeoutMs: 200,
    backoffMinMs: 20,
    backoffMaxMs: 100,
  }));
  const before = [];
  for (let i = 0; i < 15; i++) before.push(await c.nextId('leaf-segment-test'));
  await s.kill9();
  let err;
  for (let i = 0; i < 100 && !err; i++) {
    try {
      before.push(await c.nextId('leaf-segment-test'));
    } catch (e) {
      err = e;
    }
  }
  assert.ok(err instanceof UnavailableError, String(err));
  assert.ok(err.waitedMs >= 390, `waited ${err.waitedMs}`);
  assert.match(String(err.lastFault), new RegExp(`127\\.0\\.0\\.1:${port}`));
  s = await start(db, { port });
  const afterIds = [];
  for (let i = 0; i < 30; i++) afterIds.push(await c.nextId('leaf-segment-test'));
  assertIncreasing([...before, ...afterIds], 'before the outage and after');
  await until(() => c.servers()[0].up, 2000, 'the restarted server is up');
  await c.close();
});

test('a pooled connection the server closed is retried once on a new one, not a failover', T, async () => {
  const db = database();
  const real = await start(db);
  // A TCP relay to the real server that resets each connection when a second request comes on
  // it: what a keep-alive socket closed by the server's idle timeout looks like when reused.
  let resets = 0;
  const relay = net.createServer((down) => {
    const up = net.connect(real.port, '127.0.0.1');
    let requests = 0;
    down.on('data', (chunk) => {
      if (++requests > 1) {
        resets++;
        up.destroy();
        down.resetAndDestroy();
        return;
      }
      up.write(chunk);
    });
    up.on('data', (chunk) => down.write(chunk));
    up.on('error', () => down.destroy());
    down.on('error', () => up.destroy());
    up.on('close', () => down.destroy());
  });
  await new Promise((r) => relay.listen(0, '127.0.0.1', r));
  const c = track(new Client({ servers: [`http://127.0.0.1:${relay.address().port}`, real.address], batch: 10 }));
  try {
    const ids = [];
    for (let i = 0; i < 100; i++) ids.push(await c.nextId('leaf-segment-test'));
    assertIncreasing(ids, 'through the relay');
    assert.ok(resets >= 3, `the relay reset ${resets} reused connections`);
    assert.equal(c.stats().failovers, 0);
    assert.ok(c.servers()[0].preferred && c.servers()[0].up);
  } finally {
    await c.close();
    await new Promise((r) => relay.close(r));
  }
});

test('a 200 cut off mid-body, or stalled mid-body past the request timeout, is that server\'s failure', T, async () => {
  const db = database();
  const real = await start(db);
  for (const how of ['cut', 'stall']) {
    const liar = http.createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"biz_tag":"leaf-segment-test","ids":["9000000000000000001",');
      if (how === 'cut') res.socket?.destroy();
    });
    await new Promise((r) => liar.listen(0, '127.0.0.1', r));
    const c = track(new Client({
      servers: [`http://127.0.0.1:${/** @type {any} */ (liar.address()).port}`, real.address],
      batch: 10,
      requestTimeoutMs: 300,
    }));
    try {
      const t0 = performance.now();
      const ids = [];
      for (let i = 0; i < 25; i++) ids.push(await c.nextId('leaf-segment-test'));
      assert.ok(ids.every((id) => id < 9000000000000000000n), `${how}: a liar's id was handed out`);
      assert.ok(c.stats().failovers >= 1, how);
      assert.equal(c.servers()[0].up, false, how);
      assert.ok(performance.now() - t0 < 3000, `${how}: took ${performance.now() - t0} ms`);
    } finally {
      await c.close();
      liar.closeAllConnections();
      await new Promise((r) => liar.close(r));
    }
  }
});
