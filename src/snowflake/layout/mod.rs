//! The snowflake bit layout: how a 64-bit id is split into fields.
//!
//! ```text
//!  63 62 ........................................................... 0
//! +--+------------+------------------+--------------+----------------+
//! | 0|   prefix   |       time       |    worker    |    sequence    |
//! +--+------------+------------------+--------------+----------------+
//!  1      p bits        t bits           w bits          s bits
//!                                       1 + p + t + w + s = 64
//! ```
//!
//! - `sign` is always 0, so every id is a positive `i64` (`< 2^63`).
//! - `prefix` is a fixed value (usually all ones, the "mask") that lifts every id of this layout
//!   above the ids of an older layout; `p = 0` is the classic layout.
//! - `time` counts ticks (seconds for uid-generator, milliseconds for Twitter/Leaf) since the epoch.
//! - `worker` is the worker id; `sequence` numbers the ids within one tick and worker.
//! - An optional **clock-back field** of `c` bits takes the *high* bits of the worker field
//!   (`T/cC+W/S`, e.g. `41/c2+8/12`: a 10-bit worker field holding 2 clock-back bits and an
//!   8-bit worker id). Its value counts the backward clock steps a generator outlived since it
//!   started (see `crate::snowflake::clock_back`); ids with different values never collide, so
//!   the generator may issue again from a clock that stepped back. Workers: `2^(w-c)`.
//!
//! [`BitLayout::compose`] never lets a field overflow into its neighbour: uid-generator's
//! `BitsAllocator` shifted an oversized time delta into the sign bit (negative ids from
//! 2024-11-20 with its default 28/22/13 layout) and an oversized worker id or sequence into the
//! next field (duplicates). Here those inputs are errors, checked with three comparisons and no
//! allocation, since compose is on the per-id hot path.
//!
//! This module holds [`BitLayout`] and its rules; its parts are re-exported here, so every item
//! is used as `snowflake::layout::Item`:
//!
//! - `time`: [`TimeUnit`], epoch and instant parsing ([`parse_epoch`], [`parse_timestamp`]) and
//!   RFC 3339 formatting ([`format_unix_ms`]).
//! - `spec`: [`LayoutSpec`], the JSON shape of a layout, and its conversion to and from
//!   [`BitLayout`].
//! - `decode`: [`parse_id`], the one parser of an id given as text, and [`BitLayout::decode`],
//!   the one reading of an id ([`Decoded`]) behind every decoder (HTTP, Leaf's, the CLI).
//! - `bounds`: [`BitLayout::id_bounds`], the smallest and largest id any worker can issue in a
//!   time range (for `WHERE id BETWEEN`), and its [`BoundsError`].
//! - `resolve`: [`Preset`] and [`LayoutArgs::resolve`], the one rule that turns a preset, or bits
//!   with an epoch and a unit, plus a prefix value into a [`BitLayout`] (configuration, CLI and
//!   HTTP all call it).

use std::fmt;

mod bounds;
mod decode;
mod resolve;
mod spec;
#[cfg(test)]
mod tests;
mod time;

pub use bounds::BoundsError;
pub use decode::{Decoded, IdParseError, parse_id};
pub use resolve::{LayoutArgs, Preset, ResolveError, UnitPolicy};
pub use spec::LayoutSpec;
pub use time::{
    MAX_EPOCH_MS, MIN_EPOCH_MS, TimeUnit, format_unix_ms, parse_epoch, parse_timestamp,
};

use time::check_epoch;

/// Total width of prefix + time + worker + sequence (the sign bit takes the 64th).
pub const PAYLOAD_BITS: u8 = 63;
/// Bits of the largest integer a JavaScript number (an IEEE 754 double) holds exactly,
/// `Number.MAX_SAFE_INTEGER = 2^53 - 1`: ids wider than this are rounded by `JSON.parse`.
pub const JS_SAFE_ID_BITS: u8 = 53;

