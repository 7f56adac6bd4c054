// @leafid/client: ids from leafid servers, served in-process.
//
// Layout:
// - client.js: `Client` (options, one supply per tag, stats, close).
// - supply.js: `IdSupply`, the double buffer, the single-flight refill, the floor (monotonicity).
// - servers.js: failover, backoff, health probes, response validation.
// - errors.js: the typed errors and `ServerFault`.

export { Client, MAX_BATCH, isValidTag } from './client.js';
export { IdSupply } from './supply.js';
export {
  LeafidError,
  InvalidTagError,
  ConfigError,
  RejectedError,
  UnavailableError,
  ClosedError,
  ServerFault,
} from './errors.js';
