//! The sequence's digits: fixed-width text in one of four alphabets, read back strictly.
//!
//! Every alphabet lists its symbols in ASCII order, so fixed-width texts sort as byte strings
//! in the order of their values (a case-insensitive collation breaks this for base 62 only:
//! `a` and `A` are different digits there).

use serde::{Deserialize, Serialize};

/// The alphabet a sequence is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Radix {
    /// `0-9`.
    Decimal,
    /// `0-9A-Z`; read case-insensitively.
    Base36,
    /// `0-9A-Za-z`; case matters.
    Base62,
    /// Crockford's base 32: `0-9A-Z` without `I`, `L`, `O`, `U`; read case-insensitively.
    /// Crockford's aliases (`O` for 0, `I`/`L` for 1) are refused rather than read as another
    /// symbol: a decode never guesses.
    Crockford32,
}

const DECIMAL: &[u8] = b"0123456789";
const BASE36: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const CROCKFORD32: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Why a text is not a sequence of an alphabet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigitsError {
    /// A character the alphabet does not have.
    #[error("{ch:?} at position {at} is not a {radix} digit")]
    NotADigit {
        /// The character.
        ch: char,
        /// Its position in the part read (from 0).
        at: usize,
        /// The alphabet's name.
        radix: &'static str,
    },
    /// The value does not fit the width.
    #[error("{value} needs more than {width} {radix} digits")]
    TooWide {
        /// The value.
        value: u64,
        /// The width.
        width: u8,
        /// The alphabet's name.
        radix: &'static str,
    },
}

impl Radix {
    /// The alphabet's symbols, in value (and ASCII) order.
    pub fn symbols(self) -> &'static [u8] {
        match self {
            Self::Decimal => DECIMAL,
            Self::Base36 => BASE36,
            Self::Base62 => BASE62,
            Self::Crockford32 => CROCKFORD32,
        }
    }

    /// How many symbols.
    pub fn base(self) -> u64 {
        self.symbols().len() as u64
    }

    /// The alphabet's name in errors and docs.
    pub fn name(self) -> &'static str {
        match self {
            Self::Decimal => "decimal",
            Self::Base36 => "base 36",
            Self::Base62 => "base 62",
            Self::Crockford32 => "Crockford base 32",
        }
    }

    /// The value of one symbol, if the alphabet has it.
    pub fn value_of(self, c: u8) -> Option<u8> {
        let c = match self {
            Self::Base36 | Self::Crockford32 => c.to_ascii_uppercase(),
            Self::Decimal | Self::Base62 => c,
        };
        self.symbols().iter().position(|&s| s == c).map(|v| v as u8)
    }

    /// The largest value `width` digits hold (saturating at `u64::MAX`).
    pub fn max_value(self, width: u8) -> u64 {
        let mut max: u64 = 1;
        for _ in 0..width {
            max = max.saturating_mul(self.base());
        }
        max.saturating_sub(1)
    }

    /// Appends `value` as exactly `width` digits (leading zeros) and returns the digit values
    /// written (for the check character); an error if it needs more.
    pub fn write(self, value: u64, width: u8, out: &mut String) -> Result<Digits, DigitsError> {
        let base = self.base();
        let mut digits = Digits {
            values: [0; MAX_WIDTH],
            len: usize::from(width).min(MAX_WIDTH),
        };
        let mut rest = value;
        for slot in digits.values[..digits.len].iter_mut().rev() {
            *slot = (rest % base) as u8;
            rest /= base;
        }
        if rest != 0 {
            return Err(DigitsError::TooWide {
                value,
                width,
                radix: self.name(),
            });
        }
        let symbols = self.symbols();
        out.extend(digits.iter().map(|&d| char::from(symbols[usize::from(d)])));
        Ok(digits)
    }
}

/// Most digits a sequence has (the format's width bound).
pub const MAX_WIDTH: usize = 19;

/// The digit values [`Radix::write`] wrote, on the stack (no allocation per id).
#[derive(Debug, Clone, Copy)]
pub struct Digits {
    values: [u8; MAX_WIDTH],
    len: usize,
}

impl Digits {
    /// The values, most significant first.
    pub fn iter(&self) -> impl Iterator<Item = &u8> {
        self.values[..self.len].iter()
    }

    /// The values as a slice.
    pub fn as_slice(&self) -> &[u8] {
        &self.values[..self.len]
    }
}

impl Radix {
    /// Reads `text` (all of it) as digits: their values, or the first character that is not a
    /// digit. The caller checks the width.
    pub fn digits(self, text: &str) -> Result<Vec<u8>, DigitsError> {
        text.char_indices()
            .map(|(at, ch)| {
                u8::try_from(ch)
                    .ok()
                    .and_then(|b| self.value_of(b))
                    .ok_or(DigitsError::NotADigit {
                        ch,
                        at,
                        radix: self.name(),
                    })
            })
            .collect()
    }

    /// The value of digit values read by [`Self::digits`] (`None` past `u64::MAX`).
    pub fn value(self, digits: &[u8]) -> Option<u64> {
        digits.iter().try_fold(0u64, |acc, &d| {
            acc.checked_mul(self.base())?.checked_add(u64::from(d))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [Radix; 4] = [
        Radix::Decimal,
        Radix::Base36,
        Radix::Base62,
        Radix::Crockford32,
    ];

    #[test]
    fn alphabets_are_in_ascii_order_without_repeats() {
        for r in ALL {
            assert!(r.symbols().windows(2).all(|w| w[0] < w[1]), "{r:?}");
        }
        assert_eq!(Radix::Crockford32.base(), 32);
        assert_eq!(Radix::Base62.base(), 62);
    }

    #[test]
    fn too_wide_and_foreign_characters_are_errors() {
        let mut s = String::new();
        assert!(Radix::Decimal.write(1000, 3, &mut s).is_err());
        assert_eq!(Radix::Decimal.max_value(3), 999);
        assert!(Radix::Decimal.digits("12a").is_err());
        assert!(
            Radix::Crockford32.digits("0O1").is_err(),
            "aliases are refused"
        );
        assert!(Radix::Crockford32.digits("U").is_err());
        assert_eq!(Radix::Base36.digits("zz").unwrap(), [35, 35]);
        assert!(Radix::Base62.digits("é").is_err());
    }

    proptest! {
        #[test]
        fn write_then_read_is_the_value(r in 0usize..4, width in 1u8..12, v: u64) {
            let r = ALL[r];
            let v = v % (r.max_value(width).saturating_add(1)).max(1);
            let mut s = String::new();
            r.write(v, width, &mut s).unwrap();
            prop_assert_eq!(s.len(), usize::from(width));
            prop_assert_eq!(r.value(&r.digits(&s).unwrap()), Some(v));
        }

        #[test]
        fn fixed_width_texts_sort_like_their_values(r in 0usize..4, a: u32, b: u32) {
            let r = ALL[r];
            let room = r.max_value(8) + 1;
            let (a, b) = (u64::from(a) % room, u64::from(b) % room);
            let (mut x, mut y) = (String::new(), String::new());
            r.write(a, 8, &mut x).unwrap();
            r.write(b, 8, &mut y).unwrap();
            prop_assert_eq!(a.cmp(&b), x.as_bytes().cmp(y.as_bytes()));
        }
    }
}