/// The fields of an id, as [`BitLayout::decompose`] reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodedId {
    /// Every bit above the time field, the sign bit included: equals the layout's
    /// `prefix_value` for an id the layout issued.
    pub prefix: u64,
    /// Ticks since the epoch.
    pub time_delta: u64,
    /// Worker id (the worker field below its clock-back bits).
    pub worker_id: u64,
    /// The clock-back field (0 when the layout has none).
    pub clock_back: u64,
    /// Sequence within the tick.
    pub sequence: u64,
}

/// Why a layout, an epoch or a unit could not be built or parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The widths do not add up to 63.
    #[error(
        "layout {prefix}+{time}/{worker}/{seq} has {total} bits; prefix + time + worker + sequence must be 63 (the sign bit makes 64)"
    )]
    BitsDoNotSum {
        /// Prefix width.
        prefix: u8,
        /// Time width.
        time: u8,
        /// Worker width.
        worker: u8,
        /// Sequence width.
        seq: u8,
        /// Their sum.
        total: u16,
    },
    /// The time, worker or sequence field has no bits.
    #[error("the {field} field must be at least 1 bit wide")]
    ZeroWidthField {
        /// `time`, `worker` or `sequence`.
        field: &'static str,
    },
    /// The prefix value needs more bits than the prefix has.
    #[error("prefix value {value} does not fit in {bits} prefix bits (largest is {max})")]
    PrefixValueTooLarge {
        /// The value given.
        value: u64,
        /// The prefix width.
        bits: u8,
        /// `2^bits - 1`.
        max: u64,
    },
    /// The epoch is outside 1970-01-01..=9999-12-31 UTC.
    #[error(
        "epoch {epoch_ms} ms is outside 1970-01-01T00:00:00Z..=9999-12-31T23:59:59.999Z (unix ms 0..=253402300799999)"
    )]
    EpochOutOfRange {
        /// The epoch in unix milliseconds.
        epoch_ms: i64,
    },
    /// The epoch text is neither RFC 3339 with an offset nor an integer.
    #[error(
        "invalid epoch {text:?}: expected RFC 3339 with an explicit offset (e.g. 2016-05-20T00:00:00+08:00) or unix milliseconds"
    )]
    InvalidEpoch {
        /// The text given.
        text: String,
    },
    /// The layout text is not `T/W/S` or `P+T/W/S` (with an optional `cC+` in the worker field).
    #[error(
        "invalid layout {text:?}: expected T/W/S or P+T/W/S, e.g. 28/22/13 or 7+30/13/13, with clock-back bits written cC+ in the worker field, e.g. 41/c2+8/12"
    )]
    InvalidBits {
        /// The text given.
        text: String,
    },
    /// The unit text is not `seconds` or `millis`.
    #[error("invalid time unit {text:?}: expected seconds or millis")]
    InvalidUnit {
        /// The text given.
        text: String,
    },
    /// The clock-back field leaves the worker id no bit, or is wider than 3 bits.
    #[error(
        "{clock_back} clock-back bits in a {worker}-bit worker field: at most 3, and at least one worker bit must remain"
    )]
    BadClockBack {
        /// Clock-back bits asked for.
        clock_back: u8,
        /// The worker field's width.
        worker: u8,
    },
    /// A layout spec without an epoch was used where one is needed.
    #[error("the layout has no epoch: give \"epoch\" as RFC 3339 with an explicit offset")]
    MissingEpoch,
}

/// Why [`BitLayout::compose`] or [`BitLayout::delta_at`] refused: small and `Copy`, no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ComposeError {
    /// The time delta is past `2^t - 1`: the layout has run out of time.
    #[error("time bits exhausted: the time delta does not fit in the time field")]
    TimeBitsExhausted,
    /// The worker id is past `2^w - 1`.
    #[error("worker id too large for the worker field")]
    WorkerIdTooLarge,
    /// The sequence is past `2^s - 1`.
    #[error("sequence too large for the sequence field")]
    SequenceTooLarge,
    /// The instant is before the layout's epoch.
    #[error("instant is before the layout's epoch")]
    BeforeEpoch,
}

