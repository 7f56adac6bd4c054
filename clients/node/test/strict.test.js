// Strict tags (issue 45): an answer with `"strict": true` turns a supply into pass-through for
// good: the ids it holds and that answer's are discarded, no prefetch starts again, and every
// later call is one request for one id. Against a local server that records every count asked
// and answers scripted ranges.

import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';

import { Client } from '../src/index.js';

const TAG = 'msgs';

/**
 * A local server: request number n (from 0) for `count` ids answers one run from
 * `script(count, n).first`, marked strict when `script(count, n).strict`.
 * @param {(count: number, n: number) => {first: number, strict: boolean}} script
 */
async function fake(script) {
  /** @type {number[]} */
  const counts = [];
  const server = http.createServer((req, res) => {
    if (req.url?.startsWith('/health')) {
      res.writeHead(200);
      res.end('{}');
      return;
    }
    const count = Number(new URL(req.url ?? '', 'http://x').searchParams.get('count'));
    const { first, strict } = script(count, counts.length);
    counts.push(count);
    /** @type {Record<string, unknown>} */
    const body = { biz_tag: TAG, count, ranges: [{ first: String(first), last: String(first + count - 1) }] };
    if (strict) body.strict = true;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const addr = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${addr.port}`,
    counts,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve(undefined)); }),
  };
}

/** Consecutive ids from 1; answers from request `strictFrom` on are marked strict. */
function consecutive(strictFrom) {
  let next = 1;
  return (/** @type {number} */ count, /** @type {number} */ n) => {
    const first = next;
    next += count;
    return { first, strict: n >= strictFrom };
  };
}

test('a strict answer turns the supply into pass-through', async () => {
  const s = await fake(consecutive(0));
  const c = new Client({ servers: [s.url], batch: 50 });
  try {
    const ids = [];
    for (let i = 0; i < 21; i++) ids.push(await c.nextId(TAG));
    // The first answer (1..50) revealed the tag strict: dropped whole, never handed out.
    assert.deepEqual(ids, Array.from({ length: 21 }, (_, i) => BigInt(51 + i)));
    await sleep(50); // a prefetch, if one were started, would show now
    assert.deepEqual(s.counts, [50, ...Array(21).fill(1)], 'one request of one id per call');
    assert.equal(c.segment(TAG).tryNextId(), undefined);
    assert.deepEqual(s.counts, [50, ...Array(21).fill(1)]);
    const st = c.stats();
    assert.deepEqual([st.idsServed, st.batches, st.discardedIds], [21, 21, 50]);
    // Concurrent calls: each its own request, all distinct and above everything before.
    const both = await Promise.all([c.nextId(TAG), c.nextId(TAG), c.nextId(TAG)]);
    assert.deepEqual([...both].sort((a, b) => (a < b ? -1 : 1)), [72n, 73n, 74n]);
    assert.equal(s.counts.length, 25);
  } finally {
    await c.close();
    await s.close();
  }
});

test('a supply turning strict drops what it holds', async () => {
  // The first answer is plain (buffered); its preload's answer is strict.
  const s = await fake(consecutive(1));
  const c = new Client({ servers: [s.url], batch: 10 });
  try {
    const ids = [await c.nextId(TAG), await c.nextId(TAG)];
    for (let i = 0; i < 200 && s.counts.length < 2; i++) await sleep(5);
    assert.equal(s.counts.length, 2, 'the preload request');
    // Until the strict answer is taken (its ids discarded): polled, not slept, for a slow machine.
    for (let i = 0; i < 1000 && c.stats().discardedIds === 0; i++) await sleep(5);
    for (let i = 0; i < 5; i++) ids.push(await c.nextId(TAG));
    for (let i = 1; i < ids.length; i++) assert.ok(ids[i] > ids[i - 1], `${ids}`);
    const strictLast = BigInt(10 + s.counts[1]);
    const passed = ids.filter((x) => x > strictLast).length;
    assert.equal(passed, 5, 'every call after the strict answer passes through');
    assert.deepEqual(s.counts.slice(2), Array(5).fill(1));
    const st = c.stats();
    assert.equal(st.idsServed, 7);
    assert.equal(st.discardedIds, 8 + s.counts[1], 'the 8 buffered ids left and the strict answer');
  } finally {
    await c.close();
    await s.close();
  }
});

test('a pass-through id at or below the floor is never handed out', async () => {
  // Strict 1..20 first (discarded, floor 20); then 7 (behind: a strict server never answers
  // it); then 30, 31.
  const s = await fake((count, n) => ({ first: n === 0 ? 1 : n === 1 ? 7 : 28 + n, strict: true }));
  const c = new Client({ servers: [s.url], batch: 20 });
  try {
    assert.equal(await c.nextId(TAG), 30n);
    assert.equal(await c.nextId(TAG), 31n);
    assert.deepEqual(s.counts, [20, 1, 1, 1]);
    const st = c.stats();
    assert.deepEqual([st.idsServed, st.discardedIds], [2, 21]);
  } finally {
    await c.close();
    await s.close();
  }
});
