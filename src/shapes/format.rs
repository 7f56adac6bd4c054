//! A tag's format: literal prefix, date part, fixed-width sequence, check character, literal
//! suffix. Every part has a fixed width once the format is valid, so decode reads each part at
//! its position and refuses anything else.
//!
//! **String order.** Every valid format sorts as a byte string in the order of (period,
//! sequence): the prefix is constant, the date part is fixed-width digits from year to day, the
//! sequence is fixed-width in an alphabet listed in ASCII order, and the check and the suffix
//! come after them. A collation that folds case breaks this for base 62 only.

use serde::{Deserialize, Serialize};

use super::alphabet::{DigitsError, Radix};
use super::check::check_value;
use super::period::{Period, Reset, period_key, zone};

/// Longest literal prefix or suffix.
pub const MAX_LITERAL: usize = 32;

/// A tag's format, as stored with the tag and given to the admin API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TagFormat {
    /// Literal text before everything (`A-Z a-z 0-9 - _ . : / #`, at most 32).
    #[serde(default)]
    pub prefix: String,
    /// The date part: `yyyy`, `MM`, `dd` and the separators `-` `/` `.` `_`, e.g. `yyyyMMdd`.
    /// It shows the period's first day, so it must name the period: `yyyy` for a yearly reset,
    /// `yyyy` and `MM` for monthly, all three for daily.
    #[serde(default)]
    pub date: Option<String>,
    /// The sequence's alphabet.
    #[serde(default = "decimal")]
    pub radix: Radix,
    /// The sequence's width (1..=19 digits; the sequence never widens).
    pub width: u8,
    /// One check character after the sequence (see [`super::check`]).
    #[serde(default)]
    pub check: bool,
    /// Literal text after everything (the same characters as the prefix).
    #[serde(default)]
    pub suffix: String,
    /// When the sequence restarts.
    #[serde(default)]
    pub reset: Reset,
    /// The IANA zone whose days, months and years the periods follow (default `UTC`).
    #[serde(default = "utc")]
    pub time_zone: String,
    /// A keyed permutation of the sequence (`super::permute`): ids in no visible order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permute: Option<Permute>,
    /// Random gaps between consecutive ids: increasing, volume blurred.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gaps: Option<Gaps>,
    /// The most of a period's sequence one request may take, as a fraction (0 < share <= 1;
    /// default [`DEFAULT_REQUEST_SHARE`]): a caller without the admin credential asking for
    /// more gets a shorter batch (issue 44: one request must not empty a day of order numbers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_share: Option<Share>,
}

/// The request share a format without one gets: 1% of a period's sequence per request.
pub const DEFAULT_REQUEST_SHARE: Share = Share(10_000);

/// A fraction from 0 (excluded) to 1, in millionths; written as a number (`0.01`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Share(u32);

impl Share {
    /// The share in millionths (1 to 1,000,000).
    pub fn ppm(self) -> u32 {
        self.0
    }

    /// `ppm` millionths, if within 1..=1,000,000.
    pub fn from_ppm(ppm: u32) -> Option<Self> {
        (1..=1_000_000).contains(&ppm).then_some(Self(ppm))
    }

    /// The share of `n`, rounded down, at least 1 (a share never refuses a whole request).
    pub fn of(self, n: u64) -> u64 {
        ((u128::from(n) * u128::from(self.0) / 1_000_000) as u64).max(1)
    }
}

impl Serialize for Share {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(f64::from(self.0) / 1e6)
    }
}

impl<'de> Deserialize<'de> for Share {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let x = f64::deserialize(d)?;
        let ppm = (x * 1e6).round();
        if !(x > 0.0 && x <= 1.0 && (1.0..=1e6).contains(&ppm)) {
            return Err(serde::de::Error::custom(format!(
                "request_share {x}: a fraction above 0 and at most 1, in steps of 0.000001"
            )));
        }
        Ok(Self(ppm as u32))
    }
}

/// How a permuted format's sequence is permuted: the id of the key (from the configuration's
/// `[shapes.keys]`, never stored here). The domain is the sequence's width.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permute {
    /// The key's id (1 to 32 of `a-z 0-9 _`).
    pub key_id: String,
}

