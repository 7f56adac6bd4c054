//! Permuted tags (issue 35): the sequence part of an id is a keyed permutation of the sequence,
//! so consecutive ids show no order, no volume and no next id to whoever lacks the key.
//!
//! The permutation is FF1 of NIST SP 800-38G over AES-256, from the maintained `fpe` crate (no
//! cipher is written here): a format-preserving block cipher over the numeral strings of
//! `width` digits in the format's own radix (10, 32, 36 or 62), so the permuted value is again
//! `width` digits of the same alphabet. Why no id is handed out twice: FF1 is a bijection on
//! that domain (it is a cipher: decryption inverts it), so distinct sequences give distinct
//! values, and the sequences are unique by the segment engine's own guarantee. No collision
//! table and no retry are needed.
//!
//! The tweak is `tag@period` (`tag@20261127`, `tag@` without a reset; `TagSpec::tweak`, frozen
//! for good: it decides every code ever issued), so two tags under one key, or two days of one
//! tag, are different permutations: the first order of every day does not share its code.
//!
//! FF1's domain must hold at least 1,000,000 values (SP 800-38G Rev. 1; the crate refuses
//! less), so a 4-digit code is refused rather than permuted weakly; it must also fit an `i64`
//! so every value of the domain is a valid sequence.

use aes::Aes256;
use fpe::ff1::{FF1, FlexibleNumeralString};

use super::alphabet::Radix;

/// The smallest domain FF1 accepts (NIST SP 800-38G Rev. 1).
pub const MIN_DOMAIN: u128 = 1_000_000;

/// A permutation key: 32 bytes for AES-256.
pub type Key = [u8; 32];

/// The domain of a permutation: `radix^width` values (`None` when it does not fit a `u128`).
pub fn domain(radix: Radix, width: u8) -> Option<u128> {
    u128::from(radix.base()).checked_pow(u32::from(width))
}

/// Why a sequence cannot be permuted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PermuteError {
    /// The domain is below FF1's minimum ([`MIN_DOMAIN`]).
    #[error(
        "a permuted sequence needs at least {MIN_DOMAIN} values (FF1's minimum domain in \
         NIST SP 800-38G): {width} {radix} digits hold {values}"
    )]
    DomainTooSmall {
        /// The width.
        width: u8,
        /// The alphabet's name.
        radix: &'static str,
        /// The values the domain holds.
        values: u128,
    },
    /// The domain holds more than 2^63 values (not every value would be a sequence).
    #[error("a permuted sequence must fit 2^63 values: {width} {radix} digits hold more")]
    DomainTooLarge {
        /// The width.
        width: u8,
        /// The alphabet's name.
        radix: &'static str,
    },
    /// The `fpe` crate refused (never expected once the domain is checked).
    #[error("FF1: {0}")]
    Cipher(String),
}

/// Why a format cannot be permuted.
pub fn check_domain(radix: Radix, width: u8) -> Result<(), PermuteError> {
    match domain(radix, width) {
        Some(n) if n < MIN_DOMAIN => Err(PermuteError::DomainTooSmall {
            width,
            radix: radix.name(),
            values: n,
        }),
        Some(n) if n <= 1 << 63 => Ok(()),
        _ => Err(PermuteError::DomainTooLarge {
            width,
            radix: radix.name(),
        }),
    }
}

/// FF1 under one key over the `width`-digit strings of one radix.
pub struct Permutation {
    ff1: FF1<Aes256>,
    base: u64,
    width: usize,
}

impl std::fmt::Debug for Permutation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        write!(f, "Permutation(base {}, width {})", self.base, self.width)
    }
}

impl Permutation {
    /// The permutation of `key` over `width` digits of `radix` ([`check_domain`] first).
    pub fn new(key: &Key, radix: Radix, width: u8) -> Result<Self, PermuteError> {
        check_domain(radix, width)?;
        let base = radix.base();
        let ff1 = FF1::<Aes256>::new(key, base as u32)
            .map_err(|e| PermuteError::Cipher(e.to_string()))?;
        Ok(Self {
            ff1,
            base,
            width: usize::from(width),
        })
    }

    /// The value `x` (below the domain) is sent to under `tweak`. An error (never expected:
    /// the digits are below the radix and their count within FF1's bounds, checked when the
    /// permutation was made) is never replaced by another value: the caller skips that id.
    pub fn encrypt(&self, tweak: &[u8], x: u64) -> Result<u64, PermuteError> {
        self.apply(tweak, x, true)
    }

