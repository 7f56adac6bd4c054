// Period deadlines off the main thread (issue 47): a formatted supply's local path must not read
// the wall clock per id (a clock read is a system call where the VM's vDSO falls back to it:
// about 110 ns for `Date.now()` on the bench machine, several times the rest of the path), and a
// timer of the main thread cannot be trusted to fire: a synchronous loop, or an `await` loop that
// only runs microtasks, never lets the event loop turn. So one worker thread, started on first
// use and unref'd (it never keeps a process alive), sleeps until each deadline on its own event
// loop (monotonic) and then sets a bit in shared memory that the main thread loads.
//
// A slot of `FLAGS` is one deadline: its value is `gen << 1 | ended`. `arm` takes a free slot,
// bumps its generation and asks the worker to set the ended bit after `ms`; the worker sets it
// with a compare-and-exchange on that generation, so a timer of a released (and reused) slot can
// never mark the new user's deadline. `release` cancels the timer and frees the slot. When no
// slot is armed the worker is terminated.
//
// Bound: the bit is set at most the worker's timer latency (its event loop does nothing else:
// about a millisecond) plus the message's delivery (microseconds) after the deadline.

import { Worker } from 'node:worker_threads';

/** Deadlines at once; past this a supply falls back to reading the clock per id. */
const SLOTS = 4096;
const MASK = 0x3fffffff;

/** The shared flags, read by the local path with `Atomics.load(FLAGS, slot) & 1`. */
export const FLAGS = new Int32Array(new SharedArrayBuffer(4 * SLOTS));

const CODE = `
const { parentPort, workerData } = require('node:worker_threads');
const flags = new Int32Array(workerData);
const timers = new Map();
const MAX = 2 ** 30; // setTimeout's limit is 2 ** 31 - 1 ms: longer waits are taken in steps
function fire(slot, gen, until) {
  const left = until - performance.now();
  if (left > 0) {
    timers.set(slot, setTimeout(fire, Math.min(Math.ceil(left), MAX), slot, gen, until));
    return;
  }
  timers.delete(slot);
  Atomics.compareExchange(flags, slot, gen << 1, (gen << 1) | 1);
}
parentPort.on('message', (m) => {
  clearTimeout(timers.get(m.slot));
  timers.delete(m.slot);
  if (m.ms !== undefined) fire(m.slot, m.gen, performance.now() + m.ms);
});
`;

/** @type {Worker | null} */
let worker = null;
/** @type {number[]} */
const free = [];
let fresh = 0;
let armed = 0;

/**
 * Arms a deadline `ms` from now (at once if not positive). Returns its slot, or -1 when every
 * slot is in use (the caller then reads the clock itself).
 * @param {number} ms
 * @returns {number}
 */
export function arm(ms) {
  const slot = free.length > 0 ? /** @type {number} */ (free.pop()) : fresh < SLOTS ? fresh++ : -1;
  if (slot < 0) return -1;
  const gen = ((Atomics.load(FLAGS, slot) >>> 1) + 1) & MASK;
  armed++;
  if (!(ms > 0)) {
    Atomics.store(FLAGS, slot, (gen << 1) | 1);
    return slot;
  }
  Atomics.store(FLAGS, slot, gen << 1);
  if (Number.isFinite(ms)) {
    if (worker === null) {
      worker = new Worker(CODE, { eval: true, workerData: FLAGS.buffer, name: 'leafid-period-deadlines' });
      worker.unref();
    }
    worker.postMessage({ slot, gen, ms });
  }
  return slot;
}

/**
 * Cancels the deadline of `slot` (from `arm`; -1 is ignored) and frees the slot.
 * @param {number} slot
 */
export function release(slot) {
  if (slot < 0) return;
  // A new generation: a timer of this slot that fires before the cancel arrives changes nothing.
  Atomics.store(FLAGS, slot, (((Atomics.load(FLAGS, slot) >>> 1) + 1) & MASK) << 1);
  free.push(slot);
  armed--;
  if (worker !== null) {
    if (armed === 0) {
      void worker.terminate();
      worker = null;
    } else {
      worker.postMessage({ slot });
    }
  }
}

/**
 * Whether the deadline of `slot` has passed.
 * @param {number} slot
 * @returns {boolean}
 */
export function ended(slot) {
  return (Atomics.load(FLAGS, slot) & 1) === 1;
}

/**
 * Marks the deadline of `slot` as passed now (a wall clock found past the period's end).
 * @param {number} slot
 */
export function end(slot) {
  Atomics.or(FLAGS, slot, 1);
}

/**
 * Moves the deadline of the armed `slot` to `ms` from now (tests: a deadline that passes
 * between two ids without waiting for the period's real end).
 * @param {number} slot
 * @param {number} ms
 */
export function moveDeadline(slot, ms) {
  const gen = Atomics.load(FLAGS, slot) >>> 1;
  if (worker !== null) worker.postMessage({ slot, gen, ms });
}
