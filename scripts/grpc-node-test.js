#!/usr/bin/env node
// leafid's gRPC door from Node's @grpc/grpc-js (issue 46), run by scripts/grpc-clients-test.sh.
//
// Loads proto/leafid/v1/leafid.proto unchanged with @grpc/proto-loader (int64 as decimal
// strings: a JavaScript number is exact only up to 2^53 - 1), starts the server binary
// ($LEAFID_BIN) on a temporary SQLite file with the gRPC door on a free port, calls every RPC,
// the stream included, and checks the ids as BigInts: unique, increasing per caller, exact
// 64-bit values. Ends with "N passed, N failed".
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const ROOT = path.resolve(__dirname, '..');
const ADMIN = 'grpc-node-admin';
const ABOVE_2_53 = 9007199254740993n;

const def = loader.loadSync('leafid/v1/leafid.proto', {
  includeDirs: [path.join(ROOT, 'proto')],
  keepCase: true,
  longs: String,
  defaults: true,
});
const v1 = grpc.loadPackageDefinition(def).leafid.v1;

function startServer() {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'leafid-grpc-node-'));
  const bin = process.env.LEAFID_BIN || path.resolve(ROOT, process.env.CARGO_TARGET_DIR || 'target', 'debug', 'leafid');
  const env = {
    ...process.env,
    LEAFID__SERVER__PORT: '0',
    LEAFID__SERVER__WORKERS: '1',
    LEAFID__DATABASE__URL: `sqlite://${path.join(tmp, 'leafid.db')}`,
    LEAFID__LOG__FORMAT: 'json',
    LEAFID__ADMIN__TOKEN: ADMIN,
    LEAFID__GRPC__ENABLED: 'true',
    LEAFID__GRPC__PORT: '0',
    RUST_LOG: 'info',
  };
  const proc = spawn(bin, [], { cwd: tmp, env, stdio: ['ignore', 'ignore', 'pipe'] });
  return new Promise((resolve, reject) => {
    const ports = {};
    const tail = [];
    const timer = setTimeout(() => { proc.kill(); reject(new Error('no ports logged: ' + tail.join(' | '))); }, 60000);
    readline.createInterface({ input: proc.stderr }).on('line', (line) => {
      tail.push(line);
      if (tail.length > 30) tail.shift();
      let v;
      try { v = JSON.parse(line); } catch { return; }
      const msg = v.message ?? v.fields?.message;
      const port = v.port ?? v.fields?.port;
      if ((msg === 'listening' || msg === 'grpc listening') && port) ports[msg] = Number(port);
      if (ports.listening && ports['grpc listening'] && !ports.done) {
        ports.done = true;
        clearTimeout(timer);
        resolve({ proc, http: `http://127.0.0.1:${ports.listening}`, grpc: `127.0.0.1:${ports['grpc listening']}` });
      }
    });
  });
}

async function waitReady(http) {
  const until = Date.now() + 60000;
  for (;;) {
    try {
      const r = await fetch(http + '/health/ready');
      if (r.status === 200) return;
    } catch { /* not yet */ }
    if (Date.now() > until) throw new Error('server not ready');
    await new Promise((r) => setTimeout(r, 50));
  }
}

const call = (client, method, req, md) =>
  new Promise((resolve, reject) => client[method](req, md || new grpc.Metadata(), (e, r) => (e ? reject(e) : resolve(r))));

