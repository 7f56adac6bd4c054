// leafid dashboard: polls the JSON API every two seconds and renders it; two forms call the
// admin and planner routes. Plain DOM, no framework. Every value from the server enters the page
// through textContent (via `el`), never as markup.
'use strict';

const POLL_MS = 2000;
const YEAR_SECS = 365.25 * 24 * 3600;

// ---------------------------------------------------------------------------------------------
// JSON with exact 64-bit integers

// Ids reach i64::MAX, far past the 2^53 a JS number holds exactly, and a DBA copies them. Before
// JSON.parse, integer literals that are too long to be safe are turned into strings, so
// 9090949948782127403 stays "9090949948782127403". String contents are skipped, never touched.
function parseExactJson(text) {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
    } else if (c === '-' || (c >= '0' && c <= '9')) {
      let j = i + 1;
      while (j < text.length && /[0-9eE+.-]/.test(text[j])) j += 1;
      const literal = text.slice(i, j);
      const unsafe = /^-?\d+$/.test(literal) && !Number.isSafeInteger(Number(literal));
      out += unsafe ? `"${literal}"` : literal;
      i = j;
    } else {
      out += c;
      i += 1;
    }
  }
  return JSON.parse(out);
}

// One API call: { ok, status, data } where data is the parsed body (an error body on failure),
// or { ok: false, status: 0, data: { code: 'network', message } } when nothing answered.
async function api(method, path, { body, token } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, { method, headers, body, cache: 'no-store' });
  } catch (err) {
    return { ok: false, status: 0, data: { code: 'network', message: `server unreachable (${err.message})` } };
  }
  const text = await response.text();
  let data;
  try {
    data = text ? parseExactJson(text) : null;
  } catch {
    data = { code: 'bad_response', message: `HTTP ${response.status}: ${text.slice(0, 200)}` };
  }
  return { ok: response.ok, status: response.status, data };
}

// ---------------------------------------------------------------------------------------------
// DOM helpers: text only

// el('span', { class: 'pill', data: { state: 'ok' } }, 'text', child, ...)
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'data') for (const [k, v] of Object.entries(value)) node.dataset[k] = String(v);
    else node.setAttribute(key, String(value));
  }
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const $ = (id) => document.getElementById(id);

function showMessage(node, text, kind = 'info') {
  node.hidden = !text;
  node.textContent = text || '';
  node.dataset.kind = kind;
}

// A definition list from [term, value, options?] rows; options.field names the dd for tests,
// options.kind colours it (ok / warn / bad).
function facts(list, rows) {
  list.replaceChildren();
  for (const [term, value, options = {}] of rows) {
    const wrap = el('div', { class: 'fact' });
    wrap.append(el('dt', {}, term));
    wrap.append(el('dd', { data: { field: options.field || '', kind: options.kind || '' } }, value));
    list.append(wrap);
  }
}

// A horizontal bar; `max` 0 draws it empty.
function bar(value, max, label, state) {
  const node = el('div', {
    class: 'bar',
    role: 'progressbar',
    'aria-label': label,
    'aria-valuemin': 0,
    'aria-valuemax': max,
    'aria-valuenow': value,
    data: { state: state || '' },
  });
  const fill = el('div', { class: 'fill' });
  setFill(fill, value, max);
  node.append(fill);
  return node;
}

function setFill(fill, value, max) {
  const share = Number(max) > 0 ? Math.min(1, Number(value) / Number(max)) : 0;
  fill.style.width = `${(share * 100).toFixed(2)}%`;
}

// ---------------------------------------------------------------------------------------------
// Formatting

const grouped = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, '\u202f');
const orDash = (v) => (v === null || v === undefined || v === '' ? '–' : String(v));

function fmtTime(unixMs) {
  if (unixMs === null || unixMs === undefined) return '–';
  const when = new Date(Number(unixMs));
  const ago = Math.max(0, Math.round((Date.now() - when.getTime()) / 1000));
  return `${when.toLocaleTimeString()} (${fmtDuration(ago)} ago)`;
}