/// A gapped format's gaps: each id lies a random 1 to `2 * mean - 1` sequence numbers after the
/// one before it (uniform, from a CSPRNG), so ids still increase and an observer's count of
/// the ids between two of theirs is blurred (`docs/shapes.md` states by how much).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gaps {
    /// The mean gap, 2 to [`MAX_MEAN_GAP`].
    pub mean: u32,
}

/// The largest mean gap: a batch of `n` ids leases about `n * mean` sequence numbers.
pub const MAX_MEAN_GAP: u32 = 1_000;

fn decimal() -> Radix {
    Radix::Decimal
}

fn utc() -> String {
    "UTC".to_owned()
}

/// A formatted id read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The period's key (`yyyy`, `yyyyMM`, `yyyyMMdd`; empty without a reset).
    pub period: String,
    /// The sequence number within the period.
    pub sequence: u64,
}

/// Why a format is invalid, a sequence cannot be written, or a text is not an id of the format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// The format itself is refused.
    #[error("invalid format: {0}")]
    Invalid(String),
    /// The sequence needs more digits than the width: the period is used up.
    #[error("sequence {sequence} does not fit {width} {radix} digits")]
    Exhausted {
        /// The sequence.
        sequence: u64,
        /// The width.
        width: u8,
        /// The alphabet.
        radix: &'static str,
    },
    /// The text is not an id of this format.
    #[error("not an id of this format: {0}")]
    Malformed(String),
}

/// One piece of a date pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DatePiece {
    Year,
    Month,
    Day,
    Sep(u8),
}

impl DatePiece {
    fn width(self) -> usize {
        match self {
            Self::Year => 4,
            Self::Month | Self::Day => 2,
            Self::Sep(_) => 1,
        }
    }
}

fn parse_date(pattern: &str) -> Result<Vec<DatePiece>, FormatError> {
    // As long as a literal at most: the longest text stays bounded (32 + 32 + 19 + 1 + 32 =
    // 116 characters), which clients may hold inline.
    if pattern.len() > MAX_LITERAL {
        return Err(FormatError::Invalid(format!(
            "date pattern: at most {MAX_LITERAL} characters"
        )));
    }
    let mut out = Vec::new();
    let mut rest = pattern;
    while !rest.is_empty() {
        let (piece, len) = if rest.starts_with("yyyy") {
            (DatePiece::Year, 4)
        } else if rest.starts_with("MM") {
            (DatePiece::Month, 2)
        } else if rest.starts_with("dd") {
            (DatePiece::Day, 2)
        } else if let Some(c @ (b'-' | b'/' | b'.' | b'_')) = rest.bytes().next() {
            (DatePiece::Sep(c), 1)
        } else {
            return Err(FormatError::Invalid(format!(
                "date pattern {pattern:?}: only yyyy, MM, dd and the separators - / . _ \
                 (a two-digit year would repeat every century)"
            )));
        };
        if !matches!(piece, DatePiece::Sep(_)) && out.contains(&piece) {
            return Err(FormatError::Invalid(format!(
                "date pattern {pattern:?} repeats a field"
            )));
        }
        out.push(piece);
        rest = &rest[len..];
    }
    Ok(out)
}

fn literal_ok(s: &str) -> bool {
    s.len() <= MAX_LITERAL
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:/#".contains(&b))
}

