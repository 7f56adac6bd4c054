// The formatted supply (PROTOCOL.md "Formatted tags"): texts from real servers, the period rule
// with an injected clock against a real server's `period_end`, the byte-order floor, the
// refusals, failover; and the list body's reader without a server.

import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, test } from 'node:test';

import { Client, FormattedSupply, RejectedError, UnavailableError } from '../src/index.js';
import { compareBytes, readFormatted } from '../src/formatted.js';
import { ended, moveDeadline } from '../src/deadlines.js';
import { Refusal } from '../src/servers.js';
import { assertUnique, runCallers } from './support/ids.js';
import { createFormattedTag, createTag, getJson, LeafidServer, tempDatabase } from './support/server.js';

const ORDERS = { prefix: 'ORD-', date: 'yyyyMMdd', width: 8, reset: 'daily', time_zone: 'UTC' };
const ORD = /^ORD-[0-9]{8}[0-9]{8}$/;

/** Each test's bound: a failure must end the run, not hang it. */
const T = { timeout: 60000 };

/** @type {Client[]} */
const clients = [];
/** @template C @param {C} c @returns {C} */
function track(c) {
  clients.push(/** @type {any} */ (c));
  return c;
}

/** Asserts that `ids` strictly increase in byte order. @param {string[]} ids @param {string} what */
function assertTextIncreasing(ids, what) {
  for (let i = 1; i < ids.length; i++) {
    if (!(compareBytes(ids[i - 1], ids[i]) < 0)) assert.fail(`${what}: not increasing at ${i}: ${ids[i - 1]} then ${ids[i]}`);
  }
}

let db;
/** @type {LeafidServer} */
let a;
/** @type {LeafidServer} */
let b;

before(async () => {
  db = tempDatabase();
  a = await LeafidServer.start(db.url);
  b = await LeafidServer.start(db.url);
  await createFormattedTag(a.address, 'orders', 100, ORDERS);
  await createFormattedTag(a.address, 'clocked', 100, ORDERS);
  await createFormattedTag(a.address, 'hammered', 100, ORDERS);
  await createFormattedTag(a.address, 'tiny', 10, { date: 'yyyyMMdd', width: 2, reset: 'daily', time_zone: 'UTC' });
  await createFormattedTag(a.address, 'moved', 100, ORDERS);
  await createFormattedTag(a.address, 'hooked', 100, ORDERS);
  await createFormattedTag(a.address, 'deadline', 100, ORDERS);
  await createTag(a.address, 'plain', 100);
});

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await a.kill9();
  await b.kill9();
  db.remove();
});

test('formatted ids are the texts as received, increasing, with stats', T, async () => {
  const c = track(new Client({ servers: [a.address], batch: 20, maxBatch: 20 }));
  const f = c.formatted('orders');
  assert.equal(c.formatted('orders'), f, 'one supply per tag');
  const ids = [];
  for (let i = 0; i < 300; i++) ids.push(await f.nextId());
  assert.equal(typeof ids[0], 'string');
  assert.match(ids[0], /^ORD-[0-9]{8}00000001$/, 'a new tag starts at 1');
  for (const id of ids) assert.match(id, ORD);
  assertTextIncreasing(ids, 'orders');
  assertUnique([ids]);
  const next = f.tryNextId();
  assert.ok(next === undefined || compareBytes(next, ids.at(-1)) > 0);
  const st = c.stats();
  assert.equal(st.idsServed, 300 + (next === undefined ? 0 : 1));
  assert.ok(st.batches >= 15 && st.batches <= 17, `batches ${st.batches}: 15 used, at most 2 ahead`);
  assert.equal(st.discardedIds, 0);
  assert.equal(st.failovers, 0);
  assert.equal(await c.nextFormattedId('orders').then((x) => ORD.test(x)), true);
});

test('the default clock: the deadline passes between two ids, seen even by a synchronous loop', T, async () => {
  // No clock read per id (issue 47): a worker thread sets the batch's ended bit at its deadline.
  // The deadline of the batch in use is moved to 20 ms from now (as the worker does at
  // period_end); the main thread spins without yielding: the bit still arrives (shared memory),
  // no further id of that batch leaves, and the next id comes from a new answer.
  const c = track(new Client({ servers: [a.address], batch: 100, maxBatch: 100, waitTimeoutMs: 2000 }));
  const f = c.formatted('deadline');
  const first = await f.nextId();
  const slot = f._slot;
  assert.ok(slot >= 0 && !ended(slot), `a live deadline slot: ${slot}`);
  moveDeadline(slot, 20);
  const giveUp = performance.now() + 2000;
  while (!ended(slot) && performance.now() < giveUp) {
    // a synchronous loop: the main thread's event loop never turns here
  }
  assert.ok(ended(slot), 'the deadline never fired');
  assert.equal(f.tryNextId(), undefined, 'no id of the ended batch');
  const second = await f.nextId();
  assert.ok(compareBytes(second, first) > 0, `${second} after ${first}`);
  const st = c.stats();
  assert.deepEqual([st.idsServed, st.discardedIds, st.batches], [2, 99, 2]);
});

