//! `BizTag`: a validated business tag, the key of a `leaf_alloc` row.

use std::fmt;

use thiserror::Error;

/// Longest tag accepted, in bytes: the width of `leaf_alloc.biz_tag` (`varchar(128)`).
pub const MAX_BIZ_TAG_LEN: usize = 128;

/// A business tag that passed validation: 1..=128 bytes of `[A-Za-z0-9._:-]` or `_`.
///
/// DESIGN.md lists `[A-Za-z0-9._:-]`; `_` is accepted as well because existing Leaf deployments
/// commonly name tags `order_id`, and those rows must keep working when pointed at leafid.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BizTag(String);

/// Why a string is not a valid [`BizTag`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BizTagError {
    /// The tag is empty.
    #[error("biz_tag must not be empty")]
    Empty,
    /// The tag is longer than [`MAX_BIZ_TAG_LEN`] bytes.
    #[error("biz_tag is {0} bytes long; at most 128 are allowed")]
    TooLong(usize),
    /// The tag holds a character outside the allowed set.
    #[error("biz_tag may only contain A-Z a-z 0-9 . _ : - (found {0:?})")]
    BadChar(char),
}

/// `ALLOWED[b]`: whether the byte `b` may appear in a tag (`[A-Za-z0-9._:-]`).
static ALLOWED: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-');
        b += 1;
    }
    t
};

impl BizTag {
    /// Validates `raw` as a tag.
    pub fn parse(raw: &str) -> Result<Self, BizTagError> {
        Self::validate(raw)?;
        Ok(Self(raw.to_owned()))
    }

    /// Checks `raw` without allocating.
    pub fn validate(raw: &str) -> Result<(), BizTagError> {
        if raw.is_empty() {
            return Err(BizTagError::Empty);
        }
        if raw.len() > MAX_BIZ_TAG_LEN {
            return Err(BizTagError::TooLong(raw.len()));
        }
        // Every request validates its tag: one table lookup per byte, no UTF-8 decoding (a
        // non-ASCII byte is refused like any other); the offending char only on the error path.
        if raw.bytes().all(|b| ALLOWED[usize::from(b)]) {
            return Ok(());
        }
        let bad = raw
            .chars()
            .find(|&c| !c.is_ascii() || !ALLOWED[c as usize])
            .expect("a byte outside the set belongs to a char outside it");
        Err(BizTagError::BadChar(bad))
    }

    /// A period row's name, made by [`PeriodRow`](super::spec::PeriodRow) (outside the tag
    /// alphabet on purpose, so no tag a user can create or ask for is one); nothing else calls
    /// this.
    pub(super) fn from_row_name(name: String) -> Self {
        Self(name)
    }

    /// The tag as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for BizTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for BizTag {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_leaf_style_tags() {
        for ok in [
            "leaf-segment-test",
            "order_id",
            "a",
            "svc.orders:v2",
            &"x".repeat(128),
        ] {
            assert!(BizTag::parse(ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn the_byte_table_agrees_with_the_character_rule() {
        for c in (0..0x800u32).filter_map(char::from_u32) {
            let ok = c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
            let raw = format!("a{c}b");
            let want = if ok {
                Ok(())
            } else {
                Err(BizTagError::BadChar(c))
            };
            assert_eq!(BizTag::validate(&raw), want, "{c:?}");
        }
    }

    #[test]
    fn rejects_empty_long_and_odd_characters() {
        assert_eq!(BizTag::parse(""), Err(BizTagError::Empty));
        assert_eq!(
            BizTag::parse(&"x".repeat(129)),
            Err(BizTagError::TooLong(129))
        );
        for (bad, c) in [
            ("a b", ' '),
            ("a/b", '/'),
            ("é", 'é'),
            ("x';--", '\''),
            ("a%2F", '%'),
        ] {
            assert_eq!(BizTag::parse(bad), Err(BizTagError::BadChar(c)), "{bad}");
        }
    }
}
