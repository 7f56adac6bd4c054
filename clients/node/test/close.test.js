// close() leaves nothing running: a process that used a client exits by itself right after.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';

import { closedPort, LeafidServer, tempDatabase } from './support/server.js';

const here = path.dirname(fileURLToPath(import.meta.url));
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
  await server.kill9();
  db.remove();
});

test('after close() the process exits at once: no timer, socket or request left', T, async () => {
  const dead = `http://127.0.0.1:${await closedPort()}`;
  const t0 = performance.now();
  const { stdout } = await new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [path.join(here, 'support/close-child.js'), server.address, dead],
      { timeout: 20_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve({ stdout })),
    );
  });
  const elapsed = performance.now() - t0;
  const r = JSON.parse(stdout);
  assert.ok(r.before.includes('Timeout'), `the check sees timers while the client runs: ${r.before}`);
  assert.deepEqual(r.left, [], 'active resources after close()');
  assert.equal(r.waitingKind, 'closed', 'a waiting call rejects with ClosedError');
  assert.equal(r.stats.idsServed, 26);
  // Probe timers of 30 s and a wait of 60 s were pending: exiting in a few seconds proves they
  // were cleared (node start and the calls take well under a second).
  assert.ok(elapsed < 10_000, `the child took ${elapsed} ms`);
});