test('a batch whose period ended by the injected clock is never handed out, and is counted', T, async () => {
  let clock = Date.now();
  const c = track(new Client({ servers: [a.address], batch: 50, maxBatch: 50, waitTimeoutMs: 400, backoffMinMs: 20, backoffMaxMs: 50, clock: () => clock }));
  const f = c.formatted('clocked');
  const before = [];
  for (let i = 0; i < 10; i++) before.push(await f.nextId());
  // The preload mark (index 5) was taken: wait for the batch fetched ahead.
  for (let i = 0; i < 100 && f._next === null; i++) await new Promise((r) => setTimeout(r, 10));
  assert.notEqual(f._next, null, 'the next batch came');
  // The real server's period end for this tag (its answer, not a computed one).
  const direct = await getJson(`${a.address}/api/v1/segment/clocked/ids?count=1`);
  assert.equal(direct.status, 200);
  const periodEnd = Date.parse(direct.body.period_end);
  assert.ok(periodEnd > Date.now(), `period_end ${direct.body.period_end} lies ahead`);
  assert.equal(f._periodEnd, periodEnd, 'the batch held carries the server period_end');
  const held = c.stats();
  assert.equal(held.idsServed, 10);
  assert.equal(held.idsReceived, 100, 'two batches of 50 held locally');

  // The client's clock reaches the period's end: nothing of that period may leave.
  clock = periodEnd;
  assert.equal(f.tryNextId(), undefined, 'no text of an ended period from tryNextId');
  await assert.rejects(f.nextId(), (e) => e instanceof UnavailableError, 'the server still serves the same period: nothing to hand out');
  const st = c.stats();
  assert.equal(st.idsServed, 10, 'no id handed out after the period ended');
  assert.ok(st.idsReceived >= 100);
  assert.equal(st.discardedIds, st.idsReceived - 10, 'every received id not handed out is counted as discarded');
  assert.ok(st.discardedIds >= 90, `discarded ${st.discardedIds}: both held batches dropped whole`);

  // Back before the end: the supply serves again, above everything it handed out.
  clock = periodEnd - 1;
  const later = await f.nextId();
  assert.match(later, ORD);
  assert.ok(compareBytes(later, before.at(-1)) > 0, `${later} above ${before.at(-1)}`);
  assert.ok(compareBytes(later, direct.body.ids[0]) > 0, 'above the id taken directly, as the server goes on');
});

test('the clock hook: a client clock past every answer\'s period_end hands out nothing and counts every text', T, async () => {
  // The real server's period end for this tag; the hook moves the client's clock past it, the
  // way the conformance adapter's clock_offset_ms does (system clock + offset).
  const direct = await getJson(`${a.address}/api/v1/segment/hooked/ids?count=1`);
  assert.equal(direct.status, 200);
  const periodEnd = Date.parse(direct.body.period_end);
  const offset = periodEnd - Date.now() + 1000;
  const ahead = track(new Client({ servers: [a.address], batch: 20, maxBatch: 20, waitTimeoutMs: 500, backoffMinMs: 20, backoffMaxMs: 50, clock: () => Date.now() + offset }));
  const f = ahead.formatted('hooked');
  await assert.rejects(f.nextId(), (e) => e instanceof UnavailableError && e.lastFault?.type === 'behind' && /period that ended/.test(e.lastFault.detail));
  assert.equal(f.tryNextId(), undefined);
  const st = ahead.stats();
  assert.equal(st.idsServed, 0, 'no text of a period ended by the hook\'s clock');
  assert.equal(st.batches, 0, 'no answer taken into a batch');
  assert.ok(st.idsReceived >= 20, `received ${st.idsReceived}: at least one answer`);
  assert.equal(st.discardedIds, st.idsReceived, 'every text received is counted as discarded');
  assert.equal(st.failovers, 0, 'an ended period is not a server failure');

  // The same offset 2 s earlier (1 s before the end): the texts are handed out, above the ones
  // the server issued before; and the default clock (Date.now) hands them out too.
  const before = track(new Client({ servers: [a.address], batch: 20, clock: () => Date.now() + offset - 2000 }));
  const t1 = await before.formatted('hooked').nextId();
  assert.ok(compareBytes(t1, direct.body.ids[0]) > 0, `${t1} above ${direct.body.ids[0]}`);
  const plain = track(new Client({ servers: [a.address], batch: 20 }));
  const t2 = await plain.formatted('hooked').nextId();
  assert.match(t2, ORD);
  assert.equal(before.stats().discardedIds + plain.stats().discardedIds, 0);
});