/// A validated bit layout with its time unit and epoch. Once you hold one, every field fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BitLayout {
    /// Width of the fixed prefix; 0 for a classic layout.
    prefix_bits: u8,
    /// The fixed prefix, `< 2^prefix_bits`.
    prefix_value: u64,
    /// Width of the time field, at least 1.
    time_bits: u8,
    /// Width of the worker field, at least 1 (clock-back bits included).
    worker_bits: u8,
    /// The high bits of the worker field that hold the clock-back value, `< worker_bits`, at
    /// most [`MAX_CLOCK_BACK_BITS`]; 0 for none.
    clock_back_bits: u8,
    /// Width of the sequence field, at least 1.
    seq_bits: u8,
    /// Length of one tick.
    unit: TimeUnit,
    /// Unix milliseconds at which tick 0 starts, in `MIN_EPOCH_MS..=MAX_EPOCH_MS`.
    epoch_ms: i64,
}

/// `2^bits - 1`, saturating at `u64::MAX`.
const fn all_ones(bits: u8) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The widest clock-back field: 3 bits outlive 7 backward steps, more than a sane clock does.
pub const MAX_CLOCK_BACK_BITS: u8 = 3;

impl BitLayout {
    /// Builds a layout after checking that the widths add up to 63, that time, worker and
    /// sequence have at least one bit, that the prefix value fits and that the epoch is in range.
    pub fn new(
        prefix_bits: u8,
        prefix_value: u64,
        time_bits: u8,
        worker_bits: u8,
        seq_bits: u8,
        unit: TimeUnit,
        epoch_ms: i64,
    ) -> Result<Self, LayoutError> {
        let total = u16::from(prefix_bits)
            + u16::from(time_bits)
            + u16::from(worker_bits)
            + u16::from(seq_bits);
        if total != u16::from(PAYLOAD_BITS) {
            return Err(LayoutError::BitsDoNotSum {
                prefix: prefix_bits,
                time: time_bits,
                worker: worker_bits,
                seq: seq_bits,
                total,
            });
        }
        for (field, bits) in [
            ("time", time_bits),
            ("worker", worker_bits),
            ("sequence", seq_bits),
        ] {
            if bits == 0 {
                return Err(LayoutError::ZeroWidthField { field });
            }
        }
        if prefix_value > all_ones(prefix_bits) {
            return Err(LayoutError::PrefixValueTooLarge {
                value: prefix_value,
                bits: prefix_bits,
                max: all_ones(prefix_bits),
            });
        }
        Ok(BitLayout {
            prefix_bits,
            prefix_value,
            time_bits,
            worker_bits,
            clock_back_bits: 0,
            seq_bits,
            unit,
            epoch_ms: check_epoch(epoch_ms)?,
        })
    }

    /// uid-generator's default: 28/22/13, seconds, epoch 2016-05-20T00:00:00+08:00
    /// (unix 1463673600 s). Its time field runs out at 2024-11-20T13:24:16Z.
    pub fn uid_generator() -> Self {
        BitLayout {
            prefix_bits: 0,
            prefix_value: 0,
            time_bits: 28,
            worker_bits: 22,
            clock_back_bits: 0,
            seq_bits: 13,
            unit: TimeUnit::Seconds,
            epoch_ms: 1_463_673_600_000,
        }
    }

    /// Twitter's snowflake: 41/10/12, milliseconds, epoch 1288834974657 ms.
    pub fn twitter() -> Self {
        BitLayout {
            prefix_bits: 0,
            prefix_value: 0,
            time_bits: 41,
            worker_bits: 10,
            clock_back_bits: 0,
            seq_bits: 12,
            unit: TimeUnit::Millis,
            epoch_ms: 1_288_834_974_657,
        }
    }