// 3725 -> "1 h 2 min"; 4e7 -> "1 y 97 d": the two largest units, enough to judge urgency.
function fmtDuration(secs) {
  const units = [
    ['y', YEAR_SECS],
    ['d', 86400],
    ['h', 3600],
    ['min', 60],
    ['s', 1],
  ];
  let rest = Math.max(0, Math.floor(secs));
  const parts = [];
  for (const [name, size] of units) {
    const n = Math.floor(rest / size);
    if (n > 0 || (parts.length === 0 && name === 's')) parts.push(`${n} ${name}`);
    rest -= n * size;
    if (parts.length === 2) break;
  }
  return parts.join(' ');
}

function layoutText(spec) {
  const bits = `${spec.time_bits}/${spec.worker_bits}/${spec.seq_bits}`;
  return spec.prefix_bits ? `${spec.prefix_bits}+${bits}` : bits;
}

// ---------------------------------------------------------------------------------------------
// Segment tags

function renderTags(tagsReply, cacheReply) {
  const box = $('tags');
  const message = $('segment-message');
  if (cacheReply.status === 404 && cacheReply.data && cacheReply.data.code === 'engine_disabled') {
    showMessage(message, 'The segment engine is disabled (segment.enabled = false).');
    box.replaceChildren();
    updateTagChoices([]);
    return;
  }
  // A formatted tag's buffer is its current period's (`tag@period`): its card is the tag's,
  // drawn from the `formatted` entry, never one card per period row.
  const buffers = new Map();
  if (cacheReply.ok) for (const b of cacheReply.data.tags) if (!isPeriodRow(b.biz_tag)) buffers.set(b.biz_tag, b);
  // Formatted tags (order numbers, permuted or gapped codes): format, current period, fill.
  const shapes = new Map();
  if (cacheReply.ok) for (const f of cacheReply.data.formatted || []) shapes.set(f.biz_tag, f);

  let entries;
  if (tagsReply.ok) {
    entries = tagsReply.data.tags.filter((row) => !isPeriodRow(row.biz_tag)).map((row) => ({
      row, buffer: buffers.get(row.biz_tag) || row.buffer, shape: shapes.get(row.biz_tag),
    }));
    showMessage(message, cacheReply.ok ? '' : `Buffers unavailable: ${cacheReply.data.message}`, 'warn');
  } else if (cacheReply.ok) {
    entries = [...buffers.values()].map((buffer) => ({ row: null, buffer, shape: shapes.get(buffer.biz_tag) }));
    showMessage(message, `Cannot read leaf_alloc (${tagsReply.data.message}): showing the buffers in memory.`, 'warn');
  } else {
    showMessage(message, `Cannot read tags: ${tagsReply.data.message}`, 'bad');
    return; // keep the last view rather than blank the page
  }
  entries.sort((a, b) => tagName(a).localeCompare(tagName(b)));
  box.replaceChildren(...entries.map(tagCard));
  if (entries.length === 0) box.append(el('p', { class: 'muted' }, 'No tags in leaf_alloc yet.'));
  updateTagChoices(entries.map(tagName));
}

const tagName = (entry) => (entry.row ? entry.row.biz_tag : entry.buffer.biz_tag);

// A formatted tag's period row (`tag@period`): '@' is outside the tag alphabet.
const isPeriodRow = (name) => String(name).includes('@');

// What a format writes, e.g. `ORD-` yyyyMMdd + 8 decimal digits + check, daily in Asia/Shanghai.
function formatText(f) {
  const parts = [];
  if (f.prefix) parts.push(`"${f.prefix}"`);
  if (f.date) parts.push(f.date);
  parts.push(`${f.width} ${f.radix || 'decimal'} digits`);
  if (f.check) parts.push('check character');
  if (f.suffix) parts.push(`"${f.suffix}"`);
  const reset = f.reset && f.reset !== 'never' ? `, restarts ${f.reset} in ${f.time_zone || 'UTC'}` : '';
  return parts.join(' + ') + reset;
}

