//! The snowflake bounds helper (PROTOCOL.md, "Snowflake bounds"): the smallest and largest id
//! any worker can issue in a time range, from
//! `GET /api/v1/snowflake/bounds?from=..&to=..&stringify_ids=true`, for
//! `WHERE id BETWEEN min_id AND max_id`. One request through the same server list as the
//! batches (failover, marking down, backoff); nothing is buffered.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Deserialize;

use crate::error::{Error, Fault};
use crate::servers::{Answer, Outcome, Request};

/// The ids of a time range: every snowflake id whose time lies in the range, whichever worker
/// issued it, is within `min_id..=max_id` (`0 <= min_id <= max_id <= i64::MAX`). From
/// [`Client::snowflake_bounds`](crate::Client::snowflake_bounds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdBounds {
    /// The smallest id of the range.
    pub min_id: u64,
    /// The largest id of the range.
    pub max_id: u64,
}

/// The route's answer; `layout`, `from`, `to`, `first_tick` and `last_tick` are not needed.
#[derive(Deserialize)]
struct BoundsBody {
    min_id: Id,
    max_id: Id,
}

/// One bound of the answer: a decimal string within `0..=i64::MAX` (asked with
/// `stringify_ids=true`; a range that starts in the layout's first tick has `min_id` `"0"`: a
/// bound, never an id handed out).
struct Id(u64);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        crate::servers::canonical_decimal(&v, true)
            .map(|n| Id(n.unsigned_abs()))
            .ok_or_else(|| {
                serde::de::Error::custom(format!("bound {v:?} is not a decimal within 0..=2^63-1"))
            })
    }
}

impl Answer for IdBounds {
    /// A 200 is an answer only if both ids are in `0..=i64::MAX` and `min_id <= max_id`;
    /// anything else is that server's failure (the next is asked).
    fn parse(bytes: &[u8], _req: &Request, _server: &str) -> Result<Self, Outcome> {
        let bad = |m: String| Outcome::Fault(Fault::BadResponse(m));
        let body: BoundsBody = serde_json::from_slice(bytes).map_err(|e| bad(e.to_string()))?;
        let (min_id, max_id) = (body.min_id.0, body.max_id.0);
        if min_id > max_id {
            return Err(bad(format!("min_id {min_id} above max_id {max_id}")));
        }
        Ok(Self { min_id, max_id })
    }
}

/// The request for `[from, to)`: both instants as RFC 3339 UTC with milliseconds, URL-encoded,
/// `from` rounded down and `to` rounded up when `from < to` (down otherwise, so an empty range
/// stays empty): every tick that overlaps the range is kept, as the server keeps them
/// (`clients/conformance/vectors/bounds.json`);
/// or, for an instant outside the years 0000 to 9999 (which RFC 3339 cannot write, and which
/// lie outside every snowflake layout's time span), the `invalid_time_range` refusal every
/// server would answer, made here without a request.
pub(crate) fn request(from: SystemTime, to: SystemTime) -> Result<Request, Error> {
    let instant = |t: SystemTime, name: &str| {
        rfc3339_millis(t).ok_or_else(|| Error::Rejected {
            server: String::new(),
            status: 400,
            code: "invalid_time_range".to_owned(),
            message: format!(
                "{name} {t:?} lies outside the years 0000 to 9999 (refused by the client, no \
                 request sent)"
            ),
        })
    };
    let up = if from < to { ceil_millis(to) } else { to };
    let (from, to) = (instant(from, "from")?, instant(up, "to")?);
    let route = "/api/v1/snowflake/bounds".to_owned();
    Ok(Request {
        path: format!(
            "{route}?from={}&to={}&stringify_ids=true",
            url_encode(&from),
            url_encode(&to)
        ),
        route,
        count: 1,
        limit: 1,
        tag: None,
        stringify: true,
    })
}

/// `t` rounded up to the next whole millisecond (unchanged when whole, or when it would
/// overflow: such an instant lies past year 9999 and is refused anyway).
fn ceil_millis(t: SystemTime) -> SystemTime {
    let sub = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.subsec_nanos() % 1_000_000,
        Err(e) => (1_000_000 - e.duration().subsec_nanos() % 1_000_000) % 1_000_000,
    };
    if sub == 0 {
        return t;
    }
    t.checked_add(Duration::from_nanos(u64::from(1_000_000 - sub)))
        .unwrap_or(t)
}

/// `t` as RFC 3339 UTC with milliseconds (`2026-11-27T00:00:00.000Z`), the sub-millisecond
/// part cut (as the server itself does: a snowflake tick is one millisecond); `None` outside
/// the years 0000 to 9999.
pub(crate) fn rfc3339_millis(t: SystemTime) -> Option<String> {
    // Milliseconds since the Unix epoch, floored (also before 1970).
    let ms: i128 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_millis()).ok()?,
        Err(e) => {
            let d = e.duration();
            let whole = i128::try_from(d.as_millis()).ok()?;
            let rest = d - Duration::from_millis(u64::try_from(whole).ok()?);
            -whole - i128::from(!rest.is_zero())
        }
    };
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = i64::try_from(days).ok()?.checked_add(719_468)?;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return None;
    }
    let (h, m, s, milli) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z"
    ))
}

/// A query value percent-encoded: everything but RFC 3986's unreserved characters.
fn url_encode(v: &str) -> String {
    let mut out = String::with_capacity(v.len() + 8);
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formatted::parse_rfc3339;

    #[test]
    fn instants_are_written_in_utc_with_milliseconds() {
        let t = |s: &str| parse_rfc3339(s).unwrap();
        for (at, want) in [
            ("1970-01-01T00:00:00Z", "1970-01-01T00:00:00.000Z"),
            ("2026-11-27T00:00:00.000Z", "2026-11-27T00:00:00.000Z"),
            ("2026-11-28T08:00:00.250+08:00", "2026-11-28T00:00:00.250Z"),
            ("2024-02-29T23:59:59.999999999Z", "2024-02-29T23:59:59.999Z"),
            ("2000-01-01T00:00:00Z", "2000-01-01T00:00:00.000Z"),
            ("1969-12-31T23:59:59.9995Z", "1969-12-31T23:59:59.999Z"),
            ("1960-02-29T12:34:56.789Z", "1960-02-29T12:34:56.789Z"),
            ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000Z"),
            ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"),
        ] {
            assert_eq!(rfc3339_millis(t(at)).as_deref(), Some(want), "{at}");
        }
        // What RFC 3339 cannot write.
        let year_10000 = t("9999-12-31T23:59:59.999Z") + Duration::from_millis(1);
        assert_eq!(rfc3339_millis(year_10000), None);
        let before_year_0 = t("0000-01-01T00:00:00Z") - Duration::from_nanos(1);
        assert_eq!(rfc3339_millis(before_year_0), None);
    }

    #[test]
    fn the_query_is_url_encoded_and_asks_for_strings() {
        let from = parse_rfc3339("2026-11-27T00:00:00.5Z").unwrap();
        let to = parse_rfc3339("2026-11-28T00:00:00Z").unwrap();
        let req = request(from, to).unwrap();
        assert_eq!(
            req.path,
            "/api/v1/snowflake/bounds?from=2026-11-27T00%3A00%3A00.500Z\
             &to=2026-11-28T00%3A00%3A00.000Z&stringify_ids=true"
        );
        let far = parse_rfc3339("9999-12-31T23:59:59Z").unwrap() + Duration::from_secs(1);
        match request(from, far) {
            Err(Error::Rejected { code, .. }) => assert_eq!(code, "invalid_time_range"),
            other => panic!("not refused: {other:?}"),
        }
    }
}
