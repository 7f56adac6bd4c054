//! What handlers read off a request beyond the extractors: the shared state borrowed without a
//! `Data` clone, and the rest of a prefix route's path, percent-decoded (the id routes match a
//! static prefix, without a regex, and read their tag or key from here).

use std::borrow::Cow;

use actix_web::{HttpRequest, web};

use super::AppState;
use super::error::Error;
#[cfg(doc)]
use super::middleware::labeled_get_prefix;
use crate::segment::BizTag;

/// The app state, borrowed from the request.
pub fn app_state(req: &HttpRequest) -> Result<&AppState, Error> {
    req.app_data::<web::Data<AppState>>()
        .map(|data| data.get_ref())
        .ok_or_else(|| {
            tracing::error!("AppState is not registered as app data");
            Error::Internal
        })
}

/// The rest of the path after a [`labeled_get_prefix`] route's prefix and a `/`, percent-decoded
/// as `web::Path<String>` decodes a `{param:.*}`: borrowed when there is nothing to decode
/// (actix has already decoded all but `%2F`, `%25` and `%2B`, so only a `%` left needs the
/// full decode). The prefix alone (no `/`) is `not_found`, as it was with `{param:.*}`.
pub fn path_tail(req: &HttpRequest) -> Result<Cow<'_, str>, Error> {
    let Some(rest) = req.match_info().unprocessed().strip_prefix('/') else {
        return Err(Error::NotFound(format!("{} {}", req.method(), req.path())));
    };
    // A byte scan: `str::contains(char)` goes through the char searcher and `memchr`, about
    // twice the instructions for a tag's few bytes.
    if !rest.bytes().any(|b| b == b'%') {
        return Ok(Cow::Borrowed(rest));
    }
    Ok(Cow::Owned(percent_decode_lossy(rest)))
}

/// [`path_tail`] as a tag, checked (`BizTag::validate`). A tail that is a valid tag as it
/// stands holds no `%` (not in the tag alphabet), so nothing to decode: one scan of its bytes
/// answers both questions (the id route's fast path). Anything else is decoded, then checked.
pub fn tag_tail(req: &HttpRequest) -> Result<Cow<'_, str>, Error> {
    if let Some(rest) = req.match_info().unprocessed().strip_prefix('/')
        && BizTag::validate(rest).is_ok()
    {
        return Ok(Cow::Borrowed(rest));
    }
    let tag = path_tail(req)?;
    BizTag::validate(&tag)?;
    Ok(tag)
}

/// Decodes every `%XX`; invalid escapes stay as they are, invalid UTF-8 becomes U+FFFD (as
/// actix-router's full decode does for path parameters).
fn percent_decode_lossy(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(hi << 4 | lo);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_is_full_and_lossy() {
        assert_eq!(percent_decode_lossy("a%2Fb%25%2b"), "a/b%+");
        assert_eq!(percent_decode_lossy("%C3%A9t%C3%A9"), "\u{e9}t\u{e9}");
        assert_eq!(percent_decode_lossy("%FF%FE"), "\u{fffd}\u{fffd}");
        assert_eq!(percent_decode_lossy("%zz%4"), "%zz%4");
    }
}
