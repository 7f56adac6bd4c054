// Types of @leafid/client (hand-written; the package is plain ESM JavaScript).

/** Options of a {@link Client}. */
export interface ClientOptions<Ids extends 'bigint' | 'string' = 'bigint'> {
  /** Base URLs (`http://host:port`), asked in this order: the first is preferred. Required. */
  servers: string[];
  /** Ids of the first request and the fewest any request asks for, 1..=1000000 (a snowflake supply: at most 100000). Default 1000. */
  batch?: number;
  /** The most ids a request asks for as the size follows demand, batch..=1000000 (a snowflake supply: at most 100000). Default 1000000. */
  maxBatch?: number;
  /** How long a batch should last at the callers' rate: the size doubles below half of it, halves above twice it. Default 1000. */
  targetLifetimeMs?: number;
  /** Longest a `nextId` call waits for ids when the local batches are spent. Default 5000. */
  waitTimeoutMs?: number;
  /** Bound of one batch request, connect to last byte; a slower server is skipped. Default 2000. */
  requestTimeoutMs?: number;
  /** Bound of one `/health/ready` probe of a down server. Default 1000. */
  probeTimeoutMs?: number;
  /** First probe backoff of a down server; doubles with each failure. Default 50. */
  backoffMinMs?: number;
  /** Largest probe backoff. Default 5000. */
  backoffMaxMs?: number;
  /** How ids are handed out: `bigint` (default) or decimal `string`. Never a `number`. */
  ids?: Ids;
  /**
   * The wall clock of the period rule, a function returning milliseconds since the epoch
   * (default `Date.now`): a formatted supply hands out no id of a period that ended by it.
   * Read once per formatted id handed out: cheap, never throwing. E.g. `() => Date.now() + offsetMs`.
   */
  clock?: () => number;
  /**
   * The caller token (`lid_...`, made by an admin with `POST /api/v1/tokens`), sent as
   * `Authorization: Bearer <token>` on every batch and bounds request (not on the health probe).
   * Never shown by `util.inspect`/`console.log`/`JSON.stringify` of the client. leafid's 401
   * `unauthorized` and 403 `forbidden` reject with `RejectedError` (never a failover); a 429
   * `quota_exhausted` is waited out for its `Retry-After` on the same server, or rejects with
   * `ThrottledError` when that wait would pass the wait timeout.
   */
  token?: string;
}

/** Per-call options of `nextId`. */
export interface NextIdOptions {
  /** Aborts the wait for ids; the promise then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Overrides the client's `waitTimeoutMs` for this call. */
  timeoutMs?: number;
}

/** Counters of one supply. */
export interface SupplyStats {
  /** Ids handed to callers. */
  idsServed: number;
  /** 200 answers whose ids were taken into a local batch. */
  batches: number;
  /** Ids received in 200 answers, discarded ones included. */
  idsReceived: number;
  /** Ids received but never handed out: not above the last id accepted (a lagging server), or (formatted) of a period that ended by the client's clock. */
  discardedIds: number;
  /** Fetch rounds in which no server delivered a batch. */
  failedRounds: number;
  /** The size of the next request (a client: the largest over its supplies). */
  batchSize: number;
}

/** Counters of a client: every supply summed, and the failovers. */
export interface ClientStats extends SupplyStats {
  /** Times a request went to another server because the one asked failed. */
  failovers: number;
}

/** One server as the client sees it. */
export interface ServerStatus {
  url: string;
  /** False once marked down, until a probe (or a last-resort request) gets a 200. */
  up: boolean;
  /** Failures in a row. */
  failures: number;
  /** Whether it is asked first (the last one that answered). */
  preferred: boolean;
}

/** One id stream: one tag's ids, or the client's snowflake ids. Increasing, never repeated. */
export declare class IdSupply<Id extends bigint | string = bigint> {
  private constructor();
  /** The tag, or null for the snowflake supply. */
  readonly tag: string | null;
  /** The next id; local when a batch holds one, else waits for the refill (wait timeout). */
  nextId(options?: NextIdOptions): Promise<Id>;
  /** The next id if a local batch (current or next) has one, else `undefined`. Synchronous, never waits or throws: the fastest way to take an id. */
  tryNextId(): Id | undefined;
  /** This supply's counters. */
  stats(): SupplyStats;
}

/**
 * The ids of a formatted tag (order numbers like `ORD-2026112700000001`), as the texts the server
 * sent: increasing in byte order, never repeated, never of a period that ended by the client's
 * clock. The stats count the ids of a batch dropped at its period's end in `discardedIds`.
 * A permuted tag (codes like `T-9F3K2Q`, answers with `"ordered": false`) hands its texts out in
 * the order received, in no order (hidden on purpose), with no floor: uniqueness is the server's.
 */
export declare class FormattedSupply {
  private constructor();
  /** The tag. */
  readonly tag: string;
  /** The next text; local when a batch holds one, else waits for the refill (wait timeout). Rejects with `RejectedError` (`not_formatted` for a plain tag, `sequence_exhausted`, `unknown_biz_tag`, ...), `UnavailableError`, `ClosedError`. */
  nextId(options?: NextIdOptions): Promise<string>;
  /** The next text if a local batch (current or next) whose period has not ended has one, else `undefined`. Synchronous, never waits or throws. */
  tryNextId(): string | undefined;
  /** This supply's counters. */
  stats(): SupplyStats;
}

