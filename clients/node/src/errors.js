// The client's errors: what a caller of `nextId` (or the constructor) can get. Every error is a
// `LeafidError` with a stable `kind`, so callers can switch on it without `instanceof`.

/** Base class of every error the client throws itself (an aborted call throws the signal's reason). */
export class LeafidError extends Error {
  /**
   * @param {string} kind one of `rejected`, `unavailable`, `invalid_tag`, `config`, `closed`
   * @param {string} message
   */
  constructor(kind, message) {
    super(message);
    this.name = this.constructor.name;
    /** Stable kind, the same in every leafid client. */
    this.kind = kind;
  }
}

/** The tag is missing, or not 1 to 128 characters of `A-Z a-z 0-9 . _ : -` (the server's rule); no request was sent. */
export class InvalidTagError extends LeafidError {
  /** @param {unknown} tag */
  constructor(tag) {
    super('invalid_tag', InvalidTagError.describe(tag));
    /** The tag refused. */
    this.tag = tag;
  }

  /**
   * What is wrong with `tag`, in words.
   * @param {unknown} tag
   */
  static describe(tag) {
    if (tag === null || tag === undefined) return `biz tag missing (got ${tag}): a tag is 1 to 128 of A-Z a-z 0-9 . _ : -`;
    if (typeof tag !== 'string') return `biz tag must be a string, got a ${typeof tag}`;
    if (tag.length === 0) return 'biz tag is empty: a tag is 1 to 128 of A-Z a-z 0-9 . _ : -';
    if (tag.length > 128) return `biz tag is ${tag.length} characters long, above 128`;
    return `invalid biz tag ${JSON.stringify(tag)}: only A-Z a-z 0-9 . _ : - are allowed`;
  }
}

/** The client's options are unusable (no server, a bad URL, a batch outside 1..=1000000, ...). */
export class ConfigError extends LeafidError {
  /** @param {string} message */
  constructor(message) {
    super('config', `invalid client configuration: ${message}`);
  }
}

/**
 * A server refused the request itself (4xx `unknown_biz_tag`, `invalid_biz_tag`,
 * `biz_tag_exhausted`, `invalid_count`, `invalid_request`, `formatted_tag`; for
 * `snowflakeBounds` `invalid_time_range`; for a formatted
 * supply also a 200 with numbers and no `period_end`, `not_formatted`, and 503
 * `sequence_exhausted`; and the caller token refused by leafid: 401 `unauthorized` (missing,
 * unknown or revoked) and 403 `forbidden` (not scoped to the tag)). The servers share one
 * database and one set of tokens, so no other server was asked: it would answer the same. (A
 * proxy's 401/403/429 without leafid's `code` is that server's failure: the next one is asked.)
 */
export class RejectedError extends LeafidError {
  /**
   * @param {string} server base URL of the server that answered
   * @param {number} status HTTP status
   * @param {string} code the body's stable `code`
   * @param {string} serverMessage the body's `message`
   */
  constructor(server, status, code, serverMessage) {
    super('rejected', `${server} refused the request (${status} ${code}): ${serverMessage}`);
    /** The server that answered. */
    this.server = server;
    /** The HTTP status. */
    this.status = status;
    /** The server's stable error code, e.g. `unknown_biz_tag`. */
    this.code = code;
    /** The server's message. */
    this.serverMessage = serverMessage;
  }
}

/**
 * The caller token's quota is spent: leafid answered 429 `quota_exhausted` (the token's rate for
 * now, or a formatted tag's share of its period) with a `Retry-After` that ends past the wait
 * timeout. A shorter `Retry-After` is waited out by the client, which then asks the same server
 * again: every server shares the quota, so the client never fails over for it.
 */
export class ThrottledError extends LeafidError {
  /**
   * @param {string} server base URL of the server that answered
   * @param {string} code the body's stable `code` (`quota_exhausted`)
   * @param {string} serverMessage the body's `message`
   * @param {number} retryAfterMs the server's `Retry-After`, in milliseconds
   */
  constructor(server, code, serverMessage, retryAfterMs) {
    super('throttled', `${server} throttled the request (429 ${code}, retry after ${retryAfterMs / 1000} s): ${serverMessage}`);
    /** The server that answered. */
    this.server = server;
    /** The HTTP status (429). */
    this.status = 429;
    /** The server's stable error code, `quota_exhausted`. */
    this.code = code;
    /** The server's message. */
    this.serverMessage = serverMessage;
    /** The server's `Retry-After` in milliseconds: when asking again may succeed. */
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * No ids arrived within the wait: every server failed or is down, or (a short wait, a cold
 * supply) the request for ids was not answered yet.
 */
export class UnavailableError extends LeafidError {
  /**
   * @param {number} waitMs the wait the call was allowed (the wait timeout, or its `timeoutMs`)
   * @param {number} waitedMs how long the call waited
   * @param {ServerFault | null} lastFault the last server failure seen by the refills, if any
   * @param {boolean} pending whether a request for ids was still in flight
   */
  constructor(waitMs, waitedMs, lastFault, pending) {
    const why = lastFault
      ? `no server delivered (last failure: ${lastFault})`
      : pending
        ? 'the request for ids was still unanswered'
        : 'no server was asked';
    super('unavailable', `no ids came within the ${Math.round(waitMs)} ms wait: ${why}`);
    /** How long the call waited, in milliseconds. */
    this.waitedMs = waitedMs;
    /** The last server failure, or null when none was seen (no server failed or was asked). */
    this.lastFault = lastFault;
  }
}

/** The client was closed: no more ids. */
export class ClosedError extends LeafidError {
  constructor() {
    super('closed', 'the leafid client is closed');
  }
}

/**
 * One server's failure to deliver a batch (the server is then marked down and the next one is
 * asked). `type` is `transport` (no HTTP answer: refused, reset, timeout), `status` (a 5xx, or a
 * 4xx that is that server's own, such as `engine_disabled`) or `bad_response` (a 200 whose body
 * is not a valid batch: none of its ids is handed out) or `behind` (its ids were all at or below
 * the last id handed out: a lagging server, asked again; not marked down).
 */
export class ServerFault {
  /**
   * @param {string} server base URL
   * @param {'transport' | 'status' | 'bad_response' | 'behind'} type
   * @param {string} detail
   */
  constructor(server, type, detail) {
    /** Base URL of the server. */
    this.server = server;
    /** What kind of failure. */
    this.type = type;
    /** What happened, for humans. */
    this.detail = detail;
  }

  toString() {
    switch (this.type) {
      case 'status':
        return `${this.server}: HTTP ${this.detail}`;
      case 'bad_response':
        return `${this.server}: bad response: ${this.detail}`;
      case 'behind':
        return `${this.server}: behind: ${this.detail}`;
      default:
        return `${this.server}: ${this.detail}`;
    }
  }
}