test('ids of a formatted tag are unique and increasing from many tasks', T, async () => {
  const c = track(new Client({ servers: [a.address], batch: 10 }));
  const f = c.formatted('hammered');
  const { lists, order, errors } = await runCallers(8, 500, () => f.nextId());
  assert.deepEqual(errors, []);
  assert.equal(assertUnique(lists), 4000);
  for (const [i, l] of lists.entries()) {
    for (const id of l) assert.match(/** @type {string} */ (id), ORD);
    assertTextIncreasing(/** @type {string[]} */ (l), `caller ${i}`);
  }
  assertTextIncreasing(/** @type {string[]} */ (order), 'in the order the calls returned');
  // Synchronous takes interleaved with awaited ones keep the order too.
  const mixed = [];
  for (let i = 0; i < 500; i++) mixed.push(f.tryNextId() ?? (await f.nextId()));
  assertTextIncreasing([order.at(-1), ...mixed], 'after the tasks');
  assert.equal(c.stats().idsServed, 4500);
});

test('a plain tag on the formatted supply is rejected not_formatted; a formatted tag on the numeric one formatted_tag', T, async () => {
  const c = track(new Client({ servers: [a.address, b.address] }));
  for (let i = 0; i < 3; i++) {
    await assert.rejects(c.formatted('plain').nextId(), (e) => e instanceof RejectedError && e.kind === 'rejected' && e.code === 'not_formatted');
    await assert.rejects(c.nextId('orders'), (e) => e instanceof RejectedError && e.code === 'formatted_tag');
  }
  await assert.rejects(c.formatted('no-such-tag').nextId(), (e) => e instanceof RejectedError && e.code === 'unknown_biz_tag');
  assert.throws(() => c.formatted('bad tag'), (e) => e.kind === 'invalid_tag');
  const st = c.stats();
  assert.equal(st.failovers, 0, 'a refusal is not a failover');
  assert.equal(st.idsServed, 0);
});

test('a period that runs out of its width: exactly 99 texts, then rejected sequence_exhausted', T, async () => {
  const c = track(new Client({ servers: [a.address, b.address], batch: 10 }));
  const f = c.formatted('tiny');
  const ids = [];
  for (let i = 0; i < 99; i++) ids.push(await f.nextId());
  assert.match(ids[0], /^[0-9]{8}01$/);
  assert.match(ids[98], /^[0-9]{8}99$/);
  assertTextIncreasing(ids, 'tiny');
  await assert.rejects(f.nextId(), (e) => e instanceof RejectedError && e.code === 'sequence_exhausted');
  assert.equal(c.stats().failovers, 0);
});

test('failover: the formatted supply moves to the second server when the first is killed', T, async () => {
  const s1 = await LeafidServer.start(db.url);
  const c = track(new Client({ servers: [s1.address, b.address], batch: 10, requestTimeoutMs: 1000 }));
  const f = c.formatted('moved');
  const ids = [];
  for (let i = 0; i < 100; i++) ids.push(await f.nextId());
  await s1.kill9();
  for (let i = 0; i < 300; i++) ids.push(await f.nextId());
  assertTextIncreasing(ids, 'across the failover');
  assertUnique([ids]);
  assert.ok(c.stats().failovers >= 1, 'failed over');
});

test('a lagging server after a failover: its texts at or below the floor are discarded, never handed out', T, async () => {
  // B on a database of its own, where the tag's sequence starts 1000 below A's.
  const other = tempDatabase();
  const lag = await LeafidServer.start(other.url);
  const s1 = await LeafidServer.start(db.url);
  try {
    await createFormattedTag(s1.address, 'lagged', 100, ORDERS, 1001);
    await createFormattedTag(lag.address, 'lagged', 100, ORDERS, 1);
    const c = track(new Client({ servers: [s1.address, lag.address], batch: 10, requestTimeoutMs: 1000 }));
    const f = c.formatted('lagged');
    const ids = [];
    for (let i = 0; i < 50; i++) ids.push(await f.nextId());
    assert.match(ids[0], /^ORD-[0-9]{8}00001001$/);
    await s1.kill9();
    for (let i = 0; i < 200; i++) ids.push(await f.nextId());
    assertTextIncreasing(ids, 'across the failover to a lagging server');
    assertUnique([ids]);
    const st = c.stats();
    assert.ok(st.failovers >= 1);
    // The lagging server's texts up to the floor (at least 1001 + 50 - 1 of them minus those
    // held) were received and discarded, in a few doubling requests.
    assert.ok(st.discardedIds >= 900, `discarded ${st.discardedIds}`);
    assert.ok(st.batches < 40, `caught up in a few requests: ${st.batches} batches`);
  } finally {
    await s1.kill9();
    await lag.kill9();
    other.remove();
  }
});

