// Caller tokens and quotas (issue 44) against scripted local HTTP servers: the header sent, the
// token never shown, leafid's 401/403 final, a proxy's 401 a failover, a 429 quota_exhausted
// waited out on the same server, one past the wait timeout a ThrottledError. (The conformance
// suite's tokens scenario runs the same rules against real servers.)

import assert from 'node:assert/strict';
import http from 'node:http';
import { test } from 'node:test';
import { inspect } from 'node:util';

import { Client, ConfigError, RejectedError, ThrottledError } from '../src/index.js';

const SECRET = 'lid_0123456789abcdefSECRET';

/** @param {number} first @param {number} last */
function ids(first, last) {
  const body = { biz_tag: 'orders', count: last - first + 1, ranges: [{ first: String(first), last: String(last) }] };
  return { status: 200, body: JSON.stringify(body) };
}

/** @param {number} status @param {string | undefined} retryAfter @param {string} code */
function refusal(status, retryAfter, code) {
  return { status, retryAfter, body: JSON.stringify({ code, message: `${code} here` }) };
}

/**
 * A local server answering its replies in order (the last again), recording each Authorization.
 * @param {{status: number, retryAfter?: string, body: string}[]} replies
 */
async function fake(...replies) {
  /** @type {string[]} */
  const auth = [];
  const server = http.createServer((req, res) => {
    let r;
    if (req.url?.startsWith('/health')) r = { status: 200, body: '{}' };
    else {
      auth.push(req.headers.authorization ?? '');
      r = replies[Math.min(auth.length, replies.length) - 1];
    }
    /** @type {Record<string, string>} */
    const headers = { 'content-type': 'application/json' };
    if (r.retryAfter !== undefined) headers['retry-after'] = r.retryAfter;
    res.writeHead(r.status, headers);
    res.end(r.body);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(undefined)));
  const addr = /** @type {import('node:net').AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${addr.port}`,
    auth,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve(undefined)); }),
  };
}

/** @param {number} waitTimeoutMs @param {{url: string}[]} servers */
function client(waitTimeoutMs, ...servers) {
  return new Client({
    servers: servers.map((s) => s.url), batch: 10, maxBatch: 10, waitTimeoutMs,
    backoffMinMs: 20, backoffMaxMs: 100, token: SECRET,
  });
}

test('every request carries the token, which is never shown', async () => {
  const a = await fake(ids(1, 10));
  const c = client(2000, a);
  try {
    assert.ok(!inspect(c, { depth: 10, showHidden: true }).includes(SECRET));
    assert.ok(!JSON.stringify(c).includes(SECRET));
    assert.equal(await c.nextId('orders'), 1n);
    assert.ok(a.auth.length > 0);
    for (const h of a.auth) assert.equal(h, `Bearer ${SECRET}`);
    assert.throws(() => new Client({ servers: [a.url], token: 'two words' }), ConfigError);
    assert.throws(() => new Client({ servers: [a.url], token: '' }), ConfigError);
  } finally {
    await c.close();
  }
  // Without a token no header is sent.
  const p = await fake(ids(1, 10));
  const plain = new Client({ servers: [p.url] });
  await plain.nextId('orders');
  await plain.close();
  assert.deepEqual(p.auth, ['']);
  await a.close();
  await p.close();
});

test("leafid's 401 and 403 are final, no failover", async () => {
  for (const [status, code] of /** @type {const} */ ([[401, 'unauthorized'], [403, 'forbidden']])) {
    const a = await fake(refusal(status, undefined, code));
    const b = await fake(ids(1, 10));
    const c = client(2000, a, b);
    try {
      await assert.rejects(c.nextId('orders'), (e) => e instanceof RejectedError && e.code === code && e.status === status);
      await assert.rejects(c.nextSnowflakeId(), RejectedError);
      assert.deepEqual(b.auth, [], `${code}: the next server was asked`);
      assert.equal(c.stats().failovers, 0, code);
    } finally {
      await c.close();
      await a.close();
      await b.close();
    }
  }
});

test("a proxy's 401 without leafid's body is a failover", async () => {
  const a = await fake({ status: 401, body: '<html>login</html>' });
  const b = await fake(ids(1, 10));
  const c = client(2000, a, b);
  try {
    assert.equal(await c.nextId('orders'), 1n);
    assert.equal(c.stats().failovers, 1);
  } finally {
    await c.close();
    await a.close();
    await b.close();
  }
});

test('429 quota_exhausted waits Retry-After and asks the same server again', async () => {
  const a = await fake(refusal(429, '1', 'quota_exhausted'), ids(1, 10));
  const b = await fake(ids(1000, 1009));
  const c = client(5000, a, b);
  try {
    const t0 = performance.now();
    assert.equal(await c.nextId('orders'), 1n);
    const took = performance.now() - t0;
    assert.ok(took >= 950 && took < 4000, `${took} ms: Retry-After not honoured`);
    assert.equal(a.auth.length, 2, 'the same server asked again');
    assert.deepEqual(b.auth, [], 'never another server');
    assert.equal(c.stats().failovers, 0);
  } finally {
    await c.close();
    await a.close();
    await b.close();
  }
});

test('429 quota_exhausted past the wait timeout is a ThrottledError', async () => {
  const a = await fake(refusal(429, '3600', 'quota_exhausted'));
  const b = await fake(ids(1, 10));
  const p = await fake(refusal(429, '1', 'rate_limited'));
  const c = client(2000, a, b);
  const c2 = client(2000, p, b);
  try {
    const t0 = performance.now();
    await assert.rejects(c.nextId('orders'),
      (e) => e instanceof ThrottledError && e.code === 'quota_exhausted' && e.retryAfterMs === 3_600_000);
    assert.ok(performance.now() - t0 < 1000, 'it waited in vain');
    assert.deepEqual(b.auth, []);
    assert.equal(c.stats().failovers, 0);
    // A proxy's 429 (not leafid's code) stays a failover.
    await c2.nextId('orders');
    assert.equal(c2.stats().failovers, 1);
  } finally {
    await c.close();
    await c2.close();
    await a.close();
    await b.close();
    await p.close();
  }
});