// The shape's mode: permuted (with its key's id, never the key), gapped, or plain.
function shapeMode(f) {
  if (f.permute) return `permuted (key ${f.permute.key_id}): hides order and volume`;
  if (f.gaps) return `gapped (mean gap ${f.gaps.mean}): increasing, volume blurred`;
  return 'increasing';
}

function tagCard({ row, buffer, shape }) {
  const name = row ? row.biz_tag : buffer.biz_tag;
  const card = el('article', { class: 'tag', data: { tag: name } });
  const head = el('header', {}, el('h3', {}, name));
  if (row && row.description) head.append(el('span', { class: 'muted desc' }, row.description));
  const badges = el('span', { class: 'badges' });
  if (shape) {
    // A formatted tag serves from its period rows (`tag@period`), never from its own row.
    const f = shape.format;
    const kind = f.permute ? 'permuted' : f.gaps ? 'gapped' : 'formatted';
    badges.append(el('span', { class: 'pill', data: { state: 'ok', field: 'shape' } }, kind));
    head.append(badges);
    card.append(head);
    // A permuted tag's fill is its volume: the server sends it with the admin token only.
    const hidden = shape.used === null || shape.used === undefined;
    const used = Number(shape.used);
    const usedText = hidden ? 'hidden: a permuted tag\'s volume needs the admin token'
      : `${(100 * used).toFixed(2)}% of the width${used >= 0.8 ? ' (over 80%: widen before it runs out)' : ''}`;
    const rows = [
      ['format', formatText(f), { field: 'format' }],
      ['ids', shapeMode(f), { field: 'mode' }],
      ['period', shape.period || '(never restarts)', { field: 'period' }],
      ['period used', usedText, { field: 'period-used', kind: hidden ? 'idle' : '' }],
    ];
    const list = el('dl', { class: 'facts compact' });
    facts(list, rows);
    card.append(list);
    if (!hidden) {
      card.append(bar(used, 1, `${name}: ${(100 * used).toFixed(2)}% of the period's width leased`, used >= 0.8 ? 'bad' : 'ok'));
    }
    return card;
  }
  if (buffer) {
    badges.append(
      el('span', { class: 'pill', data: { state: buffer.next_ready ? 'ok' : 'idle', field: 'next-ready' } },
        buffer.next_ready ? 'next ready' : 'next not ready'),
    );
    if (buffer.loading) badges.append(el('span', { class: 'pill', data: { state: 'busy', field: 'loading' } }, 'loading'));
    if (buffer.last_error) badges.append(el('span', { class: 'pill', data: { state: 'bad' } }, 'load failing'));
  } else {
    badges.append(el('span', { class: 'pill', data: { state: 'idle' } }, 'not loaded'));
  }
  head.append(badges);
  card.append(head);

  const dbStep = row ? row.step : buffer ? buffer.db_step : null;
  const rows = [];
  if (buffer) {
    const ratio = Number(buffer.step) / Number(buffer.db_step);
    let adapted = '(the DB step)';
    if (ratio > 1) adapted = `(×${Number.isInteger(ratio) ? ratio : ratio.toFixed(2)}: loads come often)`;
    rows.push(['step in use', `${grouped(buffer.step)} ${adapted}`, { field: 'step' }]);
  }
  let dbNote = '';
  if (row && buffer && Number(row.step) !== Number(buffer.db_step)) {
    dbNote = ` (was ${grouped(buffer.db_step)} at the last load; applies at the next)`;
  }
  rows.push(['DB step', `${grouped(orDash(dbStep))}${dbNote}`, { field: 'db-step' }]);
  if (row) rows.push(['max_id in DB', row.max_id, { field: 'max-id' }]);
  if (buffer) {
    rows.push(['ids in memory', grouped(buffer.remaining), { field: 'remaining' }]);
    rows.push(['loads', grouped(buffer.loads), { field: 'loads' }]);
    rows.push(['last load', fmtTime(buffer.last_load_unix_ms), { field: 'last-load' }]);
    const latency = buffer.last_load_latency_ms;
    rows.push(['load latency', latency === null ? '–' : `${Number(latency).toFixed(2)} ms`, { field: 'latency' }]);
  }
  const list = el('dl', { class: 'facts compact' });
  facts(list, rows);
  card.append(list);

  if (buffer) {
    const segments = el('div', { class: 'segments' });
    for (const seg of buffer.segments) segments.append(segmentRow(name, seg));
    card.append(segments);
    if (buffer.last_error) {
      card.append(el('p', { class: 'error', data: { field: 'last-error' } },
        `Last load failed (${buffer.consecutive_failures} in a row): ${buffer.last_error}`));
    }
  }
  return card;
}