test('readFormatted takes only valid list bodies', () => {
  const asked = { count: 3, tag: 'orders' };
  const ok = { biz_tag: 'orders', ids: ['A-01', 'A-02'], period: '20261127', period_end: '2026-11-28T00:00:00Z' };
  const got = readFormatted(ok, asked);
  assert.ok(!(got instanceof Refusal));
  assert.deepEqual(got.ids, ['A-01', 'A-02']);
  assert.equal(got.periodEnd, Date.UTC(2026, 10, 28));
  assert.equal(readFormatted({ ...ok, period_end: '9999-12-30T22:00:00.999999999Z' }, asked).periodEnd > 0, true);
  assert.ok(readFormatted({ biz_tag: 'orders', ids: [1, 2, 3] }, asked) instanceof Refusal, 'numbers, no period_end: not_formatted');
  const bad = [
    // Digit strings are no plain tag's answer to this request (no stringify_ids): vectors/formats.json.
    { biz_tag: 'orders', ids: ['1', '2'] },
    null,
    [],
    { ...ok, biz_tag: 'other' },
    { ...ok, ids: [] },
    { ...ok, ids: ['A-01', ''] },
    { ...ok, ids: ['A-02', 'A-01'] },
    { ...ok, ids: ['A-01', 'A-01'] },
    { ...ok, ids: ['A-01', 7] },
    { ...ok, ids: ['A-1', 'A-2', 'A-3', 'A-4'] },
    { ...ok, period_end: undefined },
    { ...ok, period_end: 'tomorrow' },
    { ...ok, period_end: '2026-11-28' },
    { ...ok, period_end: 1795824000 },
  ];
  for (const body of bad) assert.throws(() => readFormatted(body, asked), (e) => typeof e === 'string', JSON.stringify(body));
});

test('compareBytes is UTF-8 byte order', () => {
  assert.ok(compareBytes('A-01', 'A-02') < 0);
  assert.ok(compareBytes('A-1', 'A-10') < 0);
  assert.ok(compareBytes('Z', 'a') < 0, 'upper case sorts below lower case (ASCII)');
  assert.equal(compareBytes('x', 'x'), 0);
  // U+FFFD (EF BF BD) sorts below U+1F600 (F0 9F 98 80) in UTF-8, above its surrogates in UTF-16.
  assert.ok(compareBytes('\uFFFD', '\u{1F600}') < 0);
  assert.ok(Buffer.compare(Buffer.from('\uFFFD'), Buffer.from('\u{1F600}')) < 0);
});

test('without a server: the period rule on a held batch, and the preload mark', () => {
  let clock = 1000;
  const s = new FormattedSupply({
    tag: 't',
    clock: () => clock,
    servers: null,
    sizing: { batch: 10, maxBatch: 10, targetLifetimeMs: 1000 },
    timing: { backoffMinMs: 1, backoffMaxMs: 1 },
    waitTimeoutMs: 1,
    stop: new AbortController().signal,
    first: { ids: ['a1', 'a2', 'a3', 'a4'], periodEnd: 2000 },
  });
  assert.equal(s.tryNextId(), 'a1');
  assert.equal(s.tryNextId(), 'a2');
  clock = 1999;
  assert.equal(s.tryNextId(), 'a3');
  clock = 2000;
  assert.equal(s.tryNextId(), undefined, 'the period ended at 2000');
  assert.equal(s.tryNextId(), undefined);
  const st = s.stats();
  assert.equal(st.idsServed, 3);
  assert.equal(st.discardedIds, 1);
});