    /// The inverse of [`Self::encrypt`].
    pub fn decrypt(&self, tweak: &[u8], y: u64) -> Result<u64, PermuteError> {
        self.apply(tweak, y, false)
    }

    fn apply(&self, tweak: &[u8], x: u64, forward: bool) -> Result<u64, PermuteError> {
        let mut digits = vec![0u16; self.width];
        let mut v = x;
        for d in digits.iter_mut().rev() {
            *d = (v % self.base) as u16;
            v /= self.base;
        }
        let ns = FlexibleNumeralString::from(digits);
        let out = if forward {
            self.ff1.encrypt(tweak, &ns)
        } else {
            self.ff1.decrypt(tweak, &ns)
        };
        let out: Vec<u16> = out.map_err(|e| PermuteError::Cipher(e.to_string()))?.into();
        Ok(out
            .iter()
            .fold(0u64, |acc, &d| acc * self.base + u64::from(d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: Key = [7; 32];

    #[test]
    fn a_small_domain_is_refused_and_a_too_large_one_too() {
        assert!(Permutation::new(&KEY, Radix::Decimal, 5).is_err());
        assert!(Permutation::new(&KEY, Radix::Decimal, 6).is_ok());
        assert!(Permutation::new(&KEY, Radix::Crockford32, 3).is_err());
        assert!(Permutation::new(&KEY, Radix::Crockford32, 4).is_ok());
        assert!(Permutation::new(&KEY, Radix::Decimal, 18).is_ok());
        assert!(Permutation::new(&KEY, Radix::Decimal, 19).is_err());
        assert!(Permutation::new(&KEY, Radix::Base62, 11).is_err());
    }

    /// Every value of the smallest domain FF1 allows (10^6: 6 decimal digits) is hit exactly
    /// once, and decrypt inverts encrypt on each: the permutation is a bijection.
    #[test]
    #[ignore = "45 s in a debug build (FF1's generics compile at the test's opt-level); \
                scripts/test.sh runs it"]
    fn every_value_of_a_six_digit_domain_is_hit_exactly_once() {
        let p = Permutation::new(&KEY, Radix::Decimal, 6).unwrap();
        let n = 1_000_000usize;
        let mut seen = vec![false; n];
        for x in 0..n as u64 {
            let y = p.encrypt(b"t@", x).unwrap();
            assert!((y as usize) < n, "{x} -> {y} outside the domain");
            assert!(!seen[y as usize], "{y} hit twice");
            seen[y as usize] = true;
            if x % 997 == 0 {
                assert_eq!(p.decrypt(b"t@", y).unwrap(), x);
            }
        }
    }

    #[test]
    fn the_tweak_makes_another_permutation() {
        let p = Permutation::new(&KEY, Radix::Decimal, 8).unwrap();
        let a: Vec<u64> = (1..50)
            .map(|x| p.encrypt(b"t@20261127", x).unwrap())
            .collect();
        let b: Vec<u64> = (1..50)
            .map(|x| p.encrypt(b"t@20261128", x).unwrap())
            .collect();
        assert_ne!(a, b);
    }

    proptest! {
        #[test]
        fn decrypt_inverts_encrypt(x: u64, width in 6u8..=18, tweak in "[a-z@0-9]{0,20}") {
            let p = Permutation::new(&KEY, Radix::Decimal, width).unwrap();
            let x = x % 10u64.pow(u32::from(width));
            let y = p.encrypt(tweak.as_bytes(), x).unwrap();
            prop_assert!(u128::from(y) < domain(Radix::Decimal, width).unwrap());
            prop_assert_eq!(p.decrypt(tweak.as_bytes(), y).unwrap(), x);
        }

        #[test]
        fn every_radix_round_trips(x in 0u64..1_000_000, r in 0usize..4) {
            let radix = [Radix::Decimal, Radix::Base36, Radix::Base62, Radix::Crockford32][r];
            let p = Permutation::new(&KEY, radix, 6).unwrap();
            let y = p.encrypt(b"k", x).unwrap();
            prop_assert!(u128::from(y) < domain(radix, 6).unwrap());
            prop_assert_eq!(p.decrypt(b"k", y).unwrap(), x);
        }
    }
}
