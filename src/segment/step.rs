//! Leaf's adaptive step: lease more often-used tags in bigger segments.
//!
//! At each load after the first, with `duration` = time since the previous load:
//! shorter than `grow_below` (15 min): double the step unless that passes `max_step`;
//! shorter than `shrink_above` (30 min): keep it; otherwise halve it if the result stays at or
//! above the DBA's step. The DBA's step (re-read from the row at every load) is always the floor.

use std::time::Duration;

/// The constants of the rule (configurable, Leaf's values by default).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepPolicy {
    /// Loads closer together than this double the step.
    pub grow_below: Duration,
    /// Loads further apart than this halve the step.
    pub shrink_above: Duration,
    /// Doubling stops here (Leaf: 1,000,000). A DBA step above it is still honoured.
    pub max_step: i64,
}

impl Default for StepPolicy {
    fn default() -> Self {
        Self {
            grow_below: Duration::from_secs(15 * 60),
            shrink_above: Duration::from_secs(30 * 60),
            max_step: 1_000_000,
        }
    }
}

impl StepPolicy {
    /// The step of the next lease, given the current adapted step, the DBA's step and the time
    /// since the previous load (`None` for the first load).
    pub fn next_step(&self, current: i64, db_step: i64, since_last: Option<Duration>) -> i64 {
        let next = match since_last {
            None => db_step,
            Some(d) if d < self.grow_below => {
                let doubled = current.saturating_mul(2);
                if doubled > self.max_step {
                    current
                } else {
                    doubled
                }
            }
            Some(d) if d < self.shrink_above => current,
            Some(_) => {
                let halved = current / 2;
                if halved >= db_step { halved } else { current }
            }
        };
        next.max(db_step).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn first_load_uses_the_db_step() {
        assert_eq!(StepPolicy::default().next_step(0, 2000, None), 2000);
    }

    #[test]
    fn frequent_loads_double_until_the_cap() {
        let p = StepPolicy::default();
        assert_eq!(p.next_step(2000, 2000, Some(MIN)), 4000);
        assert_eq!(p.next_step(600_000, 2000, Some(MIN)), 600_000);
        assert_eq!(p.next_step(500_000, 2000, Some(MIN)), 1_000_000);
    }

    #[test]
    fn moderate_loads_keep_and_rare_loads_halve_to_the_floor() {
        let p = StepPolicy::default();
        assert_eq!(p.next_step(8000, 2000, Some(20 * MIN)), 8000);
        assert_eq!(p.next_step(8000, 2000, Some(40 * MIN)), 4000);
        assert_eq!(p.next_step(3000, 2000, Some(40 * MIN)), 3000);
    }

    #[test]
    fn a_raised_db_step_is_the_floor() {
        let p = StepPolicy::default();
        assert_eq!(p.next_step(4000, 50_000, Some(40 * MIN)), 50_000);
        assert_eq!(p.next_step(4000, 5_000_000, Some(MIN)), 5_000_000);
    }
}
