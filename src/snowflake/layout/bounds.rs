//! Time bounds: [`BitLayout::id_bounds`], the smallest and largest id any worker can issue at
//! an instant of a time range, for `WHERE id BETWEEN min AND max` on a table keyed by snowflake
//! ids (sonyflake's `Compose` at both ends of the range, for every worker at once).
//!
//! The rule, for `[from, to)` (unix ms, `to` exclusive):
//!
//! - an id issued at instant `t` carries the tick that holds `t`; so the ids of the range are
//!   those of the ticks from the one holding `from` (its start is `from`, or before it when
//!   `from` falls inside a tick of a seconds layout) to the one holding `to - 1 ms` (the last
//!   tick that starts before `to`);
//! - the smallest is that first tick with worker field 0 and sequence 0, the largest that last
//!   tick with the whole worker field at its maximum (clock-back bits included: any worker
//!   under any clock-back value may issue) and the largest sequence; the prefix is the layout's.
//!
//! So an id of the layout lies within `id_bounds(from, to)` exactly when its tick overlaps
//! `[from, to)`; with `from` and `to` at tick starts (every instant of a millisecond layout is
//! one) that is: its decoded timestamp is in `[from, to)`, and the bounds of adjacent ranges
//! neither overlap nor leave a gap. A range split inside a tick of a seconds layout shares that
//! tick with both halves.
//!
//! A range must lie within the layout's time span, from its epoch to the instant its time field
//! runs out: one that starts before the epoch or ends after that instant is refused, not
//! clamped ([`BoundsError`]), so an answer always means "these ids, and only these ticks".

use super::{BitLayout, format_unix_ms};

/// RFC 3339 of an instant in a message (thiserror hands the fields over by reference).
fn at(ms: &i64) -> String {
    format_unix_ms(*ms)
}

/// Why [`BitLayout::id_bounds`] refused a time range; the message names the instants involved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum BoundsError {
    /// `from` is not before `to` (`to` is exclusive, so the range holds no instant).
    #[error(
        "empty time range: from {} is not before to {} (to is exclusive)",
        at(.from_ms),
        at(.to_ms)
    )]
    EmptyRange {
        /// Start of the range, unix ms.
        from_ms: i64,
        /// End of the range (exclusive), unix ms.
        to_ms: i64,
    },
    /// `from` is before the layout's epoch: no id of the layout has an earlier time.
    #[error(
        "from {} is before the layout's epoch {} (unix ms {epoch_ms}): the range must lie \
         within the layout's time span",
        at(.from_ms),
        at(.epoch_ms)
    )]
    BeforeEpoch {
        /// Start of the range, unix ms.
        from_ms: i64,
        /// The layout's epoch, unix ms.
        epoch_ms: i64,
    },
    /// `to` is after the instant the layout's time field runs out: no id has a later time.
    #[error(
        "to {} is after {} (unix ms {exhausted_at_ms}), when the layout's time field runs out: \
         the range must end at or before it",
        at(.to_ms),
        at(.exhausted_at_ms)
    )]
    PastExhaustion {
        /// End of the range (exclusive), unix ms.
        to_ms: i64,
        /// The first instant the layout cannot represent, unix ms
        /// ([`BitLayout::exhausted_at_unix_ms`]).
        exhausted_at_ms: i64,
    },
}

