// The batch a supply asks for (clients/conformance/PROTOCOL.md, "The batch a client asks for"):
// the same rule in every leafid client, a pure function so its unit tests need no server.

/**
 * The size of the next request, decided when a request is about to be sent, from the batch in
 * use: `used` of its `batchIds` handed out in `elapsedMs` since it became current. Its projected
 * lifetime is `elapsedMs * batchIds / used` (`elapsedMs` counts at least 1 ms). A projected
 * lifetime below half of `targetMs`, or a starved supply (a caller had to wait because both
 * batches were spent), doubles `size`; one above twice `targetMs` halves it; otherwise it stays.
 * `used` counts at least 1, so an idle batch shrinks the size; with no batch in use (`batchIds`
 * 0) only starvation changes it. The result lies within `min..=max` (`batch` and `max_batch`).
 * `clients/conformance/vectors/batch.json`.
 * @param {object} o
 * @param {number} o.size the size the supply asks for now
 * @param {number} o.min the configured starting size (`batch`): never below
 * @param {number} o.max the largest size (`max_batch`, capped by the route's limit): never above
 * @param {number} o.used ids of the batch in use handed out so far
 * @param {number} o.batchIds ids the batch in use holds
 * @param {number} o.elapsedMs time since that batch became current
 * @param {number} o.targetMs how long a batch should last (`target_lifetime`)
 * @param {boolean} o.starved whether a caller waited because both batches were spent
 * @returns {number}
 */
export function nextBatchSize({ size, min, max, used, batchIds, elapsedMs, targetMs, starved }) {
  let next = size;
  if (starved) {
    next = size * 2;
  } else if (batchIds >= 1) {
    const lifetime = (Math.max(elapsedMs, 1) * batchIds) / Math.max(used, 1);
    if (lifetime < targetMs / 2) next = size * 2;
    else if (lifetime > targetMs * 2) next = Math.floor(size / 2);
  }
  return Math.min(Math.max(next, min), max);
}
