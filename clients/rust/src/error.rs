//! The client's errors: what a caller of `next_id` (or the builder) can get.

use std::fmt;
use std::time::Duration;

/// Why a call failed. Cheap to clone: a refill that fails for good hands the same error to
/// every caller waiting for it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// The tag is not 1 to 128 characters of `A-Z a-z 0-9 . _ : -` (the server's rule); no
    /// request was sent.
    #[error("invalid biz tag {0:?}: 1 to 128 of A-Z a-z 0-9 . _ : -")]
    InvalidTag(String),
    /// The builder's settings are unusable (no server, a bad URL, a batch outside
    /// `1..=max_batch`, a `max_batch` above the route's limit, no tokio runtime).
    #[error("invalid client configuration: {0}")]
    Config(String),
    /// A server refused the request itself: a 4xx whose `code` is `unknown_biz_tag`,
    /// `invalid_biz_tag`, `biz_tag_exhausted`, `invalid_count`, `invalid_request`,
    /// `formatted_tag` (a numeric supply of a formatted tag) or `invalid_time_range` (a time
    /// range [`Client::snowflake_bounds`](crate::Client::snowflake_bounds) cannot answer; with
    /// `server` empty when the client refused it without a request); a 503 `sequence_exhausted` (a
    /// formatted tag's period ran out of its width: until the next period); or, on a formatted
    /// supply, a 200 with numeric ids and no `period_end` (`code` `not_formatted`, status 200:
    /// the tag is plain); or the caller token refused by leafid: `401 unauthorized` (missing,
    /// unknown or revoked) or `403 forbidden` (not scoped to the tag). The servers share one
    /// database, so asking another would not help; no other server was asked. (Any
    /// other 4xx, such as `engine_disabled`, `not_found`, or a proxy's 401/403/429 without
    /// leafid's `code`, is that server's failure: the next server is asked, see
    /// [`Fault::Refused`].)
    #[error("{server} refused the request ({status} {code}): {message}")]
    Rejected {
        /// The server that answered.
        server: String,
        /// The HTTP status.
        status: u16,
        /// The body's stable `code`, empty if the body had none.
        code: String,
        /// The body's `message`.
        message: String,
    },
    /// The caller token's quota is spent (`429 quota_exhausted`: its rate for now, or a
    /// formatted tag's share of the period) and the server's `Retry-After` ends past the wait
    /// timeout. Shorter waits are waited out by the client, asking the same server again (every
    /// server shares the quota: no failover). `code` is `quota_exhausted`.
    #[error("{server} throttled the request ({code}, retry after {} s): {message}", retry_after.as_secs())]
    Throttled {
        /// The server that answered.
        server: String,
        /// The body's stable `code` (`quota_exhausted`).
        code: String,
        /// The body's `message`.
        message: String,
        /// The server's `Retry-After`: when asking again may succeed.
        retry_after: Duration,
    },
    /// No batch arrived within the wait timeout: every server failed or is down, or (no
    /// failure yet) the batch asked for had not come back in time.
    #[error("no ids came within the {} ms wait: {}", waited.as_millis(), match last {
        Some(f @ ServerFault { fault: Fault::Behind { .. } | Fault::TextsBehind { .. }, .. }) =>
            format!("the servers that answered are behind the ids already handed out, still catching up (last: {f})"),
        Some(f) => format!("every server failed or is down (last: {f})"),
        None => "no server has failed: the batch asked for was still on its way".to_owned(),
    })]
    Unavailable {
        /// The wait timeout the call waited for.
        waited: Duration,
        /// The last server failure seen by the refill, if any (a lagging server's answer
        /// lying wholly behind the ids handed out counts: [`Fault::Behind`]).
        last: Option<ServerFault>,
    },
}

/// One server's failure to deliver a batch: the server is then marked down and the next one
/// is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFault {
    /// Base URL of the server.
    pub server: String,
    /// What went wrong.
    pub fault: Fault,
}

/// What went wrong with one server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// No HTTP answer: connection refused or reset, timeout.
    Transport(String),
    /// A 5xx (503 `segments_not_ready`, `database_unavailable`...).
    Status(u16),
    /// A 4xx that is not a refusal of the request itself (see [`Error::Rejected`]):
    /// `engine_disabled`, `not_found`, a proxy's 401/403/429 without leafid's `code`...
    Refused {
        /// The HTTP status.
        status: u16,
        /// The body's `code`, empty if the body had none.
        code: String,
    },
    /// A 200 whose body is not a valid batch (not JSON, ids not positive and increasing, more
    /// ids than asked, another tag): none of its ids is handed out.
    BadResponse(String),
    /// A valid 200 whose ids all lie at or below the ids already handed out: a server behind
    /// the one used before (a lagging clock, a restored database). Its ids are discarded and a
    /// catch-up request follows.
    Behind {
        /// The last id of its answer.
        last: i64,
        /// The largest id the supply had accepted.
        floor: i64,
    },
    /// A formatted supply's valid 200 whose texts all lie at or below (byte order) the texts
    /// already accepted: a server behind the one used before. Discarded; asked again at once.
    TextsBehind {
        /// The last text of its answer.
        last: String,
        /// The largest text the supply had accepted.
        floor: String,
    },
    /// A formatted supply's valid 200 whose `period_end` had already passed by the client's
    /// wall clock: discarded whole (never yesterday's number today); asked again after a
    /// backoff.
    PeriodEnded {
        /// The last text of its answer.
        last: String,
    },
}

impl fmt::Display for ServerFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.fault {
            Fault::Transport(e) => write!(f, "{}: {e}", self.server),
            Fault::Status(s) => write!(f, "{}: HTTP {s}", self.server),
            Fault::Refused { status, code } if code.is_empty() => {
                write!(f, "{}: HTTP {status}", self.server)
            }
            Fault::Refused { status, code } => {
                write!(f, "{}: HTTP {status} {code}", self.server)
            }
            Fault::BadResponse(e) => write!(f, "{}: bad response: {e}", self.server),
            Fault::Behind { last, floor } => write!(
                f,
                "{}: behind: its ids end at {last}, at or below {floor} already taken",
                self.server
            ),
            Fault::TextsBehind { last, floor } => write!(
                f,
                "{}: behind: its ids end at {last:?}, at or below {floor:?} already taken",
                self.server
            ),
            Fault::PeriodEnded { last } => write!(
                f,
                "{}: its ids (up to {last:?}) are of a period that ended by this client's clock",
                self.server
            ),
        }
    }
}
