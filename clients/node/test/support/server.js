// Real leafid servers for the tests: the debug binary on a temporary SQLite file.
//
// The binary is `target/debug/leafid` at the repository root (`cargo build --bin leafid`), or
// `LEAFID_BIN`. Several servers may share one SQLite file (leases are `BEGIN IMMEDIATE`
// transactions), which is how the failover tests get servers of one database.

import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * Resolves once `GET /health/ready` answers 200. A server listens before it is ready (it claims
 * its snowflake worker id and runs its migrations in the background): until then its snowflake
 * ids answer 503 `snowflake_not_ready`, which on a loaded machine a test's first requests met.
 * @param {string} address `http://127.0.0.1:PORT`
 * @param {number} withinMs
 */
async function waitReady(address, withinMs) {
  const deadline = Date.now() + withinMs;
  let last = '';
  for (;;) {
    try {
      const status = await readyStatus(`${address}/health/ready`);
      if (status === 200) return;
      last = `status ${status}`;
    } catch (e) {
      last = String(e);
    }
    if (Date.now() >= deadline) throw new Error(`${address} was not ready within ${withinMs} ms: ${last}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The status of one GET of `url` on a connection of its own (no agent: nothing stays open).
 * @param {string} url
 * @returns {Promise<number>}
 */
function readyStatus(url) {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, timeout: 5000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('timed out after 5 s')));
    req.on('error', reject);
  });
}

/** The leafid binary, or an error saying how to build it. */
export function serverBinary() {
  const bin = process.env.LEAFID_BIN ?? path.resolve(here, '../../../../target/debug/leafid');
  if (!existsSync(bin)) {
    throw new Error(
      `the server binary ${bin} is missing: run \`cargo build --bin leafid\` at the repository root, or set LEAFID_BIN`,
    );
  }
  return bin;
}

/** The admin token every test server is started with (admin writes send it). */
export const ADMIN_TOKEN = 'node-client-test-token';

/** Every server started, killed when the test process exits. @type {Set<LeafidServer>} */
const running = new Set();
process.on('exit', () => {
  for (const s of running) {
    try {
      process.kill(s.pid, 'SIGCONT');
      process.kill(s.pid, 'SIGKILL');
    } catch {
      // gone already
    }
  }
});

/** A temporary directory with an SQLite database URL, removed by `remove()`. */
export function tempDatabase() {
  const dir = mkdtempSync(path.join(tmpdir(), 'leafid-node-'));
  return {
    url: `sqlite://${dir}/leafid.db`,
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** One `leafid` process. */
export class LeafidServer {
  /**
   * Starts the binary on `db` and resolves once its /health/ready answers 200.
   * @param {string} db database URL
   * @param {{port?: number, env?: Record<string, string>}} [o] a fixed port (default: 0, the kernel's)
   */
  static start(db, o = {}) {
    // Its own working directory: files the server keeps beside it (`data/snowflake-worker.json`,
    // locked by one process) stay out of the repository and apart from the other servers'.
    const cwd = mkdtempSync(path.join(tmpdir(), 'leafid-node-server-'));
    const child = spawn(path.resolve(serverBinary()), [], {
      cwd,
      env: {
        ...process.env,
        LEAFID__SERVER__PORT: String(o.port ?? 0),
        LEAFID__SERVER__WORKERS: '1',
        LEAFID__DATABASE__URL: db,
        LEAFID__LOG__FORMAT: 'json',
        LEAFID__ADMIN__TOKEN: ADMIN_TOKEN,
        RUST_LOG: 'info',
        ...(o.env ?? {}),
      },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const server = new LeafidServer(child);
    server.exited.then(() => rmSync(cwd, { recursive: true, force: true }));
    running.add(server);
    return new Promise((resolve, reject) => {
      let buf = '';
      const log = [];
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`leafid did not log its port within 30 s:\n${log.join('\n')}`));
      }, 30_000);
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (chunk) => {
        buf += chunk;
        let nl;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (process.env.TEST_LOG) process.stderr.write(`[leafid ${child.pid}] ${line}\n`);
          if (log.length < 50) log.push(line);
          try {
            const v = JSON.parse(line);
            if (v.message === 'listening' && server.address === '') {
              server.port = v.port;
              server.address = `http://127.0.0.1:${v.port}`;
              clearTimeout(timer);
              waitReady(server.address, 30_000).then(
                () => resolve(server),
                (e) => {
                  child.kill('SIGKILL');
                  reject(e);
                },
              );
            }
          } catch {
            // not a JSON line
          }
        }
      });
      child.on('exit', (code, sig) => {
        running.delete(server);
        if (server.address === '') {
          clearTimeout(timer);
          reject(new Error(`leafid exited (${code ?? sig}) before listening:\n${log.join('\n')}`));
        }
      });
    });
  }

  /** @param {import('node:child_process').ChildProcess} child */
  constructor(child) {
    this.child = child;
    this.pid = /** @type {number} */ (child.pid);
    /** `http://127.0.0.1:PORT` once listening. */
    this.address = '';
    this.port = 0;
    this.exited = new Promise((resolve) => child.on('exit', resolve));
  }

  /** SIGKILL, and wait for the exit. */
  async kill9() {
    if (running.has(this)) {
      this.child.kill('SIGCONT');
      this.child.kill('SIGKILL');
    }
    await this.exited;
  }

  /** SIGSTOP: the process keeps its port but answers nothing. */
  stop() {
    this.child.kill('SIGSTOP');
    // kill returns before the stop takes hold: on a busy machine a stopped server still
    // answered requests. Wait until every thread is stopped (state T in /proc).
    const deadline = Date.now() + 10_000;
    while (!allThreadsStopped(this.child.pid)) {
      if (Date.now() > deadline) throw new Error(`server ${this.child.pid} not stopped after SIGSTOP`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1);
    }
  }

  /** SIGCONT. */
  cont() {
    this.child.kill('SIGCONT');
  }
}

