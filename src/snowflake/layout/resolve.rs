//! How a layout is named, and the one rule that turns a name into a [`BitLayout`]: a [`Preset`],
//! or bits with an epoch and a unit, then an optional prefix value ([`LayoutArgs::resolve`]).
//!
//! The configuration, the CLI and the HTTP decoder all call it; each keeps its own spelling of
//! the values and its own wording of the errors (a [`ResolveError`] says which input is wrong).
//! Where they differ in rule, the difference is a parameter: whether the unit may be left out
//! ([`UnitPolicy`]) and what stands in when no layout is named at all ([`LayoutArgs::otherwise`]).

use super::{BitLayout, LayoutError, TimeUnit, parse_epoch};

/// A named layout. Its spellings are `twitter`, `uid-generator` and `js-safe` ([`Preset::as_str`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preset {
    /// 41/10/12, milliseconds, epoch 1288834974657 (2010-11-04T01:42:54.657Z).
    Twitter,
    /// 28/22/13, seconds, epoch 2016-05-20T00:00:00+08:00 (ran out in 2024: refused at start).
    UidGenerator,
    /// 10+31/8/14 with the prefix bits at 0, seconds, epoch 2025-01-01Z: ids <= 2^53 - 1.
    JsSafe,
}

impl Preset {
    /// Every preset.
    pub const ALL: [Preset; 3] = [Self::Twitter, Self::UidGenerator, Self::JsSafe];

    /// The layout this preset names.
    pub fn layout(self) -> BitLayout {
        match self {
            Self::Twitter => BitLayout::twitter(),
            Self::UidGenerator => BitLayout::uid_generator(),
            Self::JsSafe => BitLayout::js_safe(),
        }
    }

    /// The spelling in configuration and on the command line.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Twitter => "twitter",
            Self::UidGenerator => "uid-generator",
            Self::JsSafe => "js-safe",
        }
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether bits given without a unit are an error or count seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitPolicy {
    /// Bits need a unit ([`ResolveError::MissingUnit`]): the server's configuration, where a
    /// wrong guess would issue ids a thousand times too far apart (or too close).
    Required,
    /// Bits without a unit count seconds, uid-generator's unit: the CLI and the HTTP decoder,
    /// which only read ids.
    DefaultsToSeconds,
}

/// A layout as an adapter received it, its text already split into values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LayoutArgs<'a> {
    /// A named layout; giving bits too is [`ResolveError::PresetAndBits`].
    pub preset: Option<Preset>,
    /// `T/W/S` or `P+T/W/S`, parsed by [`BitLayout::parse_bits`].
    pub bits: Option<&'a str>,
    /// The epoch of `bits`, parsed by [`parse_epoch`]; ignored with a preset.
    pub epoch: Option<&'a str>,
    /// The unit of `bits` (see [`UnitPolicy`]); ignored with a preset.
    pub unit: Option<TimeUnit>,
    /// Replaces the prefix value (all ones of the prefix bits by default, 0 for `js-safe`).
    pub prefix_value: Option<u64>,
    /// The layout when neither a preset nor bits is given (the CLI's configured layout);
    /// `None`: that is [`ResolveError::NoLayout`].
    pub otherwise: Option<BitLayout>,
}

/// Which input [`LayoutArgs::resolve`] refused; adapters word the message for their keys.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// Neither a preset nor bits, and no layout to fall back on.
    #[error("no layout given")]
    NoLayout,
    /// Both a preset and bits.
    #[error("give either a preset or bits with an epoch, not both")]
    PresetAndBits,
    /// Bits without an epoch.
    #[error("an epoch is needed (RFC 3339 with an explicit offset)")]
    MissingEpoch,
    /// Bits without a unit, under [`UnitPolicy::Required`].
    #[error("a unit is needed (seconds or millis)")]
    MissingUnit,
    /// The epoch does not parse or is out of range.
    #[error(transparent)]
    Epoch(LayoutError),
    /// The bits do not parse or do not make a layout.
    #[error(transparent)]
    Bits(LayoutError),
    /// The prefix value does not fit the prefix bits.
    #[error(transparent)]
    PrefixValue(LayoutError),
}

