//! `leafid layout check` (a layout against a floor) and `leafid layout decode --json`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::snowflake::layout::{BitLayout, LayoutSpec, format_unix_ms};

/// Whether a layout stays above a floor from now on, and until when it lasts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckReport {
    /// The layout checked, with its epoch.
    pub layout: LayoutSpec,
    /// Every id issued from now on must be greater than this.
    pub floor: u64,
    /// The instant checked, RFC 3339 UTC.
    pub now: String,
    /// Smallest id the layout can issue from now on; `None` once its time field ran out.
    pub first_id: Option<u64>,
    /// First instant the layout cannot represent, RFC 3339 UTC.
    pub exhausted_at: String,
    /// Whole seconds from now to `exhausted_at` (0 once exhausted).
    pub seconds_left: u64,
    /// True when the layout still issues ids and none of them is `<= floor`.
    pub ok: bool,
    /// One line saying why.
    pub detail: String,
}

/// Checks whether `layout` can issue an id `<= floor` from `now_unix_ms` on (it cannot when its
/// smallest id from now is above the floor, ids only grow), and until when it lasts.
pub fn check(layout: &BitLayout, floor: u64, now_unix_ms: i64) -> CheckReport {
    let first_id = layout.smallest_id_from(now_unix_ms).ok();
    let exhausted_ms = layout.exhausted_at_unix_ms();
    let exhausted_at = format_unix_ms(exhausted_ms);
    let (ok, detail) = match first_id {
        None => (false, format!("time field ran out at {exhausted_at}")),
        Some(id) if id <= floor => (
            false,
            format!("first id from now {id} is not above the floor {floor}"),
        ),
        Some(id) => (
            true,
            format!("first id from now {id} > floor {floor}; lasts until {exhausted_at}"),
        ),
    };
    CheckReport {
        layout: layout.to_spec(true),
        floor,
        now: format_unix_ms(now_unix_ms),
        first_id,
        exhausted_at,
        seconds_left: u64::try_from(exhausted_ms.saturating_sub(now_unix_ms) / 1000).unwrap_or(0),
        ok,
        detail,
    }
}

/// An id's fields under `layout` ([`BitLayout::decode`]):
/// `{"id", "prefix", "time_delta", "timestamp" (RFC 3339 UTC), "worker_id", "sequence"}`.
/// `prefix` holds every bit above the time field, so an id of another layout shows it.
pub fn decode_json(layout: &BitLayout, id: u64) -> Value {
    let decoded = layout.decode(id);
    let fields = decoded.fields;
    json!({
        "id": id,
        "prefix": fields.prefix,
        "time_delta": fields.time_delta,
        "timestamp": decoded.timestamp(),
        "worker_id": fields.worker_id,
        "sequence": fields.sequence,
    })
}
