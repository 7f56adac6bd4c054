//! The wire form of ids: one home for how an id leaves the server.
//!
//! - plain text ([`plain_id`]: Leaf's routes), with the id answers' headers;
//! - JSON numbers or decimal strings ([`IdEncoding`], [`JsonId`], [`JsonIds`]) chosen by the
//!   `stringify_ids` query parameter ([`StringifyQuery`], [`BatchQuery`]), and their OpenAPI
//!   schemas ([`id_schema`], [`optional_id_schema`], [`ids_schema`]);
//! - batch parsing: `count` within `1..=`[`MAX_COUNT`] for lists, `1..=`[`MAX_RANGE_COUNT`]
//!   for the segment range route;
//! - runs of consecutive ids ([`JsonRuns`]: the range routes), each as its first and last id.
//!
//! JavaScript parses JSON numbers into doubles, which hold integers exactly only up to
//! `2^53 - 1`: every Twitter-layout snowflake id and every segment id above that comes out of
//! `JSON.parse` rounded (three consecutive snowflake ids parse to one value). Like Twitter's
//! `stringify_ids=true`, `?stringify_ids=true` answers the ids as decimal strings instead.
//!
//! Every route that returns ids writes them through this module: plain numbers
//! ([`plain_id`]), a formatted tag's text ([`plain_text`], and the formatted batch body of
//! `super::segment`), JSON lists and runs. Whatever the shape, its answer is never cacheable: the
//! `Cache-Control: no-store` default of [`super::headers`] applies to every id answer. The
//! count limits are the id service's (`crate::service`), which checks them for every transport.

use actix_web::HttpResponse;
use actix_web::http::header::{self, HeaderValue};
use serde::{Deserialize, Serialize, Serializer};
use utoipa::IntoParams;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{
    ArrayBuilder, KnownFormat, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, Type,
};

use super::error::Error;
use crate::segment::IdRun;

pub use crate::service::{MAX_COUNT, MAX_RANGE_COUNT};

/// The content type of Leaf's plain-text answers.
const PLAIN: HeaderValue = HeaderValue::from_static("text/plain; charset=utf-8");

/// A plain-text id body: formatted with `itoa`, under a static content type (no header parsing).
pub fn plain_id<I: itoa::Integer>(id: I) -> HttpResponse {
    plain_text(itoa::Buffer::new().format(id).to_owned())
}

/// A 200 answer of `body` as plain text (Leaf's routes: a number, or a formatted tag's id).
/// Made directly rather than through `HttpResponseBuilder` (whose header conversion and
/// `insert` cost about 300 instructions a request more: docs/benchmarks.md, "The segment route
/// at 1.14x of hello"): the answer's head is fresh, so the content type is appended, not
/// inserted over anything.
pub fn plain_text(body: String) -> HttpResponse {
    let mut res = HttpResponse::with_body(
        actix_web::http::StatusCode::OK,
        actix_web::body::BoxBody::new(body),
    );
    res.headers_mut().append(header::CONTENT_TYPE, PLAIN);
    res
}

/// How a JSON body writes its ids, from `stringify_ids`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IdEncoding {
    /// JSON numbers (`stringify_ids` absent or `false`): exact in JavaScript only up to 2^53 - 1.
    #[default]
    Number,
    /// Decimal strings (`stringify_ids=true`): exact in every JSON parser.
    String,
}

impl IdEncoding {
    /// Parses `stringify_ids`: `true` or `false` exactly; anything else (`yes`, `1`, empty) is
    /// `invalid_request`, so a client's typo never silently yields lossy numbers.
    pub fn parse(raw: Option<&str>) -> Result<Self, Error> {
        match raw {
            None | Some("false") => Ok(Self::Number),
            Some("true") => Ok(Self::String),
            Some(other) => Err(Error::InvalidRequest(format!(
                "stringify_ids must be \"true\" (ids as decimal strings) or \"false\" (ids as \
                 numbers), got {other:?}"
            ))),
        }
    }
}

/// One id in a JSON body: a number, or its decimal string under [`IdEncoding::String`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonId<T> {
    /// The id.
    pub id: T,
    /// Number or string.
    pub format: IdEncoding,
}

impl<T: itoa::Integer + Serialize> Serialize for JsonId<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.format {
            IdEncoding::Number => self.id.serialize(serializer),
            // itoa formats into a stack buffer: no allocation per id on the batch routes.
            IdEncoding::String => serializer.serialize_str(itoa::Buffer::new().format(self.id)),
        }
    }
}

/// The ids of a batch body, all numbers or all decimal strings.
#[derive(Debug)]
pub struct JsonIds<T> {
    /// The ids, increasing.
    pub ids: Vec<T>,
    /// Numbers or strings.
    pub format: IdEncoding,
}

