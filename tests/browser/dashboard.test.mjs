// The dashboard in Debian's headless Chromium, driven by Playwright, against a running leafid.
//
// scripts/browser-test.sh starts the server and sets:
//   LEAFID_URL          http://127.0.0.1:PORT of the server under test
//   LEAFID_DB_FILE      its SQLite file (checked with the sqlite3 CLI when it is installed)
//   LEAFID_ADMIN_TOKEN  the server's admin.token
//   CHROMIUM_PATH       the system Chromium (default /usr/bin/chromium)
//   SCREENSHOT          where to save the full-page screenshot (default ../../target/dashboard.png)
//   BROWSER_PROFILE_DIR a fresh profile directory (default: a new temp dir)
//
// The tests run in order on one page, as a DBA would use it.

import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const BASE = requireEnv('LEAFID_URL');
const DB_FILE = process.env.LEAFID_DB_FILE;
const TOKEN = requireEnv('LEAFID_ADMIN_TOKEN');
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const SCREENSHOT = process.env.SCREENSHOT || resolve(here, '../../target/dashboard.png');
const TAG = 'leaf-segment-test';

// The flags of a quiet, reproducible headless run: nothing reaches out to the network.
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function requireEnv(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run scripts/browser-test.sh`);
  if (name === 'LEAFID_URL' && !/^http:\/\/127\.0\.0\.1:\d+$/.test(value)) {
    throw new Error(`LEAFID_URL must be http://127.0.0.1:PORT, got ${value}`);
  }
  return value;
}

let context;
let page;
let profileDir;
let ownProfile = false;
const consoleErrors = [];
const pageErrors = [];

before(async () => {
  profileDir = process.env.BROWSER_PROFILE_DIR;
  if (profileDir) {
    rmSync(profileDir, { recursive: true, force: true });
    mkdirSync(profileDir, { recursive: true });
  } else {
    profileDir = mkdtempSync(join(tmpdir(), 'leafid-chromium-'));
    ownProfile = true;
  }
  // launchPersistentContext: the profile directory is ours (Playwright owns --user-data-dir).
  context = await chromium.launchPersistentContext(profileDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1280, height: 900 },
    timeout: 30_000,
  });
  page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(10_000);
  page.on('console', (msg) => {
    if (msg.type() === 'error') consoleErrors.push(msg.text());
  });
  page.on('pageerror', (err) => pageErrors.push(err.message));
});

after(async () => {
  if (page) {
    mkdirSync(dirname(SCREENSHOT), { recursive: true });
    await page.screenshot({ path: SCREENSHOT, fullPage: true }).catch((e) => console.error(`screenshot failed: ${e.message}`));
  }
  if (context) await context.close();
  if (ownProfile) rmSync(profileDir, { recursive: true, force: true });
});

// ---------------------------------------------------------------------------------------------
// helpers

async function http(method, path, body, token) {
  const headers = body === undefined ? {} : { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const response = await fetch(`${BASE}${path}`, { method, headers, body });
  return { status: response.status, text: await response.text() };
}

async function tagRow() {
  const r = await http('GET', `/api/v1/tags/${TAG}`);
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text);
}

// The step stored in leaf_alloc, straight from the SQLite file; null when sqlite3 is missing.
function stepInSqliteFile() {
  if (!DB_FILE) return null;
  try {
    const out = execFileSync('sqlite3', ['-cmd', '.timeout 3000', DB_FILE,
      `SELECT step FROM leaf_alloc WHERE biz_tag = '${TAG}'`], { encoding: 'utf8' });
    return Number(out.trim());
  } catch (err) {
    if (err.code === 'ENOENT') return null;
    throw err;
  }
}

// The step shown for the tag on Leaf's /db page (read from the database by the server).
async function stepOnDbPage() {
  const r = await http('GET', '/db');
  assert.equal(r.status, 200);
  const row = r.text.match(new RegExp(`<tr><td>${TAG}</td><td>(\\d+)</td><td>(\\d+)</td>`));
  assert.ok(row, `no ${TAG} row on /db`);
  return Number(row[2]);
}

const digits = (text) => text.replace(/\D/g, '');
const card = () => page.locator(`article.tag[data-tag="${TAG}"]`);

// Console errors added since `mark`, which must all be the failed requests the test caused.
function newConsoleErrors(mark, allowedStatus) {
  const fresh = consoleErrors.slice(mark);
  const unexpected = fresh.filter((t) => !(t.includes('Failed to load resource') && t.includes(`status of ${allowedStatus}`)));
  assert.deepEqual(unexpected, [], 'unexpected console errors');
  return fresh;
}

async function submitStep(step, token) {
  await page.selectOption('#step-tag', TAG);
  await page.fill('#step-value', String(step));
  await page.fill('#admin-token', token);
  await page.click('#step-submit');
  await page.waitForSelector('#step-result[data-outcome="ok"], #step-result[data-outcome="error"]');
  return page.getAttribute('#step-result', 'data-outcome');
}

