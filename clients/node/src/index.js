// @leafid/client: ids from leafid servers, served in-process.
//
// Layout:
// - client.js: `Client` (options, one supply per tag, stats, close).
// - supply.js: `IdSupply`, the double buffer of ranges, the local path, the single-flight refill,
//   the floor (monotonicity).
// - formatted.js: `FormattedSupply`, the same supply for a formatted tag's texts (the period
//   rule, the byte-order floor), and the list route's body reader.
// - bounds.js: `Client.snowflakeBounds`: the snowflake ids of a time range, with failover.
// - sizing.js: `nextBatchSize`, the batch size that follows demand.
// - servers.js: failover, backoff, health probes, range body validation.
// - errors.js: the typed errors and `ServerFault`.

export { Client, MAX_BATCH, MAX_FORMATTED_BATCH, MAX_SEGMENT_BATCH, MAX_SNOWFLAKE_BATCH, isValidTag } from './client.js';
export { IdSupply } from './supply.js';
export { FormattedSupply } from './formatted.js';
export {
  LeafidError,
  InvalidTagError,
  ConfigError,
  RejectedError,
  ThrottledError,
  UnavailableError,
  ClosedError,
  ServerFault,
} from './errors.js';
