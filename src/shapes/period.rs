//! The period a tag's sequence restarts with, in the tag's IANA time zone.
//!
//! Calendar arithmetic is `jiff`'s, on its own bundled zone database (the build does not depend
//! on the host's `/usr/share/zoneinfo`): a period starts at the first instant of its day, month
//! or year in the zone and ends where the next one starts, so days of 23 and 25 hours (and a
//! zone whose midnight does not exist on a DST day) come out right without arithmetic here.

use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan, Zoned};
use serde::{Deserialize, Serialize};

/// When a tag's sequence restarts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reset {
    /// Never: one sequence for the tag's life.
    #[default]
    Never,
    /// On the first instant of each year in the tag's zone.
    Yearly,
    /// On the first instant of each month.
    Monthly,
    /// On the first instant of each day.
    Daily,
}

/// One period of a tag: `[start, end)`, and the key that names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// The period's name: `yyyy`, `yyyyMM` or `yyyyMMdd` of its first day (empty for
    /// [`Reset::Never`]). Unique per period and increasing with time.
    pub key: String,
    /// The first instant of the period.
    pub start: Timestamp,
    /// The first instant of the next period (`Timestamp::MAX` for [`Reset::Never`]).
    pub end: Timestamp,
    /// The period's start in the tag's zone (its civil date renders the date part).
    pub start_zoned: Zoned,
}

/// A zone name that `jiff`'s database does not know, or calendar arithmetic out of range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeriodError {
    /// The zone is not in the database.
    #[error("unknown time zone {0:?} (an IANA name such as \"Asia/Shanghai\" or \"UTC\")")]
    UnknownZone(String),
    /// The instant's period lies outside what the calendar can represent.
    #[error("no {reset:?} period at {at}: {why}")]
    OutOfRange {
        /// The reset.
        reset: Reset,
        /// The instant.
        at: Timestamp,
        /// jiff's reason.
        why: String,
    },
}

/// The zone of `name` from the bundled database.
pub fn zone(name: &str) -> Result<TimeZone, PeriodError> {
    jiff::tz::db()
        .get(name)
        .map_err(|_| PeriodError::UnknownZone(name.to_owned()))
}

impl Reset {
    /// Characters in the key of every period ([`Period::key`]): 0, 4, 6 or 8.
    pub fn key_len(self) -> usize {
        match self {
            Self::Never => 0,
            Self::Yearly => 4,
            Self::Monthly => 6,
            Self::Daily => 8,
        }
    }

    /// The period holding `at` in `tz`.
    pub fn period_at(self, at: Timestamp, tz: &TimeZone) -> Result<Period, PeriodError> {
        let out_of_range = |e: jiff::Error| PeriodError::OutOfRange {
            reset: self,
            at,
            why: e.to_string(),
        };
        let here = at.to_zoned(tz.clone());
        let (start, next) = match self {
            Self::Never => {
                let start = Timestamp::MIN.to_zoned(tz.clone());
                return Ok(Period {
                    key: String::new(),
                    start: Timestamp::MIN,
                    end: Timestamp::MAX,
                    start_zoned: start,
                });
            }
            Self::Daily => {
                let start = here.start_of_day().map_err(out_of_range)?;
                let next = start.date().checked_add(1.day()).map_err(out_of_range)?;
                (start, next)
            }
            Self::Monthly => {
                let start = here
                    .first_of_month()
                    .and_then(|z| z.start_of_day())
                    .map_err(out_of_range)?;
                let next = start.date().checked_add(1.month()).map_err(out_of_range)?;
                (start, next)
            }
            Self::Yearly => {
                let start = here
                    .first_of_year()
                    .and_then(|z| z.start_of_day())
                    .map_err(out_of_range)?;
                let next = start.date().checked_add(1.year()).map_err(out_of_range)?;
                (start, next)
            }
        };
        // The next period starts at the first instant of its first day (which, on a DST day in
        // some zones, is not 00:00).
        let end = next
            .to_zoned(tz.clone())
            .and_then(|z| z.start_of_day())
            .map_err(out_of_range)?;
        let d = start.date();
        let key = period_key(self, d.year(), d.month(), d.day());
        Ok(Period {
            key,
            start: start.timestamp(),
            end: end.timestamp(),
            start_zoned: start,
        })
    }
}