function segmentRow(tag, seg) {
  const row = el('div', { class: 'segment', data: { slot: seg.slot, state: seg.state } });
  row.append(el('span', { class: 'slot' }, `segment ${seg.slot}`));
  row.append(el('span', { class: 'state', data: { state: seg.state } }, seg.state));
  row.append(bar(seg.used, seg.size, `${tag} segment ${seg.slot}: ${seg.used} of ${seg.size} ids used`, seg.state));
  let detail = 'no segment';
  if (seg.min_id !== null && seg.min_id !== undefined) {
    const pct = Number(seg.size) > 0 ? ((100 * Number(seg.used)) / Number(seg.size)).toFixed(1) : '0';
    const next = seg.state === 'spent' ? 'all handed out' : `next ${orDash(seg.next_id)}`;
    detail = `ids ${seg.min_id} … ${seg.max_id} · ${next} · used ${grouped(seg.used)} / ${grouped(seg.size)} (${pct}%)`;
  }
  row.append(el('span', { class: 'detail' }, detail));
  return row;
}

// Keeps the step form's tag list in step with the tags, without losing the user's choice.
function updateTagChoices(names) {
  const select = $('step-tag');
  const current = [...select.options].map((o) => o.value);
  if (current.length === names.length && current.every((n, i) => n === names[i])) return;
  const chosen = select.value;
  select.replaceChildren(...names.map((n) => el('option', { value: n }, n)));
  if (names.includes(chosen)) select.value = chosen;
}

// ---------------------------------------------------------------------------------------------
// Snowflake and readiness

function renderSnowflake(reply) {
  const list = $('snowflake');
  const message = $('snowflake-message');
  const ring = $('ring');
  if (!reply.ok) {
    const disabled = reply.data && reply.data.code === 'engine_disabled';
    showMessage(message, disabled ? 'The snowflake engine is disabled (snowflake.enabled = false).'
      : `Status unavailable: ${reply.data.message}`, disabled ? 'info' : 'bad');
    list.replaceChildren();
    ring.hidden = true;
    return;
  }
  const s = reply.data;
  const left = Number(s.time_left_secs);
  let leftKind = 'ok';
  let leftText = fmtDuration(left);
  if (left <= 0) {
    leftKind = 'bad';
    leftText = 'exhausted: plan a new layout';
  } else if (left < YEAR_SECS) {
    leftKind = 'warn';
    leftText += ' — under one year: plan a migration';
  }
  showMessage(message, s.suspended ? 'Issuing is suspended: the worker lease was not renewed.' : '', 'bad');
  const rows = [
    ['layout (time/worker/seq bits)', `${s.layout} · ${s.unit}`, { field: 'layout' }],
    ['epoch', s.epoch, { field: 'epoch' }],
    ['worker id', `${s.worker_id} (${s.worker_strategy})`, { field: 'worker' }],
    ['generator', s.generator, { field: 'generator' }],
    ['runs out at', s.exhausted_at, { field: 'exhausted-at' }],
    ['time left', leftText, { field: 'time-left', kind: leftKind }],
  ];
  if (s.ticks_ahead !== null && s.ticks_ahead !== undefined) {
    rows.push(['ticks ahead of the clock', grouped(s.ticks_ahead), { field: 'ticks-ahead' }]);
  }
  facts(list, rows);
  if (s.ring_capacity) {
    ring.hidden = false;
    const barNode = $('ring-bar');
    barNode.setAttribute('aria-valuemax', s.ring_capacity);
    barNode.setAttribute('aria-valuenow', s.ring_available);
    setFill(barNode.firstElementChild, s.ring_available, s.ring_capacity);
    const pct = ((100 * Number(s.ring_available)) / Number(s.ring_capacity)).toFixed(0);
    $('ring-text').textContent = `${grouped(s.ring_available)} / ${grouped(s.ring_capacity)} ids ready (${pct}%)`;
  } else {
    ring.hidden = true;
  }
}