impl LayoutArgs<'_> {
    /// The layout: the preset's, or the bits' (checked in this order: the epoch is given, it
    /// parses, the unit is given or defaults, the bits parse), or [`LayoutArgs::otherwise`];
    /// then the prefix value, if one is given.
    pub fn resolve(&self, unit_policy: UnitPolicy) -> Result<BitLayout, ResolveError> {
        let base = match (self.preset, self.bits) {
            (Some(_), Some(_)) => return Err(ResolveError::PresetAndBits),
            (Some(preset), None) => preset.layout(),
            (None, Some(bits)) => {
                let epoch = self.epoch.ok_or(ResolveError::MissingEpoch)?;
                let epoch_ms = parse_epoch(epoch).map_err(ResolveError::Epoch)?;
                let unit = match (self.unit, unit_policy) {
                    (Some(unit), _) => unit,
                    (None, UnitPolicy::DefaultsToSeconds) => TimeUnit::Seconds,
                    (None, UnitPolicy::Required) => return Err(ResolveError::MissingUnit),
                };
                BitLayout::parse_bits(bits, unit, epoch_ms).map_err(ResolveError::Bits)?
            }
            (None, None) => self.otherwise.ok_or(ResolveError::NoLayout)?,
        };
        match self.prefix_value {
            None => Ok(base),
            Some(value) => base
                .with_prefix_value(value)
                .map_err(ResolveError::PrefixValue),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPOCH: &str = "2016-05-20T00:00:00+08:00";

    fn bits<'a>(text: &'a str, epoch: Option<&'a str>) -> LayoutArgs<'a> {
        LayoutArgs {
            bits: Some(text),
            epoch,
            ..LayoutArgs::default()
        }
    }

    #[test]
    fn presets_name_their_layouts() {
        for preset in Preset::ALL {
            let args = LayoutArgs {
                preset: Some(preset),
                ..LayoutArgs::default()
            };
            assert_eq!(args.resolve(UnitPolicy::Required), Ok(preset.layout()));
        }
        assert_eq!(Preset::JsSafe.to_string(), "js-safe");
    }

    #[test]
    fn bits_need_an_epoch_and_the_unit_policy_decides_the_unit() {
        let args = bits("28/22/13", Some(EPOCH));
        let l = args.resolve(UnitPolicy::DefaultsToSeconds).unwrap();
        assert_eq!(
            (l.unit(), l.epoch_ms(), l.bits_string()),
            (TimeUnit::Seconds, 1_463_673_600_000, "28/22/13".to_owned())
        );
        assert_eq!(
            args.resolve(UnitPolicy::Required),
            Err(ResolveError::MissingUnit)
        );
        let millis = LayoutArgs {
            unit: Some(TimeUnit::Millis),
            ..args
        };
        assert_eq!(
            millis.resolve(UnitPolicy::Required).unwrap().unit(),
            TimeUnit::Millis
        );
        assert_eq!(
            bits("28/22/13", None).resolve(UnitPolicy::DefaultsToSeconds),
            Err(ResolveError::MissingEpoch)
        );
        assert!(matches!(
            bits("28/22/13", Some("yesterday")).resolve(UnitPolicy::Required),
            Err(ResolveError::Epoch(LayoutError::InvalidEpoch { .. }))
        ));
        assert!(matches!(
            bits("28/22/12", Some(EPOCH)).resolve(UnitPolicy::DefaultsToSeconds),
            Err(ResolveError::Bits(LayoutError::BitsDoNotSum { .. }))
        ));
    }

    #[test]
    fn a_preset_and_bits_conflict_and_neither_falls_back() {
        let both = LayoutArgs {
            preset: Some(Preset::Twitter),
            ..bits("28/22/13", Some(EPOCH))
        };
        assert_eq!(
            both.resolve(UnitPolicy::DefaultsToSeconds),
            Err(ResolveError::PresetAndBits)
        );
        let none = LayoutArgs::default();
        assert_eq!(
            none.resolve(UnitPolicy::Required),
            Err(ResolveError::NoLayout)
        );
        let fallback = LayoutArgs {
            otherwise: Some(BitLayout::twitter()),
            ..none
        };
        assert_eq!(
            fallback.resolve(UnitPolicy::Required),
            Ok(BitLayout::twitter())
        );
    }

    #[test]
    fn the_prefix_value_applies_to_every_source_and_must_fit() {
        fn with_prefix(args: LayoutArgs<'_>, value: u64) -> LayoutArgs<'_> {
            LayoutArgs {
                prefix_value: Some(value),
                ..args
            }
        }
        let l = with_prefix(bits("7+30/13/13", Some(EPOCH)), 5)
            .resolve(UnitPolicy::DefaultsToSeconds)
            .unwrap();
        assert_eq!(l.prefix_value(), 5);
        let js = LayoutArgs {
            preset: Some(Preset::JsSafe),
            ..LayoutArgs::default()
        };
        assert_eq!(
            with_prefix(js, 1)
                .resolve(UnitPolicy::Required)
                .unwrap()
                .prefix_value(),
            1
        );
        assert!(matches!(
            with_prefix(bits("28/22/13", Some(EPOCH)), 1).resolve(UnitPolicy::DefaultsToSeconds),
            Err(ResolveError::PrefixValue(
                LayoutError::PrefixValueTooLarge { .. }
            ))
        ));
    }
}
