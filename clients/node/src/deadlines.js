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

// The local path reads a slot's flag once per id, and that read must be an atomic one: a plain
// read of shared memory may be hoisted out of a synchronous loop (the ECMAScript memory model
// allows it), and then the loop would never see the deadline. `Atomics.load` is that read, but
// V8 (Node 20) makes it a builtin call of 7 to 15 ns, more than the rest of the path and than a
// numeric id (issue 47). So the flags live in a shared WebAssembly memory and `flag` is a
// six-instruction WebAssembly function whose `i32.atomic.load` reads one (about 4 ns with the
// call, measured in a loop): a call the JIT cannot hoist, an atomic load in the same memory
// model as the worker's `Atomics.compareExchange` on the same buffer. Where shared WebAssembly
// memory is missing, `flag` is `Atomics.load` on a SharedArrayBuffer, as before.

/**
 * The module of `flag`: imports memory `m.mem` (shared, one page) and exports `c(slot)`, the
 * i32 at byte `slot * 4` by `i32.atomic.load`. Hand-assembled; its text form:
 * `(module (import "m" "mem" (memory 1 1 shared)) (func (export "c") (param i32) (result i32)
 *   (i32.atomic.load (i32.shl (local.get 0) (i32.const 2)))))`.
 */
const FLAG_MODULE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x06, 0x01, 0x60, 0x01, 0x7f, 0x01, 0x7f, // types: (i32) -> i32
  0x02, 0x0b, 0x01, 0x01, 0x6d, 0x03, 0x6d, 0x65, 0x6d, 0x02, 0x03, 0x01, 0x01, // import m.mem: memory 1 1 shared
  0x03, 0x02, 0x01, 0x00, // one function of type 0
  0x07, 0x05, 0x01, 0x01, 0x63, 0x00, 0x00, // export "c": function 0
  0x0a, 0x0d, 0x01, 0x0b, 0x00, // code: one body of 11 bytes, no locals
  0x20, 0x00, 0x41, 0x02, 0x74, // local.get 0, i32.const 2, i32.shl
  0xfe, 0x10, 0x02, 0x00, 0x0b, // i32.atomic.load align=4 offset=0, end
]);

/** The shared flags, the read of one, and which read it is: see above. */
const { FLAGS: SHARED, flag: READ, via: VIA } = (() => {
  try {
    const mem = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    const { exports } = new WebAssembly.Instance(new WebAssembly.Module(FLAG_MODULE), { m: { mem } });
    const flags = new Int32Array(mem.buffer, 0, SLOTS);
    const read = /** @type {(slot: number) => number} */ (exports.c);
    // The module reads what Atomics writes (checked once, on a slot no deadline uses yet).
    Atomics.store(flags, SLOTS - 1, 7);
    const same = read(SLOTS - 1) === 7;
    Atomics.store(flags, SLOTS - 1, 0);
    if (same) return { FLAGS: flags, flag: read, via: 'wasm' };
  } catch {
    // No shared WebAssembly memory here: the builtin below.
  }
  const flags = new Int32Array(new SharedArrayBuffer(4 * SLOTS));
  return { FLAGS: flags, flag: (/** @type {number} */ slot) => Atomics.load(flags, slot), via: 'atomics' };
})();

/** The shared flags (one `gen << 1 | ended` per slot); the worker writes them. */
export const FLAGS = SHARED;

/**
 * The flag of `slot` (0 to `SLOTS - 1`), by an atomic read: `flag(slot) & 1` is its ended bit.
 * The local path's one read per id.
 */
export const flag = READ;

/** Which read `flag` is: `'wasm'` (the WebAssembly atomic load) or `'atomics'` (the fallback). */
export const FLAG_READ = VIA;

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