function renderReadiness(reply) {
  const pill = $('db-status');
  if (reply.status === 0) {
    pill.dataset.state = 'bad';
    pill.textContent = reply.data.message;
  } else if (reply.ok && reply.data.status === 'ready') {
    pill.dataset.state = 'ok';
    pill.textContent = `ready · database ${reply.data.database}`;
  } else if (reply.ok) {
    pill.dataset.state = 'warn';
    pill.textContent = `${reply.data.status} · database ${reply.data.database}: ${reply.data.detail || ''}`;
  } else {
    pill.dataset.state = 'bad';
    pill.textContent = `not ready: ${reply.data.message}`;
  }
}

// ---------------------------------------------------------------------------------------------
// Polling

async function refresh() {
  // With the admin token typed in, the polls carry it: a permuted tag's counts are shown to it.
  const token = $('admin-token').value || undefined;
  const [tags, cache, ready, snowflake] = await Promise.all([
    api('GET', '/api/v1/tags', { token }),
    api('GET', '/api/v1/cache', { token }),
    api('GET', '/health/ready'),
    api('GET', '/api/v1/snowflake/status'),
  ]);
  renderTags(tags, cache);
  renderSnowflake(snowflake);
  renderReadiness(ready);
  const status = $('refresh-status');
  status.textContent = ready.status === 0 ? 'refresh failed' : `updated ${new Date().toLocaleTimeString()}`;
  document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
}

