//! The layout migration planner: pure functions behind `leafid layout plan|check|decode` and
//! `POST /api/v1/layouts/plan`. Nothing here reads the clock except [`plan_now`].
//!
//! # The problem
//!
//! A layout whose time field runs out (uid-generator's 28/22/13 did on 2024-11-20) must be
//! replaced by one whose ids are all positive and all greater than every id the old layout
//! issued. [`plan`] finds one from the highest legacy id (observed, or the largest the legacy
//! layout could have issued by a cut-over plus a margin) and the needs: worker bits, sequence
//! bits and years of life.
//!
//! The needs may be given in users' terms: a peak worker count (`ceil(log2(workers))` worker
//! bits) and a peak rate per worker or per cluster (`ceil(log2(ids per tick))` sequence bits).
//! The answer states the capacity the layout gives (`capacity`), and a refusal caused by too many
//! worker + sequence bits says how many bits short it is and what fits instead, in workers and
//! ids per second (`shortfall` in `search.rs`).
//!
//! # Ids below `2^max_id_bits`
//!
//! With `max_id_bits` M below 63 (53 for JavaScript numbers), the top `63 - M` bits of every id
//! are zero: the plan's prefix is those zeros followed by the usual ones, and everything below
//! (slots, bounds, the search) works in the M-bit space instead of the 63-bit one. A legacy
//! maximum at or above `2^M - 1` cannot be exceeded at all, which the refusal names.
//!
//! # How ids can be lifted, and what it costs
//!
//! With `K = worker_bits + seq_bits`, every tick of every layout takes one aligned block of
//! `2^K` ids, so the positive range holds `2^(63-K)` blocks ("slots"). The new layout's ids from
//! now on start in slot `prefix_value * 2^t + delta_now` and end in slot
//! `prefix_value * 2^t + 2^t - 1`. They must start above the slot `m` of the highest legacy id,
//! which gives two ways to lift them:
//!
//! - **prefix** (the mask): a fixed value in the top `p` bits. All ones puts the new ids as high
//!   as possible. It costs time bits (`t = 63 - K - p`), and with a fresh epoch it wastes the
//!   slots between the legacy maximum and the mask.
//! - **epoch in the past**: a time delta that is already large at cut-over. It recovers those
//!   wasted slots, but the epoch cannot go before 1970-01-01, so it alone can lift only
//!   `now / tick` slots.
//!
//! No layout can last more than the `2^(63-K) - m` ticks left above the legacy maximum, and
//! [`plan`] reaches that bound whenever the epoch limit allows: it takes the narrowest prefix
//! that lifts with an epoch not before 1970, moved back only as far as needed. The trade-off
//! is therefore between worker bits, sequence bits and years: each bit given to workers or
//! sequences halves the slots (and so the years) left, and a legacy that ran close to
//! `i64::MAX` leaves no room at all. Among plans that last equally long the planner takes the
//! widest prefix, whose epoch is the most recent. The prefix value is always all ones (the usual
//! mask; a smaller value would leave room above for a later migration but buys no years).
//!
//! When the epoch is moved back, the first new id lies in the very first block above the
//! maximum: any safety margin must be in `max_legacy_id` itself. With `cutover`, the request
//! adds `margin_seconds` of legacy ids (default one day, for ids handed out ahead of time).
//!
//! A chosen epoch sits on a tick boundary of unix time (a whole second for `seconds`), which
//! costs under one tick of life; only when no aligned plan meets the years is it placed to the
//! millisecond. A fixed `epoch` in the request is used as given.
//!
//! The planner is exact: every candidate is accepted only after composing its first id at
//! `now`, and its largest id at the horizon (`now` + years), with [`BitLayout::compose`].
//! Years are calendar years from `now`; the horizon must be representable with the largest
//! worker id and sequence.
//!
//! # Files
//!
//! - `request.rs`: the request (its JSON form is `http::layouts::PlanRequestBody`) and its
//!   validation into [`Needs`].
//! - `search.rs`: the choice of prefix width and epoch, the refusals, the JSON answer.
//! - `check.rs`: [`check()`] against a floor and [`decode_json`].

mod check;
mod request;
mod search;

#[cfg(test)]
mod migration_sim;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use check::{CheckReport, check, decode_json};
pub use request::{
    DEFAULT_MARGIN_SECONDS, MAX_ID_BITS, MAX_YEARS, Needs, PlanRequest, RateScope, bits_for,
};
pub use search::{Plan, PlanCapacity, PlanCheck, plan, plan_needs, plan_now};

#[cfg(doc)]
use crate::snowflake::layout::BitLayout;

/// Why no plan was given. The HTTP layer answers `InvalidInput` with 400 and `Impossible` with
/// 422 `plan_impossible`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The request itself is wrong (bad layout, widths out of range, epoch in the future...).
    #[error("invalid plan request: {0}")]
    InvalidInput(String),
    /// The request is valid but no layout meets its needs.
    #[error("{message}")]
    Impossible {
        /// The need that cannot be met: `max_legacy_id`, `years`, `epoch` or `max_id_bits`.
        need: String,
        /// One line naming the need and the numbers that rule it out.
        message: String,
    },
}

impl PlanError {
    fn impossible(need: &str, message: String) -> Self {
        PlanError::Impossible {
            need: need.to_owned(),
            message,
        }
    }
}