function admin() {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${ADMIN}`);
  return md;
}

function assert(cond, what) {
  if (!cond) throw new Error(what);
}

function runIds(ranges) {
  const out = [];
  for (const r of ranges) {
    const first = BigInt(r.first), last = BigInt(r.last);
    assert(first <= last, `run ${r.first}..${r.last}`);
    for (let i = first; i <= last; i++) out.push(i);
  }
  return out;
}

function checkIds(ids) {
  assert(ids.every((i) => i > 0n), 'a non-positive id');
  assert(new Set(ids.map(String)).size === ids.length, 'duplicate ids');
  for (let k = 1; k < ids.length; k++) assert(ids[k - 1] < ids[k], `ids do not increase: ${ids[k - 1]} then ${ids[k]}`);
}

async function main() {
  const server = await startServer();
  await waitReady(server.http);
  const creds = grpc.credentials.createInsecure();
  const seg = new v1.Segment(server.grpc, creds);
  const snow = new v1.Snowflake(server.grpc, creds);
  const tags = new v1.Tags(server.grpc, creds);
  let passed = 0, failed = 0;

  const tests = {
    async tagsCreateListGet() {
      await call(tags, 'CreateTag', { biz_tag: 'js.a', step: 10 }, admin());
      await call(tags, 'CreateTag', { biz_tag: 'js.big', step: 100, max_id: ABOVE_2_53.toString() }, admin());
      const list = await call(tags, 'ListTags', {});
      const names = list.tags.map((t) => t.biz_tag);
      assert(names.includes('js.a') && names.includes('js.big'), `tags ${names}`);
      const row = await call(tags, 'GetTag', { biz_tag: 'js.big' });
      assert(row.max_id === ABOVE_2_53.toString(), `max_id ${row.max_id}`);
      try {
        await call(tags, 'CreateTag', { biz_tag: 'js.x', step: 10 });
        throw new Error('created without the admin token');
      } catch (e) {
        assert(e.code === grpc.status.UNAUTHENTICATED, `code ${e.code}`);
      }
    },
    async segmentOneCaller() {
      let ids = (await call(seg, 'NextIds', { biz_tag: 'js.a', count: 25 })).ids.map(BigInt);
      const r = await call(seg, 'NextRanges', { biz_tag: 'js.a', count: 40 });
      assert(r.count === '40' && r.strict === false, `ranges ${JSON.stringify(r)}`);
      ids = ids.concat(runIds(r.ranges));
      let streamed = 0n;
      await new Promise((resolve, reject) => {
        const s = seg.StreamRanges({ biz_tag: 'js.a', count: 1000, chunk: 64 });
        s.on('data', (m) => {
          const got = runIds(m.ranges);
          if (BigInt(got.length) !== BigInt(m.count) || got.length > 64) reject(new Error(`message ${JSON.stringify(m)}`));
          ids = ids.concat(got);
          streamed += BigInt(m.count);
        });
        s.on('error', reject);
        s.on('end', resolve);
      });
      assert(streamed === 1000n, `streamed ${streamed}`);
      ids = ids.concat((await call(seg, 'NextIds', { biz_tag: 'js.a', count: 3 })).ids.map(BigInt));
      assert(ids.length === 1068, `count ${ids.length}`);
      checkIds(ids);
    },
    async pullRanges() {
      await call(tags, 'CreateTag', { biz_tag: 'js.pull', step: 1000 }, admin());
      const got = [];
      await new Promise((resolve, reject) => {
        const s = seg.PullRanges();
        const wants = [100, 1, 250];
        let k = 0;
        s.on('data', (m) => {
          if (Number(m.count) !== wants[k]) reject(new Error(`answer ${JSON.stringify(m)}`));
          got.push(...runIds(m.ranges));
          k++;
          if (k < wants.length) s.write({ biz_tag: 'js.pull', count: wants[k] });
          else s.end();
        });
        s.on('error', reject);
        s.on('end', resolve);
        s.write({ biz_tag: 'js.pull', count: wants[0] });
      });
      assert(got.length === 351, `pulled ${got.length}`);
      checkIds(got);
      const next = (await call(seg, 'NextIds', { biz_tag: 'js.pull', count: 1 })).ids.map(BigInt);
      assert(next[0] === got[got.length - 1] + 1n, `next ${next[0]} after ${got[got.length - 1]}`);
    },
    async exact64Bit() {
      const ids = (await call(seg, 'NextIds', { biz_tag: 'js.big', count: 3 })).ids;
      assert(JSON.stringify(ids) === JSON.stringify([ABOVE_2_53, ABOVE_2_53 + 1n, ABOVE_2_53 + 2n].map(String)), `ids ${ids}`);
      const r = await call(seg, 'NextRanges', { biz_tag: 'js.big', count: 5 });
      assert(runIds(r.ranges).join() === [3n, 4n, 5n, 6n, 7n].map((k) => ABOVE_2_53 + k).join(), 'ranges');
    },
    async formattedAndDecode() {
      const res = await fetch(server.http + '/api/v1/tags', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN}` },
        body: '{"biz_tag":"js.fmt","step":20,"format":{"prefix":"JS-","width":6}}',
      });
      assert(res.status === 201, `create ${res.status}`);
      const f = await call(seg, 'NextFormattedIds', { biz_tag: 'js.fmt', count: 3 });
      assert(f.ids.length === 3 && f.ordered && f.ids.every((i) => i.startsWith('JS-')), JSON.stringify(f));
      const seqs = [];
      for (const id of f.ids) seqs.push(BigInt((await call(seg, 'Decode', { biz_tag: 'js.fmt', id })).sequence));
      checkIds(seqs);
    },
    async snowflake() {
      let ids = (await call(snow, 'NextIds', { count: 100 })).ids.map(BigInt);
      ids = ids.concat(runIds((await call(snow, 'NextRanges', { count: 50 })).ranges));
      checkIds(ids);
      const d = await call(snow, 'Decode', { id: ids[0].toString() });
      assert(d.id === ids[0].toString() && d.layout && d.timestamp, JSON.stringify(d));
      const now = Date.now();
      const b = await call(snow, 'Bounds', { from_unix_ms: now - 60000, to_unix_ms: now + 60000 });
      assert(BigInt(b.min_id) <= ids[0] && ids[0] <= BigInt(b.max_id), JSON.stringify(b));
    },
    async errors() {
      for (const [req, code] of [
        [{ biz_tag: 'nope', count: 1 }, grpc.status.NOT_FOUND],
        [{ biz_tag: 'js.a', count: 0 }, grpc.status.INVALID_ARGUMENT],
      ]) {
        try {
          await call(seg, 'NextIds', req);
          throw new Error(`no error for ${JSON.stringify(req)}`);
        } catch (e) {
          assert(e.code === code, `${JSON.stringify(req)}: ${e.code} ${e.details}`);
        }
      }
    },
  };

  for (const [name, test] of Object.entries(tests)) {
    try {
      await test();
      passed++;
      console.log(`ok ${name}`);
    } catch (e) {
      failed++;
      console.log(`FAILED ${name}: ${e.stack || e}`);
    }
  }
  seg.close(); snow.close(); tags.close();
  server.proc.kill('SIGTERM');
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.error(e); process.exit(1); });