// One poll at a time: the next starts two seconds after the previous finished. Hidden tabs wait.
async function pollForever() {
  for (;;) {
    if (!document.hidden) {
      try {
        await refresh();
      } catch (err) {
        $('refresh-status').textContent = `refresh failed: ${err.message}`;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

// ---------------------------------------------------------------------------------------------
// Forms

// A number typed as digits goes into the JSON as those digits (exact at any size); anything else
// goes as a string, so the server, the one validator, answers with its own message.
function jsonNumber(text) {
  const t = text.trim();
  if (t === '') return 'null';
  return /^-?\d+$/.test(t) ? t : JSON.stringify(t);
}

function showError(box, reply) {
  box.dataset.outcome = 'error';
  const data = reply.data || {};
  box.replaceChildren(
    el('p', { class: 'error' },
      el('strong', { data: { field: 'code' } }, data.code || `HTTP ${reply.status}`), ': ',
      el('span', { data: { field: 'message' } }, data.message || '')),
  );
}

async function onStepSubmit(event) {
  event.preventDefault();
  const box = $('step-result');
  const tag = $('step-tag').value;
  if (!tag) {
    showError(box, { status: 0, data: { code: 'no_tag', message: 'choose a tag first' } });
    return;
  }
  const button = $('step-submit');
  button.disabled = true;
  box.dataset.outcome = 'pending';
  box.replaceChildren(el('p', { class: 'muted' }, 'Saving…'));
  try {
    const body = `{"step":${jsonNumber($('step-value').value)}}`;
    const token = $('admin-token').value;
    const reply = await api('PATCH', `/api/v1/tags/${encodeURIComponent(tag)}`, { body, token });
    if (!reply.ok) {
      showError(box, reply);
      return;
    }
    const row = reply.data;
    box.dataset.outcome = 'ok';
    const list = el('dl', { class: 'facts kv' });
    facts(list, [
      ['biz_tag', row.biz_tag, { field: 'biz_tag' }],
      ['step', grouped(row.step), { field: 'step' }],
      ['max_id', row.max_id, { field: 'max_id' }],
      ['description', orDash(row.description), { field: 'description' }],
      ['update_time', orDash(row.update_time), { field: 'update_time' }],
    ]);
    box.replaceChildren(el('p', { class: 'ok' }, `Saved. The new step applies from the next segment load of ${row.biz_tag}.`), list);
    refresh().catch(() => {});
  } finally {
    button.disabled = false;
  }
}

// "28/22/13" or "7+30/13/13" -> a layout object, or null.
function parseLayout(text) {
  const m = /^\s*(?:(\d{1,2})\+)?(\d{1,2})\/(\d{1,2})\/(\d{1,2})\s*$/.exec(text);
  if (!m) return null;
  return { prefix_bits: Number(m[1] || 0), time_bits: Number(m[2]), worker_bits: Number(m[3]), seq_bits: Number(m[4]) };
}

function onBasisChange() {
  const byCutover = $('plan-basis-cutover').checked;
  $('plan-cutover').disabled = !byCutover;
  $('plan-max-legacy-id').disabled = byCutover;
}

async function onPlanSubmit(event) {
  event.preventDefault();
  const box = $('plan-result');
  const legacy = parseLayout($('plan-legacy-layout').value);
  if (!legacy) {
    showError(box, { status: 0, data: { code: 'invalid_layout', message: 'legacy layout must look like T/W/S or P+T/W/S, e.g. 28/22/13' } });
    return;
  }
  legacy.unit = $('plan-legacy-unit').value;
  legacy.epoch = $('plan-legacy-epoch').value.trim();
  const parts = [
    `"legacy":${JSON.stringify(legacy)}`,
    `"worker_bits":${jsonNumber($('plan-worker-bits').value)}`,
    `"seq_bits":${jsonNumber($('plan-seq-bits').value)}`,
    `"years":${jsonNumber($('plan-years').value)}`,
  ];
  if ($('plan-basis-cutover').checked) parts.push(`"cutover":${JSON.stringify($('plan-cutover').value.trim())}`);
  else parts.push(`"max_legacy_id":${jsonNumber($('plan-max-legacy-id').value)}`);
  const button = $('plan-submit');
  button.disabled = true;
  try {
    const reply = await api('POST', '/api/v1/layouts/plan', { body: `{${parts.join(',')}}` });
    if (!reply.ok) {
      showError(box, reply);
      return;
    }
    const plan = reply.data;
    box.dataset.outcome = 'ok';
    const spec = plan.layout;
    const prefix = spec.prefix_bits ? `, prefix value ${spec.prefix_value}` : '';
    const list = el('dl', { class: 'facts kv' });
    facts(list, [
      ['new layout', `${layoutText(spec)} (${spec.unit}${prefix})`, { field: 'layout' }],
      ['epoch', plan.epoch, { field: 'epoch' }],
      ['first id', plan.first_id, { field: 'first_id' }],
      ['last id', plan.last_id, { field: 'last_id' }],
      ['runs out at', plan.exhausted_at, { field: 'exhausted_at' }],
    ]);
    const checks = el('ul', { class: 'checks' });
    for (const check of plan.checks) {
      checks.append(el('li', { data: { ok: check.ok } }, `${check.ok ? '✓' : '✗'} ${check.name}: ${check.detail}`));
    }
    box.replaceChildren(list, checks);
  } finally {
    button.disabled = false;
  }
}

document.addEventListener('DOMContentLoaded', () => {
  $('step-form').addEventListener('submit', onStepSubmit);
  $('plan-form').addEventListener('submit', onPlanSubmit);
  for (const radio of document.querySelectorAll('input[name="basis"]')) radio.addEventListener('change', onBasisChange);
  onBasisChange();
  pollForever();
});