/// The key of the period of `reset` that starts on the date `year-month-day` (the same text
/// names the period in the id's date part and in its row).
pub fn period_key(reset: Reset, year: i16, month: i8, day: i8) -> String {
    match reset {
        Reset::Never => String::new(),
        Reset::Yearly => format!("{year:04}"),
        Reset::Monthly => format!("{year:04}{month:02}"),
        Reset::Daily => format!("{year:04}{month:02}{day:02}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn dst_days_have_23_and_25_hours() {
        let berlin = zone("Europe/Berlin").unwrap();
        let spring = Reset::Daily
            .period_at(ts("2026-03-29T12:00:00Z"), &berlin)
            .unwrap();
        assert_eq!(spring.key, "20260329");
        assert_eq!(spring.end.as_second() - spring.start.as_second(), 23 * 3600);
        let autumn = Reset::Daily
            .period_at(ts("2026-10-25T12:00:00Z"), &berlin)
            .unwrap();
        assert_eq!(autumn.end.as_second() - autumn.start.as_second(), 25 * 3600);
        // Midnight in Berlin is 23:00 UTC the day before (winter).
        let p = Reset::Daily
            .period_at(ts("2026-11-26T23:30:00Z"), &berlin)
            .unwrap();
        assert_eq!(p.key, "20261127");
        assert_eq!(p.start, ts("2026-11-26T23:00:00Z"));
    }

    #[test]
    fn a_day_that_starts_at_one_in_the_morning() {
        // Santiago: on 2026-09-06 clocks jump from 00:00 to 01:00, so that day's first instant
        // is 01:00 local.
        let santiago = zone("America/Santiago").unwrap();
        let p = Reset::Daily
            .period_at(ts("2026-09-06T12:00:00Z"), &santiago)
            .unwrap();
        assert_eq!(p.key, "20260906");
        assert_eq!(p.end.as_second() - p.start.as_second(), 23 * 3600);
    }

    #[test]
    fn months_years_and_unknown_zones() {
        let shanghai = zone("Asia/Shanghai").unwrap();
        let m = Reset::Monthly
            .period_at(ts("2026-02-28T16:30:00Z"), &shanghai)
            .unwrap();
        assert_eq!(m.key, "202603", "00:30 on 1 March in Shanghai");
        let y = Reset::Yearly
            .period_at(ts("2026-06-01T00:00:00Z"), &shanghai)
            .unwrap();
        assert_eq!(y.key, "2026");
        assert!(matches!(
            zone("Mars/Olympus"),
            Err(PeriodError::UnknownZone(_))
        ));
    }

    proptest! {
        /// Every instant lies in its period; periods of the same reset are adjacent (the end of
        /// one is the start of the next) and their keys increase.
        #[test]
        fn periods_tile_time(secs in 0i64..4_000_000_000, r in 1usize..4, z in 0usize..4) {
            let reset = [Reset::Never, Reset::Yearly, Reset::Monthly, Reset::Daily][r];
            let tz = zone(["UTC", "Europe/Berlin", "America/Santiago", "Australia/Lord_Howe"][z])
                .unwrap();
            let at = Timestamp::from_second(secs).unwrap();
            let p = reset.period_at(at, &tz).unwrap();
            prop_assert!(p.start <= at && at < p.end);
            let next = reset.period_at(p.end, &tz).unwrap();
            prop_assert_eq!(next.start, p.end);
            prop_assert!(next.key > p.key);
            let hours = (p.end.as_second() - p.start.as_second()) as f64 / 3600.0;
            if reset == Reset::Daily {
                prop_assert!((22.0..=25.0).contains(&hours), "{hours}");
            }
        }
    }
}