impl<T: itoa::Integer + Serialize> Serialize for JsonIds<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.format {
            IdEncoding::Number => self.ids.serialize(serializer),
            IdEncoding::String => serializer.collect_seq(self.ids.iter().map(|&id| JsonId {
                id,
                format: IdEncoding::String,
            })),
        }
    }
}

/// Runs of consecutive ids in a JSON body: `[{"first": id, "last": id}, ...]`, increasing,
/// disjoint and never adjacent, both ends included, each end a number or a decimal string.
#[derive(Debug)]
pub struct JsonRuns<'a> {
    /// The runs.
    pub runs: &'a [IdRun],
    /// Numbers or strings.
    pub format: IdEncoding,
}

impl Serialize for JsonRuns<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Run {
            first: JsonId<i64>,
            last: JsonId<i64>,
        }
        let format = self.format;
        serializer.collect_seq(self.runs.iter().map(|r| Run {
            first: JsonId {
                id: r.first,
                format,
            },
            last: JsonId { id: r.last, format },
        }))
    }
}

/// Schema of [`JsonRuns`].
pub fn runs_schema() -> Schema {
    ArrayBuilder::new()
        .items(RefOr::T(
            ObjectBuilder::new()
                .property("first", id_schema())
                .required("first")
                .property("last", id_schema())
                .required("last")
                .description(Some(
                    "The ids `first` to `last`, both included (`last` >= `first`)",
                ))
                .into(),
        ))
        .description(Some(
            "Runs of consecutive ids, increasing, disjoint and never adjacent; ends as numbers, \
             or decimal strings with `stringify_ids=true`",
        ))
        .into()
}

/// Schema of one id: an integer, or its decimal string under `stringify_ids=true`.
pub fn id_schema() -> Schema {
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
                .minimum(Some(0))
                .description(Some("The id as a number (`stringify_ids` absent or false)")),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[0-9]{1,19}$"))
                .description(Some("The id in decimal (`stringify_ids=true`)")),
        )
        .description(Some(
            "An id: a JSON number, or a decimal string when the request has `stringify_ids=true` \
             (JavaScript numbers are exact only up to 2^53 - 1)",
        ))
        .into()
}

/// Schema of an id that may be absent: [`id_schema`]'s number or string, or `null`.
pub fn optional_id_schema() -> Schema {
    let Schema::OneOf(mut one_of) = id_schema() else {
        unreachable!("id_schema is a oneOf")
    };
    one_of.items.push(RefOr::T(
        ObjectBuilder::new().schema_type(Type::Null).into(),
    ));
    Schema::OneOf(one_of)
}

/// Schema of a list of ids, increasing: all numbers, or all strings under `stringify_ids=true`.
pub fn ids_schema() -> Schema {
    ArrayBuilder::new()
        .items(RefOr::T(id_schema()))
        .description(Some(
            "The ids, increasing: numbers, or decimal strings with `stringify_ids=true`",
        ))
        .into()
}

/// The `stringify_ids` query parameter of the routes whose bodies carry ids but take no other
/// query: the decode routes, the tag rows (`max_id`) and the buffers (`min_id`, `max_id`,
/// `next_id`).
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct StringifyQuery {
    /// `true`: the id as a decimal string, for JavaScript clients (whose numbers are exact only
    /// up to 2^53 - 1); `false` or absent: a JSON number. Any other value is `invalid_request`.
    #[param(value_type = Option<bool>)]
    pub stringify_ids: Option<String>,
}

impl StringifyQuery {
    /// The validated format.
    pub fn format(&self) -> Result<IdEncoding, Error> {
        IdEncoding::parse(self.stringify_ids.as_deref())
    }
}

/// The query of the batch routes, kept as text so every bad `count` gets `invalid_count` and
/// every bad `stringify_ids` gets `invalid_request`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct BatchQuery {
    /// Ids wanted (1..=100000, default 1).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 100000)]
    pub count: Option<String>,
    /// `true`: the ids as decimal strings, for JavaScript clients (whose numbers are exact only
    /// up to 2^53 - 1); `false` or absent: JSON numbers. Any other value is `invalid_request`.
    #[param(value_type = Option<bool>)]
    pub stringify_ids: Option<String>,
}

impl BatchQuery {
    /// The validated format of the ids.
    pub fn format(&self) -> Result<IdEncoding, Error> {
        IdEncoding::parse(self.stringify_ids.as_deref())
    }

    /// The validated count of a list (`1..=`[`MAX_COUNT`]).
    pub fn parse(&self) -> Result<usize, Error> {
        Ok(parse_count(self.count.as_deref(), MAX_COUNT)? as usize)
    }
}

