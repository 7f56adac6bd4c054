// Checks on id lists.

import assert from 'node:assert/strict';

/**
 * Asserts that `ids` strictly increase (hence no duplicate).
 * @param {(bigint | string)[]} ids
 * @param {string} what
 */
export function assertIncreasing(ids, what) {
  for (let i = 1; i < ids.length; i++) {
    if (!(BigInt(ids[i - 1]) < BigInt(ids[i]))) {
      assert.fail(`${what}: not increasing at ${i}: ${ids[i - 1]} then ${ids[i]}`);
    }
  }
}

/**
 * Asserts that no id appears twice across `lists`; returns how many ids there are.
 * @param {(bigint | string)[][]} lists
 */
export function assertUnique(lists) {
  const seen = new Set();
  let n = 0;
  for (const l of lists) {
    for (const id of l) {
      const k = String(id);
      if (seen.has(k)) assert.fail(`id ${k} handed out twice`);
      seen.add(k);
      n++;
    }
  }
  return n;
}

/**
 * Runs `callers` concurrent loops of `perCaller` calls of `next`; each caller's ids, every
 * error, and every id in the order the calls returned (across callers).
 * @param {number} callers
 * @param {number} perCaller
 * @param {() => Promise<bigint | string>} next
 * @param {number} [pauseMs]
 */
export async function runCallers(callers, perCaller, next, pauseMs = 0) {
  const order = [];
  const errors = [];
  const lists = await Promise.all(
    Array.from({ length: callers }, async () => {
      const mine = [];
      for (let i = 0; i < perCaller; i++) {
        try {
          const id = await next();
          mine.push(id);
          order.push(id);
        } catch (e) {
          errors.push(e);
        }
        if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
      }
      return mine;
    }),
  );
  return { lists, order, errors };
}
