//! Id shapes that people read: order numbers, invoice numbers, short codes (issue 34).
//!
//! A shape turns a tag's sequence number into text and back, without any state of its own:
//!
//! - [`alphabet`]: the sequence in decimal, base 36, base 62 or Crockford base 32, padded to a
//!   fixed width, and read back strictly (a character outside the alphabet, or a wrong width,
//!   is an error, never another number);
//! - [`check`]: one check character (Damm for decimal, the ISO 7064 hybrid system for the
//!   other alphabets);
//! - [`period`]: the period a sequence restarts with (never, yearly, monthly, daily) in an IANA
//!   time zone, from `jiff`'s own zone database: days of 23 and 25 hours included;
//! - [`permute`]: a keyed permutation of the sequence (FF1), for codes that hide order and
//!   volume, with its keys from [`keys`] (configuration, never the database) and their check
//!   values from [`key_check`] (the database records those, to catch two keys under one id);
//! - [`format`](mod@format): a tag's whole format (prefix, date part, sequence, check, suffix), rendering
//!   and decoding.
//!
//! What makes a formatted id unique is the pair (period, sequence): the sequence is unique
//! within its period by the segment engine's own guarantee, and the period is written into the
//! id. [`format::TagFormat::validate`] refuses every format whose text would not name its
//! period (a daily reset without the day in the date part, a two-digit year), so two periods
//! can never render the same text.

pub mod alphabet;
pub mod check;
pub mod format;
pub mod key_check;
pub mod keys;
pub mod period;
pub mod permute;

pub use alphabet::Radix;
pub use format::{Decoded, FormatError, TagFormat};
pub use period::{Period, Reset};