/// The query of the segment range route: as [`BatchQuery`], with a larger bound on `count`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RangeQuery {
    /// Ids wanted (1..=1000000, default 1).
    #[param(value_type = Option<i64>, minimum = 1, maximum = 1000000)]
    pub count: Option<String>,
    /// `true`: the ends as decimal strings, for JavaScript clients (whose numbers are exact only
    /// up to 2^53 - 1); `false` or absent: JSON numbers. Any other value is `invalid_request`.
    #[param(value_type = Option<bool>)]
    pub stringify_ids: Option<String>,
}

impl RangeQuery {
    /// The validated format of the ends.
    pub fn format(&self) -> Result<IdEncoding, Error> {
        IdEncoding::parse(self.stringify_ids.as_deref())
    }

    /// The validated count (`1..=`[`MAX_RANGE_COUNT`]).
    pub fn parse(&self) -> Result<u64, Error> {
        parse_count(self.count.as_deref(), MAX_RANGE_COUNT)
    }
}

/// `count` within `1..=max` (absent: 1); anything else is `invalid_count`.
fn parse_count(raw: Option<&str>, max: u64) -> Result<u64, Error> {
    let Some(raw) = raw else {
        return Ok(1);
    };
    match raw.trim().parse::<i128>() {
        Ok(n) if (1..=max as i128).contains(&n) => Ok(n as u64),
        Ok(n) => Err(Error::InvalidCount(format!(
            "count must be within 1..={max} (got {n})"
        ))),
        Err(_) => Err(Error::InvalidCount(format!(
            "count must be an integer within 1..={max}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: Option<&str>) -> Result<usize, Error> {
        BatchQuery {
            count: s.map(str::to_owned),
            stringify_ids: None,
        }
        .parse()
    }

    #[test]
    fn count_bounds() {
        assert_eq!(q(None).unwrap(), 1);
        assert_eq!(q(Some("100000")).unwrap(), 100_000);
        for bad in [
            "0",
            "-1",
            "100001",
            "99999999999999999999999",
            "abc",
            "1.5",
            "",
        ] {
            assert!(matches!(q(Some(bad)), Err(Error::InvalidCount(_))), "{bad}");
        }
    }

    #[test]
    fn range_count_bounds() {
        let r = |s: &str| {
            RangeQuery {
                count: Some(s.to_owned()),
                stringify_ids: None,
            }
            .parse()
        };
        assert_eq!(r("1000000").unwrap(), 1_000_000);
        assert!(matches!(r("1000001"), Err(Error::InvalidCount(_))));
        assert!(matches!(r("0"), Err(Error::InvalidCount(_))));
    }

    #[test]
    fn runs_serialize_with_both_ends() {
        let runs = [
            IdRun { first: 1, last: 3 },
            IdRun {
                first: i64::MAX,
                last: i64::MAX,
            },
        ];
        let n = JsonRuns {
            runs: &runs,
            format: IdEncoding::Number,
        };
        assert_eq!(
            serde_json::to_string(&n).unwrap(),
            r#"[{"first":1,"last":3},{"first":9223372036854775807,"last":9223372036854775807}]"#
        );
        let s = JsonRuns {
            runs: &runs[..1],
            format: IdEncoding::String,
        };
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            r#"[{"first":"1","last":"3"}]"#
        );
    }

    #[test]
    fn stringify_ids_is_true_or_false_exactly() {
        assert_eq!(IdEncoding::parse(None).unwrap(), IdEncoding::Number);
        assert_eq!(
            IdEncoding::parse(Some("false")).unwrap(),
            IdEncoding::Number
        );
        assert_eq!(IdEncoding::parse(Some("true")).unwrap(), IdEncoding::String);
        for bad in ["yes", "1", "0", "", "TRUE", "True", " true"] {
            let e = IdEncoding::parse(Some(bad)).unwrap_err();
            assert!(matches!(e, Error::InvalidRequest(_)), "{bad}");
            assert!(e.to_string().contains("stringify_ids"), "{e}");
        }
    }

    #[test]
    fn ids_serialize_as_numbers_or_exact_decimal_strings() {
        let ids = vec![1, (1i64 << 53) + 1, i64::MAX];
        let numbers = JsonIds {
            ids: ids.clone(),
            format: IdEncoding::Number,
        };
        assert_eq!(
            serde_json::to_string(&numbers).unwrap(),
            "[1,9007199254740993,9223372036854775807]"
        );
        let strings = JsonIds {
            ids,
            format: IdEncoding::String,
        };
        assert_eq!(
            serde_json::to_string(&strings).unwrap(),
            r#"["1","9007199254740993","9223372036854775807"]"#
        );
        let empty = JsonIds::<u64> {
            ids: vec![],
            format: IdEncoding::String,
        };
        assert_eq!(serde_json::to_string(&empty).unwrap(), "[]");
        let one = JsonId {
            id: u64::MAX,
            format: IdEncoding::String,
        };
        assert_eq!(
            serde_json::to_string(&one).unwrap(),
            r#""18446744073709551615""#
        );
    }
}