    /// JavaScript-safe: `10+31/8/14` with the 10 prefix bits fixed at 0, seconds, epoch
    /// 2025-01-01T00:00:00Z. Every id is at most `2^53 - 1` (`Number.MAX_SAFE_INTEGER`), so
    /// `JSON.parse` reads it exactly. 31 bits of seconds last 68 years (to 2093-01-19); 256
    /// workers; 16384 ids per second per worker (the cached generator borrows later seconds for
    /// bursts). Like CosId's `SafeJavaScriptSnowflakeId`, it keeps a full-length time field and
    /// gives the ten bits up from worker and sequence; seconds rather than milliseconds leave
    /// 22 bits for them instead of 12.
    pub fn js_safe() -> Self {
        BitLayout {
            prefix_bits: PAYLOAD_BITS - JS_SAFE_ID_BITS,
            prefix_value: 0,
            time_bits: 31,
            worker_bits: 8,
            clock_back_bits: 0,
            seq_bits: 14,
            unit: TimeUnit::Seconds,
            epoch_ms: 1_735_689_600_000,
        }
    }

    /// Parses `T/W/S` or `P+T/W/S` (e.g. `28/22/13`, `7+30/13/13`), where the worker field
    /// may be written `cC+W` for `C` clock-back bits above a `W`-bit worker id (`41/c2+8/12`:
    /// a 10-bit field); the prefix value is all ones of `P` (change it with
    /// [`BitLayout::with_prefix_value`]).
    pub fn parse_bits(text: &str, unit: TimeUnit, epoch_ms: i64) -> Result<Self, LayoutError> {
        let invalid = || LayoutError::InvalidBits {
            text: text.to_owned(),
        };
        let width = |part: &str| part.trim().parse::<u8>().map_err(|_| invalid());
        let parts: Vec<&str> = text.split('/').collect();
        let [time, worker, seq] = parts.as_slice() else {
            return Err(invalid());
        };
        let (prefix_bits, time) = match time.split_once('+') {
            Some((prefix, time)) => (width(prefix)?, time),
            None => (0, *time),
        };
        let (clock_back, worker) = match worker.trim().strip_prefix('c') {
            Some(rest) => {
                let (c, w) = rest.split_once('+').ok_or_else(invalid)?;
                (width(c)?, width(w)?)
            }
            None => (0, width(worker)?),
        };
        BitLayout::new(
            prefix_bits,
            all_ones(prefix_bits),
            width(time)?,
            worker.checked_add(clock_back).ok_or_else(invalid)?,
            width(seq)?,
            unit,
            epoch_ms,
        )?
        .with_clock_back_bits(clock_back)
    }

    /// The same layout with `bits` of its worker field (the high ones) given to the clock-back
    /// value: at most [`MAX_CLOCK_BACK_BITS`], and at least one worker bit must remain.
    pub fn with_clock_back_bits(self, bits: u8) -> Result<Self, LayoutError> {
        if bits > MAX_CLOCK_BACK_BITS || bits >= self.worker_bits {
            return Err(LayoutError::BadClockBack {
                clock_back: bits,
                worker: self.worker_bits,
            });
        }
        Ok(BitLayout {
            clock_back_bits: bits,
            ..self
        })
    }

    /// The same layout with another prefix value, which must fit in the prefix bits.
    pub fn with_prefix_value(self, value: u64) -> Result<Self, LayoutError> {
        if value > all_ones(self.prefix_bits) {
            return Err(LayoutError::PrefixValueTooLarge {
                value,
                bits: self.prefix_bits,
                max: all_ones(self.prefix_bits),
            });
        }
        Ok(BitLayout {
            prefix_value: value,
            ..self
        })
    }

    /// Width of the prefix field.
    pub fn prefix_bits(&self) -> u8 {
        self.prefix_bits
    }

    /// The fixed prefix value.
    pub fn prefix_value(&self) -> u64 {
        self.prefix_value
    }

    /// Width of the time field.
    pub fn time_bits(&self) -> u8 {
        self.time_bits
    }