impl TagFormat {
    /// Checks the format: literals, widths, the zone, that the text names the period, and the
    /// permutation's domain or the gaps.
    pub fn validate(&self) -> Result<(), FormatError> {
        let invalid = |m: String| Err(FormatError::Invalid(m));
        if let Some(p) = &self.permute {
            if !super::keys::valid_key_id(&p.key_id) {
                return invalid(format!(
                    "permute.key_id {:?}: 1 to {} of a-z 0-9 _",
                    p.key_id,
                    super::keys::MAX_KEY_ID
                ));
            }
            super::permute::check_domain(self.radix, self.width)
                .map_err(|e| FormatError::Invalid(e.to_string()))?;
            if self.gaps.is_some() {
                return invalid(
                    "permute and gaps together: a permuted sequence shows no order to gap".into(),
                );
            }
        }
        if let Some(g) = self.gaps
            && !(2..=MAX_MEAN_GAP).contains(&g.mean)
        {
            return invalid(format!("gaps.mean {} (2..={MAX_MEAN_GAP})", g.mean));
        }
        if !literal_ok(&self.prefix) || !literal_ok(&self.suffix) {
            return invalid(format!(
                "prefix and suffix: at most {MAX_LITERAL} of A-Z a-z 0-9 - _ . : / #"
            ));
        }
        if !(1..=19).contains(&self.width) {
            return invalid(format!("width {} (1..=19)", self.width));
        }
        zone(&self.time_zone).map_err(|e| FormatError::Invalid(e.to_string()))?;
        let pieces = match &self.date {
            Some(p) => parse_date(p)?,
            None => Vec::new(),
        };
        let has = |p: DatePiece| pieces.contains(&p);
        let needed: &[DatePiece] = match self.reset {
            Reset::Never if !pieces.is_empty() => {
                return invalid(
                    "a date part needs a reset (daily, monthly or yearly): it shows the period"
                        .into(),
                );
            }
            Reset::Never => &[],
            Reset::Yearly => &[DatePiece::Year],
            Reset::Monthly => &[DatePiece::Year, DatePiece::Month],
            Reset::Daily => &[DatePiece::Year, DatePiece::Month, DatePiece::Day],
        };
        if let Some(missing) = needed.iter().find(|p| !has(**p)) {
            return invalid(format!(
                "a {:?} reset needs {missing:?} in the date part: without it two periods would \
                 write the same ids",
                self.reset
            ));
        }
        let finer = match self.reset {
            Reset::Yearly => has(DatePiece::Month) || has(DatePiece::Day),
            Reset::Monthly => has(DatePiece::Day),
            _ => false,
        };
        if finer {
            return invalid(
                "the date part shows the period's first day: no field finer than the reset".into(),
            );
        }
        Ok(())
    }

    /// The most ids one request may take (for a caller without the admin credential): the
    /// request share of the period's sequence, over the mean gap of a gapped format (each id
    /// uses that many sequence numbers), at least 1.
    pub fn request_cap(&self) -> u64 {
        let share = self.request_share.unwrap_or(DEFAULT_REQUEST_SHARE);
        let mean = self.gaps.map_or(1, |g| u64::from(g.mean));
        (share.of(self.max_sequence()) / mean).max(1)
    }

    /// The largest sequence the width holds.
    pub fn max_sequence(&self) -> u64 {
        self.radix.max_value(self.width).min(i64::MAX as u64)
    }

    /// Characters in every id of the format.
    pub fn len(&self) -> usize {
        let date: usize = self
            .date
            .as_deref()
            .map(|p| parse_date(p).map_or(0, |ps| ps.iter().map(|p| p.width()).sum()))
            .unwrap_or(0);
        self.prefix.len()
            + date
            + usize::from(self.width)
            + usize::from(self.check)
            + self.suffix.len()
    }

    /// Never true: a format has at least one digit (for clippy's `len_without_is_empty`).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The id of `sequence` in `period` (the format validated).
    pub fn render(&self, period: &Period, sequence: u64) -> Result<String, FormatError> {
        self.render_after(&self.head(period)?, sequence)
    }

    /// What every id of `period` starts with: the prefix and the date part. Written once per
    /// batch, so an id costs only its sequence ([`Self::render_after`]).
    pub fn head(&self, period: &Period) -> Result<String, FormatError> {
        use std::fmt::Write;
        let mut out = String::with_capacity(self.len());
        out.push_str(&self.prefix);
        if let Some(pattern) = &self.date {
            let d = period.start_zoned.date();
            for piece in parse_date(pattern)? {
                // Writing into a String cannot fail.
                let _ = match piece {
                    DatePiece::Year => write!(out, "{:04}", d.year()),
                    DatePiece::Month => write!(out, "{:02}", d.month()),
                    DatePiece::Day => write!(out, "{:02}", d.day()),
                    DatePiece::Sep(c) => write!(out, "{}", char::from(c)),
                };
            }
        }
        Ok(out)
    }