type IdOf<Ids> = Ids extends 'string' ? string : bigint;

/** The snowflake ids of a time range: every id issued in it lies within `minId..=maxId`. */
export interface IdBounds {
  /** The smallest id any worker can issue in the range (its first tick, worker 0, sequence 0). */
  minId: bigint;
  /** The largest id any worker can issue in the range (its last tick, every worker and sequence bit set). */
  maxId: bigint;
}

/** A leafid client. */
export declare class Client<Ids extends 'bigint' | 'string' = 'bigint'> {
  /** @throws {ConfigError} on unusable options. */
  constructor(options: ClientOptions<Ids>);
  /** The supply of a tag (the same object for the same tag). @throws {InvalidTagError} */
  segment(tag: string): IdSupply<IdOf<Ids>>;
  /** The formatted supply of a tag (the same object for the same tag). @throws {InvalidTagError} */
  formatted(tag: string): FormattedSupply;
  /** `formatted(tag).nextId(options)`; an invalid tag rejects with `InvalidTagError`. */
  nextFormattedId(tag: string, options?: NextIdOptions): Promise<string>;
  /** The snowflake supply (one per client). */
  snowflake(): IdSupply<IdOf<Ids>>;
  /** `segment(tag).nextId(options)`; an invalid tag rejects with `InvalidTagError`. */
  nextId(tag: string, options?: NextIdOptions): Promise<IdOf<Ids>>;
  /** `snowflake().nextId(options)`. */
  nextSnowflakeId(options?: NextIdOptions): Promise<IdOf<Ids>>;
  /**
   * The smallest and largest snowflake id any worker can issue in `[from, to)` under the servers'
   * layout, for `WHERE id BETWEEN minId AND maxId` (`GET /api/v1/snowflake/bounds`). Failover as
   * for batches; rejects with `RejectedError` `invalid_time_range` for a range the servers refuse
   * (empty, before the layout's epoch, past its end), `UnavailableError`, `ClosedError`, or
   * `TypeError` for a `from`/`to` that is not a valid `Date`.
   */
  snowflakeBounds(from: Date, to: Date, options?: NextIdOptions): Promise<IdBounds>;
  /** Every supply's counters summed, and the failovers. */
  stats(): ClientStats;
  /** Each server's health. */
  servers(): ServerStatus[];
  /** Whether `close()` was called. */
  readonly closed: boolean;
  /** Aborts requests, clears every timer, closes sockets; resolves when nothing runs. */
  close(): Promise<void>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** The largest `batch` / `maxBatch` (the segment range route's limit). */
export declare const MAX_BATCH: 1000000;
/** Most ids one segment range request may ask for. */
export declare const MAX_SEGMENT_BATCH: 1000000;
/** Most ids one snowflake range request may ask for. */
export declare const MAX_SNOWFLAKE_BATCH: 100000;
/** Most ids one request of a formatted supply may ask for (the list route's limit). */
export declare const MAX_FORMATTED_BATCH: 100000;

/** Whether a tag follows the server's rule (1 to 128 of `A-Z a-z 0-9 . _ : -`). */
export declare function isValidTag(tag: unknown): tag is string;

/** Base of every error the client throws. */
export declare class LeafidError extends Error {
  readonly kind: 'rejected' | 'throttled' | 'unavailable' | 'invalid_tag' | 'config' | 'closed';
}
/** The tag was refused locally; no request sent. */
export declare class InvalidTagError extends LeafidError {
  readonly kind: 'invalid_tag';
  readonly tag: unknown;
}
/** The options are unusable. */
export declare class ConfigError extends LeafidError {
  readonly kind: 'config';
}
/** A server refused the request itself (same on every server): no failover. */
export declare class RejectedError extends LeafidError {
  readonly kind: 'rejected';
  readonly server: string;
  readonly status: number;
  /** `unknown_biz_tag`, `invalid_biz_tag`, `biz_tag_exhausted`, `invalid_count`, `invalid_request`, `invalid_time_range` (`snowflakeBounds`: a range the servers refuse), `formatted_tag` (a formatted tag asked for numbers), `not_formatted` (a plain tag asked for text) or `sequence_exhausted` (a formatted tag's period ran out of its width, until the next period). */
  readonly code: string;
  readonly serverMessage: string;
}
/** The caller token's quota is spent (429 `quota_exhausted`) past the wait timeout; shorter waits are waited out on the same server. */
export declare class ThrottledError extends LeafidError {
  readonly kind: 'throttled';
  readonly server: string;
  readonly status: 429;
  /** `quota_exhausted`. */
  readonly code: string;
  readonly serverMessage: string;
  /** The server's `Retry-After`, in milliseconds. */
  readonly retryAfterMs: number;
}
/** No ids within the wait: every server failed or is down, or the request for ids was not answered yet. */
export declare class UnavailableError extends LeafidError {
  readonly kind: 'unavailable';
  readonly waitedMs: number;
  /** The last server failure, or null when none was seen. */
  readonly lastFault: ServerFault | null;
}
/** The client is closed. */
export declare class ClosedError extends LeafidError {
  readonly kind: 'closed';
}
/** One server's failure to deliver a batch. */
export declare class ServerFault {
  readonly server: string;
  /** `behind`: its ids were all at or below the last id handed out (a lagging server). */
  readonly type: 'transport' | 'status' | 'bad_response' | 'behind';
  readonly detail: string;
  toString(): string;
}