    /// Width of the worker field, clock-back bits included (the `W` of `T/W/S`).
    pub fn worker_bits(&self) -> u8 {
        self.worker_bits
    }

    /// Width of the clock-back field (the high bits of the worker field); 0 for none.
    pub fn clock_back_bits(&self) -> u8 {
        self.clock_back_bits
    }

    /// Width of the worker id: the worker field less its clock-back bits.
    pub fn worker_id_bits(&self) -> u8 {
        self.worker_bits - self.clock_back_bits
    }

    /// Largest clock-back value, `2^c - 1`: the backward steps a generator outlives (0: none).
    pub fn max_clock_back(&self) -> u64 {
        all_ones(self.clock_back_bits)
    }

    /// Width of the sequence field.
    pub fn seq_bits(&self) -> u8 {
        self.seq_bits
    }

    /// Length of one tick.
    pub fn unit(&self) -> TimeUnit {
        self.unit
    }

    /// Unix milliseconds at which tick 0 starts.
    pub fn epoch_ms(&self) -> i64 {
        self.epoch_ms
    }

    /// Largest time delta the time field holds: `2^t - 1`.
    pub fn max_time_delta(&self) -> u64 {
        all_ones(self.time_bits)
    }

    /// Largest worker id: `2^(w - c)` - 1 (`c` the clock-back bits).
    pub fn max_worker_id(&self) -> u64 {
        all_ones(self.worker_id_bits())
    }

    /// Largest value of the whole worker field, clock-back bits included: `2^w - 1`. With
    /// [`BitLayout::max_sequence`], the fields of the largest id at a tick.
    pub fn max_worker_field(&self) -> u64 {
        all_ones(self.worker_bits)
    }

    /// The worker field holding `worker_id` under clock-back value `clock_back`; `None` when
    /// either does not fit.
    #[inline]
    pub fn worker_field(&self, clock_back: u64, worker_id: u64) -> Option<u64> {
        (clock_back <= self.max_clock_back() && worker_id <= self.max_worker_id())
            .then(|| (clock_back << self.worker_id_bits()) | worker_id)
    }

    /// Largest sequence: `2^s - 1`.
    pub fn max_sequence(&self) -> u64 {
        all_ones(self.seq_bits)
    }

    /// Bit position of the lowest time bit (`w + s`).
    fn time_shift(&self) -> u8 {
        self.worker_bits + self.seq_bits
    }

    /// Bit position of the lowest prefix bit (`t + w + s`, at most 63).
    fn prefix_shift(&self) -> u8 {
        self.time_bits + self.worker_bits + self.seq_bits
    }

    /// Packs the fields into an id, refusing any field that does not fit: the result is always
    /// `< 2^63` and decomposes to the same fields. `worker_id` is the whole worker field: with
    /// clock-back bits, build it with [`BitLayout::worker_field`].
    #[inline]
    pub fn compose(
        &self,
        time_delta: u64,
        worker_id: u64,
        sequence: u64,
    ) -> Result<u64, ComposeError> {
        if time_delta > self.max_time_delta() {
            return Err(ComposeError::TimeBitsExhausted);
        }
        if worker_id > self.max_worker_field() {
            return Err(ComposeError::WorkerIdTooLarge);
        }
        if sequence > self.max_sequence() {
            return Err(ComposeError::SequenceTooLarge);
        }
        Ok((self.prefix_value << self.prefix_shift())
            | (time_delta << self.time_shift())
            | (worker_id << self.seq_bits)
            | sequence)
    }

    /// Splits any 64-bit value into fields. Bits above the time field (the sign included) land
    /// in `prefix`, so an id from another layout shows a prefix other than `prefix_value`.
    pub fn decompose(&self, id: u64) -> DecodedId {
        DecodedId {
            prefix: id >> self.prefix_shift(),
            time_delta: (id >> self.time_shift()) & self.max_time_delta(),
            worker_id: (id >> self.seq_bits) & self.max_worker_id(),
            clock_back: (id >> (self.seq_bits + self.worker_id_bits())) & self.max_clock_back(),
            sequence: id & self.max_sequence(),
        }
    }