impl BitLayout {
    /// The smallest and largest id any worker can issue at an instant of `[from_ms, to_ms)`
    /// (unix ms, `to_ms` exclusive): `(compose(first, 0, 0), compose(last, max_worker_field,
    /// max_sequence))`, `first` the tick holding `from_ms` and `last` the tick holding
    /// `to_ms - 1` (see the module docs). Pure: no clock, no allocation.
    ///
    /// Refused ([`BoundsError`]): an empty range, a range that starts before the epoch, and one
    /// that ends after [`BitLayout::exhausted_at_unix_ms`] (partial overlaps are not clamped).
    pub fn id_bounds(&self, from_ms: i64, to_ms: i64) -> Result<(u64, u64), BoundsError> {
        if from_ms >= to_ms {
            return Err(BoundsError::EmptyRange { from_ms, to_ms });
        }
        let before_epoch = BoundsError::BeforeEpoch {
            from_ms,
            epoch_ms: self.epoch_ms(),
        };
        let past_exhaustion = BoundsError::PastExhaustion {
            to_ms,
            exhausted_at_ms: self.exhausted_at_unix_ms(),
        };
        let first = self.delta_at(from_ms).map_err(|_| before_epoch)?;
        // `to_ms - 1` cannot wrap (`to_ms > from_ms`) and is at or after `from_ms`, so at or
        // after the epoch: its tick is at or after `first`.
        let last = self.delta_at(to_ms - 1).map_err(|_| before_epoch)?;
        if last > self.max_time_delta() {
            return Err(past_exhaustion);
        }
        // Both ticks fit (first <= last <= max) and so do the other fields: compose cannot fail.
        let min = self.compose(first, 0, 0).map_err(|_| past_exhaustion)?;
        let max = self
            .compose(last, self.max_worker_field(), self.max_sequence())
            .map_err(|_| past_exhaustion)?;
        Ok((min, max))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::snowflake::layout::{MAX_CLOCK_BACK_BITS, MAX_EPOCH_MS, TimeUnit, parse_epoch};

    fn ms(text: &str) -> i64 {
        parse_epoch(text).unwrap()
    }

    /// uid-generator's 28/22/13 after a migration: 7 prefix bits, all ones, a 30-bit time field.
    fn masked() -> BitLayout {
        BitLayout::parse_bits(
            "7+30/13/13",
            TimeUnit::Seconds,
            BitLayout::uid_generator().epoch_ms(),
        )
        .unwrap()
    }

    #[test]
    fn one_tick_of_twitter_is_every_worker_and_sequence_of_it() {
        let l = BitLayout::twitter();
        let at = ms("2025-01-01T00:00:00Z");
        let tick = l.delta_at(at).unwrap();
        assert_eq!(
            l.id_bounds(at, at + 1),
            Ok((
                l.compose(tick, 0, 0).unwrap(),
                l.compose(tick, 1023, 4095).unwrap()
            ))
        );
        // A day: its first millisecond's first id to its last millisecond's last id.
        let (min, max) = l.id_bounds(at, ms("2025-01-02T00:00:00Z")).unwrap();
        assert_eq!(l.decode(min).timestamp(), "2025-01-01T00:00:00Z");
        assert_eq!(l.decode(max).timestamp(), "2025-01-01T23:59:59.999Z");
        assert_eq!(min, (tick << 22));
        assert_eq!(max, ((tick + 86_400_000 - 1) << 22) | 0x3f_ffff);
    }

    #[test]
    fn a_seconds_layout_takes_every_tick_an_instant_of_the_range_falls_in() {
        let l = masked();
        let at = ms("2025-01-01T00:00:00Z");
        let tick = l.delta_at(at).unwrap();
        let whole = |t: u64| {
            (
                l.compose(t, 0, 0).unwrap(),
                l.compose(t, l.max_worker_field(), l.max_sequence())
                    .unwrap(),
            )
        };
        // Inside one tick: that tick, whole (ids carry no finer time).
        assert_eq!(l.id_bounds(at + 200, at + 700), Ok(whole(tick)));
        assert_eq!(l.id_bounds(at, at + 1000), Ok(whole(tick)));
        // `to` exclusive: ending at a tick start leaves that tick out, one ms more takes it.
        assert_eq!(l.id_bounds(at, at + 2000).unwrap().1, whole(tick + 1).1);
        assert_eq!(l.id_bounds(at, at + 2001).unwrap().1, whole(tick + 2).1);
        // Starting inside a tick takes it.
        assert_eq!(l.id_bounds(at + 999, at + 2000).unwrap().0, whole(tick).0);
        // Every id carries the prefix: 127 in the 7 bits above the time.
        let (min, max) = l.id_bounds(at, at + 1).unwrap();
        assert_eq!((min >> 56, max >> 56), (127, 127));
    }

    #[test]
    fn ranges_outside_the_time_span_are_refused_naming_the_instant() {
        let l = masked();
        let epoch = l.epoch_ms();
        let end = l.exhausted_at_unix_ms();
        assert_eq!(
            l.id_bounds(5, 5),
            Err(BoundsError::EmptyRange {
                from_ms: 5,
                to_ms: 5
            })
        );
        assert!(matches!(
            l.id_bounds(epoch + 10, epoch),
            Err(BoundsError::EmptyRange { .. })
        ));
        let before = l.id_bounds(epoch - 1, epoch + 5000).unwrap_err();
        assert_eq!(
            before,
            BoundsError::BeforeEpoch {
                from_ms: epoch - 1,
                epoch_ms: epoch
            }
        );
        assert!(
            before
                .to_string()
                .contains("epoch 2016-05-19T16:00:00Z (unix ms 1463673600000)"),
            "{before}"
        );
        let past = l.id_bounds(end - 5000, end + 1).unwrap_err();
        assert_eq!(
            past,
            BoundsError::PastExhaustion {
                to_ms: end + 1,
                exhausted_at_ms: end
            }
        );
        assert!(past.to_string().contains(&format_unix_ms(end)), "{past}");
        // The whole span is fine, its ends included.
        assert_eq!(
            l.id_bounds(epoch, end),
            Ok((l.smallest_id(), l.largest_id()))
        );
        assert!(l.id_bounds(i64::MIN, i64::MAX).is_err());
        // uid-generator's own layout ran out in 2024.
        let uid = BitLayout::uid_generator();
        let e = uid
            .id_bounds(ms("2025-01-01T00:00:00Z"), ms("2025-01-02T00:00:00Z"))
            .unwrap_err();
        assert!(e.to_string().contains("2024-11-20T13:24:16Z"), "{e}");
    }

    #[test]
    fn clock_back_bits_leave_the_bounds_as_they_are() {
        let plain = BitLayout::twitter();
        let with = plain.with_clock_back_bits(2).unwrap();
        let at = ms("2025-06-01T12:00:00.123+08:00");
        assert_eq!(with.id_bounds(at, at + 5), plain.id_bounds(at, at + 5));
        // The largest id has the largest clock-back value and worker id.
        let (_, max) = with.id_bounds(at, at + 5).unwrap();
        let d = with.decompose(max);
        assert_eq!((d.clock_back, d.worker_id, d.sequence), (3, 255, 4095));
    }

    /// A layout with any prefix (value included), clock-back bits, unit and epoch.
    fn any_layout() -> impl Strategy<Value = BitLayout> {
        (
            0u8..=20,
            1u8..=41,
            1u8..=30,
            0u8..=MAX_CLOCK_BACK_BITS,
            any::<bool>(),
            0i64..=MAX_EPOCH_MS,
            any::<u64>(),
        )
            .prop_filter_map("widths must sum to 63", |(p, t, w, c, millis, epoch, v)| {
                let s = 63u8.checked_sub(p + t + w).filter(|s| *s >= 1)?;
                let unit = if millis {
                    TimeUnit::Millis
                } else {
                    TimeUnit::Seconds
                };
                let value = if p == 0 { 0 } else { v >> (64 - p) };
                BitLayout::new(p, value, t, w, s, unit, epoch)
                    .ok()?
                    .with_clock_back_bits(c.min(w - 1))
                    .ok()
            })
    }

    /// An instant of the layout's time span, `[epoch, exhausted_at]`, from a fraction.
    fn instant(l: &BitLayout, fraction: f64) -> i64 {
        let span = (i128::from(l.exhausted_at_unix_ms()) - i128::from(l.epoch_ms())) as f64;
        l.epoch_ms() + (span * fraction) as i64
    }

    /// A layout, a range `from < to` within its time span (often short: a few ticks), and an
    /// id's fields that fit the layout (its tick near the range, or anywhere).
    fn layout_range_and_id() -> impl Strategy<Value = (BitLayout, i64, i64, u64, u64, u64)> {
        (any_layout(), 0.0f64..1.0, any::<bool>(), 1i64..5000).prop_flat_map(
            |(l, f, short, len)| {
                let from = instant(&l, f);
                let end = l.exhausted_at_unix_ms();
                let to = if short {
                    from.saturating_add(len).min(end)
                } else {
                    instant(&l, f + (1.0 - f) * 0.5).max(from + 1).min(end)
                };
                let from = from.min(to - 1);
                let first = l.delta_at(from).unwrap();
                let last = l.delta_at(to - 1).unwrap();
                let near = first.saturating_sub(2)..=last.saturating_add(2).min(l.max_time_delta());
                let tick = prop_oneof![near, 0..=l.max_time_delta()];
                (
                    Just(l),
                    Just(from),
                    Just(to),
                    tick,
                    0..=l.max_worker_field(),
                    0..=l.max_sequence(),
                )
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        /// An id lies within the bounds exactly when its tick overlaps `[from, to)`; and the
        /// bounds are ids of that first and last tick (decoded: the tick holding `from`, worker
        /// 0, clock-back 0, sequence 0; the tick holding `to - 1`, every field at its maximum).
        #[test]
        fn an_id_is_within_the_bounds_iff_its_tick_overlaps_the_range(
            (l, from, to, tick, worker, seq) in layout_range_and_id()
        ) {
            let (min, max) = l.id_bounds(from, to).unwrap();
            let id = l.compose(tick, worker, seq).unwrap();
            let start = l.tick_start_unix_ms(tick);
            let end = l.tick_start_unix_ms(tick + 1);
            prop_assert_eq!((min..=max).contains(&id), start < to && from < end);

            let lo = l.decode(min);
            prop_assert!(lo.tick_start_unix_ms <= from);
            prop_assert!(from < l.tick_start_unix_ms(lo.fields.time_delta + 1));
            prop_assert_eq!(lo.fields.prefix, l.prefix_value());
            prop_assert_eq!((lo.fields.worker_id, lo.fields.clock_back, lo.fields.sequence), (0, 0, 0));
            let hi = l.decode(max);
            prop_assert!(hi.tick_start_unix_ms < to);
            prop_assert!(to <= l.tick_start_unix_ms(hi.fields.time_delta + 1));
            prop_assert_eq!(hi.fields.prefix, l.prefix_value());
            prop_assert_eq!(
                (hi.fields.worker_id, hi.fields.clock_back, hi.fields.sequence),
                (l.max_worker_id(), l.max_clock_back(), l.max_sequence())
            );
            // One tick, from its start: exactly that tick's ids.
            let one = l.id_bounds(start, end.min(l.exhausted_at_unix_ms()));
            prop_assert_eq!(
                one,
                Ok((l.compose(tick, 0, 0).unwrap(), l.compose(tick, l.max_worker_field(), l.max_sequence()).unwrap()))
            );
        }

        /// Two adjacent ranges `[from, mid)` and `[mid, to)`: split at a tick start, their
        /// bounds do not overlap and leave no id between them; split inside a tick, they share
        /// exactly that tick. Either way together they are the bounds of `[from, to)`.
        #[test]
        fn adjacent_ranges_tile_the_ids(
            (l, from, to, _tick, _w, _s) in layout_range_and_id(),
            cut in 0.0f64..1.0,
            at_tick_start in any::<bool>(),
        ) {
            prop_assume!(to - from >= 2);
            let mid = from + 1 + ((to - from - 2) as f64 * cut) as i64;
            // The start of the tick holding `mid`, when it is inside the range.
            let start = l.tick_start_unix_ms(l.delta_at(mid).unwrap());
            let mid = if at_tick_start && start > from { start } else { mid };
            let (a_min, a_max) = l.id_bounds(from, mid).unwrap();
            let (b_min, b_max) = l.id_bounds(mid, to).unwrap();
            prop_assert_eq!(l.id_bounds(from, to), Ok((a_min, b_max)));
            let mid_tick = l.delta_at(mid).unwrap();
            if l.tick_start_unix_ms(mid_tick) == mid {
                prop_assert_eq!(a_max + 1, b_min);
            } else {
                let shared = (l.compose(mid_tick, 0, 0).unwrap(), l.compose(mid_tick, l.max_worker_field(), l.max_sequence()).unwrap());
                prop_assert_eq!((b_min, a_max), shared);
            }
        }

        /// Outside the time span, or empty: refused, never an answer.
        #[test]
        fn ranges_not_within_the_span_are_refused(l in any_layout(), a in any::<i64>(), b in any::<i64>()) {
            let within = a < b && a >= l.epoch_ms() && b <= l.exhausted_at_unix_ms();
            prop_assert_eq!(l.id_bounds(a, b).is_ok(), within);
        }
    }
}
