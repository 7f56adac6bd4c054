//! The numbers a formatted tag's row may hold: its step and start value, checked against the
//! width of its format when the tag is created or its step is changed.

use super::{SpecError, TagSpec};
use crate::shapes::TagFormat;

impl TagSpec {
    /// Whether a formatted tag of `format` may have `step` and (when given) the start value
    /// `max_id`: a step at most the width's largest sequence number (a wider first lease would
    /// take a whole period), and a start at most that number (a larger one spends every period
    /// before its first id). The lease cap ([`crate::segment::buffer`]'s `LeaseCap`) bounds
    /// leases further at run time; this refuses what no cap could make useful.
    pub fn check_row(format: &TagFormat, step: i64, max_id: Option<i64>) -> Result<(), SpecError> {
        let max = format.max_sequence();
        if u64::try_from(step).is_ok_and(|s| s > max) {
            return Err(SpecError::StepBeyondWidth { step, max });
        }
        if let Some(max_id) = max_id
            && u64::try_from(max_id).is_ok_and(|m| m > max)
        {
            return Err(SpecError::StartBeyondWidth { max_id, max });
        }
        Ok(())
    }
}
