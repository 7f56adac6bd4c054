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
//!
//! [`BitLayout::compose`] never lets a field overflow into its neighbour: uid-generator's
//! `BitsAllocator` shifted an oversized time delta into the sign bit (negative ids from
//! 2024-11-20 with its default 28/22/13 layout) and an oversized worker id or sequence into the
//! next field (duplicates). Here those inputs are errors, checked with three comparisons and no
//! allocation, since compose is on the per-id hot path.
//!
//! Epochs are unix milliseconds in `0..=253402300799999` (1970-01-01 to 9999-12-31 UTC), written
//! in RFC 3339 with an explicit offset or as a bare integer of unix milliseconds.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Datelike, Timelike};
use serde::{Deserialize, Serialize};

/// Smallest accepted epoch: 1970-01-01T00:00:00Z.
pub const MIN_EPOCH_MS: i64 = 0;
/// Largest accepted epoch: 9999-12-31T23:59:59.999Z.
pub const MAX_EPOCH_MS: i64 = 253_402_300_799_999;
/// Total width of prefix + time + worker + sequence (the sign bit takes the 64th).
pub const PAYLOAD_BITS: u8 = 63;
/// Bits of the largest integer a JavaScript number (an IEEE 754 double) holds exactly,
/// `Number.MAX_SAFE_INTEGER = 2^53 - 1`: ids wider than this are rounded by `JSON.parse`.
pub const JS_SAFE_ID_BITS: u8 = 53;

/// The length of one tick of the time field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
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

/// The fields of an id, as [`BitLayout::decompose`] reads them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DecodedId {
    /// Every bit above the time field, the sign bit included: equals the layout's
    /// `prefix_value` for an id the layout issued.
    pub prefix: u64,
    /// Ticks since the epoch.
    pub time_delta: u64,
    /// Worker id.
    pub worker_id: u64,
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
    /// The layout text is not `T/W/S` or `P+T/W/S`.
    #[error("invalid layout {text:?}: expected T/W/S or P+T/W/S, e.g. 28/22/13 or 7+30/13/13")]
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
    /// Width of the worker field, at least 1.
    worker_bits: u8,
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

