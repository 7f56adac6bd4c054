//! What both decode routes share (`/api/v1/snowflake/decode/{id}` under this server's layout,
//! `/api/v1/layouts/decode/{id}` under any): parsing the id, the body of its fields, and the
//! wire name of a time unit.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::Error;
use super::ids::{IdEncoding, JsonId, id_schema};
use crate::snowflake::layout::{self, BitLayout, TimeUnit};

/// Parses an id to decode ([`layout::parse_id`]): an integer within `0..=i64::MAX`, else
/// `invalid_id`.
pub fn parse_id(text: &str) -> Result<u64, Error> {
    layout::parse_id(text).map_err(|_| {
        Error::InvalidId(format!(
            "id {text:?} is not an integer within 0..={}",
            i64::MAX
        ))
    })
}

/// An id's fields under a layout: the body of both decode routes.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecodeBody {
    /// The id: a number, or a decimal string with `stringify_ids=true`.
    #[schema(schema_with = id_schema)]
    pub id: JsonId<u64>,
    /// The id as a string (for clients whose numbers are doubles).
    pub id_str: String,
    /// The layout, `T/W/S` or `P+T/W/S`.
    pub layout: String,
    /// Value of the prefix bits.
    pub prefix: u64,
    /// Ticks since the epoch.
    pub time_delta: u64,
    /// Start of that tick, RFC 3339 UTC.
    pub timestamp: String,
    /// Worker id field.
    pub worker_id: u64,
    /// The clock-back field (only for a layout with clock-back bits): how many backward clock
    /// steps the issuing run had outlived.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clock_back: Option<u64>,
    /// Sequence field.
    pub sequence: u64,
}

/// The decode body shared by the decode routes: the id read by [`BitLayout::decode`], plus
/// `id_str` and `layout`; `id` as `format` says.
pub fn decode_body(layout: &BitLayout, id: u64, format: IdEncoding) -> DecodeBody {
    let decoded = layout.decode(id);
    let fields = decoded.fields;
    DecodeBody {
        id: JsonId { id, format },
        id_str: id.to_string(),
        layout: layout.bits_string(),
        prefix: fields.prefix,
        time_delta: fields.time_delta,
        timestamp: decoded.timestamp(),
        worker_id: fields.worker_id,
        clock_back: (layout.clock_back_bits() > 0).then_some(fields.clock_back),
        sequence: fields.sequence,
    }
}

/// The length of one tick of the time field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
#[schema(as = TimeUnit)]
pub enum TimeUnitBody {
    /// One tick per second (uid-generator).
    Seconds,
    /// One tick per millisecond (Twitter, Leaf).
    Millis,
}

impl From<TimeUnit> for TimeUnitBody {
    fn from(unit: TimeUnit) -> Self {
        match unit {
            TimeUnit::Seconds => Self::Seconds,
            TimeUnit::Millis => Self::Millis,
        }
    }
}

impl From<TimeUnitBody> for TimeUnit {
    fn from(unit: TimeUnitBody) -> Self {
        match unit {
            TimeUnitBody::Seconds => Self::Seconds,
            TimeUnitBody::Millis => Self::Millis,
        }
    }
}
