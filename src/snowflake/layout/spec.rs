//! The JSON shape of a layout, [`LayoutSpec`] (DESIGN.md section 6), and its conversion to and
//! from [`BitLayout`].

use serde::{Deserialize, Serialize};

use super::{BitLayout, LayoutError, TimeUnit, all_ones, format_unix_ms, parse_epoch};

/// A layout in JSON (DESIGN.md section 6):
/// `{"prefix_bits": 7, "prefix_value": 127, "time_bits": 30, "worker_bits": 13, "seq_bits": 13,
/// "unit": "seconds", "epoch": "2016-05-20T00:00:00+08:00"}`. This serde form is what
/// `leafid layout plan|check --json` print; the HTTP API has its own twin with the OpenAPI
/// schema, `http::layouts::LayoutSpecBody`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayoutSpec {
    /// Width of the prefix; 0 when absent.
    #[serde(default)]
    pub prefix_bits: u8,
    /// The prefix value; all ones of `prefix_bits` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_value: Option<u64>,
    /// Width of the time field.
    pub time_bits: u8,
    /// Width of the worker field (clock-back bits included).
    pub worker_bits: u8,
    /// The high bits of the worker field holding the clock-back value; 0 when absent.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub clock_back_bits: u8,
    /// Width of the sequence field.
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
        )?
        .with_clock_back_bits(self.clock_back_bits)
    }
}

fn is_zero(bits: &u8) -> bool {
    *bits == 0
}

impl TryFrom<LayoutSpec> for BitLayout {
    type Error = LayoutError;

    fn try_from(spec: LayoutSpec) -> Result<Self, Self::Error> {
        spec.build(None)
    }
}

impl BitLayout {
    /// The JSON shape of this layout; the epoch (as RFC 3339 UTC) only when `with_epoch`.
    pub fn to_spec(&self, with_epoch: bool) -> LayoutSpec {
        LayoutSpec {
            prefix_bits: self.prefix_bits,
            prefix_value: Some(self.prefix_value),
            time_bits: self.time_bits,
            worker_bits: self.worker_bits,
            clock_back_bits: self.clock_back_bits,
            seq_bits: self.seq_bits,
            unit: self.unit,
            epoch: with_epoch.then(|| format_unix_ms(self.epoch_ms)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` in seconds from uid-generator's epoch (2016-05-20T00:00:00+08:00).
    fn layout(text: &str) -> BitLayout {
        BitLayout::parse_bits(text, TimeUnit::Seconds, 1_463_673_600_000).unwrap()
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
}