fn check_epoch(epoch_ms: i64) -> Result<i64, LayoutError> {
    if (MIN_EPOCH_MS..=MAX_EPOCH_MS).contains(&epoch_ms) {
        Ok(epoch_ms)
    } else {
        Err(LayoutError::EpochOutOfRange { epoch_ms })
    }
}

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
            seq_bits: 14,
            unit: TimeUnit::Seconds,
            epoch_ms: 1_735_689_600_000,
        }
    }

    /// Parses `T/W/S` or `P+T/W/S` (e.g. `28/22/13`, `7+30/13/13`); the prefix value is all
    /// ones of `P` (change it with [`BitLayout::with_prefix_value`]).
    pub fn parse_bits(text: &str, unit: TimeUnit, epoch_ms: i64) -> Result<Self, LayoutError> {
        let invalid = || LayoutError::InvalidBits {
            text: text.to_owned(),
        };
        let width = |part: &str| part.trim().parse::<u8>().map_err(|_| invalid());
        let (prefix_bits, fields) = match text.split_once('+') {
            Some((prefix, fields)) => (width(prefix)?, fields),
            None => (0, text),
        };
        let parts: Vec<&str> = fields.split('/').collect();
        let [time, worker, seq] = parts.as_slice() else {
            return Err(invalid());
        };
        BitLayout::new(
            prefix_bits,
            all_ones(prefix_bits),
            width(time)?,
            width(worker)?,
            width(seq)?,
            unit,
            epoch_ms,
        )
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

    /// Width of the worker field.
    pub fn worker_bits(&self) -> u8 {
        self.worker_bits
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

    /// Largest worker id: `2^w - 1`.
    pub fn max_worker_id(&self) -> u64 {
        all_ones(self.worker_bits)
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
    /// `< 2^63` and decomposes to the same fields.
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
        if worker_id > self.max_worker_id() {
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

    /// `T/W/S`, or `P+T/W/S` when there is a prefix (the prefix value is not shown).
    pub fn bits_string(&self) -> String {
        if self.prefix_bits == 0 {
            format!("{}/{}/{}", self.time_bits, self.worker_bits, self.seq_bits)
        } else {
            format!(
                "{}+{}/{}/{}",
                self.prefix_bits, self.time_bits, self.worker_bits, self.seq_bits
            )
        }
    }

    /// The JSON shape of this layout; the epoch (as RFC 3339 UTC) only when `with_epoch`.
    pub fn to_spec(&self, with_epoch: bool) -> LayoutSpec {
        LayoutSpec {
            prefix_bits: self.prefix_bits,
            prefix_value: Some(self.prefix_value),
            time_bits: self.time_bits,
            worker_bits: self.worker_bits,
            seq_bits: self.seq_bits,
            unit: self.unit,
            epoch: with_epoch.then(|| format_unix_ms(self.epoch_ms)),
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

/// A layout in JSON (DESIGN.md section 6):
/// `{"prefix_bits": 7, "prefix_value": 127, "time_bits": 30, "worker_bits": 13, "seq_bits": 13,
/// "unit": "seconds", "epoch": "2016-05-20T00:00:00+08:00"}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LayoutSpec {
    /// Width of the prefix; 0 when absent.
    #[serde(default)]
    #[schema(maximum = 60)]
    pub prefix_bits: u8,
    /// The prefix value; all ones of `prefix_bits` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_value: Option<u64>,
    /// Width of the time field.
    #[schema(minimum = 1, maximum = 61)]
    pub time_bits: u8,
    /// Width of the worker field.
    #[schema(minimum = 1, maximum = 61)]
    pub worker_bits: u8,
    /// Width of the sequence field.
    #[schema(minimum = 1, maximum = 61)]
    pub seq_bits: u8,
    /// Length of one tick.
    pub unit: TimeUnit,
    /// RFC 3339 with an explicit offset, or unix milliseconds; absent in a plan answer (which
    /// gives the epoch beside the layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<String>,
}

impl LayoutSpec {
    /// Builds the layout, taking `default_epoch_ms` when the spec has no epoch.
    pub fn build(&self, default_epoch_ms: Option<i64>) -> Result<BitLayout, LayoutError> {
        let epoch_ms = match (&self.epoch, default_epoch_ms) {
            (Some(text), _) => parse_epoch(text)?,
            (None, Some(ms)) => ms,
            (None, None) => return Err(LayoutError::MissingEpoch),
        };
        BitLayout::new(
            self.prefix_bits,
            self.prefix_value
                .unwrap_or_else(|| all_ones(self.prefix_bits)),
            self.time_bits,
            self.worker_bits,
            self.seq_bits,
            self.unit,
            epoch_ms,
        )
    }
}

impl TryFrom<LayoutSpec> for BitLayout {
    type Error = LayoutError;

    fn try_from(spec: LayoutSpec) -> Result<Self, Self::Error> {
        spec.build(None)
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
    use serde_json::Value;

    #[test]
    fn js_safe_ids_fit_in_53_bits_for_68_years() {
        let l = BitLayout::js_safe();
        assert_eq!(l.bits_string(), "10+31/8/14");
        assert_eq!(
            l,
            BitLayout::parse_bits("10+31/8/14", TimeUnit::Seconds, l.epoch_ms())
                .unwrap()
                .with_prefix_value(0)
                .unwrap()
        );
        assert_eq!(l.largest_id(), (1 << 53) - 1);
        assert_eq!(l.id_bits(), JS_SAFE_ID_BITS);
        assert_eq!(
            format_unix_ms(l.exhausted_at_unix_ms()),
            "2093-01-19T03:14:08Z"
        );
        assert_eq!((l.max_worker_id(), l.max_sequence()), (255, 16_383));
        assert_eq!(BitLayout::twitter().id_bits(), 63);
        assert_eq!(
            l.with_prefix_value(1).unwrap().id_bits(),
            54,
            "a non-zero prefix lifts the ids past 2^53"
        );
    }

    const UID_EPOCH_MS: i64 = 1_463_673_600_000;

    /// The reference vectors: `LEAFID_VECTORS`, else `../shared/reference/...` beside the
    /// crate, else the absolute path on the build machine.
    fn vectors_path() -> std::path::PathBuf {
        if let Some(path) = std::env::var_os("LEAFID_VECTORS") {
            return path.into();
        }
        let beside = std::path::PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/uid-generator-vectors.json"
        ));
        if beside.exists() {
            return beside;
        }
        "/work/shared/reference/uid-generator-vectors.json".into()
    }

    fn load_vectors() -> Value {
        let path = vectors_path();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        serde_json::from_str(&text).expect("vectors file is JSON")
    }

    fn u(v: &Value, key: &str) -> u64 {
        v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
    }

    /// "2024-11-20 13:24:15" as written in the vectors file, in our RFC 3339 form.
    fn vector_utc(text: &str) -> String {
        format!("{}Z", text.replace(' ', "T"))
    }

    fn uid() -> BitLayout {
        BitLayout::uid_generator()
    }

    fn layout(text: &str) -> BitLayout {
        BitLayout::parse_bits(text, TimeUnit::Seconds, UID_EPOCH_MS).unwrap()
    }

    #[test]
    fn every_reference_vector_is_reproduced() {
        let vectors = load_vectors();
        let (mut composed, mut refused, mut parsed) = (0, 0, 0);
        for section in vectors["layouts"].as_array().unwrap() {
            let bits = &section["bits"];
            let (t, w, s) = (
                u(bits, "timestamp"),
                u(bits, "workerId"),
                u(bits, "sequence"),
            );
            let epoch_ms = section["epochSeconds"].as_i64().unwrap() * 1000;
            let l = BitLayout::new(0, 0, t as u8, w as u8, s as u8, TimeUnit::Seconds, epoch_ms)
                .unwrap();
            let derived = &section["derived"];
            assert_eq!(l.max_time_delta(), u(derived, "maxDeltaSeconds"));
            assert_eq!(l.max_worker_id(), u(derived, "maxWorkerId"));
            assert_eq!(l.max_sequence(), u(derived, "maxSequence"));
            assert_eq!(l.compose(1, 0, 0), Ok(1 << u(derived, "timestampShift")));
            assert_eq!(l.compose(0, 1, 0), Ok(1 << u(derived, "workerIdShift")));
            assert_eq!(
                format_unix_ms(l.exhausted_at_unix_ms() - 1000),
                vector_utc(derived["lastValidSecondUtc"].as_str().unwrap())
            );

            for v in section["allocate"].as_array().unwrap() {
                let input = &v["inputs"];
                let (delta, worker, seq) = (
                    u(input, "deltaSeconds"),
                    u(input, "workerId"),
                    u(input, "sequence"),
                );
                let java_id = v["expectedId"].as_i64().unwrap() as u64;
                let round = &v["roundTrip"];
                // Java's parse reads the delta with `>>>`, so it keeps the sign bit: that is our
                // prefix (the bits above the time field) shifted back on top of the delta.
                let d = l.decompose(java_id);
                assert_eq!(
                    (d.prefix << t) | d.time_delta,
                    u(round, "deltaSeconds"),
                    "{v}"
                );
                assert_eq!(d.worker_id, u(round, "workerId"), "{v}");
                assert_eq!(d.sequence, u(round, "sequence"), "{v}");

                let ours = l.compose(delta, worker, seq);
                if delta > l.max_time_delta() {
                    // Java shifted the delta into the sign bit (negative id) or out of the word
                    // (an id of an earlier second): we refuse instead.
                    assert_eq!(ours, Err(ComposeError::TimeBitsExhausted), "{v}");
                    refused += 1;
                } else if worker > l.max_worker_id() {
                    // Java let the worker id bleed into the time field (a duplicate id).
                    assert_eq!(ours, Err(ComposeError::WorkerIdTooLarge), "{v}");
                    refused += 1;
                } else if seq > l.max_sequence() {
                    // Java let the sequence bleed into the worker field (a duplicate id).
                    assert_eq!(ours, Err(ComposeError::SequenceTooLarge), "{v}");
                    refused += 1;
                } else {
                    assert_eq!(ours, Ok(java_id), "{v}");
                    assert_eq!(
                        (d.prefix, d.time_delta, d.worker_id, d.sequence),
                        (0, delta, worker, seq)
                    );
                    composed += 1;
                }
            }

            for v in section["parse"].as_array().unwrap() {
                let id = v["id"].as_i64().unwrap() as u64;
                let want = &v["expected"];
                let d = l.decompose(id);
                let java_delta = (d.prefix << t) | d.time_delta;
                assert_eq!(java_delta, u(want, "deltaSeconds"), "{v}");
                assert_eq!(d.worker_id, u(want, "workerId"), "{v}");
                assert_eq!(d.sequence, u(want, "sequence"), "{v}");
                let at = l.tick_start_unix_ms(java_delta);
                assert_eq!(at, want["unixSeconds"].as_i64().unwrap() * 1000, "{v}");
                assert_eq!(
                    format_unix_ms(at),
                    vector_utc(want["timestampUtc"].as_str().unwrap())
                );
                // A negative Java id was never a valid id of the layout.
                assert_eq!(l.owns(id), (id as i64) >= 0, "{v}");
                parsed += 1;
            }
        }
        // Guards against a vectors file that silently lost its sections.
        assert_eq!((composed, refused, parsed), (30, 7, 19));
    }

    #[test]
    fn design_section_6_facts_hold() {
        let old = uid();
        let d = old.decompose(9_090_949_948_782_127_403);
        assert_eq!(
            (d.prefix, d.time_delta, d.worker_id, d.sequence),
            (0, 264_581_466, 29, 2347)
        );

        // 2025-04-16 00:00:00 +08:00 is delta 281059200 under the uid-generator epoch.
        let at = parse_epoch("2025-04-16T00:00:00+08:00").unwrap();
        assert_eq!(old.delta_at(at), Ok(281_059_200));
        assert_eq!(
            old.compose(281_059_200, 29, 1024),
            Err(ComposeError::TimeBitsExhausted),
            "Java gave -8789623495789927424"
        );
        let plain = layout("30/20/13");
        assert_eq!(
            plain.compose(281_059_200, 29, 1024),
            Ok(2_414_280_144_480_084_992)
        );
        // ... which collides with the legacy id of the same worker on 2018-08-11.
        let d = old.decompose(2_414_280_144_480_084_992);
        assert_eq!(
            (d.time_delta, d.worker_id, d.sequence),
            (70_264_800, 29, 1024)
        );
        assert_eq!(
            format_unix_ms(old.tick_start_unix_ms(d.time_delta)),
            "2018-08-10T22:00:00Z"
        );

        let mask = layout("7+30/13/13");
        assert_eq!(mask.prefix_value(), 127);
        assert_eq!(
            mask.compose(281_059_200, 29, 1024),
            Ok(9_170_176_006_445_835_264)
        );
        assert_eq!(mask.smallest_id(), 127 << 56);

        assert_eq!(
            format_unix_ms(old.exhausted_at_unix_ms()),
            "2024-11-20T13:24:16Z"
        );
        let last = old.delta_at(parse_epoch("2024-11-20T21:24:15+08:00").unwrap());
        assert_eq!(last, Ok(old.max_time_delta()));

        // 28/22/13 ids pass 127 << 56 from 2024-10-27 06:51:44 UTC on.
        let crossing = parse_epoch("2024-10-27T06:51:44Z").unwrap();
        let delta = old.delta_at(crossing).unwrap();
        assert_eq!(old.compose(delta, 0, 0), Ok(127 << 56));
        assert!(
            old.compose(delta - 1, old.max_worker_id(), old.max_sequence())
                .unwrap()
                < 127 << 56
        );
    }

    #[test]
    fn presets_are_the_documented_layouts() {
        let u = uid();
        assert_eq!(u, layout("28/22/13"));
        assert_eq!(
            u,
            BitLayout::parse_bits(
                "0+28/22/13",
                TimeUnit::Seconds,
                parse_epoch("2016-05-20T00:00:00+08:00").unwrap()
            )
            .unwrap()
        );
        assert_eq!(u.epoch_ms(), 1_463_673_600_000);
        assert_eq!(
            (u.max_time_delta(), u.max_worker_id(), u.max_sequence()),
            (268_435_455, 4_194_303, 8191)
        );
        let t = BitLayout::twitter();
        assert_eq!(t.bits_string(), "41/10/12");
        assert_eq!(
            (t.unit(), t.epoch_ms()),
            (TimeUnit::Millis, 1_288_834_974_657)
        );
        assert_eq!(
            BitLayout::new(0, 0, 41, 10, 12, TimeUnit::Millis, 1_288_834_974_657),
            Ok(t)
        );
        // Twitter's epoch plus 2^41 ms.
        assert_eq!(
            format_unix_ms(t.exhausted_at_unix_ms()),
            "2080-07-10T17:30:30.209Z"
        );
    }

    #[test]
    fn parse_bits_reads_both_forms_and_names_bad_text() {
        let l = layout("7+30/13/13");
        assert_eq!(
            (
                l.prefix_bits(),
                l.prefix_value(),
                l.time_bits(),
                l.worker_bits(),
                l.seq_bits()
            ),
            (7, 127, 30, 13, 13)
        );
        assert_eq!(l.bits_string(), "7+30/13/13");
        assert_eq!(layout(" 28 / 22 / 13 ").bits_string(), "28/22/13");
        for bad in [
            "",
            "28/22",
            "28/22/13/1",
            "a/b/c",
            "7+",
            "+28/22/13",
            "300/22/13",
            "1+2+28/22/13",
        ] {
            let err = BitLayout::parse_bits(bad, TimeUnit::Seconds, 0).unwrap_err();
            assert!(
                matches!(
                    err,
                    LayoutError::InvalidBits { .. } | LayoutError::BitsDoNotSum { .. }
                ),
                "{bad:?}: {err}"
            );
        }
        let err = BitLayout::parse_bits("28/22/12", TimeUnit::Seconds, 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "layout 0+28/22/12 has 62 bits; prefix + time + worker + sequence must be 63 (the sign bit makes 64)"
        );
    }

    #[test]
    fn new_rejects_each_invalid_part_with_a_clear_message() {
        let s = TimeUnit::Seconds;
        assert_eq!(
            BitLayout::new(0, 0, 0, 50, 13, s, 0)
                .unwrap_err()
                .to_string(),
            "the time field must be at least 1 bit wide"
        );
        assert_eq!(
            BitLayout::new(0, 0, 50, 0, 13, s, 0),
            Err(LayoutError::ZeroWidthField { field: "worker" })
        );
        assert_eq!(
            BitLayout::new(0, 0, 50, 13, 0, s, 0),
            Err(LayoutError::ZeroWidthField { field: "sequence" })
        );
        assert_eq!(
            BitLayout::new(7, 128, 30, 13, 13, s, 0)
                .unwrap_err()
                .to_string(),
            "prefix value 128 does not fit in 7 prefix bits (largest is 127)"
        );
        assert!(BitLayout::new(0, 1, 37, 13, 13, s, 0).is_err());
        assert_eq!(
            BitLayout::new(0, 0, 28, 22, 13, s, -1),
            Err(LayoutError::EpochOutOfRange { epoch_ms: -1 })
        );
        assert!(BitLayout::new(0, 0, 28, 22, 13, s, MAX_EPOCH_MS).is_ok());
        assert!(BitLayout::new(0, 0, 28, 22, 13, s, MAX_EPOCH_MS + 1).is_err());
        assert!(BitLayout::new(255, 0, 255, 255, 255, s, 0).is_err());
        let l = layout("7+30/13/13");
        assert_eq!(l.with_prefix_value(3).unwrap().prefix_value(), 3);
        assert!(l.with_prefix_value(128).is_err());
        assert!(uid().with_prefix_value(1).is_err());
    }

    #[test]
    fn compose_names_the_field_that_does_not_fit() {
        let l = uid();
        assert_eq!(
            l.compose(1 << 28, 0, 0),
            Err(ComposeError::TimeBitsExhausted)
        );
        assert_eq!(
            l.compose(0, 1 << 22, 0),
            Err(ComposeError::WorkerIdTooLarge)
        );
        assert_eq!(
            l.compose(0, 0, 1 << 13),
            Err(ComposeError::SequenceTooLarge)
        );
        assert_eq!(
            l.compose(u64::MAX, u64::MAX, u64::MAX),
            Err(ComposeError::TimeBitsExhausted)
        );
        assert_eq!(l.largest_id(), i64::MAX as u64);
        assert_eq!(l.smallest_id(), 0);
        let m = layout("7+30/13/13");
        assert_eq!(m.largest_id(), i64::MAX as u64);
        assert_eq!(m.with_prefix_value(0).unwrap().largest_id(), (1 << 56) - 1);
        assert_eq!(m.compose(0, 0, 0), Ok(m.smallest_id()));
    }

    #[test]
    fn time_conversions_floor_and_saturate() {
        let l = uid();
        assert_eq!(l.delta_at(UID_EPOCH_MS - 1), Err(ComposeError::BeforeEpoch));
        assert_eq!(l.delta_at(UID_EPOCH_MS), Ok(0));
        assert_eq!(l.delta_at(UID_EPOCH_MS + 999), Ok(0));
        assert_eq!(l.delta_at(UID_EPOCH_MS + 1000), Ok(1));
        assert_eq!(
            l.delta_at(i64::MAX),
            Ok((i64::MAX - UID_EPOCH_MS) as u64 / 1000)
        );
        assert_eq!(l.tick_start_unix_ms(1), UID_EPOCH_MS + 1000);
        assert_eq!(l.tick_start_unix_ms(u64::MAX), i64::MAX);
        let wide = BitLayout::new(0, 0, 55, 4, 4, TimeUnit::Seconds, 0).unwrap();
        assert_eq!(wide.exhausted_at_unix_ms(), i64::MAX);
        let ms = BitLayout::twitter();
        assert_eq!(ms.delta_at(ms.epoch_ms() + 1), Ok(1));
    }

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

    #[test]
    fn spec_json_matches_design_and_round_trips() {
        let json = r#"{"prefix_bits": 7, "prefix_value": 127, "time_bits": 30, "worker_bits": 13,
            "seq_bits": 13, "unit": "seconds", "epoch": "2016-05-20T00:00:00+08:00"}"#;
        let spec: LayoutSpec = serde_json::from_str(json).unwrap();
        let l = BitLayout::try_from(spec).unwrap();
        assert_eq!(l, layout("7+30/13/13"));
        let back = serde_json::to_value(l.to_spec(true)).unwrap();
        assert_eq!(back["epoch"], "2016-05-19T16:00:00Z");
        assert_eq!(back["unit"], "seconds");
        assert_eq!(BitLayout::try_from(l.to_spec(true)), Ok(l));
        assert!(
            serde_json::to_value(l.to_spec(false))
                .unwrap()
                .get("epoch")
                .is_none()
        );

        let short: LayoutSpec = serde_json::from_str(
            r#"{"time_bits": 28, "worker_bits": 22, "seq_bits": 13, "unit": "millis", "epoch": "0"}"#,
        )
        .unwrap();
        let l = BitLayout::try_from(short.clone()).unwrap();
        assert_eq!(
            (l.prefix_bits(), l.prefix_value(), l.unit()),
            (0, 0, TimeUnit::Millis)
        );
        let defaulted: LayoutSpec = serde_json::from_str(
            r#"{"prefix_bits": 3, "time_bits": 25, "worker_bits": 22, "seq_bits": 13, "unit": "seconds"}"#,
        )
        .unwrap();
        assert_eq!(
            BitLayout::try_from(defaulted.clone()),
            Err(LayoutError::MissingEpoch)
        );
        assert_eq!(defaulted.build(Some(0)).unwrap().prefix_value(), 7);
        assert!(serde_json::from_str::<LayoutSpec>(r#"{"time_bits": 28}"#).is_err());
        assert!(
            serde_json::from_str::<LayoutSpec>(
                r#"{"time_bits": 28, "worker_bits": 22, "seq_bits": 13, "unit": "hours"}"#
            )
            .is_err()
        );
    }

    #[test]
    fn display_shows_bits_unit_and_epoch() {
        assert_eq!(
            uid().to_string(),
            "28/22/13 seconds since 2016-05-19T16:00:00Z"
        );
        let l = layout("7+30/13/13").with_prefix_value(5).unwrap();
        assert_eq!(
            l.to_string(),
            "7+30/13/13 (prefix 5) seconds since 2016-05-19T16:00:00Z"
        );
    }

    /// Any valid layout: widths from a random split of 63 bits, any prefix value, any unit.
    fn any_layout() -> impl Strategy<Value = BitLayout> {
        (
            0u8..=20,
            1u8..=41,
            1u8..=30,
            any::<bool>(),
            0i64..=MAX_EPOCH_MS,
            any::<u64>(),
        )
            .prop_filter_map("widths must sum to 63", |(p, t, w, millis, epoch, v)| {
                let s = 63u8.checked_sub(p + t + w).filter(|s| *s >= 1)?;
                let unit = if millis {
                    TimeUnit::Millis
                } else {
                    TimeUnit::Seconds
                };
                let value = if p == 0 { 0 } else { v >> (64 - p) };
                BitLayout::new(p, value, t, w, s, unit, epoch).ok()
            })
    }

    /// A layout with fields that fit it.
    fn layout_and_fields() -> impl Strategy<Value = (BitLayout, u64, u64, u64)> {
        any_layout().prop_flat_map(|l| {
            (
                Just(l),
                0..=l.max_time_delta(),
                0..=l.max_worker_id(),
                0..=l.max_sequence(),
            )
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn compose_then_decompose_round_trips((l, d, w, s) in layout_and_fields()) {
            let id = l.compose(d, w, s).unwrap();
            prop_assert!(id <= i64::MAX as u64);
            prop_assert!(l.owns(id));
            prop_assert!((l.smallest_id()..=l.largest_id()).contains(&id));
            let back = l.decompose(id);
            prop_assert_eq!(back, DecodedId { prefix: l.prefix_value(), time_delta: d, worker_id: w, sequence: s });
        }

        #[test]
        fn decompose_then_compose_round_trips_owned_ids(l in any_layout(), low in any::<u64>()) {
            let id = l.smallest_id() | (low & (l.largest_id() - l.smallest_id()));
            let d = l.decompose(id);
            prop_assert_eq!(l.compose(d.time_delta, d.worker_id, d.sequence), Ok(id));
        }

        #[test]
        fn compose_never_overflows_a_field(l in any_layout(), d in any::<u64>(), w in any::<u64>(), s in any::<u64>()) {
            match l.compose(d, w, s) {
                Ok(id) => {
                    prop_assert!(id <= i64::MAX as u64, "never negative as i64");
                    prop_assert!(d <= l.max_time_delta() && w <= l.max_worker_id() && s <= l.max_sequence());
                    let back = l.decompose(id);
                    prop_assert_eq!((back.time_delta, back.worker_id, back.sequence), (d, w, s));
                }
                Err(ComposeError::TimeBitsExhausted) => prop_assert!(d > l.max_time_delta()),
                Err(ComposeError::WorkerIdTooLarge) => prop_assert!(w > l.max_worker_id()),
                Err(ComposeError::SequenceTooLarge) => prop_assert!(s > l.max_sequence()),
                Err(ComposeError::BeforeEpoch) => prop_assert!(false, "compose has no clock"),
            }
        }

        #[test]
        fn ids_order_like_their_fields(
            (l, d1, w1, s1) in layout_and_fields(),
            (d2, w2, s2) in (any::<u64>(), any::<u64>(), any::<u64>()),
        ) {
            let (d2, w2, s2) = (d2 % (l.max_time_delta() + 1), w2 % (l.max_worker_id() + 1), s2 % (l.max_sequence() + 1));
            let (a, b) = (l.compose(d1, w1, s1).unwrap(), l.compose(d2, w2, s2).unwrap());
            prop_assert_eq!(a.cmp(&b), (d1, w1, s1).cmp(&(d2, w2, s2)));
        }

        #[test]
        fn ticks_and_instants_agree(l in any_layout(), offset in 0i64..=1 << 45) {
            let at = l.epoch_ms().saturating_add(offset);
            let d = l.delta_at(at).unwrap();
            prop_assert!(l.tick_start_unix_ms(d) <= at);
            prop_assert!(at < l.tick_start_unix_ms(d + 1));
            prop_assert_eq!(l.delta_at(l.tick_start_unix_ms(d)), Ok(d));
            let exhausted = l.exhausted_at_unix_ms();
            if exhausted < i64::MAX {
                prop_assert_eq!(l.delta_at(exhausted), Ok(l.max_time_delta() + 1));
                prop_assert_eq!(l.delta_at(exhausted - 1), Ok(l.max_time_delta()));
            }
        }

        #[test]
        fn bits_string_and_spec_round_trip(l in any_layout()) {
            let parsed = BitLayout::parse_bits(&l.bits_string(), l.unit(), l.epoch_ms()).unwrap();
            prop_assert_eq!(parsed.with_prefix_value(l.prefix_value()).unwrap(), l);
            let json = serde_json::to_string(&l.to_spec(true)).unwrap();
            let spec: LayoutSpec = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(BitLayout::try_from(spec), Ok(l));
        }

        #[test]
        fn format_then_parse_is_identity(ms in 0i64..=MAX_EPOCH_MS) {
            prop_assert_eq!(parse_epoch(&format_unix_ms(ms)), Ok(ms));
        }
    }
}
