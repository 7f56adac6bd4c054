//! The numbers a formatted tag's row may hold, checked against the width of its format when
//! the tag is created.

use super::{SpecError, TagSpec};
use crate::shapes::TagFormat;

impl TagSpec {
    /// Whether a formatted tag of `format` may start at `max_id`: at most the width's largest
    /// sequence number (a larger start spends every period before its first id). Its step may
    /// be anything: no lease takes more than a share of what is left of a period whatever the
    /// step (the lease cap, `LeaseCap` in `crate::segment::buffer`), so a step wider than a
    /// period is cut there rather than refused (clients and scripts create small test formats
    /// with an ordinary step).
    pub fn check_start(format: &TagFormat, max_id: i64) -> Result<(), SpecError> {
        let max = format.max_sequence();
        if u64::try_from(max_id).is_ok_and(|m| m > max) {
            return Err(SpecError::StartBeyondWidth { max_id, max });
        }
        Ok(())
    }
}
