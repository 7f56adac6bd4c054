// The shared client vectors (../conformance/vectors/*.json) run against this client's own rule
// functions: the same files every client's tests read. No server.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

import { rfc3339, readBounds } from '../src/bounds.js';
import { isValidTag } from '../src/client.js';
import { parseRfc3339, readFormatted } from '../src/formatted.js';
import { Refusal, isQuotaWait, refusalIsFinal, validateRanges } from '../src/servers.js';
import { nextBatchSize } from '../src/sizing.js';
import { catchUpCount } from '../src/supply.js';

/**
 * The cases of one vector file. With `exact`, a field's integer of 16 digits or more is read as
 * a string (a `number` would round it), for the test to turn into a `bigint`.
 * @param {string} file
 * @param {boolean} [exact]
 */
function cases(file, exact = false) {
  let text = readFileSync(new URL(`../../conformance/vectors/${file}`, import.meta.url), 'utf8');
  if (exact) text = text.replace(/^(\s*"\w+": )(\d{16,})(,?)$/gm, '$1"$2"$3');
  const doc = JSON.parse(text);
  assert.ok(doc.description && doc.version >= 1 && doc.cases.length > 0, file);
  return doc.cases;
}

/** A body's JSON, or `undefined` where it does not parse (the client's failure path too). */
function parsed(body) {
  try {
    return JSON.parse(body);
  } catch {
    return undefined;
  }
}

test('vectors: errors', () => {
  for (const c of cases('errors.json')) {
    if (c.status === 200) continue; // not_formatted: made by the formatted reader
    const got = refusalIsFinal(c.status, c.code) ? 'reject' : isQuotaWait(c.status, c.code) ? 'wait' : 'failover';
    assert.equal(got, c.action, c.name);
  }
});

test('vectors: tags', () => {
  for (const c of cases('tags.json')) assert.equal(isValidTag(c.tag), c.valid, c.name);
});

test('vectors: batch sizing', () => {
  for (const c of cases('batch.json', true)) {
    let got;
    if (c.rule === 'demand') {
      got = nextBatchSize({
        size: c.size, min: c.min, max: c.max, used: c.used, batchIds: c.batch_ids,
        elapsedMs: c.elapsed_ms, targetMs: c.target_ms, starved: c.starved,
      });
    } else {
      assert.equal(c.rule, 'catch_up', c.name);
      got = catchUpCount(BigInt(c.floor), BigInt(c.last), c.size, c.limit);
    }
    assert.equal(got, c.want, c.name);
  }
});

test('vectors: bounds rounding (the cases a Date can hold: whole milliseconds)', () => {
  let ran = 0;
  for (const c of cases('bounds.json')) {
    const sub = (t) => /\.\d{3}\d*[1-9]/.test(t);
    if (sub(c.from) || sub(c.to)) continue; // finer than a Date
    assert.equal(rfc3339('from', new Date(c.from)), c.query_from, c.name);
    assert.equal(rfc3339('to', new Date(c.to)), c.query_to, c.name);
    ran++;
  }
  assert.ok(ran >= 3, `${ran} cases`);
});

test('vectors: responses', () => {
  for (const c of cases('responses.json')) {
    const body = parsed(c.body);
    if (c.kind === 'ranges') {
      const read = () => validateRanges(body, { count: c.asked, tag: c.tag });
      if (!c.valid) {
        assert.throws(read, c.name);
        continue;
      }
      const batch = read();
      const got = batch.runs.map((r) => [String(r.first), String(r.last)]);
      assert.deepEqual(got, c.runs, c.name);
      assert.equal(batch.strict === true, c.strict === true, `${c.name}: strict`);
    } else {
      assert.equal(c.kind, 'bounds', c.name);
      if (!c.valid) {
        assert.throws(() => readBounds(body), c.name);
        continue;
      }
      const b = readBounds(body);
      assert.deepEqual([String(b.minId), String(b.maxId)], [c.min_id, c.max_id], c.name);
    }
  }
});

test('vectors: RFC 3339', () => {
  for (const c of cases('rfc3339.json')) {
    const got = parseRfc3339(c.text);
    if (c.valid) assert.equal(got, Number(c.unix_ms), c.name);
    else assert.ok(Number.isNaN(got), `${c.name}: ${got}`);
  }
});

test('vectors: formatted answers', () => {
  for (const c of cases('formats.json')) {
    let got;
    try {
      got = readFormatted(parsed(c.body) ?? null, { count: c.asked, tag: c.tag });
    } catch {
      got = 'fault';
    }
    if (c.result === 'fault') assert.equal(got, 'fault', c.name);
    else if (c.result === 'not_formatted') assert.ok(got instanceof Refusal && got.code === 'not_formatted', c.name);
    else assert.deepEqual([got.ids, got.ordered, got.periodEnd], [c.ids, c.ordered, c.period_end_ms], c.name);
  }
});