    /// Whether this layout could have issued `id`: sign 0 and prefix equal to `prefix_value`.
    pub fn owns(&self, id: u64) -> bool {
        id >> self.prefix_shift() == self.prefix_value
    }

    /// Whole ticks from the epoch to `unix_ms` (rounded down). The result may exceed
    /// [`BitLayout::max_time_delta`]: [`BitLayout::compose`] is where that is refused.
    pub fn delta_at(&self, unix_ms: i64) -> Result<u64, ComposeError> {
        if unix_ms < self.epoch_ms {
            return Err(ComposeError::BeforeEpoch);
        }
        // Cannot wrap: unix_ms >= epoch_ms, so the difference is a non-negative u64.
        Ok(unix_ms.abs_diff(self.epoch_ms) / self.unit.tick_ms().unsigned_abs())
    }

    /// Unix milliseconds at which tick `delta` starts, saturating at `i64::MAX`.
    pub fn tick_start_unix_ms(&self, delta: u64) -> i64 {
        let ms = i128::from(self.epoch_ms) + i128::from(delta) * i128::from(self.unit.tick_ms());
        i64::try_from(ms).unwrap_or(i64::MAX)
    }

    /// The first instant this layout cannot represent: the start of tick `max_time_delta + 1`
    /// (saturating at `i64::MAX` for time fields that outlast it).
    pub fn exhausted_at_unix_ms(&self) -> i64 {
        self.tick_start_unix_ms(self.max_time_delta() + 1)
    }

    /// Smallest id this layout can issue at or after `unix_ms`: the tick of that instant (tick 0
    /// before the epoch), worker 0, sequence 0. `TimeBitsExhausted` once the layout has run out.
    /// This, not [`BitLayout::smallest_id`], is what to compare with a floor: a layout whose
    /// epoch lies in the past lifts its ids with the time field.
    pub fn smallest_id_from(&self, unix_ms: i64) -> Result<u64, ComposeError> {
        let delta = self.delta_at(unix_ms.max(self.epoch_ms))?;
        self.compose(delta, 0, 0)
    }

    /// Smallest id over all deltas, workers and sequences: the prefix alone.
    pub fn smallest_id(&self) -> u64 {
        self.prefix_value << self.prefix_shift()
    }

    /// Largest id over all deltas, workers and sequences: the prefix with every lower bit set.
    pub fn largest_id(&self) -> u64 {
        self.smallest_id() | all_ones(self.prefix_shift())
    }

    /// Bits the largest id needs: 63 for a classic layout, 53 for [`BitLayout::js_safe`]. Every id
    /// of the layout is below `2^id_bits`; at most [`JS_SAFE_ID_BITS`] means JavaScript-safe.
    pub fn id_bits(&self) -> u8 {
        // At most 64, so the cast is lossless.
        (u64::BITS - self.largest_id().leading_zeros()) as u8
    }

    /// `T/W/S`, or `P+T/W/S` when there is a prefix (the prefix value is not shown); a
    /// clock-back field shows in the worker part as `cC+W` (`41/c2+8/12`).
    pub fn bits_string(&self) -> String {
        let worker = if self.clock_back_bits == 0 {
            self.worker_bits.to_string()
        } else {
            format!("c{}+{}", self.clock_back_bits, self.worker_id_bits())
        };
        if self.prefix_bits == 0 {
            format!("{}/{worker}/{}", self.time_bits, self.seq_bits)
        } else {
            format!(
                "{}+{}/{worker}/{}",
                self.prefix_bits, self.time_bits, self.seq_bits
            )
        }
    }
}

impl fmt::Display for BitLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bits_string())?;
        if self.prefix_bits > 0 && self.prefix_value != all_ones(self.prefix_bits) {
            write!(f, " (prefix {})", self.prefix_value)?;
        }
        write!(f, " {} since {}", self.unit, format_unix_ms(self.epoch_ms))
    }
}
