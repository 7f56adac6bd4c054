//! The hop from a server to a strict tag's owner: one HTTP request with the owner row's key,
//! bounded by half a lease, its answer checked (increasing, positive, at most what was asked).

use tokio::time::Instant;

use super::StrictService;
use crate::error::Error;
use crate::segment::BizTag;

/// The header a forwarded request carries: the owner row's key.
pub const PEER_KEY_HEADER: &str = "leafid-peer-key";

/// The owner's route for forwarded requests (not in the public API).
pub const FORWARD_ROUTE: &str = "/internal/v1/strict/{biz_tag}/ids";

impl StrictService {
    /// One hop to the owner at `address`.
    pub(super) async fn forward(
        &self,
        address: &str,
        key: &str,
        tag: &BizTag,
        count: usize,
        until: Instant,
    ) -> Result<Vec<i64>, Forward> {
        // At most half a lease: an owner that stopped answering (paused, cut off) must not
        // hold the request past the moment this server may take the tag over.
        let within = until
            .saturating_duration_since(Instant::now())
            .min(self.timing.lease / 2);
        if within.is_zero() {
            return Err(Forward::Retry);
        }
        let url = format!(
            "{}{}?count={count}",
            address.trim_end_matches('/'),
            FORWARD_ROUTE.replace("{biz_tag}", tag.as_str())
        );
        let request = self
            .http
            .post(url)
            .header(PEER_KEY_HEADER, key)
            .timeout(within)
            .send();
        // On the main runtime: the client's connections outlive any one HTTP worker.
        let answer = self
            .runtime
            .spawn(async move {
                let r = request.await?;
                let status = r.status();
                let body = r.json::<ForwardAnswer>().await;
                Ok::<_, reqwest::Error>((status, body))
            })
            .await;
        let Ok(Ok((status, body))) = answer else {
            return Err(Forward::Retry);
        };
        let Ok(body) = body else {
            return Err(Forward::Retry);
        };
        if status.is_success() {
            let ids = body.ids.unwrap_or_default();
            // The owner is a peer, but its answer is still checked: increasing, positive, at
            // most `count`, at least one.
            let fine = !ids.is_empty()
                && ids.len() <= count
                && ids[0] > 0
                && ids.windows(2).all(|w| w[0] < w[1]);
            return if fine { Ok(ids) } else { Err(Forward::Retry) };
        }
        // The owner's final answers are the caller's; any other is a reason to look again.
        Err(match body.code.as_deref() {
            Some("biz_tag_exhausted") => Forward::Final(Refusal::Exhausted),
            Some("unknown_biz_tag") => Forward::Final(Refusal::Unknown),
            Some("lossy_database") => {
                Forward::Final(Refusal::Lossy(body.message.unwrap_or_default()))
            }
            _ => Forward::Retry,
        })
    }
}

/// Why a hop gave no ids.
#[derive(Debug, Clone)]
pub(super) enum Forward {
    /// An answer to pass on to every caller of the hop.
    Final(Refusal),
    /// Look at the row again.
    Retry,
}

/// The owner's final answers, passed on to the callers.
#[derive(Debug, Clone)]
pub(super) enum Refusal {
    /// `biz_tag_exhausted`.
    Exhausted,
    /// `unknown_biz_tag`.
    Unknown,
    /// `lossy_database`, with the owner's message.
    Lossy(String),
}

impl Refusal {
    /// The caller's error for `tag`.
    pub(super) fn into_error(self, tag: &BizTag) -> Error {
        match self {
            Self::Exhausted => Error::BizTagExhausted,
            Self::Unknown => Error::unknown_tag(tag),
            Self::Lossy(message) => Error::LossyDatabase(message),
        }
    }
}

/// The owner's answer to a hop: its ids, or the error body's code.
#[derive(serde::Deserialize)]
struct ForwardAnswer {
    ids: Option<Vec<i64>>,
    code: Option<String>,
    message: Option<String>,
}