    /// The id of `sequence` after the period's [`Self::head`].
    pub fn render_after(&self, head: &str, sequence: u64) -> Result<String, FormatError> {
        let mut out = String::with_capacity(self.len());
        out.push_str(head);
        self.write_tail(sequence, &mut out)?;
        Ok(out)
    }

    /// Appends what follows the head: the sequence, its check character, the suffix.
    pub fn write_tail(&self, sequence: u64, out: &mut String) -> Result<(), FormatError> {
        let digits =
            self.radix
                .write(sequence, self.width, out)
                .map_err(|_| FormatError::Exhausted {
                    sequence,
                    width: self.width,
                    radix: self.radix.name(),
                })?;
        if self.check {
            let c = check_value(self.radix, digits.as_slice());
            out.push(char::from(self.radix.symbols()[usize::from(c)]));
        }
        out.push_str(&self.suffix);
        Ok(())
    }

    /// Reads an id of this format back: its period and sequence (for a permuted format, the
    /// permuted value: `TagSpec::decode` inverts it). A wrong length, a literal
    /// that differs, a character outside a part's alphabet, an impossible date or a wrong
    /// check character is an error, never another id.
    pub fn decode(&self, text: &str) -> Result<Decoded, FormatError> {
        let bad = |m: String| FormatError::Malformed(m);
        if text.len() != self.len() || !text.is_ascii() {
            return Err(bad(format!(
                "{} characters, an id of this format has {} ASCII characters",
                text.chars().count(),
                self.len()
            )));
        }
        let rest = text
            .strip_prefix(self.prefix.as_str())
            .ok_or_else(|| bad(format!("it does not start with {:?}", self.prefix)))?;
        let mut rest = rest
            .strip_suffix(self.suffix.as_str())
            .ok_or_else(|| bad(format!("it does not end with {:?}", self.suffix)))?;
        let (mut year, mut month, mut day) = (None, None, None);
        if let Some(pattern) = &self.date {
            for piece in parse_date(pattern)? {
                let (part, tail) = rest.split_at(piece.width());
                rest = tail;
                let number = || -> Result<i16, FormatError> {
                    let digits = Radix::Decimal
                        .digits(part)
                        .map_err(|e| bad(e.to_string()))?;
                    Ok(Radix::Decimal.value(&digits).unwrap_or(0) as i16)
                };
                match piece {
                    DatePiece::Year => year = Some(number()?),
                    DatePiece::Month => month = Some(number()?),
                    DatePiece::Day => day = Some(number()?),
                    DatePiece::Sep(c) if part.as_bytes() == [c] => {}
                    DatePiece::Sep(c) => {
                        return Err(bad(format!("{part:?} where {:?} belongs", char::from(c))));
                    }
                }
            }
        }
        let (seq_text, check_text) = rest.split_at(usize::from(self.width));
        let digits = self
            .radix
            .digits(seq_text)
            .map_err(|e: DigitsError| bad(e.to_string()))?;
        if self.check {
            let want = check_value(self.radix, &digits);
            let got = self
                .radix
                .digits(check_text)
                .map_err(|e| bad(e.to_string()))?;
            if got != [want] {
                return Err(bad("the check character does not match".into()));
            }
        }
        // A permuted id's digits are the permuted value: any value of the domain, 0 included
        // (the caller inverts it and checks the sequence it gets).
        let least = if self.permute.is_some() { 0 } else { 1 };
        let sequence = self
            .radix
            .value(&digits)
            .filter(|&s| s >= least && s <= self.max_sequence());
        let sequence = sequence.ok_or_else(|| bad("the sequence is out of range".into()))?;
        let period = match (year, month, day) {
            (None, _, _) => String::new(),
            (Some(y), m, d) => {
                let (m, d) = (m.unwrap_or(1) as i8, d.unwrap_or(1) as i8);
                jiff::civil::Date::new(y, m, d)
                    .map_err(|_| bad(format!("no such date {y:04}-{m:02}-{d:02}")))?;
                period_key(self.reset, y, m, d)
            }
        };
        Ok(Decoded { period, sequence })
    }
}

#[cfg(test)]
mod tests;
