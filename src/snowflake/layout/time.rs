//! Time units, epochs and instants: [`TimeUnit`], parsing (RFC 3339 with an explicit offset, or
//! unix milliseconds) and formatting (RFC 3339 in UTC), shared by the HTTP API, the CLI and the
//! planner.
//!
//! Epochs are unix milliseconds in `0..=253402300799999` (1970-01-01 to 9999-12-31 UTC), written
//! in RFC 3339 with an explicit offset or as a bare integer of unix milliseconds.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, Timelike};
use serde::{Deserialize, Serialize};

use super::LayoutError;

/// Smallest accepted epoch: 1970-01-01T00:00:00Z.
pub const MIN_EPOCH_MS: i64 = 0;
/// Largest accepted epoch: 9999-12-31T23:59:59.999Z.
pub const MAX_EPOCH_MS: i64 = 253_402_300_799_999;

/// The length of one tick of the time field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeUnit {
    /// One tick per second (uid-generator).
    Seconds,
    /// One tick per millisecond (Twitter, Leaf).
    Millis,
}

impl TimeUnit {
    /// Milliseconds in one tick.
    pub const fn tick_ms(self) -> i64 {
        match self {
            TimeUnit::Seconds => 1000,
            TimeUnit::Millis => 1,
        }
    }

    /// The name used in configuration and JSON: `seconds` or `millis`.
    pub const fn as_str(self) -> &'static str {
        match self {
            TimeUnit::Seconds => "seconds",
            TimeUnit::Millis => "millis",
        }
    }
}

impl fmt::Display for TimeUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TimeUnit {
    type Err = LayoutError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim() {
            "seconds" => Ok(TimeUnit::Seconds),
            "millis" => Ok(TimeUnit::Millis),
            other => Err(LayoutError::InvalidUnit {
                text: other.to_owned(),
            }),
        }
    }
}

/// `epoch_ms` when it is within `MIN_EPOCH_MS..=MAX_EPOCH_MS`, else `EpochOutOfRange`.
pub(super) fn check_epoch(epoch_ms: i64) -> Result<i64, LayoutError> {
    if (MIN_EPOCH_MS..=MAX_EPOCH_MS).contains(&epoch_ms) {
        Ok(epoch_ms)
    } else {
        Err(LayoutError::EpochOutOfRange { epoch_ms })
    }
}

/// Parses an instant: RFC 3339 with an explicit offset (`Z` or `+08:00`), or a bare integer of
/// unix milliseconds. `None` when it is neither.
pub fn parse_timestamp(text: &str) -> Option<i64> {
    let text = text.trim();
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok();
    }
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.timestamp_millis())
}

/// Parses an epoch (see [`parse_timestamp`]) and checks it is within 1970..=9999 UTC.
pub fn parse_epoch(text: &str) -> Result<i64, LayoutError> {
    let ms = parse_timestamp(text).ok_or_else(|| LayoutError::InvalidEpoch {
        text: text.to_owned(),
    })?;
    check_epoch(ms)
}

/// Milliseconds in 400 Gregorian years: the calendar repeats exactly after them.
const GREGORIAN_CYCLE_MS: i64 = 146_097 * 86_400_000;

/// RFC 3339 in UTC, e.g. `2024-11-20T13:24:16Z`, with `.mmm` only when the milliseconds are
/// not zero. Total over `i64`: years past 9999 are written `+YYYYY` (ISO 8601 expanded years).
pub fn format_unix_ms(ms: i64) -> String {
    // Shift into 1970..2370 by whole 400-year cycles so chrono's range never limits us.
    let cycles = ms.div_euclid(GREGORIAN_CYCLE_MS);
    let rest = ms.rem_euclid(GREGORIAN_CYCLE_MS);
    let t = DateTime::from_timestamp_millis(rest).expect("0..400 years after 1970 is in range");
    let year = i64::from(t.year()) + 400 * cycles;
    let year = match year {
        0..=9999 => format!("{year:04}"),
        10_000.. => format!("+{year}"),
        _ => format!("-{:04}", year.unsigned_abs()),
    };
    let millis = rest % 1000;
    let fraction = if millis == 0 {
        String::new()
    } else {
        format!(".{millis:03}")
    };
    format!(
        "{year}-{:02}-{:02}T{:02}:{:02}:{:02}{fraction}Z",
        t.month(),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn epochs_parse_with_offsets_or_as_unix_ms() {
        assert_eq!(
            parse_epoch("2016-05-20T00:00:00+08:00"),
            Ok(1_463_673_600_000)
        );
        assert_eq!(parse_epoch("2016-05-19T16:00:00Z"), Ok(1_463_673_600_000));
        assert_eq!(parse_epoch(" 1288834974657 "), Ok(1_288_834_974_657));
        assert_eq!(
            parse_epoch("2016-05-20T00:00:00.5+08:00"),
            Ok(1_463_673_600_500)
        );
        for bad in [
            "2016-05-20T00:00:00",
            "2016-05-20",
            "yesterday",
            "",
            "-",
            "1e9",
        ] {
            assert_eq!(
                parse_epoch(bad),
                Err(LayoutError::InvalidEpoch {
                    text: bad.to_owned()
                }),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_epoch("-5"),
            Err(LayoutError::EpochOutOfRange { epoch_ms: -5 })
        );
        assert!(parse_epoch("1969-12-31T23:59:59Z").is_err());
        assert!(
            parse_epoch("x")
                .unwrap_err()
                .to_string()
                .contains("RFC 3339 with an explicit offset")
        );
        assert_eq!("millis".parse(), Ok(TimeUnit::Millis));
        assert!("ms".parse::<TimeUnit>().is_err());
    }

    #[test]
    fn format_is_rfc3339_utc_over_all_of_i64() {
        assert_eq!(format_unix_ms(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_unix_ms(1_732_109_056_000), "2024-11-20T13:24:16Z");
        assert_eq!(
            format_unix_ms(1_732_109_056_007),
            "2024-11-20T13:24:16.007Z"
        );
        assert_eq!(format_unix_ms(-1), "1969-12-31T23:59:59.999Z");
        assert_eq!(format_unix_ms(MAX_EPOCH_MS), "9999-12-31T23:59:59.999Z");
        assert_eq!(format_unix_ms(MAX_EPOCH_MS + 1), "+10000-01-01T00:00:00Z");
        assert_eq!(format_unix_ms(i64::MAX), "+292278994-08-17T07:12:55.807Z");
        assert_eq!(format_unix_ms(i64::MIN), "-292275055-05-16T16:47:04.192Z");
        assert_eq!(format_unix_ms(-62_167_219_200_000), "0000-01-01T00:00:00Z");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn format_then_parse_is_identity(ms in 0i64..=MAX_EPOCH_MS) {
            prop_assert_eq!(parse_epoch(&format_unix_ms(ms)), Ok(ms));
        }
    }
}