test('readFormatted: "ordered": false takes the texts in any order; absent means ordered; anything else is refused', () => {
  const asked = { count: 4, tag: 'codes' };
  const body = { biz_tag: 'codes', ids: ['T-9F3K2Q', 'T-01ABCD', 'T-ZZZZZZ'], period: '', period_end: '9999-12-31T23:59:59Z' };
  const got = readFormatted({ ...body, ordered: false }, asked);
  assert.ok(!(got instanceof Refusal));
  assert.deepEqual(got.ids, body.ids, 'as received, not sorted');
  assert.equal(got.ordered, false);
  assert.throws(() => readFormatted(body, asked), (e) => typeof e === 'string' && /not above/.test(e), 'absent: ordered, so checked');
  assert.throws(() => readFormatted({ ...body, ordered: true }, asked), (e) => typeof e === 'string');
  assert.equal(/** @type {any} */ (readFormatted({ ...body, ids: ['A', 'B'] }, asked)).ordered, true);
  for (const ordered of ['false', 0, null, 'no', {}]) {
    assert.throws(() => readFormatted({ ...body, ordered }, asked), (e) => typeof e === 'string' && /ordered/.test(e), JSON.stringify(ordered));
  }
  // The other checks still hold for an unordered answer.
  for (const bad of [{ ids: [] }, { ids: ['T-1', ''] }, { ids: ['T-1', 7] }, { ids: ['a', 'b', 'c', 'd', 'e'] }, { period_end: 'soon' }]) {
    assert.throws(() => readFormatted({ ...body, ordered: false, ...bad }, asked), (e) => typeof e === 'string', JSON.stringify(bad));
  }
});

/**
 * A local server answering the list route like a permuted tag: `"ordered": false`, the texts of
 * a keyed permutation of 1, 2, 3... (here k * 3^18 mod 32^4, a bijection, in 6 Crockford digits), each
 * answer of the count asked, with `periodEnd()` as its end. Records every list it sent.
 * @param {() => string} periodEnd
 */
async function permutingServer(periodEnd) {
  /** @type {string[][]} */
  const sent = [];
  let k = 0;
  const digits = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
  /** @param {number} n */
  const code = (n) => {
    let t = '';
    for (let i = 0; i < 6; i++, n = Math.floor(n / 32)) t = digits[n % 32] + t;
    return `T-${t}`;
  };
  const s = http.createServer((req, res) => {
    const count = Number(new URL(req.url ?? '', 'http://x').searchParams.get('count'));
    const ids = Array.from({ length: count }, () => code((++k * 387_420_489) % 32 ** 4));
    sent.push(ids);
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ biz_tag: 'codes', ids, period: '', period_end: periodEnd(), ordered: false }));
  });
  await new Promise((r) => s.listen(0, '127.0.0.1', () => r(undefined)));
  const url = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (s.address()).port}`;
  const close = async () => {
    s.closeAllConnections();
    await new Promise((r) => s.close(() => r(undefined)));
  };
  return { url, sent, close };
}

test('an unordered answer is handed out in the order received, with no floor; the period rule still holds', T, async () => {
  let end = '9999-12-31T23:59:59Z';
  const p = await permutingServer(() => end);
  try {
    let clock = Date.now();
    const c = track(new Client({ servers: [p.url], batch: 10, maxBatch: 10, waitTimeoutMs: 400, backoffMinMs: 20, backoffMaxMs: 50, clock: () => clock }));
    const f = c.formatted('codes');
    const got = [];
    for (let i = 0; i < 100; i++) got.push(i % 2 ? /** @type {string} */ (f.tryNextId() ?? (await f.nextId())) : await f.nextId());
    assert.deepEqual(got, p.sent.flat().slice(0, 100), 'exactly the texts received, in the order received');
    assert.notDeepEqual(got, [...got].sort(), 'the texts came unsorted');
    assert.ok(got.some((t, i) => i > 10 && compareBytes(t, got[9]) < 0), 'texts below an earlier batch\'s last are handed out: no floor');
    assertUnique([got]);
    let st = c.stats();
    assert.equal(st.discardedIds, 0, 'nothing discarded: no floor for unordered texts');
    assert.equal(st.failovers, 0);
    assert.equal(st.idsServed, 100);

    // The period rule: the client's clock passes the held batches' end, and later answers end
    // before the client's clock: nothing handed out, every text counted.
    const received = st.idsReceived;
    clock = Date.parse('9999-12-31T23:59:59Z');
    end = '2000-01-01T00:00:00Z';
    assert.equal(f.tryNextId(), undefined);
    await assert.rejects(f.nextId(), (e) => e instanceof UnavailableError && e.lastFault?.type === 'behind');
    st = c.stats();
    assert.equal(st.idsServed, 100, 'no text of an ended period');
    assert.ok(st.idsReceived > received, 'answers of an ended period came');
    assert.equal(st.discardedIds, st.idsReceived - 100, 'only texts of an ended period are discarded, all of them counted');
  } finally {
    await p.close();
  }
});
