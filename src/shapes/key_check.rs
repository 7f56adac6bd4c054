//! What a key may be, and how it is recognised without being shown (issue 42).
//!
//! - [`check_value`]: the key's **check value**, the classic key check value (KCV) of ANSI
//!   X9.24 and GlobalPlatform: AES-256 of one all-zero block under the key, its first 8 bytes as
//!   16 lowercase hex digits, prefixed with the construction's version (`kcv1:...`). The
//!   database records it per key id (`leafid_shape_key`), so a server holding another key under
//!   the same key id is caught before it writes a code.
//! - [`weakness`]: a key that is plainly not random (all bytes equal, few distinct bytes, an
//!   arithmetic run such as `00 01 02 ...`, a key printed as an example) is refused at load.
//!
//! **Why the check value reveals nothing of the key.** AES under an unknown key is a
//! pseudorandom permutation: its value at any one point, here the zero block, is
//! indistinguishable from a random 128-bit string to whoever lacks the key, and finding the key
//! from it is a known-plaintext key recovery on AES-256, i.e. a 2^256 search (64 bits of output
//! leave about 2^192 keys consistent with it anyway). It is the very value banks print on key
//! components for this purpose.
//!
//! **Why it is no block an observer of codes could see, and none they could use.** FF1
//! (`crate::shapes::permute`) evaluates AES only inside its round function, on CBC-MAC chains
//! whose first block is `P = [1, 2, 1, radix (3 bytes), 10, u mod 256, n (4 bytes), t (4
//! bytes)]`, which starts with the byte 1 and so is never the zero block; and an observer sees
//! no AES block at all, only numerals reduced modulo `radix^width` after ten rounds. So the
//! check value neither appears among what FF1 shows nor helps to predict it.

use std::fmt::Write as _;

use aes::Aes256;
use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};

use super::permute::Key;

/// The version of the check value's construction, written before its digits: a later
/// construction gets a new version and never reads as this one.
pub const CHECK_VERSION: &str = "kcv1";

/// The check value of `key`: `kcv1:` and the first 8 bytes of AES-256 of the zero block under
/// it, in lowercase hex (21 characters).
pub fn check_value(key: &Key) -> String {
    let cipher = Aes256::new(&Array::from(*key));
    let mut block = Array::from([0u8; 16]);
    cipher.encrypt_block(&mut block);
    let mut out = String::with_capacity(CHECK_VERSION.len() + 1 + 16);
    out.push_str(CHECK_VERSION);
    out.push(':');
    for b in &block[..8] {
        // Writing to a String never fails.
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// Fewer distinct byte values than this among a key's 32 bytes is refused. 32 random bytes hold
/// about 30 distinct values; fewer than 16 happens to a random key with probability 3.2e-17
/// (summing `C(256, k) * S(32, k) * k! / 256^32` over k < 16, S the Stirling numbers of the
/// second kind), so no real random key is ever refused by it.
pub const MIN_DISTINCT_BYTES: usize = 16;

/// Keys printed as examples (by the standards, hence in tutorials): refused whatever their
/// distinct bytes. The NIST SP 800-38G FF1 samples' AES-256 key.
const EXAMPLE_KEYS: [&str; 1] =
    ["2b7e151628aed2a6abf7158809cf4f3cef4359d8d580aa4f7f036d6f04fc6a94"];

/// Why `key` is plainly not a random key, or `None`. A random key is an arithmetic run with
/// probability 2^-240, and an example key never: nothing but weak keys is refused.
pub fn weakness(key: &Key) -> Option<&'static str> {
    let step = key[1].wrapping_sub(key[0]);
    if key.windows(2).all(|w| w[1].wrapping_sub(w[0]) == step) {
        return Some(if step == 0 {
            "all its bytes are equal"
        } else {
            "its bytes are an arithmetic run (like 00 01 02 ...)"
        });
    }
    let mut seen = [false; 256];
    for &b in key {
        seen[usize::from(b)] = true;
    }
    if seen.iter().filter(|&&s| s).count() < MIN_DISTINCT_BYTES {
        return Some("it has fewer than 16 distinct byte values (a random key has about 30)");
    }
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    if EXAMPLE_KEYS.contains(&hex.as_str()) {
        return Some("it is a published example key");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shapes::keys::parse_hex_key;

    /// Golden values: AES-256 of the zero block under the zero key is the published
    /// known-answer `dc95c078a2408989ad48a21492842087`, and under the key
    /// `00112233..eeff00112233..eeff` it is `b1851e1d5fb5fbec1310eef49e3b70f9` (both checked
    /// with `openssl enc -aes-256-ecb -nopad`). The check value is their first 8 bytes.
    #[test]
    fn the_check_value_is_the_kcv_of_the_key_and_stable() {
        assert_eq!(check_value(&[0; 32]), "kcv1:dc95c078a2408989");
        let key = parse_hex_key("00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
            .unwrap();
        assert_eq!(check_value(&key), "kcv1:b1851e1d5fb5fbec");
        // One bit of key changes it.
        let mut other = key;
        other[31] ^= 1;
        assert_ne!(check_value(&other), check_value(&key));
        // It never shows the key's bytes.
        assert!(!check_value(&[0x5a; 32]).contains("5a5a5a5a"));
    }

    #[test]
    fn plainly_weak_keys_are_named_and_random_ones_pass() {
        assert_eq!(weakness(&[0; 32]), Some("all its bytes are equal"));
        assert_eq!(weakness(&[0xab; 32]), Some("all its bytes are equal"));
        let run: Key = std::array::from_fn(|i| i as u8);
        assert!(weakness(&run).unwrap().contains("arithmetic"));
        let down: Key = std::array::from_fn(|i| 200 - 3 * i as u8);
        assert!(weakness(&down).unwrap().contains("arithmetic"));
        // 15 distinct values: refused; 16: accepted.
        const VALUES: [u8; 16] = [
            7, 9, 200, 3, 55, 91, 18, 250, 1, 42, 77, 130, 66, 101, 12, 33,
        ];
        let few: Key = std::array::from_fn(|i| VALUES[i % 15]);
        assert!(weakness(&few).unwrap().contains("distinct"), "{few:?}");
        let sixteen: Key = std::array::from_fn(|i| VALUES[i % 16]);
        assert_eq!(weakness(&sixteen), None);
        let example = parse_hex_key(EXAMPLE_KEYS[0]).unwrap();
        assert_eq!(weakness(&example), Some("it is a published example key"));
        // Random keys: never refused (the odds of a refusal are below 1e-16 each).
        for _ in 0..10_000 {
            let key: Key = rand::random();
            assert_eq!(weakness(&key), None, "{key:?}");
        }
    }

    /// Any 64-hex-digit key printed in the docs or the README is refused: a reader who copies
    /// an example key into production gets an error, not a key everyone knows.
    #[test]
    fn every_key_printed_in_the_docs_is_refused() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("README.md")];
        for entry in std::fs::read_dir(root.join("docs")).unwrap() {
            files.push(entry.unwrap().path());
        }
        let mut found = 0;
        for f in files
            .iter()
            .filter(|f| f.extension().is_some_and(|e| e == "md"))
        {
            let text = std::fs::read_to_string(f).unwrap();
            for word in text.split(|c: char| !c.is_ascii_hexdigit()) {
                if let Some(key) = (word.len() == 64).then(|| parse_hex_key(word)).flatten() {
                    found += 1;
                    assert!(
                        weakness(&key).is_some(),
                        "{} prints the key {word}",
                        f.display()
                    );
                }
            }
        }
        // Whatever the docs print (today: none), every one is refused.
        let _ = found;
    }
}