// ---------------------------------------------------------------------------------------------
// tests

test('the page loads from / and /dashboard with no console errors', async () => {
  const root = await http('GET', '/');
  assert.equal(root.status, 200);
  assert.match(root.text, /<title>leafid dashboard<\/title>/);

  const response = await page.goto(`${BASE}/dashboard`);
  assert.equal(response.status(), 200);
  assert.match(response.headers()['content-security-policy'], /default-src 'none'/);
  assert.equal(await page.title(), 'leafid dashboard');
  // Two polls: the first render and one refresh on top of it.
  await page.waitForFunction(() => Number(document.body.dataset.refreshed || 0) >= 2, null, { timeout: 8_000 });
  assert.match(await page.textContent('#db-status'), /ready · database up/);
  assert.match(await page.textContent('#snowflake [data-field="layout"]'), /^41\/10\/12/);
  assert.match(await page.textContent('#snowflake [data-field="time-left"]'), /\d+ y/);
  assert.deepEqual(pageErrors, []);
  assert.deepEqual(consoleErrors, []);
});

test('the seeded tag shows its two segments once it served ids', async () => {
  const first = await http('GET', `/api/segment/get/${TAG}`);
  assert.equal(first.status, 200);
  assert.equal(first.text, '1');
  // Past 10% of the first segment (step 2000): the next one is leased ahead.
  const batch = await http('GET', `/api/v1/segment/${TAG}/ids?count=299`);
  assert.equal(batch.status, 200, batch.text);

  const current = card().locator('.segment[data-state="current"]');
  await current.waitFor({ timeout: 8_000 });
  assert.match(await current.locator('.detail').textContent(), /^ids 1 … 2000 · next 301 · used 300 \/ 2\D?000/);
  assert.equal(await current.locator('.bar').getAttribute('aria-valuenow'), '300');
  await card().locator('.segment[data-state="ready"]').waitFor({ timeout: 8_000 });
  assert.equal(await card().locator('.segment').count(), 2);
  assert.equal(await card().locator('[data-field="next-ready"]').textContent(), 'next ready');
  assert.equal(digits(await card().locator('[data-field="db-step"]').textContent()), '2000');
  assert.match(await card().locator('[data-field="latency"]').textContent(), /^\d+\.\d\d ms$/);
  assert.equal(await page.locator('#step-tag option', { hasText: TAG }).count(), 1);
  assert.deepEqual(consoleErrors, []);
});

test('a formatted tag shows its format, its period and the fill of the period', async () => {
  const tag = 'orders-dashboard';
  const format = { prefix: 'ORD-', date: 'yyyyMMdd', width: 6, check: true, reset: 'daily', time_zone: 'Asia/Shanghai' };
  const created = await http('POST', '/api/v1/tags', JSON.stringify({ biz_tag: tag, step: 100, format }), TOKEN);
  assert.equal(created.status, 201, created.text);
  const ids = await http('GET', `/api/v1/segment/${tag}/ids?count=10`);
  assert.equal(ids.status, 200, ids.text);
  const period = JSON.parse(ids.text).period;
  const shaped = page.locator(`article.tag[data-tag="${tag}"]`);
  await shaped.locator('[data-field="format"]').waitFor({ timeout: 8_000 });
  assert.equal(await shaped.locator('[data-field="shape"]').textContent(), 'formatted');
  assert.equal(await shaped.locator('[data-field="format"]').textContent(),
    '"ORD-" + yyyyMMdd + 6 decimal digits + check character, restarts daily in Asia/Shanghai');
  assert.equal(await shaped.locator('[data-field="period"]').textContent(), period);
  // 10 ids leased a segment of 100 of the 999,999 the width holds.
  assert.match(await shaped.locator('[data-field="period-used"]').textContent(), /^0\.01% of the width$/);
  // One card for the tag, none for its period row (`orders-dashboard@yyyyMMdd`).
  assert.equal(await page.locator('article.tag[data-tag*="@"]').count(), 0);
  assert.equal(await page.locator('#step-tag option', { hasText: '@' }).count(), 0);
  assert.deepEqual(consoleErrors, []);
});

