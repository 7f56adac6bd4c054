//! The command line beside `serve`: `leafid layout {decode, bounds, plan, check}`, the migration
//! teams' tools (they never start the server and need no database: they are the pure functions of
//! [`leafid::layout_plan`] with flags in front and text or JSON behind); `leafid tags
//! {list, show, create, set-step}`, the DBAs' tools on the configured database ([`tags`]);
//! `leafid keys check`, the permutation keys against the database ([`keys`]); `leafid tokens
//! {create, list, revoke}`, caller tokens on the database ([`tokens`]); and
//! `leafid healthcheck`, the container probe ([`healthcheck`]).
//!
//! # Exit codes (stable: scripts rely on them)
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | done: decoded, bounded, planned, the layout checked is safe, the tag command done, the server live |
//! | 1 | the answer is no: the plan is impossible (the message names the need) or the check failed (a layout, or a key the database records another key for); an unknown tag, a tag that exists, a token name taken or unknown, a database that cannot be reached; a server not live; also when the output could not be written |
//! | 2 | bad input: an id, layout, epoch, unit, time range, biz_tag, step, configuration or flag that does not parse or fit (clap's usage errors exit 2 too) |
//!
//! Results go to stdout; errors are one line on stderr, `leafid: ...`.

pub mod healthcheck;
pub mod keys;
pub mod layout;
pub mod tags;
pub mod tokens;

/// The exit code of a command that ran to its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// 0: decoded, planned, or the layout is safe.
    Success,
    /// 1: the check found the layout unsafe (its report is on stdout).
    CheckFailed,
}

impl Exit {
    /// The process exit code.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::CheckFailed => 1,
        }
    }
}

/// Why a command gave no answer. Each variant documents its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Exit 2: an argument that does not parse or does not fit (the message names it).
    #[error("{0}")]
    BadInput(String),
    /// Exit 1: the planner found no layout that meets the needs; `need` is the one that fails.
    #[error("plan impossible ({need}): {message}")]
    PlanImpossible {
        /// `max_legacy_id`, `years` or `epoch`.
        need: String,
        /// The planner's one line, with the numbers that rule the need out.
        message: String,
    },
    /// Exit 1: writing the answer failed (e.g. a closed pipe).
    #[error("writing the output failed: {0}")]
    Output(#[from] std::io::Error),
    /// Exit 1: no `leaf_alloc` row for the tag.
    #[error("unknown biz_tag {0:?}")]
    UnknownTag(String),
    /// Exit 1: a row for the tag exists already.
    #[error("biz_tag {0:?} exists already")]
    TagExists(String),
    /// Exit 1: the tag was deleted at a higher `max_id`; starting it lower would re-issue ids.
    #[error(
        "biz_tag {biz_tag:?} was deleted after issuing ids below {high_water}; to resume it, \
         create it with --max-id {high_water} or higher"
    )]
    MaxIdBelowDeleted {
        /// The tag being created.
        biz_tag: String,
        /// Its high-water mark.
        high_water: i64,
    },
    /// Exit 1: the database could not be reached or failed (the message names the cause).
    #[error("database: {0}")]
    Database(String),
    /// Exit 1: the server did not answer `/health/live` with 200.
    #[error("not live: {0}")]
    NotLive(String),
    /// Exit 1: the database refused the command as asked (a token name taken or unknown).
    #[error("{0}")]
    Refused(String),
}

impl CliError {
    /// The process exit code.
    pub fn code(&self) -> u8 {
        match self {
            CliError::BadInput(_) => 2,
            CliError::PlanImpossible { .. }
            | CliError::Output(_)
            | CliError::UnknownTag(_)
            | CliError::TagExists(_)
            | CliError::MaxIdBelowDeleted { .. }
            | CliError::Database(_)
            | CliError::NotLive(_)
            | CliError::Refused(_) => 1,
        }
    }
}
