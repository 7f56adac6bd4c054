// A permuted tag (docs/shapes.md: codes like `T-9F3K2Q`, a keyed permutation of the sequence)
// against real servers: its answers say `"ordered": false`, and the formatted supply hands the
// texts out exactly in the order the server sent them, with no floor. A recording relay in front
// of the first server keeps the real answers, so the test compares what the client handed out
// with what the server sent; then that server is killed and the second one serves.

import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';

import { Client } from '../src/index.js';
import { assertUnique, runCallers } from './support/ids.js';
import { createFormattedTag, LeafidServer, tempDatabase } from './support/server.js';

const CODES = { prefix: 'T-', radix: 'crockford32', width: 6, permute: { key_id: 'conformance' } };
const CODE = /^T-[0-9A-HJKMNP-TV-Z]{6}$/;

/** Each test's bound: a failure must end the run, not hang it. */
const T = { timeout: 60000 };

let db;
let keyDir = '';
/** @type {LeafidServer} */
let a;
/** @type {LeafidServer} */
let b;
/** @type {Client[]} */
const clients = [];

before(async () => {
  db = tempDatabase();
  // The key: 32 random bytes as 64 hex characters, in a file only its owner reads.
  keyDir = mkdtempSync(path.join(tmpdir(), 'leafid-node-key-'));
  const key = path.join(keyDir, 'conformance.key');
  writeFileSync(key, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  chmodSync(key, 0o600);
  const env = { LEAFID__SHAPES__KEYS__CONFORMANCE: key };
  a = await LeafidServer.start(db.url, { env });
  b = await LeafidServer.start(db.url, { env });
  await createFormattedTag(a.address, 'codes', 200, CODES);
});

after(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all([a?.kill9(), b?.kill9()]);
  db.remove();
  rmSync(keyDir, { recursive: true, force: true });
});

/**
 * An HTTP relay to `upstream` that records every 200 body of the list route; a request it cannot
 * forward (the upstream is gone) gets a 502.
 * @param {string} upstream base URL
 */
async function recordingRelay(upstream) {
  /** @type {any[]} */
  const bodies = [];
  const s = http.createServer((req, res) => {
    const up = http.get(upstream + req.url, { agent: false }, (r) => {
      let text = '';
      r.setEncoding('utf8');
      r.on('data', (c) => (text += c));
      r.on('end', () => {
        if (r.statusCode === 200 && /\/ids\?/.test(req.url ?? '')) bodies.push(JSON.parse(text));
        res.writeHead(r.statusCode ?? 502, { 'content-type': 'application/json' });
        res.end(text);
      });
    });
    up.on('error', () => {
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end('{"code":"bad_gateway","message":"upstream gone"}');
    });
  });
  await new Promise((r) => s.listen(0, '127.0.0.1', () => r(undefined)));
  const url = `http://127.0.0.1:${/** @type {import('node:net').AddressInfo} */ (s.address()).port}`;
  const close = async () => {
    s.closeAllConnections();
    await new Promise((r) => s.close(() => r(undefined)));
  };
  return { url, bodies, close };
}

test('a permuted tag: texts handed out in the order the server sent them, no floor, then failover', T, async () => {
  const relay = await recordingRelay(a.address);
  try {
    const c = new Client({ servers: [relay.url, b.address], batch: 50, maxBatch: 50, requestTimeoutMs: 1000 });
    clients.push(c);
    const f = c.formatted('codes');
    const got = [];
    for (let i = 0; i < 300; i++) got.push(i % 3 ? f.tryNextId() ?? (await f.nextId()) : await f.nextId());
    assert.ok(relay.bodies.length >= 6, `${relay.bodies.length} answers relayed`);
    for (const body of relay.bodies) assert.equal(body.ordered, false, 'a permuted tag\'s answer says ordered: false');
    assert.deepEqual(got, relay.bodies.flatMap((x) => x.ids).slice(0, 300), 'exactly the texts the server sent, in its order');
    for (const t of got) assert.match(t, CODE);
    assert.notDeepEqual(got, [...got].sort(), 'the texts are not in byte order');
    assert.equal(assertUnique([got]), 300);
    let st = c.stats();
    assert.equal(st.discardedIds, 0, 'no floor: nothing discarded');
    assert.equal(st.failovers, 0);

    // The first server goes: the second serves the same tag, none of its texts seen before.
    await a.kill9();
    const more = [];
    for (let i = 0; i < 300; i++) more.push(await f.nextId());
    for (const t of more) assert.match(t, CODE);
    assert.equal(assertUnique([got, more]), 600);
    st = c.stats();
    assert.ok(st.failovers >= 1, `failovers ${st.failovers}`);
    assert.equal(st.discardedIds, 0);
    assert.equal(st.idsServed, 600);
  } finally {
    await relay.close();
  }
});

test('a permuted tag from many tasks: every text unique, none lost, no error', T, async () => {
  const c = new Client({ servers: [b.address], batch: 20 });
  clients.push(c);
  const f = c.formatted('codes');
  const { lists, errors } = await runCallers(8, 250, () => f.nextId());
  assert.deepEqual(errors.map(String), []);
  assert.equal(assertUnique(lists), 2000);
  for (const l of lists) for (const t of l) assert.match(/** @type {string} */ (t), CODE);
  const st = c.stats();
  assert.equal(st.idsServed, 2000);
  assert.equal(st.discardedIds, 0);
});