test('a permuted tag\'s fill is hidden until the admin token is typed in', async () => {
  const tag = 'vault-dashboard';
  const format = { prefix: 'V-', date: 'yyyyMMdd', width: 6, reset: 'daily', time_zone: 'UTC', permute: { key_id: 'vault' } };
  const created = await http('POST', '/api/v1/tags', JSON.stringify({ biz_tag: tag, step: 100, format }), TOKEN);
  assert.equal(created.status, 201, created.text);
  const ids = await http('GET', `/api/v1/segment/${tag}/ids?count=10`);
  assert.equal(ids.status, 200, ids.text);
  await page.fill('#admin-token', '');
  const shaped = page.locator(`article.tag[data-tag="${tag}"]`);
  await shaped.locator('[data-field="period-used"]').waitFor({ timeout: 8_000 });
  assert.equal(await shaped.locator('[data-field="shape"]').textContent(), 'permuted');
  assert.match(await shaped.locator('[data-field="period-used"]').textContent(), /^hidden/);
  assert.equal(await shaped.locator('.bar').count(), 0);
  // With the token typed in, the next poll carries it and the fill appears.
  await page.fill('#admin-token', TOKEN);
  await page.waitForFunction(
    (t) => /% of the width$/.test(document.querySelector(`article.tag[data-tag="${t}"] [data-field="period-used"]`)?.textContent || ''),
    tag,
    { timeout: 8_000 },
  );
  assert.equal(await shaped.locator('.bar').count(), 1);
  await page.fill('#admin-token', '');
  assert.deepEqual(consoleErrors, []);
});

test('a step change through the form lands in the database', async () => {
  const outcome = await submitStep(5000, TOKEN);
  assert.equal(outcome, 'ok', await page.textContent('#step-result'));
  assert.equal(digits(await page.textContent('#step-result [data-field="step"]')), '5000');
  assert.equal(await page.textContent('#step-result [data-field="biz_tag"]'), TAG);

  assert.equal((await tagRow()).step, 5000);
  assert.equal(await stepOnDbPage(), 5000);
  const inFile = stepInSqliteFile();
  if (inFile === null) test.diagnostic?.('sqlite3 not installed: checked through /db only');
  else assert.equal(inFile, 5000);
  // The card picks up the new DB step on its next poll.
  await page.waitForFunction(
    (tag) => /^5\D?000/.test(document.querySelector(`article.tag[data-tag="${tag}"] [data-field="db-step"]`)?.textContent || ''),
    TAG,
    { timeout: 6_000 },
  );
  assert.deepEqual(consoleErrors, []);
});

test('without the admin token the form shows the 401 message', async () => {
  const mark = consoleErrors.length;
  const outcome = await submitStep(6000, '');
  assert.equal(outcome, 'error');
  assert.equal(await page.textContent('#step-result [data-field="code"]'), 'unauthorized');
  assert.match(await page.textContent('#step-result [data-field="message"]'), /Bearer/);
  assert.equal((await tagRow()).step, 5000);
  newConsoleErrors(mark, 401);
});

test('an invalid step shows the JSON error message', async () => {
  const mark = consoleErrors.length;
  const outcome = await submitStep(0, TOKEN);
  assert.equal(outcome, 'error');
  // The page shows the server's own message: the one the same request gets without a browser.
  const r = await http('PATCH', `/api/v1/tags/${TAG}`, '{"step":0}', TOKEN);
  assert.equal(r.status, 400);
  const expected = JSON.parse(r.text);
  assert.equal(await page.textContent('#step-result [data-field="code"]'), 'invalid_step');
  assert.equal(await page.textContent('#step-result [data-field="message"]'), expected.message);
  assert.equal((await tagRow()).step, 5000);
  assert.equal(await stepOnDbPage(), 5000);
  newConsoleErrors(mark, 400);
});

test('the layout planner shows a plan, and the 422 message for an impossible need', async () => {
  // An impossible need first, so the screenshot ends on a plan.
  const mark = consoleErrors.length;
  await page.fill('#plan-years', '1000');
  await page.click('#plan-submit');
  await page.waitForSelector('#plan-result[data-outcome="error"]');
  assert.equal(await page.textContent('#plan-result [data-field="code"]'), 'plan_impossible');
  assert.ok((await page.textContent('#plan-result [data-field="message"]')).length > 10);
  newConsoleErrors(mark, 422);

  await page.fill('#plan-years', '10');
  await page.click('#plan-submit');
  await page.waitForSelector('#plan-result[data-outcome="ok"]');
  const firstId = BigInt(await page.textContent('#plan-result [data-field="first_id"]'));
  const lastId = BigInt(await page.textContent('#plan-result [data-field="last_id"]'));
  // Exact 64-bit ids: above the legacy maximum typed in the form, at most i64::MAX.
  assert.ok(firstId > 9090949948782127403n, `first id ${firstId}`);
  assert.ok(lastId <= 9223372036854775807n && lastId > firstId, `last id ${lastId}`);
  assert.match(await page.textContent('#plan-result [data-field="layout"]'), /^\d+\+\d+\/13\/13 /);
  assert.ok((await page.locator('#plan-result .checks li[data-ok="true"]').count()) >= 2);
  assert.equal(await page.locator('#plan-result .checks li[data-ok="false"]').count(), 0);
  assert.deepEqual(pageErrors, []);
});
