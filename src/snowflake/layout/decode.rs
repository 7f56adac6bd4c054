//! Reading ids: [`parse_id`], the one parser of an id given as text, and [`BitLayout::decode`],
//! the one reading of an id under a layout ([`Decoded`]: its fields and the start of its tick).
//! The HTTP decode routes, Leaf's decoder and `leafid layout decode` render what these return.

use super::{BitLayout, DecodedId, format_unix_ms};

/// Why [`parse_id`] refused a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IdParseError {
    /// Not an optional sign followed by decimal digits.
    #[error("not a decimal integer")]
    NotDecimal,
    /// A negative integer (`-0` is 0 and accepted).
    #[error("negative")]
    Negative,
    /// Above `i64::MAX`: no layout issues it.
    #[error("larger than i64::MAX")]
    TooLarge,
}

/// Parses an id: decimal digits with an optional sign, surrounding whitespace ignored, within
/// `0..=i64::MAX` (every id is a positive `i64`; `-0` is 0).
pub fn parse_id(text: &str) -> Result<u64, IdParseError> {
    let trimmed = text.trim();
    let (negative, digits) = match trimmed.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, trimmed.strip_prefix('+').unwrap_or(trimmed)),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(IdParseError::NotDecimal);
    }
    if negative && !digits.bytes().all(|b| b == b'0') {
        return Err(IdParseError::Negative);
    }
    match digits.parse::<u64>() {
        Ok(id) if id <= i64::MAX as u64 => Ok(id),
        _ => Err(IdParseError::TooLarge),
    }
}

/// An id read under a layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decoded {
    /// The id read.
    pub id: u64,
    /// Its fields ([`BitLayout::decompose`]).
    pub fields: DecodedId,
    /// Unix milliseconds at which its tick starts (saturating at `i64::MAX`).
    pub tick_start_unix_ms: i64,
}

impl Decoded {
    /// The start of the id's tick, RFC 3339 UTC ([`format_unix_ms`]).
    pub fn timestamp(&self) -> String {
        format_unix_ms(self.tick_start_unix_ms)
    }
}

impl BitLayout {
    /// Reads `id` under this layout: its fields and the start of its tick. Any `u64` reads;
    /// [`BitLayout::owns`] says whether this layout could have issued it.
    pub fn decode(&self, id: u64) -> Decoded {
        let fields = self.decompose(id);
        Decoded {
            id,
            fields,
            tick_start_unix_ms: self.tick_start_unix_ms(fields.time_delta),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_signed_decimals_within_i64() {
        for (text, id) in [
            ("0", 0),
            ("-0", 0),
            ("-000", 0),
            (" +42 ", 42),
            ("007", 7),
            ("9223372036854775807", i64::MAX as u64),
        ] {
            assert_eq!(parse_id(text), Ok(id), "{text:?}");
            // The same set as `i64`'s own parser, within 0..
            assert_eq!(text.trim().parse::<i64>().ok(), Some(id as i64), "{text:?}");
        }
        for (text, e) in [
            ("", IdParseError::NotDecimal),
            ("-", IdParseError::NotDecimal),
            ("+-1", IdParseError::NotDecimal),
            ("1e9", IdParseError::NotDecimal),
            ("0x10", IdParseError::NotDecimal),
            ("-1", IdParseError::Negative),
            ("9223372036854775808", IdParseError::TooLarge),
            ("99999999999999999999999", IdParseError::TooLarge),
        ] {
            assert_eq!(parse_id(text), Err(e), "{text:?}");
        }
    }

    #[test]
    fn decode_reads_the_fields_and_the_tick_start() {
        let layout = BitLayout::uid_generator();
        let id = layout.compose(5, 3, 1).unwrap();
        let d = layout.decode(id);
        assert_eq!(d.id, id);
        assert_eq!(d.fields, layout.decompose(id));
        assert_eq!(d.tick_start_unix_ms, 1_463_673_605_000);
        assert_eq!(d.timestamp(), "2016-05-19T16:00:05Z");
    }
}
