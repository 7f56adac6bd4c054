// Child process of close.test.js: uses a client so that every kind of background work exists
// (a pending probe timer of a down server, a waiting call's timer, pooled keep-alive sockets,
// a refill in flight), closes it, and must then exit by itself.
// argv: a live server's URL, a closed port's URL.

import { Client } from '../../src/index.js';

const [live, dead] = process.argv.slice(2);
const c = new Client({
  servers: [dead, live],
  batch: 10,
  waitTimeoutMs: 60_000,
  backoffMinMs: 30_000, // the down server's probe timer would hold the process 30 s
  backoffMaxMs: 60_000,
});
for (let i = 0; i < 25; i++) await c.nextId('leaf-segment-test');
await c.nextSnowflakeId();
// A call that waits (nobody can serve this tag quickly: a stalled wait timer of 60 s).
const stuck = new Client({ servers: [dead], waitTimeoutMs: 60_000, backoffMinMs: 30_000, backoffMaxMs: 60_000 });
const waiting = stuck.nextId('x').catch((e) => e.kind);
await new Promise((r) => setTimeout(r, 50));
const before = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap');
await Promise.all([c.close(), stuck.close()]);
const waitingKind = await waiting;
// Resources still active in this process: none of the client's may remain.
const left = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap' && r !== 'PipeWrap');
process.stdout.write(JSON.stringify({ before, left, waitingKind, stats: c.stats() }) + '\n');