/** A port below 32768 that is free now (the kernel picks client ports above). */
export async function freeFixedPort() {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    const ok = await new Promise((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (ok) return port;
  }
  throw new Error('no free port below 32768');
}

/** A port nothing listens on (bound, then closed). */
export async function closedPort() {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const { port } = /** @type {net.AddressInfo} */ (s.address());
      s.close(() => resolve(port));
    });
  });
}

/**
 * Creates a tag through the admin route, with the admin token.
 * @param {string} server base URL
 * @param {string} tag
 * @param {number} step
 * @param {string} [maxId] decimal, the first id to lease
 */
export async function createTag(server, tag, step, maxId) {
  const body = `{"biz_tag":${JSON.stringify(tag)},"step":${step}${maxId ? `,"max_id":${maxId}` : ''}}`;
  const r = await fetch(`${server}/api/v1/tags`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
    body,
  });
  if (r.status !== 201) throw new Error(`create tag ${tag}: ${r.status} ${await r.text()}`);
}

/**
 * A GET straight to a server (not through the client): its JSON.
 * @param {string} url
 */
export async function getJson(url) {
  const r = await fetch(url, { headers: { connection: 'close' } });
  return { status: r.status, body: await r.json() };
}

/** Whether every thread of `pid` is in state T (stopped) in /proc; one that exits meanwhile counts. */
function allThreadsStopped(pid) {
  let tasks;
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return false;
  }
  return tasks.length > 0 && tasks.every((task) => {
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/task/${task}/stat`, 'latin1');
    } catch {
      return true;
    }
    return stat.slice(stat.lastIndexOf(')') + 1).trimStart().startsWith('T');
  });
}

/**
 * Creates a formatted tag (docs/shapes.md) through the admin route, with the admin token.
 * @param {string} server base URL
 * @param {string} tag
 * @param {number} step
 * @param {object} format e.g. `{prefix: 'ORD-', date: 'yyyyMMdd', width: 8, reset: 'daily', time_zone: 'UTC'}`
 * @param {number} [maxId] where every period's sequence starts (default 1)
 */
export async function createFormattedTag(server, tag, step, format, maxId) {
  const r = await fetch(`${server}/api/v1/tags`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
    body: JSON.stringify({ biz_tag: tag, step, format, ...(maxId !== undefined ? { max_id: maxId } : {}) }),
  });
  if (r.status !== 201) throw new Error(`create formatted tag ${tag}: ${r.status} ${await r.text()}`);
}
